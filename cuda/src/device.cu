// Device presence and the plain device-memory and stream helpers of the API (host code; the
// lowest host layer: no engine state).
#include "host_status.hpp"

namespace mac::cuda {

using detail::as_stream;
using detail::cat;
using detail::cuda_status;

bool built_with_cuda() { return true; }

bool cuda_device_present() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

std::string device_description() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cat("no CUDA device (", cudaGetErrorString(e), ")");
  }
  if (n == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return cat(prop.name, " (sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount, " SMs, ",
             prop.totalGlobalMem >> 20, " MiB)");
}

Status device_malloc(void** ptr, size_t bytes) {
  MAC_CUDA_TRY(cudaMalloc(ptr, bytes));
  return Status::Ok();
}
Status device_free(void* ptr) {
  MAC_CUDA_TRY(cudaFree(ptr));
  return Status::Ok();
}
Status device_memset(void* ptr, int v, size_t bytes, void* s) {
  MAC_CUDA_TRY(cudaMemsetAsync(ptr, v, bytes, as_stream(s)));
  return Status::Ok();
}
Status copy_to_device(void* dst, const void* src, size_t bytes, void* s) {
  MAC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(s)));
  return Status::Ok();
}
Status copy_to_host(void* dst, const void* src, size_t bytes, void* s) {
  MAC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(s)));
  return Status::Ok();
}
Status copy_device_to_device(void* dst, const void* src, size_t bytes, void* s) {
  MAC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(s)));
  return Status::Ok();
}
Status stream_create(void** s) {
  cudaStream_t st;
  MAC_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  *s = st;
  return Status::Ok();
}
Status stream_destroy(void* s) {
  MAC_CUDA_TRY(cudaStreamDestroy(as_stream(s)));
  return Status::Ok();
}
Status stream_synchronize(void* s) {
  MAC_CUDA_TRY(cudaStreamSynchronize(as_stream(s)));
  return Status::Ok();
}
Status device_synchronize() {
  MAC_CUDA_TRY(cudaDeviceSynchronize());
  return Status::Ok();
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
Status DeviceBuffer::allocate(size_t bytes) {
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  if (bytes == 0) return Status::Ok();
  MAC_CUDA_TRY(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
  return Status::Ok();
}

}  // namespace mac::cuda
