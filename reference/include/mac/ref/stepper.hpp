#pragma once
/*! \file stepper.hpp
 *  \brief The decode stepper of docs/semantics.md §3 for one request and all heads of one layer:
 *         ring, match, amend (band), complete (sinks + tail), merge and cache write.
 *
 *  Stage by stage, per query head h and position m (0-based, kv_len = m + 1):
 *    1. eligible iff m ≥ gen_min, ready, and m ≥ 1 (a candidate exists);
 *    2. match: best = argmin_p (d2(p), p) over max(0, m−M) ≤ p < m; hit iff d2 < thr and
 *       entry(p) is usable (L finite, and E(p) ≥ F when F > 0), and no policy of §3.3
 *       forces a miss (refresh_due(m, h, Hq, N), or depth_capped(depth(p), K)). A step the
 *       gate of §3.5 runs without the match (gate_mode kOff or kFloor) misses at every head;
 *    3. amend: hit → prefix = entry(p), band = attn(q_m, [E(p), E(m)));
 *              miss → prefix = ∅, band = attn(q_m, [Fe(E(m)), E(m)));
 *    4. cache write (if ready): entry(m) = prefix ⊕ band (split) or out ⊖ (sink ⊕ tail)
 *       (downdate), into slot m mod M, read before write;
 *    5. complete: out = ((prefix ⊕ band) ⊕ sink) ⊕ tail, sink = attn(q_m, [0, Fe(E(m)))),
 *       tail = attn(q_m, [E(m), m]).
 *  The output uses the unrounded prefix ⊕ band; the stored entry is rounded according to
 *  StateStorage (production: BF16 o, FP32 L).
 */
#include "mac/ref/gate.hpp"
#include "mac/ref/match.hpp"
#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"

#include <cstdint>
#include <vector>

namespace mac::ref {

/*! \brief One ring slot of one head. */
template <typename T>
struct RingEntry {
  int64_t pos = -1;              //!< position held, −1 if never written
  const float* q_pre = nullptr;  //!< pre-RoPE query of pos (points into the layer; BF16-exact)
  AttnState<T> state;            //!< state over [Fe(E(pos)), E(pos)) as stored
  int64_t depth = 0;  //!< chain depth: 0 from a miss or prefill, k+1 from a hit on depth k
};

/*! \brief The per-head ring: `capacity` slots per head, position p in slot p mod capacity.
 *  The stepper gives it min(M, T) slots, which for positions < T is slot p mod M. */
template <typename T>
class Ring {
 public:
  Ring() = default;
  Ring(int64_t capacity, int64_t num_heads, int64_t head_dim);
  int64_t capacity() const { return capacity_; }
  RingEntry<T>& slot(int64_t head, int64_t pos) {
    return entries_[head * capacity_ + pos % capacity_];
  }
  const RingEntry<T>& slot(int64_t head, int64_t pos) const {
    return entries_[head * capacity_ + pos % capacity_];
  }
  /*! \brief The entry of `pos` if slot pos mod M holds pos, else nullptr. */
  const RingEntry<T>* find(int64_t head, int64_t pos) const {
    const auto& e = slot(head, pos);
    return e.pos == pos ? &e : nullptr;
  }

 private:
  int64_t capacity_ = 0, num_heads_ = 0;
  std::vector<RingEntry<T>> entries_;
};

/*! \brief Why an eligible head missed by rule rather than by its match: a would-be hit
 *  (d2 < thr, usable entry) turned into a miss by a policy of semantics §3.3, or a step the
 *  gate of §3.5 ran without the match. */
enum class PolicyMiss : int8_t {
  kNone = 0,      //!< no policy intervened (a hit, or a miss of §3 itself)
  kRefresh = 1,   //!< the head's periodic refresh was due at m
  kDepthCap = 2,  //!< the matched entry's chain depth was ≥ K
  kGated = 3,     //!< the gate ran the step as exact attention; the match was not evaluated
};

/*! \brief Per-head outcome of one decode step. */
template <typename T>
struct HeadStep {
  bool eligible = false;
  bool hit = false;
  PolicyMiss policy = PolicyMiss::kNone;  //!< why a rule made the head miss (kNone: none did)
  MatchResult match;       //!< nearest candidate, its distances and the threshold (none when gated)
  int64_t match_pos = -1;  //!< matched position on a hit, −1 on a miss
  int64_t band_begin = 0, band_end = 0;  //!< [E(p), E(m)) on a hit, [Fe(E(m)), E(m)) on a miss
  int64_t sink_end = 0;                  //!< sinks are [0, sink_end)
  int64_t tail_begin = 0;                //!< tail is [tail_begin, m]
  AttnState<T> prefix;                   //!< reused prefix state (empty on a miss)
  AttnState<T> band, sink, tail;         //!< attn(q_m, ·) over the band, sink and tail ranges
  AttnState<T> out;                      //!< output (o, natural-log LSE)
  AttnState<T> entry;     //!< entry(m) as stored in the ring (when wrote_entry), else empty
  int64_t keys_read = 0;  //!< KV tokens read this step
  int64_t depth = 0;      //!< chain depth of the entry written (or that would be written)
  bool wrote_entry = false;
};

/*! \brief The gate's part of one step (semantics §3.5): its mode, and the byte model's
 *  prediction of the step as run and of full attention. */
struct GateStep {
  GateMode mode = GateMode::kNone;
  int64_t hits = 0;        //!< heads that hit
  int64_t group_keys = 0;  //!< Σ over the KV groups of the keys each reads (gate_group_keys)
  int64_t bytes = 0;       //!< the step as run: gate_mac_bytes when the match ran, else
                           //!< full attention plus the entry writes when ready
  int64_t bytes_full = 0;  //!< gate_full_bytes(m): full attention's K/V
  GateState state;         //!< the state after the step
};

/*! \brief All heads of one step. */
template <typename T>
struct StepResult {
  int64_t position = 0;
  std::vector<HeadStep<T>> heads;  //!< [Hq]
  GateStep gate;
};

/*! \brief Runs docs/semantics.md §3 over one layer of one request. T is the arithmetic precision
 *  (float or double). Not copyable cheaply; holds a reference to the layer. */
template <typename T>
class DecodeStepper {
 public:
  DecodeStepper(const LayerData& layer, double softmax_scale, const MacParams& params,
                Variant variant = Variant::kSplit,
                StateStorage storage = StateStorage::kProduction);

  /*! \brief Builds ring entries for the last M prompt positions [max(0, P−M), P). */
  void prefill(int64_t P, PrefillMode mode = PrefillMode::kDirect);

  /*! \brief Decodes position m (must exceed every earlier step and be < tokens) for all
   *  heads. `ready = false` makes every head an exact miss and writes no entry. The gate
   *  (semantics §3.5) decides from the state the earlier steps left and updates it after. */
  StepResult<T> step(int64_t m, bool ready = true);

  const Ring<T>& ring() const { return ring_; }
  const MacParams& params() const { return params_; }
  const GateConfig& gate_config() const { return gate_; }
  const GateState& gate_state() const { return gate_state_; }
  const LayerData& layer() const { return layer_; }

  /*! \brief Rounds a state as the configured storage keeps it. */
  AttnState<T> store(const AttnState<T>& s) const;

 private:
  /*! \brief Stage 2: nearest candidate of head h at position m (no validity check). */
  MatchResult match(int64_t h, int64_t m) const;
  /*! \brief Stages 1–3 for head h: eligibility, match and validity, and the key ranges
   *  (band, sinks, tail) to recompute; fills everything but `out` and `wrote_entry`.
   *  `gated`: the gate runs the step without the match (every head a miss, kGated). */
  void decide(int64_t h, int64_t m, bool ready, bool gated, HeadStep<T>& s) const;

  const LayerData& layer_;
  double scale_;
  MacParams params_;
  Variant variant_;
  StateStorage storage_;
  Ring<T> ring_;
  float threshold_;
  int64_t last_step_ = -1;
  GateConfig gate_;
  GateState gate_state_;
};

extern template class DecodeStepper<float>;
extern template class DecodeStepper<double>;

}  // namespace mac::ref
