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
    "linear-chain-crf": "structlearn.estimators.crf:LinearChainCRF",
    "higher-order-crf": "structlearn.estimators.higher_order:HigherOrderCRF",
    "semi-markov-crf": "structlearn.estimators.semicrf:SemiMarkovCRF",
    "tree-crf": "structlearn.estimators.tree_crf:TreeCRF",
    "graph-crf": "structlearn.estimators.graph_crf:GraphCRF",
    "hidden-semi-markov-model": "structlearn.estimators.hsmm:HiddenSemiMarkovModel",
    "hierarchical-hmm": "structlearn.estimators.hhmm:HierarchicalHMM",
    "general-hsmm": "structlearn.estimators.general_hsmm:GeneralHSMM",
    "switching-hidden-semi-markov-model": "structlearn.estimators.switching_hsmm:SwitchingHSMM",
    "multichannel-hidden-semi-markov-model": "structlearn.estimators.multichannel_hsmm:MultiChannelHSMM",
    "adaptive-factor-hsmm": "structlearn.estimators.adaptive_hsmm:AdaptiveFactorHSMM",
    "residential-time-hmm": "structlearn.estimators.general_hsmm:ResidentialTimeHMM",
    "variable-transition-hmm": "structlearn.estimators.general_hsmm:VariableTransitionHMM",
    "hidden-markov-model": "structlearn.estimators.hmm:HiddenMarkovModel",
    "gaussian-hmm": "structlearn.estimators.hmm:GaussianHMM",
    "gmm-hmm": "structlearn.estimators.hmm:GMMHMM",
    "categorical-hmm": "structlearn.estimators.hmm:CategoricalHMM",
    "multinomial-hmm": "structlearn.estimators.hmm:MultinomialHMM",
    "poisson-hmm": "structlearn.estimators.hmm:PoissonHMM",
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
