// CUDA runtime calls of the plugin worker (plugin_device.hpp). Built with the CUDA runtime
// where CMake found one (MAC_VERIFY_CUDART), else every call reports that it is missing.
#include "plugin_device.hpp"

#include <string>

#if MAC_VERIFY_CUDART
#include <cuda_runtime_api.h>
#endif

namespace mac::verify::device {

#if MAC_VERIFY_CUDART
namespace {
std::string err(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

bool built_with_cuda_runtime() { return true; }
std::string set_device(int d) { return err(cudaSetDevice(d), "cudaSetDevice"); }
std::string alloc(void** p, size_t n) { return err(cudaMalloc(p, n), "cudaMalloc"); }
void release(void* p) { cudaFree(p); }
std::string register_host(void* p, size_t n) {
  const cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterDefault);
  if (e != cudaSuccess) cudaGetLastError();  // not sticky: clear it, the copies work unpinned
  return err(e, "cudaHostRegister");
}
void unregister_host(void* p) { cudaHostUnregister(p); }
std::string copy_to_device(void* dst, const void* src, size_t n, void* s) {
  return err(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, as_stream(s)), "cudaMemcpyAsync");
}
std::string copy_to_host(void* dst, const void* src, size_t n, void* s) {
  return err(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, as_stream(s)), "cudaMemcpyAsync");
}
std::string stream_create(void** s) {
  cudaStream_t st = nullptr;
  const std::string e =
      err(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  *s = st;
  return e;
}
void stream_destroy(void* s) {
  if (s) cudaStreamDestroy(as_stream(s));
}
std::string synchronize(void* s) {
  std::string e = err(cudaStreamSynchronize(as_stream(s)), "cudaStreamSynchronize");
  if (e.empty()) e = err(cudaGetLastError(), "cudaGetLastError");
  return e;
}
std::string begin_capture(void* s) {
  return err(cudaStreamBeginCapture(as_stream(s), cudaStreamCaptureModeThreadLocal),
             "cudaStreamBeginCapture");
}
std::string end_capture(void* s, void** exec) {
  cudaGraph_t g = nullptr;
  std::string e = err(cudaStreamEndCapture(as_stream(s), &g), "cudaStreamEndCapture");
  if (!e.empty()) return e;
  cudaGraphExec_t x = nullptr;
  e = err(cudaGraphInstantiate(&x, g, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(g);
  *exec = x;
  return e;
}
std::string launch(void* x, void* s) {
  return err(cudaGraphLaunch(static_cast<cudaGraphExec_t>(x), as_stream(s)), "cudaGraphLaunch");
}
void destroy_exec(void* x) {
  if (x) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(x));
}
std::string versions() {
  int d = 0, r = 0;
  if (cudaDriverGetVersion(&d) != cudaSuccess) d = 0;
  if (cudaRuntimeGetVersion(&r) != cudaSuccess) r = 0;
  auto v = [](int x) { return std::to_string(x / 1000) + "." + std::to_string((x % 1000) / 10); };
  return "driver " + (d ? v(d) : std::string("none")) + ", runtime " + v(r);
}
#else
namespace {
const char* const kNone = "this mac-verify was built without the CUDA runtime";
}
bool built_with_cuda_runtime() { return false; }
std::string set_device(int) { return kNone; }
std::string alloc(void** p, size_t) {
  *p = nullptr;
  return kNone;
}
void release(void*) {}
std::string register_host(void*, size_t) { return kNone; }
void unregister_host(void*) {}
std::string copy_to_device(void*, const void*, size_t, void*) { return kNone; }
std::string copy_to_host(void*, const void*, size_t, void*) { return kNone; }
std::string stream_create(void** s) {
  *s = nullptr;
  return kNone;
}
void stream_destroy(void*) {}
std::string synchronize(void*) { return kNone; }
std::string begin_capture(void*) { return kNone; }
std::string end_capture(void*, void**) { return kNone; }
std::string launch(void*, void*) { return kNone; }
void destroy_exec(void*) {}
std::string versions() { return kNone; }
#endif

}  // namespace mac::verify::device
