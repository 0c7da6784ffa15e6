// GPU tests of mac_cuda: the amend kernel (band, sinks and tail, docs/semantics.md §3 steps 3 and
// 5): every head dim, page sizes that take the division and the shift paths, and items of 4096 keys
// cut with partial cells at both ends. Every case also meets the limits of check_stats (steps.hpp)
// against mac::ref.
#include <boost/test/unit_test.hpp>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(amend)

BOOST_AUTO_TEST_CASE(head_dims) {
  for (int D : {64, 256}) {
    for (int G : {2, 4, 16}) {
      CaseSpec c;
      c.D = D;
      c.G = G;
      c.Hkv = G > 8 ? 1 : 2;
      c.seed = 200 + D + G;
      c.page_size = D == 64 ? 1 : 16;
      run_case("head dims", c, false);
    }
  }
}

BOOST_AUTO_TEST_CASE(page_sizes) {
  // The amend kernel finds a key's page and slot by shifts at power-of-two page sizes and by
  // division otherwise: 12 and 24 take the division, 32 a shift other than 16's and 1's.
  for (int ps : {12, 24, 32}) {
    CaseSpec c;
    c.G = 4;
    c.Hkv = 2;
    c.page_size = ps;
    c.gen_min = 705;  // row 1 below it: its output bit-identical to full attention's
    c.seed = 400 + ps;
    const Stats s = run_case("page sizes", c, false);
    BOOST_TEST(s.bit_checked > 0);
  }
}

BOOST_AUTO_TEST_CASE(large_items) {
  // Items of 4096 keys, a fixed kv_chunk above every automatic size (2048): groups of 1–4
  // items, each range cut at multiples of 4096 with partial cells at both ends (contexts
  // 4100, 9037, 12300; F = 4 sinks). Row 0 starts below gen_min: bit-identical to full
  // attention with the same items.
  CaseSpec c;
  c.chunk = 4096;
  c.F = 4;
  c.prompt = {4100, 9037, 12300};
  c.gen_min = 4104;
  c.steps = 6;
  c.seed = 900;
  const Stats s = run_case("large items", c, false);
  BOOST_TEST(s.bit_checked > 0);
  BOOST_TEST(s.hits > 0);
}

BOOST_AUTO_TEST_SUITE_END()
