#pragma once
// Host-side status helpers shared by the host layers of mac_cuda (device.cu, engine.cu,
// step.cu, prefill.cu, graph.cu, bench.cu): the message builder and kInvalidArgument status
// (status_text.hpp), the kCudaError status, and the early-return macros.
#include <cuda_runtime.h>

#include <sstream>
#include <string>

#include "mac/cuda/mac_cuda.hpp"
#include "status_text.hpp"

namespace mac::cuda::detail {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return {StatusCode::kCudaError, cat(what, ": ", cudaGetErrorString(e))};
}
#define MAC_CUDA_TRY(expr)                                \
  do {                                                    \
    const cudaError_t e_ = (expr);                        \
    if (e_ != cudaSuccess) return cuda_status(e_, #expr); \
  } while (0)
#define MAC_STATUS_TRY(expr) \
  do {                       \
    Status s_ = (expr);      \
    if (!s_.ok()) return s_; \
  } while (0)

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace mac::cuda::detail
