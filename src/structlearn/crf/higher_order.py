"""``HigherOrderCRF``: a linear-chain CRF whose features look at label n-grams up to order d."""
import time

import numpy as np

from .objectives import HigherOrderCLL, SegmentCLL
from ._decode import check_state_scores, viterbi_labels
from .features import build_state_features
from ._higher_order_potentials import HigherOrderFeatureModel, LabelPatterns, build_pattern_state_features
from ._segment_patterns import SegmentPatternModel, runs
from ._segment_patterns_sparse import SparseSegmentPatternModel, build_segment_state_features
from ._base import ChainCRFBase
from ..learning.params import (ALL_POSSIBLE_STATES, ALL_POSSIBLE_TRANSITIONS, LBFGS_PARAMS, MIN_FREQ, N_JOBS, VERBOSE,
                               Param)

_FORMAT = "higher-order-crf"
_VERSION = 1


class HigherOrderCRF(ChainCRFBase):
    """Higher-order linear-chain CRF with label-pattern features (Cuong et al. 2014, JMLR 15).

    The score of labels y of a sequence x is

        s(x, y) = Σ_t Σ_{z ∈ Z, y[t-|z|+1..t] = z} (w_pat[z] + Σ_a x_{t,a} w_state[a, z])
                  + start[y_0] + end[y_{T-1}]

    over label patterns z (label n-grams) of length 1..d+1: ``w_pat`` are transition n-gram features
    (length 2..d+1, the n-grams seen in training, or all with ``all_possible_transitions``) and
    ``w_state`` state features conditioned on a label n-gram of length ≤ ``state_order`` (Cuong et al.
    2014's "verbs starting with *mis* preceded by a source" example), the (attribute, n-gram) pairs seen in
    training. Order 1 is :class:`~structlearn.LinearChainCRF` (same features and objective).
    Training maximises the L2/L1-regularised conditional log-likelihood by L-BFGS / OWL-QN (the published
    C implementation offers L-BFGS only, and so does this estimator: it takes the L-BFGS parameters and
    none of the online trainers', and has no ``algorithm``).

    With ``segments=True`` (Nguyen, Ye, Lee & Chieu 2011, the semi-Markov CRF with high-order features of
    seed 000) the labels y of x are read as segments s = ((a_1, b_1, k_1), …, (a_m, b_m, k_m)), the maximal
    runs of equal labels (so k_i ≠ k_{i+1}), each of length ℓ_i = b_i − a_i + 1 ≤ L[k_i], and

        s(x, s) = start[k_1] + end[k_m] + Σ_{i=1..m} ( dur[k_i, ℓ_i]
                  + Σ_{z ∈ Z, |z| ≤ i, (k_{i-|z|+1}, …, k_i) = z} ( [|z| ≥ 2] w_pat[z]
                                                                  + Σ_{t=a_i..b_i} Σ_a x_{t,a} w_state[a, z] ) )

        p(y | x) = exp s(x, s(y)) / Σ_{s'} exp s(x, s'),

    the sum over every segmentation s' of the T tokens into labelled segments with k'_i ≠ k'_{i+1} and
    ℓ'_i ≤ L[k'_i]: a segment-label n-gram z ends at segment i only when the n-gram lies entirely inside the
    sequence, a state feature of pattern z fires on every token of the segment that completes z, and
    ``dur``, ``w_pat``, ``w_state``, ``start``, ``end`` and L are ``duration_features_``,
    ``transition_features_`` (n-grams and ``<start>`` / ``<end>``), ``state_features_`` and ``max_lengths_``
    (``tests/oracles/segment_ngram_formula.py`` scores every segmentation by this formula from those
    attributes alone; the estimator's p(y | x) equals it to rtol 1e-10).

    Parameters
    ----------
    order : int, default 2
        Markov order d ≥ 1: each label depends on the d previous ones (transition patterns up to length
        d + 1).
    segments : bool, default False
        Higher order over *segment* labels (a semi-Markov CRF whose transitions are segment-label
        n-grams, :class:`~structlearn.crf._segment_patterns.SegmentPatternModel`): segments are the runs
        of equal token labels (Sarawagi & Cohen 2004's variant, consecutive segments have different labels; convert
        BIO tags to entity types first), a segment scores the sum of its tokens' (attribute, label)
        state features plus a (length, label) duration feature, lengths are limited to the longest run
        of each label in training. Inference on :class:`~structlearn.engine.structures.SemiMarkov` over
        super-labels: tuples of the last d segment labels (``patterns="dense"``, state features
        condition on the segment label only, ``state_order`` 1) or the prefixes of the segment-label
        patterns seen in training (``patterns="sparse"``, Nguyen, Ye, Lee & Chieu 2011,
        :class:`~structlearn.crf._segment_patterns_sparse.SparseSegmentPatternModel`; state features
        may condition on segment-label n-grams up to ``state_order`` ≤ d).
    patterns : {"sparse", "dense"}, optional
        Inference algorithm (the model is the same): ``"dense"`` expands to a first-order chain over
        K**d label tuples (time O(N·K**(2d)) per pass, memory O(N·K**d)); ``"sparse"`` runs the
        forward–backward of Cuong et al. (2014) over prefixes of the patterns with the longest-suffix
        relation (time O(N·|P|·K), |P| ≤ number of pattern prefixes seen in training). Segments:
        ``"dense"`` has S ≈ K·(K-1)**(d-1) tuple states, ``"sparse"`` S = |P| pattern-prefix states,
        time O(N·(D·S + S²)) per pass either way. Default ``"sparse"`` (the same model and objective
        as ``"dense"``, to rounding; order 3 on CoNLL-2002's 9 BIO labels: 77 states against 657, 25.6×
        faster per iteration).
    state_order : int, optional
        Longest label n-gram that state features condition on, 1 ≤ s ≤ d; default min(d, 2) (unigrams
        and bigrams: longer n-grams multiply the number of state features with little data each);
        1 with ``segments=True`` (where s > 1 needs ``patterns="sparse"``).
    c1, c2, max_iterations, num_memories, epsilon, period, delta, linesearch, max_linesearch :
        As :class:`~structlearn.LinearChainCRF` (L-BFGS; OWL-QN when ``c1 > 0``).
    min_freq : float, default 0
        Keep state features seen at least this many times.
    all_possible_states : bool, default False
        Every (attribute, state pattern) pair instead of those seen in training.
    all_possible_transitions : bool, default False
        All K**n label n-grams (n = 2..d+1) as transition features instead of those seen in training
        (with ``patterns="sparse"`` this makes the automaton as large as the dense expansion).
    verbose : bool
    n_jobs : int or None, default None
        L-BFGS over worker processes on this machine, as :class:`~structlearn.LinearChainCRF`'s: the
        result is bitwise that of ``n_jobs=None`` and of any thread count.

    Attributes
    ----------
    classes_, attributes_, coef_, n_iter_, converged_, training_log_ :
        As :class:`~structlearn.LinearChainCRF`.
    patterns_ : list of tuple of str
        The label patterns (unigrams first).
    state_features_ : dict (attribute, tuple of labels) -> weight
    transition_features_ : dict tuple of labels -> weight (n-grams, ``("<start>", y)``, ``(y, "<end>")``)
    duration_features_ : dict (label, length) -> weight
        ``segments=True`` only: the segment-length features.
    max_lengths_ : dict label -> int
        ``segments=True`` only: the longest segment of each label L[k] (its longest run in training).

    Notes
    -----
    Cuong, Ye, Lee & Chieu (2014), "Conditional random field with high-order dependencies for sequence
    labeling and segmentation", JMLR 15: 981–1009, §3 (forward/backward over pattern prefixes).
    Nguyen, Ye, Lee & Chieu (2011), "Semi-Markov conditional random field with high-order features"
    (``segments=True, patterns="sparse"``). ``kbest`` runs on the dense expansion for chains (small K**d
    only) and on the super-label semi-Markov structure (either form) with ``segments=True``.
    """

    _parameters = (
        Param("order", 2, "int>=1", "Markov order d: each label depends on the d previous ones"),
        Param("segments", False, "bool", "higher order over segment labels (runs of equal labels)"),
        Param("patterns", None, "{sparse,dense}|None",
              "inference: sparse (pattern prefixes) or dense (K**d tuples); None: sparse"),
        Param("state_order", None, "int>=1|None",
              "longest label n-gram that state features condition on (1..order); None: min(order, 2), "
              "1 for segments"),
        *LBFGS_PARAMS, MIN_FREQ, ALL_POSSIBLE_STATES,
        ALL_POSSIBLE_TRANSITIONS._replace(
            help="all K**n label n-grams (n = 2..order+1) are transition features, not only those seen"),
        VERBOSE, N_JOBS)

    def __init__(self, order=2, segments=False, patterns=None, state_order=None, c1=0.0, c2=1.0,
                 max_iterations=None, num_memories=6, epsilon=1e-5, period=10, delta=1e-5,
                 linesearch="MoreThuente", max_linesearch=20, min_freq=0.0, all_possible_states=False,
                 all_possible_transitions=False, verbose=False, n_jobs=None):
        self._store_params(locals())

    def _check_param_combinations(self):
        hi = 1 if self.segments and self._mode() == "dense" else self.order
        if not 1 <= self._state_order() <= hi:
            raise ValueError(f"`state_order` must be an integer in 1..{hi} or None (order={self.order}, "
                             f"segments={self.segments}, patterns={self._mode()!r}); got "
                             f"{self.state_order!r}")

    def _state_order(self):
        if self.state_order is not None:
            return self.state_order
        return 1 if self.segments else min(self.order, 2)

    def _mode(self):
        if self.patterns is not None:
            return self.patterns
        return "sparse"

    def _segment_model(self, yy, packed, K, n_attributes):
        s0, s1, sl, so = runs(yy, packed.offsets)
        s = int(self._state_order())
        pats = LabelPatterns.from_labels(sl, so, K, int(self.order), s, self.all_possible_transitions)
        max_lengths = np.ones(K, np.int64)
        np.maximum.at(max_lengths, sl, s1 - s0 + 1)
        if s == 1:
            attr_ptr, feat = build_state_features(packed, yy, n_attributes, K, self.min_freq,
                                                  self.all_possible_states)
        else:
            attr_ptr, feat = build_segment_state_features(packed, yy, pats, n_attributes, self.min_freq,
                                                          self.all_possible_states)
        return self._model_of(pats, attr_ptr, feat, max_lengths)

    def _segment_class(self):
        return SparseSegmentPatternModel if self._mode() == "sparse" else SegmentPatternModel

    def _model_of(self, pats, attr_ptr, feat, max_lengths=None):
        """The feature model of patterns ``pats`` and state features (``attr_ptr``, ``feat``); with
        ``segments`` also the longest run ``max_lengths`` (K,) per label (also built from counts merged
        over shards by :mod:`structlearn.distributed`)."""
        if self.segments:
            return self._segment_class()(pats, attr_ptr, feat, max_lengths)
        return HigherOrderFeatureModel(pats, attr_ptr, feat, self._mode())

    def fit(self, X, y, X_dev=None, y_dev=None, *, lengths=None, allowed=None, callback=None):
        """Train on sequences ``X`` with label sequences ``y`` (L-BFGS).

        Parameters
        ----------
        X : list of sequences of items, or scipy.sparse matrix (N, F) with ``lengths``
            Items as for :class:`~structlearn.LinearChainCRF` (python-crfsuite format).
        y : list of lists of str
        X_dev, y_dev : optional held-out data; its token accuracy is logged every iteration.
        lengths : array-like of int, optional
        allowed : ndarray of bool (N, K), optional
            Partial labels (K in ``classes_`` order).
        callback : callable, optional
            Called with each iteration's log entry; returning True stops training.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad parameters, empty training set, items and labels of different lengths.
        """
        self._check_params()
        t0 = time.perf_counter()
        vocab, packed, yy = self._fit_sequences(X, y, lengths)
        K = len(self.classes_)
        if self.segments:
            if allowed is not None:
                raise ValueError("`allowed` (partial labels) is not supported with segments=True")
            model = self._segment_model(yy, packed, K, len(vocab))
        else:
            pats = LabelPatterns.from_labels(yy, packed.offsets, K, int(self.order),
                                             int(self._state_order()), self.all_possible_transitions)
            if self._mode() == "dense":
                pats.dense()  # fail early when K**d is too large
            attr_ptr, feat_pat = build_pattern_state_features(packed, yy, pats, len(vocab),
                                                              self.min_freq, self.all_possible_states)
            model = self._model_of(pats, attr_ptr, feat_pat)
        self.attributes_ = vocab.names
        self._vocab = vocab
        self.model_ = model
        self.featurize_seconds_ = time.perf_counter() - t0

        dev = self._dev_set(vocab, X_dev, y_dev)
        allowed = self._allowed_mask(allowed, packed.n_items, K)
        if self.segments:
            objective = SegmentCLL(model, packed, yy, c2=self.c2)
        else:
            objective = HigherOrderCLL(model, packed, yy, c2=self.c2, allowed=allowed)
        self._train(model, objective, t0, dev=dev, callback=callback)
        return self

    def _structure(self, X, lengths=None, constraints=None):
        packed, structure = super()._structure(X, lengths, constraints)
        if not self.segments:  # the pattern chain takes its state scores unchecked (the engine's chains
            check_state_scores(structure.phi, packed)  # and semi-Markov structures refuse +inf / NaN)
        return packed, structure

    def predict(self, X, constraints=None, *, lengths=None):
        """Most likely label sequence of every sequence (Viterbi); arguments as
        :meth:`LinearChainCRF.predict <structlearn.LinearChainCRF.predict>`.

        Raises
        ------
        ValueError
            Constraints that leave a sequence no labeling; attribute values whose state scores overflow
            (naming the sequence and position).
        """
        if self.segments:
            return super().predict(X, constraints, lengths=lengths)
        packed, structure = self._structure(X, lengths, constraints)
        return viterbi_labels(structure, packed, self.classes_)

    def kbest(self, X, k=5):
        """The k most likely label sequences of every sequence with their probabilities.

        Chains: exact k-best Viterbi on the dense d-tuple expansion, whatever ``patterns``; time
        O(N·K**(2d)·k log(K**d·k)), so only for small K**d. Segments: the engine's k-best over the
        super-label paths (:meth:`structlearn.engine.structures.SemiMarkov.kbest`), one path per labelling;
        time O(N·k·(D·S + S²)) with S the tuple (dense) or pattern-prefix (sparse) states.

        Parameters
        ----------
        X : list of sequences of items
        k : int, default 5

        Returns
        -------
        list (per sequence) of lists of (labels (list of str), probability), best first; shorter when
        a sequence has fewer than k labellings.

        Raises
        ------
        ValueError
            ``k`` not a positive integer; chains: K**d too large for the expansion.
        """
        return super().kbest(X, k)

    # ------------------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------------------
    @property
    def patterns_(self):
        """The label patterns as tuples of labels (unigrams first)."""
        self._check_fitted()
        cls = self.classes_
        return [tuple(cls[v] for v in z) for z in self.model_.patterns.patterns]

    @property
    def state_features_(self):
        """dict (attribute, tuple of labels) -> weight of the state features."""
        self._check_fitted()
        return self._state_weights(self._feat(), self.patterns_)

    def _feat(self):
        m = self.model_
        return m.feat_label if self.segments else m.feat_pat

    @property
    def duration_features_(self):
        """dict (label, length) -> weight of the segment-length features (``segments=True``): lengths 1 to
        ``max_lengths_[label]``."""
        self._check_fitted()
        self._require_segments("duration_features_")
        wd = self.model_.split(self.coef_)[2]
        return {(c, d): float(wd[d - 1, k]) for k, c in enumerate(self.classes_)
                for d in range(1, int(self.model_.max_lengths[k]) + 1)}

    @property
    def max_lengths_(self):
        """dict label -> int, the longest segment of each label (its longest run in training;
        ``segments=True``)."""
        self._check_fitted()
        self._require_segments("max_lengths_")
        return {c: int(self.model_.max_lengths[k]) for k, c in enumerate(self.classes_)}

    def _require_segments(self, name):
        if not self.segments:
            raise AttributeError(f"`{name}` exists with segments=True only (this HigherOrderCRF has "
                                 f"segments=False: no segment lengths)")

    @property
    def transition_features_(self):
        """dict tuple of labels -> weight: n-grams (length ≥ 2), ``("<start>", y)`` and ``(y, "<end>")``."""
        self._check_fitted()
        parts = self.model_.split(self.coef_)
        wp, st, en = parts[1], parts[-2], parts[-1]
        ngrams = {z: float(v) for z, v in zip(self.patterns_, wp) if len(z) >= 2}
        return self._with_boundaries(ngrams, st, en)

    # ------------------------------------------------------------------------------------------------
    # model files
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.HigherOrderCRF")

    def _file_arrays(self):
        m = self.model_
        return {"attr_ptr": m.attr_ptr, "feat_pat": self._feat(), "patterns": m.patterns.to_array(),
                **({"max_lengths": m.max_lengths} if self.segments else {})}

    def _restore(self, meta, arrays):
        self._restore_labels(meta)
        pats = LabelPatterns.from_array(arrays["patterns"], len(self.classes_), int(self.order),
                                        int(self._state_order()))
        if self.segments:
            # durations bound the (D, K) blocks: at most the stored weights (a corrupted file must not allocate)
            ml = np.asarray(arrays["max_lengths"])
            if ml.shape != (len(self.classes_),) or ml.min() < 1 or ml.max() > self.coef_.size:
                raise ValueError(f"'max_lengths' must be K = {len(self.classes_)} integers in "
                                 f"[1, {self.coef_.size}]; got {ml.tolist()}")
            self.model_ = self._segment_class()(pats, arrays["attr_ptr"], arrays["feat_pat"], ml).check()
        else:
            self.model_ = HigherOrderFeatureModel(pats, arrays["attr_ptr"], arrays["feat_pat"],
                                                  self._mode()).check()
