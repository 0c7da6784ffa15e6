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

using detail::as_stream;
using detail::cat;
using detail::cuda_status;
using detail::invalid;
using detail::KParams;

namespace {

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

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

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
  // 0.5–1.7 µs at batch 1 while MAC steps gain 0.4–1 µs (against plain stream order; docs/decisions.md).
  constexpr unsigned kPdlDefault = 1u | 2u | 4u;
  long edges = cfg.dependent_launch ? kPdlDefault : 0u;
  MAC_STATUS_TRY(env_int("MAC_CUDA_PDL_EDGES", 0, 15, &edges));
  impl->pdl_edges = static_cast<unsigned>(edges);
  MAC_CUDA_TRY(cudaDeviceGetAttribute(&impl->sms, cudaDevAttrMultiProcessorCount, cfg.device));
  MAC_CUDA_TRY(detail::prepare_match(D));
  impl->grid = MAC_DISPATCH_HEAD_DIM(D, detail::amend_grid_d64, detail::amend_grid_d128,
                                     detail::amend_grid_d256, cfg.device, bulk, 0);
  // Env MAC_CUDA_AMEND_BLOCKS_PER_SM = b (an experiment-only switch) caps the
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
