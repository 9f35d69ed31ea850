"""Conditional random fields on loopy graphs learnt from partial labels (seed 002): ``GraphCRF`` (tree BP,
loopy BP, TRW, exact) and ``AdaBoostMRF``: ``from structlearn.graph import GraphCRF``.

The estimators load on first use.
"""
from ..utils.lazy import lazy_exports

_LAZY = {
    "GraphCRF": "structlearn.graph.graph_crf",
    "AdaBoostMRF": "structlearn.graph.adaboost_mrf",
}

__all__ = ["GraphCRF", "AdaBoostMRF"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
