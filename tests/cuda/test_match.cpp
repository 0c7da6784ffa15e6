// GPU tests of mac_cuda: K1 match (docs/semantics.md §3 step 2) at every group size up to
// kMaxGroup: hit decisions and matched positions identical to the reference, at G ∈ {1, 2, 3, 4, 8,
// 12, 16}. Every case also meets the limits of check_stats (steps.hpp) against mac::ref.
#include <boost/test/unit_test.hpp>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(match)

BOOST_AUTO_TEST_CASE(group_sizes_d128) {
  // Up to the largest group (16 heads: every row of the MMA's 16 is a query head).
  for (int G : {1, 2, 3, 4, 8, 12, 16}) {
    CaseSpec c;
    c.G = G;
    c.Hkv = G >= 8 ? 1 : 2;
    c.seed = 100 + G;
    const Stats s = run_case("group sizes", c, false);
    BOOST_TEST(s.hits > 0);
  }
}

BOOST_AUTO_TEST_SUITE_END()
