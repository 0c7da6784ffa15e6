#!/usr/bin/env python3
"""This project's MAC step and upstream's fused kernel (YJHMITWEB/MAC-Attention
mac_persistent_decode_bf16, through verification/adapters/upstream_mac.py) timed side by side
on the very same inputs, so at identical decision placement; rows in mac-bench's CSV schema.

Setup per point, as mac-bench's (tools/mac-bench/mac_bench.cpp): K/V, rings and queries
N(0,1) BF16 (ring outputs ×0.1, ring LSE N(8,1)); exactly round((1−f)·N·Hq) misses placed
uniformly at random over the (row, head) pairs; a hit head's q̃ is an exact copy of the ring
entry of position m − lag, lag uniform in 1..max_lag (d2 = 0), a miss head's q̃ is fresh
(d2 ≈ 2D ≫ the threshold). Both kernels read the same tensors: the rings are [R, M, Hq, D]
slot-major for both (position p in slot p mod M, upstream's implicit positions), the K/V pool
[pages, 16, Hkv, D] NHD (upstream's token view of it), the threshold mapped by the adapter's
threshold_argument. Before timing, both kernels' hit flags are checked against the planned
placement (a mismatch stops the run, exit 3) and the largest difference of their outputs is
logged. Each step writes entry(m) into slot m mod M: the slot is restored between replays,
outside the timed region, for both.

Timing: ours is the engine's own CUDA graph (mac::cuda::Engine::capture/replay, what mac-bench
replays); upstream's call is captured in a torch CUDA graph where capture works, else each
call is timed alone (the `impl` column says which). Median, p10, p90 of --reps individually
event-timed replays after --warmup, per kernel, in --rounds blocks alternating which goes
first. Rows: `full` (ours, full attention), `mac` (ours, k3 fused), `upstream` (upstream's
kernel), in mac-bench's columns (chunk, amend, schedule are not reported through the Python
API: 0 / "-") plus `impl`; `pct_read_bw` is against torch.sum over 4 GiB, timed in the same
process (not mac-bench's read kernel); `speedup_vs_full` is against our full attention.

    python3 tools/mac-bench/upstream_side.py --checkout .carry/upstream --csv side.csv
    python3 tools/mac-bench/summarize.py side.csv        # the side-by-side table
"""
import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "verification", "adapters"))

COLUMNS = ("kind,k3,amend,layout,chunk,hq,hkv,d,batch,ctx,hit_frac,hits,heads,median_ms,p10_ms,"
           "p90_ms,bytes,gbps,pct_read_bw,speedup_vs_full,pdl,schedule").split(",") + ["impl"]
EXIT_DECISIONS = 3


def lround(x):
    """C's lround (halves away from zero), as mac-bench rounds the number of misses."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def plan(rng, N, Hq, f, max_lag):
    """(hit [N·Hq] bool, lag [N·Hq] int: 0 for a miss): exactly lround((1−f)·N·Hq) misses
    at uniformly random (row, head) pairs, hit lags uniform in 1..max_lag."""
    heads = N * Hq
    misses = lround((1.0 - f) * heads)
    hit = np.ones(heads, bool)
    hit[rng.permutation(heads)[:misses]] = False
    lag = np.where(hit, rng.integers(1, max_lag + 1, heads), 0)
    return hit, lag


def mac_bytes(lag, N, Hq, Hkv, D, m, M, tail):
    """mac-bench's byte count of a MAC step: per (row, KV head) the keys of the union of its
    heads' spans (a miss reads [0, m], a hit at p = m − lag reads [p + 1 − tail, m], every
    head at least the last `tail` keys), K and V; the ring queries K1 scans; q/out; the ring
    writes (q̃, o, and the q read by the hit test)."""
    G = Hq // Hkv
    lag = lag.reshape(N, Hkv, G)
    lo = np.where(lag == 0, 0, np.maximum(0, m - lag + 1 - tail))
    lo = np.minimum(lo.min(axis=2), max(0, m + 1 - tail))
    kv_keys = float((m + 1 - lo).sum())
    q_out = N * Hq * D * 2 * 2
    return kv_keys * D * 2 * 2 + N * Hq * min(M, m) * D * 2 + q_out + N * Hq * D * 2 * 3


def quantiles(ms):
    s = sorted(ms)
    return s[len(s) // 2], s[len(s) // 10], s[len(s) * 9 // 10]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", default=".carry/upstream",
                    help="root of a YJHMITWEB/MAC-Attention checkout (upstream's loader builds "
                         "the op from it)")
    ap.add_argument("--hkv", type=int, nargs="+", default=[8, 4])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--ctx", type=int, nargs="+", default=[32768, 65536, 130048])
    ap.add_argument("--hit", type=float, nargs="+", default=[0.0, 0.5, 0.9, 0.95, 1.0])
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--ring", type=int, default=512)
    ap.add_argument("--tail", type=int, default=256)
    ap.add_argument("--tau", type=float, default=0.45)
    ap.add_argument("--max-lag", type=int, default=64)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no new point after this many seconds (0: none); the CSV then "
                         "holds the points done")
    ap.add_argument("--csv", default="", help="CSV file (default stdout)")
    a = ap.parse_args()
    for name in ("hkv", "batch", "ctx"):
        bad = [x for x in getattr(a, name) if x < 1]
        if bad:
            sys.exit(f"upstream_side.py: --{name} {bad[0]} must be >= 1")
    bad = [f for f in a.hit if not 0.0 <= f <= 1.0]
    if bad:
        sys.exit(f"upstream_side.py: --hit {bad[0]} outside [0, 1]")
    if any(a.hq % h for h in a.hkv):
        sys.exit(f"upstream_side.py: --hq {a.hq} must be a multiple of every --hkv {a.hkv}")
    short = [c for c in a.ctx if c - 1 < a.ring]
    if short:
        sys.exit(f"upstream_side.py: --ctx {short[0]} must exceed --ring {a.ring} (every ring "
                 "slot then holds a candidate of both kernels)")
    if not 1 <= a.max_lag < a.ring:
        sys.exit(f"upstream_side.py: --max-lag {a.max_lag} outside 1..{a.ring - 1}")
    if a.reps < 1 or a.rounds < 1:
        sys.exit("upstream_side.py: --reps and --rounds must be >= 1")

    import torch
    import upstream_mac as um
    import macattn
    from macattn import torch_ops

    if not (torch.cuda.is_available() and macattn.cuda.built_with_cuda()):
        print("upstream_side.py: needs torch with CUDA, a device and macattn built with the "
              "kernels", file=sys.stderr)
        return 77
    if a.head_dim != um.HEAD_DIM or any(a.hq // h > um.MAX_GROUP for h in a.hkv):
        sys.exit(f"upstream_side.py: upstream's op takes D = {um.HEAD_DIM} and groups up to "
                 f"{um.MAX_GROUP} only")
    um.check_signature(a.checkout)
    t_load = time.time()
    op = um.load_upstream(a.checkout)
    t_load = time.time() - t_load
    version = um.checkout_version(a.checkout)
    dev = torch.device("cuda", torch.cuda.current_device())
    bk = um.TorchBackend(dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    stream = torch.cuda.Stream()

    # Streaming read of this process: torch.sum over 4 GiB, median of 20.
    buf = torch.ones(1 << 30, dtype=torch.float32, device=dev)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    reads = []
    for _ in range(25):
        ev[0].record()
        buf.sum()
        ev[1].record()
        ev[1].synchronize()
        reads.append(ev[0].elapsed_time(ev[1]))
    read_gbps = (4 << 30) / quantiles(reads[5:])[0] / 1e6
    del buf

    tmp = a.csv + ".tmp" if a.csv else ""
    out = open(tmp, "w") if tmp else sys.stdout
    D, Hq, M, ps = a.head_dim, a.hq, a.ring, a.page_size
    thr32 = np.float32(2.0 * D * (1.0 - a.tau) ** 2)
    tau_arg, tau_exact = um.threshold_argument(a.tau, D, thr32)
    print(f"# device: {torch.cuda.get_device_name()}; streaming read {read_gbps:.1f} GB/s "
          f"(torch.sum over 4 GiB, median of 20); seed {a.seed}; lags uniform 1..{a.max_lag}; "
          f"tau {a.tau} (upstream threshold {tau_arg!r}, exact {tau_exact}); upstream "
          f"{version} loaded in {t_load:.1f} s; macattn {macattn.git_commit}; torch "
          f"{torch.__version__}", file=out, flush=True)
    print(",".join(COLUMNS), file=out, flush=True)

    def time_replays(replay, restore):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ms = []
        with torch.cuda.stream(stream):
            for i in range(a.warmup + a.reps):
                restore()
                e0.record(stream)
                replay()
                e1.record(stream)
                e1.synchronize()
                if i >= a.warmup:
                    ms.append(e0.elapsed_time(e1))
        return ms

    t_start = time.time()
    failed = 0
    stopped = False
    for hkv in a.hkv:
        for N in a.batch:
            for ctx in a.ctx:
                if a.budget_s and time.time() - t_start > a.budget_s:
                    stopped = True
                    break
                m, ppr = ctx - 1, -(-ctx // ps)
                bf = torch.bfloat16
                k_cache = torch.randn((N * ppr, ps, hkv, D), generator=gen, device=dev).to(bf)
                v_cache = torch.randn((N * ppr, ps, hkv, D), generator=gen, device=dev).to(bf)
                page_table = torch.arange(N * ppr, dtype=torch.int32, device=dev).view(N, ppr)
                kv_len = torch.full((N,), ctx, dtype=torch.int32, device=dev)
                slot = torch.arange(N, dtype=torch.int32, device=dev)
                st = torch_ops.MacDecodeState(
                    num_slots=N, num_q_heads=Hq, num_kv_heads=hkv, head_dim=D, max_batch=N,
                    max_context=ctx, ring=M, tau=a.tau, tail=a.tail, gen_min=0,
                    softmax_scale=1 / math.sqrt(D), device=dev)
                st.ring_q_pre.copy_(torch.randn(st.ring_q_pre.shape, generator=gen, device=dev))
                st.ring_o.copy_(torch.randn(st.ring_o.shape, generator=gen, device=dev) * 0.1)
                st.ring_lse.copy_(torch.randn(st.ring_lse.shape, generator=gen, device=dev) + 8)
                st.mark_ready(range(N))
                q_post = torch.randn((N, Hq, D), generator=gen, device=dev).to(bf)
                saved = [t[:, m % M].clone() for t in (st.ring_q_pre, st.ring_o, st.ring_lse)]

                def restore():
                    for t, s in zip((st.ring_q_pre, st.ring_o, st.ring_lse), saved):
                        t[:, m % M].copy_(s)

                # Ours: the engine's graphs of this point's buffers (q_pre refilled per f).
                q_pre = torch.empty_like(q_post)
                eng = torch_ops.engine_object(st.engine)
                p = macattn.cuda.DecodeParams()
                torch_ops._q_params(p, q_post, q_pre, dev)
                torch_ops._kv_params(p, k_cache, v_cache, page_table, dev)
                torch_ops._ring_params(p, st.ring_q_pre, st.ring_o, st.ring_lse, dev)
                o_ours = torch.empty_like(q_post)
                lse_ours = torch.empty((N, Hq), dtype=torch.float32, device=dev)
                p.kv_len, p.slot = kv_len.data_ptr(), slot.data_ptr()
                p.ready, p.epoch_a, p.epoch_b = (st.ready.data_ptr(), st.epoch_a.data_ptr(),
                                                 st.epoch_b.data_ptr())
                p.softmax_scale, p.tau, p.tail, p.sinks, p.gen_min = (
                    st.softmax_scale, st.tau, st.tail, 0, 0)
                p.out, p.lse = o_ours.data_ptr(), lse_ours.data_ptr()
                torch.cuda.synchronize()
                eng.capture("full", p, stream.cuda_stream)
                tf = quantiles(sum((time_replays(lambda: eng.replay(stream.cuda_stream),
                                                 lambda: None) for _ in range(a.rounds)), []))
                full_bytes = N * ctx * hkv * D * 2 * 2 + N * Hq * D * 2 * 2

                def row(kind, k3, f, hits, t, nbytes, pdl, impl):
                    gbps = nbytes / (t[0] * 1e-3) / 1e9
                    vals = [kind, k3, "-", "nhd", 0, Hq, hkv, D, N, ctx, f"{f:.2f}", hits, N * Hq,
                            f"{t[0]:.5f}", f"{t[1]:.5f}", f"{t[2]:.5f}", f"{nbytes:.0f}",
                            f"{gbps:.1f}", f"{100 * gbps / read_gbps:.1f}",
                            f"{tf[0] / t[0]:.2f}", pdl, "-", impl]
                    print(",".join(str(v) for v in vals), file=out, flush=True)

                pdl = 1  # EngineConfig::dependent_launch's default, which torch_ops keeps
                row("full", "-", 0.0, 0, tf, full_bytes, pdl, "macattn graph")

                # Upstream's arguments over the same tensors (the adapter's mapping).
                table = (page_table.long()[:, torch.arange(ppr * ps, device=dev) // ps] * ps
                         + torch.arange(ppr * ps, device=dev) % ps).to(torch.int32).contiguous()
                ua = dict(um.INTEGRATION)
                ua.update(
                    q_post=q_post, q_pre=q_pre, k_buffer=bk.tokens(k_cache),
                    v_buffer=bk.tokens(v_cache), req_to_token=table,
                    req_ids=torch.arange(N, dtype=torch.int32, device=dev),
                    past_lens=torch.full((N,), m, dtype=torch.int32, device=dev),
                    out_cache_loc=table[:, m].long().contiguous(),
                    query_cache=st.ring_q_pre, attn_cache=st.ring_o, lse_cache=st.ring_lse,
                    out=torch.empty_like(q_post),
                    optional_lse=torch.empty((N, Hq), dtype=torch.float32, device=dev),
                    semantic_pos_ahead=a.tail, front_sink_tokens=0, gen_min_limit=0,
                    threshold=tau_arg, sm_scale=1 / math.sqrt(D),
                    query_post_cache=bk.no_tensor(),
                    mac_cache_ready=torch.ones(N, dtype=torch.uint8, device=dev),
                    mac_cache_epoch=torch.ones(N, dtype=torch.int64, device=dev),
                    mac_request_epoch=torch.ones(N, dtype=torch.int64, device=dev))
                ua["max_context"] = max(ua["max_context"], ctx)
                ua.update(um.workspace(bk, N, Hq, hkv, D, M, a.tail, 0, ua["max_context"],
                                       ua["tile_tokens"], ua["match_tile_slots"]))
                um.check_call(ua, bk)
                up_args = [ua[n] for n in um.UPSTREAM_ARGS]

                def call_upstream():
                    op(*up_args)

                for f in a.hit:
                    if a.budget_s and time.time() - t_start > a.budget_s:
                        stopped = True
                        break
                    hit, lag = plan(rng, N, Hq, f, a.max_lag)
                    q_pre.copy_(torch.randn((N, Hq, D), generator=gen, device=dev).to(bf))
                    idx = np.flatnonzero(hit)
                    r_idx = torch.from_numpy(idx // Hq).to(dev)
                    h_idx = torch.from_numpy(idx % Hq).to(dev)
                    s_idx = torch.from_numpy((m - lag[idx]) % M).to(dev)
                    q_pre[r_idx, h_idx] = st.ring_q_pre[r_idx, s_idx, h_idx]
                    want = torch.from_numpy(hit)
                    # Decisions of both kernels, once, against the plan.
                    res = st.decode_step(q_post, q_pre, k_cache, v_cache, page_table, kv_len,
                                         slot, diagnostics=True)
                    o_ref = res[0].clone()
                    got_ours = res[2].flatten().bool().cpu()
                    restore()
                    call_upstream()
                    torch.cuda.synchronize()
                    got_up = ua["head_hit"].flatten().bool().cpu()
                    diff = (ua["out"].float() - o_ref.float()).abs().max().item()
                    restore()
                    print(f"hkv={hkv} N={N} ctx={ctx} f={f}: hits planned {int(hit.sum())}, "
                          f"ours {int(got_ours.sum())}, upstream {int(got_up.sum())}; max |o "
                          f"upstream - o ours| {diff:.3e}", file=sys.stderr, flush=True)
                    if not (torch.equal(got_ours, want) and torch.equal(got_up, want)):
                        print(f"upstream_side.py: decisions differ from the plan at hkv={hkv} "
                              f"N={N} ctx={ctx} f={f} (ours equal: "
                              f"{torch.equal(got_ours, want)}, upstream equal: "
                              f"{torch.equal(got_up, want)})", file=sys.stderr)
                        failed += 1
                        continue
                    torch.cuda.synchronize()
                    eng.capture("mac", p, stream.cuda_stream)
                    # Upstream: a torch graph of its call where capture works.
                    graph, impl = None, "upstream events"
                    try:
                        with torch.cuda.stream(stream):
                            call_upstream()
                            restore()
                        torch.cuda.synchronize()
                        graph = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(graph, stream=stream):
                            call_upstream()
                        torch.cuda.synchronize()
                        impl = "upstream graph"
                    except Exception as ex:  # noqa: BLE001 (then time the calls alone)
                        print(f"upstream capture failed ({type(ex).__name__}: {ex}); timing "
                              "direct calls", file=sys.stderr)
                        graph = None
                        torch.cuda.synchronize()
                    up_replay = graph.replay if graph is not None else call_upstream
                    ours_ms, up_ms = [], []
                    for r in range(a.rounds):
                        blocks = [(ours_ms, lambda: eng.replay(stream.cuda_stream)),
                                  (up_ms, up_replay)]
                        for acc, rep in (blocks if r % 2 == 0 else blocks[::-1]):
                            acc += time_replays(rep, restore)
                    restore()
                    nb = mac_bytes(lag, N, Hq, hkv, D, m, M, a.tail)
                    row("mac", "fused", f, int(hit.sum()), quantiles(ours_ms), nb, pdl,
                        "macattn graph")
                    row("upstream", "-", f, int(hit.sum()), quantiles(up_ms), nb, "-",
                        f"{impl} {version}")
                    del graph
                if stopped:
                    break
                del st, k_cache, v_cache, table, ua, up_args
                torch.cuda.empty_cache()
            if stopped:
                break
        if stopped:
            break
    if stopped:
        print(f"# stopped at the --budget-s {a.budget_s} s limit", file=out)
    if tmp:
        out.close()
        os.replace(tmp, a.csv)
    return EXIT_DECISIONS if failed else 0


if __name__ == "__main__":
    sys.exit(main())
