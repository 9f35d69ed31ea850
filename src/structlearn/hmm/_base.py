"""The engine shared by the hidden Markov estimators of :mod:`structlearn.hmm`.

:class:`HMMBase` holds π (``startprob_``), A (``transmat_``) and an emission object (``emission_``) and
runs every inference on :class:`structlearn.engine.structures.LinearChain` — unary potentials log b_j(x_t),
transitions log a_ij, start log π_j — so likelihood, posteriors and Viterbi are the chain's exact
forward–backward and max-product (Rabiner 1989, "A tutorial on hidden Markov models", eqs. 18–27 and
30–35). EM is Baum–Welch (Rabiner 1989 eqs. 37–40, 52–54) run by :func:`structlearn.learning.em.run_em`
with restarts from :func:`structlearn.learning.restarts.fit_restarts`; the M-step of π and A is
hmmlearn's MAP update with Dirichlet priors, the emission M-step is the emission object's ``fit``.
The E-step is the per-shard function :func:`_shard_statistics` mapped over blocks of sequences
(:mod:`structlearn.learning.shards`: one block, ``n_jobs`` joblib processes, or dask workers through
:func:`structlearn.distributed.fit`, where the families' additive statistics replace the rows).

Subclasses (``estimators/hmm.py``) give the constructor, the emission family (``_new_emission``), its
letters in ``params`` / ``init_params`` and the hmmlearn-named views of its parameters
(:class:`EmissionView`).
"""
import logging
import sys

import numpy as np
from scipy import linalg, special
from ..learning.training import EstimatorBase
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _online_statistics as _online
from ..learning.em import EM_LOOP_DOC, ConvergenceMonitor, run_em
from ..learning.shards import Shard, ShardStatistics, map_shards, data_blocks
from ..distributions import emissions as _emi
from ..distributions.emissions import hmm as _hemi
from ..distributions.emissions._hmm_family import HMMFamily
from ..distributions.base import families_from_file, family_to_file
from ..engine.structures.chain import LinearChain
from ..utils.docstrings import fill_docstring
from ..utils.validation import check_lengths
from ..learning.restarts import check_n_jobs, fit_restarts, warn_empty_states
from ..learning.em_files import fit_state, restore_fit_state
from ._online import HMMOnlineMixin
from ..learning.posterior_check import check_posteriors
from ..learning.sampling import sample_sequences

__all__ = ["HMMBase", "EmissionView", "stationary_distribution"]

_FORMAT_VERSION = 1
_NOT_A_LETTER = "\x00"  # fit_restarts letter of emission_: never in init_params (restored, then initialised)
_TEMPLATE = "{iter:>10d} {log_prob:>16.8f} {delta:>+16.8f}"
#: hmmlearn reports a parameter that initialisation overwrites and a fit with fewer data points than free
#: parameters through its logger (not warnings); these notices go the same way, on this logger.
_LOG = logging.getLogger("structlearn.hmm")


def stationary_distribution(transmat):
    """π with π A = π, Σ π = 1: the left eigenvector of the largest eigenvalue (as hmmlearn), shape (K,)."""
    vals, vecs = linalg.eig(np.asarray(transmat).T)
    v = np.real_if_close(vecs[:, np.argmax(vals.real)]).real
    v = v / v.sum()
    v = np.where(np.abs(v) < 1e-15, 0.0, v)
    return np.maximum(v, 0.0) / np.maximum(v, 0.0).sum()


def _log(p):
    with np.errstate(divide="ignore"):
        return np.log(p)


def _chain(emission, X, lengths, log_start, log_trans):
    """The chain of the HMM on X: unary log b_j(x_t), transitions log a_ij, start log π_j. The
    potentials of structlearn's hmmlearn-shaped families are finite or -inf by construction and are
    not checked again; those of any other emission object are."""
    unary = emission.log_density(X)
    if isinstance(emission, HMMFamily):
        return LinearChain._unchecked(np.ascontiguousarray(unary, dtype=np.float64), log_trans, lengths,
                                      log_start)
    return LinearChain(unary, log_trans, lengths=lengths, start=log_start)


def _chain_stats(emission, X, lengths, log_start, log_trans):
    """(log-likelihood per sequence (B,), posteriors γ (N, K), expected transitions Σ_t ξ_t (K, K)) of
    one block of sequences: the E-step's unit of work (module-level, for joblib)."""
    sm = _chain(emission, X, lengths, log_start, log_trans)
    marg = sm.marginals(edge="total")
    return sm.log_partition(), marg.unary, marg.edge


def _shard_statistics(params, shard):
    """The E-step of one shard (the per-shard function of :mod:`structlearn.learning.shards`).

    ``params`` = (emission, log π (K,), log A (K, K), update_emission, posteriors): ``update_emission``
    (bool) whether the emissions are re-estimated; ``posteriors`` keeps γ (N, K) for the emission M-step in this
    process (``fit``, ``partial_fit``),
    else the family's additive statistics travel (``"emission"``,
    :func:`structlearn.hmm._online_statistics.emission_statistics`; distributed fits).

    Returns a :class:`~structlearn.learning.shards.ShardStatistics`: ``stats`` ``"start"`` (K,) Σ_b γ of
    the first rows, ``"trans"`` (K, K) Σ_t ξ_t, ``"occupancy"`` (K,) Σ_t γ_t (and ``"emission"``);
    ``value`` the shard's log-likelihood; ``ValueError`` naming a sequence of the shard with zero
    likelihood. Time O(N·K²) plus the emission densities, memory O(N·K).
    """
    emission, log_start, log_trans, update_emission, posteriors = params
    X, lengths, offsets, _ = shard
    log_z, gamma, xi = _chain_stats(emission, X, lengths, log_start, log_trans)
    bad = np.flatnonzero(log_z == -np.inf)
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"sequence {b} (rows {offsets[b]}:{offsets[b + 1]}) has zero likelihood under "
                         f"the current parameters (log-likelihood -inf: no state path can emit it); "
                         f"check the data against the fixed parameters")
    stats = _online.chain_statistics(gamma, xi, lengths, offsets)
    stats["occupancy"] = gamma.sum(axis=0)
    if update_emission and not posteriors:
        stats["emission"] = _online.emission_statistics(emission, X, gamma)
    return ShardStatistics(stats, float(log_z.sum()), int(lengths.shape[0]), gamma if posteriors else None)



class EmissionView:
    """A fitted attribute of the estimator (``means_``, ``emissionprob_``, …) that is a parameter array of
    the emission object ``emission_``.

    Reading it before it is set raises ``AttributeError`` (so ``hasattr`` and ``check_is_fitted``
    work); setting it creates ``emission_`` when needed and stores a float64 copy (validated when the
    model is next used). ``get`` maps the stored array to the returned form (hmmlearn's ``covars_``
    of ``GaussianHMM`` returns full matrices).
    """

    def __init__(self, name, get=None, doc=None):
        self.name = name
        self.get = get
        self.__doc__ = doc

    def __set_name__(self, owner, attr):
        self.attr = attr

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        em = obj.__dict__.get("emission_")
        value = None if em is None else getattr(em, self.name, None)
        if value is None:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.attr!r} (not fitted "
                                 f"and not set)")
        return self.get(em) if self.get is not None else value

    def __set__(self, obj, value):
        em = obj.__dict__.get("emission_")
        if em is None:
            em = obj.__dict__["emission_"] = obj._new_emission()
        try:
            arr = np.array(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"`{self.attr}` must be a numeric array; got {type(value).__name__} ({exc})") from None
        setattr(em, self.name, arr)

    def __delete__(self, obj):
        em = obj.__dict__.get("emission_")
        if em is not None:
            setattr(em, self.name, None)


class HMMBase(HMMOnlineMixin, EstimatorBase):
    """Shared engine (see the module docstring). Not public: use the classes of :mod:`structlearn.hmm`."""

    _format = None  # model-file format name
    _default_n_iter = 10

    @property
    def monitor_(self):
        """The :class:`~structlearn.learning.em.ConvergenceMonitor` of the last ``fit``; before it, a fresh
        one with ``tol``, ``n_iter`` and ``verbose`` (hmmlearn creates it at construction, so that a custom
        monitor can be built from it and set in its place)."""
        m = self.__dict__.get("monitor_")
        return ConvergenceMonitor(self.tol, self.n_iter, self.verbose) if m is None else m

    @monitor_.setter
    def monitor_(self, value):
        self.__dict__["monitor_"] = value

    @monitor_.deleter
    def monitor_(self):
        self.__dict__.pop("monitor_", None)

    # -- hooks ----------------------------------------------------------------------------------------
    def _new_emission(self):
        """A fresh emission object without parameters, configured from the hyper-parameters."""
        raise NotImplementedError

    def _emission_letters(self):
        return getattr(self._new_emission(), "letters", "e")

    def _preset_emission(self):
        """The emission object of a model used before ``fit`` with parameters set by hand (``ValueError``
        when they are not set)."""
        raise ValueError(f"the emission parameters of this {type(self).__name__} are not set: fit the model "
                         f"or set them (and startprob_, transmat_) before using it")

    # -- validation -----------------------------------------------------------------------------------
    def _validate_hyper(self):
        K = self.n_components
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
            raise ValueError(f"`n_components` must be a positive integer; got {K!r}")
        if self.algorithm not in ("viterbi", "map"):
            raise ValueError(f"`algorithm` must be 'viterbi' or 'map'; got {self.algorithm!r}")
        if self.implementation not in ("log", "scaling"):
            raise ValueError(f"`implementation` must be 'log' or 'scaling'; got {self.implementation!r}")
        for name, lo in (("n_iter", 0), ("n_init", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"`{name}` must be an integer >= {lo}; got {v!r}")
        if isinstance(self.tol, bool) or not isinstance(self.tol, (int, float, np.number)) or np.isnan(self.tol):
            raise ValueError(f"`tol` must be a number; got {self.tol!r}")
        letters = "st" + self._emission_letters()
        for name in ("params", "init_params"):
            v = getattr(self, name)
            if not isinstance(v, str) or set(v) - set(letters):
                raise ValueError(f"`{name}` must be a string of letters from {letters!r} (s startprob, t "
                                 f"transmat, {self._emission_letters()!r} emission parameters); got {v!r}")
        if self.startprob not in ("free", "stationary"):
            raise ValueError(f"`startprob` must be 'free' or 'stationary'; got {self.startprob!r}")
        check_n_jobs(self.n_jobs)
        self._priors()

    def _priors(self):
        """(startprob_prior (K,), transmat_prior (K, K)) broadcast; ``ValueError`` if they do not fit."""
        K = self.n_components
        out = []
        for name, shape in (("startprob_prior", (K,)), ("transmat_prior", (K, K))):
            try:
                v = np.broadcast_to(np.asarray(getattr(self, name), dtype=np.float64), shape)
            except (TypeError, ValueError):
                raise ValueError(f"`{name}` must be a number or an array broadcastable to {shape}; got "
                                 f"{getattr(self, name)!r}") from None
            if not np.all(np.isfinite(v)):
                raise ValueError(f"`{name}` must be finite")
            out.append(v)
        return out

    def _check(self):
        """Validate the hyper-parameters (a bad ``covariance_type``, …), ``startprob_``, ``transmat_`` and the
        emission parameters (hmmlearn's ``_check``); ``ValueError`` naming the first that is wrong."""
        self._validate_hyper()
        K = self.n_components
        if self.startprob == "stationary" and hasattr(self, "transmat_"):
            self.startprob_ = stationary_distribution(np.asarray(self.transmat_, dtype=np.float64))
        sp = np.asarray(self.startprob_, dtype=np.float64)
        tm = np.asarray(self.transmat_, dtype=np.float64)
        if sp.shape != (K,):
            raise ValueError(f"`startprob_` must have shape (n_components,) = ({K},); got {sp.shape}")
        if tm.shape != (K, K):
            raise ValueError(f"`transmat_` must have shape (n_components, n_components) = ({K}, {K}); got "
                             f"{tm.shape}")
        if not np.all(np.isfinite(sp)) or np.any(sp < 0) or not np.isclose(sp.sum(), 1.0):
            raise ValueError(f"`startprob_` must be non-negative and sum to 1; got sum {sp.sum():.6g}")
        if not np.all(np.isfinite(tm)) or np.any(tm < 0):
            raise ValueError("`transmat_` must be finite and non-negative")
        s = tm.sum(axis=1)
        if not np.allclose(s, 1.0):
            i = int(np.argmax(np.abs(s - 1)))
            raise ValueError(f"`transmat_` rows must sum to 1; row {i} sums to {s[i]:.6g}")
        self.startprob_, self.transmat_ = sp, tm
        if self.__dict__.get("emission_") is None:
            self.emission_ = self._preset_emission()
        em = self.emission_
        if hasattr(em, "_require"):
            em._require()
        if getattr(em, "n_states", K) != K:
            raise ValueError(f"the emission parameters are for {em.n_states} states but n_components={K}")
        if hasattr(em, "_validate"):
            em._validate()

    def _check_X(self, X, emission=None):
        em = emission if emission is not None else self.emission_
        return _emi.check_observations(em, X)

    def _lengths(self, lengths, X):
        return check_lengths(lengths, X.shape[0], rows_name="the observations `X`")

    # -- inference ------------------------------------------------------------------------------------
    def _log_params(self):
        return _log(self.startprob_), _log(self.transmat_)

    def _prepare(self, X, lengths):
        check_is_fitted(self, "startprob_")
        self._check()
        X = self._check_X(X)
        lengths, offsets = self._lengths(lengths, X)
        log_start, log_trans = self._log_params()
        sm = _chain(self.emission_, X, lengths, log_start, log_trans)
        return X, lengths, offsets, sm

    def score(self, X, lengths=None):
        """Log-likelihood log P(X | λ) summed over the sequences (forward algorithm, Rabiner 1989 eq. 21).

        Parameters
        ----------
        X : array-like of float64, shape (n_samples, n_features)
            Packed observations of all sequences (a 1-d array is one feature); an all-NaN row is a
            missing observation (marginalised: emission density 1 in every state).
        lengths : array-like of int, shape (n_sequences,), optional
            Sequence lengths summing to n_samples; default one sequence.

        Returns
        -------
        float
            -inf when some sequence is impossible under the model. Time O(N·K²) + the emission
            densities, memory O(N·K).
        """
        return float(self._prepare(X, lengths)[3].log_partition().sum())

    def score_samples(self, X, lengths=None):
        """Log-likelihood and posteriors γ_t(j) = P(z_t = j | X) (Rabiner 1989 eq. 27).

        Returns
        -------
        log_prob : float
        posteriors : ndarray of float64, shape (n_samples, n_components)
            Every row sums to one (within 1e-9).

        Raises
        ------
        ValueError
            A sequence with zero likelihood (no state path explains it; as :meth:`decode`), naming the
            sequence and its rows.
        """
        sm = self._prepare(X, lengths)[3]
        log_z = sm.log_partition()
        gamma = check_posteriors(sm.marginals(edge="none").unary, sm.offsets, log_z)
        return float(log_z.sum()), gamma

    def predict_proba(self, X, lengths=None):
        """Posteriors γ_t(j), shape (n_samples, n_components) float64."""
        return self.score_samples(X, lengths)[1]

    def decode(self, X, lengths=None, algorithm=None):
        """Most likely states.

        Parameters
        ----------
        algorithm : {"viterbi", "map"}, optional
            Default ``self.algorithm``. ``"viterbi"``: the most likely state sequence (max-product,
            Rabiner 1989 eqs. 30–35), ``log_prob`` = log max_z P(X, z) summed over sequences;
            ``"map"``: the per-time argmax of γ_t, ``log_prob`` = Σ_t max_j γ_t(j) (hmmlearn's value,
            a sum of probabilities).

        Returns
        -------
        log_prob : float
        state_sequence : ndarray of int64, shape (n_samples,)

        Raises
        ------
        ValueError
            Unknown algorithm, or a sequence with zero likelihood (no path with non-zero probability;
            the message names the sequence and its rows).
        """
        algorithm = self.algorithm if algorithm is None else algorithm
        if algorithm not in ("viterbi", "map"):
            raise ValueError(f"`algorithm` must be 'viterbi' or 'map'; got {algorithm!r}")
        sm = self._prepare(X, lengths)[3]
        if algorithm == "viterbi":
            best, states = sm._viterbi()
            sm._raise_if_infeasible(best, "the Viterbi path")
            return float(best.sum()), states  # the chain is private: no copy
        gamma = sm.marginals(edge="none").unary  # also caches log Z: one forward pass
        sm._raise_if_infeasible(sm.log_partition(), "the MAP states")
        return float(gamma.max(axis=1).sum()), np.argmax(gamma, axis=1).astype(np.int64)

    def predict(self, X, lengths=None):
        """States of :meth:`decode` with ``self.algorithm``, int64 array (n_samples,)."""
        return self.decode(X, lengths)[1]

    # -- EM -------------------------------------------------------------------------------------------
    def _fresh_emission(self):
        """The emission object a restart starts from: new, with the parameters of ``emission_`` whose
        letters are not in ``init_params`` (those are kept, as hmmlearn keeps attributes it does not
        initialise)."""
        em = self._new_emission()
        old = self.__dict__.get("emission_")
        if old is not None:
            for name, letter in getattr(em, "param_letters", {}).items():
                value = getattr(old, name, None)
                if value is not None and letter not in self.init_params:
                    setattr(em, name, np.array(value, dtype=np.float64))
        return em

    def _fit_emission(self, em, X, gamma):
        """The emission M-step: the letters of ``params`` (hmmlearn's families)."""
        em.fit(X, gamma, params=self.params)

    def _init_emission(self, em, X, lengths, random_state, rng, restart):
        """Initialise the emission parameters for a restart (hmmlearn's initialisation, seeded by
        ``random_state`` on the first restart)."""
        em.initialize(X, self.n_components, None, random_state, params=self.init_params)

    def _init_transitions(self, random_state, restart):
        """hmmlearn's initial π and A: Dirichlet(1/K) draws (for the parameters that need them)."""
        K = self.n_components
        rng = check_random_state(random_state)
        if not hasattr(self, "startprob_"):
            self.startprob_ = rng.dirichlet(np.full(K, 1.0 / K))
        if not hasattr(self, "transmat_"):
            self.transmat_ = rng.dirichlet(np.full(K, 1.0 / K), size=K)

    def _initialize(self, X, lengths, rng, restart):
        random_state = self.random_state if restart == 0 else rng
        self._init_transitions(random_state, restart)
        em = self._fresh_emission()
        self._init_emission(em, X, lengths, random_state, rng, restart)
        self.emission_ = em
        if self.startprob == "stationary":
            self.startprob_ = stationary_distribution(self.transmat_)
        self._check()
        if restart == 0:
            self._log_too_little_data(X)

    def _log_set_parameters_overwritten(self):
        """Log (hmmlearn's notice) every parameter set by hand whose letter is in ``init_params``."""
        em = self.__dict__.get("emission_")
        named = [("startprob_", "s", self.__dict__.get("startprob_")),
                 ("transmat_", "t", self.__dict__.get("transmat_"))]
        named += [(f"{name}_", letter, None if em is None else getattr(em, name, None))
                  for name, letter in getattr(self._new_emission(), "param_letters", {}).items()]
        for name, letter, value in named:
            if value is not None and letter in self.init_params:
                _LOG.warning("%s.%s is set, but %r is in init_params=%r: it will be overwritten by the "
                             "initialisation (leave %r out of init_params to start from the value set)",
                             type(self).__name__, name, letter, self.init_params, letter)

    def _log_too_little_data(self, X):
        """Log (hmmlearn's notice) when the parameters of ``params`` outnumber the data points of ``X``."""
        K = self.n_components
        n = (K - 1) * ("s" in self.params and self.startprob != "stationary") + K * (K - 1) * ("t" in self.params)
        if self._updates_emission():
            n += int(self.emission_.n_parameters())
        if X.size < n:
            _LOG.warning("%s: %d free scalar parameters (params=%r) fitted on %d data points: expect a "
                         "degenerate solution", type(self).__name__, n, self.params, X.size)

    def _init(self, X, lengths=None):
        """Initialise the parameters as ``fit`` does, without running EM (hmmlearn's ``_init``).

        Those whose letters are in ``init_params`` (and those not set) are initialised from ``X`` with
        ``random_state``; the others keep their values.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        lengths : int or array-like of int, optional
            As in ``fit`` (an int is one sequence of that length, as hmmlearn accepts).

        Raises
        ------
        ValueError
            Bad hyper-parameters, X or lengths.
        """
        self._validate_hyper()
        X = self._check_X(X, self._fresh_emission())
        if lengths is not None and np.ndim(lengths) == 0:
            lengths = [lengths]
        lengths, _ = self._lengths(lengths, X)
        self._log_set_parameters_overwritten()
        for name, letter in (("startprob_", "s"), ("transmat_", "t")):
            if letter in self.init_params:
                self.__dict__.pop(name, None)
        self.n_features_in_ = int(X.shape[1])
        self._initialize(X, lengths, check_random_state(self.random_state), 0)

    def fit(self, X, lengths=None):
        """Estimate the parameters by EM (Baum–Welch; MAP with the priors), after initialising those in
        ``init_params`` and those not set.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
            Packed observations; all-NaN rows are missing observations (they carry no weight in the
            emission M-step; their transitions are still counted).
        lengths : array-like of int, shape (n_sequences,), optional

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad hyper-parameters, X, lengths or set parameters; fewer observed rows than components when
            the emissions are initialised from the data; a sequence with zero likelihood.

        Warns
        -----
        ConvergenceWarning
            When EM did not converge within ``n_iter`` iterations (``converged_`` False).

        Notes
        -----
        Per iteration: time O(N·K²) for the chain plus the emission densities and M-step, memory O(N·K).

        {em_loop}

        ``monitor_.converged`` (hmmlearn's) also holds when ``n_iter`` ran out. A monitor put in
        ``monitor_`` before ``fit`` whose class is not structlearn's (e.g. a subclass of hmmlearn's with its
        own ``converged``) runs the loop instead of the default one.
        """
        self._validate_hyper()
        K = self.n_components
        em = self._fresh_emission()
        X = self._check_X(X, em)
        lengths, offsets = self._lengths(lengths, X)
        n_obs = int((~np.isnan(X).all(axis=1)).sum())
        needs = set(self._emission_letters()) & set(self.init_params) or getattr(em, "n_states", None) is None
        if n_obs < K and needs:
            raise ValueError(f"fewer observed rows ({n_obs}) than components (n_components={K}): the "
                             f"emission parameters cannot be initialised from the data; set them and leave "
                             f"their letters out of `init_params`, or use fewer components")
        self._log_set_parameters_overwritten()
        shards = data_blocks(Shard(X, lengths, offsets))
        return self._fit_sharded(lambda f, p: map_shards(f, p, shards, self.n_jobs), (X, lengths, None),
                                 int(lengths.max()), X.shape[1], X)

    def _fit_sharded(self, map_statistics, init_data, max_length, n_features, X=None):
        """EM with restarts (:func:`fit_restarts`) whose E-step maps the per-shard function over the shards
        (``map_statistics(statistics, params)`` -> summed ShardStatistics); the initial parameters come
        from ``init_data`` = (X, lengths, None). ``X``: all rows in this process (posteriors travel;
        ``fit``) or None (the emission family's additive statistics; :func:`structlearn.distributed.fit`).
        Returns self."""
        self.n_features_in_ = int(n_features)
        Xi, Li, _ = init_data
        fit_restarts(self, {"startprob_": "s", "transmat_": "t", "emission_": _NOT_A_LETTER},
                     lambda rng, restart: self._initialize(Xi, Li, rng, restart),
                     lambda monitor, restart: self._em_sharded(map_statistics, monitor, X))
        return self

    def _shard_from_data(self, X, lengths=None):
        """The validated :class:`~structlearn.learning.shards.Shard` of ``X``, ``lengths`` (as ``fit``)."""
        X = self._check_X(X, self._fresh_emission())
        return Shard(X, *self._lengths(lengths, X))

    # -- the per-shard interface (structlearn.learning.shards), shared with structlearn.distributed ---------
    def _updates_emission(self):
        return bool(set(self.params) & set(self._emission_letters()))

    def _shard_function(self, posteriors=True):
        """(statistics, params) of the current parameters: ``statistics(params, shard)`` is the E-step of
        one shard (:func:`_shard_statistics`); ``posteriors`` keeps γ for the emission M-step in this
        process (else the family's additive statistics travel)."""
        log_start, log_trans = self._log_params()
        return _shard_statistics, (self.emission_, log_start, log_trans, self._updates_emission(), posteriors)

    def _em_sharded(self, map_statistics, monitor, X=None):
        """EM (:func:`run_em`) whose E-step is ``map_statistics(statistics, params)`` -> the summed
        :class:`~structlearn.learning.shards.ShardStatistics` of all shards: local blocks in ``fit``,
        dask workers in :func:`structlearn.distributed.fit` (``X`` None: no posteriors travel)."""
        prev = []

        def progress(it, ll):
            if self.verbose:
                delta = ll - prev[-1] if prev else np.nan
                print(_TEMPLATE.format(iter=it + 1, log_prob=ll, delta=delta), file=sys.stderr)
            prev.append(ll)

        # posteriors travel only for a family without additive statistics: otherwise this process, worker
        # processes and dask workers all sum the same per-block statistics (the same model, bitwise)
        posteriors = X is not None and not _online.has_additive_statistics(self.emission_)

        def e_step():
            total = map_statistics(*self._shard_function(posteriors=posteriors))
            return total, total.value

        return run_em(e_step, lambda total: self._apply_statistics(total, X), monitor, progress)

    def _e_step(self, X, lengths, offsets):
        """((γ (N, K), Σ_t ξ_t (K, K)), log-likelihood) of one block in this process (``partial_fit``);
        ``ValueError`` naming an impossible sequence."""
        shards = data_blocks(Shard(X, lengths, offsets))
        total = map_shards(*self._shard_function(), shards, self.n_jobs)
        return (total.posteriors, total.stats["trans"]), total.value

    def _apply_statistics(self, total, X=None):
        """hmmlearn's M-step of the summed shard statistics: π and A from the expected first states and
        transitions (:meth:`_m_step_chain`), then the emissions — the object's ``fit`` on the rows ``X``
        and the posteriors when they are present, else the family's M-step on the summed statistics."""
        stats = total.stats
        self._m_step_chain(stats["start"], stats["trans"])
        if self._updates_emission():
            warn_empty_states(stats["occupancy"][None, :])
            if total.posteriors is not None:
                self._fit_emission(self.emission_, X, total.posteriors)
            else:
                _online.emission_m_step(self.emission_, stats["emission"], self._online_emission_params())
        if self.startprob == "stationary":
            self.startprob_ = stationary_distribution(self.transmat_)

    def _m_step_chain(self, start_counts, trans_counts):
        """π_j ∝ max(α_j − 1 + start_counts_j, 0), a_ij ∝ max(α_ij − 1 + trans_counts_ij, 0) (expected
        first states Σ_b γ_b0 (K,) and transitions Σ_t ξ_t (K, K); batch or averaged online
        statistics), zeros of the current π and A kept (fixed topologies), for the letters of
        ``params``; a generalised EM step of A under a stationary start."""
        p = self.params
        sp_prior, tm_prior = self._priors()
        if "s" in p and self.startprob != "stationary":
            sp = np.maximum(sp_prior - 1 + start_counts, 0)
            sp = np.where(self.startprob_ == 0, 0, sp)
            if sp.sum() > 0:
                self.startprob_ = sp / sp.sum()
        if "t" in p:
            counts = np.where(self.transmat_ == 0, 0, np.maximum(tm_prior - 1 + trans_counts, 0))
            tot = counts.sum(axis=1)
            tm = self.transmat_.copy()
            ok = tot > 0  # a state never left keeps its row
            tm[ok] = counts[ok] / tot[ok, None]
            if self.startprob == "stationary":
                tm = self._stationary_step(tm, counts, start_counts)
            self.transmat_ = tm

    def _stationary_step(self, proposal, counts, first):
        """Generalised EM step for A under a stationary start (Dempster, Laird & Rubin 1977 §3): the
        expected complete-data objective Q(A) = Σ counts_ij log a_ij + Σ_j first_j log π_j(A) is not
        maximised in closed form, so A moves from the current value towards the Baum–Welch update
        ``proposal`` by the largest step 2^-k (k ≤ 20) that does not decrease Q."""
        def q(A):
            with np.errstate(divide="ignore", invalid="ignore"):
                v = special.xlogy(counts, A).sum() + special.xlogy(first, stationary_distribution(A)).sum()
            return -np.inf if np.isnan(v) else v

        old = self.transmat_
        q0 = q(old)
        step = 1.0
        for _ in range(21):
            A = (1 - step) * old + step * proposal
            if q(A) >= q0:
                return A
            step /= 2
        return old

    # -- sampling and model selection ------------------------------------------------------------------
    def sample(self, n_samples=1, random_state=None, currstate=None, n_sequences=None):
        """Draw one sequence from the model (hmmlearn's order of random draws), or several.

        Parameters
        ----------
        n_samples : int
            Length of every sequence.
        random_state : None, int or RandomState
            Default ``self.random_state``.
        currstate : int, optional
            State of the first sample of every sequence (default: drawn from ``startprob_``).
        n_sequences : int, optional
            Number of sequences. None (the default) draws one and returns ``(X, state_sequence)`` as
            hmmlearn does; an int draws that many from the same random stream (the first is the
            sequence of ``n_sequences=None``) and also returns their ``lengths``.

        Returns
        -------
        X : ndarray, shape (n_sequences · n_samples, n_features)
            The sequences one after the other (``fit(X, lengths)``'s layout).
        state_sequence : ndarray of int, shape (n_sequences · n_samples,)
        lengths : ndarray of int64, shape (n_sequences,)
            Only when ``n_sequences`` is given.

        Raises
        ------
        ValueError
            ``n_samples`` or ``n_sequences`` not a positive integer; ``currstate`` not a state.
        """
        check_is_fitted(self, "startprob_")
        self._check()
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"`n_samples` must be a positive integer; got {n_samples!r}")
        K = self.n_components
        if currstate is not None and (isinstance(currstate, bool) or not isinstance(currstate, (int, np.integer))
                                      or not 0 <= currstate < K):
            raise ValueError(f"`currstate` must be a state in [0, {K}); got {currstate!r}")
        rng = check_random_state(self.random_state if random_state is None else random_state)
        em = self.emission_
        one = getattr(em, "sample_one", None)
        cdf = np.cumsum(self.transmat_, axis=1)

        def draw():
            state = int((np.cumsum(self.startprob_) > rng.rand()).argmax()) if currstate is None else int(currstate)
            states, rows = [state], [one(state, rng)] if one else []
            for _ in range(n_samples - 1):
                state = int((cdf[state] > rng.rand()).argmax())
                states.append(state)
                if one:
                    rows.append(one(state, rng))
            states = np.array(states, dtype=int)
            X = np.atleast_2d(rows) if one else em.sample(states, rng)
            return X, states

        return sample_sequences(draw, n_sequences, 2)

    def get_stationary_distribution(self):
        """Stationary distribution of ``transmat_`` (left eigenvector of eigenvalue 1), shape (K,)."""
        check_is_fitted(self, "transmat_")
        return stationary_distribution(self.transmat_)

    def _n_parameters(self):
        K = self.n_components
        start = 0 if self.startprob == "stationary" else K - 1
        return start + K * (K - 1) + int(self.emission_.n_parameters())

    def aic(self, X, lengths=None):
        """Akaike information criterion −2 log L + 2 p, p = (K − 1) + K(K − 1) + emission scalars."""
        return -2 * self.score(X, lengths) + 2 * self._n_parameters()

    def bic(self, X, lengths=None):
        """Bayesian information criterion −2 log L + p log N, N = number of rows of X."""
        return -2 * self.score(X, lengths) + self._n_parameters() * np.log(len(np.asarray(X)))

    # -- model files ----------------------------------------------------------------------------------
    def _file_params(self):
        params = {}
        for k, v in self.get_params().items():
            if k == "random_state" and not isinstance(v, (int, np.integer, type(None))):
                v = None
            elif k == "emission" and not isinstance(v, str):
                v = None  # restored from the family written in the metadata
            elif isinstance(v, np.ndarray):
                v = v.tolist()
            elif isinstance(v, np.generic):
                v = v.item()
            params[k] = v
        return params

    def save(self, path):
        """Write the fitted model to ``path`` (versioned ``.npz`` + JSON header; loading runs no code).

        Raises
        ------
        ValueError
            An emission object that is not one of structlearn's families.
        """
        from ..utils.modelfile import save_model

        check_is_fitted(self, "startprob_")
        em = self.emission_
        module = _hemi if type(em).__name__ in _hemi.__all__ else _emi
        name, arrays, config = family_to_file(em, module, "emission")
        arrays.update(startprob_=self.startprob_, transmat_=self.transmat_)
        meta = {"emission_family": name, "emission_config": config,
                "emission_module": "hmm_emissions" if module is _hemi else "emissions",
                "n_features_in_": int(getattr(self, "n_features_in_", 0)),
                **fit_state(self)}
        save_model(path, format_name=self._format, version=_FORMAT_VERSION,
                   estimator=f"structlearn.hmm.{type(self).__name__}", params=self._file_params(),
                   metadata=meta, arrays=arrays)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save` (of this class)."""
        from ..utils.modelfile import ModelFileError, load_model

        header, arrays = load_model(path, expected_format=cls._format, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        module = {"hmm_emissions": _hemi, "emissions": _emi}.get(meta.get("emission_module"))
        fam = (families_from_file(meta, arrays, {"emission": (module, _emi.EmissionDistribution)})
               if module is not None else {"emission": None})
        if fam["emission"] is None:
            raise ModelFileError(f"{path!r}: the header names no structlearn emission family "
                                 f"({meta.get('emission_module')!r}, {meta.get('emission_family')!r})")
        params = dict(header["params"])
        if "emission" in params and params["emission"] is None:
            params["emission"] = type(fam["emission"])(**(meta.get("emission_config") or {}))
        model = cls(**params)
        model.emission_ = fam["emission"]
        if hasattr(model.emission_, "suffix"):
            model.emission_.suffix = "_"
        model.startprob_ = np.asarray(arrays["startprob_"], dtype=np.float64)
        model.transmat_ = np.asarray(arrays["transmat_"], dtype=np.float64)
        model.n_features_in_ = int(meta.get("n_features_in_", 0))
        restore_fit_state(model, meta)
        model._check()
        return model


fill_docstring(HMMBase.fit, em_loop=EM_LOOP_DOC)
