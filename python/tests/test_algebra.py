"""The state algebra, the canonical distance, BF16 rounding and RoPE from Python, against
direct numpy evaluations of the formulas they implement."""
import numpy as np
import pytest

import macattn

EPS32 = np.finfo(np.float32).eps
EPS64 = np.finfo(np.float64).eps


def exact_state(logits, v):
    """(o, L) of a key set in FP64 from its logits s·q·k_t and values: L = ln Σ e^x,
    o = Σ e^{x-L} v."""
    mu = logits.max()
    w = np.exp(logits - mu)
    L = mu + np.log(w.sum())
    return (np.exp(logits - L)[:, None] * v).sum(0), L


@pytest.fixture
def keys():
    rng = np.random.default_rng(20261203)  # fixed seed
    return rng.normal(size=96) * 3.0, rng.normal(size=(96, 64))


def test_merge_of_two_halves_is_the_whole(keys):
    x, v = keys
    (oa, la), (ob, lb), (ot, lt) = exact_state(x[:40], v[:40]), exact_state(x[40:], v[40:]), \
        exact_state(x, v)
    o, l = macattn.merge(oa, la, ob, lb)
    # A handful of FP64 roundings per element (exp, two products, a sum): 16 eps relative.
    assert abs(l - lt) <= 16 * EPS64 * abs(lt)
    assert np.linalg.norm(o - ot) <= 16 * EPS64 * np.linalg.norm(ot)
    # float32 states give float32 results.
    o32, l32 = macattn.merge(oa.astype(np.float32), np.float32(la), ob.astype(np.float32),
                             np.float32(lb))
    assert o32.dtype == np.float32 and l32.dtype == np.float32


def test_empty_states_are_ignored_never_nan():
    o = np.arange(64, dtype=np.float64)
    e = np.zeros(64)
    r = macattn.merge(o, 2.5, e, -np.inf)
    np.testing.assert_array_equal(r[0], o)
    assert r[1] == 2.5
    r = macattn.merge(e, np.nan, o, 1.0)  # NaN L counts as empty (docs/semantics.md §2)
    np.testing.assert_array_equal(r[0], o)
    r = macattn.merge(e, -np.inf, e, -np.inf)
    assert np.isneginf(r[1]) and not np.isnan(r[0]).any()


def test_merge_takes_batches_of_any_leading_shape(keys):
    x, v = keys
    oa, la = exact_state(x[:10], v[:10])
    ob, lb = exact_state(x[10:], v[10:])
    O1 = np.broadcast_to(oa, (2, 3, 64)).copy()
    O2 = np.broadcast_to(ob, (2, 3, 64)).copy()
    o, l = macattn.merge(O1, np.full((2, 3), la), O2, np.full((2, 3), lb))
    assert o.shape == (2, 3, 64) and l.shape == (2, 3)
    single = macattn.merge(oa, la, ob, lb)
    np.testing.assert_array_equal(o[1, 2], single[0])


def test_downdate_inverts_merge_and_reports_its_condition(keys):
    x, v = keys
    (ow, lw), (ot, lt) = exact_state(x[:30], v[:30]), exact_state(x, v)
    (orest, lrest) = exact_state(x[30:], v[30:])
    o, l, cond, emptied = macattn.downdate(ot, lt, ow, lw)
    t = np.exp(lw - lt)
    assert cond == pytest.approx(1 / (1 - t), rel=1e-12)
    assert not emptied
    # Cancellation costs log10(cond) digits: the error bound scales with the condition.
    assert abs(l - lrest) <= 32 * EPS64 * cond * max(1.0, abs(lrest))
    assert np.linalg.norm(o - orest) <= 32 * EPS64 * cond * np.linalg.norm(orest)
    # W holding all the mass empties the state (condition infinite).
    o, l, cond, emptied = macattn.downdate(ot, lt, ot, lt)
    assert emptied and np.isneginf(l) and np.isinf(cond)
    # Removing an empty W changes nothing.
    o, l, cond, emptied = macattn.downdate(ot, lt, np.zeros(64), -np.inf)
    np.testing.assert_array_equal(o, ot)
    assert l == lt and cond == 1 and not emptied


def lane_order_d2(a, b):
    """docs/semantics.md §3.1 in numpy: D/8 lanes each summing 8 squared differences in order with a
    fused multiply-add, then an xor butterfly. fmaf is emulated in FP64: diff² of a float32
    difference is exact there (2·24 < 53 bits); its sum with the float32 accumulator is exact
    too unless the two span more than 53 bits, and then rounding to FP64 and to float32
    differs from one rounding only where the FP64 value falls on a float32 tie (about 2^-29
    of such sums). The seeds are fixed, so a pass is a pass for good."""
    D = a.shape[-1]
    acc = np.zeros(D // 8, np.float32)
    diff = (a.astype(np.float32) - b.astype(np.float32)).astype(np.float64)
    for lane in range(D // 8):
        s = np.float32(0)
        for i in range(8 * lane, 8 * lane + 8):
            s = np.float32(diff[i] * diff[i] + np.float64(s))
        acc[lane] = s
    off = D // 16
    while off >= 1:
        acc = np.array([np.float32(acc[l] + acc[l ^ off]) for l in range(D // 8)], np.float32)
        off //= 2
    return acc[0]


@pytest.mark.parametrize("D", [64, 128, 256])
def test_canonical_d2_follows_the_lane_order(D):
    rng = np.random.default_rng(D)
    a = macattn.round_bf16(rng.normal(size=(20, D)).astype(np.float32))
    b = macattn.round_bf16(rng.normal(size=(20, D)).astype(np.float32))
    got = macattn.canonical_d2(a, b)
    assert got.dtype == np.float32 and got.shape == (20,)
    for i in range(20):
        assert got[i] == lane_order_d2(a[i], b[i])
    np.testing.assert_allclose(macattn.d2_fp64(a, b), ((a.astype(np.float64) - b) ** 2).sum(-1),
                               rtol=4 * EPS64 * D)
    # One pair gives a scalar; the distance is symmetric bit for bit (diff² is).
    assert macattn.canonical_d2(a[0], b[0]) == macattn.canonical_d2(b[0], a[0]) == got[0]
    # thr = 2·D·(1-τ)² rounded once to FP32.
    assert macattn.match_threshold(D, 0.45) == np.float32(2 * D * 0.55 ** 2)


def test_round_bf16_is_round_to_nearest_even():
    one = np.float32(1.0)
    half_ulp = np.float32(2.0 ** -8)  # BF16 keeps 7 fraction bits: ulp(1) = 2^-7
    x = np.array([one + half_ulp, one + 3 * half_ulp, one + 1.5 * half_ulp, -(one + half_ulp),
                  np.inf, np.nan, 0.0], np.float32)
    r = macattn.round_bf16(x)
    np.testing.assert_array_equal(r[:5], [1.0, 1.0 + 2 ** -6, 1.0 + 2 ** -7, -1.0, np.inf])
    assert np.isnan(r[5]) and r[6] == 0
    assert macattn.is_bf16_exact(r[:5]).all() and not macattn.is_bf16_exact(x[:1]).any()
    rng = np.random.default_rng(7)
    y = rng.normal(size=10000).astype(np.float32) * 100
    u = y.view(np.uint32).astype(np.uint64)  # the same rule on the bits
    expect = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    np.testing.assert_array_equal(macattn.round_bf16(y), expect)
    bits = macattn.bf16_bits(expect)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(macattn.bf16_from_bits(bits), expect)


@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_rope_rotates_pairs(style):
    rng = np.random.default_rng(3)
    D, theta = 64, 10000.0
    x = rng.normal(size=(5, 2, D)).astype(np.float32)
    pos = np.arange(5)[:, None].repeat(2, 1) * 37
    r = macattn.rope(x, pos, theta, style)
    i = np.arange(D // 2)
    ang = pos[..., None] * theta ** (-2.0 * i / D)
    a_idx, b_idx = (i, i + D // 2) if style == "neox" else (2 * i, 2 * i + 1)
    a, b = x[..., a_idx].astype(np.float64), x[..., b_idx].astype(np.float64)
    expect = np.empty(x.shape, np.float64)
    expect[..., a_idx] = a * np.cos(ang) - b * np.sin(ang)
    expect[..., b_idx] = a * np.sin(ang) + b * np.cos(ang)
    # Evaluated in FP64 and rounded once to float32: within half an ulp of float32.
    np.testing.assert_allclose(r, expect, rtol=EPS32, atol=EPS32 * np.abs(expect).max())
    np.testing.assert_array_equal(macattn.rope(x, 0, theta, style), x)  # position 0
