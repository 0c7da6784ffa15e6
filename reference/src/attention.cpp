#include "mac/ref/attention.hpp"

#include <Eigen/Core>

#include <cmath>
#include <limits>

namespace mac::ref {

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
  using VecA = Vec<Acc>;
  const VecA qv = Eigen::Map<const Eigen::VectorXf>(q, d).template cast<Acc>();
  const Acc s = static_cast<Acc>(scale);
  // Online softmax: running max mx, running sum z of exp(x − mx), running
  // un-normalised accumulator acc = Σ exp(x − mx)·v.
  Acc mx = -std::numeric_limits<Acc>::infinity();
  Acc z = 0;
  VecA acc = VecA::Zero(d);
  for (int64_t t = a; t < b; ++t) {
    const VecA kt = Eigen::Map<const Eigen::VectorXf>(layer.k_at(t, kv_head), d).template cast<Acc>();
    const Acc x = s * qv.dot(kt);
    const auto vt = Eigen::Map<const Eigen::VectorXf>(layer.v_at(t, kv_head), d).template cast<Acc>();
    if (x > mx) {
      const Acc c = std::exp(mx - x);  // 0 on the first key (mx = −inf)
      z = z * c + 1;
      acc = acc * c + vt;
      mx = x;
    } else {
      const Acc e = std::exp(x - mx);
      z += e;
      acc += e * vt;
    }
  }
  st.lse = mx + std::log(z);
  st.o = acc / z;
  return st;
}

template AttnState<float> attend<float>(const LayerData&, int64_t, const float*, double, int64_t, int64_t);
template AttnState<double> attend<double>(const LayerData&, int64_t, const float*, double, int64_t, int64_t);

}  // namespace mac::ref
