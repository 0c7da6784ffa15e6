#pragma once
/*! \file oracle.hpp
 *  \brief The FP64 oracle (docs/semantics.md §2, §3): exact attention and the MAC algebra for
 *         given hit decisions, evaluated in FP64 with compensated (TwoSum) summation.
 *
 *  Everything here is independent of the decode stepper (mac::ref::DecodeStepper): it
 *  shares only the state type and ⊕ of state.hpp (CONVENTIONS: one state algebra).
 *
 *  How a state over a key range [a, b) is computed (docs/oracle.md):
 *   * logits `x_t = s·(q·k_t)`: the products of two BF16 values are exact in FP64, and
 *     their D-term sum is accumulated with TwoSum (error-free transformation), so the
 *     dot product is correct to about one rounding;
 *   * the range is cut into chunks; per chunk pass 1 finds `μ_c = max x_t`, pass 2
 *     accumulates `Z_c = Σ exp(x_t − μ_c)` and `S_c = Σ exp(x_t − μ_c)·v_t` with
 *     TwoSum compensation (a running sum and its exact error terms);
 *   * chunks combine relative to the global maximum `μ = max μ_c`, again compensated:
 *     `Z = Σ_c e^{μ_c−μ} Z_c`, `S = Σ_c e^{μ_c−μ} S_c`; finally `L = μ + ln Z`, `o = S/Z`.
 *  The relative error of `o` (norm-wise, against Σ w_t|v_t|) and the absolute error of
 *  `L` are a few units of FP64 rounding, independent of the range length.
 */
#include "mac/ref/common.hpp"
#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"

#include <cstdint>
#include <vector>

namespace mac::oracle {

using State = mac::ref::AttnState<double>;  //!< (o [D], natural-log L) in FP64

/*! \brief Exact `attn(q, [a, b))` of one query over KV head `kv_head` of `layer`:
 *  `L = ln Σ_{t∈[a,b)} exp(s·q·k_t)`, `o = Σ_t exp(s·q·k_t − L)·v_t`, in FP64 with
 *  compensated sums. `q` is [D] (post-RoPE, BF16-exact floats). An empty range gives the
 *  empty state. Throws InputError unless 0 ≤ a ≤ b ≤ layer.tokens and kv_head is valid.
 *  Single query: runs on the calling thread. */
State attend(const mac::ref::LayerData& layer, int64_t kv_head, const float* q, double scale,
             int64_t a, int64_t b);

/*! \brief Exact full attention of every query head h at position m: `attn(q_post(m, h),
 *  [0, m])` over KV head h / G. Returns [Hq] states. OpenMP across (KV head, key chunk);
 *  each KV head's K/V are read once for its G query heads. */
std::vector<State> full_attention(const mac::ref::LayerData& layer, double scale, int64_t m);

/*! \brief One query of a batch: a query vector on KV head `kv_head`, and the key ranges
 *  (segments) whose states are wanted: segment j is [cuts[j], cuts[j+1]); cuts must be
 *  non-decreasing (an empty segment gives the empty state). */
struct SegmentQuery {
  int64_t kv_head = 0;
  const float* q = nullptr;   //!< [D], BF16-exact
  std::vector<int64_t> cuts;  //!< ≥ 2 non-decreasing positions inside [0, tokens]
};

/*! \brief The engine under attend/full_attention/MacOracle: exact states of every segment
 *  of every query, [queries][segments]. Queries on the same KV head share each K/V read;
 *  work is spread over OpenMP threads by (KV head, key chunk). Deterministic: the result
 *  does not depend on the number of threads. */
std::vector<std::vector<State>> attend_segments(const mac::ref::LayerData& layer, double scale,
                                                const std::vector<SegmentQuery>& queries);

/*! \brief One head's decision for a step (what a stepper or kernel decided). */
struct Decision {
  bool hit = false;        //!< reuse the entry of match_pos
  int64_t match_pos = -1;  //!< matched position on a hit (ignored on a miss)
  bool ready = true;       //!< request ready: write entry(m) (a not-ready head cannot hit)
};

/*! \brief Per-head result of one oracle step. */
struct HeadResult {
  bool hit = false;
  int64_t match_pos = -1;
  int64_t band_begin = 0, band_end = 0;  //!< [E(p), E(m)) on a hit, [Fe(E(m)), E(m)) on a miss
  int64_t sink_end = 0;                  //!< sinks are [0, sink_end)
  int64_t tail_begin = 0;                //!< tail is [tail_begin, m]
  int64_t keys_read = 0;                 //!< (m−p) + min(r, m+1) + F on a hit, m+1 on a miss
  bool wrote_entry = false;
  State entry;  //!< prefix ⊕ band, over [Fe(E(m)), E(m)) (written to the ring iff ready)
  State out;    //!< ((prefix ⊕ band) ⊕ sink) ⊕ tail: the MAC output of these decisions
  State exact;  //!< full attention attn(q_m, [0, m]), FP64
};

/*! \brief All heads of one oracle step. */
struct StepResult {
  int64_t position = 0;
  std::vector<HeadResult> heads;  //!< [Hq]
};

/*! \brief The MAC algebra of docs/semantics.md §3 for given hit decisions, in FP64: "the value a
 *  perfect implementation of the same decisions would produce". Keeps its own ring of
 *  exact (never rounded) FP64 entries, one per query head and slot p mod M.
 *
 *  Per head, with E(p) = max(0, p+1−r), Fe(e) = min(F, e):
 *    hit on p:  prefix = entry(p), band = attn(q_m, [E(p), E(m)));
 *    miss:      prefix = ∅,        band = attn(q_m, [Fe(E(m)), E(m)));
 *    entry(m) = prefix ⊕ band (written to slot m mod M iff ready, after reading);
 *    out = ((prefix ⊕ band) ⊕ sink) ⊕ tail, sink = attn(q_m, [0, Fe(E(m)))),
 *          tail = attn(q_m, [E(m), m]);
 *    exact = attn(q_m, [0, m]), evaluated as the ⊕ of exact disjoint range states
 *            (sink, [Fe, E(p)), band, tail) in key order.
 *  Holds a reference to the layer. */
class MacOracle {
 public:
  /*! \brief Builds exact prefill entries for positions [max(0, P−M), P): entry(p) =
   *  attn(q_post(p), [Fe(E(p)), E(p))). Throws InputError on bad parameters
   *  (MacParams::validate, scale finite > 0, 0 ≤ P ≤ tokens, layer shape). */
  MacOracle(const mac::ref::LayerData& layer, double scale, const mac::MacParams& params,
            int64_t prefill);

  /*! \brief Evaluates position m (P ≤ m < tokens, larger than every earlier step) for the
   *  given decisions ([Hq]). Throws InputError naming the head and position for a
   *  decision no conforming implementation can make: a hit with m < gen_min or not
   *  ready, on a position outside [max(0, m−M), m), on an entry this ring does not hold,
   *  or on an unusable entry (L = −inf, or F > 0 and E(p) < F). */
  StepResult step(int64_t m, const std::vector<Decision>& decisions);

  /*! \brief The exact entry of `pos` for query head `head`, or nullptr if not held. */
  const State* entry(int64_t head, int64_t pos) const;

  const mac::MacParams& params() const { return params_; }
  int64_t prefill() const { return prefill_; }

 private:
  struct Slot {
    int64_t pos = -1;
    State state;
  };
  Slot& slot(int64_t head, int64_t pos) { return ring_[head * slots_ + pos % slots_]; }

  const mac::ref::LayerData& layer_;
  double scale_;
  mac::MacParams params_;
  int64_t prefill_;
  int64_t last_step_ = -1;
  // min(M, T) slots per head: for positions < T, slot p mod that is slot p mod M (M may be
  // as large as kMaxTokens, far beyond the layer).
  int64_t slots_ = 1;
  std::vector<Slot> ring_;  // [Hq][slots_]
};

}  // namespace mac::oracle
