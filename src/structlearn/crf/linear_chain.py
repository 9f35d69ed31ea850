"""``LinearChainCRF``: a scikit-learn estimator that trains and tags like CRFsuite."""
import os
import time

import numpy as np
from sklearn.exceptions import NotFittedError

from . import online_trainers as online
from .objectives import ChainCLL
from ._potentials import ChainFeatureModel
from ._decode import CHAIN_FORMAT, CHAIN_FORMAT_VERSION, chain_model_from_arrays
from .features import build_state_features
from .crfsuite_model import is_crfsuite_model
from ..utils.modelfile import read_magic, write_atomically
from ..utils.validation import first_row
from . import _crfsuite_compat as compat
from ._base import ChainCRFBase, label_key
from ._online import ChainCRFStreamMixin
from ..learning.params import (ALGORITHM, ALL_POSSIBLE_STATES, ALL_POSSIBLE_TRANSITIONS, LBFGS_PARAMS, MIN_FREQ, N_JOBS,
                               ONLINE_PARAMS, RANDOM_STATE, VERBOSE, Param)

_FORMAT = CHAIN_FORMAT
_VERSION = CHAIN_FORMAT_VERSION
_EPSILON = Param("epsilon", None, "float>=0|None",
                 "stopping criterion; None: CRFsuite's default of the algorithm (lbfgs: ||g|| / max(1, ||w||) "
                 "< 1e-5; ap/pa/arow: 0, every epoch runs)")
_DELTA = Param("delta", None, "float>=0|None",
               "stop when the objective improved by less than delta over period; None: CRFsuite's default of the "
               "algorithm (lbfgs 1e-5, l2sgd 1e-6)")


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


class LinearChainCRF(ChainCRFStreamMixin, ChainCRFBase):
    """Linear-chain conditional random field (Lafferty et al. 2001) with CRFsuite's features and trainers.

    Scores ``s(x, y) = Σ_t Σ_a x_{t,a} w[a, y_t] + Σ_t w[y_t, y_{t+1}] + w_start[y_0] + w_end[y_{T-1}]``
    (the last two terms only with ``start_end_features``);
    state features are (attribute, label) pairs seen in training (CRFsuite's default), transitions
    label × label. Inference is the engine's :class:`~structlearn.engine.structures.LinearChain`.
    The online trainers also stream: :meth:`partial_fit` runs one epoch per batch, the vocabulary,
    labels and features growing with the stream (out-of-core loops, dask-ml's ``Incremental``).

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
        L-BFGS settings, CRFsuite's defaults (6, 1e-5, 10, 1e-5, "MoreThuente", 20; ``delta=None`` is
        CRFsuite's default of the algorithm: 1e-5 for lbfgs, 1e-6 for l2sgd). Training stops when
        ``‖g‖/max(1, ‖w‖) < epsilon`` or the objective improved by less than ``delta`` (relative) over
        ``period`` iterations. For ap/pa/arow, as CRFsuite, training stops when the epoch's loss per
        sequence falls below ``epsilon`` (arow: reaches it): for ap the mean share of mislabelled tokens of
        a sequence, for pa/arow the mean cost ℓ = s(ŷ) − s(y) + e of the updates (e the token errors, their
        square root for pa, 1 for pa without ``error_sensitive``); ``epsilon=None`` (the default, as
        sklearn-crfsuite) is CRFsuite's default of the algorithm: 1e-5 for lbfgs, 0 for ap/pa/arow (all
        ``max_iterations`` epochs; arow stops earlier after an epoch without mistakes). For l2sgd
        ``delta``/``period`` as above.
    calibration_eta, calibration_rate, calibration_samples, calibration_candidates,
    calibration_max_trials : l2sgd learning-rate calibration (CRFsuite's defaults).
    pa_type : {0, 1, 2}, c : float, error_sensitive : bool, averaging : bool
        Passive–aggressive settings. ap, pa and arow are CRFsuite's trainers step for step (Viterbi ties
        to the label seen first, its update order, averaging and sums), so with ``shuffle="crfsuite"``
        they give CRFsuite's weights; one deliberate difference: pa with ``pa_type=0`` makes no update
        where the two feature vectors are equal (‖d‖ = 0), where CRFsuite would divide by zero.
    variance, gamma : float
        AROW settings.
    min_freq : float, default 0
        Keep state features whose attribute values sum to at least this, as CRFsuite counts (with
        ``start_end_features=True``: seen at least this many times).
    all_possible_states, all_possible_transitions : bool, default False
        Generate every (attribute, label) / (label, label) feature, not only those in the data.
    start_end_features : bool, default False
        Opt-in: learn a weight for the label of the first and of the last token (``w_start``, ``w_end``).
        ``False`` (the default) is CRFsuite's model, as python-crfsuite and sklearn-crfsuite train it
        (crf1d has no boundary features): the score is state plus transition weights only, and state
        features are kept by CRFsuite's frequency rule (the sum of the attribute's values ≥ ``min_freq``,
        see :func:`~structlearn.crf.features.build_state_features`), so objective, weights and predictions
        are CRFsuite's, and the model can be saved in CRFsuite's binary format (:meth:`save` with
        ``format="crfsuite"``). ``True`` adds the start/end weights (and counts ``min_freq`` in
        occurrences); such a model has no CRFsuite file. Model files saved before the default changed
        (or before this parameter existed) load with the value they were trained with (``True``).
    transition_attributes : None or list of str
        Attribute × label-pair transition features (the seed's observation-conditioned transition
        scores t(y', y, x, i−1, i)): for every listed attribute a (names as in ``attributes_``, e.g.
        ``"w:,"`` for ``{"w": ","}``) a weight ``W[a, y_{t}, y_{t+1}]`` per label pair, scaled by a's value
        at token t+1 ("the word at i is a comma"). The chain's transitions then vary with t (the
        engine's (N, K, K) form): O(N·K²) time and memory per pass. lbfgs only; not in CRFsuite's
        files. Names never seen in training are an error.
    forbidden_transitions : None, "BIO" or list of (from_label, to_label)
        Transitions with potential -inf in training and decoding; ``"BIO"`` forbids ``I-X`` except after
        ``B-X``/``I-X`` and at the start of a sequence. Pairs may use ``"<start>"``/``"<end>"``.
    random_state : None, int or RandomState
        Shuffling of online algorithms (see ``shuffle``).
    shuffle : {"crfsuite", "numpy"}, default "crfsuite"
        Instance order of the online trainers' epochs. ``"crfsuite"``: CRFsuite's own (its
        ``dataset_shuffle`` driven by glibc's ``rand()``, :mod:`structlearn.crf._crfsuite_rng`) seeded
        with 1 when ``random_state`` is None — the order of a python-crfsuite process that never called
        ``srand`` —, with ``random_state`` when it is an int and with ``randint(2**31)`` drawn from a
        RandomState. ``"numpy"``: a fresh ``RandomState.permutation`` every epoch. :meth:`partial_fit`
        always draws numpy permutations.
    verbose : bool
        Progress bar (tqdm) and per-iteration log lines.
    n_jobs : int or None, default None
        L-BFGS over worker processes on this machine (-1: as many as cores): the objective's blocks of
        sequences (fixed by the data: about 65 536 tokens each, at most 16,
        :meth:`structlearn.crf.objectives._CLL.blocks`) are shared out between ``n_jobs`` worker
        processes, each holding its range for the whole fit (:class:`structlearn.learning.shards.ProcessShards`);
        each evaluation sends the weights to every worker and adds the blocks' values and gradients in one
        fixed tree. Numba's threads are shared out between the workers. The result is bitwise that of
        ``n_jobs=None`` (and of any thread count); data of one block run in this process.
        Online trainers ignore it. See :mod:`structlearn.distributed` for several machines.
    model_filename : None or str, default None
        sklearn-crfsuite's parameter: ``fit`` also writes the model to this path (CRFsuite's binary
        format when the model is CRFsuite's — ``start_end_features=False``, no forbidden transitions —
        structlearn's otherwise), and an estimator that is not fitted loads the model from this path
        when it is first used (``LinearChainCRF(model_filename="m.crfsuite").predict(X)``).
    keep_tempfiles : bool, default False
        Accepted for sklearn-crfsuite compatibility; nothing is written to temporary files here.

    Attributes
    ----------
    classes_ : list
        Labels in order of first appearance in training, of the type they had in ``y`` (str, int, ...;
        NumPy scalars become Python ones). ``None`` before fitting (sklearn-crfsuite), like the other
        sklearn-crfsuite attributes below.
    attributes_ : list of str
        Attribute names seen in training (python-crfsuite's spelling: ``{"w": "the"}`` is ``"w:the"``).
    num_attributes_ : int
        Attributes with a non-zero state weight, as CRFsuite and sklearn-crfsuite count them (``num_attrs``
        of the CRFsuite model file); with L1 (``c1 > 0``) fewer than ``len(attributes_)``, the number
        seen in training.
    state_features_ : dict (attribute, label) -> weight
        Non-zero state weights (CRFsuite leaves zero weights out of its model).
    transition_features_ : dict (label_from, label_to) -> weight
        Non-zero transition weights (forbidden transitions: -inf).
    boundary_features_ : dict
        ``("<start>", label)`` and ``(label, "<end>")`` -> weight (empty without ``start_end_features``).
    tagger_ : CRFsuiteTagger
        ``pycrfsuite.Tagger``'s interface on this model (``set``, ``tag``, ``probability``, ``marginal``,
        ``labels``, ``info``, ``dump``).
    size_ : int
        CRFsuite's meaning: bytes of the model as a CRFsuite model file (with start/end weights: that
        file plus 20 bytes, one feature record, per non-zero start/end weight).
    num_features_ : int
        Number of weights that are features (parameters).
    n_iter_ : int
    converged_ : bool
    training_log_ : list of dict
        Per iteration: loss, gradient norm, active features, seconds (and dev accuracy if given).
    coef_ : ndarray of float64, shape (n_params,)

    Notes
    -----
    Training cost per L-BFGS iteration: one forward–backward over the training set, O(N·K²), plus
    O(nnz · labels per attribute) for potentials and gradient, parallel over sequences (Numba).

    Examples
    --------
    sklearn-crfsuite code runs unchanged; CRFsuite's own model and its files:

    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DT", "NN"], ["DT", "NN"]]
    >>> crf = LinearChainCRF(c2=0.1).fit(X, y)
    >>> crf.predict([[{"w": "the"}, {"w": "cat"}]])
    [['DT', 'NN']]
    >>> crf.save("model.crfsuite", format="crfsuite")          # doctest: +SKIP
    >>> import pycrfsuite; tagger = pycrfsuite.Tagger(); tagger.open("model.crfsuite")  # doctest: +SKIP

    Inspection as eli5's ``explain_weights`` shows it (the strongest features per label, then the
    transitions) reads the same dicts as with sklearn-crfsuite:

    >>> top = sorted(crf.state_features_.items(), key=lambda kv: -abs(kv[1]))[:2]
    >>> [(attr, label) for (attr, label), w in top]               # doctest: +SKIP
    [('w:the', 'DT'), ('w:dog', 'NN')]
    >>> sorted(crf.transition_features_)
    [('DT', 'NN')]
    """

    _parameters = (
        ALGORITHM, *({"epsilon": _EPSILON, "delta": _DELTA}.get(p.name, p) for p in LBFGS_PARAMS),
        *ONLINE_PARAMS, MIN_FREQ,
        ALL_POSSIBLE_STATES, ALL_POSSIBLE_TRANSITIONS,
        Param("start_end_features", False, "bool",
              "weights for the first and last label (opt-in; False: CRFsuite's model, which has none)"),
        Param("transition_attributes", None, "any",
              "attribute names whose value at token t+1 scales a (label_t, label_t+1) weight (lbfgs)"),
        Param("forbidden_transitions", None, "str|pairs|None",
              "transitions with potential -inf: 'BIO' (I-X only after B-X/I-X) or (from, to) label pairs"),
        RANDOM_STATE,
        Param("shuffle", "crfsuite", "{crfsuite,numpy}",
              "instance order of ap/pa/arow: CRFsuite's (glibc rand, seeded by random_state) or numpy's"),
        VERBOSE,
        Param("model_filename", None, "str|None",
              "also write the model here after fit (and load it from here when not fitted)"),
        Param("keep_tempfiles", False, "bool", "accepted for sklearn-crfsuite compatibility (no effect)"),
        N_JOBS)

    classes_ = None        # sklearn-crfsuite: None until fitted (instance attributes once fitted)
    attributes_ = None

    def __init__(self, algorithm="lbfgs", c1=0.0, c2=1.0, max_iterations=None, num_memories=6,
                 epsilon=None, period=10, delta=None, linesearch="MoreThuente", max_linesearch=20,
                 calibration_eta=0.1, calibration_rate=2.0, calibration_samples=1000,
                 calibration_candidates=10, calibration_max_trials=20, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, min_freq=0.0,
                 all_possible_states=False, all_possible_transitions=False, start_end_features=False,
                 transition_attributes=None, forbidden_transitions=None, random_state=None,
                 shuffle="crfsuite", verbose=False, model_filename=None,
                 keep_tempfiles=False, n_jobs=None):
        self._store_params(locals())

    # ------------------------------------------------------------------------------------------------
    # fitting
    # ------------------------------------------------------------------------------------------------
    def _forbidden(self, K, known_only=False):
        """(forbidden (K, K), forbidden_start (K,), forbidden_end (K,)) of ``forbidden_transitions``;
        ``known_only`` (a stream whose labels grow): pairs naming a label not seen yet are left out
        until it appears."""
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
        if known_only:
            known = set(self._label_index) | {"<start>", "<end>"}
            spec = [(a, b) for a, b in spec if label_key(a) in known and label_key(b) in known]
        for a, b in self._label_pairs(spec, "forbidden_transitions", ("<start>", "<end>")):
            if a == "<start>":
                fstart[self._label_index[b]] = True
            elif b == "<end>":
                fend[self._label_index[a]] = True
            else:
                forb[self._label_index[a], self._label_index[b]] = True
        return forb, fstart, fend

    def _transition_attribute_ids(self, vocab):
        if self.transition_attributes is not None and self.algorithm != "lbfgs":
            raise ValueError(f"`transition_attributes` needs algorithm='lbfgs'; got {self.algorithm!r}")
        return super()._transition_attribute_ids(vocab)

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
            r, b = first_row(off, hit)
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
            training runs; returning True stops training (L-BFGS). With held-out data the entry it
            receives also carries ``"dev_counts"``: per label in ``classes_`` order the lists
            (#match, #model, #ref), then (correct items, items, correct sequences, sequences) —
            crfsuite's held-out evaluation (not kept in ``training_log_``).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Empty training set, items and labels of different lengths, non-finite attribute values,
            labels with tabs, a label that is None (sequence and position named), bad parameters.
        KeyboardInterrupt
            Ctrl-C during training (or an exception of ``callback``, raised as it is): the estimator is
            left without ``coef_``, with ``converged_ = False``, and ``model_filename`` is not written.

        Warns
        -----
        UserWarning
            An attribute value above 1e4 in magnitude (``_crf_base.MAX_ATTRIBUTE_VALUE``; the attribute,
            the value and where it occurs named): training is badly scaled and may end on a model that
            predicts one label; standardise or log-transform such values.
        ConvergenceWarning
            L-BFGS stopped at ``max_iterations``, or on a line search that failed (its status named).
        """
        self._check_params()
        t0 = time.perf_counter()
        vocab, packed, yy = self._fit_sequences(X, y, lengths)
        K = len(self.classes_)
        A = len(vocab)
        attr_ptr, feat_label = build_state_features(
            packed, yy, A, K, self.min_freq, self.all_possible_states,
            frequency="count" if self.start_end_features else "value")
        if self.all_possible_transitions:
            trans_features = np.ones((K, K), bool)
        else:
            trans_features = np.zeros((K, K), bool)
            same = np.ones(packed.n_items, bool)
            same[packed.offsets[1:] - 1] = False
            idx = np.flatnonzero(same[:-1])
            trans_features[yy[idx], yy[idx + 1]] = True
        model = self._chain_model(vocab, attr_ptr, feat_label, trans_features)
        if allowed is None:
            self._check_gold_allowed(yy, packed, model.forbidden, model.forbidden_start, model.forbidden_end)
        self.featurize_seconds_ = time.perf_counter() - t0

        dev = self._dev_set(vocab, X_dev, y_dev)
        objective = None
        if self.algorithm == "lbfgs":
            objective = ChainCLL(model, packed, yy, c2=self.c2,
                                 allowed=self._allowed_mask(allowed, packed.n_items, K))
        self._train(model, objective, t0, algorithm=self.algorithm, online=online, data=(packed, yy),
                    l2sgd_args=(A,), dev=dev, callback=callback)
        if self.model_filename:
            self._save_model_filename()
        return self

    def _chain_model(self, vocab, attr_ptr, feat_label, trans_features):
        """The feature model of the state features (attr_ptr, feat_label) and the label bigrams
        ``trans_features`` (K, K) over ``vocab``; sets ``attributes_``, ``model_`` (``classes_`` set)."""
        K = len(self.classes_)
        forb, fstart, fend = self._forbidden(K)
        model = ChainFeatureModel(attr_ptr, feat_label, K, trans_features, forb, fstart, fend,
                                  start_end=bool(self.start_end_features),
                                  trans_attr=self._transition_attribute_ids(vocab))
        self.attributes_ = vocab.names
        self._vocab = vocab
        self.model_ = model
        return model

    def _save_model_filename(self):
        """sklearn-crfsuite's ``model_filename``: the fitted model written there (CRFsuite's format when it
        can hold the model)."""
        self.save(self.model_filename,
                  format="crfsuite" if compat.crfsuite_incompatibility(self) is None else "structlearn")

    # ------------------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------------------
    def _check_fitted(self):
        """NotFittedError unless fitted, loaded — or loadable from ``model_filename`` (then loaded)."""
        if not hasattr(self, "coef_") and self.model_filename and os.path.exists(self.model_filename):
            self._adopt(type(self).load(self.model_filename))
        super()._check_fitted()

    def _adopt(self, other):
        """Take the fitted state (not the parameters) of ``other``."""
        params = set(self.get_params(deep=False))
        for k, v in vars(other).items():
            if k not in params:
                setattr(self, k, v)

    def _fitted_or_none(self):
        try:
            self._check_fitted()
        except NotFittedError:
            return False
        return True

    @property
    def state_features_(self):
        """dict (attribute, label) -> non-zero weight of the state features (None before fitting)."""
        if not self._fitted_or_none():
            return None
        return {k: v for k, v in self._state_weights(self.model_.feat_label, self.classes_).items()
                if v != 0}

    @property
    def transition_features_(self):
        """dict (label_from, label_to) -> non-zero weight (None before fitting).

        Forbidden transitions appear with weight -inf; the start/end weights are in
        :attr:`boundary_features_`.
        """
        if not self._fitted_or_none():
            return None
        tr, _, _ = self.model_.transition_potentials(self.coef_)
        cls = self.classes_
        out = {}
        for i, a in enumerate(cls):
            for j, b in enumerate(cls):
                if (self.model_.trans_features[i, j] and tr[i, j] != 0) or self.model_.forbidden[i, j]:
                    out[(a, b)] = float(tr[i, j])
        return out

    @property
    def boundary_features_(self):
        """dict ``("<start>", label)`` / ``(label, "<end>")`` -> weight (-inf where forbidden); empty
        without ``start_end_features`` (only forbidden starts/ends then)."""
        self._check_fitted()
        m = self.model_
        _, st, en = m.transition_potentials(self.coef_)
        out = self._with_boundaries({}, st, en)
        if not m.start_end:
            out = {k: v for k, v in out.items() if v == -np.inf}
        return out

    def _weighted_attribute_ids(self):
        """Indices into ``attributes_`` of the attributes with at least one non-zero state weight, in
        order: the attributes a CRFsuite model file of this model holds (ids 0, 1, ... in this order)."""
        m = self.model_
        ws = m.split(self.coef_)[0]
        attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
        return np.unique(attrs[ws != 0])

    @property
    def num_attributes_(self):
        """Number of attributes with a non-zero state weight (None before fitting).

        CRFsuite's count, as sklearn-crfsuite reports it (``num_attrs`` of the model file, which leaves
        out features of weight 0 and attributes left without a feature): with ``c1 > 0`` fewer than the
        attributes seen in training, which number ``len(attributes_)``.
        """
        return int(self._weighted_attribute_ids().size) if self._fitted_or_none() else None

    @property
    def size_(self):
        """Bytes of the model as a CRFsuite model file (see the class docstring; None before fitting)."""
        if not self._fitted_or_none():
            return None
        m = self.model_
        ws, wt, st, en = m.split(self.coef_)
        n_boundary = int(np.count_nonzero(st) + np.count_nonzero(en)) if m.start_end else 0
        i, j = np.nonzero(m.trans_features)
        attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
        model = compat.CRFsuiteModel([str(c) for c in self.classes_], [str(a) for a in self.attributes_],
                                     np.column_stack([attrs, m.feat_label, ws]),
                                     np.column_stack([i, j, wt[i, j]]))
        return len(compat.write_crfsuite_model_bytes(model)) + 20 * n_boundary

    @property
    def tagger_(self):
        """``pycrfsuite.Tagger``'s interface on this model (None before fitting)."""
        return compat.CRFsuiteTagger(self) if self._fitted_or_none() else None

    # ------------------------------------------------------------------------------------------------
    # model files
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.LinearChainCRF")

    def save(self, path, metadata=None, *, format="structlearn"):
        """Write the fitted model to ``path``.

        Parameters
        ----------
        format : {"structlearn", "crfsuite"}, default "structlearn"
            ``"structlearn"``: the versioned ``.npz`` + JSON header (every model; see
            :meth:`ModelFileMixin.save`). ``"crfsuite"``: CRFsuite's binary model file (``lCRF``), which
            ``crfsuite tag -m``, ``pycrfsuite.Tagger().open`` and sklearn-crfsuite read with the same
            predictions and marginals; only for CRFsuite's model (``start_end_features=False`` or all
            start/end weights 0, no forbidden transitions). Zero weights are left out, labels written as
            strings; hyper-parameters, the training log and ``metadata`` are not stored.

        Raises
        ------
        ValueError
            Unknown ``format``; a model CRFsuite's format cannot hold (the message says why); an empty
            ``path``.
        OSError
            ``path`` is a folder, its folder is missing or not writable (the message names ``path``).

        Both formats are written atomically (a unique temporary file renamed over ``path``).
        """
        if format == "structlearn":
            return super().save(path, metadata=metadata)
        if format != "crfsuite":
            raise ValueError(f"`format` must be 'structlearn' or 'crfsuite'; got {format!r}")
        self._check_fitted()
        return write_atomically(path, compat.crfsuite_bytes(self))  # never a truncated file, even interrupted

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save` — structlearn's format or CRFsuite's binary model file
        (written by ``crfsuite learn``, python-crfsuite or sklearn-crfsuite; recognised by its ``lCRF``
        magic; it loads with ``start_end_features=False`` and no training log)."""
        if is_crfsuite_model(read_magic(path)):  # read_magic: ModelFileError for a folder
            return compat.read_crfsuite_file(cls, path)
        return super().load(path)

    @classmethod
    def _params_from_file(cls, params):
        """A file that does not record ``start_end_features`` was written before it existed, when every
        model had start/end weights: it loads with ``True`` (not today's default)."""
        params.setdefault("start_end_features", True)
        return super()._params_from_file(params)

    def _file_arrays(self):
        m = self.model_
        return {"attr_ptr": m.attr_ptr, "feat_label": m.feat_label, "trans_features": m.trans_features,
                "forbidden": m.forbidden, "forbidden_start": m.forbidden_start, "forbidden_end": m.forbidden_end,
                "start_end": np.array(m.start_end), "trans_attr": m.trans_attr}

    def _restore(self, meta, arrays):
        self._restore_labels(meta)
        self.model_ = chain_model_from_arrays(arrays, len(self.classes_))
