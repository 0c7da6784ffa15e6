#pragma once
// The two halves of the device-side schedule of K2's work items, shared by its two users: the
// schedule kernel (match.cu, one block, results in the workspace) and the amend kernel's
// self_schedule (amend_impl.cuh, every block, results in its shared memory). Same inputs,
// same helpers, hence the same items and bits either way; what each user keeps of a row or a
// group is its own callback.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "internal.cuh"

namespace mac::cuda::detail {

/*! \brief Rows' half: every row's RowInfo, handed to `keep(row, ri)`, and the step's cut from
 *  their keys (Σ Hkv·kv_len over valid rows: the step's full-attention work). `writer`: this
 *  block also stores the rows and the cut (work[0], work[2]) where the combine reads them
 *  and raises the error flags of invalid rows. Block-wide; returns the cut to every thread. */
template <int kThreads, class Keep>
__device__ Cut schedule_rows(const KParams& p, bool writer, Keep keep) {
  using Sum = cub::BlockReduce<long long, kThreads>;
  __shared__ typename Sum::TempStorage tmp;
  __shared__ Cut s_cut;
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
  if (tid == 0) {
    s_cut = step_cut(keys, p.warps_total, p.chunk);
    if (writer) {
      p.work[0] = s_cut.C;
      p.work[2] = s_cut.lg;
    }
  }
  __syncthreads();
  return s_cut;
}

/*! \brief Groups' half: each group's ranges `group(gi)` (a GroupDesc, which the callback may
 *  also store), its item count under `cut`, and the exclusive scan of the counts: group gi's
 *  first item, handed to `keep(gi, first_item)`. Block-wide; returns the step's item total
 *  to every thread. */
template <int kThreads, class Group, class Keep>
__device__ int schedule_groups(const KParams& p, const Cut cut, Group group, Keep keep) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int carry;
  const int tid = threadIdx.x, ng = p.N * p.Hkv;
  if (tid == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < ng; base += kThreads) {
    const int gi = base + tid;
    int cnt = 0;
    if (gi < ng) cnt = group_item_count(group(gi), cut);
    int excl, agg;
    Scan(tmp).ExclusiveSum(cnt, excl, agg);
    if (gi < ng) keep(gi, carry + excl);
    __syncthreads();
    if (tid == 0) carry += agg;
    __syncthreads();
  }
  return carry;
}

}  // namespace mac::cuda::detail
