"""Order estimation of hidden semi-Markov models: the number of states M and the longest duration D
(Yu 2010, §2.3.2).

:func:`select_order` fits an HSMM-family estimator
(:class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`,
:class:`~structlearn.hsmm.general.GeneralHSMM`,
:class:`~structlearn.hsmm.general.ResidentialTimeHMM`,
:class:`~structlearn.hsmm.general.VariableTransitionHMM`, or any estimator with ``n_states``
and ``max_duration`` parameters, ``fit(X, lengths)``, ``score(X, lengths)``, ``n_parameters()``, ``aic`` and
``bic``) on every cell of a grid of (M, D), and returns an :class:`OrderSelection`: a table of the
log-likelihood, the number of free parameters, AIC, BIC and the held-out log-likelihood of a
cross-validation over sequences, and the order chosen by one of these criteria.
"""
import inspect
import math
import numbers
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import check_cv
from sklearn.utils.parallel import Parallel, delayed

from ..utils.validation import check_lengths

__all__ = ["select_order", "OrderSelection", "CRITERIA"]

#: The selection criteria: name -> (table column, True when larger is better).
CRITERIA = {"bic": ("bic", False), "aic": ("aic", False), "cv": ("cv_log_likelihood", True)}

_LABEL_PARAMS = ("duration", "emission", "censoring")


@dataclass
class OrderSelection:
    """The result of :func:`select_order`.

    Attributes
    ----------
    table : list of dict
        One row per cell (template, M, D), in the order of the search (templates, then ``n_states``,
        then ``max_durations``). Keys: ``"estimator"`` (str, the template's label), ``"n_states"``
        (int), ``"max_duration"`` (int or None, the value set on the estimator), ``"max_duration_"``
        (int or None, the D the fit used), ``"log_likelihood"`` (float, log P(X | λ̂) of all data,
        the estimator's ``score``), ``"n_parameters"`` (int), ``"aic"``, ``"bic"`` (float, the
        estimator's own ``aic`` / ``bic`` on all data), ``"cv_log_likelihood"`` (float, the held-out
        log-likelihood summed over the folds; NaN without ``cv`` or when a fold failed),
        ``"cv_fold_log_likelihoods"`` (tuple of float, one per fold), ``"converged"`` (bool or None),
        ``"n_iter"`` (int or None, EM iterations — M-steps — of the kept restart), ``"fit_time"``
        (float, seconds of the fit on all data), ``"error"`` (str or None: ``"ExceptionType: message"``
        of a failed fit on all data; its numbers are NaN), ``"cv_error"`` (str or None, the first failed
        fold),
        ``"warnings"`` (tuple of str, the distinct warnings of the fit on all data; Python's warning
        filters are process-wide, so under joblib's threading backend a cell may miss its warnings)
        and ``"note"`` (str or None, e.g. the D of a one-state cell). Failed cells stay in the table.
    criterion : str
        The criterion the choice was made by (``"bic"``, ``"aic"`` or ``"cv"``).
    best_index_ : int
        Row of ``table`` chosen: the smallest finite AIC / BIC, or the largest finite held-out
        log-likelihood; ties go to the earlier row.
    best_params_ : dict
        ``{"n_states": M, "max_duration": D}`` of that row (``template.set_params(**best_params_)``).
    best_estimator_ : estimator
        That cell's estimator fitted on all of ``X`` (the search fits every cell on all data for its
        log-likelihood, AIC and BIC, so this is the refit on all data).
    estimators_ : list
        The fitted estimator of every row (None for a failed cell).
    n_observations : int
        N, rows of X (the BIC's log N).
    n_sequences : int
    cv_description : str or None
        The folds, in words (e.g. ``"KFold(n_splits=5) over 10 blocks (n_blocks=10)"``).
    """

    table: list
    criterion: str
    best_index_: int
    best_params_: dict
    best_estimator_: object
    estimators_: list = field(repr=False)
    n_observations: int = 0
    n_sequences: int = 0
    cv_description: str = None

    @property
    def best_row_(self):
        """The chosen row of :attr:`table` (dict)."""
        return self.table[self.best_index_]

    def best_for(self, criterion):
        """Row index the criterion ``"bic"``, ``"aic"`` or ``"cv"`` chooses (smallest finite AIC / BIC,
        largest finite held-out log-likelihood; ties to the earlier row), or None when no row has a
        finite value (e.g. ``"cv"`` without cross-validation)."""
        if criterion not in CRITERIA:
            raise ValueError(f"`criterion` must be one of {tuple(CRITERIA)}; got {criterion!r}")
        name, larger = CRITERIA[criterion]
        values = np.array([row[name] for row in self.table], dtype=np.float64)
        ok = np.isfinite(values)
        if not ok.any():
            return None
        if larger:
            return int(np.argmax(np.where(ok, values, -np.inf)))
        return int(np.argmin(np.where(ok, values, np.inf)))

    def column(self, name):
        """One column of :attr:`table` as an ndarray (float64 for the numeric columns, object otherwise)."""
        values = [row[name] for row in self.table]
        if name in ("log_likelihood", "aic", "bic", "cv_log_likelihood", "fit_time"):
            return np.array(values, dtype=np.float64)
        return np.array(values, dtype=object)

    def to_string(self):
        """The table as aligned text: one line per cell, ``*`` marks the chosen one, failed cells show
        their error in the last column."""
        has_cv = self.cv_description is not None
        head = ["", "estimator", "M", "D", "log L", "p", "AIC", "BIC"] + (["CV log L"] if has_cv else []) \
            + ["conv", "note"]
        lines = []
        for i, r in enumerate(self.table):
            D = r["max_duration"]
            d_text = "None" if D is None else str(D)
            failed = r["error"] is not None
            row = ["*" if i == self.best_index_ else "", r["estimator"], str(r["n_states"]), d_text,
                   _number(r["log_likelihood"], failed), "" if failed else str(r["n_parameters"]),
                   _number(r["aic"], failed), _number(r["bic"], failed)]
            if has_cv:
                row.append(_number(r["cv_log_likelihood"], failed))
            row.append("" if failed or r["converged"] is None else ("yes" if r["converged"] else "no"))
            notes = [r["error"] or "", "" if failed else (r["cv_error"] and f"CV: {r['cv_error']}") or "",
                     r["note"] or ""]
            row.append("; ".join(n for n in notes if n))
            lines.append(row)
        widths = [max(len(head[c]), *(len(row[c]) for row in lines)) for c in range(len(head))]
        left = {1, len(head) - 1}

        def fmt(row):
            return " ".join(v.ljust(w) if c in left else v.rjust(w)
                            for c, (v, w) in enumerate(zip(row, widths))).rstrip()

        out = [f"order selection by {self.criterion.upper()}: N = {self.n_observations} rows in "
               f"{self.n_sequences} sequence(s)" + (f"; CV: {self.cv_description}" if has_cv else ""),
               fmt(head), fmt(["-" * w for w in widths])]
        out += [fmt(row) for row in lines]
        b = self.best_row_
        out.append(f"chosen: {b['estimator']} with M = {b['n_states']}, D = {b['max_duration']}")
        return "\n".join(out)

    def __str__(self):
        return self.to_string()


def _number(v, failed):
    """``v`` with three decimals for the text table; empty for a failed cell or NaN."""
    return "" if failed or v is None or math.isnan(v) else f"{v:.3f}"


# ====================================================================================================
# validation
# ====================================================================================================
def _is_int(v):
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))


def _grid(values, name, allow_none):
    if isinstance(values, (str, bytes)) or (not allow_none and values is None):
        raise ValueError(f"`{name}` must be a non-empty sequence of integers; got {values!r}")
    if _is_int(values) or values is None:
        values = [values]
    try:
        values = list(values)
    except TypeError:
        raise ValueError(f"`{name}` must be a non-empty sequence of integers; got {values!r}") from None
    if not values:
        raise ValueError(f"`{name}` must be a non-empty sequence of integers; got an empty grid")
    out = []
    for v in values:
        if v is None and allow_none:
            pass
        elif not _is_int(v) or v < 1:
            what = "integers >= 1 or None" if allow_none else "integers >= 1"
            raise ValueError(f"`{name}` must hold {what}; got {v!r} in {values!r}")
        v = None if v is None else int(v)
        if v not in out:
            out.append(v)
    return out


def _default_label(est):
    params = est.get_params(deep=False)
    try:
        defaults = {k: p.default for k, p in inspect.signature(type(est).__init__).parameters.items()}
    except (TypeError, ValueError):
        defaults = {}
    shown = [f"{k}={v!r}" for k, v in params.items() if k in _LABEL_PARAMS and isinstance(v, str)
             and (k == "duration" or v != defaults.get(k))]
    return type(est).__name__ + (f"({', '.join(shown)})" if shown else "")


def _templates(estimator):
    if isinstance(estimator, dict):
        items = [(str(k), v) for k, v in estimator.items()]
    elif isinstance(estimator, (list, tuple)):
        items = [(None, v) for v in estimator]
    else:
        items = [(None, estimator)]
    if not items:
        raise ValueError("`estimator` must be an estimator, a list of them or a dict label -> estimator; "
                         "got an empty collection")
    out, seen = [], {}
    for label, est in items:
        if not hasattr(est, "get_params") or not all(hasattr(est, a) for a in ("fit", "score",
                                                                             "n_parameters")):
            raise ValueError(f"`estimator` must be an HSMM-family estimator (get_params, fit, score, "
                             f"n_parameters, aic, bic); got {est!r}")
        params = est.get_params(deep=False)
        missing = [p for p in ("n_states", "max_duration") if p not in params]
        if missing:
            raise ValueError(f"`estimator` {type(est).__name__} has no parameter {missing[0]!r}: the "
                             f"search sets `n_states` and `max_duration`")
        label = label if label is not None else _default_label(est)
        if label in seen:
            seen[label] += 1
            label = f"{label}#{seen[label]}"
        else:
            seen[label] = 1
        out.append((label, est))
    return out


def _units(lengths, offsets, n_blocks):
    """(start, stop) row ranges of the CV units: the sequences, or each cut into ``n_blocks`` blocks."""
    if n_blocks is None:
        return [(int(offsets[b]), int(offsets[b + 1])) for b in range(lengths.size)]
    if not _is_int(n_blocks) or n_blocks < 2:
        raise ValueError(f"`n_blocks` must be an integer >= 2 (blocks per sequence) or None; "
                         f"got {n_blocks!r}")
    short = np.flatnonzero(lengths < n_blocks)
    if short.size:
        b = int(short[0])
        raise ValueError(f"`n_blocks`={n_blocks} blocks cannot be cut from sequence {b} of length "
                         f"{int(lengths[b])}; lower `n_blocks`")
    units = []
    for b in range(lengths.size):
        edges = np.cumsum([0] + [len(a) for a in np.array_split(np.arange(lengths[b]), n_blocks)])
        units += [(int(offsets[b] + edges[k]), int(offsets[b] + edges[k + 1])) for k in range(n_blocks)]
    return units


def _folds(cv, units, groups, n_blocks):
    n = len(units)
    where = f"{n} blocks (n_blocks={n_blocks})" if n_blocks is not None else f"{n} sequences"
    if _is_int(cv):
        if cv < 2:
            raise ValueError(f"`cv` must be an integer >= 2, a splitter or an iterable of (train, test) "
                             f"index arrays; got {cv!r}")
        if cv > n:
            hint = "; pass `n_blocks` to cut a long sequence into blocks" if n_blocks is None else ""
            raise ValueError(f"`cv`={cv} folds need at least {cv} sequences to hold out; got {where}{hint}")
    try:
        splitter = check_cv(cv)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`cv` must be an integer >= 2, a splitter or an iterable of (train, test) index "
                         f"arrays; got {cv!r} ({exc})") from None
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(f"`groups` must have one entry per CV unit ({where}); got shape {groups.shape}")
    folds = []
    for k, (train, test) in enumerate(splitter.split(np.zeros((n, 1)), groups=groups)):
        train, test = np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)
        if train.size == 0 or test.size == 0 or train.min() < 0 or test.min() < 0 \
                or max(train.max(), test.max()) >= n:
            raise ValueError(f"`cv` fold {k} must hold non-empty train and test indices in [0, {n}) (over "
                             f"{where}); got {train.size} train and {test.size} test indices")
        folds.append((train, test))
    if not folds:
        raise ValueError(f"`cv` gave no folds over {where}")
    desc = f"{len(folds)} given folds" if type(splitter).__name__ == "_CVIterableWrapper" else repr(splitter)
    return folds, f"{desc} over {where}"


# ====================================================================================================
# the cells
# ====================================================================================================
def _gather(X, units, idx):
    rows = np.concatenate([np.arange(*units[i]) for i in idx])
    return X[rows], np.array([units[i][1] - units[i][0] for i in idx], dtype=np.int64)


def _fit(template, params, X, lengths):
    est = clone(template).set_params(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, lengths)
    seen = []
    for w in caught:
        text = f"{w.category.__name__}: {w.message}"
        if text not in seen:
            seen.append(text)
    return est, tuple(seen)


def _error(exc):
    return f"{type(exc).__name__}: {exc}"


def _run_full(template, params, X, lengths, errors):
    t0 = time.perf_counter()
    try:
        est, caught = _fit(template, params, X, lengths)
        out = {"log_likelihood": float(est.score(X, lengths)), "n_parameters": int(est.n_parameters()),
               "aic": float(est.aic(X, lengths)), "bic": float(est.bic(X, lengths))}
    except Exception as exc:  # noqa: BLE001 - a failed cell is a row of the table, not a crash
        if errors == "raise":
            raise
        return None, {"error": _error(exc), "fit_time": time.perf_counter() - t0}
    monitor = getattr(est, "monitor_", None)
    out.update(max_duration_=getattr(est, "max_duration_", None),
               converged=(bool(est.converged_) if hasattr(est, "converged_") else None),
               n_iter=(int(monitor.iter) if monitor is not None else None), warnings=caught,
               fit_time=time.perf_counter() - t0, error=None)
    return est, out


def _run_fold(template, params, X, units, train, test, errors):
    try:
        est, _ = _fit(template, params, *_gather(X, units, train))
        return float(est.score(*_gather(X, units, test))), None
    except Exception as exc:  # noqa: BLE001
        if errors == "raise":
            raise
        return float("nan"), _error(exc)


def _task(kind, template, params, X, lengths, units, fold, errors):
    if kind == "full":
        return _run_full(template, params, X, lengths, errors)
    return _run_fold(template, params, X, units, fold[0], fold[1], errors)


def _cells(templates, n_states, max_durations, longest, longest_unit):
    """(label, template, params, params of the CV folds, note) of every cell. A one-state model has a
    single segment per sequence (no self-transitions), so a D below the longest sequence has zero
    likelihood: such Ds become the longest sequence's length (once), and the longest CV unit's in the
    folds."""
    cells = []
    for label, est in templates:
        for M in n_states:
            done = []
            for D in max_durations:
                note, fold_D = None, D
                if M == 1 and _is_int(D) and D < longest:
                    fold_D = max(D, longest_unit) if longest_unit is not None else None
                    note = (f"M = 1 is one segment per sequence: D = {D} raised to the longest sequence "
                            f"({longest}" + (f"; {fold_D} in the CV folds)" if fold_D is not None else ")"))
                    D = longest
                if D in done:
                    continue
                done.append(D)
                cells.append((label, est, {"n_states": M, "max_duration": D},
                              {"n_states": M, "max_duration": fold_D}, note))
    return cells


# ====================================================================================================
# the search
# ====================================================================================================
def select_order(estimator, X, lengths=None, *, n_states=(1, 2, 3, 4), max_durations=None, criterion="bic",
                 cv=None, n_blocks=None, groups=None, n_jobs=None, errors="record"):
    r"""Fit an HSMM-family estimator over a grid of the number of states M and the longest duration D
    and choose the order (Yu 2010 §2.3.2) by BIC, AIC or held-out log-likelihood.

    Every cell (template, M, D) is a ``sklearn.base.clone`` of the template with
    ``set_params(n_states=M, max_duration=D)``, fitted by its own EM on all of ``X`` (log-likelihood,
    number of parameters, AIC and BIC from the estimator's ``score``, ``n_parameters``, ``aic`` and
    ``bic``) and, with ``cv``, once per fold on the training sequences and scored on the held-out ones.

    Parameters
    ----------
    estimator : estimator, list of estimators or dict str -> estimator
        Unfitted template(s): :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`,
        :class:`~structlearn.hsmm.general.GeneralHSMM`,
        :class:`~structlearn.hsmm.general.ResidentialTimeHMM`,
        :class:`~structlearn.hsmm.general.VariableTransitionHMM` or any estimator with
        ``n_states`` and ``max_duration`` parameters, ``fit(X, lengths)``, ``score(X, lengths)``,
        ``n_parameters()``, ``aic(X, lengths)`` and ``bic(X, lengths)``. Several templates (e.g.
        duration families) are searched together and compared in one table; a dict gives their
        labels (default: the class name and its ``duration`` / non-default ``emission`` and
        ``censoring``). Their other parameters (EM settings, ``random_state``, ...) are kept.
    X : array-like, shape (N, F) or (N,)
        Packed observations of all sequences, as the estimator's ``fit`` takes them.
    lengths : array-like of int, shape (B,), optional
        Sequence lengths summing to N; default one sequence.
    n_states : sequence of int >= 1, default (1, 2, 3, 4)
        The grid of M. A one-state model has one segment per sequence (there are no self-transitions),
        so for M = 1 every D shorter than the longest sequence is raised to that length (in the CV
        folds, which see shorter units, only to the longest unit; the cell's ``note`` says so), and the
        model is the i.i.d. one whenever its duration law can put all its mass at or beyond the
        sequence lengths (nonparametric, the general family; ``duration="geometric"`` only untruncated,
        with D = None: a geometric law truncated at D = T puts at most 1/T on T).
    max_durations : sequence of (int >= 1 or None), optional
        The grid of D. Default: the template's own ``max_duration``. None is the estimator's default
        (``HiddenSemiMarkovModel``: the longest sequence, or the untruncated geometric law — the HMM —
        with ``duration="geometric"``; the general family refuses it, which is recorded as an error).
    criterion : {"bic", "aic", "cv"}, default "bic"
        The smallest BIC = -2 log L + p log N, the smallest AIC = -2 log L + 2 p, or the largest
        held-out log-likelihood (needs ``cv``). Cells whose value is not finite are not chosen.
    cv : int, splitter or iterable of (train, test), optional
        Cross-validation over sequences (the units, see ``n_blocks``): an int k is
        ``sklearn.model_selection.KFold(k)`` (contiguous, not shuffled); a splitter (``KFold``,
        ``GroupKFold``, ``ShuffleSplit``, ...) is called as ``split(units, groups=groups)``; an iterable
        gives (train, test) index arrays over the units. The same folds serve every cell. The held-out
        log-likelihood of a cell is the sum over folds of ``score`` of its test units under the model
        fitted on its training units (with KFold every unit is held out once, so it is a log-likelihood
        of all the units).
    n_blocks : int >= 2, optional
        Cut every sequence into ``n_blocks`` contiguous blocks of near-equal length
        (``numpy.array_split``) and cross-validate over the blocks, each block a sequence of its own
        (e.g. for one long series such as Old Faithful or the earthquake counts). Only the folds see
        blocks: the log-likelihood, AIC and BIC are those of the original sequences. A block boundary
        cuts a segment, so blocks are scored with the estimator's censoring, as separate sequences; a
        duration longer than a block is never observed whole in the folds, so the held-out
        log-likelihood hardly tells apart Ds beyond the block length (a nonparametric law fitted on
        blocks puts no mass there).
    groups : array-like, shape (n_units,), optional
        Group of every unit (sequence or block), passed to the splitter (``GroupKFold``).
    n_jobs : int, optional
        Parallel fits (joblib; None: one unless in a ``joblib.parallel_config`` context, -1: all
        cores). One task per cell and fold.
    errors : {"record", "raise"}, default "record"
        ``"record"``: a cell whose fit (or a fold's fit or score) raises appears in the table with the
        message (e.g. a D that no sequence length can reach under ``censoring="none"``, or
        ``VariableTransitionHMM`` with M = 1, which it refuses); ``"raise"``: the first failure
        propagates.

    Returns
    -------
    OrderSelection
        ``table`` (list of dict, one per cell), ``best_index_``, ``best_params_``,
        ``best_estimator_`` (fitted on all data), ``estimators_``, ``to_string()``.

    Raises
    ------
    ValueError
        An empty grid or one with a non-integer or non-positive M or D; an unknown ``criterion`` or
        ``errors``; ``criterion="cv"`` without ``cv``; a ``cv`` with more folds than units or a bad
        splitter; a bad ``n_blocks``, ``groups`` or ``lengths``; a template without ``n_states`` /
        ``max_duration``; or no cell with a finite value of the criterion (the message lists the errors).

    Notes
    -----
    Cost: (number of cells) × (1 + number of folds) EM fits, each the estimator's own (e.g. time
    O(N·(D·M + M²)) per iteration for ``HiddenSemiMarkovModel``, O(N·(M·D)²) for the general family).
    The information criteria are the estimator's: ``n_parameters`` counts the free parameters EM
    estimates, and BIC's N is the number of rows of ``X``. For an HSMM the order is the pair (M, D)
    (Yu 2010 §2.3.2); the survey points to Ephraim & Merhav (2002, §VIII) for the order of HMMs.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"`criterion` must be one of {tuple(CRITERIA)}; got {criterion!r}")
    if errors not in ("record", "raise"):
        raise ValueError(f"`errors` must be 'record' or 'raise'; got {errors!r}")
    if criterion == "cv" and cv is None:
        raise ValueError("`criterion`='cv' needs `cv` (an int number of folds, a splitter or folds)")
    if n_blocks is not None and cv is None:
        raise ValueError("`n_blocks` cuts sequences into blocks for cross-validation; pass `cv` too")
    templates = _templates(estimator)
    n_states = _grid(n_states, "n_states", allow_none=False)
    if max_durations is not None:
        max_durations = _grid(max_durations, "max_durations", allow_none=True)
    X = np.asarray(X)
    if X.ndim not in (1, 2) or X.shape[0] == 0:
        raise ValueError(f"`X` must be a non-empty array of shape (N, F) or (N,); got shape {X.shape}")
    lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
    longest = int(lengths.max())
    folds, cv_desc, units, longest_unit = [], None, None, None
    if cv is not None:
        units = _units(lengths, offsets, n_blocks)
        folds, cv_desc = _folds(cv, units, groups, n_blocks)
        longest_unit = max(stop - start for start, stop in units)
    cells = []
    for label, t in templates:  # without a grid, every template keeps its own max_duration
        grid = max_durations if max_durations is not None else [t.get_params(deep=False)["max_duration"]]
        cells += _cells([(label, t)], n_states, grid, longest, longest_unit)

    jobs = [("full", c, None) for c in range(len(cells))] + \
        [("fold", c, k) for c in range(len(cells)) for k in range(len(folds))]
    results = Parallel(n_jobs=n_jobs)(
        delayed(_task)(kind, cells[c][1], cells[c][2] if kind == "full" else cells[c][3], X, lengths,
                       units, folds[k] if k is not None else None, errors) for kind, c, k in jobs)
    full = results[:len(cells)]
    fold_scores = np.array(results[len(cells):], dtype=object).reshape(len(cells), len(folds), 2) \
        if folds else None

    table, fitted = [], []
    for c, (label, _, params, _, note) in enumerate(cells):
        est, out = full[c]
        row = {"estimator": label, "n_states": params["n_states"], "max_duration": params["max_duration"],
               "max_duration_": None, "log_likelihood": math.nan, "n_parameters": None, "aic": math.nan,
               "bic": math.nan, "cv_log_likelihood": math.nan, "cv_fold_log_likelihoods": (),
               "converged": None, "n_iter": None, "fit_time": math.nan, "error": None, "cv_error": None,
               "warnings": (), "note": note}
        row.update(out)
        if folds:
            scores = tuple(float(s) for s in fold_scores[c, :, 0])
            errs = [f"fold {k}: {e}" for k, e in enumerate(fold_scores[c, :, 1]) if e is not None]
            row["cv_fold_log_likelihoods"] = scores
            row["cv_log_likelihood"] = math.nan if errs else float(np.sum(scores))
            row["cv_error"] = errs[0] if errs else None
        table.append(row)
        fitted.append(est)

    result = OrderSelection(table=table, criterion=criterion, best_index_=-1, best_params_=None,
                            best_estimator_=None, estimators_=fitted, n_observations=int(X.shape[0]),
                            n_sequences=int(lengths.size), cv_description=cv_desc)
    best = result.best_for(criterion)
    if best is None:
        msgs = "; ".join(f"M={r['n_states']}, D={r['max_duration']}: "
                         f"{r['error'] or r['cv_error'] or 'not finite'}" for r in table[:5])
        raise ValueError(f"no cell of the search has a finite {criterion.upper()} ({len(table)} cells; "
                         f"{msgs}{' ...' if len(table) > 5 else ''})")
    b = table[best]
    result.best_index_ = best
    result.best_params_ = {"n_states": b["n_states"], "max_duration": b["max_duration"]}
    result.best_estimator_ = fitted[best]
    return result
