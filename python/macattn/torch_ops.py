"""The BF16 CUDA kernels as torch custom ops (docs/python.md, "GPU").

Importing this module registers, with ``torch.library``:

* ``torch.ops.macattn.decode_step``: one MAC decode step (semantics §3) over a paged KV cache
  and per-request rings, which it updates (entry(m) written where the request is ready);
* ``torch.ops.macattn.full_attention``: exact paged decode;
* ``torch.ops.macattn.prefill_entries``: ring entries for prompt positions.

They run on the current CUDA stream, can be captured in a CUDA graph (they launch kernels
only: no allocation outside torch's allocator, no synchronisation, except prefill_entries,
which is not for capture), and have fake implementations, so ``torch.compile`` traces them.
Their outputs are those of the C++ API (``mac::cuda::Engine``) on the same inputs, bit for
bit: the ops pass the tensors' device addresses to it through ``macattn._core.cuda``.

``MacDecodeState`` owns one layer's rings, readiness and epochs. Engines (workspace, side
stream) are made outside any capture by ``engine()``, which returns the integer handle the
ops take; steps on one stream may share one.

Layouts (every tensor on one CUDA device; the head dimension D contiguous):
  q_post, q_pre          [N, Hq, D] bfloat16 (row and head strides multiples of 8)
  k_cache, v_cache       [num_pages, page_size, Hkv, D] bfloat16, any strides but D's
                         (an HND pool is a permuted view), the same strides for both
  page_table             [N, max_pages_per_row] int32, contiguous
  kv_len                 [N] int32 = m + 1, position m's own key already in the cache
  slot                   [N] int32 request slot of each row
  ring_q_pre, ring_o     [R, M, Hq, D] bfloat16;  ring_lse [R, M, Hq] float32 (natural log,
                         -inf = empty);  ready, epoch_a, epoch_b [R] int32
  out [N, Hq, D] bfloat16, lse [N, Hq] float32 (natural log)
"""
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _core

_cu = _core.cuda
InputError = _core.InputError

_ENGINES = {}    # handle -> _core.cuda.Engine
_HANDLES = {}    # configuration -> handle


def engine(*, num_q_heads: int, num_kv_heads: int, head_dim: int, max_batch: int,
           max_context: int = _cu.MAX_CONTEXT, ring: int = 512, device=None, **options) -> int:
    """The handle of an engine for steps of this shape (made on first use, then shared).

    ``options`` are the other ``mac::cuda::EngineConfig`` fields (kv_chunk, k3_mode, amend,
    schedule, dependent_launch, and the Tuning fields). Making an engine allocates and
    synchronises: call this before any CUDA-graph capture (MacDecodeState does, when made).
    This is the one place engines are made: where the C++ API takes a caller-owned
    workspace, it is allocated here."""
    dev = _device(device)
    key = (dev.index, num_q_heads, num_kv_heads, head_dim, max_batch, max_context, ring,
           tuple(sorted(options.items())))
    h = _HANDLES.get(key)
    if h is None:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("macattn.torch_ops.engine: an engine cannot be made during CUDA "
                               "graph capture; make it (or the MacDecodeState) before capturing")
        e = _cu.Engine(max_batch, num_q_heads, num_kv_heads, head_dim, max_context=max_context,
                       ring=ring, device=dev.index, **options)
        h = len(_ENGINES) + 1
        _ENGINES[h] = e
        _HANDLES[key] = h
    return h


def engine_object(handle: int):
    """The ``_core.cuda.Engine`` of a handle (for direct C++-API calls, e.g. benchmarks)."""
    try:
        return _ENGINES[handle]
    except KeyError:
        raise InputError(f"engine handle {handle} was not made by macattn.torch_ops.engine")


def _device(device) -> torch.device:
    if device is None:
        return torch.device("cuda", torch.cuda.current_device())
    d = torch.device(device)
    if d.type != "cuda":
        raise InputError(f"device {d}: the macattn kernels run on CUDA devices")
    return d if d.index is not None else torch.device("cuda", torch.cuda.current_device())


def _check(name: str, t: Tensor, dtype, ndim: int, dims: str, device: torch.device):
    if not isinstance(t, Tensor):
        raise InputError(f"{name}: a torch.Tensor is required, got {type(t).__name__}")
    if t.dtype != dtype:
        raise InputError(f"{name}: dtype {t.dtype} where {dtype} {dims} is required")
    if t.dim() != ndim:
        raise InputError(f"{name}: shape {list(t.shape)} where {dims} is required")
    device = _device(device)
    if t.device != device:
        raise InputError(f"{name}: on {t.device}, the step runs on {device}")
    if ndim and t.numel() and t.stride(-1) != 1:
        raise InputError(f"{name}: its last dimension must be contiguous (strides "
                         f"{list(t.stride())})")


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


def _kv_params(p, k_cache: Tensor, v_cache: Tensor, page_table: Tensor, dev: torch.device):
    """Fills the paged-KV fields of DecodeParams p from the pools and the page table."""
    _check("k_cache", k_cache, torch.bfloat16, 4, "[num_pages, page_size, Hkv, D]", dev)
    _check("v_cache", v_cache, torch.bfloat16, 4, "[num_pages, page_size, Hkv, D]", dev)
    if v_cache.shape != k_cache.shape or v_cache.stride() != k_cache.stride():
        raise InputError(f"v_cache: shape {list(v_cache.shape)}, strides {list(v_cache.stride())}"
                         f" differ from k_cache's {list(k_cache.shape)}, "
                         f"{list(k_cache.stride())}")
    _check("page_table", page_table, torch.int32, 2, "[N, max_pages_per_row]", dev)
    if not page_table.is_contiguous():
        raise InputError("page_table: must be contiguous (its row stride is max_pages_per_row)")
    p.k_cache, p.v_cache = k_cache.data_ptr(), v_cache.data_ptr()
    p.num_pages, p.page_size = k_cache.shape[0], k_cache.shape[1]
    p.kv_page_stride, p.kv_token_stride, p.kv_head_stride = k_cache.stride()[:3]
    p.page_table, p.max_pages_per_row = page_table.data_ptr(), page_table.shape[1]


def _ring_params(p, ring_q_pre, ring_o, ring_lse, dev):
    _check("ring_q_pre", ring_q_pre, torch.bfloat16, 4, "[R, M, Hq, D]", dev)
    _check("ring_o", ring_o, torch.bfloat16, 4, "[R, M, Hq, D]", dev)
    _check("ring_lse", ring_lse, torch.float32, 3, "[R, M, Hq]", dev)
    for n, t in (("ring_q_pre", ring_q_pre), ("ring_o", ring_o), ("ring_lse", ring_lse)):
        if not t.is_contiguous():
            raise InputError(f"{n}: must be contiguous")
    if ring_o.shape != ring_q_pre.shape or ring_lse.shape != ring_q_pre.shape[:3]:
        raise InputError(f"rings: ring_q_pre {list(ring_q_pre.shape)}, ring_o "
                         f"{list(ring_o.shape)} and ring_lse {list(ring_lse.shape)} must be "
                         "[R, M, Hq, D], [R, M, Hq, D] and [R, M, Hq]")
    p.ring_q_pre, p.ring_o, p.ring_lse = ring_q_pre.data_ptr(), ring_o.data_ptr(), ring_lse.data_ptr()
    p.num_slots, p.ring = ring_q_pre.shape[0], ring_q_pre.shape[1]


def _q_strides(t: Tensor) -> Tuple[int, int]:
    """Row and head strides of a [N, Hq, D] query as the kernels read it: a dimension of
    size 1 is never stepped over, so its stride is taken as the packed one."""
    n, h, d = t.shape
    head = t.stride(1) if h > 1 else d
    return (t.stride(0) if n > 1 else h * head), head


def _q_params(p, q_post: Tensor, q_pre: Optional[Tensor], dev):
    """Points p at the queries; returns the tensors the step reads (keep them alive until
    it has run). The kernels take one pair of strides for q_post and q_pre: where the two
    differ, both are copied to the packed layout (on the current stream, so also inside a
    CUDA-graph capture)."""
    _check("q_post", q_post, torch.bfloat16, 3, "[N, Hq, D]", dev)
    if q_pre is not None:
        _check("q_pre", q_pre, torch.bfloat16, 3, "[N, Hq, D]", dev)
        if q_pre.shape != q_post.shape:
            raise InputError(f"q_pre: shape {list(q_pre.shape)} differs from q_post's "
                             f"{list(q_post.shape)}")
        if _q_strides(q_pre) != _q_strides(q_post):
            q_pre, q_post = q_pre.contiguous(), q_post.contiguous()
        p.q_pre = q_pre.data_ptr()
    p.batch = q_post.shape[0]
    p.q_post = q_post.data_ptr()
    p.q_row_stride, p.q_head_stride = _q_strides(q_post)
    return q_post, q_pre


def _outputs(q_post: Tensor, diagnostics: bool):
    N, Hq, _ = q_post.shape
    out = torch.empty(q_post.shape, dtype=torch.bfloat16, device=q_post.device)
    lse = torch.empty((N, Hq), dtype=torch.float32, device=q_post.device)
    shape = (N, Hq) if diagnostics else (0,)
    diag = (torch.empty(shape, dtype=torch.int8, device=q_post.device),
            torch.empty(shape, dtype=torch.int64, device=q_post.device),
            torch.empty(shape, dtype=torch.float32, device=q_post.device),
            torch.empty(shape, dtype=torch.int32, device=q_post.device))
    return out, lse, diag


@torch.library.custom_op("macattn::decode_step",
                         mutates_args=("ring_q_pre", "ring_o", "ring_lse"), device_types="cuda")
def decode_step(engine: int, q_post: Tensor, q_pre: Tensor, k_cache: Tensor, v_cache: Tensor,
                page_table: Tensor, kv_len: Tensor, slot: Tensor, ring_q_pre: Tensor,
                ring_o: Tensor, ring_lse: Tensor, ready: Tensor, epoch_a: Tensor,
                epoch_b: Tensor, softmax_scale: float, tau: float, tail: int, sinks: int,
                gen_min: int, diagnostics: bool = True
                ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """One MAC decode step; returns (out [N, Hq, D] bf16, lse [N, Hq] f32, hit [N, Hq] int8,
    match_pos [N, Hq] int64 (-1 on a miss), d2 [N, Hq] f32 (NaN if no candidate), keys_read
    [N, Hq] int32); the four diagnostics are empty ([0]) when ``diagnostics`` is False."""
    dev = q_post.device
    e = engine_object(engine)
    p = _cu.DecodeParams()
    q_post, q_pre = _q_params(p, q_post, q_pre, dev)
    _kv_params(p, k_cache, v_cache, page_table, dev)
    _ring_params(p, ring_q_pre, ring_o, ring_lse, dev)
    for n, t in (("kv_len", kv_len), ("slot", slot)):
        _check(n, t, torch.int32, 1, "[N]", dev)
    for n, t in (("ready", ready), ("epoch_a", epoch_a), ("epoch_b", epoch_b)):
        _check(n, t, torch.int32, 1, "[R]", dev)
    p.kv_len, p.slot = kv_len.data_ptr(), slot.data_ptr()
    p.ready, p.epoch_a, p.epoch_b = ready.data_ptr(), epoch_a.data_ptr(), epoch_b.data_ptr()
    p.softmax_scale, p.tau, p.tail, p.sinks, p.gen_min = softmax_scale, tau, tail, sinks, gen_min
    out, lse, diag = _outputs(q_post, diagnostics)
    p.out, p.lse = out.data_ptr(), lse.data_ptr()
    if diagnostics:
        p.diag_hit, p.diag_match_pos, p.diag_d2, p.diag_keys_read = (t.data_ptr() for t in diag)
    with torch.cuda.device(dev):
        e.mac_step(p, _stream(dev))
    return (out, lse) + diag


@decode_step.register_fake
def _(engine, q_post, q_pre, k_cache, v_cache, page_table, kv_len, slot, ring_q_pre, ring_o,
      ring_lse, ready, epoch_a, epoch_b, softmax_scale, tau, tail, sinks, gen_min,
      diagnostics=True):
    out, lse, diag = _outputs(q_post, diagnostics)
    return (out, lse) + diag


@torch.library.custom_op("macattn::full_attention", mutates_args=(), device_types="cuda")
def full_attention(engine: int, q_post: Tensor, k_cache: Tensor, v_cache: Tensor,
                   page_table: Tensor, kv_len: Tensor, softmax_scale: float, tail: int = 0,
                   sinks: int = 0) -> Tuple[Tensor, Tensor]:
    """Exact paged decode of every row: (out [N, Hq, D] bf16, lse [N, Hq] f32). The kernels
    split the keys as a missing MAC step does ([0, E(m)) and the tail [E(m), m], E from
    ``tail`` and ``sinks``), so with a state's r and F a row equals decode_step's output for
    a row that is not eligible, bit for bit; the split changes only the rounding."""
    dev = q_post.device
    e = engine_object(engine)
    p = _cu.DecodeParams()
    q_post, _ = _q_params(p, q_post, None, dev)
    _kv_params(p, k_cache, v_cache, page_table, dev)
    _check("kv_len", kv_len, torch.int32, 1, "[N]", dev)
    p.kv_len, p.softmax_scale = kv_len.data_ptr(), softmax_scale
    p.ring, p.tail, p.sinks = e.ring, tail, sinks
    out, lse, _ = _outputs(q_post, False)
    p.out, p.lse = out.data_ptr(), lse.data_ptr()
    with torch.cuda.device(dev):
        e.full_attention(p, _stream(dev))
    return out, lse


@full_attention.register_fake
def _(engine, q_post, k_cache, v_cache, page_table, kv_len, softmax_scale, tail=0, sinks=0):
    out, lse, _ = _outputs(q_post, False)
    return out, lse


@torch.library.custom_op("macattn::prefill_entries",
                         mutates_args=("ring_q_pre", "ring_o", "ring_lse"), device_types="cuda")
def prefill_entries(engine: int, q_post: Tensor, q_pre: Tensor, k_cache: Tensor,
                    v_cache: Tensor, page_table: Tensor, ring_q_pre: Tensor, ring_o: Tensor,
                    ring_lse: Tensor, first_pos: List[int], slot: List[int],
                    softmax_scale: float, tail: int, sinks: int) -> None:
    """Ring entries for prompt positions: request i (row i of page_table) gets, for
    p = first_pos[i] + j, j < n, in slot[i]: q̃_p and attn(q_p, [Fe(E(p)), E(p))).
    q_post, q_pre: [B, n, Hq, D] bf16. Synchronises the stream; not for graph capture."""
    dev = q_post.device
    e = engine_object(engine)
    for n, t in (("q_post", q_post), ("q_pre", q_pre)):
        _check(n, t, torch.bfloat16, 4, "[B, n, Hq, D]", dev)
    if q_pre.shape != q_post.shape:
        raise InputError(f"q_pre: shape {list(q_pre.shape)} differs from q_post's "
                         f"{list(q_post.shape)}")
    B, n = q_post.shape[:2]
    q_post, q_pre = q_post.contiguous(), q_pre.contiguous()
    p = _cu.DecodeParams()
    _kv_params(p, k_cache, v_cache, page_table, dev)
    _ring_params(p, ring_q_pre, ring_o, ring_lse, dev)
    p.softmax_scale, p.tail, p.sinks = softmax_scale, tail, sinks
    with torch.cuda.device(dev):
        e.prefill_entries(p, B, n, list(first_pos), list(slot), q_pre.data_ptr(),
                          q_post.data_ptr(), _stream(dev))


@prefill_entries.register_fake
def _(engine, q_post, q_pre, k_cache, v_cache, page_table, ring_q_pre, ring_o, ring_lse,
      first_pos, slot, softmax_scale, tail, sinks):
    return None


class MacDecodeState:
    """One layer's MAC state for R request slots: the rings (q̃, o, L of the last M
    positions per query head), readiness and epochs (semantics §3.2), the MAC parameters, and
    the engine its steps run on. The paged KV cache is the caller's.

    A slot is ready iff ready != 0 and epoch_a == epoch_b: ``prefill`` (or ``begin_rebuild``
    ... ``mark_ready``) brackets writing a slot's entries, ``release`` retires it. A step on a
    slot that is not ready is exact attention and writes no entry, so a captured graph can
    be replayed while caches are rebuilt."""

    def __init__(self, *, num_slots: int, num_q_heads: int, num_kv_heads: int, head_dim: int,
                 max_batch: int, softmax_scale: float, max_context: int = _cu.MAX_CONTEXT,
                 ring: int = 512, tau: float = 0.45, tail: int = 256, sinks: int = 0,
                 gen_min: int = 2048, device=None, engine_options: Optional[dict] = None):
        dev = _device(device)
        if num_slots < 1:
            raise InputError(f"num_slots = {num_slots} must be >= 1")
        self.device = dev
        self.num_q_heads, self.head_dim = num_q_heads, head_dim
        self.softmax_scale, self.tau, self.tail = float(softmax_scale), float(tau), int(tail)
        self.sinks, self.gen_min, self.ring = int(sinks), int(gen_min), int(ring)
        _core.MacParams(tau=tau, ring=ring, tail=tail, sinks=sinks, gen_min=gen_min).validate()
        self.engine = engine(num_q_heads=num_q_heads, num_kv_heads=num_kv_heads,
                             head_dim=head_dim, max_batch=max_batch, max_context=max_context,
                             ring=ring, device=dev, **(engine_options or {}))
        R, M, Hq, D = num_slots, ring, num_q_heads, head_dim
        self.ring_q_pre = torch.zeros((R, M, Hq, D), dtype=torch.bfloat16, device=dev)
        self.ring_o = torch.zeros((R, M, Hq, D), dtype=torch.bfloat16, device=dev)
        self.ring_lse = torch.full((R, M, Hq), float("-inf"), dtype=torch.float32, device=dev)
        self.ready = torch.zeros(R, dtype=torch.int32, device=dev)
        self.epoch_a = torch.zeros(R, dtype=torch.int32, device=dev)
        self.epoch_b = torch.zeros(R, dtype=torch.int32, device=dev)

    def decode_step(self, q_post, q_pre, k_cache, v_cache, page_table, kv_len, slot,
                    diagnostics: bool = True):
        """``torch.ops.macattn.decode_step`` on this state's rings and parameters."""
        return torch.ops.macattn.decode_step(
            self.engine, q_post, q_pre, k_cache, v_cache, page_table, kv_len, slot,
            self.ring_q_pre, self.ring_o, self.ring_lse, self.ready, self.epoch_a, self.epoch_b,
            self.softmax_scale, self.tau, self.tail, self.sinks, self.gen_min, diagnostics)

    def full_attention(self, q_post, k_cache, v_cache, page_table, kv_len):
        """``torch.ops.macattn.full_attention`` with this state's engine, scale, r and F (so
        that its rows equal decode_step's ineligible rows bit for bit)."""
        return torch.ops.macattn.full_attention(self.engine, q_post, k_cache, v_cache,
                                                page_table, kv_len, self.softmax_scale,
                                                self.tail, self.sinks)

    def prefill(self, q_post, q_pre, k_cache, v_cache, page_table, first_pos: Sequence[int],
                slots: Sequence[int]):
        """Writes the prompt entries of requests (row i of page_table) into ``slots[i]`` and
        marks those slots ready; q_post, q_pre [B, n, Hq, D] hold positions first_pos[i] + j.
        Typically first_pos = max(0, P - M) and n = P - first_pos."""
        slots = list(slots)
        self.begin_rebuild(slots)
        torch.ops.macattn.prefill_entries(
            self.engine, q_post, q_pre, k_cache, v_cache, page_table, self.ring_q_pre,
            self.ring_o, self.ring_lse, list(first_pos), slots, self.softmax_scale, self.tail,
            self.sinks)
        self.mark_ready(slots)

    def begin_rebuild(self, slots: Sequence[int]):
        """Marks slots not ready (epoch_a advances) while their entries are rewritten."""
        idx = torch.as_tensor(list(slots), dtype=torch.long, device=self.device)
        self.epoch_a[idx] += 1

    def mark_ready(self, slots: Sequence[int]):
        """Marks slots ready: epochs equal, ready = 1."""
        idx = torch.as_tensor(list(slots), dtype=torch.long, device=self.device)
        self.epoch_b[idx] = self.epoch_a[idx]
        self.ready[idx] = 1

    def release(self, slots: Sequence[int]):
        """Retires slots: not ready, every entry empty."""
        idx = torch.as_tensor(list(slots), dtype=torch.long, device=self.device)
        self.ready[idx] = 0
        self.ring_lse[idx] = float("-inf")


__all__ = ["engine", "engine_object", "decode_step", "full_attention", "prefill_entries",
           "MacDecodeState"]
