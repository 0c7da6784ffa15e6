#!/usr/bin/env python3
"""CPU checks of the side-by-side tools' host logic (CTest mac_bench_py_tools):

* upstream_side.py writes mac-bench's columns, read from mac_bench.cpp's header line, in
  order (plus `impl`), so summarize.py and ab_summary.py read its rows as mac-bench's;
* its placement has exactly lround((1−f)·N·Hq) misses and lags in 1..max_lag;
* its byte count equals a per-head brute force of mac-bench's definition (the union of the
  heads' key spans per KV group);
* the placement and the arguments it hands upstream's op make exactly the planned decisions:
  run through the adapter's numpy model of the op (upstream_mac.reference_op), every planned
  hit head hits at position m − lag and every miss head misses;
* summarize.py places full attention against FlashInfer (ratio = FlashInfer / ours) and
  tabulates upstream rows against ours at the same hit fraction (ratio = upstream / ours);
* spread.py ranges each column over repeated runs, the ratios taken within a run, from the
  pdl 1 fused rows, in docs/cuda.md's row order, '–' where a run lacks the point; unequal file
  lists exit 2 naming the flags; --out leaves no .tmp file.

    python3 tools/mac-bench/test_py_tools.py
"""
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import upstream_side  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def mac_bench_columns():
    with open(os.path.join(HERE, "mac_bench.cpp"), encoding="utf-8") as f:
        src = f.read()
    m = re.search(r'"(kind,k3,[^"]*)"\s*"([^"]*)"\s*"([^"]*)"', src)
    return "".join(m.groups()).replace("\\n", "").split(",") if m else None


def brute_bytes(lag, N, Hq, Hkv, D, m, M, tail):
    """mac-bench's MAC bytes with the key union counted key by key."""
    G = Hq // Hkv
    keys = 0
    for n in range(N):
        for hk in range(Hkv):
            read = np.zeros(m + 1, bool)
            read[max(0, m + 1 - tail):] = True
            for g in range(G):
                L = lag[n * Hq + hk * G + g]
                read[:] |= L == 0
                if L:
                    read[max(0, m - L + 1 - tail):] = True
            keys += int(read.sum())
    return keys * D * 4 + N * Hq * min(M, m) * D * 2 + N * Hq * D * 4 + N * Hq * D * 6


def decisions_through_upstream_model(rng):
    import upstream_mac as um
    bk = um.NumpyBackend()
    bf = lambda x: um.bf16_round(np.asarray(x, np.float32))  # noqa: E731 (BF16 values)
    N, Hq, Hkv, D, ps, ctx, M, tail, tau = 2, 8, 2, um.HEAD_DIM, 4, 48, 16, 8, 0.45
    m, ppr = ctx - 1, ctx // ps
    k = bf(rng.standard_normal((N * ppr, ps, Hkv, D)))
    v = bf(rng.standard_normal((N * ppr, ps, Hkv, D)))
    rings = (bf(rng.standard_normal((N, M, Hq, D))), bf(0.1 * rng.standard_normal((N, M, Hq, D))),
             (rng.standard_normal((N, M, Hq)) + 8).astype(np.float32))
    q_post = bf(rng.standard_normal((N, Hq, D)))
    tau_arg, _ = um.threshold_argument(tau, D, np.float32(2.0 * D * (1.0 - tau) ** 2))
    for f in (0.0, 0.5, 1.0):
        hit, lag = upstream_side.plan(rng, N, Hq, f, M // 2)
        q_pre = bf(rng.standard_normal((N, Hq, D)))
        upstream_side.place_hits(q_pre, rings[0], hit, lag, m)
        args = upstream_side.upstream_arguments(
            um, bk, q_post, q_pre, k, v, tuple(r.copy() for r in rings),
            np.arange(N * ppr).reshape(N, ppr), m, tail, tau_arg, 1 / np.sqrt(D), ctx)
        um.reference_op(*[args[n] for n in um.UPSTREAM_ARGS])
        got = args["head_hit"].flatten().astype(bool)
        pos = args["head_match_pos"].flatten()
        check(np.array_equal(got, hit) and np.array_equal(pos[hit], m - lag[hit]),
              f"upstream's op (numpy model) on the placement f={f}: hits {int(got.sum())} of "
              f"{int(hit.sum())} planned, match positions m - lag: "
              f"{np.array_equal(pos[hit], m - lag[hit])}")


SPREAD_RUNS = (  # per run: full, SDPA, FlashInfer, MAC hit 0, MAC hit 1 medians (ms) at 8/16/32768
    (0.5, 0.45, 0.55, 0.5, 0.04),   # SDPA/full 0.9, FI/full 1.1, full/miss 1.0, 40 µs
    (0.4, 0.44, 0.4, 0.5, 0.05),    # 1.1, 1.0, 0.8, 50 µs
    (0.5, 0.5, 0.6, 0.4, 0.045),    # 1.0, 1.2, 1.25, 45 µs
)


def spread_checks():
    """spread.py over three fabricated runs of two points; 4/1/1024 is absent from run 3's SDPA
    and MAC all-hit rows, so those cells read '–'."""
    cols = mac_bench_columns()
    spread = os.path.join(HERE, "spread.py")
    run = lambda *args: subprocess.run([sys.executable, spread, *args], capture_output=True,  # noqa: E731
                                       text=True, encoding="utf-8")

    def mac_row(kind, k3, hkv, batch, ctx, f, ms, pdl):
        r = dict.fromkeys(cols, "1")
        r.update(kind=kind, k3=k3, hkv=hkv, batch=batch, ctx=ctx, hit_frac=f"{f:.2f}",
                 median_ms=ms, pdl=pdl, schedule="x")
        return ",".join(str(r[c]) for c in cols)

    with tempfile.TemporaryDirectory() as d:
        macs, sdpas, fis = [], [], []
        for i, (full, sdpa, fi, miss, hit) in enumerate(SPREAD_RUNS):
            lines = []
            # the small point first in the file: the table must still list Hkv 8 first
            lines.append(mac_row("full", "-", 4, 1, 1024, 0, 0.01 * (i + 1), 1))
            lines.append(mac_row("mac", "fused", 4, 1, 1024, 0, 0.02, 1))
            if i < 2:
                lines.append(mac_row("mac", "fused", 4, 1, 1024, 1, 0.003, 1))
            for pdl, scale in ((0, 9.0), (1, 1.0)):  # pdl 0 rows (an A/B run) must be ignored
                lines.append(mac_row("full", "-", 8, 16, 32768, 0, full * scale, pdl))
                lines.append(mac_row("mac", "side", 8, 16, 32768, 0, 7.0, pdl))  # not fused
                lines.append(mac_row("mac", "fused", 8, 16, 32768, 0, miss * scale, pdl))
                lines.append(mac_row("mac", "fused", 8, 16, 32768, 1, hit * scale, pdl))
            paths = [os.path.join(d, f"{t}{i}.csv") for t in ("mac", "sdpa", "fi")]
            with open(paths[0], "w") as fh:
                fh.write("# fabricated\n" + ",".join(cols) + "\n" + "\n".join(lines) + "\n")
            with open(paths[1], "w") as fh:
                fh.write("# fabricated\nkind,hq,hkv,d,batch,ctx,median_ms,p10_ms,p90_ms,bytes,gbps\n"
                         f"sdpa_cudnn,32,8,128,16,32768,{sdpa},0,0,1,1\n"
                         + ("sdpa_cudnn,8,4,128,1,1024,0.01,0,0,1,1\n" if i < 2 else ""))
            with open(paths[2], "w") as fh:
                fh.write("# fabricated\nkind,hq,hkv,d,batch,ctx,median_ms,p10_ms,p90_ms,bytes,gbps,"
                         f"flashinfer,backend\nflashinfer,32,8,128,16,32768,{fi},0,0,1,1,0.5.3,fa2\n"
                         "flashinfer,8,4,128,1,1024,0.01,0,0,1,1,0.5.3,fa2\n")
            macs.append(paths[0])
            sdpas.append(paths[1])
            fis.append(paths[2])

        res = run("--mac", *macs, "--sdpa", *sdpas, "--flashinfer", *fis)
        check(res.returncode == 0, f"spread.py ran (rc {res.returncode}: {res.stderr[-300:]})")
        lines = res.stdout.splitlines()
        head = [ln for ln in lines if ln.startswith("| Hkv |")]
        want_head = ("| Hkv | batch | ctx | full ms | full vs SDPA | full vs FlashInfer | "
                     "MAC all-miss / full | MAC all-hit µs |")
        check(head == [want_head], f"spread.py header: {head}")
        body = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines
                if re.match(r"\| \d", ln)]
        check([r[:3] for r in body] == [["8", "16", "32768"], ["4", "1", "1024"]],
              f"spread.py rows Hkv descending: {[r[:3] for r in body]}")

        def span(cell):
            lo, hi = cell.split("–")
            return float(lo), float(hi)

        def near(got, want):
            return all(math.isclose(g, w, abs_tol=1e-9) for g, w in zip(got, want))

        if len(body) == 2:
            big, small = body
            want = ((0.4, 0.5), (0.9, 1.1), (1.0, 1.2), (0.8, 1.25), (40.0, 50.0))
            got = [span(c) for c in big[3:]]
            check(len(got) == 5 and all(near(g, w) for g, w in zip(got, want)),
                  f"spread.py 8/16/32768: full ms 0.4–0.5, vs SDPA 0.9–1.1, vs FlashInfer "
                  f"1.0–1.2, all-miss / full 0.8–1.25, all-hit 40–50 µs (pdl 1, fused): {big[3:]}")
            check(big[3:] == ["0.4000–0.5000", "0.900–1.100", "1.000–1.200", "0.800–1.250",
                              "40.0–50.0"], f"spread.py formats as summarize.py: {big[3:]}")
            check(small[4] == "–" and small[7] == "–" and near(span(small[3]), (0.01, 0.03))
                  and near(span(small[6]), (0.5, 1.5)),
                  f"spread.py 4/1/1024: '–' where run 3 lacks SDPA / all-hit, ranges elsewhere: "
                  f"{small[3:]}")
        summary = {ln[2:].split(":")[0]: ln.split(": ")[1].split()[0] for ln in lines
                   if ln.startswith("- ")}
        check(summary == {"full ms": "0.0100–0.5000", "full vs SDPA": "0.900–1.100",
                          "full vs FlashInfer": "0.333–1.200", "MAC all-miss / full": "0.500–1.500",
                          "MAC all-hit µs": "40.0–50.0"},
              f"spread.py overall ranges over the complete cells of every point: {summary}")

        res = run("--mac", *macs, "--sdpa", *sdpas[:2])
        check(res.returncode == 2 and "--mac has 3" in res.stderr and "--sdpa has 2" in res.stderr,
              f"spread.py unequal lists: rc {res.returncode} (want 2), {res.stderr.strip()[-200:]}")
        res = run("--mac", *macs, "--sdpa", *sdpas, "--flashinfer", fis[0])
        check(res.returncode == 2 and "--flashinfer has 1" in res.stderr,
              f"spread.py unequal --flashinfer: rc {res.returncode}, {res.stderr.strip()[-200:]}")

        out = os.path.join(d, "spread.md")
        res = run("--mac", *macs, "--sdpa", *sdpas, "--out", out)
        with open(out, encoding="utf-8") as fh:
            written = fh.read()
        check(res.returncode == 0 and res.stdout == "" and not os.path.exists(out + ".tmp")
              and "| 8 | 16 | 32768 | 0.4000–0.5000 | 0.900–1.100 | 0.800–1.250 | 40.0–50.0 |"
              in written and "FlashInfer" not in written,
              f"spread.py --out: written, no .tmp left, no FlashInfer column without --flashinfer "
              f"(rc {res.returncode})")


def main():
    cols = mac_bench_columns()
    check(cols is not None and upstream_side.COLUMNS == cols + ["impl"],
          f"upstream_side.COLUMNS = mac-bench's header + impl ({cols})")

    rng = np.random.default_rng(7)
    for N, Hq, f in ((1, 32, 0.95), (3, 32, 0.5), (4, 8, 0.0), (2, 16, 1.0), (5, 32, 0.9)):
        hit, lag = upstream_side.plan(rng, N, Hq, f, 64)
        want_miss = int(np.floor((1 - f) * N * Hq + 0.5))
        check(int((~hit).sum()) == want_miss and np.all(lag[~hit] == 0)
              and np.all((lag[hit] >= 1) & (lag[hit] <= 64)),
              f"plan N={N} Hq={Hq} f={f}: {int((~hit).sum())} misses (want {want_miss})")

    for N, Hq, Hkv, m, tail, f in ((2, 8, 2, 700, 256, 0.5), (1, 8, 8, 300, 256, 1.0),
                                   (3, 16, 4, 1000, 100, 0.9), (2, 8, 1, 600, 256, 0.0)):
        hit, lag = upstream_side.plan(rng, N, Hq, f, 64)
        got = upstream_side.mac_bytes(lag, N, Hq, Hkv, 128, m, 512, tail)
        want = brute_bytes(lag, N, Hq, Hkv, 128, m, 512, tail)
        check(got == want, f"mac_bytes N={N} Hq={Hq} Hkv={Hkv} m={m} r={tail} f={f}: {got} "
                           f"(brute force {want})")

    decisions_through_upstream_model(rng)

    with tempfile.TemporaryDirectory() as d:
        side = os.path.join(d, "side.csv")
        head = ",".join(upstream_side.COLUMNS)
        base = ("{kind},{k3},-,nhd,0,32,8,128,16,32768,{f},{hits},512,{ms},{ms},{ms},1,1,1,1,"
                "{pdl},-,x")
        with open(side, "w") as fh:
            fh.write("# fabricated\n" + head + "\n")
            fh.write(base.format(kind="full", k3="-", f="0.00", hits=0, ms=0.5, pdl=1) + "\n")
            fh.write(base.format(kind="mac", k3="fused", f="0.00", hits=0, ms=0.52, pdl=1) + "\n")
            fh.write(base.format(kind="upstream", k3="-", f="0.00", hits=0, ms=1.56, pdl="-")
                     + "\n")
            fh.write(base.format(kind="mac", k3="fused", f="1.00", hits=512, ms=0.04, pdl=1)
                     + "\n")
            fh.write(base.format(kind="upstream", k3="-", f="1.00", hits=512, ms=0.1, pdl="-")
                     + "\n")
        fi = os.path.join(d, "fi.csv")
        with open(fi, "w") as fh:
            fh.write("# fabricated\nkind,hq,hkv,d,batch,ctx,median_ms,p10_ms,p90_ms,bytes,gbps,"
                     "flashinfer,backend\nflashinfer,32,8,128,16,32768,0.55,0.5,0.6,1,1,0.5.3,"
                     "fa2-tensor-cores\n")
        res = subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), side,
                              "--flashinfer", fi], capture_output=True, text=True)
        text = res.stdout
        check(res.returncode == 0, f"summarize.py ran (rc {res.returncode}: {res.stderr[-300:]})")
        first = [ln for ln in text.splitlines() if ln.startswith("| 8 | 16 | 32768 | 0 |")]
        check(len(first) == 1 and "| 0.5500 | 1.100 |" in first[0],
              f"full vs FlashInfer = 0.55 / 0.5 = 1.100: {first}")
        up = [ln for ln in text.splitlines() if ln.startswith("| 8 | 16 | 32768 | 0.00 |")
              or ln.startswith("| 8 | 16 | 32768 | 1.00 |")]
        check(len(up) == 2 and "| 3.00x |" in up[0] and "| 2.50x |" in up[1],
              f"upstream / ours = 1.56 / 0.52 = 3.00x, 0.1 / 0.04 = 2.50x: {up}")
    spread_checks()
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
