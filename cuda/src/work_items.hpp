#pragma once
// The work decomposition shared by the schedule, amend and combine kernels, in plain C++
// (host and device), so the CPU test suite checks it where no GPU is present.
#include <cstdint>

#include "mac/semantics.hpp"  // prefix_end, sink_end, MAC_HD

namespace mac::cuda::detail {

/*! \brief Item categories: which part of [0, m] a work item covers (docs/semantics.md §3 ranges).
 */
enum Cat : int { kCatSink = 0, kCatBand = 1, kCatTail = 2 };

/*! \brief Per (row, KV head) key ranges (mac::StepRanges' names): sinks [0, sink_end), band
 *  [band_begin, tail_begin), tail [tail_begin, end). */
struct GroupDesc {
  int end;         // m + 1 (= kv_len); 0 for an invalid row (no items)
  int sink_end;    // Fe(E(m))
  int band_begin;  // min over the group's heads of their band_begin (≥ sink_end)
  int tail_begin;  // E(m), also the band's end
};

// ---------------------------------------------------------------------------------------
// Work items: per group the key axis is cut at multiples of C and at sink_end and tail_begin, so
// every item lies in exactly one of sinks / band / tail. A step has two cuts (StepCuts), both
// depending only on its kv_lens, N, Hkv and the grid. Rows that are not eligible (full
// attention, prefill, ineligible MAC rows: band_begin = sink_end) take the exact cut: the same
// items in a full step and in a MAC step, hence with the same arithmetic bit-identical results.
// Eligible MAC rows take the eligible cut, whose rule prefers smaller items (a MAC step reads far
// fewer keys than its kv_lens say), and, in an all-hit step, fine_cut of it.
// ---------------------------------------------------------------------------------------

/*! \brief Cells of 2^lg keys that [a, b) touches (item sizes are powers of two: shifts, no
 *  divisions, on the loader's path at every item boundary). */
MAC_HD inline int n_chunks(int a, int b, int lg) {
  return a < b ? ((b - 1) >> lg) - (a >> lg) + 1 : 0;
}
MAC_HD inline int log2_exact(int C) {
  int lg = 0;
  while ((1 << lg) < C) ++lg;
  return lg;
}
MAC_HD inline bool is_pow2(int C) { return C > 0 && (C & (C - 1)) == 0; }

constexpr int kChunkMin = 256, kChunkMax = 2048;

/*! \brief How one step cuts its groups: keys per item (a power of two ≥ 16) and its log2. */
struct Cut {
  int C, lg;
};

// Item size chosen per step on the device when the config leaves it open, from the step's
// keys (Σ Hkv·kv_len). A small step that fills the W warps of the persistent grid in one
// round (the smallest C ≤ kOneRoundMax with keys/C ≤ W, if that is ≥ 90% of W) takes it: one
// item per warp, no second round. Otherwise the largest power of two C in [kChunkMin,
// kChunkMax] that still gives each warp at least chunk_rounds(C, D, eligible) items. Larger
// items write fewer partial states (G·D·4 bytes each, written and read back); smaller ones
// keep every warp streaming to the end. Measured on the H200 (docs/decisions.md): for full
// attention at D = 128, 2048-key items with 3.9 items per warp beat 1024 (16/64K/Hkv 8 1.4–1.8 %,
// 16/127K/Hkv 4 3.5 %, 64/32K/Hkv 4 1.3 %), with 7.7–7.8 per warp they were within 1 % of it
// (64/64K/Hkv 4 1.1 % faster, 16/127K/Hkv 8 0.9 % slower), while 2 per warp cost up to 18 % and
// 4096 did not pay (since the L2 policies a new sweep favours 4096 at 64/64K/Hkv 4 and 64/127K/Hkv
// 8 and 1024 at 16/127K and 64/32K with Hkv 8, by 0.8–1.6 %; no rule of the step's keys fits those,
// so this one stands). The eligible cut keeps 8 items per warp for 2048: cut that way, MAC steps in
// which 5 % of the heads miss were up to 11 % slower (16/127K/Hkv 4), their few long miss groups
// being too few items for the warps. At D = 256, 2048-key items with 3.9 items per warp cost 15 %
// (16/32K/Hkv 8), so both cuts keep 8 there (D = 64: not measured).
constexpr int kOneRoundMax = 1024;
MAC_HD inline int chunk_rounds(int C, int D, bool eligible) {
  return (D != 128 || eligible) && C > 1024 ? 8 : 3;
}
MAC_HD inline bool one_round(int64_t total_keys, int warps, int C) {
  const int64_t items = (total_keys + C - 1) / C;
  return items <= warps && items * 10 >= int64_t{warps} * 9;
}
MAC_HD inline int auto_chunk(int64_t total_keys, int warps, int D, bool eligible) {
  for (int C = kChunkMin; C <= kOneRoundMax; C *= 2)
    if ((total_keys + C - 1) / C <= warps) {
      if (one_round(total_keys, warps, C)) return C;
      break;
    }
  int C = kChunkMax;
  while (C > kChunkMin &&
         total_keys < static_cast<int64_t>(chunk_rounds(C, D, eligible)) * warps * C)
    C /= 2;
  return C;
}
MAC_HD inline Cut step_cut(int64_t total_keys, int warps, int fixed_chunk, int D, bool eligible) {
  Cut c;
  c.C = fixed_chunk > 0 ? fixed_chunk : auto_chunk(total_keys, warps, D, eligible);
  c.lg = log2_exact(c.C);
  return c;
}

/*! \brief A step's two cuts: `exact` for rows that are not eligible, `elig` for eligible MAC
 *  rows (equal to `exact` in full and prefill steps, and when the config fixes the size). */
struct StepCuts {
  Cut exact, elig;
  // By value, selected field by field: a reference would take the address of registers.
  MAC_HD Cut of(bool eligible) const {
    return Cut{eligible ? elig.C : exact.C, eligible ? elig.lg : exact.lg};
  }
};
/*! \brief A group's ranges and whether its row is eligible (which of the step's cuts it takes). */
struct GroupOf {
  GroupDesc g;
  bool el;
};
/*! \brief The step's cuts from its keys (Σ Hkv·kv_len over valid rows). */
MAC_HD inline StepCuts step_cuts(int64_t keys, int warps, int fixed_chunk, int D, bool mac) {
  StepCuts c;
  c.exact = step_cut(keys, warps, fixed_chunk, D, false);
  c.elig = mac ? step_cut(keys, warps, fixed_chunk, D, true) : c.exact;
  return c;
}

// An all-hit MAC step reads a few hundred keys per group (band ≤ M, tail r, sinks F). Cut at
// the eligible cut's C, chosen from the groups' full lengths, a group's band and tail are one or
// two items of up to C keys, and the step lasted as long as one warp takes to stream C keys
// (~28 µs at batch 1 with C = 256, whatever the context). Such a step takes items of
// kFineC keys instead, so more warps share each group. The schedule's groups half decides,
// by a vote in the pass that counts the groups' items (schedule.cuh), so only steps of at
// most kFineMaxGroups groups (one pass of either scheduler's block) can take it, and only
// when the config leaves the item size open. Two other ways were measured and reverted
// (docs/decisions.md): cutting the all-hit groups of mixed steps finer too made
// hit-0.95 steps up to 14 % slower (their small items sit among the miss groups' long ones),
// and a separate pass to decide cost every other MAC step up to 5 %.
//
// A group qualifies (fine_ok) if it has no keys, or its band starts after its sinks (no head
// missed: a miss head's band starts at the sinks' end) and it reads at most kFineMaxKeys keys,
// which bounds its items (kFineMaxItems) whatever M, r and F are. Full attention and
// ineligible rows (band_begin = sink_end) never qualify, so a step with one keeps its eligible cut
// (and they their exact cut, items and bits in any case).
constexpr int kFineLg = 6, kFineC = 1 << kFineLg;
constexpr int kFineMaxKeys = 1024;
constexpr int kFineMaxGroups = 128;
// Items of a qualifying group at kFineC: each of its three ranges touches ≤ len/kFineC + 2 cells.
constexpr int kFineMaxItems = kFineMaxKeys / kFineC + 6;

/*! \brief Whether group g lets an all-hit step take kFineC-key items (see above). */
MAC_HD inline bool fine_ok(const GroupDesc& g) {
  return g.end <= 0 ||
         (g.band_begin > g.sink_end && g.sink_end + (g.end - g.band_begin) <= kFineMaxKeys);
}
/*! \brief The eligible cut of an all-hit step: kFineC-key items (C's, if smaller). */
MAC_HD inline Cut fine_cut(const Cut& c) { return c.C > kFineC ? Cut{kFineC, kFineLg} : c; }

/*! \brief Upper bound of the items of one step: cells of ≤ C keys plus, per group, one
 *  rounded-up cell and ≤ 3 cuts. With the automatic size, the eligible rule (never larger
 *  items than the exact rule, so it bounds both cuts' cells) chooses C < kChunkMax only when
 *  total < chunk_rounds(2C)·W·2C (fewer than 2·chunk_rounds(2C)·W cells) or, by the one-round
 *  rule, when total/C ≤ W; and an all-hit step of ≤ kFineMaxGroups groups has at most
 *  kFineMaxItems items per group. */
MAC_HD inline int64_t max_items_bound(int64_t total_keys_max, int groups, int warps,
                                      int fixed_chunk, int D) {
  int64_t cells = 0;
  if (fixed_chunk > 0) {
    cells = (total_keys_max + fixed_chunk - 1) / fixed_chunk;
  } else {
    for (int C = kChunkMin; C <= kChunkMax; C *= 2) {
      int64_t n = (total_keys_max + C - 1) / C;
      if (C < kChunkMax) {
        const int64_t lim = int64_t{2} * chunk_rounds(2 * C, D, true) * warps;
        n = n < lim ? n : lim;
      }
      cells = n > cells ? n : cells;
    }
  }
  const int64_t base = cells + int64_t{4} * groups;
  if (fixed_chunk > 0) return base;
  const int64_t fine = int64_t{kFineMaxItems} * (groups < kFineMaxGroups ? groups : kFineMaxGroups);
  return base > fine ? base : fine;
}

/*! \brief The K/V bytes of a step as its two per-step L2 policies estimate them: items·C keys
 *  of 4·D bytes (K and V in bf16; an upper bound, cells are rounded up per group), C being the
 *  eligible cut's (the exact cut's in full and prefill steps). */
MAC_HD inline int64_t step_kv_bytes(int64_t items, int C, int D) { return items * C * 4 * D; }

/*! \brief Whether a step streams its keys and values with an L2 evict_first policy: when they
 *  are at most kKvEvictFirstMaxBytes (step_kv_bytes). Measured on the H200
 *  against no cache hint: evict_first makes such steps 1–5 % faster (batch 1,
 *  batch 16 at 32K with Hkv 4) and larger ones up to 2.5 % slower. A cache hint: no bit of a
 *  result depends on it. */
constexpr int64_t kKvEvictFirstMaxBytes = int64_t{3} << 29;  // 1.5 GiB
MAC_HD inline bool kv_evict_first_auto(int64_t items, int C, int D) {
  return step_kv_bytes(items, C, D) <= kKvEvictFirstMaxBytes;
}

/*! \brief The K/V stream's policy of a step: evict_first on small steps (kv_evict_first_auto)
 *  and on every step whose partial states are stored evict_last, that is, kept in L2 until
 *  the combine drops them (parts_dropped, internal.cuh). Measured on the H200
 *  against no hints: the pair makes full-attention steps of 2–8 GiB up to
 *  2.3 % faster, where either policy alone gains nothing. */
MAC_HD inline bool kv_evict_first_step(int64_t items, int C, int D, bool parts_evict_last) {
  return parts_evict_last || kv_evict_first_auto(items, C, D);
}

/*! \brief Whether the combine drops the partial states' L2 lines once it has read them (PTX
 *  discard.global.L2: dirty lines never written back to DRAM): on steps of at least
 *  kPartsDiscardMinBytes of keys and values (step_kv_bytes). Measured on the H200
 *  against keeping the lines: 3–4 % faster at the 1 GiB steps of Hkv 4 (batch 16 at
 *  32K, batch 4 at 127K), −0.7 to +0.9 % at larger steps, and up to 2.2 % slower at steps of
 *  at most 0.54 GB, where the discards lengthen a short combine. A cache operation: no bit
 *  of a result depends on it. */
constexpr int64_t kPartsDiscardMinBytes = int64_t{3} << 28;  // 768 MiB
MAC_HD inline bool parts_discard_auto(int64_t items, int C, int D) {
  return step_kv_bytes(items, C, D) >= kPartsDiscardMinBytes;
}

/*! \brief Items of a group by part, in key order: sinks, band, tail. */
struct GroupCounts {
  int sink, band, tail;
  MAC_HD int total() const { return sink + band + tail; }
};
MAC_HD inline GroupCounts group_counts(const GroupDesc& g, const Cut& c) {
  GroupCounts n{0, 0, 0};
  if (g.end <= 0) return n;
  n.sink = n_chunks(0, g.sink_end, c.lg);
  n.band = n_chunks(g.band_begin, g.tail_begin, c.lg);
  n.tail = n_chunks(g.tail_begin, g.end, c.lg);
  return n;
}
MAC_HD inline int group_item_count(const GroupDesc& g, const Cut& c) {
  return group_counts(g, c).total();
}

/*! \brief The category of item k of a group with item counts n (items are in key order:
 *  sinks, band, tail). */
MAC_HD inline int item_cat(const GroupCounts& n, int k) {
  return k < n.sink ? kCatSink : k < n.sink + n.band ? kCatBand : kCatTail;
}

struct ItemRange {
  int a, b, cat;
};

/*! \brief Item k of group g (0 ≤ k < group_item_count): its key range and category. */
MAC_HD inline ItemRange group_item(const GroupDesc& g, int k, const Cut& c) {
  const GroupCounts n = group_counts(g, c);
  const int cat = item_cat(n, k);
  int lo, hi, j;
  if (cat == kCatSink) {
    lo = 0;
    hi = g.sink_end;
    j = k;
  } else if (cat == kCatBand) {
    lo = g.band_begin;
    hi = g.tail_begin;
    j = k - n.sink;
  } else {
    lo = g.tail_begin;
    hi = g.end;
    j = k - n.sink - n.band;
  }
  const int cell = (lo >> c.lg) + j;
  ItemRange it;
  it.a = (cell << c.lg) > lo ? cell << c.lg : lo;
  it.b = ((cell + 1) << c.lg) < hi ? (cell + 1) << c.lg : hi;
  it.cat = cat;
  return it;
}

/*! \brief The key ranges of a group of a row at position m (m < 0: an invalid row, no keys).
 *  `lo` is the band start: the earliest band start of the group's heads in an eligible MAC
 *  row (clamped to E(m)), otherwise Fe(E(m)), where the band is the whole exact range. */
MAC_HD inline GroupDesc make_group(int m, bool eligible, int band_lo, int r, int F) {
  GroupDesc g;
  g.end = m >= 0 ? m + 1 : 0;
  g.tail_begin = m >= 0 ? prefix_end(m, r) : 0;
  g.sink_end = sink_end(F, g.tail_begin);
  g.band_begin = eligible ? (band_lo < g.tail_begin ? band_lo : g.tail_begin) : g.sink_end;
  return g;
}

/*! \brief The group of item t, 0 ≤ t < off[ng]: the last group whose first item is ≤ t, where
 *  `off` is the exclusive scan of the groups' item counts (ng + 1 entries, off[ng] = total).
 *  An empty group shares its first item with the next group and is passed over. */
MAC_HD inline int item_group_search(const int* off, int ng, int t) {
  int lo = 0, hi = ng;  // off[lo] ≤ t < off[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (off[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/*! \brief Ints of the shared-memory tables with which the amend kernel schedules its own
 *  items (N rows, N·Hkv groups): per group its first item (+ the total) and band start, per
 *  row its position and eligibility. */
MAC_HD inline int64_t self_schedule_ints(int64_t N, int64_t Hkv) { return 2 * N * Hkv + 1 + 2 * N; }

}  // namespace mac::cuda::detail
