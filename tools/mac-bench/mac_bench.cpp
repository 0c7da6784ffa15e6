// mac-bench: CUDA-graph replay timings of the paged full-attention decode and of MAC decode
// steps (K1+K2+K3) over the grid of issue 3, with bytes moved, GB/s and % of a
// streaming-read bandwidth measured in the same run. CSV to stdout or --csv FILE.
//
// Synthetic setup (seeded): K/V, rings and queries are N(0,1) BF16. A "hit" head's pre-RoPE
// query is an exact copy of the ring entry of position m − lag, lag ~ uniform{1..64}; a miss
// head's query is fresh (d2 ≈ 2D ≫ thr, so it never hits). Misses are placed uniformly at
// random over all (row, head) pairs: exactly round((1−f)·N·Hq) of them. Each timed replay
// writes entry(m) into slot m mod M; the bench restores that slot between replays (outside
// the timed region) so every replay sees the same decisions.
//
// Exit status and messages: docs/cli.md. The flags are checked before the device is looked
// for, so a bad flag is exit 2 on any machine; --csv is written under a temporary name and
// renamed when the grid is done.
#include "mac/cli/cli.hpp"
#include "mac/io/atomic_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "mac/cuda/bench.hpp"
#include "mac/cuda/mac_cuda.hpp"
#include "mac/cuda/runner.hpp"

#if MAC_CUDA_ENABLED
#include <cuda_runtime.h>
#endif

using namespace mac::cuda;

namespace {

[[maybe_unused]] void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "mac-bench: %s: %s: %s\n", what, to_string(s.code), s.message.c_str());
    std::exit(mac::cli::kCannotFinish);  // the atexit hook removes the --csv temporary
  }
}
#define CHECK(x) check((x), #x)

struct Options {
  std::vector<int> hkv = {8, 4}, batch = {1, 16, 64}, ctx = {32768, 65536, 130048};
  std::vector<double> hit = {0.0, 0.5, 0.9, 0.95, 1.0};
  int hq = 32, d = 128, ring = 512, tail = 256, reps = 50, warmup = 10, max_lag = 64, chunk = 0;
  int page_size = 16;
  uint64_t seed = 20261129;
  std::string csv, layout = "nhd", amend = "default", page_alloc = "reserved", schedule = "auto";
  std::string kv_pool = "separate";
  int64_t kv_pad = 0;
  bool k3_compare = true, mac = true, pdl = true, pdl_compare = false;
  std::string timing = "launch";  //!< launch | queued (time_replays)
  Tuning tuning;  //!< EngineConfig::tuning of every engine (--kv-evict-first ... --amend-blocks)
};

#if MAC_CUDA_ENABLED
#define CU(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "mac-bench: %s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(mac::cli::kCannotFinish);                                      \
    }                                                                          \
  } while (0)

struct Timing {
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
};

/*! \brief How long the device is kept busy before each replay under --timing queued: far
 *  longer than the host takes to submit the restore, the two events and the graph. */
constexpr double kQueueAheadUs = 200;

/*! \brief Replays the engine's captured graph: warm-up, then `reps` individually timed
 *  replays; `between` (untimed) runs before each replay. With `queued`, each replay's work is
 *  queued behind a busy wait on the device, so the time is the device's execution of the
 *  graph; without, the device is idle when the host submits it, and the time also holds the
 *  host's launch latency (docs/cuda.md, "Timing"). */
template <typename F>
Timing time_replays(Engine& e, cudaStream_t s, int warmup, int reps, F between, bool queued) {
  cudaEvent_t a, b;
  CU(cudaEventCreate(&a));
  CU(cudaEventCreate(&b));
  std::vector<double> ms;
  for (int i = 0; i < warmup + reps; ++i) {
    if (queued) CHECK(busy_wait(kQueueAheadUs, s));
    between();
    CU(cudaEventRecord(a, s));
    CHECK(e.replay(s));
    CU(cudaEventRecord(b, s));
    CU(cudaEventSynchronize(b));
    float t = 0;
    CU(cudaEventElapsedTime(&t, a, b));
    if (i >= warmup) ms.push_back(t);
  }
  CU(cudaEventDestroy(a));
  CU(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.median_ms = ms[ms.size() / 2];
  t.p10_ms = ms[ms.size() / 10];
  t.p90_ms = ms[ms.size() * 9 / 10];
  return t;
}

#endif

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"mac-bench: CUDA-graph replay timings of full-attention and MAC decode steps"};
  using mac::cli::range;
  app.add_option("--hkv", o.hkv, "KV heads (list)")->check(range(1, 256));
  app.add_option("--batch", o.batch, "batch sizes (list)")->check(range(1, 1 << 16));
  app.add_option("--ctx", o.ctx, "contexts, kv_len (list)")->check(range(1, kMaxContext));
  app.add_option("--hit", o.hit, "hit fractions (list)")->check(range(0.0, 1.0));
  app.add_option("--hq", o.hq, "query heads")->check(range(1, 256));
  app.add_option("--head-dim", o.d, "head dimension")->check(mac::cli::head_dim());
  app.add_option("--ring", o.ring, "M")->check(range(1, 1 << 20));
  app.add_option("--tail", o.tail, "r")->check(range(0, kMaxContext));
  app.add_option("--max-lag", o.max_lag, "hit lags uniform in 1..max-lag")
      ->check(range(1, 1 << 20));
  app.add_option("--reps", o.reps, "timed replays (median reported)")->check(range(1, 100000));
  app.add_option("--warmup", o.warmup, "warm-up replays")->check(range(0, 100000));
  app.add_option(
         "--chunk", o.chunk,
         "keys per work item (0: chosen per step on the device; the CSV shows the one used)")
      ->check(range(0, kMaxContext));
  app.add_option("--seed", o.seed, "seed");
  app.add_option("--page-size", o.page_size, "tokens per KV page")->check(range(1, 65536));
  app.add_option("--layout", o.layout,
                 "KV page layout: nhd = [pages, page_size, Hkv, D] (the API default), "
                 "hnd = [pages, Hkv, page_size, D] (through the stride fields)")
      ->check(CLI::IsMember({"nhd", "hnd"}));
  app.add_option("--page-alloc", o.page_alloc,
                 "where each row's pages lie in the pool: reserved = row i owns pages [i·P, "
                 "(i+1)·P) with P the "
                 "pages of the grid's longest context; packed = each row's pages follow the "
                 "previous row's, for "
                 "the point's own context (the pool as dense as the baseline's K/V tensors)")
      ->check(CLI::IsMember({"reserved", "packed"}));
  app.add_option("--kv-pool", o.kv_pool,
                 "where K and V live: separate = two allocations (StepBuffers); joint = one "
                 "allocation, the V "
                 "pool --kv-pad bytes after the K pool; interleaved = each page holds its K block "
                 "then its V "
                 "block (FlashInfer's [pages, 2, page_size, Hkv, D])")
      ->check(CLI::IsMember({"separate", "joint", "interleaved"}));
  app.add_option("--kv-pad", o.kv_pad,
                 "bytes between the K and V pools of --kv-pool joint (a multiple of 16)")
      ->check(range<int64_t>(0, int64_t{1} << 30));
  app.add_option("--amend", o.amend, "amend kernel variant: default, cpasync, bulk")
      ->check(CLI::IsMember({"default", "cpasync", "bulk"}));
  app.add_option("--schedule", o.schedule,
                 "who decides the work items: auto = the amend kernel itself where its tables fit, "
                 "kernel = a "
                 "schedule kernel (EngineConfig::schedule)")
      ->check(CLI::IsMember({"auto", "kernel"}));
  app.add_option("--timing", o.timing,
                 "launch = each replay submitted to an idle device, its time holding the host's "
                 "launch latency; queued = each replay queued behind a busy wait, its time the "
                 "device's execution alone")
      ->check(CLI::IsMember({"launch", "queued"}));
  app.add_option("--csv", o.csv, "CSV output file (default stdout)");
  app.add_option("--k3-compare", o.k3_compare, "also time K3 on a side stream vs fused");
  app.add_option("--mac", o.mac, "also time MAC steps (0: full attention only)");
  app.add_option(
      "--pdl", o.pdl,
      "launch the kernels of a step as programmatic dependents (EngineConfig::dependent_launch)");
  app.add_option("--pdl-compare", o.pdl_compare,
                 "also time full attention and MAC all-miss/all-hit with the other --pdl setting "
                 "(rows with pdl = 0/1)");
  // The engine's tuning fields (EngineConfig::tuning, mac_cuda.hpp), for same-call A/Bs of one
  // binary; Engine::create refuses a value out of range, naming the field.
  app.add_option("--kv-evict-first", o.tuning.kv_evict_first,
                 "L2 evict_first on the amend kernel's K/V copies: -1 auto, 0 never, 1 always")
      ->check(range(-1, 1));
  app.add_option("--parts-discard", o.tuning.parts_discard,
                 "the combine drops the partials' L2 lines: -1 auto, 0 never, 1 always")
      ->check(range(-1, 1));
  app.add_option("--parts-evict-last", o.tuning.parts_evict_last,
                 "partial states stored evict_last: -1 auto, 0 never, 1 always")
      ->check(range(-1, 1));
  app.add_option(
         "--pdl-edges", o.tuning.pdl_edges,
         "kernel boundaries launched as programmatic dependents, a mask 0..15 (-1: from --pdl)")
      ->check(range(-1, 15));
  app.add_option("--amend-blocks-per-sm", o.tuning.amend_blocks_per_sm,
                 "cap of the persistent amend grid in blocks per SM (0: none)")
      ->check(range(0, 32));
  app.add_option("--amend-blocks", o.tuning.amend_blocks,
                 "cap of the persistent amend grid in blocks (0: none)")
      ->check(range(0, 1 << 20));
  if (auto rc = mac::cli::parse(app, argc, argv, "mac-bench")) return *rc;
  if (o.kv_pad % 16 != 0) {
    std::fprintf(stderr, "mac-bench: error: --kv-pad %lld is not a multiple of 16\n",
                 static_cast<long long>(o.kv_pad));
    return mac::cli::kBadInput;
  }
  std::unique_ptr<mac::io::Temporary> csv_tmp;  // --csv is written here, renamed when done
  const int csv_ok = mac::cli::run("mac-bench", [&] {
    if (!o.csv.empty()) {
      mac::io::check_output(o.csv, "--csv");
      csv_tmp = std::make_unique<mac::io::Temporary>(o.csv);
    }
    return mac::cli::kOk;
  });
  if (csv_ok != mac::cli::kOk) return csv_ok;

#if !MAC_CUDA_ENABLED
  std::fprintf(stderr, "mac-bench: built without CUDA; nothing to measure\n");
  return mac::cli::kNoDevice;
#else
  if (!cuda_device_present()) {
    std::fprintf(stderr, "mac-bench: no CUDA device: %s\n", device_description().c_str());
    return mac::cli::kNoDevice;
  }
  std::FILE* out = stdout;
  if (csv_tmp) {
    out = std::fopen(csv_tmp->path().c_str(), "w");
    if (!out) {
      std::fprintf(stderr, "mac-bench: error: --csv %s: cannot create %s\n", o.csv.c_str(),
                   csv_tmp->path().c_str());
      return mac::cli::kCannotFinish;
    }
  }
  double read_gbps = 0;
  CHECK(measure_read_bandwidth(size_t{4} << 30, 20, &read_gbps));
  std::fprintf(stderr, "device: %s\nstreaming read: %.1f GB/s\n", device_description().c_str(),
               read_gbps);
  std::fprintf(out,
               "# device: %s; streaming read %.1f GB/s (4 GiB, median of 20); seed %llu; lags "
               "uniform 1..%d; timing %s\n",
               device_description().c_str(), read_gbps, static_cast<unsigned long long>(o.seed),
               o.max_lag, o.timing.c_str());
  std::fprintf(out,
               "kind,k3,amend,layout,chunk,hq,hkv,d,batch,ctx,hit_frac,hits,heads,median_ms,p10_ms,"
               "p90_ms,bytes,gbps,"
               "pct_read_bw,speedup_vs_full,pdl,schedule\n");

  const int D = o.d, Hq = o.hq, M = o.ring, ps = o.page_size;
  const bool queued = o.timing == "queued";
  std::string layout_name = o.page_alloc == "packed" ? o.layout + "-packed" : o.layout;
  if (ps != 16) layout_name += "-ps" + std::to_string(ps);
  if (o.kv_pool != "separate")
    layout_name += "-" + o.kv_pool + (o.kv_pool == "joint" ? std::to_string(o.kv_pad) : "");
  const int max_b = *std::max_element(o.batch.begin(), o.batch.end());
  const int max_ctx = *std::max_element(o.ctx.begin(), o.ctx.end());
  const int max_hkv = *std::max_element(o.hkv.begin(), o.hkv.end());
  const int pages_per_row = (max_ctx + ps - 1) / ps;
  const size_t kv_elems = static_cast<size_t>(max_b) * pages_per_row * ps * max_hkv * D;
  StepBuffers sb;                  // the step's arrays, sized for the largest grid point
  runner::RingPositionCopy saved;  // the ring position each replay overwrites
  std::fprintf(stderr, "allocating %.1f GB of KV\n", 2.0 * kv_elems * 2 / 1e9);
  StepShape sh;  // the largest point of the grid; each point uses a prefix of every array
  sh.batch = max_b;
  sh.num_q_heads = Hq;
  sh.num_kv_heads = max_hkv;
  sh.head_dim = D;
  sh.num_pages = static_cast<int64_t>(max_b) * pages_per_row;
  sh.page_size = ps;
  sh.max_pages_per_row = pages_per_row;
  sh.ring = M;
  sh.num_slots = max_b;
  sh.diagnostics = true;
  CHECK(sb.allocate(sh));
  // --kv-pool joint / interleaved: both pools in one allocation (the StepBuffers pools unused).
  DeviceBuffer kv_one;
  if (o.kv_pool == "separate") {
    CHECK(fill_random(sb.k_cache.data(), kv_elems, DType::kBF16, o.seed + 1, 0.f, 1.f));
    CHECK(fill_random(sb.v_cache.data(), kv_elems, DType::kBF16, o.seed + 2, 0.f, 1.f));
  } else {
    const size_t pad = o.kv_pool == "joint" ? static_cast<size_t>(o.kv_pad) : 0;
    CHECK(kv_one.allocate(2 * kv_elems * 2 + pad));
    CHECK(fill_random(kv_one.data(), (2 * kv_elems * 2 + pad) / 2, DType::kBF16, o.seed + 1, 0.f,
                      1.f));
  }
  const size_t qn = static_cast<size_t>(max_b) * Hq * D;
  CHECK(fill_random(sb.q_post.data(), qn, DType::kBF16, o.seed + 3, 0.f, 1.f));
  const size_t rq = static_cast<size_t>(max_b) * M * Hq;
  CHECK(fill_random(sb.ring_q_pre.data(), rq * D, DType::kBF16, o.seed + 4, 0.f, 1.f));
  CHECK(fill_random(sb.ring_o.data(), rq * D, DType::kBF16, o.seed + 5, 0.f, 0.1f));
  CHECK(fill_random(sb.ring_lse.data(), rq, DType::kF32, o.seed + 6, 8.f, 1.f));
  CHECK(saved.allocate(max_b, Hq, D));
  // Row i in request slot i, every slot ready.
  std::vector<int32_t> ones(max_b, 1), slots(max_b);
  for (int i = 0; i < max_b; ++i) slots[i] = i;
  CHECK(runner::upload_slots_and_readiness(sb, slots, ones, ones, ones, nullptr));
  CHECK(device_synchronize());
  void* sv = nullptr;
  CHECK(stream_create(&sv));
  cudaStream_t s = static_cast<cudaStream_t>(sv);
  // Every timing of the run: o.warmup, o.reps and the timing mode are the run's.
  auto timed = [&](Engine& e, auto between) {
    return time_replays(e, s, o.warmup, o.reps, between, queued);
  };
  std::mt19937_64 rng(o.seed);

  for (int hkv : o.hkv) {
    for (int N : o.batch) {
      for (int ctx : o.ctx) {
        const int m = ctx - 1;
        std::vector<int32_t> len(N, ctx);
        CHECK(copy_to_device(sb.kv_len.data(), len.data(), N * 4));
        {  // page table of this point: each row's pages one contiguous run (a realistic
           // allocator's common case), reserved for the longest context or packed (--page-alloc)
          const std::vector<int32_t> pt = runner::contiguous_page_table(
              N, pages_per_row, (ctx + ps - 1) / ps, o.page_alloc == "packed");
          CHECK(copy_to_device(sb.page_table.data(), pt.data(),
                               static_cast<size_t>(N) * pages_per_row * 4));
          CHECK(device_synchronize());  // legacy-stream copies, the timed stream is non-blocking
        }
        DecodeParams p = sb.params();
        p.batch = N;
        p.kv_page_stride = static_cast<int64_t>(ps) * hkv * D;  // pool laid out for this Hkv
        if (o.kv_pool == "joint") {
          p.k_cache = kv_one.as<uint16_t>();
          p.v_cache = p.k_cache + kv_elems + o.kv_pad / 2;
        } else if (o.kv_pool == "interleaved") {
          p.k_cache = kv_one.as<uint16_t>();
          p.v_cache = p.k_cache + p.kv_page_stride;  // the page's V block follows its K block
          p.kv_page_stride *= 2;
        }
        if (o.layout == "hnd") {
          p.kv_head_stride = static_cast<int64_t>(ps) * D;
          p.kv_token_stride = D;
        }
        p.softmax_scale = 1.f / std::sqrt(static_cast<float>(D));
        p.tail = o.tail;
        p.sinks = 0;
        p.gen_min = 0;
        p.diag_match_pos = nullptr;  // only the hit flags (checked once per point)
        p.diag_d2 = nullptr;
        p.diag_keys_read = nullptr;

        EngineConfig ec;
        ec.max_batch = N;
        ec.num_q_heads = Hq;
        ec.num_kv_heads = hkv;
        ec.head_dim = D;
        ec.max_context = ctx;
        ec.ring = M;
        ec.kv_chunk = o.chunk;
        ec.amend = o.amend == "cpasync" ? AmendVariant::kCpAsync
                   : o.amend == "bulk"  ? AmendVariant::kBulk
                                        : AmendVariant::kDefault;
        ec.dependent_launch = o.pdl;
        ec.schedule = o.schedule == "kernel" ? ScheduleMode::kKernel : ScheduleMode::kAuto;
        ec.tuning = o.tuning;
        std::unique_ptr<Engine> eng,
            eng_other;  // eng_other: the other --pdl setting (--pdl-compare)
        CHECK(Engine::create(ec, &eng));
        if (o.pdl_compare) {
          EngineConfig eo = ec;
          eo.dependent_launch = !o.pdl;
          CHECK(Engine::create(eo, &eng_other));
        }
        const double kv_bytes_full = static_cast<double>(N) * ctx * hkv * D * 2 * 2;
        const double q_out_bytes = static_cast<double>(N) * Hq * D * 2 * 2;
        // Full attention.
        CHECK(eng->capture(StepKind::kFullAttention, p, sv));
        const Timing tf = timed(*eng, [] {});
        int used_chunk = 0;  // full attention and MAC share it (it depends on kv_len only)
        CHECK(eng->last_chunk(&used_chunk, sv));
        const double full_bytes = kv_bytes_full + q_out_bytes;
        auto row = [&](const char* kind, const char* k3, double f, long hits, const Timing& t,
                       double bytes, const Engine* e = nullptr) {
          if (e == nullptr) e = eng.get();
          const double gbps = bytes / (t.median_ms * 1e-3) / 1e9;
          std::fprintf(out,
                       "%s,%s,%s,%s,%d,%d,%d,%d,%d,%d,%.2f,%ld,%d,%.5f,%.5f,%.5f,%.0f,%.1f,%.1f,%."
                       "2f,%d,%s\n",
                       kind, k3, e->bulk_copies() ? "bulk" : "cpasync", layout_name.c_str(),
                       used_chunk, Hq, hkv, D, N, ctx, f, hits, N * Hq, t.median_ms, t.p10_ms,
                       t.p90_ms, bytes, gbps, 100.0 * gbps / read_gbps, tf.median_ms / t.median_ms,
                       e->config().dependent_launch ? 1 : 0,
                       e->self_scheduled() ? "self" : "kernel");
          std::fflush(out);
        };
        row("full", "-", 0.0, 0, tf, full_bytes);
        if (eng_other) {
          CHECK(eng_other->capture(StepKind::kFullAttention, p, sv));
          row("full", "-", 0.0, 0, timed(*eng_other, [] {}), full_bytes, eng_other.get());
        }

        const int G = Hq / hkv;
        for (double f : o.hit) {
          if (!o.mac) break;
          // Decisions: exactly round((1−f)·N·Hq) misses placed uniformly at random.
          const int heads = N * Hq;
          const int misses = static_cast<int>(std::lround((1.0 - f) * heads));
          std::vector<int> idx(heads);
          for (int i = 0; i < heads; ++i) idx[i] = i;
          std::shuffle(idx.begin(), idx.end(), rng);
          std::vector<int> lag(heads, 0);  // 0 = miss
          std::uniform_int_distribution<int> ul(1, o.max_lag);
          for (int i = misses; i < heads; ++i) lag[idx[i]] = ul(rng);
          CHECK(fill_random(sb.q_pre.data(), static_cast<size_t>(N) * Hq * D, DType::kBF16, rng(),
                            0.f, 1.f, sv));
          long hits = 0;
          double kv_keys = 0;  // keys read per group: union of the heads' spans
          for (int i = 0; i < N; ++i)
            for (int hk = 0; hk < hkv; ++hk) {
              int lo = std::max(0, m + 1 - o.tail);
              for (int g = 0; g < G; ++g) {
                const int h = hk * G + g, L = lag[i * Hq + h];
                if (L == 0) {
                  lo = 0;
                  continue;
                }
                ++hits;
                const int pp = m - L;
                lo = std::min(lo, std::max(0, pp + 1 - o.tail));
                CHECK(copy_device_to_device(
                    sb.q_pre.as<uint16_t>() + (static_cast<size_t>(i) * Hq + h) * D,
                    sb.ring_q_pre.as<uint16_t>() + (runner::ring_entry(i, pp, M, Hq) + h) * D,
                    D * 2, sv));
              }
              kv_keys += (m + 1 - lo);
            }
          // Save the ring position every replay overwrites, restore it before each replay.
          CHECK(saved.save(p, 0, N, m, sv));
          auto restore = [&] { CHECK(saved.restore(p, 0, N, m, sv)); };
          const double mac_bytes = kv_keys * D * 2 * 2 +
                                   static_cast<double>(N) * Hq * std::min(M, m) * D * 2 +
                                   q_out_bytes + static_cast<double>(N) * Hq * D * 2 * 3;
          CHECK(eng->capture(StepKind::kMac, p, sv));
          const Timing tm = timed(*eng, restore);
          // Check the decisions the kernel made match the planned ones (once).
          std::vector<int8_t> hit(heads);
          CHECK(copy_to_host(hit.data(), sb.diag_hit.data(), heads, sv));
          CHECK(stream_synchronize(sv));
          long got = 0;
          for (int i = 0; i < heads; ++i) got += hit[i];
          if (got != hits)
            std::fprintf(stderr, "warning: planned %ld hits, kernel made %ld\n", hits, got);
          row("mac", "fused", f, got, tm, mac_bytes);
          if (eng_other && (f == 0.0 || f == 1.0)) {
            CHECK(eng_other->capture(StepKind::kMac, p, sv));
            row("mac", "fused", f, got, timed(*eng_other, restore), mac_bytes, eng_other.get());
          }
          if (o.k3_compare && (f == 0.0 || f == 1.0) && N == max_b) {
            EngineConfig es = ec;
            es.k3_mode = K3Mode::kSideStream;
            std::unique_ptr<Engine> e2;
            CHECK(Engine::create(es, &e2));
            CHECK(e2->capture(StepKind::kMac, p, sv));
            const Timing t2 = timed(*e2, restore);
            row("mac", "side", f, got, t2, mac_bytes);
          }
          if (f == 1.0) {
            CHECK(capture_match_only(*eng, p, sv));
            const Timing t1 = timed(*eng, [] {});
            row("k1", "-", f, got, t1, static_cast<double>(N) * Hq * std::min(M, m) * D * 2);
          }
        }
        CHECK(stream_synchronize(sv));
      }
    }
  }
  CHECK(stream_destroy(sv));
  if (out != stdout) {
    const bool written = std::ferror(out) == 0 && std::fflush(out) == 0;
    if (std::fclose(out) != 0 || !written) {
      std::fprintf(stderr, "mac-bench: error: --csv %s: writing %s failed; nothing written\n",
                   o.csv.c_str(), csv_tmp->path().c_str());
      return mac::cli::kCannotFinish;
    }
    return mac::cli::run("mac-bench", [&] {
      csv_tmp->commit();
      return mac::cli::kOk;
    });
  }
  return mac::cli::kOk;
#endif
}
