"""Python-side argument handling of the algebra functions: Python numbers and lists become
numpy arrays (an LSE given as a Python number takes the dtype of its o); the C++ checks the
rest and names what is wrong."""
import numpy as np

from . import _core


def _arr(x):
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def _lse(lse, o):
    """An LSE argument: a numpy array or scalar as given, a Python number in o's dtype."""
    if isinstance(lse, (np.ndarray, np.generic)):
        return np.asarray(lse)
    o = _arr(o)
    return np.asarray(lse, dtype=o.dtype if o.dtype.kind == "f" else None)


def merge(o1, lse1, o2, lse2):
    """Merge ⊕ of states over disjoint key sets (docs/semantics.md §2): ``μ = max(L1, L2)``,
    ``L = μ + ln(e^{L1−μ} + e^{L2−μ})``, ``o = e^{L1−L}·o1 + e^{L2−L}·o2``; an empty side
    (L = −inf or NaN) yields the other. o [..., D], lse [...] in float32 or float64 (all
    four alike). Returns ``(o, lse)``."""
    return _core.merge(_arr(o1), _lse(lse1, o1), _arr(o2), _lse(lse2, o2))


def downdate(o_total, lse_total, o_w, lse_w, tol=None):
    """Downdate ⊖: removes the keys W ⊂ T from a state over T (docs/semantics.md §2):
    ``t = e^{L_W − L_T}``, ``L = L_T + ln(1 − t)``, ``o = (o_T − t·o_W)/(1 − t)`` with
    ``1 − t = −expm1(L_W − L_T)``. Returns ``(o, lse, condition, emptied)``: condition
    ``1/(1 − t)`` (about log10 of it digits are lost), emptied where ``1 − t <= tol``
    (default 4 eps of the precision: W held all the mass; the state is then empty)."""
    return _core.downdate(_arr(o_total), _lse(lse_total, o_total), _arr(o_w), _lse(lse_w, o_w),
                          tol)


def rope(x, pos, theta=10000.0, style="neox"):
    """RoPE of rows x [..., D] (float32) at positions ``pos`` (one int, or x's leading
    shape): pair i rotated by ``pos·theta^(−2i/D)``; neox pairs (x_i, x_{i+D/2}), gptj
    (x_{2i}, x_{2i+1}). Evaluated in FP64, rounded once to float32, no BF16 rounding."""
    return _core.rope(_arr(x), np.asarray(pos, dtype=np.int64), float(theta), style)
