"""Exact structures: what is summed (log semiring) or maximised (max semiring) over.

Every structure holds log-potentials of a packed ragged batch (B sequences, N = sum(lengths) rows) and
offers ``log_partition``, ``marginals``, ``argmax``, ``max``, ``kbest``, ``sample``, ``entropy``,
``score`` and ``constrain``.
"""
from ._base import KBest, Marginals
from .chain import LinearChain
from .factor_graph import BPOptions, FactorGraph, GraphInference, JunctionTree
from .graphs import GraphBatch
from .semimarkov import SemiMarkov
from .sparse_chain import SparseChain
from .tree import Tree

__all__ = ["LinearChain", "SparseChain", "SemiMarkov", "Tree", "FactorGraph", "BPOptions", "GraphInference",
           "JunctionTree",
           "GraphBatch", "KBest", "Marginals"]
