#!/usr/bin/env python3
"""Builds docs/walkthrough.md and its figures from the program's own output.

    /usr/bin/python3 scripts/walkthrough.py [--bin build/bin]            # write the page and PNGs
    /usr/bin/python3 scripts/walkthrough.py --bin build-cpu/bin --check  # what CTest runs

The page is rendered from docs/walkthrough/walkthrough.md.in: every number in it comes from
a mac-sim run the template names, so the page cannot drift from the program. In the template

    @@run NAME: ARGS@@     runs `mac-sim ARGS --quiet --json ...` and shows the command
    @@run! NAME: ARGS@@    the same, without showing it
    @@out NAME WHAT@@      inserts the run's printed output: `step M` (the explained step M),
                           `layer L` (layer L's summary block), `closing` (the closing table)
    @@let NAME = EXPR@@    names a value for the expressions below
    {{ EXPR }}, {{ EXPR :FMT }}  a Python expression over the runs (see `Env`), formatted

Figures (docs/walkthrough/*.png) are drawn with matplotlib from data taken from the same
runs; the data is kept in docs/walkthrough/figures.json. --check renders the page and the
figure data again and compares them with the committed files (numbers to the last printed
digit, everything else exactly), without drawing: it fails when the page or the figures
no longer match what the program prints.

What the PNGs were drawn from is recorded in figures.json under "drawn": the sha256 of
scripts/walkthrough_figures.py, of the figure data and of each PNG as written. --check also
fails when the drawing script, the committed data or a PNG no longer has the recorded
digest, i.e. when the pictures were not redrawn after their script or data changed.
"""
import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = os.path.join(ROOT, "docs", "walkthrough", "walkthrough.md.in")
PAGE = os.path.join(ROOT, "docs", "walkthrough.md")
FIG_DIR = os.path.join(ROOT, "docs", "walkthrough")
FIG_DATA = os.path.join(FIG_DIR, "figures.json")
FIG_SCRIPT = os.path.join(ROOT, "scripts", "walkthrough_figures.py")
FIGURES = ("strip.png", "ring.png", "chain.png", "forms.png")  # what walkthrough_figures.draw writes

RUN_RE = re.compile(r"^@@run(!?) (\w+): (.*)@@$")
OUT_RE = re.compile(r"^@@out (\w+) (.*)@@$")
LET_RE = re.compile(r"^@@let (\w+) = (.*)@@$")
EXPR_RE = re.compile(r"\{\{(.+?)\}\}")
TIMING_RE = re.compile(r" in \d+(\.\d+)?s$")


def run_sim(binary, args):
    """mac-sim ARGS --quiet --json TMP: (printed lines without timings, the JSON summary)."""
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "run.json")
        cmd = [os.path.join(binary, "mac-sim")] + args.split() + ["--quiet", "--json", js]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"walkthrough: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
        with open(js) as f:
            data = json.load(f)
    lines = [TIMING_RE.sub("", l.rstrip()) for l in p.stdout.splitlines()]
    return lines, data


class Run:
    def __init__(self, args, lines, data):
        self.args, self.lines, self.data = args, lines, data

    def step(self, m):
        """The explained step m (mac-sim --explain --json)."""
        for s in self.data["explain"]["steps"]:
            if s["m"] == m:
                return s
        sys.exit(f"walkthrough: step {m} was not explained by `{self.args}`")

    def layer(self, i=0):
        return self.data["layers"][i]

    def block(self, what):
        """Printed lines: the block of one explained step, one layer's summary, or the closing."""
        kind, _, arg = what.partition(" ")
        if kind == "step":
            head = f"== step m = {arg} "
            start = next((i for i, l in enumerate(self.lines) if l.startswith(head)), None)
        elif kind == "layer":
            start = next((i for i, l in enumerate(self.lines) if l.startswith(f"layer {arg}")), None)
        elif kind == "closing":
            start = next((i for i, l in enumerate(self.lines) if l.startswith("Reused outputs")), None)
        else:
            sys.exit(f"walkthrough: unknown output selection '{what}'")
        if start is None:
            sys.exit(f"walkthrough: `{self.args}` printed no '{what}'")
        end = start + 1
        if kind == "closing":  # the table, the verdict and how to read it: to the end
            end = len(self.lines)
            while end > start and (not self.lines[end - 1] or self.lines[end - 1].startswith("wrote ")):
                end -= 1
        else:  # a step's or a layer's block ends at the first blank line
            while end < len(self.lines) and self.lines[end]:
                end += 1
        return "\n".join(self.lines[start:end]).rstrip()


class Env(dict):
    """What template expressions see: the runs by name, and a few helpers."""

    def __init__(self, runs):
        super().__init__(runs)
        self.update(exp=math.exp, log=math.log, log10=math.log10, sqrt=math.sqrt, abs=abs,
                    min=min, max=max, round=round, len=len, sum=sum)


def render(binary):
    """The page text and the runs it used."""
    with open(TEMPLATE) as f:
        template = f.read().splitlines()
    runs, out, names = {}, [], {}
    out.append("<!-- Generated by scripts/walkthrough.py from docs/walkthrough/walkthrough.md.in "
               "(edit that file); test_walkthrough checks that it matches the program. -->")
    for line in template:
        m = RUN_RE.match(line)
        if m:
            hidden, name, args = m.groups()
            runs[name] = Run(args, *run_sim(binary, args))
            if not hidden:
                out += ["```sh", ("build/bin/mac-sim " + args).rstrip(), "```"]
            continue
        m = OUT_RE.match(line)
        if m:
            name, what = m.groups()
            out += ["```text", runs[name].block(what), "```"]
            continue
        env = Env(runs)
        env.update(names)
        m = LET_RE.match(line)
        if m:
            try:
                names[m.group(1)] = eval(m.group(2), {"__builtins__": {}}, env)
            except Exception as e:
                sys.exit(f"walkthrough: {line}: {e}")
            continue

        def expr(mm):
            body = mm.group(1)
            code, fmt = (body.rsplit(" :", 1) + [""])[:2] if " :" in body else (body, "")
            try:
                v = eval(code.strip(), {"__builtins__": {}}, env)
            except Exception as e:  # name the expression: the template is what to fix
                sys.exit(f"walkthrough: {{{{{body}}}}}: {e}")
            return format(v, fmt.strip()) if fmt else str(v)

        out.append(EXPR_RE.sub(expr, line))
    return "\n".join(out) + "\n", runs


# ---- figure data: everything a figure draws, from the runs -------------------------------

def figure_data(runs):
    split, dd, ring = runs["hit"], runs["hit_downdate"], runs["ring"]
    hit = split.step(HIT_STEP)
    hdd = dd.step(HIT_STEP)
    strip = {k: hit[k] for k in ("m", "match_pos", "sink_end", "entry_begin", "entry_end",
                                 "band_begin", "band_end", "tail_begin", "keys_read",
                                 "L_prefix", "L_band", "L_sinks", "L_tail", "L_out", "L_exact",
                                 "rel_l2")}
    chain = {"m": hit["m"], "depth": hit["depth"], "links": hit["chain"],
             "sink_end": hit["sink_end"], "tail_begin": hit["tail_begin"]}
    forms = {"split": {k: hit[k] for k in ("L_prefix", "L_band", "L_sinks", "L_tail",
                                           "L_entry_split", "L_out")},
             "downdate": {k: hdd[k] for k in ("L_prefix", "L_band", "L_sinks", "L_tail",
                                              "L_out", "L_W", "t", "one_minus_t", "condition",
                                              "L_entry_downdate")},
             "m": hit["m"]}
    e = ring.data["explain"]
    M = ring.data["config"]["ring"]
    idx = [i for i, p in enumerate(e["position"]) if RING_WINDOW[0] <= p < RING_WINDOW[1]]
    ringd = {"M": M, "prefill": e["prefill"], "position": [e["position"][i] for i in idx],
             "hit": [e["hit"][i] for i in idx], "match_pos": [e["match_pos"][i] for i in idx]}
    return rounded({"strip": strip, "chain": chain, "forms": forms, "ring": ringd})


def rounded(x):
    """Floats to 6 significant digits: what the figures can show, and what --check compares."""
    if isinstance(x, float):
        return float(f"{x:.6g}") if math.isfinite(x) else x
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


HIT_STEP = 503          # the hit the page explains (a typical one: its error is the head's median)
RING_WINDOW = (318, 346)  # steps of the small-ring run drawn in ring.png


def close(a, b):
    """Numbers equal to the last digit either was printed with; other tokens exactly."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
            return True
        # Both sides rounded to 6 significant digits: one unit of the 6th digit apart at most.
        return abs(a - b) <= 1.01e-5 * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


NUM_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def ulp(tok):
    """One unit in the last printed digit of a number token."""
    mant, _, ex = tok.lower().partition("e")
    dec = len(mant.split(".")[1]) if "." in mant else 0
    return 10.0 ** (-dec + (int(ex) if ex else 0))


def same_text(a, b):
    """First differing line of two pages (numbers may differ by one unit in the last digit)."""
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x == y:
            continue
        if NUM_RE.sub("#", x) != NUM_RE.sub("#", y):
            return i + 1, x, y
        for p, q in zip(NUM_RE.findall(x), NUM_RE.findall(y)):
            if p != q and abs(float(p) - float(q)) > 1.01 * max(ulp(p), ulp(q)):
                return i + 1, x, y
    if len(la) != len(lb):
        return min(len(la), len(lb)) + 1, "(length)", "(length)"
    return None


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def sha256_data(data):
    """The digest of the figure data as figures.json stores it (sorted keys, indent 1)."""
    return hashlib.sha256(json.dumps(data, indent=1, sort_keys=True).encode()).hexdigest()


def provenance(data):
    """What the PNGs were drawn from and what they were: recorded after drawing."""
    return {"script_sha256": sha256_file(FIG_SCRIPT), "data_sha256": sha256_data(data),
            "png_sha256": {n: sha256_file(os.path.join(FIG_DIR, n)) for n in FIGURES}}


def stale_figures(committed):
    """Why the committed PNGs may not show the committed data (a list of reasons, empty if none)."""
    drawn = committed.get("drawn")
    if not isinstance(drawn, dict):
        return ["figures.json records no \"drawn\" digests (the PNGs were not drawn by this script)"]
    why = []
    if drawn.get("script_sha256") != sha256_file(FIG_SCRIPT):
        why.append("scripts/walkthrough_figures.py changed since the PNGs were drawn")
    data = {k: v for k, v in committed.items() if k != "drawn"}
    if drawn.get("data_sha256") != sha256_data(data):
        why.append("the figure data in figures.json is not the data the PNGs were drawn from")
    pngs = drawn.get("png_sha256") or {}
    for n in FIGURES:
        path = os.path.join(FIG_DIR, n)
        if not os.path.exists(path):
            why.append(f"docs/walkthrough/{n} is missing")
        elif pngs.get(n) != sha256_file(path):
            why.append(f"docs/walkthrough/{n} is not the image drawn with the recorded data and script")
    return why


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="where mac-sim is")
    ap.add_argument("--check", action="store_true", help="compare with the committed page and figure data")
    a = ap.parse_args()
    page, runs = render(os.path.abspath(a.bin))
    data = figure_data(runs)
    if a.check:
        with open(PAGE) as f:
            diff = same_text(f.read(), page)
        with open(FIG_DATA) as f:
            committed = json.load(f)
        figs_ok = close({k: v for k, v in committed.items() if k != "drawn"}, data)
        stale = stale_figures(committed)
        if diff:
            print(f"walkthrough: docs/walkthrough.md line {diff[0]} differs from the program:\n"
                  f"  page:    {diff[1]}\n  program: {diff[2]}")
        if not figs_ok:
            print("walkthrough: docs/walkthrough/figures.json differs from the program's output")
        for why in stale:
            print(f"walkthrough: {why}")
        if diff or not figs_ok or stale:
            print("regenerate with: /usr/bin/python3 scripts/walkthrough.py --bin BUILD/bin")
            return 1
        print("walkthrough: the page and the figure data match the program, and the PNGs were drawn from that data")
        return 0
    import walkthrough_figures  # matplotlib only when drawing
    with open(PAGE, "w") as f:
        f.write(page)
    walkthrough_figures.draw(data, FIG_DIR)
    with open(FIG_DATA, "w") as f:
        json.dump(dict(data, drawn=provenance(data)), f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"walkthrough: wrote {os.path.relpath(PAGE, ROOT)}, {os.path.relpath(FIG_DATA, ROOT)} and the PNGs")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
