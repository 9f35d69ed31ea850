"""A ``linear-chain-crf`` model file opened for tagging only, without the estimator (and so without
scikit-learn): the fast path of ``structlearn tag``.

:func:`open_chain_tagger` reads the file with :func:`structlearn.utils.modelfile.load_model`, rebuilds the
feature model with :func:`structlearn.crf._decode.chain_model_from_arrays` (as
``LinearChainCRF.load`` does) and :class:`ChainTagger.predict` is
:func:`structlearn.crf._decode.predict_labels`, the function ``LinearChainCRF.predict`` calls: the
labels are those of the estimator, bit for bit. When the package's build compiled the tag kernels ahead of
time (:mod:`structlearn.engine.kernels.aot`) and the model has no transition attributes, the tagger keeps only
the weight layout (:class:`~structlearn.crf._layout.ChainLayout`) and decodes with
:func:`~structlearn.crf._decode.predict_labels_compiled`: the same labels, bit for bit, in a process
that never imports Numba. Anything else (another format, a CRFsuite ``lCRF`` file,
model files of the old attribute spelling, a malformed file) is left to the estimator
(:func:`open_chain_tagger` returns None), which reads it or says what is wrong with it.
"""
import os

import numpy as np

from ..engine.kernels import aot
from ..crf._decode import (CHAIN_FORMAT, CHAIN_FORMAT_VERSION, chain_model_from_arrays, predict_labels,
                           predict_labels_compiled)
from ..crf._layout import ChainLayout
from ..crf.features import AttributeVocabulary
from ..utils.modelfile import load_model

__all__ = ["ChainTagger", "open_chain_tagger"]

#: the attribute spelling of the model files the fast path reads
#: (``structlearn.learning.weight_files.ATTRIBUTE_SPELLING``; older files go through the estimator, which
#: aliases their attribute names)
_SPELLING = "name:value"


class ChainTagger:
    """The prediction state of a fitted ``LinearChainCRF``: Viterbi tagging only.

    Parameters
    ----------
    model : ChainFeatureModel, or ChainLayout with ``kernels``
    coef : ndarray of float64, shape (n_params,)
    classes : list
        The labels (``classes_``).
    attributes : list of str
        The attribute names (``attributes_``), indexed by attribute id.
    metadata : dict, optional
        The user metadata of the file (``metadata_``; ``structlearn learn`` stores its featurizer there).
    header : dict, optional
        The file's header.
    kernels : module, optional
        The ahead-of-time compiled tag kernels (:func:`structlearn.engine.kernels.aot.load`); None: Numba's.
    """

    def __init__(self, model, coef, classes, attributes, metadata=None, header=None, kernels=None):
        self.kernels = kernels if kernels is not None and not model.n_trans_attr else None
        self.model_ = model
        self.coef_ = coef
        self.classes_ = list(classes)
        self.attributes_ = list(attributes)
        self._vocab = AttributeVocabulary(self.attributes_)
        self.metadata_ = dict(metadata or {})
        self.header = dict(header or {})

    def predict(self, X, *, lengths=None):
        """The Viterbi labeling of every sequence: ``LinearChainCRF.predict(X)`` of the same model file.

        Parameters
        ----------
        X : list of sequences of items (dicts, lists of attribute names), or a sparse matrix with ``lengths``

        Returns
        -------
        list (B) of lists of labels

        Raises
        ------
        ValueError
            Malformed ``X``.

        Notes
        -----
        Time O(nnz · labels per attribute + N · K²), memory O(N · K) for N items and K labels.
        """
        if self.kernels is not None:
            out = predict_labels_compiled(self.model_, self.coef_, self._vocab, self.classes_, X, self.kernels,
                                          lengths=lengths)
            if out is not None:
                return out
            # no feasible labeling, or an infinite state score: the engine's error names it
        model = self.model_
        if type(model) is ChainLayout:
            model = chain_model_from_arrays(vars(model), model.n_labels)
        return predict_labels(model, self.coef_, self._vocab, self.classes_, X, lengths=lengths)


def open_chain_tagger(path):
    """A :class:`ChainTagger` of the structlearn ``linear-chain-crf`` model file ``path``, or None when the
    estimator should open it.

    None for: a file that is not a structlearn model file (e.g. CRFsuite's ``lCRF``), another format, a
    newer version, an older attribute spelling, or a file that does not load cleanly (missing or
    inconsistent entries, non-finite weights) — ``LinearChainCRF.load`` then raises the error it describes.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    ChainTagger or None

    Notes
    -----
    Reads the file once (time and memory O(file size)); imports neither scikit-learn nor the estimators.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):  # a fifo could be read only once, a folder not at all: the estimator's error
        return None
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"PK":  # an .npz is a zip archive
                return None
        header, arrays = load_model(path)
        if header.get("format") != CHAIN_FORMAT or header.get("version", 0) > CHAIN_FORMAT_VERSION:
            return None
        meta = header.get("metadata", {})
        if meta.get("attribute_spelling") != _SPELLING:
            return None
        classes = list(meta["classes"])
        coef = np.asarray(arrays["coef"], dtype=np.float64)
        kernels = aot.load()
        trans_attr = arrays.get("trans_attr")
        if trans_attr is not None and np.size(trans_attr):
            kernels = None  # time-varying transitions: the JIT engine
        model = chain_model_from_arrays(arrays, len(classes), ChainLayout if kernels is not None else None)
        tagger = ChainTagger(model, coef, classes, meta["attributes"], meta.get("user", {}), header, kernels)
    except (OSError, KeyError, TypeError, ValueError, AttributeError, NotImplementedError, RuntimeError,
            MemoryError):
        return None  # AttributeError: e.g. metadata that is not a dict; NotImplementedError, RuntimeError:
        # zipfile's, a corrupt archive; MemoryError: an array header claiming a huge shape; RecursionError (a
        # RuntimeError): a header nested too deeply
    # the consistency check of LinearChainCRF.load (which reports the file as inconsistent)
    if coef.shape != (model.n_params,) or len(tagger._vocab) != len(model.attr_ptr) - 1 \
            or not np.all(np.isfinite(coef)):
        return None
    return tagger
