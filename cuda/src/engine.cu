// Engine creation: the config checked (plan.hpp), the tuning resolved, the launch shapes
// planned and the workspace (the engine's own or the caller's) laid out and zeroed; the
// workspace size query; the engine's small queries. (Host code; a .cu only so that the
// internal headers' device helpers compile.) Params filling: params.cu; the launch sequence:
// step.cu; prefill: prefill.cu; graph capture: graph.cu.
#include <algorithm>
#include <cstdint>

#include "engine_impl.hpp"
#include "host_status.hpp"
#include "launch.hpp"
#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda {

namespace {

/*! \brief The amend kernel's persistent grid for head dim D, 0 for an unsupported D. */
int amend_grid(int D, int device, bool bulk, int table_bytes) {
  switch (D) {
    case 64: return detail::amend_grid_d64(device, bulk, table_bytes);
    case 128: return detail::amend_grid_d128(device, bulk, table_bytes);
    case 256: return detail::amend_grid_d256(device, bulk, table_bytes);
    default: return 0;
  }
}

/*! \brief Makes `device` current for its lifetime and then restores the caller's (on every
 *  path, failures included). */
class DeviceScope {
 public:
  DeviceScope() : restore_(cudaGetDevice(&caller_) == cudaSuccess) {
    if (!restore_) cudaGetLastError();
  }
  ~DeviceScope() {
    if (restore_) cudaSetDevice(caller_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  Status enter(int device) {
    const cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) return Status::Ok();
    cudaGetLastError();  // not left for a later call's error check to find
    return {StatusCode::kCudaError,
            cat("cudaSetDevice(", device, ") for config.device: ", cudaGetErrorString(e))};
  }

 private:
  int caller_ = -1;
  bool restore_;
};

/*! \brief Resolves what depends on the device for a checked `cfg` (detail::check_config), with
 *  cfg.device current: the tuning, the amend kernel's grid and whether it schedules itself, and
 *  the workspace layout. Fills everything of `impl` but the workspace views. */
Status plan_engine(const EngineConfig& cfg, Engine::Impl* impl) {
  impl->cfg = cfg;
  impl->G = cfg.num_q_heads / cfg.num_kv_heads;
  impl->chunk = cfg.kv_chunk;
  const int N = cfg.max_batch, Hkv = cfg.num_kv_heads, D = cfg.head_dim;
  const Tuning& tu = cfg.tuning;
  // cp.async by default: measured faster than per-row bulk copies (docs/decisions.md).
  const bool bulk = cfg.amend == AmendVariant::kBulk;
  impl->bulk = bulk;
  // Three L2 policies chosen per step: the partial states discarded after the combine
  // (parts_discard_auto, work_items.hpp), stored evict_last where they are (parts_dropped,
  // internal.cuh), and evict_first on the K/V stream on small steps (kv_evict_first_auto) and
  // beside evict_last partials; Tuning fixes them (experiments and tests).
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
  impl->table_bytes = 0;
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
  MAC_STATUS_TRY(detail::plan_workspace(cfg, impl->grid * detail::kAmendWarps, &impl->layout));
  impl->max_items = static_cast<int>(impl->layout.max_items);
  return Status::Ok();
}

/*! \brief Points the engine's workspace views into `base` (impl->layout). */
void carve_workspace(Engine::Impl* impl, char* base) {
  const detail::WorkspaceLayout& w = impl->layout;
  impl->ws_base = base;
  impl->plans = reinterpret_cast<detail::HeadPlan*>(base + w.plans);
  impl->snap_o = reinterpret_cast<uint16_t*>(base + w.snap_o);
  impl->snap_lse2 = reinterpret_cast<float*>(base + w.snap_lse2);
  impl->rows = reinterpret_cast<detail::RowInfo*>(base + w.rows);
  impl->groups = reinterpret_cast<detail::GroupDesc*>(base + w.groups);
  impl->group_off = reinterpret_cast<int*>(base + w.group_off);
  impl->item_group = reinterpret_cast<int*>(base + w.item_group);
  impl->work = reinterpret_cast<int*>(base + w.work);
  impl->part_o = reinterpret_cast<float*>(base + w.part_o);
  impl->part_lse2 = reinterpret_cast<float*>(base + w.part_lse2);
  impl->err = reinterpret_cast<int*>(base + w.err);
  const int N = impl->cfg.max_batch;
  impl->pf_pt = reinterpret_cast<int32_t*>(base + w.prefill);
  impl->pf_len = impl->pf_pt + N;
  impl->pf_slot = impl->pf_pt + 2 * N;
  impl->pf_q = reinterpret_cast<uint16_t*>(base + w.prefill_q);
}

/*! \brief create() and create(workspace): the engine on cfg.device with the caller's
 *  workspace, or (workspace null) one of its own. */
Status create_engine(const EngineConfig& cfg, void* workspace, size_t workspace_bytes,
                     std::unique_ptr<Engine::Impl>* out) {
  auto impl = std::make_unique<Engine::Impl>();
  MAC_STATUS_TRY(plan_engine(cfg, impl.get()));
  const size_t need = impl->layout.bytes;
  if (workspace) {
    if (workspace_bytes < need)
      return invalid(cat("workspace_bytes = ", workspace_bytes, " is less than the ", need,
                         " bytes this config needs (Engine::workspace_size)"));
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
      return invalid(cat("workspace = ", workspace, " must be 256-byte aligned (cudaMalloc is)"));
    carve_workspace(impl.get(), static_cast<char*>(workspace));
  } else {
    MAC_STATUS_TRY(impl->ws.allocate(need));
    carve_workspace(impl.get(), impl->ws.as<char>());
  }
  impl->ws_bytes = need;
  // The step-to-step words (the item counter, the error flags) start at zero, and so does
  // everything else, which no step reads before writing it.
  MAC_CUDA_TRY(cudaDeviceSynchronize());  // no step of an engine sharing it is in flight
  MAC_CUDA_TRY(cudaMemset(impl->ws_base, 0, need));
  // cudaMemset runs on the legacy default stream, which callers' non-blocking streams
  // (stream_create) do not wait for: finish it here, or a first prefill/step on such a
  // stream can see its row table zeroed after upload (found by mac-verify, GPU mode).
  MAC_CUDA_TRY(cudaDeviceSynchronize());
  MAC_CUDA_TRY(cudaStreamCreateWithFlags(&impl->side, cudaStreamNonBlocking));
  MAC_CUDA_TRY(cudaEventCreateWithFlags(&impl->ev_fork, cudaEventDisableTiming));
  MAC_CUDA_TRY(cudaEventCreateWithFlags(&impl->ev_join, cudaEventDisableTiming));
  *out = std::move(impl);
  return Status::Ok();
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

namespace {

/*! \brief The checks before anything touches the device: one present, `cfg` valid. */
Status check_before_device(const EngineConfig& cfg) {
  if (!cuda_device_present())
    return {StatusCode::kNoCuda, cat("no CUDA device: ", device_description())};
  return detail::check_config(cfg);
}

}  // namespace

Status Engine::workspace_size(const EngineConfig& cfg, size_t* bytes) {
  if (bytes == nullptr) return invalid("Engine::workspace_size: bytes is null");
  *bytes = 0;
  MAC_STATUS_TRY(check_before_device(cfg));
  DeviceScope scope;  // the caller's current device is restored on every path
  MAC_STATUS_TRY(scope.enter(cfg.device));
  Impl impl;
  MAC_STATUS_TRY(plan_engine(cfg, &impl));
  *bytes = impl.layout.bytes;
  return Status::Ok();
}

Status Engine::create(const EngineConfig& cfg, std::unique_ptr<Engine>* out) {
  return create(cfg, nullptr, 0, out);
}

Status Engine::create(const EngineConfig& cfg, void* workspace, size_t workspace_bytes,
                      std::unique_ptr<Engine>* out) {
  if (out == nullptr) return invalid("Engine::create: out is null");
  out->reset();
  MAC_STATUS_TRY(check_before_device(cfg));
  // cfg.device is current for the allocations and attributes; the caller's device is restored
  // on every path.
  DeviceScope scope;
  MAC_STATUS_TRY(scope.enter(cfg.device));
  std::unique_ptr<Impl> impl;
  MAC_STATUS_TRY(create_engine(cfg, workspace, workspace_bytes, &impl));
  out->reset(new Engine(std::move(impl)));
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

}  // namespace mac::cuda
