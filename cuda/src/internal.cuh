#pragma once
// Internal device-side vocabulary of mac_cuda: the kernel parameter block and helpers on the
// per-head and per-row records the kernels pass on (plan.hpp). The attention state (base 2
// inside, natural log at the boundary) is state.cuh; the work-item decomposition shared by the
// schedule, amend and combine kernels is plain C++ in work_items.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "mac/cuda/mac_cuda.hpp"
#include "mac/semantics.hpp"  // kMaxGroup, lse_from_log2, lse_to_log2
#include "plan.hpp"           // HeadPlan, RowInfo, WorkSlot
#include "state.cuh"
#include "work_items.hpp"

namespace mac::cuda::detail {

// K1 blocks per (row, head) at most: one thread-block cluster (8: the portable cluster size;
// a power of two, the width of the cluster's warp reduction in match.cu).
constexpr int kMaxK1Splits = 8;
static_assert((kMaxK1Splits & (kMaxK1Splits - 1)) == 0 && kMaxK1Splits <= 8,
              "kMaxK1Splits: a power of two <= 8");

/*! \brief Programmatic dependent launch (sm_90), called first by every kernel of a step:
 *  wait until the kernel before it in the stream has finished and its writes are visible,
 *  then allow the next kernel to launch. A grid's dependents launch only once all its blocks
 *  have passed this point, that is once its own predecessor has finished: at most two grids
 *  of a step are resident, the running one and the next (whose blocks wait here), so a
 *  waiting grid never holds resources that a grid it waits for still needs. The wait returns
 *  at once in a kernel not launched as a dependent (launch_kernel, pdl = false); the release
 *  matters only when the next kernel is one. */
__device__ __forceinline__ void wait_prior_grid_then_release_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/*! \brief Row modes of one launch. */
enum Mode : int {
  kModeFull = 0,     // exact attention, nothing written to rings
  kModeMac = 1,      // K1 decisions, K3 write gated by readiness
  kModePrefill = 2,  // exact band state of each (pseudo) row written to the ring, no output
};

/*! \brief The plan of a head without a match: band from `band_begin`, nothing searched. */
__device__ inline HeadPlan miss_plan(int band_begin) {
  HeadPlan plan;
  plan.band_begin = band_begin;
  plan.match_pos = -1;
  plan.d2 = __int_as_float(0x7fc00000);  // NaN: nothing searched
  plan.hit = 0;
  return plan;
}

/*! \brief Everything the kernels read; passed by value. */
struct KParams {
  int N, Hq, Hkv, G, D;
  int mode;
  // queries: row i's head h at q + i*q_row_stride + h*q_head_stride (elements)
  const uint16_t* q_post;
  const uint16_t* q_pre;
  int64_t q_row_stride, q_head_stride;
  // paged KV
  const uint16_t* k_cache;
  const uint16_t* v_cache;
  int64_t page_stride, token_stride, head_stride;
  int page_size;
  int page_shift;     // log2(page_size) when page_size is a power of two, else −1
  int64_t num_pages;  // pages in each pool: page ids outside [0, num_pages) are clamped + flagged
  const int32_t* page_table;
  int max_pages;
  const int32_t* row_pt;  // page-table row of each row (nullptr: identity)
  const int32_t* kv_len;
  int max_context;
  float scale_log2;  // softmax scale · log2(e)
  // MAC
  float thr;
  int M, r, F, gen_min;
  const int32_t* slot;
  int R;
  uint16_t* ring_q;
  uint16_t* ring_o;
  float* ring_lse;
  const int32_t* ready;
  const int32_t* epoch_a;
  const int32_t* epoch_b;
  // outputs: row i's head h at out + i*out_row_stride + h*out_head_stride, and likewise lse
  uint16_t* out;
  float* lse;
  int64_t out_row_stride, out_head_stride, lse_row_stride, lse_head_stride;
  int8_t* diag_hit;
  int64_t* diag_match_pos;
  float* diag_d2;
  int32_t* diag_keys_read;
  // work decomposition
  int chunk;           // keys per work item when fixed by the config; 0: chosen per step (StepCuts)
  int warps_total;     // W: resident warps of the persistent amend grid
  int k3_in_combine;   // 1: combine writes the ring entry (K3 fused)
  int self_schedule;   // 1: the amend kernel computes the schedule (no schedule kernel)
  int kv_evict_first;  // L2 policy of the amend kernel's K/V stream: 1 evict_first, 0 no cache
                       //  hint, −1 chosen per step (kv_evict_first_auto)
  int parts_discard;   // the combine drops the partial states' L2 lines once read (no write-back
                       //  to DRAM): 1 yes, 0 no, −1 chosen per step (parts_discard_auto)
  int parts_evict_last;  // the amend kernel stores the partial states with an L2 evict_last
                         //  policy: 1 yes, 0 no, −1 where the combine drops them (parts_dropped)
  // workspace
  HeadPlan* plans;    // [N, Hq]
  uint16_t* snap_o;   // [N, Hq, D] prefix snapshot (read before the ring write)
  float* snap_lse2;   // [N, Hq]
  RowInfo* rows;      // [N]
  GroupDesc* groups;  // [N, Hkv]
  int* group_off;     // [N·Hkv + 1] exclusive scan of item counts
  int* item_group;    // [max_items] group (row·Hkv + hk) of each item
  int* work;          // [kWorkInts]: the step's cuts and the amend kernel's item counter (WorkSlot)
  float* part_o;      // [max_items, G, D] normalised partial outputs
  float* part_lse2;   // [max_items, G] base-2 partial LSE
  int max_items;
  int k1_splits;  // K1 blocks per (row, head), 1..kMaxK1Splits: one cluster
  int* err;       // error flags (bit 0: kv_len, bit 1: slot, bit 2: page id)
};

__device__ inline float bf16_bits_to_float(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}
__device__ inline uint16_t float_to_bf16_bits(float x) {
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<uint16_t*>(&h);
}

/*! \brief A global load issued where it is written (asm volatile: the compiler neither sinks
 *  it past a later branch nor delays it behind one). A prologue whose addresses depend only
 *  on indices and parameters issues all of its loads this way, so they share one round trip
 *  even though it branches on the first of them before using the others. T: a 32-bit word
 *  (int, float, a pair of bf16) or a struct of them (RowInfo, HeadPlan, GroupDesc), loaded
 *  word by word. */
template <class T>
__device__ __forceinline__ T ld_now(const T* a) {
  static_assert(sizeof(T) % sizeof(uint32_t) == 0 && alignof(T) >= alignof(uint32_t),
                "32-bit words");
  constexpr int kWords = sizeof(T) / sizeof(uint32_t);
  const uint32_t* src = reinterpret_cast<const uint32_t*>(a);
  uint32_t w[kWords];
#pragma unroll
  for (int i = 0; i < kWords; ++i)
    asm volatile("ld.global.b32 %0, [%1];\n" : "=r"(w[i]) : "l"(src + i));
  T t;
  memcpy(&t, w, sizeof(T));
  return t;
}

/*! \brief A kv_len the kernels accept: in [1, max_context] and within the page-table row,
 *  so no key index reads past it. */
__device__ inline bool kv_len_ok(const KParams& p, int len) {
  return len >= 1 && len <= p.max_context && len <= static_cast<int64_t>(p.max_pages) * p.page_size;
}

/*! \brief Row validity, readiness and eligibility (docs/semantics.md §3 step 1, §3.2), in the three
 *  parts row_info runs in order. A caller with loads of its own to issue (K1's ring scan)
 *  puts them between the second and the third, so that they and the readiness words share
 *  the round trip after the first part's (kv_len, slot). */
__device__ inline RowInfo row_info_first(const KParams& p, int row) {
  RowInfo ri;
  const int len = p.kv_len[row];  // loaded together: neither depends on the other
  const int sl = p.mode != kModeFull ? p.slot[row] : -1;
  ri.slot = sl;
  ri.valid = kv_len_ok(p, len);
  ri.m = ri.valid ? len - 1 : -1;
  if (p.mode != kModeFull && ri.valid && (sl < 0 || sl >= p.R)) {
    ri.valid = 0;
    ri.m = -1;
  }
  ri.ready = 0;
  ri.eligible = 0;
  return ri;
}
/*! \brief The slot's readiness words, loaded (ld_now) and not yet compared. */
struct RowReadyWords {
  int ready, epoch_a, epoch_b;
};
/*! \brief Issues the readiness loads of a valid MAC row, all three at once (ready ≠ 0 is not
 *  waited for before the epochs are loaded: a valid row's slot is in range). */
__device__ inline RowReadyWords row_ready_issue(const KParams& p, const RowInfo& ri) {
  RowReadyWords w{0, 0, 0};
  if (p.mode == kModeMac && ri.valid) {
    w.ready = ld_now(p.ready + ri.slot);
    w.epoch_a = ld_now(p.epoch_a + ri.slot);
    w.epoch_b = ld_now(p.epoch_b + ri.slot);
  }
  return w;
}
/*! \brief ready[slot] ≠ 0 && epoch_a = epoch_b; eligible = MAC ∧ valid ∧ ready ∧ m ≥ gen_min ∧ m
 * ≥ 1. */
__device__ inline void row_ready_finish(const KParams& p, RowInfo& ri, const RowReadyWords& w) {
  ri.ready = p.mode == kModeMac && ri.valid && w.ready != 0 && w.epoch_a == w.epoch_b;
  ri.eligible = p.mode == kModeMac && ri.valid && ri.ready && ri.m >= p.gen_min && ri.m >= 1;
}
/*! \brief The three parts in a row (the schedule's rows' half): two round trips. */
__device__ inline RowInfo row_info(const KParams& p, int row) {
  RowInfo ri = row_info_first(p, row);
  row_ready_finish(p, ri, row_ready_issue(p, ri));
  return ri;
}

/*! \brief Raises the error flag of an invalid row: bit 0 for its kv_len, else bit 1 (slot). */
__device__ inline void report_row_error(const KParams& p, int row) {
  atomicOr(p.err, kv_len_ok(p, p.kv_len[row]) ? 2 : 1);
}

/*! \brief The earliest band start over the G query heads of group (row, hk) in K1's plans
 *  (written for every head of a MAC step). Unrolled to G's bound, so the G loads are in
 *  flight together, not one at a time; read through L2 (plans of the running step). */
__device__ inline int group_band_lo(const KParams& p, int row, int hk) {
  const HeadPlan* plan = p.plans + row * p.Hq + hk * p.G;
  int band_lo = INT_MAX;
#pragma unroll
  for (int j = 0; j < kMaxGroup; ++j) {
    const int bs = j < p.G ? __ldcg(&plan[j].band_begin) : INT_MAX;
    band_lo = bs < band_lo ? bs : band_lo;
  }
  return band_lo;
}

/*! \brief Whether the combine drops the partial states' L2 lines once it has read them: its
 *  own choice (parts_discard, else parts_discard_auto by the step's items and eligible cut),
 *  never beside a side-stream K3, which reads the band partials too. The amend kernel asks
 *  the same question for the L2 policies of its stores and its K/V stream. */
__device__ inline bool parts_dropped(const KParams& p, int64_t items, int C, int D) {
  return (p.k3_in_combine || p.mode != kModeMac) &&
         (p.parts_discard < 0 ? parts_discard_auto(items, C, D) : p.parts_discard != 0);
}

/*! \brief The step's cuts, as the schedule stored them (store_cuts): through the read-only
 *  path, or with ld_now (kNow) in a prologue whose loads go out in one round. */
template <bool kNow = false>
__device__ inline StepCuts load_cuts(const KParams& p) {
  auto ld = [&](int slot) {
    if constexpr (kNow)
      return ld_now(p.work + slot);
    else
      return __ldg(p.work + slot);
  };
  StepCuts c;
  c.elig.C = ld(kWorkC);
  c.elig.lg = ld(kWorkLgC);
  c.exact.C = ld(kWorkCExact);
  c.exact.lg = ld(kWorkLgCExact);
  return c;
}

}  // namespace mac::cuda::detail
