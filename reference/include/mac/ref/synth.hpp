#pragma once
/*! \file synth.hpp
 *  \brief Seeded synthetic trace generator whose query streams make reuse happen the
 *         way it does in real decoding. The model is documented in docs/synthetic-traces.md.
 *
 *  Per (layer, query head) the pre-RoPE query is a slowly drifting random walk around
 *  a head-specific mean, with occasional jumps to a fresh direction and occasional
 *  repeats of an earlier query (plus small noise), so that as τ varies the hit rate
 *  spans 0–100%. Keys carry a matching structure so attention is peaked (a few
 *  "attractor" keys) rather than uniform. Everything is BF16-rounded; post-RoPE
 *  q/k are RoPE of the BF16 pre-RoPE values, rounded again to BF16.
 */
#include "mac/ref/trace.hpp"

#include <cstdint>
#include <string>

namespace mac::ref {

/*! \brief Parameters of the synthetic model (docs/synthetic-traces.md has the equations).
 *  Scales are per-component standard deviations: a query's components are O(1), so two
 *  unrelated queries are about √(2D) apart, the distance the match threshold is built on. */
struct SynthParams {
  int64_t tokens = 4096;
  int64_t num_layers = 2;
  int64_t num_q_heads = 8;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 128;
  double rope_theta = 10000;
  RopeStyle rope_style = RopeStyle::kNeox;
  uint64_t seed = 20261129;

  // --- queries: q̃_t = m_h + c_t + ν_t·σ_h·ε_t (or a repeat of an earlier q̃_p) ---
  double mean_scale = 0.5;     //!< head mean m_h (shared half with the other heads of its KV group)
  double context_scale = 0.4;  //!< stationary scale of the slow context c_t
  double drift = 0.05;         //!< per-step random-walk step of c_t, relative to context_scale
                        //!< (AR(1): c_t = √(1−drift²)·c_{t−1} + drift·context_scale·ξ)
  double noise_scale = 1.2;    //!< σ: largest per-token query noise ("what this token is about")
  double novelty_floor = 0.1;  //!< ν_t is uniform in [novelty_floor, 1]
  double novelty_corr =
      0.9;                  //!< lag-1 correlation of the process behind ν_t: misses come in bursts
  double jump_prob = 0.02;  //!< per-step probability that c_t jumps to a fresh direction
  double repeat_prob = 0.05;    //!< per-step probability of repeating an earlier query
  double repeat_noise = 0.2;    //!< per-component noise std added to a repeat
  int64_t repeat_window = 256;  //!< a repeat copies q̃_p with p uniform in [t − window, t)
  // Heads differ: head h uses drift·f_h and noise_scale·f_h, f_h = 1 + head_spread·u_h,
  // u_h ∈ [−1, 1] seeded. Must be < 1.
  double head_spread = 0.3;

  // --- keys and values ---
  double key_query_corr =
      0.5;  //!< k̃_t = key_query_corr·mean_{h∈g} q̃_{h,t} + key_noise·ξ (+ attractor)
  double key_noise = 1.0;  //!< per-component std of the key's own noise
  double attractor_prob =
      0.002;  //!< probability a position is an "attractor" (position 0 always is)
  double attractor_gain =
      2.0;  //!< attractor keys add attractor_gain·a_g (a_g: the group's shared mean direction)

  // --- model v2 (rope_tilt = 0 is v1, bit for bit) ---
  //! γ: over RoPE pairs i (u_i = i/(D/2−1), slow pairs at large i), the stable parts (head
  //! mean, key noise, attractors) are scaled by w_i ∝ e^{γ·u_i} and what changes from token
  //! to token (context, query noise, repeat noise) by w′_i ∝ e^{−γ·u_i}, each to mean
  //! square 1: the keys then vary where the queries hold still, so a matched query's logits
  //! over old keys drift about as little as a trained model's (docs/synthetic-traces.md).
  double rope_tilt = 0;

  void validate() const;  //!< InputError on a bad value
  /*! \brief "synthetic v1 seed=... drift=..." (v2 and its fields when rope_tilt ≠ 0), the
   *  trace's `source`: every field, so the string regenerates the trace. */
  std::string describe() const;

  /*! \brief Model v2 with the values calibrated against the SmolLM2-135M fixture
   *  (docs/synthetic-traces.md, "Calibration"): mac-sim --synthetic uses it. */
  static SynthParams calibrated();
};

/*! \brief Generates a trace (softmax_scale = 1/√D). Deterministic in the parameters. */
Trace generate_synthetic_trace(const SynthParams& p);

}  // namespace mac::ref
