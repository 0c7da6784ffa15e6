#pragma once
// The amend kernel's per-warp pieces around one item (CUTLASS's collective layer): the item
// descriptions of its loader pipeline, the query fragments and the partial-state write. The
// G query heads of the group are the 16 MMA rows; lane l holds rows g0 = l / 4 and g0 + 8
// (rr = 0, 1) and column pair q4 = l % 4 of every 8 (mma.sync m16n8k16 layout).
//
// Integer arguments are taken by reference, as the kernel's lambdas captured them: taken by
// value, the same code is register-allocated differently (ptxas output changes, not the
// result).
#include <cstdint>

#include "internal.cuh"
#include "ptx.cuh"

namespace mac::cuda::detail {

/*! \brief Which (row, KV head, key range) global item `item` is (row < 0: none left);
 *  ptrow: the row's page-table row (row_pt[row] in prefill mode, else row). */
struct ItemDesc {
  int item, row, ptrow, hk, a, b, cat, ntiles;
};

/*! \brief A claimed item (the claim id is the item id) whose group is loading; gi = −1 past
 *  the last item. */
struct Claimed {
  int item, gi;
};

/*! \brief Bit of Pending::ptrow_el that says whether the item's row is eligible (its items are
 *  cut at cuts.elig, else at cuts.exact): no register of its own through the pipeline, where
 *  the D = 256 kernel has none to spare (page-table rows are far below 2^30). */
constexpr int kEligBit = 1 << 30;

/*! \brief An item whose group description (and page-table row) is in flight. */
struct Pending {
  int c, gi, off, ptrow_el;
  GroupDesc g;
};

/*! \brief Q fragments of item `it` (A operand, 16 rows = query heads of the group, zero beyond
 *  G) and each row's first key (a hit head's band starts at its own E(p)). */
template <int D>
__device__ __forceinline__ void load_q(const KParams& p, const ItemDesc& it, const int& g0,
                                       const int& q4, uint32_t (&qf)[D / 16][4], int (&start)[2]) {
  constexpr int KS = D / 16;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int g = g0 + 8 * rr;
    const int h = it.hk * p.G + g;
    if (g < p.G && it.row >= 0) {
      const uint32_t* q = reinterpret_cast<const uint32_t*>(p.q_post + it.row * p.q_row_stride +
                                                            h * p.q_head_stride);
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        qf[kk][rr] = __ldg(q + kk * 8 + q4);
        qf[kk][rr + 2] = __ldg(q + kk * 8 + 4 + q4);
      }
      int s0 = it.a;
      if (it.cat == kCatBand && p.mode == kModeMac) {
        const int bs = p.plans[it.row * p.Hq + h].band_begin;
        s0 = bs > s0 ? bs : s0;
      }
      start[rr] = s0;
    } else {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) qf[kk][rr] = qf[kk][rr + 2] = 0u;
      start[rr] = it.b;  // fully masked
    }
  }
}

/*! \brief Finalises item `item`: its normalised partial state per query head (o fp32 [G, D]
 *  at part_o, base-2 LSE at part_lse2; an item with no key of a head gives o = 0, −inf), once
 *  each row's denominator is summed over the four lanes that hold its columns (butterfly).
 *  parts_last: store with the evict_last L2 policy. */
template <int D>
__device__ __forceinline__ void write_partial(const KParams& p, const int& item, const int& g0,
                                              const int& q4, const bool& parts_last,
                                              const OnlineState<D / 4, 2>& st) {
  using State = OnlineState<D / 4, 2>;
  constexpr int NT = D / 8;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    // Sums of two sums, nothing to contract: plain adds, which ptxas folds into the emptiness
    // test below (`a + b > 0` as `a > −b`, exact in round-to-nearest); __fadd_rn would keep the
    // add.
    float l = st.d[rr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int g = g0 + 8 * rr;
    if (g < p.G) {
      const float inv = State::inv_of(l);
      const int64_t base = (static_cast<int64_t>(item) * p.G + g);
      float* po = p.part_o + base * D;
      const float lse2 = State::lse2_of(st.m[rr], l);
      if (parts_last) {  // uniform: two copies of the stores
        const uint64_t pol = parts_evict_last_policy();
#pragma unroll
        for (int n = 0; n < NT; ++n)
          st_cache_hint(reinterpret_cast<float2*>(po + n * 8 + q4 * 2),
                        make_float2(__fmul_rn(st.o[State::at(rr, 2 * n)], inv),
                                    __fmul_rn(st.o[State::at(rr, 2 * n + 1)], inv)),
                        pol);
        if (q4 == 0) st_cache_hint(p.part_lse2 + base, lse2, pol);
      } else {
#pragma unroll
        for (int n = 0; n < NT; ++n)
          *reinterpret_cast<float2*>(po + n * 8 + q4 * 2) =
              make_float2(__fmul_rn(st.o[State::at(rr, 2 * n)], inv),
                          __fmul_rn(st.o[State::at(rr, 2 * n + 1)], inv));
        if (q4 == 0) p.part_lse2[base] = lse2;
      }
    }
  }
}

}  // namespace mac::cuda::detail
