#pragma once
/*! \file oracle_test_util.hpp
 *  \brief Helpers of the oracle tests: seeded BF16 random layers and an independent
 *         naive long-double attention (two plain passes, no compensation).
 */
#include "mac/oracle/oracle.hpp"
#include "mac/ref/bf16.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace mac::oracle::test {

/*! \brief Tolerance for FP64 compensated results: a few dozen units of FP64 rounding. */
inline double tol_tight() { return 64 * std::numeric_limits<double>::epsilon(); }  // ≈ 1.4e-14
/*! \brief Tolerance for results that pass through several FP64 merges. */
inline double tol_merge() { return 4096 * std::numeric_limits<double>::epsilon(); }  // ≈ 9.1e-13

/*! \brief A random layer, every value BF16-rounded: q, k ~ N(0, qk_sigma²), v ~ N(v_mean, 1).
 *  The seed is printed with the test so a failure can be replayed. */
inline ref::LayerData random_layer(int64_t T, int64_t hq, int64_t hkv, int64_t d, uint64_t seed,
                                   double qk_sigma = 1.0, double v_mean = 0.5) {
  BOOST_TEST_MESSAGE("random_layer T=" << T << " Hq=" << hq << " Hkv=" << hkv << " D=" << d
                                       << " seed=" << seed << " qk_sigma=" << qk_sigma);
  ref::LayerData l;
  l.resize(T, hq, hkv, d);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0.0, 1.0);
  auto fill = [&](std::vector<float>& a, double sigma, double mean) {
    for (auto& x : a) x = ref::round_bf16(static_cast<float>(mean + sigma * n01(rng)));
  };
  fill(l.q_pre, qk_sigma, 0.0);
  fill(l.q_post, qk_sigma, 0.0);
  fill(l.k, qk_sigma, 0.0);
  fill(l.v, 1.0, v_mean);
  return l;
}

/*! \brief Naive long-double attention over [a, b): an independent implementation. */
struct LdState {
  std::vector<long double> o;
  long double lse = -std::numeric_limits<long double>::infinity();
};
inline LdState naive_ld(const ref::LayerData& l, int64_t hk, const float* q, double scale,
                        int64_t a, int64_t b) {
  const int64_t d = l.head_dim;
  LdState st;
  st.o.assign(static_cast<size_t>(d), 0.0L);
  if (a == b) return st;
  std::vector<long double> x(static_cast<size_t>(b - a));
  long double mx = -std::numeric_limits<long double>::infinity();
  for (int64_t t = a; t < b; ++t) {
    long double dot = 0;
    const float* k = l.k_at(t, hk);
    for (int64_t i = 0; i < d; ++i)
      dot += static_cast<long double>(q[i]) * static_cast<long double>(k[i]);
    x[t - a] = static_cast<long double>(scale) * dot;
    mx = std::max(mx, x[t - a]);
  }
  long double z = 0;
  for (int64_t t = a; t < b; ++t) {
    const long double w = std::exp(x[t - a] - mx);
    z += w;
    const float* v = l.v_at(t, hk);
    for (int64_t i = 0; i < d; ++i) st.o[i] += w * static_cast<long double>(v[i]);
  }
  for (auto& o : st.o) o /= z;
  st.lse = mx + std::log(z);
  return st;
}

/*! \brief Errors of a state against a reference: relative L2 of o, and |ΔL|/max(1, |L|). */
struct Err {
  double o_rel = 0, lse_rel = 0;
  double max() const { return std::max(o_rel, lse_rel); }
};
inline Err error_vs(const State& s, const LdState& ref) {
  long double num = 0, den = 0;
  for (size_t i = 0; i < ref.o.size(); ++i) {
    const long double e = static_cast<long double>(s.o[static_cast<Eigen::Index>(i)]) - ref.o[i];
    num += e * e;
    den += ref.o[i] * ref.o[i];
  }
  Err e;
  e.o_rel = static_cast<double>(std::sqrt(num / den));
  e.lse_rel = static_cast<double>(std::fabs(static_cast<long double>(s.lse) - ref.lse) /
                                  std::max<long double>(1, std::fabs(ref.lse)));
  return e;
}
inline Err error_vs(const State& s, const State& ref) {
  Err e;
  e.o_rel = (s.o - ref.o).norm() / ref.o.norm();
  e.lse_rel = std::fabs(s.lse - ref.lse) / std::max(1.0, std::fabs(ref.lse));
  return e;
}

}  // namespace mac::oracle::test
