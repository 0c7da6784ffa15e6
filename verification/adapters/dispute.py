#!/usr/bin/env python3
"""Who is right where a kernel's outputs and mac-verify's expectations differ: one head of one
step recomputed from the exported inputs in FP64, against docs/semantics.md §3.

    mac-verify --export-case N --export DIR --caps caps.txt       # the case's inputs
    upstream_mac.py run DIR --checkout PATH                       # the kernel's outputs
    dispute.py DIR N                                              # the worst head-step
    dispute.py DIR N --step S --request B --head H                # a given one
    dispute.py DIR N --position M --request B --head H            # as a failure line names it

The ring at step S is rebuilt from the export's initial ring and the slot writes the outputs
record for the earlier steps, so the kernel's own stored entries are the candidates, as it
saw them. Printed: the match (every candidate's canonical FP32 distance of semantics §3.1
and its FP64 distance, the FP32 threshold, the usability of the nearest entry), the decision
semantics §3 takes and the one the kernel reported; then the output recomputed in FP64
(numpy float64; relative rounding ~1e-16, far below the 1e-2 limit) for each of the two
decisions and for exact attention, with the kernel's output's relative L2 distance and LSE
difference to each; then the ring entry the kernel wrote against the FP64 entry. A kernel
whose output sits on the FP64 value of its own decision but whose decision differs from
§3 disputes the rule; one far from both has an arithmetic error.

Needs numpy and h5py.
"""
import argparse
import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import macv_files  # noqa: E402
from numpy_reference_kernel import attend, canonical_d2, merge  # noqa: E402


def rel_l2(a, b):
    d = float(np.linalg.norm(b))
    return float(np.linalg.norm(np.asarray(a, np.float64) - b)) / (d if d > 0 else 1.0)


class Dispute:
    def __init__(self, export_dir, case_id, outputs_dir=None):
        self.case = macv_files.Export(export_dir).case(case_id)
        out = os.path.join(outputs_dir or os.path.join(export_dir, "outputs"),
                           f"case-{case_id:05d}.h5")
        with h5py.File(out, "r") as f:
            self.out = {k: f[k][()] for k in f.keys()}
        c, x = self.case, self.case.arrays
        self.k = macv_files.bf16_to_f32(x["k_cache"]).astype(np.float64)
        self.v = macv_files.bf16_to_f32(x["v_cache"]).astype(np.float64)
        self.G = c.num_q_heads // c.num_kv_heads

    def ring_before(self, s):
        """The ring (q̃ as float32 values, o, L, positions) the kernel held before step s."""
        x, o = self.case.arrays, self.out
        rq = macv_files.bf16_to_f32(x["ring_q"]).copy()
        ro = (x["ring_o"] if self.case.ring_o_dtype == "f32"
              else macv_files.bf16_to_f32(x["ring_o"])).astype(np.float64)
        rl, rp = x["ring_lse"].astype(np.float64), x["ring_pos"].copy()
        M = self.case.ring
        for t in range(s):
            for b in range(self.case.batch):
                j = int(x["position"][t][b]) % M
                rq[b, :, j] = macv_files.bf16_to_f32(o["slot_q"][t, b])
                ro[b, :, j] = o["slot_o"][t, b]
                rl[b, :, j] = o["slot_lse"][t, b]
                rp[b, :, j] = o["slot_pos"][t, b]
        return rq, ro, rl, rp

    def keys(self, b, h, m):
        """Keys and values [m+1, D] of request b's KV head for query head h (FP64)."""
        c = self.case
        t = np.arange(m + 1)
        pages = self.case.arrays["page_table"][b, t // c.page_size]
        rows = t % c.page_size
        kvh = h // self.G
        if c.kv_layout == "NHD":
            return self.k[pages, rows, kvh], self.v[pages, rows, kvh]
        return self.k[pages, kvh, rows], self.v[pages, kvh, rows]

    def worst(self):
        """(s, b, h) of the first decision mismatch, else of the largest output error against
        the FP64 value of semantics §3's decision."""
        c, o = self.case, self.out
        worst, where = -1.0, None
        for s in range(c.num_steps):
            ring = self.ring_before(s)
            for b in range(c.batch):
                for h in range(c.num_q_heads):
                    r = self.evaluate(s, b, h, ring)
                    if r["ours"]["hit"] != bool(o["hit"][s, b, h]) or (
                            r["ours"]["hit"] and r["ours"]["p"] != int(o["match_pos"][s, b, h])):
                        return s, b, h
                    err = rel_l2(o["o"][s, b, h], r["ours"]["o"])
                    if err > worst:
                        worst, where = err, (s, b, h)
        return where

    def decide(self, s, b, h, ring):
        """Semantics §3's match for (s, b, h): candidates with canonical FP32 and FP64
        distances, the nearest (ties to the older), the hit and why."""
        c, x = self.case, self.case.arrays
        rq, _, rl, rp = ring
        M, r, F = c.ring, c.tail, c.sinks
        m = int(x["position"][s][b])
        qt = macv_files.bf16_to_f32(x["q_tilde"][s, b, h])
        eligible = m >= c.gen_min and bool(x["ready"][b]) and m >= 1
        cand = np.arange(max(0, m - M), m)
        cand = cand[rp[b, h, cand % M] == cand]
        info = dict(m=m, eligible=eligible, candidates=len(cand), hit=False, p=-1, why="")
        if not eligible:
            info["why"] = "not eligible (m < gen_min, not ready, or m = 0)"
            return info
        if not len(cand):
            info["why"] = "no candidate slot holds its position"
            return info
        rows = rq[b, h, cand % M]
        d32 = canonical_d2(qt, rows)
        d64 = ((qt.astype(np.float64) - rows.astype(np.float64)) ** 2).sum(axis=1)
        order = np.lexsort((cand, np.where(np.isnan(d32), np.inf, d32)))[:3]
        info["nearest"] = [(int(cand[i]), float(d32[i]), float(d64[i])) for i in order]
        best = order[0]
        p, L = int(cand[best]), float(rl[b, h, cand[best] % M])
        E = max(0, p + 1 - r)
        close = d32[best] < c.threshold
        usable = np.isfinite(L) and not (F > 0 and E < F)
        info.update(p=p if close and usable else -1, hit=bool(close and usable),
                    why=(f"nearest p = {p}: d2 = {float(d32[best])!r} "
                         f"{'<' if close else '>='} thr = {float(c.threshold)!r}; entry "
                         f"L = {L:.6g}, E(p) = {E}, F = {F}: "
                         f"{'usable' if usable else 'unusable'}"))
        return info

    def value(self, s, b, h, ring, p):
        """FP64 (out, L, entry) of (s, b, h) for a hit on p (p ≥ 0, prefix = the ring's entry
        of p as stored) or a miss (p = -1)."""
        c, x = self.case, self.case.arrays
        _, ro, rl, _ = ring
        m = int(x["position"][s][b])
        k, v = self.keys(b, h, m)
        q = macv_files.bf16_to_f32(x["q"][s, b, h]).astype(np.float64)
        E = lambda t: max(0, t + 1 - c.tail)  # noqa: E731
        Em, Fe = E(m), min(c.sinks, E(m))
        sc = c.softmax_scale
        if p >= 0:
            prefix, first = (ro[b, h, p % c.ring], float(rl[b, h, p % c.ring])), E(p)
        else:
            prefix, first = (np.zeros(c.head_dim), -np.inf), Fe
        entry = merge(prefix, attend(q, k[first:Em], v[first:Em], sc))
        out = merge(merge(entry, attend(q, k[:Fe], v[:Fe], sc)), attend(q, k[Em:], v[Em:], sc))
        return dict(o=out[0], L=out[1], entry=entry)

    def evaluate(self, s, b, h, ring):
        ours = self.decide(s, b, h, ring)
        ours.update(self.value(s, b, h, ring, ours["p"]))
        return dict(ours=ours)

    def report(self, s, b, h):
        c, o = self.case, self.out
        ring = self.ring_before(s)
        ours = self.decide(s, b, h, ring)
        kp = int(o["match_pos"][s, b, h]) if o["hit"][s, b, h] else -1
        print(f"case {c.id} [{c.family}] {c.line}")
        print(f"step {s}, request {b}, head {h}: m = {ours['m']}, {ours['candidates']} candidates, "
              f"tau = {c.tau}, thr (FP32) = {float(c.threshold)!r}")
        for p, d32, d64 in ours.get("nearest", []):
            print(f"  candidate p = {p}: canonical FP32 d2 = {d32!r}, FP64 d2 = {d64!r}")
        print(f"  semantics §3: {'hit p = %d' % ours['p'] if ours['hit'] else 'miss'} "
              f"({ours['why']})")
        print(f"  kernel:       {'hit p = %d' % kp if kp >= 0 else 'miss'}")
        m = ours["m"]
        k, v = self.keys(b, h, m)
        q = macv_files.bf16_to_f32(c.arrays["q"][s, b, h]).astype(np.float64)
        full = attend(q, k, v, c.softmax_scale)
        rows = [("semantics §3's decision", self.value(s, b, h, ring, ours["p"]))]
        if kp != ours["p"]:
            rows.append(("the kernel's decision", self.value(s, b, h, ring, kp)))
        ko, kl = o["o"][s, b, h].astype(np.float64), float(o["lse"][s, b, h])
        for name, r in rows:
            print(f"  FP64 out for {name}: kernel's o rel L2 {rel_l2(ko, r['o']):.3e}, "
                  f"|dL| {abs(kl - r['L']):.3e} (L = {r['L']:.9g})")
        print(f"  exact attention over [0, m]: kernel's o rel L2 {rel_l2(ko, full[0]):.3e}, "
              f"|dL| {abs(kl - full[1]):.3e}")
        if c.arrays["ready"][b]:
            j = m % c.ring
            want = self.value(s, b, h, ring, kp)["entry"]
            got_o, got_l = o["slot_o"][s, b, h].astype(np.float64), float(o["slot_lse"][s, b, h])
            err = rel_l2(got_o, want[0]) if np.isfinite(want[1]) else float("nan")
            print(f"  entry written to slot {j} (position {int(o['slot_pos'][s, b, h])}): rel L2 "
                  f"{err:.3e} to FP64 prefix ⊕ band of the kernel's decision, L {got_l:.9g} vs "
                  f"{want[1]:.9g}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export_dir")
    ap.add_argument("case", type=int)
    ap.add_argument("--outputs", help="outputs folder (default EXPORT_DIR/outputs)")
    ap.add_argument("--step", type=int)
    ap.add_argument("--position", type=int, help="the step at which request B decodes m")
    ap.add_argument("--request", type=int, default=0)
    ap.add_argument("--head", type=int, default=0)
    a = ap.parse_args(argv[1:])
    d = Dispute(a.export_dir, a.case, a.outputs)
    if a.position is not None:
        steps = np.flatnonzero(d.case.arrays["position"][:, a.request] == a.position)
        if not len(steps):
            raise SystemExit(f"request {a.request} does not decode position {a.position}")
        a.step = int(steps[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        where = (a.step, a.request, a.head) if a.step is not None else d.worst()
        d.report(*where)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
