// Synthetic trace generator: determinism, BF16 exactness, RoPE consistency, the golden
// file (guards against generator drift) and the hit-rate-vs-τ behaviour it exists for.
#include <boost/test/unit_test.hpp>

#include "io_fixture.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/ref/bf16.hpp"
#include "mac/ref/rope.hpp"
#include "mac/ref/synth.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

using namespace mac;
using namespace mac::ref;
using namespace mac::io;
using mac::test::expect_input_error;
using mac::test::same_bits;

namespace {

bool same_trace(const Trace& a, const Trace& b) {
  if (a.layers.size() != b.layers.size() || a.meta.source != b.meta.source) return false;
  for (size_t l = 0; l < a.layers.size(); ++l)
    if (!same_bits(a.layers[l].q_pre, b.layers[l].q_pre) ||
        !same_bits(a.layers[l].q_post, b.layers[l].q_post) ||
        !same_bits(a.layers[l].k, b.layers[l].k) || !same_bits(a.layers[l].v, b.layers[l].v))
      return false;
  return true;
}

/*! The parameters of data/golden/synth_small.h5 (data/README.md has the command). */
SynthParams golden_params() {
  SynthParams p;
  p.tokens = 384;
  p.num_layers = 2;
  p.num_q_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.seed = 1;
  return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(synthetic)

BOOST_AUTO_TEST_CASE(deterministic_in_seed_and_different_across_seeds) {
  const Trace a = mac::test::small_trace(11), b = mac::test::small_trace(11),
              c = mac::test::small_trace(12);
  BOOST_TEST(same_trace(a, b));
  BOOST_TEST(!same_bits(a.layers[0].q_pre, c.layers[0].q_pre));
  BOOST_TEST(!same_bits(a.layers[0].k, c.layers[0].k));
  BOOST_TEST(!same_bits(a.layers[0].v, c.layers[0].v));
  // Layers are different streams too.
  BOOST_TEST(!same_bits(a.layers[0].q_pre, a.layers[1].q_pre));
  BOOST_TEST(a.meta.source.find("seed=11") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(independent_of_thread_count) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Trace a = mac::test::small_trace(5, 100);
  omp_set_num_threads(3);
  const Trace b = mac::test::small_trace(5, 100);
  omp_set_num_threads(saved);
  BOOST_TEST(same_trace(a, b));
}

BOOST_AUTO_TEST_CASE(values_are_bf16_exact_and_finite) {
  const Trace t = mac::test::small_trace(3, 200);
  BOOST_CHECK_NO_THROW(t.meta.validate());
  for (size_t l = 0; l < t.layers.size(); ++l) BOOST_CHECK_NO_THROW(t.layers[l].validate("layer"));
  BOOST_TEST(t.meta.softmax_scale == 1.0 / std::sqrt(64.0));
  // Not degenerate: query components are O(1).
  double ss = 0;
  for (float x : t.layers[0].q_pre) ss += double(x) * x;
  const double rms = std::sqrt(ss / t.layers[0].q_pre.size());
  BOOST_TEST_MESSAGE("q_pre rms = " << rms);
  BOOST_TEST(rms > 0.5);
  BOOST_TEST(rms < 2.0);
}

BOOST_AUTO_TEST_CASE(q_post_is_bf16_of_rope_of_q_pre) {
  for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kGptj}) {
    SynthParams p;
    p.tokens = 300;
    p.num_layers = 1;
    p.num_q_heads = 4;
    p.num_kv_heads = 1;
    p.head_dim = 128;
    p.rope_style = style;
    p.rope_theta = 500000;
    const Trace t = generate_synthetic_trace(p);
    const LayerData& L = t.layers[0];
    std::vector<float> r(128);
    size_t bad = 0;
    for (int64_t pos = 0; pos < L.tokens; ++pos)
      for (int64_t h = 0; h < L.num_q_heads; ++h) {
        apply_rope(L.q_pre_at(pos, h), r.data(), 128, pos, p.rope_theta, style);
        for (int64_t i = 0; i < 128; ++i) bad += round_bf16(r[i]) != L.q_post_at(pos, h)[i];
      }
    BOOST_TEST(bad == 0u, to_string(style)
                              << ": " << bad << " q_post values differ from bf16(RoPE(q_pre))");
  }
}

BOOST_AUTO_TEST_CASE(parameter_validation) {
  auto bad = [](auto mutate, const char* name) {
    SynthParams p;
    mutate(p);
    expect_input_error([&] { p.validate(); }, {name});
    expect_input_error([&] { generate_synthetic_trace(p); }, {name});
  };
  bad([](SynthParams& p) { p.tokens = 0; }, "tokens = 0");
  bad([](SynthParams& p) { p.head_dim = 96; }, "head_dim = 96");
  bad([](SynthParams& p) { p.num_q_heads = 3; }, "num_q_heads = 3");
  bad([](SynthParams& p) { p.num_kv_heads = 0; }, "num_kv_heads = 0");
  bad([](SynthParams& p) { p.jump_prob = 1.5; }, "jump_prob");
  bad([](SynthParams& p) { p.repeat_prob = -0.1; }, "repeat_prob");
  bad([](SynthParams& p) { p.drift = std::numeric_limits<double>::quiet_NaN(); }, "drift");
  bad([](SynthParams& p) { p.head_spread = 1.0; }, "head_spread");
  bad([](SynthParams& p) { p.rope_theta = 0; }, "rope_theta");
  bad([](SynthParams& p) { p.repeat_window = 0; }, "repeat_window");
  BOOST_CHECK_NO_THROW(SynthParams{}.validate());
}

BOOST_AUTO_TEST_CASE(golden_file_matches_fresh_generation) {
  const std::string path = std::string(MAC_SOURCE_DIR) + "/data/golden/synth_small.h5";
  const Trace golden = read_trace(path);  // also validates schema, shapes, BF16 exactness
  const Trace fresh = generate_synthetic_trace(golden_params());
  BOOST_TEST(golden.meta.source == fresh.meta.source);
  BOOST_TEST(golden.meta.softmax_scale == fresh.meta.softmax_scale);
  BOOST_TEST(golden.meta.num_layers == 2);
  BOOST_TEST(golden.layers[0].tokens == 384);
  BOOST_TEST(
      same_trace(golden, fresh),
      "the generator no longer reproduces data/golden/synth_small.h5: if the model changed on "
      "purpose, regenerate it with the command in data/README.md and say so in the commit");
}

BOOST_AUTO_TEST_CASE(hit_rate_spans_low_to_high_and_is_monotone_in_tau) {
  // Nearest earlier pre-RoPE query among the last M = 512 positions, squared L2 in FP64;
  // hit iff d2 < 2·D·(1−τ)² (docs/semantics.md §2). D = 128, Hq = 4, T = 2048.
  SynthParams p;
  p.tokens = 2048;
  p.num_layers = 1;
  p.num_q_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  const Trace t = generate_synthetic_trace(p);
  const LayerData& L = t.layers[0];
  const int64_t D = L.head_dim, M = 512;
  std::vector<double> nearest;
  for (int64_t h = 0; h < L.num_q_heads; ++h)
    for (int64_t m = 1; m < L.tokens; ++m) {
      double best = std::numeric_limits<double>::infinity();
      const float* q = L.q_pre_at(m, h);
      for (int64_t c = std::max<int64_t>(0, m - M); c < m; ++c) {
        const float* r = L.q_pre_at(c, h);
        double s = 0;
        for (int64_t i = 0; i < D; ++i) {
          const double d = double(q[i]) - double(r[i]);
          s += d * d;
        }
        best = std::min(best, s);
      }
      nearest.push_back(best);
    }
  const std::vector<double> taus = {-0.2, 0.0, 0.2, 0.3, 0.45, 0.6, 0.7, 0.8, 0.9, 0.95};
  std::vector<double> rate;
  std::string table;
  for (double tau : taus) {
    const double thr = 2.0 * D * (1 - tau) * (1 - tau);
    size_t hits = 0;
    for (double d2 : nearest) hits += d2 < thr;
    rate.push_back(double(hits) / nearest.size());
    char buf[48];
    std::snprintf(buf, sizeof buf, " tau=%.2f:%.1f%%", tau, 100 * rate.back());
    table += buf;
  }
  BOOST_TEST_MESSAGE("synthetic hit rate (seed " << p.seed << "):" << table);
  for (size_t i = 1; i < rate.size(); ++i)
    BOOST_TEST(rate[i] <= rate[i - 1], "not monotone at tau " << taus[i]);
  BOOST_TEST(rate[1] >= 0.9);   // τ = 0: nearly every step hits
  BOOST_TEST(rate[8] <= 0.05);  // τ = 0.9: almost none
  BOOST_TEST(rate[4] >= 0.2);   // the default τ = 0.45 sits in the interesting middle
  BOOST_TEST(rate[4] <= 0.9);
}

BOOST_AUTO_TEST_CASE(attention_is_peaked_not_uniform) {
  const Trace t = mac::test::small_trace(9, 1024);
  const LayerData& L = t.layers[0];
  const double s = t.meta.softmax_scale;
  double mean_max = 0, uniform = 0;
  int n = 0;
  for (int64_t m = 256; m < L.tokens; m += 128)
    for (int64_t h = 0; h < L.num_q_heads; ++h) {
      std::vector<double> lg(static_cast<size_t>(m + 1));
      for (int64_t c = 0; c <= m; ++c) {
        double d = 0;
        for (int64_t i = 0; i < L.head_dim; ++i)
          d += double(L.q_post_at(m, h)[i]) * L.k_at(c, h / L.group_size())[i];
        lg[c] = s * d;
      }
      const double mx = *std::max_element(lg.begin(), lg.end());
      double z = 0;
      for (double x : lg) z += std::exp(x - mx);
      mean_max += 1.0 / z;
      uniform += 1.0 / (m + 1);
      ++n;
    }
  BOOST_TEST_MESSAGE("mean largest attention weight " << mean_max / n << " vs uniform "
                                                      << uniform / n);
  BOOST_TEST(mean_max > 10 * uniform);
}

BOOST_AUTO_TEST_SUITE_END()
