"""structlearn: structured probabilistic models for sequences, segments, trees, hierarchies and graphs."""
__version__ = "0.1.0"

from . import _threading

# Numba's fork- and thread-safe layer (TBB), chosen before any kernel runs: now if Numba is loaded, else when
# it is imported (so that the import of structlearn itself does not load Numba)
_threading.install()

_LAZY = {
    "LinearChainCRF": "structlearn.estimators.crf",
    "SemiMarkovCRF": "structlearn.estimators.semicrf",
    "HigherOrderCRF": "structlearn.estimators.higher_order",
    "TreeCRF": "structlearn.estimators.tree_crf",
    "GraphCRF": "structlearn.estimators.graph_crf",
    "AdaBoostMRF": "structlearn.estimators.adaboost_mrf",
    "HiddenSemiMarkovModel": "structlearn.estimators.hsmm",
    "HierarchicalHMM": "structlearn.estimators.hhmm",
    "GeneralHSMM": "structlearn.estimators.general_hsmm",
    "SwitchingHSMM": "structlearn.estimators.switching_hsmm",
    "MultiChannelHSMM": "structlearn.estimators.multichannel_hsmm",
    "AdaptiveFactorHSMM": "structlearn.estimators.adaptive_hsmm",
    "VariableTransitionHMM": "structlearn.estimators.general_hsmm",
    "ResidentialTimeHMM": "structlearn.estimators.general_hsmm",
    "HiddenMarkovModel": "structlearn.estimators.hmm",
    "GaussianHMM": "structlearn.estimators.hmm",
    "GMMHMM": "structlearn.estimators.hmm",
    "CategoricalHMM": "structlearn.estimators.hmm",
    "MultinomialHMM": "structlearn.estimators.hmm",
    "PoissonHMM": "structlearn.estimators.hmm",
    "select_order": "structlearn.estimators.order_selection",
    "OrderSelection": "structlearn.estimators.order_selection",
    "CompilationWarning": "structlearn._compile_notice",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structlearn' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
