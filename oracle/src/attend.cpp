/*! \file attend.cpp
 *  \brief The FP64 compensated attention engine of the oracle (see oracle.hpp for the
 *         formulas and docs/oracle.md for the error analysis).
 *
 *  Work unit: one KV head × one sub-chunk [u0, u1) of keys × the queries of that KV
 *  head whose ranges cover the sub-chunk. Sub-chunks are the chunk grid (kChunk keys)
 *  cut further at every segment boundary of every query of the KV head, so each one lies
 *  inside exactly one segment of each query that covers it. A unit reads its K and V
 *  rows once for all its queries and produces, per query, a compensated partial
 *  (μ_c, Z_c, S_c) relative to its own maximum; partials of one segment are combined in
 *  key order, so results do not depend on the thread count.
 */
#include "mac/oracle/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mac::oracle {

// Hot loops get AVX-512 / AVX2 clones chosen at load time (the project builds for the
// baseline ISA); the arithmetic is the same in every clone (-ffp-contract=off, see
// oracle/CMakeLists.txt: contraction into FMA would break the TwoSum identities).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MAC_ORACLE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MAC_ORACLE_CLONES
#endif

namespace {

constexpr int64_t kChunk = 512;  // keys per work unit (K+V chunk fits in L2)
constexpr int kBlock = 16;       // keys per transposed K block in pass 1 (independent TwoSum chains)
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/*! \brief TwoSum (Knuth): s + p = t + e exactly, with t = fl(s + p). Adds e to c. */
inline void two_sum_acc(double& s, double& c, double p) {
  const double t = s + p;
  const double z = t - s;
  c += (s - (t - z)) + (p - z);
  s = t;
}

/*! \brief Pass 1 on a block: dot[j] = Σ_i q[i]·kt[i][j] for kBlock keys, the exact
 *  products (BF16 × BF16) summed with TwoSum; `kt` is [d][kBlock]. */
MAC_ORACLE_CLONES
void dot_block(const double* kt, const double* q, int64_t d, double* dot) {
  double s[kBlock], c[kBlock];
  for (int j = 0; j < kBlock; ++j) s[j] = c[j] = 0;
  for (int64_t i = 0; i < d; ++i) {
    const double qi = q[i];
    const double* kr = kt + i * kBlock;
    for (int j = 0; j < kBlock; ++j) {
      const double p = qi * kr[j];
      const double t = s[j] + p;
      const double z = t - s[j];
      c[j] += (s[j] - (t - z)) + (p - z);
      s[j] = t;
    }
  }
  for (int j = 0; j < kBlock; ++j) dot[j] = s[j] + c[j];
}

/*! \brief kt[i][j] = double(rows[j][i]) for j < n (zero-padded to kBlock). */
MAC_ORACLE_CLONES
void transpose_block(const float* k0, int64_t row_stride, int n, int64_t d, double* kt) {
  for (int j = 0; j < kBlock; ++j) {
    if (j < n) {
      const float* kr = k0 + j * row_stride;
      for (int64_t i = 0; i < d; ++i) kt[i * kBlock + j] = static_cast<double>(kr[i]);
    } else {
      for (int64_t i = 0; i < d; ++i) kt[i * kBlock + j] = 0;
    }
  }
}

/*! \brief Pass 2 on one key: (s, c) += w·v with TwoSum per element. */
MAC_ORACLE_CLONES
void axpy_comp(double* s, double* c, double w, const double* v, int64_t d) {
  for (int64_t i = 0; i < d; ++i) {
    const double p = w * v[i];
    const double t = s[i] + p;
    const double z = t - s[i];
    c[i] += (s[i] - (t - z)) + (p - z);
    s[i] = t;
  }
}

MAC_ORACLE_CLONES
void to_double(const float* x, int64_t d, double* y) {
  for (int64_t i = 0; i < d; ++i) y[i] = static_cast<double>(x[i]);
}

// One work unit.
struct Unit {
  int64_t kv_head = 0, u0 = 0, u1 = 0;
  std::vector<int64_t> queries;  // indices into the query list
  size_t offset = 0;             // into the partial buffer: queries.size() × stride doubles
};

// Partial layout (stride = 3 + 2D doubles): [μ, Z, Zc, S[D], Sc[D]].
inline size_t partial_stride(int64_t d) { return 3 + 2 * static_cast<size_t>(d); }

/*! \brief Runs one unit: per query, the compensated partial over [u0, u1). */
void run_unit(const ref::LayerData& layer, double scale, const std::vector<SegmentQuery>& qs,
              const std::vector<double>& qd, const Unit& u, double* out) {
  const int64_t d = layer.head_dim;
  const int64_t na = static_cast<int64_t>(u.queries.size());
  const int64_t len = u.u1 - u.u0;
  const int64_t row_stride = layer.num_kv_heads * d;
  const size_t stride = partial_stride(d);
  thread_local std::vector<double> kt, x, vd;
  kt.resize(static_cast<size_t>(d) * kBlock);
  x.resize(static_cast<size_t>(na * len));
  vd.resize(static_cast<size_t>(d));
  // Pass 1: logits x[a][t] = s·(q_a·k_t) and the per-query maximum.
  double dot[kBlock];
  for (int64_t t0 = 0; t0 < len; t0 += kBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kBlock, len - t0));
    transpose_block(layer.k_at(u.u0 + t0, u.kv_head), row_stride, n, d, kt.data());
    for (int64_t a = 0; a < na; ++a) {
      dot_block(kt.data(), qd.data() + u.queries[a] * d, d, dot);
      for (int j = 0; j < n; ++j) x[a * len + t0 + j] = scale * dot[j];
    }
  }
  // Pass 2: weights relative to μ, compensated Z and S.
  for (int64_t a = 0; a < na; ++a) {
    double* p = out + a * stride;
    double* xa = x.data() + a * len;
    const double mu = *std::max_element(xa, xa + len);
    double z = 0, zc = 0;
    for (int64_t t = 0; t < len; ++t) {
      xa[t] = std::exp(xa[t] - mu);  // now the weight w_t ∈ (0, 1]
      two_sum_acc(z, zc, xa[t]);
    }
    p[0] = mu;
    p[1] = z;
    p[2] = zc;
    std::fill(p + 3, p + stride, 0.0);
  }
  for (int64_t t = 0; t < len; ++t) {
    to_double(layer.v_at(u.u0 + t, u.kv_head), d, vd.data());
    for (int64_t a = 0; a < na; ++a) {
      double* p = out + a * stride;
      axpy_comp(p + 3, p + 3 + d, x[a * len + t], vd.data(), d);
    }
  }
  (void)qs;
}

/*! \brief Combines the partials of one segment (key order) into a state:
 *  μ = max μ_c, Z = Σ e^{μ_c−μ}(Z_c + Zc_c), S = Σ e^{μ_c−μ}(S_c + Sc_c) (compensated),
 *  L = μ + ln Z, o = S / Z. */
State combine(const std::vector<const double*>& parts, int64_t d) {
  State st = State::empty(d);
  if (parts.empty()) return st;
  double mu = kNegInf;
  for (const double* p : parts) mu = std::max(mu, p[0]);
  double z = 0, zc = 0;
  std::vector<double> s(static_cast<size_t>(d), 0.0), sc(static_cast<size_t>(d), 0.0);
  for (const double* p : parts) {
    const double f = std::exp(p[0] - mu);
    two_sum_acc(z, zc, f * p[1]);
    two_sum_acc(z, zc, f * p[2]);
    for (int64_t i = 0; i < d; ++i) {
      two_sum_acc(s[i], sc[i], f * p[3 + i]);
      two_sum_acc(s[i], sc[i], f * p[3 + d + i]);
    }
  }
  const double zt = z + zc;
  st.lse = mu + std::log(zt);
  for (int64_t i = 0; i < d; ++i) st.o[i] = (s[i] + sc[i]) / zt;
  return st;
}

void check_queries(const ref::LayerData& layer, const std::vector<SegmentQuery>& queries) {
  for (size_t qi = 0; qi < queries.size(); ++qi) {
    const auto& q = queries[qi];
    require(0 <= q.kv_head && q.kv_head < layer.num_kv_heads, "oracle: query ", qi, ": kv_head = ",
            q.kv_head, " outside [0, ", layer.num_kv_heads, ")");
    require(q.q != nullptr, "oracle: query ", qi, ": null query pointer");
    require(q.cuts.size() >= 2, "oracle: query ", qi, ": needs at least 2 cuts, got ", q.cuts.size());
    for (size_t j = 0; j < q.cuts.size(); ++j) {
      require(0 <= q.cuts[j] && q.cuts[j] <= layer.tokens, "oracle: query ", qi, ": cut ", q.cuts[j],
              " outside [0, ", layer.tokens, "]");
      require(j == 0 || q.cuts[j - 1] <= q.cuts[j], "oracle: query ", qi, ": cuts decrease at ",
              q.cuts[j - 1], " > ", q.cuts[j]);
    }
  }
}

}  // namespace

std::vector<std::vector<State>> attend_segments(const ref::LayerData& layer, double scale,
                                                const std::vector<SegmentQuery>& queries) {
  require(std::isfinite(scale), "oracle: softmax scale = ", scale, " is not finite");
  check_queries(layer, queries);
  const int64_t d = layer.head_dim;
  const int64_t nq = static_cast<int64_t>(queries.size());
  // Queries in FP64 (exact: BF16 ⊂ FP32 ⊂ FP64).
  std::vector<double> qd(static_cast<size_t>(nq * d));
  for (int64_t qi = 0; qi < nq; ++qi)
    for (int64_t i = 0; i < d; ++i) qd[qi * d + i] = queries[qi].q[i];

  // Build units per KV head, in key order.
  std::vector<Unit> units;
  const size_t stride = partial_stride(d);
  size_t total = 0;
  for (int64_t hk = 0; hk < layer.num_kv_heads; ++hk) {
    std::vector<int64_t> members, bounds;
    for (int64_t qi = 0; qi < nq; ++qi) {
      if (queries[qi].kv_head != hk || queries[qi].cuts.front() == queries[qi].cuts.back()) continue;
      members.push_back(qi);
      bounds.insert(bounds.end(), queries[qi].cuts.begin(), queries[qi].cuts.end());
    }
    if (members.empty()) continue;
    std::sort(bounds.begin(), bounds.end());
    const int64_t lo = bounds.front(), hi = bounds.back();
    for (int64_t g = (lo / kChunk + 1) * kChunk; g < hi; g += kChunk) bounds.push_back(g);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    for (size_t j = 0; j + 1 < bounds.size(); ++j) {
      Unit u;
      u.kv_head = hk;
      u.u0 = bounds[j];
      u.u1 = bounds[j + 1];
      for (int64_t qi : members)
        if (queries[qi].cuts.front() <= u.u0 && u.u1 <= queries[qi].cuts.back()) u.queries.push_back(qi);
      if (u.queries.empty()) continue;
      u.offset = total;
      total += u.queries.size() * stride;
      units.push_back(std::move(u));
    }
  }

  std::vector<double> partials(total);
  const int64_t nu = static_cast<int64_t>(units.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t ui = 0; ui < nu; ++ui)
    run_unit(layer, scale, queries, qd, units[ui], partials.data() + units[ui].offset);

  // Gather each (query, segment)'s partials in key order, then combine.
  std::vector<std::vector<std::vector<const double*>>> parts(static_cast<size_t>(nq));
  for (int64_t qi = 0; qi < nq; ++qi) parts[qi].resize(queries[qi].cuts.size() - 1);
  for (const Unit& u : units) {
    for (size_t a = 0; a < u.queries.size(); ++a) {
      const auto& cuts = queries[u.queries[a]].cuts;
      // The segment j with cuts[j] ≤ u0 < cuts[j+1] (last such j, skipping empty segments).
      const size_t j = static_cast<size_t>(std::upper_bound(cuts.begin(), cuts.end(), u.u0) - cuts.begin()) - 1;
      parts[u.queries[a]][j].push_back(partials.data() + u.offset + a * stride);
    }
  }
  std::vector<std::vector<State>> result(static_cast<size_t>(nq));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t qi = 0; qi < nq; ++qi) {
    result[qi].resize(parts[qi].size());
    for (size_t j = 0; j < parts[qi].size(); ++j) result[qi][j] = combine(parts[qi][j], d);
  }
  return result;
}

State attend(const ref::LayerData& layer, int64_t kv_head, const float* q, double scale, int64_t a,
             int64_t b) {
  require(0 <= a && a <= b && b <= layer.tokens, "oracle::attend: key range [", a, ", ", b,
          ") is not inside [0, ", layer.tokens, "]");
  SegmentQuery sq;
  sq.kv_head = kv_head;
  sq.q = q;
  sq.cuts = {a, b};
  return attend_segments(layer, scale, {sq}).front().front();
}

std::vector<State> full_attention(const ref::LayerData& layer, double scale, int64_t m) {
  require(0 <= m && m < layer.tokens, "oracle::full_attention: position m = ", m, " outside [0, ",
          layer.tokens, ")");
  require(layer.num_kv_heads > 0 && layer.num_q_heads % layer.num_kv_heads == 0,
          "oracle::full_attention: Hq = ", layer.num_q_heads, " is not a multiple of Hkv = ",
          layer.num_kv_heads);
  const int64_t g = layer.group_size();
  std::vector<SegmentQuery> qs(static_cast<size_t>(layer.num_q_heads));
  for (int64_t h = 0; h < layer.num_q_heads; ++h) {
    qs[h].kv_head = h / g;
    qs[h].q = layer.q_post_at(m, h);
    qs[h].cuts = {0, m + 1};
  }
  auto seg = attend_segments(layer, scale, qs);
  std::vector<State> out;
  out.reserve(seg.size());
  for (auto& s : seg) out.push_back(std::move(s.front()));
  return out;
}

}  // namespace mac::oracle
