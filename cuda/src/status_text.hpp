#pragma once
// Status messages of the host layers, in plain C++ (the CPU test suite includes the planning
// that uses them): a message builder and the kInvalidArgument status.
#include <sstream>
#include <string>

#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda::detail {

template <typename... Args>
inline std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
inline Status invalid(const std::string& m) { return {StatusCode::kInvalidArgument, m}; }

}  // namespace mac::cuda::detail
