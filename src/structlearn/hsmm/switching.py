"""The switching hidden semi-Markov model estimator (scikit-learn API).

The model — (ρ, B, π, A) and the duration / emission families as an explicit-duration HSMM over
(regime, state) pairs — is :mod:`structlearn.hsmm._switching_potentials`; inference is the semi-Markov structure
of :class:`structlearn.hsmm._potentials.HSMMPotentials`; the E-step is the explicit-duration HSMM's per-shard
function on the product states (:func:`structlearn.hsmm._switching_em.shard_statistics`), driven by
:func:`structlearn.learning.em.run_em` through the per-shard interface (:mod:`structlearn.learning.shards`):
one EM loop (``_em_sharded``) serves ``fit`` (local blocks, ``n_jobs``) and :func:`structlearn.distributed.fit`
(persisted dask shards, emissions refitted from sufficient statistics).
"""
import sys
import warnings

import numpy as np
from ..learning.training import EstimatorBase
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _em
from . import _switching_em as _sem
from ..learning.em import run_em
from ..learning.stepwise import has_additive_statistics
from ..learning.shards import Shard, map_shards, data_blocks, document_blocks
from ..distributions import durations as _dur
from ..distributions import emissions as _emi
from . import _switching_potentials as _model
from ..distributions.durations.censoring import CENSORING
from ..utils.validation import check_lengths
from ._criteria import InformationCriteria
from ..learning.posterior_check import check_posteriors
from ..learning.sampling import sample_sequences
from ._shard_online import ShardOnlineMixin
from ..learning.em_files import families_from_header, families_to_file, fit_state, restore_fit_state, save_doc
from ..learning.restarts import EmptyStateWarning, check_n_jobs, fit_restarts, label_mask, user_stacklevel

__all__ = ["SwitchingHSMM"]

_FORMAT = "switching-hidden-semi-markov-model"
_FORMAT_VERSION = 1
_LETTERS = "stde"


def _positive_int(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {v!r}")


@document_blocks
class SwitchingHSMM(ShardOnlineMixin, InformationCriteria, EstimatorBase):
    r"""Switching hidden semi-Markov model: regimes × states, exact inference and EM (Duong et al. 2005).

    R regimes (routines) × M states (activities). Within a regime the states follow an explicit-duration
    HSMM (per-regime transitions A_r with a zero diagonal, durations p_{r,m}(d)); a Markov chain over the
    regimes (B) switches only at segment boundaries, and a new regime r' starts from its own initial law
    π_{r'}. At the end of a (r, m)-segment: r' ~ B[r, ·]; m' ~ A_r[m, ·] if r' = r, else m' ~ π_{r'}.
    The first segment: r ~ ρ, m ~ π_r. Emissions b_m(o_t) per state, shared by the regimes (or per
    (regime, state) with ``tie_emissions=False``).

    Parameters
    ----------
    n_regimes : int, default 2
        Number of regimes R.
    n_states : int, default 2
        Number of states M per regime (the same M state labels in every regime).
    duration : str or duration object, default "nonparametric"
        Duration family as in :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`; an object has
        R·M states (M with ``tie_durations``) when ``"d"`` is not in ``init_params``.
    emission : str or emission object, default "gaussian"
        Emission family as in :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`; an object has
        M states (R·M without ``tie_emissions``) when ``"e"`` is not in ``init_params``.
    max_duration : int, optional
        Longest duration D (default: the longest training sequence). Cost grows as D.
    censoring : {"none", "right", "both"}, default "right"
        Boundary conditions of the first / last segment (Yu 2010 §2.2.1), as for the HSMM.
    tie_durations : bool, default False
        One duration law per state m shared by the regimes (``duration_`` has M states), instead of one
        per (regime, state) (R·M states, product order k = r·M + m).
    tie_emissions : bool, default True
        One emission law per state m shared by the regimes (``emission_`` has M states); False: per
        (regime, state) (R·M states, order k = r·M + m).
    n_iter : int, default 100
        Maximum EM iterations per restart.
    tol : float, default 1e-4
        Convergence threshold on the log-likelihood gain (summed over sequences).
    n_init : int, default 1
        EM restarts; the fit with the highest log-likelihood is kept.
    init : {"kmeans", "quantile", "random"}, default "kmeans"
        Initial state labels (as for the HSMM; M clusters, or R·M with ``tie_emissions=False``, ordered by
        their first-feature mean so that regime 0 takes the lowest ones).
    params, init_params : str, default "stde"
        Letters of the parameters EM updates / ``fit`` initialises: ``s`` the start probabilities ρ and π
        (π_r also from the switches into r), ``t`` the transitions B and A, ``d`` durations, ``e``
        emissions. A parameter left out of ``init_params`` must be set beforehand.
    random_state : None, int or numpy.random.RandomState
    verbose : bool, default False
        Progress bar (tqdm, stderr) with the log-likelihood per iteration.
    n_jobs : int, optional
        E-step in joblib processes (-1: all cores).
        {blocks}

    Attributes
    ----------
    regime_startprob_ : ndarray, shape (R,)
        ρ_r.
    regime_transmat_ : ndarray, shape (R, R)
        B[r, r'] (from, to), rows sum to one; the diagonal is the probability of staying in the regime at
        a segment boundary (zero when M = 1).
    startprob_ : ndarray, shape (R, M)
        π_r[m]: the first state of regime r (at the start and after every switch into r).
    transmat_ : ndarray, shape (R, M, M)
        A_r[m, m'] (from, to), zero diagonal, rows sum to one (M >= 2).
    duration_, emission_ : objects
        Fitted duration and emission families (M or R·M states, see ``tie_durations``, ``tie_emissions``).
    max_duration_ : int
    n_features_in_ : int
    monitor_ : ConvergenceMonitor
    converged_ : bool
    log_likelihood_ : float
        Final log-likelihood of the training data (log space, summed over sequences).

    Notes
    -----
    Exact inference on the product state space K = R·M (:mod:`structlearn.hsmm._switching_potentials`): time
    O(N·(K² + D·K)) and memory O(N·K) per E-step (N rows, D the longest duration), i.e. the
    explicit-duration HSMM's two-stage semi-Markov forward–backward with K = R·M. The M-step of ρ, π, B,
    A from the product's expected counts is exact and tied families are refitted from statistics summed
    over regimes, so EM never decreases the likelihood. With R = 1 the model is the explicit-duration
    HSMM with M states (and ``fit`` follows the same initialisation and iterations).

    References
    ----------
    T. V. Duong, H. H. Bui, D. Q. Phung, S. Venkatesh, "Activity recognition and abnormality detection
    with the switching hidden semi-Markov model", CVPR 2005. S.-Z. Yu, "Hidden semi-Markov models",
    Artificial Intelligence 174 (2010), §4.

    Examples
    --------
    >>> import numpy as np
    >>> from structlearn import SwitchingHSMM
    >>> X = np.r_[np.zeros(20), np.ones(20), np.zeros(20), np.full(20, 3.0), np.full(20, 2.0)][:, None]
    >>> model = SwitchingHSMM(2, 2, duration="poisson", max_duration=30, random_state=0).fit(X + 0.1)
    >>> model.regime_transmat_.shape, model.transmat_.shape
    ((2, 2), (2, 2, 2))
    """

    def __init__(self, n_regimes=2, n_states=2, duration="nonparametric", emission="gaussian",
                 max_duration=None, censoring="right", tie_durations=False, tie_emissions=True, n_iter=100,
                 tol=1e-4, n_init=1, init="kmeans", params="stde", init_params="stde", random_state=None,
                 verbose=False, n_jobs=None):
        self._store_params(locals())

    # ================================================================================================
    # validation
    # ================================================================================================
    @property
    def _K(self):
        return int(self.n_regimes) * int(self.n_states)

    def _validate_hyper(self):
        _positive_int(self.n_regimes, "n_regimes")
        _positive_int(self.n_states, "n_states")
        if self.censoring not in CENSORING:
            raise ValueError(f"`censoring` must be one of {CENSORING}; got {self.censoring!r}")
        D = self.max_duration
        if D is not None and (isinstance(D, bool) or not isinstance(D, (int, np.integer)) or D < 1):
            raise ValueError(f"`max_duration` must be an integer >= 1 or None; got {D!r}")
        for name, lo in (("n_iter", 0), ("n_init", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"`{name}` must be an integer >= {lo}; got {v!r}")
        if not (isinstance(self.tol, (int, float, np.floating)) and self.tol >= 0):
            raise ValueError(f"`tol` must be a non-negative number; got {self.tol!r}")
        if self.init not in ("kmeans", "quantile", "random"):
            raise ValueError(f"`init` must be 'kmeans', 'quantile' or 'random'; got {self.init!r}")
        for name in ("tie_durations", "tie_emissions"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"`{name}` must be True or False; got {getattr(self, name)!r}")
        for name in ("params", "init_params"):
            v = getattr(self, name)
            if not isinstance(v, str) or set(v) - set(_LETTERS):
                raise ValueError(f"`{name}` must be a string of letters from {_LETTERS!r} (s start, t "
                                 f"transitions, d durations, e emissions); got {v!r}")
        check_n_jobs(self.n_jobs)

    def _validate_data(self, X, lengths, emission=None):
        emission = emission if emission is not None else (getattr(self, "emission_", None)
                                                          or _emi.make_emission(self.emission))
        X = _emi.check_observations(emission, X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
        return X, lengths, offsets

    def _check_params(self):
        (self.regime_startprob_, self.regime_transmat_, self.startprob_,
         self.transmat_) = _model.check_switching_probabilities(
            self.regime_startprob_, self.regime_transmat_, self.startprob_, self.transmat_, self.n_regimes,
            self.n_states)

    # ================================================================================================
    # the adapter: parameters -> product-state HSMM potentials
    # ================================================================================================
    def _potentials(self):
        """The product-state :class:`~structlearn.hsmm._potentials.HSMMPotentials` of the current parameters."""
        return _model.product_potentials(
            self.regime_startprob_, self.regime_transmat_, self.startprob_, self.transmat_, self.duration_,
            self.emission_, self.max_duration_, self.censoring, self.tie_durations, self.tie_emissions,
            untruncated=self.max_duration is None and isinstance(self.duration_, _dur.Geometric))

    def _prepare(self, X, lengths, allow_chain=True):
        check_is_fitted(self, "startprob_")
        self._check_params()
        X, lengths, offsets = self._validate_data(X, lengths)
        return X, lengths, offsets, self._potentials().structure(X, lengths, allow_chain)

    def to_structure(self, X, lengths=None):
        """The semi-Markov structure over the R·M product states (k = r·M + m) that this model defines
        on ``X``; ``log_partition()`` is the log-likelihood of every sequence."""
        return self._prepare(X, lengths, allow_chain=False)[3]

    # ================================================================================================
    # initialisation
    # ================================================================================================
    def _family(self, make, spec, letter, what, n, initialize):
        obj = make(spec)
        if letter in self.init_params:
            if not hasattr(obj, "initialize"):
                raise ValueError(f"the {what} object has no `initialize`; set its parameters and leave "
                                 f"'{letter}' out of `init_params`")
            initialize(obj)
        elif getattr(obj, "n_states", None) != n:
            raise ValueError(f"'{letter}' is not in `init_params` but the {what} object has no parameters "
                             f"for {n} states: {obj!r}")
        return obj

    def _init_params(self, X, lengths, rng, restart, known=None):
        R, M, K = int(self.n_regimes), int(self.n_states), self._K
        D = self.max_duration_
        ip = self.init_params
        n_emi = M if self.tie_emissions else K
        n_dur = M if self.tie_durations else K
        labels = None

        def init_emission(emission):
            nonlocal labels
            labels = _em.initial_labels(X, n_emi, self.init, rng, restart, _known_for(n_emi))
            emission.initialize(X, n_emi, labels, rng)

        def _known_for(n):
            """Known states as labels of ``n`` emission states: M -> the states; R·M -> (regime drawn
            at random per run of a known state, state), so that every regime sees every labelled state."""
            if known is None or n == M:
                return known
            out = np.full_like(known, -1)
            rows = np.flatnonzero(known >= 0)
            if rows.size:
                new_run = np.r_[True, (np.diff(rows) != 1) | (known[rows][1:] != known[rows][:-1])]
                run = np.cumsum(new_run) - 1
                out[rows] = rng.randint(R, size=int(run[-1]) + 1)[run] * M + known[rows]
            return out

        def init_duration(duration):
            lab = labels
            if lab is None:
                lab = np.argmax(self.emission_.log_density(X), axis=1)
                lab[np.isnan(X).all(axis=1)] = -1
                if known is not None:  # emission labels are states m (tied) or products r·M + m
                    kn = _known_for(n_emi)
                    lab[kn >= 0] = kn[kn >= 0]
            jitter = bool(restart) or self.init == "random"
            if n_emi == n_dur:
                means = _em.initial_mean_durations(lab, lengths, n_dur, D, rng, jitter)
            else:  # product labels r·M + m -> their states m, then one mean per (regime, state)
                means = _em.initial_mean_durations(np.where(lab >= 0, lab % M, -1), lengths, M, D, rng, jitter)
                means = np.tile(means, R) if n_dur == K else means
                if n_dur == K and R > 1:  # break the symmetry between regimes
                    means = np.clip(means * np.exp(rng.uniform(-0.5, 0.5, K)), 1.05, max(1.05, 0.75 * D))
            duration.initialize(n_dur, D, means, rng)

        if "e" in ip or not hasattr(self, "emission_"):
            self.emission_ = self._family(_emi.make_emission, self.emission, "e", "emission", n_emi,
                                          init_emission)
        if "d" in ip or not hasattr(self, "duration_"):
            self.duration_ = self._family(_dur.make_duration, self.duration, "d", "duration", n_dur,
                                          init_duration)
        random_rows = restart or self.init == "random"
        if "s" in ip:
            self.regime_startprob_ = np.full(R, 1.0 / R)
            self.startprob_ = np.full((R, M), 1.0 / M)
            if R > 1:
                self.startprob_ = rng.dirichlet(np.full(M, 5.0), size=R)
        elif not hasattr(self, "startprob_") or not hasattr(self, "regime_startprob_"):
            raise ValueError("'s' is not in `init_params`: set `regime_startprob_` and `startprob_` before fit")
        if "t" in ip:
            A = np.zeros((R, M, M))
            if M > 1:
                for r in range(R):
                    if random_rows or R > 1:
                        rows = rng.dirichlet(np.full(M - 1, 5.0), size=M)
                    else:
                        rows = np.full((M, M - 1), 1.0 / (M - 1))
                    A[r] = [np.insert(rows[m], m, 0.0) for m in range(M)]
            self.transmat_ = A
            if R == 1:
                B = np.ones((1, 1))
            elif M == 1:
                B = (np.ones((R, R)) - np.eye(R)) / (R - 1)
            else:  # regimes persist over several segments
                B = np.full((R, R), 0.2 / (R - 1))
                np.fill_diagonal(B, 0.8)
            self.regime_transmat_ = B
        elif not hasattr(self, "transmat_") or not hasattr(self, "regime_transmat_"):
            raise ValueError("'t' is not in `init_params`: set `regime_transmat_` and `transmat_` before fit")
        self._check_params()

    # ================================================================================================
    # EM
    # ================================================================================================
    def fit(self, X, lengths=None, labels=None):
        """Estimate the parameters by EM on the product states, with ``n_init`` restarts.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            Packed observations of all sequences (1-d: one feature). NaN = missing.
        lengths : array-like of int, shape (B,), optional
            Sequence lengths summing to N; default one sequence.
        labels : array-like of int, shape (N,), optional
            Known states m in [0, M), -1 where unknown; the regimes stay hidden (supervised activities,
            latent routines). Row t may then take the product states (r, m) with m = labels[t] for every
            regime r (all K = R·M where -1): EM runs on the constrained structure
            (:meth:`SemiMarkov.constrain`) and maximises log P(o, s ∈ labels), which is
            ``log_likelihood_`` (and is non-decreasing over the iterations). The initial emissions take
            the labelled rows (with ``tie_emissions=False`` a labelled run goes to a random regime), the
            initial durations the labelled runs. With R = 1 this is
            :meth:`HiddenSemiMarkovModel.fit` with the same ``labels``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad hyper-parameters, X or lengths; ``labels`` of the wrong shape, not integers, or outside
            [-1, M); fewer observed rows than emission states; a sequence with zero likelihood (with
            labels: no segmentation agrees with them, e.g. a labelled run longer than ``max_duration``
            under ``censoring="none"``); families given without parameters while left out of
            ``init_params``.

        Warns
        -----
        ConvergenceWarning
            When the kept restart did not converge within ``n_iter`` iterations.
        EmptyStateWarning
            When an E-step gives an emission (or duration) state no posterior mass (its parameters are kept).

        Notes
        -----
        Time O(n_init · n_iter · N·(K² + D·K)), K = R·M; memory O(N·K) (the (N, K) label mask included).
        EM runs hmmlearn's loop (:func:`structlearn.learning.em.run_em`), as
        :meth:`HiddenSemiMarkovModel.fit <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel.fit>`:
        the parameters are those after the last M-step (also on the iteration that meets ``tol``),
        ``monitor_.history`` the log-likelihood before each M-step, ``log_likelihood_`` that of the fitted
        parameters and ``converged_`` True only when the gain fell below ``tol``.
        """
        self._validate_hyper()
        emission = _emi.make_emission(self.emission)
        X, lengths, offsets = self._validate_data(X, lengths, emission)
        n_emi = int(self.n_states) if self.tie_emissions else self._K
        n_obs = int((~np.isnan(X).all(axis=1)).sum())
        if n_obs < n_emi and "e" in self.init_params:
            raise ValueError(f"fewer observed rows ({n_obs}) than emission states ({n_emi}): the emissions "
                             f"cannot be initialised from the data; set `emission` with its parameters and "
                             f"leave 'e' out of `init_params`")
        known, allowed = label_mask(labels, X.shape[0], int(self.n_states))
        shards = data_blocks(Shard(X, lengths, offsets, allowed))
        return self._fit_sharded(lambda f, p: map_shards(f, p, shards, self.n_jobs), (X, lengths, known),
                                 int(lengths.max()), X.shape[1], X)

    def _fit_sharded(self, map_statistics, init_data, max_length, n_features, X=None):
        """EM with restarts (:func:`fit_restarts`) whose E-step maps the per-shard function over the shards
        (``map_statistics(statistics, params)`` -> summed ShardStatistics), as
        :meth:`HiddenSemiMarkovModel._fit_sharded <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel>`:
        ``init_data`` = (X, lengths, known states m or None) initialises the parameters; ``X``: the rows of
        all shards in this process (posteriors travel; ``fit``) or None (additive emission statistics;
        :func:`structlearn.distributed.fit`). Returns self."""
        self.max_duration_ = int(self.max_duration if self.max_duration is not None
                                 else max(1, int(max_length)))
        self.n_features_in_ = int(n_features)
        Xi, Li, known = init_data
        attributes = {"regime_startprob_": "s", "startprob_": "s", "regime_transmat_": "t", "transmat_": "t",
                      "duration_": "d", "emission_": "e"}
        fit_restarts(self, attributes, lambda rng, restart: self._init_params(Xi, Li, rng, restart, known),
                     lambda monitor, restart: self._em_sharded(map_statistics, monitor, restart, X))
        return self

    def _online_attributes(self):
        """The fitted parameters whose identity ties ``partial_fit``'s running statistics to them."""
        return ("regime_startprob_", "startprob_", "regime_transmat_", "transmat_", "duration_", "emission_")

    def _online_init(self, shard):
        """The first chunk's initialisation, as ``fit`` does (``max_duration=None``: its longest sequence)."""
        self.max_duration_ = int(self.max_duration if self.max_duration is not None
                                 else max(1, int(shard.lengths.max())))
        self.n_features_in_ = int(shard.X.shape[1])
        known = None
        if shard.allowed is not None:
            known = np.where(shard.allowed.sum(axis=1) == 1, np.argmax(shard.allowed, axis=1), -1).astype(np.int64)
        self._init_params(shard.X, shard.lengths, check_random_state(self.random_state), 0, known)

    def _shard_from_data(self, X, lengths=None, labels=None):
        """The validated :class:`~structlearn.learning.shards.Shard` of ``X``, ``lengths`` and partial
        ``labels`` (states m, as ``fit``); its ``allowed`` is the (N, M) mask of states, tiled over the
        regimes by the per-shard function."""
        X, lengths, offsets = self._validate_data(X, lengths, _emi.make_emission(self.emission))
        return Shard(X, lengths, offsets, label_mask(labels, X.shape[0], int(self.n_states))[1])

    # -- the per-shard interface (structlearn.learning.shards), shared with structlearn.distributed --
    def _shard_function(self, posteriors=True):
        """(statistics, params) of the current parameters: ``statistics(params, shard)`` is the E-step of
        one shard on the product states (:func:`structlearn.hsmm._switching_em.shard_statistics`);
        ``posteriors`` keeps γ for the emission M-step in this process (else additive emission statistics
        travel)."""
        return _sem.shard_statistics, (self._potentials(), self._letters(), posteriors, int(self.n_regimes))

    def _letters(self):
        """The E-step letters: π needs the switch counts ("t") and ρ the start counts ("s")."""
        p = self.params
        return p + ("st" if any(c in p for c in "st") else "")

    def _em_sharded(self, map_statistics, monitor, restart, X=None):
        """EM (:func:`run_em`) whose E-step is ``map_statistics(statistics, params)`` -> the summed
        :class:`~structlearn.learning.shards.ShardStatistics` of all shards: local blocks in ``fit``, dask
        workers in :func:`structlearn.distributed.fit` (``X`` None: no posteriors travel)."""
        bar = None
        if self.verbose:
            from tqdm import tqdm
            bar = tqdm(total=self.n_iter, desc=f"switching HSMM EM (restart {restart + 1}/{self.n_init})",
                       file=sys.stderr, leave=False)

        # posteriors travel only for an emission family without additive statistics (one model, bitwise,
        # in this process, worker processes and dask workers)
        posteriors = X is not None and not has_additive_statistics(self.emission_)

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

    def _apply_statistics(self, total, X=None):
        """The M-step of the summed shard statistics: ρ, π, B, A from the product's expected counts;
        durations and emissions (tied: summed over regimes) refitted in place — the emissions from the rows
        ``X`` and ``total.posteriors`` when they travelled, else from ``total.stats["emission"]``."""
        stats = total.stats
        if "occupancy" in stats:
            self._warn_empty(stats["occupancy"])
        (self.regime_startprob_, self.regime_transmat_, self.startprob_,
         self.transmat_) = _model.switching_m_step(stats.get("start"), stats.get("trans"), self.regime_startprob_,
                                                   self.regime_transmat_, self.startprob_, self.transmat_,
                                                   self.params)
        family_stats = {k: v for k, v in stats.items() if k in ("counts", "left", "stays", "leaves")}
        if "d" not in self.params:
            family_stats = {}
        potentials = self._potentials()
        _em.m_step_from_statistics(potentials, family_stats)
        if "e" in self.params:
            if total.posteriors is not None:
                potentials.emission.fit(X, total.posteriors)
            else:  # the inner family of tied emissions: the statistics were summed over regimes
                from ..learning.stepwise import emission_m_step
                emission_m_step(self.emission_, stats["emission"])

    def _warn_empty(self, occupancy):
        R, M = int(self.n_regimes), int(self.n_states)
        occ = occupancy.reshape(R, M)
        if "e" in self.params and self.tie_emissions:
            empty = [f"state {m}" for m in np.flatnonzero(~(occ.sum(axis=0) > 0))]
        else:
            empty = [f"(regime {r}, state {m})" for r, m in np.argwhere(~(occ > 0))]
        if empty:
            warnings.warn(f"{', '.join(empty)} received no posterior mass in the E-step; the parameters of "
                          f"{'these' if len(empty) > 1 else 'this'} kept their values", EmptyStateWarning,
                          stacklevel=user_stacklevel())

    # ================================================================================================
    # likelihood, posteriors, decoding
    # ================================================================================================
    def score(self, X, lengths=None):
        """Log-likelihood log P(o | θ) summed over sequences (float; -inf if a sequence is impossible).
        Time O(N·(K² + D·K)), memory O(N·K), K = R·M."""
        return float(self.score_per_sequence(X, lengths).sum())

    def score_per_sequence(self, X, lengths=None):
        """Log-likelihood of every sequence, float64 array (B,)."""
        return self._prepare(X, lengths)[3].log_partition()

    def _joint_posteriors(self, X, lengths):
        _, _, offsets, sm = self._prepare(X, lengths)
        log_z = sm.log_partition()
        g = check_posteriors(sm.marginals(edge="none").unary, offsets, log_z)
        return float(log_z.sum()), g.reshape(g.shape[0], int(self.n_regimes), int(self.n_states))

    def score_samples(self, X, lengths=None):
        """Log-likelihood and smoothed state posteriors P(S_t = m | o) (summed over regimes).

        Returns
        -------
        log_prob : float
        posteriors : ndarray of float64, shape (N, M)
        """
        ll, g = self._joint_posteriors(X, lengths)
        return ll, g.sum(axis=1)

    def predict_proba(self, X, lengths=None):
        """Smoothed state posteriors P(S_t = m | o), shape (N, M) float64 (rows sum to one)."""
        return self.score_samples(X, lengths)[1]

    def predict_regime_proba(self, X, lengths=None):
        """Smoothed regime posteriors P(R_t = r | o), shape (N, R) float64 (rows sum to one)."""
        return self._joint_posteriors(X, lengths)[1].sum(axis=2)

    def predict_joint_proba(self, X, lengths=None):
        """Smoothed joint posteriors P(R_t = r, S_t = m | o), shape (N, R, M) float64."""
        return self._joint_posteriors(X, lengths)[1]

    def decode(self, X, lengths=None, algorithm="viterbi", return_regimes=False):
        """Most likely states (and regimes).

        Parameters
        ----------
        algorithm : {"viterbi", "map"}
            ``"viterbi"``: the jointly most likely (regime, state) segmentation; ``log_prob`` is
            log max P(o, path). ``"map"``: per-row argmax of the joint posterior P(R_t, S_t | o);
            ``log_prob`` is Σ_t log max γ_t.
        return_regimes : bool, default False
            Also return the regime of every row.

        Returns
        -------
        log_prob : float
        states : ndarray of int64, shape (N,)
        regimes : ndarray of int64, shape (N,) (only with ``return_regimes``)

        Raises
        ------
        ValueError
            Unknown algorithm, or a sequence with zero likelihood.

        Notes
        -----
        Time O(N·(K² + D·K)), memory O(N·K), K = R·M.
        """
        if algorithm not in ("viterbi", "map"):
            raise ValueError(f"`algorithm` must be 'viterbi' or 'map'; got {algorithm!r}")
        sm = self._prepare(X, lengths)[3]
        if algorithm == "viterbi":
            best = sm.max()
            sm._raise_if_infeasible(best, "the Viterbi path")
            k = sm.argmax()
            log_prob = float(best.sum())
        else:
            sm._raise_if_infeasible(sm.log_partition(), "the MAP states")
            gamma = sm.marginals(edge="none").unary
            k = np.argmax(gamma, axis=1)
            with np.errstate(divide="ignore"):
                log_prob = float(np.log(gamma.max(axis=1)).sum())
        regimes, states = _model.split_states(k, int(self.n_states))
        return (log_prob, states, regimes) if return_regimes else (log_prob, states)

    def predict(self, X, lengths=None):
        """Viterbi states, int64 array (N,)."""
        return self.decode(X, lengths)[1]

    def predict_regimes(self, X, lengths=None):
        """Regimes of the Viterbi path, int64 array (N,)."""
        return self.decode(X, lengths, return_regimes=True)[2]

    # ================================================================================================
    # sampling, model selection
    # ================================================================================================
    def sample(self, n_samples=1, random_state=None, n_sequences=None):
        """Draw one sequence of ``n_samples`` observations from the generative process (the last segment
        cut at ``n_samples``), or several.

        Parameters
        ----------
        n_samples : int
        random_state : None, int or RandomState
        n_sequences : int, optional
            Number of sequences. None (the default) draws one and returns it as before; an int draws
            that many from the same random stream (the first is the sequence of ``n_sequences=None``),
            returns the per-row arrays one sequence after the other (``fit(X, lengths)``'s layout) and
            ``lengths`` last.

        Returns
        -------
        X : ndarray of float64, shape (n_samples, F)
        states : ndarray of int64, shape (n_samples,)
        regimes : ndarray of int64, shape (n_samples,)
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

        def draw():
            X, k, _ = pot.sample(n_samples, rng)
            regimes, states = _model.split_states(k, int(self.n_states))
            return X, states, regimes

        return sample_sequences(draw, n_sequences, 3)

    def n_parameters(self):
        """Number of free parameters EM estimates (letters of ``params``)."""
        check_is_fitted(self, "startprob_")
        R, M = int(self.n_regimes), int(self.n_states)
        n = 0
        if "s" in self.params:
            n += (R - 1) + R * (M - 1)
        if "t" in self.params:
            n += R * (R - 2) if M == 1 else R * (R - 1)
            if M > 2:
                n += R * M * (M - 2)
        if "d" in self.params:
            n += int(self.duration_.n_parameters(self.max_duration_))
        if "e" in self.params:
            n += int(self.emission_.n_parameters())
        return max(n, 0)

    # ================================================================================================
    # model files
    # ================================================================================================
    @save_doc
    def save(self, path):
        """{save}"""
        from ..utils.modelfile import save_model

        check_is_fitted(self, "startprob_")
        params, meta, family_arrays = families_to_file(self, self.duration_, self.emission_)
        arrays = {"regime_startprob_": self.regime_startprob_, "regime_transmat_": self.regime_transmat_,
                  "startprob_": self.startprob_, "transmat_": self.transmat_, **family_arrays}
        params["tie_durations"] = bool(self.tie_durations)
        params["tie_emissions"] = bool(self.tie_emissions)
        meta.update({"max_duration_": int(self.max_duration_), "n_features_in_": int(self.n_features_in_),
                     **fit_state(self)})
        save_model(path, format_name=_FORMAT, version=_FORMAT_VERSION, estimator="structlearn.SwitchingHSMM",
                   params=params, metadata=meta, arrays=arrays)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save` (no code from the file runs: the families are looked up by
        name in :mod:`structlearn.distributions.durations` and :mod:`structlearn.distributions.emissions`).

        Raises
        ------
        structlearn.utils.modelfile.ModelFileError
            Not a model file of this format / version, or an unknown family.
        ValueError
            Parameters in the file that fail validation.
        """
        from ..utils.modelfile import load_model

        header, arrays = load_model(path, expected_format=_FORMAT, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        params, fam = families_from_header(path, header, arrays)
        model = cls(**params)
        model.duration_, model.emission_ = fam["duration"], fam["emission"]
        for name in ("regime_startprob_", "regime_transmat_", "startprob_", "transmat_"):
            setattr(model, name, np.asarray(arrays[name], dtype=np.float64))
        model.max_duration_ = int(meta["max_duration_"])
        model.n_features_in_ = int(meta["n_features_in_"])
        restore_fit_state(model, meta)
        model._validate_hyper()
        model._check_params()
        return model
