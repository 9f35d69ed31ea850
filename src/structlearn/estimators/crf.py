"""``LinearChainCRF``: a scikit-learn estimator that trains and tags like CRFsuite."""
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from ..learning import online
from ..learning.objectives import ChainCLL
from ..learning.optimizers import lbfgs
from ..models.crf import ChainFeatureModel
from ..models.features import AttributeVocabulary, build_state_features
from ._modelfile import ModelFileMixin

ALGORITHMS = ("lbfgs", "l2sgd", "ap", "pa", "arow")
_FORMAT = "linear-chain-crf"
_VERSION = 1


def bio_forbidden(labels):
    """Forbidden transitions and starts of the BIO (IOB2) scheme: ``I-X`` only after ``B-X``/``I-X``.

    Returns (forbidden (K, K) bool, forbidden_start (K,) bool).
    """
    K = len(labels)
    forb = np.zeros((K, K), bool)
    fstart = np.zeros(K, bool)
    for j, lj in enumerate(labels):
        if not str(lj).startswith("I-"):
            continue
        typ = str(lj)[2:]
        fstart[j] = True
        for i, li in enumerate(labels):
            if str(li) not in ("B-" + typ, "I-" + typ):
                forb[i, j] = True
    return forb, fstart


class LinearChainCRF(ModelFileMixin, BaseEstimator):
    """Linear-chain conditional random field (Lafferty et al. 2001) with CRFsuite's features and trainers.

    Scores ``s(x, y) = Σ_t Σ_a x_{t,a} w[a, y_t] + Σ_t w[y_t, y_{t+1}] + w_start[y_0] + w_end[y_{T-1}]``;
    state features are (attribute, label) pairs seen in training (CRFsuite's default), transitions
    label × label. Inference is the engine's :class:`~structlearn.structures.LinearChain`.

    Parameters
    ----------
    algorithm : {"lbfgs", "l2sgd", "ap", "pa", "arow"}, default "lbfgs"
        ``lbfgs``: maximum likelihood with L-BFGS (L2: ``c2``), OWL-QN when ``c1 > 0`` (L1 or elastic
        net); ``l2sgd``: stochastic gradient descent with L2; ``ap``: averaged perceptron; ``pa``:
        passive–aggressive (Crammer et al. 2006); ``arow``: adaptive regularisation of weights
        (Mejer & Crammer 2010).
    c1, c2 : float, default 0 and 1
        L1 and L2 coefficients. Regularisation scaling is CRFsuite's: the objective is
        ``-Σ log p(y|x) + c1 ‖w‖₁ + c2 ‖w‖²`` (no 1/2, not divided by the number of sequences).
    max_iterations : int, optional
        lbfgs: unlimited by default; l2sgd: 1000 epochs; ap/pa/arow: 100 epochs.
    num_memories, epsilon, period, delta, linesearch, max_linesearch :
        L-BFGS settings, CRFsuite's defaults (6, 1e-5, 10, 1e-5, "MoreThuente", 20). Training stops when
        ``‖g‖/max(1, ‖w‖) < epsilon`` or the objective improved by less than ``delta`` (relative) over
        ``period`` iterations. For online algorithms ``epsilon`` stops when the loss per instance falls
        below it; for l2sgd ``delta``/``period`` as above.
    calibration_eta, calibration_rate, calibration_samples, calibration_candidates,
    calibration_max_trials : l2sgd learning-rate calibration (CRFsuite's defaults).
    pa_type : {0, 1, 2}, c : float, error_sensitive : bool, averaging : bool
        Passive–aggressive settings.
    variance, gamma : float
        AROW settings.
    min_freq : float, default 0
        Keep state features seen at least this many times.
    all_possible_states, all_possible_transitions : bool, default False
        Generate every (attribute, label) / (label, label) feature, not only those in the data.
    forbidden_transitions : None, "BIO" or list of (from_label, to_label)
        Transitions with potential -inf in training and decoding; ``"BIO"`` forbids ``I-X`` except after
        ``B-X``/``I-X`` and at the start of a sequence. Pairs may use ``"<start>"``/``"<end>"``.
    random_state : None, int or RandomState
        Shuffling of online algorithms.
    verbose : bool
        Progress bar (tqdm) and per-iteration log lines.

    Attributes
    ----------
    classes_ : list of str
        Labels in order of first appearance in training.
    attributes_ : list of str
        Attribute names seen in training.
    state_features_ : dict (attribute, label) -> weight
    transition_features_ : dict (label_from, label_to) -> weight (also ``"<start>"``/``"<end>"`` rows)
    n_iter_ : int
    converged_ : bool
    training_log_ : list of dict
        Per iteration: loss, gradient norm, active features, seconds (and dev accuracy if given).
    coef_ : ndarray of float64, shape (n_params,)

    Notes
    -----
    Training cost per L-BFGS iteration: one forward–backward over the training set, O(N·K²), plus
    O(nnz · labels per attribute) for potentials and gradient, parallel over sequences (Numba).
    """

    def __init__(self, algorithm="lbfgs", c1=0.0, c2=1.0, max_iterations=None, num_memories=6,
                 epsilon=1e-5, period=10, delta=1e-5, linesearch="MoreThuente", max_linesearch=20,
                 calibration_eta=0.1, calibration_rate=2.0, calibration_samples=1000,
                 calibration_candidates=10, calibration_max_trials=20, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, min_freq=0.0,
                 all_possible_states=False, all_possible_transitions=False, forbidden_transitions=None,
                 random_state=None, verbose=False):
        self.algorithm = algorithm
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.num_memories = num_memories
        self.epsilon = epsilon
        self.period = period
        self.delta = delta
        self.linesearch = linesearch
        self.max_linesearch = max_linesearch
        self.calibration_eta = calibration_eta
        self.calibration_rate = calibration_rate
        self.calibration_samples = calibration_samples
        self.calibration_candidates = calibration_candidates
        self.calibration_max_trials = calibration_max_trials
        self.pa_type = pa_type
        self.c = c
        self.error_sensitive = error_sensitive
        self.averaging = averaging
        self.variance = variance
        self.gamma = gamma
        self.min_freq = min_freq
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.forbidden_transitions = forbidden_transitions
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------------------------------------
    # fitting
    # ------------------------------------------------------------------------------------------------
    def _check_params(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"`algorithm` must be one of {ALGORITHMS}; got {self.algorithm!r}")
        for name in ("c1", "c2", "min_freq", "c", "variance", "gamma", "epsilon", "delta"):
            v = getattr(self, name)
            if not isinstance(v, (int, float, np.number)) or isinstance(v, bool) or not np.isfinite(v) \
                    or v < 0:
                raise ValueError(f"`{name}` must be a non-negative finite number; got {v!r}")
        mi = self.max_iterations
        if mi is not None and (not isinstance(mi, (int, np.integer)) or isinstance(mi, bool) or mi < 1):
            raise ValueError(f"`max_iterations` must be a positive integer or None; got {mi!r}")
        if self.pa_type not in (0, 1, 2):
            raise ValueError(f"`pa_type` must be 0, 1 or 2; got {self.pa_type!r}")
        if self.c1 > 0 and self.algorithm != "lbfgs":
            raise ValueError(f"`c1` (L1) is only supported with algorithm='lbfgs' (OWL-QN); got "
                             f"algorithm={self.algorithm!r}")

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
                lab = str(lab)
                k = idx.get(lab)
                if k is None:
                    if not grow:
                        raise ValueError(f"`{name}[{s}][{t}]`: label {lab!r} was not seen in training "
                                         f"(known labels: {self.classes_[:10]}…)")
                    if "\t" in lab or "\n" in lab:
                        raise ValueError(f"`{name}[{s}][{t}]`: label {lab!r} contains a tab or newline, "
                                         f"which CRFsuite-format files cannot hold")
                    k = idx[lab] = len(self.classes_)
                    self.classes_.append(lab)
                out[o + t] = k
        return out

    def _forbidden(self, K):
        spec = self.forbidden_transitions
        forb = np.zeros((K, K), bool)
        fstart = np.zeros(K, bool)
        fend = np.zeros(K, bool)
        if spec is None:
            return forb, fstart, fend
        if isinstance(spec, str):
            if spec.upper() not in ("BIO", "IOB2"):
                raise ValueError(f"`forbidden_transitions` must be None, 'BIO' or a list of "
                                 f"(from, to) label pairs; got {spec!r}")
            forb, fstart = bio_forbidden(self.classes_)
            return forb, fstart, fend
        for pair in spec:
            try:
                a, b = pair
            except (TypeError, ValueError):
                raise ValueError(f"`forbidden_transitions` entries must be (from, to) pairs; got "
                                 f"{pair!r}") from None
            a, b = str(a), str(b)
            for lab in (a, b):
                if lab not in self._label_index and lab not in ("<start>", "<end>"):
                    raise ValueError(f"`forbidden_transitions` names label {lab!r}, which is not in "
                                     f"the training labels {self.classes_[:10]}")
            if a == "<start>":
                fstart[self._label_index[b]] = True
            elif b == "<end>":
                fend[self._label_index[a]] = True
            else:
                forb[self._label_index[a], self._label_index[b]] = True
        return forb, fstart, fend

    def _check_gold_allowed(self, yy, packed, forb, fstart, fend):
        off = packed.offsets
        nz = np.flatnonzero(packed.lengths > 0)
        cls = self.classes_
        bad = np.flatnonzero(fstart[yy[off[nz]]])
        if bad.size:
            b = int(nz[bad[0]])
            raise ValueError(f"training sequence {b} starts with label {cls[yy[off[b]]]!r}, which "
                             f"`forbidden_transitions` forbids at the start; it would have zero "
                             f"probability")
        bad = np.flatnonzero(fend[yy[off[nz + 1] - 1]])
        if bad.size:
            b = int(nz[bad[0]])
            raise ValueError(f"training sequence {b} ends with a label that `forbidden_transitions` "
                             f"forbids at the end; it would have zero probability")
        same = np.ones(packed.n_items, bool)
        same[off[1:] - 1] = False
        idx = np.flatnonzero(same[:-1])
        hit = idx[forb[yy[idx], yy[idx + 1]]]
        if hit.size:
            r = int(hit[0])
            b = int(np.searchsorted(off, r, side="right") - 1)
            raise ValueError(f"training sequence {b} has the transition {cls[yy[r]]!r} -> "
                             f"{cls[yy[r + 1]]!r} at position {r - off[b]}, which `forbidden_transitions` "
                             f"forbids; it would have zero probability")

    def fit(self, X, y, X_dev=None, y_dev=None, *, lengths=None, allowed=None, callback=None):
        """Train on sequences ``X`` with label sequences ``y``.

        Parameters
        ----------
        X : list of sequences of items, or scipy.sparse matrix (N, F) with ``lengths``
            Items are dicts attribute -> value or lists of attribute strings (python-crfsuite format).
        y : list of lists of str
            One label per item.
        X_dev, y_dev : optional held-out data; its token accuracy is logged every iteration.
        lengths : array-like of int, optional
            Sequence lengths when ``X`` is a sparse matrix.
        allowed : ndarray of bool (N, K) or None
            Partial labels for lbfgs training: labels allowed per token (K in ``classes_`` order, which
            is the order of first appearance in ``y``). Training maximises log p(y ∈ allowed | x).
        callback : callable, optional
            Called with each iteration's log entry (a dict, as stored in ``training_log_``) while
            training runs; returning True stops training (L-BFGS).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Empty training set, items and labels of different lengths, non-finite attribute values,
            labels with tabs, bad parameters.
        """
        self._check_params()
        t0 = time.perf_counter()
        vocab = AttributeVocabulary()
        packed = vocab.encode(X, lengths, grow=True)
        if packed.n_items == 0:
            raise ValueError("the training set is empty (no items in X); give at least one "
                             "non-empty sequence")
        self.classes_ = []
        self._label_index = {}
        yy = self._encode_labels(y, packed)
        K = len(self.classes_)
        A = len(vocab)
        attr_ptr, feat_label = build_state_features(packed, yy, A, K, self.min_freq,
                                                    self.all_possible_states)
        if self.all_possible_transitions:
            trans_features = np.ones((K, K), bool)
        else:
            trans_features = np.zeros((K, K), bool)
            same = np.ones(packed.n_items, bool)
            same[packed.offsets[1:] - 1] = False
            idx = np.flatnonzero(same[:-1])
            trans_features[yy[idx], yy[idx + 1]] = True
        forb, fstart, fend = self._forbidden(K)
        if allowed is None:
            self._check_gold_allowed(yy, packed, forb, fstart, fend)
        model = ChainFeatureModel(attr_ptr, feat_label, K, trans_features, forb, fstart, fend)
        self.attributes_ = vocab.names
        self._vocab = vocab
        self.model_ = model
        self.featurize_seconds_ = time.perf_counter() - t0

        dev = None
        if X_dev is not None:
            dev_packed = vocab.encode(X_dev, None)
            dev = (dev_packed, self._encode_labels(y_dev, dev_packed, "y_dev", grow=False))
        w0 = np.zeros(model.n_params)
        self.training_log_ = []
        bar = _progress(self.verbose, self.algorithm)

        def on_iteration(entry):
            self.training_log_.append(entry)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{entry['loss']:.4g}", active=entry.get("active_features"))
            return bool(callback(entry)) if callback is not None else False

        if self.algorithm == "lbfgs":
            if allowed is not None:
                allowed = np.asarray(allowed, bool)
                if allowed.shape != (packed.n_items, K):
                    raise ValueError(f"`allowed` must have shape (N, K) = ({packed.n_items}, {K}); "
                                     f"got {allowed.shape}")
            objective = ChainCLL(model, packed, yy, c2=self.c2, allowed=allowed)
            mask = model.free_mask()

            def lbfgs_progress(entry):
                if dev is not None:
                    entry["dev_accuracy"] = float(np.mean(model.structure(objective_x[0], dev[0])
                                                          .argmax() == dev[1])) if dev[0].n_items else 1.0
                return on_iteration(entry)

            objective_x = [w0]

            def f(w, g):
                objective_x[0] = w
                return objective(w, g)

            w, n_iter, converged, _ = lbfgs(
                f, w0, c1=self.c1, m=self.num_memories, epsilon=self.epsilon, period=self.period,
                delta=self.delta, max_iterations=self.max_iterations, linesearch=self.linesearch,
                max_linesearch=self.max_linesearch, callback=lbfgs_progress, mask=mask)
        elif self.algorithm == "l2sgd":
            w, n_iter, converged = online.l2sgd(
                model, packed, yy, A, c2=self.c2,
                max_iterations=1000 if self.max_iterations is None else self.max_iterations,
                period=self.period, delta=self.delta, eta=self.calibration_eta,
                rate=self.calibration_rate, samples=self.calibration_samples,
                candidates=self.calibration_candidates, max_trials=self.calibration_max_trials,
                random_state=self.random_state, callback=on_iteration)
        else:
            w, n_iter, converged = online.large_margin(
                self.algorithm, model, packed, yy,
                max_iterations=100 if self.max_iterations is None else self.max_iterations,
                epsilon=self.epsilon, pa_type=self.pa_type, c=self.c,
                error_sensitive=self.error_sensitive, averaging=self.averaging,
                variance=self.variance, gamma=self.gamma, random_state=self.random_state,
                callback=on_iteration)
        if bar is not None:
            bar.close()
        self.coef_ = np.asarray(w, dtype=np.float64)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.training_seconds_ = time.perf_counter() - t0
        if not self.converged_ and self.algorithm == "lbfgs":
            warnings.warn(f"L-BFGS stopped after {self.n_iter_} iterations without meeting the stopping "
                          f"criteria (epsilon={self.epsilon}, delta={self.delta}); increase "
                          f"`max_iterations`", ConvergenceWarning)
        return self

    # ------------------------------------------------------------------------------------------------
    # prediction
    # ------------------------------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet; call `fit` (or "
                                 f"`load`) before using it")

    def _structure(self, X, lengths=None, constraints=None):
        self._check_fitted()
        packed = self._vocab.encode(X, lengths)
        allowed = None if constraints is None else self._constraint_mask(constraints, packed)
        return packed, self.model_.structure(self.coef_, packed, allowed)

    def _constraint_mask(self, constraints, packed):
        K = len(self.classes_)
        if isinstance(constraints, np.ndarray) and constraints.dtype == bool:
            if constraints.shape != (packed.n_items, K):
                raise ValueError(f"`constraints` as a mask must have shape (N, K) = "
                                 f"({packed.n_items}, {K}); got {constraints.shape}")
            return constraints
        if len(constraints) != len(packed.lengths):
            raise ValueError(f"`constraints` must give one entry (dict position -> label(s), or None) per "
                             f"sequence: {len(packed.lengths)} sequences, got {len(constraints)}")
        allowed = np.ones((packed.n_items, K), bool)
        for s, cons in enumerate(constraints):
            if not cons:
                continue
            n = packed.lengths[s]
            for pos, labs in dict(cons).items():
                if not isinstance(pos, (int, np.integer)) or not -n <= pos < n:
                    raise ValueError(f"`constraints[{s}]`: position {pos!r} is outside the sequence "
                                     f"(length {n})")
                labs = [labs] if isinstance(labs, str) else list(labs)
                row = np.zeros(K, bool)
                for lab in labs:
                    if lab not in self._label_index:
                        raise ValueError(f"`constraints[{s}]`: unknown label {lab!r} at position "
                                         f"{pos}; known labels: {self.classes_[:10]}")
                    row[self._label_index[lab]] = True
                allowed[packed.offsets[s] + (pos % n)] = row
        return allowed

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
        packed, chain = self._structure(X, lengths, constraints)
        labels = np.asarray(self.classes_, dtype=object)[chain.argmax()] if packed.n_items else \
            np.zeros(0, object)
        return [list(s) for s in self._split(labels, packed)]

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
        return np.exp(chain.max() - chain.log_partition())

    def sequence_probability(self, X, y):
        """Probability p(y | x) of given label sequences, shape (B,)."""
        packed, chain = self._structure(X)
        yy = self._encode_labels(y, packed, grow=False)
        return np.exp(chain.score(yy) - chain.log_partition())

    def kbest(self, X, k=5):
        """The k most likely label sequences of every sequence with their probabilities.

        Returns
        -------
        list (per sequence) of lists of (labels (list of str), probability), best first.
        """
        packed, chain = self._structure(X)
        kb = chain.kbest(k)
        log_z = chain.log_partition()
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
        pred = self.predict(X)
        if len(pred) != len(y):
            raise ValueError(f"`y` has {len(y)} sequences but X has {len(pred)}")
        tot = cor = 0
        for s, (p, g) in enumerate(zip(pred, y)):
            if len(p) != len(g):
                raise ValueError(f"sequence {s}: {len(p)} items but {len(g)} labels")
            for t, lab in enumerate(g):
                if str(lab) not in self._label_index:
                    raise ValueError(f"`y[{s}][{t}]`: label {lab!r} was not seen in training (known "
                                     f"labels: {self.classes_[:10]}); a CRF cannot predict it")
            tot += len(g)
            cor += sum(a == str(b) for a, b in zip(p, g))
        return cor / tot if tot else 1.0

    # ------------------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------------------
    @property
    def state_features_(self):
        """dict (attribute, label) -> weight of the state features."""
        self._check_fitted()
        m = self.model_
        ws = m.split(self.coef_)[0]
        attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
        names, cls = self.attributes_, self.classes_
        return {(names[a], cls[k]): float(v) for a, k, v in zip(attrs, m.feat_label, ws)}

    @property
    def transition_features_(self):
        """dict (label_from, label_to) -> weight; ``"<start>"``/``"<end>"`` for the boundary weights.

        Forbidden transitions appear with weight -inf.
        """
        self._check_fitted()
        tr, st, en = self.model_.transition_potentials(self.coef_)
        cls = self.classes_
        out = {}
        for i, a in enumerate(cls):
            for j, b in enumerate(cls):
                if self.model_.trans_features[i, j] or self.model_.forbidden[i, j]:
                    out[(a, b)] = float(tr[i, j])
        for k, c in enumerate(cls):
            out[("<start>", c)] = float(st[k])
            out[(c, "<end>")] = float(en[k])
        return out

    @property
    def size_(self):
        """Number of parameters that are features (state + transitions + start/end)."""
        self._check_fitted()
        return int(self.model_.free_mask().sum())

    # ------------------------------------------------------------------------------------------------
    # model files
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.LinearChainCRF")

    def _file_params(self):
        params = super()._file_params()
        if isinstance(params.get("forbidden_transitions"), (list, tuple)):
            params["forbidden_transitions"] = [list(map(str, p)) for p in params["forbidden_transitions"]]
        return params

    @classmethod
    def _params_from_file(cls, params):
        if isinstance(params.get("forbidden_transitions"), list):
            params["forbidden_transitions"] = [tuple(p) for p in params["forbidden_transitions"]]
        return params

    def _file_metadata(self):
        return {"attributes": list(self.attributes_)}

    def _file_arrays(self):
        m = self.model_
        return {"attr_ptr": m.attr_ptr, "feat_label": m.feat_label, "trans_features": m.trans_features,
                "forbidden": m.forbidden, "forbidden_start": m.forbidden_start, "forbidden_end": m.forbidden_end}

    def _restore(self, meta, arrays):
        self.classes_ = list(meta["classes"])
        self._label_index = {c: i for i, c in enumerate(self.classes_)}
        self.attributes_ = list(meta["attributes"])
        self._vocab = AttributeVocabulary(self.attributes_)
        self.model_ = ChainFeatureModel(arrays["attr_ptr"], arrays["feat_label"], len(self.classes_),
                                        arrays["trans_features"], arrays["forbidden"],
                                        arrays["forbidden_start"], arrays["forbidden_end"])

    def _file_consistent(self):
        return self.coef_.shape == (self.model_.n_params,) and len(self._vocab) == len(self.model_.attr_ptr) - 1


def _progress(verbose, algorithm):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(desc=f"train ({algorithm})", unit="it")
