#pragma once
/*! \file gate.hpp
 *  \brief The adaptive gate of docs/semantics.md §3.5: per (request, layer), a state that stops
 *         the match while recent steps show that MAC cannot pay in the byte model, runs exact
 *         attention (which still writes exact ring entries) meanwhile, and probes again after
 *         P gated steps.
 *
 *  Integer arithmetic only, and like mac/semantics.hpp no Eigen and no CUDA types: every
 *  function is `constexpr` and callable from host and device code (MAC_HD), so that the
 *  reference stepper and the kernels decide bit for bit alike. The step reads the state as
 *  the previous steps left it (gate_mode) and updates it after its own decisions
 *  (gate_update): a decision takes effect from the next step, without a host round trip.
 */
#include "mac/semantics.hpp"

#include <cstdint>

namespace mac {

struct MacParams;

/*! \brief Ratios of the gate are in per mille: the margin μ and the minimum hit rate. */
inline constexpr int64_t kGatePerMille = 1000;

/*! \brief Default of `MacParams::gate_fixed_bytes`, B_fix: the fixed cost of a step in which
 *  the match runs, as bytes at the streaming read. The batch-1 all-miss MAC step at 32K, Hkv 4
 *  (Hq 32, D 128, M 512) is 4.6 µs slower than full attention (docs/decisions.md §11); at the
 *  4505 GB/s measured in the same run that is 4.6e-6 s · 4.505e12 B/s = 20 723 000 bytes. The
 *  byte model already counts that step's ring scan (Hq·M·2D = 4 194 304 bytes) and entry writes
 *  (Hq·6D = 24 576), so B_fix = 20 723 000 − 4 194 304 − 24 576 = 16 504 120, rounded to
 *  16.5 MB. It is a cost per step: a batch of B requests shares it, B_fix/B each. */
inline constexpr int64_t kGateFixedBytesDefault = 16'500'000;

/*! \brief Most MAC steps of one window (`gate_window`), largest margin (10× full attention's
 *  bytes) and most fixed bytes. With them a window's byte sums times the per-mille factors stay
 *  inside int64 for every shape the CUDA kernels run (131 072 positions, D 256, Hkv up to 424);
 *  gate_fits checks it for the layer at hand. */
inline constexpr int64_t kGateMaxWindow = 4096;
inline constexpr int64_t kGateMaxMargin = 10'000;
inline constexpr int64_t kGateMaxFixedBytes = int64_t{1} << 34;

/*! \brief Everything the rule and the byte model need, as integers: the gate's parameters
 *  (MacParams) and the layer's shape. */
struct GateConfig {
  int64_t window = 0;              //!< W: MAC steps per window; 0: the gate is off
  int64_t probe = 256;             //!< P: gated steps before the match is tried again
  int64_t margin = kGatePerMille;  //!< μ ‰: off iff 1000·Σ bytes_mac ≥ μ·Σ bytes_full
  int64_t min_hit = 0;             //!< h_min ‰: off iff 1000·hits < h_min·Hq·W
  int64_t fixed_bytes = kGateFixedBytesDefault;              //!< B_fix
  int64_t num_q_heads = 1, num_kv_heads = 1, head_dim = 64;  //!< Hq, Hkv, D
  int64_t ring = 512, tail = 256, sinks = 0;                 //!< M, r, F
};

/*! \brief The gate's state of one (request slot, layer): 32 bytes, zero when a request starts.
 *  On iff off_left = 0. */
struct GateState {
  int64_t bytes_mac = 0;   //!< Σ bytes_mac over the current window's steps
  int64_t bytes_full = 0;  //!< Σ bytes_full over the same steps
  int64_t hits = 0;        //!< Σ hit heads over the same steps
  int32_t steps = 0;       //!< MAC steps in the current window, < W
  int32_t off_left = 0;    //!< gated steps still to run before the next probe window; 0: on
};

/*! \brief What the gate does at one step. */
enum class GateMode : int8_t {
  kNone = 0,   //!< gate off (W = 0) or the step is not eligible: the gate neither acts nor counts
  kOn = 1,     //!< the match runs and the step counts in the window
  kOff = 2,    //!< gated by the state: a recent window showed that MAC did not pay
  kFloor = 3,  //!< gated because no decision of this step could pay (gate_floor)
};

/*! \brief Whether a mode runs the step without the match (every head misses, reason "gated"). */
MAC_HD constexpr bool gate_gated(GateMode mode) {
  return mode == GateMode::kOff || mode == GateMode::kFloor;
}

/*! \brief `4·D·keys`: K and V, BF16, of `keys` positions of one KV head. */
MAC_HD constexpr int64_t gate_kv_bytes(const GateConfig& g, int64_t keys) {
  return 4 * g.head_dim * keys;
}

/*! \brief `bytes_full(m) = Hkv · 4·D·(m + 1)`: full attention's K/V of [0, m], every KV head. */
MAC_HD constexpr int64_t gate_full_bytes(const GateConfig& g, int64_t m) {
  return g.num_kv_heads * gate_kv_bytes(g, m + 1);
}

/*! \brief `Hq · 6·D`: per query head, q̃_m read and entry(m)'s q̃ and BF16 o written (as
 *  mac-bench counts them; the FP32 L is left out). Paid by every ready step that writes. */
MAC_HD constexpr int64_t gate_write_bytes(const GateConfig& g) {
  return g.num_q_heads * 6 * g.head_dim;
}

/*! \brief `Hq · min(M, m) · 2D`: the ring queries the match scans (the candidates
 *  max(0, m − M) ≤ p < m of every query head). */
MAC_HD constexpr int64_t gate_scan_bytes(const GateConfig& g, int64_t m) {
  return g.num_q_heads * (m < g.ring ? m : g.ring) * 2 * g.head_dim;
}

/*! \brief The keys one KV group reads: `Fe(E(m)) + (m + 1 − lo)`, its sinks [0, Fe(E(m))) and
 *  [lo, m], where lo is the smallest band start of its heads (E(p) on a hit, Fe(E(m)) on a
 *  miss, so a miss makes it m + 1). The two ranges are disjoint (lo ≥ Fe(E(m))). */
MAC_HD constexpr int64_t gate_group_keys(int64_t m, int64_t sink_end, int64_t lo) {
  return sink_end + (m + 1 - lo);
}

/*! \brief `bytes_mac = 4·D·Σ_g keys_g + scan(m) + write + B_fix`: a step in which the match ran,
 *  given `group_keys`, the keys of its KV groups summed (gate_group_keys). */
MAC_HD constexpr int64_t gate_mac_bytes(const GateConfig& g, int64_t m, int64_t group_keys) {
  return gate_kv_bytes(g, group_keys) + gate_scan_bytes(g, m) + gate_write_bytes(g) + g.fixed_bytes;
}

/*! \brief `bytes` of the step at m as run: gate_mac_bytes when the match ran (`matched`: the
 *  step was eligible and not gated), else full attention's K/V plus, when the request is ready,
 *  the exact entry it writes. */
MAC_HD constexpr int64_t gate_step_bytes(const GateConfig& g, int64_t m, bool matched, bool ready,
                                         int64_t group_keys) {
  return matched ? gate_mac_bytes(g, m, group_keys)
                 : gate_full_bytes(g, m) + (ready ? gate_write_bytes(g) : 0);
}

/*! \brief The least any decisions of the step at m ≥ 1 can read: every head a hit on p = m − 1,
 *  so each group reads its sinks and [E(m − 1), m]. */
MAC_HD constexpr int64_t gate_floor_keys(const GateConfig& g, int64_t m) {
  const int64_t em = prefix_end(m, g.tail);
  return g.num_kv_heads * gate_group_keys(m, sink_end(g.sinks, em), prefix_end(m - 1, g.tail));
}

/*! \brief The floor rule: MAC cannot pay at m, whatever its decisions, iff
 *  `1000 · bytes_mac(m, floor keys) ≥ μ · bytes_full(m)`. Depends on m and the parameters only. */
MAC_HD constexpr bool gate_floor(const GateConfig& g, int64_t m) {
  return kGatePerMille * gate_mac_bytes(g, m, gate_floor_keys(g, m)) >=
         g.margin * gate_full_bytes(g, m);
}

/*! \brief The gate's mode at an eligible step m (m ≥ gen_min, ready, m ≥ 1), from the state the
 *  earlier steps left: kNone when W = 0; kOff while off_left > 0; else kFloor when gate_floor(m);
 *  else kOn. An ineligible step has mode kNone and leaves the state alone. */
MAC_HD constexpr GateMode gate_mode(const GateConfig& g, const GateState& s, int64_t m) {
  if (g.window == 0) return GateMode::kNone;
  if (s.off_left > 0) return GateMode::kOff;
  return gate_floor(g, m) ? GateMode::kFloor : GateMode::kOn;
}

/*! \brief The state after a step of `mode` (docs/semantics.md §3.5). kOff counts one gated step:
 *  off_left − 1, and at 0 the gate is on again with an empty window (the probe). kOn adds the
 *  step's `hits`, `bytes_mac` and `bytes_full` to the window; at the W-th step the window closes
 *  and the gate switches off for P steps iff
 *
 *      1000 · Σ bytes_mac ≥ μ · Σ bytes_full      (MAC did not pay), or
 *      1000 · Σ hits     < h_min · Hq · W         (too few hits),
 *
 *  and the window starts empty either way. kNone and kFloor leave the state as it was. */
MAC_HD constexpr void gate_update(const GateConfig& g, GateState& s, GateMode mode, int64_t hits,
                                  int64_t bytes_mac, int64_t bytes_full) {
  if (mode == GateMode::kOff) {
    --s.off_left;
    return;
  }
  if (mode != GateMode::kOn) return;
  s.bytes_mac += bytes_mac;
  s.bytes_full += bytes_full;
  s.hits += hits;
  if (++s.steps < g.window) return;
  const bool no_pay = kGatePerMille * s.bytes_mac >= g.margin * s.bytes_full;
  const bool few_hits = kGatePerMille * s.hits < g.min_hit * g.num_q_heads * g.window;
  s = GateState{};
  if (no_pay || few_hits) s.off_left = static_cast<int32_t>(g.probe);
}

/*! \brief Whether the rule's arithmetic stays inside int64 at positions up to `max_position`:
 *  a step's bytes_mac and bytes_full are each at most full + scan + writes + B_fix (every group
 *  reading all m + 1 keys), a window sums W of them and the rule multiplies by max(1000, μ). Each
 *  of the four terms must stay below int64's largest value over 4·W·max(1000, μ), so that neither
 *  sum nor product can overflow; each term is itself checked by division before it is formed.
 *  Always true when W = 0. */
MAC_HD constexpr bool gate_fits(const GateConfig& g, int64_t max_position) {
  if (g.window == 0) return true;
  constexpr int64_t kMax = 0x7fffffffffffffff;
  const int64_t bound =
      kMax / (4 * g.window * (g.margin > kGatePerMille ? g.margin : kGatePerMille));
  const int64_t m = max_position > 1 ? max_position : 1;
  const int64_t scanned = g.ring < m ? g.ring : m;
  // a·b·c ≤ bound for a, b, c ≥ 1.
  const auto fits = [bound](int64_t a, int64_t b, int64_t c) {
    return a <= bound && b <= bound / a && c <= bound / (a * b);
  };
  return fits(g.num_kv_heads, 4 * g.head_dim, m + 1) &&
         fits(g.num_q_heads, 2 * g.head_dim, scanned > 1 ? scanned : 1) &&
         fits(g.num_q_heads, 6 * g.head_dim, 1) && g.fixed_bytes <= bound;
}

/*! \brief The gate's configuration for a layer of Hq, Hkv, D (MacParams validated first). */
GateConfig make_gate_config(const MacParams& p, int64_t num_q_heads, int64_t num_kv_heads,
                            int64_t head_dim);

/*! \brief Throws InputError naming `gate_window` unless gate_fits(g, max_position). */
void check_gate_config(const GateConfig& g, int64_t max_position);

}  // namespace mac
