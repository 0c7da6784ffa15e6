#pragma once
/*! \file report.hpp
 *  \brief mac-sim's summaries: one block per layer, the closing table of reused outputs
 *         against the reference points, the verdict and how to read it; and the JSON summary.
 */
#include "mac/tools/json.hpp"
#include "mac/tools/simulate.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mac::sim {

/*! \brief One layer's run, as reported. */
struct LayerRun {
  int64_t layer = 0;              //!< index in the trace file
  int64_t model_layer = -1;       //!< the model's layer it was recorded from (−1: not recorded)
  int64_t prefill = 0, tail = 0;  //!< P and r of the run
  bool gate = false;              //!< the adaptive gate was on (W > 0)
  tools::SimSummary summary;
  std::vector<std::string> warnings;
};

/*! \brief The block printed after a layer's run (per-head table with `per_head`). */
void print_layer(const LayerRun& run, bool per_head);

/*! \brief The closing table over all layers, the verdict it supports and how to read it. */
void print_closing(const std::vector<LayerRun>& runs);

/*! \brief Appends one layer's summary to the JSON "layers" array. */
void layer_json(tools::JsonWriter& js, const LayerRun& run);

}  // namespace mac::sim
