"""The explicit-duration hidden semi-Markov model estimator (scikit-learn API).

The model — its parameters as semi-Markov potentials — is :mod:`structlearn.hsmm._potentials`; filtering,
prediction and segment queries are the mixin :mod:`structlearn.hsmm._queries`; EM is
:mod:`structlearn.hsmm._em` driven by :func:`structlearn.learning.em.run_em`; the duration and
emission families are :mod:`structlearn.distributions.durations` and :mod:`structlearn.distributions.emissions`.
"""
import sys

import numpy as np
from ..learning.training import EstimatorBase
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _em
from ..learning.stepwise import has_additive_statistics
from ..learning.em import EM_LOOP_DOC, run_em
from ..utils.docstrings import fill_docstring
from ..learning.shards import Shard, map_shards, data_blocks, document_blocks
from ..distributions import durations as _dur
from ..distributions import emissions as _emi
from . import _potentials as _model
from ..distributions.durations.censoring import CENSORING
from ..engine.structures.chain import LinearChain
from ..utils.validation import check_allowed_mask, check_lengths
from ._criteria import InformationCriteria
from ..learning.em_files import families_from_header, families_to_file, fit_state, restore_fit_state
from ..learning.restarts import EmptyStateWarning, check_em_options, fit_restarts, label_mask, warn_empty_states
from ._online import OnlineMixin
from ._queries import Filtered, Prediction, SegmentEnds, SegmentQueries, state_runs
from ..learning.posterior_check import check_posteriors
from ..learning.sampling import sample_sequences

__all__ = ["HiddenSemiMarkovModel", "Filtered", "Prediction", "SegmentEnds", "EmptyStateWarning"]

_FORMAT = "hidden-semi-markov-model"
_FORMAT_VERSION = 1
_LETTERS = "stde"


@document_blocks
class HiddenSemiMarkovModel(SegmentQueries, OnlineMixin, InformationCriteria, EstimatorBase):
    r"""Explicit-duration hidden semi-Markov model with exact inference and EM (Yu 2010, §2–§3.1).

    Parameters
    ----------
    n_states : int, default 2
        Number of hidden states K.
    duration : str or duration object, default "nonparametric"
        Duration family: ``"nonparametric"``, ``"poisson"``, ``"negative_binomial"``,
        ``"geometric"``, ``"gamma"``, ``"lognormal"`` (see :mod:`structlearn.distributions.durations`) or an
        object implementing the duration protocol (copied, never modified; its parameters are used
        when ``"d"`` is not in ``init_params``).
    emission : str or emission object, default "gaussian"
        Emission family: ``"gaussian"`` (univariate), ``"multivariate_gaussian"`` (full),
        ``"diag_gaussian"``, ``"poisson"``, ``"categorical"``, ``"gmm"`` (see
        :mod:`structlearn.distributions.emissions`) or an object implementing the emission protocol (e.g.
        ``Categorical(n_features=V)``, ``MultivariateGaussian("diag")``, ``GaussianMixture(3)``).
    max_duration : int, optional
        Longest duration D (>= 1). Default: the longest sequence seen by ``fit``. Cost grows as D.
        With ``duration="geometric"`` and no ``max_duration`` the law is the untruncated geometric, so
        the model is exactly the HMM with self-transitions 1 - p_j (likelihood, posteriors, Viterbi
        and EM run on the chain); D then only bounds the duration-indexed outputs
        (``posterior_durations``, ``filter``, ...), which truncate the law at D.
    censoring : {"none", "right", "both"}, default "right"
        Boundary conditions (Yu 2010 §2.2.1): ``"none"`` — the first segment starts at the first and
        the last ends at the last observation; ``"right"`` — the last segment may go on after the
        last observation (survivor function; Guédon 2003, R mhsmm/hsmm); ``"both"`` — additionally
        the first segment may have begun before the first observation, its observed part following
        the residual-life law S_j(d)/μ_j of a stationary process (see :mod:`structlearn.distributions.durations`).
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
    n_jobs : int, optional
        Run the E-step of ``fit`` over ``n_jobs`` blocks of whole sequences in joblib worker processes
        (-1: all cores; the per-shard interface :mod:`structlearn.learning.shards`); default one
        process (whose kernels still use Numba's threads, ``NUMBA_NUM_THREADS``). Pays off for many
        long sequences: every iteration sends the parameters and the blocks' statistics between processes.
        {blocks}

    Attributes
    ----------
    startprob_ : ndarray, shape (K,)
        π_j.
    transmat_ : ndarray, shape (K, K)
        a_ij, zero diagonal, rows sum to one (K >= 2). Left-right models: a row may be all zero (an
        absorbing final state, which can only be the last segment); EM keeps structural zeros (set
        ``transmat_`` and leave ``t`` out of ``init_params``).
    endprob_ : ndarray, shape (K,) or absent/None
        Optional end probabilities e_j (``censoring="none"`` only; set before ``fit`` with ``t`` left
        out of ``init_params``): the sequence ends after a j-segment with probability e_j, rows of
        ``transmat_`` sum to 1 - e_j, and the last segment scores log e_j. EM re-estimates them with
        ``t`` (e_i ∝ expected ends in i, a_ij ∝ expected i → j transitions).
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
    of :mod:`structlearn.engine.kernels.semimarkov`); outputs indexed by duration (``posterior_durations``,
    ``map_segment_ends``, ``confidence``) need O(N·D·K) memory. EM (Yu 2010 §2.3.1) never decreases the
    likelihood: every M-step is exact or an improving (generalised) step, and censored durations are
    completed in the E-step (:func:`structlearn.distributions.durations.censoring.complete_counts`). A state with no
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
                 init_params="stde", random_state=None, verbose=False, n_jobs=None):
        self._store_params(locals())

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
        check_em_options(self, _LETTERS, "s start, t transitions, d durations, e emissions")

    def _emission_for_check(self):
        return getattr(self, "emission_", None) or _emi.make_emission(self.emission)

    def _validate_data(self, X, lengths, emission=None):
        emission = emission if emission is not None else self._emission_for_check()
        X = _emi.check_observations(emission, X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
        return X, lengths, offsets

    def _check_params(self):
        """Validate user-settable probabilities (raises ValueError naming the attribute)."""
        ep = getattr(self, "endprob_", None)
        if ep is not None and self.censoring != "none":
            raise ValueError(f"`endprob_` needs censoring='none' (with {self.censoring!r} the last segment "
                             f"has not ended at the last observation); set endprob_ = None or "
                             f"censoring='none'")
        self.startprob_, self.transmat_, ep = _model.check_probabilities(self.startprob_, self.transmat_,
                                                                         self.n_states, ep)
        if ep is not None:
            self.endprob_ = ep

    # ================================================================================================
    # the adapter: parameters -> semi-Markov potentials
    # ================================================================================================
    def _potentials(self):
        """The model of the current parameters (see :class:`structlearn.hsmm._potentials.HSMMPotentials`)."""
        return _model.HSMMPotentials(self.startprob_, self.transmat_, self.duration_, self.emission_,
                                     self.max_duration_, self.censoring,
                                     allow_chain=not getattr(self, "_no_chain", False),
                                     untruncated=(self.max_duration is None
                                                  and isinstance(self.duration_, _dur.Geometric)),
                                     endprob=getattr(self, "endprob_", None))

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

    def _init_params(self, X, lengths, rng, restart, known=None):
        K = self.n_states
        D = self.max_duration_
        ip = self.init_params
        labels = None

        def init_emission(emission):
            nonlocal labels
            labels = _em.initial_labels(X, K, self.init, rng, restart, known)
            emission.initialize(X, K, labels, rng)

        def init_duration(duration):
            lab = labels
            if lab is None:
                lab = np.argmax(self.emission_.log_density(X), axis=1)
                lab[np.isnan(X).all(axis=1)] = -1
                if known is not None:
                    lab[known >= 0] = known[known >= 0]
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

    def fit(self, X, lengths=None, labels=None):
        """Estimate the parameters by EM (Yu 2010 §2.3.1) with ``n_init`` restarts.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            Packed observations of all sequences (a 1-d array is one feature). NaN = missing.
        lengths : array-like of int, shape (B,), optional
            Sequence lengths summing to N; default one sequence.
        labels : array-like of int, shape (N,), optional
            Known states, -1 where unknown (supervised and semi-supervised estimation). EM then runs
            on the paths that agree with the labels (the E-step is the forward–backward of the
            constrained structure, :meth:`SemiMarkov.constrain`) and maximises log P(o, s ∈ labels),
            which is ``log_likelihood_``; the initial state labels take the known ones. With every row
            labelled the segmentation is known (runs of a state are its segments), the E-step is
            deterministic and one M-step gives the closed-form maximum-likelihood estimate (exact for
            censoring "none"; censored first/last durations are completed by EM).

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

        Notes
        -----
        {em_loop}
        """
        self._validate_hyper()
        K = self.n_states
        emission = _emi.make_emission(self.emission)
        X, lengths, offsets = self._validate_data(X, lengths, emission)
        n_obs = int((~np.isnan(X).all(axis=1)).sum())
        if n_obs < K and "e" in self.init_params:
            raise ValueError(f"fewer observed rows ({n_obs}) than states (n_states={K}): the emissions "
                             f"cannot be initialised from the data; set `emission` with its parameters and "
                             f"leave 'e' out of `init_params`")
        known, allowed = label_mask(labels, X.shape[0], K)
        shards = data_blocks(Shard(X, lengths, offsets, allowed))
        return self._fit_sharded(lambda f, p: map_shards(f, p, shards, self.n_jobs), (X, lengths, known),
                                 int(lengths.max()), X.shape[1], X)

    def _fit_sharded(self, map_statistics, init_data, max_length, n_features, X=None):
        """EM with restarts (:func:`fit_restarts`) whose E-step maps the per-shard function over the shards
        (``map_statistics(statistics, params)`` -> summed ShardStatistics); the initial parameters come
        from ``init_data`` = (X, lengths, known labels or None). ``X``: the rows of all shards in this
        process (posteriors travel; ``fit``) or None (additive emission statistics;
        :func:`structlearn.distributed.fit`). Returns self."""
        self.max_duration_ = int(self.max_duration if self.max_duration is not None else max(1, int(max_length)))
        self.n_features_in_ = int(n_features)
        Xi, Li, known = init_data
        fit_restarts(self, {"startprob_": "s", "transmat_": "t", "endprob_": "t", "duration_": "d",
                            "emission_": "e"},
                     lambda rng, restart: self._init_params(Xi, Li, rng, restart, known),
                     lambda monitor, restart: self._em_sharded(map_statistics, monitor, restart, X))
        return self

    def _shard_from_data(self, X, lengths=None, labels=None):
        """The validated :class:`~structlearn.learning.shards.Shard` of ``X``, ``lengths`` and partial
        ``labels`` (as ``fit``)."""
        X, lengths, offsets = self._validate_data(X, lengths, _emi.make_emission(self.emission))
        return Shard(X, lengths, offsets, label_mask(labels, X.shape[0], self.n_states)[1])

    # -- the per-shard interface (structlearn.learning.shards), shared with structlearn.distributed --
    def _shard_function(self, posteriors=True):
        """(statistics, params) of the current parameters: ``statistics(params, shard)`` is the E-step of
        one shard (:func:`structlearn.hsmm._em.shard_statistics`); ``posteriors`` keeps γ for the
        emission M-step in this process (else additive emission statistics travel)."""
        return _em.shard_statistics, (self._potentials(), self.params, posteriors)

    def _apply_statistics(self, total, X=None):
        """The M-step of the summed shard statistics (rows ``X`` needed when they carry posteriors)."""
        potentials = self._potentials()
        self.startprob_, self.transmat_ = _em.apply_statistics(potentials, total, self.params, X,
                                                               on_empty=warn_empty_states)
        if potentials.endprob is not None:
            self.endprob_ = potentials.endprob

    def _em_sharded(self, map_statistics, monitor, restart, X=None):
        """EM (:func:`run_em`) whose E-step is ``map_statistics(statistics, params)`` -> the summed
        :class:`~structlearn.learning.shards.ShardStatistics` of all shards: local blocks in ``fit``,
        dask workers in :func:`structlearn.distributed.fit` (``X`` None: no posteriors travel)."""
        bar = None
        if self.verbose:
            from tqdm import tqdm
            bar = tqdm(total=self.n_iter, desc=f"HSMM EM (restart {restart + 1}/{self.n_init})",
                       file=sys.stderr, leave=False)

        # posteriors travel only for an emission family without additive statistics: otherwise this
        # process, worker processes and dask workers sum the same per-block statistics (bitwise one model)
        posteriors = X is not None and not has_additive_statistics(self._potentials().emission)

        def e_step():
            total = map_statistics(*self._shard_function(posteriors=posteriors))
            return total, total.value

        def progress(it, ll):
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loglik=f"{ll:.6g}")

        try:
            return run_em(e_step, lambda total: self._apply_statistics(total, X), monitor, progress)
        finally:
            if bar is not None:
                bar.close()

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
            Rows sum to one within 1e-9.

        Raises
        ------
        ValueError
            A sequence with zero likelihood (as :meth:`predict`), or whose posteriors lost their
            precision; the message names it.
        """
        _, _, offsets, sm = self._prepare(X, lengths, allow_chain=True)
        log_z = sm.log_partition()
        gamma = check_posteriors(sm.marginals(edge="none").unary, offsets, log_z)
        return float(log_z.sum()), gamma

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
            number of times i commenced / terminated in the window: a left-censored first segment
            (``"both"``) commenced at t = 1 only with probability p(d)/S(d) of its observed length d,
            a right-censored last one terminated at T with probability p(d)/S(d) (and a segment
            covering the whole sequence under ``"both"`` with S(d)/Σ_{m>=d} S(m)); with
            ``"none"`` both equal the expected number of i-segments;
            ``"mean_duration"`` (B, K): (g) Σ_t Σ_d d η_t(i, d) / Σ_t Σ_d η_t(i, d) (observed
            segment lengths; NaN without mass). All float64.
        """
        X, lengths, offsets, sm = self._prepare(X, lengths)
        potentials = self._potentials()
        return _model.expected_counts(sm, X, lengths, offsets, self.emission_, potentials.log_pmf(),
                                      self.censoring)

    # ================================================================================================
    # decoding
    # ================================================================================================
    def decode(self, X, lengths=None, algorithm="viterbi", return_segments=False, constraints=None):
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
        constraints : array-like of bool, shape (N, K), optional
            The states each row may take (Yu 2010 §2.2.3, constrained estimates): only paths that
            agree are considered, so ``"viterbi"`` gives the best allowed segmentation and ``"map"`` the
            argmax of the posterior given o and the constraint (P(S_t = j | o, s ∈ allowed)).

        Returns
        -------
        log_prob : float
        states : ndarray of int64, shape (N,)
        segments : list of B ndarrays (only if ``return_segments``)

        Raises
        ------
        ValueError
            Unknown algorithm, a bad ``constraints`` mask, or a sequence with zero likelihood — under
            the constraints: no allowed segmentation (the message names the sequence).

        Notes
        -----
        Time O(N·(D·K + K²)) (O(N·K²) on the chain of geometric durations), memory O(N·K).
        """
        if algorithm not in ("viterbi", "map"):
            raise ValueError(f"`algorithm` must be 'viterbi' or 'map'; got {algorithm!r}")
        X, lengths, offsets, sm = self._prepare(X, lengths, allow_chain=True)
        if constraints is not None:
            sm = sm.constrain(check_allowed_mask(constraints, (X.shape[0], self.n_states), "constraints"))
        under = " under `constraints`" if constraints is not None else ""
        if algorithm == "viterbi":
            best = sm.max()
            sm._raise_if_infeasible(best, "the Viterbi path" + under)
            states = sm.argmax()
            log_prob = float(best.sum())
            if return_segments:  # a chain path is a segmentation: its runs (a_ii = 0)
                segs = (state_runs(states, lengths, offsets) if isinstance(sm, LinearChain)
                        else sm.argmax_segments())
        else:
            sm._raise_if_infeasible(sm.log_partition(), "the MAP states" + under)
            gamma = sm.marginals(edge="none").unary
            states = np.argmax(gamma, axis=1).astype(np.int64)
            with np.errstate(divide="ignore"):
                log_prob = float(np.log(gamma.max(axis=1)).sum())
            segs = state_runs(states, lengths, offsets) if return_segments else None
        if return_segments:
            return log_prob, states, segs
        return log_prob, states

    def align(self, X, states, lengths=None):
        """Forced alignment: the best segmentation of each sequence into the given order of states
        (Yu 2010 §2.2.3, segmentation given the labels; speech recognition's forced alignment).

        Parameters
        ----------
        X, lengths
            Observations as in :meth:`fit`.
        states : array-like of int, shape (S,), or a list of B of them
            The states of the consecutive segments of each sequence (one array for a single sequence),
            consecutive entries different (an explicit-duration HSMM has no self-transitions).

        Returns
        -------
        log_prob : ndarray of float64, shape (B,)
            log max P(o, segmentation) over the segmentations with exactly that state order.
        segments : list of B int64 arrays, shape (S_b, 3)
            (start, end, state) rows, local to the sequence, end inclusive.

        Raises
        ------
        ValueError
            Wrong number of state lists, a state out of range, equal consecutive states, or an order
            that cannot cover a sequence (too many segments for its length, durations that cannot
            reach it, a forbidden transition) — named by sequence.

        Notes
        -----
        Runs the semi-Markov Viterbi of :class:`~structlearn.engine.structures.SemiMarkov` over the S_b
        positions of the order (a left-right model): time O(T·(D·S + S²)) per sequence.
        """
        X, lengths, offsets, _ = self._prepare(X, lengths)
        B = lengths.shape[0]
        K = self.n_states
        orders = [states] if B == 1 and np.ndim(states) == 1 and not (
            len(states) and np.ndim(states[0]) == 1) else list(states)
        if len(orders) != B:
            raise ValueError(f"`states` must give one state order per sequence ({B}); got {len(orders)}")
        potentials = self._potentials()
        log_prob = np.empty(B)
        out = []
        for b, order in enumerate(orders):
            order = np.asarray(order)
            if (order.ndim != 1 or order.size == 0 or not np.issubdtype(order.dtype, np.integer)
                    or order.min() < 0 or order.max() >= K):
                raise ValueError(f"`states` of sequence {b} must be a non-empty 1-d int array of states in "
                                 f"[0, {K}); got {order.tolist() if order.ndim <= 1 else order.shape}")
            if np.any(order[1:] == order[:-1]):
                i = int(np.flatnonzero(order[1:] == order[:-1])[0])
                raise ValueError(f"`states` of sequence {b} repeats state {int(order[i])} at positions {i} "
                                 f"and {i + 1}: consecutive segments must differ")
            o, T = int(offsets[b]), int(lengths[b])
            sm = potentials.alignment(X[o:o + T], order)
            best = float(sm.max()[0])
            if best == -np.inf:
                raise ValueError(f"sequence {b} (length {T}) cannot be segmented into the {order.size} "
                                 f"segments of `states` with non-zero probability")
            seg = sm.argmax_segments()[0]
            seg[:, 2] = order[seg[:, 2]]
            log_prob[b] = best
            out.append(seg)
        return log_prob, out

    def predict(self, X, lengths=None):
        """Viterbi states (Yu 2010 eq. (11)), int64 array (N,)."""
        return self.decode(X, lengths)[1]

    # ================================================================================================
    # sampling, model selection
    # ================================================================================================
    def sample(self, n_samples=1, random_state=None, n_sequences=None):
        """Draw one sequence of ``n_samples`` observations from the generative process, or several.

        The first state is drawn from π and its duration from p_j (``"none"`` / ``"right"``) or from
        the residual-life law S_j(d)/μ_j (``"both"``); later states from a_ij and p_j. The last
        segment is cut at ``n_samples`` (right-censored), so with ``censoring="none"`` this is the
        process without conditioning on a segment ending exactly at the last observation.

        Parameters
        ----------
        n_samples : int
            Length of every sequence (a sequence is shorter when the process ends: end probabilities).
        random_state : None, int or RandomState
        n_sequences : int, optional
            Number of sequences. None (the default) draws one and returns it as before; an int draws
            that many from the same random stream (the first is the sequence of ``n_sequences=None``),
            returns the per-row arrays one sequence after the other (``fit(X, lengths)``'s layout),
            ``segments`` as a list (one (S_b, 3) array per sequence, rows local to it) and ``lengths``
            last.

        Returns
        -------
        X : ndarray of float64, shape (n_samples, F)
        states : ndarray of int64, shape (n_samples,)
        segments : ndarray of int64, shape (S, 3)
            (start, end, state) rows, end inclusive (the last one cut at n_samples - 1).
        lengths : ndarray of int64, shape (n_sequences,)
            Only when ``n_sequences`` is given.

        Raises
        ------
        ValueError
            ``n_samples`` or ``n_sequences`` not a positive integer.
        """
        check_is_fitted(self, "startprob_")
        self._check_params()
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"`n_samples` must be a positive integer; got {n_samples!r}")
        rng = check_random_state(random_state)
        pot = self._potentials()
        return sample_sequences(lambda: pot.sample(n_samples, rng), n_sequences, 2)

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

    # ================================================================================================
    # model files
    # ================================================================================================
    def save(self, path):
        """Write the fitted model to ``path`` (versioned ``.npz`` + JSON header; no pickle).

        Any family of :mod:`structlearn.distributions.emissions` or :mod:`structlearn.distributions.emissions.hmm`
        is saved (its class name, configuration and parameter arrays).

        Raises
        ------
        ValueError
            A custom (non-structlearn) duration or emission object.
        """
        from ..utils.modelfile import save_model

        check_is_fitted(self, "startprob_")
        params, meta, family_arrays = families_to_file(self, self.duration_, self.emission_)
        arrays = {"startprob_": self.startprob_, "transmat_": self.transmat_, **family_arrays}
        if getattr(self, "endprob_", None) is not None:
            arrays["endprob_"] = self.endprob_
        meta.update({"max_duration_": int(self.max_duration_), "n_features_in_": int(self.n_features_in_),
                     **fit_state(self)})
        save_model(path, format_name=_FORMAT, version=_FORMAT_VERSION,
                   estimator="structlearn.HiddenSemiMarkovModel", params=params, metadata=meta,
                   arrays=arrays)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; runs no code from the file (families are looked up by
        name in :mod:`structlearn.distributions.durations`, :mod:`~structlearn.distributions.emissions` and
        :mod:`~structlearn.distributions.emissions.hmm`). An ``emission`` argument that was an object comes
        back as a fresh object of its family and configuration."""
        from ..utils.modelfile import load_model

        header, arrays = load_model(path, expected_format=_FORMAT, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        params, fam = families_from_header(path, header, arrays)
        model = cls(**params)
        model.duration_, model.emission_ = fam["duration"], fam["emission"]
        model.startprob_ = np.asarray(arrays["startprob_"], dtype=np.float64)
        model.transmat_ = np.asarray(arrays["transmat_"], dtype=np.float64)
        if "endprob_" in arrays:
            model.endprob_ = np.asarray(arrays["endprob_"], dtype=np.float64)
        model.max_duration_ = int(meta["max_duration_"])
        model.n_features_in_ = int(meta["n_features_in_"])
        restore_fit_state(model, meta)
        model._check_params()
        return model


fill_docstring(HiddenSemiMarkovModel.fit, em_loop=EM_LOOP_DOC)
