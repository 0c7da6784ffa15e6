#pragma once
// The amend kernel's own schedule (ScheduleMode::kAuto where its tables fit): the halves of
// schedule.cuh run by every block into its shared memory, so a step needs no schedule kernel.
#include <climits>

#include "schedule.cuh"

namespace mac::cuda::detail {

/*! \brief The shared-memory tables of a self-scheduled step (self_schedule_ints layout). */
struct SelfTables {
  int* off;         // [ng + 1] first item of each group; off[ng] = the step's items
  int* band_begin;  // [ng] band start of each group
  int* m;           // [N] position of each row, −1 if the row is invalid
  int* elig;        // [N] 1 if the row is eligible (MAC)
};

/*! \brief Group gi's ranges from the tables (the row's position, the band start as
 *  self_schedule clamped it) and whether its row is eligible (which cut it takes). */
__device__ inline GroupOf self_group(const KParams& p, const SelfTables& t, int gi) {
  const int row = gi / p.Hkv;
  GroupDesc g = make_group(t.m[row], false, 0, p.r, p.F);
  g.band_begin = t.band_begin[gi];
  return GroupOf{g, t.elig[row] != 0};
}

/*! \brief The step's schedule, computed by every block of the amend kernel into its own shared
 *  memory, so a step needs no schedule kernel and no item waits on a global lookup: the halves
 *  of the schedule kernel (schedule.cuh), hence the same items and bits. Block 0 also writes
 *  what the combine reads (rows, groups, group_off, the cuts: store_cuts) and the error
 *  flags. The rows' inputs are step inputs, complete before the step's first kernel
 *  started, so they are read before waiting for the kernel before this one (K1 in a MAC step);
 *  K1's plans after. Block-wide. */
template <int kThreads>
__device__ StepCuts self_schedule(const KParams& p, const SelfTables& t) {
  const int ng = p.N * p.Hkv;
  const bool writer = blockIdx.x == 0;
  StepCuts cuts = schedule_rows<kThreads>(p, writer, [&](int row, const RowInfo& ri) {
    t.m[row] = ri.valid ? ri.m : -1;
    t.elig[row] = ri.eligible;
  });
  wait_prior_grid_then_release_next();  // K1's plans are read below
  const int total = schedule_groups<kThreads>(
      p, cuts,
      [&](int gi) {
        const int row = gi / p.Hkv;
        const bool el = t.elig[row] != 0;
        const GroupDesc g =
            make_group(t.m[row], el, el ? group_band_lo(p, row, gi % p.Hkv) : INT_MAX, p.r, p.F);
        t.band_begin[gi] = g.band_begin;
        if (writer) p.groups[gi] = g;
        return GroupOf{g, el};
      },
      [&](int gi, int first) {
        t.off[gi] = first;
        if (writer) p.group_off[gi] = first;
      });
  if (threadIdx.x == 0) {
    t.off[ng] = total;
    if (writer) {
      p.group_off[ng] = total;
      store_cuts(p, cuts);
    }
  }
  __syncthreads();
  return cuts;
}

}  // namespace mac::cuda::detail
