"""Exact structures: ``from structlearn.structures import LinearChain``.

A thin facade over :mod:`structlearn.engine.structures` (the engine's structures: what is summed in the log
semiring or maximised in the max semiring, over the log-potentials of a packed ragged batch).
"""
from .engine.structures import (BPOptions, FactorGraph, GraphBatch, GraphInference, JunctionTree, KBest, LinearChain,
                                Marginals, SemiMarkov, SparseChain, Tree)

__all__ = ["LinearChain", "SparseChain", "SemiMarkov", "Tree", "FactorGraph", "BPOptions", "GraphInference",
           "JunctionTree", "GraphBatch", "KBest", "Marginals"]
