// Parts of the mac::cuda host API that need no CUDA: compiled into the real library and
// into the stub alike.
#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda {

const char* to_string(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "kOk";
    case StatusCode::kInvalidArgument: return "kInvalidArgument";
    case StatusCode::kUnsupported: return "kUnsupported";
    case StatusCode::kContextTooLong: return "kContextTooLong";
    case StatusCode::kNoCuda: return "kNoCuda";
    case StatusCode::kCudaError: return "kCudaError";
    case StatusCode::kNotReady: return "kNotReady";
  }
  return "unknown";
}

}  // namespace mac::cuda
