#!/usr/bin/env python3
"""The cost of macattn.simulate (the Python loop over Stepper.step and the oracle's step)
against mac-sim doing the same work: one trace layer through the reference stepper and the
FP64 oracle into a run dump. Both are timed the same way, from the trace file to the dump
file, best of --repeat runs; mac-sim as a process (its wall time, start-up included), the
Python run inside the interpreter (import excluded).

  .venv/bin/python python/bench/bench_stepper.py --mac-sim build/bin/mac-sim
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import macattn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mac-sim", default=os.path.join(ROOT, "build", "bin", "mac-sim"))
    ap.add_argument("--trace", default=os.path.join(ROOT, "data", "golden", "synth_small.h5"))
    ap.add_argument("--repeat", type=int, default=5)
    # The golden run dump's configuration (data/README.md).
    ap.add_argument("--args", default="--layer 0 --prefill 256 --steps 128 --gen-min 0 "
                    "--ring 128 --tail 32 --precision fp64 --storage full")
    a = ap.parse_args()
    opt = a.args.split()
    kv = dict(zip(opt[::2], opt[1::2]))
    cfg = macattn.StepperConfig(
        params=macattn.MacParams(ring=int(kv.get("--ring", 512)), tail=int(kv.get("--tail", 256)),
                                 gen_min=int(kv.get("--gen-min", 2048))),
        precision=kv.get("--precision", "fp32"), storage=kv.get("--storage", "production"),
        prefill=int(kv["--prefill"]))
    layer_i, steps = int(kv.get("--layer", 0)), int(kv.get("--steps", 0))
    with tempfile.TemporaryDirectory() as d:
        sim, py = [], []
        for _ in range(a.repeat):
            t = time.perf_counter()
            subprocess.run([a.mac_sim, "--quiet", "--trace", a.trace, *opt, "--dump",
                            os.path.join(d, "sim.h5")], check=True, stdout=subprocess.DEVNULL)
            sim.append(time.perf_counter() - t)
            t = time.perf_counter()
            tr = macattn.read_trace(a.trace, [layer_i])
            dump = macattn.simulate(tr.layers[0], tr.meta.softmax_scale, cfg, steps=steps,
                                    layer_index=layer_i, trace_source=tr.meta.source)
            macattn.write_run_dump(os.path.join(d, "py.h5"), dump)
            py.append(time.perf_counter() - t)
    s, p = min(sim), min(py)
    print(f"mac-sim {s * 1e3:.1f} ms, macattn.simulate {p * 1e3:.1f} ms (best of {a.repeat}); "
          f"Python / C++ = {p / s:.2f} (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
