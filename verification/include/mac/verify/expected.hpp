#pragma once
/*! \file expected.hpp
 *  \brief What a conforming implementation must produce for a case: the decisions of
 *         docs/semantics.md §3 (canonical FP32 match of mac::ref::canonical_d2, ties to the older
 *         position, strict threshold, argmin first and validity second, readiness, read
 *         before write, the policies of §3.3) and the FP64 values of the MAC algebra for
 *         those decisions,
 *         evaluated with the oracle's compensated engine (mac::oracle::attend_segments).
 *
 *  The adaptive gate of §3.5 (a case with W > 0) is the reference's own rule (mac/ref/gate.hpp:
 *  gate_mode, gate_update and the byte model), with one GateState per request: a gated step is
 *  eligible, misses at every head without a match (policy 3) and writes its exact entry when
 *  ready; an ineligible step leaves the state alone.
 *
 *  Prompt entries are evaluated lazily: only an entry that some step actually reuses is
 *  computed (attn(q_p, [Fe(E(p)), E(p))) at first use), so a 127K-token prompt costs a
 *  few full-context attentions instead of M·Hq of them. Per step and head one call over
 *  the cuts {0, Fe(E(m)), [E(p),] E(m), m+1} yields sink, band, tail (and the exact full
 *  attention as the ⊕ of all disjoint segments).
 */
#include "mac/oracle/oracle.hpp"
#include "mac/ref/gate.hpp"
#include "mac/verify/inputs.hpp"

#include <cstdint>
#include <vector>

namespace mac::verify {

/*! \brief Expected result of one (request, head, step). */
struct ExpectedHead {
  int64_t position = 0;
  bool eligible = false;
  bool hit = false;
  int64_t best_pos = -1;   //!< nearest candidate (−1 if none searched)
  int64_t match_pos = -1;  //!< on a hit
  int policy = 0;     //!< why a rule made the head miss: 1 refresh, 2 cap (a would-be hit), 3 gated
  int64_t depth = 0;  //!< chain depth of entry(m): depth(p) + 1 on a hit, else 0
  float d2 = 0;       //!< canonical FP32 distance of best (NaN if none)
  double margin = 0;  //!< thr − d2 (FP64 d2): how close the decision was
  int64_t keys_read = 0;     //!< (m−p) + min(r, m+1) + Fe(E(m)) on a hit, m+1 on a miss
  bool wrote_entry = false;  //!< ready: entry(m) written to slot m mod M
  oracle::State entry;       //!< prefix ⊕ band over [Fe(E(m)), E(m)) (FP64)
  oracle::State out;         //!< ((prefix ⊕ band) ⊕ sink) ⊕ tail (FP64)
  oracle::State exact;       //!< full attention attn(q_m, [0, m]) (FP64)
};

/*! \brief Evaluates a case step by step (all requests). Holds a reference to the inputs. */
class Expected {
 public:
  /*! \brief `storage`: kFull keeps every entry in FP64 (the oracle's exact algebra);
   *  kProduction rounds each entry as the production ring stores it (BF16 o, FP32 L) when
   *  it is written and reuses the rounded value, so an implementation with that layout is
   *  compared with a perfect implementation of the same layout: BF16 storage rounding does
   *  not accumulate along chains of hits in the comparison. */
  explicit Expected(const CaseInputs& in, StateStorage storage = StateStorage::kFull);
  /*! \brief Step s of every request: [batch][Hq]. */
  std::vector<std::vector<ExpectedHead>> step(int64_t s);
  /*! \brief Request i's gate state (semantics §3.5) after the last step (zero before). */
  const GateState& gate_state(int i) const { return gate_states_[static_cast<size_t>(i)]; }
  /*! \brief The gate's mode of request i at the last step (kNone before the first). */
  GateMode gate_mode(int i) const { return gate_modes_[static_cast<size_t>(i)]; }

 private:
  struct Slot {
    int64_t pos = -1;
    bool evaluated = false;  //!< false: a prompt entry not needed yet (lazy)
    int64_t depth = 0;       //!< chain depth (semantics §3 Chains); prompt entries 0
    oracle::State state;
  };
  std::vector<ExpectedHead> step_request(int i, int64_t m);
  /*! \brief `gated`: the gate runs the step without the match (every head misses). */
  void match_head(int i, int h, int64_t m, bool gated, ExpectedHead* out) const;
  oracle::State store(const oracle::State& s) const;  //!< rounds as storage_ keeps entries
  /*! \brief Ring slot of position p for head h of request i (slot p mod slots_[i]). */
  Slot& slot(int i, int h, int64_t p) {
    const int64_t n = slots_[static_cast<size_t>(i)];
    return rings_[static_cast<size_t>(i)][static_cast<size_t>(h * n + p % n)];
  }
  const Slot& slot(int i, int h, int64_t p) const {
    return const_cast<Expected*>(this)->slot(i, h, p);
  }

  const CaseInputs& in_;
  StateStorage storage_;
  std::vector<std::vector<Slot>> rings_;  //!< [batch][Hq·slots]
  std::vector<int64_t> slots_;            //!< [batch] min(M, P + steps)
  GateConfig gate_;                       //!< the case's gate (window 0: off)
  std::vector<GateState> gate_states_;    //!< [batch]
  std::vector<GateMode> gate_modes_;      //!< [batch] mode of the last step
};

}  // namespace mac::verify
