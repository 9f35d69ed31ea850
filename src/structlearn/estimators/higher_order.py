"""``HigherOrderCRF``: a linear-chain CRF whose features look at label n-grams up to order d."""
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..learning.objectives import HigherOrderCLL, SegmentCLL
from ..learning.optimizers import lbfgs
from ..models.features import AttributeVocabulary, build_state_features
from ..models.higher_order import (HigherOrderFeatureModel, LabelPatterns, SegmentPatternModel,
                                   build_pattern_state_features, runs)
from .crf import LinearChainCRF, _progress

_FORMAT = "higher-order-crf"
_VERSION = 1


class HigherOrderCRF(LinearChainCRF):
    """Higher-order linear-chain CRF with label-pattern features (seed 000 §"Higher-order CRFs").

    The score of labels y of a sequence x is

        s(x, y) = Σ_t Σ_{z ∈ Z, y[t-|z|+1..t] = z} (w_pat[z] + Σ_a x_{t,a} w_state[a, z])
                  + start[y_0] + end[y_{T-1}]

    over label patterns z (label n-grams) of length 1..d+1: ``w_pat`` are transition n-gram features
    (length 2..d+1, the n-grams seen in training, or all with ``all_possible_transitions``) and
    ``w_state`` state features conditioned on a label n-gram of length ≤ ``state_order`` (the seed's
    "verbs starting with *mis* preceded by a source" example), the (attribute, n-gram) pairs seen in
    training. Order 1 is :class:`~structlearn.LinearChainCRF` (same features and objective).
    Training maximises the L2/L1-regularised conditional log-likelihood by L-BFGS / OWL-QN (the seed's
    C implementation offers L-BFGS only, and so does this estimator).

    Parameters
    ----------
    order : int, default 2
        Markov order d ≥ 1: each label depends on the d previous ones (transition patterns up to length
        d + 1).
    segments : bool, default False
        Higher order over *segment* labels (a semi-Markov CRF whose transitions are segment-label
        n-grams, :class:`~structlearn.models.higher_order.SegmentPatternModel`): segments are the runs
        of equal token labels (the seed's variant, consecutive segments have different labels; convert
        BIO tags to entity types first), a segment scores the sum of its tokens' (attribute, label)
        state features plus a (length, label) duration feature, lengths are limited to the longest run
        of each label in training. Inference: dense expansion to tuples of the last d segment labels
        on :class:`~structlearn.structures.SemiMarkov`; state features condition on the segment label
        only (``state_order`` must be 1 or None).
    patterns : {"sparse", "dense"}, optional
        Inference algorithm (the model is the same): ``"dense"`` expands to a first-order chain over
        K**d label tuples (time O(N·K**(2d)) per pass, memory O(N·K**d)); ``"sparse"`` runs the
        forward–backward of Cuong et al. (2014) over prefixes of the patterns with the longest-suffix
        relation (time O(N·|P|·K), |P| ≤ number of pattern prefixes seen in training). Default
        ``"sparse"`` for chains, ``"dense"`` for segments (the only one there).
    state_order : int, optional
        Longest label n-gram that state features condition on, 1 ≤ s ≤ d; default min(d, 2) (unigrams
        and bigrams: longer n-grams multiply the number of state features with little data each);
        1 with ``segments=True``.
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

    Attributes
    ----------
    classes_, attributes_, coef_, n_iter_, converged_, training_log_ :
        As :class:`~structlearn.LinearChainCRF`.
    patterns_ : list of tuple of str
        The label patterns (unigrams first).
    state_features_ : dict (attribute, tuple of labels) -> weight
    transition_features_ : dict tuple of labels -> weight (n-grams, ``("<start>", y)``, ``(y, "<end>")``)

    Notes
    -----
    Cuong, Ye, Lee & Chieu (2014), "Conditional random field with high-order dependencies for sequence
    labeling and segmentation", JMLR 15: 981–1009, §3 (forward/backward over pattern prefixes).
    ``kbest`` runs on the dense expansion (small K**d only) and is not available with ``segments=True``.
    """

    def __init__(self, order=2, segments=False, patterns=None, state_order=None, c1=0.0, c2=1.0,
                 max_iterations=None, num_memories=6, epsilon=1e-5, period=10, delta=1e-5,
                 linesearch="MoreThuente", max_linesearch=20, min_freq=0.0, all_possible_states=False,
                 all_possible_transitions=False, verbose=False):
        self.order = order
        self.segments = segments
        self.patterns = patterns
        self.state_order = state_order
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.num_memories = num_memories
        self.epsilon = epsilon
        self.period = period
        self.delta = delta
        self.linesearch = linesearch
        self.max_linesearch = max_linesearch
        self.min_freq = min_freq
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.verbose = verbose

    # the parent's online-training settings do not apply
    algorithm = "lbfgs"

    def _check_params(self):
        d = self.order
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 1:
            raise ValueError(f"`order` must be an integer >= 1; got {d!r}")
        if self.patterns not in (None, "sparse", "dense"):
            raise ValueError(f"`patterns` must be 'sparse', 'dense' or None; got {self.patterns!r}")
        if self.segments and self.patterns == "sparse":
            raise NotImplementedError("HigherOrderCRF(segments=True) has only the dense expansion; use "
                                      "patterns='dense' or None")
        s = self._state_order()
        hi = 1 if self.segments else d
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or not 1 <= s <= hi:
            raise ValueError(f"`state_order` must be an integer in 1..{hi} or None (order={d}, "
                             f"segments={self.segments}); got {self.state_order!r}")
        for name in ("c1", "c2", "min_freq", "epsilon", "delta"):
            v = getattr(self, name)
            if not isinstance(v, (int, float, np.number)) or isinstance(v, bool) or not np.isfinite(v) \
                    or v < 0:
                raise ValueError(f"`{name}` must be a non-negative finite number; got {v!r}")
        mi = self.max_iterations
        if mi is not None and (not isinstance(mi, (int, np.integer)) or isinstance(mi, bool) or mi < 1):
            raise ValueError(f"`max_iterations` must be a positive integer or None; got {mi!r}")

    def _state_order(self):
        if self.state_order is not None:
            return self.state_order
        return 1 if self.segments else min(self.order, 2)

    def _mode(self):
        if self.patterns is not None:
            return self.patterns
        return "dense" if self.segments else "sparse"

    def _segment_model(self, yy, packed, K, n_attributes):
        s0, s1, sl, so = runs(yy, packed.offsets)
        pats = LabelPatterns.from_labels(sl, so, K, int(self.order), 1, self.all_possible_transitions)
        max_lengths = np.ones(K, np.int64)
        np.maximum.at(max_lengths, sl, s1 - s0 + 1)
        attr_ptr, feat_label = build_state_features(packed, yy, n_attributes, K, self.min_freq,
                                                    self.all_possible_states)
        return SegmentPatternModel(pats, attr_ptr, feat_label, max_lengths)

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
        NotImplementedError
            ``segments=True``.
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
            model = HigherOrderFeatureModel(pats, attr_ptr, feat_pat, self._mode())
        self.attributes_ = vocab.names
        self._vocab = vocab
        self.model_ = model
        self.featurize_seconds_ = time.perf_counter() - t0

        dev = None
        if X_dev is not None:
            dev_packed = vocab.encode(X_dev, None)
            dev = (dev_packed, self._encode_labels(y_dev, dev_packed, "y_dev", grow=False))
        if allowed is not None:
            allowed = np.asarray(allowed, bool)
            if allowed.shape != (packed.n_items, K):
                raise ValueError(f"`allowed` must have shape (N, K) = ({packed.n_items}, {K}); got "
                                 f"{allowed.shape}")
        if self.segments:
            objective = SegmentCLL(model, packed, yy, c2=self.c2)
        else:
            objective = HigherOrderCLL(model, packed, yy, c2=self.c2, allowed=allowed)
        mask = model.free_mask()
        w0 = np.zeros(model.n_params)
        self.training_log_ = []
        bar = _progress(self.verbose, "lbfgs")
        current = [w0]

        def progress(entry):
            if dev is not None:
                entry["dev_accuracy"] = float(np.mean(model.structure(current[0], dev[0]).argmax()
                                                      == dev[1])) if dev[0].n_items else 1.0
            self.training_log_.append(entry)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{entry['loss']:.4g}", active=entry.get("active_features"))
            return bool(callback(entry)) if callback is not None else False

        def f(w, g):
            current[0] = w
            return objective(w, g)

        w, n_iter, converged, _ = lbfgs(
            f, w0, c1=self.c1, m=self.num_memories, epsilon=self.epsilon, period=self.period,
            delta=self.delta, max_iterations=self.max_iterations, linesearch=self.linesearch,
            max_linesearch=self.max_linesearch, callback=progress, mask=mask)
        if bar is not None:
            bar.close()
        self.coef_ = np.asarray(w, dtype=np.float64)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.training_seconds_ = time.perf_counter() - t0
        if not self.converged_:
            warnings.warn(f"L-BFGS stopped after {self.n_iter_} iterations without meeting the stopping "
                          f"criteria (epsilon={self.epsilon}, delta={self.delta}); increase "
                          f"`max_iterations`", ConvergenceWarning)
        return self

    def kbest(self, X, k=5):
        """The k most likely label sequences of every sequence with their probabilities (exact k-best
        Viterbi on the dense d-tuple expansion, whatever ``patterns``; time O(N·K**(2d)·k log(K**d·k)),
        so only for small K**d). Not available with ``segments=True`` (NotImplementedError).

        Returns
        -------
        list (per sequence) of lists of (labels (list of str), probability), best first.
        """
        if self.segments:
            raise NotImplementedError("HigherOrderCRF(segments=True).kbest is not implemented; use "
                                      "predict (Viterbi) or predict_marginals")
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
        m = self.model_
        ws = m.split(self.coef_)[0]
        attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
        pats = self.patterns_
        names = self.attributes_
        return {(names[a], pats[z]): float(v) for a, z, v in zip(attrs, self._feat(), ws)}

    def _feat(self):
        m = self.model_
        return m.feat_label if self.segments else m.feat_pat

    @property
    def transition_features_(self):
        """dict tuple of labels -> weight: n-grams (length ≥ 2), ``("<start>", y)`` and ``(y, "<end>")``."""
        self._check_fitted()
        parts = self.model_.split(self.coef_)
        wp, st, en = parts[1], parts[-2], parts[-1]
        out = {z: float(v) for z, v in zip(self.patterns_, wp) if len(z) >= 2}
        for k, c in enumerate(self.classes_):
            out[("<start>", c)] = float(st[k])
            out[(c, "<end>")] = float(en[k])
        return out

    # ------------------------------------------------------------------------------------------------
    # model files
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.HigherOrderCRF")

    def _file_metadata(self):
        return {"attributes": list(self.attributes_)}

    def _file_arrays(self):
        m = self.model_
        return {"attr_ptr": m.attr_ptr, "feat_pat": self._feat(), "patterns": m.patterns.to_array(),
                **({"max_lengths": m.max_lengths} if self.segments else {})}

    def _restore(self, meta, arrays):
        self.classes_ = list(meta["classes"])
        self._label_index = {c: i for i, c in enumerate(self.classes_)}
        self.attributes_ = list(meta["attributes"])
        self._vocab = AttributeVocabulary(self.attributes_)
        pats = LabelPatterns.from_array(arrays["patterns"], len(self.classes_), int(self.order),
                                        int(self._state_order()))
        if self.segments:
            self.model_ = SegmentPatternModel(pats, arrays["attr_ptr"], arrays["feat_pat"], arrays["max_lengths"])
        else:
            self.model_ = HigherOrderFeatureModel(pats, arrays["attr_ptr"], arrays["feat_pat"], self._mode())

    def _file_consistent(self):
        return self.coef_.shape == (self.model_.n_params,) and len(self._vocab) == len(self.model_.attr_ptr) - 1
