#pragma once
// An engine's plan in plain C++, so the CPU test suite checks it where no GPU is present: the
// config checks of Engine::create and Engine::workspace_size, and the workspace layout, given
// the amend kernel's resident warps (the one input that needs the device: engine.cu resolves
// it). The records the kernels pass to each other through the workspace are defined here too.
#include <cstddef>
#include <cstdint>

#include "mac/cuda/mac_cuda.hpp"
#include "status_text.hpp"
#include "work_items.hpp"  // GroupDesc, max_items_bound, is_pow2

namespace mac::cuda::detail {

/*! \brief Per (row, query head) decision of K1 (or the exact default). */
struct HeadPlan {
  int band_begin;  // E(p) on a hit, Fe(E(m)) on a miss
  int match_pos;   // −1 on a miss
  float d2;        // canonical FP32 d2 of the nearest candidate, NaN if none searched
  int hit;         // 1 on a hit
};

/*! \brief Row flags written by K1 (or the scheduler in full mode). */
struct RowInfo {
  int m;         // position, −1 if kv_len invalid
  int ready;     // ready[slot] ≠ 0 && epochs equal (0 in full mode)
  int eligible;  // m ≥ gen_min && ready && m ≥ 1
  int valid;     // kv_len in [1, max_context] and slot in range (MAC/prefill)
  int slot;      // request slot as given (MAC/prefill; −1 in full mode); in range iff valid
};

/*! \brief Slots of the workspace's `work` ints. */
enum WorkSlot : int {
  kWorkC = 0,         // item size of eligible rows (store_cuts; read back by Engine::last_chunk)
  kWorkClaims = 1,    // the amend kernel's dynamic item counter (reset by the combine)
  kWorkLgC = 2,       // its log2
  kWorkCExact = 3,    // item size of rows that are not eligible (the exact cut)
  kWorkLgCExact = 4,  // its log2
  kWorkInts = 5
};

/*! \brief A config Engine::create accepts, or the status naming the first offending field and
 *  its allowed range (kUnsupported for D and G, kContextTooLong for max_context, else
 *  kInvalidArgument). Checks neither the device nor anything that depends on it. */
inline Status check_config(const EngineConfig& cfg) {
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
      (cfg.kv_chunk < 16 || cfg.kv_chunk > (1 << 20) || !is_pow2(cfg.kv_chunk)))
    return invalid(
        cat("kv_chunk = ", cfg.kv_chunk, " must be 0 (automatic) or a power of two in [16, 2^20]"));
  const Tuning& tu = cfg.tuning;
  const struct {
    const char* name;
    long v, lo, hi;
  } fields[] = {{"kv_evict_first", tu.kv_evict_first, -1, 1},
                {"parts_discard", tu.parts_discard, -1, 1},
                {"parts_evict_last", tu.parts_evict_last, -1, 1},
                {"pdl_edges", tu.pdl_edges, -1, 15},
                {"amend_blocks_per_sm", tu.amend_blocks_per_sm, 0, 32},
                {"amend_blocks", tu.amend_blocks, 0, 1 << 20}};
  for (const auto& f : fields)
    if (f.v < f.lo || f.v > f.hi)
      return invalid(cat("tuning.", f.name, " = ", f.v, " (expected ", f.lo, "..", f.hi, ")"));
  return Status::Ok();
}

/*! \brief Where each region of an engine's workspace lies: byte offsets from its start, each
 *  a multiple of 256. The two words that live from step to step come first, at the same
 *  offsets for every config: `work` (the amend kernel's item counter, 0 between steps: every
 *  step's combine resets it; and the step's cuts) and `err` (the error flags). Everything
 *  after them is written by a step before the step reads it, so engines whose steps are
 *  ordered may share one workspace, each finding the counter and the flags where it expects
 *  them. */
struct WorkspaceLayout {
  int64_t max_items = 0;  //!< work items a step may have (max_items_bound)
  size_t work = 0;        //!< int [kWorkInts]
  size_t err = 0;         //!< int, error flags
  size_t plans = 0;       //!< HeadPlan [N, Hq]
  size_t snap_o = 0;      //!< bf16 [N, Hq, D] prefix snapshot
  size_t snap_lse2 = 0;   //!< fp32 [N, Hq], base 2
  size_t rows = 0;        //!< RowInfo [N]
  size_t groups = 0;      //!< GroupDesc [N, Hkv]
  size_t group_off = 0;   //!< int [N·Hkv + 1]
  size_t item_group = 0;  //!< int [max_items]
  size_t part_o = 0;      //!< fp32 [max_items, G, D] normalised partial outputs
  size_t part_lse2 = 0;   //!< fp32 [max_items, G], base 2
  size_t prefill = 0;     //!< int32 [3, N]: prefill pseudo-rows' page-table row, kv_len, slot
  size_t prefill_q = 0;   //!< bf16 [2, N, Hq, D]: prefill queries gathered (q_pre, q_post)
  size_t bytes = 0;       //!< total
};

/*! \brief The workspace of an engine with `cfg` (checked by check_config) whose amend kernel
 *  runs `amend_warps` resident warps. Non-decreasing in max_batch and max_context. Refuses
 *  (kInvalidArgument) a bound on work items beyond 2^30. */
inline Status plan_workspace(const EngineConfig& cfg, int amend_warps, WorkspaceLayout* out) {
  if (amend_warps < 1) return invalid(cat("amend_warps = ", amend_warps, " must be ≥ 1"));
  const int64_t N = cfg.max_batch, Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim,
                G = Hq / Hkv;
  const int64_t max_items = max_items_bound(N * Hkv * cfg.max_context, static_cast<int>(N * Hkv),
                                            amend_warps, cfg.kv_chunk, cfg.head_dim);
  if (max_items > (int64_t{1} << 30))
    return invalid(cat("max_batch·Hkv·context/chunk too large: ", max_items, " items"));
  WorkspaceLayout w;
  w.max_items = max_items;
  size_t off = 0;
  auto take = [&](int64_t bytes) {
    const size_t o = off;
    off += (static_cast<size_t>(bytes) + 255) / 256 * 256;
    return o;
  };
  w.work = take(sizeof(int) * kWorkInts);
  w.err = take(sizeof(int));
  w.plans = take(sizeof(HeadPlan) * N * Hq);
  w.snap_o = take(sizeof(uint16_t) * N * Hq * D);
  w.snap_lse2 = take(sizeof(float) * N * Hq);
  w.rows = take(sizeof(RowInfo) * N);
  w.groups = take(sizeof(GroupDesc) * N * Hkv);
  w.group_off = take(sizeof(int) * (N * Hkv + 1));
  w.item_group = take(sizeof(int) * max_items);
  w.part_o = take(sizeof(float) * max_items * G * D);
  w.part_lse2 = take(sizeof(float) * max_items * G);
  w.prefill = take(sizeof(int32_t) * 3 * N);
  w.prefill_q = take(sizeof(uint16_t) * 2 * N * Hq * D);
  w.bytes = off;
  *out = w;
  return Status::Ok();
}

}  // namespace mac::cuda::detail
