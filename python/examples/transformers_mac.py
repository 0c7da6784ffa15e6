#!/usr/bin/env python3
"""MAC attention inside a transformers (v5) model, one switch per layer.

``MacAttention(layers=..., backend=...).attach(model)`` registers an attention function with
``AttentionInterface.register("macattn", ...)``, selects it on the model
(``model.set_attn_implementation("macattn")``) and hooks every decoder layer's ``q_proj`` for
the pre-RoPE queries (the attention function sees only post-RoPE ones). Then, per layer:

* layers not in ``layers`` run SDPA (transformers' own ``sdpa_attention_forward``);
* in the layers listed, a prompt pass (more than one query position) runs SDPA and records
  the prompt's q̃, q, k, v; each decode step (one query position) runs MAC:
  ``backend="reference"``: the CPU reference (one incremental ``macattn.Stepper`` per
  layer, FP32, BF16-rounded inputs); ``backend="cuda"``: ``torch.ops.macattn.decode_step``
  (one ``MacDecodeState`` and a paged BF16 copy of the layer's keys and values per layer; a
  serving engine would pass its own paged cache instead).

Batch size 1, no padding. ``stats[layer]`` counts decode steps and hits per layer.

  python3 python/examples/transformers_mac.py --backend reference --layers 0,1
runs a small randomly initialised Llama (no weights are downloaded) with MAC in the listed
layers and prints the hit counts and the logits' difference from SDPA.
"""
import argparse
import math

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

import macattn


def _bf16_exact(t: torch.Tensor) -> np.ndarray:
    """float32 numpy copy of a tensor holding BF16 values (rounded to BF16 first)."""
    return t.detach().to(torch.bfloat16).float().cpu().numpy()


class MacAttention:
    def __init__(self, layers=None, backend="reference", params=None, max_tokens=4096,
                 name="macattn", page_size=16):
        if backend not in ("reference", "cuda"):
            raise ValueError(f"backend {backend!r} is not one of: reference, cuda")
        self.layers = None if layers is None else set(layers)
        self.backend, self.max_tokens, self.name, self.page_size = backend, max_tokens, name, \
            page_size
        self.params = params or macattn.MacParams()
        self.state = {}   # layer index -> Stepper, or (MacDecodeState, k pool, v pool, table)
        self.stats = {}   # layer index -> {"steps": n, "hits": n}
        self._hooks = []

    def enabled(self, layer_idx: int) -> bool:
        """The per-layer switch: MAC in the listed layers (all when layers is None)."""
        return self.layers is None or layer_idx in self.layers

    def attach(self, model):
        AttentionInterface.register(self.name, self)
        for layer in model.model.layers:
            attn = layer.self_attn
            self._hooks.append(attn.q_proj.register_forward_hook(
                lambda mod, inp, out, attn=attn: setattr(attn, "_macattn_q_pre", out.detach())))
        model.set_attn_implementation(self.name)
        return self

    def reset(self):
        """Forgets every layer's sequence (call before a new prompt)."""
        self.state.clear()
        self.stats.clear()

    def __call__(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                 **kwargs):
        li = module.layer_idx
        if not self.enabled(li):
            return sdpa_attention_forward(module, query, key, value, attention_mask,
                                          scaling=scaling, dropout=dropout, **kwargs)
        B, Hq, S, D = query.shape
        Hkv, T = key.shape[1], key.shape[2]
        if B != 1:
            raise ValueError(f"MacAttention runs batch size 1, got {B}")
        scale = scaling if scaling is not None else 1 / math.sqrt(D)
        q_pre = module._macattn_q_pre.view(S, Hq, D)      # [S, Hq, D]: the q_proj output
        q_post = query[0].transpose(0, 1)                  # [S, Hq, D]
        k_new, v_new = key[0, :, T - S:].transpose(0, 1), value[0, :, T - S:].transpose(0, 1)
        if S > 1:  # the prompt: exact attention, and the MAC state of its positions
            out = sdpa_attention_forward(module, query, key, value, attention_mask,
                                         scaling=scaling, dropout=dropout, **kwargs)
            self._prompt(li, q_pre, q_post, k_new, v_new, Hq, Hkv, D, scale)
            return out
        o = self._decode(li, q_pre, q_post, k_new, v_new, T - 1)   # [Hq, D]
        return o.to(query.dtype).view(1, 1, Hq, D), None

    # -- the CPU reference ------------------------------------------------------------------
    def _prompt(self, li, q_pre, q_post, k, v, Hq, Hkv, D, scale):
        self.stats[li] = {"steps": 0, "hits": 0}
        if self.backend == "reference":
            st = macattn.Stepper.incremental(Hq, Hkv, D, self.max_tokens, scale, self.params)
            st.append(*(_bf16_exact(t) for t in (q_pre, q_post, k, v)))
            st.prefill()
            self.state[li] = st
        else:
            self._prompt_cuda(li, q_pre, q_post, k, v, Hq, Hkv, D, scale)

    def _decode(self, li, q_pre, q_post, k, v, m):
        if self.backend == "reference":
            st = self.state[li]
            if st.tokens != m:
                raise RuntimeError(f"layer {li}: decoding position {m} but {st.tokens} held")
            st.append(*(_bf16_exact(t[0]) for t in (q_pre, q_post, k, v)))
            s = st.step()
            self._count(li, int(s.hit.sum()))
            return torch.from_numpy(s.out[0])
        return self._decode_cuda(li, q_pre, q_post, k, v, m)

    def _count(self, li, hits):
        self.stats[li]["steps"] += 1
        self.stats[li]["hits"] += hits

    # -- the GPU ops --------------------------------------------------------------------------
    def _prompt_cuda(self, li, q_pre, q_post, k, v, Hq, Hkv, D, scale):
        from macattn import torch_ops
        p, ps, dev = self.params, self.page_size, q_post.device
        pages = (self.max_tokens + ps - 1) // ps
        k_pool = torch.zeros((pages, ps, Hkv, D), dtype=torch.bfloat16, device=dev)
        v_pool = torch.zeros_like(k_pool)
        table = torch.arange(pages, dtype=torch.int32, device=dev)[None]
        P = k.shape[0]
        k_pool.view(-1, Hkv, D)[:P] = k.to(torch.bfloat16)
        v_pool.view(-1, Hkv, D)[:P] = v.to(torch.bfloat16)
        st = torch_ops.MacDecodeState(num_slots=1, num_q_heads=Hq, num_kv_heads=Hkv,
                                      head_dim=D, max_batch=1, softmax_scale=scale,
                                      max_context=self.max_tokens, ring=p.ring, tau=p.tau,
                                      tail=p.tail, sinks=p.sinks, gen_min=p.gen_min, device=dev)
        first = max(0, P - p.ring)
        st.prefill(q_post[first:].to(torch.bfloat16)[None], q_pre[first:].to(torch.bfloat16)[None],
                   k_pool, v_pool, table, [first], [0])
        self.state[li] = (st, k_pool, v_pool, table)

    def _decode_cuda(self, li, q_pre, q_post, k, v, m):
        st, k_pool, v_pool, table = self.state[li]
        Hkv, D = k_pool.shape[2], k_pool.shape[3]
        k_pool.view(-1, Hkv, D)[m] = k[0].to(torch.bfloat16)
        v_pool.view(-1, Hkv, D)[m] = v[0].to(torch.bfloat16)
        kv_len = torch.tensor([m + 1], dtype=torch.int32, device=k_pool.device)
        slot = torch.zeros(1, dtype=torch.int32, device=k_pool.device)
        out, lse, hit, *_ = st.decode_step(q_post.to(torch.bfloat16), q_pre.to(torch.bfloat16),
                                           k_pool, v_pool, table, kv_len, slot)
        self._count(li, int(hit.sum()))
        return out[0]


def tiny_llama(seed=0, layers=2):
    """A small randomly initialised Llama: D = 64, Hq = 4, Hkv = 2 (no download)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=256, hidden_size=256, intermediate_size=512,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=64, max_position_embeddings=4096)
    return LlamaForCausalLM(cfg).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="reference", choices=["reference", "cuda"])
    ap.add_argument("--layers", default="0,1", help="layers running MAC, e.g. 0,1 (others SDPA)")
    ap.add_argument("--prompt", type=int, default=96)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--tau", type=float, default=0.45)
    a = ap.parse_args()
    dev = "cuda" if a.backend == "cuda" else "cpu"
    model = tiny_llama().to(dev)
    model.set_attn_implementation("sdpa")
    # A prompt that repeats itself, so that queries recur and the match finds them.
    ids = torch.randint(0, 256, (1, a.prompt // 4), generator=torch.Generator().manual_seed(1))
    ids = ids.repeat(1, 4).to(dev)
    with torch.inference_mode():
        ref = model.generate(ids, max_new_tokens=a.new, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)  # the model's SDPA
        mac = MacAttention(layers=[int(x) for x in a.layers.split(",") if x], backend=a.backend,
                           params=macattn.MacParams(tau=a.tau, ring=64, tail=16, gen_min=0))
        mac.attach(model)
        got = model.generate(ids, max_new_tokens=a.new, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    d = max(float((x - y).abs().max()) for x, y in zip(got.logits, ref.logits))
    print(f"per-layer decode steps and hits: {mac.stats}")
    print(f"max |logit difference| vs SDPA over {a.new} steps: {d:.3e}; tokens equal: "
          f"{bool((got.sequences == ref.sequences).all())}")


if __name__ == "__main__":
    main()
