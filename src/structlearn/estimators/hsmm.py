"""The explicit-duration hidden semi-Markov model estimator (scikit-learn API).

The model — its parameters as semi-Markov potentials — is :mod:`structlearn.models.hsmm`; EM is
:mod:`structlearn.learning.hsmm_em` driven by :func:`structlearn.learning.em.run_em`; the duration and
emission families are :mod:`structlearn.models.durations` and :mod:`structlearn.models.emissions`.
"""
import copy
import math
import sys
import warnings
from collections import namedtuple

import numpy as np
from scipy import special
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ..learning import hsmm_em as _em
from ..learning.em import ConvergenceMonitor, run_em
from ..models import durations as _dur
from ..models import emissions as _emi
from ..models import hsmm as _model
from ..models.censoring import CENSORING
from ..models.distribution import families_from_file, family_to_file
from ..structures.chain import LinearChain
from ..utils.validation import check_lengths

__all__ = ["HiddenSemiMarkovModel", "Filtered", "Prediction", "SegmentEnds"]

#: Filtering result (Yu 2010 §2.2.2), all float64: ``state`` (N, K) P(S_t = j | o_1:t); ``end`` (N, K)
#: P(S_t] = j | o_1:t) (a j-segment ends at t); ``log_likelihood`` (N,) log P(o_1:t).
Filtered = namedtuple("Filtered", ["state", "end", "log_likelihood"])

#: One-step prediction (Yu 2010 §2.2.2), float64 (N, K): ``start`` P(S_[t+1 = j | o_1:t) (a j-segment
#: starts at t+1; rows sum to P(a segment ends at t | o_1:t)); ``state`` P(S_{t+1} = j | o_1:t).
Prediction = namedtuple("Prediction", ["start", "state"])

#: Joint MAP of the state ending at t and its duration (Yu 2010 eq. (10)): ``states`` (N,) int64,
#: ``durations`` (N,) int64, ``probs`` (N,) float64 = max_{j,d} η_t(j, d) (posterior, not normalised
#: by P(a segment ends at t)).
SegmentEnds = namedtuple("SegmentEnds", ["states", "durations", "probs"])

_FORMAT = "hidden-semi-markov-model"
_FORMAT_VERSION = 1
_LETTERS = "stde"


class HiddenSemiMarkovModel(BaseEstimator):
    r"""Explicit-duration hidden semi-Markov model with exact inference and EM (Yu 2010, §2–§3.1).

    Parameters
    ----------
    n_states : int, default 2
        Number of hidden states K.
    duration : str or duration object, default "nonparametric"
        Duration family: ``"nonparametric"``, ``"poisson"``, ``"negative_binomial"``,
        ``"geometric"``, ``"gamma"``, ``"lognormal"`` (see :mod:`structlearn.models.durations`) or an
        object implementing the duration protocol (copied, never modified; its parameters are used
        when ``"d"`` is not in ``init_params``).
    emission : str or emission object, default "gaussian"
        Emission family: ``"gaussian"`` (univariate), ``"multivariate_gaussian"`` (full),
        ``"diag_gaussian"``, ``"poisson"``, ``"categorical"``, ``"gmm"`` (see
        :mod:`structlearn.models.emissions`) or an object implementing the emission protocol (e.g.
        ``Categorical(n_features=V)``, ``MultivariateGaussian("diag")``, ``GaussianMixture(3)``).
    max_duration : int, optional
        Longest duration D (>= 1). Default: the longest sequence seen by ``fit``. Cost grows as D.
    censoring : {"none", "right", "both"}, default "right"
        Boundary conditions (Yu 2010 §2.2.1): ``"none"`` — the first segment starts at the first and
        the last ends at the last observation; ``"right"`` — the last segment may go on after the
        last observation (survivor function; Guédon 2003, R mhsmm/hsmm); ``"both"`` — additionally
        the first segment may have begun before the first observation, its observed part following
        the residual-life law S_j(d)/μ_j of a stationary process (see :mod:`structlearn.models.durations`).
    n_iter : int, default 100
        Maximum EM iterations per restart.
    tol : float, default 1e-4
        Convergence threshold on the log-likelihood gain (summed over sequences).
    n_init : int, default 1
        EM restarts; the fit with the highest log-likelihood is kept.
    init : {"kmeans", "quantile", "random"}, default "kmeans"
        Initial state labels from which emission and duration parameters are initialised: k-means
        on the observations, quantiles of the first feature, or uniform random labels. Restarts
        after the first use other k-means seeds / random quantile levels.
    params, init_params : str, default "stde"
        Letters of the parameters to update in EM / to initialise in ``fit``: ``s`` start
        probabilities, ``t`` transitions, ``d`` durations, ``e`` emissions. A parameter left out of
        ``init_params`` must be set beforehand (``startprob_``, ``transmat_`` attributes; duration /
        emission objects with their parameters).
    random_state : None, int or numpy.random.RandomState
    verbose : bool, default False
        Show a progress bar (tqdm, stderr) with the log-likelihood per iteration.

    Attributes
    ----------
    startprob_ : ndarray, shape (K,)
        π_j.
    transmat_ : ndarray, shape (K, K)
        a_ij, zero diagonal, rows sum to one (K >= 2).
    duration_, emission_ : objects
        Fitted duration and emission distributions.
    max_duration_ : int
        D in use.
    n_features_in_ : int
    monitor_ : ConvergenceMonitor
        History of the kept restart.
    converged_ : bool
    log_likelihood_ : float
        Final log-likelihood of the training data.

    Notes
    -----
    Inference costs time O(N·(D·K + K²)) and memory O(N·K) (two-stage semi-Markov forward–backward
    of :mod:`structlearn.kernels.semimarkov`); outputs indexed by duration (``posterior_durations``,
    ``map_segment_ends``, ``confidence``) need O(N·D·K) memory. EM (Yu 2010 §2.3.1) never decreases the
    likelihood: every M-step is exact or an improving (generalised) step, and censored durations are
    completed in the E-step (:func:`structlearn.models.censoring.complete_counts`). A state with no
    posterior mass keeps its previous parameters.

    Examples
    --------
    >>> import numpy as np
    >>> from structlearn import HiddenSemiMarkovModel
    >>> X = np.r_[np.zeros(20), np.ones(30), np.zeros(25)][:, None] + 0.1
    >>> model = HiddenSemiMarkovModel(2, duration="poisson", max_duration=40, random_state=0).fit(X)
    >>> model.decode(X, return_segments=True)[2][0].tolist()  # (start, end, state) rows
    [[0, 19, 0], [20, 49, 1], [50, 74, 0]]
    """

    def __init__(self, n_states=2, duration="nonparametric", emission="gaussian", max_duration=None,
                 censoring="right", n_iter=100, tol=1e-4, n_init=1, init="kmeans", params="stde",
                 init_params="stde", random_state=None, verbose=False):
        self.n_states = n_states
        self.duration = duration
        self.emission = emission
        self.max_duration = max_duration
        self.censoring = censoring
        self.n_iter = n_iter
        self.tol = tol
        self.n_init = n_init
        self.init = init
        self.params = params
        self.init_params = init_params
        self.random_state = random_state
        self.verbose = verbose

    # ================================================================================================
    # validation
    # ================================================================================================
    def _validate_hyper(self):
        K = self.n_states
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
            raise ValueError(f"`n_states` must be a positive integer; got {K!r}")
        if self.censoring not in CENSORING:
            raise ValueError(f"`censoring` must be one of {CENSORING}; got {self.censoring!r}")
        D = self.max_duration
        if D is not None and (isinstance(D, bool) or not isinstance(D, (int, np.integer)) or D < 1):
            raise ValueError(f"`max_duration` must be an integer >= 1 or None; got {D!r}")
        for name in ("n_iter", "n_init"):
            v = getattr(self, name)
            lo = 0 if name == "n_iter" else 1
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"`{name}` must be an integer >= {lo}; got {v!r}")
        if not (isinstance(self.tol, (int, float, np.floating)) and self.tol >= 0):
            raise ValueError(f"`tol` must be a non-negative number; got {self.tol!r}")
        if self.init not in ("kmeans", "quantile", "random"):
            raise ValueError(f"`init` must be 'kmeans', 'quantile' or 'random'; got {self.init!r}")
        for name in ("params", "init_params"):
            v = getattr(self, name)
            if not isinstance(v, str) or set(v) - set(_LETTERS):
                raise ValueError(f"`{name}` must be a string of letters from {_LETTERS!r} (s start, t "
                                 f"transitions, d durations, e emissions); got {v!r}")

    def _emission_for_check(self):
        return getattr(self, "emission_", None) or _emi.make_emission(self.emission)

    def _validate_data(self, X, lengths, emission=None):
        emission = emission if emission is not None else self._emission_for_check()
        X = _emi.check_observations(emission, X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
        return X, lengths, offsets

    def _check_params(self):
        """Validate user-settable probabilities (raises ValueError naming the attribute)."""
        self.startprob_, self.transmat_ = _model.check_probabilities(self.startprob_, self.transmat_,
                                                                     self.n_states)

    # ================================================================================================
    # the adapter: parameters -> semi-Markov potentials
    # ================================================================================================
    def _potentials(self):
        """The model of the current parameters (see :class:`structlearn.models.hsmm.HSMMPotentials`)."""
        return _model.HSMMPotentials(self.startprob_, self.transmat_, self.duration_, self.emission_,
                                     self.max_duration_, self.censoring,
                                     allow_chain=not getattr(self, "_no_chain", False))

    def _hmm_equivalent(self):
        """The first-order chain equal to this HSMM, or None (:meth:`HSMMPotentials.hmm_equivalent`)."""
        return self._potentials().hmm_equivalent()

    def to_structure(self, X, lengths=None):
        """The semi-Markov structure (potentials) this model defines on ``X``.

        Returns
        -------
        SemiMarkov
            ``log_partition()`` is the log-likelihood of each sequence; every other inference of
            the structure (marginals, k-best, sampling, constraints) applies to the HSMM posterior.
        """
        check_is_fitted(self, "startprob_")
        X, lengths, _ = self._validate_data(X, lengths)
        return self._potentials().semi_markov(X, lengths)

    def _prepare(self, X, lengths, allow_chain=False):
        check_is_fitted(self, "startprob_")
        self._check_params()
        X, lengths, offsets = self._validate_data(X, lengths)
        return X, lengths, offsets, self._potentials().structure(X, lengths, allow_chain)

    # ================================================================================================
    # EM
    # ================================================================================================
    def _initial_family(self, obj, letter, what, initialize):
        """``obj`` initialised by ``initialize(obj)`` when ``letter`` is in ``init_params``, else checked
        to carry parameters for ``n_states`` states."""
        K = self.n_states
        if letter in self.init_params:
            if not hasattr(obj, "initialize"):
                raise ValueError(f"the {what} object has no `initialize`; set its parameters "
                                 f"and leave '{letter}' out of `init_params`")
            initialize(obj)
        elif getattr(obj, "n_states", None) != K:
            raise ValueError(f"'{letter}' is not in `init_params` but the {what} object has no "
                             f"parameters for {K} states: {obj!r}")
        return obj

    def _init_params(self, X, lengths, rng, restart):
        K = self.n_states
        D = self.max_duration_
        ip = self.init_params
        labels = None

        def init_emission(emission):
            nonlocal labels
            labels = _em.initial_labels(X, K, self.init, rng, restart)
            emission.initialize(X, K, labels, rng)

        def init_duration(duration):
            lab = labels
            if lab is None:
                lab = np.argmax(self.emission_.log_density(X), axis=1)
                lab[np.isnan(X).all(axis=1)] = -1
            jitter = bool(restart) or self.init == "random"
            duration.initialize(K, D, _em.initial_mean_durations(lab, lengths, K, D, rng, jitter), rng)

        if "e" in ip or not hasattr(self, "emission_"):
            self.emission_ = self._initial_family(_emi.make_emission(self.emission), "e", "emission",
                                                  init_emission)
        if "d" in ip or not hasattr(self, "duration_"):
            self.duration_ = self._initial_family(_dur.make_duration(self.duration), "d", "duration",
                                                  init_duration)
        if "s" in ip:
            self.startprob_ = np.full(K, 1.0 / K)
        elif not hasattr(self, "startprob_"):
            raise ValueError("'s' is not in `init_params`: set `startprob_` before fit")
        if "t" in ip:
            if K == 1:
                tm = np.zeros((1, 1))
            elif restart or self.init == "random":
                tm = rng.dirichlet(np.ones(K - 1) * 5.0, size=K)
                tm = np.array([np.insert(tm[i], i, 0.0) for i in range(K)])
            else:
                tm = (np.ones((K, K)) - np.eye(K)) / (K - 1)
            self.transmat_ = tm
        elif not hasattr(self, "transmat_"):
            raise ValueError("'t' is not in `init_params`: set `transmat_` before fit")
        self._check_params()

    def fit(self, X, lengths=None):
        """Estimate the parameters by EM (Yu 2010 §2.3.1) with ``n_init`` restarts.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            Packed observations of all sequences (a 1-d array is one feature). NaN = missing.
        lengths : array-like of int, shape (B,), optional
            Sequence lengths summing to N; default one sequence.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad hyper-parameters, X or lengths; fewer observations than states; a sequence with zero
            likelihood (e.g. ``censoring="none"`` and a length no segmentation reaches).

        Warns
        -----
        ConvergenceWarning
            When the kept restart did not converge within ``n_iter`` iterations.
        """
        self._validate_hyper()
        K = self.n_states
        emission = _emi.make_emission(self.emission)
        X, lengths, offsets = self._validate_data(X, lengths, emission)
        n_obs = int((~np.isnan(X).all(axis=1)).sum())
        if n_obs < K:
            raise ValueError(f"fewer observed rows ({n_obs}) than states (n_states={K}); the model "
                             f"cannot be estimated")
        self.max_duration_ = int(self.max_duration if self.max_duration is not None
                                 else max(1, int(lengths.max())))
        self.n_features_in_ = X.shape[1]
        rng = check_random_state(self.random_state)
        best = None
        # parameters not initialised by fit (left out of init_params) start every restart from
        # their values at the call of fit, not from the previous restart's estimate
        fixed = {a: copy.deepcopy(getattr(self, a)) for a, c in
                 (("startprob_", "s"), ("transmat_", "t"), ("duration_", "d"), ("emission_", "e"))
                 if c not in self.init_params and hasattr(self, a)}
        for restart in range(self.n_init):
            seed = rng.randint(2**31 - 1)
            for attr in ("emission_", "duration_"):
                if attr not in fixed and hasattr(self, attr):
                    delattr(self, attr)
            for a, v in fixed.items():
                setattr(self, a, copy.deepcopy(v))
            self._init_params(X, lengths, np.random.RandomState(seed), restart)
            monitor = ConvergenceMonitor(self.tol, self.n_iter, self.verbose)
            ll = self._em(X, lengths, offsets, monitor, restart)
            if best is None or ll > best[0]:
                best = (ll, self._snapshot(), monitor)
        ll, snap, monitor = best
        self._restore(snap)
        self.monitor_ = monitor
        self.converged_ = bool(monitor.converged)
        self.log_likelihood_ = ll
        if not self.converged_ and self.n_iter > 0:
            warnings.warn(f"EM did not converge in n_iter={self.n_iter} iterations (last gain "
                          f"{monitor.history[-1] - monitor.history[-2] if len(monitor.history) > 1 else float('nan'):.3g}"
                          f" >= tol={self.tol}); increase `n_iter` or `tol`", ConvergenceWarning)
        return self

    def _em(self, X, lengths, offsets, monitor, restart):
        bar = None
        if self.verbose:
            from tqdm import tqdm
            bar = tqdm(total=self.n_iter, desc=f"HSMM EM (restart {restart + 1}/{self.n_init})",
                       file=sys.stderr, leave=False)

        def e_step():
            return _em.e_step(self._potentials(), X, lengths, offsets)

        def m_step(sm):
            self.startprob_, self.transmat_ = _em.m_step(self._potentials(), X, lengths, offsets, sm,
                                                         self.params)

        def progress(it, ll):
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loglik=f"{ll:.6g}")

        try:
            return run_em(e_step, m_step, monitor, progress)
        finally:
            if bar is not None:
                bar.close()

    def _snapshot(self):
        return {"startprob_": self.startprob_.copy(), "transmat_": self.transmat_.copy(),
                "duration_": copy.deepcopy(self.duration_), "emission_": copy.deepcopy(self.emission_)}

    def _restore(self, snap):
        for k, v in snap.items():
            setattr(self, k, v)

    # ================================================================================================
    # likelihood and smoothing
    # ================================================================================================
    def score(self, X, lengths=None):
        """Log-likelihood log P(o | λ) summed over sequences (Yu 2010 §2.2.1, eq. (4) summed).

        Returns float (-inf if a sequence is impossible). Time O(N·(D·K + K²)), memory O(N·K).
        """
        return float(self.score_per_sequence(X, lengths).sum())

    def score_per_sequence(self, X, lengths=None):
        """Log-likelihood of every sequence, float64 array (B,)."""
        return self._prepare(X, lengths, allow_chain=True)[3].log_partition()

    def score_samples(self, X, lengths=None):
        """Log-likelihood and smoothed state posteriors γ_t(j) = P(S_t = j | o) (Yu 2010 eq. (8)).

        Returns
        -------
        log_prob : float
        posteriors : ndarray of float64, shape (N, K)
        """
        sm = self._prepare(X, lengths, allow_chain=True)[3]
        return float(sm.log_partition().sum()), sm.marginals().unary

    def predict_proba(self, X, lengths=None):
        """Smoothed posteriors γ_t(j) = P(S_t = j | o_1:T), shape (N, K) (Yu 2010 eq. (8))."""
        return self.score_samples(X, lengths)[1]

    def posterior_transitions(self, X, lengths=None):
        """ξ_t(i, j) = P(S_t] = i, S_[t+1 = j | o) (Yu 2010 eq. (7)), shape (N, K, K).

        Row t: a segment of state i ends at t and one of state j starts at t+1; the last row of
        every sequence is 0.
        """
        return _model.transition_marginals(self._prepare(X, lengths, allow_chain=True)[3])[1]

    def posterior_durations(self, X, lengths=None):
        """η_t(j, d) = P(S_[t-d+1:t] = j | o) (Yu 2010 eq. (6)): a j-segment of duration d ends at t.

        Returns
        -------
        ndarray of float64, shape (N, D, K)
            Index [t, d-1, j]. Memory O(N·D·K); raises ``ValueError`` beyond 2·10⁷ entries.
        """
        sm = self._prepare(X, lengths)[3]
        eta = sm.segment_marginals()
        D = self.max_duration_
        if eta.shape[1] < D:
            eta = np.concatenate([eta, np.zeros((eta.shape[0], D - eta.shape[1], eta.shape[2]))], 1)
        return eta

    def expected_counts(self, X, lengths=None):
        r"""The expectations (a)–(g) of Yu 2010 §2.2.2, per sequence.

        Returns
        -------
        dict
            ``"ends_before"`` (N, K): (a) expected number of times state i ended before t (within
            the sequence, transitions out only); ``"starts_by"`` (N, K): (a) expected number of
            times i started at t or before (the first segment counts at t = 0);
            ``"occupancy"`` (B, K): (b) Σ_t γ_t(i); ``"symbol_counts"`` (B, K, V): (c)
            Σ_t γ_t(i) I(o_t = v) — categorical emissions only; ``"mean_observation"`` (B, K, F): (d)
            Σ_t γ_t(i) o_t / Σ_t γ_t(i) over observed entries (NaN where a state has no mass);
            ``"first_state"`` (B, K): (e) γ_1(i); ``"n_starts"``, ``"n_ends"`` (B, K): (f) expected
            number of segments of i that begin / end in the window (the first segment begins at
            t = 1 and the last ends at T, so both equal the expected number of i-segments);
            ``"mean_duration"`` (B, K): (g) Σ_t Σ_d d η_t(i, d) / Σ_t Σ_d η_t(i, d) (observed
            segment lengths; NaN without mass). All float64.
        """
        X, lengths, offsets, sm = self._prepare(X, lengths)
        return _model.expected_counts(sm, X, lengths, offsets, self.emission_)

    # ================================================================================================
    # filtering and prediction (forward messages only)
    # ================================================================================================
    def filter(self, X, lengths=None):
        """Filtered probabilities given the observations so far (Yu 2010 §2.2.2).

        ``state[t, j]`` = P(S_t = j | o_1:t), ``end[t, j]`` = P(S_t] = j | o_1:t) (a j-segment ends
        exactly at t), ``log_likelihood[t]`` = log P(o_1:t). The prefix likelihood follows the
        generative (right-censored) process: the segment running at t scores its survivor
        function, whatever ``censoring`` (with ``"both"`` the first segment follows the
        residual-life law).

        Returns
        -------
        Filtered
            ``state`` (N, K), ``end`` (N, K), ``log_likelihood`` (N,), float64.

        Notes
        -----
        Uses only forward messages (:meth:`SemiMarkov.forward`) plus one pass over d: time
        O(N·(D·K + K²)), memory O(N·K).
        """
        X, lengths, offsets, sm = self._prepare(X, lengths)
        terms, fm = self._potentials().filter_terms(sm, lengths, offsets)
        norm = special.logsumexp(terms["open"], axis=1)
        with np.errstate(invalid="ignore"):
            state = np.exp(terms["open"] - norm[:, None])
            end = np.exp(terms["closed"] - norm[:, None])
        bad = norm == -np.inf
        state[bad] = 0.0
        end[bad] = 0.0
        c = self._cum_scale(fm.log_scale, lengths, offsets)
        return Filtered(state, end, c + norm)

    @staticmethod
    def _cum_scale(log_scale, lengths, offsets):
        c = np.cumsum(log_scale)
        starts = offsets[:-1][lengths > 0]
        prev = np.r_[0.0, c][starts]
        return c - np.repeat(prev, lengths[lengths > 0])

    def predict_next(self, X, lengths=None):
        """One-step prediction given o_1:t (Yu 2010 §2.2.2).

        Returns
        -------
        Prediction
            ``start[t, j]`` = P(S_[t+1 = j | o_1:t) = Σ_{i≠j} P(S_t] = i | o_1:t) a_ij (a j-segment
            starts at t+1) and ``state[t, j]`` = P(S_{t+1} = j | o_1:t) (the running segment
            continues, or a new one starts), both (N, K) float64.
        """
        X, lengths, offsets, sm = self._prepare(X, lengths)
        potentials = self._potentials()
        terms, _ = potentials.filter_terms(sm, lengths, offsets)
        norm = special.logsumexp(terms["open"], axis=1)
        trans = potentials.log_transitions()
        log_start = special.logsumexp(terms["closed"][:, :, None] + trans[None], axis=1)
        log_state = np.logaddexp(log_start, terms["cont"])
        with np.errstate(invalid="ignore"):
            start = np.exp(log_start - norm[:, None])
            state = np.exp(log_state - norm[:, None])
        bad = norm == -np.inf
        start[bad] = 0.0
        state[bad] = 0.0
        return Prediction(start, state)

    # ================================================================================================
    # decoding
    # ================================================================================================
    def decode(self, X, lengths=None, algorithm="viterbi", return_segments=False):
        """Most likely states.

        Parameters
        ----------
        algorithm : {"viterbi", "map"}
            ``"viterbi"``: the maximum-likelihood segmentation (Yu 2010 eq. (11)); ``log_prob`` is
            log max_s P(o, s). ``"map"``: per-time argmax of γ_t (Yu 2010 §2.2.3); ``log_prob`` is
            Σ_t log max_j γ_t(j) (hmmlearn's convention).
        return_segments : bool, default False
            Also return per-sequence (n_seg, 3) int64 arrays of (start, end, state) rows (local,
            end inclusive); for ``"map"`` the runs of equal states.

        Returns
        -------
        log_prob : float
        states : ndarray of int64, shape (N,)
        segments : list of B ndarrays (only if ``return_segments``)

        Raises
        ------
        ValueError
            Unknown algorithm, or a sequence with zero likelihood (message names it).
        """
        if algorithm not in ("viterbi", "map"):
            raise ValueError(f"`algorithm` must be 'viterbi' or 'map'; got {algorithm!r}")
        X, lengths, offsets, sm = self._prepare(X, lengths, allow_chain=True)
        if algorithm == "viterbi":
            states = sm.argmax()
            log_prob = float(sm.max().sum())
            if return_segments:  # a chain path is a segmentation: its runs (a_ii = 0)
                segs = (self._runs(states, lengths, offsets) if isinstance(sm, LinearChain)
                        else sm.argmax_segments())
        else:
            sm._raise_if_infeasible(sm.log_partition(), "the MAP states")
            gamma = sm.marginals().unary
            states = np.argmax(gamma, axis=1).astype(np.int64)
            with np.errstate(divide="ignore"):
                log_prob = float(np.log(gamma.max(axis=1)).sum())
            segs = self._runs(states, lengths, offsets) if return_segments else None
        if return_segments:
            return log_prob, states, segs
        return log_prob, states

    @staticmethod
    def _runs(states, lengths, offsets):
        out = []
        for b in range(lengths.shape[0]):
            o, T = int(offsets[b]), int(lengths[b])
            lab = states[o:o + T]
            if T == 0:
                out.append(np.zeros((0, 3), dtype=np.int64))
                continue
            st = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
            en = np.r_[st[1:] - 1, T - 1]
            out.append(np.stack([st, en, lab[st]], axis=1).astype(np.int64))
        return out

    def predict(self, X, lengths=None):
        """Viterbi states (Yu 2010 eq. (11)), int64 array (N,)."""
        return self.decode(X, lengths)[1]

    def map_segment_ends(self, X, lengths=None):
        """Joint MAP of the state ending at t and its duration, (ŝ_t, d̂_t) = argmax η_t(i, d)
        (Yu 2010 eq. (10)).

        Returns
        -------
        SegmentEnds
            ``states`` (N,), ``durations`` (N,) int64 and ``probs`` (N,) float64 = η_t(ŝ_t, d̂_t).
            Memory O(N·D·K).
        """
        eta = self.posterior_durations(X, lengths)
        N, D, K = eta.shape
        flat = eta.reshape(N, D * K)
        arg = np.argmax(flat, axis=1)
        return SegmentEnds((arg % K).astype(np.int64), (arg // K + 1).astype(np.int64),
                           flat[np.arange(N), arg])

    def confidence(self, X, lengths=None):
        """Confidence of the eq. (10) estimate (Yu 2010 §2.2.4):
        max_{j,d} η_t(j, d) / Σ_{j,d} η_t(j, d), shape (N,) float64 in [0, 1].

        Low values show where state estimation errors are likely; 0 where no segment can end at t.
        """
        eta = self.posterior_durations(X, lengths)
        tot = eta.sum(axis=(1, 2))
        mx = eta.max(axis=(1, 2))
        return np.divide(mx, tot, out=np.zeros_like(tot), where=tot > 0)

    def segment_posterior(self, X, segments, lengths=None, sequence=0, exact_start=True,
                          exact_end=True):
        """Posterior probability of a subpath P[s_{t+1:t+k} | o] (Yu 2010 §2.2.4).

        Parameters
        ----------
        X, lengths
            Observations as in :meth:`fit`.
        segments : array-like of int, shape (S, 3)
            Consecutive (start, end, state) rows (local to ``sequence``, end inclusive) covering
            [t+1, t+k]; consecutive states must differ.
        sequence : int, default 0
            Which sequence of the batch.
        exact_start, exact_end : bool, default True
            Require the first segment to start exactly at its start (the state differs just before)
            and the last to end exactly at its end. With False, the first (last) segment may extend
            earlier (later), i.e. only the labels of the covered tokens are constrained.

        Returns
        -------
        float
            L' / L where L' sums the paths through the constrained lattice (Yu 2010 §2.2.4, the
            constrained forward–backward of Culotta & McCallum 2004). Time O(T·(D·K + K²)).

        Raises
        ------
        ValueError
            Malformed segments (not consecutive, outside the sequence, bad state) or a sequence
            with zero likelihood.
        """
        X, lengths, offsets, _ = self._prepare(X, lengths)
        B = lengths.shape[0]
        if isinstance(sequence, bool) or not isinstance(sequence, (int, np.integer)) or not 0 <= sequence < B:
            raise ValueError(f"`sequence` must be an integer in [0, {B}); got {sequence!r}")
        o, T = int(offsets[sequence]), int(lengths[sequence])
        seg = np.asarray(segments)
        if seg.ndim != 2 or seg.shape[1] != 3 or seg.shape[0] < 1 or not np.issubdtype(seg.dtype, np.integer):
            raise ValueError(f"`segments` must be an int array of shape (S, 3) with S >= 1 (start, end, "
                             f"state); got shape {seg.shape}, dtype {seg.dtype}")
        s, e, k = seg[:, 0], seg[:, 1], seg[:, 2]
        if (s[0] < 0 or e[-1] >= T or np.any(e < s) or np.any(s[1:] != e[:-1] + 1)
                or k.min() < 0 or k.max() >= self.n_states):
            raise ValueError(f"`segments` must be consecutive (start, end, state) rows inside [0, {T}) "
                             f"with states in [0, {self.n_states}); got {seg.tolist()}")
        if np.any(k[1:] == k[:-1]):
            return 0.0
        Xb = X[o:o + T]
        lb = np.array([T])
        sm = self._potentials().semi_markov(Xb, lb)
        log_z = float(sm.log_partition()[0])
        if log_z == -np.inf:
            raise ValueError(f"sequence {sequence} has zero likelihood; its subpath posterior is "
                             f"undefined")
        allowed = np.ones((T, self.n_states), dtype=bool)
        for si, ei, ki in seg:
            allowed[si:ei + 1] = False
            allowed[si:ei + 1, ki] = True
        if exact_start and s[0] > 0:
            allowed[s[0] - 1, k[0]] = False
        if exact_end and e[-1] < T - 1:
            allowed[e[-1] + 1, k[-1]] = False
        log_zc = float(sm.constrain(allowed).log_partition()[0])
        return math.exp(log_zc - log_z) if log_zc > -np.inf else 0.0

    # ================================================================================================
    # sampling, model selection
    # ================================================================================================
    def sample(self, n_samples=1, random_state=None):
        """Draw one sequence of ``n_samples`` observations from the generative process.

        The first state is drawn from π and its duration from p_j (``"none"`` / ``"right"``) or from
        the residual-life law S_j(d)/μ_j (``"both"``); later states from a_ij and p_j. The last
        segment is cut at ``n_samples`` (right-censored), so with ``censoring="none"`` this is the
        process without conditioning on a segment ending exactly at the last observation.

        Returns
        -------
        X : ndarray of float64, shape (n_samples, F)
        states : ndarray of int64, shape (n_samples,)
        segments : ndarray of int64, shape (S, 3)
            (start, end, state) rows, end inclusive (the last one cut at n_samples - 1).
        """
        check_is_fitted(self, "startprob_")
        self._check_params()
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"`n_samples` must be a positive integer; got {n_samples!r}")
        return self._potentials().sample(n_samples, check_random_state(random_state))

    def n_parameters(self):
        """Number of free parameters that EM estimates (letters of ``params``)."""
        check_is_fitted(self, "startprob_")
        K = self.n_states
        n = 0
        if "s" in self.params:
            n += K - 1
        if "t" in self.params and K > 2:
            n += K * (K - 2)
        if "d" in self.params:
            n += int(self.duration_.n_parameters(self.max_duration_))
        if "e" in self.params:
            n += int(self.emission_.n_parameters())
        return n

    def aic(self, X, lengths=None):
        """Akaike information criterion -2 log L + 2 p (lower is better)."""
        return -2.0 * self.score(X, lengths) + 2.0 * self.n_parameters()

    def bic(self, X, lengths=None):
        """Bayesian information criterion -2 log L + p log N, N = number of rows of X."""
        log_likelihood = self.score(X, lengths)
        n = _emi.check_observations(self.emission_, X).shape[0]
        return -2.0 * log_likelihood + self.n_parameters() * math.log(n)

    # ================================================================================================
    # model files
    # ================================================================================================
    def save(self, path):
        """Write the fitted model to ``path`` (versioned ``.npz`` + JSON header; no pickle).

        Raises
        ------
        ValueError
            A custom (non-structlearn) duration or emission object.
        """
        from ..utils.modelfile import save_model

        check_is_fitted(self, "startprob_")
        dname, darr, dcfg = family_to_file(self.duration_, _dur, "duration")
        ename, earr, ecfg = family_to_file(self.emission_, _emi, "emission")
        arrays = {"startprob_": self.startprob_, "transmat_": self.transmat_, **darr, **earr}
        params = {k: v for k, v in self.get_params().items() if k not in ("duration", "emission",
                                                                           "random_state")}
        params["duration"] = self.duration if isinstance(self.duration, str) else dname
        params["emission"] = self.emission if isinstance(self.emission, str) else ename
        rs = self.random_state
        params["random_state"] = int(rs) if isinstance(rs, (int, np.integer)) else None
        meta = {"duration_family": dname, "duration_config": dcfg, "emission_family": ename,
                "emission_config": ecfg, "max_duration_": int(self.max_duration_),
                "n_features_in_": int(self.n_features_in_),
                "converged_": bool(getattr(self, "converged_", False)),
                "log_likelihood_": (float(self.log_likelihood_)
                                    if np.isfinite(getattr(self, "log_likelihood_", np.nan)) else None),
                "history": [float(h) for h in getattr(getattr(self, "monitor_", None), "history", [])]}
        save_model(path, format_name=_FORMAT, version=_FORMAT_VERSION,
                   estimator="structlearn.HiddenSemiMarkovModel", params=params, metadata=meta,
                   arrays=arrays)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; runs no code from the file."""
        from ..utils.modelfile import ModelFileError, load_model

        header, arrays = load_model(path, expected_format=_FORMAT, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        fam = families_from_file(meta, arrays, {"duration": (_dur, _dur.DurationDistribution),
                                                "emission": (_emi, _emi.EmissionDistribution)})
        if None in fam.values():
            raise ModelFileError(f"{path!r}: the header names no structlearn duration/emission family "
                                 f"({meta.get('duration_family')!r}, {meta.get('emission_family')!r})")
        model = cls(**header["params"])
        model.duration_, model.emission_ = fam["duration"], fam["emission"]
        model.startprob_ = np.asarray(arrays["startprob_"], dtype=np.float64)
        model.transmat_ = np.asarray(arrays["transmat_"], dtype=np.float64)
        model.max_duration_ = int(meta["max_duration_"])
        model.n_features_in_ = int(meta["n_features_in_"])
        model.converged_ = bool(meta.get("converged_", False))
        ll = meta.get("log_likelihood_")
        model.log_likelihood_ = float("nan") if ll is None else float(ll)
        mon = ConvergenceMonitor(model.tol, model.n_iter)
        mon.history = list(meta.get("history", []))
        mon.iter = len(mon.history)
        model.monitor_ = mon
        model._check_params()
        return model

