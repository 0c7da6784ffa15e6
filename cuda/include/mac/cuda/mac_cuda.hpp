#pragma once
/*! \file mac_cuda.hpp
 *  \brief Host API of the BF16 CUDA kernels (namespace mac::cuda). Plain C++17: no CUDA
 *         types appear here, so tests, tools and the verification driver build as ordinary
 *         C++ and link everywhere (without CUDA the library is a stub whose functions
 *         return StatusCode::kNoCuda).
 *
 *  Semantics are docs/semantics.md §3 (one decode step per (request, query head)): K1 match →
 *  schedule → K2 amend (band) + complete (sinks, tail) → merge → K3 cache write.
 *
 *  Conventions used by every pointer below:
 *   - "bf16" buffers are `uint16_t` holding raw bfloat16 bits (round-to-nearest-even).
 *   - All pointers are DEVICE pointers unless the field says "host".
 *   - Shapes are written `[a, b, c]`, row-major; strides are in ELEMENTS; the last
 *     dimension (the head dimension D) is always contiguous.
 *   - Every LSE (`L`) at this boundary is the NATURAL log of the softmax denominator with
 *     the scale inside the exponent: `L = ln Σ_t exp(s·q·k_t)`. −inf means the empty state.
 *   - Positions: row i decodes position `m = kv_len[i] − 1`; its own key/value is already
 *     in the cache (docs/semantics.md §3).
 *   - Streams are `cudaStream_t` passed as `void*` (nullptr = the legacy default stream).
 *     stream_create makes non-blocking streams, which the legacy stream does not order
 *     against: issue a step's copies on the stream its kernels run on, or synchronise
 *     between them (both races found so far were copies on nullptr, kernels elsewhere).
 */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mac/semantics.hpp"  // kMaxGroup, supported_head_dim

namespace mac::cuda {

// ---------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------

/*! \brief Outcome class of an API call. */
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  //!< a bad pointer, size, stride or parameter (message names it)
  kUnsupported,      //!< head dim not in {64,128,256}, or G = Hq/Hkv not in 1..16
  kContextTooLong,   //!< a context beyond the configured maximum (refused before launch/capture)
  kNoCuda,           //!< the library was built without CUDA, or no CUDA device is present
  kCudaError,        //!< a CUDA runtime error (message holds cudaGetErrorString)
  kNotReady,         //!< e.g. replay() before capture()
};

/*! \brief Status of a call: a code and one clear message naming the offending value. */
struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;
  bool ok() const { return code == StatusCode::kOk; }
  static Status Ok() { return {}; }
};

/*! \brief Name of a status code, e.g. "kInvalidArgument". */
const char* to_string(StatusCode c);

// ---------------------------------------------------------------------------------------
// Device presence and plain device-memory helpers (so callers need no CUDA headers)
// ---------------------------------------------------------------------------------------

/*! \brief True iff the library was compiled with CUDA kernels. */
bool built_with_cuda();
/*! \brief True iff built with CUDA and at least one usable CUDA device is present.
 *  Never throws; false when built without CUDA. */
bool cuda_device_present();
/*! \brief Name and compute capability of device 0, or a reason why there is none. */
std::string device_description();

Status device_malloc(void** ptr, size_t bytes);  //!< cudaMalloc
Status device_free(void* ptr);                   //!< cudaFree (nullptr is fine)
Status device_memset(void* ptr, int value, size_t bytes, void* stream = nullptr);  //!< async
Status copy_to_device(void* dst, const void* src, size_t bytes,
                      void* stream = nullptr);  //!< async H→D
Status copy_to_host(void* dst, const void* src, size_t bytes,
                    void* stream = nullptr);  //!< async D→H
Status copy_device_to_device(void* dst, const void* src, size_t bytes, void* stream = nullptr);
Status stream_create(void** stream);  //!< cudaStreamCreateWithFlags(non-blocking)
Status stream_destroy(void* stream);
Status stream_synchronize(void* stream);
Status device_synchronize();

/*! \brief RAII device buffer (cudaMalloc / cudaFree). Move-only. */
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  /*! \brief Frees the old buffer and allocates `bytes` (contents undefined). */
  Status allocate(size_t bytes);
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// ---------------------------------------------------------------------------------------
// Supported shapes
// ---------------------------------------------------------------------------------------

inline constexpr int kMaxContext = 131072;  //!< largest supported kv_len
using mac::kMaxGroup;                       //!< largest supported G = Hq / Hkv (mac/semantics.hpp)
using mac::supported_head_dim;              //!< D ∈ {64, 128, 256} (mac/semantics.hpp)

// ---------------------------------------------------------------------------------------
// Parameters of one decode step
// ---------------------------------------------------------------------------------------

/*! \brief Everything one decode step reads and writes (FlashAttention-style params).
 *
 *  Sizes come from the Engine's config (Hq, Hkv, D); `batch` ≤ config.max_batch.
 *  Everything that changes from step to step (kv_len, slot, ready, epochs, page table
 *  contents, q contents) lives in device memory, so a captured graph can be replayed.
 *  Pointers themselves must not change between capture and replay.
 */
struct DecodeParams {
  int batch = 0;  //!< N, rows (requests) in this step, 1 ≤ N ≤ config.max_batch

  // --- queries -------------------------------------------------------------------------
  const uint16_t* q_post = nullptr;  //!< [N, Hq, D] bf16, post-RoPE query of position m
  const uint16_t* q_pre = nullptr;   //!< [N, Hq, D] bf16, pre-RoPE query (MAC only; used by K1
                                     //!<  and copied into the ring)
  int64_t q_row_stride = 0;          //!< elements between rows of q_post/q_pre (0 → Hq·stride
                                     //!<  of a head)
  int64_t q_head_stride = 0;         //!< elements between heads of q_post/q_pre (0 → D). q
                                     //!<  strides: multiples of 8 (16-byte loads), heads and
                                     //!<  rows nested without overlap

  // --- paged KV cache (post-RoPE keys, values); separate K and V pools ----------------
  const uint16_t* k_cache = nullptr;    //!< [num_pages, page_size, Hkv, D] bf16
  const uint16_t* v_cache = nullptr;    //!< [num_pages, page_size, Hkv, D] bf16
  int64_t num_pages = 0;                //!< pages in each pool
  int page_size = 16;                   //!< tokens per page (≥ 1; 1 and 16 tested)
  int64_t kv_page_stride = 0;           //!< elements between pages (0 → page_size·Hkv·D)
  int64_t kv_token_stride = 0;          //!< elements between tokens in a page (0 → Hkv·D)
  int64_t kv_head_stride = 0;           //!< elements between KV heads (0 → D)
  const int32_t* page_table = nullptr;  //!< [N, max_pages_per_row] int32: entry j of row i is
                                        //!<  the page holding keys [j·ps, (j+1)·ps) of row i
  int max_pages_per_row = 0;            //!< row stride of page_table (≥ ceil(max kv_len / ps))
  const int32_t* kv_len = nullptr;      //!< [N] int32: keys in the cache, = m + 1. Must satisfy
                                        //!<  1 ≤ kv_len ≤ min(config.max_context,
                                        //!<  max_pages_per_row·page_size); a row outside gets NaN
                                        //!<  output, writes nothing, and raises error flag 1.
                                        //!<  Page ids outside [0, num_pages) are clamped (wrong
                                        //!<  but in-bounds reads) and raise error flag 4

  float softmax_scale = 0;  //!< s in exp(s·q·k) (typically 1/√D)

  // --- MAC parameters (docs/semantics.md §3) -----------------------------------------------------
  double tau = 0.45;   //!< τ; hit iff canonical FP32 d2 < thr = 2·D·(1−τ)² (thr rounded to
                       //!<  FP32 once, as mac::match_threshold)
  int ring = 512;      //!< M, ring capacity (must equal config.ring)
  int tail = 256;      //!< r ≥ 0, exact tail; E(p) = max(0, p + 1 − r)
  int sinks = 0;       //!< F ≥ 0, front sinks; Fe(e) = min(F, e)
  int gen_min = 2048;  //!< a row is eligible only if m ≥ gen_min

  // --- ring caches, per request slot (MAC only) ----------------------------------------
  const int32_t* slot = nullptr;   //!< [N] int32 request slot of each row, in [0, num_slots);
                                   //!<  two rows of one step must not share a slot
  int num_slots = 0;               //!< R
  uint16_t* ring_q_pre = nullptr;  //!< [R, M, Hq, D] bf16: q̃_p of position p in slot p mod M
  uint16_t* ring_o = nullptr;      //!< [R, M, Hq, D] bf16: normalised o of entry(p) over
                                   //!<  keys [Fe(E(p)), E(p))
  float* ring_lse = nullptr;       //!< [R, M, Hq] fp32 natural-log L of entry(p); −inf = empty
  const int32_t* ready = nullptr;  //!< [R] int32, nonzero = caches usable (docs/semantics.md §3.2)
  const int32_t* epoch_a = nullptr;  //!< [R] int32 } a row is ready iff ready ≠ 0 and
  const int32_t* epoch_b = nullptr;  //!< [R] int32 }  epoch_a == epoch_b

  // --- outputs ------------------------------------------------------------------------
  uint16_t* out = nullptr;      //!< [N, Hq, D] bf16, normalised attention output
  int64_t out_row_stride = 0;   //!< elements between rows of out (0 → Hq·out_head_stride)
  int64_t out_head_stride = 0;  //!< elements between heads of out (0 → D)
  float* lse = nullptr;         //!< [N, Hq] fp32, natural-log LSE of the output (may be nullptr)
  int64_t lse_row_stride = 0;   //!< elements between rows of lse (0 → Hq·lse_head_stride)
  int64_t lse_head_stride = 0;  //!< elements between heads of lse (0 → 1). Output strides:
                                //!<  ≥ 0, heads and rows nested without overlap

  // --- optional diagnostics, [N, Hq] each; nullptr to skip ----------------------------
  int8_t* diag_hit = nullptr;         //!< 1 on a hit, 0 on a miss
  int64_t* diag_match_pos = nullptr;  //!< matched position p on a hit, −1 on a miss
  float* diag_d2 = nullptr;           //!< canonical FP32 d2 of the nearest candidate (NaN if
                                      //!<  none searched: ineligible row)
  int32_t* diag_keys_read = nullptr;  //!< KV tokens this head attended to this step
};

/*! \brief Sizes of the device arrays a StepBuffers holds. */
struct StepShape {
  int batch = 1;              //!< N, rows
  int num_q_heads = 0;        //!< Hq
  int num_kv_heads = 0;       //!< Hkv
  int head_dim = 128;         //!< D
  int64_t num_pages = 1;      //!< pages in each KV pool
  int page_size = 16;         //!< tokens per page
  int max_pages_per_row = 1;  //!< page-table row stride
  int ring = 512;             //!< M
  int num_slots = 1;          //!< R, request slots of the rings
  bool diagnostics = true;    //!< also the four [N, Hq] diagnostic arrays
};

/*! \brief One owner of the device arrays of a decode step, in the dense layouts DecodeParams
 *  documents (NHD KV pools, rows of Hq·D): allocate() sizes them from a StepShape and
 *  params() points a DecodeParams at them, sizes filled in. For tests, tools and examples;
 *  a serving system passes its own memory through DecodeParams instead.
 *  Contents are undefined after allocate(): the caller fills the KV pools, page table,
 *  kv_len, slots, rings, readiness and queries. Scalars (softmax_scale, tau, tail, sinks,
 *  gen_min) keep DecodeParams's defaults. */
struct StepBuffers {
  StepShape shape;
  DeviceBuffer k_cache, v_cache, page_table, kv_len, slot, q_post, q_pre, out, lse;
  DeviceBuffer ring_q_pre, ring_o, ring_lse, ready, epoch_a, epoch_b;
  DeviceBuffer diag_hit, diag_match_pos, diag_d2, diag_keys_read;
  /*! \brief Checks `s` (every size ≥ 1) and (re)allocates all arrays; on any failure
   *  (a bad size, out of memory, no device) *this is left unchanged. */
  Status allocate(const StepShape& s);
  /*! \brief A DecodeParams over these arrays (diagnostics null when not allocated). */
  DecodeParams params() const;
};

/*! \brief Ring entries for prompt positions (docs/semantics.md §3 "Prefill"): for each request i
 * and position p = first_pos[i] + j, j < num_positions, writes slot p mod M of request slot
 *  slot[i]: q̃_p (bit copy) and the exact state attn(q_p, [Fe(E(p)), E(p))) (BF16 o, FP32 L).
 *  The KV cache must hold the keys of those positions. Not for graph capture. Typically
 *  first_pos = max(0, P − M), num_positions = P − first_pos. from_decode() fills the KV, ring
 *  and scalar fields from a step's DecodeParams (same meanings, same checks). */
struct PrefillParams {
  int batch = 0;                            //!< requests, ≥ 1
  int num_positions = 0;                    //!< positions per request, in [0, M]
  const int64_t* first_pos_host = nullptr;  //!< HOST [batch]: first position of each request;
                                            //!<  its last, + 1, ≤ config.max_context
  const int32_t* slot_host = nullptr;       //!< HOST [batch]: request slot, in [0, num_slots)

  // --- queries: request i's position first_pos[i] + j, head h at i·q_request_stride +
  //     j·q_position_stride + h·q_head_stride --------------------------------------------
  const uint16_t* q_post = nullptr;  //!< [batch, num_positions, Hq, D] bf16, post-RoPE
  const uint16_t* q_pre = nullptr;  //!< [batch, num_positions, Hq, D] bf16, pre-RoPE (the ring's q̃)
  int64_t q_request_stride = 0;     //!< 0 → num_positions·(position stride)
  int64_t q_position_stride = 0;    //!< 0 → Hq·(head stride)
  int64_t q_head_stride = 0;        //!< 0 → D. Multiples of 8 (16-byte loads); requests,
                                    //!<  positions and heads nested without overlap

  // --- paged KV cache, as in DecodeParams; page_table row i belongs to request i ------
  const uint16_t* k_cache = nullptr;    //!< [num_pages, page_size, Hkv, D] bf16
  const uint16_t* v_cache = nullptr;    //!< [num_pages, page_size, Hkv, D] bf16
  int64_t num_pages = 0;                //!< ≥ 1
  int page_size = 16;                   //!< ≥ 1
  int64_t kv_page_stride = 0;           //!< 0 → page_size·(token stride)
  int64_t kv_token_stride = 0;          //!< 0 → Hkv·D
  int64_t kv_head_stride = 0;           //!< 0 → D
  const int32_t* page_table = nullptr;  //!< [batch, max_pages_per_row] int32
  int max_pages_per_row = 0;            //!< ≥ ceil((last position + 1) / page_size)

  float softmax_scale = 0;  //!< s in exp(s·q·k)
  int ring = 512;           //!< M (must equal config.ring)
  int tail = 256;           //!< r ≥ 0
  int sinks = 0;            //!< F ≥ 0

  // --- ring caches [num_slots, M, Hq, ·], as in DecodeParams -------------------------
  int num_slots = 0;               //!< R ≥ 1
  uint16_t* ring_q_pre = nullptr;  //!< [R, M, Hq, D] bf16
  uint16_t* ring_o = nullptr;      //!< [R, M, Hq, D] bf16
  float* ring_lse = nullptr;       //!< [R, M, Hq] fp32 natural log

  /*! \brief The KV cache, ring and scalar fields of `p` (copy_shared_fields); batch, positions,
   *  slots and queries left for the caller. */
  static PrefillParams from_decode(const DecodeParams& p);
};

/*! \brief Copies the fields DecodeParams and PrefillParams share, one to the other: the paged
 *  KV cache (pools, page table, page size and strides), softmax_scale, ring, tail, sinks and
 *  the ring caches. */
template <class From, class To>
void copy_shared_fields(const From& a, To& b) {
  b.k_cache = a.k_cache;
  b.v_cache = a.v_cache;
  b.num_pages = a.num_pages;
  b.page_size = a.page_size;
  b.kv_page_stride = a.kv_page_stride;
  b.kv_token_stride = a.kv_token_stride;
  b.kv_head_stride = a.kv_head_stride;
  b.page_table = a.page_table;
  b.max_pages_per_row = a.max_pages_per_row;
  b.softmax_scale = a.softmax_scale;
  b.ring = a.ring;
  b.tail = a.tail;
  b.sinks = a.sinks;
  b.num_slots = a.num_slots;
  b.ring_q_pre = a.ring_q_pre;
  b.ring_o = a.ring_o;
  b.ring_lse = a.ring_lse;
}

inline PrefillParams PrefillParams::from_decode(const DecodeParams& p) {
  PrefillParams f;
  copy_shared_fields(p, f);
  return f;
}

/*! \brief Where K3 (rectify-append, the ring write) runs. */
enum class K3Mode : int {
  kFused = 0,       //!< inside the combine kernel (K2's last stage); default, measured faster
  kSideStream = 1,  //!< separate kernel on a side stream, forked after the amend kernel and
                    //!<  joined by one event (the paper's layout)
};

/*! \brief How the amend kernel streams K/V tiles into shared memory (docs/cuda.md). */
enum class AmendVariant : int {
  kDefault = 0,  //!< the measured-faster one (cp.async)
  kCpAsync = 1,  //!< 16-byte cp.async by all lanes, swizzled rows
  kBulk = 2,     //!< Hopper bulk copies (TMA engine, no tensor map), one per key row, mbarrier
};

/*! \brief Who decides a step's work items (the device-side schedule, docs/cuda.md). */
enum class ScheduleMode : int {
  kAuto = 0,    //!< the amend kernel itself, into shared-memory tables, when those fit (sized
                //!<  by max_batch·Hkv) without costing occupancy; else as kKernel
  kKernel = 1,  //!< a one-block schedule kernel, launched before the amend kernel, writes
                //!<  them to the workspace. Same items, same bits as kAuto
};

/*! \brief Experiment and test switches of an engine. The defaults are the measured-best
 *  choices (auto where the choice is made per step); a serving caller leaves them alone.
 *  None changes a bit of any result: they are cache hints, launch order and grid size
 *  (the grid caps change the item sizes a step chooses, hence its reduction order, exactly
 *  as a smaller GPU would). Values outside the documented range are refused by create. */
struct Tuning {
  int kv_evict_first = -1;  //!< L2 evict_first policy on the amend kernel's K/V copies: −1 auto
                            //!<  (small steps, and beside evict_last partials), 0 never, 1 always
  int parts_discard = -1;   //!< the combine drops the partial states' L2 lines once read: −1 auto
                            //!<  (large steps), 0 never, 1 always
  int parts_evict_last = -1;  //!< the amend kernel stores partial states evict_last: −1 where the
                              //!<  combine drops them, 0 never, 1 always
  int pdl_edges = -1;  //!< kernel boundaries launched as programmatic dependents, a bit mask in
                       //!<  0..15: bit 0 K1 → schedule kernel, bit 1 → amend, bit 2 amend →
                       //!<  combine (MAC and prefill), bit 3 amend → combine (full attention);
                       //!<  −1: from EngineConfig::dependent_launch (bits 0–2, or none)
  int amend_blocks_per_sm = 0;  //!< cap of the persistent amend grid, blocks per SM (0: none;
                                //!<  else 1..32): fewer, longer K/V streams
  int amend_blocks = 0;  //!< cap of the amend grid in blocks (0: none; else 1..2^20): with few
                         //!<  warps, steps small enough for the CPU reference take the item
                         //!<  sizes of large ones (tests)
};

/*! \brief Static configuration: fixes the workspace and the launch shapes. */
struct EngineConfig {
  int max_batch = 1;              //!< largest N
  int num_q_heads = 0;            //!< Hq = G·Hkv
  int num_kv_heads = 0;           //!< Hkv
  int head_dim = 128;             //!< D ∈ {64, 128, 256}
  int max_context = kMaxContext;  //!< largest kv_len any step may have (≤ kMaxContext)
  int ring = 512;                 //!< M
  int kv_chunk = 0;               //!< keys per work item of the amend kernel; 0: chosen per step on
                     //!<  the device from the kv_lens (a power of two in 256..2048 that
                     //!<  leaves every warp several items; eligible MAC rows take
                     //!<  smaller items than the others at some sizes, and 64 in a MAC
                     //!<  step of ≤ 128 KV-head groups where every head hit and each
                     //!<  group reads ≤ 1024 keys); else a power of two ≥ 16.
                     //!<  Part of the reduction order: rows that are not eligible take
                     //!<  full attention's size, so they keep its bits
  K3Mode k3_mode = K3Mode::kFused;
  AmendVariant amend = AmendVariant::kDefault;
  ScheduleMode schedule = ScheduleMode::kAuto;
  bool dependent_launch = true;  //!< launch the kernels of a step after the first as
                                 //!<  programmatic dependents of the one before (Hopper PDL):
                                 //!<  their blocks start while it drains, then wait for it.
                                 //!<  Every boundary but full attention's amend → combine
                                 //!<  (measured slower, docs/cuda.md). Same bits either way;
                                 //!<  false: plain stream order
  int device = 0;                //!< CUDA device ordinal
  Tuning tuning;                 //!< experiment and test switches (defaults: measured best)
};

/*! \brief Which computation a step or a captured graph runs. */
enum class StepKind : int {
  kFullAttention = 0,  //!< exact paged decode; MAC fields ignored, nothing written to rings
  kMac = 1,            //!< K1 + K2 + K3
};

/*! \brief Owns a side stream, events, an optional captured graph and its workspace, or uses
 *  the caller's. Not thread-safe; one Engine per stream of work.
 *
 *  Workspace: device memory the steps use between and within kernels (the item schedule,
 *  partial states, the K1 plans, error flags). By default each engine allocates its own. A
 *  caller may own it instead (Engine::workspace_size, then create with a pointer): one
 *  workspace sized for the largest config serves several engines, e.g. one per captured batch
 *  size, provided their steps never overlap (one stream, or ordered by events). It holds no
 *  state from one step to the next but the amend kernel's item counter, which every step
 *  leaves at zero, and the error flags, which read_error_flags then reports for all of them;
 *  both lie at the same offsets for every config. */
class Engine {
 public:
  /*! \brief Validates `cfg` (shapes, D, G, max_context ≤ kMaxContext, tuning ranges) and
   *  creates an engine with a workspace of its own on cfg.device. The caller's current device
   *  is restored on return, on every path. */
  static Status create(const EngineConfig& cfg, std::unique_ptr<Engine>* out);
  /*! \brief As create(cfg, out), but the engine uses the caller's device memory `workspace`
   *  on cfg.device (≥ workspace_size(cfg) bytes, 256-byte aligned as cudaMalloc's are; freed by
   *  the caller after the engine). create zeroes it, after waiting for the whole device: no
   *  step of another engine sharing it may be issued meanwhile, and its error flags restart
   *  at 0. kInvalidArgument (naming the sizes) if it is too small or misaligned; a null
   *  `workspace` is create(cfg, out). */
  static Status create(const EngineConfig& cfg, void* workspace, size_t workspace_bytes,
                       std::unique_ptr<Engine>* out);
  /*! \brief Bytes of workspace an engine with `cfg` uses on cfg.device (create's checks, same
   *  statuses; kNoCuda without a device). Depends on the device (the amend kernel's resident
   *  grid bounds a step's work items) and grows with max_batch and max_context, never
   *  shrinks. The caller's current device is restored on return. */
  static Status workspace_size(const EngineConfig& cfg, size_t* bytes);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const;
  /*! \brief config.kv_chunk: keys per work item when fixed, 0 when chosen per step. */
  int chunk() const;
  /*! \brief Keys per work item of the eligible rows of the latest step launched on
   *  `stream` (in a full step: the step's one size; reads device memory; synchronises the
   *  stream). */
  Status last_chunk(int* chunk, void* stream) const;
  /*! \brief True iff the amend kernel uses bulk copies (AmendVariant resolved). */
  bool bulk_copies() const;
  /*! \brief True iff the amend kernel schedules its own items (ScheduleMode resolved). */
  bool self_scheduled() const;
  /*! \brief Bytes of device workspace in use (its own or the caller's), workspace_size(cfg). */
  size_t workspace_bytes() const;

  /*! \brief Checks `p` against the config on the host (pointers, strides, sizes, τ, M, r,
   *  F, gen_min); does not read device memory. */
  Status validate(const DecodeParams& p, StepKind kind) const;

  /*! \brief Exact split-KV paged decode with combine: out/lse of every row and query head
   *  (each KV head read once for its G query heads). */
  Status full_attention(const DecodeParams& p, void* stream);

  /*! \brief One MAC decode step (docs/semantics.md §3): K1 match, device-side schedule, K2 amend &
   *  complete, K3 ring write (gated by readiness). Rows that are ineligible (m < gen_min,
   *  not ready, epochs differ, m = 0) produce output bit-identical to full_attention(). */
  Status mac_step(const DecodeParams& p, void* stream);

  /*! \brief Writes prefill ring entries (see PrefillParams), max_batch (request, position)
   *  pairs per launch of the step's kernels; checks `p` on the host first (the message names
   *  the field). Synchronous on `stream`. */
  Status prefill_entries(const PrefillParams& p, void* stream);

  /*! \brief Captures one step of `kind` with `p` into a CUDA graph (replacing any earlier
   *  one). Refuses (kContextTooLong) if config.max_context exceeds what the workspace holds
   *  — i.e. a context beyond the configured maximum never reaches a captured kernel. */
  Status capture(StepKind kind, const DecodeParams& p, void* stream);
  /*! \brief Replays the captured graph on `stream`. */
  Status replay(void* stream);

  /*! \brief Device-side error flags accumulated since the last reset (bit 0: a kv_len out
   *  of [1, max_context] or beyond the page-table row; bit 1: a slot out of range; bit 2: a
   *  page id out of [0, num_pages)). Synchronises `stream`. */
  Status read_error_flags(int* flags, bool reset, void* stream);

  struct Impl;

 private:
  friend Status capture_match_only(Engine& engine, const DecodeParams& p, void* stream);
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mac::cuda
