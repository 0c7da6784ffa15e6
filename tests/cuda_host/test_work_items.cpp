// Host checks of the amend kernel's work decomposition (cuda/src/work_items.hpp): a group's
// ranges follow docs/semantics.md §3, its items tile them exactly, never straddle a category or
// exceed the item size, the per-step item size follows its rule, the workspace bound holds for
// every step the engine may see (an item past it would be written out of bounds on the device), and
// the item → group search of the self-scheduled amend kernel finds every item's group, and
// the per-step L2 policies split the measured steps as measured.
#define BOOST_TEST_MODULE work_items
#include <boost/test/included/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "work_items.hpp"

namespace wi = mac::cuda::detail;

namespace {

// The ranges of one group as the schedule builds them (wi::make_group): full attention and
// ineligible rows have band_begin = sink_end; a MAC row with hits has band_begin ∈
// [sink_end, tail_begin].
wi::GroupDesc make_group(int kv_len, int r, int F, int lo_offset) {
  const int m = kv_len - 1;
  const wi::GroupDesc exact = wi::make_group(m, false, 0, r, F);
  return lo_offset == 0 ? exact : wi::make_group(m, true, exact.sink_end + lo_offset, r, F);
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
    const int lo = it.cat == wi::kCatSink   ? 0
                   : it.cat == wi::kCatBand ? g.band_begin
                                            : g.tail_begin;
    const int hi = it.cat == wi::kCatSink   ? g.sink_end
                   : it.cat == wi::kCatBand ? g.tail_begin
                                            : g.end;
    BOOST_TEST_REQUIRE(it.a >= lo);
    BOOST_TEST_REQUIRE(it.b <= hi);
    for (int key = it.a; key < it.b; ++key) ++cover[key];
  }
  for (int key = 0; key < g.end; ++key) {
    const bool wanted =
        key < g.sink_end || (key >= g.band_begin && key < g.tail_begin) || key >= g.tail_begin;
    BOOST_TEST_REQUIRE(cover[key] == (wanted ? 1 : 0), "key " << key << " of [0, " << g.end << ")");
  }
}

wi::Cut cut_of(int C) { return wi::step_cut(0, 1, C, 128, false); }
wi::Cut fine_cut_of(int C) { return wi::fine_cut(cut_of(C)); }

}  // namespace

BOOST_AUTO_TEST_CASE(group_ranges_follow_the_design) {
  // m = 99, r = 32: E(m) = 68; F = 4 sinks. Sinks [0, 4), band [lo, 68), tail [68, 100).
  const wi::GroupDesc exact = wi::make_group(99, false, 50, 32, 4);
  BOOST_TEST(exact.end == 100);
  BOOST_TEST(exact.tail_begin == 68);
  BOOST_TEST(exact.sink_end == 4);
  BOOST_TEST(exact.band_begin == 4);  // not eligible: the band is the whole exact range
  BOOST_TEST(wi::make_group(99, true, 50, 32, 4).band_begin == 50);  // earliest hit band start
  BOOST_TEST(wi::make_group(99, true, 90, 32, 4).band_begin == 68);  // clamped to E(m)
  BOOST_TEST(wi::make_group(99, true, INT32_MAX, 32, 4).band_begin == 68);
  const wi::GroupDesc young = wi::make_group(10, false, 0, 32, 4);  // E(m) = 0: no prefix, no sinks
  BOOST_TEST((young.tail_begin == 0 && young.sink_end == 0 && young.end == 11));
  const wi::GroupDesc invalid = wi::make_group(-1, true, 0, 32, 4);  // an invalid row has no keys
  BOOST_TEST((invalid.end == 0 && wi::group_item_count(invalid, cut_of(256)) == 0));
}

BOOST_AUTO_TEST_CASE(item_group_search_finds_every_item) {
  // Random item counts, empty groups (invalid rows, r = 0 tails) among them, at the ends too.
  std::mt19937 rng(5);
  for (int t = 0; t < 200; ++t) {
    const int ng = 1 + static_cast<int>(rng() % 300);
    std::vector<int> cnt(ng), off(ng + 1, 0);
    for (int g = 0; g < ng; ++g) cnt[g] = rng() % 3 == 0 ? 0 : static_cast<int>(rng() % 40);
    if (t % 4 == 0) cnt[0] = 0;
    if (t % 4 == 1) cnt[ng - 1] = 0;
    for (int g = 0; g < ng; ++g) off[g + 1] = off[g] + cnt[g];
    for (int item = 0; item < off[ng]; ++item) {
      const int g = wi::item_group_search(off.data(), ng, item);
      BOOST_TEST_REQUIRE((g >= 0 && g < ng && off[g] <= item && item < off[g + 1]),
                         "item " << item << " of " << off[ng] << " → group " << g << " of " << ng);
    }
  }
}

BOOST_AUTO_TEST_CASE(items_tile_each_group_exactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> len(1, 5000), rr(0, 300), ff(0, 8), off(0, 4000);
  for (int C : {16, 64, 256, 1024, 2048}) {
    for (int t = 0; t < 300; ++t) {
      const wi::GroupDesc g = make_group(len(rng), rr(rng), ff(rng), t % 3 == 0 ? 0 : off(rng));
      check_tiling(g, cut_of(C));
    }
  }
  // An all-hit step's cut: kFineC-key items, or the config's smaller fixed size.
  BOOST_TEST((fine_cut_of(1024).C == wi::kFineC && fine_cut_of(1024).lg == wi::kFineLg));
  BOOST_TEST((fine_cut_of(16).C == 16 && fine_cut_of(16).lg == 4));
  // All-hit groups as K1 leaves them (band ≤ M = 512 keys, tail r = 256, F = 4 sinks)
  // qualify, and fall into at most kFineMaxItems items of kFineC keys; a group just past
  // kFineMaxKeys keys does not qualify.
  for (int t = 0; t < 200; ++t) {
    const int kv = 1300 + static_cast<int>(rng() % 130000),
              lo_back = 1 + static_cast<int>(rng() % 512);
    const wi::GroupDesc g = wi::make_group(kv - 1, true, kv - 256 - lo_back, 256, 4);
    BOOST_TEST_REQUIRE(wi::fine_ok(g));
    const int n = wi::group_item_count(g, fine_cut_of(256));
    BOOST_TEST_REQUIRE((n >= (g.end - g.band_begin) / wi::kFineC && n <= wi::kFineMaxItems));
    check_tiling(g, fine_cut_of(256));
    BOOST_TEST_REQUIRE(
        !wi::fine_ok(wi::make_group(kv - 1, true, kv - wi::kFineMaxKeys + 3, 256, 4)));
  }
  // The worst qualifying group (kFineMaxKeys keys in three ranges, each off the cells' edges)
  // still fits kFineMaxItems.
  {
    // 63 sinks, band [65, 960), tail [960, 1026): 63 + 895 + 66 = 1024 keys.
    const wi::GroupDesc g = wi::make_group(1025, true, 65, 66, 63);
    BOOST_TEST_REQUIRE(
        (g.sink_end == 63 && g.band_begin == 65 && g.tail_begin == 960 && g.end == 1026));
    BOOST_TEST_REQUIRE(wi::fine_ok(g));
    BOOST_TEST(wi::group_item_count(g, fine_cut_of(2048)) <= wi::kFineMaxItems);
  }
  // Full attention and ineligible rows (band_begin = sink_end) never qualify, nor a group with a
  // miss head (band from the sinks' end); rows without keys do not stop a step from being all-hit.
  BOOST_TEST(!wi::fine_ok(make_group(2000, 256, 4, 0)));
  BOOST_TEST(!wi::fine_ok(make_group(900, 256, 0, 0)));
  BOOST_TEST(wi::fine_ok(wi::make_group(-1, true, 0, 256, 0)));
  // Edges: kv_len 1, r = 0 (empty tail), sinks covering the whole prefix, ranges on cell edges.
  for (int C : {16, 256})
    for (const auto& g : {make_group(1, 0, 0, 0), make_group(1, 5, 4, 0), make_group(C, 0, 0, 0),
                          make_group(C + 1, 1, C, 0), make_group(3 * C, C, 1, C - 1),
                          make_group(40, 8, 100, 0), make_group(5 * C + 7, 0, 0, C + 3)})
      for (const wi::Cut& cut : {cut_of(C), fine_cut_of(C)}) check_tiling(g, cut);
}

BOOST_AUTO_TEST_CASE(auto_chunk_follows_its_rule) {
  for (int D : {64, 128, 256})
    for (bool eligible : {false, true})
      for (int W : {64, 1056, 4096}) {
        for (int64_t total : {int64_t{1}, int64_t{1000}, int64_t{1} << 18, int64_t{1} << 22,
                              int64_t{1} << 24, int64_t{1} << 26, int64_t{131072} * 64 * 32}) {
          const int C = wi::auto_chunk(total, W, D, eligible);
          BOOST_TEST_REQUIRE((C >= wi::kChunkMin && C <= wi::kChunkMax && (C & (C - 1)) == 0));
          // The eligible rule never takes larger items than the exact one (the workspace
          // bound counts its cells).
          BOOST_TEST(C <= wi::auto_chunk(total, W, D, false));
          const int64_t items = (total + C - 1) / C;
          if (items <= W && items * 10 >= int64_t{W} * 9) {
            // One round: the smallest size whose items still fit the warps.
            BOOST_TEST(C <= wi::kOneRoundMax);
            if (C > wi::kChunkMin) BOOST_TEST((total + C / 2 - 1) / (C / 2) > W);
            continue;
          }
          // Otherwise the largest size that still leaves chunk_rounds(C) items per warp.
          if (C > wi::kChunkMin)
            BOOST_TEST(total >= int64_t{wi::chunk_rounds(C, D, eligible)} * W * C);
          if (C < wi::kChunkMax)
            BOOST_TEST(total < int64_t{wi::chunk_rounds(2 * C, D, eligible)} * W * 2 * C);
        }
      }
  // The shapes (D = 128, 1056 warps: the H200's persistent grid). Full attention
  // takes 2048-key items where each warp keeps >= 3 of them (batch 16, 64K, Hkv 8; batch 16,
  // 127K, Hkv 4), eligible MAC rows only with >= 8 (1024 there); batch 16, 32K, Hkv 8 keeps
  // 1024 (2048 would leave each warp two); batch 1 at 32K gets the smallest, and at 127K one
  // round of 1024-key items (Hkv 8) or 512-key items (Hkv 4). D = 256 (528 warps) needs 8
  // items per warp for 2048 in both rules.
  BOOST_TEST(wi::auto_chunk(int64_t{64} * 8 * 130048, 1056, 128, false) == 2048);
  BOOST_TEST(wi::auto_chunk(int64_t{64} * 8 * 130048, 1056, 128, true) == 2048);
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 8 * 65536, 1056, 128, false) == 2048);
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 8 * 65536, 1056, 128, true) == 1024);
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 4 * 130048, 1056, 128, false) == 2048);
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 4 * 130048, 1056, 128, true) == 1024);
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 8 * 32768, 1056, 128, false) == 1024);
  BOOST_TEST(wi::auto_chunk(int64_t{1} * 8 * 32768, 1056, 128, false) == 256);
  BOOST_TEST(wi::auto_chunk(int64_t{1} * 8 * 130048, 1056, 128, false) == 1024);
  BOOST_TEST(wi::auto_chunk(int64_t{1} * 4 * 130048, 1056, 128, false) == 512);
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 4 * 32768, 1056, 128, false) ==
             512);  // one round would need 2048
  BOOST_TEST(wi::auto_chunk(int64_t{16} * 8 * 65536, 528, 256, false) == 1024);
  BOOST_TEST(wi::auto_chunk(int64_t{64} * 8 * 130048, 528, 256, false) == 2048);
  // Full and prefill steps have one cut; a MAC step two, equal unless the rules differ.
  const wi::StepCuts full = wi::step_cuts(int64_t{16} * 8 * 65536, 1056, 0, 128, false);
  BOOST_TEST((full.exact.C == 2048 && full.elig.C == 2048));
  const wi::StepCuts mac = wi::step_cuts(int64_t{16} * 8 * 65536, 1056, 0, 128, true);
  BOOST_TEST((mac.exact.C == 2048 && mac.elig.C == 1024 && mac.of(true).C == 1024 &&
              mac.of(false).C == 2048));
  const wi::StepCuts fixed = wi::step_cuts(int64_t{16} * 8 * 65536, 1056, 512, 128, true);
  BOOST_TEST((fixed.exact.C == 512 && fixed.elig.C == 512));
}

BOOST_AUTO_TEST_CASE(l2_policies_split_the_measured_steps) {
  // The per-step L2 policies (evict_first on the K/V stream by size, the partials' discards
  // after the combine, and the stream's policy once the partials it keeps are stored
  // evict_last) on full-attention steps of the shapes they were measured on
  // (work_items.hpp states the measured gains): D = 128, 1056 warps, items of the exact cut.
  // In a full-attention step the partials are stored evict_last exactly where they are
  // discarded (parts_dropped), so every step from 768 MiB up streams evict_first.
  struct Step {
    int batch, hkv, ctx;
    bool evict_first, discard;
  };
  const Step steps[] = {
      {1, 8, 32768, true, false},   {1, 4, 130048, true, false},   // batch 1: both short
      {4, 4, 32768, true, false},   {8, 4, 32768, true, false},    // ≤ 0.54 GB: discards cost
      {16, 4, 32768, true, true},   {4, 4, 130048, true, true},    // 1 GiB, Hkv 4: the gains
      {8, 8, 32768, true, true},    {16, 8, 32768, false, true},   // neutral, kept on
      {64, 8, 130048, false, true}, {64, 4, 130048, false, true},  // the largest
  };
  for (const Step& st : steps) {
    const int64_t keys = int64_t{st.batch} * st.hkv * st.ctx;
    const int C = wi::auto_chunk(keys, 1056, 128, false);
    const int64_t items = (keys + C - 1) / C;
    BOOST_TEST(wi::kv_evict_first_auto(items, C, 128) == st.evict_first,
               st.batch << "/" << st.ctx << "/Hkv " << st.hkv << " evict_first");
    BOOST_TEST(wi::parts_discard_auto(items, C, 128) == st.discard,
               st.batch << "/" << st.ctx << "/Hkv " << st.hkv << " discard");
    // The stream's policy with the partials stored as the step decides (evict_last = discard):
    // evict_first on the small steps and on every discarding one, so on all of these.
    BOOST_TEST(wi::kv_evict_first_step(items, C, 128, st.discard) == (st.evict_first || st.discard),
               st.batch << "/" << st.ctx << "/Hkv " << st.hkv << " stream policy");
    BOOST_TEST(wi::kv_evict_first_step(items, C, 128, st.discard),
               st.batch << "/" << st.ctx << "/Hkv " << st.hkv << " streams evict_first");
    // With the partials stored plainly (Tuning::parts_evict_last = 0) the size rule alone.
    BOOST_TEST(wi::kv_evict_first_step(items, C, 128, false) == st.evict_first);
  }
  // A step of 64-key items (every head hit) is never large enough to discard, at any D.
  BOOST_TEST(
      !wi::parts_discard_auto(int64_t{wi::kFineMaxGroups} * wi::kFineMaxItems, wi::kFineC, 256));
}

namespace {

/*! \brief A step's cuts and item count as the schedule (schedule.cuh) decides them: both cuts
 *  from the step's keys, each row's groups at its own, and kFineC-key items for the eligible
 *  ones when there are at most kFineMaxGroups groups and every one is all-hit. */
struct StepItems {
  wi::StepCuts cuts;
  int64_t items = 0;
  bool fine = false;
};
StepItems schedule_step(const std::vector<wi::GroupDesc>& groups, const std::vector<bool>& elig,
                        int64_t keys, int W, int fixed, int D) {
  StepItems s;
  s.cuts = wi::step_cuts(keys, W, fixed, D, true);
  if (fixed == 0 && static_cast<int>(groups.size()) <= wi::kFineMaxGroups &&
      std::all_of(groups.begin(), groups.end(),
                  [](const wi::GroupDesc& g) { return wi::fine_ok(g); })) {
    s.fine = s.cuts.elig.C > wi::kFineC;
    s.cuts.elig = wi::fine_cut(s.cuts.elig);
  }
  for (size_t i = 0; i < groups.size(); ++i)
    s.items += wi::group_item_count(groups[i], s.cuts.of(elig[i]));
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rows_take_their_cut) {
  // Batch 16, 64K, Hkv 8 (D = 128, 1056 warps): the exact cut is 2048 keys, the eligible 1024.
  // Each group's items tile its ranges at its row's cut; a group of an eligible row whose
  // heads all missed has about twice the items of an ineligible one (F = 4, r = 256: one sink
  // item, the band's 64 cells of 1024 keys or 32 of 2048, one tail item).
  const int N = 16, hkv = 8, ctx = 65536, W = 1056;
  std::vector<wi::GroupDesc> groups;
  std::vector<bool> elig;
  for (int i = 0; i < N; ++i)
    for (int h = 0; h < hkv; ++h) {
      groups.push_back(make_group(ctx, 256, 4, (i + h) % 3 == 0 ? 0 : ctx - 1000));
      elig.push_back(i > 0);
    }
  const StepItems s = schedule_step(groups, elig, int64_t{N} * hkv * ctx, W, 0, 128);
  BOOST_TEST((s.cuts.exact.C == 2048 && s.cuts.elig.C == 1024 && !s.fine));
  for (size_t i = 0; i < groups.size(); ++i) check_tiling(groups[i], s.cuts.of(elig[i]));
  const wi::GroupDesc exact = make_group(ctx, 256, 4, 0);
  BOOST_TEST(wi::group_item_count(exact, s.cuts.of(true)) == 66);
  BOOST_TEST(wi::group_item_count(exact, s.cuts.of(false)) == 34);
}

BOOST_AUTO_TEST_CASE(workspace_bound_holds_for_any_step) {
  // Random engines (max_batch, Hkv, max_context, W, D) and steps within them (kv_lens,
  // eligibility, hits): the items of the step, each row's at its own cut, never exceed the
  // bound the engine allocated for, all-hit steps (64-key items, as the schedule decides
  // them) included.
  std::mt19937 rng(11);
  int fine_steps = 0, split_steps = 0;
  for (int t = 0; t < 600; ++t) {
    const int max_batch = 1 + static_cast<int>(rng() % 64), hkv = 1 + static_cast<int>(rng() % 8);
    const int max_ctx = 1 + static_cast<int>(rng() % (t % 4 == 0 ? 131072 : 6000));
    const int W = 32 * (1 + static_cast<int>(rng() % 40));
    const int fixed = t % 5 == 0 ? 16 << (rng() % 8) : 0;
    const int D = 64 << (t % 3);
    const int64_t bound =
        wi::max_items_bound(int64_t{max_batch} * hkv * max_ctx, max_batch * hkv, W, fixed, D);
    const int N = 1 + static_cast<int>(rng() % max_batch);
    const int r = static_cast<int>(rng() % 300), F = static_cast<int>(rng() % 5);
    std::vector<int> lens(N);
    int64_t total = 0;
    for (int& l : lens) {
      l = t % 3 == 0 ? max_ctx : 1 + static_cast<int>(rng() % max_ctx);
      total += int64_t{hkv} * l;
    }
    // Rows eligible or not (every row in odd steps); groups of eligible rows with hits; in
    // odd steps all of them start their band after the sinks, near the end (all-hit).
    std::vector<wi::GroupDesc> groups;
    std::vector<bool> elig;
    for (int i = 0; i < N; ++i) {
      const bool el = t % 2 == 1 || rng() % 4 != 0;
      for (int h = 0; h < hkv; ++h) {
        int lo_off = el && (i + h) % 2 ? static_cast<int>(rng() % (lens[i] + 1)) : 0;
        if (t % 2 == 1) lo_off = std::max(1, lens[i] - static_cast<int>(rng() % 1000));
        groups.push_back(make_group(lens[i], r, F, lo_off));
        elig.push_back(el);
      }
    }
    const StepItems s = schedule_step(groups, elig, total, W, fixed, D);
    fine_steps += s.fine;
    split_steps += s.cuts.elig.C != s.cuts.exact.C && !s.fine;
    BOOST_TEST_REQUIRE(s.items <= bound, "engine " << max_batch << "x" << hkv << "x" << max_ctx
                                                   << " W " << W << " D " << D << " chunks "
                                                   << s.cuts.exact.C << "/" << s.cuts.elig.C << ": "
                                                   << s.items << " items > bound " << bound);
  }
  BOOST_TEST_MESSAGE("all-hit steps with 64-key items: " << fine_steps << ", steps with two cuts: "
                                                         << split_steps);
  BOOST_TEST(fine_steps >= 40);
  BOOST_TEST(split_steps >= 5);  // the rules differ only at D = 128, for 3·W to 8·W 2048-key cells
}
