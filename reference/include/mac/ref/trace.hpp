#pragma once
/*! \file trace.hpp
 *  \brief In-memory form of a trace (docs/file-formats.md, "Trace file"): per layer, row-major
 *         float arrays holding BF16-exact values.
 */
#include "mac/ref/common.hpp"
#include "mac/ref/rope.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mac::ref {

/*! \brief Root attributes of a trace. */
struct TraceMeta {
  int64_t head_dim = 128;
  int64_t num_q_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t num_layers = 0;
  double softmax_scale = 0;  //!< s in exp(s·q·k)
  double rope_theta = 10000;
  RopeStyle rope_style = RopeStyle::kNeox;
  std::string source;  //!< model name, or generator + seed

  int64_t group_size() const { return num_kv_heads > 0 ? num_q_heads / num_kv_heads : 0; }
  /*! \brief Throws InputError unless D is 64/128/256, Hq = G·Hkv with G ≥ 1, scale finite > 0. */
  void validate() const;
};

/*! \brief One layer: all arrays row-major, BF16-exact floats.
 *  q_pre, q_post: [T, Hq, D]; k (post-RoPE), v: [T, Hkv, D]. */
struct LayerData {
  int64_t tokens = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  std::vector<float> q_pre, q_post, k, v;

  const float* q_pre_at(int64_t t, int64_t h) const {
    return q_pre.data() + (t * num_q_heads + h) * head_dim;
  }
  const float* q_post_at(int64_t t, int64_t h) const {
    return q_post.data() + (t * num_q_heads + h) * head_dim;
  }
  const float* k_at(int64_t t, int64_t hk) const {
    return k.data() + (t * num_kv_heads + hk) * head_dim;
  }
  const float* v_at(int64_t t, int64_t hk) const {
    return v.data() + (t * num_kv_heads + hk) * head_dim;
  }
  int64_t group_size() const { return num_q_heads / num_kv_heads; }
  /*! \brief Positions the arrays hold (≥ tokens): an incremental stepper's layer is allocated
   *  for all of its positions up front and counts the filled ones in `tokens`. */
  int64_t capacity() const {
    const int64_t row = num_q_heads * head_dim;
    return row > 0 ? static_cast<int64_t>(q_pre.size()) / row : 0;
  }

  /*! \brief Allocates zeroed arrays for the given shape. */
  void resize(int64_t T, int64_t hq, int64_t hkv, int64_t d);
  /*! \brief Throws InputError naming the dataset on a shape mismatch, a NaN/Inf or a
   *         value that is not BF16-exact. `where` prefixes the message (e.g. "/layers/3"). */
  void validate(const std::string& where) const;
  /*! \brief Throws InputError (prefixed by `where`) unless every logit s·q_post·k stays
   *  inside FP32 range with room for the softmax: the Cauchy–Schwarz bound
   *  B = s·max‖q_post‖·max‖k‖ must be ≤ FLT_MAX / 2, since x − max x spans up to 2B. A
   *  larger scale (e.g. 1e300) would make the FP32 LSE infinite. */
  void check_logit_range(double softmax_scale, const std::string& where) const;
};

/*! \brief A whole trace. */
struct Trace {
  TraceMeta meta;
  std::vector<LayerData> layers;
};

}  // namespace mac::ref
