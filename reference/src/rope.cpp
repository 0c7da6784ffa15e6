#include "mac/ref/rope.hpp"

#include <cmath>
#include <vector>

namespace mac::ref {

const char* to_string(RopeStyle s) { return s == RopeStyle::kNeox ? "neox" : "gptj"; }

RopeStyle parse_rope_style(const std::string& s) {
  if (s == "neox") return RopeStyle::kNeox;
  if (s == "gptj") return RopeStyle::kGptj;
  throw InputError(msg("rope_style '", s, "' is not one of: neox, gptj"));
}

void apply_rope(const float* x, float* out, int64_t head_dim, int64_t pos, double theta,
                RopeStyle style) {
  require(head_dim > 0 && head_dim % 2 == 0, "RoPE head_dim = ", head_dim, " must be even and > 0");
  require(std::isfinite(theta) && theta > 0, "rope_theta = ", theta, " must be finite and > 0");
  const int64_t half = head_dim / 2;
  std::vector<double> in(x, x + head_dim);
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq =
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double ang = static_cast<double>(pos) * inv_freq;
    const double c = std::cos(ang), s = std::sin(ang);
    const int64_t ia = style == RopeStyle::kNeox ? i : 2 * i;
    const int64_t ib = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
    const double a = in[ia], b = in[ib];
    out[ia] = static_cast<float>(a * c - b * s);
    out[ib] = static_cast<float>(a * s + b * c);
  }
}

}  // namespace mac::ref
