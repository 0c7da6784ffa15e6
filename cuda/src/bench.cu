// Benchmark aids (mac/cuda/bench.hpp): a seeded normal fill of device memory and the
// device's streaming-read bandwidth, the baseline mac-bench and read-patterns report against.
// Not part of a decode step.
#include <algorithm>
#include <vector>

#include "host_status.hpp"
#include "internal.cuh"
#include "mac/cuda/bench.hpp"

namespace mac::cuda {
namespace detail {

// Streaming read: each thread sums 16-byte words grid-stride; the xor result goes to `sink`
// only if impossible, so the loads cannot be removed.
__global__ void read_bw_kernel(const uint4* __restrict__ src, size_t n, unsigned* sink) {
  unsigned acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(src + i), b = __ldcs(src + i + stride), c = __ldcs(src + i + 2 * stride),
                d = __ldcs(src + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^
           d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(src + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

cudaError_t launch_read_bw(const void* src, size_t n16, unsigned* sink, int grid, cudaStream_t s) {
  read_bw_kernel<<<grid, 512, 0, s>>>(static_cast<const uint4*>(src), n16, sink);
  return cudaGetLastError();
}

__device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_random_kernel(void* dst, size_t n, int bf16, uint64_t seed, float mean,
                                   float stddev) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t h = splitmix64(seed * 0x2545f4914f6cdd1dull + i);
    const float u1 = (static_cast<float>(h >> 40) + 1.f) * (1.f / 16777217.f);
    const float u2 = static_cast<float>((h >> 16) & 0xffffff) * (1.f / 16777216.f);
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    const float v = mean + stddev * z;
    if (bf16)
      static_cast<uint16_t*>(dst)[i] = float_to_bf16_bits(v);
    else
      static_cast<float*>(dst)[i] = v;
  }
}

cudaError_t launch_fill_random(void* dst, size_t n, bool bf16, uint64_t seed, float mean,
                               float stddev, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  fill_random_kernel<<<2048, 256, 0, s>>>(dst, n, bf16 ? 1 : 0, seed, mean, stddev);
  return cudaGetLastError();
}

__global__ void busy_wait_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(500);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

}  // namespace detail

using detail::as_stream;
using detail::cuda_status;
using detail::invalid;

Status fill_random(void* dst, size_t n, DType type, uint64_t seed, float mean, float stddev,
                   void* stream) {
  if (!dst && n) return invalid("fill_random: dst is null");
  MAC_CUDA_TRY(detail::launch_fill_random(dst, n, type == DType::kBF16, seed, mean, stddev,
                                          as_stream(stream)));
  return Status::Ok();
}

Status busy_wait(double microseconds, void* stream) {
  if (!(microseconds >= 0 && microseconds <= 1e7))
    return invalid("busy_wait: microseconds must be in [0, 1e7]");
  detail::busy_wait_kernel<<<1, 1, 0, as_stream(stream)>>>(
      static_cast<uint64_t>(microseconds * 1e3));
  MAC_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

Status measure_read_bandwidth(size_t bytes, int reps, double* gbps) {
  if (!gbps) return invalid("gbps is null");
  if (bytes < (1u << 20) || reps < 1)
    return invalid("measure_read_bandwidth: bytes ≥ 1 MiB and reps ≥ 1");
  bytes = bytes / 16 * 16;
  DeviceBuffer buf, sink;
  MAC_STATUS_TRY(buf.allocate(bytes));
  MAC_STATUS_TRY(sink.allocate(sizeof(unsigned)));
  MAC_CUDA_TRY(cudaMemset(buf.data(), 0x5a, bytes));  // non-zero data
  int sms = 0;
  MAC_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t a, b;
  MAC_CUDA_TRY(cudaEventCreate(&a));
  MAC_CUDA_TRY(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < reps + 3; ++i) {
    cudaEventRecord(a);
    detail::launch_read_bw(buf.data(), bytes / 16, sink.as<unsigned>(), sms * 4, nullptr);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  MAC_CUDA_TRY(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  *gbps = static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
  return Status::Ok();
}

}  // namespace mac::cuda
