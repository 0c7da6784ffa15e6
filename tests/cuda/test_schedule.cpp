// GPU tests of mac_cuda: the device-side schedule (work items of a step): the schedule kernel
// against the self-scheduled amend, the eligible rows' own cut apart from full attention's exact
// one, and the 64-key items of all-hit steps. Every case also meets the limits of check_stats
// (steps.hpp) against mac::ref.
#include <boost/test/unit_test.hpp>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(schedule)

BOOST_AUTO_TEST_CASE(schedule_kernel_path) {
  // The schedule kernel (ScheduleMode::kKernel, also what kAuto falls back to when the amend
  // kernel's tables do not fit) for the MAC engine, with K1 splitting its heads over blocks
  // (N = 3) and not (N = 24); the full-attention engine then schedules its own items, so the
  // ineligible rows' bit-identity compares the two ways of scheduling.
  for (int N : {3, 24}) {
    CaseSpec c;
    c.schedule = ScheduleMode::kKernel;
    c.F = 2;
    c.gen_min = 705;
    c.ready = {1, 0, 1};
    c.steps = 6;
    c.seed = 600 + N;
    if (N > 3) {
      c.G = 4;
      c.Hkv = 8;
      c.prompt.clear();
      for (int i = 0; i < N; ++i) c.prompt.push_back(700 + (i * 53) % 300);
    }
    const Stats s = run_case("schedule kernel", c, false);
    BOOST_TEST(s.bit_checked > 0);
    BOOST_TEST(s.hits > 0);
  }
}

BOOST_AUTO_TEST_CASE(eligible_rows_take_their_own_cut) {
  // A MAC step cuts its eligible rows by the eligible rule and its other rows by the exact
  // rule of full attention (work_items.hpp StepCuts): at D = 128 they differ for steps of
  // 3·W to 8·W 2048-key items. With the persistent grid capped at 2 blocks (W = 8 warps; test
  // field Tuning::amend_blocks), contexts of 8–13K are such a step: the exact cut takes
  // 2048-key items, the eligible one 1024. Row 2 is below gen_min: its groups take the exact
  // cut and stay bit-identical to full attention, whose engine runs under the same cap.
  // Eager and from a captured graph.
  for (int graph = 0; graph < 2; ++graph) {
    CaseSpec c;
    c.prompt = {10037, 13000, 8000};
    c.gen_min = 9000;
    c.F = 4;
    c.steps = 8;
    c.seed = 950 + graph;
    c.tuning.amend_blocks = 2;
    const Stats s = run_case("two cuts", c, graph != 0);
    BOOST_TEST(s.bit_checked > 0);
    BOOST_TEST(s.hits > 0);
    BOOST_TEST(s.two_cut_steps > 0);
    std::printf("[%s] two cuts: %ld of %d steps cut eligible rows apart from the exact cut\n",
                s.two_cut_steps > 0 ? "OK" : "FAIL", s.two_cut_steps, c.steps);
  }
}

BOOST_AUTO_TEST_CASE(all_hit_steps) {
  // Every query repeats an earlier one (lags 1..M, noise 0.25): most steps hit on every head,
  // and those take 64-key items (check_item_size), at every head dim, with both schedulers,
  // sinks, and from a captured graph.
  for (int variant = 0; variant < 4; ++variant) {
    CaseSpec c;
    c.repeat_prob = 1.0;
    c.F = 4;
    c.steps = 10;
    c.D = variant == 2 ? 256 : variant == 3 ? 64 : 128;
    c.page_size = variant == 3 ? 1 : 16;
    c.schedule = variant == 1 ? ScheduleMode::kKernel : ScheduleMode::kAuto;
    c.seed = 700 + variant;
    const Stats s = run_case("all-hit steps", c, variant == 0);
    BOOST_TEST(s.all_hit_steps >= 3);
  }
}

BOOST_AUTO_TEST_SUITE_END()
