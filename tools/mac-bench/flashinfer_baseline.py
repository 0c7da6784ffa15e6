#!/usr/bin/env python3
"""Times FlashInfer's paged decode (BatchDecodeWithPagedKVCacheWrapper, use_tensor_cores=True:
the FA2 batch-prefill kernel FlashInfer uses for grouped-query decode) on the decode shapes of
mac-bench: one query token per request, q [B, Hq, D] bf16, K/V pools [pages, 16, Hkv, D] bf16
(NHD, page size 16), each request's pages one contiguous run (indices 0.. in order), every
page full except possibly the last. The wrapper is planned once per shape outside the graph
(plan() cannot be captured) and its run() captured in a CUDA graph; timing as
sdpa_baseline.py: median, p10, p90 of --reps individually timed replays after --warmup.
Bytes = K + V + q + out. CSV on stdout (or --csv): sdpa_baseline.py's columns plus the
FlashInfer version and the backend that ran.

Before the grid, one point (--check-*) is checked against torch SDPA in FP64 (math backend,
enable_gqa) on the same BF16 inputs, with the error bound derived in check_point(); the
script exits 3 if it is exceeded, 4 if FlashInfer cannot be imported or built (the reason is
printed and written to the CSV as a comment)."""
import argparse
import math
import sys
import traceback

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench_common import add_grid_args, check_grid, csv_out, quantiles, time_replays

EXIT_CHECK = 3
EXIT_UNAVAILABLE = 4
BACKEND = "fa2-tensor-cores"  # what use_tensor_cores=True with backend="auto" plans (decode.py)


def page_tables(b, ctx, page_size, dev):
    """indptr [b+1], indices [b·P], last_page_len [b] (int32) for b rows of ctx tokens each,
    row i owning pages [i·P, (i+1)·P), P = ceil(ctx / page_size)."""
    P = -(-ctx // page_size)
    indptr = torch.arange(0, (b + 1) * P, P, dtype=torch.int32, device=dev)
    indices = torch.arange(b * P, dtype=torch.int32, device=dev)
    last = torch.full((b,), ctx - (P - 1) * page_size, dtype=torch.int32, device=dev)
    return indptr, indices, last, P


class Decode:
    """One shape's planned wrapper with CUDA-graph buffers, and a graph of its run()."""

    def __init__(self, flashinfer, workspace, q, k, v, ctx, page_size, hq, hkv, d):
        dev = q.device
        b = q.shape[0]
        indptr, indices, last, _ = page_tables(b, ctx, page_size, dev)
        self.q, self.k, self.v = q, k, v
        self.out = torch.empty_like(q)
        self.w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace, "NHD", use_cuda_graph=True, use_tensor_cores=True,
            paged_kv_indptr_buffer=torch.empty_like(indptr),
            paged_kv_indices_buffer=torch.empty_like(indices),
            paged_kv_last_page_len_buffer=torch.empty_like(last))
        self.w.plan(indptr, indices, last, hq, hkv, d, page_size, q_data_type=torch.bfloat16,
                    kv_data_type=torch.bfloat16, sm_scale=1.0 / math.sqrt(d))
        # Warm-up on a side stream (first use loads the module; nothing may allocate in capture).
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.run()
        torch.cuda.current_stream().wait_stream(s)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.run()

    def run(self):
        self.w.run(self.q, (self.k, self.v), out=self.out)


def check_point(flashinfer, workspace, a, hkv, b, ctx, out):
    """FlashInfer's graph-replayed output against torch SDPA in FP64 on the same BF16 inputs.

    Error bound per output element o_i = Σ_j p_j v_ji (p the softmax weights): FlashInfer's
    FA2 kernel rounds the weights to BF16 before the P·V product (relative error ≤ 2^-8 each,
    so |Δ| ≤ 2^-8 · Σ_j p_j |v_ji|) and rounds o to BF16 once (≤ 2^-8 · |o_i|, rounding to
    nearest with an 8-bit significand); its FP32 scores, online-softmax rescaling and split-KV
    merges add errors of order 2^-20 relative, covered by the 2^-12 absolute floor.
    Returns the largest error / bound (≤ 1 passes) and the largest |FlashInfer − SDPA cuDNN
    BF16| (reported only)."""
    dev = torch.device("cuda")
    D, hq, ps = a.head_dim, a.hq, a.page_size
    P = -(-ctx // ps)
    q = torch.randn(b, hq, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(b * P, ps, hkv, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(b * P, ps, hkv, D, device=dev, dtype=torch.bfloat16)
    dec = Decode(flashinfer, workspace, q, k, v, ctx, ps, hq, hkv, D)
    dec.g.replay()
    torch.cuda.synchronize()
    got = dec.out.double()
    # Dense [b, Hkv, ctx, D] views of the paged pools (row i's pages are i·P .. i·P+P-1).
    kd = k.view(b, P * ps, hkv, D)[:, :ctx].transpose(1, 2)
    vd = v.view(b, P * ps, hkv, D)[:, :ctx].transpose(1, 2)
    q4 = q.unsqueeze(2)
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q4.double(), kd.double(), vd.double(),
                                             enable_gqa=True).squeeze(2)
        mass = F.scaled_dot_product_attention(q4.double(), kd.double(), vd.double().abs(),
                                              enable_gqa=True).squeeze(2)
    bound = 2.0 ** -8 * (ref.abs() + mass) + 2.0 ** -12
    ratio = ((got - ref).abs() / bound).max().item()
    try:  # informative only: a refusal of cuDNN is not FlashInfer's failure
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            cud = F.scaled_dot_product_attention(q4, kd.contiguous(), vd.contiguous(),
                                                 enable_gqa=True).squeeze(2)
        vs_cudnn = f"{(got - cud.double()).abs().max().item():.3e}"
    except RuntimeError as ex:
        vs_cudnn = f"n/a ({' '.join(str(ex).split())[:120]})"
    print(f"# check hkv={hkv} b={b} ctx={ctx}: max |flashinfer - sdpa fp64| / bound = {ratio:.4f}"
          f" (pass <= 1); max |flashinfer - sdpa cudnn bf16| = {vs_cudnn}; "
          f"max |ref| = {ref.abs().max().item():.3e}", file=out, flush=True)
    del dec
    return ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_args(ap)
    ap.add_argument("--workspace-mb", type=int, default=384,
                    help="float workspace for the split-KV partials (FlashInfer recommends at "
                         "least 128 MB; SGLang gives it 384 MB)")
    ap.add_argument("--check-hkv", type=int, default=8)
    ap.add_argument("--check-batch", type=int, default=4)
    ap.add_argument("--check-ctx", type=int, default=8197,
                    help="a context with a partial last page (8197 = 512·16 + 5)")
    ap.add_argument("--no-check", action="store_true", help="skip the check against SDPA")
    ap.add_argument("--csv", default="")
    a = ap.parse_args()
    check_grid(a, "flashinfer_baseline.py")
    if a.workspace_mb < 1:
        sys.exit(f"flashinfer_baseline.py: --workspace-mb {a.workspace_mb} must be >= 1")
    if a.hq % a.check_hkv or min(a.check_batch, a.check_ctx) < 1:
        sys.exit(f"flashinfer_baseline.py: the check point (--check-hkv {a.check_hkv}, "
                 f"--check-batch {a.check_batch}, --check-ctx {a.check_ctx}) needs sizes >= 1 "
                 f"and --hq {a.hq} a multiple of its Hkv")
    with csv_out(a.csv) as out:
        return run(a, out)


def run(a, out):
    """The check, then the grid, into `out`; the exit status."""
    if not torch.cuda.is_available():
        print("# flashinfer unavailable: torch sees no CUDA device", file=out)
        return EXIT_UNAVAILABLE
    dev = torch.device("cuda")
    try:
        import flashinfer
        workspace = torch.zeros(a.workspace_mb << 20, dtype=torch.uint8, device=dev)
        # Build/load the one module the grid uses (JIT on first use) before timing anything.
        torch.manual_seed(20261129)
        ratio = None if a.no_check else check_point(flashinfer, workspace, a, a.check_hkv,
                                                    a.check_batch, a.check_ctx, out)
    except Exception as ex:  # noqa: BLE001 (the reason it cannot run is the result)
        print(f"# flashinfer unavailable: {type(ex).__name__}: {' '.join(str(ex).split())}",
              file=out, flush=True)
        traceback.print_exc()
        return EXIT_UNAVAILABLE
    version = flashinfer.__version__
    print(f"# flashinfer {version} ({getattr(flashinfer, '__git_version__', '?')}), backend "
          f"{BACKEND}, torch {torch.__version__}, {torch.cuda.get_device_name()}, NHD page size "
          f"{a.page_size}, CUDA-graph replay, timing {a.timing}", file=out)
    print("kind,hq,hkv,d,batch,ctx,median_ms,p10_ms,p90_ms,bytes,gbps,flashinfer,backend",
          file=out, flush=True)
    D = a.head_dim
    for hkv in a.hkv:
        for b in a.batch:
            for ctx in a.ctx:
                P = -(-ctx // a.page_size)
                q = torch.randn(b, a.hq, D, device=dev, dtype=torch.bfloat16)
                k = torch.randn(b * P, a.page_size, hkv, D, device=dev, dtype=torch.bfloat16)
                v = torch.randn(b * P, a.page_size, hkv, D, device=dev, dtype=torch.bfloat16)
                try:
                    dec = Decode(flashinfer, workspace, q, k, v, ctx, a.page_size, a.hq, hkv, D)
                    med, p10, p90 = quantiles(time_replays(dec.g.replay, a.warmup, a.reps,
                                                            queued=a.timing == "queued"))
                    nbytes = 2 * b * hkv * ctx * D * 2 + 2 * b * a.hq * D * 2
                    print(f"flashinfer,{a.hq},{hkv},{D},{b},{ctx},{med:.5f},{p10:.5f},{p90:.5f},"
                          f"{nbytes},{nbytes / med / 1e6:.1f},{version},{BACKEND}", file=out,
                          flush=True)
                    del dec
                except Exception as ex:  # report and continue with the next shape
                    print(f"# flashinfer hkv={hkv} b={b} ctx={ctx} failed: {type(ex).__name__}: "
                          f"{' '.join(str(ex).split())}", file=out, flush=True)
                del q, k, v
                torch.cuda.empty_cache()
    if ratio is not None and not ratio <= 1.0:
        print(f"flashinfer_baseline.py: the check against SDPA failed (error / bound {ratio:.3f})",
              file=sys.stderr)
        return EXIT_CHECK
    return 0


if __name__ == "__main__":
    sys.exit(main())
