"""Trace and run-dump files from Python: what is written is read back identically, and a
failed write leaves no file."""
import numpy as np
import pytest

import macattn


def test_trace_round_trip(golden, tmp_path):
    path = tmp_path / "t.h5"
    layers = [golden.layers[1], golden.layers[0]]
    macattn.write_trace(str(path), golden.meta, layers, compress=False,
                        extra_attrs={"note": "round trip"})
    back = macattn.read_trace(path)
    assert back.meta.num_layers == 2 and back.meta.source == golden.meta.source
    assert back.meta.softmax_scale == golden.meta.softmax_scale
    for a, b in zip(back.layers, layers):
        for f in ("q_pre", "q_post", "k", "v"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    one = macattn.read_trace_layer(str(path), 1, max_tokens=10)
    assert one.tokens == 10
    np.testing.assert_array_equal(one.k, golden.layers[0].k[:10])
    assert macattn.read_trace_meta(str(path)).head_dim == 64


def test_layer_from_arrays_is_a_read_only_copy(golden):
    L = golden.layers[0]
    q = np.array(L.q_pre)
    made = macattn.Layer(q, L.q_post, L.k, L.v)
    q[0, 0, 0] = 123.0  # the layer holds its own copy
    assert made.q_pre[0, 0, 0] == L.q_pre[0, 0, 0]
    assert not made.q_pre.flags.writeable
    assert (made.tokens, made.num_q_heads, made.num_kv_heads, made.head_dim, made.group_size) \
        == (384, 4, 2, 64, 2)
    # Non-contiguous views are accepted (copied in C order).
    strided = macattn.Layer(L.q_pre[::2], L.q_post[::2], L.k[::2], L.v[::2])
    np.testing.assert_array_equal(strided.k, L.k[::2])


def test_run_dump_round_trip(golden, tmp_path):
    cfg = macattn.StepperConfig(params=macattn.MacParams(gen_min=0, ring=64, tail=16),
                                precision="fp32", prefill=300)
    d = macattn.simulate(golden.layers[0], golden.meta.softmax_scale, cfg, steps=20,
                         layer_index=0, trace_source="synth_small")
    path = tmp_path / "r.h5"
    macattn.write_run_dump(str(path), d)
    e = macattn.read_run_dump(str(path))
    for f in ("position", "hit", "match_pos", "d2", "out", "lse", "exact_out", "exact_lse",
              "kv_tokens_read"):
        np.testing.assert_array_equal(getattr(e, f), getattr(d, f), err_msg=f)
    assert e.config.params.ring == 64 and e.config.precision == "fp32" and e.config.prefill == 300
    assert e.trace_source == "synth_small"


def test_a_failed_write_leaves_nothing(golden, tmp_path):
    d = macattn.RunDump(2, 4, 64)
    missing = tmp_path / "no" / "such" / "dir" / "r.h5"
    with pytest.raises(macattn.InputError, match="r.h5"):
        macattn.write_run_dump(str(missing), d)
    assert not missing.parent.exists()
    with pytest.raises(macattn.InputError):
        macattn.write_trace(str(tmp_path / "t.h5"), golden.meta, [None])
    assert list(tmp_path.iterdir()) == []
