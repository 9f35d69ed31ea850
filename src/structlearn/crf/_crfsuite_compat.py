"""What makes :class:`~structlearn.LinearChainCRF` a drop-in for python-crfsuite / sklearn-crfsuite.

- CRFsuite's binary model files: :func:`to_crfsuite_model` / :func:`from_crfsuite_model` convert a fitted
  estimator to and from :class:`~structlearn.crf.crfsuite_model.CRFsuiteModel` (the bytes are
  :mod:`structlearn.crf.crfsuite_model`'s business);
- :class:`CRFsuiteTagger`: the interface of ``pycrfsuite.Tagger`` (``open``, ``set``, ``tag``,
  ``probability``, ``marginal``, ``labels``, ``info``, ``dump``) on a fitted estimator — sklearn-crfsuite's
  ``tagger_``.
"""
import types

import numpy as np

from ._potentials import ChainFeatureModel
from .features import AttributeVocabulary
from .crfsuite_model import CRFsuiteModel, read_crfsuite_model_bytes, write_crfsuite_model_bytes

__all__ = ["to_crfsuite_model", "from_crfsuite_model", "CRFsuiteTagger", "crfsuite_bytes"]


def crfsuite_incompatibility(est):
    """Why the fitted chain ``est`` has no exact CRFsuite model file, or None when it has one."""
    m = est.model_
    _, _, st, en = m.split(est.coef_)
    if m.start_end and (np.any(st != 0) or np.any(en != 0)):
        return ("it has start/end weights, which CRFsuite's model does not have; train with "
                "start_end_features=False")
    if m.n_trans_attr:
        return "it has transition attributes, which CRFsuite's model does not have"
    if m.forbidden.any() or m.forbidden_start.any() or m.forbidden_end.any():
        return "it has forbidden transitions (-inf), which CRFsuite's model cannot hold"
    return None


def to_crfsuite_model(est):
    """The :class:`CRFsuiteModel` of a fitted LinearChainCRF without start/end weights (ValueError
    otherwise)."""
    why = crfsuite_incompatibility(est)
    if why is not None:
        raise ValueError(f"this model cannot be written as a CRFsuite model file: {why}")
    m = est.model_
    ws, wt, _, _ = m.split(est.coef_)
    attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
    state = np.column_stack([attrs, m.feat_label, ws])
    i, j = np.nonzero(m.trans_features)
    trans = np.column_stack([i, j, wt[i, j]])
    return CRFsuiteModel([str(c) for c in est.classes_], [str(a) for a in est.attributes_], state, trans)


def crfsuite_bytes(est):
    """The bytes of the CRFsuite model file of ``est`` (see :func:`to_crfsuite_model`)."""
    return write_crfsuite_model_bytes(to_crfsuite_model(est))


def from_crfsuite_model(cls, model):
    """A fitted ``cls`` (LinearChainCRF) with the labels, attributes and weights of ``model``
    (``start_end_features=False``; no training log)."""
    K = len(model.labels)
    A = len(model.attributes)
    st = model.state
    order = np.lexsort((st[:, 1], st[:, 0])) if st.size else np.zeros(0, np.int64)
    st = st[order]
    a = st[:, 0].astype(np.int64)
    attr_ptr = np.concatenate([[0], np.cumsum(np.bincount(a, minlength=A))]).astype(np.int64)
    feat_label = st[:, 1].astype(np.int64)
    trans_features = np.zeros((K, K), bool)
    ti, tj = model.trans[:, 0].astype(np.int64), model.trans[:, 1].astype(np.int64)
    trans_features[ti, tj] = True
    est = cls(start_end_features=False)
    est.classes_ = list(model.labels)
    est._label_index = {c: k for k, c in enumerate(est.classes_)}
    est.attributes_ = list(model.attributes)
    est._vocab = AttributeVocabulary(est.attributes_)
    est.model_ = ChainFeatureModel(attr_ptr, feat_label, K, trans_features, start_end=False)
    coef = np.zeros(est.model_.n_params)
    ws, wt, _, _ = est.model_.split(coef)
    ws[...] = st[:, 2]
    wt[ti, tj] = model.trans[:, 2]
    est.coef_ = coef
    est.n_iter_, est.converged_, est.training_log_, est.metadata_ = 0, True, [], {}
    return est


def read_crfsuite_file(cls, path):
    """A fitted ``cls`` read from the CRFsuite model file ``path``."""
    with open(path, "rb") as fh:
        data = fh.read()
    return from_crfsuite_model(cls, read_crfsuite_model_bytes(data, name=str(path)))


class CRFsuiteTagger:
    """``pycrfsuite.Tagger``'s interface on a fitted :class:`~structlearn.LinearChainCRF`.

    ``set(xseq)`` then ``tag()``, ``probability(yseq)`` and ``marginal(label, t)`` answer for that sequence
    (or ``tag(xseq)`` directly); ``labels()`` lists the labels; ``info()`` returns the weights as
    python-crfsuite's ``ParsedDump`` does (``transitions``, ``state_features``, ``labels``,
    ``attributes``, ``header``); ``open(path)`` loads a CRFsuite model file (or a structlearn one)
    instead. Inference is the estimator's (the engine's exact chain algorithms).
    """

    def __init__(self, estimator=None):
        self._est = estimator
        self._x = None

    def open(self, path):
        """Load the model file ``path`` (CRFsuite's binary format or structlearn's)."""
        from .linear_chain import LinearChainCRF

        self._est = LinearChainCRF.load(path)
        self._x = None
        return self

    def close(self):
        self._est, self._x = None, None

    def _estimator(self):
        if self._est is None:
            raise ValueError("no model: open() a model file first")
        return self._est

    def labels(self):
        """The labels of the model, as strings (CRFsuite's labels are strings)."""
        return [str(c) for c in self._estimator().classes_]

    def set(self, xseq):
        """Set the sequence (list of items) that ``tag``, ``probability`` and ``marginal`` refer to."""
        self._x = list(xseq)

    def _current(self, xseq=None):
        if xseq is not None:
            self.set(xseq)
        if self._x is None:
            raise ValueError("no sequence: call set(xseq) first")
        return self._x

    def tag(self, xseq=None):
        """The Viterbi labels (str) of ``xseq`` (or of the sequence given to ``set``)."""
        return [str(c) for c in self._estimator().predict_single(self._current(xseq))]

    def probability(self, yseq):
        """p(yseq | x) of the current sequence."""
        est = self._estimator()
        labels = [est.classes_[self.labels().index(str(c))] for c in yseq]
        return float(est.sequence_probability([self._current()], [labels])[0])

    def marginal(self, y, pos):
        """P(y_pos = y | x) of the current sequence."""
        est = self._estimator()
        x = self._current()
        if not 0 <= pos < len(x):
            raise ValueError(f"position {pos} is outside the sequence (length {len(x)})")
        k = self.labels().index(str(y))
        return float(est.predict_marginals([x], output="array")[0][pos, k])

    def info(self):
        """The model's weights as python-crfsuite's ``ParsedDump``: ``transitions`` {(from, to): w},
        ``state_features`` {(attr, label): w}, ``labels`` {label: id}, ``attributes`` {attr: id},
        ``header`` (CRFsuite's header fields, with ``size`` in bytes when the model has a CRFsuite
        file)."""
        est = self._estimator()
        st = {(a, str(c)): w for (a, c), w in est.state_features_.items()}
        tr = {(str(a), str(b)): w for (a, b), w in est.transition_features_.items()}
        names = _file_attributes(est)
        header = {"magic": "lCRF", "type": "FOMC", "version": "100", "num_features": "0",
                  "num_labels": str(len(est.classes_)), "num_attrs": str(len(names)),
                  "size": str(est.size_)}
        return types.SimpleNamespace(
            header=header, labels={str(c): k for k, c in enumerate(est.classes_)},
            attributes={a: i for i, a in enumerate(names)}, transitions=tr, state_features=st)

    def dump(self, filename=None):
        """Write the model in CRFsuite's ``crfsuite dump`` text layout to ``filename`` (or return it)."""
        text = crfsuite_dump_text(self._estimator())
        if filename is None:
            return text
        with open(filename, "w", encoding="utf-8") as fh:
            fh.write(text)
        return None


def _file_attributes(est):
    """The attribute names a CRFsuite model file of ``est`` holds, by id: those with a non-zero state
    weight (CRFsuite leaves the others out)."""
    return [est.attributes_[a] for a in est._weighted_attribute_ids()]


def crfsuite_dump_text(est):
    """``crfsuite dump``'s text layout of a fitted chain (CRFsuite's ``crf1dm_dump``): FILEHEADER,
    LABELS, ATTRIBUTES, TRANSITIONS, STATE_FEATURES; features of weight 0 left out."""
    lines = ["FILEHEADER = {", "  magic: lCRF", f"  size: {est.size_}", "  type: FOMC", "  version: 100",
             "  num_features: 0", f"  num_labels: {len(est.classes_)}",
             f"  num_attrs: {est.num_attributes_}", "}", "", "LABELS = {"]
    lines += [f"  {k:5d}: {c}" for k, c in enumerate(est.classes_)]
    lines += ["}", "", "ATTRIBUTES = {"]
    lines += [f"  {i:5d}: {a}" for i, a in enumerate(_file_attributes(est))]
    lines += ["}", "", "TRANSITIONS = {"]
    lines += [f"  (1) {a} --> {b}: {w:f}" for (a, b), w in est.transition_features_.items()]
    lines += ["}", "", "STATE_FEATURES = {"]
    lines += [f"  (0) {a} --> {c}: {w:f}" for (a, c), w in est.state_features_.items()]
    lines += ["}", "", ""]
    return "\n".join(lines)
