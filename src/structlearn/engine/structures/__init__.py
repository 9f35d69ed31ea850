"""Exact structures: what is summed (log semiring) or maximised (max semiring) over.

Every structure holds log-potentials of a packed ragged batch (B sequences, N = sum(lengths) rows) and
offers ``log_partition``, ``marginals``, ``argmax``, ``max``, ``kbest``, ``sample``, ``entropy``,
``score`` and ``constrain``.
"""
from structlearn.engine.structures._base import KBest, Marginals
from structlearn.engine.structures.chain import LinearChain
from structlearn.engine.structures.factor_graph import BPOptions, FactorGraph, GraphInference, JunctionTree
from structlearn.engine.structures.graphs import GraphBatch
from structlearn.engine.structures.semimarkov import SemiMarkov
from structlearn.engine.structures.sparse_chain import SparseChain
from structlearn.engine.structures.tree import Tree

__all__ = ["LinearChain", "SparseChain", "SemiMarkov", "Tree", "FactorGraph", "BPOptions", "GraphInference",
           "JunctionTree",
           "GraphBatch", "KBest", "Marginals"]
