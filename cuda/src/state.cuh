#pragma once
// The attention state on the device: the twin of mac::ref::AttnState
// (reference/include/mac/ref/state.hpp) in FlashInfer's form (state_t {o, m, d}), used by every
// kernel that computes or merges states: the amend kernel's online softmax (OnlineState, two rows
// of MMA fragments per lane), the combine's merges (OnlineState of one row, AttnState ⊕), and
// through them prefill, which runs those two kernels.
//
// Base 2 inside: a state's LSE is l2 = L·log2(e) and the logits are x = s·q·k·log2(e), so every
// exponential is exp2f; the natural log is restored at each boundary (lse_from_log2 and
// lse_to_log2, mac/semantics.hpp).
//
// Rounding: every floating-point operation here is an explicit round-to-nearest intrinsic
// (__fadd_rn, __fsub_rn, __fmul_rn, __fmaf_rn, __frcp_rn; exp2f and log2f are library calls).
// nvcc never contracts these into an FMA, splits or re-associates them, so the roundings are the
// ones written, in every kernel that instantiates this and whatever code surrounds it. A product
// that is summed is fused where written (__fmaf_rn: one rounding) and nowhere else. Two results
// depend on it:
//  - an ineligible row of a MAC step gives full attention's bits: the combine merges its partial
//    states in the general kernel, full attention in the lean all-only kernel, and every merge
//    must round alike in both (were `d·α + Σp` or `c_a·o_a + c_b·o_b` contracted in one kernel and
//    not in the other, the rows would differ in the last bit);
//  - the split of a reduction does not depend on the kernel that runs it: the amend kernel's copy
//    variants (cp.async, bulk) are separate instantiations of one online softmax, and the
//    combine's 2-, 4-, 8- and 16-warp kernels merge shares of one item sequence.
// Everything here is inlined (no call is left in the machine code). absorb and the AttnState
// wrappers are __forceinline__; merge, normalize, lse2 and the constructor are ordinary inline
// functions, inlined after the optimiser has simplified them on their own: forced, they are
// inlined earlier and the combine's blocks come out in another order (the same operations).
#include <cuda_runtime.h>

namespace mac::cuda::detail {

/*! \brief A normalised attention state in base 2, V output values per lane: `o` this lane's
 *  values of the normalised output, `l2` the base-2 LSE; −inf (or NaN) is the empty state.
 *  Empty ⊕ empty is (0, −inf), never NaN (docs/semantics.md §2). */
template <int V>
struct AttnState {
  float l2;
  float o[V];

  __device__ __forceinline__ bool empty() const { return !(l2 > -INFINITY); }

  /*! \brief this ← this ⊕ b: `μ = max(l_a, l_b)`, `l = μ + log2(2^(l_a−μ) + 2^(l_b−μ))`,
   *  `o = 2^(l_a−l)·o_a + 2^(l_b−l)·o_b` (the sum one fused multiply-add); an empty side
   *  yields the other. */
  __device__ __forceinline__ void merge(const AttnState& b) { merge(b.l2, b.o); }
  /*! \brief this ← this ⊕ (lb, ob), the same with b's parts apart. */
  __device__ inline void merge(float lb, const float* ob) {
    const bool ea = empty(), eb = !(lb > -INFINITY);
    if (eb) {
      if (ea) {
        l2 = -INFINITY;
#pragma unroll
        for (int i = 0; i < V; ++i) o[i] = 0.f;
      }
      return;
    }
    if (ea) {
      l2 = lb;
#pragma unroll
      for (int i = 0; i < V; ++i) o[i] = ob[i];
      return;
    }
    const float mu = fmaxf(l2, lb);
    const float wa = exp2f(__fsub_rn(l2, mu)), wb = exp2f(__fsub_rn(lb, mu));
    const float l = __fadd_rn(mu, log2f(__fadd_rn(wa, wb)));
    const float ca = exp2f(__fsub_rn(l2, l)), cb = exp2f(__fsub_rn(lb, l));
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = __fmaf_rn(ca, o[i], __fmul_rn(cb, ob[i]));
    l2 = l;
  }
};

/*! \brief The fields of OnlineState. Their order changes no result, only the order in which
 *  the compiler numbers the registers it promotes them to, which ptxas's allocation follows; each
 *  order below gives its kernels (two rows: amend, one row: combine) the machine code they were
 *  measured with (scripts/sass_diff.py compares it). AttnState's l2-first order likewise. */
template <int V, int R>
struct OnlineFields {
  float d[R], m[R];
  float o[R * V];
};
template <int V>
struct OnlineFields<V, 1> {
  float m[1], d[1];
  float o[V];
};

/*! \brief States under construction (FlashInfer's state_t {o, m, d}) of R rows, V output
 *  values of each per lane: `m[r]` the largest base-2 logit (or LSE) row r took in so far, −inf
 *  while empty; `d[r]` = Σ 2^(x − m[r]) over what it took in (in the amend kernel: this lane's
 *  share, summed over the row's lanes before lse2/normalize); its values Σ 2^(x − m[r])·v_i,
 *  unnormalised, at o[at(r, i)]. R = 1 in the combine; R = 2 in the amend kernel, whose lane
 *  holds two rows of the MMA accumulator (m16n8k16: values 2n, 2n + 1 of row r at
 *  o[4n + 2r], o[4n + 2r + 1], so o + 4n is n-tile n's fragment). All rows start empty (m = −inf,
 *  d = 0, o = 0). Two ways in: merge() takes a normalised state, absorb() raw logits whose P·V
 *  the caller adds to o. */
template <int V, int R = 1>
struct OnlineState : OnlineFields<V, R> {
  static_assert(R == 1 || (R == 2 && V % 2 == 0), "one row, or two rows of MMA fragments");
  using OnlineFields<V, R>::m;
  using OnlineFields<V, R>::d;
  using OnlineFields<V, R>::o;

  /*! \brief Index of value i of row r in o. */
  __device__ static constexpr int at(int r, int i) {
    return R == 1 ? i : i / 2 * 4 + 2 * r + i % 2;
  }

  __device__ OnlineState() {
#pragma unroll
    for (int i = 0; i < R * V; ++i) o[i] = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) m[r] = -INFINITY;
#pragma unroll
    for (int r = 0; r < R; ++r) d[r] = 0.f;
  }

  /*! \brief Takes a normalised state (l2_b, o_b) into row 0 (the combine's in-order merge):
   *  when l2_b raises the maximum, d and o are first rescaled by `2^(m − l2_b)` (m = −inf: by
   *  0); then `w = 2^(l2_b − m)`, `d += w`, `o += w·o_b` (fused). An empty (or NaN) side is
   *  ignored. */
  __device__ void merge(float l2_b, const float* o_b) {
    static_assert(R == 1, "merge: one row");
    if (!(l2_b > -INFINITY)) return;
    if (l2_b > m[0]) {
      const float a = exp2f(__fsub_rn(m[0], l2_b));
      d[0] = __fmul_rn(d[0], a);
#pragma unroll
      for (int i = 0; i < V; ++i) o[i] = __fmul_rn(o[i], a);
      m[0] = l2_b;
    }
    const float w = exp2f(__fsub_rn(l2_b, m[0]));
    d[0] = __fadd_rn(d[0], w);
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = __fmaf_rn(w, o_b[i], o[i]);
  }

  /*! \brief Takes K logits of a tile into row r (base 2, −inf where masked), whose largest over
   *  the whole row (all lanes sharing it) is `x_max`: `m' = max(m, x_max)`, `α = 2^(m − m')`,
   *  x ← `p = 2^(x − m')` in place (for the caller's P·V), `d ← α·d + Σ p` (fused; Σ p from 0
   *  in index order), `o ← α·o`. While the row stays empty (m' = −inf) p = 0 and α = 1, so a
   *  fully masked tile changes nothing. */
  template <int K>
  __device__ __forceinline__ void absorb(int r, float (&x)[K], float x_max) {
    const float m_new = fmaxf(m[r], x_max);
    float alpha = 1.f, sum = 0.f;
    if (m_new == -INFINITY) {
#pragma unroll
      for (int i = 0; i < K; ++i) x[i] = 0.f;
    } else {
      alpha = exp2f(__fsub_rn(m[r], m_new));
#pragma unroll
      for (int i = 0; i < K; ++i) {
        x[i] = exp2f(__fsub_rn(x[i], m_new));
        sum = __fadd_rn(sum, x[i]);
      }
    }
    m[r] = m_new;
    d[r] = __fmaf_rn(alpha, d[r], sum);
#pragma unroll
    for (int i = 0; i < V; ++i) o[at(r, i)] = __fmul_rn(alpha, o[at(r, i)]);
  }

  /*! \brief Row r is empty iff nothing with weight was taken in (d = 0). */
  __device__ bool empty(int r = 0) const { return !(d[r] > 0.f); }
  /*! \brief Row r's base-2 LSE (lse2_of). */
  __device__ float lse2(int r = 0) const { return lse2_of(m[r], d[r]); }
  /*! \brief Row r's normalised output values, `o[i] · (1/d)` (0 when empty). */
  __device__ void normalize(float* out, int r = 0) const {
    const float inv = inv_of(d[r]);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = __fmul_rn(o[at(r, i)], inv);
  }
  /*! \brief The base-2 LSE of a row with maximum m and denominator d, `m + log2(d)`; −inf
   *  when d = 0 (empty). For a row whose d is summed over lanes first (amend kernel). */
  __device__ __forceinline__ static float lse2_of(float m, float d) {
    return !(d > 0.f) ? -INFINITY : __fadd_rn(m, log2f(d));
  }
  /*! \brief The factor that normalises a row's values, 1/d (0 when d = 0: empty). */
  __device__ __forceinline__ static float inv_of(float d) {
    return !(d > 0.f) ? 0.f : __frcp_rn(d);
  }
};

}  // namespace mac::cuda::detail
