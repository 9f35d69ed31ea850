"""``save`` / ``load`` shared by the CRF estimators: one versioned model file (no pickle) per model.

A class mixes in :class:`ModelFileMixin`, names its format in ``_model_format = (format, version,
estimator)`` and says what is specific to it:

- ``_file_params()`` / ``_params_from_file(params)``: hyper-parameters to and from JSON (defaults:
  ``get_params()`` without a non-integer ``random_state``, and unchanged);
- ``_file_metadata()``: JSON-able fitted state beyond classes, iterations and the training log;
- ``_file_arrays()``: numeric arrays beyond ``coef``;
- ``_restore(meta, arrays)``: rebuild the fitted state (``classes_``, the feature model, …; ``coef_``
  is already set);
- ``_file_consistent()``: whether the restored weights fit the restored model.
"""
import numpy as np

from ..utils.modelfile import ModelFileError, load_model, save_model

__all__ = ["ModelFileMixin"]


#: How a string-valued attribute ``{"w": "the"}`` is named: python-crfsuite's ``"w:the"``. Model files
#: written before (no ``attribute_spelling`` in their metadata) named it ``"w=the"``.
ATTRIBUTE_SPELLING = "name:value"


def _plain(value):
    """NumPy scalars (and those inside lists, tuples and dicts) as Python ones, for the JSON header."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _jsonable_log(log):
    return [{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in e.items()} for e in log]


def _check_entries(path, header, arrays):
    """Refuse (ModelFileError naming the entry) header entries and arrays that ``save`` never writes and
    that the estimators' restore would misread: ``params`` / ``metadata`` not objects, ``classes`` not a
    list of distinct labels as ``fit`` accepts them (str without tab or newline, int, float, bool),
    ``attributes`` / ``edge_attributes`` not a list of distinct str, a non-real ``coef``, a complex
    array."""
    for key in ("params", "metadata"):
        if not isinstance(header.get(key, {}), dict):
            raise ModelFileError(f"{path}: model file entry {key!r} must be a JSON object; got "
                                 f"{type(header[key]).__name__}")
    meta = header.get("metadata", {})
    if "classes" in meta:
        classes = meta["classes"]
        if not isinstance(classes, list):
            raise ModelFileError(f"{path}: model file entry 'classes' must be a list of labels; got "
                                 f"{classes!r:.80}")
        for i, c in enumerate(classes):
            if not isinstance(c, (str, int, float)) or isinstance(c, str) and ("\t" in c or "\n" in c):
                raise ModelFileError(f"{path}: model file entry 'classes'[{i}] must be a label (str "
                                     f"without tab or newline, int, float or bool); got {c!r:.80}")
        _check_distinct(path, "classes", classes)
    for key in ("attributes", "edge_attributes"):
        if key in meta:
            names = meta[key]
            if not isinstance(names, list):
                raise ModelFileError(f"{path}: model file entry {key!r} must be a list of attribute names "
                                     f"(str); got {names!r:.80}")
            bad = next((i for i, a in enumerate(names) if not isinstance(a, str)), None)
            if bad is not None:
                raise ModelFileError(f"{path}: model file entry {key!r}[{bad}] must be an attribute name "
                                     f"(str); got {names[bad]!r:.80}")
            _check_distinct(path, key, names)
    for name, a in arrays.items():
        if a.dtype.kind == "c" or name == "coef" and a.dtype.kind not in "fiu":
            raise ModelFileError(f"{path}: model file array {name!r} must hold real numbers; got dtype "
                                 f"{a.dtype}")


def _check_distinct(path, key, values):
    seen = {}
    for i, v in enumerate(values):
        j = seen.setdefault(v, i)
        if j != i:
            raise ModelFileError(f"{path}: model file entry {key!r} must list distinct values; {v!r:.80} "
                                 f"is both [{j}] and [{i}]")


class ModelFileMixin:
    """``save(path, metadata=None)`` and ``load(path)`` through :mod:`structlearn.utils.modelfile`."""

    _model_format = None  # (format name, version, qualified estimator name)

    def _file_params(self):
        params = self.get_params()
        rs = params.get("random_state")
        if rs is not None and not isinstance(rs, (int, np.integer)):
            params.pop("random_state")
        return params

    @classmethod
    def _params_from_file(cls, params):
        return params

    def _file_metadata(self):
        return {}

    def _file_arrays(self):
        return {}

    def _restore(self, meta, arrays):
        raise NotImplementedError

    def _file_consistent(self):
        return True

    def _alias_legacy_spelling(self):
        """Let a file of an older attribute spelling read today's input (the CRFs'; nothing by default)."""

    def save(self, path, metadata=None):
        """Write the fitted model to ``path`` (versioned ``.npz`` + JSON header; no pickle).

        The file holds hyper-parameters, labels, the feature layout and the weights; :meth:`load`
        restores a model that predicts identically. ``metadata`` (a JSON-able dict, e.g. the feature
        template used) is stored too and comes back as ``metadata_`` after :meth:`load`; a loaded model
        saved again without ``metadata`` keeps its ``metadata_``. NumPy scalar hyper-parameters are
        stored as Python numbers.

        Raises
        ------
        NotFittedError
            Not fitted.
        ValueError
            ``metadata`` not a dict, or not JSON-able.
        FileNotFoundError
            The folder of ``path`` does not exist.

        Returns
        -------
        path
        """
        self._check_fitted()
        if metadata is None:
            metadata = getattr(self, "metadata_", None) or None   # a loaded model keeps its metadata
        if metadata is not None and not isinstance(metadata, dict):
            raise ValueError(f"`metadata` must be None or a dict with str keys; got {type(metadata).__name__}")
        fmt, version, estimator = self._model_format
        classes = _plain(list(self.classes_))
        save_model(path, format_name=fmt, version=version, estimator=estimator,
                   params=_plain(self._file_params()),
                   metadata={"classes": classes, "n_iter": int(self.n_iter_), "converged": bool(self.converged_),
                             "training_log": _jsonable_log(getattr(self, "training_log_", [])),
                             "attribute_spelling": ATTRIBUTE_SPELLING,
                             **self._file_metadata(),
                             **({} if metadata is None else {"user": dict(metadata)})},
                   arrays={"coef": np.asarray(self.coef_), **self._file_arrays()})
        return path

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`.

        Raises
        ------
        FileNotFoundError, ValueError (ModelFileError)
            Missing, truncated or corrupt file; another format; a newer format version; entries that
            are missing or do not fit together.
        """
        fmt, version, _ = cls._model_format
        header, arrays = load_model(path, expected_format=fmt, supported_version=version)
        meta = header.get("metadata", {})
        _check_entries(path, header, arrays)
        try:
            est = cls(**cls._params_from_file(dict(header.get("params", {}))))
            est.coef_ = np.asarray(arrays["coef"], dtype=np.float64)
            est._restore(meta, arrays)
            if meta.get("attribute_spelling") != ATTRIBUTE_SPELLING:
                est._alias_legacy_spelling()
            est.n_iter_ = int(meta.get("n_iter", 0))
            est.converged_ = bool(meta.get("converged", True))
            est.training_log_ = list(meta.get("training_log", []))
            est.metadata_ = dict(meta.get("user", {}))
            consistent = bool(np.all(np.isfinite(est.coef_))) and est._file_consistent()
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ModelFileError):
                raise
            raise ModelFileError(f"{path}: model file is missing or has malformed entry {exc}") from None
        if not consistent:
            raise ModelFileError(f"{path}: model file is inconsistent (weights of shape {est.coef_.shape} do "
                                 f"not fit the stored model, or are not all finite)")
        return est
