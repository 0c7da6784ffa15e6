// The adaptive gate of semantics §3.5 (mac/ref/gate.hpp) and its use by the reference stepper:
// the rule's integer arithmetic at its edges, the byte model against an independent count, and
// gated steps being exactly misses of §3.
#include "drifting_layer.hpp"
#include "mac/ref/attention.hpp"
#include "mac/ref/gate.hpp"
#include "mac/ref/stepper.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

using mac::GateConfig, mac::GateMode, mac::GateState, mac::MacParams;
using mac::ref::DecodeStepper, mac::ref::LayerData, mac::ref::PolicyMiss, mac::ref::StepResult;
using mac::test::same_state;
// The shape kT, kP, kHq, kHkv, kD and drifting_layer(seed): queries that drift slowly from P
// on, so nearly every head-step hits the step before (drifting_layer.hpp).
using namespace mac::test::drift;

namespace {

// M 64, r 16, F 4, reuse from the first decode step; the gate off unless a test sets W.
MacParams params() {
  MacParams p;
  p.ring = 64;
  p.tail = 16;
  p.sinks = 4;
  p.gen_min = 0;
  return p;
}

template <typename T>
std::vector<StepResult<T>> run(const LayerData& l, const MacParams& p) {
  DecodeStepper<T> st(l, mac::test::default_scale(kD), p, mac::Variant::kSplit,
                      mac::StateStorage::kProduction);
  st.prefill(kP);
  std::vector<StepResult<T>> out;
  for (int64_t m = kP; m < kT; ++m) out.push_back(st.step(m));
  return out;
}

// Hq 4, Hkv 2, D 64, M 64, r 16, F 0; W 4, P 3, μ 1000 ‰, no minimum hit rate, B_fix 0.
GateConfig small_gate() {
  GateConfig g;
  g.window = 4;
  g.probe = 3;
  g.margin = 1000;
  g.min_hit = 0;
  g.fixed_bytes = 0;
  g.num_q_heads = 4;
  g.num_kv_heads = 2;
  g.head_dim = 64;
  g.ring = 64;
  g.tail = 16;
  g.sinks = 0;
  return g;
}

bool is_on(const GateState& s) { return s.off_left == 0; }

}  // namespace

BOOST_AUTO_TEST_SUITE(gate)

BOOST_AUTO_TEST_CASE(window_closes_at_w_switches_off_for_p_and_probes) {
  const auto g = small_gate();
  GateState s;
  // Three steps that did not pay (bytes_mac 2000 ≥ bytes_full 1000): the window is still open.
  for (int i = 1; i <= 3; ++i) {
    mac::gate_update(g, s, GateMode::kOn, 0, 2000, 1000);
    BOOST_TEST(is_on(s));
    BOOST_TEST(s.steps == i);
    BOOST_TEST(s.bytes_mac == 2000 * i);
    BOOST_TEST(s.bytes_full == 1000 * i);
  }
  // The fourth closes it: off for P = 3 steps, the sums cleared.
  mac::gate_update(g, s, GateMode::kOn, 0, 2000, 1000);
  BOOST_TEST(s.off_left == 3);
  BOOST_TEST(s.steps == 0);
  BOOST_TEST(s.bytes_mac == 0);
  BOOST_TEST(s.bytes_full == 0);
  BOOST_TEST(s.hits == 0);
  // m = 200 is past the floor of this shape (floor_rule_edge_is_at_equality): only the state
  // gates it.
  for (int i = 3; i >= 1; --i) {
    BOOST_TEST((mac::gate_mode(g, s, 200) == GateMode::kOff));
    mac::gate_update(g, s, GateMode::kOff, 0, 0, 0);  // what an off step adds is ignored
    BOOST_TEST(s.off_left == i - 1);
    BOOST_TEST(s.steps == 0);
  }
  // After P gated steps the gate probes: on, with an empty window.
  BOOST_TEST((mac::gate_mode(g, s, 200) == GateMode::kOn));
  // A window that pays keeps it on and starts the next window empty.
  for (int i = 0; i < 4; ++i) mac::gate_update(g, s, GateMode::kOn, 4, 500, 1000);
  BOOST_TEST(is_on(s));
  BOOST_TEST(s.steps == 0);
  BOOST_TEST(s.bytes_mac == 0);
  // kNone and kFloor steps leave the state alone, mid-window too.
  mac::gate_update(g, s, GateMode::kOn, 1, 700, 1000);
  const GateState before = s;
  mac::gate_update(g, s, GateMode::kNone, 9, 9000, 1);
  mac::gate_update(g, s, GateMode::kFloor, 9, 9000, 1);
  BOOST_TEST(s.steps == before.steps);
  BOOST_TEST(s.bytes_mac == before.bytes_mac);
  BOOST_TEST(s.hits == before.hits);
  BOOST_TEST(s.off_left == before.off_left);
  // W = 0: the gate never acts, whatever the state says.
  auto off = g;
  off.window = 0;
  GateState stale;
  stale.off_left = 5;
  BOOST_TEST((mac::gate_mode(off, stale, 200) == GateMode::kNone));
  BOOST_TEST((mac::gate_mode(off, GateState{}, 1) == GateMode::kNone));
}

BOOST_AUTO_TEST_CASE(margin_edge_is_at_equality) {
  // Off iff 1000·Σ bytes_mac ≥ μ·Σ bytes_full. With μ = 980 and Σ bytes_full = 4·25 000 =
  // 100 000, the edge is Σ bytes_mac = 98 000: equal switches off, one byte less stays on.
  auto g = small_gate();
  g.margin = 980;
  for (const int64_t total : {98'000, 97'999}) {
    GateState s;
    for (int i = 0; i < 3; ++i) mac::gate_update(g, s, GateMode::kOn, 4, 24'500, 25'000);
    mac::gate_update(g, s, GateMode::kOn, 4, total - 3 * 24'500, 25'000);
    BOOST_TEST(is_on(s) == (total < 98'000), total);
  }
  // μ above 1000 lets MAC cost more than full attention: μ = 1500 keeps 1.4× on, 1.5× off.
  g.margin = 1500;
  for (const int64_t per_step : {1400, 1500}) {
    GateState s;
    for (int i = 0; i < 4; ++i) mac::gate_update(g, s, GateMode::kOn, 4, per_step, 1000);
    BOOST_TEST(is_on(s) == (per_step < 1500), per_step);
  }
}

BOOST_AUTO_TEST_CASE(min_hit_edge) {
  // Off iff 1000·hits < h_min·Hq·W: h_min = 250 ‰ of Hq·W = 4·4 = 16 head-steps is 4 hits. The
  // bytes pay (500 < 1000) in both windows, so only the hit count decides.
  auto g = small_gate();
  g.min_hit = 250;
  for (const int64_t hits : {4, 3}) {
    GateState s;
    for (int i = 0; i < 3; ++i) mac::gate_update(g, s, GateMode::kOn, i == 0 ? hits : 0, 500, 1000);
    BOOST_TEST(is_on(s));  // still open
    mac::gate_update(g, s, GateMode::kOn, 0, 500, 1000);
    BOOST_TEST(is_on(s) == (hits >= 4), hits);
  }
  // h_min = 0 never switches off for hits; h_min = 1000 needs every head-step to hit.
  g.min_hit = 1000;
  GateState s;
  for (int i = 0; i < 4; ++i) mac::gate_update(g, s, GateMode::kOn, i == 3 ? 3 : 4, 500, 1000);
  BOOST_TEST(!is_on(s));
}

BOOST_AUTO_TEST_CASE(floor_rule_edge_is_at_equality) {
  // Hq 4, Hkv 2, D 64, M 64, r 16, F 0, B_fix 0. For m ≥ 64 an all-hit step at p = m − 1 reads
  // per group [E(m−1), m] = 17 keys: 2·(4·64·17) = 8704 bytes of K/V, the scan 4·64·128 =
  // 32 768, the writes 4·6·64 = 1536; 43 008 in all. Full attention reads 2·256·(m + 1), which
  // equals 43 008 at m = 83: gated there (≥), not at m = 84.
  auto g = small_gate();
  BOOST_TEST(mac::gate_floor_keys(g, 83) == 2 * 17);
  BOOST_TEST(mac::gate_mac_bytes(g, 83, mac::gate_floor_keys(g, 83)) == 43'008);
  BOOST_TEST(mac::gate_full_bytes(g, 83) == 43'008);
  BOOST_TEST(mac::gate_floor(g, 83));
  BOOST_TEST(!mac::gate_floor(g, 84));
  BOOST_TEST((mac::gate_mode(g, GateState{}, 83) == GateMode::kFloor));
  BOOST_TEST((mac::gate_mode(g, GateState{}, 84) == GateMode::kOn));
  // The state gates before the floor is asked.
  GateState off;
  off.off_left = 1;
  BOOST_TEST((mac::gate_mode(g, off, 83) == GateMode::kOff));
  // B_fix moves the edge: 512 more bytes make m = 84 gated too (43 520 ≥ 43 520), not 85.
  g.fixed_bytes = 512;
  BOOST_TEST(mac::gate_floor(g, 84));
  BOOST_TEST(!mac::gate_floor(g, 85));
  // Sinks F = 4 add 4 keys per group once E(m) ≥ 4; the start-up region E(m − 1) = 0 reads
  // [0, m] like a miss (m = 10: 11 keys).
  g.sinks = 4;
  BOOST_TEST(mac::gate_floor_keys(g, 100) == 2 * (4 + 17));
  BOOST_TEST(mac::gate_floor_keys(g, 10) == 2 * 11);
}

BOOST_AUTO_TEST_CASE(step_bytes_match_an_independent_count) {
  // The stepper's byte model against a count of the keys each KV group touches, by marking them:
  // the union over the group's heads of sinks, band and tail.
  const auto l = drifting_layer(21);
  auto p = params();
  p.refresh = 5;  // some forced misses, so groups mix hits and misses
  DecodeStepper<float> st(l, mac::test::default_scale(kD), p);
  st.prefill(kP);
  const auto& g = st.gate_config();
  int64_t mixed = 0;
  for (int64_t m = kP; m < kT; ++m) {
    const auto r = st.step(m);
    int64_t keys = 0, hits = 0;
    for (int64_t hk = 0; hk < kHkv; ++hk) {
      std::vector<bool> read(static_cast<size_t>(m + 1), false);
      int64_t group_hits = 0;
      for (int64_t h = hk * 3; h < hk * 3 + 3; ++h) {
        const auto& s = r.heads[static_cast<size_t>(h)];
        for (int64_t t = 0; t < s.sink_end; ++t) read[static_cast<size_t>(t)] = true;
        for (int64_t t = s.band_begin; t < s.band_end; ++t) read[static_cast<size_t>(t)] = true;
        for (int64_t t = s.tail_begin; t <= m; ++t) read[static_cast<size_t>(t)] = true;
        group_hits += s.hit;
      }
      for (const bool b : read) keys += b;
      hits += group_hits;
      mixed += group_hits > 0 && group_hits < 3;
    }
    BOOST_TEST(r.gate.group_keys == keys);
    BOOST_TEST(r.gate.hits == hits);
    BOOST_TEST(r.gate.bytes_full == kHkv * 4 * kD * (m + 1));
    const int64_t scan = kHq * std::min<int64_t>(64, m) * 2 * kD, write = kHq * 6 * kD;
    BOOST_TEST(r.gate.bytes == 4 * kD * keys + scan + write + g.fixed_bytes);
    BOOST_TEST((r.gate.mode == GateMode::kNone));  // the gate is off (W = 0)
  }
  BOOST_TEST(mixed > 0);  // not vacuous: groups of hits and misses were counted
}

BOOST_AUTO_TEST_CASE(gated_run_equals_every_head_forced_to_miss) {
  // B_fix 2^40: no step of this layer can pay, so the floor gates every step. Against K = 0,
  // which forces every would-be hit to miss after the match: the same outputs, entries, ranges
  // and depths bit for bit; only the reason and the match not being evaluated differ.
  const auto l = drifting_layer(22);
  auto gp = params();
  gp.gate_window = 8;
  gp.gate_fixed_bytes = mac::kGateMaxFixedBytes;
  auto kp = params();
  kp.depth_cap = 0;
  for (const bool fp64 : {false, true}) {
    int64_t would_hit = 0;
    const auto check = [&](const auto& gated, const auto& forced) {
      for (size_t i = 0; i < gated.size(); ++i) {
        BOOST_TEST((gated[i].gate.mode == GateMode::kFloor));
        BOOST_TEST(gated[i].gate.bytes == gated[i].gate.bytes_full + kHq * 6 * kD);
        for (size_t h = 0; h < kHq; ++h) {
          const auto& a = gated[i].heads[h];
          const auto& b = forced[i].heads[h];
          BOOST_TEST(a.eligible);
          BOOST_TEST(!a.hit);
          BOOST_TEST((a.policy == PolicyMiss::kGated));
          BOOST_TEST(!a.match.has_candidate);  // the match did not run
          BOOST_TEST(a.eligible == b.eligible);
          BOOST_TEST(a.hit == b.hit);
          BOOST_TEST(a.keys_read == b.keys_read);
          BOOST_TEST(a.band_begin == b.band_begin);
          BOOST_TEST(a.sink_end == b.sink_end);
          BOOST_TEST(a.tail_begin == b.tail_begin);
          BOOST_TEST(a.depth == b.depth);
          BOOST_TEST(a.wrote_entry == b.wrote_entry);
          BOOST_TEST(same_state(a.out, b.out));
          BOOST_TEST(same_state(a.entry, b.entry));
          would_hit += b.policy == PolicyMiss::kDepthCap;
        }
      }
    };
    if (fp64)
      check(run<double>(l, gp), run<double>(l, kp));
    else
      check(run<float>(l, gp), run<float>(l, kp));
    // Not vacuous: the forced run had would-be hits to turn into misses.
    BOOST_TEST(would_hit > (kT - kP) * kHq * 9 / 10);
  }
}

BOOST_AUTO_TEST_CASE(disabled_gate_equals_a_gate_that_never_acts) {
  // W = 0 against a gate that is on but cannot switch off here (μ = 10^4 ‰: only a window at
  // 10× full attention's bytes would; h_min = 0; B_fix 0 for both):
  // the same decisions and bits, and the disabled one reports kNone and never moves its state.
  const auto l = drifting_layer(23);
  auto p = params();
  p.gate_fixed_bytes = 0;
  const auto off = run<float>(l, p);
  p.gate_window = 4;
  p.gate_margin = mac::kGateMaxMargin;
  const auto idle = run<float>(l, p);
  int64_t hits = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    BOOST_TEST((off[i].gate.mode == GateMode::kNone));
    BOOST_TEST(off[i].gate.state.steps == 0);
    BOOST_TEST(off[i].gate.state.off_left == 0);
    BOOST_TEST((idle[i].gate.mode == GateMode::kOn));
    BOOST_TEST(off[i].gate.bytes == idle[i].gate.bytes);
    for (size_t h = 0; h < kHq; ++h) {
      const auto& a = off[i].heads[h];
      const auto& b = idle[i].heads[h];
      BOOST_TEST(a.hit == b.hit);
      BOOST_TEST(a.match_pos == b.match_pos);
      BOOST_TEST((a.policy == PolicyMiss::kNone));
      BOOST_TEST(same_state(a.out, b.out));
      BOOST_TEST(same_state(a.entry, b.entry));
      hits += a.hit;
    }
  }
  BOOST_TEST(hits > 0);
}

BOOST_AUTO_TEST_CASE(no_hits_turn_it_off_and_hits_keep_it_on) {
  // B_fix 0, so the floor gates nothing here (an all-hit step reads 62 208 bytes, full
  // attention 102 912 at m = 200). Random queries never hit: every window has bytes_mac =
  // full + scan + writes ≥ full, so the gate is on for W, off for P, on for W, ...
  const int64_t W = 4, P = 10;
  auto p = params();
  p.gate_window = W;
  p.gate_probe = P;
  p.gate_fixed_bytes = 0;
  const auto random = mac::test::random_layer(kT, kHq, kHkv, kD, 24);
  const auto r = run<float>(random, p);
  for (size_t i = 0; i < r.size(); ++i) {
    const bool on = static_cast<int64_t>(i) % (W + P) < W;
    BOOST_TEST((r[i].gate.mode == (on ? GateMode::kOn : GateMode::kOff)), i);
    BOOST_TEST(r[i].gate.hits == 0);
  }
  // The drifting layer hits at lag 1 nearly everywhere: every window pays, the gate stays on.
  const auto drifting = drifting_layer(24);
  const auto d = run<float>(drifting, p);
  int64_t hits = 0;
  for (const auto& s : d) {
    BOOST_TEST((s.gate.mode == GateMode::kOn));
    hits += s.gate.hits;
  }
  BOOST_TEST(hits > (kT - kP) * kHq * 9 / 10);
  // At the default B_fix (16.5 MB per step) MAC cannot pay at these contexts: the floor gates
  // every step of the same layer, and the state never moves.
  p.gate_fixed_bytes = mac::kGateFixedBytesDefault;
  for (const auto& s : run<float>(drifting, p)) {
    BOOST_TEST((s.gate.mode == GateMode::kFloor));
    BOOST_TEST(s.gate.state.steps == 0);
  }
}

BOOST_AUTO_TEST_CASE(gated_steps_write_exact_entries_and_matching_resumes_at_once) {
  // Refresh N = 2 forces half the heads to miss at every step (offsets ⌊h·2/6⌋ = 0 0 0 1 1 1),
  // so no window reaches h_min = 1000 ‰: the gate switches off at every window's end, W = 2
  // matched steps, then P = 5 gated ones. A gated step's output is exact attention and its
  // entry the exact entry of a miss; on the next window's first step the heads not due to
  // refresh hit the entry the last gated step wrote (lag 1, depth 1).
  const auto l = drifting_layer(25);
  auto p = params();
  p.gate_window = 2;
  p.gate_probe = 5;
  p.gate_min_hit = 1000;
  p.refresh = 2;
  p.gate_fixed_bytes = 0;
  DecodeStepper<double> st(l, mac::test::default_scale(kD), p, mac::Variant::kSplit,
                           mac::StateStorage::kFull);
  st.prefill(kP);
  int64_t gated = 0, resumed = 0;
  GateMode prev = GateMode::kNone;
  for (int64_t m = kP; m < kT; ++m) {
    const auto r = st.step(m);
    const bool on = (m - kP) % 7 < 2;
    BOOST_TEST((r.gate.mode == (on ? GateMode::kOn : GateMode::kOff)), m);
    for (int64_t h = 0; h < kHq; ++h) {
      const auto& hs = r.heads[static_cast<size_t>(h)];
      if (r.gate.mode == GateMode::kOff) {
        const int64_t e = mac::prefix_end<int64_t>(m, 16), fe = mac::sink_end<int64_t>(4, e);
        const auto hk = h / l.group_size();
        const auto want =
            mac::ref::attend<double>(l, hk, l.q_post_at(m, h), mac::test::default_scale(kD), fe, e);
        const auto full = mac::ref::attend<double>(l, hk, l.q_post_at(m, h),
                                                   mac::test::default_scale(kD), 0, m + 1);
        // FP64 merges of 2–3 exact pieces against one pass: a few ulps (2^-52 · few).
        BOOST_TEST((hs.entry.o - want.o).norm() <= 1e-13 * want.o.norm());
        BOOST_TEST((hs.out.o - full.o).norm() <= 1e-13 * full.o.norm());
        BOOST_TEST(hs.keys_read == m + 1);
        BOOST_TEST(st.ring().find(h, m)->depth == 0);
        ++gated;
      } else if (prev == GateMode::kOff && hs.hit) {
        // The last five entries were written by gated steps (depth 0); the nearest is the last.
        if (hs.match_pos > m - 6) BOOST_TEST(hs.depth == 1);
        resumed += hs.match_pos == m - 1;
      }
    }
    prev = r.gate.mode;
  }
  BOOST_TEST(gated > 0);
  // Every probe's first step hits at lag 1 at nearly every head not due to refresh.
  const int64_t probes = (kT - kP) / 7;
  BOOST_TEST(resumed > probes * (kHq / 2) * 8 / 10);
}

BOOST_AUTO_TEST_CASE(ineligible_steps_leave_the_state_alone) {
  // Below gen_min and not ready the gate neither acts nor counts; the window starts at gen_min.
  const auto l = drifting_layer(26);
  auto p = params();
  p.gate_window = 4;
  p.gate_fixed_bytes = 0;
  p.gen_min = kP + 3;
  DecodeStepper<float> st(l, mac::test::default_scale(kD), p);
  st.prefill(kP);
  for (int64_t m = kP; m < kP + 3; ++m) {
    const auto r = st.step(m);
    BOOST_TEST((r.gate.mode == GateMode::kNone));
    BOOST_TEST(r.gate.state.steps == 0);
    BOOST_TEST(r.gate.bytes == r.gate.bytes_full + kHq * 6 * kD);  // exact + entry writes
  }
  const auto on = st.step(kP + 3);
  BOOST_TEST((on.gate.mode == GateMode::kOn));
  BOOST_TEST(on.gate.state.steps == 1);
  const auto not_ready = st.step(kP + 4, /*ready=*/false);
  BOOST_TEST((not_ready.gate.mode == GateMode::kNone));
  BOOST_TEST(not_ready.gate.state.steps == 1);
  BOOST_TEST(not_ready.gate.bytes == not_ready.gate.bytes_full);  // no entry written
}

BOOST_AUTO_TEST_CASE(bad_gate_values_are_named) {
  auto l = mac::test::random_layer(40, 2, 1, 64, 3);
  const auto expect = [&](auto set, const std::string& needle) {
    auto p = params();
    set(p);
    try {
      DecodeStepper<float> st(l, 0.125, p);
      BOOST_ERROR("no error for " << needle);
    } catch (const mac::InputError& e) {
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  expect([](MacParams& p) { p.gate_window = -1; }, "gate_window W = -1");
  expect([](MacParams& p) { p.gate_window = mac::kGateMaxWindow + 1; }, "gate_window W = 4097");
  expect([](MacParams& p) { p.gate_probe = 0; }, "gate_probe P = 0");
  expect([](MacParams& p) { p.gate_margin = 0; }, "gate_margin = 0");
  expect([](MacParams& p) { p.gate_margin = mac::kGateMaxMargin + 1; }, "gate_margin = 10001");
  expect([](MacParams& p) { p.gate_min_hit = 1001; }, "gate_min_hit = 1001");
  expect([](MacParams& p) { p.gate_fixed_bytes = -1; }, "gate_fixed_bytes = -1");
  // The int64 bound of a window: the largest shapes the kernels run (Hq 128, Hkv 8, D 256,
  // 131 072 positions) fit the largest window, margin and B_fix; 2^16 KV heads at 2^31
  // positions do not.
  GateConfig g;
  g.window = mac::kGateMaxWindow;
  g.margin = mac::kGateMaxMargin;
  g.num_q_heads = 128;
  g.num_kv_heads = 8;
  g.head_dim = 256;
  g.fixed_bytes = mac::kGateMaxFixedBytes;
  BOOST_CHECK_NO_THROW(mac::check_gate_config(g, 131071));
  g.num_kv_heads = int64_t{1} << 16;
  BOOST_CHECK_EXCEPTION(mac::check_gate_config(g, mac::kMaxTokens - 1), mac::InputError,
                        [](const mac::InputError& e) {
                          return std::string(e.what()).find("gate_window W = 4096") !=
                                 std::string::npos;
                        });
  g.window = 0;  // off: nothing to bound
  BOOST_CHECK_NO_THROW(mac::check_gate_config(g, mac::kMaxTokens - 1));
}

BOOST_AUTO_TEST_SUITE_END()
