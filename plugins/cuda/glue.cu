#include "glue.hpp"

#include <cuda_runtime.h>

namespace mac::plugin_cuda {
namespace {

// A request that is not ready reaches the engine in one of its two forms (semantics §3.2),
// alternating over the not-ready requests in order: ready = 0 with equal epochs, or ready = 1
// with epochs that differ; so the certification covers both gates, as the GPU suite does.
__global__ void prepare(const int64_t* position, const uint8_t* ready, int32_t* kv_len,
                        int32_t* ready32, int32_t* epoch_b, int B) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B) return;
  kv_len[b] = static_cast<int32_t>(position[b] + 1);
  int earlier_not_ready = 0;
  for (int j = 0; j < b; ++j) earlier_not_ready += ready[j] == 0;
  const bool by_epoch = ready[b] == 0 && earlier_not_ready % 2 == 1;
  ready32[b] = ready[b] != 0 || by_epoch;
  epoch_b[b] = by_epoch ? 1 : 0;  // epoch_a is 0 throughout
}

__global__ void finish(const int64_t* position, const uint8_t* ready, const int32_t* keys32,
                       int64_t* keys_read, int64_t keys_row, int64_t* ring_pos, int B, int Hq,
                       int64_t M) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * Hq) return;
  const int b = i / Hq, h = i % Hq;
  if (keys_read) keys_read[b * keys_row + h] = keys32[i];
  const int64_t m = position[b];
  if (ready[b]) ring_pos[(b * M + m % M) * Hq + h] = m;
}

}  // namespace

void launch_prepare(const int64_t* position, const uint8_t* ready, int32_t* kv_len,
                    int32_t* ready32, int32_t* epoch_b, int B, void* stream) {
  prepare<<<(B + 127) / 128, 128, 0, static_cast<cudaStream_t>(stream)>>>(position, ready, kv_len,
                                                                          ready32, epoch_b, B);
}

void launch_finish(const int64_t* position, const uint8_t* ready, const int32_t* keys32,
                   int64_t* keys_read, int64_t keys_row, int64_t* ring_pos, int B, int Hq,
                   int64_t M, void* stream) {
  finish<<<(B * Hq + 127) / 128, 128, 0, static_cast<cudaStream_t>(stream)>>>(
      position, ready, keys32, keys_read, keys_row, ring_pos, B, Hq, M);
}

}  // namespace mac::plugin_cuda
