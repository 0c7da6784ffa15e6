#pragma once
/*! \file schema.hpp
 *  \brief Every HDF5 file kind of the tree named once: its schema string and version, and
 *         the attribute and dataset names its reader and writer share. The layouts are
 *         documented in docs/file-formats.md (trace, run dump), docs/study-format.md
 *         (mac-study) and docs/verification.md (mac-verify).
 */
#include <cstdint>

namespace mac::io::schema {

// Attributes every file kind carries at its root.
inline constexpr const char* kSchema = "schema";    //!< string: the file kind
inline constexpr const char* kVersion = "version";  //!< int64: its layout version
/*! \brief int64 1, written last: a reader treats a file without it as incomplete. */
inline constexpr const char* kComplete = "complete";
inline constexpr const char* kGitCommit = "git_commit";  //!< string: commit that wrote it

/*! \brief The trace file (docs/file-formats.md): root attributes and
 * /layers/<i>/{q_pre,q_post,k,v}. */
namespace trace {
inline constexpr const char* kName = "mac-trace";
inline constexpr int64_t kVersion = 1;
inline constexpr const char* kHeadDim = "head_dim";            //!< int64, D ∈ {64, 128, 256}
inline constexpr const char* kNumQHeads = "num_q_heads";       //!< int64, Hq
inline constexpr const char* kNumKvHeads = "num_kv_heads";     //!< int64, Hkv (divides Hq)
inline constexpr const char* kNumLayers = "num_layers";        //!< int64, groups under /layers
inline constexpr const char* kSoftmaxScale = "softmax_scale";  //!< float64, s
inline constexpr const char* kRopeTheta = "rope_theta";        //!< float64, RoPE base θ
inline constexpr const char* kRopeStyle = "rope_style";        //!< string, "neox" | "gptj"
inline constexpr const char* kSource = "source";  //!< string, where the trace came from
/*! \brief int64 attribute of a layer's group (optional): the model layer it was recorded
 *  from, written by tools/record-trace/record_trace.py; mac-sim prints it. */
inline constexpr const char* kModelLayer = "model_layer";
inline constexpr const char* kLayers = "/layers";  //!< group of one group per layer
inline constexpr const char* kQPre = "q_pre";      //!< [T, Hq, D] float32, pre-RoPE
inline constexpr const char* kQPost = "q_post";    //!< [T, Hq, D] float32, post-RoPE
inline constexpr const char* kK = "k";             //!< [T, Hkv, D] float32, post-RoPE
inline constexpr const char* kV = "v";             //!< [T, Hkv, D] float32
}  // namespace trace

/*! \brief The run dump of mac-sim (docs/file-formats.md): the configuration as root attributes, one
 *  dataset per recorded quantity over [S] or [S, Hq] or [S, Hq, D]. */
namespace run {
inline constexpr const char* kName = "mac-run";
inline constexpr int64_t kVersion = 1;
// MacParams (float64 τ, int64 the others).
inline constexpr const char* kTau = "tau";
inline constexpr const char* kRing = "ring";
inline constexpr const char* kTail = "tail";
inline constexpr const char* kSinks = "sinks";
inline constexpr const char* kGenMin = "gen_min";
// Policies (semantics §3.3): written only when set, so a run without them is unchanged.
inline constexpr const char* kDepthCap = "depth_cap";
inline constexpr const char* kRefresh = "refresh";
// The rest of StepperConfig: enum names as strings (to_string / parse_*), P as int64.
inline constexpr const char* kVariant = "variant";
inline constexpr const char* kPrecision = "precision";
inline constexpr const char* kPrefillMode = "prefill_mode";
inline constexpr const char* kStorage = "storage";
inline constexpr const char* kPrefill = "prefill";
// What was run: int64 layer index, string source attribute of its trace.
inline constexpr const char* kLayer = "layer";
inline constexpr const char* kTraceSource = "trace_source";
inline constexpr const char* kPosition = "/position";            //!< [S] int64
inline constexpr const char* kHit = "/hit";                      //!< [S, Hq] int8
inline constexpr const char* kMatchPos = "/match_pos";           //!< [S, Hq] int64, −1 on miss
inline constexpr const char* kD2 = "/d2";                        //!< [S, Hq] float64
inline constexpr const char* kOut = "/out";                      //!< [S, Hq, D] float64
inline constexpr const char* kLse = "/lse";                      //!< [S, Hq] float64, natural log
inline constexpr const char* kExactOut = "/exact_out";           //!< [S, Hq, D] float64
inline constexpr const char* kExactLse = "/exact_lse";           //!< [S, Hq] float64, natural log
inline constexpr const char* kKvTokensRead = "/kv_tokens_read";  //!< [S, Hq] int64
}  // namespace run

/*! \brief mac-study's files (docs/study-format.md): one per run, the cached exact
 *  attention of a layer, and the tables. */
namespace study {
inline constexpr const char* kRunName = "mac-study-run";
inline constexpr int64_t kRunVersion = 1;
inline constexpr const char* kExactName = "mac-study-exact";
inline constexpr int64_t kExactVersion = 1;
inline constexpr const char* kTablesName = "mac-study";
inline constexpr int64_t kTablesVersion = 1;
// Run file: the RunSpec (its key, hash and fields) and the run's totals as root attributes.
inline constexpr const char* kKey = "key";                   //!< string: RunSpec::key()
inline constexpr const char* kHash = "hash";                 //!< string: RunSpec::hash()
inline constexpr const char* kTrace = "trace";               //!< string: trace path as given
inline constexpr const char* kTraceSource = "trace_source";  //!< string: the trace's source
inline constexpr const char* kFingerprint = "fingerprint";   //!< string: the layer's data
inline constexpr const char* kLayer = "layer";               //!< int64
inline constexpr const char* kVariant = "variant";           //!< string: split | downdate
inline constexpr const char* kStorage = "storage";           //!< string: state storage
inline constexpr const char* kPrecision = "precision";       //!< string: fp32 | fp64
inline constexpr const char* kPrefill = "prefill";           //!< int64, P
inline constexpr const char* kSteps = "steps";               //!< int64, S (decode steps run)
inline constexpr const char* kBoundFlag = "bound";           //!< int64 0/1: drift bound computed
inline constexpr const char* kSeconds = "seconds";           //!< float64, wall time
inline constexpr const char* kCpuSeconds = "cpu_seconds";    //!< float64, the run's CPU time
inline constexpr const char* kBoundCpuSeconds = "bound_cpu_seconds";  //!< float64, of which bound
inline constexpr const char* kHitRate = "hit_rate";                   //!< float64
inline constexpr const char* kKvFraction = "kv_fraction";             //!< float64
// MacParams use the run dump's names (run::kTau, run::kRing, ...).
// Run file datasets: [S] int64 position, then [S, Hq] one per recorded quantity.
inline constexpr const char* kPosition = "position";   //!< [S] int64, m
inline constexpr const char* kHit = "hit";             //!< [S, Hq] int8
inline constexpr const char* kLag = "lag";             //!< [S, Hq] int64, m − p (−1 on a miss)
inline constexpr const char* kKeysRead = "keys_read";  //!< [S, Hq] int64
inline constexpr const char* kDepth = "depth";         //!< [S, Hq] int64, chain depth
inline constexpr const char* kRelL2 = "rel_l2";        //!< [S, Hq] float64, vs full attention
inline constexpr const char* kMaxAbs = "max_abs";      //!< [S, Hq] float64
inline constexpr const char* kLseErr = "lse_err";      //!< [S, Hq] float64, natural log
inline constexpr const char* kAbsL2 = "abs_l2";        //!< [S, Hq] float64
inline constexpr const char* kDeltaMin = "delta_min";  //!< [S, Hq] float64, logit drift
inline constexpr const char* kDeltaMax = "delta_max";  //!< [S, Hq] float64
inline constexpr const char* kRho = "rho";             //!< [S, Hq] float64, band mass
inline constexpr const char* kRhoMac = "rho_mac";      //!< [S, Hq] float64
inline constexpr const char* kBound = "bound";         //!< [S, Hq] float64, derived bound
inline constexpr const char* kBoundPaper = "bound_paper";  //!< [S, Hq] float64
// Exact cache: prefill and steps as attributes (kPrefill, kSteps), and two datasets.
inline constexpr const char* kExactOut = "exact_out";  //!< [S, Hq, D] float64
inline constexpr const char* kExactLse = "exact_lse";  //!< [S, Hq] float64, natural log
// Tables file (study.h5): the run count at the root, one group per table.
inline constexpr const char* kRuns = "runs";        //!< int64 root attribute
inline constexpr const char* kRows = "rows";        //!< int64 attribute of a table's group
inline constexpr const char* kColumns = "columns";  //!< string: the column names, comma-separated

/*! \brief The tables of study.h5 and their CSV twins <name>.csv: one group per table, one
 *  dataset per column (float64 where every cell is a number, strings otherwise). Every table
 *  begins with kConfigColumns; the rest are each table's own, in order. */
namespace tables {
inline constexpr const char* kRuns = "runs";                    //!< one row per run
inline constexpr const char* kErrorVsDepth = "error_vs_depth";  //!< per run and depth bin
inline constexpr const char* kErrorVsLag = "error_vs_lag";      //!< per run and lag bin
inline constexpr const char* kHitRate = "hit_rate";             //!< per run and head
inline constexpr const char* kBoundHist = "bound_hist";         //!< per run, form and bin
inline constexpr const char* kPairs = "pairs";                  //!< runs differing in one field
inline constexpr const char* kAll[] = {kRuns,    kErrorVsDepth, kErrorVsLag,
                                       kHitRate, kBoundHist,    kPairs};  //!< in study.h5's order
inline constexpr const char* kConfigColumns[] = {
    "run", "trace", "layer", "tau", "ring", "tail", "sinks", "variant", "storage", "precision"};
inline constexpr const char* kRunsColumns[] = {
    "trace_source",     "gen_min",         "prefill",         "steps",           "heads",
    "hit_rate",         "kv_fraction",     "rel_l2_p50",      "rel_l2_p90",      "rel_l2_p99",
    "rel_l2_max",       "hit_rel_l2_p50",  "hit_rel_l2_p99",  "hit_rel_l2_max",  "max_abs",
    "lse_err_max",      "depth_max",       "depth_mean_hits", "lag_mean_hits",   "bound_checked",
    "bound_holds",      "bound_ratio_p50", "bound_ratio_p99", "bound_ratio_max", "paper_holds",
    "paper_ratio_p50",  "paper_ratio_p99", "paper_ratio_max", "seconds",         "cpu_seconds",
    "bound_cpu_seconds"};
inline constexpr const char* kErrorVsDepthColumns[] = {"depth_lo",   "depth_hi",    "count",
                                                       "rel_l2_p50", "rel_l2_p90",  "rel_l2_p99",
                                                       "rel_l2_max", "bound_holds", "paper_holds"};
inline constexpr const char* kErrorVsLagColumns[] = {
    "lag_lo", "lag_hi", "count", "rel_l2_p50", "rel_l2_p90", "rel_l2_p99", "rel_l2_max"};
inline constexpr const char* kHitRateColumns[] = {"head", "hit_rate", "kv_fraction", "rel_l2_p50",
                                                  "rel_l2_p99"};
inline constexpr const char* kBoundHistColumns[] = {"form", "log10_lo", "log10_hi", "count"};
inline constexpr const char* kPairsColumns[] = {"compare",
                                                "a",
                                                "b",
                                                "a_rel_l2_p50",
                                                "a_rel_l2_p99",
                                                "a_rel_l2_max",
                                                "b_rel_l2_p50",
                                                "b_rel_l2_p99",
                                                "b_rel_l2_max",
                                                "diff_p50",
                                                "diff_p99",
                                                "diff_max",
                                                "same_decisions",
                                                "b_worse"};
}  // namespace tables
}  // namespace study

/*! \brief mac-verify's certification report and its per-case replay file
 *  (docs/verification.md). */
namespace verify {
inline constexpr const char* kReportName = "mac-verify";
inline constexpr const char* kCaseName = "mac-verify-case";
inline constexpr int64_t kVersion = 1;  //!< of both
// The file protocol (mac-verify --export / --grade): the export's manifest, one inputs file
// per case, and the outputs file the user's program writes per case.
inline constexpr const char* kExportName = "mac-verify-export";
inline constexpr const char* kInputsName = "mac-verify-inputs";
inline constexpr const char* kOutputsName = "mac-verify-outputs";
inline constexpr int64_t kFilesVersion = 1;  //!< of all three
}  // namespace verify

}  // namespace mac::io::schema
