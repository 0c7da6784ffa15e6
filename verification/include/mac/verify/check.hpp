#pragma once
/*! \file check.hpp
 *  \brief Runs one case on an implementation under test and checks it against the
 *         expected decisions and FP64 values (expected.hpp): the driver's core, shared by
 *         mac-verify and the planted-fault test.
 *
 *  Checks per (request, head, step):
 *   * decisions identical: hit and matched position (tie rule, strict threshold, validity,
 *     eligibility, readiness all show up here);
 *   * output within tolerance of the FP64 oracle of the same decisions:
 *     rel_l2 = ‖o − o*‖₂/‖o*‖₂ ≤ tol.out_rel_l2, |L − L*| ≤ tol.lse·max(1, |L*|);
 *   * keys read equal to the spec's count (when the implementation reports it);
 *   * ring entry of m: written iff the request is ready, q̃ a bit copy, state within the
 *     entry tolerances of prefix ⊕ band (empty iff expected empty);
 *   * ineligible heads bit-identical to the full-attention kernel (when reported).
 *  Per (request, step) of a gated case (W > 0), where the implementation exposes its gate state
 *  (Implementation::gate_state): every field equal to the expected state's.
 *  An implementation that reports no decisions (Grading::kMacValues) skips the first; a plain
 *  decode kernel (Grading::kExact) is held to exact attention attn(q_m, [0, m]) for its output
 *  and LSE, m + 1 keys read, and has no ring entry or eligibility to check.
 */
#include "mac/verify/expected.hpp"
#include "mac/verify/impl.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mac::verify {

/*! \brief Acceptance limits. The defaults are the BF16 kernels' (gpu()), fixed by DESIGN §3 and
 *  docs/semantics.md §4; why they hold, with u = 2^-8 ≈ 3.9e-3 the unit roundoff of BF16
 *  (8 significant bits, round to nearest even):
 *   - out_rel_l2 = 1e-2 ≈ 2.6 u. A BF16 output rounds each element with a relative error
 *     ≤ u, so rounding alone gives ‖δo‖ ≤ u‖o‖, rel L2 ≤ u. A reused BF16 ring entry is
 *     rounded by the expected evaluation too (StateStorage::kProduction), but the kernel's
 *     FP32 entry can round to the neighbouring BF16 value: one ulp, 2u relative, on those
 *     elements, weighted by the prefix's share (≤ 1) of the softmax mass. Inputs are the same
 *     BF16 values on both sides and FP32 accumulation adds ~1e-6. The limit covers the output
 *     rounding and such one-ulp disagreements, never a wrong range or weight (those are O(1));
 *     the H200 run of the 901-case matrix (docs/verification.md "GPU full matrix", the tree
 *     of 2590497) measured 5.3e-3 ≈ 1.4 u at worst, 1.9× below it.
 *   - lse = 1e-3, relative to max(1, |L|). L stays FP32 (never BF16): an absolute error δ in
 *     L is a relative error ≈ δ of the softmax denominator, so 1e-3 allows 0.1 %, a quarter
 *     of one BF16 rounding; above |L| = 1 it scales with |L| because FP32 logits s·q·k carry
 *     rounding errors proportional to their size (see logit_conditioned). The same H200 run's
 *     largest |ΔL| is 1.95e-3, at a case with |L| above 1.95 (every case passed).
 *   - entry_rel_l2, entry_lse: a ring entry (prefix ⊕ band) is stored as the output is (BF16
 *     o, FP32 L) and reused by later steps, so the same budget applies; measured worst 5.4e-3.
 *  cpu() replaces all four with 1024 FP32 epsilons for the FP32 reference. */
struct Tolerances {
  double out_rel_l2 = 1e-2;    //!< per head, vs the FP64 oracle of the same decisions
  double lse = 1e-3;           //!< |ΔL| ≤ lse·max(1, |L|)
  double entry_rel_l2 = 1e-2;  //!< ring entry o
  double entry_lse = 1e-3;     //!< ring entry L, relative as above
  /*! \brief Scale the rel-L2 limits by the logit conditioning max(1, s²/64) of a
   *  `logits:s` case. FP32 rounds each logit s·q·k with an absolute error ∝ |s·q·k|,
   *  which the softmax turns into a relative output error of the same size; scaling q and
   *  k by s multiplies it by s² (measured: 1.3e-4 … 1.8e-4 at s = 16 … 48 for the FP32
   *  reference). Used for the tight CPU limits only; the GPU limit is docs/semantics.md §4's flat
   * 1e-2. */
  bool logit_conditioned = false;
  /*! \brief docs/semantics.md §4 for the BF16 CUDA kernels. */
  static Tolerances gpu() { return {}; }
  /*! \brief The output/entry rel-L2 factor for `spec` (1 unless logit_conditioned). */
  double conditioning(const CaseSpec& spec) const;
  /*! \brief FP32 reference / FP64 model: 1024 FP32 epsilons (≈1.2e-4), "far tighter". */
  static Tolerances cpu();
};

/*! \brief Outcome of a case. kSkip: not run for a reason of the run (time limit, cost or
 *  context cap), so the certificate is incomplete; kNotApplicable: outside what the
 *  implementation declares it supports (Implementation::supports), counted apart and never as
 *  passed. */
enum class CaseStatus : int { kPass = 0, kFail = 1, kSkip = 2, kError = 3, kNotApplicable = 4 };
const char* to_string(CaseStatus s);

/*! \brief Per (case, request, query head) metrics, aggregated over the steps. */
struct HeadMetrics {
  int request = 0, head = 0;
  int64_t steps = 0, eligible = 0, planted = 0;
  int64_t hits = 0, expected_hits = 0, decision_mismatch = 0;
  int64_t keys_read = 0, keys_expected = 0, keys_full = 0, keys_mismatch = 0;
  double rel_l2_max = 0, max_abs_err = 0, lse_err_max = 0;  //!< lse_err: |ΔL| (natural log)
  int64_t entries_checked = 0, entry_mismatch = 0;  //!< missing/extra write or q̃ not a copy
  double entry_rel_l2_max = 0, entry_lse_err_max = 0;
  int64_t bit_checked = 0, bit_mismatch = 0;
  double mac_vs_full_rel_l2_max = 0;  //!< informational: expected MAC vs exact full attention
  double min_abs_margin = 0;          //!< min |thr − d2| over eligible steps (how tight)
  bool failed = false;
};

/*! \brief Everything recorded for one step of one case (kept for failure reproducers). */
struct StepRecord {
  std::vector<std::vector<ExpectedHead>> expected;  //!< [batch][Hq]
  StepOutput actual;                                //!< [batch][Hq]
};

struct CaseResult {
  CaseSpec spec;
  CaseStatus status = CaseStatus::kPass;
  std::string message;  //!< first failure, skip reason or error
  std::string replay;   //!< the command that replays a failure or error ("" otherwise)
  int64_t trials = 0;   //!< trials run (0: skipped or not applicable; stops at a failing one)
  double wall_s = 0;
  std::vector<HeadMetrics> heads;  //!< [batch·Hq]
  std::vector<StepRecord> steps;   //!< kept only when requested (keep_steps) or on failure
  // Aggregates over heads.
  int64_t decision_mismatch = 0, hits = 0, expected_hits = 0, eligible = 0, head_steps = 0;
  int64_t keys_read = 0, keys_expected = 0, keys_full = 0, keys_mismatch = 0;
  int64_t entry_mismatch = 0, entries_checked = 0, bit_checked = 0, bit_mismatch = 0;
  double rel_l2_max = 0, max_abs_err = 0, lse_err_max = 0, entry_rel_l2_max = 0,
         entry_lse_err_max = 0;
  double mac_vs_full_rel_l2_max = 0;
};

/*! \brief What an implementation's outputs are graded against (macv_caps.decisions). */
enum class Grading : int {
  kMac = 0,        //!< decisions checked; values vs the oracle at those decisions
  kMacValues = 1,  //!< no decisions reported: values vs the oracle at the expected decisions
  kExact = 2,      //!< a plain decode kernel: o, lse vs exact attention attn(q_m, [0, m])
};
/*! \brief One line for the certificate: what `g` grades against and what it leaves unchecked. */
const char* grading_text(Grading g);

struct RunOptions {
  Tolerances tol;
  /*! \brief How the expected evaluation stores ring entries (see Expected): kFull for the
   *  FP32 reference (FP32 storage) and the FP64 model; kProduction (BF16 o, FP32 L) for the
   *  CUDA kernels, whose ring has that layout. */
  StateStorage expected_storage = StateStorage::kFull;
  bool keep_steps_on_failure = true;
  /*! \brief Mixed into every case's seed (with_nonce; 0: the matrix's own seeds). */
  uint64_t nonce = 0;
  Grading grading = Grading::kMac;
};

/*! \brief Generates the inputs (of the case's seed mixed with opt.nonce), runs `impl` and the
 *  expected evaluation, checks every step.
 *  Exceptions from the implementation become CaseStatus::kError with the message. If
 *  `inputs_out` is non-null the generated inputs are moved there (for reproducers). */
CaseResult run_case(const CaseSpec& spec, Implementation& impl, const RunOptions& opt,
                    CaseInputs* inputs_out = nullptr);

/*! \brief Runs the case `trials` times (≥ 1), trial t with the nonce trial_nonce(opt.nonce, t)
 *  (inputs.hpp), and stops at the first trial that does not pass. The result is that trial's
 *  status and message (prefixed "trial t of N (nonce 0x…)" when N > 1) and its step records;
 *  counters are summed and error maxima maximised over the trials run, `trials` counts them.
 *  `*nonce_out` is the nonce of the last trial run (the one a replay needs). */
CaseResult run_trials(const CaseSpec& spec, Implementation& impl, const RunOptions& opt, int trials,
                      uint64_t* nonce_out);

/*! \brief "" if `got` equals `want` in every field, else "FIELD got X, expected Y" of the first
 *  field that differs (kGateStateFields order). */
std::string gate_state_diff(const std::array<int64_t, 5>& got, const GateState& want);

/*! \brief Relative L2 ‖a − b‖/‖b‖ in FP64 (NaN-safe: any NaN gives +inf; ‖b‖ = 0 gives ‖a‖). */
double rel_l2(const std::vector<double>& a, const Eigen::VectorXd& b, double* max_abs = nullptr);

}  // namespace mac::verify
