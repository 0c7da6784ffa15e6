#pragma once
/*! \file simulate.hpp
 *  \brief Runs one trace layer through the reference decode stepper (FP32 or FP64) and
 *         the FP64 oracle, step by step: the loop behind mac-sim and mac-study.
 *
 *  Per decode step m (P ≤ m < P + steps) and query head h it records the stepper's
 *  decision and output, the oracle's value for the same decisions (what a perfect
 *  implementation of those decisions gives) and exact full attention, and the errors
 *      rel_l2  = ‖o_mac − o_full‖₂ / ‖o_full‖₂      (MAC vs full attention: the object of study)
 *      max_abs = max_i |o_mac,i − o_full,i|
 *      lse_err = |L_mac − L_full|                     (natural log)
 *      ref_rel_l2 = ‖o_mac − o_oracle‖₂ / ‖o_oracle‖₂ (rounding of the stepper's precision)
 *
 *  With `baselines` on, every hit is also evaluated two other ways, in FP64 against the
 *  same exact output, so that the size of MAC's error can be judged:
 *      window:  band ⊕ (sinks ⊕ tail)           the keys MAC read, without the reused prefix
 *               (what reuse adds at the same cost);
 *      no band: entry(p) ⊕ (sinks ⊕ tail)       the matched entry reused without amending
 *               the keys [E(p), E(m)) it lacks (what MAC's band adds);
 *      random:  (entry(p′) ⊕ attn(q_m, [E(p′), E(m)))) ⊕ (sinks ⊕ tail) with p′ drawn
 *               uniformly from the usable ring entries (what the match adds).
 */
#include "mac/ref/common.hpp"
#include "mac/ref/gate.hpp"
#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mac::tools {

/*! \brief The stepper's configuration and how much of the layer to run, with what. */
struct SimConfig : StepperConfig {
  int64_t steps = 0;   //!< decode steps to run; 0 = to the end of the layer
  bool oracle = true;  //!< evaluate the FP64 oracle (exact full attention and same-decision MAC)
  bool progress = false;
  bool attention_stats = false;  //!< measure exact attention's entropy and tail mass (on at
                                 //!< most ~256 evenly spaced steps of the layer)
  bool baselines = false;        //!< evaluate the window, no-band and random baselines on hits
  uint64_t baseline_seed = 1;    //!< seed of the random-entry draw (mixed with step and head)
  std::string label = "simulate";

  /*! \brief Validates against a layer (InputError naming the value). */
  void validate(const ref::LayerData& layer) const;
  int64_t num_steps(const ref::LayerData& layer) const;
};

struct HeadRecord {
  bool eligible = false, hit = false;
  bool gated = false;  //!< the gate ran the step without the match (semantics §3.5)
  int64_t best_pos = -1, match_pos = -1;
  double d2 = 0, d2_fp64 = 0, margin = 0;  //!< nearest candidate (NaN if none)
  int64_t band_begin = 0, band_end = 0, sink_end = 0, tail_begin = 0;
  int64_t keys_read = 0, depth = 0;
  ref::AttnState<double> out;     //!< MAC output of the stepper (widened to FP64)
  ref::AttnState<double> prefix;  //!< reused prefix (empty on a miss)
  ref::AttnState<double> oracle;  //!< FP64 oracle, same decisions (empty if oracle off)
  ref::AttnState<double> exact;   //!< full attention FP64 (empty if oracle off)
  double rel_l2 = 0, max_abs = 0, lse_err = 0, ref_rel_l2 = 0;
  // Baselines (hits with SimConfig::baselines and the oracle on; NaN otherwise).
  int64_t random_pos = -1;   //!< p′ of the random-entry baseline (−1 if none usable)
  double window_rel_l2 = 0;  //!< rel L2 of band ⊕ (sinks ⊕ tail) vs full
  double noband_rel_l2 = 0;  //!< rel L2 of entry(p) ⊕ (sinks ⊕ tail) vs full
  double random_rel_l2 = 0;  //!< rel L2 of the random-entry reuse vs full
};

struct StepRecord {
  int64_t position = 0;
  std::vector<HeadRecord> heads;         //!< [Hq]
  GateMode gate_mode = GateMode::kNone;  //!< the gate's mode at this step
  int64_t bytes = 0, bytes_full = 0;     //!< the byte model: the step as run, full attention
};

/*! \brief Aggregates of one layer's run. */
struct SimSummary {
  int64_t steps = 0, heads = 0;
  int64_t hits = 0, eligible = 0;
  int64_t unusable_matches = 0;  //!< eligible head-steps below the threshold on an unusable entry
  int64_t keys_read = 0, keys_full = 0;            //!< Σ keys read and Σ (m + 1)
  std::vector<int64_t> head_hits, head_keys_read;  //!< [Hq]
  std::vector<double> rel_l2;                      //!< [steps·Hq], MAC vs full
  std::vector<double> head_max_rel_l2;             //!< [Hq]
  double max_abs = 0, max_lse_err = 0, max_ref_rel_l2 = 0;
  double miss_max_rel_l2 = 0;  //!< misses are exact attention up to the stepper's rounding
  // Exact attention over [0, m] (SimConfig::attention_stats), summed over the sampled steps
  // and heads:
  // entropy H = L − Σ_t p_t·x_t (nats, x_t = s·q_m·k_t) and the mass of the tail [E(m), m].
  double entropy_sum = 0, tail_mass_sum = 0;
  int64_t attention_count = 0;
  double mean_entropy() const {
    return attention_count ? entropy_sum / double(attention_count) : 0.0;
  }
  double mean_tail_mass() const {
    return attention_count ? tail_mass_sum / double(attention_count) : 0.0;
  }
  // Over hits only (with the oracle): MAC's error and, with baselines, the baselines' on
  // the same hits (random: the hits that had a usable random entry, in hit_random_mac the
  // MAC error of those same hits, so the two can be compared pair for pair).
  std::vector<double> hit_rel_l2, window_rel_l2, noband_rel_l2, random_rel_l2, hit_random_mac;
  double seconds = 0;
  // The gate and the byte model (semantics §3.5): steps by gate mode, Σ predicted bytes of the
  // steps as run and of full attention, and per step its mode, hits and predicted bytes.
  int64_t gate_on = 0, gate_off = 0, gate_floor = 0;
  int64_t bytes = 0, bytes_full = 0;
  std::vector<int64_t> step_mode, step_hits, step_bytes;  //!< [steps]; mode: GateMode's value

  double gated_fraction() const {
    return steps > 0 ? double(gate_off + gate_floor) / double(steps) : 0.0;
  }
  double bytes_fraction() const { return bytes_full ? double(bytes) / double(bytes_full) : 0.0; }
  double hit_rate() const {
    return steps > 0 && heads > 0 ? double(hits) / double(steps * heads) : 0.0;
  }
  double kv_fraction() const { return keys_full ? double(keys_read) / double(keys_full) : 0.0; }
};

/*! \brief q-quantile (0..1) of values, linear interpolation; NaN if empty. */
double quantile(std::vector<double> values, double q);

/*! \brief The ways a run of `cfg` over `layer` is degenerate before it starts, one line each
 *  naming the value (none: empty): gen_min beyond the last decode step (no step may reuse),
 *  a tail r that holds every key of every decode step, and no candidate position that can
 *  hold a usable entry (entry(p) is usable only from p ≥ r + F). */
std::vector<std::string> config_warnings(const ref::LayerData& layer, const SimConfig& cfg);

/*! \brief After a run: one line if eligible head-steps matched but no match was usable. */
std::vector<std::string> run_warnings(const SimSummary& s, const SimConfig& cfg);

/*! \brief Runs the layer; calls `on_step` after every step (may be empty). */
SimSummary simulate_layer(const ref::LayerData& layer, double scale, const SimConfig& cfg,
                          const std::function<void(const StepRecord&)>& on_step = {});

}  // namespace mac::tools
