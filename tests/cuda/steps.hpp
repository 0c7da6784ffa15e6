#pragma once
// The GPU suite's case driver: runs a CaseSpec's steps through the Harness (eager or from
// one captured graph), checks every step against the reference, and asserts the limits
// every case must meet. Shared by the suite's files, one per stage of docs/semantics.md §3.
#include <string>

#include "harness.hpp"

namespace mac::cuda::test {

/*! \brief Asserts the statistics every case must meet: decisions identical, outputs and
 *  ring entries within verify::Tolerances::gpu(), ineligible rows bit-identical to full
 *  attention, every step's item size as the rule says. */
void check_stats(const Stats& s);

/*! \brief Runs the case's prefill and steps, checking each step (Harness::check_step and
 *  the item size); asserts the schedule mode resolved as configured and no device error
 *  flag was raised. */
Stats run_steps(const CaseSpec& c, bool graph);

/*! \brief Runs a case (run_steps), prints its line and checks the statistics every case
 *  must meet (check_stats); returns them for the case's own checks. */
Stats run_case(const char* what, const CaseSpec& c, bool graph);

/*! \brief The ring entries of position m = kv_len − 1 of every row of `p` (the ones a MAC
 *  step writes), saved at construction; restore() writes them back, so that the same MAC step
 *  can run again on the same candidates. */
class RingPositions {
 public:
  RingPositions(const DecodeParams& p, int num_q_heads, int head_dim, void* stream);
  void restore(const DecodeParams& p, void* stream);

 private:
  std::vector<int32_t> kv_len_, slot_;
  std::vector<runner::RingPositionCopy> saved_;
};

}  // namespace mac::cuda::test
