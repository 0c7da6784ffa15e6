#!/usr/bin/env python3
"""The adaptive gate (docs/semantics.md §3.5) in the byte model: on real streams through mac-sim,
and on mac-bench's synthetic grid. Results and commands: docs/gate.md.

    python3 tools/gate/gate_study.py real --bin build-cpu/bin [--trace FILE --layers 0,1 ...]
                                          [--windows 16,32 --probes 256,512] [--csv FILE]
                                          [--margin 1000 --min-hit 0]
    python3 tools/gate/gate_study.py grid [--measured docs/bench/mac_bench_h200.csv] [--csv FILE]

`real` runs mac-sim (--no-oracle) on a trace with the gate off, and derives from each layer's
per-step record the gated runs: W and P from the lists, μ and h_min from --margin and --min-hit
(1000 ‰ and 0 by default), B_fix for batch 1, 16 and 64 (16.5 MB / B) and B_fix 0. Without a depth cap or refresh a step's decisions do not depend
on the gate (see derive()), so this is exact; for the configurations named by --direct (first W
and P only) mac-sim also runs the gated run itself, and the script stops with an error unless
every step's mode and bytes equal the derived ones and its copy of the rule, replayed on
mac-sim's record, decides every step as mac-sim did. One row per (layer, configuration): hit
rate, steps gated, and the predicted bytes of the steps as run over full attention's.

`grid` draws each decode step's decisions as mac-bench places them (exactly round((1 − f)·Hq)
misses, uniform over the heads; hits at lags uniform in 1..64) for one request at every point of
mac-bench's grid (Hq 32, Hkv 8 | 4, D 128, M 512, r 256, F 0, contexts 32768, 65536, 130048, hit
fractions 0, 0.5, 0.9, 0.95, 1, B_fix / batch for batch 1, 16, 64), runs the rule over
`--steps` steps from kv_len = ctx on, and writes per point the fraction of steps gated, the
predicted bytes with the gate on and off over full attention's, and whether the first window
decided as the rule says it must (all-miss: off after the first window). With --measured, the
mac-bench CSV of one device run, each point also gets the time MAC took there relative to full
attention and the time the gate would give if a gated step took full attention's time.
"""
import argparse
import csv
import json
import os
import random
import re
import subprocess
import sys
import tempfile

PER_MILLE = 1000
FIXED_BYTES_DEFAULT = 16_500_000  # kGateFixedBytesDefault, mac/ref/gate.hpp
NONE, ON, OFF, FLOOR = 0, 1, 2, 3  # GateMode: kNone, kOn, kOff, kFloor


# ---- The byte model and the rule: a copy of mac/ref/gate.hpp (semantics §3.5) --------------
def prefix_end(p, r):
    return max(0, p + 1 - r)


def full_bytes(g, m):
    return g["hkv"] * 4 * g["d"] * (m + 1)


def write_bytes(g):
    return g["hq"] * 6 * g["d"]


def mac_bytes(g, m, group_keys):
    scan = g["hq"] * min(g["ring"], m) * 2 * g["d"]
    return 4 * g["d"] * group_keys + scan + write_bytes(g) + g["fixed"]


def floor_keys(g, m):
    fe = min(g["sinks"], prefix_end(m, g["tail"]))
    return g["hkv"] * (fe + m + 1 - prefix_end(m - 1, g["tail"]))


def floor_gated(g, m):
    return PER_MILLE * mac_bytes(g, m, floor_keys(g, m)) >= g["margin"] * full_bytes(g, m)


class Gate:
    """The state of one (request, layer) and the rule: mode() before a step, update() after."""

    def __init__(self, g):
        self.g = g
        self.sum_mac = self.sum_full = self.hits = self.steps = self.off_left = 0

    def mode(self, m):
        if self.g["window"] == 0:
            return NONE
        if self.off_left > 0:
            return OFF
        return FLOOR if floor_gated(self.g, m) else ON

    def update(self, mode, hits, bytes_mac, bytes_full):
        g = self.g
        if mode == OFF:
            self.off_left -= 1
            return
        if mode != ON:
            return
        self.sum_mac += bytes_mac
        self.sum_full += bytes_full
        self.hits += hits
        self.steps += 1
        if self.steps < g["window"]:
            return
        no_pay = PER_MILLE * self.sum_mac >= g["margin"] * self.sum_full
        few_hits = PER_MILLE * self.hits < g["min_hit"] * g["hq"] * g["window"]
        self.sum_mac = self.sum_full = self.hits = self.steps = 0
        if no_pay or few_hits:
            self.off_left = g["probe"]


def gate_params(window=16, probe=256, margin=1000, min_hit=0, fixed=FIXED_BYTES_DEFAULT):
    return {"window": window, "probe": probe, "margin": margin, "min_hit": min_hit,
            "fixed": fixed}


# ---- real: mac-sim on a trace -----------------------------------------------------------------
def run_sim(binary, args):
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "run.json")
        cmd = [os.path.join(binary, "mac-sim")] + args + ["--quiet", "--json", js]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"gate_study: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
        with open(js) as f:
            data = json.load(f)
    shape = re.search(r"shape: D = (\d+), Hq = (\d+), Hkv = (\d+)", p.stdout)
    if not shape:
        sys.exit(f"gate_study: no shape line in the output of {' '.join(cmd)}")
    return data, dict(zip(("d", "hq", "hkv"), map(int, shape.groups())))


def layer_gate(data, shape, gp):
    """The gate's configuration of a mac-sim run (its JSON config and printed shape)."""
    c = data["config"]
    return dict(shape, ring=c["ring"], tail=c["tail"], sinks=c["sinks"], **gp)


def replay(data, shape, gp, layer):
    """Checks mac-sim's per-step modes of one gated layer against this file's rule, fed with the
    step's own hits and bytes: the two copies of the rule must agree on every step."""
    g, gen_min = layer_gate(data, shape, gp), data["config"]["gen_min"]
    gate = Gate(g)
    gr = layer["gate"]
    for i, (mode, hits, b) in enumerate(zip(gr["step_mode"], gr["step_hits"], gr["step_bytes"])):
        m = layer["prefill"] + i
        want = gate.mode(m) if m >= gen_min else NONE
        if want != mode:
            sys.exit(f"gate_study: layer {layer['layer']} step m = {m}: mac-sim's mode {mode}, "
                     f"this script's rule {want}")
        gate.update(mode, hits, b, full_bytes(g, m))
    return len(gr["step_mode"])


def derive(data, shape, gp, layer):
    """A gated run from the record of the same layer's ungated run. Without a depth cap or
    refresh a step's decisions do not depend on the gate: every ready step writes q̃_m, and the
    entries of gated and matched steps are both usable where non-empty. So a matched step of the
    gated run has the ungated run's hits and keys, and its bytes are the ungated step's with
    B_fix exchanged. Returns (per-step modes, per-step bytes as run)."""
    c = data["config"]
    g, fixed0 = layer_gate(data, shape, gp), c["gate_fixed_bytes"]
    gate = Gate(g)
    gr = layer["gate"]
    modes, run_bytes = [], []
    for i, (hits, b) in enumerate(zip(gr["step_hits"], gr["step_bytes"])):
        m = layer["prefill"] + i
        mode = gate.mode(m) if m >= c["gen_min"] else NONE
        matched = m >= c["gen_min"] and mode not in (OFF, FLOOR)
        mb = b - fixed0 + g["fixed"] if matched else b
        gate.update(mode, hits, mb, full_bytes(g, m))
        modes.append(mode)
        run_bytes.append(mb if matched else full_bytes(g, m) + write_bytes(g))
    return modes, run_bytes


CONFIGS = (("b1", FIXED_BYTES_DEFAULT), ("b16", FIXED_BYTES_DEFAULT // 16),
           ("b64", FIXED_BYTES_DEFAULT // 64), ("fixed0", 0))


def real(a):
    if a.direct not in ("all", "none") and not set(a.direct.split(",")) <= {c for c, _ in CONFIGS}:
        sys.exit(f"gate_study: --direct {a.direct}: not 'all' or a list of "
                 f"{', '.join(c for c, _ in CONFIGS)}")
    direct = ({c for c, _ in CONFIGS} if a.direct == "all" else
              set() if a.direct == "none" else set(a.direct.split(",")))
    base = ["--no-oracle"] + (["--trace", a.trace] if a.trace else [])
    base += a.sim_args.split() if a.sim_args else []
    rows, replayed, compared = [], 0, 0
    trace = os.path.basename(a.trace) if a.trace else "fixture"
    for lay in a.layers.split(",") if a.layers else [None]:
        sel = ["--layer", lay] if lay is not None else []
        off, shape = run_sim(a.bin, base + sel)
        gated = {}
        windows, probes = ints(a.windows), ints(a.probes)
        for label, fixed in CONFIGS:
            if label in direct:
                gp = gate_params(window=windows[0], probe=probes[0], margin=a.margin,
                                 min_hit=a.min_hit, fixed=fixed)
                args = ["--gate-window", str(gp["window"]), "--gate-probe", str(gp["probe"]),
                        "--gate-margin", str(gp["margin"]), "--gate-min-hit", str(gp["min_hit"]),
                        "--gate-fixed-bytes", str(gp["fixed"])]
                gated[label] = run_sim(a.bin, base + sel + args)[0]
        for li, L in enumerate(off["layers"]):
            steps, gen_min = L["steps"], off["config"]["gen_min"]
            fixed0 = off["config"]["gate_fixed_bytes"]
            full = sum(full_bytes(dict(shape), L["prefill"] + i) for i in range(steps))
            matched = sum(1 for i in range(steps) if L["prefill"] + i >= gen_min)
            for (label, fixed), W, P in [(c, w, p) for c in CONFIGS for w in windows
                                         for p in probes]:
                gp = gate_params(window=W, probe=P, margin=a.margin, min_hit=a.min_hit,
                                 fixed=fixed)
                modes, run_b = derive(off, shape, gp, L)
                if label in direct and (W, P) == (windows[0], probes[0]):
                    G = gated[label]["layers"][li]
                    replayed += replay(gated[label], shape, gp, G)
                    if modes != G["gate"]["step_mode"] or run_b != G["gate"]["step_bytes"]:
                        sys.exit(f"gate_study: layer {L['layer']} {label}: the gated run derived "
                                 f"from the ungated one differs from mac-sim's gated run")
                    compared += steps
                hits = sum(h for h, mo in zip(L["gate"]["step_hits"], modes) if mo == ON)
                n = {k: modes.count(k) for k in (ON, OFF, FLOOR)}
                common = {"trace": trace, "layer": L["layer"], "model_layer": L["model_layer"],
                          "fixed_bytes": fixed, "window": W, "probe": P,
                          "prefill": L["prefill"], "steps": steps}
                # The ungated run at this B_fix: every step at or past gen_min matched.
                off_bytes = L["gate"]["bytes"] - matched * (fixed0 - fixed)
                first = (W, P) == (windows[0], probes[0])  # the ungated row once per B_fix
                for gate, hit, nn, b in (("off", L["hit_rate"], {ON: 0, OFF: 0, FLOOR: 0},
                                          off_bytes),
                                         ("on", hits / (steps * L["heads"]), n, sum(run_b))):
                    if gate == "off" and not first:
                        continue
                    row = dict(common, gate=gate, hit_rate=f"{hit:.4f}", steps_on=nn[ON],
                               steps_off=nn[OFF], steps_floor=nn[FLOOR],
                               gated_fraction=f"{(nn[OFF] + nn[FLOOR]) / steps:.4f}",
                               bytes_over_full=f"{b / full:.4f}")
                    rows.append(row)
                    print(f"layer {L['layer']:>2} (model {L['model_layer']:>2}) {label:<6} "
                          f"W {W:>3} P {P:>4} "
                          f"gate {gate:<3} hit {100 * hit:5.1f}%  gated "
                          f"{100 * (nn[OFF] + nn[FLOOR]) / steps:5.1f}% (off {nn[OFF]}, floor "
                          f"{nn[FLOOR]}, on {nn[ON]})  bytes/full {b / full:.4f}", flush=True)
    if replayed:
        print(f"rule replayed on {replayed} steps of mac-sim's gated runs: every mode as mac-sim "
              f"decided; {compared} derived steps equal to mac-sim's gated runs")
    write_csv(a.csv, rows)


# ---- grid: mac-bench's synthetic decisions ----------------------------------------------------
def step_keys(rng, m, hq, hkv, tail, f, max_lag=64):
    """One step's Σ_g keys_g and hits, decisions placed as mac-bench places them."""
    misses = round((1.0 - f) * hq)
    heads = list(range(hq))
    rng.shuffle(heads)
    miss = set(heads[:misses])
    gsize = hq // hkv
    keys = 0
    for hk in range(hkv):
        lo = prefix_end(m, tail)
        for h in range(hk * gsize, (hk + 1) * gsize):
            lo = 0 if h in miss else min(lo, prefix_end(m - rng.randint(1, max_lag), tail))
        keys += m + 1 - lo  # F = 0: no sinks
    return keys, hq - misses


def measured_ratios(path):
    """(hkv, batch, ctx, hit) -> (full ms, MAC ms) from a mac-bench CSV (its main --pdl rows)."""
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    pdl = rows[0]["pdl"]
    full, mac = {}, {}
    for r in rows:
        if r["pdl"] != pdl:
            continue
        key = (int(r["hkv"]), int(r["batch"]), int(r["ctx"]))
        if r["kind"] == "full":
            full[key] = float(r["median_ms"])
        elif r["kind"] == "mac" and r["k3"] == "fused":
            mac[key + (round(float(r["hit_frac"]), 2),)] = float(r["median_ms"])
    return {k: (full[k[:3]], v) for k, v in mac.items() if k[:3] in full}


def grid(a):
    measured = measured_ratios(a.measured) if a.measured else {}
    rows = []
    worst = None
    for hkv in (8, 4):
        for batch in (1, 16, 64):
            for ctx in (32768, 65536, 130048):
                for f in (0.0, 0.5, 0.9, 0.95, 1.0):
                    g = dict(hq=32, hkv=hkv, d=128, ring=512, tail=256, sinks=0,
                             **gate_params(window=a.window, probe=a.probe,
                                           fixed=FIXED_BYTES_DEFAULT // batch))
                    rng = random.Random(a.seed)
                    gate = Gate(g)
                    n = {NONE: 0, ON: 0, OFF: 0, FLOOR: 0}
                    run_b = mac_b = full_b = 0
                    first_window_off = None
                    for i in range(a.steps):
                        m = ctx - 1 + i
                        keys, hits = step_keys(rng, m, 32, hkv, 256, f)
                        mb, fb = mac_bytes(g, m, keys), full_bytes(g, m)
                        mode = gate.mode(m)
                        n[mode] += 1
                        run_b += mb if mode == ON else fb + write_bytes(g)
                        mac_b += mb
                        full_b += fb
                        gate.update(mode, hits, mb, fb)
                        if i == a.window - 1:
                            first_window_off = gate.off_left > 0
                    gated = (n[OFF] + n[FLOOR]) / a.steps
                    row = {"hkv": hkv, "batch": batch, "ctx": ctx, "hit_frac": f"{f:.2f}",
                           "fixed_bytes": g["fixed"], "window": a.window, "probe": a.probe,
                           "steps": a.steps,
                           "gated_fraction": f"{gated:.4f}",
                           "off_after_first_window": int(first_window_off),
                           "mac_bytes_over_full": f"{mac_b / full_b:.4f}",
                           "gated_bytes_over_full": f"{run_b / full_b:.4f}"}
                    t = measured.get((hkv, batch, ctx, round(f, 2)))
                    if t:
                        # Time with the gate: matched steps at MAC's measured time, gated steps at
                        # full attention's; as full/time, so > 1 is faster than full attention.
                        tf, tm = t
                        with_gate = tf / ((1 - gated) * tm + gated * tf)
                        row["mac_speedup_measured"] = f"{tf / tm:.3f}"
                        row["gated_speedup_predicted"] = f"{with_gate:.3f}"
                        if worst is None or with_gate < worst[0]:
                            worst = (with_gate, hkv, batch, ctx, f)
                    rows.append(row)
                    print(" ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    if worst:
        print(f"slowest point with the gate: {worst[0]:.3f} of full attention's speed at Hkv "
              f"{worst[1]}, batch {worst[2]}, ctx {worst[3]}, hit {worst[4]}")
    write_csv(a.csv, rows)


def ints(text):
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        sys.exit(f"gate_study: '{text}' is not a list of integers")
    if not v or min(v) < 1:
        sys.exit(f"gate_study: '{text}': every value must be >= 1")
    return v


def write_csv(path, rows):
    if not path or not rows:
        return
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("real", help="mac-sim on a trace, gate off and on")
    r.add_argument("--bin", default="build-cpu/bin", help="where mac-sim is")
    r.add_argument("--trace", default="", help="trace file (default: mac-sim's built-in fixture "
                   "job, every layer)")
    r.add_argument("--layers", default="", help="with --trace: layers to run, e.g. 0,1,2,3")
    r.add_argument("--sim-args", default="", help="more mac-sim flags, e.g. '--prefill 4096'")
    r.add_argument("--windows", default="16", help="W of the gated runs, e.g. 16,32")
    r.add_argument("--probes", default="256", help="P of the gated runs, e.g. 256,512")
    r.add_argument("--margin", type=int, default=PER_MILLE,
                   help="mu of the gated runs, per mille, in [1, 10000]")
    r.add_argument("--min-hit", type=int, default=0,
                   help="h_min of the gated runs, per mille, in [0, 1000]")
    r.add_argument("--direct", default="all", help="gated configurations also run by mac-sim and "
                   "compared with the derived ones: all, none, or a list of b1,b16,b64,fixed0")
    r.add_argument("--csv", default="")
    gr = sub.add_parser("grid", help="mac-bench's synthetic grid in the byte model")
    gr.add_argument("--steps", type=int, default=2048, help="decode steps per point")
    gr.add_argument("--window", type=int, default=16, help="W")
    gr.add_argument("--probe", type=int, default=256, help="P")
    gr.add_argument("--seed", type=int, default=20261129)
    gr.add_argument("--measured", default="", help="a mac-bench CSV of one device run")
    gr.add_argument("--csv", default="")
    a = ap.parse_args()
    if a.cmd == "real":
        if not os.path.isfile(os.path.join(a.bin, "mac-sim")):
            sys.exit(f"gate_study: no mac-sim in {a.bin}")
        if a.layers and not a.trace:
            sys.exit("gate_study: --layers needs --trace (the fixture job runs every layer)")
        if not 1 <= a.margin <= 10 * PER_MILLE or not 0 <= a.min_hit <= PER_MILLE:
            sys.exit(f"gate_study: --margin {a.margin} must be in [1, 10000] and --min-hit "
                     f"{a.min_hit} in [0, 1000]")
        real(a)
    else:
        if a.measured and not os.path.isfile(a.measured):
            sys.exit(f"gate_study: no such file: {a.measured}")
        if a.steps < a.window or a.window < 1 or a.probe < 1:
            sys.exit(f"gate_study: --steps {a.steps} must be >= --window {a.window} >= 1, and "
                     f"--probe {a.probe} >= 1")
        grid(a)


if __name__ == "__main__":
    main()
