"""Open any structlearn model file: :func:`load_estimator` resolves the header's ``format`` to the estimator
class that wrote it (the registry :data:`MODEL_FORMATS`), imported only when a file of that format is loaded.

The file container itself (``.npz`` arrays + JSON header, never pickle) is :mod:`structlearn.utils.modelfile`.
"""
import importlib
import os

from ..utils.modelfile import HEADER_KEY, MAGIC, ModelFileError, load_model, read_header, save_model

__all__ = ["load_estimator", "MODEL_FORMATS", "read_header", "load_model", "save_model", "ModelFileError",
           "HEADER_KEY", "MAGIC"]

# format name -> "module:Class" of the estimator that writes and reads it (``Class.load(path)``)
MODEL_FORMATS = {
    "linear-chain-crf": "structlearn.crf.linear_chain:LinearChainCRF",
    "higher-order-crf": "structlearn.crf.higher_order:HigherOrderCRF",
    "semi-markov-crf": "structlearn.crf.semi_markov:SemiMarkovCRF",
    "tree-crf": "structlearn.crf.tree:TreeCRF",
    "graph-crf": "structlearn.graph.graph_crf:GraphCRF",
    "hidden-semi-markov-model": "structlearn.hsmm.explicit_duration:HiddenSemiMarkovModel",
    "hierarchical-hmm": "structlearn.hhmm.estimator:HierarchicalHMM",
    "general-hsmm": "structlearn.hsmm.general:GeneralHSMM",
    "switching-hidden-semi-markov-model": "structlearn.hsmm.switching:SwitchingHSMM",
    "multichannel-hidden-semi-markov-model": "structlearn.hsmm.multichannel:MultiChannelHSMM",
    "adaptive-factor-hsmm": "structlearn.hsmm.adaptive:AdaptiveFactorHSMM",
    "residential-time-hmm": "structlearn.hsmm.general:ResidentialTimeHMM",
    "variable-transition-hmm": "structlearn.hsmm.general:VariableTransitionHMM",
    "hidden-markov-model": "structlearn.hmm.estimators:HiddenMarkovModel",
    "gaussian-hmm": "structlearn.hmm.estimators:GaussianHMM",
    "gmm-hmm": "structlearn.hmm.estimators:GMMHMM",
    "categorical-hmm": "structlearn.hmm.estimators:CategoricalHMM",
    "multinomial-hmm": "structlearn.hmm.estimators:MultinomialHMM",
    "poisson-hmm": "structlearn.hmm.estimators:PoissonHMM",
}


def load_estimator(path):
    """Load the estimator saved in ``path``, whatever its class: the header's ``format`` names it.

    Returns
    -------
    estimator
        ``Class.load(path)`` of the class registered for the file's format in :data:`MODEL_FORMATS`.

    Raises
    ------
    FileNotFoundError, ModelFileError
        As :func:`load_model`; ModelFileError also for a format no estimator is registered for.
    """
    path = os.fspath(path)
    fmt = read_header(path).get("format")
    target = MODEL_FORMATS.get(fmt) if isinstance(fmt, str) else None
    if target is None:
        raise ModelFileError(f"{path!r}: unknown model format {fmt!r}; known formats: "
                             f"{', '.join(MODEL_FORMATS)}")
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name).load(path)
