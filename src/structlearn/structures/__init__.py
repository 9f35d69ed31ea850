"""Exact structures: what is summed (log semiring) or maximised (max semiring) over.

Every structure holds log-potentials of a packed ragged batch (B sequences, N = sum(lengths) rows) and
offers ``log_partition``, ``marginals``, ``argmax``, ``max``, ``kbest``, ``sample``, ``entropy``,
``score`` and ``constrain``.
"""
from ._base import KBest, Marginals
from .chain import LinearChain
from .sparse_chain import SparseChain

__all__ = ["LinearChain", "SparseChain", "KBest", "Marginals"]
try:  # filled in by their own modules as they land
    from .semimarkov import SemiMarkov  # noqa: F401
    __all__.append("SemiMarkov")
except ImportError:  # pragma: no cover
    pass
try:
    from .tree import Tree  # noqa: F401
    __all__.append("Tree")
except ImportError:  # pragma: no cover
    pass
try:
    from .factor_graph import BPOptions, FactorGraph, GraphInference  # noqa: F401
    from .graphs import GraphBatch  # noqa: F401
    __all__ += ["FactorGraph", "BPOptions", "GraphInference", "GraphBatch"]
except ImportError:  # pragma: no cover
    pass
