"""How informative is the per-step bound of docs/results.md? (python -m macattn.loop bound)

For every hit of the reference stepper on a recorded trace (default: the committed SmolLM2
fixture with mac-sim's configuration for it, τ 0.45, M 256, r 32, prompt 256, FP64 stepper,
full-precision ring, so that the bounds' exact-arithmetic premises hold), this evaluates, from
the hit's chain (entry(p) = segments of keys, each computed with its chain member's query):

  err   = ‖o_mac − o_full‖₂                                    (measured)
  B     = 2·Vmax·[(1−ρ)·tanh(W/4) + g(ρ; a, b)]                 (mac-study's `bound`)
  B2    = 2·R_P·(1−ρ)·tanh(W/4) + g(ρ; a, b)·‖õ_P − o_R‖        (the tighter form below)
  T     = 2·Vmax                                               (trivial: two convex
                                                                combinations of the values)

with δ_t = s·(q_m − q_{c(t)})·k_t over the prefix keys P, a = min δ, b = max δ, W = b − a,
ρ the exact mass of the recomputed keys R, g(ρ; a, b) = max_{c∈{a,b}} |σ(logit ρ + c) − ρ|,
Vmax = max_{t≤m} ‖v_t‖, R_P = max_{t∈P} ‖v_t − v̄_P‖ (v̄_P the plain mean of the prefix
values), õ_P the reused prefix output and o_R the recomputed part's output (both states
the stepper holds at the step).

B2 follows from the same exact decomposition as B,
  o_mac − o_full = (1−ρ)·(õ_P − o_P) + (ρ − ρ̃)·(õ_P − o_R),
with two of B's three inequalities replaced by sharper ones: ‖õ_P − o_P‖ = ‖Σ (π̃_t − π_t)
(v_t − v̄_P)‖ ≤ 2·TV(π̃, π)·R_P ≤ 2·tanh(W/4)·R_P (the total mass of π̃ − π is 0, so any
centre may be subtracted), and ‖õ_P − o_R‖ is not bounded by a diameter but taken as it is
(both states are known at the step); |ρ − ρ̃| ≤ g as in B.
"""
from __future__ import annotations

import csv
import os
from typing import Dict, List, Tuple

import numpy as np

import macattn


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x)) if x >= 0 else np.exp(x) / (1.0 + np.exp(x))


def mass_shift(rho: float, a: float, b: float) -> float:
    """g(ρ; a, b) = max over c ∈ {a, b} of |σ(logit ρ + c) − ρ| (0 at ρ ∈ {0, 1})."""
    if not (0.0 < rho < 1.0):
        return 0.0
    lg = np.log(rho) - np.log1p(-rho)
    return max(abs(_sigmoid(lg + a) - rho), abs(_sigmoid(lg + b) - rho))


def _state(x: np.ndarray, v: np.ndarray) -> Tuple[np.ndarray, float]:
    mu = x.max()
    w = np.exp(x - mu)
    z = w.sum()
    return (w @ v) / z, mu + np.log(z)


def analyse_layer(layer, scale: float, params: macattn.MacParams, prompt: int,
                  steps: int) -> List[dict]:
    """One row per hit (all heads)."""
    st = macattn.Stepper(layer, scale, params, precision="fp64", storage="full")
    st.prefill(prompt)
    r, F, M = params.tail, params.sinks, params.ring
    Hq, G = layer.num_q_heads, layer.num_q_heads // layer.num_kv_heads
    qpost = np.asarray(layer.q_post, dtype=np.float64)
    k = np.asarray(layer.k, dtype=np.float64)
    v = np.asarray(layer.v, dtype=np.float64)
    vnorm = np.linalg.norm(v, axis=-1)  # [T, Hkv]

    def E(p):
        return max(0, p + 1 - r)

    # Chain segments of each entry: [(begin, end, position whose query computed them)].
    segs: List[Dict[int, list]] = [dict() for _ in range(Hq)]
    for h in range(Hq):
        for p in range(max(0, prompt - M), prompt):
            segs[h][p] = [(min(F, E(p)), E(p), p)]
    rows = []
    for m in range(prompt, prompt + steps):
        s = st.step(m)
        for h in range(Hq):
            hk = h // G
            if not s.hit[h]:
                segs[h][m] = [(min(F, E(m)), E(m), m)]
                continue
            p = int(s.match_pos[h])
            chain = segs[h][p]
            segs[h][m] = chain + [(E(p), E(m), m)]
            x = (k[:m + 1, hk] @ qpost[m, h]) * scale
            inP = np.zeros(m + 1, dtype=bool)
            xt = np.empty(m + 1)
            for b0, b1, c in chain:
                inP[b0:b1] = True
                xt[b0:b1] = (k[b0:b1, hk] @ qpost[c, h]) * scale
            delta = (x - xt)[inP]
            a, b = float(delta.min()), float(delta.max())
            W = b - a
            o_full, L_full = _state(x, v[:m + 1, hk])
            o_R, L_R = _state(x[~inP], v[:m + 1, hk][~inP])
            rho = float(np.exp(L_R - L_full))
            o_tilde_P, _ = _state(xt[inP], v[:m + 1, hk][inP])
            o_mac = np.asarray(s.out[0][h], dtype=np.float64)
            err = float(np.linalg.norm(o_mac - o_full))
            vmax = float(vnorm[:m + 1, hk].max())
            vP = v[:m + 1, hk][inP]
            R_P = float(np.linalg.norm(vP - vP.mean(axis=0), axis=-1).max())
            g = mass_shift(rho, a, b)
            B = 2 * vmax * ((1 - rho) * np.tanh(W / 4) + g)
            B2 = 2 * R_P * (1 - rho) * np.tanh(W / 4) + g * float(np.linalg.norm(o_tilde_P - o_R))
            rows.append(dict(m=m, head=h, depth=int(s.depth[h]), err=err, B=float(B),
                             B2=float(B2), trivial=2 * vmax, o_exact=float(np.linalg.norm(o_full)),
                             rho=rho, W=W))
    return rows


def summarize(rows: List[dict]) -> dict:
    err = np.array([x["err"] for x in rows])
    B, B2 = np.array([x["B"] for x in rows]), np.array([x["B2"] for x in rows])
    T, O = np.array([x["trivial"] for x in rows]), np.array([x["o_exact"] for x in rows])
    out = dict(hits=len(rows))
    for name, b in (("B", B), ("B2", B2)):
        out[f"{name}_holds"] = float(np.mean(err <= b))
        out[f"{name}_below_trivial"] = float(np.mean(b < T))
        out[f"{name}_below_o_exact"] = float(np.mean(b < O))
        out[f"{name}_over_trivial_p50"] = float(np.median(b / T))
        out[f"{name}_over_err_p50"] = float(np.median(b / np.maximum(err, 1e-300)))
    out["err_over_o_exact_p50"] = float(np.median(err / O))
    return out


def main(out: str, trace: str, layers: List[int], model_layers: List[int], tau: float = 0.45,
         ring: int = 256, tail: int = 32, prompt: int = 256) -> List[dict]:
    tr = macattn.read_trace(trace)
    params = macattn.MacParams(tau=tau, ring=ring, tail=tail, sinks=0, gen_min=prompt)
    res = []
    for li in layers:
        L = tr.layers[li]
        rows = analyse_layer(L, tr.meta.softmax_scale, params, prompt, L.tokens - prompt)
        s = summarize(rows)
        s.update(layer=li, model_layer=model_layers[li] if li < len(model_layers) else li, tau=tau, M=ring, r=tail, F=0,
                 prompt=prompt, steps=L.tokens - prompt)
        res.append(s)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "honest_bound.csv")
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(res[0].keys()))
        w.writeheader()
        for s in res:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in s.items()})
    os.replace(tmp, path)
    return res
