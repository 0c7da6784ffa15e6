// GPU tests of mac_cuda against mac::ref (DecodeStepper<double>, production storage): hit
// decisions identical, outputs and ring entries within 1e-2 relative L2 per head of the
// FP64 reference of the same decisions (max element error reported), ineligible rows
// bit-identical to full attention, a 64-step chain replayed from one captured graph, awkward
// sizes, all head dims and G ∈ {1, 2, 3, 4, 8, 12, 16}.
#include <cstdlib>

#include <boost/test/unit_test.hpp>

#include "harness.hpp"
#include "work_items.hpp"  // the all-hit item size rule's constants

using namespace mac::cuda;
using namespace mac::cuda::test;

namespace {

void check_stats(const Stats& s) {
  BOOST_TEST(s.decision_mismatch == 0);
  BOOST_TEST(s.max_rel_l2 <= 1e-2);
  BOOST_TEST(s.max_lse <= 1e-3);
  BOOST_TEST(s.max_entry_rel_l2 <= 1e-2);
  BOOST_TEST(s.max_entry_lse <= 1e-3);
  BOOST_TEST(s.bit_mismatch == 0);
  BOOST_TEST(s.item_size_mismatch == 0);
}

// The step's item size (Engine::last_chunk) against the reference's decisions: with the size
// left open, a step of at most kFineMaxGroups (128) groups (N·Hkv) in which every head hit
// takes kFineC = 64-key items for its eligible rows (work_items.hpp, fine_cut: the cases'
// rings, tails and sinks are far below its 1024-key limit) and any other step a size of 256
// or more; a fixed size is kept by every step. Steps whose eligible rows take another size
// than the exact cut of full attention (not the 64-key one) are counted.
void check_item_size(Harness& hx, const CaseSpec& c, void* stream, Stats& st) {
  namespace wi = mac::cuda::detail;
  int chunk = 0;
  MAC_CHECK(hx.engine().last_chunk(&chunk, stream));
  const bool fine = c.chunk == 0 && hx.last_all_hit() && hx.batch() * c.Hkv <= wi::kFineMaxGroups;
  if (c.chunk > 0 ? chunk != c.chunk : (chunk == wi::kFineC) != fine) {
    ++st.item_size_mismatch;
    std::printf("[FAIL] item size %d in a step with all-hit %d, %d groups\n", chunk,
                hx.last_all_hit() ? 1 : 0, hx.batch() * c.Hkv);
  }
  // The full-attention engine's item size of the same step is the exact cut, which the MAC
  // step's rows that are not eligible take (their bits are compared in check_step).
  int exact = 0;
  MAC_CHECK(hx.full_engine().last_chunk(&exact, stream));
  if (exact != chunk && chunk != wi::kFineC) ++st.two_cut_steps;
}

/*! \brief Sets an environment variable for the engines created in its scope (the engines'
 *  experiment and test switches), then restores it. */
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    setenv(n, v, 1);
  }
  ~ScopedEnv() { had ? setenv(name.c_str(), old.c_str(), 1) : unsetenv(name.c_str()); }
};

Stats run_steps(const CaseSpec& c, bool graph) {
  Harness hx(c);
  // Every case's tables fit: ScheduleMode::kAuto must resolve to the self-scheduled amend.
  const bool self = c.schedule == ScheduleMode::kAuto;
  BOOST_TEST(hx.engine().self_scheduled() == self);
  BOOST_TEST(hx.full_engine().self_scheduled() == !self);
  hx.prefill();
  Stats st;
  void* stream = nullptr;
  MAC_CHECK(stream_create(&stream));
  for (int s = 0; s < c.steps; ++s) {
    hx.upload_step();
    if (graph) {
      if (s == 0) MAC_CHECK(hx.engine().capture(StepKind::kMac, hx.params(), stream));
      MAC_CHECK(hx.engine().replay(stream));
    } else {
      MAC_CHECK(hx.engine().mac_step(hx.params(), stream));
    }
    MAC_CHECK(stream_synchronize(stream));
    hx.check_step(st);
    check_item_size(hx, c, stream, st);
  }
  int flags = -1;
  MAC_CHECK(hx.engine().read_error_flags(&flags, true, stream));
  BOOST_TEST(flags == 0);
  MAC_CHECK(stream_destroy(stream));
  return st;
}

/*! \brief Runs a case (run_steps), prints its line and checks the statistics every case
 *  must meet (check_stats); returns them for the case's own checks. */
Stats run_case(const char* what, const CaseSpec& c, bool graph) {
  const Stats s = run_steps(c, graph);
  report(what, c, s);
  check_stats(s);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mac_cuda)

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

BOOST_AUTO_TEST_CASE(eligible_rows_take_their_own_cut) {
  // A MAC step cuts its eligible rows by the eligible rule and its other rows by the exact
  // rule of full attention (work_items.hpp StepCuts): at D = 128 they differ for steps of
  // 3·W to 8·W 2048-key items. With the persistent grid capped at 2 blocks (W = 8 warps; test
  // switch MAC_CUDA_AMEND_BLOCKS), contexts of 8–13K are such a step: the exact cut takes
  // 2048-key items, the eligible one 1024. Row 2 is below gen_min: its groups take the exact
  // cut and stay bit-identical to full attention, whose engine runs under the same cap.
  // Eager and from a captured graph.
  ScopedEnv grid("MAC_CUDA_AMEND_BLOCKS", "2");
  for (int graph = 0; graph < 2; ++graph) {
    CaseSpec c;
    c.prompt = {10037, 13000, 8000};
    c.gen_min = 9000;
    c.F = 4;
    c.steps = 8;
    c.seed = 950 + graph;
    const Stats s = run_case("two cuts", c, graph != 0);
    BOOST_TEST(s.bit_checked > 0);
    BOOST_TEST(s.hits > 0);
    BOOST_TEST(s.two_cut_steps > 0);
    std::printf("[%s] two cuts: %ld of %d steps cut eligible rows apart from the exact cut\n",
                s.two_cut_steps > 0 ? "OK" : "FAIL", s.two_cut_steps, c.steps);
  }
}

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
}

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

BOOST_AUTO_TEST_CASE(small_items_two_level_combine) {
  // The combine splits each head's merge over 16 warps when N·Hq ≤ 64 and D ≤ 128, and
  // merges their 16 shares in two levels when a group has more than 16 items. The other
  // cases' groups have at most 13 items (one level); 16-key items give these 44–65 (F = 4
  // sinks, contexts 700–1037, row 1 below gen_min: its output bit-identical to full
  // attention's, which takes the same levels). D = 64 and 128, eager and from a graph.
  for (int D : {64, 128}) {
    CaseSpec c;
    c.D = D;
    c.chunk = 16;
    c.F = 4;
    c.gen_min = 705;
    c.steps = 6;
    c.seed = 1000 + D;
    const Stats s = run_case("two-level combine", c, D == 128);
    BOOST_TEST(s.bit_checked > 0);
    BOOST_TEST(s.hits > 0);
  }
}

BOOST_AUTO_TEST_CASE(many_heads_combine_shares) {
  // The combine splits each head's merge over 16, 8, 4 or 2 warps by N·Hq (≤ 64 at D ≤ 128,
  // ≤ 512, ≤ 1024, more): 24 and 40 requests of Hq = 32 take the 4- and 2-warp kernels the
  // other cases (N·Hq ≤ 512) never reach. Rows below gen_min check ineligible bit-identity
  // there too.
  for (int N : {24, 40}) {
    CaseSpec c;
    c.G = 4;
    c.Hkv = 8;
    c.prompt.clear();
    for (int i = 0; i < N; ++i) c.prompt.push_back(64 + (i * 37) % 200);
    c.gen_min = 150;
    c.steps = 3;
    c.seed = 500 + N;
    const Stats s = run_case("many heads", c, false);
    BOOST_TEST(s.bit_checked > 0);
    BOOST_TEST(s.hits > 0);
  }
}

BOOST_AUTO_TEST_CASE(graph_chain_64_steps) {
  // One capture, 70 replays with positions, lengths and queries changing in device memory;
  // M = 64 so the ring wraps around more than once; page size 16 with partial last pages.
  // Captured with and without programmatic dependent launch (EngineConfig::dependent_launch).
  // Also with the schedule kernel. Every step relies on the combine of the step before to
  // reset the amend kernel's item counter, which only a chain of replays shows.
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

BOOST_AUTO_TEST_CASE(partial_states_discarded) {
  // The combine drops the partial states' L2 lines once it has read them on large steps only
  // (work_items.hpp parts_discard_auto; no case here is that large). Forced on through the
  // engines' environment switch: a graph chain, in which every step's amend kernel rewrites
  // the rows the step before discarded, and D = 64 and 256 (rows of 256 and 1024 bytes). A
  // line read after its discard and before its rewrite would hold stale or undefined
  // partials; every output and LSE bit must equal the same run without discards.
  for (int variant = 0; variant < 3; ++variant) {
    CaseSpec c;
    c.steps = variant == 0 ? 40 : 12;
    c.gen_min = variant == 0 ? 720 : 0;
    c.ready = {1, 1, 0};
    c.chunk = variant == 0 ? 128 : 0;
    c.D = variant == 1 ? 64 : variant == 2 ? 256 : 128;
    c.page_size = variant == 1 ? 1 : 16;
    c.seed = 800 + variant;
    const bool graph = variant == 0;
    // Discarding steps also store the partials evict_last and stream K/V evict_first
    // (parts_dropped, kv_evict_first_step); `plain` discards with plain stores.
    Stats off, on, plain;
    {
      ScopedEnv e("MAC_CUDA_PARTS_DISCARD", "0");
      off = run_steps(c, graph);
    }
    {
      ScopedEnv e("MAC_CUDA_PARTS_DISCARD", "1");
      on = run_steps(c, graph);
    }
    if (variant == 0) {
      ScopedEnv e("MAC_CUDA_PARTS_DISCARD", "1"), e2("MAC_CUDA_PARTS_EVICT_LAST", "0");
      plain = run_steps(c, graph);
      BOOST_TEST(plain.out_hash == off.out_hash);
    }
    report("partials discarded", c, on);
    check_stats(on);
    BOOST_TEST(on.out_hash == off.out_hash);
    std::printf("[%s] partials discarded vs kept: output and LSE hash %016llx vs %016llx\n",
                on.out_hash == off.out_hash ? "OK" : "FAIL",
                static_cast<unsigned long long>(on.out_hash),
                static_cast<unsigned long long>(off.out_hash));
  }
  // The switches are read (a value outside auto/0/1 is refused, naming it).
  for (const char* name : {"MAC_CUDA_PARTS_DISCARD", "MAC_CUDA_PARTS_EVICT_LAST"}) {
    ScopedEnv bad(name, "2");
    std::unique_ptr<Engine> e;
    EngineConfig ec;
    ec.num_q_heads = 8;
    ec.num_kv_heads = 2;
    ec.head_dim = 128;
    const Status st = Engine::create(ec, &e);
    BOOST_TEST((st.code == StatusCode::kInvalidArgument), name);
    BOOST_TEST(st.message.find(name) != std::string::npos, name);
  }
}

BOOST_AUTO_TEST_CASE(refusals) {
  std::unique_ptr<Engine> e;
  EngineConfig ec;
  ec.num_q_heads = 8;
  ec.num_kv_heads = 2;
  ec.head_dim = 96;
  BOOST_TEST((Engine::create(ec, &e).code == StatusCode::kUnsupported));
  ec.head_dim = 128;
  ec.num_q_heads = 34;
  ec.num_kv_heads = 2;
  BOOST_TEST((Engine::create(ec, &e).code == StatusCode::kUnsupported));  // G = 17
  ec.num_q_heads = 8;
  ec.max_context = kMaxContext + 1;
  BOOST_TEST((Engine::create(ec, &e).code == StatusCode::kContextTooLong));
  // A kv_len beyond max_context on the device: NaN output, error flag, nothing written.
  CaseSpec c;
  c.prompt = {300, 200};
  c.steps = 1;
  Harness hx(c);
  hx.prefill();
  hx.upload_step();
  DecodeParams p = hx.params();
  std::vector<int32_t> len = {300 + 1, 1 << 20};
  MAC_CHECK(copy_to_device(const_cast<int32_t*>(p.kv_len), len.data(), 8));
  MAC_CHECK(hx.engine().mac_step(p, nullptr));
  int flags = 0;
  MAC_CHECK(hx.engine().read_error_flags(&flags, true, nullptr));
  BOOST_TEST((flags & 1) == 1);
  // A page id outside the pool: clamped (no out-of-bounds read) and flagged.
  std::vector<int32_t> bad = {-5, 1 << 30};
  MAC_CHECK(copy_to_device(const_cast<int32_t*>(p.page_table), bad.data(), 4));
  MAC_CHECK(
      copy_to_device(const_cast<int32_t*>(p.page_table) + p.max_pages_per_row, bad.data() + 1, 4));
  len = {300 + 1, 200 + 1};
  MAC_CHECK(copy_to_device(const_cast<int32_t*>(p.kv_len), len.data(), 8));
  MAC_CHECK(hx.engine().mac_step(p, nullptr));
  int flags2 = 0;
  MAC_CHECK(hx.engine().read_error_flags(&flags2, true, nullptr));
  BOOST_TEST((flags2 & 4) == 4);
  std::printf(
      "[OK] refusals: unsupported D/G and max_context refused; device flags %d for kv_len 2^20, %d "
      "for bad page ids\n",
      flags, flags2);
}

BOOST_AUTO_TEST_SUITE_END()
