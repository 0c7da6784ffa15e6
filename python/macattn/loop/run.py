"""MAC attention inside every layer of SmolLM2-135M, against exact decoding of the same text.

Teacher-forced runs (``teacher_forced``): the prompt [0, P) is run once with exact attention
(``PromptCache``: every layer's q̃, q, k, v and the residual stream at P), then the decode
positions [P, P + n) go layer by layer: each layer's q̃/q/k/v of every decode position from
the previous layer's outputs, then attention over them — exact (numpy) or MAC (one
incremental ``macattn.Stepper`` per layer, stepped over the positions in order; step m reads
keys [0, m] only, so appending every position first is exact teacher forcing). The rest of
the network sees the same arithmetic in both runs (same shapes, same order), so the runs
differ only in the attention outputs.

Greedy runs (``greedy``): token by token, the model's own argmax fed back; the incremental
Stepper of each layer gets one position per step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

import macattn

from .model import Model, exact_attention

# gen_min past every position a layer can hold (the largest MacParams accepts, 2^31 - 1):
# no step is eligible, so every step misses.
NEVER = (1 << 31) - 1


@dataclass
class Policy:
    """A MAC configuration of the whole model: the stepper's parameters (τ, M, r, F, and the
    policies of semantics §3.3: depth cap K, refresh N), and optionally one τ per layer.
    gen_min is set by the run to the prompt length (reuse from the first decode position)."""
    name: str
    tau: float = 0.45
    ring: int = 512
    tail: int = 256
    sinks: int = 0
    depth_cap: int = -1
    refresh: int = 0
    layer_tau: Optional[Sequence[float]] = None  # [layers]: overrides tau per layer
    force_miss: bool = False  # every step misses (gen_min past the end): the reference path

    def params(self, layer: int, gen_min: int) -> macattn.MacParams:
        tau = self.tau if self.layer_tau is None else float(self.layer_tau[layer])
        return macattn.MacParams(tau=tau, ring=self.ring, tail=self.tail, sinks=self.sinks,
                                 gen_min=NEVER if self.force_miss else gen_min,
                                 depth_cap=self.depth_cap, refresh=self.refresh)

    def describe(self) -> str:
        t = (f"per layer {min(self.layer_tau):.2f}…{max(self.layer_tau):.2f}"
             if self.layer_tau else f"{self.tau:g}")
        s = f"tau {t}, M {self.ring}, r {self.tail}, F {self.sinks}"
        if self.depth_cap >= 0:
            s += f", depth cap {self.depth_cap}"
        if self.refresh > 0:
            s += f", refresh {self.refresh}"
        if self.force_miss:
            s += ", every step forced to miss"
        return s


@dataclass
class LayerStats:
    """What MAC did in one layer over the decode positions (all query heads)."""
    steps: int = 0            # (position, head) pairs
    hits: int = 0
    forced: int = 0           # would-be hits a policy turned into misses
    keys_read: int = 0
    keys_full: int = 0        # Σ (m + 1): what exact attention reads
    depth_hist: Dict[int, int] = field(default_factory=dict)  # chain depth of each hit

    def add(self, step, m: int):
        hit = np.asarray(step.hit)
        self.steps += hit.size
        self.hits += int(hit.sum())
        self.forced += int((np.asarray(step.policy) != 0).sum())
        self.keys_read += int(np.asarray(step.keys_read).sum())
        self.keys_full += hit.size * (m + 1)
        for d in np.asarray(step.depth)[hit]:
            self.depth_hist[int(d)] = self.depth_hist.get(int(d), 0) + 1

    def as_dict(self) -> dict:
        depths = sorted(self.depth_hist)
        n = max(1, self.hits)
        cum, med, p90 = 0, 0, 0
        for d in depths:
            cum += self.depth_hist[d]
            if not med and cum >= 0.5 * n:
                med = d
            if not p90 and cum >= 0.9 * n:
                p90 = d
        return dict(hit_rate=self.hits / max(1, self.steps), forced=self.forced / max(1, self.steps),
                    keys_read=self.keys_read / max(1, self.keys_full),
                    depth_median=med, depth_p90=p90, depth_max=depths[-1] if depths else 0,
                    depth_hist={str(d): self.depth_hist[d] for d in depths})


class PromptCache:
    """The exact prompt pass over tokens [0, P): per layer q̃, q, k, v [P, H, D] (BF16 values)
    and the residual stream entering each layer at the prompt's positions is not needed
    later; only the attention inputs are (decode positions attend to the prompt's k, v, and
    the ring's prefill reads the last M prompt queries)."""

    def __init__(self, model: Model, ids: Sequence[int]):
        self.model, self.P = model, len(ids)
        pos = np.arange(self.P)
        h = model.embed[np.asarray(ids)]
        self.q_pre, self.q_post, self.k, self.v = [], [], [], []
        for li in range(model.cfg.layers):
            qp, qq, k, v = model.qkv(li, h, pos)
            for lst, a in ((self.q_pre, qp), (self.q_post, qq), (self.k, k), (self.v, v)):
                lst.append(a)
            h = model.after_attention(li, h, exact_attention(qq, k, v, 0, model.cfg.scale))
        self.last_hidden = h[-1:].copy()  # predicts the first decode token


@dataclass
class TeacherForced:
    """Outputs of a teacher-forced decode pass over positions [P, P + n)."""
    hidden: np.ndarray                 # [n, hidden] final residual stream
    layers: List[LayerStats]
    seconds: float
    attn_check: List[float] = field(default_factory=list)  # per layer, see teacher_forced
    d2: List[np.ndarray] = field(default_factory=list)  # per layer [n·Hq] nearest d2 (collect_d2)


def _stepper(model: Model, policy: Policy, li: int, P: int, total: int, cache: PromptCache,
             precision: str = "fp32"):
    c = model.cfg
    st = macattn.Stepper.incremental(c.q_heads, c.kv_heads, c.head_dim, max_tokens=total,
                                     softmax_scale=c.scale, params=policy.params(li, P),
                                     precision=precision)
    st.append(cache.q_pre[li], cache.q_post[li], cache.k[li], cache.v[li])
    return st


def teacher_forced(model: Model, cache: PromptCache, ids: Sequence[int],
                   policy: Optional[Policy], precision: str = "fp32",
                   check_bound=None, collect_d2: bool = False) -> TeacherForced:
    """Decode pass over the tokens `ids` (positions P … P + n − 1) with exact attention
    (policy None) or MAC under `policy`. `check_bound(li, q, k, v, out, first)`, if given, is
    called per layer with the attention inputs and outputs of the decode positions and its
    return value is kept in attn_check. `collect_d2`: keep each step's canonical distance to
    the nearest candidate per layer (NaN where none was searched)."""
    t0 = time.time()
    P, n = cache.P, len(ids)
    pos = np.arange(P, P + n)
    h = model.embed[np.asarray(ids)]
    stats, checks, d2 = [], [], []
    for li in range(model.cfg.layers):
        qp, qq, k, v = model.qkv(li, h, pos)
        K = np.concatenate([cache.k[li], k])
        V = np.concatenate([cache.v[li], v])
        ls = LayerStats()
        if policy is None:
            att = exact_attention(qq, K, V, P, model.cfg.scale)
        else:
            st = _stepper(model, policy, li, P, P + n, cache, precision)
            st.prefill(P)
            st.append(qp, qq, k, v)
            att = np.empty_like(qq)
            dl = np.full((n, qq.shape[1]), np.nan, np.float32) if collect_d2 else None
            for j in range(n):
                s = st.step(P + j)
                att[j] = s.out[0]
                ls.add(s, P + j)
                if collect_d2:
                    dl[j] = s.d2
            if collect_d2:
                d2.append(dl.ravel())
        if check_bound is not None:
            checks.append(check_bound(li, qq, K, V, att, P))
        stats.append(ls)
        h = model.after_attention(li, h, att)
    return TeacherForced(hidden=h, layers=stats, seconds=time.time() - t0, attn_check=checks,
                         d2=d2)


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def compare(model: Model, exact_hidden: np.ndarray, mac_hidden: np.ndarray,
            targets: Sequence[int], chunk: int = 512) -> dict:
    """Per position: KL(exact ‖ MAC) of the next-token distributions (nats), the NLL of the
    target token under each, whether the argmax agrees, and max |Δ logit|."""
    n = exact_hidden.shape[0]
    kl, nll_e, nll_m, agree, dmax = (np.empty(n) for _ in range(5))
    tg = np.asarray(targets)
    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        le, lm = model.logits(exact_hidden[c0:c1]), model.logits(mac_hidden[c0:c1])
        pe, pm = log_softmax(le), log_softmax(lm)
        kl[c0:c1] = (np.exp(pe) * (pe - pm)).sum(axis=-1)
        r = np.arange(c1 - c0)
        nll_e[c0:c1] = -pe[r, tg[c0:c1]]
        nll_m[c0:c1] = -pm[r, tg[c0:c1]]
        agree[c0:c1] = le.argmax(-1) == lm.argmax(-1)
        dmax[c0:c1] = np.abs(le.astype(np.float64) - lm).max(axis=-1)
    return dict(kl=kl, nll_exact=nll_e, nll_mac=nll_m, agree=agree, dlogit_max=dmax)


@dataclass
class Greedy:
    tokens: List[int]
    layers: List[LayerStats]
    seconds: float


def greedy(model: Model, cache: PromptCache, n_new: int, policy: Optional[Policy]) -> Greedy:
    """Greedy continuation of the cached prompt, `n_new` tokens, with exact attention (policy
    None) or MAC under `policy`; each new position runs every layer once."""
    t0 = time.time()
    c, P = model.cfg, cache.P
    total = P + n_new
    K = [np.zeros((total, c.kv_heads, c.head_dim), np.float32) for _ in range(c.layers)]
    V = [np.zeros_like(K[0]) for _ in range(c.layers)]
    for li in range(c.layers):
        K[li][:P], V[li][:P] = cache.k[li], cache.v[li]
    steppers, stats = [], [LayerStats() for _ in range(c.layers)]
    if policy is not None:
        for li in range(c.layers):
            st = _stepper(model, policy, li, P, total, cache)
            st.prefill(P)
            steppers.append(st)
    tok = int(model.logits(cache.last_hidden)[0].argmax())
    out = []
    for m in range(P, total):
        out.append(tok)
        h = model.embed[tok][None, :]
        pos = np.array([m])
        for li in range(c.layers):
            qp, qq, k, v = model.qkv(li, h, pos)
            K[li][m], V[li][m] = k[0], v[0]
            if policy is None:
                att = exact_attention(qq, K[li][:m + 1], V[li][:m + 1], m, c.scale)
            else:
                st = steppers[li]
                st.append(qp[0], qq[0], k[0], v[0])
                s = st.step(m)
                att = s.out[0][None]
                stats[li].add(s, m)
            h = model.after_attention(li, h, att)
        tok = int(model.logits(h)[0].argmax())
    return Greedy(tokens=out, layers=stats, seconds=time.time() - t0)
