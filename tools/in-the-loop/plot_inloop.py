#!/usr/bin/env python3
"""Figures of docs/in-the-loop.md from the CSVs of `python -m macattn.loop study`.

    python3 tools/in-the-loop/plot_inloop.py DIR OUTDIR

reads DIR/pareto.csv and DIR/layers.csv and writes OUTDIR/inloop_pareto.png (mean KL and
perplexity increase against the fraction of keys read, one curve per policy family) and
OUTDIR/inloop_layers.png (per layer: hit rate, keys read and chain depth for the policies
named in LAYER_POLICIES). Every plotted number and every configuration in a legend or title
is read from the CSVs; nothing is chosen silently: the policies drawn per layer are listed
here, and what each curve holds is printed.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Per family: the legend's name, colour, marker, and the CSV column it varies.
FAMILIES = [("tau", "τ sweep", "C0", "o", "tau"),
            ("cap", "depth cap K", "C1", "s", "K"),
            ("refresh", "refresh N", "C2", "^", "N"),
            ("layer-tau", "per-layer τ table", "C3", "D", None),
            ("sinks", "sinks F", "C4", "v", "F")]
# The run without that policy (K = -1 off, N = 0 off, F = 0) is the end point K = ∞, N = ∞,
# F = 0 of the cap, refresh and sinks curves: the row of the τ sweep whose configuration is
# the family's in every other column, found in the CSV (none: the curve is drawn without it).
ANCHORS = {"cap": ("K", "-1", "K ∞"), "refresh": ("N", "0", "N ∞"), "sinks": ("F", "0", "F 0")}
CONFIG = ["tau", "M", "r", "F", "K", "N"]
OFF = {"K": "-1", "N": "0", "F": "0"}  # a policy's value when it is not applied
SYMBOL = {"tau": "τ", "M": "M", "r": "r", "F": "F", "K": "K", "N": "N"}
LAYER_POLICIES = ["tau 0.45", "cap 2", "layer-tau 0.5"]


def common(rows, skip):
    """The configuration columns with one value over `rows` (except `skip`), as a dict."""
    out = {}
    for c in CONFIG:
        vals = {r[c] for r in rows}
        if c != skip and len(vals) == 1:
            out[c] = vals.pop()
    return out


def legend(name, rows, vary):
    """The family's name and the configuration its rows share (policies not applied left
    out; the τ of a per-layer table is its name)."""
    cfg = common(rows, vary)
    parts = [f"{SYMBOL[c]} {v}" for c, v in cfg.items()
             if not (c in OFF and v == OFF[c]) and not (c == "tau" and v == "per-layer")]
    return f"{name} ({', '.join(parts)})" if parts else name


def anchor(rows, fam, fam_rows):
    """The τ-sweep row with the family's configuration and its policy off, or None."""
    col, off, _ = ANCHORS[fam]
    cfg = common(fam_rows, col)
    cand = [r for r in rows if r["family"] == "tau" and r[col] == off
            and all(r[c] == v for c, v in cfg.items())]
    if len(cand) != 1:
        print(f"  {fam}: {len(cand)} rows of the τ sweep have its configuration {cfg} with "
              f"{col} {off}; the curve is drawn without its {ANCHORS[fam][2]} end point")
        return None
    return cand[0]


def read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def label_of(row):
    return row["policy"].split(" ", 1)[1] if " " in row["policy"] else row["policy"]


def pareto(rows, out):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for fam, name, colour, marker, vary in FAMILIES:
        fam_rows = [r for r in rows if r["family"] == fam]
        if not fam_rows:
            continue
        pts = [(float(r["keys_read"]), label_of(r), r) for r in fam_rows]
        end = anchor(rows, fam, fam_rows) if fam in ANCHORS else None
        if end is not None:
            pts.append((float(end["keys_read"]), ANCHORS[fam][2], end))
        pts.sort(key=lambda p: p[0])
        x = [p for p, _, _ in pts]
        label = legend(name, fam_rows, vary)
        print(f"  {label}: " + ", ".join(lab for _, lab, _ in pts))
        for ax, key, scale in ((axes[0], "kl_mean", 1.0), (axes[1], "ppl_increase", 100.0)):
            y = [float(r[key]) * scale for _, _, r in pts]
            ax.plot(x, y, marker=marker, color=colour, label=label)
            for xi, yi, (_, lab, _) in zip(x, y, pts):
                ax.annotate(lab, (xi, yi), textcoords="offset points", xytext=(4, 4),
                            fontsize=8, color=colour)
    floor = [float(r["kl_mean"]) for r in rows if r["family"] == "cap0"]
    for ax, ylabel in ((axes[0], "mean KL(exact ‖ MAC) per token [nats]"),
                       (axes[1], "perplexity increase [%]")):
        ax.set_xlabel("fraction of keys read (all layers, heads, decode positions)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    if floor:
        axes[0].axhline(floor[0], color="grey", ls=":", lw=1)
        axes[0].annotate(f"every step missing (K = 0): {floor[0]:.1e}, the rounding floor",
                         (0.02, floor[0]), xycoords=("axes fraction", "data"),
                         textcoords="offset points", xytext=(0, 4), fontsize=8, color="grey")
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].legend(loc="upper right", fontsize=8)  # the right panel has room there

    def values(key):
        return "/".join(sorted({r[key] for r in rows}, key=float))

    fig.suptitle(f"SmolLM2-135M, MAC in all 30 layers, teacher-forced: prompt {values('prompt')}, "
                 f"{values('decode')} decode positions, M {values('M')}, r {values('r')}, "
                 f"F {values('F')}, reuse from position {values('gen_min')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


def layers(rows, out):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    print("per-layer panels:", ", ".join(LAYER_POLICIES))
    for i, pol in enumerate(LAYER_POLICIES):
        rs = [r for r in rows if r["policy"] == pol]
        if not rs:
            print("  (no rows for", pol, ")")
            continue
        L = [int(r["layer"]) for r in rs]
        c = f"C{i}"
        label = legend(pol, rs, None)
        print(" ", label)
        axes[0].plot(L, [float(r["hit_rate"]) for r in rs], marker=".", color=c, label=label)
        axes[1].plot(L, [float(r["keys_read"]) for r in rs], marker=".", color=c, label=label)
        axes[2].plot(L, [int(r["depth_p90"]) for r in rs], marker=".", color=c,
                     label=f"{pol}: p90")
        axes[2].plot(L, [int(r["depth_max"]) for r in rs], ls=":", color=c, label=f"{pol}: max")
    for ax, t in zip(axes, ("hit rate", "fraction of keys read", "chain depth of hits")):
        ax.set_xlabel("model layer")
        ax.set_title(t, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_inloop.py STUDY_DIR OUT_DIR")
    src, dst = sys.argv[1:]
    os.makedirs(dst, exist_ok=True)
    pareto(read(os.path.join(src, "pareto.csv")), os.path.join(dst, "inloop_pareto.png"))
    layers(read(os.path.join(src, "layers.csv")), os.path.join(dst, "inloop_layers.png"))


if __name__ == "__main__":
    main()
