#pragma once
// Host-side launchers of the kernels (internal; CUDA types allowed here, not in the API).
#include <utility>

#include "internal.cuh"

namespace mac::cuda::detail {

/*! \brief Launches `kernel` on `s` with the `n` launch attributes `attrs` (none: n = 0). */
template <typename... KArgs, typename... Args>
cudaError_t launch_with(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                        cudaStream_t s, cudaLaunchAttribute* attrs, int n, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = n > 0 ? attrs : nullptr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

/*! \brief Launches `kernel` on `s`; with `pdl` as a programmatic dependent of the kernel
 *  before it in the stream (its blocks may start while that one drains and wait in
 *  wait_prior_grid_then_release_next). Also inside stream capture (a programmatic edge). */
template <typename... KArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t s, bool pdl, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  return launch_with(kernel, grid, block, smem, s, attr, pdl ? 1 : 0, std::forward<Args>(args)...);
}

/*! \brief Launches `kernel` on `s` with its blocks in thread-block clusters of `cluster_z`
 *  consecutive blocks along z (none when cluster_z = 1; at most 8, the portable size). */
template <typename... KArgs, typename... Args>
cudaError_t launch_clustered(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t s, unsigned cluster_z, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = cluster_z;
  return launch_with(kernel, grid, block, smem, s, attr, cluster_z > 1 ? 1 : 0,
                     std::forward<Args>(args)...);
}

// K2 amend kernel, one instantiation per head dimension (one .cu file each).
constexpr int kAmendWarps = 4;  // warps per block of the persistent amend grid
// Largest shared-memory table (bytes) with which the amend kernel schedules its own items
// (self_schedule_ints); a step whose tables would not fit, or would cost occupancy, runs the
// schedule kernel instead (Engine::create).
constexpr int kMaxSelfTableBytes = 16 << 10;
// `table_bytes` > 0: the kernel schedules its own items (p.self_schedule) with tables of that
// size after its stages. `pdl`: launched as a programmatic dependent of the kernel before it
// (launch_kernel).
cudaError_t launch_amend_d64(const KParams& p, int grid, int table_bytes, bool bulk, bool pdl,
                             cudaStream_t s);
cudaError_t launch_amend_d128(const KParams& p, int grid, int table_bytes, bool bulk, bool pdl,
                              cudaStream_t s);
cudaError_t launch_amend_d256(const KParams& p, int grid, int table_bytes, bool bulk, bool pdl,
                              cudaStream_t s);
/*! \brief Persistent grid of the amend kernel (blocks resident per SM × SMs) with
 *  `table_bytes` of self-schedule tables, 0 if those do not fit; also raises the kernel's
 *  dynamic shared-memory limit, so call it once before any launch/capture. */
int amend_grid_d64(int device, bool bulk, int table_bytes);
int amend_grid_d128(int device, bool bulk, int table_bytes);
int amend_grid_d256(int device, bool bulk, int table_bytes);

/*! \brief K1 match: grid (Hq, N, k1_splits), the k1_splits blocks of a (row, head) one
 *  cluster. Writes plans and prefix snapshots (match.cu). */
cudaError_t launch_match(const KParams& p, cudaStream_t s);
/*! \brief K1's kernel attributes (its clusters' scheduling policy): once, before any
 *  launch/capture. */
cudaError_t prepare_match(int D);
/*! \brief Device-side schedule kernel (steps that are not self-scheduled): row infos, group
 *  ranges, item offsets, the item → group table (one block). */
cudaError_t launch_schedule(const KParams& p, bool pdl, cudaStream_t s);
/*! \brief Combine (and, when p.k3_in_combine, the K3 ring write); k3_only: K3 alone. */
cudaError_t launch_combine(const KParams& p, bool k3_only, bool pdl, cudaStream_t s);
}  // namespace mac::cuda::detail
