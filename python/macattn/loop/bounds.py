"""A derived bound on the rounding error of FP32 attention, for the forced-miss check.

For one query q (post-RoPE, BF16 values), keys k_t and values v_t (BF16 values), t in a
range of n keys, softmax scale s (a power of two here, so s·q is exact), exact arithmetic
gives logits x_t = s·q·k_t, weights w_t = e^{x_t − μ} / Σ e^{x_u − μ} and o = Σ w_t v_t. An
FP32 evaluation by blocks with a running maximum (mac::ref::attend, and numpy's) perturbs,
to first order in u = 2^-24 and with γ_n = n·u / (1 − n·u):

  * each logit by |δx_t| ≤ ε_t = γ_D · s · Σ_i |q_i k_{t,i}|     (a D-term dot product),
  * x_t − μ by a further u·|x_t − μ|, e^{·} by 2u (a correctly rounded exp is within u;
    2u allows a faithful one), and the maximum μ by ε_max = max_t ε_t,
  * the sums z = Σ e_t and a_i = Σ e_t v_{t,i} by γ_n relative to Σ e_t and Σ e_t |v_{t,i}|,
    the block rescalings by 2u each (n/128 blocks), and the division a/z by u.

So every unnormalised weight carries a relative error θ_t ≤ ε_t + ε_max + u·|x_t − μ| + 2u,
and with A_i = Σ_t w_t |v_{t,i}| (≥ |o_i|):

  |ô_i − o_i| ≤ Σ_t w_t |v_{t,i}| θ_t + |o_i| Σ_t w_t θ_t + 2γ_{n'} A_i + u |o_i|,
  n' = n + 2·⌈n/128⌉ (rescalings counted as terms).

The stepper merges up to three such pieces (sinks, band, tail) with ⊕; each merge weights
its two sides by e^{L_j − L}, whose exponents carry the absolute error of the pieces' LSEs
(≤ u·|L| + the pieces' own relative error of z) plus u·|L_j − L|, so each merge adds at most
(4u·(|L| + 1) + 2γ_{n'}) · A_i. `fp32_attention_bound` adds three merges' worth, for any
split of the keys. It is a bound on each of the two FP32 paths against exact arithmetic;
their difference is bounded by the sum.
"""
from __future__ import annotations

import numpy as np

U32 = 2.0 ** -24


def _gamma(n, u=U32):
    return n * u / (1.0 - n * u)


def fp32_attention_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray, first: int,
                         scale: float, merges: int = 3):
    """Per element bound [n, Hq, D] on |FP32 attention − exact attention| for the queries of
    positions first … first + n − 1 (q [n, Hq, D]) over keys [0, m] (k, v [T, Hkv, D]), and
    the exact (FP64) attention output [n, Hq, D] it is relative to."""
    n, hq, d = q.shape
    g = hq // k.shape[1]
    bound = np.empty((n, hq, d))
    exact = np.empty((n, hq, d))
    q64, k64, v64 = q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)
    for j in range(n):
        m = first + j
        nk = m + 1
        nprime = nk + 2 * ((nk + 127) // 128)
        for h in range(hq):
            kk, vv = k64[:nk, h // g], v64[:nk, h // g]
            x = (kk @ q64[j, h]) * scale
            eps = _gamma(d) * scale * (np.abs(kk) @ np.abs(q64[j, h]))
            mu = x.max()
            w = np.exp(x - mu)
            z = w.sum()
            w /= z
            L = mu + np.log(z)
            o = w @ vv
            A = w @ np.abs(vv)
            theta = eps + eps.max() + U32 * np.abs(x - mu) + 2 * U32
            b = (w * theta) @ np.abs(vv) + np.abs(o) * (w @ theta) + 2 * _gamma(nprime) * A \
                + U32 * np.abs(o)
            b += merges * (4 * U32 * (abs(L) + 1) + 2 * _gamma(nprime)) * A
            bound[j, h], exact[j, h] = b, o
    return bound, exact
