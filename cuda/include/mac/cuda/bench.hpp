#pragma once
/*! \file bench.hpp
 *  \brief Benchmark aids of mac_cuda (not part of the decode API in mac_cuda.hpp): seeded
 *         random device data and the device's streaming-read bandwidth. Without CUDA they
 *         return StatusCode::kNoCuda like the rest of the stub.
 */
#include <cstddef>
#include <cstdint>

#include "mac/cuda/mac_cuda.hpp"  // Status

namespace mac::cuda {

/*! \brief Element type for fill_random. */
enum class DType : int { kBF16 = 0, kF32 = 1 };
/*! \brief Fills `n` elements at device pointer `dst` with seeded pseudo-random normal values
 *  (mean, stddev), BF16-rounded for kBF16 (stddev = 0 gives a constant). Tests/benchmarks. */
Status fill_random(void* dst, size_t n, DType type, uint64_t seed, float mean, float stddev,
                   void* stream = nullptr);

/*! \brief Streaming-read bandwidth of the device (a simple 16-byte-load reduction kernel
 *  over `bytes` of memory, median of `reps` timed runs after warm-up). GB/s = 1e9 B/s. */
Status measure_read_bandwidth(size_t bytes, int reps, double* gbps);

/*! \brief Keeps `stream` busy for `microseconds` (one thread polling the device's global
 *  timer). Work the host submits meanwhile queues behind it, so an event recorded after it
 *  starts a timing at the moment the device turns to the queued work: the interval then holds
 *  the device's execution only, not the host's launch latency (mac-bench --timing queued). */
Status busy_wait(double microseconds, void* stream = nullptr);

/*! \brief Captures K1 (the match kernel) alone with `p` into `engine`'s graph, replacing any
 *  earlier one; replay() then times it (its cost must not depend on the context). `p` is
 *  checked as for a MAC step. */
Status capture_match_only(Engine& engine, const DecodeParams& p, void* stream);

}  // namespace mac::cuda
