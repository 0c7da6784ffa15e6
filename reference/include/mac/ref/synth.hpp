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

struct SynthParams {
  int64_t tokens = 4096;
  int64_t num_layers = 2;
  int64_t num_q_heads = 8;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 128;
  double rope_theta = 10000;
  RopeStyle rope_style = RopeStyle::kNeox;
  uint64_t seed = 20261129;
  double drift = 0.02;        //!< per-step random-walk step, relative to the query norm
  double jump_prob = 0.02;    //!< per-step probability of a jump to a fresh direction
  double repeat_prob = 0.05;  //!< per-step probability of repeating an earlier query
  double repeat_noise = 0.05; //!< relative noise added to a repeat
  // Heads differ: head h uses drift·(1 + head_spread·u_h), u_h ∈ [−1, 1] seeded.
  double head_spread = 0.8;

  void validate() const;  //!< InputError on a bad value
  std::string describe() const;  //!< "synthetic v1 seed=... drift=..." for TraceMeta::source
};

/*! \brief Generates a trace (softmax_scale = 1/√D). Deterministic in the parameters. */
Trace generate_synthetic_trace(const SynthParams& p);

}  // namespace mac::ref
