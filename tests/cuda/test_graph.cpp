// GPU tests of mac_cuda: Captured graphs: one capture replayed for a chain of steps whose inputs
// change in device memory only. Every case also meets the limits of check_stats (steps.hpp)
// against mac::ref.
#include <boost/test/unit_test.hpp>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(graph)

BOOST_AUTO_TEST_CASE(graph_chain_70_replays_wraps_ring) {
  // One capture, 70 replays with positions, lengths and queries changing in device memory;
  // M = 64, so every ring slot is written again by the chain and six of them twice (the
  // ready rows' entries, all checked, outnumber their slots); page size 16 with partial last
  // pages. Captured with and without programmatic dependent launch
  // (EngineConfig::dependent_launch), and with the schedule kernel. Every step relies on the
  // combine of the step before to reset the amend kernel's item counter, which only a chain
  // of replays shows.
  for (int variant = 0; variant < 3; ++variant) {
    CaseSpec c;
    c.steps = 70;
    c.gen_min = 720;
    c.ready = {1, 1, 0};
    c.chunk = 128;
    c.seed = 400;
    c.pdl = variant != 1;
    c.schedule = variant == 2 ? ScheduleMode::kKernel : ScheduleMode::kAuto;
    const Stats s = run_case("graph chain", c, true);
    BOOST_TEST(s.hits > 0);
    BOOST_TEST(s.bit_checked > 0);
    // Two ready rows: more entries checked than their 2·M·Hq ring entries hold.
    BOOST_TEST(s.entries > 2L * c.M * c.G * c.Hkv);
  }
}

BOOST_AUTO_TEST_SUITE_END()
