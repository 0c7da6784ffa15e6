// K1 match (docs/semantics.md §3 steps 1–2, §3.1) and the device-side schedule of K2's work items.
#include <cooperative_groups.h>

#include <climits>

#include "launch.hpp"
#include "schedule.cuh"

namespace mac::cuda::detail {

/*! \brief (d2, p) ordering of the reference: smaller d2 first, a NaN never displaces a
 *  number, ties (and NaN vs NaN) go to the older (smaller) position. */
__device__ inline bool better(float da, int pa, float db, int pb) {
  const bool na = isnan(da), nb = isnan(db);
  if (na != nb) return nb;  // a number beats NaN
  if (!na && da != db) return da < db;
  return pa < pb;
}

// Cluster barrier halves (PTX barrier.cluster): every thread of the cluster arrives, a thread
// that waits returns once every non-exited thread of the cluster has arrived. Release on
// arrival and acquire on the wait order distributed-shared-memory stores before the wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/*! \brief K1 for one block: share z of the candidates of (row, query head h). The `splits`
 *  blocks of a head are one thread-block cluster; each scans a contiguous share and writes
 *  its winner into block 0's shared memory, and block 0 reduces the shares' winners there
 *  (no global round trip), checks validity and writes the plan. With splits > 1 the caller
 *  has arrived at the cluster barrier on entry (match_kernel). The argmin is a lexicographic
 * minimum, so the split never changes a decision. Returns with the whole cluster (every exit is
 *  uniform over the row, hence over the cluster). */
template <int D>
__device__ void match_share(const KParams& p, int h, int row, int z, int splits) {
  constexpr int LANES = D / 8;  // lanes per candidate (canonical order, docs/semantics.md §3.1)
  constexpr int CPP = 256 / LANES;  // candidates per pass of the block
  constexpr int UNROLL = 4;
  const int tid = threadIdx.x;
  const int64_t oh = static_cast<int64_t>(row) * p.Hq + h;
  RowInfo ri = row_info_first(p, row);  // readiness: below, in the scan's round trip
  const int m = ri.m;
  const int tail_begin = ri.valid ? prefix_end(m, p.r) : 0;
  HeadPlan plan = miss_plan(sink_end(p.F, tail_begin));
  __shared__ float s_d2[256 / 32];
  __shared__ int s_p[256 / 32];
  __shared__ int s_best;
  __shared__ float s_win_d2[kMaxK1Splits];  // block 0: each share's winner, written by its block
  __shared__ int s_win_p[kMaxK1Splits];
  // The scan needs only m and the slot (row_info's first round), not readiness: the
  // readiness words are loaded beside the query and the ring and compared only after the
  // loop, so the block waits for two round trips before its distances, not four (as one
  // row_info call, ready[slot] and then the epochs were each waited for here). An ineligible
  // row's scan is discarded (default plan).
  if (!ri.valid || m < 1) {
    if (z == 0 && tid == 0) p.plans[oh] = plan;
    return;
  }
  const RowReadyWords ready_words = row_ready_issue(p, ri);
  const int sl = ri.slot;
  const int l = tid % LANES, cgrp = tid / LANES;
  float q[8];
  {
    const uint4 v = *reinterpret_cast<const uint4*>(p.q_pre + row * p.q_row_stride +
                                                    h * p.q_head_stride + 8 * l);
    const uint16_t* b = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = bf16_bits_to_float(b[i]);
  }
  const int first = m - p.M > 0 ? m - p.M : 0;
  const int share = (m - first + splits - 1) / splits;
  const int lo = first + z * share, hi = min(m, lo + share);
  float best_d = __int_as_float(0x7fc00000);
  int best_p = 0x7fffffff;
  const uint16_t* ring =
      p.ring_q + (static_cast<int64_t>(sl) * p.M) * p.Hq * D + static_cast<int64_t>(h) * D + 8 * l;
  for (int base = lo; base < hi; base += CPP * UNROLL) {
    uint4 v[UNROLL];
    int pos[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      pos[u] = base + u * CPP + cgrp;
      const int pc = pos[u] < hi ? pos[u] : hi - 1;
      v[u] = *reinterpret_cast<const uint4*>(ring + static_cast<int64_t>(pc % p.M) * p.Hq * D);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const uint16_t* b = reinterpret_cast<const uint16_t*>(&v[u]);
      float acc = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float diff = q[i] - bf16_bits_to_float(b[i]);
        acc = fmaf(diff, diff, acc);
      }
#pragma unroll
      for (int off = LANES / 2; off >= 1; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      if (pos[u] < hi && better(acc, pos[u], best_d, best_p)) {
        best_d = acc;
        best_p = pos[u];
      }
    }
  }
  row_ready_finish(p, ri, ready_words);
  if (!ri.eligible) {  // uniform over the block: every thread leaves here
    if (z == 0 && tid == 0) p.plans[oh] = plan;
    return;
  }
  // Lexicographic min over the block (order-independent, so any reduction tree works).
#pragma unroll
  for (int off = 16; off >= LANES && off >= 1; off >>= 1) {
    const float od = __shfl_xor_sync(0xffffffffu, best_d, off);
    const int op = __shfl_xor_sync(0xffffffffu, best_p, off);
    if (better(od, op, best_d, best_p)) {
      best_d = od;
      best_p = op;
    }
  }
  if ((tid & 31) == 0) {
    s_d2[tid >> 5] = best_d;
    s_p[tid >> 5] = best_p;
  }
  __syncthreads();
  if (tid == 0) {  // the block's winner, in thread 0
    for (int w = 1; w < 8; ++w)
      if (better(s_d2[w], s_p[w], best_d, best_p)) {
        best_d = s_d2[w];
        best_p = s_p[w];
      }
  }
  if (splits > 1) {
    // The cluster's winners meet in block 0's shared memory: once the whole cluster has
    // started (the barrier phase every thread arrived at on entry, long complete by now),
    // each block's thread 0 writes its winner into block 0's slot for its share (distributed
    // shared memory), and every thread arrives at the next phase with release semantics. The
    // other blocks then leave; block 0 waits with acquire and reduces the slots. One wait on
    // the critical path and no remote read: two full cluster barriers around remote reads
    // took ~1.5 µs of K1's 4.1 at batch 1.
    namespace cg = cooperative_groups;
    const cg::cluster_group cluster = cg::this_cluster();
    cluster_wait_acquire();
    if (tid == 0) {
      *cluster.map_shared_rank(&s_win_d2[z], 0) = best_d;
      *cluster.map_shared_rank(&s_win_p[z], 0) = best_p;
    }
    cluster_arrive_release();
    if (z != 0) return;
    cluster_wait_acquire();
    if (tid < 32) {
      const int w = tid < splits ? tid : 0;
      best_d = s_win_d2[w];
      best_p = s_win_p[w];
#pragma unroll
      for (int off = kMaxK1Splits / 2; off >= 1; off >>= 1) {
        const float od = __shfl_xor_sync(0xffffffffu, best_d, off);
        const int op = __shfl_xor_sync(0xffffffffu, best_p, off);
        if (better(od, op, best_d, best_p)) {
          best_d = od;
          best_p = op;
        }
      }
    }
  }
  if (tid == 0) s_best = best_d < p.thr ? best_p : -1;  // strict; NaN never hits
  __syncthreads();
  const int bp = s_best;
  if (bp < 0) {
    if (tid == 0) {
      plan.d2 = best_d;
      p.plans[oh] = plan;
    }
    return;
  }
  // The nearest entry is below the threshold. Its L (validity) and its prefix state are
  // read in the same round: the state is copied to the snapshot whether or not L makes it
  // a hit, and is used only on a hit (read before write: no K3 of this step has run yet).
  const int64_t entry = (static_cast<int64_t>(sl) * p.M + bp % p.M) * p.Hq + h;
  const float L = tid == 0 ? p.ring_lse[entry] : 0.f;  // issued before the copy waits
  if (tid < D / 8)
    reinterpret_cast<uint4*>(p.snap_o + oh * D)[tid] =
        reinterpret_cast<const uint4*>(p.ring_o + entry * D)[tid];
  if (tid == 0) {
    plan.d2 = best_d;
    // Argmin first, validity second: the nearest entry must be usable.
    const int ep = prefix_end(bp, p.r);
    if ((L > -INFINITY) && !(p.F > 0 && ep < p.F)) {
      plan.hit = 1;
      plan.match_pos = bp;
      plan.band_begin = ep;
      p.snap_lse2[oh] = lse_to_log2(L);
    }
    p.plans[oh] = plan;
  }
}

/*! \brief K1 over a grid (Hq, N, splits) of (head, row, share) blocks. */
template <int D>
__global__ void __launch_bounds__(256) match_kernel(const KParams p) {
  wait_prior_grid_then_release_next();  // first of a step: lets the next kernel launch early
  // The cluster barrier's first phase: waited for before the first distributed-shared-memory
  // access (match_share), so that every block of the cluster has started by then.
  if (gridDim.z > 1) cluster_arrive_relaxed();
  match_share<D>(p, blockIdx.x, blockIdx.y, blockIdx.z, gridDim.z);
}

template <int D>
cudaError_t prepare_match_d() {
  // The blocks of a cluster are spread over SMs rather than packed into few: measured, MAC
  // steps at batch 1 and 2 0.5–2.7 % faster, K1 alone 1–2 %, against the default policy.
  return cudaFuncSetAttribute(match_kernel<D>, cudaFuncAttributeClusterSchedulingPolicyPreference,
                              cudaClusterSchedulingPolicySpread);
}

cudaError_t prepare_match(int D) {
  switch (D) {
    case 64: return prepare_match_d<64>();
    case 128: return prepare_match_d<128>();
    case 256: return prepare_match_d<256>();
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_match(const KParams& p, cudaStream_t s) {
  const dim3 grid(p.Hq, p.N, p.k1_splits);
  const unsigned cluster = static_cast<unsigned>(p.k1_splits);  // ≤ kMaxK1Splits
  switch (p.D) {
    case 64: return launch_clustered(match_kernel<64>, grid, 256, 0, s, cluster, p);
    case 128: return launch_clustered(match_kernel<128>, grid, 256, 0, s, cluster, p);
    case 256: return launch_clustered(match_kernel<256>, grid, 256, 0, s, cluster, p);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace mac::cuda::detail
