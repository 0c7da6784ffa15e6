#pragma once
// The amend kernel's compile-time shape per head dimension and copy variant: warps, pipeline
// stages, shared-memory layout and the blocks per SM its registers are bounded for.
#include <cstdint>

#include "launch.hpp"  // kAmendWarps

namespace mac::cuda::detail {

// Stages per warp of the D = 128 kernel: 3 by default (two blocks per SM); cmake
// -DMAC_AMEND_STAGES_D128=2 or 4..6 (4 and more: one block per SM) is an experiment knob
// (3 measured fastest on the H200 against 2 and 4..6; docs/decisions.md).
#ifndef MAC_AMEND_STAGES_D128
#define MAC_AMEND_STAGES_D128 3
#endif
#if MAC_AMEND_STAGES_D128 < 2 || MAC_AMEND_STAGES_D128 > 6
#error "MAC_AMEND_STAGES_D128 must be in 2..6"
#endif
// Blocks per SM the D = 128 kernel's registers are bounded for (__launch_bounds__): 2 by
// default; 3 (≤ 168 registers, with 2 stages to fit shared memory) is an experiment knob.
#ifndef MAC_AMEND_MIN_BLOCKS_D128
#define MAC_AMEND_MIN_BLOCKS_D128 2
#endif
#if MAC_AMEND_MIN_BLOCKS_D128 < 2 || MAC_AMEND_MIN_BLOCKS_D128 > 3
#error "MAC_AMEND_MIN_BLOCKS_D128 must be 2 or 3"
#endif
// kBulk selects how K/V tiles reach shared memory: false = cp.async 16-byte copies by all
// lanes into XOR-swizzled rows; true = one Hopper bulk copy (cp.async.bulk, the TMA engine
// without a tensor map) per 16-key row of K or V, completing on a per-stage mbarrier, into
// rows padded by 16 bytes (conflict-free ldmatrix without a swizzle).
template <int D, bool kBulk = false>
struct AmendCfg {
  static constexpr int kWarps = kAmendWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kStages = D == 64 ? 4 : D == 128 ? MAC_AMEND_STAGES_D128 : 3;
  static constexpr int kCpr = D / 8;                            // 16-byte chunks per key row
  static constexpr int kRowBytes = kBulk ? D * 2 + 16 : D * 2;  // smem row pitch
  static constexpr int kTileBytes = 16 * kRowBytes;             // one 16-key tile of K (or V)
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kWarpSmem = kStages * kStageBytes;
  static constexpr int kSmem = kWarps * kWarpSmem;
  static constexpr int kMinBlocks = D == 256 ? 1 : D == 128 ? MAC_AMEND_MIN_BLOCKS_D128 : 3;
  /*! \brief Shared address of 16-byte chunk c of key row r of a tile. */
  static __device__ __forceinline__ uint32_t at(uint32_t base, int r, int c) {
    if constexpr (kBulk)
      return base + r * kRowBytes + c * 16;
    else
      return base + (r * kCpr + (c ^ (r & 7))) * 16;
  }
};

}  // namespace mac::cuda::detail
