#!/usr/bin/env python3
"""Compares two mac-study output directories (docs/study-format.md) result for result: the
same run files under runs/, each with equal attributes and bit-identical datasets (NaN equal
to NaN), and the same tables (every CSV and every column of study.h5). Only what measures
the machine rather than the method is left out: the timing attributes and columns
(seconds, cpu_seconds, bound_cpu_seconds). Exit 0 if equal, 1 listing the differences.
Usage: study_diff.py DIR_A DIR_B"""
import csv
import pathlib
import sys

import h5py
import numpy as np

TIMING = {"seconds", "cpu_seconds", "bound_cpu_seconds"}
TABLES = ["runs", "error_vs_depth", "error_vs_lag", "hit_rate", "bound_hist", "pairs"]


def same_array(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a, b)


def diff_h5(fa, fb, name, skip, out):
    """Attributes of the root and of every group, and every dataset, but those in `skip`."""
    def walk(ga, gb, path):
        for k in sorted(set(ga.attrs) | set(gb.attrs)):
            if k in skip:
                continue
            if k not in ga.attrs or k not in gb.attrs:
                out.append(f"{name}{path}: attribute {k} only in one")
            elif not same_array(ga.attrs[k], gb.attrs[k]):
                out.append(f"{name}{path}: attribute {k}: {ga.attrs[k]!r} vs {gb.attrs[k]!r}")
        for k in sorted(set(ga) | set(gb)):
            if k in skip:
                continue
            if k not in ga or k not in gb:
                out.append(f"{name}{path}/{k}: only in one")
            elif isinstance(ga[k], h5py.Group):
                walk(ga[k], gb[k], f"{path}/{k}")
            elif not same_array(ga[k][()], gb[k][()]):
                out.append(f"{name}{path}/{k}: values differ")
    walk(fa, fb, "")


def diff_csv(pa, pb, name, out):
    with open(pa, newline="") as f:
        ra = list(csv.reader(f))
    with open(pb, newline="") as f:
        rb = list(csv.reader(f))
    if not ra or not rb or ra[0] != rb[0] or len(ra) != len(rb):
        out.append(f"{name}: header or number of rows differs ({len(ra)} vs {len(rb)} lines)")
        return
    keep = [i for i, c in enumerate(ra[0]) if c not in TIMING]
    for n, (x, y) in enumerate(zip(ra[1:], rb[1:]), start=2):
        if [x[i] for i in keep] != [y[i] for i in keep]:
            out.append(f"{name}: line {n} differs")


def main(a, b):
    a, b = pathlib.Path(a), pathlib.Path(b)
    out = []
    runs_a = sorted(p.name for p in (a / "runs").glob("*.h5"))
    runs_b = sorted(p.name for p in (b / "runs").glob("*.h5"))
    if runs_a != runs_b:
        out.append(f"runs/: {len(runs_a)} vs {len(runs_b)} files; only in {a}: "
                   f"{sorted(set(runs_a) - set(runs_b))[:5]}, only in {b}: "
                   f"{sorted(set(runs_b) - set(runs_a))[:5]}")
    if not runs_a:
        out.append(f"{a}/runs holds no run file")
    for r in sorted(set(runs_a) & set(runs_b)):
        with h5py.File(a / "runs" / r, "r") as fa, h5py.File(b / "runs" / r, "r") as fb:
            diff_h5(fa, fb, f"runs/{r}", TIMING, out)
    for t in TABLES:
        diff_csv(a / f"{t}.csv", b / f"{t}.csv", f"{t}.csv", out)
    with h5py.File(a / "study.h5", "r") as fa, h5py.File(b / "study.h5", "r") as fb:
        diff_h5(fa, fb, "study.h5", TIMING, out)
    for line in out[:20]:
        print(f"study_diff: {line}", file=sys.stderr)
    if out:
        print(f"study_diff: {len(out)} difference(s) between {a} and {b}", file=sys.stderr)
        return 1
    print(f"study_diff: {len(runs_a)} runs and the tables equal in {a} and {b}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
