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
placement (a point where either differs is not timed, and the run exits 3) and the largest
difference of their outputs is logged (stderr). Each step writes entry(m) into slot m mod M: the slot is restored between replays,
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
from bench_common import (add_grid_args, add_mac_args, check_grid, csv_out,  # noqa: E402
                          quantiles, time_replays)

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
    head at least the last `tail` keys), K and V; the ring queries K1 scans; q/out; and three
    BF16 vectors per head for q̃ and the ring writes, as mac-bench counts them."""
    G = Hq // Hkv
    lag = lag.reshape(N, Hkv, G)
    lo = np.where(lag == 0, 0, np.maximum(0, m - lag + 1 - tail))
    lo = np.minimum(lo.min(axis=2), max(0, m + 1 - tail))
    kv_keys = float((m + 1 - lo).sum())
    q_out = N * Hq * D * 2 * 2
    return kv_keys * D * 2 * 2 + N * Hq * min(M, m) * D * 2 + q_out + N * Hq * D * 2 * 3


def place_hits(q_pre, ring_q_pre, hit, lag, m):
    """Copies into q_pre [N, Hq, D] (numpy or torch) the ring entry of position m − lag for
    every hit head (ring [R, M, Hq, D] slot-major: position p in slot p mod M)."""
    Hq, M = q_pre.shape[1], ring_q_pre.shape[1]
    idx = np.flatnonzero(hit)
    r, h, slot = idx // Hq, idx % Hq, (m - lag[idx]) % M
    if not isinstance(q_pre, np.ndarray):  # torch: index tensors on the tensors' device
        import torch
        r, h, slot = (torch.from_numpy(x).to(q_pre.device) for x in (r, h, slot))
    q_pre[r, h] = ring_q_pre[r, slot, h]


def upstream_arguments(um, bk, q_post, q_pre, k_cache, v_cache, rings, page_table, m, tail,
                       tau_arg, softmax_scale, max_context):
    """The upstream op's arguments, by name, over our tensors (the certification adapter's
    mapping, upstream_mac.CaseMapping.arguments, for one step of ready rows at position m):
    k/v as a token view of the NHD pool, req_to_token from the host page table
    ([N, pages] int), past_lens = m, out_cache_loc = the token of m, the rings (slot-major
    [R, M, Hq(, D)], as upstream's) shared, readiness and epochs all set, sinks and gen_min 0,
    the integration's defaults otherwise."""
    N, Hq, D = q_post.shape
    Hkv, ps, M = k_cache.shape[2], k_cache.shape[1], rings[0].shape[1]
    pt = np.asarray(page_table, np.int64)
    tok = np.arange(pt.shape[1] * ps)
    table = (pt[:, tok // ps] * ps + tok % ps).astype(np.int32)
    a = dict(um.INTEGRATION)
    a.update(
        q_post=q_post, q_pre=q_pre, k_buffer=bk.tokens(k_cache), v_buffer=bk.tokens(v_cache),
        req_to_token=bk.from_host(table, "i32"), req_ids=bk.from_host(np.arange(N), "i32"),
        past_lens=bk.from_host(np.full(N, m), "i32"),
        out_cache_loc=bk.from_host(table[:, m].astype(np.int64), "i64"),
        query_cache=rings[0], attn_cache=rings[1], lse_cache=rings[2],
        out=bk.empty((N, Hq, D), "bf16"), optional_lse=bk.empty((N, Hq), "f32"),
        max_context=max(um.INTEGRATION["max_context"], max_context),
        semantic_pos_ahead=tail, front_sink_tokens=0, gen_min_limit=0, threshold=tau_arg,
        sm_scale=softmax_scale, query_post_cache=bk.no_tensor(),
        mac_cache_ready=bk.from_host(np.ones(N, np.uint8), "u8"),
        mac_cache_epoch=bk.from_host(np.ones(N, np.int64), "i64"),
        mac_request_epoch=bk.from_host(np.ones(N, np.int64), "i64"))
    a.update(um.workspace(bk, N, Hq, Hkv, D, M, tail, 0, a["max_context"], a["tile_tokens"],
                          a["match_tile_slots"]))
    um.check_call(a, bk)
    return a


class Side:
    """The run: upstream's op, the device, the CSV; shape() measures one (Hkv, N, ctx) at every
    hit fraction."""

    def __init__(self, a, out):
        import torch
        import upstream_mac as um
        import macattn
        from macattn import torch_ops
        self.torch, self.um, self.macattn, self.ops = torch, um, macattn, torch_ops
        self.a, self.out = a, out
        um.check_signature(a.checkout)
        t = time.time()
        self.op = um.load_upstream(a.checkout)
        self.t_load = time.time() - t
        self.version = um.checkout_version(a.checkout)
        self.dev = torch.device("cuda", torch.cuda.current_device())
        self.bk = um.TorchBackend(self.dev)
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(a.seed)
        self.rng = np.random.default_rng(a.seed)
        self.stream = torch.cuda.Stream()
        D = a.head_dim
        self.tau_arg, self.tau_exact = um.threshold_argument(
            a.tau, D, np.float32(2.0 * D * (1.0 - a.tau) ** 2))
        self.read_gbps = self.streaming_read()

    def streaming_read(self):
        """GB/s of torch.sum over 4 GiB, median of 20 after 5."""
        buf = self.torch.ones(1 << 30, dtype=self.torch.float32, device=self.dev)
        return (4 << 30) / quantiles(time_replays(buf.sum, 5, 20))[0] / 1e6

    def header(self):
        a, torch = self.a, self.torch
        print(f"# device: {torch.cuda.get_device_name()}; streaming read {self.read_gbps:.1f} "
              f"GB/s (torch.sum over 4 GiB, median of 20); seed {a.seed}; lags uniform "
              f"1..{a.max_lag}; timing {a.timing}; tau {a.tau} (upstream threshold {self.tau_arg!r}, exact "
              f"{self.tau_exact}); upstream {self.version} loaded in {self.t_load:.1f} s; "
              f"macattn {self.macattn.git_commit}; torch {torch.__version__}", file=self.out,
              flush=True)
        print(",".join(COLUMNS), file=self.out, flush=True)

    def time_replays(self, replay, restore):
        return time_replays(replay, self.a.warmup, self.a.reps, restore, self.stream,
                            queued=self.a.timing == "queued")

    def row(self, kind, k3, f, hits, t, nbytes, impl):
        """One CSV row in mac-bench's columns; t = (median, p10, p90) ms."""
        s = self.cur
        gbps = nbytes / (t[0] * 1e-3) / 1e9
        pdl = "-" if kind == "upstream" else 1  # EngineConfig::dependent_launch's default
        vals = [kind, k3, "-", "nhd", 0, self.a.hq, s["hkv"], self.a.head_dim, s["N"],
                s["ctx"], f"{f:.2f}", hits, s["N"] * self.a.hq, f"{t[0]:.5f}", f"{t[1]:.5f}",
                f"{t[2]:.5f}", f"{nbytes:.0f}", f"{gbps:.1f}",
                f"{100 * gbps / self.read_gbps:.1f}", f"{s['full_ms'] / t[0]:.2f}", pdl, "-",
                impl]
        print(",".join(str(v) for v in vals), file=self.out, flush=True)

    def shape(self, hkv, N, ctx, over_budget):
        """Full attention, then every hit fraction, at one shape; returns (decision
        mismatches, stopped by the budget)."""
        torch, um, ops, a, dev, gen = self.torch, self.um, self.ops, self.a, self.dev, self.gen
        D, Hq, M, ps, bf = a.head_dim, a.hq, a.ring, a.page_size, torch.bfloat16
        m, ppr = ctx - 1, -(-ctx // ps)
        pool = (N * ppr, ps, hkv, D)  # row i's pages i·ppr .. i·ppr + ppr − 1, in order
        k_cache, v_cache = (torch.randn(pool, generator=gen, device=dev, dtype=bf)
                            for _ in range(2))
        pages = np.arange(N * ppr).reshape(N, ppr)  # the page table, also upstream's tokens'
        page_table = torch.from_numpy(pages).to(dev, torch.int32)
        kv_len = torch.full((N,), ctx, dtype=torch.int32, device=dev)
        slot = torch.arange(N, dtype=torch.int32, device=dev)
        st = ops.MacDecodeState(num_slots=N, num_q_heads=Hq, num_kv_heads=hkv, head_dim=D,
                                max_batch=N, max_context=ctx, ring=M, tau=a.tau, tail=a.tail,
                                gen_min=0, softmax_scale=1 / math.sqrt(D), device=dev)
        rings = (st.ring_q_pre, st.ring_o, st.ring_lse)
        # Ring contents as mac-bench's: q̃ N(0,1), o N(0, 0.1²), L N(8, 1).
        for t, scale, shift in zip(rings, (1.0, 0.1, 0.0), (0.0, 0.0, 8.0)):
            t.copy_(torch.randn(t.shape, generator=gen, device=dev) * scale + shift)
        st.mark_ready(range(N))
        q_post = torch.randn((N, Hq, D), generator=gen, device=dev, dtype=bf)
        q_pre = torch.empty_like(q_post)  # refilled per hit fraction
        saved = [t[:, m % M].clone() for t in rings]

        def restore():  # slot m mod M as before the step (both kernels write entry(m) there)
            for t, s in zip(rings, saved):
                t[:, m % M].copy_(s)

        # Ours: the engine's own graph over this shape's buffers.
        eng = ops.engine_object(st.engine)
        p = self.macattn.cuda.DecodeParams()
        ops._q_params(p, q_post, q_pre, dev)
        ops._kv_params(p, k_cache, v_cache, page_table, dev)
        ops._ring_params(p, *rings, dev)
        o_ours = torch.empty_like(q_post)
        lse_ours = torch.empty((N, Hq), dtype=torch.float32, device=dev)
        p.kv_len, p.slot = kv_len.data_ptr(), slot.data_ptr()
        p.ready, p.epoch_a, p.epoch_b = (st.ready.data_ptr(), st.epoch_a.data_ptr(),
                                         st.epoch_b.data_ptr())
        p.softmax_scale, p.tau, p.tail, p.sinks, p.gen_min = (st.softmax_scale, st.tau, st.tail,
                                                              0, 0)
        p.out, p.lse = o_ours.data_ptr(), lse_ours.data_ptr()
        replay_ours = lambda: eng.replay(self.stream.cuda_stream)  # noqa: E731
        torch.cuda.synchronize()
        eng.capture("full", p, self.stream.cuda_stream)
        tf = quantiles(sum((self.time_replays(replay_ours, lambda: None)
                            for _ in range(a.rounds)), []))
        self.cur = dict(hkv=hkv, N=N, ctx=ctx, full_ms=tf[0])
        self.row("full", "-", 0.0, 0, tf, N * ctx * hkv * D * 4 + N * Hq * D * 4,
                 "macattn graph")

        # Upstream's arguments over the same tensors.
        ua = upstream_arguments(um, self.bk, q_post, q_pre, k_cache, v_cache, rings,
                                pages, m, a.tail, self.tau_arg,
                                1 / math.sqrt(D), ctx)
        up_args = [ua[n] for n in um.UPSTREAM_ARGS]

        def call_upstream():
            self.op(*up_args)

        failed = 0
        for f in a.hit:
            if over_budget():
                return failed, True
            hit, lag = plan(self.rng, N, Hq, f, a.max_lag)
            q_pre.copy_(torch.randn((N, Hq, D), generator=gen, device=dev, dtype=bf))
            place_hits(q_pre, st.ring_q_pre, hit, lag, m)
            want = torch.from_numpy(hit)
            # Both kernels' decisions, once, against the plan; their outputs against each other.
            res = st.decode_step(q_post, q_pre, k_cache, v_cache, page_table, kv_len, slot,
                                 diagnostics=True)
            o_ref = res[0].clone()
            got_ours = res[2].flatten().bool().cpu()
            restore()
            call_upstream()
            torch.cuda.synchronize()
            got_up = ua["head_hit"].flatten().bool().cpu()
            diff = (ua["out"].float() - o_ref.float()).abs().max().item()
            restore()
            ok_ours, ok_up = torch.equal(got_ours, want), torch.equal(got_up, want)
            print(f"hkv={hkv} N={N} ctx={ctx} f={f}: hits planned {int(hit.sum())}, ours "
                  f"{int(got_ours.sum())} (as planned: {ok_ours}), upstream {int(got_up.sum())} "
                  f"(as planned: {ok_up}); max |o upstream - o ours| {diff:.3e}",
                  file=sys.stderr, flush=True)
            if not (ok_ours and ok_up):
                failed += 1
                continue
            torch.cuda.synchronize()
            eng.capture("mac", p, self.stream.cuda_stream)
            graph, impl = self.capture_upstream(call_upstream, restore)
            up_replay = graph.replay if graph is not None else call_upstream
            ours_ms, up_ms = [], []
            for r in range(a.rounds):  # alternate which kernel goes first
                blocks = [(ours_ms, replay_ours), (up_ms, up_replay)]
                for acc, rep in (blocks if r % 2 == 0 else blocks[::-1]):
                    acc += self.time_replays(rep, restore)
            restore()
            nb = mac_bytes(lag, N, Hq, hkv, D, m, M, a.tail)
            hits = int(hit.sum())
            self.row("mac", "fused", f, hits, quantiles(ours_ms), nb, "macattn graph")
            self.row("upstream", "-", f, hits, quantiles(up_ms), nb, f"{impl} {self.version}")
            del graph
        return failed, False

    def capture_upstream(self, call, restore):
        """(a torch CUDA graph of upstream's call, "upstream graph"), or (None, "upstream
        events") where capture fails (then each call is timed alone)."""
        torch, stream = self.torch, self.stream
        try:
            with torch.cuda.stream(stream):
                call()
                restore()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                call()
            torch.cuda.synchronize()
            return graph, "upstream graph"
        except Exception as ex:  # noqa: BLE001 (then time the calls alone)
            print(f"upstream capture failed ({type(ex).__name__}: {ex}); timing direct calls",
                  file=sys.stderr)
            torch.cuda.synchronize()
            return None, "upstream events"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", default=".carry/upstream",
                    help="root of a YJHMITWEB/MAC-Attention checkout (upstream's loader builds "
                         "the op from it)")
    add_grid_args(ap)
    add_mac_args(ap)
    ap.add_argument("--tau", type=float, default=0.45,
                    help="MAC's τ (upstream gets the threshold argument giving the same "
                         "distance threshold)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="blocks of --reps per kernel, alternating which goes first")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no new point after this many seconds (0: none); the CSV then "
                         "holds the points done")
    ap.add_argument("--csv", default="", help="CSV file (default stdout)")
    a = ap.parse_args()
    check_grid(a, "upstream_side.py")
    bad = [f for f in a.hit if not 0.0 <= f <= 1.0]
    if bad:
        sys.exit(f"upstream_side.py: --hit {bad[0]} outside [0, 1]")
    short = [c for c in a.ctx if c - 1 < a.ring]
    if short:
        sys.exit(f"upstream_side.py: --ctx {short[0]} must exceed --ring {a.ring} (every ring "
                 "slot then holds a candidate of both kernels)")
    if not 1 <= a.max_lag < a.ring:
        sys.exit(f"upstream_side.py: --max-lag {a.max_lag} outside 1..{a.ring - 1}")
    if a.rounds < 1:
        sys.exit(f"upstream_side.py: --rounds {a.rounds} must be >= 1")

    import torch
    import macattn
    if not (torch.cuda.is_available() and macattn.cuda.built_with_cuda()):
        print("upstream_side.py: needs torch with CUDA, a device and macattn built with the "
              "kernels", file=sys.stderr)
        return 77
    import upstream_mac as um
    if a.head_dim != um.HEAD_DIM or any(a.hq // h > um.MAX_GROUP for h in a.hkv):
        sys.exit(f"upstream_side.py: upstream's op takes D = {um.HEAD_DIM} and groups up to "
                 f"{um.MAX_GROUP} only")
    with csv_out(a.csv) as out:
        failed = run(a, out, torch)
    if failed:
        print(f"upstream_side.py: {failed} point(s) whose decisions differ from the plan",
              file=sys.stderr)
        return EXIT_DECISIONS
    return 0


def run(a, out, torch):
    """Every shape of the grid into `out` (within --budget-s); the number of points whose
    decisions differ from the plan."""
    side = Side(a, out)
    side.header()
    t0 = time.time()
    over = lambda: a.budget_s > 0 and time.time() - t0 > a.budget_s  # noqa: E731
    failed = 0
    for hkv in a.hkv:
        for N in a.batch:
            for ctx in a.ctx:
                stopped = over()
                if not stopped:
                    bad, stopped = side.shape(hkv, N, ctx, over)
                    failed += bad
                    torch.cuda.empty_cache()
                if stopped:
                    print(f"# stopped at the --budget-s {a.budget_s} s limit", file=out)
                    return failed
    return failed


if __name__ == "__main__":
    sys.exit(main())
