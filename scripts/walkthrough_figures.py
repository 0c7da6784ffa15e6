"""The figures of docs/walkthrough.md, drawn from the data scripts/walkthrough.py took from
mac-sim's output (docs/walkthrough/figures.json). Debian's python3-matplotlib."""
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch, Rectangle  # noqa: E402

COLORS = {"sinks": "#7f7f7f", "prefix": "#4c72b0", "band": "#dd8452", "tail": "#55a868",
          "empty": "#f2f2f2"}
DPI = 110


def key_axis(ax, m, xlim, ylim, xlabel):
    """A horizontal axis of key positions [0, m] and nothing else (the strip and the chain)."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_yticks([])
    ax.set_xticks(range(0, m + 2, 100))
    ax.spines["bottom"].set_bounds(0, m + 1)
    ax.set_xlabel(xlabel)
    for s in ("left", "right", "top"):
        ax.spines[s].set_visible(False)


def share(L, L_out):
    """Share of the output's softmax mass held by a piece with LSE L (natural log)."""
    return 0.0 if L is None else math.exp(L - L_out)


def strip(d, path):
    """The key ranges of one hit: sinks | prefix | band | tail over [0, m]."""
    m = d["m"]
    pieces = [("sinks", 0, d["sink_end"], "recomputed", d["L_sinks"]),
              ("prefix", d["entry_begin"], d["entry_end"], f"reused: entry({d['match_pos']})",
               d["L_prefix"]),
              ("band", d["band_begin"], d["band_end"], "recomputed", d["L_band"]),
              ("tail", d["tail_begin"], m + 1, "recomputed", d["L_tail"])]
    fig, ax = plt.subplots(figsize=(11, 3.6), dpi=DPI)
    pad = 0.02 * m
    for name, a, b, what, L in pieces:
        if b <= a:
            continue
        ax.add_patch(Rectangle((a, 0), b - a, 1, color=COLORS[name], ec="white", lw=1.5))
        # The sinks and the tail sit at the ends: label them outside the strip, so the
        # narrow band's label has room.
        x, ha = {"sinks": (-pad, "right"), "tail": (m + 1 + pad, "left")}.get(name,
                                                                         ((a + b) / 2, "center"))
        y_top, y_bot = 1.08, -0.4
        if name in ("sinks", "tail"):
            ax.text(x, 0.55, f"{name} [{a}, {b})", ha=ha, va="bottom", fontsize=9)
            ax.text(x, 0.45, f"{b - a} keys, {what}\nmass {100 * share(L, d['L_out']):.1f}%",
                    ha=ha, va="top", fontsize=8.5)
        else:
            ax.text(x, y_top, f"{name} [{a}, {b})", ha=ha, va="bottom", fontsize=9)
            ax.text(x, y_bot, f"{b - a} keys\n{what}\nmass {100 * share(L, d['L_out']):.1f}%",
                    ha=ha, va="top", fontsize=8.5)
    for x, lab in ((d["entry_end"], "E(p)"), (d["band_end"], "E(m)")):
        ax.plot([x, x], [-0.08, 1.0], color="black", lw=1)
        ax.text(x, -0.1, lab, ha="center", va="top", fontsize=9, style="italic")
    key_axis(ax, m, (-0.2 * m, 1.2 * m), (-1.05, 1.45),
             "key position t   (mass: the piece's share of the softmax mass in MAC's output)")
    ax.set_title(f"One hit: step m = {m} reuses entry({d['match_pos']}) and reads "
                 f"{d['keys_read']} of {m + 1} keys; output rel L2 vs exact {d['rel_l2']:.3f}",
                 fontsize=10.5)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def ring(d, path):
    """Slots of a small ring over consecutive steps: what each holds, what is read and written."""
    M, pos = d["M"], d["position"]
    fig, ax = plt.subplots(figsize=(12, 4.6), dpi=DPI)
    cmap = plt.get_cmap("Blues_r")
    for j, m in enumerate(pos):
        for s in range(M):
            # Slot s holds the latest p < m with p mod M = s: one of the candidates [m − M, m).
            p = m - 1 - ((m - 1 - s) % M)
            age = m - p
            ax.add_patch(Rectangle((j, s), 1, 1, color=cmap(0.15 + 0.7 * (age - 1) / max(1, M - 1)),
                                   ec="white", lw=0.8))
            ax.text(j + 0.5, s + 0.5, str(p), ha="center", va="center", fontsize=6.5,
                    color="white" if age <= M // 2 else "black")
        w = m % M
        ax.add_patch(Rectangle((j + 0.04, w + 0.04), 0.92, 0.92, fill=False, ec="#c44e52", lw=2))
        if d["hit"][j]:
            sm = d["match_pos"][j] % M
            rbw = d["match_pos"][j] == m - M
            ax.plot(j + 0.5, sm + 0.82, marker="*" if rbw else "o", ms=9 if rbw else 4,
                    color="#ffd92f" if rbw else "#dd8452", mec="black", mew=0.5)
    ax.set_xlim(0, len(pos))
    ax.set_ylim(0, M)
    ax.set_xticks([j + 0.5 for j in range(len(pos))])
    ax.set_xticklabels([str(m) for m in pos], fontsize=7, rotation=90)
    ax.set_yticks([s + 0.5 for s in range(M)])
    ax.set_yticklabels([str(s) for s in range(M)], fontsize=8)
    ax.set_xlabel("decode step m")
    ax.set_ylabel(f"slot (p mod {M})")
    ax.set_title(f"Ring of M = {M} slots, one head: each cell is the position p the slot holds "
                 f"when step m starts (darker = more recent)", fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, fill=False, ec="#c44e52", lw=2),
               plt.Line2D([], [], ls="", marker="o", ms=5, color="#dd8452", mec="black", mew=0.5),
               plt.Line2D([], [], ls="", marker="*", ms=10, color="#ffd92f", mec="black", mew=0.5)]
    labels = ["slot m mod M: written at the end of step m",
              "hit: the entry matched",
              f"hit at lag M = {M}: the slot read is the one written (read before write)"]
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3,
              fontsize=8.5, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chain(d, path):
    """Who computed which keys of entry(m): one row per chain member."""
    links, m = d["links"], d["m"]
    n = len(links)
    fig, ax = plt.subplots(figsize=(11, 1.0 + 0.55 * (n + 1)), dpi=DPI)
    cmap = plt.get_cmap("tab10")
    top = n
    for j, c in enumerate(links):
        y = top - 1 - j
        col = cmap(j % 10)
        ax.add_patch(Rectangle((c["band_begin"], y + 0.15), c["band_end"] - c["band_begin"], 0.7,
                               color=col))
        ax.add_patch(Rectangle((c["band_begin"], top + 0.15), c["band_end"] - c["band_begin"], 0.7,
                               color=col, ec="white", lw=1))
        kind = "hit" if c["hit"] else ("prompt entry, exact" if c["prompt"] else "miss, exact")
        age = f", {m - c['pos']} steps before m" if c["pos"] != m else ""
        ax.text(c["band_end"] + m * 0.01, y + 0.5,
                f"q_{c['pos']} ({kind}{age}): [{c['band_begin']}, {c['band_end']})",
                va="center", fontsize=8.5)
    ax.text(-m * 0.01, top + 0.5, f"entry({m})", ha="right", va="center", fontsize=9,
            weight="bold")
    for j, c in enumerate(links):
        ax.text(-m * 0.01, top - 1 - j + 0.5, f"c{j + 1} = {c['pos']}", ha="right", va="center",
                fontsize=8.5)
    ax.axvspan(d["tail_begin"], m + 1, color=COLORS["tail"], alpha=0.15, lw=0)
    ax.text((d["tail_begin"] + m + 1) / 2, top + 1.05, "tail", ha="center", fontsize=8.5,
            color=COLORS["tail"])
    key_axis(ax, m, (-m * 0.14, m * 1.45), (-0.2, top + 1.4), "key position t")
    ax.set_title(f"The chain of entry({m}): depth {d['depth']}; each member computed its "
                 f"segment of the prefix with its own query", fontsize=10.5)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _box(ax, x, y, text, color):
    ax.add_patch(FancyBboxPatch((x - 0.14, y - 0.07), 0.28, 0.14,
                                boxstyle="round,pad=0.01", fc=color, ec="black", lw=0.8,
                                alpha=0.9))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5)


def _arrow(ax, a, b, label=None):
    ax.annotate("", xy=b, xytext=a, arrowprops=dict(arrowstyle="->", lw=1.1))
    if label:
        ax.text((a[0] + b[0]) / 2 + 0.02, (a[1] + b[1]) / 2, label, fontsize=9, va="center")


def fmt_L(L):
    return "empty" if L is None else f"L = {L:.4f}"


def forms(d, path):
    """Split (prefix ⊕ band is stored) and downdate (out ⊖ (sinks ⊕ tail) is stored)."""
    s, w, m = d["split"], d["downdate"], d["m"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=DPI)
    for ax in axes:
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    # Split: the entry first, from pieces; the output adds sinks and tail.
    ax = axes[0]
    ax.set_title("split: entry(m) = prefix ⊕ band (never subtracts)", fontsize=10.5)
    _box(ax, 0.18, 0.82, f"prefix = entry(p)\n{fmt_L(s['L_prefix'])}", COLORS["prefix"] + "80")
    _box(ax, 0.5, 0.82, f"band\n{fmt_L(s['L_band'])}", COLORS["band"] + "80")
    _box(ax, 0.34, 0.5, f"entry({m}), stored\n{fmt_L(s['L_entry_split'])}", "#ffffff")
    _box(ax, 0.82, 0.5, f"sinks ⊕ tail\n{fmt_L(w['L_W'])}", COLORS["tail"] + "80")
    _box(ax, 0.58, 0.16, f"out\n{fmt_L(s['L_out'])}", "#e5e5e5")
    _arrow(ax, (0.2, 0.74), (0.3, 0.58), "⊕")
    _arrow(ax, (0.48, 0.74), (0.38, 0.58))
    _arrow(ax, (0.38, 0.42), (0.54, 0.24), "⊕")
    _arrow(ax, (0.8, 0.42), (0.62, 0.24))
    # Downdate: the output first; the entry removes what it must not hold.
    ax = axes[1]
    ax.set_title("downdate: entry(m) = out ⊖ (sinks ⊕ tail)", fontsize=10.5)
    _box(ax, 0.18, 0.82, f"prefix = entry(p)\n{fmt_L(w['L_prefix'])}", COLORS["prefix"] + "80")
    _box(ax, 0.5, 0.82, f"band\n{fmt_L(w['L_band'])}", COLORS["band"] + "80")
    _box(ax, 0.82, 0.82, f"sinks ⊕ tail = W\n{fmt_L(w['L_W'])}", COLORS["tail"] + "80")
    _box(ax, 0.5, 0.5, f"out\n{fmt_L(w['L_out'])}", "#e5e5e5")
    _box(ax, 0.5, 0.16, f"entry({m}), stored\n{fmt_L(w['L_entry_downdate'])}", "#ffffff")
    _arrow(ax, (0.22, 0.74), (0.44, 0.58), "⊕")
    _arrow(ax, (0.5, 0.74), (0.5, 0.58))
    _arrow(ax, (0.78, 0.74), (0.56, 0.58))
    _arrow(ax, (0.5, 0.42), (0.5, 0.24), "⊖ W")
    ax.text(0.7, 0.33,
            f"t = e^(L_W − L_out) = {w['t']:.4f}\n1 − t = {w['one_minus_t']:.4f}\n"
            f"condition 1/(1 − t) = {w['condition']:.3g}", fontsize=8.5, va="center")
    fig.suptitle(f"Step m = {m}: two ways to build the same entry, equal in exact arithmetic",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path)
    plt.close(fig)


def draw(data, out_dir):
    strip(data["strip"], os.path.join(out_dir, "strip.png"))
    ring(data["ring"], os.path.join(out_dir, "ring.png"))
    chain(data["chain"], os.path.join(out_dir, "chain.png"))
    forms(data["forms"], os.path.join(out_dir, "forms.png"))
