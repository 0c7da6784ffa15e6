#include "mac/ref/trace.hpp"

#include "mac/ref/bf16.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mac::ref {

void TraceMeta::validate() const {
  require(supported_head_dim(head_dim), "head_dim = ", head_dim,
          " is not supported (64, 128 or 256)");
  require(num_kv_heads >= 1 && num_kv_heads <= kMaxHeads, "num_kv_heads = ", num_kv_heads,
          " must be >= 1 and <= ", kMaxHeads);
  require(num_q_heads >= 1 && num_q_heads <= kMaxHeads && num_q_heads % num_kv_heads == 0,
          "num_q_heads = ", num_q_heads,
          " must be a positive multiple of num_kv_heads = ", num_kv_heads, " and <= ", kMaxHeads);
  require(num_layers >= 1 && num_layers <= kMaxLayers, "num_layers = ", num_layers,
          " must be >= 1 and <= ", kMaxLayers);
  require(std::isfinite(softmax_scale) && softmax_scale > 0, "softmax_scale = ", softmax_scale,
          " must be finite and > 0");
  require(std::isfinite(rope_theta) && rope_theta > 0, "rope_theta = ", rope_theta,
          " must be finite and > 0");
}

void LayerData::resize(int64_t T, int64_t hq, int64_t hkv, int64_t d) {
  require(T >= 0 && T <= kMaxTokens, "layer tokens T = ", T, " must be >= 0 and <= ", kMaxTokens);
  const auto nq = static_cast<size_t>(checked_product("layer q_pre [T, Hq, D]", {T, hq, d}));
  const auto nk = static_cast<size_t>(checked_product("layer k [T, Hkv, D]", {T, hkv, d}));
  tokens = T;
  num_q_heads = hq;
  num_kv_heads = hkv;
  head_dim = d;
  q_pre.assign(nq, 0.0f);
  q_post.assign(nq, 0.0f);
  k.assign(nk, 0.0f);
  v.assign(nk, 0.0f);
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
  require(tokens >= 1 && tokens <= kMaxTokens, where, ": tokens = ", tokens,
          " must be >= 1 and <= ", kMaxTokens);
  require(supported_head_dim(head_dim), where, ": head_dim = ", head_dim,
          " is not supported (64, 128 or 256)");
  require(num_kv_heads >= 1 && num_q_heads >= 1 && num_q_heads % num_kv_heads == 0, where,
          ": num_q_heads = ", num_q_heads,
          " is not a positive multiple of num_kv_heads = ", num_kv_heads);
  const auto nq = static_cast<size_t>(
      checked_product(where + ": q_pre [T, Hq, D]", {tokens, num_q_heads, head_dim}));
  const auto nk = static_cast<size_t>(
      checked_product(where + ": k [T, Hkv, D]", {tokens, num_kv_heads, head_dim}));
  check_array(q_pre, nq, where + "/q_pre");
  check_array(q_post, nq, where + "/q_post");
  check_array(k, nk, where + "/k");
  check_array(v, nk, where + "/v");
}

void LayerData::check_logit_range(double softmax_scale, const std::string& where) const {
  auto max_norm = [](const std::vector<float>& a, int64_t d) {
    double m = 0;
    for (size_t i = 0; i + static_cast<size_t>(d) <= a.size(); i += static_cast<size_t>(d)) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += double(a[i + j]) * double(a[i + j]);
      m = std::max(m, s);
    }
    return std::sqrt(m);
  };
  const double bound = softmax_scale * max_norm(q_post, head_dim) * max_norm(k, head_dim);
  const double limit = static_cast<double>(std::numeric_limits<float>::max()) / 2;
  require(bound <= limit, where, ": softmax_scale ", shortest(softmax_scale),
          " x max|q_post| x max|k| = ", shortest(bound), " exceeds ", shortest(limit),
          " (FP32 logits would overflow and the LSE be infinite)");
}

}  // namespace mac::ref
