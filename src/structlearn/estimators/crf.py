"""``LinearChainCRF``: a scikit-learn estimator that trains and tags like CRFsuite."""
import time

import numpy as np

from ..learning import online
from ..learning.objectives import ChainCLL
from ..models.crf import ChainFeatureModel
from ..models.features import build_state_features
from ._crf_base import ChainCRFBase
from ._params import (ALGORITHM, ALL_POSSIBLE_STATES, ALL_POSSIBLE_TRANSITIONS, LBFGS_PARAMS, MIN_FREQ,
                      ONLINE_PARAMS, RANDOM_STATE, VERBOSE, Param)

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


class LinearChainCRF(ChainCRFBase):
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

    _parameters = (
        ALGORITHM, *LBFGS_PARAMS, *ONLINE_PARAMS, MIN_FREQ, ALL_POSSIBLE_STATES, ALL_POSSIBLE_TRANSITIONS,
        Param("forbidden_transitions", None, "str|pairs|None",
              "transitions with potential -inf: 'BIO' (I-X only after B-X/I-X) or (from, to) label pairs"),
        RANDOM_STATE, VERBOSE)

    def __init__(self, algorithm="lbfgs", c1=0.0, c2=1.0, max_iterations=None, num_memories=6,
                 epsilon=1e-5, period=10, delta=1e-5, linesearch="MoreThuente", max_linesearch=20,
                 calibration_eta=0.1, calibration_rate=2.0, calibration_samples=1000,
                 calibration_candidates=10, calibration_max_trials=20, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, min_freq=0.0,
                 all_possible_states=False, all_possible_transitions=False, forbidden_transitions=None,
                 random_state=None, verbose=False):
        self._store_params(locals())

    # ------------------------------------------------------------------------------------------------
    # fitting
    # ------------------------------------------------------------------------------------------------
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
        for a, b in self._label_pairs(spec, "forbidden_transitions", ("<start>", "<end>")):
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
        vocab, packed, yy = self._fit_sequences(X, y, lengths)
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

        dev = self._dev_set(vocab, X_dev, y_dev)
        objective = None
        if self.algorithm == "lbfgs":
            objective = ChainCLL(model, packed, yy, c2=self.c2,
                                 allowed=self._allowed_mask(allowed, packed.n_items, K))
        self._train(model, objective, t0, algorithm=self.algorithm, online=online, data=(packed, yy),
                    l2sgd_args=(A,), dev=dev, callback=callback)
        return self

    # ------------------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------------------
    @property
    def state_features_(self):
        """dict (attribute, label) -> weight of the state features."""
        self._check_fitted()
        return self._state_weights(self.model_.feat_label, self.classes_)

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
        return self._with_boundaries(out, st, en)

    # ------------------------------------------------------------------------------------------------
    # model files
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.LinearChainCRF")

    def _file_arrays(self):
        m = self.model_
        return {"attr_ptr": m.attr_ptr, "feat_label": m.feat_label, "trans_features": m.trans_features,
                "forbidden": m.forbidden, "forbidden_start": m.forbidden_start, "forbidden_end": m.forbidden_end}

    def _restore(self, meta, arrays):
        self._restore_labels(meta)
        self.model_ = ChainFeatureModel(arrays["attr_ptr"], arrays["feat_label"], len(self.classes_),
                                        arrays["trans_features"], arrays["forbidden"],
                                        arrays["forbidden_start"], arrays["forbidden_end"])
