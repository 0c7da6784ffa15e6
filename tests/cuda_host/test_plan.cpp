// Host checks of an engine's plan (cuda/src/plan.hpp): the config checks name the offending
// field and value with the status create returns; the workspace layout keeps the step-to-step
// words (item counter, error flags) at the same offsets for every config, which is what lets
// engines share one caller-owned workspace; its regions are aligned, ordered and large enough;
// and its size never shrinks as max_batch or max_context grow, so a workspace sized for the
// largest config serves the smaller ones.
#define BOOST_TEST_MODULE plan
#include <boost/test/included/unit_test.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "plan.hpp"

namespace sd = mac::cuda::detail;
using mac::cuda::EngineConfig;
using mac::cuda::StatusCode;

namespace {

EngineConfig config(int N, int Hq, int Hkv, int D, int ctx, int chunk) {
  EngineConfig c;
  c.max_batch = N, c.num_q_heads = Hq, c.num_kv_heads = Hkv;
  c.head_dim = D, c.max_context = ctx, c.kv_chunk = chunk;
  return c;
}

// Resident warps of an H200's persistent amend grid (132 SMs × 2 blocks × 4 warps) and of a
// grid capped small (Tuning::amend_blocks).
const int kWarps[] = {132 * 2 * 4, 8};

sd::WorkspaceLayout plan(const EngineConfig& c, int warps) {
  sd::WorkspaceLayout w;
  const auto st = sd::plan_workspace(c, warps, &w);
  BOOST_TEST_REQUIRE(st.ok(), st.message);
  return w;
}

// Every region starts on a 256-byte boundary after the one before it, with room for its
// contents (the sizes the kernels index up to).
void check_regions(const EngineConfig& c, const sd::WorkspaceLayout& w) {
  const size_t N = c.max_batch, Hq = c.num_q_heads, Hkv = c.num_kv_heads, D = c.head_dim,
               G = Hq / Hkv, items = static_cast<size_t>(w.max_items);
  const struct {
    size_t at, need;
  } regions[] = {{w.work, sizeof(int) * sd::kWorkInts},
                 {w.err, sizeof(int)},
                 {w.plans, sizeof(sd::HeadPlan) * N * Hq},
                 {w.snap_o, 2 * N * Hq * D},
                 {w.snap_lse2, 4 * N * Hq},
                 {w.rows, sizeof(sd::RowInfo) * N},
                 {w.groups, sizeof(sd::GroupDesc) * N * Hkv},
                 {w.group_off, sizeof(int) * (N * Hkv + 1)},
                 {w.item_group, sizeof(int) * items},
                 {w.part_o, 4 * items * G * D},
                 {w.part_lse2, 4 * items * G},
                 {w.prefill, 4 * 3 * N},
                 {w.prefill_q, 2 * 2 * N * Hq * D},
                 {w.bytes, 0}};
  for (size_t i = 0; i + 1 < std::size(regions); ++i) {
    BOOST_TEST(regions[i].at % 256 == 0);
    BOOST_TEST(regions[i + 1].at >= regions[i].at + regions[i].need);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(workspace_grows_with_batch_and_context) {
  for (const int D : {64, 128, 256})
    for (const int Hkv : {1, 8})
      for (const int G : {1, 4, 16})
        for (const int chunk : {0, 256})
          for (const int warps : kWarps) {
            size_t prev = 0;
            for (const int N : {1, 2, 3, 8, 33, 64, 128}) {
              const EngineConfig c = config(N, G * Hkv, Hkv, D, 32768, chunk);
              const sd::WorkspaceLayout w = plan(c, warps);
              check_regions(c, w);
              BOOST_TEST(w.bytes >= prev, "D " << D << " Hkv " << Hkv << " G " << G << " chunk "
                                               << chunk << " warps " << warps << " N " << N);
              prev = w.bytes;
            }
            prev = 0;
            for (const int ctx : {1, 255, 256, 4096, 65537, 131072}) {
              const sd::WorkspaceLayout w = plan(config(4, G * Hkv, Hkv, D, ctx, chunk), warps);
              BOOST_TEST(w.bytes >= prev, "D " << D << " ctx " << ctx);
              prev = w.bytes;
            }
          }
}

BOOST_AUTO_TEST_CASE(step_to_step_words_at_fixed_offsets) {
  // The item counter and the error flags are the only words a step leaves for the next: at
  // the same offsets whatever the config, engines sharing a workspace find them.
  const sd::WorkspaceLayout a = plan(config(1, 8, 8, 64, 1000, 0), kWarps[0]);
  const sd::WorkspaceLayout b = plan(config(128, 64, 4, 256, 131072, 16), kWarps[1]);
  BOOST_TEST(a.work == 0u);
  BOOST_TEST(b.work == 0u);
  BOOST_TEST(a.err == b.err);
  BOOST_TEST(a.bytes < b.bytes);
}

BOOST_AUTO_TEST_CASE(bad_configs_are_named) {
  struct Bad {
    const char* field;
    StatusCode code;
    void (*set)(EngineConfig&);
  };
  const Bad bad[] = {
      {"head_dim = 96", StatusCode::kUnsupported, [](EngineConfig& c) { c.head_dim = 96; }},
      {"num_q_heads = 12", StatusCode::kInvalidArgument,
       [](EngineConfig& c) { c.num_q_heads = 12, c.num_kv_heads = 8; }},
      {"num_kv_heads = 0", StatusCode::kInvalidArgument,
       [](EngineConfig& c) { c.num_kv_heads = 0; }},
      {"G = Hq/Hkv = 17", StatusCode::kUnsupported,
       [](EngineConfig& c) { c.num_q_heads = 34, c.num_kv_heads = 2; }},
      {"max_batch = 0", StatusCode::kInvalidArgument, [](EngineConfig& c) { c.max_batch = 0; }},
      {"max_context = 131073", StatusCode::kContextTooLong,
       [](EngineConfig& c) { c.max_context = mac::cuda::kMaxContext + 1; }},
      {"max_context = 0", StatusCode::kContextTooLong, [](EngineConfig& c) { c.max_context = 0; }},
      {"ring = 0", StatusCode::kInvalidArgument, [](EngineConfig& c) { c.ring = 0; }},
      {"kv_chunk = 100", StatusCode::kInvalidArgument, [](EngineConfig& c) { c.kv_chunk = 100; }},
      {"kv_chunk = 8", StatusCode::kInvalidArgument, [](EngineConfig& c) { c.kv_chunk = 8; }},
      {"tuning.kv_evict_first = 2", StatusCode::kInvalidArgument,
       [](EngineConfig& c) { c.tuning.kv_evict_first = 2; }},
      {"tuning.pdl_edges = 16", StatusCode::kInvalidArgument,
       [](EngineConfig& c) { c.tuning.pdl_edges = 16; }},
      {"tuning.amend_blocks_per_sm = 33", StatusCode::kInvalidArgument,
       [](EngineConfig& c) { c.tuning.amend_blocks_per_sm = 33; }},
      {"tuning.amend_blocks = -1", StatusCode::kInvalidArgument,
       [](EngineConfig& c) { c.tuning.amend_blocks = -1; }},
  };
  const EngineConfig good = config(4, 32, 8, 128, 4096, 0);
  BOOST_TEST(sd::check_config(good).ok());
  for (const Bad& b : bad) {
    EngineConfig c = good;
    b.set(c);
    const auto st = sd::check_config(c);
    BOOST_TEST((st.code == b.code), b.field << ": " << st.message);
    BOOST_TEST(st.message.find(b.field) != std::string::npos, b.field << " in: " << st.message);
  }
}

BOOST_AUTO_TEST_CASE(plan_refusals_are_named) {
  sd::WorkspaceLayout w;
  const auto no_warps = sd::plan_workspace(config(1, 8, 8, 128, 1024, 0), 0, &w);
  BOOST_TEST((no_warps.code == StatusCode::kInvalidArgument));
  BOOST_TEST(no_warps.message.find("amend_warps = 0") != std::string::npos, no_warps.message);
  // 4096 rows × 32 KV heads × 2^17 keys in items of 16: 2^30 cells and more.
  const auto huge = sd::plan_workspace(config(4096, 32, 32, 64, 131072, 16), kWarps[0], &w);
  BOOST_TEST((huge.code == StatusCode::kInvalidArgument));
  BOOST_TEST(huge.message.find("items") != std::string::npos, huge.message);
}
