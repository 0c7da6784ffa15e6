// Host checks of the amend kernel's work decomposition (cuda/src/work_items.hpp): the items
// of a group tile its ranges exactly, never straddle a category or exceed the item size, the
// per-step item size follows its rule, and the workspace bound holds for every step the
// engine may see (an item past it would be written out of bounds on the device).
#define BOOST_TEST_MODULE work_items
#include <boost/test/included/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "work_items.hpp"

namespace wi = mac::cuda::detail;

namespace {

// The ranges of one group as the schedule kernel builds them (match.cu): full attention and
// ineligible rows have lo = s_e; a MAC row with hits has lo ∈ [s_e, em].
wi::GroupDesc make_group(int kv_len, int r, int F, int lo_offset) {
  wi::GroupDesc g;
  const int m = kv_len - 1;
  g.end = kv_len;
  g.em = wi::prefix_end_dev(m, r);
  g.s_e = wi::sink_end_dev(F, g.em);
  g.lo = std::min(g.em, g.s_e + lo_offset);
  return g;
}

// Checks that the items of `g` cover sinks ∪ band ∪ tail exactly once, in key order, each
// inside one aligned cell of C keys.
void check_tiling(const wi::GroupDesc& g, const wi::Cut& cut) {
  const int n = wi::group_item_count(g, cut);
  const wi::GroupCounts parts = wi::group_counts(g, cut);
  BOOST_TEST_REQUIRE(parts.total() == n);
  std::vector<int> cover(g.end, 0);
  int prev_b = -1;
  for (int k = 0; k < n; ++k) {
    const wi::ItemRange it = wi::group_item(g, k, cut);
    const int C = cut.C;
    BOOST_TEST_REQUIRE(it.a < it.b);
    BOOST_TEST_REQUIRE(it.b - it.a <= C);
    BOOST_TEST_REQUIRE(it.a / C == (it.b - 1) / C);  // inside one aligned cell
    BOOST_TEST_REQUIRE(it.a >= prev_b);              // key order
    prev_b = it.b;
    const int lo = it.cat == wi::kCatSink ? 0 : it.cat == wi::kCatBand ? g.lo : g.em;
    const int hi = it.cat == wi::kCatSink ? g.s_e : it.cat == wi::kCatBand ? g.em : g.end;
    BOOST_TEST_REQUIRE(it.a >= lo);
    BOOST_TEST_REQUIRE(it.b <= hi);
    for (int key = it.a; key < it.b; ++key) ++cover[key];
  }
  for (int key = 0; key < g.end; ++key) {
    const bool wanted = key < g.s_e || (key >= g.lo && key < g.em) || key >= g.em;
    BOOST_TEST_REQUIRE(cover[key] == (wanted ? 1 : 0), "key " << key << " of [0, " << g.end << ")");
  }
}

wi::Cut cut_of(int C) { return wi::Cut{C, wi::log2_exact(C)}; }

}  // namespace

BOOST_AUTO_TEST_CASE(items_tile_each_group_exactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> len(1, 5000), rr(0, 300), ff(0, 8), off(0, 4000);
  for (int C : {16, 64, 256, 1024, 2048}) {
    for (int t = 0; t < 300; ++t) {
      const wi::GroupDesc g = make_group(len(rng), rr(rng), ff(rng), t % 3 == 0 ? 0 : off(rng));
      check_tiling(g, cut_of(C));
    }
  }
  // Edges: kv_len 1, r = 0 (empty tail), sinks covering the whole prefix, ranges on cell edges.
  for (int C : {16, 256})
    for (const auto& g : {make_group(1, 0, 0, 0), make_group(1, 5, 4, 0), make_group(C, 0, 0, 0),
                          make_group(C + 1, 1, C, 0), make_group(3 * C, C, 1, C - 1), make_group(40, 8, 100, 0),
                          make_group(5 * C + 7, 0, 0, C + 3)})
      check_tiling(g, cut_of(C));
}

BOOST_AUTO_TEST_CASE(auto_chunk_follows_its_rule) {
  for (int W : {64, 1056, 4096}) {
    for (int64_t total : {int64_t{1}, int64_t{1000}, int64_t{1} << 18, int64_t{1} << 22, int64_t{1} << 24,
                          int64_t{1} << 26, int64_t{131072} * 64 * 32}) {
      const int C = wi::auto_chunk(total, W);
      BOOST_TEST_REQUIRE((C >= wi::kChunkMin && C <= wi::kChunkMax && (C & (C - 1)) == 0));
      const int64_t items = (total + C - 1) / C;
      if (items <= W && items * 10 >= int64_t{W} * 9) {
        // One round: the smallest size whose items still fit the warps.
        BOOST_TEST(C <= wi::kOneRoundMax);
        if (C > wi::kChunkMin) BOOST_TEST((total + C / 2 - 1) / (C / 2) > W);
        continue;
      }
      // Otherwise the largest size that still leaves chunk_rounds(C) items per warp.
      if (C > wi::kChunkMin) BOOST_TEST(total >= int64_t{wi::chunk_rounds(C)} * W * C);
      if (C < wi::kChunkMax) BOOST_TEST(total < int64_t{wi::chunk_rounds(2 * C)} * W * 2 * C);
    }
  }
  // The largest shape keeps 2048-key items; batch 1 at 32K gets the smallest, and
  // at 127K one round of 1024-key items (Hkv 8) or 512-key items (Hkv 4).
  BOOST_TEST(wi::auto_chunk(int64_t{64} * 8 * 130048, 1056) == 2048);
  BOOST_TEST(wi::auto_chunk(int64_t{1} * 8 * 32768, 1056) == 256);
  BOOST_TEST(wi::auto_chunk(int64_t{1} * 8 * 130048, 1056) == 1024);
  BOOST_TEST(wi::auto_chunk(int64_t{1} * 4 * 130048, 1056) == 512);
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 4 * 32768, 1056) == 512);  // one round would need 2048
}

BOOST_AUTO_TEST_CASE(workspace_bound_holds_for_any_step) {
  // Random engines (max_batch, Hkv, max_context, W) and steps within them (kv_lens, hits):
  // the items of the step never exceed the bound the engine allocated for.
  std::mt19937 rng(11);
  for (int t = 0; t < 400; ++t) {
    const int max_batch = 1 + static_cast<int>(rng() % 64), hkv = 1 + static_cast<int>(rng() % 8);
    const int max_ctx = 1 + static_cast<int>(rng() % (t % 4 == 0 ? 131072 : 6000));
    const int W = 32 * (1 + static_cast<int>(rng() % 40));
    const int fixed = t % 5 == 0 ? 16 << (rng() % 8) : 0;
    const int64_t bound = wi::max_items_bound(int64_t{max_batch} * hkv * max_ctx, max_batch * hkv, W, fixed);
    const int N = 1 + static_cast<int>(rng() % max_batch);
    const int r = static_cast<int>(rng() % 300), F = static_cast<int>(rng() % 5);
    std::vector<int> lens(N);
    int64_t total = 0;
    for (int& l : lens) {
      l = t % 3 == 0 ? max_ctx : 1 + static_cast<int>(rng() % max_ctx);
      total += int64_t{hkv} * l;
    }
    const wi::Cut cut = wi::step_cut(total, W, fixed);
    int64_t items = 0;
    for (int i = 0; i < N; ++i)
      for (int h = 0; h < hkv; ++h) {
        const int lo_off = (i + h) % 2 ? static_cast<int>(rng() % (lens[i] + 1)) : 0;
        items += wi::group_item_count(make_group(lens[i], r, F, lo_off), cut);
      }
    BOOST_TEST_REQUIRE(items <= bound, "engine " << max_batch << "x" << hkv << "x" << max_ctx << " W " << W
                                                 << " chunk " << cut.C << ": " << items
                                                 << " items > bound " << bound);
  }
}
