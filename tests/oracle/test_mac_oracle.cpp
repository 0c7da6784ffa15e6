// Tests of MacOracle: the MAC algebra of docs/semantics.md §3 for given decisions, in FP64.
#include "oracle_test_util.hpp"

#include <string>

using namespace mac;
using namespace mac::oracle;
using namespace mac::oracle::test;

namespace {

MacParams small_params(int64_t ring, int64_t tail, int64_t sinks) {
  MacParams p;
  p.ring = ring;
  p.tail = tail;
  p.sinks = sinks;
  p.gen_min = 0;
  return p;
}

std::vector<Decision> all_miss(int64_t hq, bool ready = true) {
  return std::vector<Decision>(hq, Decision{false, -1, ready});
}
std::vector<Decision> all_hit(int64_t hq, int64_t p) {
  return std::vector<Decision>(hq, Decision{true, p, true});
}

// Copies q_post(src, h) over q_post(dst, h): the queries are identical at both positions.
void copy_query(ref::LayerData& l, int64_t dst, int64_t src, int64_t h) {
  const float* s = l.q_post_at(src, h);
  std::copy(s, s + l.head_dim, const_cast<float*>(l.q_post_at(dst, h)));
}

double check_equals_full(const StepResult& r, const ref::LayerData& l, double scale, double tol,
                         const std::vector<int64_t>& heads) {
  const auto full = oracle::full_attention(l, scale, r.position);
  double worst = 0;
  for (int64_t h : heads) {
    const auto e = error_vs(r.heads[h].out, full[h]);
    const auto ex = error_vs(r.heads[h].exact, full[h]);
    BOOST_TEST(e.max() <= tol, "m " << r.position << " head " << h << ": out o_rel " << e.o_rel
                                    << " lse_rel " << e.lse_rel);
    BOOST_TEST(ex.max() <= tol,
               "m " << r.position << " head " << h << ": exact o_rel " << ex.o_rel);
    worst = std::max(worst, std::max(e.max(), ex.max()));
  }
  return worst;
}

template <typename F>
void check_throws_naming(F&& f, const std::string& what) {
  try {
    f();
    BOOST_ERROR("no InputError; expected one mentioning '" << what << "'");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find(what) != std::string::npos, "message: " << e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mac_oracle)

BOOST_AUTO_TEST_CASE(prefill_entries_are_exact_prefix_states) {
  const auto l = random_layer(1100, 4, 2, 64, 21);
  const auto prm = small_params(64, 16, 3);
  MacOracle orc(l, 0.125, prm, 1000);
  BOOST_TEST(orc.entry(0, 935) == nullptr);
  for (int64_t p : {936, 950, 999})
    for (int64_t h = 0; h < 4; ++h) {
      const State* e = orc.entry(h, p);
      BOOST_REQUIRE(e != nullptr);
      const int64_t ep = prefix_end(p, 16);
      const auto want = oracle::attend(l, h / 2, l.q_post_at(p, h), 0.125, sink_end(3, ep), ep);
      // Batched prefill cuts the keys into other work units: equal to rounding, not bitwise.
      BOOST_TEST(error_vs(*e, want).max() <= tol_tight(), "p " << p << " head " << h);
    }
}

BOOST_AUTO_TEST_CASE(every_miss_equals_full_attention) {
  const auto l = random_layer(1200, 4, 2, 64, 22);
  for (int64_t F : {0, 5}) {
    MacOracle orc(l, 0.125, small_params(64, 16, F), 1000);
    double worst = 0;
    for (int64_t m : {1000, 1001, 1100, 1199}) {
      const auto r = orc.step(m, all_miss(4));
      worst = std::max(worst, check_equals_full(r, l, 0.125, tol_merge(), {0, 1, 2, 3}));
      for (const auto& h : r.heads) {
        BOOST_TEST(h.keys_read == m + 1);
        BOOST_TEST(h.band_begin == sink_end(F, prefix_end(m, 16)));
        BOOST_TEST(h.wrote_entry);
      }
      BOOST_TEST(orc.entry(2, m) != nullptr);
    }
    BOOST_TEST_MESSAGE("all misses (F=" << F << ") vs full attention: worst " << worst);
  }
}

// A hit whose entry is the exact prefix for the current query: entry ⊕ band ⊕ sinks ⊕ tail
// partitions the keys, so the output is full attention.
BOOST_AUTO_TEST_CASE(hit_with_identical_query_equals_full_attention) {
  for (int64_t F : {0, 4}) {
    auto l = random_layer(1100, 4, 2, 64, 23);
    for (int64_t h = 0; h < 4; ++h) copy_query(l, 1000, 990, h);
    MacOracle orc(l, 0.125, small_params(64, 16, F), 1000);
    const auto r = orc.step(1000, all_hit(4, 990));
    const double worst = check_equals_full(r, l, 0.125, tol_merge(), {0, 1, 2, 3});
    for (const auto& h : r.heads) {
      BOOST_TEST(h.hit);
      BOOST_TEST(h.match_pos == 990);
      BOOST_TEST(h.band_begin == prefix_end(990, 16));
      BOOST_TEST(h.band_end == prefix_end(1000, 16));
      BOOST_TEST(h.keys_read == (1000 - 990) + 16 + F);
    }
    BOOST_TEST_MESSAGE("hit with identical query (F=" << F << ") vs full: worst " << worst);
  }
}

// Chain: 1000 hits 990 (prefill), 1010 hits 1000 (the entry written by the first step).
// Heads 0, 2 have identical queries along the chain (equal to full attention); head 1
// misses; head 3 hits with a different query, so its output must differ (non-vacuous).
BOOST_AUTO_TEST_CASE(chained_hits_with_identical_queries_equal_full_attention) {
  auto l = random_layer(1100, 4, 2, 64, 24);
  for (int64_t h : {0, 2}) {
    copy_query(l, 1000, 990, h);
    copy_query(l, 1010, 990, h);
  }
  MacOracle orc(l, 0.125, small_params(64, 16, 0), 1000);
  std::vector<Decision> d = all_hit(4, 990);
  d[1] = Decision{false, -1, true};
  const auto r1 = orc.step(1000, d);
  d = all_hit(4, 1000);
  d[1] = Decision{false, -1, true};
  const auto r2 = orc.step(1010, d);
  const double worst = std::max(check_equals_full(r1, l, 0.125, tol_merge(), {0, 1, 2}),
                                check_equals_full(r2, l, 0.125, tol_merge(), {0, 1, 2}));
  BOOST_TEST_MESSAGE("two-step chain vs full: worst " << worst);
  const auto e3 = error_vs(r2.heads[3].out, r2.heads[3].exact);
  BOOST_TEST(e3.o_rel > 1e-6, "head 3 reused a different query's prefix yet o_rel = " << e3.o_rel);
  // The second step really reused the first step's entry.
  const auto entry_1000 = r1.heads[3].entry;
  const auto band =
      oracle::attend(l, 1, l.q_post_at(1010, 3), 0.125, prefix_end(1000, 16), prefix_end(1010, 16));
  const auto want = ref::merge(entry_1000, band);
  BOOST_TEST(error_vs(r2.heads[3].entry, want).max() <= tol_tight());
}

// M = 8: position 1000 hits 992, which lives in the slot 1000 overwrites (read before write).
BOOST_AUTO_TEST_CASE(ring_wraparound_reads_before_write) {
  const auto l = random_layer(1100, 4, 2, 64, 25);
  MacOracle orc(l, 0.125, small_params(8, 16, 0), 1000);
  BOOST_TEST(orc.entry(0, 991) == nullptr);
  std::vector<State> old;
  for (int64_t h = 0; h < 4; ++h) old.push_back(*orc.entry(h, 992));
  const auto r = orc.step(1000, all_hit(4, 992));
  for (int64_t h = 0; h < 4; ++h) {
    const float* q = l.q_post_at(1000, h);
    const auto band = oracle::attend(l, h / 2, q, 0.125, prefix_end(992, 16), prefix_end(1000, 16));
    const auto tail = oracle::attend(l, h / 2, q, 0.125, prefix_end(1000, 16), 1001);
    const auto want = ref::merge(ref::merge(old[h], band), tail);
    BOOST_TEST(error_vs(r.heads[h].out, want).max() <= tol_tight());
    BOOST_TEST(orc.entry(h, 992) == nullptr);
    BOOST_REQUIRE(orc.entry(h, 1000) != nullptr);
    BOOST_TEST(error_vs(*orc.entry(h, 1000), ref::merge(old[h], band)).max() <= tol_tight());
  }
  // 992 is gone now: a hit on it at 1001 is refused (and it is no longer a candidate anyway).
  check_throws_naming([&] { orc.step(1001, all_hit(4, 992)); }, "head 0");
}

BOOST_AUTO_TEST_CASE(not_ready_writes_nothing) {
  const auto l = random_layer(1100, 4, 2, 64, 26);
  MacOracle orc(l, 0.125, small_params(64, 16, 0), 1000);
  const auto r = orc.step(1000, all_miss(4, /*ready=*/false));
  check_equals_full(r, l, 0.125, tol_merge(), {0, 1, 2, 3});
  for (int64_t h = 0; h < 4; ++h) {
    BOOST_TEST(!r.heads[h].wrote_entry);
    BOOST_TEST(orc.entry(h, 1000) == nullptr);
  }
  // …so a later hit on 1000 is invalid.
  check_throws_naming([&] { orc.step(1001, all_hit(4, 1000)); }, "does not hold");
}

BOOST_AUTO_TEST_CASE(zero_prefix_writes_empty_entry) {
  const auto l = random_layer(64, 4, 2, 64, 27);
  MacOracle orc(l, 0.125, small_params(64, 16, 0), 0);
  const auto r = orc.step(5, all_miss(4));  // E(5) = 0
  check_equals_full(r, l, 0.125, tol_merge(), {0, 1, 2, 3});
  for (int64_t h = 0; h < 4; ++h) {
    BOOST_REQUIRE(orc.entry(h, 5) != nullptr);
    BOOST_TEST(orc.entry(h, 5)->is_empty());
  }
  check_throws_naming([&] { orc.step(6, all_hit(4, 5)); }, "unusable");
}

BOOST_AUTO_TEST_CASE(invalid_decisions_throw_naming_head_and_position) {
  const auto l = random_layer(1100, 4, 2, 64, 28);
  const auto prm = small_params(64, 16, 0);
  auto hit_on_head2 = [](int64_t p, bool ready = true) {
    auto d = all_miss(4);
    d[2] = Decision{true, p, ready};
    return d;
  };
  {
    MacOracle orc(l, 0.125, prm, 1000);
    check_throws_naming([&] { orc.step(1000, hit_on_head2(1000)); },
                        "head 2 at position 1000");  // p = m
    check_throws_naming([&] { orc.step(1000, hit_on_head2(935)); },
                        "outside the candidates");  // p < m − M
    check_throws_naming([&] { orc.step(1000, hit_on_head2(-1)); }, "head 2");
    check_throws_naming([&] { orc.step(1000, hit_on_head2(990, false)); }, "not ready");
    check_throws_naming([&] { orc.step(1000, all_miss(3)); }, "3 decisions");
    check_throws_naming([&] { orc.step(999, all_miss(4)); }, "outside [P = 1000");
    check_throws_naming([&] { orc.step(1100, all_miss(4)); }, "m = 1100");
    orc.step(1005, all_miss(4));  // 1000…1004 never stepped
    check_throws_naming([&] { orc.step(1010, hit_on_head2(1002)); }, "does not hold");
    check_throws_naming([&] { orc.step(1005, all_miss(4)); }, "does not follow");
    BOOST_CHECK_NO_THROW(orc.step(1010, hit_on_head2(1005)));
  }
  {
    auto p = prm;
    p.gen_min = 2048;
    MacOracle orc(l, 0.125, p, 1000);
    check_throws_naming([&] { orc.step(1000, hit_on_head2(990)); }, "gen_min");
  }
  {
    MacOracle orc(l, 0.125, small_params(64, 16, 0), 10);  // prefill entries all have E(p) = 0
    check_throws_naming([&] { orc.step(10, hit_on_head2(5)); }, "unusable");
  }
  {
    MacOracle orc(l, 0.125, small_params(64, 16, 8), 20);  // E(12) = 0 < F: unusable with sinks
    check_throws_naming([&] { orc.step(20, hit_on_head2(12)); }, "unusable");
  }
  auto bad = prm;
  bad.ring = 0;
  BOOST_CHECK_THROW(MacOracle(l, 0.125, bad, 10), InputError);
  BOOST_CHECK_THROW(MacOracle(l, 0.125, prm, 1101), InputError);
  BOOST_CHECK_THROW(MacOracle(l, std::nan(""), prm, 10), InputError);
  auto nonbf16 = l;
  nonbf16.k[7] = 1.0f + 1e-6f;
  check_throws_naming([&] { MacOracle(nonbf16, 0.125, prm, 10); }, "/k");
}

// M far beyond the layer (mac-sim --ring 2147483647 once asked for Hq x M slots): the oracle
// keeps min(M, T) slots, which hold the same entries as a ring of exactly T.
BOOST_AUTO_TEST_CASE(ring_beyond_the_layer_holds_the_same_entries) {
  const auto l = random_layer(1100, 4, 2, 64, 25);
  MacOracle huge(l, 0.125, small_params(mac::kMaxTokens, 16, 0), 1000);
  MacOracle exact(l, 0.125, small_params(1100, 16, 0), 1000);
  for (int64_t p : {0, 500, 999}) {
    BOOST_REQUIRE(huge.entry(1, p) != nullptr);
    BOOST_TEST(huge.entry(1, p)->lse == exact.entry(1, p)->lse);  // the same arithmetic
  }
  const auto a = huge.step(1000, all_hit(4, 990)), b = exact.step(1000, all_hit(4, 990));
  for (size_t h = 0; h < a.heads.size(); ++h) BOOST_TEST(a.heads[h].out.lse == b.heads[h].out.lse);
  BOOST_TEST(huge.entry(1, 1000) != nullptr);
  BOOST_TEST(huge.entry(1, 1100) == nullptr);  // past the layer: never held
}

BOOST_AUTO_TEST_SUITE_END()
