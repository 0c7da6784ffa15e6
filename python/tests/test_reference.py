"""The Python Stepper against the C++ reference: the golden run dump, a fresh mac-sim run of
the same configuration (bit for bit), and its incremental mode against its trace mode."""
import subprocess

import numpy as np
import pytest

import macattn

# The golden dump's configuration (data/README.md gives the mac-sim command that wrote it).
GOLDEN = dict(layer=0, prefill=256, steps=128, gen_min=0, ring=128, tail=32, sinks=0, tau=0.45,
              precision="fp64", storage="full", variant="split", prefill_mode="direct")
# Every other switch turned: FP32, production ring storage, the downdate forms, sinks.
OTHER = dict(layer=1, prefill=200, steps=100, gen_min=0, ring=64, tail=16, sinks=4, tau=0.5,
             precision="fp32", storage="production", variant="downdate", prefill_mode="downdate")


def config_of(c):
    return macattn.StepperConfig(
        params=macattn.MacParams(tau=c["tau"], ring=c["ring"], tail=c["tail"], sinks=c["sinks"],
                                 gen_min=c["gen_min"]),
        variant=c["variant"], storage=c["storage"], prefill_mode=c["prefill_mode"],
        precision=c["precision"], prefill=c["prefill"])


def run_python(trace, c):
    return macattn.simulate(trace.layers[c["layer"]], trace.meta.softmax_scale, config_of(c),
                            steps=c["steps"], layer_index=c["layer"],
                            trace_source=trace.meta.source)


FIELDS = ["position", "hit", "match_pos", "d2", "kv_tokens_read", "out", "lse", "exact_out",
          "exact_lse"]


def test_reproduces_the_golden_run_dump(golden, golden_run):
    """Decisions depend only on the canonical FP32 distance: identical bit for bit. The FP64
    outputs were written on another machine, whose vector units may sum in another order:
    within 1e-12 relative, as tests/tools/test_sim.cpp allows the C++ run."""
    d = run_python(golden, GOLDEN)
    g = golden_run
    assert g.steps == d.steps == 128
    for f in ["position", "hit", "match_pos", "kv_tokens_read"]:
        np.testing.assert_array_equal(getattr(d, f), getattr(g, f), err_msg=f)
    np.testing.assert_array_equal(d.d2, g.d2)  # NaN where no candidate, in both
    assert 0 < d.hit.sum() < d.hit.size
    rel = np.linalg.norm(d.out - g.out, axis=-1) / np.linalg.norm(g.out, axis=-1)
    assert rel.max() < 1e-12
    assert np.abs(d.lse - g.lse).max() < 1e-12
    rel_e = np.linalg.norm(d.exact_out - g.exact_out, axis=-1) / np.linalg.norm(g.exact_out, axis=-1)
    assert rel_e.max() < 1e-13
    assert d.config.params.ring == g.config.params.ring and d.config.precision == "fp64"


@pytest.mark.parametrize("c", [GOLDEN, OTHER], ids=["golden-config", "fp32-downdate-sinks"])
def test_equals_a_fresh_mac_sim_run_bit_for_bit(golden, mac_sim, tmp_path, c):
    """The same configuration through mac-sim (built from the same sources by CMake) and
    through macattn.simulate: every dataset of the two run dumps is identical."""
    path = tmp_path / "sim.h5"
    cmd = [mac_sim, "--quiet", "--trace", str(_trace_path()),
           "--layer", str(c["layer"]), "--prefill", str(c["prefill"]), "--steps", str(c["steps"]),
           "--gen-min", str(c["gen_min"]), "--ring", str(c["ring"]), "--tail", str(c["tail"]),
           "--sinks", str(c["sinks"]), "--tau", repr(c["tau"]), "--precision", c["precision"],
           "--storage", c["storage"], "--variant", c["variant"], "--prefill-mode",
           c["prefill_mode"], "--dump", str(path)]
    subprocess.run(cmd, check=True, capture_output=True)
    sim = macattn.read_run_dump(str(path))
    d = run_python(golden, c)
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(d, f), getattr(sim, f), err_msg=f)
    assert 0 < d.hit.sum() < d.hit.size
    # What the dump echoes of the configuration.
    assert (sim.config.variant, sim.config.storage, sim.config.precision) == \
        (d.config.variant, d.config.storage, d.config.precision)


def _trace_path():
    from conftest import GOLDEN_TRACE
    return GOLDEN_TRACE


STEP_FIELDS = ["eligible", "hit", "has_candidate", "best_pos", "match_pos", "d2", "d2_fp64",
               "margin", "below_threshold", "band_begin", "band_end", "sink_end", "tail_begin",
               "keys_read", "depth", "wrote_entry"]
STATES = ["prefix", "band", "sink", "tail", "entry", "out"]


def assert_steps_equal(a, b):
    assert a.position == b.position
    for f in STEP_FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    for s in STATES:
        for x, y in zip(getattr(a, s), getattr(b, s)):
            np.testing.assert_array_equal(x, y, err_msg=s)


def test_incremental_mode_equals_trace_mode(golden):
    """A model's loop appends q̃, q, k, v position by position into storage allocated for
    max_tokens up front; the results are those of the same stepper over the whole layer."""
    c = OTHER
    layer, scale = golden.layers[c["layer"]], golden.meta.softmax_scale
    cfg = config_of(c)
    ref = macattn.Stepper(layer, scale, cfg.params, variant=c["variant"], storage=c["storage"],
                          precision=c["precision"])
    inc = macattn.Stepper.incremental(layer.num_q_heads, layer.num_kv_heads, layer.head_dim,
                                      max_tokens=c["prefill"] + c["steps"], softmax_scale=scale,
                                      params=cfg.params, variant=c["variant"],
                                      storage=c["storage"], precision=c["precision"])
    P = c["prefill"]
    assert inc.append(layer.q_pre[:P], layer.q_post[:P], layer.k[:P], layer.v[:P]) == 0
    assert inc.tokens == P
    ref.prefill(P, c["prefill_mode"])
    inc.prefill(mode=c["prefill_mode"])  # P defaults to every position held
    for m in range(P, P + c["steps"]):
        # One position as [Hq, D] / [Hkv, D]; float64 copies are accepted (their values are
        # BF16-exact), so the storage is filled from a fresh array each time.
        assert inc.append(layer.q_pre[m].astype(np.float64), layer.q_post[m], layer.k[m],
                          layer.v[m]) == m
        assert_steps_equal(inc.step(), ref.step(m))
    assert inc.tokens == inc.max_tokens
    np.testing.assert_array_equal(inc.layer.k, layer.k[:inc.tokens])
    # Every ring entry still points at the q̃ it was written with.
    for h in range(layer.num_q_heads):
        for p in range(inc.tokens - c["ring"], inc.tokens):
            e, f = inc.ring_entry(h, p), ref.ring_entry(h, p)
            np.testing.assert_array_equal(e["q_pre"], layer.q_pre[p, h])
            np.testing.assert_array_equal(e["o"], f["o"])
            assert e["lse"] == f["lse"] and e["depth"] == f["depth"]


def test_stage_states_compose_to_the_output(golden):
    """The stage states a Step exposes are the ones the output was built from: out =
    ((prefix ⊕ band) ⊕ sink) ⊕ tail and, split variant with full storage, entry = prefix ⊕ band,
    bit for bit (the same ⊕ in the same order)."""
    layer, scale = golden.layers[0], golden.meta.softmax_scale
    st = macattn.Stepper(layer, scale, macattn.MacParams(gen_min=0, ring=128, tail=32, sinks=3),
                         storage="full", precision="fp64")
    st.prefill(256)
    seen_hit = seen_miss = False
    for m in range(256, 320):
        s = st.step(m)
        cached = macattn.merge(*s.prefix, *s.band)
        out = macattn.merge(*macattn.merge(*cached, *s.sink), *s.tail)
        np.testing.assert_array_equal(out[0], s.out[0])
        np.testing.assert_array_equal(out[1], s.out[1])
        np.testing.assert_array_equal(cached[0], s.entry[0])
        np.testing.assert_array_equal(cached[1], s.entry[1])
        # The ranges of semantics §3: band [E(p), E(m)) on a hit, tail [E(m), m], sinks [0, F).
        Em = max(0, m + 1 - 32)
        assert (s.band_end == Em).all() and (s.tail_begin == Em).all()
        assert (s.sink_end == min(3, Em)).all()
        hit = s.hit
        np.testing.assert_array_equal(s.band_begin[hit], np.maximum(0, s.match_pos[hit] + 1 - 32))
        np.testing.assert_array_equal(s.keys_read, (s.band_end - s.band_begin) + s.sink_end +
                                      (m + 1 - s.tail_begin))
        assert np.isneginf(s.prefix[1][~hit]).all()
        # The match: best_pos is the argmin of canonical d2 over the ring's candidates.
        h = 0
        if s.eligible[h]:
            cands = np.arange(max(0, m - 128), m)
            d2 = macattn.canonical_d2(np.repeat(layer.q_pre[m, h][None], len(cands), 0),
                                      layer.q_pre[cands, h])
            assert s.best_pos[h] == cands[np.argmin(d2)]
            assert s.d2[h] == d2.min()
            assert s.below_threshold[h] == (s.d2[h] < s.threshold)
        seen_hit |= hit.any()
        seen_miss |= (~hit).any()
    assert seen_hit and seen_miss
    assert s.threshold == macattn.match_threshold(64, 0.45)


def test_not_ready_is_an_exact_miss_writing_nothing(golden):
    layer, scale = golden.layers[0], golden.meta.softmax_scale
    st = macattn.Stepper(layer, scale, macattn.MacParams(gen_min=0, ring=128, tail=32))
    st.prefill(256)
    s = st.step(256, ready=False)
    assert not s.eligible.any() and not s.hit.any() and not s.wrote_entry.any()
    assert np.isneginf(s.entry[1]).all()
    assert st.ring_entry(0, 256) is None
    np.testing.assert_array_equal(s.keys_read, np.full(4, 257))


def test_oracle_judges_the_stepper(golden):
    """The FP64 oracle of the stepper's own decisions is within FP32 rounding of the FP32
    stepper (each of the ~300-key softmax sums loses at most a few ulp per key block: 1e-5
    relative is ~100 ulp of float32), and its exact value equals full attention."""
    layer, scale = golden.layers[0], golden.meta.softmax_scale
    params = macattn.MacParams(gen_min=0, ring=128, tail=32)
    st = macattn.Stepper(layer, scale, params, storage="full")
    st.prefill(256)
    orc = macattn.oracle.MacOracle(layer, scale, params, 256)
    for m in range(256, 280):
        s = st.step(m)
        o = orc.step(m, s.hit, s.match_pos)
        np.testing.assert_array_equal(o.hit, s.hit)
        np.testing.assert_array_equal(o.keys_read, s.keys_read)
        rel = np.linalg.norm(s.out[0] - o.out[0], axis=1) / np.linalg.norm(o.out[0], axis=1)
        assert rel.max() < 1e-5
        full_o, full_l = macattn.oracle.full_attention(layer, scale, m)
        np.testing.assert_allclose(o.exact[0], full_o, rtol=0, atol=1e-14)
        np.testing.assert_allclose(o.exact[1], full_l, rtol=1e-15)
    e_o, e_l = orc.entry(0, 279)
    assert e_o.shape == (64,) and np.isfinite(e_l)
    o1, l1 = macattn.oracle.attend(layer, 0, layer.q_post[279, 0], scale, 0, 280)
    np.testing.assert_allclose(o1, full_o[0], rtol=0, atol=1e-14)
