#pragma once
/*! \file bf16.hpp
 *  \brief BF16 round-to-nearest-even helpers. `Eigen::bfloat16` rounds like
 *         CUDA's `__float2bfloat16_rn` (ties to even, NaN kept NaN).
 */
#include "mac/ref/common.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace mac::ref {

/*! \brief Rounds one float to the nearest BF16 value (ties to even), returned as float. */
inline float round_bf16(float x) { return static_cast<float>(bf16(x)); }

/*! \brief True iff x is exactly representable in BF16 (its low 16 mantissa bits are 0). */
inline bool is_bf16_exact(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0xFFFFu) == 0;
}

/*! \brief Rounds every element in place. */
inline void round_bf16_inplace(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
}
inline void round_bf16_inplace(std::vector<float>& x) { round_bf16_inplace(x.data(), x.size()); }

/*! \brief Raw bits of the BF16 value of x (x assumed BF16-exact). */
inline uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}
/*! \brief Float value of raw BF16 bits. */
inline float bf16_from_bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace mac::ref
