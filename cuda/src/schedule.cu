// The schedule kernel (docs/semantics.md §3, "schedule"): K2's work items decided on the device (no
// host round trip) by one block, for steps whose amend kernel does not schedule its own items
// (ScheduleMode::kKernel, or tables too large for its shared memory; self_schedule.cuh
// computes the same thing): the step's item size, per group (row, KV head) the key ranges and item
// count, an exclusive scan into group_off and the item → group table (the halves in schedule.cuh).
// The split follows each group's span (misses: the whole context; all-hit groups: band + tail +
// sinks).
#include <climits>

#include "launch.hpp"
#include "schedule.cuh"

namespace mac::cuda::detail {

/*! \brief The schedule, one block: rows and groups into the workspace, then the item →
 *  group table. (The amend kernel's item counter, work[kWorkClaims], is reset by the combine of the
 *  step before, as for a self-scheduled step.) */
__global__ void __launch_bounds__(1024) schedule_kernel(const KParams p) {
  constexpr int kThreads = 1024;
  wait_prior_grid_then_release_next();  // in a MAC step, K1's plans are read below
  const int tid = threadIdx.x, ng = p.N * p.Hkv;
  StepCuts cuts = schedule_rows<kThreads>(p, true, [](int, const RowInfo&) {});
  // The row tables are read again per group (L1 hits after the rows' half).
  const int total = schedule_groups<kThreads>(
      p, cuts,
      [&](int gi) {
        const int row = gi / p.Hkv, hk = gi % p.Hkv;
        // The group's earliest band start, read beside the row's loads rather than after
        // them (K1 writes a plan for every head of a MAC step; used only if eligible).
        const int band_lo = p.mode == kModeMac ? group_band_lo(p, row, hk) : INT_MAX;
        const RowInfo ri = row_info(p, row);
        const GroupDesc g = make_group(ri.valid ? ri.m : -1, ri.eligible, band_lo, p.r, p.F);
        p.groups[gi] = g;
        return GroupOf{g, ri.eligible != 0};
      },
      [&](int gi, int first) { p.group_off[gi] = first; });
  if (tid == 0) {
    p.group_off[ng] = total;
    store_cuts(p, cuts);
  }
  __syncthreads();  // group_off complete and visible to the block
  // Item → group table, one warp per group, coalesced.
  const int lane = tid & 31;
  for (int gi = tid >> 5; gi < ng; gi += kThreads >> 5) {
    const int off = __ldcg(p.group_off + gi), cnt = __ldcg(p.group_off + gi + 1) - off;
    for (int k = lane; k < cnt; k += 32) p.item_group[off + k] = gi;
  }
}

cudaError_t launch_schedule(const KParams& p, bool pdl, cudaStream_t s) {
  return launch_kernel(schedule_kernel, 1, 1024, 0, s, pdl, p);
}

}  // namespace mac::cuda::detail
