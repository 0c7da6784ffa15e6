// GPU tests of mac_cuda: K3, the ring write (docs/semantics.md §3 step 4, §3.2): gated by readiness
// (a not- ready row writes nothing), written by rows below gen_min, with sinks, on the side stream.
// Every case also meets the limits of check_stats (steps.hpp) against mac::ref.
#include <boost/test/unit_test.hpp>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(cache_write)

BOOST_AUTO_TEST_CASE(sinks_gen_min_readiness_side_stream) {
  // Row 1 starts below gen_min (ineligible, still writes entries); row 2 is never ready
  // (epoch mismatch: exact and no writes); sinks F = 4; K3 on the side stream.
  CaseSpec c;
  c.F = 4;
  c.gen_min = 705;
  c.ready = {1, 1, 0};
  c.steps = 12;
  c.k3 = K3Mode::kSideStream;
  c.seed = 300;
  const Stats s = run_case("sinks/gen_min/ready/side-stream K3", c, false);
  BOOST_TEST(s.bit_checked > 0);
  BOOST_TEST(s.unready_checked > 0);  // row 2's ring slots were compared (check_stats: unchanged)
}

BOOST_AUTO_TEST_SUITE_END()
