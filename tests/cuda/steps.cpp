#include "steps.hpp"

#include <cstdlib>

#include <boost/test/unit_test.hpp>

#include "work_items.hpp"  // the all-hit item size rule's constants

namespace mac::cuda::test {
namespace {

// The step's item size (Engine::last_chunk) against the reference's decisions: with the size
// left open, a step of at most kFineMaxGroups (128) groups (N·Hkv) in which every head hit
// takes kFineC = 64-key items for its eligible rows (work_items.hpp, fine_cut: the cases'
// rings, tails and sinks are far below its 1024-key limit) and any other step a size of 256
// or more; a fixed size is kept by every step. Steps whose eligible rows take another size
// than the exact cut of full attention (not the 64-key one) are counted.
void check_item_size(Harness& hx, const CaseSpec& c, Stats& st) {
  namespace wi = mac::cuda::detail;
  int chunk = 0;
  MAC_CHECK(hx.engine().last_chunk(&chunk, hx.stream()));
  const bool fine = c.chunk == 0 && hx.last_all_hit() && hx.batch() * c.Hkv <= wi::kFineMaxGroups;
  if (c.chunk > 0 ? chunk != c.chunk : (chunk == wi::kFineC) != fine) {
    ++st.item_size_mismatch;
    std::printf("[FAIL] item size %d in a step with all-hit %d, %d groups\n", chunk,
                hx.last_all_hit() ? 1 : 0, hx.batch() * c.Hkv);
  }
  // The full-attention engine's item size of the same step is the exact cut, which the MAC
  // step's rows that are not eligible take (their bits are compared in check_step).
  int exact = 0;
  MAC_CHECK(hx.full_engine().last_chunk(&exact, hx.stream()));
  if (exact != chunk && chunk != wi::kFineC) ++st.two_cut_steps;
}

}  // namespace

void check_stats(const Stats& s) {
  const auto tol = verify::Tolerances::gpu();
  BOOST_TEST(s.decision_mismatch == 0);
  BOOST_TEST(s.max_rel_l2 <= tol.out_rel_l2);
  BOOST_TEST(s.max_lse <= tol.lse);  // absolute, see stats_ok
  BOOST_TEST(s.max_entry_rel_l2 <= tol.entry_rel_l2);
  BOOST_TEST(s.max_entry_lse <= tol.entry_lse);
  BOOST_TEST(s.bit_mismatch == 0);
  BOOST_TEST(s.item_size_mismatch == 0);
  BOOST_TEST(s.unready_writes == 0);  // K3 is gated by readiness: no ring write
}

AmendVariant suite_amend() {
  static const AmendVariant variant = [] {
    const auto& suite = boost::unit_test::framework::master_test_suite();
    for (int i = 1; i < suite.argc; ++i) {
      const std::string arg = suite.argv[i];
      if (arg != "--amend") continue;
      const std::string v = i + 1 < suite.argc ? suite.argv[i + 1] : "";
      if (v == "default") return AmendVariant::kDefault;
      if (v == "cpasync") return AmendVariant::kCpAsync;
      if (v == "bulk") return AmendVariant::kBulk;
      std::fprintf(stderr, "test_cuda: --amend '%s' (expected default, cpasync or bulk)\n",
                   v.c_str());
      std::exit(2);
    }
    return AmendVariant::kDefault;
  }();
  return variant;
}

Stats run_steps(const CaseSpec& c, bool graph) {
  Harness hx(c);
  // Every case's tables fit: ScheduleMode::kAuto must resolve to the self-scheduled amend.
  const bool self = c.schedule == ScheduleMode::kAuto;
  BOOST_TEST(hx.engine().self_scheduled() == self);
  BOOST_TEST(hx.full_engine().self_scheduled() == !self);
  hx.prefill();
  Stats st;
  for (int s = 0; s < c.steps; ++s) {
    hx.upload_step();
    hx.step(graph);
    hx.check_step(st);
    check_item_size(hx, c, st);
  }
  int flags = -1;
  MAC_CHECK(hx.engine().read_error_flags(&flags, true, hx.stream()));
  BOOST_TEST(flags == 0);
  return st;
}

Stats run_case(const char* what, const CaseSpec& c, bool graph) {
  const Stats s = run_steps(c, graph);
  report(what, c, s);
  check_stats(s);
  return s;
}

RingPositions::RingPositions(const DecodeParams& p, int num_q_heads, int head_dim, void* stream)
    : kv_len_(p.batch), slot_(p.batch), saved_(p.batch) {
  MAC_CHECK(copy_to_host(kv_len_.data(), p.kv_len, 4 * p.batch, stream));
  MAC_CHECK(copy_to_host(slot_.data(), p.slot, 4 * p.batch, stream));
  MAC_CHECK(stream_synchronize(stream));
  for (int i = 0; i < p.batch; ++i) {
    MAC_CHECK(saved_[i].allocate(1, num_q_heads, head_dim));
    MAC_CHECK(saved_[i].save(p, slot_[i], 1, kv_len_[i] - 1, stream));
  }
}

void RingPositions::restore(const DecodeParams& p, void* stream) {
  for (size_t i = 0; i < saved_.size(); ++i)
    MAC_CHECK(saved_[i].restore(p, slot_[i], 1, kv_len_[i] - 1, stream));
}

}  // namespace mac::cuda::test
