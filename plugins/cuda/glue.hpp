#pragma once
// Two small kernels that adapt the plugin ABI's tensors to mac::cuda::DecodeParams on the
// device, so that a step stays capturable into a CUDA graph (no host round trip).
#include <cstdint>

namespace mac::plugin_cuda {

/*! kv_len[b] = position[b] + 1 (int32), ready32[b] = ready[b] (int32), for b < B. */
void launch_prepare(const int64_t* position, const uint8_t* ready, int32_t* kv_len,
                    int32_t* ready32, int32_t* epoch_b, int B, void* stream);

/*! keys_read[b][h] = keys32[b·Hq + h] (int64, row stride keys_row); and for every ready
 *  request, ring_pos (slot-major [B, M, Hq] int64) of slot position[b] mod M, every head,
 *  = position[b]: the engine's ring keeps no positions, the ABI's does. */
void launch_finish(const int64_t* position, const uint8_t* ready, const int32_t* keys32,
                   int64_t* keys_read, int64_t keys_row, int64_t* ring_pos, int B, int Hq,
                   int64_t M, void* stream);

}  // namespace mac::plugin_cuda
