// Host side of mac::cuda: validation, workspace, launch sequences, graph capture/replay,
// and the plain device-memory helpers of the API. (Host code; a .cu only so that the
// internal headers' device helpers compile.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "launch.hpp"
#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda {

using detail::KParams;

namespace {

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
Status invalid(const std::string& m) { return {StatusCode::kInvalidArgument, m}; }
/*! \brief An experiment-only integer switch from the environment: *out unchanged if `name` is
 *  unset or empty, an error naming the value if it is not an integer in [lo, hi]. */
Status env_int(const char* name, long lo, long hi, long* out) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return Status::Ok();
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < lo || v > hi)
    return invalid(cat(name, " = '", env, "' (expected an integer in ", lo, "..", hi, ")"));
  *out = v;
  return Status::Ok();
}
/*! \brief A per-step policy switch from the environment: unset, empty or "auto" leaves *out
 *  as it is (the engine's default, −1: chosen per step); "0" or "1" fixes it; anything else
 *  is an error naming the value. */
Status env_auto01(const char* name, int* out) {
  const char* env = std::getenv(name);
  if (env == nullptr) return Status::Ok();
  const std::string v(env);
  if (v == "0" || v == "1")
    *out = v == "1" ? 1 : 0;
  else if (!v.empty() && v != "auto")
    return invalid(cat(name, " = '", v, "' (expected auto, 0 or 1)"));
  return Status::Ok();
}
Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return {StatusCode::kCudaError, cat(what, ": ", cudaGetErrorString(e))};
}
#define MAC_CUDA_TRY(expr)                                \
  do {                                                    \
    const cudaError_t e_ = (expr);                        \
    if (e_ != cudaSuccess) return cuda_status(e_, #expr); \
  } while (0)
#define MAC_STATUS_TRY(expr) \
  do {                       \
    Status s_ = (expr);      \
    if (!s_.ok()) return s_; \
  } while (0)

constexpr int kModeMatchOnly = 100;  // host-side only: K1 alone (benchmarking)

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

/*! \brief FlashAttention-style dispatch on the head dimension: fails loudly otherwise. */
#define MAC_DISPATCH_HEAD_DIM(d, fn64, fn128, fn256, ...) \
  ((d) == 64    ? fn64(__VA_ARGS__)                       \
   : (d) == 128 ? fn128(__VA_ARGS__)                      \
   : (d) == 256 ? fn256(__VA_ARGS__)                      \
                : cudaErrorInvalidValue)

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

}  // namespace

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

// ---------------------------------------------------------------------------------------
// Engine
// ---------------------------------------------------------------------------------------

struct Engine::Impl {
  EngineConfig cfg;
  int G = 1, chunk = 0, grid = 0, max_items = 0;  // chunk 0: chosen per step on the device
  bool bulk = false;
  int table_bytes = 0;      // > 0: the amend kernel schedules its own items (ScheduleMode::kAuto)
  int kv_evict_first = -1;  // L2 policy of the K/V stream: −1 per step, else fixed (env)
  int parts_discard =
      -1;  // the partials' L2 lines dropped after the combine: −1 per step, else fixed (env)
  int parts_evict_last = -1;  // the partials stored evict_last: −1 where dropped, else fixed (env)
  // Kernel boundaries launched as programmatic dependents: bit 0 K1 → schedule kernel (MAC
  // steps that are not self-scheduled), bit 1 → amend (from K1 or the schedule kernel),
  // bit 2 amend → combine in MAC and prefill steps, bit 3 amend → combine in full-attention
  // steps. config.dependent_launch: bits 0–2 (kPdlDefault), else none; env
  // MAC_CUDA_PDL_EDGES (0..15, an experiment-only switch) overrides.
  unsigned pdl_edges = 0;
  DeviceBuffer ws;
  size_t ws_bytes = 0;
  // workspace views
  detail::HeadPlan* plans = nullptr;
  uint16_t* snap_o = nullptr;
  float* snap_lse2 = nullptr;
  detail::RowInfo* rows = nullptr;
  detail::GroupDesc* groups = nullptr;
  int* group_off = nullptr;
  int* item_group = nullptr;
  int* work = nullptr;
  float* part_o = nullptr;
  float* part_lse2 = nullptr;
  int* err = nullptr;
  int sms = 132;
  int32_t* pf_pt = nullptr;  // prefill pseudo-rows: page-table row, kv_len, slot
  int32_t* pf_len = nullptr;
  int32_t* pf_slot = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t ev_fork = nullptr, ev_join = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;

  ~Impl() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (ev_fork) cudaEventDestroy(ev_fork);
    if (ev_join) cudaEventDestroy(ev_join);
    if (side) cudaStreamDestroy(side);
  }

  KParams base(const DecodeParams& p, int mode) const;
  Status launch(const KParams& kp, int mode, cudaStream_t s);
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;
const EngineConfig& Engine::config() const { return impl_->cfg; }
size_t Engine::workspace_bytes() const { return impl_->ws_bytes; }
int Engine::chunk() const { return impl_->chunk; }
bool Engine::bulk_copies() const { return impl_->bulk; }
bool Engine::self_scheduled() const { return impl_->table_bytes > 0; }

Status Engine::create(const EngineConfig& cfg, std::unique_ptr<Engine>* out) {
  if (out == nullptr) return invalid("Engine::create: out is null");
  out->reset();
  if (!cuda_device_present())
    return {StatusCode::kNoCuda, cat("no CUDA device: ", device_description())};
  if (!supported_head_dim(cfg.head_dim))
    return {StatusCode::kUnsupported,
            cat("head_dim = ", cfg.head_dim, " is not supported (64, 128, 256)")};
  if (cfg.num_kv_heads < 1 || cfg.num_q_heads < 1 || cfg.num_q_heads % cfg.num_kv_heads != 0)
    return invalid(cat("num_q_heads = ", cfg.num_q_heads,
                       " must be a positive multiple of num_kv_heads = ", cfg.num_kv_heads));
  const int G = cfg.num_q_heads / cfg.num_kv_heads;
  if (G > kMaxGroup)
    return {StatusCode::kUnsupported, cat("G = Hq/Hkv = ", G, " is not supported (1..16)")};
  if (cfg.max_batch < 1) return invalid(cat("max_batch = ", cfg.max_batch, " must be ≥ 1"));
  if (cfg.max_context < 1 || cfg.max_context > kMaxContext)
    return {StatusCode::kContextTooLong,
            cat("max_context = ", cfg.max_context, " must be in [1, ", kMaxContext, "]")};
  if (cfg.ring < 1) return invalid(cat("ring = ", cfg.ring, " must be ≥ 1"));
  // kv_chunk = 0: the item size is chosen per step on the device (work_items.hpp auto_chunk).
  if (cfg.kv_chunk != 0 &&
      (cfg.kv_chunk < 16 || cfg.kv_chunk > (1 << 20) || !detail::is_pow2(cfg.kv_chunk)))
    return invalid(
        cat("kv_chunk = ", cfg.kv_chunk, " must be 0 (automatic) or a power of two in [16, 2^20]"));
  MAC_CUDA_TRY(cudaSetDevice(cfg.device));

  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->G = G;
  impl->chunk = cfg.kv_chunk;
  const int N = cfg.max_batch, Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim;
  bool bulk = false;  // default: cp.async (measured faster than per-row bulk copies, docs/cuda.md)
  if (const char* env = std::getenv("MAC_CUDA_AMEND")) {
    const std::string v(env);
    if (v == "cpasync")
      bulk = false;
    else if (v == "bulk")
      bulk = true;
    else if (!v.empty())
      return invalid(cat("MAC_CUDA_AMEND = '", v, "' (expected cpasync or bulk)"));
  }
  if (cfg.amend == AmendVariant::kCpAsync) bulk = false;
  if (cfg.amend == AmendVariant::kBulk) bulk = true;
  impl->bulk = bulk;
  // Three L2 policies chosen per step: the partial states discarded after the combine
  // (parts_discard_auto, work_items.hpp), stored evict_last where they are (parts_dropped,
  // internal.cuh), and evict_first on the K/V stream on small steps (kv_evict_first_auto) and
  // beside evict_last partials; env MAC_CUDA_PARTS_DISCARD, MAC_CUDA_PARTS_EVICT_LAST and
  // MAC_CUDA_KV_EVICT_FIRST = 0 or 1 (experiment and test switches) fix them.
  MAC_STATUS_TRY(env_auto01("MAC_CUDA_KV_EVICT_FIRST", &impl->kv_evict_first));
  MAC_STATUS_TRY(env_auto01("MAC_CUDA_PARTS_DISCARD", &impl->parts_discard));
  MAC_STATUS_TRY(env_auto01("MAC_CUDA_PARTS_EVICT_LAST", &impl->parts_evict_last));
  // Not bit 3: measured, amend → combine as a programmatic edge costs full-attention steps
  // 0.5–1.7 µs at batch 1 while MAC steps gain 0.4–1 µs (docs/bench/tuning_h200.md §7).
  constexpr unsigned kPdlDefault = 1u | 2u | 4u;
  long edges = cfg.dependent_launch ? kPdlDefault : 0u;
  MAC_STATUS_TRY(env_int("MAC_CUDA_PDL_EDGES", 0, 15, &edges));
  impl->pdl_edges = static_cast<unsigned>(edges);
  MAC_CUDA_TRY(cudaDeviceGetAttribute(&impl->sms, cudaDevAttrMultiProcessorCount, cfg.device));
  MAC_CUDA_TRY(detail::prepare_match(D));
  impl->grid = MAC_DISPATCH_HEAD_DIM(D, detail::amend_grid_d64, detail::amend_grid_d128,
                                     detail::amend_grid_d256, cfg.device, bulk, 0);
  // Env MAC_CUDA_AMEND_BLOCKS_PER_SM = b (an experiment-only switch, tuning page §11) caps the
  // persistent grid at b blocks per SM: fewer, longer K/V streams.
  long blocks_per_sm = 0;
  MAC_STATUS_TRY(env_int("MAC_CUDA_AMEND_BLOCKS_PER_SM", 1, 32, &blocks_per_sm));
  if (blocks_per_sm > 0)
    impl->grid = std::min(impl->grid, static_cast<int>(blocks_per_sm) * impl->sms);
  // Env MAC_CUDA_AMEND_BLOCKS = b (a test switch) caps it at b blocks in all: with few warps,
  // steps small enough for the CPU reference take the item sizes of large ones.
  long blocks = 0;
  MAC_STATUS_TRY(env_int("MAC_CUDA_AMEND_BLOCKS", 1, 1 << 20, &blocks));
  if (blocks > 0) impl->grid = std::min(impl->grid, static_cast<int>(blocks));
  if (cfg.schedule == ScheduleMode::kAuto) {
    // The amend kernel schedules its own items when its tables fit beside the stages
    // without costing a resident block (docs/cuda.md), of the grid as capped above;
    // otherwise the schedule kernel does.
    const int64_t tb = (detail::self_schedule_ints(N, Hkv) * 4 + 15) / 16 * 16;
    if (tb <= detail::kMaxSelfTableBytes) {
      const int g =
          MAC_DISPATCH_HEAD_DIM(D, detail::amend_grid_d64, detail::amend_grid_d128,
                                detail::amend_grid_d256, cfg.device, bulk, static_cast<int>(tb));
      if (g >= impl->grid) impl->table_bytes = static_cast<int>(tb);
    }
  }
  MAC_CUDA_TRY(cudaGetLastError());
  const int warps = impl->grid * detail::kAmendWarps;
  const int64_t max_items = detail::max_items_bound(int64_t{N} * Hkv * cfg.max_context, N * Hkv,
                                                    warps, cfg.kv_chunk, cfg.head_dim);
  if (max_items > (int64_t{1} << 30))
    return invalid(cat("max_batch·Hkv·context/chunk too large: ", max_items, " items"));
  impl->max_items = static_cast<int>(max_items);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t o = off;
    off += align256(bytes);
    return o;
  };
  const size_t o_plans = take(sizeof(detail::HeadPlan) * N * Hq);
  const size_t o_snap = take(sizeof(uint16_t) * N * Hq * D);
  const size_t o_snapl = take(sizeof(float) * N * Hq);
  const size_t o_rows = take(sizeof(detail::RowInfo) * N);
  const size_t o_groups = take(sizeof(detail::GroupDesc) * N * Hkv);
  const size_t o_goff = take(sizeof(int) * (N * Hkv + 1));
  const size_t o_igrp = take(sizeof(int) * max_items);
  const size_t o_work = take(sizeof(int) * detail::kWorkInts);
  const size_t o_po = take(sizeof(float) * max_items * G * D);
  const size_t o_pl = take(sizeof(float) * max_items * G);
  const size_t o_err = take(sizeof(int));
  const size_t o_pf = take(sizeof(int32_t) * 3 * N);
  MAC_STATUS_TRY(impl->ws.allocate(off));
  impl->ws_bytes = off;
  char* b = impl->ws.as<char>();
  impl->plans = reinterpret_cast<detail::HeadPlan*>(b + o_plans);
  impl->snap_o = reinterpret_cast<uint16_t*>(b + o_snap);
  impl->snap_lse2 = reinterpret_cast<float*>(b + o_snapl);
  impl->rows = reinterpret_cast<detail::RowInfo*>(b + o_rows);
  impl->groups = reinterpret_cast<detail::GroupDesc*>(b + o_groups);
  impl->group_off = reinterpret_cast<int*>(b + o_goff);
  impl->item_group = reinterpret_cast<int*>(b + o_igrp);
  impl->work = reinterpret_cast<int*>(b + o_work);
  impl->part_o = reinterpret_cast<float*>(b + o_po);
  impl->part_lse2 = reinterpret_cast<float*>(b + o_pl);
  impl->err = reinterpret_cast<int*>(b + o_err);
  impl->pf_pt = reinterpret_cast<int32_t*>(b + o_pf);
  impl->pf_len = impl->pf_pt + N;
  impl->pf_slot = impl->pf_pt + 2 * N;
  MAC_CUDA_TRY(cudaMemset(impl->ws.data(), 0, off));
  // cudaMemset runs on the legacy default stream, which callers' non-blocking streams
  // (stream_create) do not wait for: finish it here, or a first prefill/step on such a
  // stream can see its row table zeroed after upload (found by mac-verify, GPU mode).
  MAC_CUDA_TRY(cudaDeviceSynchronize());
  MAC_CUDA_TRY(cudaStreamCreateWithFlags(&impl->side, cudaStreamNonBlocking));
  MAC_CUDA_TRY(cudaEventCreateWithFlags(&impl->ev_fork, cudaEventDisableTiming));
  MAC_CUDA_TRY(cudaEventCreateWithFlags(&impl->ev_join, cudaEventDisableTiming));
  out->reset(new Engine(std::move(impl)));
  return Status::Ok();
}

Status Engine::validate(const DecodeParams& p, StepKind kind) const {
  const EngineConfig& c = impl_->cfg;
  const int D = c.head_dim;
  if (p.batch < 1 || p.batch > c.max_batch)
    return invalid(cat("batch = ", p.batch, " must be in [1, max_batch = ", c.max_batch, "]"));
  if (!p.q_post) return invalid("q_post is null");
  if (!p.k_cache || !p.v_cache) return invalid("k_cache/v_cache is null");
  if (!p.page_table) return invalid("page_table is null");
  if (!p.kv_len) return invalid("kv_len is null");
  if (!p.out) return invalid("out is null");
  if (p.page_size < 1) return invalid(cat("page_size = ", p.page_size, " must be ≥ 1"));
  if (p.num_pages < 1) return invalid(cat("num_pages = ", p.num_pages, " must be ≥ 1"));
  if (p.max_pages_per_row < 1)
    return invalid(cat("max_pages_per_row = ", p.max_pages_per_row, " must be ≥ 1"));
  const int64_t ts = p.kv_token_stride ? p.kv_token_stride : int64_t{c.num_kv_heads} * D;
  const int64_t hs = p.kv_head_stride ? p.kv_head_stride : D;
  const int64_t ps = p.kv_page_stride ? p.kv_page_stride : ts * p.page_size;
  if (ts % 8 || hs % 8 || ps % 8)
    return invalid(cat("KV strides (page ", ps, ", token ", ts, ", head ", hs,
                       ") must be multiples of 8 elements (16 B)"));
  const int64_t qs = p.q_row_stride ? p.q_row_stride : int64_t{c.num_q_heads} * D;
  if (qs % 8 || qs < int64_t{c.num_q_heads} * D)
    return invalid(cat("q_row_stride = ", qs, " must be a multiple of 8 and ≥ Hq·D"));
  if (!(std::isfinite(p.softmax_scale) && p.softmax_scale > 0))
    return invalid(cat("softmax_scale = ", p.softmax_scale, " must be finite and > 0"));
  if (p.tail < 0) return invalid(cat("tail (r) = ", p.tail, " must be ≥ 0"));
  if (p.sinks < 0) return invalid(cat("sinks (F) = ", p.sinks, " must be ≥ 0"));
  if (kind == StepKind::kMac) {
    if (!p.q_pre) return invalid("q_pre is null");
    if (!(std::isfinite(p.tau) && p.tau < 1))
      return invalid(cat("tau = ", p.tau, " must be finite and < 1"));
    if (p.ring != c.ring)
      return invalid(cat("ring (M) = ", p.ring, " differs from config.ring = ", c.ring));
    if (p.gen_min < 0) return invalid(cat("gen_min = ", p.gen_min, " must be ≥ 0"));
    if (!p.slot || p.num_slots < 1)
      return invalid(cat("slot is null or num_slots = ", p.num_slots, " < 1"));
    if (!p.ring_q_pre || !p.ring_o || !p.ring_lse) return invalid("a ring pointer is null");
    if (!p.ready || !p.epoch_a || !p.epoch_b) return invalid("ready/epoch_a/epoch_b is null");
  }
  return Status::Ok();
}

KParams Engine::Impl::base(const DecodeParams& p, int mode) const {
  KParams k{};
  const int D = cfg.head_dim;
  k.N = p.batch;
  k.Hq = cfg.num_q_heads;
  k.Hkv = cfg.num_kv_heads;
  k.G = G;
  k.D = D;
  k.mode = mode;
  k.q_post = p.q_post;
  k.q_pre = p.q_pre;
  k.q_row_stride = p.q_row_stride ? p.q_row_stride : int64_t{k.Hq} * D;
  k.k_cache = p.k_cache;
  k.v_cache = p.v_cache;
  k.token_stride = p.kv_token_stride ? p.kv_token_stride : int64_t{k.Hkv} * D;
  k.head_stride = p.kv_head_stride ? p.kv_head_stride : D;
  k.page_stride = p.kv_page_stride ? p.kv_page_stride : k.token_stride * p.page_size;
  k.page_size = p.page_size;
  k.page_shift = detail::is_pow2(p.page_size) ? detail::log2_exact(p.page_size) : -1;
  k.num_pages = p.num_pages;
  k.page_table = p.page_table;
  k.max_pages = p.max_pages_per_row;
  k.row_pt = nullptr;
  k.kv_len = p.kv_len;
  k.max_context = cfg.max_context;
  k.scale_log2 = static_cast<float>(static_cast<double>(p.softmax_scale) * mac::kLog2e);
  k.thr = mac::match_threshold(D, p.tau);
  k.M = cfg.ring;
  k.r = p.tail;
  k.F = p.sinks;
  k.gen_min = p.gen_min;
  k.slot = p.slot;
  k.R = p.num_slots;
  k.ring_q = p.ring_q_pre;
  k.ring_o = p.ring_o;
  k.ring_lse = p.ring_lse;
  k.ready = p.ready;
  k.epoch_a = p.epoch_a;
  k.epoch_b = p.epoch_b;
  k.out = p.out;
  k.lse = p.lse;
  k.diag_hit = p.diag_hit;
  k.diag_match_pos = p.diag_match_pos;
  k.diag_d2 = p.diag_d2;
  k.diag_keys_read = p.diag_keys_read;
  k.chunk = chunk;
  k.warps_total = grid * detail::kAmendWarps;
  k.k3_in_combine = cfg.k3_mode == K3Mode::kFused ? 1 : 0;
  k.self_schedule = table_bytes > 0 ? 1 : 0;
  k.kv_evict_first = kv_evict_first;
  k.parts_discard = parts_discard;
  k.parts_evict_last = parts_evict_last;
  k.plans = plans;
  k.snap_o = snap_o;
  k.snap_lse2 = snap_lse2;
  k.rows = rows;
  k.groups = groups;
  k.group_off = group_off;
  k.item_group = item_group;
  k.work = work;
  k.part_o = part_o;
  k.part_lse2 = part_lse2;
  k.max_items = max_items;
  k.err = err;
  // K1: enough blocks to cover the SMs twice when N·Hq is small (cost stays flat in context).
  const int nh = k.N * k.Hq;
  k.k1_splits = std::max(1, std::min(detail::kMaxK1Splits, (2 * sms + nh - 1) / nh));
  k.k1_splits = std::min(k.k1_splits, std::max(1, cfg.ring / 32));
  if (mode == detail::kModeFull) {
    k.slot = nullptr;
    k.diag_hit = nullptr;  // diagnostics are MAC's; full attention leaves them alone
    k.diag_match_pos = nullptr;
    k.diag_d2 = nullptr;
    k.diag_keys_read = nullptr;
  }
  return k;
}

Status Engine::Impl::launch(const KParams& kp, int mode, cudaStream_t s) {
  const int D = cfg.head_dim;
  // The step's first kernel follows whatever the caller queued; the rest follow a kernel of
  // this step and may launch as programmatic dependents (EngineConfig::dependent_launch).
  const bool k1 = mode == detail::kModeMac || mode == kModeMatchOnly;
  const bool self = kp.self_schedule != 0;
  if (k1) MAC_CUDA_TRY(detail::launch_match(kp, s));
  if (mode == kModeMatchOnly) return Status::Ok();
  if (!self) MAC_CUDA_TRY(detail::launch_schedule(kp, k1 && (pdl_edges & 1u), s));
  // A self-scheduled amend kernel is the first kernel of a full or prefill step.
  const bool amend_pdl = (k1 || !self) && (pdl_edges & 2u) != 0;
  MAC_CUDA_TRY(MAC_DISPATCH_HEAD_DIM(D, detail::launch_amend_d64, detail::launch_amend_d128,
                                     detail::launch_amend_d256, kp, grid, table_bytes, bulk,
                                     amend_pdl, s));
  const bool side_k3 = mode == detail::kModeMac && !kp.k3_in_combine;
  if (side_k3) {
    // K3 on the side stream: forked after the amend kernel, joined by one event.
    MAC_CUDA_TRY(cudaEventRecord(ev_fork, s));
    MAC_CUDA_TRY(cudaStreamWaitEvent(side, ev_fork, 0));
    MAC_CUDA_TRY(detail::launch_combine(kp, /*k3_only=*/true, /*pdl=*/false, side));
    MAC_CUDA_TRY(cudaEventRecord(ev_join, side));
  }
  const unsigned combine_edge = mode == detail::kModeFull ? 8u : 4u;
  MAC_CUDA_TRY(detail::launch_combine(kp, /*k3_only=*/false, (pdl_edges & combine_edge) != 0, s));
  if (side_k3) MAC_CUDA_TRY(cudaStreamWaitEvent(s, ev_join, 0));
  return Status::Ok();
}

Status Engine::full_attention(const DecodeParams& p, void* stream) {
  MAC_STATUS_TRY(validate(p, StepKind::kFullAttention));
  return impl_->launch(impl_->base(p, detail::kModeFull), detail::kModeFull, as_stream(stream));
}

Status Engine::mac_step(const DecodeParams& p, void* stream) {
  MAC_STATUS_TRY(validate(p, StepKind::kMac));
  return impl_->launch(impl_->base(p, detail::kModeMac), detail::kModeMac, as_stream(stream));
}

Status Engine::prefill_entries(const PrefillParams& pp, void* stream) {
  const EngineConfig& c = impl_->cfg;
  DecodeParams p = pp.kv;
  if (pp.batch < 1) return invalid(cat("prefill batch = ", pp.batch, " must be ≥ 1"));
  if (pp.num_positions < 0 || pp.num_positions > c.ring)
    return invalid(cat("num_positions = ", pp.num_positions, " must be in [0, M = ", c.ring, "]"));
  if (pp.num_positions == 0) return Status::Ok();
  if (!pp.first_pos_host || !pp.slot_host)
    return invalid("prefill first_pos_host/slot_host is null");
  if (!pp.q_pre || !pp.q_post) return invalid("prefill q_pre/q_post is null");
  if (!p.ring_q_pre || !p.ring_o || !p.ring_lse) return invalid("prefill: a ring pointer is null");
  if (p.num_slots < 1) return invalid(cat("num_slots = ", p.num_slots, " must be ≥ 1"));
  if (p.ring != c.ring)
    return invalid(cat("ring (M) = ", p.ring, " differs from config.ring = ", c.ring));
  for (int i = 0; i < pp.batch; ++i) {
    const int64_t last = pp.first_pos_host[i] + pp.num_positions;  // kv_len of the last position
    if (pp.first_pos_host[i] < 0 || last > c.max_context)
      return {StatusCode::kContextTooLong,
              cat("prefill request ", i, ": positions [", pp.first_pos_host[i], ", ", last,
                  ") exceed max_context = ", c.max_context)};
    if (pp.slot_host[i] < 0 || pp.slot_host[i] >= p.num_slots)
      return invalid(cat("prefill request ", i, ": slot = ", pp.slot_host[i], " out of [0, ",
                         p.num_slots, ")"));
  }
  // Each (request, position) is a pseudo-row with its own query and kv_len = p + 1; its
  // band state over [Fe(E(p)), E(p)) is the entry. Processed max_batch pseudo-rows at a time.
  const int64_t total = int64_t{pp.batch} * pp.num_positions;
  const int64_t rs = int64_t{c.num_q_heads} * c.head_dim;
  std::vector<int32_t> h_pt, h_len, h_slot;
  const cudaStream_t s = as_stream(stream);
  for (int64_t r0 = 0; r0 < total; r0 += c.max_batch) {
    const int n = static_cast<int>(std::min<int64_t>(c.max_batch, total - r0));
    h_pt.assign(3 * n, 0);
    for (int j = 0; j < n; ++j) {
      const int64_t pr = r0 + j, req = pr / pp.num_positions,
                    pos = pp.first_pos_host[req] + pr % pp.num_positions;
      h_pt[j] = static_cast<int32_t>(req);
      h_pt[n + j] = static_cast<int32_t>(pos + 1);
      h_pt[2 * n + j] = pp.slot_host[req];
    }
    MAC_CUDA_TRY(
        cudaMemcpyAsync(impl_->pf_pt, h_pt.data(), sizeof(int32_t) * n, cudaMemcpyHostToDevice, s));
    MAC_CUDA_TRY(cudaMemcpyAsync(impl_->pf_len, h_pt.data() + n, sizeof(int32_t) * n,
                                 cudaMemcpyHostToDevice, s));
    MAC_CUDA_TRY(cudaMemcpyAsync(impl_->pf_slot, h_pt.data() + 2 * n, sizeof(int32_t) * n,
                                 cudaMemcpyHostToDevice, s));
    DecodeParams q = p;
    q.batch = n;
    q.q_post = pp.q_post + r0 * rs;
    q.q_pre = pp.q_pre + r0 * rs;
    q.q_row_stride = rs;
    q.kv_len = impl_->pf_len;
    q.slot = impl_->pf_slot;
    q.out = nullptr;
    q.lse = nullptr;
    KParams kp = impl_->base(q, detail::kModePrefill);
    kp.row_pt = impl_->pf_pt;
    kp.out = nullptr;
    kp.lse = nullptr;
    kp.diag_hit = nullptr;
    kp.diag_match_pos = nullptr;
    kp.diag_d2 = nullptr;
    kp.diag_keys_read = nullptr;
    kp.k3_in_combine = 1;
    MAC_STATUS_TRY(impl_->launch(kp, detail::kModePrefill, s));
    MAC_CUDA_TRY(cudaStreamSynchronize(s));  // host arrays are reused by the next chunk
  }
  return Status::Ok();
}

Status Engine::capture(StepKind kind, const DecodeParams& p, void* stream) {
  if (stream == nullptr) return invalid("capture needs a non-default stream (stream_create)");
  MAC_STATUS_TRY(validate(p, kind == StepKind::kMatchOnly ? StepKind::kMac : kind));
  if (impl_->cfg.max_context > kMaxContext)
    return {StatusCode::kContextTooLong,
            cat("max_context = ", impl_->cfg.max_context, " exceeds ", kMaxContext)};
  const int mode = kind == StepKind::kMac         ? detail::kModeMac
                   : kind == StepKind::kMatchOnly ? kModeMatchOnly
                                                  : detail::kModeFull;
  const KParams kp = impl_->base(p, mode == kModeMatchOnly ? detail::kModeMac : mode);
  if (impl_->exec) {
    cudaGraphExecDestroy(impl_->exec);
    impl_->exec = nullptr;
  }
  if (impl_->graph) {
    cudaGraphDestroy(impl_->graph);
    impl_->graph = nullptr;
  }
  const cudaStream_t s = as_stream(stream);
  MAC_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const Status st = impl_->launch(kp, mode, s);
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(s, &g);
  if (!st.ok()) {
    if (g) cudaGraphDestroy(g);
    return st;
  }
  MAC_CUDA_TRY(e);
  impl_->graph = g;
  MAC_CUDA_TRY(cudaGraphInstantiate(&impl_->exec, g, 0));
  return Status::Ok();
}

Status Engine::replay(void* stream) {
  if (!impl_->exec) return {StatusCode::kNotReady, "replay: nothing captured"};
  MAC_CUDA_TRY(cudaGraphLaunch(impl_->exec, as_stream(stream)));
  return Status::Ok();
}

Status Engine::last_chunk(int* chunk, void* stream) const {
  if (!chunk) return invalid("chunk is null");
  const cudaStream_t s = as_stream(stream);
  MAC_CUDA_TRY(
      cudaMemcpyAsync(chunk, impl_->work + detail::kWorkC, sizeof(int), cudaMemcpyDeviceToHost, s));
  MAC_CUDA_TRY(cudaStreamSynchronize(s));
  return Status::Ok();
}

Status Engine::read_error_flags(int* flags, bool reset, void* stream) {
  if (!flags) return invalid("flags is null");
  const cudaStream_t s = as_stream(stream);
  MAC_CUDA_TRY(cudaMemcpyAsync(flags, impl_->err, sizeof(int), cudaMemcpyDeviceToHost, s));
  if (reset) MAC_CUDA_TRY(cudaMemsetAsync(impl_->err, 0, sizeof(int), s));
  MAC_CUDA_TRY(cudaStreamSynchronize(s));
  return Status::Ok();
}

Status fill_random(void* dst, size_t n, DType type, uint64_t seed, float mean, float stddev,
                   void* stream) {
  if (!dst && n) return invalid("fill_random: dst is null");
  MAC_CUDA_TRY(detail::launch_fill_random(dst, n, type == DType::kBF16, seed, mean, stddev,
                                          as_stream(stream)));
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
