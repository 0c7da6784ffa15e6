#pragma once
// Host side of the amend kernel: its launch per copy variant and its persistent grid (blocks
// resident per SM × SMs), with the dynamic shared-memory limit raised once. Included by the
// one-head-dimension files amend_d64.cu, amend_d128.cu, amend_d256.cu.
#include "amend_impl.cuh"

namespace mac::cuda::detail {

template <int D, bool kBulk>
cudaError_t launch_amend_one(const KParams& p, int grid, int table_bytes, bool pdl,
                             cudaStream_t stream) {
  using Cfg = AmendCfg<D, kBulk>;
  return launch_kernel(amend_kernel<D, kBulk>, grid, Cfg::kThreads, Cfg::kSmem + table_bytes,
                       stream, pdl, p);
}

template <int D>
cudaError_t launch_amend_impl(const KParams& p, int grid, int table_bytes, bool bulk, bool pdl,
                              cudaStream_t stream) {
  // The smem limits were raised by amend_grid_impl (Engine::create).
  return bulk ? launch_amend_one<D, true>(p, grid, table_bytes, pdl, stream)
              : launch_amend_one<D, false>(p, grid, table_bytes, pdl, stream);
}

template <int D, bool kBulk>
int amend_grid_one(int device, int table_bytes) {
  using Cfg = AmendCfg<D, kBulk>;
  // The limit covers the largest table any engine may use, so that engines with different
  // configurations never lower it under one another's launches.
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  const int limit =
      Cfg::kSmem + kMaxSelfTableBytes < optin ? Cfg::kSmem + kMaxSelfTableBytes : optin;
  cudaFuncSetAttribute(amend_kernel<D, kBulk>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit);
  if (Cfg::kSmem + table_bytes > limit) return 0;
  int per_sm = 0, sms = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, amend_kernel<D, kBulk>, Cfg::kThreads,
                                                Cfg::kSmem + table_bytes);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (per_sm < 1) return table_bytes > 0 ? 0 : sms;
  return per_sm * sms;
}

template <int D>
int amend_grid_impl(int device, bool bulk, int table_bytes) {
  return bulk ? amend_grid_one<D, true>(device, table_bytes)
              : amend_grid_one<D, false>(device, table_bytes);
}

}  // namespace mac::cuda::detail
