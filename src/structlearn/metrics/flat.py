"""Token-level ("flat") metrics with sklearn-crfsuite's names, so its evaluation code runs unchanged:
``flat_f1_score(y_true, y_pred, average="weighted", labels=labels)`` etc. They flatten the label
sequences and call :mod:`sklearn.metrics` (imported on the first call: ``import structlearn.metrics``, as
``structlearn tag -t`` does, does not import scikit-learn)."""
import importlib


class _LazySklearnMetrics:
    """:mod:`sklearn.metrics`, imported when a function of it is first looked up."""

    def __getattr__(self, name):
        return getattr(importlib.import_module("sklearn.metrics"), name)


_m = _LazySklearnMetrics()


def _flatten(y_true, y_pred):
    if len(y_true) != len(y_pred):
        raise ValueError(f"`y_true` has {len(y_true)} sequences but `y_pred` has {len(y_pred)}")
    ft, fp = [], []
    for s, (a, b) in enumerate(zip(y_true, y_pred)):
        if len(a) != len(b):
            raise ValueError(f"sequence {s}: {len(a)} true labels but {len(b)} predicted")
        ft.extend(a)
        fp.extend(b)
    return ft, fp


def flat_accuracy_score(y_true, y_pred):
    """Token accuracy over all sequences."""
    return _m.accuracy_score(*_flatten(y_true, y_pred))


def flat_precision_score(y_true, y_pred, **kwargs):
    """sklearn's precision_score on the flattened labels (keyword arguments as there). Cost: time O(N) for N
    tokens."""
    return _m.precision_score(*_flatten(y_true, y_pred), **kwargs)


def flat_recall_score(y_true, y_pred, **kwargs):
    """sklearn's recall_score on the flattened labels (keyword arguments as there). Cost: time O(N) for N
    tokens."""
    return _m.recall_score(*_flatten(y_true, y_pred), **kwargs)


def flat_f1_score(y_true, y_pred, **kwargs):
    """sklearn's f1_score on the flattened labels (pass ``average=``, ``labels=`` as there)."""
    return _m.f1_score(*_flatten(y_true, y_pred), **kwargs)


def flat_fbeta_score(y_true, y_pred, beta, **kwargs):
    """sklearn's fbeta_score on the flattened labels, weight ``beta`` of recall (keyword arguments as there).
    Cost: time O(N) for N tokens."""
    return _m.fbeta_score(*_flatten(y_true, y_pred), beta=beta, **kwargs)


def flat_classification_report(y_true, y_pred, labels=None, **kwargs):
    """sklearn's classification_report on the flattened labels (``labels`` and keyword arguments as there).
    Cost: time O(N) for N tokens."""
    return _m.classification_report(*_flatten(y_true, y_pred), labels=labels, **kwargs)


def sequence_accuracy_score(y_true, y_pred):
    """Fraction of sequences labelled entirely correctly."""
    if len(y_true) != len(y_pred):
        raise ValueError(f"`y_true` has {len(y_true)} sequences but `y_pred` has {len(y_pred)}")
    if not len(y_true):
        return 0.0
    return sum(list(a) == list(b) for a, b in zip(y_true, y_pred)) / len(y_true)
