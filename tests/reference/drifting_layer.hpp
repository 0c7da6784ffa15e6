#pragma once
/*! \file drifting_layer.hpp
 *  \brief The stream the policy and gate tests share: decode queries that drift slowly, so that
 *         nearly every step hits the step before and chains grow one link per step.
 */
#include "mac/ref/state.hpp"
#include "test_layers.hpp"

#include <cstdint>
#include <random>
#include <vector>

namespace mac::test {

/*! \brief A random layer whose queries from `first` on drift: q̃(t) = q̃(t−1) + 0.05·noise. Every
 *  step's nearest candidate is the step before (d2 ≈ D·0.05² = 0.16 at D 64, far below
 *  thr ≈ 38.7 at τ 0.45). */
inline ref::LayerData drifting_layer(int64_t T, int64_t first, int64_t hq, int64_t hkv, int64_t d,
                                     uint64_t seed) {
  auto l = random_layer(T, hq, hkv, d, seed);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<double> n(0.0, 0.05);
  std::vector<float> q(static_cast<size_t>(d));
  for (int64_t t = first; t < T; ++t)
    for (int64_t h = 0; h < hq; ++h) {
      for (int64_t i = 0; i < d; ++i)
        q[static_cast<size_t>(i)] = l.q_pre_at(t - 1, h)[i] + static_cast<float>(n(rng));
      set_q_pre(l, t, h, q.data());
    }
  return l;
}

/*! \brief The stream's shape in the policy and gate tests: 360 positions, the first 200 the
 *  prompt, Hq 6, Hkv 2 (G 3), D 64; `drifting_layer(seed)` is that layer. */
namespace drift {
inline constexpr int64_t kT = 360, kP = 200, kHq = 6, kHkv = 2, kD = 64;
inline ref::LayerData drifting_layer(uint64_t seed) {
  return test::drifting_layer(kT, kP, kHq, kHkv, kD, seed);
}
}  // namespace drift

/*! \brief Bit equality of two states: identical code paths on identical inputs (−inf == −inf
 *  for empty states). */
template <typename T>
bool same_state(const ref::AttnState<T>& a, const ref::AttnState<T>& b) {
  return a.lse == b.lse && (a.o.array() == b.o.array()).all();
}

}  // namespace mac::test
