#pragma once
/*! \file study.hpp
 *  \brief mac-study: sweeps of the MAC configuration over trace layers, per-step error
 *         metrics against exact full attention (FP64), chain depth, the per-step drift
 *         bound, and the derived tables (docs/study-format.md has the file schema,
 *         docs/results.md the derivation of the bound).
 *
 *  Speed: exact full attention does not depend on the MAC configuration, so it is
 *  computed once per (trace layer, decode step) by the FP64 oracle (ExactCache) and every
 *  run of the sweep runs the reference stepper alone (SimConfig::oracle = false) and is
 *  compared with the cache. Runs are independent: OpenMP over runs, the stepper's own
 *  OpenMP over heads is kept single-threaded inside (omp_set_max_active_levels(1)).
 *
 *  Resume: one HDF5 file per run, `runs/<hash>.h5`, written under a temporary name and
 *  renamed when complete; the hash covers the whole configuration and a fingerprint of
 *  the trace layer's data, so a rerun skips exactly the runs whose file is present.
 */
#include "mac/io/schema.hpp"
#include "mac/ref/common.hpp"
#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"
#include "mac/tools/simulate.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mac::study {

inline constexpr const char* kRunSchema = io::schema::study::kRunName;
inline constexpr int64_t kRunVersion = io::schema::study::kRunVersion;
inline constexpr const char* kExactSchema = io::schema::study::kExactName;
inline constexpr int64_t kExactVersion = io::schema::study::kExactVersion;

// ---------------------------------------------------------------------------------
// The per-step bound (docs/results.md, "The per-step bound").
//
// Prefix keys P (those the reused entry covers), recomputed keys R (sinks, band, tail).
// Exact: logits x_t = s·q_m·k_t. The reused entry was built along its chain: key t of
// the prefix was weighted with the query q_c(t) of the chain member whose band covered
// it, x̃_t = s·q_c(t)·k_t. Drift δ_t = x_t − x̃_t, a = min δ, b = max δ over P,
// Δ = max(|a|, |b|), W = b − a. With ρ the exact mass of R under q_m and ρ̃ the MAC's,
//   o_mac − o_full = (1−ρ)(õ_P − o_P) + (ρ − ρ̃)(õ_P − o_R)
//   ‖õ_P − o_P‖ ≤ tanh(W/4)·diam(V_P),   |ρ̃ − ρ| ≤ max_{c∈{a,b}} |σ(logit ρ + c) − ρ|,
// and diam ≤ 2·Vmax, Vmax = max_{t≤m} ‖v_t‖:
//   ‖o_mac − o_full‖ ≤ B = 2·Vmax·[(1−ρ)·tanh(W/4) + max_c |σ(logit ρ + c) − ρ|].
// The paper's heuristic form is B_paper = Δ·(1−ρ)·E‖v‖ (E‖v‖: mean ‖v_t‖ over P).
// ---------------------------------------------------------------------------------

/*! \brief Inputs of the bound for one hit. */
struct BoundInputs {
  double delta_min = 0, delta_max = 0;  //!< a, b: extremes of the drift δ_t over the prefix
  double rho = 0;                       //!< exact in-band (recomputed) mass, in [0, 1]
  double v_max = 0;                     //!< max ‖v_t‖ over the keys of the step
  double v_mean_prefix = 0;             //!< mean ‖v_t‖ over the prefix keys
};

/*! \brief `|ρ̃ − ρ|` bound: max over c ∈ {a, b} of |σ(logit ρ + c) − ρ| (0 when ρ ∈ {0, 1}). */
double mass_shift_bound(double rho, double a, double b);

/*! \brief The rigorous bound B on ‖o_mac − o_full‖₂ (exact arithmetic). */
double drift_bound(const BoundInputs& in);

/*! \brief The paper's form Δ·(1−ρ)·E‖v‖, Δ = max(|a|, |b|). */
double paper_bound(const BoundInputs& in);

// ---------------------------------------------------------------------------------
// Chains: which query weighted which prefix keys.
// ---------------------------------------------------------------------------------

/*! \brief One segment of a chain: keys [begin, end) weighted with q_post(qpos). */
struct ChainNode {
  int64_t begin = 0, end = 0, qpos = 0;
  int64_t parent = -1;  //!< index of the node of the reused entry, −1 at a miss/prefill
  int64_t depth = 0;    //!< 0 at a miss/prefill, parent's depth + 1 on a hit
};

/*! \brief Mirrors the ring of one head: per slot the node of the entry it holds.
 *  Independent bookkeeping of docs/semantics.md §3 (a miss writes depth 0, a hit on depth k writes
 *  k + 1), checked against the stepper's own depth on every step. */
class ChainTracker {
 public:
  ChainTracker(int64_t ring, int64_t tail, int64_t sinks);
  /*! \brief Entry of prompt position p (depth 0). */
  void prefill(int64_t p);
  /*! \brief Decode step m: a hit on p (p ≥ 0) or a miss (p = −1). Returns the new node. */
  const ChainNode& step(int64_t m, int64_t hit_pos);
  /*! \brief Node of the entry of position p, or nullptr if the ring does not hold it. */
  const ChainNode* entry(int64_t p) const;
  /*! \brief The segments covering the entry of p, newest first (walks the parents). */
  std::vector<ChainNode> segments(int64_t p) const;
  const std::vector<ChainNode>& nodes() const { return nodes_; }

 private:
  int64_t ring_, tail_, sinks_;
  std::vector<int64_t> slot_pos_, slot_node_;
  std::vector<ChainNode> nodes_;
};

/*! \brief Drift extremes (a, b) of the prefix of a hit at m: δ_t = s·(q_m − q_c(t))·k_t
 *  over the given segments on KV head hk, with post-RoPE queries of query head h. */
std::pair<double, double> drift_range(const ref::LayerData& layer, int64_t h, double scale,
                                      int64_t m, const std::vector<ChainNode>& segments);

// ---------------------------------------------------------------------------------
// Configuration.
// ---------------------------------------------------------------------------------

/*! \brief One run of a sweep: one trace layer under one MAC configuration. */
struct RunSpec {
  std::string trace;        //!< file path, or "(embedded synthetic)"
  std::string source;       //!< the trace's source attribute
  std::string fingerprint;  //!< hash of the layer's data over the positions used
  int64_t layer = 0;
  MacParams params;
  Variant variant = Variant::kSplit;
  StateStorage storage = StateStorage::kProduction;
  mac::Precision precision = mac::Precision::kFp32;
  int64_t prefill = 0, steps = 0;
  bool bound = true;  //!< evaluate the drift bound on every hit

  /*! \brief Canonical "key=value;..." string of everything that determines the result. */
  std::string key() const;
  /*! \brief 16 hex digits of a 64-bit FNV-1a hash of key(): the run's file name. */
  std::string hash() const;
};

/*! \brief A sweep: the cross product of the lists, over the given layers of each trace. */
struct SweepConfig {
  std::vector<std::string> traces;  //!< empty: the embedded synthetic trace
  std::vector<int64_t> layers;      //!< empty: all layers
  std::vector<double> taus{0.45};
  /*! A per-layer τ table (semantics §3.3): a layer named here runs at its own τ instead of
   *  every τ of `taus`; the other layers sweep `taus`. */
  std::map<int64_t, double> layer_tau;
  std::vector<int64_t> rings{512}, tails{256}, sinks{0};
  std::vector<std::string> variants{"split"}, storages{"production"}, precisions{"fp32"};
  int64_t gen_min = 2048;
  int64_t depth_cap = -1;  //!< K of every run (semantics §3.3); −1: none
  int64_t refresh = 0;     //!< N of every run (semantics §3.3); 0: none
  int64_t prefill = -1;    //!< −1: tokens / 2
  int64_t steps = 0;       //!< 0: to the end of the layer
  bool bound = true;
  int threads = 0;  //!< 0: OpenMP default
  bool progress = true;
  std::string out_dir;
  // Embedded synthetic trace (no --trace).
  int64_t synth_tokens = 8192, synth_layers = 2;
  uint64_t synth_seed = 20261129;
  // Job arrays (shard.hpp, docs/study-format.md "Shards").
  int64_t shard_index = 0, shard_count = 1;  //!< compute only shard k of N (no tables if N > 1)
  int64_t merge_shards = 0;  //!< > 0: compute nothing; check all N shards' runs, write tables
};

/*! \brief Parses `--layer-tau` entries "L=τ" (a whole layer index, τ in [0, 1)); InputError
 *  names an entry that is malformed, out of range or a second entry for one layer. */
std::map<int64_t, double> parse_layer_tau(const std::vector<std::string>& entries);

/*! \brief Per-step, per-head metrics of one run, row-major [S, Hq]. NaN where undefined
 *  (the bound quantities on misses). */
struct RunResult {
  RunSpec spec;
  int64_t steps = 0, heads = 0;
  std::vector<int64_t> position;                         //!< [S]
  std::vector<int8_t> hit;                               //!< [S, Hq]
  std::vector<int64_t> lag, keys_read, depth;            //!< lag m − p (−1 on a miss)
  std::vector<double> rel_l2, max_abs, lse_err, abs_l2;  //!< vs full attention FP64
  std::vector<double> delta_min, delta_max, rho, rho_mac, bound, bound_paper;
  double seconds = 0;            //!< wall time of the run
  double cpu_seconds = 0;        //!< CPU time of the run's thread (the machine may be shared)
  double bound_cpu_seconds = 0;  //!< of which the drift bound

  void resize(int64_t S, int64_t hq);
  double hit_rate() const;
  double kv_fraction() const;  //!< Σ keys read / Σ (m + 1)
};

/*! \brief Exact full attention FP64 of every decode step of one layer, [S, Hq, D] and
 *  [S, Hq], plus per KV head the running max of ‖v_t‖ and prefix sums of ‖v_t‖. */
struct ExactCache {
  int64_t prefill = 0, steps = 0, heads = 0, head_dim = 0, kv_heads = 0;
  std::vector<double> out, lse;
  std::vector<double> v_norm_max;  //!< [T, Hkv]: max_{t' ≤ t} ‖v_t'‖
  std::vector<double> v_norm_sum;  //!< [T + 1, Hkv]: Σ_{t' < t} ‖v_t'‖
  const double* out_at(int64_t step, int64_t h) const {
    return out.data() + (step * heads + h) * head_dim;
  }

  /*! \brief Computes the cache with the oracle (OpenMP inside), reporting progress. */
  static ExactCache compute(const ref::LayerData& layer, double scale, int64_t prefill,
                            int64_t steps, bool progress, const std::string& label);
  void fill_v_norms(const ref::LayerData& layer);
};

/*! \brief Runs one configuration against the cache; `on_steps(k)` is called every few steps
 *  with the number of steps done since the last call (for progress). */
RunResult execute_run(const ref::LayerData& layer, double scale, const RunSpec& spec,
                      const ExactCache& exact, const std::function<void(int64_t)>& on_steps = {});

/*! \brief Fingerprint of a layer's data over positions [0, tokens): FNV-1a of the bytes. */
std::string layer_fingerprint(const ref::LayerData& layer, int64_t tokens);

// --- files -------------------------------------------------------------------------

std::string run_path(const std::string& out_dir, const RunSpec& spec);
void write_run(const std::string& path, const RunResult& r);
/*! \brief Reads a run file; throws InputError if it is not a complete run file. */
RunResult read_run(const std::string& path);
/*! \brief True iff `path` is a complete run file whose key equals spec.key(). */
bool run_complete(const std::string& path, const RunSpec& spec);

void write_exact(const std::string& path, const ExactCache& c);
bool read_exact(const std::string& path, int64_t prefill, int64_t steps, ExactCache& c);

// --- the sweep -------------------------------------------------------------------------

/*! \brief What a sweep did. */
struct SweepReport {
  std::vector<std::string> computed, skipped;  //!< run hashes
  double seconds = 0, cpu_seconds = 0, exact_seconds = 0, exact_cpu_seconds = 0;
  double runs_cpu_seconds = 0;  //!< Σ per-run thread CPU time of the computed runs
  int threads = 1;
  int64_t planned = 0;   //!< runs in the whole sweep
  int64_t in_shard = 0;  //!< of which in this shard (all of them without --shard)
};

/*! \brief Runs the sweep into cfg.out_dir (runs/, exact/, tables), skipping finished runs,
 *  then derives the tables (CSV and study.h5) from every complete run file in runs/
 *  (so sweeps run one after another into one directory accumulate). With shard_count > 1
 *  only that shard's runs are computed and no tables are written; with merge_shards = N
 *  nothing is computed: every run of the sweep must be complete (else an InputError names
 *  the shards k/N whose runs are missing, and no table is written), then the tables. */
SweepReport run_sweep(const SweepConfig& cfg);

/*! \brief Writes the derived tables from the given runs (CSV files and study.h5). */
void write_tables(const std::string& out_dir, const std::vector<RunResult>& runs);

}  // namespace mac::study
