#pragma once
/*! \file rope.hpp
 *  \brief Rotary position embedding in both pairings.
 *
 *  Frequency of pair i (0 ≤ i < D/2): `θ_i = pos · theta^(−2i/D)`.
 *  neox pairs (x_i, x_{i+D/2}); gptj pairs (x_{2i}, x_{2i+1}). Each pair (a, b) becomes
 *  `(a·cos θ_i − b·sin θ_i, a·sin θ_i + b·cos θ_i)`. Evaluated in FP64.
 */
#include "mac/ref/common.hpp"

#include <string>

namespace mac::ref {

enum class RopeStyle { kNeox, kGptj };
const char* to_string(RopeStyle s);
RopeStyle parse_rope_style(const std::string& s);  //!< "neox" | "gptj"; InputError otherwise

/*! \brief out[0..D) = RoPE(x, pos); out may alias x. No BF16 rounding is applied. */
void apply_rope(const float* x, float* out, int64_t head_dim, int64_t pos, double theta,
                RopeStyle style);

}  // namespace mac::ref
