// K2 amend kernel instantiated for D = 128 (one head dimension per file keeps builds parallel).
#include "amend_impl.cuh"
#include "launch.hpp"

namespace mac::cuda::detail {
cudaError_t launch_amend_d128(const KParams& p, int grid, bool bulk, bool pdl, cudaStream_t s) {
  return launch_amend_impl<128>(p, grid, bulk, pdl, s);
}
int amend_grid_d128(int device, bool bulk) { return amend_grid_impl<128>(device, bulk); }
}  // namespace mac::cuda::detail
