#pragma once
/*! \file test_layers.hpp
 *  \brief Seeded random layers for tests: every value BF16-rounded before use,
 *         q_post = bf16(RoPE(q_pre)), k post-RoPE, v ~ N(0, 1).
 */
#include "mac/ref/bf16.hpp"
#include "mac/ref/rope.hpp"
#include "mac/ref/trace.hpp"

#include <cmath>
#include <cstdint>
#include <random>

namespace mac::test {

inline double default_scale(int64_t d) { return 1.0 / std::sqrt(static_cast<double>(d)); }

/*! \brief Recomputes q_post(t, h) = bf16(RoPE(q_pre(t, h), t)) after a test edits q_pre. */
inline void refresh_q_post(ref::LayerData& l, int64_t t, int64_t h, double theta = 10000.0) {
  float* dst = l.q_post.data() + (t * l.num_q_heads + h) * l.head_dim;
  ref::apply_rope(l.q_pre_at(t, h), dst, l.head_dim, t, theta, ref::RopeStyle::kNeox);
  ref::round_bf16_inplace(dst, static_cast<size_t>(l.head_dim));
}

/*! \brief Sets q_pre(t, h) to src (BF16-rounded) and refreshes q_post. */
inline void set_q_pre(ref::LayerData& l, int64_t t, int64_t h, const float* src) {
  float* dst = l.q_pre.data() + (t * l.num_q_heads + h) * l.head_dim;
  for (int64_t i = 0; i < l.head_dim; ++i) dst[i] = ref::round_bf16(src[i]);
  refresh_q_post(l, t, h);
}

/*! \brief A random layer; `key_scale` scales keys (large values give large logits). */
inline ref::LayerData random_layer(int64_t T, int64_t hq, int64_t hkv, int64_t d, uint64_t seed,
                                   double key_scale = 1.0) {
  ref::LayerData l;
  l.resize(T, hq, hkv, d);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  for (auto& x : l.q_pre) x = ref::round_bf16(static_cast<float>(n(rng)));
  std::vector<float> tmp(static_cast<size_t>(d));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t hk = 0; hk < hkv; ++hk) {
      for (auto& x : tmp) x = ref::round_bf16(static_cast<float>(key_scale * n(rng)));
      float* k = l.k.data() + (t * hkv + hk) * d;
      ref::apply_rope(tmp.data(), k, d, t, 10000.0, ref::RopeStyle::kNeox);
      ref::round_bf16_inplace(k, static_cast<size_t>(d));
    }
  for (auto& x : l.v) x = ref::round_bf16(static_cast<float>(n(rng)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < hq; ++h) refresh_q_post(l, t, h);
  return l;
}

}  // namespace mac::test
