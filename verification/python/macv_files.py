"""Read mac-verify's file-protocol exports and write the outputs it grades.

The file protocol certifies a kernel that lives outside C (a torch op, Triton, JAX):

    mac-verify --export DIR --caps my_caps.txt --subset smoke    # inputs, one file per case
    python my_runner.py DIR                                       # your kernel, this module
    mac-verify --grade DIR --out report.h5                        # report + certificate

A runner, with numpy arrays (the default) or torch tensors on a chosen device::

    import macv_files
    export = macv_files.Export(DIR)
    for case in export.cases():
        for step in case.steps(framework="torch", device="cuda"):
            my_kernel(step)         # reads step.q, step.k_cache, ...; writes step.o, step.lse,
                                    # step.hit, step.match_pos (step.keys_read) and ring slot
                                    # m mod M of every ready request in step.ring_*
        case.write_outputs(export.outputs_dir, name="my-kernel", version="1.2")

Every tensor is what the plugin ABI (verification/include/mac/verify/plugin_abi.h) passes, in
its layouts; docs/verification.md documents the files. With numpy, BF16 tensors are float32
arrays holding BF16-exact values; with torch they are torch.bfloat16. Before every step the
outputs are poisoned (NaN, hit 0xA5, match_pos/keys_read -2) and the KV cache holds NaN for
every token beyond each request's kv_len = m + 1; after it the helper checks that the kernel
changed none of its inputs (raising InputChanged otherwise) and records the outputs and ring
slot m mod M of every request. Needs numpy and h5py (Debian python3-numpy, python3-h5py);
torch only for framework="torch".
"""
import os

import h5py
import numpy as np

# The file protocol's names, as reference/include/mac/io/schema.hpp defines them for the driver
# (mac::io::schema::verify and its namespace files): keep the two in step.
EXPORT_SCHEMA = "mac-verify-export"  # kExportName
INPUTS_SCHEMA = "mac-verify-inputs"  # kInputsName
OUTPUTS_SCHEMA = "mac-verify-outputs"  # kOutputsName
VERSION = 1  # kFilesVersion
MANIFEST = "export.h5"  # files::kManifest
INPUTS_DIR = "inputs"  # files::kInputsDir
OUTPUTS_DIR = "outputs"  # files::kOutputsDir
# Input attributes read as int64 (files::kHeadDim ... kWritesRing) and as float64.
INT_ATTRS = ("head_dim", "num_q_heads", "num_kv_heads", "batch", "page_size", "num_pages",
             "max_pages_per_request", "ring", "tail", "sinks", "gen_min", "max_context",
             "lse_base2", "reports_keys_read", "writes_ring")
FLOAT_ATTRS = ("tau", "threshold", "softmax_scale")
RING = ("ring_q", "ring_o", "ring_lse", "ring_pos")  # files::kRingQ ... kRingPos
# macv_caps.decisions (plugin_abi.h enum macv_decisions), attribute files::kDecisions.
DECISIONS_REPORTED, DECISIONS_UNREPORTED, DECISIONS_EXACT = 0, 1, 2

BF16_NAN = np.uint16(0x7FC0)
HIT_POISON = 0xA5
INT_POISON = -2


class InputChanged(RuntimeError):
    """The kernel wrote into one of its inputs."""


def bf16_to_f32(bits):
    """BF16 bits (uint16) as float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 values rounded to BF16 (nearest, ties to even) as uint16 bits; NaN stays NaN."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, dtype=np.float32)), BF16_NAN, r)


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


class Export:
    """An export directory: its manifest (export.h5) and its cases."""

    def __init__(self, directory):
        self.directory = directory
        with h5py.File(os.path.join(directory, MANIFEST), "r") as f:
            if _text(f.attrs["schema"]) != EXPORT_SCHEMA or int(f.attrs["version"]) != VERSION:
                raise ValueError(f"{directory}/{MANIFEST} is not a {EXPORT_SCHEMA} v{VERSION}")
            self.nonce = _text(f.attrs["nonce"])
            self.caps_text = _text(f.attrs["caps"])
            ids = f["case_id"][()]
            applicable = f["applicable"][()]
            reasons = [_text(r) for r in f["reason"][()]]
        self.case_ids = [int(i) for i, a in zip(ids, applicable) if a]
        self.not_applicable = {int(i): r for i, a, r in zip(ids, applicable, reasons) if not a}
        self.outputs_dir = os.path.join(directory, OUTPUTS_DIR)

    def case(self, case_id):
        return Case(os.path.join(self.directory, INPUTS_DIR, f"case-{case_id:05d}.h5"))

    def cases(self):
        for i in self.case_ids:
            yield self.case(i)


class Step:
    """One decode step's tensors (numpy arrays or torch tensors). Inputs: s, position [B],
    ready [B], q, q_tilde [B, Hq, D], k_cache, v_cache, page_table. In/out: ring_q, ring_o
    [B, Hq, M, D], ring_lse, ring_pos [B, Hq, M] (None for a plain decode kernel, decisions =
    DECISIONS_EXACT). Outputs: o [B, Hq, D], lse, keys_read [B, Hq], and hit, match_pos [B, Hq]
    (None unless decisions = DECISIONS_REPORTED). Plain attributes: assign new tensors or write
    into these in place."""


class Case:
    """One exported case: its parameters as attributes, its tensors, and its step loop."""

    def __init__(self, path):
        self.path = path
        with h5py.File(path, "r") as f:
            a = f.attrs
            if _text(a["schema"]) != INPUTS_SCHEMA or int(a["version"]) != VERSION:
                raise ValueError(f"{path} is not a {INPUTS_SCHEMA} v{VERSION}")
            self.id = int(a["case_id"])
            self.line = _text(a["case_line"])
            self.family = _text(a["family"])
            self.nonce = _text(a["nonce"])
            self.num_steps = int(a["steps"])
            for k in INT_ATTRS:
                setattr(self, k, int(a[k]))
            for k in FLOAT_ATTRS:
                setattr(self, k, float(a[k]))
            # An export made before the decisions capability: decisions reported.
            self.decisions = int(a["decisions"]) if "decisions" in a else DECISIONS_REPORTED
            self.threshold = np.float32(self.threshold)  # thr in FP32: hit iff d2 < thr
            self.kv_layout = _text(a["kv_layout"])
            self.out_dtype = _text(a["out_dtype"])
            self.ring_o_dtype = _text(a["ring_o_dtype"])
            self.arrays = {k: f[k][()] for k in f.keys()}
        self._records = None

    # -- the step loop ---------------------------------------------------------------------
    def steps(self, framework="numpy", device="cpu", check_inputs=True):
        """Yields one Step per decode step; the kernel fills it before the next is made."""
        x = self.arrays
        B, Hq, D, M, S = self.batch, self.num_q_heads, self.head_dim, self.ring, self.num_steps
        conv = _Convert(framework, device)
        k_full, v_full = bf16_to_f32(x["k_cache"]), bf16_to_f32(x["v_cache"])
        k_work, v_work = k_full.copy(), v_full.copy()
        # Tokens at or beyond each request's prompt are not cached yet: NaN until their step.
        for b in range(B):
            for t in range(int(x["prompt"][b]), int(x["prompt"][b]) + S):
                idx = self._token(b, t)
                k_work[idx] = np.nan
                v_work[idx] = np.nan
        ring = self.decisions != DECISIONS_EXACT  # a plain decode kernel has none
        decisions = self.decisions == DECISIONS_REPORTED
        st = Step()
        st.k_cache = conv.bf16(k_work)
        st.v_cache = conv.bf16(v_work)
        st.page_table = conv.plain(x["page_table"])
        st.ready = conv.plain(x["ready"])
        st.ring_q = st.ring_o = st.ring_lse = st.ring_pos = st.hit = st.match_pos = None
        if ring:
            ring_o = x["ring_o"] if self.ring_o_dtype == "f32" else bf16_to_f32(x["ring_o"])
            st.ring_q = conv.bf16(bf16_to_f32(x["ring_q"]))
            st.ring_o = conv.value(ring_o, self.ring_o_dtype)
            st.ring_lse = conv.plain(x["ring_lse"].astype(np.float32))
            st.ring_pos = conv.plain(x["ring_pos"].astype(np.int64))
        names = ["o", "lse", "keys_read"] + (["hit", "match_pos"] if decisions else []) + (
            ["slot_q", "slot_o", "slot_lse", "slot_pos"] if ring else [])
        rec = {k: [] for k in names}
        self._records = None
        for s in range(S):
            pos = x["position"][s]
            for b in range(B):  # the key and value of position m enter the cache
                idx = self._token(b, int(pos[b]))
                conv.assign(st.k_cache, idx, k_full[idx])
                conv.assign(st.v_cache, idx, v_full[idx])
            st.s = s
            st.position = conv.plain(pos.astype(np.int64))
            st.q = conv.bf16(bf16_to_f32(x["q"][s]))
            st.q_tilde = conv.bf16(bf16_to_f32(x["q_tilde"][s]))
            st.o = conv.value(np.full((B, Hq, D), np.nan, np.float32), self.out_dtype)
            st.lse = conv.plain(np.full((B, Hq), np.nan, np.float32))
            if decisions:
                st.hit = conv.plain(np.full((B, Hq), HIT_POISON, np.uint8))
                st.match_pos = conv.plain(np.full((B, Hq), INT_POISON, np.int64))
            st.keys_read = conv.plain(np.full((B, Hq), INT_POISON, np.int64))
            inputs = ("q", "q_tilde", "k_cache", "v_cache", "page_table", "position", "ready")
            before = {k: conv.clone(getattr(st, k)) for k in inputs} if check_inputs else {}
            yield st
            for k, v in before.items():
                if not conv.equal(v, getattr(st, k)):
                    raise InputChanged(f"case {self.id} step {s}: the kernel changed input {k}")
            rec["o"].append(conv.to_f32(st.o))
            rec["lse"].append(conv.to_f32(st.lse))
            rec["keys_read"].append(conv.numpy(st.keys_read).astype(np.int64))
            if decisions:
                rec["hit"].append(conv.numpy(st.hit).astype(np.uint8))
                rec["match_pos"].append(conv.numpy(st.match_pos).astype(np.int64))
            if not ring:
                continue
            slots = pos % M  # slot m mod M of every request, as the kernel left it
            rq, ro = conv.to_bf16_bits(st.ring_q), conv.to_f32(st.ring_o)
            rl, rp = conv.to_f32(st.ring_lse), conv.numpy(st.ring_pos).astype(np.int64)
            rec["slot_q"].append(np.stack([rq[b, :, slots[b]] for b in range(B)]))
            rec["slot_o"].append(np.stack([ro[b, :, slots[b]] for b in range(B)]))
            rec["slot_lse"].append(np.stack([rl[b, :, slots[b]] for b in range(B)]))
            rec["slot_pos"].append(np.stack([rp[b, :, slots[b]] for b in range(B)]))
        rec = {k: np.stack(v) for k, v in rec.items()}
        if ring:
            rec["ring_q"], rec["ring_o"] = conv.to_bf16_bits(st.ring_q), conv.to_f32(st.ring_o)
            rec["ring_lse"] = conv.to_f32(st.ring_lse)
            rec["ring_pos"] = conv.numpy(st.ring_pos).astype(np.int64)
        self._records = rec

    def _token(self, b, t):
        """Index of token t of request b in the KV cache (page, row / head slices)."""
        page = int(self.arrays["page_table"][b, t // self.page_size])
        row = t % self.page_size
        return (page, row) if self.kv_layout == "NHD" else (page, slice(None), row)

    # -- outputs ---------------------------------------------------------------------------
    def write_outputs(self, directory, name, version):
        """Writes DIR/case-NNNNN.h5 (schema mac-verify-outputs) from the finished step loop;
        `name` and `version` are the declared identity the certificate records."""
        if self._records is None:
            raise RuntimeError(f"case {self.id}: run every step of case.steps() first")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"case-{self.id:05d}.h5")
        tmp = path + ".tmp"
        with h5py.File(tmp, "w") as f:
            f.attrs["schema"] = OUTPUTS_SCHEMA
            f.attrs["version"] = np.int64(VERSION)
            f.attrs["case_id"] = np.int64(self.id)
            f.attrs["nonce"] = self.nonce
            f.attrs["declared_name"] = str(name)
            f.attrs["declared_version"] = str(version)
            for k, v in self._records.items():
                f.create_dataset(k, data=v)
        os.replace(tmp, path)
        return path


class _Convert:
    """numpy or torch tensors for the step's arrays, and back to numpy for the files."""

    def __init__(self, framework, device):
        if framework not in ("numpy", "torch"):
            raise ValueError(f"framework '{framework}' is not numpy or torch")
        self.torch = framework == "torch"
        self.device = device
        if self.torch:
            import torch  # noqa: F401 (optional dependency)
            self.t = torch

    def plain(self, a):
        a = np.ascontiguousarray(a)
        return self.t.from_numpy(a.copy()).to(self.device) if self.torch else a.copy()

    def bf16(self, f32):
        """BF16-exact float32 values as the framework's BF16 (numpy: float32)."""
        if not self.torch:
            return np.ascontiguousarray(f32, dtype=np.float32).copy()
        bits = f32_to_bf16(f32).view(np.int16)
        return self.t.from_numpy(np.ascontiguousarray(bits)).view(self.t.bfloat16).to(self.device)

    def value(self, f32, dtype):
        return self.bf16(f32) if dtype == "bf16" else self.plain(np.asarray(f32, np.float32))

    def assign(self, dst, idx, f32):
        if self.torch:
            dst[idx] = self.bf16(f32).to(dst.dtype)
        else:
            dst[idx] = f32

    def clone(self, a):
        return a.clone() if self.torch else a.copy()

    def equal(self, a, b):
        if self.torch:
            return a.shape == b.shape and bool((a.view(self.t.int16) == b.view(self.t.int16)).all()
                                               if a.dtype == self.t.bfloat16 else self.t.equal(a, b))
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")

    def numpy(self, a):
        return a.detach().cpu().numpy() if self.torch else np.asarray(a)

    def to_f32(self, a):
        if self.torch:
            return a.detach().float().cpu().numpy()
        return np.asarray(a, dtype=np.float32)

    def to_bf16_bits(self, a):
        if self.torch and a.dtype == self.t.bfloat16:
            return a.detach().view(self.t.int16).cpu().numpy().view(np.uint16)
        return f32_to_bf16(self.to_f32(a))
