#pragma once
// The amend kernel's compile-time shape per head dimension and copy variant: warps, pipeline
// stages, shared-memory layout and the blocks per SM its registers are bounded for.
#include <cstdint>

#include "launch.hpp"  // kAmendWarps

namespace mac::cuda::detail {

// Stages per warp of the D = 128 kernel: 3, two blocks of four warps per SM. Measured on the
// H200 against this: 2 stages 0.98–1.01 of the time (the same), 4 or 6 stages (one block per
// SM) 1.03–1.12, and 2 stages at three blocks per SM (a 168-register bound: spills)
// 1.02–1.40. The bytes in flight per warp do not matter between 16 and 48 KB; warps do.
constexpr int kAmendStagesD128 = 3;
constexpr int kAmendMinBlocksD128 = 2;
// kBulk selects how K/V tiles reach shared memory: false = cp.async 16-byte copies by all
// lanes into XOR-swizzled rows; true = one Hopper bulk copy (cp.async.bulk, the TMA engine
// without a tensor map) per 16-key row of K or V, completing on a per-stage mbarrier, into
// rows padded by 16 bytes (conflict-free ldmatrix without a swizzle).
template <int D, bool kBulk = false>
struct AmendCfg {
  static constexpr int kWarps = kAmendWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kStages = D == 64 ? 4 : D == 128 ? kAmendStagesD128 : 3;
  static constexpr int kCpr = D / 8;                            // 16-byte chunks per key row
  static constexpr int kRowBytes = kBulk ? D * 2 + 16 : D * 2;  // smem row pitch
  static constexpr int kTileBytes = 16 * kRowBytes;             // one 16-key tile of K (or V)
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kWarpSmem = kStages * kStageBytes;
  static constexpr int kSmem = kWarps * kWarpSmem;
  static constexpr int kMinBlocks = D == 256 ? 1 : D == 128 ? kAmendMinBlocksD128 : 3;
  /*! \brief Shared address of 16-byte chunk c of key row r of a tile. */
  static __device__ __forceinline__ uint32_t at(uint32_t base, int r, int c) {
    if constexpr (kBulk)
      return base + r * kRowBytes + c * 16;
    else
      return base + (r * kCpr + (c ^ (r & 7))) * 16;
  }
};

}  // namespace mac::cuda::detail
