"""Hierarchical hidden Markov models as dynamic Bayesian networks (seed 003, Murphy & Paskin 2001): the
estimator, its DBN, exact (junction tree) and factored-frontier inference and EM:
``from structlearn.hhmm import HierarchicalHMM``.

The estimators load on first use.
"""
from ..utils.lazy import lazy_exports

_LAZY = {
    "HierarchicalHMM": "structlearn.hhmm.estimator",
    "Hierarchy": "structlearn.hhmm.model",
}

__all__ = ["HierarchicalHMM", "Hierarchy"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
