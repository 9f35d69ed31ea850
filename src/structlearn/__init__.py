"""structlearn: structured probabilistic models for sequences, segments, trees, hierarchies and graphs."""
__version__ = "0.1.0"

from . import _threading

# Numba's fork- and thread-safe layer (TBB), chosen before any kernel runs: now if Numba is loaded, else when
# it is imported (so that the import of structlearn itself does not load Numba)
_threading.install()

_LAZY = {
    "LinearChainCRF": "structlearn.crf.linear_chain",
    "SemiMarkovCRF": "structlearn.crf.semi_markov",
    "HigherOrderCRF": "structlearn.crf.higher_order",
    "TreeCRF": "structlearn.crf.tree",
    "GraphCRF": "structlearn.graph.graph_crf",
    "AdaBoostMRF": "structlearn.graph.adaboost_mrf",
    "HiddenSemiMarkovModel": "structlearn.hsmm.explicit_duration",
    "HierarchicalHMM": "structlearn.hhmm.estimator",
    "GeneralHSMM": "structlearn.hsmm.general",
    "SwitchingHSMM": "structlearn.hsmm.switching",
    "MultiChannelHSMM": "structlearn.hsmm.multichannel",
    "AdaptiveFactorHSMM": "structlearn.hsmm.adaptive",
    "VariableTransitionHMM": "structlearn.hsmm.general",
    "ResidentialTimeHMM": "structlearn.hsmm.general",
    "HiddenMarkovModel": "structlearn.hmm.estimators",
    "GaussianHMM": "structlearn.hmm.estimators",
    "GMMHMM": "structlearn.hmm.estimators",
    "CategoricalHMM": "structlearn.hmm.estimators",
    "MultinomialHMM": "structlearn.hmm.estimators",
    "PoissonHMM": "structlearn.hmm.estimators",
    "select_order": "structlearn.hsmm.order_selection",
    "OrderSelection": "structlearn.hsmm.order_selection",
    "CompilationWarning": "structlearn._compile_notice",
}



# (utils.lazy is imported on first use: the build of the tag kernels imports structlearn and checks that it
# loads no module beyond the kernels' sources)
def __getattr__(name):
    if name not in _LAZY:  # (``from . import _kernel_cache`` asks first)
        raise AttributeError(f"module 'structlearn' has no attribute {name!r}")
    from .utils.lazy import lazy_exports

    return lazy_exports(__name__, _LAZY)[0](name)


def __dir__():
    from .utils.lazy import lazy_exports

    return lazy_exports(__name__, _LAZY)[1]()
