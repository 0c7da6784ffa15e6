#pragma once
// K2 "amend" kernel (and the whole of full attention's KV pass): split-KV partial attention
// over work items of ≤ C keys (the step's item size, work_items.hpp) of one (row, KV head),
// all G query heads of the group at once, so each KV head is read once for its G heads.
//
// The step's schedule (items, their groups and ranges) is computed by every block into
// shared memory first (self_schedule), or read from what the schedule kernel wrote.
//
// Layers (CUTLASS-style): a persistent grid of independent warps; each warp takes its first
// four items statically (block-major over the SMs, then W apart), then claims items from a
// counter, and walks them as one continuous stream of 16-key tiles; K and V tiles stream
// through a per-warp cp.async ring of kStages shared-memory stages (16-byte copies, XOR
// swizzled rows so ldmatrix is conflict-free); S = Q·Kᵀ and O += P·V run on mma.sync
// m16n8k16 (bf16 in, fp32 accumulate) with the G query heads as the 16 MMA rows (rows ≥ G
// are zero and discarded). Online softmax in base 2 (OnlineState, state.cuh); the query load,
// the item descriptions and the partial-state write are in amend_collective.cuh. Each item ends
// with a normalised partial state (o fp32 [G, D], LSE base 2) that the combine kernel merges in
// item order.
//
// Per query head the keys of an item are clipped to the head's own range (band items start
// at the head's band_begin), so the hit heads of a mixed group attend only their band.
#include <type_traits>

#include "amend_collective.cuh"
#include "amend_config.cuh"
#include "launch.hpp"
#include "ptx.cuh"
#include "self_schedule.cuh"

namespace mac::cuda::detail {

/*! \brief Items a warp takes statically after its first (gw + W, gw + 2W, gw + 3W: the
 *  loader's warm-up), before it claims dynamically. */
constexpr int kStaticClaims = 3;

template <int D, bool kBulk>
__global__ void __launch_bounds__(AmendCfg<D, kBulk>::kThreads, AmendCfg<D, kBulk>::kMinBlocks)
    amend_kernel(const KParams p) {
  using Cfg = AmendCfg<D, kBulk>;
  constexpr int S = Cfg::kStages, CPR = Cfg::kCpr, NT = D / 8, KS = D / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t wsmem =
      static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + warp * Cfg::kWarpSmem;
  const int ng = p.N * p.Hkv;
  // The schedule: computed here into the tables after the stages (self-scheduled), or read
  // from what the schedule kernel wrote.
  SelfTables tab{};
  int total;
  StepCuts cuts;
  if (p.self_schedule) {
    tab.off = reinterpret_cast<int*>(smem + Cfg::kSmem);
    tab.band_begin = tab.off + ng + 1;
    tab.m = tab.band_begin + ng;
    tab.elig = tab.m + p.N;
    cuts = self_schedule<Cfg::kThreads>(p, tab);
    total = tab.off[ng];
  } else {
    wait_prior_grid_then_release_next();  // the schedule kernel's outputs are read below
    total = __ldg(p.group_off + ng);
    cuts = load_cuts(p);
  }
  const int lg_exact = cuts.exact.lg, lg_elig = cuts.elig.lg;
  const int W = gridDim.x * Cfg::kWarps;
  // First item of each warp: block-major, so that a step with fewer items than warps still
  // spreads them over every SM. Its next kStaticClaims items follow statically (gw + W, …),
  // later ones are claimed dynamically (work[kWorkClaims] counts them; see claim below).
  const int gw = warp * gridDim.x + blockIdx.x;
  if (gw >= total) return;                                 // whole warp leaves together
  __shared__ __align__(8) uint64_t bars[Cfg::kWarps * S];  // per warp, per stage (bulk variant)
  // Items the loader has started, in order; the consumer reads them back. The loader runs
  // at most S − 1 tiles (so at most S − 1 items) ahead, so S entries never collide.
  __shared__ ItemDesc started[Cfg::kWarps][S];
  const uint32_t bar0 = static_cast<uint32_t>(__cvta_generic_to_shared(bars)) + warp * S * 8;
  if constexpr (kBulk) {
    if (lane == 0) {
#pragma unroll
      for (int st = 0; st < S; ++st) mbar_init(bar0 + st * 8, 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    fence_proxy_async();
    __syncwarp();
  }

  // ---- loader: walks the same (item, tile) sequence as the consumer, S−1 tiles ahead ----
  // No dependent lookup may stall the warp on the way: under a saturated L2 each costs
  // microseconds. Item descriptions therefore flow through a three-stage pipeline, one
  // stage per item: claim (atomic, lane 0; static in the warm-up) → item_group[] →
  // groups[]/group_off[]/row_pt[] → range;
  // and each tile's page id is loaded one tile before its copies are issued.
  // The warm-up's claims are static: W warps each claiming three items from one counter as
  // the step starts would queue on that atomic before any warp's first tile (measured: 2–7 %
  // of a batch-1 step against dynamic claims only). Items after those are claimed dynamically, so
  // warps that finish early take more. Every warp's claims increase (static ones by W; dynamic ones
  // are ≥ (kStaticClaims + 1)·W, above any static one), so once one is past the last item all later
  // ones are, and a warp past the end claims nothing more.
  auto claim = [&]() {  // lane 0's value
    return lane == 0 ? (kStaticClaims + 1) * W + atomicAdd(p.work + kWorkClaims, 1) : 0;
  };
  auto group_of = [&](int c) {
    int gi = -1;
    if (c < total)
      gi = p.self_schedule ? item_group_search(tab.off, ng, c) : __ldg(p.item_group + c);
    return Claimed{c, gi};
  };
  auto fetch = [&](Claimed ig) {
    Pending n;
    n.c = ig.item;
    const int gi = ig.gi;
    n.gi = gi;
    n.off = 0;
    n.ptrow_el = 0;
    n.g = GroupDesc{0, 0, 0, 0};
    if (gi >= 0) {
      const int row = gi / p.Hkv;
      bool el;
      if (p.self_schedule) {
        const GroupOf go = self_group(p, tab, gi);
        n.g = go.g;
        el = go.el;
        n.off = tab.off[gi];
      } else {
        n.g = p.groups[gi];
        el = p.rows[row].eligible != 0;
        n.off = __ldg(p.group_off + gi);
      }
      n.ptrow_el = (p.row_pt ? __ldg(p.row_pt + row) : row) | (el ? kEligBit : 0);
    }
    return n;
  };
  auto resolve = [&](const Pending& n) {
    ItemDesc d;
    d.item = n.c;
    if (n.gi < 0) {
      d.row = -1;
      d.ptrow = d.hk = d.a = d.b = d.cat = d.ntiles = 0;
      return d;
    }
    const int lg = (n.ptrow_el & kEligBit) ? lg_elig : lg_exact;
    const ItemRange r = group_item(n.g, n.c - n.off, Cut{1 << lg, lg});
    d.row = n.gi / p.Hkv;
    d.ptrow = n.ptrow_el & (kEligBit - 1);
    d.hk = n.gi % p.Hkv;
    d.a = r.a;
    d.b = r.b;
    d.cat = r.cat;
    d.ntiles = (r.b - r.a + 15) / 16;
    return d;
  };
  // Warm-up (stalls once): the first item resolved, the second's group description and the
  // third's group loading, the fourth known; all four static (kStaticClaims).
  static_assert(kStaticClaims == 3, "the warm-up below takes the three static claims");
  ItemDesc ld = resolve(fetch(group_of(gw)));
  Pending n1 = fetch(group_of(gw + W));  // item after ld: group description loading
  Claimed ig2 = group_of(gw + 2 * W);    // the one after: its group loading
  int c3 = gw + 3 * W;                   // and the next (later: a claim in flight)
  int ld_tile = 0, ld_started = 1;
  if (lane == 0) started[warp][0] = ld;
  // Key of this lane's row of tile `t` of item `d`, clamped (rows past the range hold a
  // valid, finite key), and its page id (loaded here, consumed one tile later).
  auto tile_key = [&](const ItemDesc& d, int t) {
    const int key = d.a + 16 * t + (lane & 15);
    return key < d.b ? key : d.b - 1;
  };
  // Page and slot of a key: shifts when the page size is a power of two (a division by a
  // runtime value is ~20 instructions on the warp's path per tile).
  auto page_index = [&](int key) {
    return p.page_shift >= 0 ? key >> p.page_shift : key / p.page_size;
  };
  auto page_slot = [&](int key) {
    return p.page_shift >= 0 ? key & ((1 << p.page_shift) - 1) : key % p.page_size;
  };
  auto page_of = [&](const ItemDesc& d, int key) {
    return __ldg(p.page_table + static_cast<int64_t>(d.ptrow) * p.max_pages + page_index(key));
  };
  // L2 policies of the step (cache hints: no bit of a result depends on them). Where the
  // combine drops the partial states' lines (large steps), the partials are stored
  // evict_last and the K/V stream goes evict_first at any size, so the stream evicts itself
  // rather than the partials, which then never reach DRAM: written back in the middle of
  // the read stream, they cost a 2 GiB step 1–2 % against no hints (docs/decisions.md). Either
  // policy alone gains nothing there.
  const bool parts_last =
      p.parts_evict_last < 0 ? parts_dropped(p, total, cuts.elig.C, D) : p.parts_evict_last != 0;
  const bool kv_ef = p.kv_evict_first < 0 ? kv_evict_first_step(total, cuts.elig.C, D, parts_last)
                                          : p.kv_evict_first != 0;
  const uint64_t kv_pol = kv_evict_first_policy();
  int ld_key = tile_key(ld, 0);
  int ld_page = page_of(ld, ld_key);
  int ld_seq = 0;
  auto issue_next = [&]() {
    if (ld.row >= 0) {
      int page = ld_page;
      if (page < 0 || page >= p.num_pages) {  // a bad page id never reads out of bounds
        atomicOr(p.err, 4);
        page = page < 0 ? 0 : static_cast<int>(p.num_pages - 1);
      }
      const int64_t off = static_cast<int64_t>(page) * p.page_stride +
                          static_cast<int64_t>(page_slot(ld_key)) * p.token_stride +
                          static_cast<int64_t>(ld.hk) * p.head_stride;
      const uint32_t sK = wsmem + (ld_seq % S) * Cfg::kStageBytes, sV = sK + Cfg::kTileBytes;
      if constexpr (kBulk) {
        // Lane l copies key row l % 16 of K (l < 16) or V (l ≥ 16): 32 bulk copies of 2·D bytes.
        const uint32_t bar = bar0 + (ld_seq % S) * 8;
        if (lane == 0) mbar_arrive_expect_tx(bar, 32 * D * 2);
        __syncwarp();
        fence_proxy_async();  // the stage was last read by ldmatrix (generic proxy)
        const int r = lane & 15;
        bulk_copy_g2s((lane < 16 ? sK : sV) + r * Cfg::kRowBytes,
                      (lane < 16 ? p.k_cache : p.v_cache) + off, D * 2, bar);
      } else {
        // Lane l copies 16-byte chunks l, l + 32, … of the tile's K and V rows; two copies of
        // the loop, so the step's cache policy is one uniform branch per tile.
        auto copy_tile = [&](auto evict_first) {
#pragma unroll
          for (int i = 0; i < (16 * CPR) / 32; ++i) {
            const int idx = lane + 32 * i, r = idx / CPR, c = idx % CPR;
            const int64_t roff = __shfl_sync(0xffffffffu, off, r) + c * 8;
            const uint32_t dst = (r * CPR + (c ^ (r & 7))) * 16;
            if constexpr (decltype(evict_first)::value) {
              cp_async16(sK + dst, p.k_cache + roff, kv_pol);
              cp_async16(sV + dst, p.v_cache + roff, kv_pol);
            } else {
              cp_async16(sK + dst, p.k_cache + roff);
              cp_async16(sV + dst, p.v_cache + roff);
            }
          }
        };
        if (kv_ef)
          copy_tile(std::true_type{});
        else
          copy_tile(std::false_type{});
      }
      if (++ld_tile == ld.ntiles) {  // item boundary: every input below arrived an item ago
        ld_tile = 0;
        ld = resolve(n1);
        n1 = fetch(ig2);
        ig2 = group_of(__shfl_sync(0xffffffffu, c3, 0));
        c3 = ig2.gi >= 0 ? claim() : total;  // past the end: so is every later claim
        // The entry reused here was last read by the consumer (all lanes) an item or more ago:
        // order those reads before lane 0's write (compute-sanitizer racecheck).
        __syncwarp();
        if (lane == 0) started[warp][ld_started % S] = ld;  // a row < 0 entry ends the consumer
        ++ld_started;
      }
      if (ld.row >= 0) {
        ld_key = tile_key(ld, ld_tile);
        ld_page = page_of(ld, ld_key);
      }
    }
    ++ld_seq;
    if constexpr (!kBulk) cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue_next();

  // ---- consumer ----
  const int g0 = lane >> 2, q4 = lane & 3;
  // Q fragments (load_q). For D ≤ 128 the next item's are loaded a few tiles before it
  // starts (registers allow), so no item begins with a stall.
  constexpr bool kPrefetchQ = D <= 128;
  uint32_t qn[kPrefetchQ ? KS : 1][4];
  int start_n[2] = {0, 0};
  for (int cs_seq = 0;; ++cs_seq) {
    __syncwarp();  // the loader's (lane 0) entry for this item is visible
    const ItemDesc it = started[warp][cs_seq % S];
    if (it.row < 0) break;
    const int cs_item = it.item;
    uint32_t qf[KS][4];
    int start[2];
    if constexpr (kPrefetchQ) {
      if (cs_seq == 0) {
        load_q<D>(p, it, g0, q4, qf, start);
      } else {
#pragma unroll
        for (int kk = 0; kk < KS; ++kk)
#pragma unroll
          for (int e = 0; e < 4; ++e) qf[kk][e] = qn[kk][e];
        start[0] = start_n[0];
        start[1] = start_n[1];
      }
    } else {
      load_q<D>(p, it, g0, q4, qf, start);
    }
    // The loader has started the next item once this item's tile t_pf is issued for.
    const int t_pf = it.ntiles - (S - 1) > 0 ? it.ntiles - (S - 1) : 0;
    OnlineState<2 * NT, 2> st;  // rows g0, g0 + 8; st.o is the MMA accumulator

    for (int t = 0; t < it.ntiles; ++t) {
      // Issue tile c + S − 1 into the stage tile c − 1 used (consumed last iteration, fenced
      // by the __syncwarp at the loop end) before waiting for tile c: S tiles in flight.
      issue_next();
      if constexpr (kPrefetchQ) {
        if (t == t_pf) {
          __syncwarp();
          const ItemDesc nx = started[warp][(cs_seq + 1) % S];
          if (nx.row >= 0) load_q<D>(p, nx, g0, q4, qn, start_n);
        }
      }
      if constexpr (kBulk) {
        const int c = ld_seq - S;  // tile consumed now
        mbar_wait(bar0 + (c % S) * 8, (c / S) & 1);
      } else {
        cp_async_wait<S - 1>();
      }
      __syncwarp();
      const uint32_t sK = wsmem + ((ld_seq - S) % S) * Cfg::kStageBytes, sV = sK + Cfg::kTileBytes;
      const int tile_start = it.a + 16 * t;
      // S = Q · Kᵀ: two n-tiles of 8 keys.
      // Two accumulator chains per n-tile (even/odd k-steps) halve the dependent MMA chain; their
      // sum is written uncontracted, as the split of a reduction (state.cuh).
      float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
      {
        float s2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        const int j = lane >> 3, krow = (j >> 1) * 8 + (lane & 7);
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
          const int c = 2 * kk + (j & 1);
          uint32_t b[4];
          ldmatrix_x4(b, Cfg::at(sK, krow, c));
          float(*acc)[4] = (kk & 1) ? s2 : s;
          mma_bf16(acc[0], qf[kk], b[0], b[1]);
          mma_bf16(acc[1], qf[kk], b[2], b[3]);
        }
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[n][e] = __fadd_rn(s[n][e], s2[n][e]);
      }
      // Mask, scale to base 2, online softmax per row. The scaled logit's one consumer is the
      // select, so there is no sum to contract it into: a plain product (as __fmul_rn, ptxas
      // schedules the kernel differently, with the same results).
      float pr[2][4];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float x[4];
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = tile_start + n * 8 + q4 * 2 + e;
            const bool ok = key >= start[rr] && key < it.b;
            x[n * 2 + e] = ok ? s[n][rr * 2 + e] * p.scale_log2 : -INFINITY;
          }
        float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        st.absorb(rr, x, mx);
#pragma unroll
        for (int i = 0; i < 4; ++i) pr[rr][i] = x[i];
      }
      // P as the A operand (16 rows × 16 keys).
      uint32_t pa[4];
      pa[0] = pack_bf16x2(pr[0][0], pr[0][1]);  // row g0, keys q4*2..   (n-tile 0)
      pa[1] = pack_bf16x2(pr[1][0], pr[1][1]);  // row g0+8
      pa[2] = pack_bf16x2(pr[0][2], pr[0][3]);  // row g0, keys 8 + q4*2 (n-tile 1)
      pa[3] = pack_bf16x2(pr[1][2], pr[1][3]);  // row g0+8
      // O += P · V (V transposed by ldmatrix.trans).
      {
        const int j = lane >> 3, vrow = (j & 1) * 8 + (lane & 7);
#pragma unroll
        for (int nd = 0; nd < NT / 2; ++nd) {
          const int c = 2 * nd + (j >> 1);
          uint32_t b[4];
          ldmatrix_x4_trans(b, Cfg::at(sV, vrow, c));
          mma_bf16(st.o + 8 * nd, pa, b[0], b[1]);
          mma_bf16(st.o + 8 * nd + 4, pa, b[2], b[3]);
        }
      }
      __syncwarp();
    }

    write_partial<D>(p, cs_item, g0, q4, parts_last, st);
  }
  if constexpr (!kBulk) cp_async_wait<0>();
}

}  // namespace mac::cuda::detail
