#!/usr/bin/env python3
"""plot_study.py: the figures of a mac-study sweep (docs/results.md).

Reads the tables mac-study wrote into STUDY_DIR (runs.csv, error_vs_depth.csv,
error_vs_lag.csv, hit_rate.csv, bound_hist.csv; docs/study-format.md) and writes, into
--out, for each figure a PNG and the CSV of exactly the numbers plotted:

  NAME_heatmap_lag_r.{png,csv}    per layer: x = lag m-p (power-of-two buckets), y = r,
                                  colour = median relative L2 error of the hits
  NAME_error_vs_depth.{png,csv}   per layer: p50/p90/p99 of the relative L2 error against
                                  chain depth, one line per (variant, storage)
  NAME_hit_rate_vs_tau.{png,csv}  per layer: hit rate and fraction of KV keys read vs tau
  NAME_bound.{png,csv}            histogram of log10(error / bound), rigorous and paper form
  NAME_tables.md                  markdown tables of every run and of the paired comparisons
                                  (split vs downdate, full vs production storage)

Filters pick one value of the parameters a figure does not show (defaults: the tau nearest
0.45, r = 256 if present, split, production storage, fp32; the most common M and F).
Needs numpy and matplotlib (Debian: python3-numpy, python3-matplotlib; run with /usr/bin/python3).
"""
import argparse
import csv
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
import numpy as np  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(s):
    try:
        return float(s)
    except ValueError:
        return math.nan


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def pick(values, want, cast=float):
    vals = sorted({cast(v) for v in values})
    if not vals:
        sys.exit("plot_study: no runs in the tables")
    if want is None:
        return vals[0]
    return min(vals, key=lambda v: abs(v - want)) if cast is float else (want if want in vals else vals[0])


def most_common(values):
    counts = defaultdict(int)
    for v in values:
        counts[v] += 1
    return max(counts, key=counts.get)


def bucket_label(lo, hi):
    lo, hi = int(lo), int(hi)
    return str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study_dir")
    ap.add_argument("--out", required=True, help="directory for the PNG and CSV files")
    ap.add_argument("--name", default="study", help="file name prefix")
    ap.add_argument("--title", default="", help="text added to every figure title")
    ap.add_argument("--tau", type=float, default=0.45)
    ap.add_argument("--tail", type=int, default=256)
    ap.add_argument("--variant", default="split")
    ap.add_argument("--storage", default="production")
    ap.add_argument("--precision", default="fp32")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    d = args.study_dir
    runs = read(os.path.join(d, "runs.csv"))
    depth = read(os.path.join(d, "error_vs_depth.csv"))
    lag = read(os.path.join(d, "error_vs_lag.csv"))
    hit = read(os.path.join(d, "hit_rate.csv"))
    hist = read(os.path.join(d, "bound_hist.csv"))

    tau = pick([r["tau"] for r in runs], args.tau)
    tail = int(pick([r["tail"] for r in runs], args.tail))
    ring = most_common([r["ring"] for r in runs])
    sinks = most_common([r["sinks"] for r in runs])
    variant = args.variant if any(r["variant"] == args.variant for r in runs) else runs[0]["variant"]
    storage = args.storage if any(r["storage"] == args.storage for r in runs) else runs[0]["storage"]
    precision = args.precision if any(r["precision"] == args.precision for r in runs) else runs[0]["precision"]
    layers = sorted({(r["trace"], int(r["layer"])) for r in runs})
    sfx = f" {args.title}" if args.title else ""

    def match(r, **kw):
        base = dict(ring=ring, sinks=sinks, variant=variant, storage=storage, precision=precision)
        base.update(kw)
        for k, v in base.items():
            if v is None:
                continue
            if k == "tau":
                if abs(float(r["tau"]) - v) > 1e-12:
                    return False
            elif k in ("tail", "layer"):
                if int(r[k]) != int(v):
                    return False
            elif r[k] != str(v):
                return False
        return True

    made = []
    nl = len(layers)
    ncol = min(nl, 4)
    nrow = (nl + ncol - 1) // ncol

    # --- heat map: error vs lag and r -------------------------------------------------
    rows = [r for r in lag if match(r, tau=tau, tail=None)]
    fig, axes = plt.subplots(nrow, ncol, figsize=(max(7.5, 4.2 * ncol), 3.4 * nrow), squeeze=False)
    out_rows = []
    vals = [num(r["rel_l2_p50"]) for r in rows if num(r["rel_l2_p50"]) > 0]
    norm = LogNorm(vmin=max(min(vals), 1e-8), vmax=max(vals)) if vals else None
    for i, (tr, L) in enumerate(layers):
        ax = axes[i // ncol][i % ncol]
        lr = [r for r in rows if r["trace"] == tr and int(r["layer"]) == L]
        tails = sorted({int(r["tail"]) for r in lr})
        buckets = sorted({(int(r["lag_lo"]), int(r["lag_hi"])) for r in lr})
        grid = np.full((len(tails), len(buckets)), np.nan)
        for r in lr:
            y = tails.index(int(r["tail"]))
            x = buckets.index((int(r["lag_lo"]), int(r["lag_hi"])))
            grid[y, x] = num(r["rel_l2_p50"])
            out_rows.append([tr, L, r["tail"], r["lag_lo"], r["lag_hi"], r["count"], r["rel_l2_p50"], r["rel_l2_p99"]])
        if len(tails) and len(buckets):
            im = ax.imshow(np.where(grid > 0, grid, np.nan), aspect="auto", origin="lower", norm=norm, cmap="viridis")
            ax.set_xticks(range(len(buckets)))
            ax.set_xticklabels([bucket_label(*b) for b in buckets], rotation=60, fontsize=7)
            ax.set_yticks(range(len(tails)))
            ax.set_yticklabels([str(t) for t in tails])
            for y in range(len(tails)):
                for x in range(len(buckets)):
                    if not np.isnan(grid[y, x]):
                        ax.text(x, y, f"{grid[y, x]:.1e}", ha="center", va="center", fontsize=5.5, color="w")
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
        ax.set_xlabel("lag m - p")
        ax.set_ylabel("r")
        ax.set_title(f"layer {L}", fontsize=9)
    for j in range(nl, nrow * ncol):
        axes[j // ncol][j % ncol].axis("off")
    fig.suptitle(f"median rel. L2 error of hits vs lag and r (tau={tau:g}, M={ring}, {variant}, {storage}){sfx}",
                 fontsize=9)
    fig.tight_layout()
    p = os.path.join(args.out, f"{args.name}_heatmap_lag_r.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    write_csv(p[:-4] + ".csv", ["trace", "layer", "tail", "lag_lo", "lag_hi", "count", "rel_l2_p50", "rel_l2_p99"],
              out_rows)
    made.append(p)

    # --- error vs chain depth ------------------------------------------------------------
    rows = [r for r in depth if match(r, tau=tau, tail=tail, variant=None, storage=None)]
    combos = sorted({(r["variant"], r["storage"]) for r in rows})
    fig, axes = plt.subplots(nrow, ncol, figsize=(max(7.5, 4.2 * ncol), 3.4 * nrow), squeeze=False)
    out_rows = []
    styles = {"rel_l2_p50": "-", "rel_l2_p90": "--", "rel_l2_p99": ":"}
    for i, (tr, L) in enumerate(layers):
        ax = axes[i // ncol][i % ncol]
        for ci, (v, s) in enumerate(combos):
            lr = sorted((r for r in rows if r["trace"] == tr and int(r["layer"]) == L and r["variant"] == v
                         and r["storage"] == s), key=lambda r: int(r["depth_lo"]))
            if not lr:
                continue
            x = [int(r["depth_lo"]) for r in lr]
            for col, ls in styles.items():
                y = [max(num(r[col]), 1e-12) for r in lr]
                ax.plot(range(len(x)), y, ls, color=f"C{ci}", marker=".",
                        label=f"{v}/{s} {col[7:]}" if i == 0 else None)
            ax.set_xticks(range(len(x)))
            ax.set_xticklabels([bucket_label(r["depth_lo"], r["depth_hi"]) for r in lr], rotation=60, fontsize=7)
            for r in lr:
                out_rows.append([tr, L, v, s, r["depth_lo"], r["depth_hi"], r["count"], r["rel_l2_p50"],
                                 r["rel_l2_p90"], r["rel_l2_p99"], r["rel_l2_max"]])
        ax.set_yscale("log")
        ax.set_xlabel("chain depth (0 = miss)")
        ax.set_ylabel("rel. L2 error vs full")
        ax.set_title(f"layer {L}", fontsize=9)
    for j in range(nl, nrow * ncol):
        axes[j // ncol][j % ncol].axis("off")
    axes[0][0].legend(fontsize=6, ncol=max(1, len(combos)))
    fig.suptitle(f"error vs chain depth: p50 (solid), p90 (dashed), p99 (dotted); tau={tau:g}, r={tail}, M={ring}{sfx}",
                 fontsize=9)
    fig.tight_layout()
    p = os.path.join(args.out, f"{args.name}_error_vs_depth.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    write_csv(p[:-4] + ".csv", ["trace", "layer", "variant", "storage", "depth_lo", "depth_hi", "count", "rel_l2_p50",
                                "rel_l2_p90", "rel_l2_p99", "rel_l2_max"], out_rows)
    made.append(p)

    # --- hit rate and KV fraction vs tau ---------------------------------------------------
    rows = [r for r in hit if match(r, tau=None, tail=tail) and r["head"] == "all"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    out_rows = []
    for i, (tr, L) in enumerate(layers):
        lr = sorted((r for r in rows if r["trace"] == tr and int(r["layer"]) == L), key=lambda r: float(r["tau"]))
        if not lr:
            continue
        t = [float(r["tau"]) for r in lr]
        lab = f"layer {L}" if len({x[0] for x in layers}) == 1 else f"{tr} L{L}"
        axes[0].plot(t, [100 * num(r["hit_rate"]) for r in lr], marker="o", label=lab)
        axes[1].plot(t, [100 * num(r["kv_fraction"]) for r in lr], marker="o", label=lab)
        for r in lr:
            out_rows.append([tr, L, r["tau"], r["hit_rate"], r["kv_fraction"], r["rel_l2_p50"], r["rel_l2_p99"]])
    axes[0].set_ylabel("hit rate (%)")
    axes[1].set_ylabel("KV keys read (% of full attention)")
    for ax in axes:
        ax.set_xlabel("tau (hit iff d2 < 2D(1-tau)^2)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"hit rate and KV-read fraction vs tau (r={tail}, M={ring}, {variant}, {storage}){sfx}", fontsize=9)
    fig.tight_layout()
    p = os.path.join(args.out, f"{args.name}_hit_rate_vs_tau.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    write_csv(p[:-4] + ".csv", ["trace", "layer", "tau", "hit_rate", "kv_fraction", "rel_l2_p50", "rel_l2_p99"],
              out_rows)
    made.append(p)

    # --- the bound: histogram of log10(error / bound) --------------------------------------
    rows = [r for r in hist if match(r, tau=None, tail=None, variant=None, storage=None, precision=None)]
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    out_rows = []
    for fi, form in enumerate(("rigorous", "paper")):
        acc = defaultdict(int)
        for r in rows:
            if r["form"] == form:
                acc[float(r["log10_lo"])] += int(float(r["count"]))
        if not acc:
            continue
        xs = sorted(acc)
        total = sum(acc.values())
        held = sum(c for x, c in acc.items() if x < 0)
        ax.bar([x + 0.125 for x in xs], [acc[x] / total for x in xs], width=0.25, alpha=0.55, color=f"C{fi}",
               label=f"{form}: error <= bound on {100 * held / total:.2f}% of {total} hits")
        for x in xs:
            out_rows.append([form, x, x + 0.25, acc[x]])
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("log10(error / bound)   (left of 0: the bound holds)")
    ax.set_ylabel("fraction of hits")
    ax.legend(fontsize=7)
    ax.set_title(f"per-step bound, all runs of the sweep{sfx}", fontsize=9)
    fig.tight_layout()
    p = os.path.join(args.out, f"{args.name}_bound.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    write_csv(p[:-4] + ".csv", ["form", "log10_lo", "log10_hi", "count"], out_rows)
    made.append(p)

    # --- markdown tables ----------------------------------------------------------------------
    def pct(x, digits=1):
        return f"{100 * num(x):.{digits}f}" if not math.isnan(num(x)) else "-"

    def sci(x):
        return f"{num(x):.2e}" if not math.isnan(num(x)) else "-"

    lines = ["| trace | layer | tau | M | r | F | variant | storage | prec. | hit % | KV read % | rel L2 p50 | p99 | max "
             "| max depth | bound holds % | err/bound p99 | paper form holds % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    key = lambda r: (r["trace"], int(r["layer"]), float(r["tau"]), int(r["ring"]), int(r["tail"]), int(r["sinks"]),
                     r["variant"], r["storage"], r["precision"])
    for r in sorted(runs, key=key):
        lines.append(f"| {r['trace']} | {r['layer']} | {r['tau']} | {r['ring']} | {r['tail']} | {r['sinks']} | "
                     f"{r['variant']} | {r['storage']} | {r['precision']} | {pct(r['hit_rate'])} | "
                     f"{pct(r['kv_fraction'])} | {sci(r['rel_l2_p50'])} | {sci(r['rel_l2_p99'])} | "
                     f"{sci(r['rel_l2_max'])} | {r['depth_max']} | {pct(r['bound_holds'], 2)} | "
                     f"{sci(r['bound_ratio_p99'])} | {pct(r['paper_holds'], 2)} |")
    pairs_path = os.path.join(d, "pairs.csv")
    pairs = read(pairs_path) if os.path.exists(pairs_path) else []
    if pairs:
        lines += ["", "| compare | layer | tau | r | held fixed | a | b | a rel L2 p50 / p99 / max "
                  "| b rel L2 p50 / p99 / max | per-step diff p50 / p99 / max | same decisions % | b worse % |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(pairs, key=lambda r: (r["compare"],) + key(r)):
            fixed = ", ".join(r[c] for c in ("variant", "storage", "precision") if c != r["compare"])
            lines.append(f"| {r['compare']} | {r['layer']} | {r['tau']} | {r['tail']} | {fixed} | {r['a']} | {r['b']} | "
                         f"{sci(r['a_rel_l2_p50'])} / {sci(r['a_rel_l2_p99'])} / {sci(r['a_rel_l2_max'])} | "
                         f"{sci(r['b_rel_l2_p50'])} / {sci(r['b_rel_l2_p99'])} / {sci(r['b_rel_l2_max'])} | "
                         f"{sci(r['diff_p50'])} / {sci(r['diff_p99'])} / {sci(r['diff_max'])} | "
                         f"{pct(r['same_decisions'])} | {pct(r['b_worse'])} |")
    p = os.path.join(args.out, f"{args.name}_tables.md")
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")

    for m in made:
        print("wrote", m, "and", m[:-4] + ".csv")
    print("wrote", p)


if __name__ == "__main__":
    main()
