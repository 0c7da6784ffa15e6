#!/usr/bin/env python3
"""Summarises scripts/device/ab_builds.sh output (ab.csv): per benchmark point, the mean over
rounds of each variant's median time, its round-to-round range, and each variant's ratio to
the first variant (the baseline) in the same set; optionally the ratio of cuDNN SDPA
(sdpa.csv of the same call) to each. Usage: ab_summary.py ab.csv [sdpa.csv]"""
import os
import sys
from collections import OrderedDict, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import rows  # noqa: E402  (the CSV reader of mac-bench's files)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:3]:
        if not os.path.isfile(p):
            sys.exit(f"ab_summary.py: no such file: {p}")
    data = rows(sys.argv[1])
    sdpa = {}
    if len(sys.argv) > 2:
        for r in rows(sys.argv[2]):
            sdpa[(r["hkv"], r["batch"], r["ctx"])] = float(r["median_ms"])
    variants = list(OrderedDict.fromkeys(r["variant"] for r in data))
    times = defaultdict(list)  # (point, set, variant) -> medians over rounds
    points = OrderedDict()
    for r in data:
        if r["k3"] == "side" or r.get("pdl", "1") == "0":
            continue
        pt = (r["kind"], r["hkv"], r["batch"], r["ctx"], r["hit_frac"])
        points[pt] = True
        times[(pt, r["set"], r["variant"])].append(float(r["median_ms"]))
    sets = list(OrderedDict.fromkeys(r["set"] for r in data))
    base = variants[0]
    head = ["kind", "Hkv", "batch", "ctx", "hit", "set"] + [f"{v} ms (range)" for v in variants]
    head += [f"{v}/{base}" for v in variants[1:]]
    if sdpa:
        head += [f"SDPA/{v}" for v in variants]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for pt in points:
        for s in sets:
            cells, means = [], {}
            for v in variants:
                t = times.get((pt, s, v))
                if not t:
                    cells.append("–")
                    continue
                means[v] = sum(t) / len(t)
                cells.append(f"{means[v]:.4f} ({min(t):.4f}–{max(t):.4f})")
            if not means:
                continue
            line = list(pt) + [s] + cells
            line += [f"{means[v] / means[base]:.3f}" if v in means and base in means else "–" for v in variants[1:]]
            if sdpa:
                ref = sdpa.get(pt[1:4]) if pt[0] == "full" else None
                line += [f"{ref / means[v]:.3f}" if ref and v in means else "–" for v in variants]
            print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
