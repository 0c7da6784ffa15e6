// Engine creation: the config checked, the tuning resolved, the launch shapes and the
// workspace carved; the engine's small queries. (Host code; a .cu only so that the internal
// headers' device helpers compile.) Params filling: params.cu; the launch sequence:
// step.cu; prefill: prefill.cu; graph capture: graph.cu.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "engine_impl.hpp"
#include "host_status.hpp"
#include "launch.hpp"
#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda {

namespace {

/*! \brief A tuning field in [lo, hi], or an error naming it and its value. */
Status tuning_in(const char* name, long v, long lo, long hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return invalid(cat("tuning.", name, " = ", v, " (expected ", lo, "..", hi, ")"));
}
size_t align256(size_t x) { return (x + 255) / 256 * 256; }

/*! \brief The amend kernel's persistent grid for head dim D, 0 for an unsupported D. */
int amend_grid(int D, int device, bool bulk, int table_bytes) {
  switch (D) {
    case 64: return detail::amend_grid_d64(device, bulk, table_bytes);
    case 128: return detail::amend_grid_d128(device, bulk, table_bytes);
    case 256: return detail::amend_grid_d256(device, bulk, table_bytes);
    default: return 0;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Engine
// ---------------------------------------------------------------------------------------

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;
const EngineConfig& Engine::config() const { return impl_->cfg; }
size_t Engine::workspace_bytes() const { return impl_->ws_bytes; }
int Engine::chunk() const { return impl_->chunk; }
bool Engine::bulk_copies() const { return impl_->bulk; }
bool Engine::self_scheduled() const { return impl_->table_bytes > 0; }

Status Engine::create(const EngineConfig& cfg, std::unique_ptr<Engine>* out) {
  // The caller's current device is restored on every path (cudaSetDevice below selects
  // cfg.device for the engine's allocations and attributes).
  int caller_device = -1;
  const bool restore = cudaGetDevice(&caller_device) == cudaSuccess;
  if (!restore) cudaGetLastError();
  auto create_on_device = [&]() -> Status {
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
      return invalid(cat("kv_chunk = ", cfg.kv_chunk,
                         " must be 0 (automatic) or a power of two in [16, 2^20]"));
    MAC_CUDA_TRY(cudaSetDevice(cfg.device));

    auto impl = std::make_unique<Impl>();
    impl->cfg = cfg;
    impl->G = G;
    impl->chunk = cfg.kv_chunk;
    const int N = cfg.max_batch, Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim;
    const Tuning& tu = cfg.tuning;
    // cp.async by default: measured faster than per-row bulk copies (docs/decisions.md).
    const bool bulk = cfg.amend == AmendVariant::kBulk;
    impl->bulk = bulk;
    // Three L2 policies chosen per step: the partial states discarded after the combine
    // (parts_discard_auto, work_items.hpp), stored evict_last where they are (parts_dropped,
    // internal.cuh), and evict_first on the K/V stream on small steps (kv_evict_first_auto) and
    // beside evict_last partials; Tuning fixes them (experiments and tests).
    MAC_STATUS_TRY(tuning_in("kv_evict_first", tu.kv_evict_first, -1, 1));
    MAC_STATUS_TRY(tuning_in("parts_discard", tu.parts_discard, -1, 1));
    MAC_STATUS_TRY(tuning_in("parts_evict_last", tu.parts_evict_last, -1, 1));
    MAC_STATUS_TRY(tuning_in("pdl_edges", tu.pdl_edges, -1, 15));
    MAC_STATUS_TRY(tuning_in("amend_blocks_per_sm", tu.amend_blocks_per_sm, 0, 32));
    MAC_STATUS_TRY(tuning_in("amend_blocks", tu.amend_blocks, 0, 1 << 20));
    impl->kv_evict_first = tu.kv_evict_first;
    impl->parts_discard = tu.parts_discard;
    impl->parts_evict_last = tu.parts_evict_last;
    // Not bit 3: measured, amend → combine as a programmatic edge costs full-attention steps
    // 0.5–1.7 µs at batch 1 while MAC steps gain 0.4–1 µs (against plain stream order;
    // docs/decisions.md).
    constexpr unsigned kPdlDefault = 1u | 2u | 4u;
    impl->pdl_edges = tu.pdl_edges >= 0      ? static_cast<unsigned>(tu.pdl_edges)
                      : cfg.dependent_launch ? kPdlDefault
                                             : 0u;
    MAC_CUDA_TRY(cudaDeviceGetAttribute(&impl->sms, cudaDevAttrMultiProcessorCount, cfg.device));
    MAC_CUDA_TRY(detail::prepare_match(D));
    impl->grid = amend_grid(D, cfg.device, bulk, 0);
    if (impl->grid < 1)
      return {StatusCode::kUnsupported,
              cat("head_dim = ", D, ": no amend kernel for it (64, 128, 256)")};
    // Tuning caps of the persistent grid (experiments: fewer, longer K/V streams; tests: with
    // few warps, steps small enough for the CPU reference take the item sizes of large ones).
    if (tu.amend_blocks_per_sm > 0)
      impl->grid = std::min(impl->grid, tu.amend_blocks_per_sm * impl->sms);
    if (tu.amend_blocks > 0) impl->grid = std::min(impl->grid, tu.amend_blocks);
    if (cfg.schedule == ScheduleMode::kAuto) {
      // The amend kernel schedules its own items when its tables fit beside the stages
      // without costing a resident block (docs/cuda.md), of the grid as capped above;
      // otherwise the schedule kernel does.
      const int64_t tb = (detail::self_schedule_ints(N, Hkv) * 4 + 15) / 16 * 16;
      if (tb <= detail::kMaxSelfTableBytes) {
        const int g = amend_grid(D, cfg.device, bulk, static_cast<int>(tb));
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
  };
  const Status st = create_on_device();
  if (restore) cudaSetDevice(caller_device);
  return st;
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

}  // namespace mac::cuda
