#pragma once
// Host-side launchers of the kernels (internal; CUDA types allowed here, not in the API).
#include "internal.cuh"

namespace mac::cuda::detail {

// K2 amend kernel, one instantiation per head dimension (one .cu file each).
constexpr int kAmendWarps = 4;  // warps per block of the persistent amend grid
cudaError_t launch_amend_d64(const KParams& p, int grid, bool bulk, cudaStream_t s);
cudaError_t launch_amend_d128(const KParams& p, int grid, bool bulk, cudaStream_t s);
cudaError_t launch_amend_d256(const KParams& p, int grid, bool bulk, cudaStream_t s);
/*! \brief Persistent grid of the amend kernel (blocks resident per SM × SMs); also raises
 *  the kernel's dynamic shared-memory limit, so call it once before any launch/capture. */
int amend_grid_d64(int device, bool bulk);
int amend_grid_d128(int device, bool bulk);
int amend_grid_d256(int device, bool bulk);

/*! \brief K1 match: grid (Hq, N). Writes plans, prefix snapshots. */
cudaError_t launch_match(const KParams& p, cudaStream_t s);
/*! \brief Device-side schedule: row infos, group ranges, item offsets (one block). */
cudaError_t launch_schedule(const KParams& p, cudaStream_t s);
/*! \brief Combine (and, when p.k3_in_combine, the K3 ring write); k3_only: K3 alone. */
cudaError_t launch_combine(const KParams& p, bool k3_only, cudaStream_t s);
/*! \brief Streaming-read kernel over n16 16-byte words; result sink to defeat DCE. */
cudaError_t launch_read_bw(const void* src, size_t n16, unsigned* sink, int grid, cudaStream_t s);

/*! \brief Seeded normal fill (hash-based Box–Muller), bf16 (rounded) or f32. */
cudaError_t launch_fill_random(void* dst, size_t n, bool bf16, uint64_t seed, float mean, float stddev, cudaStream_t s);

}  // namespace mac::cuda::detail
