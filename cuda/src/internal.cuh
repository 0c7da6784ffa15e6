#pragma once
// Internal device-side vocabulary of mac_cuda: the kernel parameter block, the work-item
// decomposition shared by the scheduler, the amend kernel and the combine kernel, and the
// device twin of the attention-state algebra (base-2 inside, natural log at the boundary).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mac::cuda::detail {

constexpr int kMaxK1Splits = 8;
constexpr float kLn2 = 0.693147180559945309417f;
constexpr float kLog2e = 1.442695040888963407360f;

/*! \brief The one named conversion of a base-2 LSE to the natural log (DESIGN §4). */
__host__ __device__ inline float lse_log2_to_natural(float lse2) { return lse2 * kLn2; }
/*! \brief Natural-log LSE → base 2 (ring entries are stored in natural log). */
__host__ __device__ inline float lse_natural_to_log2(float lse) { return lse * kLog2e; }

/*! \brief Row modes of one launch. */
enum Mode : int {
  kModeFull = 0,     // exact attention, nothing written to rings
  kModeMac = 1,      // K1 decisions, K3 write gated by readiness
  kModePrefill = 2,  // exact band state of each (pseudo) row written to the ring, no output
};

/*! \brief Item categories: which part of [0, m] a work item covers (DESIGN §3 ranges). */
enum Cat : int { kCatSink = 0, kCatBand = 1, kCatTail = 2 };

/*! \brief Per (row, query head) decision of K1 (or the exact default). */
struct HeadPlan {
  int band_start;  // E(p) on a hit, Fe(E(m)) on a miss
  int match_pos;   // −1 on a miss
  float d2;        // canonical FP32 d2 of the nearest candidate, NaN if none searched
  int hit;         // 1 on a hit
};

/*! \brief Per (row, KV head) key ranges: sinks [0, s_e), band [lo, em), tail [em, end). */
struct GroupDesc {
  int end;  // m + 1 (= kv_len); 0 for an invalid row (no items)
  int s_e;  // Fe(E(m))
  int lo;   // min over the group's heads of band_start (≥ s_e)
  int em;   // E(m)
};

/*! \brief Row flags written by K1 (or the scheduler in full mode). */
struct RowInfo {
  int m;         // position, −1 if kv_len invalid
  int ready;     // ready[slot] ≠ 0 && epochs equal (0 in full mode)
  int eligible;  // m ≥ gen_min && ready && m ≥ 1
  int valid;     // kv_len in [1, max_context] and slot in range (MAC/prefill)
};

/*! \brief Everything the kernels read; passed by value. */
struct KParams {
  int N, Hq, Hkv, G, D;
  int mode;
  // queries: row i's head h at q + i*q_row_stride + h*D
  const uint16_t* q_post;
  const uint16_t* q_pre;
  int64_t q_row_stride;
  // paged KV
  const uint16_t* k_cache;
  const uint16_t* v_cache;
  int64_t page_stride, token_stride, head_stride;
  int page_size;
  int64_t num_pages;      // pages in each pool: page ids outside [0, num_pages) are clamped + flagged
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
  // outputs
  uint16_t* out;
  float* lse;
  int8_t* diag_hit;
  int64_t* diag_match_pos;
  float* diag_d2;
  int32_t* diag_keys_read;
  // work decomposition
  int chunk;          // keys per work item when fixed by the config; 0: chosen per step (work[0])
  int warps_total;    // W: resident warps of the persistent amend grid
  int k3_in_combine;  // 1: combine writes the ring entry (K3 fused)
  // workspace
  HeadPlan* plans;       // [N, Hq]
  uint16_t* snap_o;      // [N, Hq, D] prefix snapshot (read before the ring write)
  float* snap_lse2;      // [N, Hq]
  RowInfo* rows;         // [N]
  GroupDesc* groups;     // [N, Hkv]
  int* group_off;        // [N·Hkv + 1] exclusive scan of item counts
  int* item_group;       // [max_items] group (row·Hkv + hk) of each item
  int* work;             // [2]: chunk of this step, dynamic item counter of the amend kernel
  float* part_o;         // [max_items, G, D] normalised partial outputs
  float* part_lse2;      // [max_items, G] base-2 partial LSE
  int max_items;
  int k1_splits;         // K1 blocks per (row, head), 1..kMaxK1Splits
  float* k1_d2;          // [N, Hq, splits] per-block nearest distance
  int* k1_pos;           // [N, Hq, splits] per-block nearest position
  int* k1_count;         // [N, Hq] blocks done (the last resets it to 0)
  int* err;              // error flags (bit 0: kv_len, bit 1: slot, bit 2: page id)
};

// ---------------------------------------------------------------------------------------
// Work items: per group the key axis is cut at multiples of `chunk` and at s_e and em, so
// every item lies in exactly one of sinks / band / tail. The cut depends only on (m, r, F,
// chunk) and the group's lo; full attention and ineligible MAC rows (lo = s_e) therefore
// get the same items and, with the same arithmetic, bit-identical results.
// ---------------------------------------------------------------------------------------

__host__ __device__ inline int n_chunks(int a, int b, int C) { return a < b ? (b - 1) / C - a / C + 1 : 0; }

// Item size chosen per step on the device when the config leaves it open: the largest power
// of two in [kChunkMin, kChunkMax] that still gives the persistent grid's W warps at least
// kChunkRounds items each. It depends only on kv_len (and N, Hkv, W), never on hit
// decisions, so full attention and ineligible MAC rows keep the same items. Large batches
// keep 1024 (partial states < 1 % of the bytes); small ones trade partial-state bytes for
// enough items to keep every warp streaming (docs/cuda.md has the measurements).
constexpr int kChunkMin = 256, kChunkMax = 1024, kChunkRounds = 3;
__host__ __device__ inline int auto_chunk(int64_t total_keys, int warps) {
  int C = kChunkMax;
  while (C > kChunkMin && total_keys < static_cast<int64_t>(kChunkRounds) * warps * C) C /= 2;
  return C;
}
/*! \brief Upper bound of the items of one step: cells of ≤ C keys plus, per group, one rounded-up cell and ≤ 3 cuts.
 *  With the automatic size, C < kChunkMax only when total < 2·kChunkRounds·W·C. */
__host__ __device__ inline int64_t max_items_bound(int64_t total_keys_max, int groups, int warps, int fixed_chunk) {
  const int64_t big = (total_keys_max + kChunkMax - 1) / kChunkMax, small = int64_t{2} * kChunkRounds * warps;
  const int64_t cells = fixed_chunk > 0 ? (total_keys_max + fixed_chunk - 1) / fixed_chunk : big > small ? big : small;
  return cells + int64_t{4} * groups;
}

__host__ __device__ inline int group_item_count(const GroupDesc& g, int C) {
  if (g.end <= 0) return 0;
  return n_chunks(0, g.s_e, C) + n_chunks(g.lo, g.em, C) + n_chunks(g.em, g.end, C);
}

struct ItemRange {
  int a, b, cat;
};

__host__ __device__ inline ItemRange group_item(const GroupDesc& g, int k, int C) {
  const int ns = n_chunks(0, g.s_e, C), nb = n_chunks(g.lo, g.em, C);
  int lo, hi, cat, j;
  if (k < ns) {
    lo = 0; hi = g.s_e; cat = kCatSink; j = k;
  } else if (k < ns + nb) {
    lo = g.lo; hi = g.em; cat = kCatBand; j = k - ns;
  } else {
    lo = g.em; hi = g.end; cat = kCatTail; j = k - ns - nb;
  }
  const int cell = lo / C + j;
  ItemRange it;
  it.a = cell * C > lo ? cell * C : lo;
  it.b = (cell + 1) * C < hi ? (cell + 1) * C : hi;
  it.cat = cat;
  return it;
}

__host__ __device__ inline int prefix_end_dev(int p, int r) { return p + 1 - r > 0 ? p + 1 - r : 0; }
__host__ __device__ inline int sink_end_dev(int F, int e) { return F < e ? F : e; }

__device__ inline float bf16_bits_to_float(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
__device__ inline uint16_t float_to_bf16_bits(float x) {
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<uint16_t*>(&h);
}

/*! \brief Online merge accumulator in base 2: running max `mx`, sum `s`, and per-lane
 *  unnormalised output `acc[i]` (scaled by 2^−mx). add(L2, o) merges a normalised state. */
template <int V>
struct MergeAcc {
  float mx = -INFINITY, s = 0.f;
  float acc[V];
  __device__ MergeAcc() {
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.f;
  }
  __device__ void add(float l2, const float* o) {
    if (!(l2 > -INFINITY)) return;  // empty (or NaN) side is ignored
    if (l2 > mx) {
      const float a = exp2f(mx - l2);  // mx = −inf → 0
      s *= a;
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] *= a;
      mx = l2;
    }
    const float w = exp2f(l2 - mx);
    s += w;
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = fmaf(w, o[i], acc[i]);
  }
  __device__ bool empty() const { return !(s > 0.f); }
  __device__ float lse2() const { return empty() ? -INFINITY : mx + log2f(s); }
  __device__ void normalised(float* o) const {
    const float inv = empty() ? 0.f : 1.f / s;
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = acc[i] * inv;
  }
};

/*! \brief ⊕ of two normalised base-2 states (a ← a ⊕ b); an empty side yields the other. */
template <int V>
__device__ inline void merge_states(float& la, float* oa, float lb, const float* ob) {
  const bool ea = !(la > -INFINITY), eb = !(lb > -INFINITY);
  if (eb) {
    if (ea) {
      la = -INFINITY;
#pragma unroll
      for (int i = 0; i < V; ++i) oa[i] = 0.f;
    }
    return;
  }
  if (ea) {
    la = lb;
#pragma unroll
    for (int i = 0; i < V; ++i) oa[i] = ob[i];
    return;
  }
  const float mu = fmaxf(la, lb);
  const float wa = exp2f(la - mu), wb = exp2f(lb - mu);
  const float l = mu + log2f(wa + wb);
  const float ca = exp2f(la - l), cb = exp2f(lb - l);
#pragma unroll
  for (int i = 0; i < V; ++i) oa[i] = ca * oa[i] + cb * ob[i];
  la = l;
}

}  // namespace mac::cuda::detail
