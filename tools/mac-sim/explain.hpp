#pragma once
/*! \file explain.hpp
 *  \brief mac-sim's teaching view: every stage of one decode step of one head
 *         (docs/semantics.md §3), printed and as JSON for docs/walkthrough.md's figures.
 */
#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"
#include "mac/tools/json.hpp"
#include "mac/tools/simulate.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mac::sim {

/*! \brief One chain member of an entry: position c computed the keys [band_begin, band_end)
 *  of the prefix with its own query (docs/semantics.md §3, chains). */
struct ChainLink {
  int64_t pos = 0;
  int64_t band_begin = 0, band_end = 0;
  bool hit = false;     //!< c reused an entry (false: a miss or a prompt entry, the chain's end)
  bool prompt = false;  //!< the chain ends in a prompt (prefill) entry
};

/*! \brief `match_of[p]` for a prompt position (a miss is −1, a hit the position it reused). */
inline constexpr int64_t kPromptEntry = -2;

/*! \brief Everything the explain view shows of one step of one head, in FP64 (L natural log).
 *  The pieces are recomputed with mac::ref::attend<double> from the stepper's ranges. */
struct Explained {
  int64_t m = 0, head = 0, kv_head = 0;
  int64_t ring = 0, tail = 0, sinks = 0, gen_min = 0;
  int64_t em = 0, fem = 0, first_candidate = 0;
  double threshold = 0;
  tools::HeadRecord rec;
  int64_t entry_begin = 0, entry_end = 0;  //!< keys of entry(best_pos) (hit or unusable match)
  ref::AttnState<double> band, sink, tail_state, cached;  //!< cached = prefix ⊕ band
  // The downdate form (docs/semantics.md §3): entry = full ⊖ W, W = sinks ⊕ tail.
  bool downdate = false;
  ref::AttnState<double> w, entry_downdate;
  double t = 0, one_minus_t = 0, condition = 1;
  std::vector<ChainLink> chain;  //!< entry(m)'s chain, m first; empty on a miss
};

/*! \brief Builds the explain data of head h at the step of `rec`. `match_of` [tokens] holds,
 *  for every position up to and including rec.position, the position it reused, −1 for a
 *  miss or kPromptEntry; it gives the chain. */
Explained explain(const ref::LayerData& layer, double scale, const tools::SimConfig& cfg,
                  const tools::StepRecord& rec, int64_t h, const std::vector<int64_t>& match_of);

/*! \brief Prints the stages 1–5 (the downdate form's ⊖ at stage 4 when chosen). */
void print(const Explained& e);

/*! \brief Appends the explain data as one JSON object. */
void to_json(tools::JsonWriter& js, const Explained& e);

}  // namespace mac::sim
