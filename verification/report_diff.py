#!/usr/bin/env python3
"""Compares two mac-verify reports case by case and head by head.

Two reports agree when they hold the same cases (by id) and every per-case and per-head
result is equal: status, decisions, keys, entries and every error figure, bit for bit. Only
what describes the run rather than its results may differ: wall times, the command line,
the creation time, the shard, the thread count. This is the check that a sharded or
multi-GPU run (`--shard k/N` then `--merge`, or `--devices`) certifies exactly what one
process does.

With --results-only the root attributes that name the implementation and the run's identity
(impl, mode, device, the plugin's SHA-256 and declarations, commits, nonce source, environment)
are not compared either: the check that two routes to the same kernel (the plugin ABI and the
in-process C++ class) certify the same results. The matrix hash, nonce and tolerances still are.

Usage: report_diff.py [--results-only] A.h5 B.h5   exit 0 when they agree, 1 with the differences.
Needs numpy and h5py (Debian python3-numpy, python3-h5py).
"""
import sys

import h5py
import numpy as np

# Run descriptors, not results: these may differ between two runs of the same certification.
RUN_ATTRS = {"command", "created", "shard", "threads", "wall_s", "devices", "jobs", "finished",
             "environment"}
# What names the implementation and the run rather than the results (--results-only).
IDENTITY_ATTRS = {"impl", "mode", "device", "impl_sha256", "impl_declared", "impl_caps",
                  "abi_version", "git_commit", "declared_commit", "nonce_source"}
RUN_COLUMNS = {"wall_s"}
# Keys that order each table's rows.
ROW_KEYS = {"cases": ("id",), "heads": ("case_id", "request", "head")}


def table(f, group):
    cols = {name: f[group][name][()] for name in f[group]}
    keys = ROW_KEYS[group]
    order = np.lexsort(tuple(cols[k] for k in reversed(keys)))
    return {name: col[order] for name, col in cols.items()}


def equal(a, b):
    if a.shape != b.shape:
        return False
    # Floats bit for bit, so NaN equals NaN (a figure undefined in both runs) and -0 != +0.
    return not differing_rows(a, b).any()


def differing_rows(a, b):
    if a.dtype.kind == "f":
        return (a.view(np.uint8).reshape(len(a), -1) != b.view(np.uint8).reshape(len(b), -1)).any(
            axis=1)
    return a != b


def diff(path_a, path_b, results_only=False):
    problems = []
    skip = RUN_ATTRS | (IDENTITY_ATTRS if results_only else set())
    with h5py.File(path_a, "r") as fa, h5py.File(path_b, "r") as fb:
        for name in sorted(set(fa.attrs) | set(fb.attrs)):
            if name in skip:
                continue
            va, vb = fa.attrs.get(name), fb.attrs.get(name)
            if va is None or vb is None or not np.array_equal(np.asarray(va), np.asarray(vb)):
                problems.append(f"attribute {name}: {va!r} vs {vb!r}")
        for group in ROW_KEYS:
            if group not in fa or group not in fb:
                problems.append(f"group /{group} missing in {path_a if group not in fa else path_b}")
                continue
            ta, tb = table(fa, group), table(fb, group)
            for name in sorted(set(ta) | set(tb)):
                if name in RUN_COLUMNS:
                    continue
                if name not in ta or name not in tb:
                    problems.append(f"/{group}/{name} missing in one report")
                elif not equal(ta[name], tb[name]):
                    a, b = ta[name], tb[name]
                    if a.shape != b.shape:
                        problems.append(f"/{group}/{name}: {a.shape[0]} rows vs {b.shape[0]}")
                    else:
                        rows = np.nonzero(differing_rows(a, b))[0]
                        first = rows[0] if len(rows) else 0
                        problems.append(f"/{group}/{name}: {len(rows)} row(s) differ, first "
                                        f"row {first}: {a[first]!r} vs {b[first]!r}")
    return problems


def main(argv):
    results_only = "--results-only" in argv
    argv = [a for a in argv if a != "--results-only"]
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    problems = diff(argv[1], argv[2], results_only)
    if problems:
        print(f"report_diff: {argv[1]} and {argv[2]} differ:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"report_diff: {argv[1]} and {argv[2]} agree in every per-case and per-head result")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
