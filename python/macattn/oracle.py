"""The FP64 oracle (docs/oracle.md): exact attention with compensated sums, and the MAC
algebra of given hit decisions ("what a perfect implementation of those decisions gives")."""
from ._core import MacOracle, OracleStep
from ._core import oracle_attend as attend
from ._core import oracle_full_attention as full_attention

__all__ = ["attend", "full_attention", "MacOracle", "OracleStep"]
