// mac-study: numeric-error studies of chained reuse (issue 5). Sweeps τ, r, M, F, variant,
// storage and precision over the layers of trace files (default: the embedded synthetic
// trace), measures every decode step against exact full attention (FP64), and writes one
// HDF5 file per run plus the derived tables (CSV and study.h5). docs/study-format.md has the
// schema, docs/results.md the commands and the plots. Exit status and messages: docs/cli.md.
#include "mac/cli/cli.hpp"
#include "mac/study/shard.hpp"
#include "mac/study/study.hpp"

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using mac::kMaxTokens;
  using mac::cli::range;
  CLI::App app{
      "mac-study: sweep the MAC configuration over trace layers and measure every decode step "
      "against exact\n"
      "full attention (FP64): error, hit/miss, lag, keys read, chain depth and the per-step drift "
      "bound.\n"
      "Finished runs (one file each under OUT/runs/) are skipped when a sweep is rerun."};
  mac::study::SweepConfig cfg;
  std::string config;
  app.add_option("--config", config,
                 "read options from a key = value file (flag names without --, lists "
                 "comma-separated; the command line wins; unknown keys are errors)");
  app.add_option("--out", cfg.out_dir, "output directory (runs/, exact/, *.csv, study.h5)")
      ->required();
  app.add_option("--trace", cfg.traces,
                 "trace file(s) (HDF5 mac-trace v1); default: the embedded synthetic trace")
      ->check(CLI::ExistingFile)
      ->delimiter(',');
  app.add_option("--layers", cfg.layers, "layer indices (default: all)")
      ->delimiter(',')
      ->check(range<int64_t>(0, mac::kMaxLayers - 1));
  // τ in [0, 1): MacParams::validate says why.
  app.add_option("--tau", cfg.taus, "match margins tau")
      ->delimiter(',')
      ->check(mac::cli::range_below(0.0, 1.0))
      ->capture_default_str();
  std::vector<std::string> layer_tau;
  app.add_option("--layer-tau", layer_tau,
                 "per-layer tau table L=tau,... (semantics §3.3): those layers run at their own "
                 "tau instead of the --tau list")
      ->delimiter(',');
  app.add_option("--ring", cfg.rings, "ring capacities M")
      ->delimiter(',')
      ->check(range<int64_t>(1, kMaxTokens))
      ->capture_default_str();
  app.add_option("--tail", cfg.tails, "tails r")
      ->delimiter(',')
      ->check(range<int64_t>(0, kMaxTokens))
      ->capture_default_str();
  app.add_option("--sinks", cfg.sinks, "front sinks F")
      ->delimiter(',')
      ->check(range<int64_t>(0, kMaxTokens))
      ->capture_default_str();
  app.add_option("--variant", cfg.variants, "split | downdate")
      ->delimiter(',')
      ->check(CLI::IsMember({"split", "downdate"}))
      ->capture_default_str();
  app.add_option("--storage", cfg.storages, "production (BF16 o, FP32 L) | full")
      ->delimiter(',')
      ->check(CLI::IsMember({"production", "full"}))
      ->capture_default_str();
  app.add_option("--precision", cfg.precisions, "stepper arithmetic: fp32 | fp64")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "fp64"}))
      ->capture_default_str();
  app.add_option("--gen-min", cfg.gen_min, "minimum position for reuse")
      ->check(range<int64_t>(0, kMaxTokens))
      ->capture_default_str();
  app.add_option("--depth-cap", cfg.depth_cap,
                 "K: a hit on an entry of chain depth >= K misses (semantics §3.3); -1: none")
      ->check(range<int64_t>(-1, kMaxTokens))
      ->capture_default_str();
  app.add_option("--refresh", cfg.refresh,
                 "N: head h misses when (m + h*N/Hq) mod N = 0 (semantics §3.3); 0: none")
      ->check(range<int64_t>(0, kMaxTokens))
      ->capture_default_str();
  // Unset (−1 inside) means tokens / 2; a value given must be a real prompt length.
  app.add_option("--prefill", cfg.prefill, "P: positions < P are prompt (default: tokens/2)")
      ->check(range<int64_t>(1, kMaxTokens));
  app.add_option("--steps", cfg.steps, "decode steps (default, 0: to the end of the layer)")
      ->check(range<int64_t>(0, kMaxTokens));
  bool no_bound = false, quiet = false;
  app.add_flag("--no-bound", no_bound,
               "skip the per-step drift bound (one pass over the prefix keys per hit)");
  app.add_option("--threads", cfg.threads, "OpenMP threads (default, 0: all)")
      ->check(range(0, mac::kMaxThreads));
  app.add_option("--synth-tokens", cfg.synth_tokens, "tokens of the embedded synthetic trace")
      ->check(range<int64_t>(1, kMaxTokens))
      ->capture_default_str();
  app.add_option("--synth-layers", cfg.synth_layers, "layers of the embedded synthetic trace")
      ->check(range<int64_t>(1, mac::kMaxLayers))
      ->capture_default_str();
  app.add_option("--seed", cfg.synth_seed, "seed of the embedded synthetic trace")
      ->capture_default_str();
  app.add_flag("--quiet", quiet, "no progress lines");
  // Job arrays (docs/study-format.md, "Shards"; scripts/slurm/study.sbatch).
  std::string shard, merge;
  app.add_option("--shard", shard, "compute only shard k/N (0-based) of the runs, dealt by cost");
  app.add_option("--merge", merge, "check that N shards left every run in --out; write the tables");
  if (auto rc = mac::cli::parse(app, argc, argv, "mac-study", "--config")) return *rc;
  cfg.bound = !no_bound;
  cfg.progress = !quiet;

  return mac::cli::run("mac-study", [&] {
    cfg.layer_tau = mac::study::parse_layer_tau(layer_tau);
    if (!shard.empty()) {
      const auto s = mac::study::parse_shard(shard);
      cfg.shard_index = s.index;
      cfg.shard_count = s.count;
    }
    if (!merge.empty()) cfg.merge_shards = mac::study::parse_shard_count(merge);
    const auto rep = mac::study::run_sweep(cfg);
    std::printf(
        "mac-study: %zu runs computed, %zu already done (skipped); %.1f s wall, %.1f s CPU (all "
        "threads), "
        "%d threads; exact full attention %.1f s wall, %.1f s CPU\n",
        rep.computed.size(), rep.skipped.size(), rep.seconds, rep.cpu_seconds, rep.threads,
        rep.exact_seconds, rep.exact_cpu_seconds);
    for (const auto& h : rep.computed) std::printf("  computed %s\n", h.c_str());
    if (cfg.shard_count > 1) {
      std::printf(
          "shard %lld/%lld: %lld of the sweep's %lld runs; tables: none (mac-study --merge "
          "%lld with the same options writes them)\n",
          static_cast<long long>(cfg.shard_index), static_cast<long long>(cfg.shard_count),
          static_cast<long long>(rep.in_shard), static_cast<long long>(rep.planned),
          static_cast<long long>(cfg.shard_count));
      return mac::cli::kOk;
    }
    if (cfg.merge_shards > 0)
      std::printf("merge: all %lld runs of the sweep's %lld shards are complete\n",
                  static_cast<long long>(rep.planned), static_cast<long long>(cfg.merge_shards));
    std::printf(
        "tables: %s/{runs,error_vs_depth,error_vs_lag,hit_rate,bound_hist,pairs}.csv and "
        "study.h5\n",
        cfg.out_dir.c_str());
    return mac::cli::kOk;
  });
}
