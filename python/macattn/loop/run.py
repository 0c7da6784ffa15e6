"""MAC attention inside every layer of SmolLM2-135M, against exact decoding of the same text.

Teacher-forced runs (``teacher_forced``): the prompt [0, P) is run once with exact attention
(``PromptCache``: every layer's q̃, q, k, v and the residual stream at P), then the decode
positions [P, P + n) go layer by layer: each layer's q̃/q/k/v of every decode position from
the previous layer's outputs, then attention over them — exact (numpy) or MAC (one
incremental ``macattn.Stepper`` per layer, stepped over the positions in order; step m reads
keys [0, m] only, so appending every position first is exact teacher forcing). The rest of
the network sees the same arithmetic in both runs (same shapes, same order), so the runs
differ only in the attention outputs.

Greedy runs (``greedy``, ``greedy_many`` for several policies in lockstep): token by token,
the model's own argmax fed back; the incremental Stepper of each layer gets one position per
step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

import macattn

from .model import Model, exact_attention, exact_attention_t

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
        """One step (position m) of a stepper."""
        self.add_steps(step.hit[None], step.policy[None], step.keys_read[None],
                       step.depth[None], np.array([m]))

    def add_steps(self, hit: np.ndarray, policy: np.ndarray, keys_read: np.ndarray,
                  depth: np.ndarray, positions: np.ndarray):
        """Steps at `positions` [n]: their per-head hit, policy, keys_read, depth [n, Hq]."""
        hit = np.asarray(hit, bool)
        self.steps += hit.size
        self.hits += int(hit.sum())
        self.forced += int((np.asarray(policy) != 0).sum())
        self.keys_read += int(np.asarray(keys_read, np.int64).sum())
        self.keys_full += hit.shape[1] * int((np.asarray(positions, np.int64) + 1).sum())
        d, c = np.unique(np.asarray(depth)[hit], return_counts=True)
        for di, ci in zip(d.tolist(), c.tolist()):
            self.depth_hist[di] = self.depth_hist.get(di, 0) + ci

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


class StepLog:
    """Per-step records of one layer's stepper ([n, Hq] arrays, filled step by step) for
    LayerStats.add_steps, and optionally the nearest-candidate distances."""

    def __init__(self, n: int, heads: int, d2: bool = False):
        self.hit = np.zeros((n, heads), bool)
        self.policy = np.zeros((n, heads), np.int8)
        self.keys_read = np.zeros((n, heads), np.int64)
        self.depth = np.zeros((n, heads), np.int64)
        self.positions = np.zeros(n, np.int64)
        self.d2 = np.full((n, heads), np.nan, np.float32) if d2 else None
        self.n = 0

    def record(self, s, m: int):
        j = self.n
        self.hit[j], self.policy[j] = s.hit, s.policy
        self.keys_read[j], self.depth[j] = s.keys_read, s.depth
        self.positions[j] = m
        if self.d2 is not None:
            self.d2[j] = s.d2
        self.n = j + 1

    def into(self, ls: "LayerStats") -> "LayerStats":
        n = self.n
        ls.add_steps(self.hit[:n], self.policy[:n], self.keys_read[:n], self.depth[:n],
                     self.positions[:n])
        return ls


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
                   check_bound=None, collect_d2: bool = False,
                   exact_dtype=np.float32) -> TeacherForced:
    """Decode pass over the tokens `ids` (positions P … P + n − 1) with exact attention
    (policy None; its arithmetic in `exact_dtype`, the output rounded to FP32) or MAC under
    `policy`. `check_bound(li, q, k, v, out, first)`, if given, is called per layer with the
    attention inputs and outputs of the decode positions and its return value is kept in
    attn_check. `collect_d2`: keep each step's canonical distance to the nearest candidate
    per layer (NaN where none was searched)."""
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
            att = exact_attention(qq, K, V, P, model.cfg.scale, dtype=exact_dtype)
        else:
            st = _stepper(model, policy, li, P, P + n, cache, precision)
            st.prefill(P)
            st.append(qp, qq, k, v)
            att = np.empty_like(qq)
            log = StepLog(n, qq.shape[1], d2=collect_d2)
            for j in range(n):
                s = st.step(P + j)
                att[j] = s.out[0]
                log.record(s, P + j)
            log.into(ls)
            if collect_d2:
                d2.append(log.d2.ravel())
        if check_bound is not None:
            checks.append(check_bound(li, qq, K, V, att, P))
        stats.append(ls)
        h = model.after_attention(li, h, att)
    return TeacherForced(hidden=h, layers=stats, seconds=time.time() - t0, attn_check=checks,
                         d2=d2)


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    x -= np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return x


class ExactLogits:
    """The exact side of `compare`, computed once for every MAC run compared with it: per
    chunk of positions the logits (FP32) and their log-softmax (FP64); 12 bytes per position
    and vocabulary entry (2.4 GB for the study's 4096 positions)."""

    def __init__(self, model: Model, hidden: np.ndarray, chunk: int = 512):
        self.n, self.chunk = hidden.shape[0], chunk
        self.logits, self.logp = [], []
        for c0 in range(0, self.n, chunk):
            le = model.logits(hidden[c0:c0 + chunk])
            self.logits.append(le)
            self.logp.append(log_softmax(le))


def compare(model: Model, exact, mac_hidden: np.ndarray, targets: Sequence[int],
            chunk: int = 512) -> dict:
    """Per position: KL(exact ‖ MAC) of the next-token distributions (nats), the NLL of the
    target token under each, whether the argmax agrees, and max |Δ logit|. `exact`: the
    exact run's final hidden states, or their ExactLogits (made with the same chunk)."""
    if not isinstance(exact, ExactLogits):
        exact = ExactLogits(model, exact, chunk)
    if exact.chunk != chunk or exact.n != mac_hidden.shape[0]:
        raise ValueError(f"ExactLogits of {exact.n} positions in chunks of {exact.chunk}, "
                         f"compared with {mac_hidden.shape[0]} in chunks of {chunk}")
    n = mac_hidden.shape[0]
    kl, nll_e, nll_m, agree, dmax = (np.empty(n) for _ in range(5))
    tg = np.asarray(targets)
    for i, c0 in enumerate(range(0, n, chunk)):
        c1 = min(n, c0 + chunk)
        le, pe = exact.logits[i], exact.logp[i]
        lm = model.logits(mac_hidden[c0:c1])
        pm = log_softmax(lm)
        r = np.arange(c1 - c0)
        nll_e[c0:c1] = -pe[r, tg[c0:c1]]
        nll_m[c0:c1] = -pm[r, tg[c0:c1]]
        agree[c0:c1] = le.argmax(-1) == lm.argmax(-1)
        np.subtract(pe, pm, out=pm)   # pm is not needed after this: KL in its place
        pm *= np.exp(pe)
        kl[c0:c1] = pm.sum(axis=-1)
        d = le.astype(np.float64)
        d -= lm
        np.abs(d, out=d)
        dmax[c0:c1] = d.max(axis=-1)
    return dict(kl=kl, nll_exact=nll_e, nll_mac=nll_m, agree=agree, dlogit_max=dmax)


@dataclass
class Greedy:
    tokens: List[int]
    layers: List[LayerStats]
    seconds: float


def greedy(model: Model, cache: PromptCache, n_new: int, policy: Optional[Policy]) -> Greedy:
    """Greedy continuation of the cached prompt, `n_new` tokens, with exact attention (policy
    None) or MAC under `policy`; each new position runs every layer once."""
    return greedy_many(model, cache, n_new, [policy])[0]


class _GreedyRun:
    """One sequence of greedy_many: its keys and values, steppers, statistics and tokens."""

    def __init__(self, model: Model, cache: PromptCache, total: int, policy: Optional[Policy]):
        c, P = model.cfg, cache.P
        self.policy = policy
        self.steppers, self.logs, self.kt, self.vv = [], [], [], []
        if policy is None:
            # exact attention's layout (exact_attention_t), filled position by position
            for li in range(c.layers):
                kt = np.zeros((c.kv_heads, c.head_dim, total), np.float32)
                vv = np.zeros((c.kv_heads, total, c.head_dim), np.float32)
                kt[:, :, :P] = cache.k[li].transpose(1, 2, 0)
                vv[:, :P] = cache.v[li].transpose(1, 0, 2)
                self.kt.append(kt)
                self.vv.append(vv)
        else:
            for li in range(c.layers):
                st = _stepper(model, policy, li, P, total, cache)
                st.prefill(P)
                self.steppers.append(st)
                self.logs.append(StepLog(total - P, c.q_heads))
        self.tokens: List[int] = []
        self.seconds = 0.0

    def attend(self, model: Model, li: int, m: int, qp, qq, k, v) -> np.ndarray:
        t0 = time.perf_counter()
        if self.policy is None:
            self.kt[li][:, :, m] = k[0]
            self.vv[li][:, m] = v[0]
            att = exact_attention_t(qq, self.kt[li], self.vv[li], m, model.cfg.scale)
        else:
            st = self.steppers[li]
            st.append(qp[0], qq[0], k[0], v[0])
            s = st.step(m)
            att = s.out[0][None]
            self.logs[li].record(s, m)
        self.seconds += time.perf_counter() - t0
        return att


def greedy_many(model: Model, cache: PromptCache, n_new: int,
                policies: Sequence[Optional[Policy]]) -> List[Greedy]:
    """greedy() for each policy, all runs in lockstep through the model (Model.*_many, which
    reads each weight block once for all of them): the same tokens, statistics and arithmetic
    as one greedy() call per policy. Greedy.seconds: the run's attention time plus an equal
    share of the model's."""
    t0 = time.perf_counter()
    c, P = model.cfg, cache.P
    total = P + n_new
    runs = [_GreedyRun(model, cache, total, p) for p in policies]
    toks = [int(lg[0].argmax()) for lg in model.logits_many([cache.last_hidden] * len(runs))]
    for m in range(P, total):
        for r, tok in zip(runs, toks):
            r.tokens.append(tok)
        hs = [model.embed[tok][None, :] for tok in toks]
        pos = [np.array([m])] * len(runs)
        for li in range(c.layers):
            inputs = model.qkv_many(li, hs, pos)
            atts = [r.attend(model, li, m, *x) for r, x in zip(runs, inputs)]
            hs = model.after_attention_many(li, hs, atts)
        toks = [int(lg[0].argmax()) for lg in model.logits_many(hs)]
    wall = time.perf_counter() - t0
    shared = (wall - sum(r.seconds for r in runs)) / len(runs)
    out = []
    for r in runs:
        stats = [lg.into(LayerStats()) for lg in r.logs] if r.policy is not None else \
            [LayerStats() for _ in range(c.layers)]
        out.append(Greedy(tokens=r.tokens, layers=stats, seconds=r.seconds + shared))
    return out
