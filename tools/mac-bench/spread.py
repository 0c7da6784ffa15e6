#!/usr/bin/env python3
"""Summarises the spread over repeated benchmark runs: per grid point (Hkv, batch, ctx) the
min–max over the runs of our full-attention median, its speed relative to cuDNN SDPA (SDPA
median / ours, so > 1 means ours is faster) and, with --flashinfer, to FlashInfer (same
convention), MAC all-miss relative to full (full median / MAC hit-fraction-0 median, as
summarize.py's "MAC all-miss / full") and the MAC all-hit step (hit fraction 1) in µs. Below
the table, per column, the min–max over every point. So docs can cite "min–max over N runs"
with the command that produced it:

    python3 tools/mac-bench/spread.py --mac A1.csv A2.csv A3.csv --sdpa S1.csv S2.csv S3.csv \\
        [--flashinfer F1.csv F2.csv F3.csv] [--out FILE.md]

The i-th file of each list is run i (mac-bench's CSV, sdpa_baseline.py's, flashinfer_baseline.py's
of the same call); the lists must be of equal length (exit 2 otherwise). Ratios are taken within
a run (run i's mac-bench against run i's SDPA) and then ranged over the runs. MAC rows are the
fused-K3 ones (k3 = fused); when a mac-bench CSV holds several pdl values (--pdl-compare), its
full and MAC rows are those with pdl = 1. A cell whose value is missing from any run reads '–'
(and does not enter the column's overall range). Rows are ordered Hkv descending, then batch and
ctx ascending, the order of docs/cuda.md's tables."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import by_shape, rows, shape_key, write_text  # noqa: E402

DASH = "–"


def load_mac(path):
    """(key, kind, hit_frac or None) -> median ms of one mac-bench CSV (first matching row, as
    summarize.py's pick): full rows and fused MAC rows, pdl = 1 ones when several pdl values."""
    data = [r for r in rows(path) if r["kind"] == "full" or (r["kind"] == "mac" and r["k3"] == "fused")]
    pdls = {r.get("pdl") for r in data}
    if len(pdls) > 1:
        data = [r for r in data if r.get("pdl") == "1"]
    out = {}
    for r in data:
        hit = None if r["kind"] == "full" else round(float(r["hit_frac"]), 6)
        out.setdefault((shape_key(r), r["kind"], hit), float(r["median_ms"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mac", nargs="+", required=True, metavar="CSV", help="mac-bench CSVs, one per run")
    ap.add_argument("--sdpa", nargs="+", required=True, metavar="CSV",
                    help="sdpa_baseline.py CSVs, one per run (same order as --mac)")
    ap.add_argument("--flashinfer", nargs="+", default=[], metavar="CSV",
                    help="flashinfer_baseline.py CSVs, one per run (same order as --mac)")
    ap.add_argument("--out", default="", help="write the table here (default stdout)")
    a = ap.parse_args()
    lists = [("--mac", a.mac), ("--sdpa", a.sdpa)] + ([("--flashinfer", a.flashinfer)] if a.flashinfer else [])
    if len({len(v) for _, v in lists}) > 1:
        print("spread.py: " + ", ".join(f"{n} has {len(v)} file(s)" for n, v in lists)
              + "; the i-th file of each list is run i, so the counts must be equal", file=sys.stderr)
        sys.exit(2)
    for _, v in lists:
        for p in v:
            if not os.path.isfile(p):
                sys.exit(f"spread.py: no such file: {p}")
    n = len(a.mac)
    runs = []
    for i in range(n):
        runs.append((load_mac(a.mac[i]), by_shape(a.sdpa[i]),
                     by_shape(a.flashinfer[i]) if a.flashinfer else {}))
    points = sorted({k for mac, _, _ in runs for (k, kind, _) in mac if kind == "full"},
                    key=lambda k: (-k[0], k[1], k[2]))

    def full(run, k):
        return run[0].get((k, "full", None))

    def mac(run, k, hit):
        return run[0].get((k, "mac", hit))

    def ratio(num, den):
        return num / den if num is not None and den else None

    # (header, per-run value of a point, format)
    cols = [("full ms", lambda r, k: full(r, k), "{:.4f}"),
            ("full vs SDPA", lambda r, k: ratio(r[1].get(k), full(r, k)), "{:.3f}")]
    if a.flashinfer:
        cols.append(("full vs FlashInfer", lambda r, k: ratio(r[2].get(k), full(r, k)), "{:.3f}"))
    cols += [("MAC all-miss / full", lambda r, k: ratio(full(r, k), mac(r, k, 0.0)), "{:.3f}"),
             ("MAC all-hit µs", lambda r, k: (lambda m: m * 1e3 if m is not None else None)(mac(r, k, 1.0)),
              "{:.1f}")]

    def span(vals, fmt):
        return fmt.format(min(vals)) + DASH + fmt.format(max(vals))

    out = [f"Min{DASH}max over {n} run{'s' if n != 1 else ''} (ratios within each run).", "",
           "| Hkv | batch | ctx | " + " | ".join(c[0] for c in cols) + " |",
           "|---|---|---|" + "---|" * len(cols)]
    overall = [[] for _ in cols]
    for k in points:
        cells = []
        for j, (_, get, fmt) in enumerate(cols):
            vals = [get(r, k) for r in runs]
            if any(v is None for v in vals):
                cells.append(DASH)
            else:
                cells.append(span(vals, fmt))
                overall[j] += vals
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    out.append("")
    for (name, _, fmt), vals in zip(cols, overall):
        out.append(f"- {name}: " + (span(vals, fmt) if vals else DASH) + " over every point")
    write_text("\n".join(out) + "\n", a.out)


if __name__ == "__main__":
    main()
