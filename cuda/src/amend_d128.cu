// K2 amend kernel instantiated for D = 128 (one head dimension per file keeps builds parallel).
#include "amend_launch.cuh"
#include "launch.hpp"

namespace mac::cuda::detail {
cudaError_t launch_amend_d128(const KParams& p, int grid, int table_bytes, bool bulk, bool pdl,
                              cudaStream_t s) {
  return launch_amend_impl<128>(p, grid, table_bytes, bulk, pdl, s);
}
int amend_grid_d128(int device, bool bulk, int table_bytes) {
  return amend_grid_impl<128>(device, bulk, table_bytes);
}
}  // namespace mac::cuda::detail
