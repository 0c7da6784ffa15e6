#!/usr/bin/env python3
"""A MAC decode step (semantics §3) in pure numpy, run over a mac-verify export with macv_files.

The file protocol's worked example and its CTest: attention in float64, the canonical FP32
match of semantics §3.1 (fmaf lanes and xor butterfly, emulated exactly), FP32 output and ring.
Export with caps declaring `out_dtype = f32`, `ring_o_dtype = f32`, `reports_keys_read = 1`,
`tight_tolerances = 1` (tests/verification/file_protocol.sh does). An export whose caps declare
`decisions = 2` (with `writes_ring = 0`) runs it as a plain decode kernel instead: exact
attention attn(q_m, [0, m]) per step, no ring, no decisions.

Usage: numpy_reference_kernel.py EXPORT_DIR [OUTPUTS_DIR]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import macv_files  # noqa: E402


def fmaf(x, y, z):
    """float32 fused multiply-add x·y + z, correctly rounded: the product is exact in float64,
    the sum is computed in float64 rounded to odd (TwoSum gives its exact error), and rounding
    that to float32 is then correct (53 ≥ 24 + 2 bits)."""
    p = x.astype(np.float64) * y.astype(np.float64)
    z64 = z.astype(np.float64)
    s = p + z64
    bb = s - p
    err = (p - (s - bb)) + (z64 - bb)
    even = (s.view(np.int64) & 1) == 0
    s = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def canonical_d2(q, cand):
    """Canonical FP32 d2 of q [D] to each row of cand [N, D] (docs/semantics.md §3.1)."""
    n, d = cand.shape
    diff = (q[None, :] - cand).astype(np.float32).reshape(n, d // 8, 8)
    acc = np.zeros((n, d // 8), np.float32)
    for i in range(8):
        acc = fmaf(diff[:, :, i], diff[:, :, i], acc)
    lanes = np.arange(d // 8)
    off = d // 16
    while off >= 1:
        acc = (acc + acc[:, lanes ^ off]).astype(np.float32)
        off //= 2
    return acc[:, 0]


def attend(q, k, v, scale):
    """(o, L) of attention over keys k [T, D] and values v [T, D] (T may be 0: empty)."""
    if len(k) == 0:
        return np.zeros(q.shape), -np.inf
    logits = scale * (k @ q)
    mx = logits.max()
    w = np.exp(logits - mx)
    return (w @ v) / w.sum(), mx + np.log(w.sum())


def merge(a, b):
    """a ⊕ b of two states (o, L); an empty side (L = -inf) leaves the other."""
    (oa, la), (ob, lb) = a, b
    if not la > -np.inf:
        return b
    if not lb > -np.inf:
        return a
    mu = max(la, lb)
    L = mu + np.log(np.exp(la - mu) + np.exp(lb - mu))
    return np.exp(la - L) * oa + np.exp(lb - L) * ob, L


def step(case, st):
    """One decode step of every request and head, written into st (macv_files.Step)."""
    M, r, F, G = case.ring, case.tail, case.sinks, case.num_q_heads // case.num_kv_heads
    E = lambda p: max(0, p + 1 - r)  # noqa: E731
    # A plain decode kernel (decisions = 2); a caller's own case object may not say (MAC).
    plain = getattr(case, "decisions", macv_files.DECISIONS_REPORTED) == macv_files.DECISIONS_EXACT
    for b in range(case.batch):
        m, ready = int(st.position[b]), bool(st.ready[b])
        pages = st.page_table[b, np.arange(m + 1) // case.page_size]
        rows = np.arange(m + 1) % case.page_size
        if case.kv_layout == "NHD":
            K, V = st.k_cache[pages, rows], st.v_cache[pages, rows]  # [m+1, Hkv, D]
        else:
            K, V = st.k_cache[pages, :, rows], st.v_cache[pages, :, rows]
        K, V = K.astype(np.float64), V.astype(np.float64)
        Em = E(m)
        Fem = min(F, Em)
        eligible = m >= case.gen_min and ready and m >= 1
        for h in range(case.num_q_heads):
            k, v, q = K[:, h // G], V[:, h // G], st.q[b, h].astype(np.float64)
            if plain:
                st.o[b, h], st.lse[b, h] = attend(q, k, v, case.softmax_scale)
                st.keys_read[b, h] = m + 1
                continue
            best, hit, prefix = -1, False, (np.zeros(case.head_dim), -np.inf)
            if eligible:
                cand = np.arange(max(0, m - M), m)
                cand = cand[st.ring_pos[b, h, cand % M] == cand]  # slots that hold them
                if len(cand):
                    d2 = canonical_d2(st.q_tilde[b, h], st.ring_q[b, h, cand % M])
                    # argmin (d2, p): the first minimum is the oldest; NaN never wins.
                    best = int(cand[np.nanargmin(d2)] if not np.isnan(d2).all() else cand[0])
                    L = st.ring_lse[b, h, best % M]
                    if d2[cand == best][0] < case.threshold and L > -np.inf and not (
                            F > 0 and E(best) < F):
                        hit, prefix = True, (st.ring_o[b, h, best % M].astype(np.float64), L)
            first = E(best) if hit else Fem
            entry = merge(prefix, attend(q, k[first:Em], v[first:Em], case.softmax_scale))
            if ready:  # after the match: read before write
                j = m % M
                st.ring_q[b, h, j] = st.q_tilde[b, h]
                st.ring_o[b, h, j] = entry[0]
                st.ring_lse[b, h, j] = entry[1]
                st.ring_pos[b, h, j] = m
            out = merge(merge(entry, attend(q, k[:Fem], v[:Fem], case.softmax_scale)),
                        attend(q, k[Em:m + 1], v[Em:m + 1], case.softmax_scale))
            st.o[b, h] = out[0]
            st.lse[b, h] = out[1]
            if st.hit is not None:  # decisions reported
                st.hit[b, h] = 1 if hit else 0
                st.match_pos[b, h] = best if hit else -1
            st.keys_read[b, h] = (Em - first) + Fem + (m + 1 - Em)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    export = macv_files.Export(argv[1])
    outputs = argv[2] if len(argv) == 3 else export.outputs_dir
    with np.errstate(invalid="ignore"):  # NaN in not-yet-cached tokens is never read
        for case in export.cases():
            for st in case.steps():
                step(case, st)
            case.write_outputs(outputs, name="numpy-reference", version="1")
    print(f"wrote outputs of {len(export.case_ids)} case(s) to {outputs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
