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
 */
#include "mac/ref/common.hpp"
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
  std::string label = "simulate";

  /*! \brief Validates against a layer (InputError naming the value). */
  void validate(const ref::LayerData& layer) const;
  int64_t num_steps(const ref::LayerData& layer) const;
};

struct HeadRecord {
  bool eligible = false, hit = false;
  int64_t best_pos = -1, match_pos = -1;
  double d2 = 0, d2_fp64 = 0, margin = 0;  //!< nearest candidate (NaN if none)
  int64_t band_begin = 0, band_end = 0, sink_end = 0, tail_begin = 0;
  int64_t keys_read = 0, depth = 0;
  ref::AttnState<double> out;     //!< MAC output of the stepper (widened to FP64)
  ref::AttnState<double> prefix;  //!< reused prefix (empty on a miss)
  ref::AttnState<double> oracle;  //!< FP64 oracle, same decisions (empty if oracle off)
  ref::AttnState<double> exact;   //!< full attention FP64 (empty if oracle off)
  double rel_l2 = 0, max_abs = 0, lse_err = 0, ref_rel_l2 = 0;
};

struct StepRecord {
  int64_t position = 0;
  std::vector<HeadRecord> heads;  //!< [Hq]
};

/*! \brief Aggregates of one layer's run. */
struct SimSummary {
  int64_t steps = 0, heads = 0;
  int64_t hits = 0, eligible = 0;
  int64_t keys_read = 0, keys_full = 0;            //!< Σ keys read and Σ (m + 1)
  std::vector<int64_t> head_hits, head_keys_read;  //!< [Hq]
  std::vector<double> rel_l2;                      //!< [steps·Hq], MAC vs full
  std::vector<double> head_max_rel_l2;             //!< [Hq]
  double max_abs = 0, max_lse_err = 0, max_ref_rel_l2 = 0;
  double seconds = 0;

  double hit_rate() const {
    return steps > 0 && heads > 0 ? double(hits) / double(steps * heads) : 0.0;
  }
  double kv_fraction() const { return keys_full ? double(keys_read) / double(keys_full) : 0.0; }
};

/*! \brief q-quantile (0..1) of values, linear interpolation; NaN if empty. */
double quantile(std::vector<double> values, double q);

/*! \brief Runs the layer; calls `on_step` after every step (may be empty). */
SimSummary simulate_layer(const ref::LayerData& layer, double scale, const SimConfig& cfg,
                          const std::function<void(const StepRecord&)>& on_step = {});

}  // namespace mac::tools
