// GPU tests of mac_cuda: the combine (merge of the items' partial states, docs/semantics.md §3 step
// 5): the two-level merge of groups of more than 16 items, the 4- and 2-warp shares of many heads,
// and the partial states discarded from L2 once read. Every case also meets the limits of
// check_stats (steps.hpp) against mac::ref.
#include <boost/test/unit_test.hpp>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(combine)

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
    c.tuning.parts_discard = 0;
    off = run_steps(c, graph);
    c.tuning.parts_discard = 1;
    on = run_steps(c, graph);
    if (variant == 0) {
      CaseSpec p = c;
      p.tuning.parts_evict_last = 0;
      plain = run_steps(p, graph);
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
  // The switches are read (a value outside auto/0/1 is refused, naming the field).
  for (const char* name : {"tuning.parts_discard", "tuning.parts_evict_last"}) {
    std::unique_ptr<Engine> e;
    EngineConfig ec;
    ec.num_q_heads = 8;
    ec.num_kv_heads = 2;
    ec.head_dim = 128;
    (std::string(name) == "tuning.parts_discard" ? ec.tuning.parts_discard
                                                 : ec.tuning.parts_evict_last) = 2;
    const Status st = Engine::create(ec, &e);
    BOOST_TEST((st.code == StatusCode::kInvalidArgument), name);
    BOOST_TEST(st.message.find(name) != std::string::npos, name);
  }
}

BOOST_AUTO_TEST_SUITE_END()
