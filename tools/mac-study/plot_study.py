#!/usr/bin/env python3
"""plot_study.py: the figures of a mac-study sweep (docs/results.md).

    plot_study.py STUDY_DIR --out DIR --name NAME [--title TEXT] [--tau 0.45] [--tail 256] ...
    plot_study.py --from-csv DIR --name NAME [--title TEXT] [--out DIR2]   # redraw from the CSVs

Reads the tables mac-study wrote into STUDY_DIR (runs.csv, error_vs_depth.csv,
error_vs_lag.csv, hit_rate.csv, bound_hist.csv, pairs.csv; docs/study-format.md) and
writes, into --out, for each figure a CSV of exactly the numbers plotted, every row with
its configuration (trace, layer, model_layer, tau, ring M, tail r, sinks F, variant,
storage, precision), and the PNG drawn from that CSV:

  NAME_heatmap_lag_r    per layer: x = lag m - p (power-of-two buckets), y = r, colour =
                        median relative L2 error of the hits, one colour scale for all panels
  NAME_error_vs_depth   per layer: p50/p90/p99 of the hits' relative L2 error against chain
                        depth, one colour per (variant, storage); misses (depth 0) are exact
                        and stated in the title, not plotted
  NAME_hit_rate_vs_tau  per layer: hit rate and fraction of KV keys read against tau
  NAME_bound            histogram of log10(error / bound) over the hits of every run of the
                        sweep, rigorous and paper form, with exact counts
  NAME_tables.md        every run, and the paired comparisons (split vs downdate, storage)

A figure shows one value of each parameter it does not vary. Which one is printed, with the
values the sweep has, and is in the figure's title and CSV: --tau picks the nearest tau (0.45
unless given), the other options an exact value (a value the sweep lacks is an error naming
what it has); without an option r = 256, split, production, fp32 where the sweep has several
values, and M and F must be given (--ring, --sinks) where it has several. The bound figure
pools every run. --from-csv redraws the PNGs from the CSVs alone (the data the figures are drawn from).
Needs numpy and matplotlib (Debian: python3-numpy, python3-matplotlib; run /usr/bin/python3);
h5py (python3-h5py) to read each layer's model_layer from the trace, where the file is found.
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
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402
import numpy as np  # noqa: E402

# What a figure shows of a parameter it does not vary, where the sweep has several and no
# option says (printed, and in every title and CSV row). M and F have none: give --ring/--sinks.
DEFAULTS = {"tail": "256", "variant": "split", "storage": "production", "precision": "fp32"}
CONFIG = ["trace", "layer", "model_layer", "tau", "ring", "tail", "sinks", "variant", "storage",
          "precision"]
DPI = 110


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return math.nan


def write_csv(path, header, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)


def die(msg):
    sys.exit(f"plot_study: {msg}")


# ---- choosing what a figure holds -------------------------------------------------------

def choose(runs, args):
    """One value per parameter the figures do not vary, printed with what the sweep has."""
    have = {k: sorted({r[k] for r in runs}, key=lambda v: (num(v), v)) for k in
            ("tau", "ring", "tail", "sinks", "variant", "storage", "precision")}
    chosen = {}
    if not runs:
        die("no runs in the tables")
    taus = [num(t) for t in have["tau"]]
    chosen["tau"] = have["tau"][min(range(len(taus)), key=lambda i: abs(taus[i] - args.tau))]
    for k, want in (("tail", args.tail), ("ring", args.ring), ("sinks", args.sinks),
                    ("variant", args.variant), ("storage", args.storage),
                    ("precision", args.precision)):
        if want is None:
            if len(have[k]) == 1:
                chosen[k] = have[k][0]
            elif k in DEFAULTS and DEFAULTS[k] in have[k]:
                chosen[k] = DEFAULTS[k]
            else:
                die(f"the sweep has {k} = {', '.join(have[k])}: choose one with --{k}")
        elif str(want) in have[k]:
            chosen[k] = str(want)
        else:
            die(f"--{k} {want} is not in the sweep ({k} = {', '.join(have[k])})")
    for k in have:
        print(f"plot_study: {k} = {chosen[k]} (the sweep has {', '.join(have[k])})")
    return chosen, have


def model_layers(study_dir):
    """(trace file name, layer) -> the model layer recorded in the trace, where it can be read."""
    out = {}
    try:
        import h5py  # optional: only for the model_layer column
    except ImportError:
        return out
    runs_dir = os.path.join(study_dir, "runs")
    seen = set()
    for f in sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []:
        if not f.endswith(".h5"):
            continue
        try:
            with h5py.File(os.path.join(runs_dir, f), "r") as h:
                path = h.attrs.get("trace_path", h.attrs.get("trace", ""))
                path = path.decode() if isinstance(path, bytes) else str(path)
        except OSError:
            continue
        if not path or path in seen or not os.path.exists(path):
            continue
        seen.add(path)
        with h5py.File(path, "r") as t:
            for name, g in t.get("layers", {}).items():
                if "model_layer" in g.attrs:
                    out[(os.path.basename(path), int(name))] = int(g.attrs["model_layer"])
    return out


# ---- the figure tables --------------------------------------------------------------------

def tables(d, args, out, name):
    runs = read(os.path.join(d, "runs.csv"))
    chosen, have = choose(runs, args)
    ml = model_layers(d)

    def cfg(r):
        return [r["trace"], r["layer"], ml.get((r["trace"], int(r["layer"])), ""), r["tau"],
                r["ring"], r["tail"], r["sinks"], r["variant"], r["storage"], r["precision"]]

    def match(r, free=()):
        return all(r[k] == v for k, v in chosen.items() if k not in free)

    lag = [r for r in read(os.path.join(d, "error_vs_lag.csv")) if match(r, ("tail",))]
    write_csv(os.path.join(out, f"{name}_heatmap_lag_r.csv"),
              CONFIG + ["lag_lo", "lag_hi", "count", "rel_l2_p50", "rel_l2_p99"],
              [cfg(r) + [r["lag_lo"], r["lag_hi"], r["count"], r["rel_l2_p50"], r["rel_l2_p99"]]
               for r in lag])
    depth = [r for r in read(os.path.join(d, "error_vs_depth.csv"))
             if match(r, ("variant", "storage"))]
    write_csv(os.path.join(out, f"{name}_error_vs_depth.csv"),
              CONFIG + ["depth_lo", "depth_hi", "count", "rel_l2_p50", "rel_l2_p90", "rel_l2_p99",
                        "rel_l2_max"],
              [cfg(r) + [r["depth_lo"], r["depth_hi"], r["count"], r["rel_l2_p50"], r["rel_l2_p90"],
                         r["rel_l2_p99"], r["rel_l2_max"]] for r in depth])
    hit = [r for r in read(os.path.join(d, "hit_rate.csv")) if match(r, ("tau",)) and r["head"] == "all"]
    write_csv(os.path.join(out, f"{name}_hit_rate_vs_tau.csv"),
              CONFIG + ["hit_rate", "kv_fraction", "rel_l2_p50", "rel_l2_p99"],
              [cfg(r) + [r["hit_rate"], r["kv_fraction"], r["rel_l2_p50"], r["rel_l2_p99"]]
               for r in hit])
    # The bound pools every run: per form and bin the count over all of them, with the
    # configuration columns listing the values pooled (';'-separated) and `runs` their number.
    hist = read(os.path.join(d, "bound_hist.csv"))
    pooled = {k: ";".join(sorted({str(c) for c in col}, key=lambda v: (num(v), v)))
              for k, col in zip(CONFIG, zip(*[cfg(r) for r in runs]))}
    acc = defaultdict(int)
    for r in hist:
        acc[(r["form"], num(r["log10_lo"]), num(r["log10_hi"]))] += int(num(r["count"]))
    write_csv(os.path.join(out, f"{name}_bound.csv"), CONFIG + ["runs", "form", "log10_lo", "log10_hi", "count"],
              [[pooled[k] for k in CONFIG] + [len(runs), f, f"{lo:g}", f"{hi:g}", c]
               for (f, lo, hi), c in sorted(acc.items())])
    write_tables(d, runs, os.path.join(out, f"{name}_tables.md"))


# ---- drawing from the CSVs ------------------------------------------------------------------

def layer_label(r):
    return f"layer {r['layer']}" + (f" (model {r['model_layer']})" if r.get("model_layer") else "")


def layers_of(rows):
    return sorted({(r["trace"], int(r["layer"])) for r in rows})


def one(rows, key):
    """The one value of `key` in a figure's rows ('a, b' if several)."""
    vals = sorted({r[key] for r in rows}, key=lambda v: (num(v), v))
    return ", ".join(vals)


def finish(fig, top_in=0.0, bottom_in=0.0, right=1.0):
    """tight_layout inside the margins kept for the suptitle (top_in inches), a figure legend
    (bottom_in inches) and a colour bar (right of `right`), so none of them overlaps a panel
    or is cut off (matplotlib 3.6 has no 'outside' legends)."""
    h = fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, bottom_in / h, right, 1 - top_in / h))


PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def plain_log(axis):
    """Log-scale ticks written as plain numbers (0.2, not 2×10^-1), at 1, 2 and 5 per decade."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(PLAIN)
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def grid(n):
    ncol = min(n, 4)
    return (n + ncol - 1) // ncol, ncol


def bucket_label(lo, hi):
    lo, hi = int(float(lo)), int(float(hi))
    return str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"


def heatmap(rows, path, title):
    layers = layers_of(rows)
    nrow, ncol = grid(len(layers))
    fig, axes = plt.subplots(nrow, ncol, figsize=(max(10.5, 4.6 * ncol), 3.3 * nrow + 0.8), squeeze=False)
    vals = [num(r["rel_l2_p50"]) for r in rows if num(r["rel_l2_p50"]) > 0]
    norm = LogNorm(vmin=min(vals), vmax=max(vals))
    cmap = plt.get_cmap("viridis")
    im = None
    for i, (tr, L) in enumerate(layers):
        ax = axes[i // ncol][i % ncol]
        lr = [r for r in rows if r["trace"] == tr and int(r["layer"]) == L]
        tails = sorted({int(r["tail"]) for r in lr})
        buckets = sorted({(int(r["lag_lo"]), int(r["lag_hi"])) for r in lr})
        g = np.full((len(tails), len(buckets)), np.nan)
        for r in lr:
            g[tails.index(int(r["tail"])), buckets.index((int(r["lag_lo"]), int(r["lag_hi"])))] = \
                num(r["rel_l2_p50"])
        im = ax.imshow(np.where(g > 0, g, np.nan), aspect="auto", origin="lower", norm=norm,
                       cmap=cmap)
        fs = 7 if len(buckets) <= 10 else 6
        for y in range(len(tails)):
            for x in range(len(buckets)):
                if g[y, x] > 0:
                    lum = np.dot(cmap(norm(g[y, x]))[:3], [0.299, 0.587, 0.114])
                    ax.text(x, y, f"{g[y, x]:.2g}", ha="center", va="center", fontsize=fs,
                            color="black" if lum > 0.5 else "white")
        ax.set_xticks(range(len(buckets)))
        ax.set_xticklabels([bucket_label(*b) for b in buckets], rotation=60, fontsize=7)
        ax.set_yticks(range(len(tails)))
        ax.set_yticklabels([str(t) for t in tails])
        ax.set_xlabel("lag m - p")
        ax.set_ylabel("tail r")
        ax.set_title(layer_label(lr[0]), fontsize=9)
    for j in range(len(layers), nrow * ncol):
        axes[j // ncol][j % ncol].axis("off")
    fig.suptitle(f"Error of hits against lag and r: tau = {one(rows, 'tau')}, M = {one(rows, 'ring')}, "
                 f"F = {one(rows, 'sinks')}, {one(rows, 'variant')}, {one(rows, 'storage')}, "
                 f"{one(rows, 'precision')} {title}", fontsize=10)
    finish(fig, top_in=0.3, right=0.9)
    cax = fig.add_axes([0.915, 0.18, 0.01, 0.64])
    cb = fig.colorbar(im, cax=cax)
    cb.set_label("median rel. L2 error (all panels)", fontsize=8)
    plain_log(cb.ax.yaxis)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def error_vs_depth(rows, path, title):
    hits = [r for r in rows if int(float(r["depth_lo"])) >= 1]
    misses = [r for r in rows if int(float(r["depth_lo"])) == 0]
    layers = layers_of(rows)
    combos = sorted({(r["variant"], r["storage"]) for r in rows})
    nrow, ncol = grid(len(layers))
    fig, axes = plt.subplots(nrow, ncol, figsize=(max(10.5, 4.6 * ncol), 3.0 * nrow + 1.4), squeeze=False)
    styles = {"rel_l2_p50": ("-", "p50"), "rel_l2_p90": ("--", "p90"), "rel_l2_p99": (":", "p99")}
    markers = "o^sDv<>"
    for i, (tr, L) in enumerate(layers):
        ax = axes[i // ncol][i % ncol]
        for ci, (v, s) in enumerate(combos):
            lr = sorted((r for r in hits if r["trace"] == tr and int(r["layer"]) == L and
                         r["variant"] == v and r["storage"] == s), key=lambda r: int(float(r["depth_lo"])))
            if not lr:
                continue
            # Later combinations thinner and with their own marker: where two coincide (the
            # variants often agree to 1e-4) both stay visible.
            for col, (ls, q) in styles.items():
                ax.plot(range(len(lr)), [num(r[col]) for r in lr], ls, color=f"C{ci}",
                        lw=2.2 - 0.5 * ci, marker=markers[ci % len(markers)], ms=3.5)
            ax.set_xticks(range(len(lr)))
            ax.set_xticklabels([bucket_label(r["depth_lo"], r["depth_hi"]) for r in lr],
                               rotation=60, fontsize=7)
        ax.set_yscale("log")
        plain_log(ax.yaxis)
        ax.grid(alpha=0.3, which="both")
        ax.set_xlabel("chain depth of the hit")
        ax.set_ylabel("rel. L2 error vs full")
        lab = [r for r in rows if r["trace"] == tr and int(r["layer"]) == L]
        ax.set_title(layer_label(lab[0]), fontsize=9)
    for j in range(len(layers), nrow * ncol):
        axes[j // ncol][j % ncol].axis("off")
    # One legend entry per colour (variant, storage) and one per line style (quantile).
    handles = [plt.Line2D([], [], color=f"C{ci}", lw=2.2 - 0.5 * ci, marker=markers[ci % len(markers)],
                          ms=3.5, label=f"{v}, {s}") for ci, (v, s) in enumerate(combos)]
    handles += [plt.Line2D([], [], color="black", ls=ls, label=q) for ls, q in styles.values()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    miss = max((num(r["rel_l2_max"]) for r in misses), default=math.nan)
    fig.suptitle(f"Error of hits against chain depth: tau = {one(rows, 'tau')}, r = {one(rows, 'tail')}, "
                 f"M = {one(rows, 'ring')}, F = {one(rows, 'sinks')}, {one(rows, 'precision')} {title}\n"
                 f"(misses, depth 0, are exact attention: rel. L2 at most {miss:.1e}, not plotted)",
                 fontsize=10)
    finish(fig, top_in=0.45, bottom_in=0.35)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def hit_rate_vs_tau(rows, path, title):
    layers = layers_of(rows)
    taus = sorted({num(r["tau"]) for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    # With fewer than three tau values a line would suggest a curve that was not measured.
    ls = "-" if len(taus) >= 3 else "none"
    for i, (tr, L) in enumerate(layers):
        lr = sorted((r for r in rows if r["trace"] == tr and int(r["layer"]) == L), key=lambda r: num(r["tau"]))
        t = [num(r["tau"]) for r in lr]
        axes[0].plot(t, [100 * num(r["hit_rate"]) for r in lr], marker="o", ls=ls, color=f"C{i % 10}",
                     label=layer_label(lr[0]))
        axes[1].plot(t, [100 * num(r["kv_fraction"]) for r in lr], marker="o", ls=ls, color=f"C{i % 10}")
    axes[0].set_ylabel("hit rate (%)")
    axes[1].set_ylabel("KV keys read (% of full attention)")
    for ax in axes:
        ax.set_xlabel("tau (hit iff d2 < 2D(1-tau)^2)")
        ax.set_xticks(taus)
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
    fig.legend(loc="center right", fontsize=8, frameon=False)
    note = "" if len(taus) >= 3 else f"\n(only tau = {', '.join(f'{t:g}' for t in taus)} were run: points, not curves)"
    fig.suptitle(f"Hit rate and keys read against tau: r = {one(rows, 'tail')}, M = {one(rows, 'ring')}, "
                 f"F = {one(rows, 'sinks')}, {one(rows, 'variant')}, {one(rows, 'storage')} {title}{note}",
                 fontsize=10)
    finish(fig, top_in=0.45 if note else 0.25, right=0.84)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def bound(rows, path, title):
    runs = int(rows[0]["runs"])
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    for fi, (form, what) in enumerate((("rigorous", "B (derived bound)"),
                                       ("paper", "paper's heuristic"))):
        acc = defaultdict(int)
        for r in rows:
            if r["form"] == form:
                acc[num(r["log10_lo"])] += int(num(r["count"]))
        if not acc:
            continue
        xs = sorted(acc)
        total = sum(acc.values())
        above = sum(c for x, c in acc.items() if x >= 0)
        held = f"on all {total} hits" if above == 0 else f"on {total - above} of {total} hits ({above} above)"
        ax.bar([x + 0.125 for x in xs], [acc[x] / total for x in xs], width=0.25, alpha=0.55,
               color=f"C{fi}", label=f"{what}: error <= bound {held}")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("log10(error / bound)   (left of 0: the bound holds)")
    ax.set_ylabel("fraction of hits")
    fig.legend(fontsize=8, loc="lower center", frameon=False)
    def vals(k):
        return rows[0][k].replace(";", ", ")

    fig.suptitle(f"Per-step bound over the hits of {runs} runs {title}\n(tau = {vals('tau')}; "
                 f"r = {vals('tail')}; M = {vals('ring')}; F = {vals('sinks')}; {vals('variant')}; "
                 f"{vals('storage')}; {vals('precision')})", fontsize=9.5)
    finish(fig, top_in=0.4, bottom_in=0.45)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def draw(src, out, name, title):
    """The PNGs in `out` from the figure CSVs in `src`."""
    for fig, fn in (("heatmap_lag_r", heatmap), ("error_vs_depth", error_vs_depth),
                    ("hit_rate_vs_tau", hit_rate_vs_tau), ("bound", bound)):
        csv_path = os.path.join(src, f"{name}_{fig}.csv")
        rows = read(csv_path)
        if not rows:
            die(f"{csv_path} has no rows")
        missing = [c for c in CONFIG if c not in rows[0]]
        if missing:
            die(f"{csv_path} lacks the configuration columns {', '.join(missing)}")
        png = os.path.join(out, f"{name}_{fig}.png")
        fn(rows, png + ".tmp.png", title)
        os.replace(png + ".tmp.png", png)
        print("wrote", png, "from", csv_path)


# ---- markdown tables ------------------------------------------------------------------------

def write_tables(d, runs, path):
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
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)
    print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study_dir", nargs="?", help="a mac-study output directory")
    ap.add_argument("--from-csv", metavar="DIR", help="redraw the PNGs in DIR from its figure CSVs")
    ap.add_argument("--out", help="directory for the CSV and PNG files (--from-csv: the PNGs; "
                    "default its DIR)")
    ap.add_argument("--name", default="study", help="file name prefix")
    ap.add_argument("--title", default="", help="text added to every figure title")
    ap.add_argument("--tau", type=float, default=0.45, help="the nearest tau is shown")
    ap.add_argument("--tail", type=int, default=None, help="r of the figures that do not vary it")
    ap.add_argument("--ring", type=int, default=None, help="M (required if the sweep has several)")
    ap.add_argument("--sinks", type=int, default=None, help="F (required if the sweep has several)")
    ap.add_argument("--variant", default=None)
    ap.add_argument("--storage", default=None)
    ap.add_argument("--precision", default=None)
    args = ap.parse_args()
    if args.from_csv:
        os.makedirs(args.out or args.from_csv, exist_ok=True)
        draw(args.from_csv, args.out or args.from_csv, args.name, args.title)
        return
    if not args.study_dir or not args.out:
        die("give STUDY_DIR and --out, or --from-csv DIR")
    os.makedirs(args.out, exist_ok=True)
    tables(args.study_dir, args, args.out, args.name)
    draw(args.out, args.out, args.name, args.title)


if __name__ == "__main__":
    main()
