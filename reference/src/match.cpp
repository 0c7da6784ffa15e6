#include "mac/ref/match.hpp"

#include <array>
#include <cmath>

namespace mac::ref {

float canonical_d2(const float* a, const float* b, int64_t head_dim) {
  require(head_dim % 16 == 0 && head_dim >= 16 && head_dim <= 256,
          "canonical_d2: head_dim = ", head_dim, " must be a multiple of 16 in [16, 256]");
  const int64_t lanes = head_dim / 8;
  std::array<float, 32> acc{};
  for (int64_t l = 0; l < lanes; ++l) {
    float s = 0.0f;
    for (int64_t i = 8 * l; i < 8 * l + 8; ++i) {
      const float diff = a[i] - b[i];
      s = std::fmaf(diff, diff, s);
    }
    acc[l] = s;
  }
  // xor butterfly: every lane adds its partner's value, offsets D/16, ..., 2, 1.
  for (int64_t off = lanes / 2; off >= 1; off /= 2) {
    std::array<float, 32> next{};
    for (int64_t l = 0; l < lanes; ++l) next[l] = acc[l] + acc[l ^ off];
    acc = next;
  }
  return acc[0];
}

double d2_fp64(const float* a, const float* b, int64_t head_dim) {
  double s = 0.0;
  for (int64_t i = 0; i < head_dim; ++i) {
    const double diff = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    s += diff * diff;
  }
  return s;
}

}  // namespace mac::ref
