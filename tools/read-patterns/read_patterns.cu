// read-patterns: how fast the H200 streams a decode step's K/V under different access
// patterns, without the attention arithmetic (or with a fixed amount of stand-in work per
// tile). It asks one question of the per-byte gap to cuDNN (docs/decisions.md): does a different
// way of reading the same bytes reach a higher DRAM rate than the amend kernel's, before any kernel
// is rewritten around it?
//
// The K and V pools are laid out as mac-bench lays them out: [pages, page_size, Hkv, D] bf16
// (nhd) or [pages, Hkv, page_size, D] (hnd), row b owning pages [b·P, (b+1)·P). D = 128.
// Patterns (every one reads each (row, KV head)'s K and V rows [0, ctx) exactly once):
//   warp items-*: the amend kernel's shape. Each warp streams items of C (--chunk) keys
//          through a per-warp ring of 3 16-key tiles (16-byte cp.async, lane l copies chunks
//          l, l + 32, … of the K and V tile), 4 warps per block, 2 blocks per SM, the first item
//          block-major, later ones claimed from one counter.
//   warp range-*: the same ring, but warp w streams tiles [w·T/W, (w+1)·T/W) of all groups'
//          tiles end to end: static, exact balance, one segment per group it touches.
//   cta:   cuDNN's shape. A block of 4 warps streams items of C keys in tiles of `tile` keys
//          (every thread copies its share of a tile's K and V), 3 tiles deep.
// Variants: the K/V copies with the 128-byte L2 prefetch hint (pf128, the amend kernel's) or
// that and an evict_first policy (evictfirst). With --parts G every item (segment) of the
// warp patterns ends by writing a partial state as the amend kernel does (G rows of D fp32
// values and G fp32 LSEs), plainly, with an L2 evict_last policy (-partslast) or as
// streaming stores (-partscs); between timed launches their L2 lines are discarded, as the
// combine does on large steps. --work N spends a stand-in for the arithmetic per 16 keys per
// warp after each tile lands: N dependent FMAs, or with N < 0, −N ns of __nanosleep.
//
// Output: one CSV line per (pattern, variant): GB/s as the median of --reps timed launches,
// and the ratio to mac-bench's streaming read of a buffer of the same size measured in the
// same run (the `read` lines, at the start and the end). Measurements: docs/decisions.md.
#include <cuda_runtime.h>

#include "mac/cuda/bench.hpp"  // measure_read_bandwidth: the baseline
#include "ptx.cuh"             // the amend kernel's PTX wrappers

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

#define RP_CHECK(x)                                                                       \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "read-patterns: %s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

constexpr int kD = 128;          // head dim (bf16): 256-byte rows, 16 chunks of 16 bytes
constexpr int kChunks = kD / 8;  // 16-byte chunks per row

/*! \brief Where the pools lie: element offset of (row b, KV head h, key t). */
struct Layout {
  int64_t page_stride, token_stride, head_stride;
  int page_size, pages_per_row;
  __device__ int64_t row_offset(int b, int h, int t) const {
    const int pg = b * pages_per_row + t / page_size;
    return pg * page_stride + static_cast<int64_t>(t % page_size) * token_stride + h * head_stride;
  }
};

struct Shape {
  int batch, hkv, ctx, chunk;  // chunk: keys per item
  __host__ __device__ int items() const { return batch * hkv * (ctx / chunk); }
};

// The copies' L2 treatment: the amend kernel's 128-byte prefetch hint, and that with an
// evict_first policy.
enum Hint : int { kPrefetch128, kEvictFirst };

template <int kHint>
__device__ __forceinline__ void copy16(uint32_t dst, const void* src, uint64_t pol) {
  if constexpr (kHint == kPrefetch128)
    mac::cuda::detail::cp_async16(dst, src);
  else
    mac::cuda::detail::cp_async16(dst, src, pol);
}
using mac::cuda::detail::cp_async_commit;
using mac::cuda::detail::cp_async_wait;
using mac::cuda::detail::kv_evict_first_policy;
using mac::cuda::detail::parts_evict_last_policy;

/*! \brief The arithmetic's stand-in per 16 keys: `work` > 0 runs that many dependent FMAs
 *  (issue slots taken), `work` < 0 sleeps −work nanoseconds (the warp busy elsewhere, no
 *  issue slots taken); `reps` times. */
__device__ __forceinline__ float stand_in(float x, int work, int reps) {
  float a = x;
  if (work > 0) {
    const float b = 1.0000001f;
    for (int i = 0; i < work * reps; ++i) a = fmaf(a, b, 1e-7f);
  } else if (work < 0) {
    for (int i = 0; i < reps; ++i) __nanosleep(static_cast<unsigned>(-work));
  }
  return a;
}

/*! \brief Item `it` as (row, KV head, first key). */
__device__ __forceinline__ void item_at(const Shape& s, int it, int* b, int* h, int* t0) {
  const int per = s.ctx / s.chunk;
  const int g = it / per;
  *b = g / s.hkv;
  *h = g % s.hkv;
  *t0 = (it % per) * s.chunk;
}

// ---- the amend kernel's shape: one stream per warp ----
// A warp streams segments (row, KV head, first key, tiles) one after the other through its
// ring. kRange = false: a segment is an item of C keys, the first block-major, later ones
// claimed from one counter (the amend kernel's scheme). kRange = true: warp w streams the
// tiles [w·T/W, (w+1)·T/W) of all groups' tiles laid end to end (T in all), cut into one
// segment per group it touches: perfect static balance, and a partial state per segment
// instead of one per item. With parts_g > 0 each segment ends by writing a partial state as
// the amend kernel does (parts_g rows of D fp32 values, then parts_g fp32 LSEs).
enum PartStore : int { kStoreNormal = 0, kStoreEvictLast = 1, kStoreStreaming = 2 };

/*! \brief A partial state's 16 bytes, stored with the given L2 treatment. */
template <int kStore>
__device__ __forceinline__ void store_part(float4* p, float4 v, uint64_t last) {
  if constexpr (kStore == kStoreNormal) {
    *p = v;
  } else if constexpr (kStore == kStoreEvictLast) {
    mac::cuda::detail::st_cache_hint(p, v, last);
  } else {
    __stcs(p, v);
  }
}

template <int kStages, int kHint, bool kRange, int kStore = kStoreNormal>
__global__ void __launch_bounds__(128, 2)
    warp_streams(const uint16_t* __restrict__ k, const uint16_t* __restrict__ v, Layout L, Shape s,
                 int work, int* claims, float* sink, int parts_g, float* parts,
                 int64_t parts_slots) {
  constexpr int kTileBytes = 16 * kD * 2;  // one 16-key tile of K (or V)
  constexpr int kQueue = 4;                // segments between loader and consumer (≤ stages + 1)
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int s_queue[4][kQueue][2];  // per warp: (tiles, partial slot) of each segment
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t base =
      static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + warp * kStages * 2 * kTileBytes;
  const uint64_t pol = kv_evict_first_policy();
  const uint64_t last = parts_evict_last_policy();
  const int W = gridDim.x * 4, total = s.items(), group_tiles = s.ctx / 16;
  const int gw = warp * gridDim.x + blockIdx.x;  // block-major, as the amend kernel
  const int64_t all_tiles = static_cast<int64_t>(s.batch) * s.hkv * group_tiles;
  int64_t pos = all_tiles * gw / W;
  const int64_t hi = all_tiles * (gw + 1) / W;
  int next_item = gw, nseg = 0;
  // Loader state: the segment being issued and its next tile.
  int ld_b = 0, ld_h = 0, ld_t0 = 0, ld_n = 0, ld_tile = 0;
  auto next_segment = [&]() {  // sets ld_*; ld_n = 0 at the end
    ld_tile = 0;
    ld_n = 0;
    int pid = -1;
    if constexpr (kRange) {
      if (pos < hi) {
        const int64_t g = pos / group_tiles, e = min(hi, (g + 1) * group_tiles);
        ld_b = static_cast<int>(g / s.hkv);
        ld_h = static_cast<int>(g % s.hkv);
        ld_t0 = static_cast<int>(pos - g * group_tiles) * 16;
        ld_n = static_cast<int>(e - pos);
        pid = gw * kQueue + (nseg % kQueue);
        pos = e;
      }
    } else {
      const int it = next_item;
      if (it < total) {
        item_at(s, it, &ld_b, &ld_h, &ld_t0);
        ld_n = s.chunk / 16;
        pid = it;
      }
      int c = 0;
      if (lane == 0) c = atomicAdd(claims, 1) + W;
      next_item = __shfl_sync(0xffffffffu, c, 0);
    }
    if (ld_n > 0) {
      __syncwarp();
      if (lane == 0) {
        s_queue[warp][nseg % kQueue][0] = ld_n;
        s_queue[warp][nseg % kQueue][1] = pid;
      }
      ++nseg;
    }
  };
  int seq = 0, real = 0;  // groups committed; of them, tiles actually copied
  auto issue = [&]() {
    if (ld_n > 0) {
      const uint32_t sk = base + (seq % kStages) * 2 * kTileBytes, sv = sk + kTileBytes;
#pragma unroll
      for (int i = 0; i < 16 * kChunks / 32; ++i) {
        const int idx = lane + 32 * i, r = idx / kChunks, c = idx % kChunks;
        const int64_t off = L.row_offset(ld_b, ld_h, ld_t0 + ld_tile * 16 + r) + c * 8;
        copy16<kHint>(sk + idx * 16, k + off, pol);
        copy16<kHint>(sv + idx * 16, v + off, pol);
      }
      ++real;
      if (++ld_tile == ld_n) next_segment();
    }
    ++seq;
    cp_async_commit();
  };
  next_segment();
  if (ld_n == 0) return;  // whole warp
  for (int i = 0; i < kStages - 1; ++i) issue();
  float acc = 0.f;
  int consumed = 0, cs_seg = 0, cs_tile = 0;
  while (true) {
    cp_async_wait<kStages - 2>();
    __syncwarp();
    const int st = consumed % kStages;
    const float x =
        reinterpret_cast<const float*>(smem + (warp * kStages + st) * 2 * kTileBytes)[lane];
    acc += stand_in(x, work, 1);
    __syncwarp();
    issue();  // into the stage consumed a round ago
    ++consumed;
    if (++cs_tile == s_queue[warp][cs_seg % kQueue][0]) {  // the segment's last tile: its partial
      const int pid = s_queue[warp][cs_seg % kQueue][1];
      if (parts_g > 0 && pid >= 0 && pid < parts_slots) {
        float4* o = reinterpret_cast<float4*>(parts + static_cast<int64_t>(pid) * parts_g * kD);
        for (int j = 0; j < parts_g; ++j)
          store_part<kStore>(o + lane + 32 * j, make_float4(acc, acc, acc, acc), last);
        if (lane < parts_g)
          parts[parts_slots * parts_g * kD + static_cast<int64_t>(pid) * parts_g + lane] = acc;
      }
      cs_tile = 0;
      ++cs_seg;
    }
    if (ld_n == 0 && consumed >= real) break;
  }
  cp_async_wait<0>();
  if (acc == 12345.f) *sink = acc;  // keeps the consumer's reads
}

// ---- cuDNN's shape: one stream per block of 4 warps, tiles of kTile keys ----
template <int kTile, int kStages, int kHint>
__global__ void __launch_bounds__(128)
    cta_streams(const uint16_t* __restrict__ k, const uint16_t* __restrict__ v, Layout L, Shape s,
                int work, int* claims, float* sink) {
  constexpr int kTileBytes = kTile * kD * 2;
  constexpr int kPerThread = kTile * kChunks / 128;  // 16-byte copies per thread per K tile
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint64_t pol = kv_evict_first_policy();
  const int total = s.items(), tiles = s.chunk / kTile;
  __shared__ int s_next;
  int ld_it = blockIdx.x, ld_tile = 0, ld_b = 0, ld_h = 0, ld_t0 = 0;
  if (ld_it < total) item_at(s, ld_it, &ld_b, &ld_h, &ld_t0);
  int seq = 0, real = 0;
  float acc = 0.f;
  auto issue = [&]() {
    if (ld_it < total) {
      const uint32_t sk = base + (seq % kStages) * 2 * kTileBytes, sv = sk + kTileBytes;
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int idx = tid + 128 * i, r = idx / kChunks, c = idx % kChunks;
        const int64_t off = L.row_offset(ld_b, ld_h, ld_t0 + ld_tile * kTile + r) + c * 8;
        copy16<kHint>(sk + idx * 16, k + off, pol);
        copy16<kHint>(sv + idx * 16, v + off, pol);
      }
      ++real;
      if (++ld_tile == tiles) {
        ld_tile = 0;
        if (tid == 0) s_next = atomicAdd(claims, 1) + gridDim.x;
        __syncthreads();
        ld_it = s_next;
        __syncthreads();
        if (ld_it < total) item_at(s, ld_it, &ld_b, &ld_h, &ld_t0);
      }
    }
    ++seq;
    cp_async_commit();
  };
  if (ld_it >= total) return;
  for (int i = 0; i < kStages - 1; ++i) issue();
  int consumed = 0;
  while (true) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int st = consumed % kStages;
    const float x = reinterpret_cast<const float*>(smem + st * 2 * kTileBytes)[tid];
    // The arithmetic of a kTile-key tile, shared by 4 warps: kTile / 16 / 4 warp-tiles each.
    acc += stand_in(x, work, kTile / 64);
    __syncthreads();
    issue();
    ++consumed;
    if (ld_it >= total && consumed >= real) break;
  }
  cp_async_wait<0>();
  if (acc == 12345.f) *sink = acc;
}

// ---- the combine's discard of the partial states' L2 lines (between timed launches) ----
__global__ void discard_lines(float* p, int64_t lines) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < lines;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    mac::cuda::detail::discard_l2_line(p + i * 32);
}

struct Options {
  Shape shape{16, 8, 32768, 1024};
  int reps = 30, page_size = 16, parts = 0;
  std::string layout = "nhd";
  std::vector<int> works{0};
};

[[noreturn]] void usage(const char* why, int code = 2) {
  std::fprintf(code ? stderr : stdout,
               "read-patterns: %s\n"
               "usage: read-patterns [--batch N] [--hkv N] [--ctx N] [--chunk N] [--page-size N]\n"
               "                     [--layout nhd|hnd] [--work N[,N...]] [--parts G] [--reps N]\n",
               why);
  std::exit(code);
}

int parse_int(const char* flag, const char* v) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (!*v || *end || x < 0 || x > (1L << 30)) {
    std::fprintf(stderr, "read-patterns: %s: not a non-negative integer: '%s'\n", flag, v);
    std::exit(2);
  }
  return static_cast<int>(x);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h")
      usage("reads K/V pools in several patterns and prints GB/s (CSV)", 0);
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--batch")
      o.shape.batch = parse_int("--batch", v);
    else if (a == "--hkv")
      o.shape.hkv = parse_int("--hkv", v);
    else if (a == "--ctx")
      o.shape.ctx = parse_int("--ctx", v);
    else if (a == "--chunk")
      o.shape.chunk = parse_int("--chunk", v);
    else if (a == "--page-size")
      o.page_size = parse_int("--page-size", v);
    else if (a == "--reps")
      o.reps = parse_int("--reps", v);
    else if (a == "--parts")
      o.parts = parse_int("--parts", v);
    else if (a == "--layout")
      o.layout = v;
    else if (a == "--work") {
      o.works.clear();
      std::string s = v;
      for (size_t p = 0; p <= s.size();) {
        const size_t q = std::min(s.find(',', p), s.size());
        const std::string w = s.substr(p, q - p);
        const bool neg = !w.empty() && w[0] == '-';
        const int x = parse_int("--work", w.c_str() + (neg ? 1 : 0));
        o.works.push_back(neg ? -x : x);
        p = q + 1;
      }
    } else
      usage(("unknown option " + a).c_str());
  }
  const Shape& s = o.shape;
  if (o.layout != "nhd" && o.layout != "hnd")
    usage(("--layout: nhd or hnd, not '" + o.layout + "'").c_str());
  if (s.batch < 1 || s.hkv < 1 || o.reps < 1) usage("--batch, --hkv and --reps must be at least 1");
  if (o.parts > 32) usage(("--parts must be at most 32, not " + std::to_string(o.parts)).c_str());
  if (s.chunk < 128 || s.chunk % 128)
    usage(("--chunk must be a multiple of 128, not " + std::to_string(s.chunk)).c_str());
  if (s.ctx < s.chunk || s.ctx % s.chunk)
    usage(("--ctx must be a multiple of --chunk, not " + std::to_string(s.ctx)).c_str());
  if (o.page_size < 1 || s.ctx % o.page_size)
    usage(("--page-size must divide --ctx, not " + std::to_string(o.page_size)).c_str());
  return o;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Launch, typename Between = void (*)()>
float time_ms(
    int reps, int* claims, Launch&& launch, Between&& between = [] {}) {
  cudaEvent_t a, b;
  RP_CHECK(cudaEventCreate(&a));
  RP_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < reps + 3; ++i) {
    if (claims) RP_CHECK(cudaMemsetAsync(claims, 0, sizeof(int)));
    RP_CHECK(cudaEventRecord(a));
    launch();
    RP_CHECK(cudaEventRecord(b));
    RP_CHECK(cudaEventSynchronize(b));
    float t = 0;
    RP_CHECK(cudaEventElapsedTime(&t, a, b));
    if (i >= 3) ms.push_back(t);
    between();
  }
  RP_CHECK(cudaGetLastError());
  RP_CHECK(cudaEventDestroy(a));
  RP_CHECK(cudaEventDestroy(b));
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!mac::cuda::cuda_device_present()) {  // as mac-bench: nothing to measure here
    std::fprintf(stderr, "read-patterns: no CUDA device: %s\n",
                 mac::cuda::device_description().c_str());
    return 77;
  }
  const Shape s = o.shape;
  int sms = 0;
  RP_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int P = s.ctx / o.page_size;
  Layout L{};
  L.page_size = o.page_size;
  L.pages_per_row = P;
  L.page_stride = static_cast<int64_t>(o.page_size) * s.hkv * kD;
  if (o.layout == "nhd") {
    L.token_stride = static_cast<int64_t>(s.hkv) * kD;
    L.head_stride = kD;
  } else {
    L.token_stride = kD;
    L.head_stride = static_cast<int64_t>(o.page_size) * kD;
  }
  const size_t pool = static_cast<size_t>(s.batch) * s.ctx * s.hkv * kD;  // elements per pool
  const double bytes = 2.0 * pool * 2;
  uint16_t *k = nullptr, *v = nullptr;
  int* claims = nullptr;
  float* sink = nullptr;
  RP_CHECK(cudaMalloc(&k, pool * 2));
  RP_CHECK(cudaMalloc(&v, pool * 2));
  RP_CHECK(cudaMalloc(&claims, sizeof(int)));
  RP_CHECK(cudaMalloc(&sink, sizeof(float)));
  RP_CHECK(cudaMemset(k, 0x3c, pool * 2));
  RP_CHECK(cudaMemset(v, 0x3c, pool * 2));
  const int64_t parts_slots = std::max<int64_t>(s.items(), 2 * sms * 4 * 4);
  float* parts = nullptr;
  if (o.parts > 0)
    RP_CHECK(cudaMalloc(&parts, static_cast<size_t>(parts_slots) * o.parts * (kD + 1) * 4));

  std::printf("pattern,variant,layout,batch,hkv,ctx,chunk,page_size,work,parts,ms,gbps,vs_read\n");
  // The baseline: mac-bench's streaming read (mac::cuda::measure_read_bandwidth) over a
  // buffer of the pattern's size.
  auto streaming_read = [&] {
    double gbps = 0;
    const mac::cuda::Status st =
        mac::cuda::measure_read_bandwidth(static_cast<size_t>(bytes), o.reps, &gbps);
    if (!st.ok()) {
      std::fprintf(stderr, "read-patterns: streaming read: %s\n", st.message.c_str());
      std::exit(1);
    }
    return gbps;
  };
  const double read_gbps = streaming_read();
  auto report = [&](const char* pattern, const char* variant, int work, float ms) {
    const double gbps = bytes / (ms * 1e-3) / 1e9;
    std::printf("%s,%s,%s,%d,%d,%d,%d,%d,%d,%d,%.4f,%.1f,%.4f\n", pattern, variant,
                o.layout.c_str(), s.batch, s.hkv, s.ctx, s.chunk, o.page_size, work, o.parts, ms,
                gbps, gbps / read_gbps);
    std::fflush(stdout);
  };
  // A streaming read's line: its time is that of the pattern's bytes at its rate.
  auto report_read = [&](const char* variant, double gbps) {
    report("read", variant, 0, static_cast<float>(bytes / (gbps * 1e9) * 1e3));
  };
  report_read("stream", read_gbps);

  auto run_warp = [&](auto kernel, int stages, const char* variant, int work) {
    const int smem = 4 * stages * 2 * 16 * kD * 2;
    RP_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int grid = 2 * sms;
    report("warp", variant, work,
           time_ms(
               o.reps, claims,
               [&] {
                 kernel<<<grid, 128, smem>>>(k, v, L, s, work, claims, sink, o.parts, parts,
                                             parts_slots);
               },
               [&] {  // as the combine does on large steps: the partial states' lines dropped
                 if (parts) discard_lines<<<sms * 4, 256>>>(parts, parts_slots * o.parts * kD / 32);
               }));
  };
  auto run_cta = [&](auto kernel, int tile, int stages, const char* variant, int work) {
    const int smem = stages * 2 * tile * kD * 2;
    RP_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int per_sm = 0;
    RP_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 128, smem));
    const int grid = std::min(std::max(per_sm, 1) * sms, s.items());
    char name[64];
    std::snprintf(name, sizeof name, "%s-t%d-s%d-x%d", variant, tile, stages, per_sm);
    report("cta", name, work, time_ms(o.reps, claims, [&] {
             kernel<<<grid, 128, smem>>>(k, v, L, s, work, claims, sink);
           }));
  };
  for (const int w : o.works) {
    run_warp(warp_streams<3, kPrefetch128, false>, 3, "items-pf128", w);
    run_warp(warp_streams<3, kPrefetch128, true>, 3, "range-pf128", w);
    run_warp(warp_streams<3, kEvictFirst, false>, 3, "items-evictfirst", w);
    if (o.parts > 0) {
      run_warp(warp_streams<3, kPrefetch128, false, kStoreEvictLast>, 3, "items-pf128-partslast",
               w);
      run_warp(warp_streams<3, kPrefetch128, false, kStoreStreaming>, 3, "items-pf128-partscs", w);
      run_warp(warp_streams<3, kEvictFirst, false, kStoreEvictLast>, 3,
               "items-evictfirst-partslast", w);
      run_warp(warp_streams<3, kPrefetch128, true, kStoreEvictLast>, 3, "range-pf128-partslast", w);
    }
    run_cta(cta_streams<64, 3, kPrefetch128>, 64, 3, "pf128", w);
  }
  report_read("stream-again", streaming_read());  // the machine's drift over the run
  RP_CHECK(cudaFree(k));
  RP_CHECK(cudaFree(v));
  RP_CHECK(cudaFree(claims));
  if (parts) RP_CHECK(cudaFree(parts));
  RP_CHECK(cudaFree(sink));
  return 0;
}
