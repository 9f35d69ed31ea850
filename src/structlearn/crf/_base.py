"""What the CRF estimators share: parameters, validation, labels, constraints, training, model files.

:class:`CRFBase` is the base of :class:`~structlearn.LinearChainCRF`, :class:`~structlearn.SemiMarkovCRF`,
:class:`~structlearn.HigherOrderCRF` and :class:`~structlearn.TreeCRF`. A subclass

- lists its ``__init__`` parameters, in signature order, as ``_parameters`` (:class:`._params.Param`,
  with default, constraint and help) and keeps an explicit ``__init__`` whose body is
  ``self._store_params(locals())`` (scikit-learn reads the signature);
- gets ``_check_params`` (every constraint, then :meth:`CRFBase._check_param_combinations`), label
  encoding, constraint masks, the fitted check, the training loop of every algorithm with its
  convergence warning (:meth:`CRFBase._train`) and the model-file plumbing.

:class:`ChainCRFBase` adds the prediction methods of CRFs over label sequences whose feature model
returns a chain-like structure (``LinearChainCRF``, ``HigherOrderCRF``).
"""
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..learning.optimizers import lbfgs
from ..learning.shards import ProcessShards, ShardedObjective
from ._decode import chain_structure, predict_labels
from .features import AttributeVocabulary
from ..learning.training import EstimatorBase, training
from ..learning.restarts import check_n_jobs, n_blocks
from ..learning.weight_files import ModelFileMixin
from ..learning.params import accepts, check_param
from ..learning.posterior_check import check_posteriors

__all__ = ["CRFBase", "ChainCRFBase", "label_key"]


def label_key(lab):
    """A label as stored in ``classes_``: str, int, float and bool labels keep their type (NumPy scalars
    become the Python ones, ``bytes`` UTF-8 text); anything else its ``str``."""
    t = type(lab)
    if t is str or t is int:
        return lab
    if isinstance(lab, np.generic):
        lab = lab.item()
    if isinstance(lab, bytes):
        return lab.decode("utf-8")
    return lab if isinstance(lab, (str, int, float)) else str(lab)


#: attribute values beyond this magnitude draw a warning at ``fit``: such an attribute needs a weight
#: ~1/|value| while indicator attributes need weights near 1, so the Hessian of the objective spans a
#: factor of at least value² in curvature; L-BFGS (m=6, CRFsuite's stopping tests) then stops after a few
#: iterations on a model that predicts one label (seen from 1e5 on separable data; 1e4 still trains)
MAX_ATTRIBUTE_VALUE = 1e4


def check_value_scale(packed, vocab):
    """Warn when an attribute value of ``packed`` exceeds :data:`MAX_ATTRIBUTE_VALUE` in magnitude, naming
    the largest value, its attribute and where it occurs. Time O(number of attribute occurrences)."""
    vals = packed.item_val
    if not vals.size:
        return
    big = np.abs(vals) > MAX_ATTRIBUTE_VALUE
    if not big.any():
        return
    pos = int(np.argmax(np.abs(vals)))
    row = int(np.searchsorted(packed.item_ptr, pos, side="right")) - 1
    seq = int(np.searchsorted(packed.offsets, row, side="right")) - 1
    names = {vocab.names[a] for a in np.unique(packed.item_attr[big])[:6]}
    n_attr = len(np.unique(packed.item_attr[big]))
    others = f" ({n_attr} attributes in all exceed it: {sorted(map(str, names))[:5]})" if n_attr > 1 else ""
    warnings.warn(f"`X`: attribute {vocab.names[packed.item_attr[pos]]!r} has the value {vals[pos]:g} (sequence "
                  f"{seq}, item {row - int(packed.offsets[seq])}); attribute values above "
                  f"{MAX_ATTRIBUTE_VALUE:g} in magnitude make training badly scaled, and L-BFGS may stop "
                  f"early on a model that predicts a single label{others}. Standardise such values (divide by "
                  f"their standard deviation) or log-transform them (log1p)", UserWarning,
                  stacklevel=_user_stacklevel())


def _user_stacklevel():
    """The ``stacklevel`` of a warning raised here that points at the first caller outside structlearn
    (the user's ``fit`` call, however deep the estimator's own helpers are)."""
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def _progress(verbose, desc):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(desc=desc, unit="it")



def _dev_counts(pred, gold, offsets, K):
    """Held-out counts in the layout of :func:`structlearn.cli.report.label_counts`: per label
    (#match, #model, #ref) as lists in ``classes_`` order, then (correct items, items, correct
    sequences, sequences)."""
    ok = pred == gold
    match = np.bincount(gold[ok], minlength=K)
    wrong = np.concatenate([[0], np.cumsum(~ok)])
    seq_ok = int(np.sum(wrong[offsets[1:]] == wrong[offsets[:-1]]))  # an empty sequence is correct
    return (match.tolist(), np.bincount(pred, minlength=K).tolist(), np.bincount(gold, minlength=K).tolist(),
            (int(ok.sum()), int(ok.size), seq_ok, len(offsets) - 1))

class CRFBase(ModelFileMixin, EstimatorBase):
    """Base of the CRF estimators (see the module docstring)."""

    _parameters = ()
    #: what the scores of ``_finite_log_z``'s message are scores of
    _score_noun = "labeling"
    _unit_noun = "sequence"

    def _alias_legacy_spelling(self):
        """Let a model file of the old spelling read today's input: every attribute ``"k=v"`` of its
        vocabularies also answers to ``"k:v"`` (unless that name is an attribute of its own), so dict input
        with string values finds the features it was trained with, and list input ``"k=v"`` still does."""
        for vocab in vars(self).values():
            if not isinstance(vocab, AttributeVocabulary):
                continue
            for name, i in list(vocab.index.items()):
                k, sep, v = name.partition("=")
                if sep and k and (k + ":" + v) not in vocab.index:
                    vocab.index[k + ":" + v] = i

    # ------------------------------------------------------------------------------------------------
    # validation
    # ------------------------------------------------------------------------------------------------
    def _check_params(self):
        for p in self._parameters:
            check_param(p, getattr(self, p.name))
        self._check_param_combinations()

    def _delta(self, algorithm):
        """``delta``, with None read as CRFsuite's default of ``algorithm`` (l2sgd 1e-6, lbfgs 1e-5)."""
        if self.delta is not None:
            return self.delta
        return 1e-6 if algorithm == "l2sgd" else 1e-5

    def _finite_log_z(self, log_z, b0=0):
        """``log_z`` of sequences ``b0, b0 + 1, ...``; a ValueError naming the first whose log partition is
        +inf or NaN: scores that overflow float64 (huge weights of a crafted model, or huge attribute
        values) give no probabilities (NaN or inf), only a Viterbi labeling, and not even that when the
        best score overflows too."""
        bad = np.flatnonzero(~(log_z < np.inf))
        if bad.size:
            b = int(bad[0])
            raise ValueError(f"{self._unit_noun} {b0 + b}: its {self._score_noun} scores overflow float64 (log partition "
                             f"{log_z[b]}; expected finite), so they give no probabilities: the model's "
                             f"weights (largest |w| = {np.max(np.abs(self.coef_)):.3g}) or the attribute values "
                             f"are too large")
        return log_z

    def _check_param_combinations(self):
        """Checks that involve several parameters (after every parameter's own constraint)."""
        algorithm = self.get_params(deep=False).get("algorithm", "lbfgs")
        if self.c1 > 0 and algorithm != "lbfgs":
            raise ValueError(f"`c1` (L1) is only supported with algorithm='lbfgs' (OWL-QN); got "
                             f"algorithm={algorithm!r}")

    @property
    def transition_attribute_features_(self):
        """dict (attribute, label_from, label_to) -> non-zero weight of the transition attributes."""
        self._check_fitted()
        m, cls = self.model_, self.classes_
        W = m.split_trans_attr(self.coef_)
        return {(self.attributes_[a], cls[i], cls[j]): float(W[r, i, j])
                for r, a in enumerate(m.trans_attr) for i, j in zip(*np.nonzero(W[r]))}

    def _transition_attribute_ids(self, vocab):
        """Attribute ids (int64) of ``transition_attributes`` in ``vocab`` (None when not set): the
        observation-conditioned transitions of the chain and semi-Markov CRFs; ValueError naming an
        unknown one."""
        names = self.transition_attributes
        if names is None:
            return None
        if isinstance(names, str):
            names = [names]
        ids = []
        for a in names:
            i = vocab.index.get(a)
            if i is None:
                raise ValueError(f"`transition_attributes` names {a!r}, which is no attribute of the "
                                 f"training data (attribute names are spelt as in `attributes_`, "
                                 f"e.g. 'w:,' for {{'w': ','}})")
            ids.append(i)
        return np.asarray(ids, dtype=np.int64)

    @staticmethod
    def _check_nonempty(packed, items="items", sequence="sequence"):
        if packed.n_items == 0:
            raise ValueError(f"the training set is empty (no {items} in X); give at least one "
                             f"non-empty {sequence}")

    @staticmethod
    def _allowed_mask(allowed, n_items, K):
        """Partial labels of training: a bool (N, K) mask, or None."""
        if allowed is None:
            return None
        allowed = np.asarray(allowed, bool)
        if allowed.shape != (n_items, K):
            raise ValueError(f"`allowed` must have shape (N, K) = ({n_items}, {K}); got {allowed.shape}")
        return allowed

    # ------------------------------------------------------------------------------------------------
    # labels and constraints
    # ------------------------------------------------------------------------------------------------
    def _fit_labels(self, y, packed):
        """Start ``classes_`` afresh and encode the training labels (first appearance order)."""
        self.classes_ = []
        self._label_index = {}
        return self._encode_labels(y, packed)

    def _encode_labels(self, y, packed, name="y", grow=True):
        if y is None or isinstance(y, (str, bytes)) or not hasattr(y, "__len__"):
            raise ValueError(f"`{name}` must be a list of label sequences; got {type(y).__name__}")
        if len(y) != len(packed.lengths):
            raise ValueError(f"`{name}` has {len(y)} sequences but X has {len(packed.lengths)}")
        out = np.empty(packed.n_items, dtype=np.int64)
        idx = self._label_index
        for s, (seq, n) in enumerate(zip(y, packed.lengths)):
            if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
                raise ValueError(f"`{name}[{s}]` must be a list of labels; got {type(seq).__name__}")
            if len(seq) != n:
                raise ValueError(f"sequence {s}: {n} items but {len(seq)} labels in `{name}[{s}]`; "
                                 f"every item needs exactly one label")
            o = packed.offsets[s]
            for t, lab in enumerate(seq):
                if lab is None:  # str(None) would be a label 'None' of its own
                    raise ValueError(f"`{name}[{s}][{t}]` (sequence {s}, position {t}) is None; every item "
                                     f"needs a label (a str or int); give a label to every item, or leave "
                                     f"unlabelled sequences out of `{name}`")
                lab = label_key(lab)
                k = idx.get(lab)
                if k is None:
                    if not grow:
                        raise ValueError(f"`{name}[{s}][{t}]`: label {lab!r} was not seen in training "
                                         f"(known labels: {self.classes_[:10]}…)")
                    if isinstance(lab, str) and ("\t" in lab or "\n" in lab):
                        raise ValueError(f"`{name}[{s}][{t}]`: label {lab!r} contains a tab or newline, "
                                         f"which CRFsuite-format files cannot hold")
                    k = idx[lab] = len(self.classes_)
                    self.classes_.append(lab)
                out[o + t] = k
        return out

    def _label_pairs(self, spec, name, special):
        """The pairs of a ``pairs`` parameter as (str, str); each label is a training label or in
        ``special``."""
        out = []
        for a, b in spec:
            a, b = label_key(a), label_key(b)
            for lab in (a, b):
                if lab not in self._label_index and lab not in special:
                    raise ValueError(f"`{name}` names label {lab!r}, which is not in the training labels "
                                     f"{self.classes_[:10]}")
            out.append((a, b))
        return out

    def _constraint_mask(self, constraints, packed, what="label"):
        K = len(self.classes_)
        if isinstance(constraints, np.ndarray) and constraints.dtype == bool:
            if constraints.shape != (packed.n_items, K):
                raise ValueError(f"`constraints` as a mask must have shape (N, K) = "
                                 f"({packed.n_items}, {K}); got {constraints.shape}")
            return constraints
        if len(constraints) != len(packed.lengths):
            raise ValueError(f"`constraints` must give one entry (dict position -> {what}(s), or None) per "
                             f"sequence: {len(packed.lengths)} sequences, got {len(constraints)}")
        allowed = np.ones((packed.n_items, K), bool)
        for s, cons in enumerate(constraints):
            if not cons:
                continue
            n = int(packed.lengths[s])
            for pos, labs in dict(cons).items():
                if not isinstance(pos, (int, np.integer)) or not -n <= pos < n:
                    raise ValueError(f"`constraints[{s}]`: position {pos!r} is outside the sequence "
                                     f"(length {n})")
                labs = list(labs) if isinstance(labs, (list, tuple, set, frozenset, np.ndarray)) \
                    else [labs]
                row = np.zeros(K, bool)
                for lab in map(label_key, labs):
                    if lab not in self._label_index:
                        raise ValueError(f"`constraints[{s}]`: unknown {what} {lab!r} at position "
                                         f"{pos}; known labels: {self.classes_[:10]}")
                    row[self._label_index[lab]] = True
                allowed[packed.offsets[s] + (pos % n)] = row
        return allowed

    def _token_accuracy(self, pred, y, sequences="sequence", items="items"):
        """Share of the labels of ``y`` that ``pred`` matches (labels not seen in training: an error)."""
        if len(pred) != len(y):
            raise ValueError(f"`y` has {len(y)} {sequences}s but X has {len(pred)}")
        tot = cor = 0
        for s, (p, g) in enumerate(zip(pred, y)):
            if len(p) != len(g):
                raise ValueError(f"{sequences} {s}: {len(p)} {items} but {len(g)} labels")
            for t, lab in enumerate(g):
                if label_key(lab) not in self._label_index:
                    raise ValueError(f"`y[{s}][{t}]`: label {lab!r} was not seen in training (known "
                                     f"labels: {self.classes_[:10]}); a CRF cannot predict it")
            tot += len(g)
            cor += sum(a == label_key(b) for a, b in zip(p, g))
        return cor / tot if tot else 1.0

    # ------------------------------------------------------------------------------------------------
    # training
    # ------------------------------------------------------------------------------------------------
    def _worker_shards(self, objective):
        """With ``n_jobs`` (joblib's convention: -1 all cores) and an objective of several blocks (fixed by
        the data, :meth:`~structlearn.crf.objectives._CLL.blocks`), those blocks held by that many
        worker processes (:class:`~structlearn.learning.shards.ProcessShards`); None otherwise (the blocks
        in this process). Either way the same sum: the fit does not depend on ``n_jobs``."""
        n_jobs = getattr(self, "n_jobs", None)
        check_n_jobs(n_jobs)
        n = n_blocks(n_jobs)
        if n <= 1 or isinstance(objective, ShardedObjective) or not hasattr(objective, "blocks"):
            return None
        blocks = objective.blocks()
        return ProcessShards(blocks, n_workers=n) if len(blocks) > 1 else None

    def _train(self, model, objective, t0, *, algorithm="lbfgs", online=None, data=(), l2sgd_args=(),
               dev=None, callback=None, desc=None):
        """Fit the weights of ``model``; set ``coef_``, ``n_iter_``, ``converged_``, ``training_log_``
        and ``training_seconds_`` (since ``t0``); warn (ConvergenceWarning) when L-BFGS stopped early.

        Parameters
        ----------
        objective : callable (w, g) -> loss
            The objective of ``algorithm="lbfgs"`` (minimised with the L-BFGS parameters): a penalised
            CLL (run as one local shard) or a :class:`~structlearn.learning.shards.ShardedObjective`.
        algorithm : str
            ``"lbfgs"`` or an online trainer of ``online`` (``"l2sgd"``, ``"ap"``, ``"pa"``, ``"arow"``).
        online : module with ``l2sgd`` and ``large_margin`` (:mod:`structlearn.crf.online_trainers`, ...)
        data : tuple
            The training data after ``model`` in the online trainers' arguments (batch, labels).
        l2sgd_args : tuple
            Further positional arguments of ``online.l2sgd``.
        dev : (batch, labels) or None
            Held-out data whose accuracy is logged every L-BFGS iteration (``"dev_accuracy"``).
        callback : callable or None
            Called with every log entry; returning True stops L-BFGS.
        desc : str, optional
            Label of the progress bar (``verbose``).

        Raises
        ------
        BaseException
            What training raised (a ``KeyboardInterrupt`` included), after removing ``coef_`` and setting
            ``converged_ = False``.
        """
        w0 = np.zeros(model.n_params)
        # epsilon None (LinearChainCRF's default, as sklearn-crfsuite): CRFsuite's per-algorithm default,
        # 1e-5 for lbfgs and 0 for ap/pa/arow (every epoch runs)
        epsilon = self.epsilon if self.epsilon is not None else (1e-5 if algorithm == "lbfgs" else 0.0)
        self.training_log_ = []
        bar = _progress(self.verbose, desc or f"train ({algorithm})")

        def on_iteration(entry):
            self.training_log_.append({k: v for k, v in entry.items() if k != "dev_counts"})
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{entry['loss']:.4g}", active=entry.get("active_features"))
            return bool(callback(entry)) if callback is not None else False

        # an interrupted or failed run leaves no coef_ (the model_ is already the new one) and converged_
        # False
        status = {}
        with training(self, drop=("coef_",)):
            if algorithm == "lbfgs":
                # the one training loop of every CRF: L-BFGS over shards (here one local shard; the same loop
                # runs over dask shards in structlearn.distributed)
                workers = self._worker_shards(objective)
                objective = ShardedObjective.local(objective) if workers is None else \
                    ShardedObjective(workers, objective.mask, objective.c2, objective.c1)
                current = [w0]

                def f(w, g):
                    current[0] = w
                    return objective(w, g)

                def progress(entry):
                    if dev is not None:
                        pred = model.structure(current[0], dev[0]).argmax()
                        entry["dev_accuracy"] = float(np.mean(pred == dev[1])) if dev[0].n_items else 1.0
                        if callback is not None:  # crfsuite's held-out table, for the callback only
                            entry["dev_counts"] = _dev_counts(pred, dev[1], dev[0].offsets, len(self.classes_))
                    return on_iteration(entry)

                try:
                    w, n_iter, converged, _ = lbfgs(
                        f, w0, c1=self.c1, m=self.num_memories, epsilon=epsilon, period=self.period,
                        delta=self._delta(algorithm), max_iterations=self.max_iterations, linesearch=self.linesearch,
                        max_linesearch=self.max_linesearch, callback=progress, mask=model.free_mask(),
                        status=status)
                finally:
                    if workers is not None:
                        workers.close()
            elif algorithm == "l2sgd":
                w, n_iter, converged = online.l2sgd(
                    model, *data, *l2sgd_args, c2=self.c2,
                    max_iterations=1000 if self.max_iterations is None else self.max_iterations,
                    period=self.period, delta=self._delta(algorithm), eta=self.calibration_eta,
                    rate=self.calibration_rate, samples=self.calibration_samples,
                    candidates=self.calibration_candidates, max_trials=self.calibration_max_trials,
                    random_state=self.random_state, callback=on_iteration,
                    **({"shuffle": self.shuffle} if hasattr(self, "shuffle") else {}))
            else:
                # `shuffle` (LinearChainCRF): CRFsuite's instance order or numpy's; estimators without it
                # keep their trainer's own order
                order = {"shuffle": self.shuffle} if hasattr(self, "shuffle") else {}
                w, n_iter, converged = online.large_margin(
                    algorithm, model, *data, **order,
                    max_iterations=100 if self.max_iterations is None else self.max_iterations,
                    epsilon=epsilon, pa_type=self.pa_type, c=self.c,
                    error_sensitive=self.error_sensitive, averaging=self.averaging,
                    variance=self.variance, gamma=self.gamma, random_state=self.random_state,
                    callback=on_iteration)
        if bar is not None:
            bar.close()
        self.coef_ = np.asarray(w, dtype=np.float64)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.training_seconds_ = time.perf_counter() - t0
        reason = status.get("stop_reason")
        if reason and self.training_log_:
            self.training_log_[-1]["stop_reason"] = reason
        if not self.converged_ and algorithm == "lbfgs":
            if reason and "iteration" not in reason:  # a line search failure, not the iteration limit
                warnings.warn(f"L-BFGS stopped after {self.n_iter_} iterations without converging: "
                              f"{reason.rstrip('.')}; "
                              f"the model is the last iterate. Badly scaled attribute values (far from 1 in "
                              f"magnitude) are a common cause: standardise or log-transform them",
                              ConvergenceWarning, stacklevel=_user_stacklevel())
            else:
                warnings.warn(f"L-BFGS stopped after {self.n_iter_} iterations without meeting the stopping "
                              f"criteria (epsilon={epsilon}, delta={self._delta(algorithm)}); increase "
                              f"`max_iterations`", ConvergenceWarning, stacklevel=_user_stacklevel())

    # ------------------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------------------
    def _state_weights(self, feat, labels):
        """dict (attribute name, labels[feat]) -> weight of the state features."""
        m = self.model_
        ws = m.split(self.coef_)[0]
        attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
        names = self.attributes_
        return {(names[a], labels[k]): float(v) for a, k, v in zip(attrs, feat, ws)}

    @property
    def num_features_(self):
        """Number of weights that are features (parameters)."""
        self._check_fitted()
        return int(self.model_.free_mask().sum())

    @property
    def size_(self):
        """Number of parameters that are features (:class:`~structlearn.LinearChainCRF`: CRFsuite's
        meaning, the bytes of its model file)."""
        return self.num_features_

    # ------------------------------------------------------------------------------------------------
    # model files: pair lists as JSON lists, tuples back on loading
    # ------------------------------------------------------------------------------------------------
    def _file_params(self):
        params = super()._file_params()
        for p in self._parameters:
            v = params.get(p.name)
            if isinstance(v, (list, tuple)):
                if accepts(p, "pairs"):
                    params[p.name] = [list(map(str, q)) for q in v]
                elif accepts(p, "list"):
                    params[p.name] = list(v)
        return params

    @classmethod
    def _params_from_file(cls, params):
        for p in cls._parameters:
            v = params.get(p.name)
            if isinstance(v, list):
                if accepts(p, "pairs"):
                    params[p.name] = [tuple(q) for q in v]
                elif accepts(p, "list"):
                    params[p.name] = tuple(v)
        return params

    def _file_metadata(self):
        return {"attributes": list(self.attributes_)}

    def _restore_labels(self, meta):
        """Restore ``classes_`` and the attribute vocabulary of a model file."""
        self.classes_ = list(meta["classes"])
        self._label_index = {c: i for i, c in enumerate(self.classes_)}
        self.attributes_ = list(meta["attributes"])
        self._vocab = AttributeVocabulary(self.attributes_)

    def _file_consistent(self):
        m = self.model_
        return self.coef_.shape == (m.n_params,) and len(self._vocab) == len(m.attr_ptr) - 1


class ChainCRFBase(CRFBase):
    """Prediction of CRFs over label sequences of packed items whose feature model's ``structure``
    is chain-like (``argmax``, ``marginals``, ``max``, ``log_partition``, ``score``, ``kbest``)."""

    def _fit_sequences(self, X, y, lengths):
        """(vocabulary, packed training items, encoded labels) of ``fit``."""
        vocab = AttributeVocabulary()
        packed = vocab.encode(X, lengths, grow=True)
        self._check_nonempty(packed)
        yy = self._fit_labels(y, packed)
        check_value_scale(packed, vocab)
        return vocab, packed, yy

    def _dev_set(self, vocab, X_dev, y_dev):
        if X_dev is None:
            return None
        dev_packed = vocab.encode(X_dev, None)
        return dev_packed, self._encode_labels(y_dev, dev_packed, "y_dev", grow=False)

    def _structure(self, X, lengths=None, constraints=None):
        self._check_fitted()
        return chain_structure(self.model_, self.coef_, self._vocab, X, lengths=lengths,
                               **self._constraint_args(constraints))

    def _constraint_args(self, constraints):
        """``constraint_mask`` and ``check`` of :func:`~structlearn.crf._decode.chain_structure`."""
        if constraints is None:
            return {}
        return {"constraint_mask": lambda packed: self._constraint_mask(constraints, packed),
                "check": self._check_feasible}

    def _check_feasible(self, structure, packed, allowed):
        """Raise a ValueError naming the sequence, the position and the constraint that leave no labeling.

        The culprit is the first constrained position t such that the constraints at positions ≤ t
        (with the model's forbidden transitions) admit no labeling; found by bisection, each step one
        ``log_partition`` of that sequence under the engine. Costs one extra forward pass when feasible.
        """
        bad = np.flatnonzero(structure.log_partition() == -np.inf)
        if not bad.size:
            return
        b = int(bad[0])
        one = packed.select([b])
        rows = allowed[packed.offsets[b]:packed.offsets[b + 1]]
        cons = np.flatnonzero(~rows.all(axis=1))

        def feasible(n):  # constraints of the first n constrained positions only
            mask = np.ones_like(rows)
            mask[cons[:n]] = rows[cons[:n]]
            return self.model_.structure(self.coef_, one, mask).log_partition()[0] > -np.inf

        cls = self.classes_
        if not feasible(0):
            raise ValueError(f"sequence {b} (length {int(packed.lengths[b])}) has no possible labeling "
                             f"even without `constraints`: the model's forbidden transitions exclude "
                             f"every labeling")
        lo, hi = 0, len(cons)  # feasible(lo), not feasible(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
        t = int(cons[hi - 1])
        labs = [cls[k] for k in np.flatnonzero(rows[t])]
        if not labs:
            raise ValueError(f"`constraints[{b}]` at position {t} allows no label (an empty mask row)")
        before = [int(p) for p in cons[:hi - 1]]
        raise ValueError(f"`constraints[{b}]` at position {t} ({labs if len(labs) > 1 else labs[0]!r}) "
                         f"cannot hold together with "
                         + (f"the constraints at positions {before} and " if before else "")
                         + "the model's forbidden transitions/starts/ends: no labeling of sequence "
                         f"{b} satisfies them")

    def _split(self, flat, packed):
        return [flat[packed.offsets[b]:packed.offsets[b + 1]] for b in range(len(packed.lengths))]

    def predict(self, X, constraints=None, *, lengths=None):
        """Most likely label sequence of every sequence (Viterbi).

        Parameters
        ----------
        X : list of sequences of items (or sparse matrix with ``lengths``)
        constraints : list (one per sequence) of dict position -> label or list of labels, or a
            boolean (N, K) mask — fixes or restricts labels at given positions (constrained Viterbi).

        Returns
        -------
        list of lists of str

        Raises
        ------
        ValueError
            If the constraints (with forbidden transitions) leave a sequence no possible labeling.
        """
        self._check_fitted()
        # the same function as the fast path of `structlearn tag` (structlearn.io.chain_tagger)
        return predict_labels(self.model_, self.coef_, self._vocab, self.classes_, X, lengths=lengths,
                              **self._constraint_args(constraints))

    def predict_single(self, xseq):
        """Labels of one sequence (list of items)."""
        return self.predict([xseq])[0]

    def predict_marginals(self, X, *, output="dict", lengths=None, constraints=None):
        """Posterior marginals P(y_t = label | x).

        Parameters
        ----------
        output : {"dict", "array"}
            ``"dict"``: list of sequences of {label: probability} (sklearn-crfsuite's format);
            ``"array"``: list of (T, K) float64 arrays, columns in ``classes_`` order.
        """
        if output not in ("dict", "array"):
            raise ValueError(f"`output` must be 'dict' or 'array'; got {output!r}")
        packed, chain = self._structure(X, lengths, constraints)
        um = chain.marginals(edge="none").unary
        log_z = self._finite_log_z(chain.log_partition())
        check_posteriors(um, packed.offsets, log_z, "the marginals", self._unit_noun)
        seqs = self._split(um, packed)
        if output == "array":
            return seqs
        cls = self.classes_
        return [[dict(zip(cls, row.tolist())) for row in s] for s in seqs]

    def predict_marginals_single(self, xseq):
        return self.predict_marginals([xseq])[0]

    def predict_proba_sequence(self, X, *, lengths=None):
        """Probability of the Viterbi labeling of each sequence, shape (B,)."""
        _, chain = self._structure(X, lengths)
        log_z = self._finite_log_z(chain.log_partition())
        return np.exp(chain.max() - log_z)

    def sequence_probability(self, X, y):
        """Probability p(y | x) of given label sequences, shape (B,)."""
        packed, chain = self._structure(X)
        yy = self._encode_labels(y, packed, grow=False)
        log_z = self._finite_log_z(chain.log_partition())
        return np.exp(chain.score(yy) - log_z)

    def kbest(self, X, k=5):
        """The k most likely label sequences of every sequence with their probabilities.

        Returns
        -------
        list (per sequence) of lists of (labels (list of str), probability), best first.
        """
        packed, chain = self._structure(X)
        log_z = self._finite_log_z(chain.log_partition())
        kb = chain.kbest(k)
        cls = np.asarray(self.classes_, dtype=object)
        out = []
        for b in range(len(packed.lengths)):
            o0, o1 = packed.offsets[b], packed.offsets[b + 1]
            res = []
            for r in range(k):
                if kb.scores[b, r] == -np.inf:
                    break
                res.append((list(cls[kb.labels[r, o0:o1]]), float(np.exp(kb.scores[b, r] - log_z[b]))))
            out.append(res)
        return out

    def score(self, X, y):
        """Token accuracy of ``predict(X)`` against ``y``."""
        return self._token_accuracy(self.predict(X), y)

    def _with_boundaries(self, out, start, end):
        """``out`` with the start and end weights as ``("<start>", y)`` and ``(y, "<end>")`` entries."""
        for k, c in enumerate(self.classes_):
            out[("<start>", c)] = float(start[k])
            out[(c, "<end>")] = float(end[k])
        return out
