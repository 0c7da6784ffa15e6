#!/usr/bin/env python3
"""Summarises one device run of mac-bench (its CSV) and sdpa_baseline.py (its CSV) into the
markdown table of docs/cuda.md: per (Hkv, batch, ctx) the full-attention time and % of the
streaming read measured in the same run, cuDNN SDPA's time and our speed relative to it,
MAC all-miss relative to full, the MAC speedups at hit fraction 0.95 and 1.0, and K1's time.
When the run had --pdl-compare, a second table: each step's time with the kernels launched as
programmatic dependents (pdl 1) against plain stream order (pdl 0), measured side by side.

    python3 tools/mac-bench/summarize.py MAC_BENCH_CSV [SDPA_CSV] [--flashinfer CSV] [--out FILE]

With --flashinfer (flashinfer_baseline.py's CSV of the same call) the first table gains
FlashInfer's time and our full attention's speed relative to it. When the mac-bench CSV holds
`upstream` rows (upstream_side.py), a table of our MAC step against upstream's kernel at the
same decision placement follows.

Ratios are of medians (each of 50 CUDA-graph replays after 10 warm-ups); both CSVs carry
p10/p90 for the spread."""
import argparse
import csv
import os
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def shape_key(r):
    """A row's grid point (Hkv, batch, ctx)."""
    return (int(r["hkv"]), int(r["batch"]), int(r["ctx"]))


def by_shape(path):
    """Grid point -> median ms of an SDPA or FlashInfer CSV ({} without a path)."""
    return {shape_key(r): float(r["median_ms"]) for r in rows(path)} if path else {}


def write_text(text, path):
    """`text` to `path` (stdout when empty), written as path.tmp and renamed when complete."""
    if not path:
        sys.stdout.write(text)
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mac_bench_csv")
    ap.add_argument("sdpa_csv", nargs="?", default="")
    ap.add_argument("--flashinfer", default="", help="flashinfer_baseline.py's CSV")
    ap.add_argument("--out", default="", help="write the table here (default stdout)")
    a = ap.parse_args()
    for p in (a.mac_bench_csv, a.sdpa_csv, a.flashinfer):
        if p and not os.path.isfile(p):
            sys.exit(f"summarize.py: no such file: {p}")
    mac = rows(a.mac_bench_csv)
    sdpa, fi = by_shape(a.sdpa_csv), by_shape(a.flashinfer)
    shapes = []
    for r in mac:
        key = shape_key(r)
        if key not in shapes:
            shapes.append(key)

    main_pdl = mac[0].get("pdl") if mac else None  # the run's --pdl; rows of the other are A/B

    def pick(key, kind, hit=None, k3="fused", pdl=None):
        pdl = main_pdl if pdl is None else pdl
        for r in mac:
            if shape_key(r) != key or r["kind"] != kind:
                continue
            if r.get("pdl") != pdl:
                continue
            if hit is not None and abs(float(r["hit_frac"]) - hit) > 1e-9:
                continue
            if kind == "mac" and r["k3"] != k3:
                continue
            return r
        return None

    fi_head = ("FlashInfer ms | full vs FlashInfer | ", "---|---|") if a.flashinfer else ("", "")
    out = [
        "| Hkv | batch | ctx | item keys | full ms (p10–p90) | full % read BW | SDPA ms | full vs SDPA | "
        + fi_head[0] + "MAC all-miss / full | MAC hit 0.95 speedup | MAC all-hit speedup | K1 ms |",
        "|---|---|---|---|---|---|---|---|" + fi_head[1] + "---|---|---|---|",
    ]
    for key in shapes:
        full = pick(key, "full")
        if full is None:
            continue
        fm = float(full["median_ms"])
        s = sdpa.get(key)
        miss, h95, h1, k1 = pick(key, "mac", 0.0), pick(key, "mac", 0.95), pick(key, "mac", 1.0), pick(key, "k1")
        cell = lambda r, f: f(r) if r is not None else "–"
        out.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {full['chunk']} | {fm:.4f} ({float(full['p10_ms']):.4f}–"
            f"{float(full['p90_ms']):.4f}) | {float(full['pct_read_bw']):.1f} | "
            + (f"{s:.4f} | {s / fm:.3f} | " if s else "– | – | ")
            + ((f"{fi[key]:.4f} | {fi[key] / fm:.3f} | " if key in fi else "– | – | ") if a.flashinfer else "")
            + cell(miss, lambda r: f"{fm / float(r['median_ms']):.3f}") + " | "
            + cell(h95, lambda r: f"{fm / float(r['median_ms']):.2f}x") + " | "
            + cell(h1, lambda r: f"{fm / float(r['median_ms']):.1f}x") + " | "
            + cell(k1, lambda r: f"{float(r['median_ms']):.4f}") + " |")
    ab = [("full", None), ("mac", 0.0), ("mac", 1.0)]
    if any(r.get("pdl") == "0" for r in mac) and any(r.get("pdl") == "1" for r in mac):
        out += ["", "| Hkv | batch | ctx | full ms pdl 1 / pdl 0 | MAC all-miss ms pdl 1 / pdl 0 | "
                "MAC all-hit ms pdl 1 / pdl 0 |", "|---|---|---|---|---|---|"]
        for key in shapes:
            cells = []
            for kind, hit in ab:
                on, off = pick(key, kind, hit, pdl="1"), pick(key, kind, hit, pdl="0")
                cells.append(f"{float(on['median_ms']):.4f} / {float(off['median_ms']):.4f} "
                             f"({float(off['median_ms']) / float(on['median_ms']):.3f}x)" if on and off else "–")
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    up = [r for r in mac if r["kind"] == "upstream"]
    if up:
        out += ["", "| Hkv | batch | ctx | hit frac | hits | ours MAC ms (p10–p90) | upstream ms (p10–p90) | "
                "upstream / ours | timing |", "|---|---|---|---|---|---|---|---|---|"]
        for u in up:
            key = shape_key(u)
            ours = pick(key, "mac", float(u["hit_frac"]))
            band = lambda r: f"{float(r['median_ms']):.4f} ({float(r['p10_ms']):.4f}–{float(r['p90_ms']):.4f})"
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {u['hit_frac']} | {u['hits']} | "
                       + (band(ours) if ours else "–") + f" | {band(u)} | "
                       + (f"{float(u['median_ms']) / float(ours['median_ms']):.2f}x" if ours else "–")
                       + f" | {u.get('impl', '')} |")
    write_text("\n".join(out) + "\n", a.out)


if __name__ == "__main__":
    main()
