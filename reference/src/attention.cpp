#include "mac/ref/attention.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mac::ref {

namespace {
constexpr int64_t kBlock = 64;  // keys per block: logits and the V update are GEMVs
}  // namespace

/* Online softmax over blocks of keys. With running maximum μ, running sum
 * z = Σ exp(x_t − μ) and accumulator a = Σ exp(x_t − μ)·v_t, each block B with logits
 * x_t = s·q·k_t updates μ' = max(μ, max_B x), z' = z·e^{μ−μ'} + Σ_B e^{x−μ'},
 * a' = a·e^{μ−μ'} + V_Bᵀ e^{x−μ'}; finally L = μ + ln z, o = a / z. */
template <typename Acc>
AttnState<Acc> attend(const LayerData& layer, int64_t kv_head, const float* q, double scale,
                      int64_t a, int64_t b) {
  require(0 <= a && a <= b && b <= layer.tokens, "attend: key range [", a, ", ", b,
          ") is not inside [0, ", layer.tokens, "]");
  require(0 <= kv_head && kv_head < layer.num_kv_heads, "attend: kv_head = ", kv_head,
          " outside [0, ", layer.num_kv_heads, ")");
  const Eigen::Index d = layer.head_dim;
  AttnState<Acc> st = AttnState<Acc>::empty(d);
  if (a == b) return st;
  using MatA = Eigen::Matrix<Acc, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowMapF = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                             Eigen::OuterStride<>>;
  const Vec<Acc> qv = Eigen::Map<const Eigen::VectorXf>(q, d).template cast<Acc>() * static_cast<Acc>(scale);
  const Eigen::Index row_stride = layer.num_kv_heads * d;
  Acc mu = -std::numeric_limits<Acc>::infinity();
  Acc z = 0;
  Vec<Acc> acc = Vec<Acc>::Zero(d);
  MatA kb, vb;
  Vec<Acc> x, e;
  for (int64_t t0 = a; t0 < b; t0 += kBlock) {
    const Eigen::Index n = std::min<int64_t>(kBlock, b - t0);
    const RowMapF kf(layer.k_at(t0, kv_head), n, d, Eigen::OuterStride<>(row_stride));
    const RowMapF vf(layer.v_at(t0, kv_head), n, d, Eigen::OuterStride<>(row_stride));
    kb = kf.template cast<Acc>();
    vb = vf.template cast<Acc>();
    x.noalias() = kb * qv;
    const Acc mu_new = std::max(mu, x.maxCoeff());
    const Acc c = std::exp(mu - mu_new);  // 0 on the first block (μ = −inf)
    e = (x.array() - mu_new).exp().matrix();
    z = z * c + e.sum();
    acc = acc * c;
    acc.noalias() += vb.transpose() * e;
    mu = mu_new;
  }
  st.lse = mu + std::log(z);
  st.o = acc / z;
  return st;
}

template AttnState<float> attend<float>(const LayerData&, int64_t, const float*, double, int64_t, int64_t);
template AttnState<double> attend<double>(const LayerData&, int64_t, const float*, double, int64_t, int64_t);

}  // namespace mac::ref
