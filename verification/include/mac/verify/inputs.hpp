#pragma once
/*! \file inputs.hpp
 *  \brief Deterministic BF16-exact inputs of a case: one layer per request, with hits
 *         planted per head at chosen lags and the special patterns (ties, threshold edge,
 *         large logits, cancellation, value scales).
 *
 *  Randomness is counter-based (splitmix64 of seed, stream and index), so the inputs do
 *  not depend on the number of threads or on the library's distributions. Normal values
 *  are Irwin–Hall sums of four uniforms (variance 1), rounded to BF16.
 *
 *  Planting, per decode step m of request i: round(hit·Hq) query heads, chosen by a seeded
 *  permutation of all Hq heads (so misses spread across GQA groups instead of filling whole
 *  groups), get q̃_m = q̃_{m−lag} + noise (σ = 0.1, far inside the threshold), with `lag`
 *  drawn from the case's `lags` list: an integer, "M", "M-1", "r", "r-1", "r+1", "u"
 *  (uniform 1..M) or "c" (uniform 1..4: chains through recent decode steps); lags are
 *  clipped to [1, m]. Other heads get a fresh random q̃ (d2 ≈ 2D, far outside). Whether a
 *  planted head really hits is decided by the rules (eligibility, usable entry, nearest
 *  candidate); the report records planted and actual hits.
 *  Only the positions that can be used are filled: q̃/q for the last M prompt positions
 *  and the decode steps; other query rows are zero.
 */
#include "mac/ref/trace.hpp"
#include "mac/verify/case.hpp"

#include <cstdint>
#include <vector>

namespace mac::verify {

/*! \brief One request of a case. */
struct RequestInputs {
  ref::LayerData layer;  //!< tokens = P + steps; BF16-exact floats
  int64_t prompt = 0;    //!< P; decode positions P … P + steps − 1
  bool ready = true;
  std::vector<int> planted;  //!< [steps·Hq] 1 if a hit was planted at (step, head)
};

struct CaseInputs {
  CaseSpec spec;
  MacParams params;
  double scale = 0;
  std::vector<RequestInputs> requests;  //!< [batch]
};

/*! \brief Generates the inputs of a case (OpenMP over tokens; deterministic). */
CaseInputs make_inputs(const CaseSpec& spec);

/*! \brief The case with a run's nonce mixed into its seed (nonce 0: the matrix's own seed).
 *  A certification draws a nonce per run, so its inputs are fresh and an answer cached from an
 *  earlier run cannot pass, while a replay given the same nonce draws the same inputs. */
CaseSpec with_nonce(const CaseSpec& spec, uint64_t nonce);

/*! \brief The nonce of trial `trial` (0-based) of a run whose nonce is `run_nonce`: trial 0 uses
 *  the run's own (so one trial is the run as before), every later trial a non-zero value
 *  derived from both. Each trial thus draws inputs of its own, an answer cached from an earlier
 *  trial cannot pass a later one, and a failing trial replays with `--nonce` of its value. */
uint64_t trial_nonce(uint64_t run_nonce, int trial);

/*! \brief Counter-based uniform in [0, 1) (splitmix64). */
double uniform01(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace mac::verify
