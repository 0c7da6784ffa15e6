#include "mac/ref/attention.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace mac::ref {

namespace {
constexpr int64_t kBlock = 128;  // keys per block: logits and the V update are matrix products

/* Softmax weights below the smallest normal number are set to zero. Their share of the
 * sum is below min_normal/1 ≈ 1.2e-38 (FP32) relative, far under the rounding of the
 * accumulation, but as subnormal operands they slow the matrix products by an order of
 * magnitude on large-logit inputs. */
template <typename Acc, typename Expr>
auto flush_subnormal(const Expr& w) {
  return (w < std::numeric_limits<Acc>::min()).select(Acc(0), w).matrix();
}
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
  using RowMapF =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                 Eigen::OuterStride<>>;
  const Vec<Acc> qv =
      Eigen::Map<const Eigen::VectorXf>(q, d).template cast<Acc>() * static_cast<Acc>(scale);
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
    e = flush_subnormal<Acc>((x.array() - mu_new).exp());
    z = z * c + e.sum();
    acc = acc * c;
    acc.noalias() += vb.transpose() * e;
    mu = mu_new;
  }
  st.lse = mu + std::log(z);
  st.o = acc / z;
  return st;
}

template <typename Acc>
std::vector<AttnState<Acc>> attend_many(const LayerData& layer, int64_t kv_head, double scale,
                                        const std::vector<RangeQuery>& queries) {
  require(0 <= kv_head && kv_head < layer.num_kv_heads, "attend_many: kv_head = ", kv_head,
          " outside [0, ", layer.num_kv_heads, ")");
  const Eigen::Index d = layer.head_dim;
  const auto nq = static_cast<Eigen::Index>(queries.size());
  std::vector<AttnState<Acc>> out(queries.size(), AttnState<Acc>::empty(d));
  if (nq == 0) return out;
  int64_t lo = layer.tokens, hi = 0;
  for (const auto& r : queries) {
    require(0 <= r.a && r.a <= r.b && r.b <= layer.tokens, "attend_many: key range [", r.a, ", ",
            r.b, ") is not inside [0, ", layer.tokens, "]");
    if (r.a < r.b) {
      lo = std::min(lo, r.a);
      hi = std::max(hi, r.b);
    }
  }
  using MatA = Eigen::Matrix<Acc, Eigen::Dynamic, Eigen::Dynamic>;
  using RowMapF =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                 Eigen::OuterStride<>>;
  MatA q(d, nq);  // scaled queries, one per column
  for (Eigen::Index j = 0; j < nq; ++j)
    q.col(j) = Eigen::Map<const Eigen::VectorXf>(queries[static_cast<size_t>(j)].q, d)
                   .template cast<Acc>() *
               static_cast<Acc>(scale);
  const Acc ninf = -std::numeric_limits<Acc>::infinity();
  Vec<Acc> mu = Vec<Acc>::Constant(nq, ninf), z = Vec<Acc>::Zero(nq);
  MatA acc = MatA::Zero(d, nq);
  const Eigen::Index row_stride = layer.num_kv_heads * d;
  std::vector<Eigen::Index> active;
  MatA kb, vb, qa, x, e;
  for (int64_t t0 = lo; t0 < hi; t0 += kBlock) {
    const int64_t t1 = std::min<int64_t>(t0 + kBlock, hi);
    active.clear();
    for (Eigen::Index j = 0; j < nq; ++j) {
      const auto& r = queries[static_cast<size_t>(j)];
      if (r.a < t1 && r.b > t0) active.push_back(j);
    }
    if (active.empty()) continue;
    const Eigen::Index n = t1 - t0, na = static_cast<Eigen::Index>(active.size());
    const RowMapF kf(layer.k_at(t0, kv_head), n, d, Eigen::OuterStride<>(row_stride));
    const RowMapF vf(layer.v_at(t0, kv_head), n, d, Eigen::OuterStride<>(row_stride));
    qa.resize(d, na);
    for (Eigen::Index c = 0; c < na; ++c) qa.col(c) = q.col(active[static_cast<size_t>(c)]);
    if constexpr (std::is_same_v<Acc, float>) {
      x.noalias() = kf * qa;  // [n, na] logits, straight from the layer's rows
    } else {
      kb = kf.template cast<Acc>();
      vb = vf.template cast<Acc>();
      x.noalias() = kb * qa;
    }
    e.resize(n, na);
    for (Eigen::Index c = 0; c < na; ++c) {
      const Eigen::Index j = active[static_cast<size_t>(c)];
      const auto& r = queries[static_cast<size_t>(j)];
      const Eigen::Index i0 = std::max<int64_t>(r.a - t0, 0), i1 = std::min<int64_t>(r.b - t0, n);
      const Acc mu_new = std::max(mu[j], x.col(c).segment(i0, i1 - i0).maxCoeff());
      const Acc cf = std::exp(mu[j] - mu_new);  // 0 on the first block of this query
      e.col(c).setZero();
      e.col(c).segment(i0, i1 - i0) =
          flush_subnormal<Acc>((x.col(c).segment(i0, i1 - i0).array() - mu_new).exp());
      z[j] = z[j] * cf + e.col(c).sum();
      acc.col(j) *= cf;
      mu[j] = mu_new;
    }
    MatA pv(d, na);  // [D, na]
    if constexpr (std::is_same_v<Acc, float>) {
      pv.noalias() = vf.transpose() * e;
    } else {
      pv.noalias() = vb.transpose() * e;
    }
    for (Eigen::Index c = 0; c < na; ++c) acc.col(active[static_cast<size_t>(c)]) += pv.col(c);
  }
  for (Eigen::Index j = 0; j < nq; ++j) {
    if (!(z[j] > 0)) continue;  // empty range
    auto& st = out[static_cast<size_t>(j)];
    st.lse = mu[j] + std::log(z[j]);
    st.o = acc.col(j) / z[j];
  }
  return out;
}

template std::vector<AttnState<float>> attend_many<float>(const LayerData&, int64_t, double,
                                                          const std::vector<RangeQuery>&);
template std::vector<AttnState<double>> attend_many<double>(const LayerData&, int64_t, double,
                                                            const std::vector<RangeQuery>&);

template AttnState<float> attend<float>(const LayerData&, int64_t, const float*, double, int64_t,
                                        int64_t);
template AttnState<double> attend<double>(const LayerData&, int64_t, const float*, double, int64_t,
                                          int64_t);

}  // namespace mac::ref
