#!/usr/bin/env python3
"""How many ring candidates a low-precision copy of the ring could rule out of the match, with
decisions kept bit-identical (issue 34: K1 reads the ring at ~80 % of the streaming read; fewer
bytes per candidate would shorten the all-hit step).

The copy: per ring entry (position p, query head h) a vector k of b-bit codes and an FP32 scale
s, with L = 2^(b−1) − 1, s = max_i |c_i| / L and k_i = round(c_i / s), and e = max_i |c_i − s·k_i|
(FP32, rounded up), so b·D/8 + 8 bytes instead of the 2D of the BF16 row c (b = 8 or 4). For the query q (BF16, exact) and every
candidate c, with ĉ = s·k:

    LB(c) = Σ_i max(0, |q_i − ĉ_i| − e)²   ≤   d2(c) = Σ_i (q_i − c_i)²   ≤   UB(c) = Σ_i (|q_i − ĉ_i| + e)²

The canonical FP32 d2 of semantics §3.1 is within a relative γ = D·u / (1 − D·u) of the exact
one (u = 2⁻²⁴: D products and D sums, each rounded once, all terms ≥ 0). A candidate c with

    LB(c)·(1 − γ) > min_c' UB(c')·(1 + γ)

has fl(d2(c)) > fl(d2(c*)) for the c* that minimises UB, so it is never the argmin, and, the
inequality being strict, the tie rule (to the older position) is not involved. The match then
reads the copy of every candidate and the BF16 row of the others (the survivors), computes
their canonical FP32 d2 as K1 does, and finds the same argmin, the same d2 and hence the same
decision. (On the device LB and UB would be evaluated with directed rounding, __fmaf_rd and
__fmaf_ru, so that the inequality still holds for the computed values.)

This script counts the survivors on a trace's q_pre streams (every query head of every layer,
each step from --first on, against the ring [max(0, m − M), m)), checks on every step that the
exact argmin (float64) is a survivor, and reports the bytes a match would read relative to the
BF16 scan: (b·D/8 + 8 + f·2D) / 2D for a survivor fraction f. The same on the synthetic placement of
mac-bench (a hit copies the query into the ring at lag 1..64; other entries are unit normals).

    python3 tools/ring-bound/ring_bound.py [--trace data/real/smollm2_4layers_512.h5] [--ring 256]
        [--first 256] [--bits 8|4]

Exit status 1 if any candidate's d2 lies outside [LB, UB] or any step's exact argmin was ruled
out (the bounds would be unsound), else 0.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "record-trace"))
from record_trace import round_bf16  # noqa: E402  (the recorder's BF16 rounding; stdlib + numpy)

U = 2.0 ** -24


def quantize(c, bits):
    """Per row of c [n, D]: scale s (FP32), b-bit codes k, error bound e (FP32, rounded up)."""
    levels = 2 ** (bits - 1) - 1
    c = c.astype(np.float64)
    s = np.max(np.abs(c), axis=1) / levels
    s = np.where(s > 0, s, 1.0).astype(np.float32).astype(np.float64)
    k = np.clip(np.rint(c / s[:, None]), -levels, levels)
    e = np.max(np.abs(c - s[:, None] * k), axis=1)
    e = np.nextafter(e.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    return s, k, e


def survivors(q, ring, gamma, bits):
    """(survivor mask, exact argmin, candidates outside [LB, UB]) of query q [D] against ring
    rows [n, D], all in float64 (exact for BF16 inputs up to the last bits of the sums)."""
    s, k, e = quantize(ring, bits)
    diff = np.abs(q[None, :] - s[:, None] * k)
    lb = np.sum(np.maximum(diff - e[:, None], 0.0) ** 2, axis=1)
    ub = np.sum((diff + e[:, None]) ** 2, axis=1)
    keep = lb * (1.0 - gamma) <= ub.min() * (1.0 + gamma)
    d2 = np.sum((q[None, :] - ring.astype(np.float64)) ** 2, axis=1)
    outside = int(np.sum((lb > d2 * (1 + 1e-12)) | (d2 > ub * (1 + 1e-12))))
    return keep, int(np.argmin(d2)), outside


def study(pairs, D, bits):
    """Survivor fractions over (query, ring rows) pairs, and the count of pairs whose argmin was
    ruled out plus candidates outside their bounds (0 for sound bounds)."""
    gamma = D * U / (1.0 - D * U)
    fracs, lost = [], 0
    for q, ring in pairs:
        keep, best, outside = survivors(q.astype(np.float64), ring, gamma, bits)
        lost += (not keep[best]) + outside
        fracs.append(keep.mean())
    return np.array(fracs), lost


def trace_pairs(q, M, first):
    """Every query head's step m ≥ first of q [T, Hq, D] against its ring [max(0, m − M), m)."""
    for h in range(q.shape[1]):
        for m in range(first, q.shape[0]):
            yield q[m, h], q[max(0, m - M):m, h]


def synthetic_pairs(kind, steps, D, M, rng):
    """mac-bench's placement: ring entries unit normals in BF16; the query copies the entry at
    lag 1..64 (a hit) or is a fresh normal (a miss)."""
    for _ in range(steps):
        ring = round_bf16(rng.standard_normal((M, D)).astype(np.float32))
        if kind == "hit":
            yield ring[M - rng.integers(1, 65)].copy(), ring
        else:
            yield round_bf16(rng.standard_normal(D).astype(np.float32)), ring


def report(name, fracs, lost, D, bits):
    byte_ratio = (bits * D / 8 + 8 + fracs * 2 * D) / (2 * D)
    print(f"{name}: {len(fracs)} head-steps, survivors per step: median {np.median(fracs):.4f}, "
          f"mean {fracs.mean():.4f}, p90 {np.quantile(fracs, 0.9):.4f}, max {fracs.max():.4f}; "
          f"bytes over the BF16 scan: mean {byte_ratio.mean():.3f}; argmin ruled out or d2 "
          f"outside [LB, UB]: {lost}")
    return lost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default="data/real/smollm2_4layers_512.h5")
    ap.add_argument("--ring", type=int, default=256, help="M")
    ap.add_argument("--first", type=int, default=256, help="first decode step (gen_min)")
    ap.add_argument("--synthetic-steps", type=int, default=200)
    ap.add_argument("--bits", type=int, choices=(8, 4), default=8, help="bits per code")
    a = ap.parse_args()
    import h5py
    lost = 0
    with h5py.File(a.trace, "r") as f:
        for layer in sorted(f["layers"], key=int):
            q = f["layers"][layer]["q_pre"][...]  # [T, Hq, D], BF16-exact
            D = q.shape[2]
            fr, lo = study(trace_pairs(q, a.ring, a.first), D, a.bits)
            lost += report(f"layer {layer} (D {D}, M {a.ring}, {a.bits}-bit)", fr, lo, D, a.bits)
    rng = np.random.default_rng(20261207)
    D, M = 128, 512
    for kind in ("hit", "miss"):
        fr, lo = study(synthetic_pairs(kind, a.synthetic_steps, D, M, rng), D, a.bits)
        lost += report(f"synthetic {kind} (D {D}, M {M}, {a.bits}-bit)", fr, lo, D, a.bits)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
