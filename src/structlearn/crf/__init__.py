"""Conditional random fields (seed 000, Sutton & McCallum; CRFsuite 0.13): linear-chain, semi-Markov,
higher-order and tree-structured CRFs, their feature models, objectives and online trainers, and CRFsuite's
model files: ``from structlearn.crf import LinearChainCRF``.

The estimators load on first use (``structlearn tag`` imports this package's feature model without them).
"""
from ..utils.lazy import lazy_exports

_LAZY = {
    "LinearChainCRF": "structlearn.crf.linear_chain",
    "SemiMarkovCRF": "structlearn.crf.semi_markov",
    "HigherOrderCRF": "structlearn.crf.higher_order",
    "TreeCRF": "structlearn.crf.tree",
}

__all__ = ["LinearChainCRF", "SemiMarkovCRF", "HigherOrderCRF", "TreeCRF"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
