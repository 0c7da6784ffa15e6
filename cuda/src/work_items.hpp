#pragma once
// The work decomposition shared by the schedule, amend and combine kernels, in plain C++
// (host and device), so the CPU test suite checks it where no GPU is present.
#include <cstdint>

#if defined(__CUDACC__)
#define MAC_HD __host__ __device__
#else
#define MAC_HD
#endif

namespace mac::cuda::detail {

/*! \brief Item categories: which part of [0, m] a work item covers (DESIGN §3 ranges). */
enum Cat : int { kCatSink = 0, kCatBand = 1, kCatTail = 2 };

/*! \brief Per (row, KV head) key ranges: sinks [0, s_e), band [lo, em), tail [em, end). */
struct GroupDesc {
  int end;  // m + 1 (= kv_len); 0 for an invalid row (no items)
  int s_e;  // Fe(E(m))
  int lo;   // min over the group's heads of band_start (≥ s_e)
  int em;   // E(m)
};

// ---------------------------------------------------------------------------------------
// Work items: per group the key axis is cut at multiples of `chunk` and at s_e and em, so
// every item lies in exactly one of sinks / band / tail. The cut depends only on (m, r, F,
// chunk) and the group's lo; full attention and ineligible MAC rows (lo = s_e) therefore
// get the same items and, with the same arithmetic, bit-identical results.
// ---------------------------------------------------------------------------------------

MAC_HD inline int n_chunks(int a, int b, int C) { return a < b ? (b - 1) / C - a / C + 1 : 0; }

// Item size chosen per step on the device when the config leaves it open: the largest power
// of two C in [kChunkMin, kChunkMax] that still gives each of the persistent grid's W warps
// at least chunk_rounds(C) items. It depends only on kv_len (and N, Hkv, W), never on hit
// decisions, so full attention and ineligible MAC rows keep the same items. Larger items
// write fewer partial states; smaller ones keep every warp streaming to the end. 2048 pays
// only with many items per warp (measured on the H200: docs/cuda.md).
constexpr int kChunkMin = 256, kChunkMax = 2048;
MAC_HD inline int chunk_rounds(int C) { return C > 1024 ? 8 : 3; }
MAC_HD inline int auto_chunk(int64_t total_keys, int warps) {
  int C = kChunkMax;
  while (C > kChunkMin && total_keys < static_cast<int64_t>(chunk_rounds(C)) * warps * C) C /= 2;
  return C;
}
/*! \brief Upper bound of the items of one step: cells of ≤ C keys plus, per group, one
 *  rounded-up cell and ≤ 3 cuts. With the automatic size, C < kChunkMax is chosen only when
 *  total < chunk_rounds(2C)·W·2C, so there are fewer than 2·chunk_rounds(2C)·W cells. */
MAC_HD inline int64_t max_items_bound(int64_t total_keys_max, int groups, int warps, int fixed_chunk) {
  int64_t cells = 0;
  if (fixed_chunk > 0) {
    cells = (total_keys_max + fixed_chunk - 1) / fixed_chunk;
  } else {
    for (int C = kChunkMin; C <= kChunkMax; C *= 2) {
      int64_t n = (total_keys_max + C - 1) / C;
      if (C < kChunkMax) {
        const int64_t lim = int64_t{2} * chunk_rounds(2 * C) * warps;
        n = n < lim ? n : lim;
      }
      cells = n > cells ? n : cells;
    }
  }
  return cells + int64_t{4} * groups;
}

MAC_HD inline int group_item_count(const GroupDesc& g, int C) {
  if (g.end <= 0) return 0;
  return n_chunks(0, g.s_e, C) + n_chunks(g.lo, g.em, C) + n_chunks(g.em, g.end, C);
}

struct ItemRange {
  int a, b, cat;
};

MAC_HD inline ItemRange group_item(const GroupDesc& g, int k, int C) {
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

MAC_HD inline int prefix_end_dev(int p, int r) { return p + 1 - r > 0 ? p + 1 - r : 0; }
MAC_HD inline int sink_end_dev(int F, int e) { return F < e ? F : e; }

}  // namespace mac::cuda::detail
