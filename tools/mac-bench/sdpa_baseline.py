#!/usr/bin/env python3
"""Times torch.nn.functional.scaled_dot_product_attention (cuDNN backend, dense K/V,
enable_gqa=True) on the decode shapes of mac-bench: one query token per request,
q [B, Hq, 1, D], k/v [B, Hkv, ctx, D] bf16. CUDA-graph replay, median of --reps individually
timed replays after warm-up. Bytes = K + V + q + out. CSV on stdout (or --csv)."""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench_common import add_grid_args, check_grid, quantiles, time_replays


def main():
    ap = argparse.ArgumentParser()
    add_grid_args(ap, page_size=False)
    ap.add_argument("--backend", default="cudnn", choices=["cudnn", "flash", "efficient", "math"])
    ap.add_argument("--csv", default="")
    a = ap.parse_args()
    check_grid(a, "sdpa_baseline.py")
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[a.backend]
    out = open(a.csv, "w") if a.csv else sys.stdout
    torch.manual_seed(20261129)
    dev = torch.device("cuda")
    print(f"# torch {torch.__version__}, cudnn {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}, "
          f"backend {a.backend}, timing {a.timing}", file=out)
    print("kind,hq,hkv,d,batch,ctx,median_ms,p10_ms,p90_ms,bytes,gbps", file=out, flush=True)
    D = a.head_dim
    for hkv in a.hkv:
        for b in a.batch:
            for ctx in a.ctx:
                q = torch.randn(b, a.hq, 1, D, device=dev, dtype=torch.bfloat16)
                k = torch.randn(b, hkv, ctx, D, device=dev, dtype=torch.bfloat16)
                v = torch.randn(b, hkv, ctx, D, device=dev, dtype=torch.bfloat16)
                try:
                    with sdpa_kernel(backend):
                        s = torch.cuda.Stream()
                        s.wait_stream(torch.cuda.current_stream())
                        with torch.cuda.stream(s):
                            for _ in range(3):
                                o = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                        torch.cuda.current_stream().wait_stream(s)
                        g = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(g):
                            o = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    med, p10, p90 = quantiles(time_replays(g.replay, a.warmup, a.reps,
                                                            queued=a.timing == "queued"))
                    nbytes = 2 * b * hkv * ctx * D * 2 + 2 * b * a.hq * D * 2
                    print(f"sdpa_{a.backend},{a.hq},{hkv},{D},{b},{ctx},{med:.5f},{p10:.5f},"
                          f"{p90:.5f},{nbytes},{nbytes / med / 1e6:.1f}", file=out, flush=True)
                    del g, o
                except Exception as ex:  # report and continue with the next shape
                    print(f"# sdpa_{a.backend} hkv={hkv} b={b} ctx={ctx} failed: {type(ex).__name__}: {ex}",
                          file=out, flush=True)
                del q, k, v
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
