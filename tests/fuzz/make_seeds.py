#!/usr/bin/env python3
"""Seed corpora of the fuzzers (docs/fuzzing.md), made from the committed fixtures.

    make_seeds.py --data data --out DIR [--report REPORT.h5]

DIR/trace/ and DIR/run_dump/: data/golden/synth_small.h5 and synth_small_run.h5 written in
the line language of tests/fuzz/h5_builder.hpp, their attributes as they are and every
dataset cut to its first rows (the values of one row, repeated by the builder); plus the
same with one attribute or dataset changed the way a broken file is. DIR/study_config/: the
config of docs/results.md and small variants. DIR/matrix/: lines of verification/matrix.tsv,
a few per seed, and one with Hkv 2^32 + 2. DIR/report/: REPORT.h5 (a small mac-verify report
that scripts/fuzz.sh writes first) in the line language, every row kept, and broken
variants. Each seed is a few KiB.
"""
import argparse
import os

import h5py
import numpy as np

TYPES = {np.dtype("float32"): "f32", np.dtype("float64"): "f64", np.dtype("int8"): "i8",
         np.dtype("int32"): "i32", np.dtype("int64"): "i64", np.dtype("uint8"): "u8"}


def describe(path, rows):
    """The line-language form of an HDF5 file: root attributes, groups, datasets cut to
    `rows` rows (values: the first row, which the builder repeats)."""
    lines = []
    with h5py.File(path, "r") as f:
        for k, v in f.attrs.items():
            if isinstance(v, (bytes, str)):
                text = v.decode() if isinstance(v, bytes) else v
                lines.append(f"A {k} s {' '.join(text.splitlines())}")
            elif np.issubdtype(np.asarray(v).dtype, np.integer):
                lines.append(f"A {k} i {int(v)}")
            else:
                lines.append(f"A {k} f {float(v)!r}")

        def visit(name, obj):
            if isinstance(obj, h5py.Group):
                lines.append(f"G /{name}")
            elif h5py.check_string_dtype(obj.dtype):
                for x in obj[:rows]:
                    text = x.decode() if isinstance(x, bytes) else x
                    lines.append(f"S /{name} {' '.join(text.splitlines())}")
            elif rows >= obj.shape[0] and obj.ndim == 1:  # every row, as it is
                vals = " ".join(repr(float(x)) for x in obj[:])
                lines.append(f"D /{name} {TYPES[obj.dtype]} {obj.shape[0]} {vals}")
            else:
                shape = list(obj.shape)
                shape[0] = min(shape[0], rows)
                row = obj[0].ravel() if obj.shape[0] else np.zeros(0)
                vals = " ".join(repr(float(x)) for x in row[:64])
                lines.append(f"D /{name} {TYPES[obj.dtype]} {'x'.join(map(str, shape))} {vals}")
        f.visititems(visit)
    return lines


def write(d, name, lines):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "w") as f:
        f.write("\n".join(lines) + "\n")


def variants(lines, changes):
    """`lines` with each (prefix, replacement) applied to the first line starting so."""
    for prefix, new in changes:
        out, done = [], False
        for ln in lines:
            if not done and ln.startswith(prefix):
                done = True
                if new is not None:
                    out.append(new)
            else:
                out.append(ln)
        yield prefix.split()[1].strip("/").replace("/", "_"), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--report", default="")
    ap.add_argument("--matrix", default="verification/matrix.tsv")
    a = ap.parse_args()
    tr = describe(os.path.join(a.data, "golden/synth_small.h5"), 4)
    write(os.path.join(a.out, "trace"), "synth_small", tr)
    for name, v in variants(tr, [("A num_layers", "A num_layers i 3"),
                                 ("A softmax_scale", "A softmax_scale f 1e300"),
                                 ("D /layers/0/k", "D /layers/0/k f32 288230376151711744x2x64"),
                                 ("D /layers/1/v", None)]):
        write(os.path.join(a.out, "trace"), "synth_small_" + name, v)
    run = describe(os.path.join(a.data, "golden/synth_small_run.h5"), 2)
    write(os.path.join(a.out, "run_dump"), "synth_small_run", run)
    for name, v in variants(run, [("A tau", "A tau f -0.5"),
                                  ("D /hit", "D /hit i8 1x4"),
                                  ("D /out", "D /out f64 2x4x4294967296")]):
        write(os.path.join(a.out, "run_dump"), "synth_small_run_" + name, v)
    if a.report:
        rep = describe(a.report, 1 << 20)
        write(os.path.join(a.out, "report"), "report", rep)
        for name, v in variants(rep, [("D /cases/status", "D /cases/status i8 2 -1 42"),
                                      ("D /cases/rel_l2_max", "D /cases/rel_l2_max f64 1 0.5"),
                                      ("D /heads/failed", "D /heads/failed i64 1 7"),
                                      ("S /cases/line", None)]):
            write(os.path.join(a.out, "report"), "report_" + name, v)
    with open(a.matrix) as f:
        rows = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#")]
    for k in range(0, min(len(rows), 40), 8):
        write(os.path.join(a.out, "matrix"), f"matrix_{k}", rows[k:k + 8])
    wraps = rows[1].split("\t")
    wraps[5] = "4294967298"  # Hkv
    write(os.path.join(a.out, "matrix"), "matrix_hkv_wraps", [rows[0], "\t".join(wraps)])
    cfg = ["# flag names without --, lists comma-separated", "trace = data/golden/synth_small.h5",
           "layers = 0,1", "prefill = 300", "gen-min = 0", "tau = 0.3,0.6", "ring = 128",
           "tail = 32", "variant = split,downdate"]
    write(os.path.join(a.out, "study_config"), "results_md", cfg)
    write(os.path.join(a.out, "study_config"), "flags", ["quiet = true", "threads = 2",
                                                         "; comment", "tau = \"0.45\" # inline"])
    write(os.path.join(a.out, "study_config"), "typo", ["tua = 0.3", "[section]"])


if __name__ == "__main__":
    main()
