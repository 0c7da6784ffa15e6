#!/usr/bin/env python3
"""torch.ops.macattn.decode_step through a torch CUDA graph against the C++ API's own graph
replay (mac::cuda::Engine::capture/replay, what mac-bench times), in one process, on the same
buffers and decisions; optionally also mac-bench itself on the same shape. Prints a CSV row
per shape; ratio = C++ median / torch median, ratio_op = median of a torch graph of the C++ call
itself / torch median (>= 0.98 is the target: the Python path costs the kernels nothing once
captured; a torch graph's replay adds torch's own fixed work, which ratio_op leaves out).

Synthetic setup as mac-bench's (tools/mac-bench/mac_bench.cpp): K/V, rings and queries
N(0,1) BF16; exactly round((1-f)·N·Hq) misses placed uniformly at random over (row, head);
a hit head's q̃ is an exact copy of the ring entry of m - lag, lag uniform in 1..max_lag; a
miss head's q̃ is fresh (d2 ≈ 2D ≫ thr). Every replay writes entry(m) into slot m mod M; the
slot is restored between replays, outside the timed region, so every replay makes the same
decisions. Each replay is timed alone with CUDA events (median, p10, p90 of --reps after
--warmup); the paths alternate in --rounds blocks so that drift hits both.

--timing (a list; mac-bench --timing likewise): `queued` queues each replay behind a busy wait
on the device, so its time is the device's execution of the graph (what the target is about:
the Python path must not make the kernels slower); `launch` submits each replay to an idle
device, so its time also holds the host's launch latency, which differs between a Python call
of torch.cuda.CUDAGraph.replay and a C++ cudaGraphLaunch.

  python3 python/bench/bench_decode_step.py --hkv 8 --batch 1,16 --ctx 32768 --hit 0.9 \
      --mac-bench build-python/dev/bin/mac-bench
"""
import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile

import torch

import macattn
from macattn import torch_ops

# The replay timing and quantiles of mac-bench's Python baselines (--timing queued included).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                "mac-bench"))
from bench_common import quantiles, time_replays  # noqa: E402


def ints(s):
    return [int(x) for x in s.split(",")]


def floats(s):
    return [float(x) for x in s.split(",")]


def mac_bench_median(exe, a, hkv, N, ctx, f, timing):
    """mac-bench's median for the MAC step (K3 fused) of one point, from its CSV."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "b.csv")
        cmd = [exe, "--hkv", str(hkv), "--batch", str(N), "--ctx", str(ctx), "--hit", str(f),
               "--hq", str(a.hq), "--head-dim", str(a.head_dim), "--ring", str(a.ring),
               "--tail", str(a.tail), "--max-lag", str(a.max_lag), "--page-size",
               str(a.page_size), "--reps", str(a.reps), "--warmup", str(a.warmup),
               "--k3-compare", "0", "--timing", timing, "--csv", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as fh:
            rows = [r for r in csv.DictReader(l for l in fh if not l.startswith("#"))]
    for r in rows:
        if r["kind"] == "mac" and r["k3"] == "fused":
            return float(r["median_ms"])
    raise RuntimeError(f"mac-bench wrote no MAC row: {rows}")


def run_point(a, hkv, N, ctx, f, gen, timing):
    dev = torch.device("cuda", torch.cuda.current_device())
    Hq, D, M, ps = a.hq, a.head_dim, a.ring, a.page_size
    m = ctx - 1
    ppr = (ctx + ps - 1) // ps
    bf = torch.bfloat16
    k_cache = torch.randn((N * ppr, ps, hkv, D), generator=gen, device=dev).to(bf)
    v_cache = torch.randn((N * ppr, ps, hkv, D), generator=gen, device=dev).to(bf)
    page_table = torch.arange(N * ppr, dtype=torch.int32, device=dev).view(N, ppr)
    kv_len = torch.full((N,), ctx, dtype=torch.int32, device=dev)
    slot = torch.arange(N, dtype=torch.int32, device=dev)
    st = torch_ops.MacDecodeState(num_slots=N, num_q_heads=Hq, num_kv_heads=hkv, head_dim=D,
                                  max_batch=N, max_context=ctx, ring=M, tau=0.45, tail=a.tail,
                                  gen_min=0, softmax_scale=1 / math.sqrt(D), device=dev)
    st.ring_q_pre.copy_(torch.randn(st.ring_q_pre.shape, generator=gen, device=dev))
    st.ring_o.copy_(torch.randn(st.ring_o.shape, generator=gen, device=dev) * 0.1)
    st.ring_lse.copy_(torch.randn(st.ring_lse.shape, generator=gen, device=dev) + 8)
    st.mark_ready(range(N))
    q_post = torch.randn((N, Hq, D), generator=gen, device=dev).to(bf)
    q_pre = torch.randn((N, Hq, D), generator=gen, device=dev).to(bf)
    # Decisions: exactly round((1 - f)·N·Hq) misses, uniformly placed.
    heads = N * Hq
    misses = round((1 - f) * heads)
    order = torch.randperm(heads, generator=gen, device=dev).cpu()
    lags = torch.randint(1, a.max_lag + 1, (heads,), generator=gen, device=dev).cpu()
    hit_plan = torch.ones(heads, dtype=torch.bool)
    hit_plan[order[:misses]] = False
    for i in hit_plan.nonzero().flatten().tolist():
        r, h = divmod(i, Hq)
        q_pre[r, h] = st.ring_q_pre[r, (m - int(lags[i])) % M, h]
    saved = [t[:, m % M].clone() for t in (st.ring_q_pre, st.ring_o, st.ring_lse)]

    def restore():
        for t, s in zip((st.ring_q_pre, st.ring_o, st.ring_lse), saved):
            t[:, m % M].copy_(s)

    args = (q_post, q_pre, k_cache, v_cache, page_table, kv_len, slot)
    # The planned decisions, checked once (with diagnostics).
    res = st.decode_step(*args, diagnostics=True)
    got = res[2].flatten().bool().cpu()
    assert torch.equal(got, hit_plan), "decisions differ from the planned hits"
    restore()
    stream = torch.cuda.Stream()
    # C++: the engine's own capture and replay of the same step (no diagnostics).
    eng = torch_ops.engine_object(st.engine)
    p = macattn.cuda.DecodeParams()
    torch_ops._q_params(p, q_post, q_pre, dev)
    torch_ops._kv_params(p, k_cache, v_cache, page_table, dev)
    torch_ops._ring_params(p, st.ring_q_pre, st.ring_o, st.ring_lse, dev)
    out = torch.empty_like(q_post)
    lse = torch.empty((N, Hq), dtype=torch.float32, device=dev)
    p.kv_len, p.slot = kv_len.data_ptr(), slot.data_ptr()
    p.ready, p.epoch_a, p.epoch_b = st.ready.data_ptr(), st.epoch_a.data_ptr(), st.epoch_b.data_ptr()
    p.softmax_scale, p.tau, p.tail, p.sinks, p.gen_min = st.softmax_scale, st.tau, st.tail, 0, 0
    p.out, p.lse = out.data_ptr(), lse.data_ptr()
    torch.cuda.synchronize()
    eng.capture("mac", p, stream.cuda_stream)
    # torch: the op captured by torch.cuda.graph (warmed up on the side stream first).
    with torch.cuda.stream(stream):
        st.decode_step(*args, diagnostics=False)
        restore()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        static = st.decode_step(*args, diagnostics=False)
    torch.cuda.synchronize()
    # torch again, capturing the C++ call itself (no custom op): what a torch graph of these
    # kernels costs, so that op and graph machinery can be told apart.
    raw_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(raw_graph, stream=stream):
        eng.mac_step(p, stream.cuda_stream)
    torch.cuda.synchronize()
    cpp, tor, raw = [], [], []
    for r in range(a.rounds):
        blocks = [(cpp, lambda: eng.replay(stream.cuda_stream)), (tor, graph.replay),
                  (raw, raw_graph.replay)]
        for acc, replay in (blocks if r % 2 == 0 else blocks[::-1]):
            acc += time_replays(replay, a.warmup, a.reps, restore, stream,
                                queued=timing == "queued")
    # Both graphs computed the same thing.
    restore()
    with torch.cuda.stream(stream):
        eng.replay(stream.cuda_stream)
        restore()
        graph.replay()
    torch.cuda.synchronize()
    same = torch.equal(out.view(torch.int16), static[0].view(torch.int16)) and \
        torch.equal(lse, static[1])
    row = dict(timing=timing, hq=Hq, hkv=hkv, d=D, batch=N, ctx=ctx, hit_frac=f,
               hits=int(hit_plan.sum()), heads=heads)
    cm, c10, c90 = quantiles(cpp)
    tm, t10, t90 = quantiles(tor)
    rm, r10, r90 = quantiles(raw)
    row.update(cpp_median_ms=f"{cm:.5f}", cpp_p10_ms=f"{c10:.5f}", cpp_p90_ms=f"{c90:.5f}",
               torch_median_ms=f"{tm:.5f}", torch_p10_ms=f"{t10:.5f}",
               torch_p90_ms=f"{t90:.5f}", torch_raw_median_ms=f"{rm:.5f}",
               torch_raw_p10_ms=f"{r10:.5f}", torch_raw_p90_ms=f"{r90:.5f}",
               ratio=f"{cm / tm:.4f}", ratio_op=f"{rm / tm:.4f}", bitwise_equal=int(same))
    if a.mac_bench:
        mb = mac_bench_median(a.mac_bench, a, hkv, N, ctx, f, timing)
        row.update(mac_bench_median_ms=f"{mb:.5f}", ratio_vs_mac_bench=f"{mb / tm:.4f}")
    del graph, static, st, k_cache, v_cache
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=ints, default=[8])
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batch", type=ints, default=[1, 16])
    ap.add_argument("--ctx", type=ints, default=[32768])
    ap.add_argument("--hit", type=floats, default=[0.9])
    ap.add_argument("--ring", type=int, default=512)
    ap.add_argument("--tail", type=int, default=256)
    ap.add_argument("--max-lag", type=int, default=64)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--timing", default=["queued", "launch"],
                    type=lambda s: [t for t in s.split(",") if t],
                    help="timing modes, a list of queued and launch (see above)")
    ap.add_argument("--mac-bench", help="mac-bench binary: also time its replay of each point")
    ap.add_argument("--csv", help="CSV file (default stdout)")
    a = ap.parse_args()
    bad = [t for t in a.timing if t not in ("queued", "launch")]
    if bad or not a.timing:
        ap.error(f"--timing {bad[0] if bad else '(empty)'}: expected queued or launch")
    if not (torch.cuda.is_available() and macattn.cuda.built_with_cuda()):
        print("bench_decode_step: needs torch with CUDA, a device and macattn built with the "
              "kernels", file=sys.stderr)
        return 77
    gen = torch.Generator(device="cuda")
    gen.manual_seed(a.seed)
    rows = []
    for hkv in a.hkv:
        for N in a.batch:
            for ctx in a.ctx:
                for f in a.hit:
                    for timing in a.timing:
                        rows.append(run_point(a, hkv, N, ctx, f, gen, timing))
                    print(rows[-1], file=sys.stderr, flush=True)
    fh = open(a.csv, "w", newline="") if a.csv else sys.stdout
    fh.write(f"# {torch.cuda.get_device_name()}; seed {a.seed}; lags uniform 1..{a.max_lag}; "
             f"{a.rounds} rounds x {a.reps} replays per path; macattn {macattn.git_commit}\n")
    w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
    if fh is not sys.stdout:
        fh.close()
    for timing in a.timing:
        rs = [r for r in rows if r["timing"] == timing]
        worst = min(float(r["ratio"]) for r in rs)
        worst_op = min(float(r["ratio_op"]) for r in rs)
        mb = [float(r["ratio_vs_mac_bench"]) for r in rs if "ratio_vs_mac_bench" in r]
        print(f"timing {timing}: worst ratio C++ graph / torch graph of the op {worst:.4f}; "
              f"torch graph of the C++ call / of the op {worst_op:.4f}"
              + (f"; mac-bench / torch graph of the op {min(mb):.4f}..{max(mb):.4f}" if mb else "")
              + " (target >= 0.98)", file=sys.stderr)
    print(f"every output bit-identical: {all(r['bitwise_equal'] for r in rows)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
