#include "mac/ref/attention.hpp"
#include "mac/ref/stepper.hpp"
#include "test_layers.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using mac::MacParams;
using mac::ref::AttnState;
using mac::ref::DecodeStepper;
using mac::ref::LayerData;

namespace {

double rel_l2(const mac::ref::Vec<double>& a, const mac::ref::Vec<double>& b) {
  return (a - b).norm() / b.norm();
}

AttnState<double> full(const LayerData& l, int64_t h, int64_t m) {
  return mac::ref::attend<double>(l, h / l.group_size(), l.q_post_at(m, h),
                                  mac::test::default_scale(l.head_dim), 0, m + 1);
}

MacParams small_params(int64_t ring, int64_t tail, int64_t sinks = 0, double tau = 0.45) {
  MacParams p;
  p.ring = ring;
  p.tail = tail;
  p.sinks = sinks;
  p.tau = tau;
  p.gen_min = 0;
  return p;
}

// Copies q_pre(src) onto q_pre(dst) for head h, so that dst matches src at distance 0.
void plant_repeat(LayerData& l, int64_t dst, int64_t src, int64_t h) {
  std::vector<float> q(l.q_pre_at(src, h), l.q_pre_at(src, h) + l.head_dim);
  mac::test::set_q_pre(l, dst, h, q.data());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(decode_stepper)

BOOST_AUTO_TEST_CASE(every_miss_equals_full_attention_fp64) {
  // Random queries are √(2D) apart: with τ = 0.45 nothing hits.
  auto l = mac::test::random_layer(300, 4, 2, 64, 31);
  DecodeStepper<double> st(l, mac::test::default_scale(64), small_params(64, 16, 4),
                           mac::Variant::kSplit, mac::StateStorage::kFull);
  st.prefill(200);
  for (int64_t m = 200; m < 300; ++m) {
    const auto r = st.step(m);
    for (int64_t h = 0; h < 4; ++h) {
      const auto& hs = r.heads[static_cast<size_t>(h)];
      BOOST_TEST_REQUIRE(!hs.hit);
      BOOST_TEST(hs.keys_read == m + 1);
      const auto f = full(l, h, m);
      BOOST_TEST(rel_l2(hs.out.o, f.o) < 1e-12);
      BOOST_TEST(std::abs(hs.out.lse - f.lse) < 1e-12 * std::abs(f.lse) + 1e-13);
    }
  }
}

BOOST_AUTO_TEST_CASE(hit_with_identical_query_equals_full_attention) {
  // When the matched query is the same vector at the same position offset... the reused
  // prefix was computed with q_post(p); make q_post(m) == q_post(p) so reuse is exact.
  auto l = mac::test::random_layer(200, 2, 1, 64, 32);
  const int64_t p = 150, m = 160;
  for (int64_t h = 0; h < 2; ++h) {
    plant_repeat(l, m, p, h);
    // identical post-RoPE query too (RoPE differs by position; override q_post directly)
    std::copy(l.q_post_at(p, h), l.q_post_at(p, h) + 64, l.q_post.begin() + (m * 2 + h) * 64);
  }
  DecodeStepper<double> st(l, mac::test::default_scale(64), small_params(32, 8),
                           mac::Variant::kSplit, mac::StateStorage::kFull);
  st.prefill(m);
  const auto r = st.step(m);
  for (int64_t h = 0; h < 2; ++h) {
    const auto& hs = r.heads[static_cast<size_t>(h)];
    BOOST_TEST_REQUIRE(hs.hit);
    BOOST_TEST(hs.match_pos == p);
    BOOST_TEST(hs.match.d2 == 0.0f);
    BOOST_TEST(hs.band_begin == mac::prefix_end(p, 8));
    BOOST_TEST(hs.band_end == mac::prefix_end(m, 8));
    BOOST_TEST(hs.keys_read == (m - p) + 8);
    const auto f = full(l, h, m);
    BOOST_TEST(rel_l2(hs.out.o, f.o) < 1e-12);
    BOOST_TEST(std::abs(hs.out.lse - f.lse) < 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(split_and_downdate_agree_in_fp64) {
  auto l = mac::test::random_layer(400, 4, 2, 64, 33);
  // Plant a chain of repeats so many steps hit.
  for (int64_t m = 250; m < 400; ++m)
    for (int64_t h = 0; h < 4; ++h) plant_repeat(l, m, m - 1 - (m + h) % 5, h);
  for (auto storage : {mac::StateStorage::kFull}) {
    DecodeStepper<double> a(l, 0.125, small_params(64, 16, 4), mac::Variant::kSplit, storage);
    DecodeStepper<double> b(l, 0.125, small_params(64, 16, 4), mac::Variant::kDowndate, storage);
    a.prefill(250);
    b.prefill(250, mac::PrefillMode::kDowndate);
    int hits = 0;
    for (int64_t m = 250; m < 400; ++m) {
      const auto ra = a.step(m), rb = b.step(m);
      for (size_t h = 0; h < 4; ++h) {
        BOOST_TEST_REQUIRE(ra.heads[h].hit == rb.heads[h].hit);
        hits += ra.heads[h].hit;
        BOOST_TEST(rel_l2(ra.heads[h].out.o, rb.heads[h].out.o) < 1e-10);
        BOOST_TEST(std::abs(ra.heads[h].out.lse - rb.heads[h].out.lse) < 1e-10);
        const auto* ea = a.ring().find(static_cast<int64_t>(h), m);
        const auto* eb = b.ring().find(static_cast<int64_t>(h), m);
        BOOST_TEST_REQUIRE((ea && eb));
        BOOST_TEST(std::abs(ea->state.lse - eb->state.lse) < 1e-9);
      }
    }
    BOOST_TEST(hits > 500);
  }
}

BOOST_AUTO_TEST_CASE(prefill_direct_and_downdate_agree) {
  auto l = mac::test::random_layer(120, 2, 1, 64, 34);
  DecodeStepper<double> a(l, 0.125, small_params(64, 16, 8), mac::Variant::kSplit,
                          mac::StateStorage::kFull);
  DecodeStepper<double> b(l, 0.125, small_params(64, 16, 8), mac::Variant::kSplit,
                          mac::StateStorage::kFull);
  a.prefill(120, mac::PrefillMode::kDirect);
  b.prefill(120, mac::PrefillMode::kDowndate);
  for (int64_t p = 56; p < 120; ++p) {
    const auto *ea = a.ring().find(0, p), *eb = b.ring().find(0, p);
    BOOST_TEST_REQUIRE((ea && eb));
    BOOST_TEST(ea->state.is_empty() == eb->state.is_empty());
    if (!ea->state.is_empty()) BOOST_TEST(rel_l2(ea->state.o, eb->state.o) < 1e-9);
  }
  BOOST_TEST(a.ring().find(0, 55) == nullptr);  // only the last M prompt positions
}

BOOST_AUTO_TEST_CASE(ring_wraparound_and_read_before_write) {
  const int64_t M = 8;
  auto l = mac::test::random_layer(80, 1, 1, 64, 35);
  // At m = 40 plant a repeat of position 32 = m − M: the slot being overwritten.
  plant_repeat(l, 40, 32, 0);
  // At m = 50 plant a repeat of position 41 = m − M − 1: no longer a candidate.
  plant_repeat(l, 50, 41, 0);
  DecodeStepper<double> st(l, 0.125, small_params(M, 4), mac::Variant::kSplit,
                           mac::StateStorage::kFull);
  st.prefill(20);
  for (int64_t m = 20; m < 60; ++m) {
    const auto r = st.step(m);
    const auto& hs = r.heads[0];
    if (m == 40) {
      BOOST_TEST(hs.hit);
      BOOST_TEST(hs.match_pos == 32);
    } else if (m == 50) {
      BOOST_TEST(!hs.hit);
      BOOST_TEST(hs.match.best_pos >= 42);
    }
    BOOST_TEST(st.ring().slot(0, m).pos == m);  // slot m mod M now holds m
    BOOST_TEST(st.ring().find(0, m - M) == nullptr);
  }
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_older_position) {
  auto l = mac::test::random_layer(100, 1, 1, 64, 36);
  plant_repeat(l, 70, 60, 0);
  plant_repeat(l, 80, 60, 0);  // 60 and 70 both at distance 0 from 80
  DecodeStepper<double> st(l, 0.125, small_params(64, 4), mac::Variant::kSplit,
                           mac::StateStorage::kFull);
  st.prefill(80);
  const auto r = st.step(80);
  BOOST_TEST(r.heads[0].hit);
  BOOST_TEST(r.heads[0].match_pos == 60);
}

BOOST_AUTO_TEST_CASE(distance_equal_to_threshold_is_a_miss) {
  // D = 64, τ = 0.5 → thr = 32 exactly. q(m) = q(p) + e over 32 dims → d2 = 32: miss;
  // over 31 dims → d2 = 31: hit.
  for (int ones : {32, 31}) {
    auto l = mac::test::random_layer(100, 1, 1, 64, 37);
    std::vector<float> q(l.q_pre_at(60, 0), l.q_pre_at(60, 0) + 64);
    for (int i = 0; i < 64; ++i)
      q[static_cast<size_t>(i)] = static_cast<float>(std::floor(q[static_cast<size_t>(i)]));
    mac::test::set_q_pre(l, 60, 0, q.data());
    for (int i = 0; i < ones; ++i) q[static_cast<size_t>(i)] += 1.0f;
    mac::test::set_q_pre(l, 90, 0, q.data());
    DecodeStepper<double> st(l, 0.125, small_params(64, 4, 0, 0.5), mac::Variant::kSplit,
                             mac::StateStorage::kFull);
    st.prefill(90);
    const auto r = st.step(90);
    BOOST_TEST(r.heads[0].match.best_pos == 60);
    BOOST_TEST(r.heads[0].match.d2 == static_cast<float>(ones));
    BOOST_TEST(r.heads[0].hit == (ones == 31));
  }
}

BOOST_AUTO_TEST_CASE(front_sink_demotion_without_second_best) {
  // r = 16, F = 64: entry of p has E(p) = p − 15 < F for p < 79, so it is empty and
  // unusable. The nearest candidate is such a p; a second, valid repeat farther away
  // must not be used: argmin first, validity second.
  auto l = mac::test::random_layer(200, 1, 1, 64, 38);
  plant_repeat(l, 150, 70, 0);  // exact repeat of an unusable entry (E(70) = 55 < 64)
  std::vector<float> q(l.q_pre_at(70, 0), l.q_pre_at(70, 0) + 64);
  q[0] += 2.0f;  // a valid entry (p = 120) at distance 4: below thr, but not the nearest
  mac::test::set_q_pre(l, 120, 0, q.data());
  DecodeStepper<double> st(l, 0.125, small_params(128, 16, 64), mac::Variant::kSplit,
                           mac::StateStorage::kFull);
  st.prefill(150);
  const auto r = st.step(150);
  BOOST_TEST(r.heads[0].match.best_pos == 70);
  BOOST_TEST(r.heads[0].match.below_threshold);
  BOOST_TEST(!r.heads[0].hit);
  BOOST_TEST(r.heads[0].keys_read == 151);
}

BOOST_AUTO_TEST_CASE(front_sinks_on_a_valid_hit) {
  auto l = mac::test::random_layer(300, 2, 1, 64, 39);
  for (int64_t h = 0; h < 2; ++h) plant_repeat(l, 250, 200, h);
  DecodeStepper<double> st(l, 0.125, small_params(128, 16, 32), mac::Variant::kSplit,
                           mac::StateStorage::kFull);
  st.prefill(250);
  const auto r = st.step(250);
  for (const auto& hs : r.heads) {
    BOOST_TEST(hs.hit);
    BOOST_TEST(hs.sink_end == 32);
    BOOST_TEST(hs.keys_read == (250 - 200) + 16 + 32);
    // the entry written covers [F, E(m)) and is not empty
    BOOST_TEST(!st.ring().find(0, 250)->state.is_empty());
  }
}

BOOST_AUTO_TEST_CASE(prefix_end_zero_writes_an_empty_entry) {
  auto l = mac::test::random_layer(40, 1, 1, 64, 40);
  DecodeStepper<double> st(l, 0.125, small_params(16, 32), mac::Variant::kSplit,
                           mac::StateStorage::kProduction);
  st.prefill(10);
  for (int64_t m = 10; m < 31; ++m) {  // E(m) = max(0, m − 31) = 0
    const auto r = st.step(m);
    BOOST_TEST(r.heads[0].wrote_entry);
    const auto* e = st.ring().find(0, m);
    BOOST_TEST_REQUIRE(e != nullptr);
    BOOST_TEST(e->state.is_empty());
    BOOST_TEST(!std::isnan(e->state.lse));
    BOOST_TEST(r.heads[0].keys_read == m + 1);
  }
}

BOOST_AUTO_TEST_CASE(not_ready_request_writes_nothing) {
  auto l = mac::test::random_layer(100, 2, 1, 64, 41);
  for (int64_t h = 0; h < 2; ++h) plant_repeat(l, 90, 80, h);
  DecodeStepper<double> st(l, 0.125, small_params(32, 4), mac::Variant::kSplit,
                           mac::StateStorage::kFull);
  st.prefill(90);
  const auto before = st.ring().slot(0, 90);  // slot 90 mod 32 holds 58
  const auto r = st.step(90, /*ready=*/false);
  for (const auto& hs : r.heads) {
    BOOST_TEST(!hs.eligible);
    BOOST_TEST(!hs.hit);
    BOOST_TEST(!hs.wrote_entry);
    BOOST_TEST(hs.keys_read == 91);
  }
  BOOST_TEST(st.ring().slot(0, 90).pos == before.pos);
  BOOST_TEST(st.ring().slot(0, 90).state.lse == before.state.lse);
}

BOOST_AUTO_TEST_CASE(gen_min_boundary) {
  auto l = mac::test::random_layer(100, 1, 1, 64, 42);
  plant_repeat(l, 79, 70, 0);
  plant_repeat(l, 80, 70, 0);
  auto p = small_params(32, 4);
  p.gen_min = 80;
  DecodeStepper<double> st(l, 0.125, p, mac::Variant::kSplit, mac::StateStorage::kFull);
  st.prefill(79);
  BOOST_TEST(!st.step(79).heads[0].eligible);  // m = 79 < gen_min
  const auto r = st.step(80);
  BOOST_TEST(r.heads[0].eligible);
  BOOST_TEST(r.heads[0].hit);
  BOOST_TEST(r.heads[0].match_pos == 70);  // ties: 70 is older than 79
}

BOOST_AUTO_TEST_CASE(two_step_chain_reuses_the_entry_just_written) {
  auto l = mac::test::random_layer(200, 2, 1, 64, 43);
  for (int64_t h = 0; h < 2; ++h) {
    plant_repeat(l, 150, 120, h);  // step 150 hits 120 (a prefill entry, depth 0)
    plant_repeat(l, 151, 150, h);  // step 151: 120 and 150 tie at 0 → the older, 120
  }
  // Nudge 151 towards 150 so 150 is strictly nearer than 120.
  for (int64_t h = 0; h < 2; ++h) {
    std::vector<float> q(l.q_pre_at(150, h), l.q_pre_at(150, h) + 64);
    q[3] += 0.5f;
    mac::test::set_q_pre(l, 150, h, q.data());
    q[3] += 0.25f;
    mac::test::set_q_pre(l, 151, h, q.data());
  }
  DecodeStepper<float> st(l, 0.125, small_params(64, 8), mac::Variant::kSplit,
                          mac::StateStorage::kProduction);
  st.prefill(150);
  const auto r1 = st.step(150);
  const auto written = *st.ring().find(0, 150);
  const auto r2 = st.step(151);
  for (size_t h = 0; h < 2; ++h) {
    BOOST_TEST(r1.heads[h].hit);
    BOOST_TEST(r1.heads[h].match_pos == 120);
    BOOST_TEST(r1.heads[h].depth == 1);
    BOOST_TEST(r2.heads[h].hit);
    BOOST_TEST(r2.heads[h].match_pos == 150);
    BOOST_TEST(r2.heads[h].depth == 2);
  }
  // The second step's prefix is exactly the (BF16/FP32-rounded) entry the first wrote.
  BOOST_TEST(r2.heads[0].prefix.lse == written.state.lse);
  BOOST_TEST((r2.heads[0].prefix.o.array() == written.state.o.array()).all());
  // Production storage rounds o to BF16 and L to FP32.
  for (int i = 0; i < 64; ++i) BOOST_TEST(mac::ref::is_bf16_exact(written.state.o[i]));
}

BOOST_AUTO_TEST_CASE(gqa_heads_read_their_kv_head) {
  auto l = mac::test::random_layer(120, 6, 2, 128, 44);  // G = 3
  DecodeStepper<double> st(l, mac::test::default_scale(128), small_params(32, 8),
                           mac::Variant::kSplit, mac::StateStorage::kFull);
  st.prefill(100);
  const auto r = st.step(100);
  for (int64_t h = 0; h < 6; ++h) {
    const auto f = full(l, h, 100);
    BOOST_TEST(rel_l2(r.heads[static_cast<size_t>(h)].out.o, f.o) < 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(fp32_reference_close_to_fp64) {
  auto l = mac::test::random_layer(600, 2, 1, 128, 45);
  for (int64_t m = 300; m < 600; ++m)
    for (int64_t h = 0; h < 2; ++h) plant_repeat(l, m, m - 1 - (m % 7), h);
  DecodeStepper<float> a(l, mac::test::default_scale(128), small_params(64, 32),
                         mac::Variant::kSplit, mac::StateStorage::kFull);
  DecodeStepper<double> b(l, mac::test::default_scale(128), small_params(64, 32),
                          mac::Variant::kSplit, mac::StateStorage::kFull);
  a.prefill(300);
  b.prefill(300);
  double worst = 0;
  for (int64_t m = 300; m < 600; ++m) {
    const auto ra = a.step(m);
    const auto rb = b.step(m);
    for (size_t h = 0; h < 2; ++h) {
      BOOST_TEST_REQUIRE(ra.heads[h].hit == rb.heads[h].hit);
      worst = std::max(worst, rel_l2(ra.heads[h].out.o.cast<double>(), rb.heads[h].out.o));
    }
  }
  // FP32 accumulation over ≤ 600 keys and a chain of merges: a few hundred ulps at most.
  BOOST_TEST(worst < 200 * std::numeric_limits<float>::epsilon());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(bad_parameters_are_named) {
  auto l = mac::test::random_layer(20, 2, 1, 64, 46);
  auto expect = [&](MacParams p, const std::string& needle) {
    try {
      DecodeStepper<double> st(l, 0.125, p);
      BOOST_ERROR("no error for " << needle);
    } catch (const mac::InputError& e) {
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  MacParams p = small_params(8, 4);
  p.tau = std::numeric_limits<double>::quiet_NaN();
  expect(p, "tau");
  p.tau = 1.0;
  expect(p, "tau = 1");
  p = small_params(0, 4);
  expect(p, "ring M = 0");
  p = small_params(8, -1);
  expect(p, "tail r = -1");
  p = small_params(8, 4, -2);
  expect(p, "sinks F = -2");
  p = small_params(8, 4);
  p.gen_min = -5;
  expect(p, "gen_min = -5");
}

BOOST_AUTO_TEST_CASE(bad_shapes_are_named) {
  auto l = mac::test::random_layer(20, 2, 1, 64, 47);
  BOOST_CHECK_THROW(
      DecodeStepper<double>(l, std::numeric_limits<double>::infinity(), small_params(8, 4)),
      mac::InputError);
  auto odd = l;
  odd.head_dim = 96;
  BOOST_CHECK_THROW(DecodeStepper<double>(odd, 0.125, small_params(8, 4)), mac::InputError);
  auto gqa = l;
  gqa.num_q_heads = 3;
  gqa.num_kv_heads = 2;
  BOOST_CHECK_THROW(DecodeStepper<double>(gqa, 0.125, small_params(8, 4)), mac::InputError);
}

BOOST_AUTO_TEST_CASE(context_beyond_the_layer_is_refused) {
  auto l = mac::test::random_layer(20, 1, 1, 64, 48);
  DecodeStepper<double> st(l, 0.125, small_params(8, 4));
  st.prefill(10);
  BOOST_CHECK_THROW(st.step(20), mac::InputError);  // kv_len = 21 > 20 tokens
  BOOST_CHECK_THROW(st.step(9), mac::InputError);   // not after the prompt
  BOOST_CHECK_THROW(st.prefill(5), mac::InputError);
  DecodeStepper<double> st2(l, 0.125, small_params(8, 4));
  BOOST_CHECK_THROW(st2.prefill(21), mac::InputError);
}

// A ring of M ≥ T never wraps: the stepper keeps min(M, T) slots per head, so M = 2^31 − 1
// (which used to overflow M·Hq and crash) decodes exactly as M = T.
BOOST_AUTO_TEST_CASE(a_ring_larger_than_the_layer_equals_a_ring_of_the_layer) {
  auto l = mac::test::random_layer(96, 2, 1, 64, 50);
  const double s = mac::test::default_scale(64);
  MacParams huge{0.45, mac::kMaxTokens, 8, 0, 0}, exact{0.45, 96, 8, 0, 0};
  DecodeStepper<double> a(l, s, huge), b(l, s, exact);
  a.prefill(48);
  b.prefill(48);
  for (int64_t m = 48; m < 96; ++m) {
    const auto ra = a.step(m), rb = b.step(m);
    for (size_t h = 0; h < ra.heads.size(); ++h) {
      BOOST_TEST(ra.heads[h].hit == rb.heads[h].hit);
      BOOST_TEST(ra.heads[h].match_pos == rb.heads[h].match_pos);
      BOOST_TEST(ra.heads[h].out.lse == rb.heads[h].out.lse);  // the same arithmetic: bit-equal
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
