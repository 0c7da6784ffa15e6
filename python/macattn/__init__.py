"""MAC-Attention from Python: the CPU reference, the FP64 oracle, the trace and run-dump
files, and (where built with CUDA) the BF16 kernels as torch ops. docs/python.md documents
every name here with examples.

CPU (numpy in, numpy out): the state algebra ``merge``/``downdate``, the canonical match
distance ``canonical_d2`` and ``d2_fp64``, BF16 rounding, ``rope``, ``Layer`` and the trace /
run-dump readers and writers, the decode ``Stepper`` and the FP64 oracle (``macattn.oracle``),
and ``simulate`` (what ``mac-sim --dump`` computes). GPU (torch in, torch out):
``import macattn.torch_ops`` registers ``torch.ops.macattn.decode_step``, ``full_attention``
and ``prefill_entries``; ``macattn.torch_ops.MacDecodeState`` owns one layer's rings.

Bad input raises ``InputError`` (a ``ValueError``) naming the argument and value.
"""
from typing import List, NamedTuple, Sequence

from . import _core
from ._core import (InputError, Layer, MacParams, NoCudaError, RunDump, Step, Stepper,
                    StepperConfig, TraceMeta, bf16_bits, bf16_from_bits, canonical_d2, d2_fp64,
                    is_bf16_exact, match_threshold, read_run_dump, read_trace_layer,
                    read_trace_meta, round_bf16, write_run_dump, write_trace)
from ._algebra import downdate, merge, rope
from ._core import cuda
from . import oracle
from .simulate import simulate

__version__ = "0.1.0"
git_commit = _core.git_commit


class Trace(NamedTuple):
    """A trace file's root attributes and layers (``read_trace``)."""
    meta: TraceMeta
    layers: List[Layer]


def read_trace(path: str, layers: Sequence[int] = (), max_tokens: int = 0) -> Trace:
    """Reads a trace file (schema mac-trace v1), validated: ``layers`` selects layers in
    that order (empty: all), ``max_tokens > 0`` keeps the first positions only."""
    meta, ls = _core.read_trace(str(path), list(layers), max_tokens)
    return Trace(meta, ls)


__all__ = [
    "InputError", "NoCudaError", "MacParams", "StepperConfig", "TraceMeta", "Layer", "Trace",
    "RunDump", "Stepper", "Step", "merge", "downdate", "canonical_d2", "d2_fp64",
    "match_threshold", "round_bf16", "is_bf16_exact", "bf16_bits", "bf16_from_bits", "rope",
    "read_trace", "read_trace_meta", "read_trace_layer", "write_trace", "read_run_dump",
    "write_run_dump", "simulate", "oracle", "cuda",
]
