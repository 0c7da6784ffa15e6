#!/usr/bin/env python3
"""Certify upstream's fused decode kernel through mac-verify's file protocol.

The kernel is `mac_persistent_decode_bf16` of YJHMITWEB/MAC-Attention (the design this project
descends from), a torch extension that upstream's own loader
`mac_attention.integrations.sglang.bridge.load_mac_persistent_decode_extension` JIT-builds
from the user's checkout. Nothing of upstream is part of this project: the adapter puts
`CHECKOUT/attention/src` on sys.path, calls that loader, and maps mac-verify's per-step
inputs (docs/certify.md, "The file protocol") to the kernel's calling convention and its
results back (docs/upstream-certificate.md):

    upstream_mac.py caps > caps.txt                          # what the adapter declares
    mac-verify --export DIR --caps caps.txt                  # inputs of the applicable cases
    upstream_mac.py run DIR --checkout PATH                  # upstream's kernel, on the GPU
    mac-verify --grade DIR --out report.h5                   # report.h5 and report.md

`--kernel numpy-reference` runs the same mapping with, in place of upstream's op, this
project's numpy reference kernel (verification/python/numpy_reference_kernel.py) behind
upstream's calling convention, so export → adapter → grade is tested on the CPU (CTest
mac_verify_upstream_adapter). `upstream_mac.py load --checkout PATH` only builds/loads the
extension through upstream's loader (its build cache: $MAC_WORKSPACE_BASE/.cache).

Mapping, per step (ours → upstream's argument):
  q [B,Hq,D], q_tilde                → q_post, q_pre (BF16, contiguous)
  k_cache/v_cache NHD [P,ps,Hkv,D]  → k_buffer/v_buffer [P·ps, Hkv, D] (a view: token index
                                       page·ps + row)
  page_table [B,max_pages]          → req_to_token [B, max_pages·ps] int32 (token t of request
                                       b at page_table[b][t/ps]·ps + t%ps), req_ids = 0..B-1
  position m [B]                    → past_lens = m (int32); out_cache_loc = token of m (int64)
  ring_q/ring_o [B,Hq,M,D] (head)   → query_cache/attn_cache [B,M,Hq,D] (slot-major), back
                                       after the call; ring_lse [B,Hq,M] → lse_cache [B,M,Hq]
  ring_pos                          → none: upstream presumes slot s holds the position
                                       ≡ s (mod M) in [m−M, m); after a step the adapter
                                       records slot m mod M as holding m for ready requests
  ready [B]                         → mac_cache_ready / mac_cache_epoch / mac_request_epoch:
                                       of the not-ready requests, alternately ready = 0 and
                                       an epoch mismatch (both gates exercised)
  r, F, gen_min                     → semantic_pos_ahead, front_sink_tokens, gen_min_limit
  τ                                 → threshold: the float32 t nearest τ for which the
                                       distance threshold upstream derives, 2·D·(1−t)² in
                                       float32, equals ours; τ itself where no t does
                                       (threshold_argument); logged per case
  softmax scale                     → sm_scale
Results: out → o (BF16), optional_lse → lse (natural log), workspace head_hit → hit,
head_match_pos → match_pos; keys read are not exposed (not declared).
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
import threading
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import macv_files  # noqa: E402
import numpy_reference_kernel  # noqa: E402

# The op's positional parameters, in the order of its C++ signature (mac_decode_persistent.cu,
# `void mac_persistent_decode_bf16(`); check_signature() compares this with the checkout.
TENSOR_ARGS = ("q_post", "q_pre", "k_buffer", "v_buffer", "req_to_token", "req_ids", "past_lens",
               "out_cache_loc", "query_cache", "attn_cache", "lse_cache", "out", "optional_lse")
WORKSPACE_ARGS = (
    "match_dist", "match_pos", "match_slot", "head_hit", "head_match_slot", "head_match_pos",
    "head_prefix_end", "head_rect_start", "head_new_end", "group_rect_begin", "group_rect_end",
    "group_rect_tiles", "group_tail_begin", "group_tail_end", "group_tail_tiles", "group_mode",
    "complete_task_go", "complete_task_tile", "tail_task_go", "tail_task_tile",
    "hit_tail_task_ho", "hit_tail_task_tile", "task_counts", "partial_rect_o",
    "partial_rect_lse", "partial_rect_reduced_o", "partial_rect_reduced_lse", "partial_tail_o",
    "partial_tail_lse", "phase_cycles")
SCALAR_ARGS = (
    "max_context", "tile_tokens", "match_tile_slots", "semantic_pos_ahead", "front_sink_tokens",
    "gen_min_limit", "lookback_right", "candidate_mode", "threshold", "sm_scale", "debug_enabled",
    "bench_mode", "bench_hit_rate", "bench_hit_rate_std", "bench_skip_ratio",
    "bench_skip_ratio_std", "bench_match_lag_mean", "bench_match_lag_std", "bench_seed",
    "bench_miss_mask", "bench_layer_id")
GATE_ARGS = ("query_post_cache", "mac_cache_ready", "mac_cache_epoch", "mac_request_epoch")
UPSTREAM_ARGS = TENSOR_ARGS + WORKSPACE_ARGS + SCALAR_ARGS + GATE_ARGS

# Upstream's SGLang integration defaults (config.py MacSGLangConfig): what a deployment runs.
# Bench knobs off (bench_mode 0, bench_miss_mask -1), candidates the last M positions
# (candidate_mode 0, lookback_right 0), FP32 partial states (mac_persistent_partial_fp32).
INTEGRATION = dict(max_context=131072, tile_tokens=32, match_tile_slots=32, lookback_right=0,
                   candidate_mode=0, debug_enabled=0, bench_mode=0, bench_hit_rate=1.0,
                   bench_hit_rate_std=0.0, bench_skip_ratio=-1.0, bench_skip_ratio_std=0.0,
                   bench_match_lag_mean=64.0, bench_match_lag_std=0.0, bench_seed=1,
                   bench_miss_mask=-1, bench_layer_id=0)
PHASE_CYCLES = 14  # the integration's phase_cycles length (the op needs at least 6)

# Limits of the op (mac_decode_persistent.cu: kHeadDim, kMaxWarps); check_signature() reads them.
HEAD_DIM = 128
MAX_GROUP = 8

CSRC = os.path.join("attention", "src", "mac_attention", "integrations", "sglang", "csrc",
                    "mac_decode_persistent.cu")
EXIT_CONTEXT_LOST = 4  # a CUDA error or a hang ended the process: rerun with --resume


class NotSupported(ValueError):
    """A case outside what the adapter declares (the export used other capabilities)."""


def caps_text(kernel, version, max_context):
    """The capabilities the adapter declares, as mac-verify's --caps text (certify.md).
    Page sizes: any (tables are per token); KV layout NHD (a view of the pool); the ring is
    transposed to upstream's slot-major layout and back; sinks supported; no keys read."""
    name = ("YJHMITWEB/MAC-Attention mac_persistent_decode_bf16" if kernel == "upstream"
            else "upstream calling convention, numpy reference")
    return "\n".join([
        f"name = {name}",
        f"version = {version}",
        f"device = {2 if kernel == 'upstream' else 1}",
        f"head_dims = {HEAD_DIM}",
        "gqa_ratios = " + ", ".join(str(g) for g in range(1, MAX_GROUP + 1)),
        "page_sizes = any",
        "kv_layouts = nhd",
        "ring_layouts = head",
        "sinks = 1",
        f"max_context = {max_context}",
        "out_dtype = bf16",
        "ring_o_dtype = bf16",
        "lse_base2 = 0",
        "reports_keys_read = 0",
        "writes_ring = 1",
        "graph_capturable = 0",
    ]) + "\n"


# -- the threshold ---------------------------------------------------------------------------

def upstream_threshold_distance(threshold, head_dim):
    """The squared-L2 threshold the op derives on the host from its `threshold` argument:
    t = (float)threshold; thr = 2.0f·(float)D·(1−t)·(1−t), each product rounded to float32
    left to right (x86-64 SSE, no contraction). A head hits iff its distance < thr."""
    t = np.float32(threshold)
    a = np.float32(1.0) - t
    return np.float32(np.float32(np.float32(2.0) * np.float32(head_dim)) * a) * a


def threshold_argument(tau, head_dim, thr32):
    """(t, exact): the float32 t nearest τ with upstream_threshold_distance(t, D) == thr32 (ours:
    2·D·(1−τ)² in FP64 rounded once to float32) and exact = True; when no float32 t gives
    thr32 (near τ = 0.2 one ulp of t moves 1−t, and so the threshold, by more than one ulp of
    the threshold), τ itself, as a deployment passes it, and exact = False. The map is
    non-increasing in t on [0, 1], so the t giving thr32 form one run of bit patterns."""
    thr32 = np.float32(thr32)
    bits = lambda t: int(np.float32(t).view(np.uint32))  # noqa: E731 (t ≥ 0: order-preserving)
    at = lambda b: np.uint32(b).view(np.float32)  # noqa: E731
    thr = lambda b: upstream_threshold_distance(at(b), head_dim)  # noqa: E731
    lo, hi = -1, bits(np.float32(1.0))  # thr(hi) = 0 ≤ thr32; lo: "thr(-1) = +inf"
    while hi - lo > 1:  # first b ≥ 0 with thr(b) ≤ thr32
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if thr(mid) <= thr32 else (mid, hi)
    if thr(hi) != thr32:
        return float(tau), False
    last = hi
    while thr(last + 1) == thr32:
        last += 1
    return float(at(min(max(bits(tau), hi), last))), True


# -- the op's contract ------------------------------------------------------------------------

def check_signature(checkout):
    """Compares UPSTREAM_ARGS and the limits this adapter declares with the checkout's op
    source; raises with the difference (a changed op is then not mapped silently)."""
    path = os.path.join(checkout, CSRC)
    with open(path, encoding="utf-8") as f:
        src = f.read()
    sig = re.search(r"void\s+mac_persistent_decode_bf16\s*\(([^)]*)\)\s*\{", src)
    if not sig:
        raise RuntimeError(f"{path}: no definition of mac_persistent_decode_bf16")
    names = tuple(re.findall(r"(\w+)\s*(?:,|$)", sig.group(1).strip()))
    if names != UPSTREAM_ARGS:
        diff = [f"#{i}: {a} vs adapter {b}" for i, (a, b) in enumerate(zip(names, UPSTREAM_ARGS))
                if a != b]
        raise RuntimeError(f"{path}: the op's {len(names)} parameters differ from the adapter's "
                           f"{len(UPSTREAM_ARGS)}: {'; '.join(diff[:5]) or 'count'}")
    for const, want in (("kHeadDim", HEAD_DIM), ("kMaxWarps", MAX_GROUP)):
        m = re.search(rf"constexpr\s+int\s+{const}\s*=\s*(\d+)\s*;", src)
        if not m or int(m.group(1)) != want:
            raise RuntimeError(f"{path}: {const} is {m.group(1) if m else 'missing'}, the adapter "
                               f"declares {want}")
    if "threshold_distance = 2.0f * (float)D * (1.0f - p.threshold) * (1.0f - p.threshold)" \
            not in src:
        raise RuntimeError(f"{path}: the threshold formula is not the one threshold_argument() "
                           "inverts")


def checkout_version(checkout):
    """The checkout's git commit when it is the top of a git work tree, else 'src-' and the
    first 12 hex digits of the op source's SHA-256 (a copy without history, possibly inside
    another repository, whose commit would not be upstream's)."""
    try:
        out = subprocess.run(["git", "-C", checkout, "rev-parse", "--show-toplevel",
                              "--short=12", "HEAD"],
                             capture_output=True, text=True, check=True, timeout=20)
        top, commit = out.stdout.split()
        if os.path.realpath(top) == os.path.realpath(checkout):
            return "git-" + commit
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    with open(os.path.join(checkout, CSRC), "rb") as f:
        return "src-" + hashlib.sha256(f.read()).hexdigest()[:12]


def load_upstream(checkout, verbose=False):
    """Upstream's op, from its own loader (JIT build on first use, cached after)."""
    src = os.path.join(os.path.abspath(checkout), "attention", "src")
    if not os.path.isdir(os.path.join(src, "mac_attention")):
        raise SystemExit(f"--checkout {checkout}: no attention/src/mac_attention in it "
                         "(give the root of a YJHMITWEB/MAC-Attention checkout)")
    sys.path.insert(0, src)
    from mac_attention.integrations.sglang.bridge import load_mac_persistent_decode_extension
    return load_mac_persistent_decode_extension(verbose).mac_persistent_decode_bf16


# -- array backends: numpy (the CPU test) and torch (the GPU run) ----------------------------

class NumpyBackend:
    """BF16 tensors are float32 arrays holding BF16 values (macv_files' numpy convention)."""
    types = {"bf16": np.float32, "f32": np.float32, "i32": np.int32, "i64": np.int64,
             "u8": np.uint8}

    def empty(self, shape, dtype):
        return np.empty(shape, self.types[dtype])

    def from_host(self, a, dtype):
        return np.ascontiguousarray(a, dtype=self.types[dtype]).copy()

    def to_host(self, a):
        return np.asarray(a)

    def tokens(self, cache):
        return cache.reshape(-1, cache.shape[-2], cache.shape[-1])

    def slot_major(self, ring):
        """[B, Hq, M(, D)] → a contiguous [B, M, Hq(, D)] copy."""
        return np.ascontiguousarray(np.swapaxes(ring, 1, 2))

    def head_major_into(self, dst, src):
        dst[...] = np.swapaxes(src, 1, 2)

    def assign(self, dst, src):
        dst[...] = np.asarray(src, dtype=dst.dtype)

    def no_tensor(self):
        return np.empty(0, np.float32)

    def sync(self):
        pass

    def has_dtype(self, a, dtype):
        return a.dtype == np.dtype(self.types[dtype])

    @staticmethod
    def is_contiguous(a):
        return a.flags["C_CONTIGUOUS"]


class TorchBackend:
    def __init__(self, device):
        import torch  # only the GPU run needs it
        self.t = torch
        self.device = torch.device(device)
        self.types = {"bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32,
                      "i64": torch.int64, "u8": torch.uint8}

    def empty(self, shape, dtype):
        return self.t.empty(shape, dtype=self.types[dtype], device=self.device)

    def from_host(self, a, dtype):
        return self.t.from_numpy(np.ascontiguousarray(a)).to(self.device, self.types[dtype])

    def to_host(self, a):
        return a.detach().cpu().numpy()

    def tokens(self, cache):
        return cache.view(-1, cache.shape[-2], cache.shape[-1])

    def slot_major(self, ring):
        return ring.transpose(1, 2).contiguous()

    def head_major_into(self, dst, src):
        dst.copy_(src.transpose(1, 2))

    def assign(self, dst, src):
        dst.copy_(src.to(dst.dtype))

    def no_tensor(self):
        return self.t.empty(0)

    def sync(self):
        self.t.cuda.synchronize(self.device)

    def has_dtype(self, a, dtype):
        return a.dtype == self.types[dtype]

    @staticmethod
    def is_contiguous(a):
        return a.is_contiguous()


def check_call(a, bk):
    """The op's host-side requirements (its TORCH_CHECKs) on the arguments the adapter made,
    with messages naming the argument: shapes, dtypes and contiguity of the tensors and the
    workspace sizes. The numpy kernel cannot tell BF16 from FP32 (both float32)."""
    def need(ok, what):
        if not ok:
            raise ValueError(f"upstream call: {what}")

    for name in TENSOR_ARGS + WORKSPACE_ARGS:
        need(bk.is_contiguous(a[name]), f"{name} is not contiguous")
    q = a["q_post"]
    N, Hq, D = q.shape
    Hkv = a["k_buffer"].shape[1]
    G = Hq // Hkv
    need(D == HEAD_DIM, f"head dim {D}, the op supports {HEAD_DIM} only")
    need(Hq % Hkv == 0 and 0 < G <= MAX_GROUP, f"GQA group {Hq}/{Hkv} outside 1..{MAX_GROUP}")
    need(a["q_pre"].shape == q.shape and a["out"].shape == q.shape, "q_pre/out shape")
    need(a["k_buffer"].ndim == 3 and a["v_buffer"].shape == a["k_buffer"].shape, "k/v buffers")
    R, M = a["query_cache"].shape[:2]
    need(a["query_cache"].shape == (R, M, Hq, D) and a["attn_cache"].shape == (R, M, Hq, D),
         f"query/attn cache shape {tuple(a['query_cache'].shape)}, want [R, M, {Hq}, {D}]")
    need(tuple(a["lse_cache"].shape) == (R, M, Hq), "lse_cache shape")
    need(tuple(a["optional_lse"].shape) == (N, Hq), "optional_lse shape")
    wanted = dict.fromkeys(("q_post", "q_pre", "k_buffer", "v_buffer", "query_cache",
                            "attn_cache", "out"), "bf16")
    wanted.update(req_to_token="i32", req_ids="i32", past_lens="i32", out_cache_loc="i64",
                  lse_cache="f32", optional_lse="f32", mac_cache_ready="u8",
                  mac_cache_epoch="i64", mac_request_epoch="i64")
    for name, dtype in wanted.items():
        need(bk.has_dtype(a[name], dtype), f"{name} has dtype {a[name].dtype}, want {dtype}")
    tile, ctx, r = a["tile_tokens"], a["max_context"], a["semantic_pos_ahead"]
    need(a["match_dist"].shape[2] >= -(-M // a["match_tile_slots"]), "match workspace too small")
    tc = a["partial_rect_lse"].shape[2]
    need(tc >= -(-ctx // tile), "rect workspace too small")
    need(a["partial_rect_reduced_lse"].shape[2] >= -(-ctx // (tile * 32)), "reduced rect workspace")
    need(a["partial_tail_lse"].shape[2] >= -(-r // tile), "tail workspace too small")
    need(a["complete_task_go"].shape[0] >= N * Hq * tc, "complete task workspace too small")
    need(a["phase_cycles"].shape[0] >= 6 and a["task_counts"].shape[0] >= 9, "counters")
    need(int(bk.to_host(a["past_lens"]).max()) + 1 <= ctx,
         f"a context above max_context {ctx} (the integration routes it elsewhere)")


def workspace(bk, N, Hq, Hkv, D, M, r, F, max_context, tile, match_tile):
    """The op's scratch tensors, sized as upstream's integration sizes them
    (flashinfer_hooks._ensure_persistent_workspace), FP32 partial states."""
    G = Hq // Hkv
    cdiv = lambda a, b: -(-a // b)  # noqa: E731
    t_match = cdiv(M, match_tile)
    t_ctx = cdiv(max_context, tile) + cdiv(max(F, 0), tile)
    t_red = cdiv(t_ctx, 32)
    t_tail = max(1, cdiv(max(r, 1), tile))
    i32 = "i32"
    shapes = ([((N, Hq, t_match), "f32"), ((N, Hq, t_match), i32), ((N, Hq, t_match), i32)]
              + [((N, Hq), i32)] * 6 + [((N, Hkv), i32)] * 7
              + [((N * Hq * t_ctx,), i32)] * 2 + [((N * Hkv * t_tail,), i32)] * 2
              + [((N * Hq * t_tail,), i32)] * 2 + [((9,), i32)]
              + [((N, Hkv, t_ctx, G, D), "f32"), ((N, Hkv, t_ctx, G), "f32"),
                 ((N, Hkv, t_red, G, D), "f32"), ((N, Hkv, t_red, G), "f32"),
                 ((N, Hkv, t_tail, G, D), "f32"), ((N, Hkv, t_tail, G), "f32"),
                 ((PHASE_CYCLES,), "i64")])
    return {name: bk.empty(shape, dt) for name, (shape, dt) in zip(WORKSPACE_ARGS, shapes)}


# -- one case ----------------------------------------------------------------------------------

class CaseMapping:
    """A case's constant arguments and the per-step mapping to and from the op."""

    def __init__(self, case, bk, max_context, fault=None):
        if case.head_dim != HEAD_DIM:
            raise NotSupported(f"case {case.id}: head dim {case.head_dim}, supported {HEAD_DIM}")
        G = case.num_q_heads // case.num_kv_heads
        if G > MAX_GROUP:
            raise NotSupported(f"case {case.id}: GQA ratio {G} above {MAX_GROUP}")
        if case.kv_layout != "NHD" or case.out_dtype != "bf16" or case.ring_o_dtype != "bf16" \
                or case.lse_base2 or not case.writes_ring:
            raise NotSupported(f"case {case.id}: exported for other capabilities (kv layout "
                               f"{case.kv_layout}, out {case.out_dtype}, ring o "
                               f"{case.ring_o_dtype}, lse_base2 {case.lse_base2})")
        self.case, self.bk, self.fault = case, bk, fault
        self.max_context = max(max_context, case.max_context)
        self.tau_arg, self.tau_exact = threshold_argument(case.tau, case.head_dim, case.threshold)
        self.thr_upstream = float(upstream_threshold_distance(self.tau_arg, case.head_dim))
        B = case.batch
        self.ws = workspace(bk, B, case.num_q_heads, case.num_kv_heads, case.head_dim, case.ring,
                            case.tail, case.sinks, self.max_context, INTEGRATION["tile_tokens"],
                            INTEGRATION["match_tile_slots"])
        self.req_to_token = None
        self.table = None
        self.hits = 0
        # Readiness: the k-th not-ready request is gated by ready = 0 (k even) or by its
        # cache epoch differing from the request's (k odd), so both gates are exercised.
        ready = np.asarray(case.arrays["ready"]).astype(bool)
        k = np.cumsum(~ready) - 1
        by_epoch = ~ready & (k % 2 == 1)
        self.ready = ready
        self.gate_ready = bk.from_host((ready | by_epoch).astype(np.uint8), "u8")
        self.gate_cache_epoch = bk.from_host(np.arange(B, dtype=np.int64) + 1, "i64")
        self.gate_request_epoch = bk.from_host(np.arange(B, dtype=np.int64) + 1 + by_epoch, "i64")

    def _tables(self, page_table):
        """req_to_token [B, pages·ps] (int32) from the page table, on the host and the device."""
        ps = self.case.page_size
        pt = np.asarray(page_table, dtype=np.int64)
        t = np.arange(pt.shape[1] * ps)
        pages = pt[:, t // ps]
        table = np.where(pages >= 0, pages * ps + t % ps, 0)
        if table.max() >= 2 ** 31:
            raise NotSupported(f"case {self.case.id}: token index {table.max()} beyond int32")
        self.table = table.astype(np.int32)
        self.req_to_token = self.bk.from_host(self.table, "i32")

    def arguments(self, st):
        """The op's arguments for step st (a macv_files.Step), by parameter name."""
        case, bk = self.case, self.bk
        if self.req_to_token is None:
            self._tables(bk.to_host(st.page_table))
        m = bk.to_host(st.position).astype(np.int64)
        B = case.batch
        current = self.table[np.arange(B), m]
        if self.fault == "stale-current-token":  # planted mapping fault (tests only)
            current = self.table[np.arange(B), np.maximum(m - 1, 0)]
        a = dict(INTEGRATION)
        a.update(
            q_post=st.q, q_pre=st.q_tilde,
            k_buffer=bk.tokens(st.k_cache), v_buffer=bk.tokens(st.v_cache),
            req_to_token=self.req_to_token, req_ids=bk.from_host(np.arange(B), "i32"),
            past_lens=bk.from_host(m, "i32"), out_cache_loc=bk.from_host(current, "i64"),
            query_cache=bk.slot_major(st.ring_q), attn_cache=bk.slot_major(st.ring_o),
            lse_cache=bk.slot_major(st.ring_lse),
            out=bk.empty(tuple(st.q.shape), "bf16"),
            optional_lse=bk.empty((B, case.num_q_heads), "f32"),
            max_context=self.max_context, semantic_pos_ahead=case.tail,
            front_sink_tokens=case.sinks, gen_min_limit=case.gen_min, threshold=self.tau_arg,
            sm_scale=case.softmax_scale, query_post_cache=bk.no_tensor(),
            mac_cache_ready=self.gate_ready, mac_cache_epoch=self.gate_cache_epoch,
            mac_request_epoch=self.gate_request_epoch)
        a.update(self.ws)
        return a, m

    def results(self, a, m, st):
        """Writes the op's results into the step: outputs, and the ring back in our layout;
        slot m mod M of each ready request now holds m (upstream's implicit positions)."""
        bk = self.bk
        bk.assign(st.o, a["out"])
        bk.assign(st.lse, a["optional_lse"])
        bk.assign(st.hit, a["head_hit"])
        bk.assign(st.match_pos, a["head_match_pos"])
        bk.head_major_into(st.ring_q, a["query_cache"])
        bk.head_major_into(st.ring_o, a["attn_cache"])
        bk.head_major_into(st.ring_lse, a["lse_cache"])
        M = self.case.ring
        for b in np.flatnonzero(self.ready):
            st.ring_pos[int(b), :, int(m[b] % M)] = int(m[b])
        self.hits += int(bk.to_host(a["head_hit"]).sum())

    def step(self, kernel, st):
        a, m = self.arguments(st)
        check_call(a, self.bk)
        kernel(*[a[name] for name in UPSTREAM_ARGS])
        self.bk.sync()
        self.results(a, m, st)


# -- the numpy kernel behind upstream's calling convention -------------------------------------

def bf16_round(x):
    """x rounded to BF16 (nearest even), as float32 values: what a BF16 store keeps."""
    return macv_files.bf16_to_f32(macv_files.f32_to_bf16(np.asarray(x, np.float32)))


def ring_slot_position(past_len, M, slot):
    """The position upstream presumes slot `slot` holds at step past_len: the one ≡ slot
    (mod M) among the candidates [past_len − M, past_len) once past_len ≥ M, else slot."""
    if past_len < M:
        return slot
    return past_len - M + (slot - past_len % M) % M


def reference_op(*args):
    """The op's contract as upstream documents it (decode step of semantics §3 over its
    buffers), computed by numpy_reference_kernel.step(): the arguments are read back into our
    layout the way the op reads them (tokens through req_to_token / out_cache_loc, slot
    positions by ring_slot_position, readiness from the ready flag and the epochs), the
    reference runs, and what the op writes is written (BF16 out and attn_cache, the ring rows
    of ready requests, head_hit / head_match_pos / head_match_slot)."""
    a = dict(zip(UPSTREAM_ARGS, args))
    check_call(a, NumpyBackend())
    N, Hq, D = a["q_post"].shape
    Hkv = a["k_buffer"].shape[1]
    M = a["query_cache"].shape[1]
    reqs, past = a["req_ids"].astype(np.int64), a["past_lens"].astype(np.int64)
    ready = np.array([a["mac_cache_ready"][q] != 0 and
                      a["mac_cache_epoch"][q] == a["mac_request_epoch"][q] for q in reqs])
    width = int(past.max()) + 1
    table = np.zeros((N, width), np.int64)
    ring_pos = np.full((N, Hq, M), -1, np.int64)
    for n in range(N):
        table[n, :past[n]] = a["req_to_token"][reqs[n], :past[n]]
        table[n, past[n]] = a["out_cache_loc"][n]
        for s in range(M):
            p = ring_slot_position(int(past[n]), M, s)
            ring_pos[n, :, s] = p if max(0, past[n] - M) <= p < past[n] else -1
    st = types.SimpleNamespace(
        position=past, ready=ready.astype(np.uint8), q=a["q_post"], q_tilde=a["q_pre"],
        k_cache=a["k_buffer"][:, None], v_cache=a["v_buffer"][:, None], page_table=table,
        ring_q=np.swapaxes(a["query_cache"][reqs], 1, 2).copy(),
        ring_o=np.swapaxes(a["attn_cache"][reqs], 1, 2).copy(),
        ring_lse=np.swapaxes(a["lse_cache"][reqs], 1, 2).copy(), ring_pos=ring_pos,
        o=np.zeros((N, Hq, D)), lse=np.zeros((N, Hq)), hit=np.zeros((N, Hq), np.uint8),
        match_pos=np.zeros((N, Hq), np.int64), keys_read=np.zeros((N, Hq), np.int64))
    case = types.SimpleNamespace(
        ring=M, tail=int(a["semantic_pos_ahead"]), sinks=int(a["front_sink_tokens"]),
        num_q_heads=Hq, num_kv_heads=Hkv, batch=N, page_size=1, kv_layout="NHD",
        gen_min=int(a["gen_min_limit"]), head_dim=D, softmax_scale=float(a["sm_scale"]),
        threshold=upstream_threshold_distance(a["threshold"], D))
    with np.errstate(invalid="ignore"):
        numpy_reference_kernel.step(case, st)
    for n in np.flatnonzero(ready):
        s = int(past[n] % M)
        a["query_cache"][reqs[n], s] = st.ring_q[n, :, s]
        a["attn_cache"][reqs[n], s] = bf16_round(st.ring_o[n, :, s])
        a["lse_cache"][reqs[n], s] = st.ring_lse[n, :, s]
    a["out"][...] = bf16_round(st.o)
    a["optional_lse"][...] = st.lse
    a["head_hit"][...] = st.hit
    a["head_match_pos"][...] = st.match_pos
    a["head_match_slot"][...] = np.where(st.match_pos >= 0, st.match_pos % M, -1)


# -- the run -----------------------------------------------------------------------------------

def read_log(path):
    """Case ids already in the log (done or failed): skipped by --resume."""
    done = set()
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line[:1].isdigit():
                    done.add(int(line.split("\t", 1)[0]))
    return done


LOG_HEADER = ("case\tfamily\tstatus\tseconds\tsteps\thits\ttau\ttau_arg\tthr_ours\t"
              "thr_upstream\texact\tmessage\n")


def context_lost(bk):
    """Whether the CUDA context survived an error (a sticky error fails every later call)."""
    if isinstance(bk, NumpyBackend):
        return False
    try:
        bk.sync()
        bk.empty((1,), "f32").zero_()
        bk.sync()
        return False
    except RuntimeError:
        return True


def hung(log, cid, family, seconds):
    """The watchdog's end of a case that did not finish: logged, then the process exits."""
    log.write(f"{cid}\t{family}\terror\t{seconds}\t\t\t\t\t\t\t\tno result after {seconds} s "
              "(process ended; --resume continues after it)\n")
    log.flush()
    print(f"case {cid}: no result after {seconds} s", file=sys.stderr, flush=True)
    os._exit(EXIT_CONTEXT_LOST)


def run(args):
    export = macv_files.Export(args.export_dir)
    outputs = args.outputs or export.outputs_dir
    log_path = args.log or os.path.join(args.export_dir, "upstream_adapter.tsv")
    skip = read_log(log_path) if args.resume else set()
    if args.kernel == "upstream":
        if not args.checkout:
            raise SystemExit("--kernel upstream needs --checkout PATH (a YJHMITWEB/MAC-Attention "
                             "checkout)")
        check_signature(args.checkout)
        kernel, version = load_upstream(args.checkout), checkout_version(args.checkout)
        bk, framework, device = TorchBackend(args.device), "torch", args.device
        name = "YJHMITWEB/MAC-Attention mac_persistent_decode_bf16"
    else:
        kernel, version = reference_op, "numpy"
        bk, framework, device = NumpyBackend(), "numpy", "cpu"
        name = "upstream calling convention, numpy reference"
    ids = [i for i in export.case_ids if i not in skip]
    if args.cases:
        wanted = set(parse_ids(args.cases))
        ids = [i for i in ids if i in wanted]
    new_log = not os.path.exists(log_path) or not args.resume
    with open(log_path, "w" if new_log else "a", encoding="utf-8") as log:
        if new_log:
            log.write(LOG_HEADER)
        failed = 0
        for n, cid in enumerate(ids):
            case = export.case(cid)
            t0 = time.time()
            status, message, mapping = "done", "", None
            print(f"[{n + 1}/{len(ids)}] case {cid} {case.family} ...", flush=True)
            # A hung op (a cooperative kernel that never returns) cannot be interrupted from
            # Python: the watchdog logs the case and ends the process, freeing the GPU.
            watchdog = threading.Timer(args.case_timeout, hung, (log, cid, case.family,
                                                                  args.case_timeout))
            watchdog.daemon = True
            if args.case_timeout > 0:
                watchdog.start()
            try:
                mapping = CaseMapping(case, bk, args.max_context, args.plant_fault)
                for st in case.steps(framework=framework, device=device):
                    mapping.step(kernel, st)
                case.write_outputs(outputs, name=name, version=version)
            except Exception as e:  # noqa: BLE001 (any failure is this case's ERROR)
                status, message = "error", f"{type(e).__name__}: {' '.join(str(e).split())}"[:400]
                failed += 1
            watchdog.cancel()
            row = [cid, case.family, status, f"{time.time() - t0:.2f}", case.num_steps,
                   mapping.hits if mapping else "", case.tau,
                   repr(mapping.tau_arg) if mapping else "", float(case.threshold),
                   mapping.thr_upstream if mapping else "",
                   int(mapping.tau_exact) if mapping else "", message]
            log.write("\t".join(str(x) for x in row) + "\n")
            log.flush()
            print(f"    {status} in {time.time() - t0:.1f} s {message}", flush=True)
            if status == "error" and context_lost(bk):
                print("the CUDA context is lost; rerun with --resume for the remaining cases",
                      file=sys.stderr)
                return EXIT_CONTEXT_LOST
    print(f"{len(ids) - failed} case(s) written to {outputs}, {failed} failed (log {log_path})")
    return 0


def parse_ids(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("caps", help="print the declared capabilities (mac-verify --caps)")
    c.add_argument("--kernel", choices=("upstream", "numpy-reference"), default="upstream")
    c.add_argument("--checkout", help="the checkout (its version goes into the caps)")
    c.add_argument("--max-context", type=int, default=INTEGRATION["max_context"])
    ld = sub.add_parser("load", help="build/load the op through upstream's loader, then exit")
    ld.add_argument("--checkout", required=True)
    r = sub.add_parser("run", help="run the kernel over an export, write its outputs")
    r.add_argument("export_dir")
    r.add_argument("--kernel", choices=("upstream", "numpy-reference"), default="upstream")
    r.add_argument("--checkout", help="root of a YJHMITWEB/MAC-Attention checkout")
    r.add_argument("--outputs", help="outputs folder (default EXPORT_DIR/outputs)")
    r.add_argument("--device", default="cuda")
    r.add_argument("--cases", help="only these case ids (e.g. 3,7,100-110)")
    r.add_argument("--max-context", type=int, default=INTEGRATION["max_context"],
                   help="the op's max_context (workspace size; default the integration's)")
    r.add_argument("--log", help="per-case log (default EXPORT_DIR/upstream_adapter.tsv)")
    r.add_argument("--resume", action="store_true", help="skip the cases already in the log")
    r.add_argument("--case-timeout", type=float, default=180,
                   help="seconds a case may take before the process logs it and exits 4 "
                        "(0 = none)")
    r.add_argument("--plant-fault", choices=("stale-current-token",),
                   help="tests: map the current token to the previous one's location")
    args = p.parse_args(argv[1:])
    if args.command == "caps":
        version = "numpy" if args.kernel == "numpy-reference" else (
            checkout_version(args.checkout) if args.checkout else "unknown")
        if args.checkout:
            check_signature(args.checkout)
        sys.stdout.write(caps_text(args.kernel, version, args.max_context))
        return 0
    if args.command == "load":
        check_signature(args.checkout)
        t0 = time.time()
        load_upstream(args.checkout, verbose=True)
        print(f"loaded mac_persistent_decode_bf16 in {time.time() - t0:.1f} s")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
