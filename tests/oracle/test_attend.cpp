// Tests of the compensated FP64 engine: attend, full_attention, attend_segments.
#include "oracle_test_util.hpp"

#include <omp.h>

using namespace mac;
using namespace mac::oracle;
using namespace mac::oracle::test;

BOOST_AUTO_TEST_SUITE(oracle_attend)

// Ranges chosen to cross the engine's chunk grid (512 keys), start mid-chunk, and be tiny.
BOOST_AUTO_TEST_CASE(matches_naive_long_double) {
  const auto l = random_layer(1500, 4, 2, 64, 11);
  const double scale = 1.0 / 8.0;
  const std::pair<int64_t, int64_t> ranges[] = {{0, 1},     {0, 1500},  {3, 1029},
                                                {511, 513}, {700, 701}, {100, 612}};
  double worst = 0;
  for (auto [a, b] : ranges)
    for (int64_t h = 0; h < 4; ++h) {
      const auto s = oracle::attend(l, h / 2, l.q_post_at(b - 1, h), scale, a, b);
      const auto e = error_vs(s, naive_ld(l, h / 2, l.q_post_at(b - 1, h), scale, a, b));
      BOOST_TEST(e.max() <= tol_tight(), "[" << a << ", " << b << ") head " << h << ": o_rel "
                                             << e.o_rel << " lse_rel " << e.lse_rel);
      worst = std::max(worst, e.max());
    }
  BOOST_TEST_MESSAGE("compensated vs long double: worst relative error " << worst);
}

// Every head dim of docs/semantics.md §4 (vector path) and one that is not a multiple of 32 (the
// scalar path of the engine).
BOOST_AUTO_TEST_CASE(head_dims_vector_and_generic_paths) {
  for (int64_t d : {40, 64, 128, 256}) {
    const auto l = random_layer(700, 2, 1, d, 100 + static_cast<uint64_t>(d));
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (int64_t h = 0; h < 2; ++h) {
      const float* q = l.q_post_at(699, h);
      const auto e =
          error_vs(oracle::attend(l, 0, q, scale, 0, 700), naive_ld(l, 0, q, scale, 0, 700));
      BOOST_TEST(e.max() <= tol_tight(),
                 "D " << d << " head " << h << ": o_rel " << e.o_rel << " lse_rel " << e.lse_rel);
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_range_is_empty_state) {
  const auto l = random_layer(16, 2, 1, 64, 12);
  const auto s = oracle::attend(l, 0, l.q_post_at(0, 0), 0.125, 5, 5);
  BOOST_TEST(s.is_empty());
  BOOST_TEST(s.o.size() == 64);
  BOOST_TEST(s.o.norm() == 0.0);
}

BOOST_AUTO_TEST_CASE(bad_ranges_throw) {
  const auto l = random_layer(16, 2, 1, 64, 13);
  BOOST_CHECK_THROW(oracle::attend(l, 0, l.q_post_at(0, 0), 0.125, 5, 4), InputError);
  BOOST_CHECK_THROW(oracle::attend(l, 0, l.q_post_at(0, 0), 0.125, 0, 17), InputError);
  BOOST_CHECK_THROW(oracle::attend(l, 1, l.q_post_at(0, 0), 0.125, 0, 4), InputError);
  BOOST_CHECK_THROW(oracle::full_attention(l, 0.125, 16), InputError);
}

BOOST_AUTO_TEST_CASE(split_ranges_merge_to_whole) {
  const auto l = random_layer(2000, 2, 1, 128, 14);
  const double scale = 1.0 / std::sqrt(128.0);
  double worst = 0;
  for (int64_t b : {1, 300, 512, 1000, 1777}) {
    const float* q = l.q_post_at(1999, 1);
    const auto whole = oracle::attend(l, 0, q, scale, 0, 2000);
    const auto m =
        ref::merge(oracle::attend(l, 0, q, scale, 0, b), oracle::attend(l, 0, q, scale, b, 2000));
    const auto e = error_vs(m, whole);
    BOOST_TEST(e.max() <= tol_tight(),
               "split at " << b << ": o_rel " << e.o_rel << " lse_rel " << e.lse_rel);
    worst = std::max(worst, e.max());
  }
  BOOST_TEST_MESSAGE("[a,b) ⊕ [b,c) vs [a,c): worst relative error " << worst);
}

BOOST_AUTO_TEST_CASE(full_attention_matches_per_head_and_naive) {
  const auto l = random_layer(1300, 8, 2, 64, 15);
  const double scale = 0.125;
  for (int64_t m : {0, 1, 700, 1299}) {
    const auto full = oracle::full_attention(l, scale, m);
    BOOST_TEST(full.size() == 8u);
    for (int64_t h = 0; h < 8; ++h) {
      const auto e = error_vs(full[h], naive_ld(l, h / 4, l.q_post_at(m, h), scale, 0, m + 1));
      BOOST_TEST(e.max() <= tol_tight(),
                 "m " << m << " head " << h << ": " << e.o_rel << ", " << e.lse_rel);
      const auto one = oracle::attend(l, h / 4, l.q_post_at(m, h), scale, 0, m + 1);
      BOOST_TEST((one.o.array() == full[h].o.array()).all());  // same engine, same key order
      BOOST_TEST(one.lse == full[h].lse);
    }
  }
}

BOOST_AUTO_TEST_CASE(segments_match_single_ranges) {
  const auto l = random_layer(1200, 4, 2, 64, 16);
  std::vector<SegmentQuery> qs;
  qs.push_back({0, l.q_post_at(10, 0), {0, 5, 5, 600, 1200}});
  qs.push_back({0, l.q_post_at(11, 1), {100, 1100}});
  qs.push_back({1, l.q_post_at(12, 2), {7, 8}});
  const auto seg = attend_segments(l, 0.125, qs);
  for (size_t qi = 0; qi < qs.size(); ++qi) {
    BOOST_TEST(seg[qi].size() == qs[qi].cuts.size() - 1);
    for (size_t j = 0; j + 1 < qs[qi].cuts.size(); ++j) {
      const int64_t a = qs[qi].cuts[j], b = qs[qi].cuts[j + 1];
      if (a == b) {
        BOOST_TEST(seg[qi][j].is_empty());
        continue;
      }
      const auto e = error_vs(seg[qi][j], naive_ld(l, qs[qi].kv_head, qs[qi].q, 0.125, a, b));
      BOOST_TEST(e.max() <= tol_tight(), "query " << qi << " [" << a << ", " << b << ")");
    }
  }
  qs.push_back({0, l.q_post_at(0, 0), {9, 3}});
  BOOST_CHECK_THROW(attend_segments(l, 0.125, qs), InputError);
}

// Logits s·q·k around 1e3: no overflow, and the result still agrees with long double.
BOOST_AUTO_TEST_CASE(large_logits_stay_finite_and_accurate) {
  const auto l = random_layer(1100, 2, 1, 64, 17, /*qk_sigma=*/12.0);
  const double scale = 1.0;  // s·q·k has σ ≈ 144·8 ≈ 1.2e3
  double worst = 0, max_logit_gap = 0;
  for (int64_t h = 0; h < 2; ++h) {
    const float* q = l.q_post_at(1099, h);
    const auto s = oracle::attend(l, 0, q, scale, 0, 1100);
    const auto ref = naive_ld(l, 0, q, scale, 0, 1100);
    BOOST_TEST(std::isfinite(s.lse));
    BOOST_TEST(s.o.allFinite());
    const auto e = error_vs(s, ref);
    // Logit errors are relative to |x| ~ 1e3, so the weights carry ~1e3·ε.
    BOOST_TEST(e.max() <= 1e3 * tol_tight(),
               "head " << h << ": o_rel " << e.o_rel << " lse_rel " << e.lse_rel);
    worst = std::max(worst, e.max());
    max_logit_gap = std::max(max_logit_gap, static_cast<double>(ref.lse));
  }
  BOOST_TEST_MESSAGE("large logits (LSE up to " << max_logit_gap << "): worst relative error "
                                                << worst);
}

// Logits ≈ 1e3 ± a few (keys near one direction, the query along it): many keys share
// the mass, so the large common offset must not cost accuracy.
BOOST_AUTO_TEST_CASE(large_offset_logits_share_mass) {
  auto l = random_layer(1100, 2, 1, 64, 19);
  std::mt19937_64 rng(19);
  std::normal_distribution<double> n01(0.0, 1.0);
  std::vector<float> b(64);
  for (auto& x : b) x = ref::round_bf16(static_cast<float>(11.2 * n01(rng)));
  for (int64_t t = 0; t < 1100; ++t)
    for (int64_t i = 0; i < 64; ++i)
      l.k[t * 64 + i] = ref::round_bf16(static_cast<float>(b[i] + 0.2 * n01(rng)));
  const double scale = 0.125;
  const auto ref = naive_ld(l, 0, b.data(), scale, 0, 1100);
  const auto s = oracle::attend(l, 0, b.data(), scale, 0, 1100);
  const auto e = error_vs(s, ref);
  BOOST_TEST_MESSAGE("logits ~1e3 sharing mass: LSE " << static_cast<double>(ref.lse) << ", o_rel "
                                                      << e.o_rel << ", lse_rel " << e.lse_rel);
  BOOST_TEST(ref.lse > 900.0L);
  // An FP64 logit near 1e3 is known to ~1e3·ε absolute, which the weights inherit.
  BOOST_TEST(e.o_rel <= 1e3 * tol_tight());
  BOOST_TEST(e.lse_rel <= tol_tight());
}

BOOST_AUTO_TEST_CASE(result_independent_of_thread_count) {
  const auto l = random_layer(2100, 4, 2, 64, 18);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = oracle::full_attention(l, 0.125, 2099);
  omp_set_num_threads(std::max(2, saved));
  const auto many = oracle::full_attention(l, 0.125, 2099);
  omp_set_num_threads(saved);
  for (size_t h = 0; h < one.size(); ++h) {
    BOOST_TEST((one[h].o.array() == many[h].o.array()).all());
    BOOST_TEST(one[h].lse == many[h].lse);
  }
}

BOOST_AUTO_TEST_SUITE_END()
