#!/usr/bin/env python3
"""Generates verification/matrix.tsv, the 941-case certification matrix of mac-verify.

The TSV file is the source of truth (committed); this script documents how it was made
and regenerates it byte for byte: `python3 verification/gen_matrix.py > verification/matrix.tsv`.
Every case has a fixed seed derived from its id. Columns are described in
docs/verification.md ("Matrix columns").
"""
import random

COLS = ["id", "family", "seed", "D", "G", "Hkv", "batch", "ctx", "dctx", "ps", "M", "r", "F",
        "gen_min", "tau", "steps", "hit", "lags", "ready", "graph", "k3", "special", "smoke", "K",
        "N", "W", "P", "mu", "hmin", "Bfix"]
TOTAL = 853  # the families A-O; the policy family P and the gate family Q follow them
BFIX_DEFAULT = 16500000  # mac::kGateFixedBytesDefault (reference/include/mac/ref/gate.hpp)
cases = []


def add(family, **kw):
    c = dict(family=family, D=128, G=4, Hkv=2, batch=1, ctx=1037, dctx=0, ps=16, M=512, r=256,
             F=0, gen_min=0, tau=0.45, steps=6, hit=0.5, lags="u", ready="1", graph=0,
             k3="fused", special="none", smoke=0, K=-1, N=0, W=0, P=256, mu=1000, hmin=0,
             Bfix=BFIX_DEFAULT)
    c.update(kw)
    cases.append(c)


rng = random.Random(20261129)
CTXS = [1037, 1500, 2049, 2600, 4097, 700, 3001, 8193]

# A. Core grid: D x G x F x hit fraction x page size (240). Misses spread across groups:
#    each step plants round(hit*Hq) hits on a seeded permutation of the query heads.
i = 0
for D in (64, 128):
    for G in (1, 3, 4, 8):
        for F in (0, 64, 128):
            for hit in (0.0, 0.25, 0.5, 0.75, 1.0):
                for ps in (1, 16):
                    batch = 3 if i % 3 == 0 else 1
                    add("grid", D=D, G=G, Hkv=2 if G < 8 else 1, F=F, hit=hit, ps=ps,
                        ctx=CTXS[i % len(CTXS)], dctx=211 if batch > 1 else 0, batch=batch,
                        lags=["u", "1,2,3", "u,M", "r,r+1,r-1"][i % 4],
                        smoke=1 if i % 16 == 0 else 0)
                    i += 1

# B. Head dim 256 (24).
i = 0
for G in (1, 4, 8):
    for hit in (0.0, 0.5, 1.0):
        for F in (0, 64):
            for ps in (1, 16):
                if len([c for c in cases if c["family"] == "d256"]) >= 24:
                    break
                add("d256", D=256, G=G, Hkv=1 if G == 8 else 2, hit=hit, F=F, ps=ps,
                    ctx=[1037, 2600, 4097][i % 3], smoke=1 if i % 12 == 0 else 0)
                i += 1

# C. Long contexts (16): awkward lengths up to 127K; few heads, few steps.
LONG = [(16385, 2), (32769, 1), (32769, 3), (32768 + 37, 1), (65537, 1), (65536 + 1000, 2),
        (100003, 1), (130048 - 5, 1), (130048, 1), (130048, 2), (131072 - 7, 1), (49153, 1),
        (24577, 2), (98305, 1), (120001, 1), (130048, 1)]
for j, (ctx, b) in enumerate(LONG):
    add("long", D=[128, 64, 128, 256][j % 4], G=[4, 8, 1, 3][j % 4],
        Hkv=1, batch=b, ctx=ctx, dctx=4099 if b > 1 else 0, steps=[4, 6, 5, 3][j % 4],
        hit=[0.5, 1.0, 0.75, 0.25][j % 4], F=[0, 64, 128, 0][j % 4], ps=[16, 1][j % 2],
        lags=["u,M", "1,r", "u", "r+1,M-1"][j % 4],
        graph=1 if j % 5 == 0 else 0, ready="1" if j != 9 else "10")

# D. Lags (48): every hit planted at one chosen lag.
for j, lag in enumerate(["1", "2", "7", "r-1", "r", "r+1", "M-1", "M"]):
    for D in (64, 128):
        for G in (1, 4, 8):
            add("lag", D=D, G=G, Hkv=1 if G == 8 else 2, hit=1.0, lags=lag,
                ctx=[1037, 2049, 3001][G % 3], F=[0, 64][j % 2], ps=[16, 1][(j + G) % 2],
                smoke=1 if (D == 128 and G == 4 and j % 2 == 0) else 0)

# E. Batches (36): 1, 3 and 16+ requests with mixed contexts.
for j in range(36):
    b = [1, 3, 16, 17, 24, 32][j % 6]
    add("batch", batch=b, D=[64, 128][j % 2], G=[1, 3, 4, 8][j % 4], Hkv=[2, 2, 2, 1][j % 4],
        ctx=[1037, 2600, 4097][j % 3] if b < 16 else [300, 700, 200][j % 3],
        dctx=[0, 37, 113][j % 3], hit=[0.0, 0.3, 0.6, 1.0][j % 4], r=256 if b < 16 else 64,
        ps=[1, 16][(j // 2) % 2], F=[0, 64, 128][j % 3], steps=4,
        smoke=1 if j in (2, 9, 10) else 0)

# F. Ring wraparound (40): small rings, more steps than slots, lags up to M (the matched
#    slot is the one the step overwrites).
for j in range(40):
    M = [16, 32, 64, 100, 128][j % 5]
    r = [8, 16, 32, 50, 64, 0, 1][j % 7]
    add("wrap", M=M, r=r, steps=[2 * M + 3, M + 1, 40][j % 3], ctx=[300, 1037, 2049][j % 3],
        hit=[0.5, 0.9, 1.0, 0.75][j % 4], lags=["M", "M,M-1,1", "u", "1"][j % 4],
        D=[64, 128][j % 2], G=[1, 4, 8, 3][j % 4], Hkv=[2, 2, 1, 2][j % 4],
        F=[0, 0, 8, 64][j % 4], ps=[16, 1][j % 2], batch=[1, 3][j % 2],
        dctx=[0, 17][j % 2], graph=1 if j % 4 == 1 else 0, smoke=1 if j % 10 == 0 else 0)

# G. Tie-breaking (32): two candidates with identical pre-RoPE queries; the older must win.
#    The fourth variant puts the older twin among unusable entries (E(p) <= F): the head
#    must miss (argmin first, validity second; no second-best search).
for j in range(32):
    add("tie", special="tie", hit=[1.0, 0.5, 0.75, 1.0][j % 4], lags=["1,2,3", "u", "r,M-1", "1,2,3"][j % 4],
        D=[64, 128, 256, 128][j % 4], G=[1, 4, 8, 3][j % 4], Hkv=[2, 2, 1, 2][j % 4],
        M=[512, 64, 512, 64][j % 4], r=[256, 16, 256, 8][j % 4], steps=[6, 12][j % 2],
        ctx=[1037, 2049, 4097, 60][j % 4], batch=[1, 3][j % 2], dctx=[0, 7][j % 2],
        F=[0, 64, 0, 32][j % 4], ps=[16, 1][(j // 2) % 2], smoke=1 if j % 8 in (0, 3) else 0)

# H. Threshold edge (36): tau = 0.5 gives thr = D/2 exactly; planted distances exactly at
#    thr (miss: the comparison is strict), just below (hit) and just above (miss).
for j in range(36):
    mode = ["thr_eq", "thr_below", "thr_above", "thr_mix"][j % 4]
    add("threshold", special=mode, tau=0.5, hit=1.0, D=[64, 128, 256][j % 3],
        G=[1, 4, 8][(j // 3) % 3], Hkv=[2, 2, 1][(j // 3) % 3], ctx=[1037, 2049][j % 2],
        lags=["u", "1"][j % 2], ps=[16, 1][(j // 4) % 2], F=[0, 64][(j // 6) % 2],
        smoke=1 if j < 4 else 0)

# I. E(m) = 0 and small contexts (24): kv_len <= r, entries empty, every head misses;
#    contexts straddling r so E(p) = 0 < E(m).
for j in range(24):
    r = [256, 64, 16, 32][j % 4]
    ctx = [2, 3, 17, 100, r, r - 3, r + 1, r - 1][j % 8]
    add("small", r=r, ctx=max(2, ctx), steps=[4, 8, 6][j % 3], M=[512, 64, 8][j % 3],
        hit=[1.0, 0.5][j % 2], lags=["1", "u"][j % 2], D=[64, 128][j % 2],
        G=[1, 4, 8][j % 3], Hkv=[2, 2, 1][j % 3], F=[0, 0, 4][j % 3], ps=[1, 16][j % 2],
        batch=[1, 3][j % 2], dctx=[0, 1][j % 2], smoke=1 if j % 6 == 0 else 0)

# J. gen_min boundary (20): steps straddle m = gen_min.
for j in range(20):
    gm = [2048, 1024, 4096, 3000, 1][j % 5]
    add("gen_min", gen_min=gm, ctx=gm - 2 + (j % 3) - 1 if gm > 2 else 2, steps=6, hit=1.0,
        lags=["1", "u"][j % 2], D=[64, 128][j % 2], G=[4, 1, 8, 3][j % 4], Hkv=[2, 2, 1, 2][j % 4],
        batch=[1, 3][j % 2], dctx=[0, 1][j % 2], ps=[16, 1][j % 2], F=[0, 64][(j // 2) % 2],
        smoke=1 if j % 5 == 0 else 0)

# K. Not-ready requests (32): exact attention, no ring write; half via ready = 0, half via
#    an epoch mismatch on the GPU.
for j in range(32):
    b = [3, 16, 1, 5][j % 4]
    add("not_ready", batch=b, ready=["010", "1100", "0", "10110"][j % 4], hit=[0.5, 1.0, 0.8][j % 3],
        ctx=[1037, 2049, 2600][j % 3], dctx=[19, 0, 0, 101][j % 4], D=[64, 128][j % 2],
        G=[1, 4, 8, 3][j % 4], Hkv=[2, 2, 1, 2][j % 4], steps=4, graph=1 if j % 3 == 0 else 0,
        gen_min=[0, 1040][j % 2], ps=[1, 16][(j // 2) % 2], F=[0, 64][(j // 4) % 2],
        smoke=1 if j % 8 in (0, 5) else 0)

# L. CUDA-graph replay of multi-step chains (72): one capture, every step replayed; lags
#    among the last few decode steps so chains grow deep; fused and side-stream K3.
for j in range(72):
    add("graph_chain", graph=1, k3=["fused", "side"][j % 2], steps=[16, 24, 32][j % 3],
        hit=[0.9, 1.0, 0.6][j % 3], lags=["1", "1,2", "c", "1,2,3,M"][j % 4],
        D=[64, 128, 256][j % 3], G=[1, 3, 4, 8][(j // 3) % 4], Hkv=[2, 2, 2, 1][(j // 3) % 4],
        batch=[1, 3, 16][(j // 12) % 3], ctx=[1037, 2049, 4097, 700][j % 4],
        dctx=[0, 31][j % 2], ps=[16, 1][(j // 6) % 2], F=[0, 64, 128][(j // 2) % 3],
        M=[512, 512, 64][(j // 4) % 3], r=[256, 128, 32][(j // 4) % 3],
        smoke=1 if j % 24 == 0 else 0)

# M. BF16 extremes (48): large logits (peaked softmax, LSE in the thousands), near-total
#    cancellation (the tail holds all but e^-g of the mass: full ⊖ tail would cancel), and
#    value scales near the ends of the range.
for j in range(48):
    sp = ["logits:8", "logits:24", "logits:48", "cancel:16", "cancel:40", "cancel:90",
          "vscale:1e-30", "vscale:1e30"][j % 8]
    add("extreme", special=sp, hit=[0.5, 1.0, 0.25][j % 3], D=[64, 128, 256][j % 3],
        G=[1, 4, 8][(j // 3) % 3], Hkv=[2, 2, 1][(j // 3) % 3], ctx=[1037, 2600][j % 2],
        steps=[6, 12][(j // 8) % 2], lags=["u", "1,r+1"][j % 2], ps=[16, 1][(j // 6) % 2],
        F=[0, 64][(j // 12) % 2], smoke=1 if j in (0, 3, 4) else 0)

# N. Tail widths and taus (24): r = 0 (no exact tail), 1, 512 > M, tau 0.2 .. 0.8.
for j in range(24):
    add("params", r=[0, 1, 7, 512, 1024, 256][j % 6], tau=[0.2, 0.45, 0.6, 0.8][j % 4],
        M=[512, 256, 600][j % 3], hit=[0.5, 1.0][j % 2], lags=["u", "1,M"][j % 2],
        D=[64, 128][j % 2], G=[1, 4, 8][j % 3], Hkv=[2, 2, 1][j % 3], ctx=[1037, 2049, 1500][j % 3],
        F=[0, 64, 128, 0][j % 4], ps=[1, 16][(j // 3) % 2], smoke=1 if j % 12 == 0 else 0)

# O. Seeded random configurations fill the matrix up to exactly 853 cases.
while len(cases) < TOTAL:
    G = rng.choice([1, 2, 3, 4, 6, 8])
    D = rng.choice([64, 128, 128, 256])
    M = rng.choice([64, 128, 256, 512, 512])
    b = rng.choice([1, 1, 2, 3, 4, 16])
    sp = rng.choice(["none"] * 8 + ["tie", "thr_mix", "logits:16", "cancel:30"])
    add("random", D=D, G=G, Hkv=rng.choice([1, 2]) if G <= 4 else 1, batch=b,
        ctx=rng.randint(2, 6000), dctx=rng.randint(0, 300), ps=rng.choice([1, 16]), M=M,
        r=rng.choice([0, 16, 64, 256, 300]), F=rng.choice([0, 0, 16, 64, 128]),
        gen_min=rng.choice([0, 0, 0, 1024]), tau=0.5 if sp.startswith("thr") else rng.choice([0.3, 0.45, 0.55]),
        steps=rng.randint(2, 12), hit=round(rng.random(), 2),
        lags=rng.choice(["u", "1", "M", "1,2,3", "u,M", "r,r+1", "c"]),
        ready=rng.choice(["1"] * 6 + ["10", "01", "110"]), graph=rng.choice([0, 0, 1]),
        k3=rng.choice(["fused", "side"]), special=sp,
        smoke=1 if len(cases) % 50 == 0 else 0)

assert len(cases) == TOTAL, len(cases)

# P. Policies of semantics §3.3 (48): the depth cap K and the refresh period N. Hits are
#    planted at lags 1..4 ("c") or 1 so chains through recent decode steps grow deeper than K
#    within the steps; N with several head counts checks the stagger ⌊h·N/Hq⌋. Last in the
#    matrix, so the ids and seeds of A-O are unchanged.
for j in range(48):
    kind = ["K", "N", "KN"][j % 3]
    K = [0, 1, 2, 3, 5, 1, 2, 4][j % 8] if kind != "N" else -1
    N = [1, 2, 3, 4, 7, 16][j % 6] if kind != "K" else 0
    add("policy", K=K, N=N, steps=[12, 20, 33][j % 3], hit=[1.0, 0.9, 0.75][(j // 3) % 3],
        lags=["c", "1", "1,2", "u"][j % 4], D=[64, 128, 256][j % 3],
        G=[1, 3, 4, 8][(j // 2) % 4], Hkv=[2, 2, 2, 1][(j // 2) % 4],
        ctx=[1037, 2049, 300, 700][j % 4], M=[512, 64, 128, 512][(j // 4) % 4],
        r=[256, 16, 32, 64][(j // 4) % 4], F=[0, 0, 64, 8][(j // 5) % 4],
        batch=[1, 3][j % 2], dctx=[0, 17][j % 2], ps=[16, 1][(j // 2) % 2],
        ready=["1", "1", "10", "1"][j % 4], gen_min=[0, 0, 0, 703][j % 4],
        smoke=1 if j % 8 in (0, 5) else 0)


# Q. The adaptive gate of semantics §3.5 (40): W, P, mu, hmin, Bfix. Last in the matrix, so
#    the ids and seeds of A-P are unchanged. The byte model decides, so the cases are built
#    around it (D 64, Hkv 2, G 1 unless said: full attention reads 512·(m+1) bytes a step; a
#    step whose heads all hit at lag 1 with M 64, r 16 costs about 26 000 bytes + Bfix, MAC
#    pays; a step whose heads all miss costs full + scan + writes, MAC never pays at mu 1000).
#    Which case covers which branch of the rule (ids; tests/verification/test_gate_matrix.cpp
#    replays every case through the reference stepper, counts the branches it takes and asserts
#    these claims):
#      never off (MAC pays)          901-902; 913-914 (hmin 500 exactly met by 2 hits of Hq 4:
#                                    the rule is strict, the gate stays on)
#      mu: window closes, no pay     903-908 (all misses: probe cycles, W 2-4, P 2-5), 909-910
#                                    (all hits at lag M, mu 40: reuse does not pay enough)
#      h_min: too few hits           911-912 (hmin 501 > 2 hits of Hq 4 per step, bytes paying)
#      floor rule                    915 (default Bfix), 916 (Bfix 2^34), 940 (every default
#                                    but W, P): floor at every step; 917 (the floor ends mid-case
#                                    as full grows with m), 918 (floor for one request of three);
#                                    every other case has Bfix 0
#      batch, diverging state        919-922 (contexts 4097/3146/2195, hits at lag M, mu 30:
#                                    MAC pays only for the longest), 918
#      ineligible steps              923-926 (m < gen_min for the first steps, not-ready
#                                    requests: their state stays zero)
#      sinks F > 0                   927-930 (930: F 2000, the floor holds while the sinks
#                                    dominate)
#      ring wrap (steps > M)         931-933
#      depth cap K                   934-936 (capped chains are misses: too few hits)
#      refresh N                     937-939 (refreshes are misses: too few hits)
GATE = dict(D=64, G=1, Hkv=2, ctx=2049, M=64, r=16, hit=1.0, lags="1", steps=24, W=3, P=3,
            mu=1000, hmin=0, Bfix=0)
GATE_CASES = [
    dict(W=4, P=3, steps=16),
    dict(W=3, P=2, hmin=500, batch=3, dctx=300, steps=12),
] + [
    dict(hit=0.0, W=W, P=P, steps=26, batch=[1, 3][j % 2], dctx=[0, 211][j % 2])
    for j, (W, P) in enumerate([(2, 2), (2, 5), (3, 3), (4, 2), (3, 5), (4, 4)])
] + [
    dict(lags="M", mu=40, W=3, P=4, steps=24),
    dict(lags="M", mu=40, W=2, P=3, steps=24, batch=3, dctx=100),
] + [
    dict(G=4, Hkv=1, hit=0.5, mu=10000, hmin=hm, W=W, P=4, steps=24, lags="1,2")
    for hm, W in [(501, 3), (501, 2), (500, 3), (500, 2)]
] + [
    dict(Bfix=BFIX_DEFAULT, steps=8),
    dict(Bfix=1 << 34, W=2, P=2, steps=8, hit=0.0),
    dict(Bfix=1030000, W=2, P=3, steps=30, hit=0.0),
    dict(Bfix=2300000, batch=3, ctx=6000, dctx=2000, steps=12, hit=0.0, W=2, P=2),
] + [
    dict(lags="M", mu=30, batch=3, ctx=4097, dctx=3000, W=W, P=P, steps=20)
    for W, P in [(2, 2), (3, 4), (4, 3), (2, 5)]
] + [
    dict(hit=h, gen_min=2049 + 3, batch=b, ready=rd, dctx=dc, lags=lg, mu=mu, hmin=hm, W=2, P=2,
         steps=20)
    for h, b, rd, dc, lg, mu, hm in [(0.0, 1, "1", 0, "1", 1000, 0), (0.0, 3, "101", 50, "1", 1000, 0),
                                     (1.0, 2, "10", 0, "M", 40, 0), (0.5, 3, "110", 7, "1", 10000, 600)]
] + [
    dict(F=F, hit=h, lags=lg, mu=mu, hmin=hm, W=3, P=3, steps=24, batch=[1, 3][j % 2],
         dctx=[0, 40][j % 2])
    for j, (F, h, lg, mu, hm) in enumerate([(64, 0.0, "1", 1000, 0), (8, 1.0, "M", 40, 0),
                                            (16, 0.5, "1", 10000, 600), (2000, 1.0, "1", 1000, 0)])
] + [
    dict(M=16, r=8, steps=40, lags=lg, hit=h, mu=mu, W=W, P=3, ctx=1037)
    for h, lg, mu, W in [(0.9, "M", 25, 3), (0.0, "M,1", 1000, 2), (1.0, "M", 25, 4)]
] + [
    dict(K=K, G=4, Hkv=1, lags="c", hit=1.0, hmin=hm, mu=10000, W=3, P=3, steps=30)
    for K, hm in [(0, 600), (1, 700), (2, 900)]
] + [
    dict(N=N, G=4, Hkv=1, hit=1.0, hmin=hm, mu=10000, W=W, P=2, steps=30)
    for N, hm, W in [(2, 600, 2), (3, 800, 3), (4, 900, 4)]
] + [
    dict(W=8, P=16, Bfix=BFIX_DEFAULT, G=4, Hkv=2, D=128, M=512, r=256, hit=0.5, lags="u",
         steps=6),
]
assert len(GATE_CASES) == 40, len(GATE_CASES)
for j, kw in enumerate(GATE_CASES):
    c = dict(GATE)
    c.update(kw)
    add("gate", smoke=1 if j in (0, 4, 10, 16, 19, 23) else 0, **c)


def ref_cost(c):
    """Key x head evaluations of the FP32 reference (prefill of M entries + steps), as
    CaseSpec::cost_reference: the smoke subset must run in minutes on 2 cores."""
    hq, total = c["G"] * c["Hkv"], 0.0
    for i in range(c["batch"]):
        spread = (i * c["dctx"]) % (c["ctx"] // 2 + 1) if c["dctx"] else 0
        P = max(2, c["ctx"] - spread) - 1
        total += hq * (min(P, c["M"]) * P + c["steps"] * (P + c["steps"]))
    return total * c["D"] / 128.0


for c in cases:
    # Large logits make the FP32 reference's exponentials subnormal (slow on x86): keep
    # them out of the CPU smoke subset unless small.
    if c["smoke"] and (ref_cost(c) > 1.2e7 or (c["special"].startswith("logits") and c["D"] > 64)):
        c["smoke"] = 0
print("#" + "\t".join(COLS))
for n, c in enumerate(cases):
    c["id"] = n
    c["seed"] = 1000003 * (n + 1) + 12345
    # Contexts must stay within the CUDA maximum (131072) over all decode steps.
    assert c["ctx"] + c["steps"] - 1 <= 131072, c
    print("\t".join(str(c[k]) for k in COLS))
