#!/usr/bin/env python3
"""The malformed-input suite (docs/cli.md): every program on a table of bad inputs.

Each case runs one program in a fresh directory and checks
  * the exit status (docs/cli.md: 2 bad input, 4 a failed write or no memory, 128 + N a signal);
  * that stderr names the offending value (each string of `says` occurs in it);
  * that no temporary (`*.tmp.*`) is left anywhere in the directory;
  * that each file in `keep`, created by this driver before the run, is byte for byte
    unchanged (an existing output survives a failed run), and each path in `absent` does
    not exist (no output under its final name).

    run_cases.py --bin BUILD/bin --data data [--sanitized] [--only SUBSTRING] [--verbose]

`--sanitized`: the programs are built with AddressSanitizer, which reserves terabytes of
address space, so the cases that limit the address space (ulimit -v) are skipped.
Traces are made with h5py from data/golden/synth_small.h5 (384 tokens, 2 layers, Hq 4,
Hkv 2, D 64). The last line is "N passed, M failed".
"""
import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

SENTINEL = b"an existing output that a failed run must not touch\n"
GOLDEN = "golden/synth_small.h5"
HOST = "".join(c if c.isalnum() or c == "-" else "_" for c in socket.gethostname())
# A study small enough to run in well under a second.
TINY = ["--steps", "8", "--ring", "16", "--tail", "8", "--gen-min", "0", "--layers", "0",
        "--no-bound", "--threads", "1"]


class Case:
    def __init__(self, name, argv, code, says=(), setup=None, keep=(), absent=(), fsize=None,
                 vmem=None, kill=None, after=None, sanitized_skip=False):
        self.name, self.argv, self.code, self.says = name, argv, code, says
        self.setup, self.keep, self.absent = setup, keep, absent
        self.fsize, self.vmem, self.kill, self.after = fsize, vmem, kill, after
        self.sanitized_skip = sanitized_skip


# --- inputs ----------------------------------------------------------------------------

def golden(ctx, d, name="t.h5"):
    dst = os.path.join(d, name)
    shutil.copy(os.path.join(ctx.data, GOLDEN), dst)
    os.chmod(dst, 0o644)
    return dst


def trace(mutate):
    """A setup that copies the golden trace to t.h5 and changes it with h5py."""
    def setup(ctx, d):
        with h5py.File(golden(ctx, d), "r+") as f:
            mutate(f)
    return setup


def replace(f, name, data=None, shape=None, dtype="f4"):
    """Replaces dataset `name`: with `data`, or with an unwritten chunked one of `shape`."""
    del f[name]
    if data is not None:
        f.create_dataset(name, data=data)
    else:
        f.create_dataset(name, shape=shape, dtype=dtype, chunks=(1,) + tuple(shape[1:]))


def huge_tokens(f):
    for n in ("q_pre", "q_post"):
        replace(f, "layers/0/" + n, shape=(2 ** 58, 4, 64))
    for n in ("k", "v"):
        replace(f, "layers/0/" + n, shape=(2 ** 58, 2, 64))


def set_value(name, index, value):
    def mutate(f):
        a = f[name][...]
        a.flat[index] = value
        replace(f, name, data=a)
    return mutate


def config(text):
    def setup(ctx, d):
        with open(os.path.join(d, "c.cfg"), "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())
        golden(ctx, d)
    return setup


def stale_temporaries(path):
    """Temporaries of `path`: one of a dead process (removed by the next run), one of this
    driver (alive: kept), one of another host (kept)."""
    def setup(ctx, d):
        golden(ctx, d)
        p = os.path.join(d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        for name in (f"{p}.tmp.{HOST}.999999999", f"{p}.tmp.{HOST}.{os.getpid()}",
                     f"{p}.tmp.otherhost.999999999"):
            with open(name, "wb") as f:
                f.write(b"partial")
    return setup


def stale_removed(path):
    def check(d):
        p = os.path.join(d, path)
        left = sorted(os.listdir(os.path.dirname(p)))
        want_gone = os.path.basename(f"{p}.tmp.{HOST}.999999999")
        assert want_gone not in left, f"stale temporary {want_gone} was not removed"
        for kept in (f"{p}.tmp.{HOST}.{os.getpid()}", f"{p}.tmp.otherhost.999999999"):
            assert os.path.exists(kept), f"{kept} (not stale) was removed"
            os.remove(kept)  # so that the driver's check for temporaries passes
    return check


def symlink_to_trace(link):
    def setup(ctx, d):
        golden(ctx, d)
        os.makedirs(os.path.join(d, os.path.dirname(link)), exist_ok=True)
        os.symlink(os.path.join(d, "t.h5"), os.path.join(d, link))
    return setup


def trace_as(path):
    def setup(ctx, d):
        os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
        golden(ctx, d, path)
    return setup


def plain_file(name, content=b"not a directory\n"):
    def setup(ctx, d):
        golden(ctx, d)
        with open(os.path.join(d, name), "wb") as f:
            f.write(content)
    return setup


def valid_output(ctx, d):
    """A complete trace already at out.h5: a failed rewrite must keep it readable."""
    golden(ctx, d, "out.h5")


# --- the table -----------------------------------------------------------------------------

GEN = ["mac-gen-trace", "--out", "{d}/out.h5"]
STUDY_NO_P = ["mac-study", "--out", "{d}/s", "--trace", "{d}/t.h5", "--quiet"] + TINY
STUDY = STUDY_NO_P + ["--prefill", "256"]
BENCH_CPU = ["mac-bench-cpu", "--csv", "{d}/out.csv"]
OUT_H5, STUDY_CSV, OUT_CSV = ("out.h5",), ("s/runs.csv",), ("out.csv",)
BIG_GEN = GEN + ["--tokens", "10000", "--layers", "2", "--q-heads", "8", "--kv-heads", "2",
                 "--head-dim", "128", "--no-compress"]


def flag_cases(prefix, argv, table, **kw):
    """One case per (flag, value, range) of `table`: status 2, the message names the flag, the
    (last) value and the allowed range."""
    return [Case(f"{prefix} {flag} {value}", argv + [flag, value], 2,
                 [flag, value.split(",")[-1], says], **kw) for flag, value, says in table]


SIM = ["mac-sim", "--quiet", "--trace", "{d}/t.h5", "--layer", "0", "--prefill", "256",
       "--steps", "4", "--gen-min", "0", "--ring", "16", "--tail", "8"]
SIM_DUMP = SIM + ["--dump", "{d}/out.h5"]
VERIFY = ["mac-verify", "--mode", "cpu", "--quiet", "--no-summary", "--max-repro", "0",
          "--out", "{d}/r.h5"]
OUT_R = ("r.h5", "r.md")


class SetupError(Exception):
    """A setup's own run failed: the case is a FAIL naming the command and its stderr."""


def run_setup(argv):
    """Runs a setup step; its stderr goes into the SetupError, not into the suite's output."""
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace").strip()
        raise SetupError(f"setup {' '.join(os.path.basename(a) for a in argv[:2])} ... exited "
                         f"{r.returncode}: {err[-2000:]}")


def report(ctx):
    """A mac-verify report of case 0 (made once per suite run, about a second)."""
    if not getattr(ctx, "report", None):
        ctx.report_dir = tempfile.TemporaryDirectory(prefix="mac-malformed-report-")
        path = os.path.join(ctx.report_dir.name, "r0.h5")
        run_setup([os.path.join(ctx.bin, "mac-verify"), "--mode", "cpu", "--case", "0",
                   "--quiet", "--no-summary", "--out", path])
        ctx.report = path
    return ctx.report


def reports(mutate=None):
    """A setup that copies the report of case 0 to a.h5 (changed by `mutate` with h5py)."""
    def setup(ctx, d):
        golden(ctx, d)
        dst = os.path.join(d, "a.h5")
        shutil.copy(report(ctx), dst)
        if mutate:
            with h5py.File(dst, "r+") as f:
                mutate(f)
    return setup


def shorten(name, n):
    """A mutation: dataset `name` keeps its first n elements, its dtype unchanged."""
    def mutate(f):
        a, dt = f[name][...], f[name].dtype
        del f[name]
        f.create_dataset(name, data=a[:n], dtype=dt) if n else \
            f.create_dataset(name, shape=(0,) + a.shape[1:], dtype=dt)
    return mutate


# What verification/python/numpy_reference_kernel.py implements (its docstring); the rest
# of the capabilities keep their defaults (NHD caches, any head dim).
CAPS = ("name = numpy-reference\nout_dtype = f32\nring_o_dtype = f32\nreports_keys_read = 1\n"
        "tight_tolerances = 1\n")


def export(ctx):
    """A file-protocol export of case 0 with the numpy reference kernel's outputs (the route
    of tests/verification/file_protocol.sh), made once per suite run (a few seconds)."""
    if not getattr(ctx, "export", None):
        ctx.export_dir = tempfile.TemporaryDirectory(prefix="mac-malformed-export-")
        path = os.path.join(ctx.export_dir.name, "e")
        caps = os.path.join(ctx.export_dir.name, "caps.txt")
        with open(caps, "w") as f:
            f.write(CAPS)
        run_setup([os.path.join(ctx.bin, "mac-verify"), "--export", path, "--caps", caps,
                   "--case", "0"])
        src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        kernel = os.path.join(os.path.dirname(src), "verification", "python",
                              "numpy_reference_kernel.py")
        run_setup([sys.executable, kernel, path])
        ctx.export = path
    return ctx.export


def graded(outputs=None, inputs=None):
    """A setup that copies the export to e/ and changes its case 0 with h5py: `outputs` the
    outputs file e/outputs/case-00000.h5, `inputs` the inputs file e/inputs/case-00000.h5."""
    def setup(ctx, d):
        dst = os.path.join(d, "e")
        shutil.copytree(export(ctx), dst)
        for mutate, sub in ((outputs, "outputs"), (inputs, "inputs")):
            if mutate:
                with h5py.File(os.path.join(dst, sub, "case-00000.h5"), "r+") as f:
                    mutate(f)
    return setup


def wide_trace(ctx, d):
    """wide.h5: one layer of 256 tokens, Hq 16, Hkv 4, D 256, whose run dump from P = 8 is
    16 MB (its write takes seconds: a signal can land in it). Made once per suite run."""
    if not getattr(ctx, "wide", None):
        ctx.wide_dir = tempfile.TemporaryDirectory(prefix="mac-malformed-wide-")
        path = os.path.join(ctx.wide_dir.name, "wide.h5")
        run_setup([os.path.join(ctx.bin, "mac-gen-trace"), "--tokens", "256", "--layers", "1",
                   "--q-heads", "16", "--kv-heads", "4", "--head-dim", "256", "--out", path])
        ctx.wide = path
    shutil.copy(ctx.wide, os.path.join(d, "wide.h5"))


def report_has_cases(ids):
    """After a run: r.h5 is a complete report of exactly the cases `ids`, in order."""
    def check(d):
        with h5py.File(os.path.join(d, "r.h5"), "r") as f:
            got = [int(i) for i in f["cases/id"][...]]
            assert got == ids, f"r.h5 holds cases {got}, not {ids}"
            assert int(f.attrs["cases"]) == len(ids), f"r.h5 declares {f.attrs['cases']} cases"
        assert os.path.exists(os.path.join(d, "r.md")), "r.md was not written"
    return check


def report_case_status(case_id, status, names=()):
    """After a run: r.h5 and r.md exist, case `case_id` has `status` (0 pass, 1 fail, 2 skip,
    3 error, 4 not applicable) and the certificate r.md names each string of `names` (a case's
    message is the report's and the certificate's, not stderr's)."""
    def check(d):
        with h5py.File(os.path.join(d, "r.h5"), "r") as f:
            ids = [int(i) for i in f["cases/id"][...]]
            assert case_id in ids, f"r.h5 holds cases {ids}, not {case_id}"
            got = int(f["cases/status"][ids.index(case_id)])
            assert got == status, f"case {case_id} has status {got}, not {status}"
        with open(os.path.join(d, "r.md")) as f:
            md = f.read()
        for n in names:
            assert n in md, f"r.md does not name {n!r}"
    return check


def matrix_with(column, value):
    """A setup writing m.tsv: the built-in matrix's header and case 0 with `column` = value."""
    def setup(ctx, d):
        src = os.path.join(os.path.dirname(ctx.data), "verification", "matrix.tsv")
        with open(src) as f:
            header = f.readline()
            row = f.readline().rstrip("\n").split("\t")
        row[header.lstrip("#").rstrip("\n").split("\t").index(column)] = value
        with open(os.path.join(d, "m.tsv"), "w") as f:
            f.write(header + "\t".join(row) + "\n")
    return setup


def no_shard_left(d):
    """After a SIGKILL of a --devices parent: its shard processes are gone (they die with it)."""
    t0 = time.time()
    while True:
        alive = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if d.encode() in f.read():
                        alive.append(pid)
            except OSError:
                pass
        if not alive or time.time() - t0 > 2:  # SIGKILL's delivery, not a shard's work
            break
        time.sleep(0.1)
    for pid in alive:
        os.kill(int(pid), signal.SIGKILL)
    assert not alive, f"shard processes {alive} outlived their killed parent"
    # A shard killed mid-write leaves its temporary (named by host and pid for the next run).
    for t in temporaries(d):
        os.remove(t)


def cases():
    c = []
    # mac-gen-trace: flags and sizes.
    c += flag_cases("gen", GEN, [
            ("--tokens", "0", "[1, 2147483647]"), ("--tokens", "-5", "[1, 2147483647]"),
            ("--tokens", "288230376151711744", "[1, 2147483647]"), ("--tokens", "abc", "abc"),
            ("--layers", "0", "[1, 65536]"), ("--q-heads", "100000", "[1, 65536]"),
            ("--kv-heads", "0", "[1, 65536]"), ("--head-dim", "96", "96"),
            ("--rope-theta", "0", "[1, 1e+12]"), ("--drift", "2", "[0, 1]"),
            ("--jump-prob", "nan", "[0, 1]"), ("--head-spread", "1", "[0, 1)"),
            ("--noise-scale", "-1", "[0, 1000]")], keep=OUT_H5)
    c += [
        Case("gen unknown flag", GEN + ["--tokns", "5"], 2, ["--tokns"], keep=OUT_H5),
        Case("gen heads not a multiple", GEN + ["--q-heads", "6", "--kv-heads", "4"], 2,
             ["num_q_heads = 6", "num_kv_heads = 4"], keep=OUT_H5),
        Case("gen trace over the element limit",
             GEN + ["--tokens", "100000000", "--q-heads", "64", "--kv-heads", "64",
                    "--head-dim", "256"], 2, ["100000000 x 64 x 256", "68719476736"],
             keep=OUT_H5),
        Case("gen out of memory (ulimit -v 2 GiB)",
             GEN + ["--tokens", "1000000", "--layers", "1", "--q-heads", "64", "--kv-heads", "8",
                    "--head-dim", "256"], 4, ["out of memory"], keep=OUT_H5, vmem=2 << 30,
             sanitized_skip=True),
        Case("gen out dir missing", ["mac-gen-trace", "--out", "{d}/no/such/out.h5"], 2,
             ["no/such", "does not exist"], absent=("no",)),
        Case("gen out is a directory", ["mac-gen-trace", "--out", "{d}"], 2,
             ["is a directory"]),
        Case("gen out under a file", ["mac-gen-trace", "--out", "{d}/t.h5/out.h5"], 2,
             ["t.h5", "does not exist"], setup=lambda ctx, d: golden(ctx, d)),
        Case("gen write past ulimit -f keeps the old file",
             GEN + ["--tokens", "4000", "--no-compress"], 4, ["File too large", "old file"],
             setup=valid_output, keep=OUT_H5, fsize=64 << 10),
        Case("gen SIGTERM while writing", BIG_GEN, 128 + signal.SIGTERM, [],
             keep=OUT_H5, kill=(signal.SIGTERM, "tmp")),
        Case("gen SIGINT while generating", BIG_GEN, 128 + signal.SIGINT, [], keep=OUT_H5,
             kill=(signal.SIGINT, 0.3)),
        Case("gen removes stale temporaries", GEN + ["--tokens", "16", "--layers", "1"], 0, [],
             setup=stale_temporaries("out.h5"), after=stale_removed("out.h5")),
    ]
    # mac-study: flags.
    c += flag_cases("study", STUDY_NO_P, [
            ("--tau", "-0.1", "[0, 1)"), ("--tau", "1", "[0, 1)"), ("--tau", "nan", "[0, 1)"),
            ("--tau", "0.3,-2", "[0, 1)"), ("--prefill", "-5", "[1, 2147483647]"),
            ("--prefill", "0", "[1, 2147483647]"), ("--layers", "-3", "[0, 65535]"),
            ("--threads", "100000000", "[0, 1024]"), ("--threads", "-1", "[0, 1024]"),
            ("--ring", "0", "[1, 2147483647]"), ("--ring", "9999999999999", "[1, 2147483647]"),
            ("--steps", "-1", "[0, 2147483647]"), ("--tail", "-4", "[0, 2147483647]"),
            ("--synth-tokens", "0", "[1, 2147483647]"), ("--variant", "spilt", "spilt"),
            ("--storage", "bf16", "bf16")], setup=lambda ctx, d: golden(ctx, d), keep=STUDY_CSV)
    c += [
        Case("study layer past the trace", STUDY + ["--layers", "7"], 2, ["layer 7", "[0, 2)"],
             setup=lambda ctx, d: golden(ctx, d), keep=STUDY_CSV),
        Case("study prefill past the trace", STUDY_NO_P + ["--prefill", "384"], 2,
             ["prefill P = 384"], setup=lambda ctx, d: golden(ctx, d), keep=STUDY_CSV),
    ]
    for value, says in [("0:0.5", ["'0:0.5'", "L=tau"]), ("0=1.5", ["'0=1.5'", "[0, 1)"]),
                        ("0=0.5,0=0.6", ["'0=0.6'", "twice"]),
                        ("1=0.5", ["layer 1", "--layers does not select"])]:
        c.append(Case(f"study layer-tau {value}", STUDY + ["--layer-tau", value], 2, says,
                      setup=lambda ctx, d: golden(ctx, d), keep=STUDY_CSV))
    # mac-study: config files.
    cfg = ["mac-study", "--out", "{d}/s", "--trace", "{d}/t.h5", "--config", "{d}/c.cfg",
           "--prefill", "256"] + TINY
    for name, text, says in [
            ("typo", "tau = 0.3\ntua = 0.3\n", ["c.cfg:2", "unknown key 'tua'"]),
            ("junk line", "# a study\nhello world\n", ["c.cfg:2", "'hello world'"]),
            ("binary", bytes(range(256)), ["c.cfg:1", "control byte"]),
            ("section", "[study]\ntau = 0.3\n", ["c.cfg:1", "sections"]),
            ("duplicate", "tau = 0.3\n\ntau = 0.5\n", ["c.cfg:3", "line 1"]),
            ("empty value", "tau =\n", ["c.cfg:1", "no value"]),
            ("value out of range", "ring = 16\ntau = -0.1\n", ["--tau", "-0.1", "c.cfg:2"]),
            ("not a flag value", "quiet = maybe\n", ["c.cfg:1", "maybe"]),
            ("bad key", "Tau = 0.3\n", ["c.cfg:1", "Tau"])]:
        c.append(Case(f"study config {name}", cfg, 2, says, setup=config(text), keep=STUDY_CSV))
    c += [
        Case("study config missing", cfg, 2, ["c.cfg", "does not exist"],
             setup=lambda ctx, d: golden(ctx, d), keep=STUDY_CSV),
        Case("study config is a trace", ["mac-study", "--out", "{d}/s", "--config", "{d}/t.h5"],
             2, ["t.h5:", "control byte", "binary"], setup=lambda ctx, d: golden(ctx, d),
             keep=STUDY_CSV),
    ]
    # mac-study: broken and hostile traces (the trace reader).
    for name, mutate, says in [
            ("2^58 tokens", huge_tokens, ["q_pre", "68719476736"]),
            ("NaN", set_value("layers/0/k", 17, np.nan), ["/layers/0/k", "NaN"]),
            ("not BF16", set_value("layers/0/v", 3, 0.1), ["/layers/0/v", "BF16"]),
            ("softmax scale 1e300",
             lambda f: f.attrs.modify("softmax_scale", 1e300), ["softmax_scale", "1e+300"]),
            ("huge num_q_heads",
             lambda f: f.attrs.modify("num_q_heads", np.int64(2 ** 40)), ["num_q_heads"]),
            ("negative num_layers",
             lambda f: f.attrs.modify("num_layers", np.int64(-2)), ["num_layers = -2"]),
            ("wrong schema", lambda f: f.attrs.modify("schema", "mac-run"), ["schema"]),
            ("wrong version", lambda f: f.attrs.modify("version", np.int64(2)), ["version = 2"]),
            ("missing k", lambda f: f.__delitem__("layers/0/k"), ["/layers/0/k", "missing"]),
            ("float64 q_post",
             lambda f: replace(f, "layers/0/q_post", data=f["layers/0/q_post"][...].astype("f8")),
             ["q_post", "float32"]),
            ("short v", lambda f: replace(f, "layers/0/v", data=f["layers/0/v"][:100]),
             ["/layers/0/v", "shape"])]:
        c.append(Case(f"study trace {name}", STUDY, 2, says, setup=trace(mutate),
                      keep=STUDY_CSV))
    c += [
        Case("study trace not HDF5", STUDY, 2, ["not an HDF5 file"],
             setup=plain_file("t.h5", b"hello\n"), keep=STUDY_CSV),
        Case("study trace truncated", STUDY, 2, ["t.h5"],
             setup=lambda ctx, d: truncate(golden(ctx, d)), keep=STUDY_CSV),
        Case("study trace missing", STUDY, 2, ["t.h5"], keep=STUDY_CSV),
        # mac-study: outputs.
        Case("study out is a file", STUDY, 2, ["cannot create directory"],
             setup=plain_file("s"), keep=("s",)),
        Case("study table is the trace", ["mac-study", "--out", "{d}/s", "--trace",
                                          "{d}/s/study.h5"] + TINY, 2, ["the same file"],
             setup=trace_as("s/study.h5"), keep=("s/study.h5",)),
        Case("study table links to the trace", STUDY, 2, ["the same file"],
             setup=symlink_to_trace("s/runs.csv")),
        Case("study write past ulimit -f", STUDY, 4, ["File too large"],
             setup=lambda ctx, d: golden(ctx, d), keep=STUDY_CSV, fsize=16 << 10),
        Case("study SIGTERM during the sweep",
             ["mac-study", "--out", "{d}/s", "--synth-tokens", "4096", "--threads", "1",
              "--quiet"], 128 + signal.SIGTERM, [], keep=STUDY_CSV, kill=(signal.SIGTERM, 1.0)),
        Case("study removes stale temporaries", STUDY, 0, [],
             setup=stale_temporaries("s/runs/0123456789abcdef.h5"),
             after=stale_removed("s/runs/0123456789abcdef.h5")),
    ]
    # mac-bench-cpu and mac-bench: flags first, outputs before the work.
    c += flag_cases("bench-cpu", BENCH_CPU, [
        ("--ring", "0", "[1, 1048576]"), ("--reps", "0", "[1, 10000]"),
        ("--threads", "99999999", "[0, 1024]"), ("--dim", "100", "100"),
        ("--context", "1", "[2, 1048576]"), ("--heads", "0", "[1, 65536]")], keep=OUT_CSV)
    c += [
        Case("bench-cpu heads not a multiple", BENCH_CPU + ["--heads", "6", "--kv-heads", "4"],
             2, ["--heads 6", "--kv-heads 4"], keep=OUT_CSV),
        Case("bench-cpu csv dir missing", ["mac-bench-cpu", "--csv", "{d}/no/out.csv"], 2,
             ["--csv", "does not exist"]),
        Case("bench-cpu csv is a directory", ["mac-bench-cpu", "--csv", "{d}"], 2,
             ["--csv", "is a directory"]),
    ]
    c += flag_cases("bench", ["mac-bench"], [
        ("--reps", "0", "[1, 100000]"), ("--hit", "1.5", "[0, 1]"),
        ("--ctx", "200000", "[1, 131072]"), ("--hkv", "0", "[1, 256]"),
        ("--pdl-edges", "16", "[-1, 15]"), ("--timing", "fast", "{launch,queued}")])
    c += [
        Case("bench kv-pad not a multiple of 16", ["mac-bench", "--kv-pad", "3"], 2,
             ["--kv-pad 3", "16"]),
        Case("bench csv dir missing", ["mac-bench", "--csv", "{d}/no/out.csv"], 2,
             ["--csv", "does not exist"]),
    ]
    # mac-sim: flags, outputs checked before the run, and no output replaced by a failed run.
    c += flag_cases("sim", ["mac-sim", "--quiet", "--trace", "{d}/t.h5", "--dump", "{d}/out.h5"], [
        ("--ring", "0", "[1, 2147483647]"), ("--ring", "9999999999999", "[1, 2147483647]"),
        ("--prefill", "-5", "[1, 2147483647]"), ("--layer", "-3", "[0, 65535]"),
        ("--steps", "-1", "[0, 2147483647]"), ("--tau", "-0.1", "[0, 1)"),
        ("--explain-head", "-1", "[0, 65535]"), ("--variant", "spilt", "spilt"),
        ("--synth-tokens", "0", "[1, 2147483647]"),
        # The adaptive gate's parameters (docs/semantics.md §3.5).
        ("--gate-window", "-1", "[0, 4096]"), ("--gate-window", "4097", "[0, 4096]"),
        ("--gate-window", "16x", "[0, 4096]"), ("--gate-probe", "0", "[1, 2147483647]"),
        ("--gate-probe", "2147483648", "[1, 2147483647]"), ("--gate-margin", "0", "[1, 10000]"),
        ("--gate-margin", "10001", "[1, 10000]"), ("--gate-min-hit", "-1", "[0, 1000]"),
        ("--gate-min-hit", "1001", "[0, 1000]"),
        ("--gate-fixed-bytes", "-1", "[0, 17179869184]"),
        ("--gate-fixed-bytes", "17179869185", "[0, 17179869184]")],
        setup=lambda ctx, d: golden(ctx, d), keep=OUT_H5)
    c += [
        # A ring far beyond the trace: the stepper keeps min(M, T) slots (once a SIGSEGV).
        Case("sim ring 2^31-1 runs", SIM[:-4] + ["--ring", "2147483647", "--tail", "8"], 0, [],
             setup=lambda ctx, d: golden(ctx, d)),
        Case("sim dump is the trace", SIM + ["--dump", "{d}/t.h5"], 2,
             ["t.h5", "the same file"], setup=lambda ctx, d: golden(ctx, d),
             keep=("t.h5",)),
        Case("sim dump links to the trace", SIM + ["--dump", "{d}/link.h5"], 2,
             ["link.h5", "the same file"], setup=symlink_to_trace("link.h5"), keep=("t.h5",)),
        Case("sim json is the trace", SIM + ["--json", "{d}/t.h5"], 2, ["the same file"],
             setup=lambda ctx, d: golden(ctx, d), keep=("t.h5",)),
        Case("sim json is the dump", SIM_DUMP + ["--json", "{d}/out.h5"], 2,
             ["out.h5", "the same file"], setup=lambda ctx, d: golden(ctx, d), keep=OUT_H5),
        Case("sim json is a directory, the dump kept", SIM_DUMP + ["--json", "{d}"], 2,
             ["--json", "is a directory"], setup=lambda ctx, d: golden(ctx, d), keep=OUT_H5),
        Case("sim dump dir missing", SIM + ["--dump", "{d}/no/out.h5"], 2,
             ["--dump", "does not exist"], setup=lambda ctx, d: golden(ctx, d), absent=("no",)),
        Case("sim write past ulimit -f keeps dump and json",
             SIM_DUMP + ["--json", "{d}/out.json"], 4, ["File too large"],
             setup=lambda ctx, d: golden(ctx, d), keep=("out.h5", "out.json"), fsize=8 << 10),
        Case("sim explain-steps outside the run",
             SIM_DUMP + ["--explain", "--explain-steps", "10"], 2,
             ["--explain-steps 10", "[256, 259]"], setup=lambda ctx, d: golden(ctx, d),
             keep=OUT_H5),
        Case("sim explain-steps without --explain", SIM_DUMP + ["--explain-steps", "257"], 2,
             ["--explain-steps needs --explain"], setup=lambda ctx, d: golden(ctx, d),
             keep=OUT_H5),
        Case("sim layer past the trace", SIM_DUMP[:4] + ["--layer", "5"], 2,
             ["--layer 5", "[0, 2)"], setup=lambda ctx, d: golden(ctx, d)),
        Case("sim trace 2^58 tokens", SIM_DUMP, 2, ["q_pre", "68719476736"],
             setup=trace(huge_tokens), keep=OUT_H5),
        Case("sim unknown flag", SIM_DUMP + ["--rign", "4"], 2, ["--rign"],
             setup=lambda ctx, d: golden(ctx, d), keep=OUT_H5),
        Case("sim no-oracle with a dump", SIM_DUMP + ["--no-oracle"], 2,
             ["--dump excludes --no-oracle"], setup=lambda ctx, d: golden(ctx, d), keep=OUT_H5),
    ]
    # mac-verify: --case, --shard and the matrix, refused before anything runs.
    c += flag_cases("verify", VERIFY, [
        ("--case", "x-2", "'x'"), ("--case", "0-2000000000", "[0, 940]"),
        ("--case", "0,0", "given twice"), ("--case", "5-3", "'5-3'"), ("--case", "3,", "''"),
        ("--case", "-1", "[0, 940]"), ("--shard", "1x/2", "'1x'"), ("--shard", "2/2", "[0, 1]"),
        ("--shard", "0/0", "N = 0"), ("--jobs-per-device", "0", "[1, 64]"),
        ("--max-context", "-1", "[0, 2147483647]"), ("--devices", "0,0", "given twice"),
        ("--trials", "0", "[1, 1048576]"), ("--trials", "1048577", "[1, 1048576]"),
        ("--load-timeout", "-1", "[0, 1e+09]"), ("--case-timeout", "nan", "[0, 1e+09]")],
        keep=OUT_R)
    c += [
        # A matrix line with one column out of range or not a number: refused naming it.
        Case(f"verify matrix {name}", VERIFY + ["--matrix", "{d}/m.tsv", "--case", "0"], 2, says,
             setup=matrix_with(column, value), keep=OUT_R)
        for name, column, value, says in [
            ("Hkv 2^32+2", "Hkv", "4294967298", ["Hkv", "4294967298", "[1, 4096]"]),
            ("D not a number", "D", "64x", ["column D", "'64x'"]),
            ("gate W out of range", "W", "4097", ["column W", "4097", "[0, 4096]"]),
            ("gate mu 0", "mu", "0", ["column mu", "= 0", "[1, 10000]"]),
            ("gate Bfix above 2^34", "Bfix", "17179869185",
             ["column Bfix", "17179869185", "[0, 17179869184]"])]
    ] + [
        Case("verify out dir missing", VERIFY[:-1] + ["{d}/no/r.h5", "--case", "0"], 2,
             ["--out", "does not exist"], absent=("no",)),
        Case("verify out is a directory", VERIFY[:-1] + ["{d}", "--case", "0"], 2,
             ["--out", "is a directory"]),
        Case("verify out is the matrix", VERIFY[:-1] + ["{d}/m.tsv", "--matrix", "{d}/m.tsv",
                                                        "--case", "0"], 2, ["the same file"],
             setup=matrix_with("D", "64"), keep=("m.tsv",)),
        Case("verify write past ulimit -f keeps the old report", VERIFY + ["--case", "0"], 4,
             ["File too large"], keep=OUT_R, fsize=8 << 10),
        Case("verify devices parent killed takes its shards",
             ["mac-verify", "--mode", "cpu", "--quiet", "--devices", "0,1", "--subset", "all",
              "--out", "{d}/r.h5"], 128 + signal.SIGKILL, [], keep=OUT_R,
             kill=(signal.SIGKILL, 1.5), after=no_shard_left),
    ]
    # mac-verify --merge: every dataset's length, dtype and values checked; no aliasing.
    merge = ["mac-verify", "--quiet", "--merge", "{d}/a.h5", "--out", "{d}/m.h5"]
    for name, mutate, says in [
            ("status -1", set_value("cases/status", 0, -1), ["/cases/status[0] = -1"]),
            ("status 42", set_value("cases/status", 0, 42), ["/cases/status[0] = 42"]),
            ("short heads/failed",
             lambda f: replace(f, "heads/failed", data=f["heads/failed"][:2]),
             ["/heads/failed has 2 elements, expected 6"]),
            ("short cases/rel_l2_max",
             lambda f: replace(f, "cases/rel_l2_max", data=np.zeros(0)),
             ["/cases/rel_l2_max has 0 elements, expected 1"]),
            ("status as int64",
             lambda f: replace(f, "cases/status", data=f["cases/status"][...].astype("i8")),
             ["/cases/status", "1-D integer dataset of 1 bytes"]),
            ("negative counter", set_value("cases/hits", 0, -7), ["/cases/hits[0] = -7"]),
            ("head outside the case", set_value("heads/head", 0, 99), ["head 99"]),
            ("id not its line", set_value("cases/id", 0, 5), ["/cases/id[0] = 5"]),
            ("no line", lambda f: f.__delitem__("cases/line"), ["line"]),
            ("short cases/status", shorten("cases/status", 0),
             ["/cases/status has 0 elements, expected 1"]),
            ("short cases/line", shorten("cases/line", 0),
             ["/cases/line has 0 elements, expected 1"])]:
        c.append(Case(f"verify merge {name}", merge, 2, says, setup=reports(mutate),
                      keep=("m.h5",)))
    c += [
        Case("verify merge out is an input", merge[:-1] + ["{d}/a.h5"], 2,
             ["a.h5", "the same file"], setup=reports(), keep=("a.h5",)),
        Case("verify merge out links to an input", merge[:-1] + ["{d}/link.h5"], 2,
             ["link.h5", "the same file"],
             setup=lambda ctx, d: (reports()(ctx, d), os.symlink(os.path.join(d, "a.h5"),
                                                                os.path.join(d, "link.h5"))),
             keep=("a.h5",)),
        Case("verify merge a case twice", merge[:4] + ["{d}/a.h5"] + merge[4:], 2,
             ["case 0", "more than one report"], setup=reports(), keep=("m.h5",)),
        Case("verify merge of a trace", ["mac-verify", "--merge", "{d}/t.h5", "--out",
                                         "{d}/m.h5"], 2, ["t.h5", "schema"],
             setup=lambda ctx, d: golden(ctx, d), keep=("m.h5",)),
    ]
    # mac-verify --case with ranges (the documented form; its parser once read a dead
    # string on every range): the cases run and the report holds them, in order.
    c.append(Case("verify case ranges run", VERIFY + ["--case", "0-1,5"], 0, [],
                  after=report_has_cases([0, 1, 5])))
    # Interrupts: a signal during the run or during the write leaves no output under its
    # final name, no temporary, and an existing output as it was.
    LONG_SIM = ["mac-sim", "--quiet", "--trace", "{d}/wide.h5", "--layer", "0", "--prefill", "8",
                "--gen-min", "0", "--ring", "64", "--tail", "16", "--dump", "{d}/out.h5"]
    LONG_VERIFY = VERIFY + ["--subset", "all"]
    c += [
        Case("sim SIGINT during the run leaves no dump", LONG_SIM, 128 + signal.SIGINT, [],
             setup=wide_trace, absent=OUT_H5, kill=(signal.SIGINT, 0.3)),
        Case("sim SIGTERM during the run keeps the old dump", LONG_SIM, 128 + signal.SIGTERM,
             [], setup=wide_trace, keep=OUT_H5, kill=(signal.SIGTERM, 0.3)),
        Case("sim SIGINT while writing the dump leaves none", LONG_SIM, 128 + signal.SIGINT, [],
             setup=wide_trace, absent=OUT_H5, kill=(signal.SIGINT, "tmp")),
        Case("sim SIGTERM while writing the dump keeps the old one", LONG_SIM,
             128 + signal.SIGTERM, [], setup=wide_trace, keep=OUT_H5,
             kill=(signal.SIGTERM, "tmp")),
        Case("verify SIGINT during the run leaves no report", LONG_VERIFY,
             128 + signal.SIGINT, [], absent=OUT_R, kill=(signal.SIGINT, 1.0)),
        Case("verify SIGTERM during the run keeps the old report", LONG_VERIFY,
             128 + signal.SIGTERM, [], keep=OUT_R, kill=(signal.SIGTERM, 1.0)),
    ]
    # mac-verify --grade of malformed outputs (the file protocol): refused naming the file and
    # the dataset, before any report is written.
    GRADE = ["mac-verify", "--quiet", "--no-summary", "--max-repro", "0", "--grade", "{d}/e",
             "--out", "{d}/r.h5"]
    OUT0 = "e/outputs/case-00000.h5"
    # An outputs file the grader cannot take (a dataset missing, short, or of another dtype:
    # h5 would convert it) is that case's ERROR, as a missing outputs file is (docs/certify.md):
    # the run goes on, the verdict is FAIL (exit 1), and the message names file and dataset.
    for name, mutate, says in [
            ("missing lse", lambda f: f.__delitem__("lse"), [OUT0, "lse", "missing"]),
            ("short o", lambda f: replace(f, "o", data=f["o"][...].reshape(-1)[:7]),
             [OUT0, "'o'", "7 elements"]),
            ("hit as float32",
             lambda f: replace(f, "hit", data=f["hit"][...].astype("f4")),
             [OUT0, "'hit'", "float type of 4 bytes"]),
            ("match_pos as int32",
             lambda f: replace(f, "match_pos", data=f["match_pos"][...].astype("i4")),
             [OUT0, "'match_pos'", "integer type of 4 bytes"])]:
        c.append(Case(f"verify grade {name} is the case's ERROR", GRADE, 1,
                      setup=graded(outputs=mutate), after=report_case_status(0, 3, says)))
    c += [
        # The control: the same export and outputs, unchanged, grade PASS.
        Case("verify grade of the reference's outputs passes", GRADE, 0, [], setup=graded(),
             after=report_has_cases([0])),
        Case("verify grade outputs dir missing", GRADE + ["--outputs", "{d}/no/such"], 2,
             ["no/such"], setup=graded(), absent=OUT_R),
        # Inputs that are not the case's leave nothing to grade: the case's ERROR.
        Case("verify grade inputs with a truncated k_cache is the case's ERROR", GRADE, 1,
             setup=graded(inputs=lambda f: replace(
                 f, "k_cache", data=f["k_cache"][...].reshape(-1)[:100])),
             after=report_case_status(0, 3, ["e/inputs/case-00000.h5", "'k_cache'",
                                             "100 elements"])),
    ]
    return c


def truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 3)


# --- the driver ----------------------------------------------------------------------------

class Ctx:
    def __init__(self, args):
        self.bin, self.data = os.path.abspath(args.bin), os.path.abspath(args.data)
        self.sanitized = args.sanitized


def temporaries(d):
    found = []
    for root, _, files in os.walk(d):
        found += [os.path.join(root, f) for f in files if ".tmp." in f]
    return found


# How often a case whose signal found the program past the point it is about is run again.
KILL_ATTEMPTS = 5


def freeze(p):
    """Stops `p` (SIGSTOP) and waits until it is stopped: True, or False if it has ended."""
    if p.poll() is not None:
        return False
    try:
        os.kill(p.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    while True:
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("T", "t"):
            return True
        if state in ("Z", "X"):
            return False
        time.sleep(0.0002)


def resume(p):
    """Lets a stopped `p` continue (SIGCONT); nothing if it has ended."""
    try:
        os.kill(p.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def output_changes(d, case, kept):
    """What the program did to the outputs the case watches: kept files removed or changed
    (`kept`: their contents before the run), paths that must stay absent present."""
    changes = []
    for k, before in kept.items():
        path = os.path.join(d, k)
        if not os.path.exists(path):
            changes.append(f"{k} was removed")
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                if f.read() != before:
                    changes.append(f"{k} was changed")
    changes += [f"{a} exists" for a in case.absent if os.path.exists(os.path.join(d, a))]
    return changes


def run_case(ctx, case, d):
    """Runs `case` in directory `d`: (problems found, stderr, whether the signal the case
    sends found the program already past the point the case is about: a void attempt)."""
    if case.setup:
        case.setup(ctx, d)
    kept = {}
    for k in case.keep:
        p = os.path.join(d, k)
        if not os.path.exists(p):
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(SENTINEL)
        with open(p, "rb") as f:
            kept[k] = f.read()
    argv = [a.replace("{d}", d) for a in case.argv]
    argv[0] = os.path.join(ctx.bin, argv[0])

    def limits():
        if case.fsize:
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.fsize, case.fsize))
        if case.vmem:
            resource.setrlimit(resource.RLIMIT_AS, (case.vmem, case.vmem))

    # stdout and stderr go to files, not pipes: a process the program left behind (the case
    # that a killed parent's shards outlive it) must not hold the driver up.
    logs = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    p = subprocess.Popen(argv, cwd=d, stdout=logs[0], stderr=logs[1], preexec_fn=limits)
    missed = False
    if case.kill:
        sig, when = case.kill
        if when == "tmp":  # as soon as a temporary exists: the write is under way
            t0 = time.time()
            while p.poll() is None and not temporaries(d) and time.time() - t0 < 300:
                time.sleep(0.0005)
        else:
            time.sleep(when)
        # The program is stopped before it is looked at, so that what is seen still holds
        # when the signal arrives: the signal goes in only while the output is not yet
        # committed (and, for "tmp", while the temporary still exists). A program already
        # past that point (a poll that slept through a short write) makes the attempt void.
        missed = not (freeze(p) and not output_changes(d, case, kept) and
                      (when != "tmp" or temporaries(d)))
        if not missed:
            p.send_signal(sig)  # pending until the program continues
        resume(p)
    p.wait(timeout=600)
    logs[1].seek(0)
    err = logs[1].read().decode(errors="replace")
    for f in logs:
        f.close()
    rc = p.returncode if p.returncode >= 0 else 128 - p.returncode
    problems = []
    if rc != case.code:
        problems.append(f"exit status {rc}, expected {case.code}")
    for s in case.says:
        if s not in err:
            problems.append(f"stderr does not name {s!r}")
    left = temporaries(d)
    problems += output_changes(d, case, kept)
    if case.after and not problems:
        try:
            case.after(d)
        except AssertionError as e:
            problems.append(str(e))
        left = temporaries(d)
    if left:
        problems.append("temporaries left: " + ", ".join(os.path.relpath(x, d) for x in left))
    return problems, err, missed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--sanitized", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--verbose", action="store_true",
                    help="print every case that passes too (by default: failures, skips and "
                         "the count, so that a failure heads the output CTest shows)")
    args = ap.parse_args()
    ctx = Ctx(args)
    passed = failed = skipped = 0
    table = [c for c in cases() if args.only in c.name]
    names = [c.name for c in table]
    assert len(names) == len(set(names)), "case names must be unique"
    for case in table:
        if case.sanitized_skip and ctx.sanitized:
            print(f"SKIP {case.name} (address-space limit under AddressSanitizer)")
            skipped += 1
            continue
        t0 = time.time()
        for _ in range(KILL_ATTEMPTS):
            with tempfile.TemporaryDirectory(prefix="mac-malformed-") as d:
                try:
                    problems, err, missed = run_case(ctx, case, d)
                except (SetupError, OSError) as e:  # the case could not be set up
                    problems, err, missed = [str(e)], "", False
            # A signal that found the program already past the point the case is about
            # tested nothing (on a loaded machine the poll can sleep through a short write):
            # that attempt is void, not a pass, and the case runs again.
            if not missed:
                break
        else:
            problems = [f"the signal never landed in time: the program had committed its "
                        f"output or ended before it could be sent, {KILL_ATTEMPTS} times"]
        dt = time.time() - t0
        if problems:
            failed += 1
            print(f"FAIL {case.name} ({dt:.1f} s): " + "; ".join(problems), flush=True)
            if err.strip():
                print("     stderr: " + err.strip().replace("\n", "\n             "), flush=True)
        else:
            passed += 1
            if args.verbose:
                print(f"ok   {case.name} ({dt:.1f} s)", flush=True)
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
