/*! \file attend.cpp
 *  \brief The FP64 compensated attention engine of the oracle (see oracle.hpp for the
 *         formulas and docs/oracle.md for the error analysis).
 *
 *  Work unit: one sub-chunk [u0, u1) of keys × the queries whose ranges cover it.
 *  Sub-chunks are the chunk grid (kChunk keys) cut further at every segment boundary of
 *  every query, so each one lies inside exactly one segment of each query that covers
 *  it. A unit reads each K and V row once for all the queries of its KV head (GQA), in
 *  memory order, and produces, per query, a compensated partial
 *  (μ_c, Z_c, S_c) relative to its own maximum; partials of one segment are combined in
 *  key order, so results do not depend on the thread count.
 */
#include "mac/oracle/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace mac::oracle {

// Hot loops get AVX-512 / AVX2 clones chosen at load time (the project builds for the
// baseline ISA); the arithmetic is the same in every clone (-ffp-contract=off, see
// oracle/CMakeLists.txt: contraction into FMA would break the TwoSum identities).
// The vector code below uses GCC/Clang vector extensions. Its helpers pass vectors by
// value only between inlined internal functions, so the psABI note does not apply.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
// MAC_ORACLE_NO_CLONES builds the baseline path alone (to test it on an AVX-512 host).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(MAC_ORACLE_NO_CLONES)
#define MAC_ORACLE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MAC_ORACLE_CLONES
#endif

namespace {

constexpr int64_t kChunk = 256;  // keys per work unit (all KV heads: its K rows stay in L2)
constexpr int kBlock = 8;        // keys per pass-1 block: 8 independent TwoSum chains
constexpr int kLanes = 8;        // doubles per vector (one AVX-512 register, two AVX2, four SSE2)
constexpr int kDotSub = 4;       // pass 1: exact products summed in fours before each TwoSum
constexpr int kAxpySub = 8;      // pass 2: keys summed in eights before each TwoSum
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// GCC/Clang vector extensions: lowered per clone to the widest registers it has.
typedef double VecD __attribute__((vector_size(kLanes * sizeof(double))));
typedef float VecF __attribute__((vector_size(kLanes * sizeof(float))));

inline VecD load(const double* p) {
  VecD v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(double* p, VecD v) { std::memcpy(p, &v, sizeof v); }

/*! \brief TwoSum (Knuth): s + p = t + e exactly with t = fl(s + p); t → s, e added to c.
 *  Valid for any magnitudes (no branch), so it vectorises; needs -ffp-contract=off. */
template <typename V>
inline void two_sum_acc(V& s, V& c, V p) {
  const V t = s + p;
  const V z = t - s;
  c += (s - (t - z)) + (p - z);
  s = t;
}

/*! \brief Pass 1 on a block: dot[k] = Σ_i q[i]·kd[k][i] for kBlock keys (`kd` is
 *  [kBlock][d] row-major). The products (BF16 × BF16, 16 significant bits) are exact in
 *  FP64; they are added in groups of kDotSub (usually still exact), and the group sums
 *  go through TwoSum: per key kLanes compensated accumulators over i, whose lanes are
 *  then folded with TwoSum, vectorised over the keys. Requires d % (kLanes·kDotSub) == 0. */
MAC_ORACLE_CLONES
void dot_block(const double* kd, const double* q, int64_t d, double* dot) {
  VecD s[kBlock], c[kBlock];
  for (int k = 0; k < kBlock; ++k) s[k] = c[k] = VecD{};
  for (int64_t i = 0; i < d; i += kLanes * kDotSub) {
    const VecD q0 = load(q + i), q1 = load(q + i + kLanes), q2 = load(q + i + 2 * kLanes),
               q3 = load(q + i + 3 * kLanes);
    for (int k = 0; k < kBlock; ++k) {
      const double* kk = kd + k * d + i;
      const VecD p = (q0 * load(kk) + q1 * load(kk + kLanes)) +
                     (q2 * load(kk + 2 * kLanes) + q3 * load(kk + 3 * kLanes));
      two_sum_acc(s[k], c[k], p);
    }
  }
  // Transpose the kBlock × kLanes partials so the lane fold is vectorised over keys.
  double sp[kBlock][kLanes], cp[kBlock][kLanes];
  for (int k = 0; k < kBlock; ++k) {
    store(sp[k], s[k]);
    store(cp[k], c[k]);
  }
  VecD rs{}, rc{};
  for (int l = 0; l < kLanes; ++l) {
    VecD cs, cc;
    for (int k = 0; k < kBlock; ++k) {
      cs[k] = sp[k][l];
      cc[k] = cp[k][l];
    }
    two_sum_acc(rs, rc, cs);
    rc += cc;
  }
  store(dot, rs + rc);
}
static_assert(kBlock == kLanes, "dot_block folds one key per lane");

/*! \brief dot = Σ_i q[i]·k[i] with TwoSum, any d (the generic path). */
double dot_scalar(const double* k, const double* q, int64_t d) {
  double s = 0, c = 0;
  for (int64_t i = 0; i < d; ++i) two_sum_acc(s, c, q[i] * k[i]);
  return s + c;
}

/*! \brief Pass 2 on a block of n ≤ kAxpySub keys: (s, c) += Σ_k w[k]·vb[k] — the n
 *  products summed plainly per element, the sum added with TwoSum. `vb` is [n][d]. */
MAC_ORACLE_CLONES
void axpy_block(double* s, double* c, const double* w, const double* vb, int n, int64_t d) {
  int64_t i = 0;
  if (d % kLanes == 0) {
    for (; i < d; i += kLanes) {
      VecD acc = (VecD{} + w[0]) * load(vb + i);
      for (int k = 1; k < n; ++k) acc += (VecD{} + w[k]) * load(vb + k * d + i);
      VecD sv = load(s + i), cv = load(c + i);
      two_sum_acc(sv, cv, acc);
      store(s + i, sv);
      store(c + i, cv);
    }
  }
  for (; i < d; ++i) {
    double acc = w[0] * vb[i];
    for (int k = 1; k < n; ++k) acc += w[k] * vb[k * d + i];
    two_sum_acc(s[i], c[i], acc);
  }
}

/*! \brief y = double(x) for n floats (exact). */
MAC_ORACLE_CLONES
void to_double(const float* x, int64_t n, double* y) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    VecF f;
    std::memcpy(&f, x + i, sizeof f);
    store(y + i, __builtin_convertvector(f, VecD));
  }
  for (; i < n; ++i) y[i] = static_cast<double>(x[i]);
}

// One work unit: keys [u0, u1) for every query whose range covers them.
struct Unit {
  int64_t u0 = 0, u1 = 0;
  std::vector<int64_t> queries;  // indices into the query list, sorted by KV head
  size_t offset = 0;             // into the partial buffer: queries.size() × stride doubles
};

// Partial layout (stride = 3 + 2D doubles): [μ, Z, Zc, S[D], Sc[D]].
inline size_t partial_stride(int64_t d) { return 3 + 2 * static_cast<size_t>(d); }

/*! \brief Runs one unit: per query, the compensated partial over [u0, u1). Keys are
 *  visited a block at a time across all KV heads, so memory is read in order (rows of one
 *  KV head alone are Hkv·D floats apart, which defeats the hardware prefetcher). */
void run_unit(const ref::LayerData& layer, double scale, const std::vector<SegmentQuery>& qs,
              const std::vector<double>& qd, const Unit& u, double* out) {
  const int64_t d = layer.head_dim;
  const int64_t na = static_cast<int64_t>(u.queries.size());
  const int64_t len = u.u1 - u.u0;
  const size_t stride = partial_stride(d);
  struct Group {
    int64_t kv_head, begin, end;  // queries [begin, end) of the unit share kv_head
  };
  thread_local std::vector<Group> groups;
  thread_local std::vector<double> kd, x, vb;
  groups.clear();
  for (int64_t a = 0; a < na; ++a) {
    const int64_t hk = qs[u.queries[a]].kv_head;
    if (groups.empty() || groups.back().kv_head != hk) groups.push_back({hk, a, a});
    groups.back().end = a + 1;
  }
  kd.resize(static_cast<size_t>(d) * kBlock);
  x.resize(static_cast<size_t>(na * len));
  vb.resize(static_cast<size_t>(d) * kAxpySub);

  // Pass 1: logits x[a][t] = s·(q_a·k_t); each K row converted once for its group.
  const bool vec = d % (kLanes * kDotSub) == 0;
  double dot[kBlock];
  for (int64_t t0 = 0; t0 < len; t0 += kBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kBlock, len - t0));
    for (const Group& g : groups) {
      for (int k = 0; k < n; ++k)
        to_double(layer.k_at(u.u0 + t0 + k, g.kv_head), d, kd.data() + k * d);
      std::fill(kd.data() + n * d, kd.data() + kBlock * d, 0.0);
      for (int64_t a = g.begin; a < g.end; ++a) {
        const double* qa = qd.data() + u.queries[a] * d;
        if (vec) {
          dot_block(kd.data(), qa, d, dot);
        } else {
          for (int k = 0; k < n; ++k) dot[k] = dot_scalar(kd.data() + k * d, qa, d);
        }
        for (int k = 0; k < n; ++k) x[a * len + t0 + k] = scale * dot[k];
      }
    }
  }
  // Weights relative to the unit's maximum μ_c, and their compensated sum Z_c.
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
  // Pass 2: S_c = Σ w_t·v_t, compensated.
  for (int64_t t0 = 0; t0 < len; t0 += kAxpySub) {
    const int n = static_cast<int>(std::min<int64_t>(kAxpySub, len - t0));
    for (const Group& g : groups) {
      for (int k = 0; k < n; ++k)
        to_double(layer.v_at(u.u0 + t0 + k, g.kv_head), d, vb.data() + k * d);
      for (int64_t a = g.begin; a < g.end; ++a) {
        double* p = out + a * stride;
        axpy_block(p + 3, p + 3 + d, x.data() + a * len + t0, vb.data(), n, d);
      }
    }
  }
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
    require(0 <= q.kv_head && q.kv_head < layer.num_kv_heads, "oracle: query ", qi,
            ": kv_head = ", q.kv_head, " outside [0, ", layer.num_kv_heads, ")");
    require(q.q != nullptr, "oracle: query ", qi, ": null query pointer");
    require(q.cuts.size() >= 2, "oracle: query ", qi, ": needs at least 2 cuts, got ",
            q.cuts.size());
    for (size_t j = 0; j < q.cuts.size(); ++j) {
      require(0 <= q.cuts[j] && q.cuts[j] <= layer.tokens, "oracle: query ", qi, ": cut ",
              q.cuts[j], " outside [0, ", layer.tokens, "]");
      // Not `j == 0 || ...`: require's message arguments are evaluated either way, and
      // cuts[j - 1] at j = 0 reads before the vector (UBSan's finding).
      if (j > 0)
        require(q.cuts[j - 1] <= q.cuts[j], "oracle: query ", qi, ": cuts decrease at ",
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

  // Units in key order: the chunk grid cut at every segment boundary of every query.
  std::vector<int64_t> order, bounds;  // non-empty queries sorted by KV head; all cuts
  for (int64_t qi = 0; qi < nq; ++qi) {
    if (queries[qi].cuts.front() == queries[qi].cuts.back()) continue;
    order.push_back(qi);
    bounds.insert(bounds.end(), queries[qi].cuts.begin(), queries[qi].cuts.end());
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return queries[x].kv_head < queries[y].kv_head; });
  std::vector<Unit> units;
  const size_t stride = partial_stride(d);
  size_t total = 0;
  if (!order.empty()) {
    std::sort(bounds.begin(), bounds.end());
    const int64_t lo = bounds.front(), hi = bounds.back();
    for (int64_t g = (lo / kChunk + 1) * kChunk; g < hi; g += kChunk) bounds.push_back(g);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    for (size_t j = 0; j + 1 < bounds.size(); ++j) {
      Unit u;
      u.u0 = bounds[j];
      u.u1 = bounds[j + 1];
      for (int64_t qi : order)
        if (queries[qi].cuts.front() <= u.u0 && u.u1 <= queries[qi].cuts.back())
          u.queries.push_back(qi);
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
      const size_t j =
          static_cast<size_t>(std::upper_bound(cuts.begin(), cuts.end(), u.u0) - cuts.begin()) - 1;
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
          "oracle::full_attention: Hq = ", layer.num_q_heads,
          " is not a multiple of Hkv = ", layer.num_kv_heads);
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
