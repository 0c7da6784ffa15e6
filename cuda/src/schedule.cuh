#pragma once
// The two halves of the device-side schedule of K2's work items, shared by its two users: the
// schedule kernel (schedule.cu, one block, results in the workspace) and the amend kernel's
// self_schedule (self_schedule.cuh, every block, results in its shared memory). Same inputs,
// same helpers, hence the same items and bits either way; what each user keeps of a row or a
// group is its own callback.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "internal.cuh"

namespace mac::cuda::detail {

/*! \brief Rows' half: every row's RowInfo, handed to `keep(row, ri)`, and the step's cuts
 *  from their keys (Σ Hkv·kv_len over valid rows: the step's full-attention work). `writer`:
 *  this block also stores the rows where the combine reads them and raises the error flags of
 *  invalid rows (the cuts are stored after the groups' half, which may change the eligible
 *  one: store_cuts). Block-wide; returns the cuts to every thread. */
template <int kThreads, class Keep>
__device__ StepCuts schedule_rows(const KParams& p, bool writer, Keep keep) {
  using Sum = cub::BlockReduce<long long, kThreads>;
  __shared__ typename Sum::TempStorage tmp;
  __shared__ StepCuts s_cuts;
  const int tid = threadIdx.x;
  long long keys = 0;
  for (int row = tid; row < p.N; row += kThreads) {
    const RowInfo ri = row_info(p, row);
    keep(row, ri);
    if (ri.valid) keys += static_cast<long long>(ri.m + 1) * p.Hkv;
    if (writer) {
      p.rows[row] = ri;
      if (!ri.valid) report_row_error(p, row);
    }
  }
  keys = Sum(tmp).Sum(keys);
  if (tid == 0) s_cuts = step_cuts(keys, p.warps_total, p.chunk, p.D, p.mode == kModeMac);
  __syncthreads();
  return s_cuts;
}

/*! \brief Groups' half: each group's ranges and eligibility `group(gi)` (a GroupOf, which the
 *  callback may also store; asked for once per group), its item count under its row's cut,
 *  and the exclusive scan of the counts: group gi's first item, handed to
 *  `keep(gi, first_item)`. A MAC step of at most kFineMaxGroups groups, all
 *  of them all-hit (fine_ok), takes fine_cut of the eligible cut unless the config fixes the
 *  item size: the vote is taken in the same pass, before the counts. Block-wide; returns the
 *  step's item total to every thread and sets `cuts` to the step's cuts, read back from shared
 *  memory (held in registers as the vote's select, the cut made the D = 256 amend kernel spill
 *  40 bytes instead of 20). */
template <int kThreads, class Group, class Keep>
__device__ int schedule_groups(const KParams& p, StepCuts& cuts, Group group, Keep keep) {
  static_assert(kFineMaxGroups <= kThreads, "a fine step's groups fit one pass");
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int carry;
  __shared__ StepCuts s_cuts;
  const int tid = threadIdx.x, ng = p.N * p.Hkv;
  const bool may_fine = p.mode == kModeMac && p.chunk == 0 && ng <= kFineMaxGroups;  // one pass
  // Every thread has read the rows' half's shared results before thread 0 writes here: the
  // compiler may lay the two halves' shared variables over one another (compute-sanitizer
  // racecheck saw schedule_rows' s_cuts and this one at one address).
  __syncthreads();
  if (tid == 0) {
    carry = 0;
    s_cuts = cuts;
  }
  __syncthreads();
  for (int base = 0; base < ng; base += kThreads) {
    const int gi = base + tid;
    GroupOf go{{0, 0, 0, 0}, false};
    if (gi < ng) go = group(gi);
    if (may_fine && __syncthreads_and(fine_ok(go.g))) cuts.elig = fine_cut(cuts.elig);
    const int cnt = gi < ng ? group_item_count(go.g, cuts.of(go.el)) : 0;
    int excl, agg;
    Scan(tmp).ExclusiveSum(cnt, excl, agg);
    if (gi < ng) keep(gi, carry + excl);
    __syncthreads();
    if (tid == 0) {
      carry += agg;
      s_cuts = cuts;
    }
    __syncthreads();
  }
  cuts = s_cuts;
  return carry;
}

/*! \brief The step's cuts where the combine (and the amend kernel after the schedule kernel)
 *  reads them: load_cuts. One thread of the writing block, after schedule_groups.
 *  work[kWorkC] is the eligible rows' size, which Engine::last_chunk reports (the exact cut's
 *  in full and prefill steps). */
__device__ inline void store_cuts(const KParams& p, const StepCuts& cuts) {
  p.work[kWorkC] = cuts.elig.C;
  p.work[kWorkLgC] = cuts.elig.lg;
  p.work[kWorkCExact] = cuts.exact.C;
  p.work[kWorkLgCExact] = cuts.exact.lg;
}

}  // namespace mac::cuda::detail
