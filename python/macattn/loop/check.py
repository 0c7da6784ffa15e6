"""The reduced in-the-loop check CI runs (python/tests/test_inloop.py; docs/in-the-loop.md):
SmolLM2-135M teacher-forced over a 256-token prompt and 64 decode positions of the held-out
text, and it asserts the machinery, not a quality figure:

  1. exact vs exact: two exact decode passes give bit-identical hidden states, KL exactly 0;
  2. depth cap 0 ≡ every step forced to miss (gen_min past the end): bit-identical attention
     outputs in every layer and hidden states, KL exactly 0;
  3. forced miss vs exact: in every layer and at every decode position, the stepper's FP32
     output and the numpy FP32 exact attention each lie within the derived FP32 bound b of
     bounds.py of the FP64 attention over the same inputs (so they differ by at most 2b);
     end to end, the forced-miss run's KL and max |Δ logit| against exact decoding are
     measured (the noise floor of every MAC figure) and compared with the rounding twin:
     exact decoding with FP64 attention against exact decoding with FP32 attention, which
     differ by one path's rounding (≤ b) where the forced-miss run differs by two (≤ 2b);
  4. a real MAC policy (τ 0.45) hits and moves the distributions well above that floor.
"""
from __future__ import annotations

import json
import time

import numpy as np

from . import bounds
from . import model as model_mod
from . import run, text

PROMPT, DECODE = 256, 64


def run_check(m: model_mod.Model = None, prompt: int = PROMPT, decode: int = DECODE,
              verbose: bool = True) -> dict:
    t0 = time.time()
    if m is None:
        m = model_mod.load()
    t_load = time.time() - t0
    ids = text.tokens(m, text.HELDOUT_FILES, prompt + decode + 1)
    cache = run.PromptCache(m, ids[:prompt])
    dec, targets = ids[prompt:prompt + decode], ids[prompt + 1:prompt + decode + 1]
    out = dict(prompt=prompt, decode=decode, load_s=t_load)

    exact_att = []

    def keep(li, q, K, V, att, first):
        exact_att.append(att.copy())

    ex1 = run.teacher_forced(m, cache, dec, None, check_bound=keep)
    ex2 = run.teacher_forced(m, cache, dec, None)
    c = run.compare(m, ex1.hidden, ex2.hidden, targets)
    out["exact_vs_exact"] = dict(identical=bool((ex1.hidden == ex2.hidden).all()),
                                 kl_max=float(c["kl"].max()))

    bound0 = []

    def layer_ratio(li, q, K, V, att, first):
        b, o64 = bounds.fp32_attention_bound(q, K, V, first, m.cfg.scale)
        if li == 0:
            bound0.append(b)
        np_att = run.exact_attention(q, K, V, first, m.cfg.scale)
        return dict(stepper=float((np.abs(att - o64) / b).max()),
                    numpy=float((np.abs(np_att - o64) / b).max()),
                    err_max=float(np.abs(att - o64).max()),
                    bound_min=float(b.min()))

    miss_att, cap_att = [], []
    forced = run.teacher_forced(m, cache, dec, run.Policy("forced-miss", force_miss=True),
                                check_bound=lambda *a: (miss_att.append(a[4].copy()),
                                                        layer_ratio(*a))[1])
    cap0 = run.teacher_forced(m, cache, dec, run.Policy("depth-cap-0", depth_cap=0),
                              check_bound=lambda li, q, K, V, att, f: cap_att.append(att.copy()))
    out["cap0_vs_forced"] = dict(
        attention_identical=all((a == b).all() for a, b in zip(cap_att, miss_att)),
        hidden_identical=bool((cap0.hidden == forced.hidden).all()),
        cap0_would_hit=float(np.mean([ls.forced / max(1, ls.steps) for ls in cap0.layers])))
    c = run.compare(m, ex1.hidden, forced.hidden, targets)
    le = m.logits(ex1.hidden)
    top2 = np.sort(le, axis=-1)[:, -2:]
    ratios = forced.attn_check
    out["forced_vs_exact"] = dict(
        bound_ratio_stepper=max(r["stepper"] for r in ratios),
        bound_ratio_numpy=max(r["numpy"] for r in ratios),
        attn_err_max=max(r["err_max"] for r in ratios),
        layer0_attention_max_diff=float(np.abs(miss_att[0] - exact_att[0]).max()),
        layer0_diff_over_bound=float((np.abs(miss_att[0] - exact_att[0]) / (2 * bound0[0])).max()),
        kl_mean=float(c["kl"].mean()), kl_max=float(c["kl"].max()),
        dlogit_max=float(c["dlogit_max"].max()), argmax_agree=float(c["agree"].mean()),
        top2_gap_min=float((top2[:, 1] - top2[:, 0]).min()),
        # KL ≤ range_v(Δ logit)² / 8 ≤ max|Δ logit|² / 2 at each position (Hoeffding's lemma)
        kl_over_hoeffding=float((c["kl"] / (c["dlogit_max"] ** 2 / 2)).max()))
    ex64 = run.teacher_forced(m, cache, dec, None, exact_dtype=np.float64)
    c = run.compare(m, ex64.hidden, ex1.hidden, targets)
    out["fp32_vs_fp64"] = dict(kl_mean=float(c["kl"].mean()), kl_max=float(c["kl"].max()),
                               dlogit_max=float(c["dlogit_max"].max()),
                               argmax_agree=float(c["agree"].mean()))
    mac = run.teacher_forced(m, cache, dec, run.Policy("tau-0.45", tau=0.45, ring=128, tail=32))
    c = run.compare(m, ex1.hidden, mac.hidden, targets)
    out["mac_tau_0.45"] = dict(
        kl_mean=float(c["kl"].mean()),
        hit_rate=float(np.mean([ls.hits / ls.steps for ls in mac.layers])),
        keys_read=float(sum(ls.keys_read for ls in mac.layers) /
                        sum(ls.keys_full for ls in mac.layers)))
    out["seconds"] = time.time() - t0
    if verbose:
        print(json.dumps(out, indent=1))
    return out
