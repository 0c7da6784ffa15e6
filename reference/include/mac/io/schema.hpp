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
// Policies (semantics §3.3) and the gate (§3.5), int64: each written only where it differs
// from its MacParams default and read as that default where absent, so a run without them is
// unchanged and a dump written before they existed reads as a run without them.
inline constexpr const char* kDepthCap = "depth_cap";
inline constexpr const char* kRefresh = "refresh";
inline constexpr const char* kGateWindow = "gate_window";
inline constexpr const char* kGateProbe = "gate_probe";
inline constexpr const char* kGateMargin = "gate_margin";
inline constexpr const char* kGateMinHit = "gate_min_hit";
inline constexpr const char* kGateFixedBytes = "gate_fixed_bytes";
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

// Names more than one of these files use.
inline constexpr const char* kNonce = "nonce";  //!< string, 0x + 16 hex digits (with_nonce)
inline constexpr const char* kMatrixFnv1a = "matrix_fnv1a";  //!< string, FNV-1a 64 of the matrix
inline constexpr const char* kCommand = "command";           //!< string, the command line
inline constexpr const char* kCaseId = "case_id";            //!< int64 (attribute or dataset)
inline constexpr const char* kCaseLine = "case_line";        //!< string, the case's matrix line
inline constexpr const char* kDevice = "device";             //!< string
inline constexpr const char* kImpl = "impl";                 //!< string, implementation name
inline constexpr const char* kStatus = "status";    //!< report: int8 [cases]; case file: string
inline constexpr const char* kMessage = "message";  //!< string: first failure or error

/*! \brief The report's root attributes (schema mac-verify) beside kGitCommit. */
namespace report {
inline constexpr const char* kDeclaredCommit = "declared_commit";  //!< string, not verified
inline constexpr const char* kMode = "mode";                       //!< string, cpu|gpu|model|...
inline constexpr const char* kImplSha256 = "impl_sha256";          //!< string, hex
inline constexpr const char* kImplDeclared = "impl_declared";      //!< string, name and version
inline constexpr const char* kImplCaps = "impl_caps";              //!< string, caps as text
inline constexpr const char* kAbiVersion = "abi_version";          //!< int64, 0: built in
inline constexpr const char* kNonceSource = "nonce_source";  //!< string, drawn|given|replay|...
inline constexpr const char* kTrials = "trials";             //!< int64, runs of each case (≥ 1)
inline constexpr const char* kGrading = "grading";    //!< string, what outputs were graded against
inline constexpr const char* kCreated = "created";    //!< string, UTC start
inline constexpr const char* kFinished = "finished";  //!< string, UTC end
inline constexpr const char* kEnvironment = "environment";  //!< string, machine and build
inline constexpr const char* kSubset = "subset";            //!< string
inline constexpr const char* kShard = "shard";              //!< string, k/N or merged:...
inline constexpr const char* kWallS = "wall_s";             //!< float64, seconds
inline constexpr const char* kThreads = "threads";          //!< int64, OpenMP threads
// The run's limits (float64); /cases holds the same names per case, conditioning applied.
inline constexpr const char* kTolOutRelL2 = "tol_out_rel_l2";
inline constexpr const char* kTolLse = "tol_lse";
inline constexpr const char* kTolEntryRelL2 = "tol_entry_rel_l2";
inline constexpr const char* kTolEntryLse = "tol_entry_lse";
// Counts (int64) and the verdict (string PASS|FAIL|INCOMPLETE).
inline constexpr const char* kNumCases = "cases";
inline constexpr const char* kPassed = "passed";
inline constexpr const char* kFailed = "failed";
inline constexpr const char* kSkipped = "skipped";
inline constexpr const char* kErrors = "errors";
inline constexpr const char* kNotApplicable = "not_applicable";
inline constexpr const char* kResult = "result";
}  // namespace report

/*! \brief The report's group of one row per case: [cases] datasets kCaseId... */
namespace cases {
inline constexpr const char* kGroup = "cases";
inline constexpr const char* kId = "id";          //!< int64
inline constexpr const char* kFamily = "family";  //!< string
inline constexpr const char* kLine = "line";      //!< string, the matrix line
inline constexpr const char* kReplay = "replay";  //!< string, command replaying a failure ("")
// Per-case counters (int64) beside the per-head ones below: kHeadSteps, kTrials.
inline constexpr const char* kHeadSteps = "head_steps";
inline constexpr const char* kTrials = "trials";  //!< trials run (stops at the first failing one)
}  // namespace cases

/*! \brief The report's group of one row per (case, request, query head). */
namespace heads {
inline constexpr const char* kGroup = "heads";
inline constexpr const char* kRequest = "request";  //!< int64
inline constexpr const char* kHead = "head";        //!< int64, query head
inline constexpr const char* kFailed = "failed";    //!< int8 0/1
inline constexpr const char* kSteps = "steps";      //!< int64, steps checked
inline constexpr const char* kPlanted = "planted";  //!< int64, steps with a planted match
inline constexpr const char* kMinAbsMargin = "min_abs_margin";  //!< float64, min |thr − d2|
}  // namespace heads

/*! \brief Counters (int64) and error maxima (float64) of both /cases and /heads: a case's
 *  are its heads' summed or maximised. */
namespace metrics {
inline constexpr const char* kEligible = "eligible";
inline constexpr const char* kHits = "hits";
inline constexpr const char* kExpectedHits = "expected_hits";
inline constexpr const char* kDecisionMismatch = "decision_mismatch";
inline constexpr const char* kKeysRead = "keys_read";
inline constexpr const char* kKeysExpected = "keys_expected";
inline constexpr const char* kKeysFull = "keys_full";
inline constexpr const char* kKeysMismatch = "keys_mismatch";
inline constexpr const char* kEntriesChecked = "entries_checked";
inline constexpr const char* kEntryMismatch = "entry_mismatch";
inline constexpr const char* kBitChecked = "bit_checked";
inline constexpr const char* kBitMismatch = "bit_mismatch";
inline constexpr const char* kRelL2Max = "rel_l2_max";
inline constexpr const char* kMaxAbsErr = "max_abs_err";
inline constexpr const char* kLseErrMax = "lse_err_max";  //!< natural log
inline constexpr const char* kEntryRelL2Max = "entry_rel_l2_max";
inline constexpr const char* kEntryLseErrMax = "entry_lse_err_max";
inline constexpr const char* kMacVsFullRelL2Max = "mac_vs_full_rel_l2_max";
inline constexpr const char* kWallS = "wall_s";  //!< /cases only: float64 seconds
}  // namespace metrics

/*! \brief The per-case replay file (schema mac-verify-case): root attributes kCaseLine,
 *  kStatus (string), kMessage, kGitCommit, kDevice, kImpl, kNonce and these, then one group
 *  per request with the inputs (trace::kQPre, kQPost, kK, kV) and [S, Hq(, D)] outputs. */
namespace case_file {
inline constexpr const char* kInputsStored = "inputs_stored";  //!< int64 0/1
inline constexpr const char* kRequestPrefix = "request_";      //!< group request_<i>
inline constexpr const char* kPrompt = "prompt";               //!< int64 attribute, P
inline constexpr const char* kReady = "ready";                 //!< int64 attribute 0/1
inline constexpr const char* kPosition = "position";           //!< [S] int64
inline constexpr const char* kExpectedHit = "expected_hit";    //!< [S, Hq] int8
inline constexpr const char* kActualHit = "actual_hit";
inline constexpr const char* kExpectedMatchPos = "expected_match_pos";  //!< [S, Hq] int64
inline constexpr const char* kActualMatchPos = "actual_match_pos";
inline constexpr const char* kExpectedKeysRead = "expected_keys_read";  //!< [S, Hq] int64
inline constexpr const char* kActualKeysRead = "actual_keys_read";
inline constexpr const char* kExpectedOut = "expected_out";  //!< [S, Hq, D] float64
inline constexpr const char* kActualOut = "actual_out";
inline constexpr const char* kExpectedLse = "expected_lse";  //!< [S, Hq] float64, natural log
inline constexpr const char* kActualLse = "actual_lse";
inline constexpr const char* kExactOut = "exact_out";  //!< [S, Hq, D] float64, full attention
inline constexpr const char* kExactLse = "exact_lse";
inline constexpr const char* kExpectedEntryO = "expected_entry_o";  //!< [S, Hq, D] float64
inline constexpr const char* kActualEntryO = "actual_entry_o";
inline constexpr const char* kExpectedEntryLse = "expected_entry_lse";  //!< [S, Hq] float64
inline constexpr const char* kActualEntryLse = "actual_entry_lse";
}  // namespace case_file

/*! \brief The file protocol's names (docs/certify.md "The file protocol"); mirrored by
 *  verification/python/macv_files.py. */
namespace files {
inline constexpr const char* kManifest = "export.h5";  //!< DIR/export.h5
inline constexpr const char* kInputsDir = "inputs";    //!< DIR/inputs/case-NNNNN.h5
inline constexpr const char* kOutputsDir = "outputs";  //!< DIR/outputs/case-NNNNN.h5 (default)
// Manifest: kNonce, kMatrixFnv1a, kGitCommit, kCommand and
inline constexpr const char* kCaps = "caps";              //!< string, declared caps as text
inline constexpr const char* kApplicable = "applicable";  //!< [C] int8
inline constexpr const char* kLine = "line";              //!< [C] string, matrix line
inline constexpr const char* kReason = "reason";          //!< [C] string, why not applicable
// Inputs file attributes (kCaseId, kCaseLine, kNonce and):
inline constexpr const char* kFamily = "family";
inline constexpr const char* kHeadDim = "head_dim";
inline constexpr const char* kNumQHeads = "num_q_heads";
inline constexpr const char* kNumKvHeads = "num_kv_heads";
inline constexpr const char* kBatch = "batch";
inline constexpr const char* kSteps = "steps";
inline constexpr const char* kPageSize = "page_size";
inline constexpr const char* kKvLayout = "kv_layout";  //!< string NHD | HND
inline constexpr const char* kNumPages = "num_pages";
inline constexpr const char* kMaxPagesPerRequest = "max_pages_per_request";
inline constexpr const char* kRing = "ring";
inline constexpr const char* kTail = "tail";
inline constexpr const char* kSinks = "sinks";
inline constexpr const char* kGenMin = "gen_min";
inline constexpr const char* kTau = "tau";
inline constexpr const char* kThreshold = "threshold";  //!< float64 holding the FP32 thr
inline constexpr const char* kSoftmaxScale = "softmax_scale";
inline constexpr const char* kMaxContext = "max_context";
inline constexpr const char* kOutDtype = "out_dtype";       //!< string f32 | bf16
inline constexpr const char* kRingODtype = "ring_o_dtype";  //!< string f32 | bf16
inline constexpr const char* kLseBase2 = "lse_base2";
inline constexpr const char* kReportsKeysRead = "reports_keys_read";
inline constexpr const char* kWritesRing = "writes_ring";
inline constexpr const char* kDecisions = "decisions";  //!< int64, macv_caps.decisions
// Inputs file datasets.
inline constexpr const char* kKCache = "k_cache";
inline constexpr const char* kVCache = "v_cache";
inline constexpr const char* kPageTable = "page_table";
inline constexpr const char* kPrompt = "prompt";
inline constexpr const char* kReady = "ready";
inline constexpr const char* kPosition = "position";
inline constexpr const char* kQ = "q";
inline constexpr const char* kQTilde = "q_tilde";
// The ring: the inputs' initial ring, the outputs' final ring.
inline constexpr const char* kRingQ = "ring_q";
inline constexpr const char* kRingO = "ring_o";
inline constexpr const char* kRingLse = "ring_lse";
inline constexpr const char* kRingPos = "ring_pos";
// Outputs file attributes (kCaseId, kNonce and) and datasets.
inline constexpr const char* kDeclaredName = "declared_name";
inline constexpr const char* kDeclaredVersion = "declared_version";
inline constexpr const char* kO = "o";
inline constexpr const char* kLse = "lse";
inline constexpr const char* kHit = "hit";
inline constexpr const char* kMatchPos = "match_pos";
inline constexpr const char* kKeysRead = "keys_read";
inline constexpr const char* kSlotQ = "slot_q";
inline constexpr const char* kSlotO = "slot_o";
inline constexpr const char* kSlotLse = "slot_lse";
inline constexpr const char* kSlotPos = "slot_pos";
}  // namespace files
}  // namespace verify

}  // namespace mac::io::schema
