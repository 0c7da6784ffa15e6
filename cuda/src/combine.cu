// Combine (docs/semantics.md §3 steps 3–5): merges K2's partial states of each (row, query head) in
// item order into prefix ⊕ band (the new ring entry), sinks and tail, and
// out = (entry ⊕ sink) ⊕ tail. K3 (the ring write of entry(m) into slot m mod M, only if
// ready) runs here when fused, or alone in a side-stream launch of the same kernel.
// Rows that are not eligible merge their items in key order (in contiguous shares, one per
// warp, then the shares in order), exactly as full attention does, so their output is
// bit-identical to it.
#include "launch.hpp"
#include "ptx.cuh"

namespace mac::cuda::detail {

/*! \brief Warps per (row, head): sixteen or eight keep the merge chains short when there are
 *  few heads (small batch), two keep the whole grid resident when there are many. Sixteen
 *  only up to 64 heads (batch 1 and 2 at Hq = 32: measured faster there, level at 128,
 *  against eight; the general kernel holds one 512-thread block per SM) and
 *  where their shares fit the static shared memory (D ≤ 128). A function of N·Hq and D alone,
 *  so full attention and MAC steps of one batch merge in the same order. */
inline int combine_warps(int heads, int D) {
  return heads <= 64 && D <= 128 ? 16 : heads <= 512 ? 8 : heads <= 1024 ? 4 : 2;
}

/*! \brief bf16 value i of consecutive values held as 32-bit pairs (ld_now): the lower
 *  address in the lower half. */
__device__ __forceinline__ uint16_t bf16_of_pairs(const uint32_t* w, int i) {
  return static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2)));
}

/*! \brief The four merges of one warp's share of a head's items, as normalised base-2 states
 *  in shared memory: all (full attention, ineligible rows), sinks, band, tail. */
template <int D, int kWarps>
struct CombineShare {
  float o[4][kWarps][D];
  float l2[4][kWarps];
};

// kAllOnly: full attention, where every row is ineligible and only the in-order merge of
// all items is needed: a quarter of the accumulators, so twice the resident blocks. Its
// merge of `all` is the same sequence of the same (uncontracted, state.cuh) operations
// as in the general kernel, so ineligible MAC rows stay bit-identical to full attention.
template <int D, bool kAllOnly, int kCombineWarps>
__global__ void __launch_bounds__(32 * kCombineWarps,
                                  (kAllOnly && D <= 128 ? 32 : 16) / kCombineWarps)
    combine_kernel(const KParams p, int k3_only) {
  constexpr int V = D / 32;  // dims per lane, contiguous
  // One block per (row, query head); its warps merge contiguous shares of the head's
  // items, then each merge's shares are merged in warp order (below). The order is fixed by
  // the item count alone, so full attention and ineligible MAC rows still merge identically.
  wait_prior_grid_then_release_next();  // the amend kernel's partial states are read below
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wid = blockIdx.x;
  // The amend kernel has finished: its item counter is reset for the next step here, the
  // one place that does (every step that runs the amend kernel ends with this kernel; the
  // workspace starts zeroed).
  if (!k3_only && wid == 0 && threadIdx.x == 0) p.work[kWorkClaims] = 0;
  if (wid >= p.N * p.Hq) return;
  const int row = wid / p.Hq, h = wid % p.Hq, hk = h / p.G, gl = h % p.G;
  // Every load before the merge loop goes out in one round trip: the row, the step's cuts,
  // the group's ranges and first item, and (warp 0, MAC steps) the K1 plan, the prefix
  // snapshot and q̃, which it uses only after the merges. No address depends on a loaded
  // value (a group's entries, a head's plan and snapshot exist for an invalid or ineligible
  // row too), and ld_now keeps the compiler from issuing them after the branches on the row
  // below: as plain loads, they went out in three or four dependent rounds.
  const int gi = row * p.Hkv + hk;
  const int64_t oh = static_cast<int64_t>(row) * p.Hq + h;
  // Where this head's output and LSE go (the caller's strides). The LSE offset is computed
  // where stored: held through the merges, it made the D = 128 all-only kernel spill.
  const int64_t out_at = row * p.out_row_stride + h * p.out_head_stride;
  auto lse_at = [&] { return row * p.lse_row_stride + h * p.lse_head_stride; };
  const RowInfo ri = ld_now(p.rows + row);
  const StepCuts cuts = load_cuts<true>(p);
  const GroupDesc g = ld_now(p.groups + gi);
  const int off = ld_now(p.group_off + gi), cnt = ld_now(p.group_off + gi + 1) - off,
            items = ld_now(p.group_off + p.N * p.Hkv);
  HeadPlan plan = miss_plan(g.sink_end);  // prefill rows: no K1 decision
  uint32_t snap_w[V / 2], q_w[V / 2];     // V bf16 values of this lane, as pairs
  float snap_l2 = -INFINITY;
  if constexpr (!kAllOnly) {
    if (warp == 0) {
      if (p.mode == kModeMac) {
        plan = ld_now(p.plans + oh);
        snap_l2 = ld_now(p.snap_lse2 + oh);
        const uint32_t* src = reinterpret_cast<const uint32_t*>(p.snap_o + oh * D + lane * V);
#pragma unroll
        for (int i = 0; i < V / 2; ++i) snap_w[i] = ld_now(src + i);
      }
      if (p.mode != kModeFull) {  // q_pre is given in MAC and prefill steps
        const uint32_t* src = reinterpret_cast<const uint32_t*>(p.q_pre + row * p.q_row_stride +
                                                                h * p.q_head_stride + lane * V);
#pragma unroll
        for (int i = 0; i < V / 2; ++i) q_w[i] = ld_now(src + i);
      }
    }
  }
  const bool want_out = !k3_only && p.mode != kModePrefill;
  if (!ri.valid) {
    if (want_out && warp == 0) {
      const float nan = __int_as_float(0x7fc00000);
#pragma unroll
      for (int i = 0; i < V; ++i) p.out[out_at + lane * V + i] = float_to_bf16_bits(nan);
      if (lane == 0) {
        if (p.lse) p.lse[lse_at()] = nan;
        if (p.diag_hit) p.diag_hit[oh] = 0;
        if (p.diag_match_pos) p.diag_match_pos[oh] = -1;
        if (p.diag_d2) p.diag_d2[oh] = nan;
        if (p.diag_keys_read) p.diag_keys_read[oh] = 0;
      }
    }
    return;
  }
  const bool write_entry =
      (p.mode == kModePrefill || (p.mode == kModeMac && ri.ready)) && (k3_only || p.k3_in_combine);
  if (k3_only && !write_entry) return;

  const bool want_all = !ri.eligible && want_out;
  // Final states of the four merges (normalised, base 2), as warp 0 uses them below.
  AttnState<V> all_s, sink_s, band_s, tail_s;
  {
    OnlineState<V> all, sink, band, tail;  // this warp's share of each merge
    // Sixteen warps share a group's items only when it has more than sixteen; with fewer,
    // the first eight take them as the eight-warp kernel does (the same shares and merges),
    // and the others' shares are empty: a short all-hit group pays no longer finish for them.
    const bool sixteen = kCombineWarps > 8 && cnt > kCombineWarps;     // uniform in the block
    const int nw = kCombineWarps > 8 && !sixteen ? 8 : kCombineWarps;  // warps with a share
    // Below sixteen warps every warp has a share (nw = kCombineWarps): no test in those kernels.
    const bool has_share = kCombineWarps <= 8 || warp < nw;
    const int k_lo = has_share ? warp * cnt / nw : cnt,
              k_hi = has_share ? (warp + 1) * cnt / nw : cnt;
    // The category of each item follows from the group's counts, computed once per warp.
    const GroupCounts n = group_counts(g, cuts.of(ri.eligible != 0));
    // Loads of U items are issued before their (ordered) merges: the merge order stays the
    // item order, the memory latency is paid once per U items (the chain that sets a short
    // step's combine time: 32 items per warp at batch 1, 127K, Hkv 4).
    constexpr int U = D <= 128 ? 8 : 4;
    // The combine is the partials' last reader unless K3 runs beside it on the side stream
    // (which reads the band partials too). Where it drops their lines: parts_discard_auto.
    const bool discard = parts_dropped(p, items, cuts.elig.C, D);
    for (int k0 = k_lo; k0 < k_hi; k0 += U) {
      float l2[U];
      float o[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = k0 + u < k_hi ? k0 + u : k_hi - 1;
        const int64_t pi = static_cast<int64_t>(off + k) * p.G + gl;
        l2[u] = p.part_lse2[pi];
        const float* src = p.part_o + pi * D + lane * V;
        if constexpr (V % 4 == 0) {
#pragma unroll
          for (int i = 0; i < V; i += 4)
            *reinterpret_cast<float4*>(&o[u][i]) = *reinterpret_cast<const float4*>(src + i);
        } else {
#pragma unroll
          for (int i = 0; i < V; i += 2)
            *reinterpret_cast<float2*>(&o[u][i]) = *reinterpret_cast<const float2*>(src + i);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = k0 + u;
        if (k >= k_hi) break;
        if (want_all) all.merge(l2[u], o[u]);
        if constexpr (!kAllOnly) {
          const int cat = item_cat(n, k);
          if (cat == kCatSink)
            sink.merge(l2[u], o[u]);
          else if (cat == kCatBand)
            band.merge(l2[u], o[u]);
          else
            tail.merge(l2[u], o[u]);
        }
      }
    }
    if (discard) {
      // This warp's share of partial rows is dead (the next step's amend kernel rewrites
      // every row it reads): their L2 lines are dropped without a write-back, so partial
      // states that never left L2 cost DRAM nothing. The merges above have consumed every
      // lane's loads, and the warp barrier orders the other lanes' reads of a line before
      // its owner's discard. Rows are 4·D bytes at 256-byte aligned offsets: whole lines.
      __syncwarp();
      if ((lane * V * 4) % 128 == 0) {
        const float* line = p.part_o + (static_cast<int64_t>(off + k_lo) * p.G + gl) * D + lane * V;
        for (int k = k_lo; k < k_hi; ++k, line += p.G * D) discard_l2_line(line);
      }
    }
    __shared__ CombineShare<D, kCombineWarps> share;
    auto stash = [&](int c, const OnlineState<V>& a) {
      float t[V];
      a.normalize(t);
#pragma unroll
      for (int i = 0; i < V; ++i) share.o[c][warp][lane * V + i] = t[i];
      if (lane == 0) share.l2[c][warp] = a.lse2();
    };
    constexpr int kCats = kAllOnly ? 1 : 4;
    stash(0, all);
    if constexpr (!kAllOnly) {
      stash(1, sink);
      stash(2, band);
      stash(3, tail);
    }
    __syncthreads();
    // The shares of each merge are merged in warp order. Sixteen shares are merged in two
    // levels, so that no warp's chain is longer than with eight: four runs of four consecutive
    // shares (each result back in its run's first slot), then those four slots. Full attention
    // and the general kernel take the same shares and levels (a function of the group's item
    // count) in the same order: ineligible rows keep full attention's bits.
    auto finish_shares = [&](int c, int w0, int n, int stride, float* o, float& l2) {
      OnlineState<V> m;
      for (int i = 0, w = w0; i < n; ++i, w += stride)
        m.merge(share.l2[c][w], &share.o[c][w][lane * V]);
      m.normalize(o);
      l2 = m.lse2();
    };
    // Parks a merge's result in share slot w0 of merge c (the first of the slots it merged).
    auto park = [&](int c, int w0, const float* o, float l2) {
      __syncwarp();  // every lane has read the merged slots before w0 is overwritten
#pragma unroll
      for (int i = 0; i < V; ++i) share.o[c][w0][lane * V + i] = o[i];
      if (lane == 0) share.l2[c][w0] = l2;
    };
    constexpr int kRun = 4;  // shares per first-level merge
    constexpr int kRuns =
        kCombineWarps > 8 ? kCombineWarps / kRun : 1;  // first-level merges per category
    if (sixteen) {
      for (int t = warp; t < kCats * kRuns; t += kCombineWarps) {
        const int c = t / kRuns, w0 = t % kRuns * kRun;
        float o[V], l;
        finish_shares(c, w0, kRun, 1, o, l);
        park(c, w0, o, l);
      }
      __syncthreads();
    }
    // The last level: by warp 0 alone in full attention, by warp c mod kCombineWarps for
    // merge c here (the four run side by side; each result goes back to its share slot 0).
    auto finish = [&](int c, float* o, float& l2) {
      if (sixteen)
        finish_shares(c, 0, kRuns, kRun, o, l2);
      else
        finish_shares(c, 0, nw, 1, o, l2);
    };
    if constexpr (kAllOnly) {
      if (warp != 0) return;
      finish(0, all_s.o, all_s.l2);
    } else {
      for (int c = warp; c < kCats; c += kCombineWarps) {
        float o[V], l;
        finish(c, o, l);
        park(c, 0, o, l);
      }
      __syncthreads();
      if (warp != 0) return;
      auto load = [&](int c, AttnState<V>& s) {
#pragma unroll
        for (int i = 0; i < V; ++i) s.o[i] = share.o[c][0][lane * V + i];
        s.l2 = share.l2[c][0];
      };
      load(0, all_s);
      load(1, sink_s);
      load(2, band_s);
      load(3, tail_s);
    }
  }
  if constexpr (kAllOnly) {
#pragma unroll
    for (int i = 0; i < V; ++i) p.out[out_at + lane * V + i] = float_to_bf16_bits(all_s.o[i]);
    if (lane == 0 && p.lse) p.lse[lse_at()] = lse_from_log2(all_s.l2);
  } else {
    // entry(m) = prefix ⊕ band over [Fe(E(m)), E(m)).
    AttnState<V> entry = band_s;
    if (plan.hit) {
      AttnState<V> prefix;
#pragma unroll
      for (int i = 0; i < V; ++i) prefix.o[i] = bf16_bits_to_float(bf16_of_pairs(snap_w, i));
      prefix.l2 = snap_l2;
      prefix.merge(entry);  // prefix ⊕ band
      entry = prefix;
    }
    if (write_entry) {
      const int64_t ri_ = (static_cast<int64_t>(ri.slot) * p.M + ri.m % p.M) * p.Hq + h;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        p.ring_q[ri_ * D + lane * V + i] = bf16_of_pairs(q_w, i);
        p.ring_o[ri_ * D + lane * V + i] = float_to_bf16_bits(entry.o[i]);
      }
      if (lane == 0) p.ring_lse[ri_] = lse_from_log2(entry.l2);
    }
    if (!want_out) return;

    AttnState<V> res;
    if (!ri.eligible) {
      res = all_s;  // strictly in key order: identical to full attention
    } else {
      res = entry;
      res.merge(sink_s);  // entry ⊕ sink
      res.merge(tail_s);  // ⊕ tail
    }
#pragma unroll
    for (int i = 0; i < V; ++i) p.out[out_at + lane * V + i] = float_to_bf16_bits(res.o[i]);
    if (lane == 0) {
      if (p.lse) p.lse[lse_at()] = lse_from_log2(res.l2);
      if (p.diag_hit) p.diag_hit[oh] = static_cast<int8_t>(plan.hit);
      if (p.diag_match_pos) p.diag_match_pos[oh] = plan.match_pos;
      if (p.diag_d2) p.diag_d2[oh] = plan.d2;
      if (p.diag_keys_read)
        p.diag_keys_read[oh] =
            plan.hit ? (g.tail_begin - plan.band_begin) + g.sink_end + (g.end - g.tail_begin)
                     : g.end;
    }
  }
}

template <int D, bool kAllOnly>
cudaError_t launch_combine_d(const KParams& p, int k3_only, bool pdl, cudaStream_t s) {
  const int grid = p.N * p.Hq, warps = combine_warps(grid, D);
  if constexpr (D <= 128)
    if (warps == 16)
      return launch_kernel(combine_kernel<D, kAllOnly, 16>, grid, 512, 0, s, pdl, p, k3_only);
  if (warps == 8)
    return launch_kernel(combine_kernel<D, kAllOnly, 8>, grid, 256, 0, s, pdl, p, k3_only);
  if (warps == 4)
    return launch_kernel(combine_kernel<D, kAllOnly, 4>, grid, 128, 0, s, pdl, p, k3_only);
  return launch_kernel(combine_kernel<D, kAllOnly, 2>, grid, 64, 0, s, pdl, p, k3_only);
}

cudaError_t launch_combine(const KParams& p, bool k3_only, bool pdl, cudaStream_t s) {
  const int k3 = k3_only ? 1 : 0;
  if (p.mode == kModeFull && !k3_only) {  // only the in-order merge: the lean instantiation
    switch (p.D) {
      case 64: return launch_combine_d<64, true>(p, k3, pdl, s);
      case 128: return launch_combine_d<128, true>(p, k3, pdl, s);
      case 256: return launch_combine_d<256, true>(p, k3, pdl, s);
      default: return cudaErrorInvalidValue;
    }
  }
  switch (p.D) {
    case 64: return launch_combine_d<64, false>(p, k3, pdl, s);
    case 128: return launch_combine_d<128, false>(p, k3, pdl, s);
    case 256: return launch_combine_d<256, false>(p, k3, pdl, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace mac::cuda::detail
