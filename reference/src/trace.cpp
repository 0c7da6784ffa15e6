#include "mac/ref/trace.hpp"

#include "mac/ref/bf16.hpp"

#include <cmath>

namespace mac::ref {

void TraceMeta::validate() const {
  require(supported_head_dim(head_dim), "head_dim = ", head_dim,
          " is not supported (64, 128 or 256)");
  require(num_kv_heads >= 1, "num_kv_heads = ", num_kv_heads, " must be >= 1");
  require(num_q_heads >= 1 && num_q_heads % num_kv_heads == 0, "num_q_heads = ", num_q_heads,
          " must be a positive multiple of num_kv_heads = ", num_kv_heads);
  require(num_layers >= 1, "num_layers = ", num_layers, " must be >= 1");
  require(std::isfinite(softmax_scale) && softmax_scale > 0, "softmax_scale = ", softmax_scale,
          " must be finite and > 0");
  require(std::isfinite(rope_theta) && rope_theta > 0, "rope_theta = ", rope_theta,
          " must be finite and > 0");
}

void LayerData::resize(int64_t T, int64_t hq, int64_t hkv, int64_t d) {
  tokens = T;
  num_q_heads = hq;
  num_kv_heads = hkv;
  head_dim = d;
  q_pre.assign(static_cast<size_t>(T * hq * d), 0.0f);
  q_post.assign(static_cast<size_t>(T * hq * d), 0.0f);
  k.assign(static_cast<size_t>(T * hkv * d), 0.0f);
  v.assign(static_cast<size_t>(T * hkv * d), 0.0f);
}

namespace {
void check_array(const std::vector<float>& a, size_t expect, const std::string& name) {
  require(a.size() == expect, name, ": has ", a.size(), " values, shape needs ", expect);
  for (size_t i = 0; i < a.size(); ++i) {
    require(std::isfinite(a[i]), name, ": value ", a[i], " at flat index ", i, " is NaN or Inf");
    require(is_bf16_exact(a[i]), name, ": value ", a[i], " at flat index ", i,
            " is not BF16-exact");
  }
}
}  // namespace

void LayerData::validate(const std::string& where) const {
  require(tokens >= 1, where, ": tokens = ", tokens, " must be >= 1");
  require(supported_head_dim(head_dim), where, ": head_dim = ", head_dim,
          " is not supported (64, 128 or 256)");
  require(num_kv_heads >= 1 && num_q_heads >= 1 && num_q_heads % num_kv_heads == 0, where,
          ": num_q_heads = ", num_q_heads,
          " is not a positive multiple of num_kv_heads = ", num_kv_heads);
  const auto nq = static_cast<size_t>(tokens * num_q_heads * head_dim);
  const auto nk = static_cast<size_t>(tokens * num_kv_heads * head_dim);
  check_array(q_pre, nq, where + "/q_pre");
  check_array(q_post, nq, where + "/q_post");
  check_array(k, nk, where + "/k");
  check_array(v, nk, where + "/v");
}

}  // namespace mac::ref
