// The policies of semantics §3.3 in the reference stepper: the chain-depth cap K and the
// periodic refresh N. A policy-forced miss must be exactly a miss of §3.
#include "drifting_layer.hpp"
#include "mac/ref/attention.hpp"
#include "mac/ref/stepper.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

using mac::MacParams;
using mac::ref::DecodeStepper;
using mac::ref::LayerData;
using mac::ref::PolicyMiss;
using mac::ref::StepResult;
using mac::test::same_state;
// The shape kT, kP, kHq, kHkv, kD and drifting_layer(seed): queries that drift slowly from P
// on, so nearly every head-step hits the step before (drifting_layer.hpp).
using namespace mac::test::drift;

namespace {

MacParams params(int64_t depth_cap = -1, int64_t refresh = 0, int64_t gen_min = 0) {
  MacParams p;
  p.ring = 64;
  p.tail = 16;
  p.sinks = 4;
  p.gen_min = gen_min;
  p.depth_cap = depth_cap;
  p.refresh = refresh;
  return p;
}

std::vector<StepResult<float>> run(const LayerData& l, const MacParams& p) {
  DecodeStepper<float> st(l, mac::test::default_scale(kD), p, mac::Variant::kSplit,
                          mac::StateStorage::kProduction);
  st.prefill(kP);
  std::vector<StepResult<float>> out;
  for (int64_t m = kP; m < kT; ++m) out.push_back(st.step(m));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(policies)

BOOST_AUTO_TEST_CASE(refresh_rule_staggers_the_heads) {
  // (m + ⌊h·N/Hq⌋) mod N = 0, written out for Hq = 6, N = 4: offsets 0, 0, 1, 2, 2, 3.
  const int64_t offsets[6] = {0, 0, 1, 2, 2, 3};
  for (int64_t h = 0; h < 6; ++h)
    for (int64_t m = 0; m < 40; ++m)
      BOOST_TEST(mac::refresh_due<int64_t>(m, h, 6, 4) == ((m + offsets[h]) % 4 == 0));
  // Every head refreshes exactly once per period, and N ≥ Hq spreads them one per step.
  for (int64_t N : {1, 5, 9, 64})
    for (int64_t h = 0; h < 9; ++h) {
      int due = 0;
      for (int64_t m = 1000; m < 1000 + N; ++m) due += mac::refresh_due<int64_t>(m, h, 9, N);
      BOOST_TEST(due == 1);
    }
  for (int64_t m = 0; m < 64; ++m) {
    int due = 0;
    for (int64_t h = 0; h < 9; ++h) due += mac::refresh_due<int64_t>(m, h, 9, 64);
    BOOST_TEST(due <= 1);
  }
  BOOST_TEST(!mac::refresh_due<int64_t>(0, 0, 9, 0));  // N = 0: off
  BOOST_TEST(mac::depth_capped<int64_t>(0, 0));
  BOOST_TEST(!mac::depth_capped<int64_t>(2, 3));
  BOOST_TEST(mac::depth_capped<int64_t>(3, 3));
  BOOST_TEST(!mac::depth_capped<int64_t>(1000000, -1));
}

BOOST_AUTO_TEST_CASE(depth_cap_zero_is_every_step_missing_bit_for_bit) {
  const auto l = drifting_layer(7);
  const auto free = run(l, params());
  const auto capped = run(l, params(/*depth_cap=*/0));
  // Forcing every step to miss: no position is eligible (gen_min past the last one).
  const auto missing = run(l, params(-1, 0, /*gen_min=*/kT));
  int64_t would_hit = 0;
  for (size_t s = 0; s < free.size(); ++s)
    for (size_t h = 0; h < kHq; ++h) {
      const auto& c = capped[s].heads[h];
      const auto& x = missing[s].heads[h];
      would_hit += free[s].heads[h].hit;
      BOOST_TEST(!c.hit);
      BOOST_TEST(c.keys_read == x.keys_read);
      BOOST_TEST(c.depth == 0);
      BOOST_TEST(c.wrote_entry == x.wrote_entry);
      BOOST_TEST(same_state(c.out, x.out));
      BOOST_TEST(same_state(c.entry, x.entry));
      // Where the match was below the threshold on a usable entry, the cap is named.
      if (c.match.below_threshold) BOOST_TEST((c.policy == PolicyMiss::kDepthCap));
    }
  // Not vacuous: without the cap the same layer hits nearly every step.
  BOOST_TEST(would_hit > static_cast<int64_t>(free.size() * kHq) * 9 / 10);
}

BOOST_AUTO_TEST_CASE(depth_cap_bounds_every_chain) {
  const auto l = drifting_layer(8);
  for (int64_t K : {1, 2, 5}) {
    const auto r = run(l, params(K));
    int64_t hits = 0, capped = 0;
    for (const auto& s : r)
      for (const auto& h : s.heads) {
        BOOST_TEST(h.depth <= K);  // a hit on depth ≤ K − 1 writes depth ≤ K
        hits += h.hit;
        if (h.policy == PolicyMiss::kDepthCap) {
          ++capped;
          BOOST_TEST(!h.hit);
          BOOST_TEST(h.depth == 0);
          BOOST_TEST(h.keys_read == s.position + 1);  // a miss reads every key
          BOOST_TEST(h.match.below_threshold);
        }
      }
    // Chains of one link per step: K hits then one capped miss, so about 1/(K + 1) are capped.
    BOOST_TEST(hits > 0);
    BOOST_TEST(capped > 0);
    const double share = static_cast<double>(capped) / static_cast<double>(hits + capped);
    BOOST_TEST(share > 0.5 / static_cast<double>(K + 1));
    BOOST_TEST(share < 2.0 / static_cast<double>(K + 1));
  }
}

BOOST_AUTO_TEST_CASE(forced_miss_writes_the_exact_entry_of_a_miss) {
  const auto l = drifting_layer(9);
  DecodeStepper<double> st(l, mac::test::default_scale(kD), params(1), mac::Variant::kSplit,
                           mac::StateStorage::kFull);
  st.prefill(kP);
  int checked = 0;
  for (int64_t m = kP; m < kT; ++m) {
    const auto r = st.step(m);
    for (int64_t h = 0; h < kHq; ++h) {
      const auto& hs = r.heads[static_cast<size_t>(h)];
      if (hs.policy != PolicyMiss::kDepthCap) continue;
      // entry(m) = attn(q_m, [Fe(E(m)), E(m))) and out = attn(q_m, [0, m]), as for any miss.
      const int64_t e = mac::prefix_end<int64_t>(m, 16), fe = mac::sink_end<int64_t>(4, e);
      const auto want = mac::ref::attend<double>(l, h / l.group_size(), l.q_post_at(m, h),
                                                 mac::test::default_scale(kD), fe, e);
      const auto full = mac::ref::attend<double>(l, h / l.group_size(), l.q_post_at(m, h),
                                                 mac::test::default_scale(kD), 0, m + 1);
      // FP64 merges of 2–3 exact pieces against one pass: a few ulps (2^-52 · few).
      BOOST_TEST((hs.entry.o - want.o).norm() <= 1e-13 * want.o.norm());
      BOOST_TEST((hs.out.o - full.o).norm() <= 1e-13 * full.o.norm());
      BOOST_TEST(st.ring().find(h, m)->depth == 0);
      ++checked;
    }
  }
  BOOST_TEST(checked > 10);
}

BOOST_AUTO_TEST_CASE(refresh_forces_the_due_heads_to_miss) {
  const auto l = drifting_layer(10);
  const int64_t N = 8;
  const auto free = run(l, params());
  const auto r = run(l, params(-1, N));
  int64_t refreshed = 0, hits = 0;
  int64_t first_due = kT;  // the first step at which any head refreshes
  for (int64_t m = kP; m < kT && first_due == kT; ++m)
    for (int64_t h = 0; h < kHq; ++h)
      if (mac::refresh_due<int64_t>(m, h, kHq, N)) first_due = m;
  for (size_t s = 0; s < r.size(); ++s)
    for (size_t h = 0; h < kHq; ++h) {
      const auto& hs = r[s].heads[h];
      const int64_t m = r[s].position;
      const bool due = mac::refresh_due<int64_t>(m, static_cast<int64_t>(h), kHq, N);
      if (due) BOOST_TEST(!hs.hit);
      if (due && hs.match.below_threshold) {
        BOOST_TEST((hs.policy == PolicyMiss::kRefresh));
        BOOST_TEST(hs.depth == 0);
        ++refreshed;
      }
      if (!due) BOOST_TEST((hs.policy == PolicyMiss::kNone));
      hits += hs.hit;
      // Before the first refresh the two runs are the same run.
      if (m < first_due) BOOST_TEST(same_state(hs.out, free[s].heads[h].out));
    }
  // Each head refreshes once per N steps: (kT − kP)/N of them, all would-be hits here.
  BOOST_TEST(refreshed >= kHq * ((kT - kP) / N) - kHq);
  BOOST_TEST(hits > 0);
}

BOOST_AUTO_TEST_CASE(bad_policy_values_are_named) {
  auto l = mac::test::random_layer(40, 2, 1, 64, 3);
  auto p = params(-2);
  BOOST_CHECK_EXCEPTION(
      DecodeStepper<float>(l, 0.125, p), mac::InputError, [](const mac::InputError& e) {
        return std::string(e.what()).find("depth_cap K = -2") != std::string::npos;
      });
  p = params(-1, -1);
  BOOST_CHECK_EXCEPTION(DecodeStepper<float>(l, 0.125, p), mac::InputError,
                        [](const mac::InputError& e) {
                          return std::string(e.what()).find("refresh N = -1") != std::string::npos;
                        });
}

BOOST_AUTO_TEST_SUITE_END()
