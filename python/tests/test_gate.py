"""The adaptive gate (docs/semantics.md §3.5) from Python: MacParams carries its five fields, a
Stepper with the gate on decides, computes and gates every step as mac-sim with the same flags
does (its run dump and its JSON summary, bit for bit), and a gated head reports the gated
reason."""
import json
import subprocess

import numpy as np
import pytest

import macattn
from conftest import GOLDEN_TRACE, ROOT

REAL_TRACE = ROOT / "data" / "real" / "smollm2_4layers_512.h5"
NONE, ON, OFF, FLOOR = 0, 1, 2, 3  # Step.gate_mode, mac-sim's JSON step_mode
GATED = 3  # Step.policy of a head the gate ran without the match
GATE_FLAGS = dict(gate_window="--gate-window", gate_probe="--gate-probe",
                  gate_margin="--gate-margin", gate_min_hit="--gate-min-hit",
                  gate_fixed_bytes="--gate-fixed-bytes")

# Two runs in which the gate takes every mode. The golden trace at a B_fix where the floor holds
# for the first eligible steps, with gen_min past P so that the first steps are not eligible
# (mode none) and a minimum hit rate; the real fixture's layer 2 (model layer 20, about half
# its head-steps hit in mac-sim's built-in job) at B_fix 0, where windows switch the gate off.
GOLDEN = dict(trace=GOLDEN_TRACE, layer=0, prefill=256, steps=128, gen_min=260, ring=128,
              tail=32, sinks=0, tau=0.45, precision="fp32", storage="production",
              variant="split", prefill_mode="direct", gate_window=4, gate_probe=8,
              gate_margin=1200, gate_min_hit=100, gate_fixed_bytes=80000)
REAL = dict(trace=REAL_TRACE, layer=2, prefill=256, steps=256, gen_min=256, ring=256, tail=32,
            sinks=0, tau=0.45, precision="fp32", storage="production", variant="split",
            prefill_mode="direct", gate_window=8, gate_probe=16, gate_margin=1100,
            gate_min_hit=0, gate_fixed_bytes=0)


def params_of(c):
    return macattn.MacParams(tau=c["tau"], ring=c["ring"], tail=c["tail"], sinks=c["sinks"],
                             gen_min=c["gen_min"], **{k: c[k] for k in GATE_FLAGS})


def test_mac_params_carry_the_gate_fields():
    p = macattn.MacParams()
    assert (p.gate_window, p.gate_probe, p.gate_margin, p.gate_min_hit, p.gate_fixed_bytes) == \
        (0, 256, 1000, 0, 16_500_000)  # mac/ref/common.hpp's defaults: the gate off
    q = params_of(GOLDEN)
    for k in GATE_FLAGS:
        assert getattr(q, k) == GOLDEN[k], k
        assert f"{k}={GOLDEN[k]}" in repr(q), repr(q)
    q.validate()
    for field, bad in [("gate_window", 4097), ("gate_probe", 0), ("gate_margin", 10001),
                       ("gate_min_hit", -1), ("gate_fixed_bytes", (1 << 34) + 1)]:
        r = macattn.MacParams(**{field: bad})
        with pytest.raises(macattn.InputError, match=field):
            r.validate()


@pytest.mark.parametrize("c", [GOLDEN, REAL], ids=["golden", "real-fixture"])
def test_gated_stepper_equals_mac_sim_bit_for_bit(mac_sim, tmp_path, c):
    dump_path, json_path = tmp_path / "sim.h5", tmp_path / "sim.json"
    cmd = [mac_sim, "--quiet", "--trace", str(c["trace"]), "--layer", str(c["layer"]),
           "--prefill", str(c["prefill"]), "--steps", str(c["steps"]),
           "--gen-min", str(c["gen_min"]), "--ring", str(c["ring"]), "--tail", str(c["tail"]),
           "--sinks", str(c["sinks"]), "--tau", repr(c["tau"]), "--precision", c["precision"],
           "--storage", c["storage"], "--variant", c["variant"],
           "--prefill-mode", c["prefill_mode"], "--dump", str(dump_path), "--json",
           str(json_path)]
    for k, flag in GATE_FLAGS.items():
        cmd += [flag, str(c[k])]
    subprocess.run(cmd, check=True, capture_output=True)
    sim = macattn.read_run_dump(str(dump_path))
    gate = json.loads(json_path.read_text())["layers"][0]["gate"]
    for k in GATE_FLAGS:  # the dump echoes the gate's parameters
        assert getattr(sim.config.params, k) == c[k], k

    trace = macattn.read_trace(c["trace"])
    cfg = macattn.StepperConfig(params=params_of(c), variant=c["variant"], storage=c["storage"],
                                prefill_mode=c["prefill_mode"], precision=c["precision"],
                                prefill=c["prefill"])
    steps = []
    d = macattn.simulate(trace.layers[c["layer"]], trace.meta.softmax_scale, cfg,
                         steps=c["steps"], layer_index=c["layer"],
                         trace_source=trace.meta.source,
                         on_step=lambda st, _: steps.append(st))
    for f in ["position", "hit", "match_pos", "d2", "kv_tokens_read", "out", "lse", "exact_out",
              "exact_lse"]:
        np.testing.assert_array_equal(getattr(d, f), getattr(sim, f), err_msg=f)

    mode = np.array([s.gate_mode for s in steps])
    np.testing.assert_array_equal(mode, gate["step_mode"])
    np.testing.assert_array_equal([s.gate_hits for s in steps], gate["step_hits"])
    np.testing.assert_array_equal([s.gate_bytes for s in steps], gate["step_bytes"])
    assert {ON, OFF, FLOOR} <= set(mode.tolist())  # the run exercises every gated mode
    assert (gate["steps_on"], gate["steps_off"], gate["steps_floor"]) == \
        tuple(int((mode == k).sum()) for k in (ON, OFF, FLOOR))
    assert d.hit[mode == ON].any()  # the matched steps reuse

    hq, dim = d.num_q_heads, d.head_dim
    nkv = trace.layers[c["layer"]].num_kv_heads
    for s in steps:
        m = s.position
        gated = s.gate_mode in (OFF, FLOOR)
        assert s.gated == gated
        assert s.gate_hits == int(s.hit.sum())
        assert s.gate_bytes_full == nkv * 4 * dim * (m + 1)  # full attention's K/V (§3.5)
        if gated:
            # Every head a miss for the gate's reason: no candidate searched, whole context.
            np.testing.assert_array_equal(s.policy, np.full(hq, GATED, np.int8))
            assert not s.hit.any() and not s.has_candidate.any() and np.isnan(s.d2).all()
            np.testing.assert_array_equal(s.keys_read, np.full(hq, m + 1))
            assert s.wrote_entry.all() and (s.depth == 0).all()
            # Ready and gated: full attention's bytes plus the entry writes, Hq·6D.
            assert s.gate_bytes == s.gate_bytes_full + hq * 6 * dim
        else:
            assert (s.policy != GATED).all()
        if s.gate_mode == NONE:
            assert not s.eligible.any() and m < c["gen_min"]  # W > 0 in both runs
    # The state after each step: off_left counts the gated steps of a window's probe down,
    # the window's sums are those of its on steps.
    for a, b in zip(steps, steps[1:]):
        sa, sb = a.gate_state, b.gate_state
        if b.gate_mode == OFF:
            assert sb["off_left"] == sa["off_left"] - 1
        elif b.gate_mode == ON and sb["steps"] > 0:
            assert sb["steps"] == sa["steps"] + 1
            assert sb["hits"] == sa["hits"] + b.gate_hits
            assert sb["bytes_mac"] == sa["bytes_mac"] + b.gate_bytes
            assert sb["bytes_full"] == sa["bytes_full"] + b.gate_bytes_full
        else:
            assert sb == sa or b.gate_mode == ON  # none and floor leave the state alone


def test_stepper_reports_the_gate_state_it_steps_from(golden):
    """Stepper.gate_state is the state the last Step left; zero before the first."""
    c = GOLDEN
    st = macattn.Stepper(golden.layers[0], golden.meta.softmax_scale, params_of(c))
    st.prefill(c["prefill"])
    assert st.gate_state == dict(bytes_mac=0, bytes_full=0, hits=0, steps=0, off_left=0)
    for m in range(c["prefill"], c["prefill"] + 40):
        s = st.step(m)
        assert st.gate_state == s.gate_state
    assert s.gate_mode != NONE
