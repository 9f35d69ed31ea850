r"""The multi-channel (coupled) hidden semi-Markov model estimator (scikit-learn API).

The model and its two inferences (the exact product of the channels' (state, remaining duration)
chains, and the factored approximation over the channels' semi-Markov structures) are
:mod:`structlearn.hsmm._multichannel_potentials`; the duration and emission families those of
:class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`.
"""
import warnings

import numpy as np
from ..learning.training import EstimatorBase
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _multichannel_em as _mce
from ..learning.em import ConvergenceMonitor, converged_by_tol, run_em
from ._em import initial_labels, initial_mean_durations
from ..learning.shards import Shard, map_shards, data_blocks, document_blocks
from ..distributions import durations as _dur
from ..distributions import emissions as _emi
from ..distributions.base import families_from_file, family_to_file
from ._multichannel_potentials import MC_CENSORING, MultiChannelPotentials, m_step
from ..utils.validation import as_real_float64, check_lengths
from ..learning.training import training
from ..learning.em_files import fit_state, restore_fit_state, save_doc
from ..learning.restarts import check_em_options
from ..learning.posterior_check import check_posteriors
from ..learning.sampling import sample_sequences
from ._shard_online import ShardOnlineMixin

__all__ = ["MultiChannelHSMM"]

_FORMAT = "multichannel-hidden-semi-markov-model"
_FORMAT_VERSION = 1
_LETTERS = "sctde"
_INFERENCE = ("exact", "factored")


def _is_int(v, lo):
    return not isinstance(v, bool) and isinstance(v, (int, np.integer)) and v >= lo


@document_blocks
class MultiChannelHSMM(ShardOnlineMixin, EstimatorBase):
    r"""Coupled multi-channel explicit-duration HSMM with exact or factored inference and EM
    (Natarajan & Nevatia 2007; Yu 2010 §4; the coupling is Saul & Jordan's mixed memory).

    Channel c = 0..C-1 has M_c states, explicit durations p_c(d | j), d = 1..D_c, and its own emission
    over its own columns of X. When channel c's segment ends at t its next state is drawn from
    P(m'_c | m_1..m_C at t) = Σ_k θ_ck A^{(c,k)}[m_k, m'_c] (θ = ``coupling_``, A = ``transmat_``);
    see :mod:`structlearn.hsmm._multichannel_potentials`.

    Parameters
    ----------
    n_states : int or list of int, default 2
        M_c (>= 2) of every channel, or one per channel.
    channels : list of lists of int, optional
        The columns of X each channel observes (disjoint; an empty list is a hidden channel that
        observes nothing, e.g. an activity coupled to sensor channels). Default: one channel per column.
    duration : str, duration object, or list of them, default "nonparametric"
        The duration family of every channel (copied per channel), or one per channel
        (:mod:`structlearn.distributions.durations`).
    emission : str, emission object, or list of them, default "gaussian"
        The emission family (:mod:`structlearn.distributions.emissions`), or one per channel.
    max_duration : int or list of int, optional
        D_c (>= 1); default the longest sequence seen by ``fit``.
    censoring : {"right", "none"}, default "right"
        ``"right"``: every channel's last segment may go on after the last observation; ``"none"``: all
        end at it (Yu 2010 §2.2.1).
    inference : {"exact", "factored"}, default "exact"
        ``"exact"``: the product chain of S = Π_c M_c·D_c joint labels (time O(N·Π_c (M_c(D_c - 1) +
        M_c²D_c)), memory O(N·S)); ``"factored"``: the channels' semi-Markov structures with the
        coupling averaged over the others' posteriors and mean-field style messages from the channels
        they drive, swept to convergence (time O(sweeps·N·Σ_c (D_c M_c + M_c² + M_c Σ_k M_k²)), memory
        O(N·Σ_c M_c²)); an approximation (exact for C = 1 and θ = I). Measured against exact (M = 3,
        D = 5, T = 200, random coupled models): posterior L1 error per (t, channel) 0.021 / 0.008 /
        0.006 and Viterbi agreement 0.971 / 0.975 / 0.985 for C = 2 / 3 / 4, at 0.2 s against 0.02 /
        0.8 / 75 s (``benchmarks/multichannel_hsmm_factored.py``).
    max_exact_states : int, default 20000
        Largest S that ``"exact"`` accepts (it refuses larger products, naming S).
    max_sweeps : int, default 100
    sweep_tol : float, default 1e-8
        ``"factored"``: at most ``max_sweeps`` sweeps, stopping when max |Δγ| < ``sweep_tol``.
    n_iter : int, default 100
    tol : float, default 1e-4
        EM iterations and convergence threshold on the log-likelihood gain.
    init : {"kmeans", "quantile", "random"}, default "kmeans"
        Initial labels of every observed channel from its own columns (hidden channels: known labels).
    params, init_params : str, default "sctde"
        Letters of the parameters to update / initialise: ``s`` start, ``c`` coupling weights θ, ``t``
        coupling matrices A, ``d`` durations, ``e`` emissions.
    random_state : None, int or numpy.random.RandomState
    n_jobs : int or None, default None
        Worker processes (joblib; -1 all cores) for the E-step of ``fit``: the expected counts
        (:func:`structlearn.hsmm._multichannel_em.statistics`) of the data's blocks are computed in
        parallel. The same per-shard function runs on dask workers in
        :func:`structlearn.distributed.fit`.
        {blocks}

    Attributes
    ----------
    startprob_ : list of C ndarrays (M_c,)
    coupling_ : ndarray of float64, shape (C, C)
        θ, rows sum to one.
    transmat_ : list of C lists of C ndarrays
        ``transmat_[c][k]`` (M_k, M_c) = A^{(c,k)} "from m_k, to m'_c"; A^{(c,c)} has a zero diagonal.
    duration_, emission_ : lists of C objects (``emission_[c]`` None for a hidden channel)
    channels_ : list of C int64 arrays
    max_duration_ : list of C int
    n_features_in_ : int
    monitor_ : ConvergenceMonitor
    converged_ : bool
    log_likelihood_ : float
        Of the training data (with ``"factored"``: the factored approximation Σ_c log Z_c).
    n_chunks_seen_ : int
    chunk_log_likelihood_ : float
        Set by :meth:`partial_fit` (online EM): the chunks in the running statistics, and log P(last
        chunk) under the parameters before its step.

    Notes
    -----
    EM with ``"exact"`` never decreases the likelihood: the coupling is a mixture, its component
    responsibilities are expected in the E-step and θ, A re-estimated in closed form (Saul & Jordan
    1999); durations are counted where a channel enters (j, d), censored last segments included. With
    ``"factored"`` the same M-step runs on the factored expectations (no monotonicity guarantee).
    ``decode`` (Viterbi) maximises over joint (state, remaining duration) paths, i.e. over joint
    segmentations including the full duration of right-censored last segments.

    The E-step is the per-shard function :func:`structlearn.hsmm._multichannel_em.statistics` (the
    expected counts of a block of sequences, additive over blocks), so one fit can run over ``n_jobs``
    local processes or over dask shards (:func:`structlearn.distributed.fit`, partial labels as
    ``(X, lengths, labels)`` shards with labels (N, C)); with no posteriors travelling the emissions are
    re-estimated from their families' sufficient statistics (Gaussian, MultivariateGaussian, Poisson,
    Categorical). :meth:`partial_fit` runs stepwise EM on the same statistics.
    """

    def __init__(self, n_states=2, channels=None, duration="nonparametric", emission="gaussian",
                 max_duration=None, censoring="right", inference="exact", max_exact_states=20000,
                 max_sweeps=100, sweep_tol=1e-8, n_iter=100, tol=1e-4, init="kmeans", params="sctde",
                 init_params="sctde", random_state=None, n_jobs=None):
        self._store_params(locals())

    # ================================================================================================
    # validation
    # ================================================================================================
    def _validate_hyper(self):
        if self.censoring not in MC_CENSORING:
            raise ValueError(f"`censoring` must be one of {MC_CENSORING}; got {self.censoring!r}")
        if self.inference not in _INFERENCE:
            raise ValueError(f"`inference` must be one of {_INFERENCE}; got {self.inference!r}")
        for name, lo in (("n_iter", 0), ("max_sweeps", 1), ("max_exact_states", 1)):
            if not _is_int(getattr(self, name), lo):
                raise ValueError(f"`{name}` must be an integer >= {lo}; got {getattr(self, name)!r}")
        for name in ("tol", "sweep_tol"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float, np.floating)) and not isinstance(v, bool) and v >= 0):
                raise ValueError(f"`{name}` must be a non-negative number; got {v!r}")
        check_em_options(self, _LETTERS, "s start, c coupling weights, t coupling matrices, d durations, "
                                         "e emissions")

    def _resolve_channels(self, n_features):
        """The validated list of C int64 column arrays."""
        if self.channels is None:
            return [np.array([f], dtype=np.int64) for f in range(n_features)]
        if not isinstance(self.channels, (list, tuple)) or len(self.channels) == 0:
            raise ValueError(f"`channels` must be a non-empty list of lists of column indices; got "
                             f"{self.channels!r}")
        seen = {}
        out = []
        for c, cols in enumerate(self.channels):
            arr = np.asarray(cols if np.ndim(cols) else [cols])
            if arr.size and (arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer)):
                raise ValueError(f"`channels[{c}]` must be a list of integer column indices; got {cols!r}")
            arr = arr.astype(np.int64)
            bad = arr[(arr < 0) | (arr >= n_features)]
            if bad.size:
                raise ValueError(f"`channels[{c}]` names column {int(bad[0])} but X has {n_features} "
                                 f"columns (0..{n_features - 1})")
            for f in arr.tolist():
                if f in seen:
                    raise ValueError(f"`channels`: column {f} is in channel {seen[f]} and in channel {c}; "
                                     f"channels must observe disjoint columns")
                seen[f] = c
            out.append(arr)
        return out

    def _per_channel(self, value, C, name):
        if isinstance(value, (list, tuple)):
            if len(value) != C:
                raise ValueError(f"`{name}` must be one value or a list of one per channel ({C}); got "
                                 f"{len(value)} values")
            return list(value)
        return [value] * C

    def _check_X(self, X):
        X = _as_float_2d(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns but the model was fitted with {self.n_features_in_}")
        return X

    def _n_states_per_channel(self, C):
        """The validated M_c of the C channels (``n_states`` one value or one per channel)."""
        ns = self._per_channel(self.n_states, C, "n_states")
        for c, M in enumerate(ns):
            if not _is_int(M, 2):
                raise ValueError(f"`n_states` must be integers >= 2; got {M!r} for channel {c}")
        return [int(m) for m in ns]

    def _n_states_list(self):
        return [int(p.shape[0]) for p in self.startprob_]

    # ================================================================================================
    # the adapter
    # ================================================================================================
    def _potentials(self):
        return MultiChannelPotentials(self.startprob_, self.coupling_, self.transmat_, self.duration_,
                                      self.emission_, self.channels_, self.max_duration_, self.censoring)

    def _check_exact(self, pot):
        S, E = pot.product_size()
        if S > self.max_exact_states:
            sizes = " × ".join(f"{M}·{D}" for M, D in zip(pot.n_states, pot.max_duration))
            raise ValueError(f"exact inference needs the product chain of Π_c M_c·D_c = {sizes} = {S} joint "
                             f"states ({E} stored transitions per step), more than max_exact_states="
                             f"{self.max_exact_states}; use inference='factored' (time linear in the "
                             f"channels), smaller max_duration, or raise max_exact_states")

    def _infer(self, X, lengths, offsets, allowed=None, statistics=False):
        """One inference of the current parameters
        (:func:`structlearn.hsmm._multichannel_em.infer`), a dict: ``"pot"`` the potentials,
        ``"log_z"`` (B,); exact: ``"chain"`` (SparseChain), ``"layout"``; factored: ``"factored"``
        (:data:`Factored`), ``"gammas"``; with ``statistics`` also ``"gammas"`` and ``"stats"`` (the
        E-step's counts). ``allowed``: per-channel (N, M_c) bool masks or None."""
        pot = self._potentials()
        if self.inference == "exact":
            self._check_exact(pot)
        return _mce.infer(pot, self.inference, X, lengths, offsets, allowed, self.max_sweeps, self.sweep_tol,
                          counts=statistics)

    # ================================================================================================
    # fit
    # ================================================================================================
    def _init_params(self, X, lengths, rng, known):
        C = len(self.channels_)
        ns = self._n_states_per_channel(C)
        ip = self.init_params
        durs = self._per_channel(self.duration, C, "duration")
        ems = self._per_channel(self.emission, C, "emission")
        if "e" in ip or not hasattr(self, "emission_"):
            self.emission_ = [None if cols.size == 0 else _emi.make_emission(e)
                              for e, cols in zip(ems, self.channels_)]
        if "d" in ip or not hasattr(self, "duration_"):
            self.duration_ = [_dur.make_duration(d) for d in durs]
        labels = []
        for c, (M, cols) in enumerate(zip(ns, self.channels_)):
            kc = None if known is None else known[:, c]
            em = self.emission_[c]
            if em is not None:
                Xc = X[:, cols]
                lab = initial_labels(Xc, M, self.init, rng, 0, kc)
                if "e" in ip:
                    em.initialize(Xc, M, lab, rng)
            else:
                lab = np.full(X.shape[0], -1, dtype=np.int64) if kc is None else kc.astype(np.int64)
            labels.append(lab)
            if "d" in ip:
                D = self.max_duration_[c]
                self.duration_[c].initialize(M, D, initial_mean_durations(lab, lengths, M, D, rng,
                                                                          self.init == "random"), rng)
        if "s" in ip:
            self.startprob_ = [np.full(M, 1.0 / M) for M in ns]
        if "c" in ip:
            self.coupling_ = (np.eye(C) * 0.5 + (1 - np.eye(C)) * 0.5 / (C - 1)) if C > 1 else np.ones((1, 1))
        if "t" in ip:
            self.transmat_ = [[((np.ones((M, M)) - np.eye(M)) / (M - 1)) if k == c
                               else np.full((ns[k], M), 1.0 / M) for k in range(C)]
                              for c, M in enumerate(ns)]
            if self.init == "random":
                for c in range(C):
                    for k in range(C):
                        if k != c:
                            self.transmat_[c][k] = rng.dirichlet(np.full(ns[c], 5.0), size=ns[k])
        for name, letter in (("startprob_", "s"), ("coupling_", "c"), ("transmat_", "t")):
            if not hasattr(self, name):
                raise ValueError(f"'{letter}' is not in `init_params`: set `{name}` before fit")
        self._check_params(ns)

    def _check_params(self, ns=None):
        """Shapes and normalisation of startprob_, coupling_, transmat_ (ValueError naming them)."""
        ns = self._n_states_list() if ns is None else ns
        C = len(ns)
        if len(self.startprob_) != C or any(np.shape(p) != (M,) for p, M in zip(self.startprob_, ns)):
            raise ValueError(f"`startprob_` must be {C} arrays of shapes {[(M,) for M in ns]}")
        self.startprob_ = [np.asarray(p, dtype=np.float64) for p in self.startprob_]
        for c, p in enumerate(self.startprob_):
            if np.any(p < 0) or abs(p.sum() - 1) > 1e-8:
                raise ValueError(f"`startprob_[{c}]` must be non-negative and sum to 1 (got sum {p.sum():.6g})")
        th = np.asarray(self.coupling_, dtype=np.float64)
        if th.shape != (C, C) or np.any(th < 0) or not np.allclose(th.sum(axis=1), 1.0, atol=1e-8):
            raise ValueError(f"`coupling_` must be a non-negative ({C}, {C}) array whose rows sum to 1; got "
                             f"shape {th.shape}, row sums {np.round(th.sum(axis=1), 6).tolist()}")
        self.coupling_ = th
        for c in range(C):
            for k in range(C):
                A = np.asarray(self.transmat_[c][k], dtype=np.float64)
                if A.shape != (ns[k], ns[c]) or np.any(A < 0) or not np.allclose(A.sum(axis=1), 1.0, atol=1e-8):
                    raise ValueError(f"`transmat_[{c}][{k}]` must be a non-negative ({ns[k]}, {ns[c]}) array "
                                     f"whose rows sum to 1; got shape {A.shape}")
                if k == c and np.any(np.diag(A) != 0):
                    raise ValueError(f"`transmat_[{c}][{c}]` must have a zero diagonal (a channel's own "
                                     f"component never re-enters the state that just ended)")
                self.transmat_[c][k] = A

    def fit(self, X, lengths=None, labels=None):
        """Estimate the parameters by EM.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            Packed observations (NaN = missing).
        lengths : array-like of int, shape (B,), optional
        labels : array-like of int, shape (N, C), optional
            Known states per channel, -1 where unknown (supervised / semi-supervised EM on the paths
            that agree; ``log_likelihood_`` is then log P(o, labels)).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad hyper-parameters, ``channels``, X, lengths or labels; an exact product larger than
            ``max_exact_states`` (names its size); a sequence with zero likelihood.

        Warns
        -----
        ConvergenceWarning
            EM did not converge within ``n_iter`` iterations.

        Notes
        -----
        The E-step is :func:`structlearn.hsmm._multichannel_em.statistics` mapped over ``n_jobs``
        blocks of sequences (:func:`~structlearn.learning.shards.map_shards`); the M-step runs once on
        the summed counts, the emissions' on the rows and the concatenated posteriors. The loop is
        hmmlearn's (:func:`structlearn.learning.em.run_em`): the parameters are those after the last
        M-step (also on the iteration that meets ``tol``), ``monitor_.history`` the log-likelihood before
        each M-step, ``log_likelihood_`` that of the fitted parameters and ``converged_`` True only when
        the gain fell below ``tol``.
        """
        self._validate_hyper()
        shard = self._shard_from_data(X, lengths, labels)
        shards = data_blocks(shard)
        return self._fit_sharded(lambda f, p: map_shards(f, p, shards, self.n_jobs),
                                 (shard.X, shard.lengths, self._shard_known(shard)), int(shard.lengths.max()),
                                 shard.X.shape[1], shard.X)

    def _fit_sharded(self, map_statistics, init_data, max_length, n_features, X=None):
        """EM whose E-step maps the per-shard function over the shards (``map_statistics(statistics,
        params)`` -> the summed ShardStatistics): local blocks in ``fit``, dask workers in
        :func:`structlearn.distributed.fit`. The initial parameters come from ``init_data`` = (X, lengths,
        known labels (N, C) or None; an (N,) array is taken as channel 0's labels when C = 1 and ignored
        otherwise); ``max_length``: the longest sequence of all shards (``max_duration=None``); ``X``: the
        rows of all shards in this process (posteriors travel) or None (the emission families' additive
        statistics travel). Returns self."""
        self._set_dimensions(n_features, max_length)
        C = len(self.channels_)
        Xi, Li, known = init_data
        if known is not None:
            known = np.asarray(known)
            if known.ndim == 1:  # structlearn.distributed's one-channel reading of the shard's mask
                known = known[:, None] if C == 1 else None
        self._init_params(Xi, Li, check_random_state(self.random_state), known)
        if self.inference == "exact":
            self._check_exact(self._potentials())
        if X is None and "e" in self.params:
            from ..learning.stepwise import check_emission_supported
            for em in self.emission_:
                if em is not None:
                    check_emission_supported(em)

        def e_step():
            total = map_statistics(*self._shard_function(posteriors=X is not None))
            return total, total.value

        self.monitor_ = ConvergenceMonitor(self.tol, self.n_iter)
        with training(self):  # interrupted (or failed): converged_ False, the exception raised again
            self.log_likelihood_ = float(run_em(e_step, lambda total: self._apply_statistics(total, X),
                                                self.monitor_))
        self.converged_ = converged_by_tol(self.monitor_)
        if not self.converged_ and self.n_iter > 0:
            h = self.monitor_.history
            gain = h[-1] - h[-2] if len(h) > 1 else float("nan")
            warnings.warn(f"MultiChannelHSMM: EM did not converge in {self.n_iter} iterations (last gain "
                          f"{gain:.3g}, tol {self.tol})", ConvergenceWarning, stacklevel=3)
        return self

    def _set_dimensions(self, n_features, max_length):
        """``channels_``, ``n_features_in_`` and ``max_duration_`` (``max_duration`` or, when None,
        ``max_length``: the longest sequence seen)."""
        self.channels_ = self._resolve_channels(int(n_features))
        self.n_features_in_ = int(n_features)
        md = self._per_channel(self.max_duration if self.max_duration is not None else max(1, int(max_length)),
                               len(self.channels_), "max_duration")
        for c, D in enumerate(md):
            if not _is_int(D, 1):
                raise ValueError(f"`max_duration` must be integers >= 1 or None; got {D!r} for channel {c}")
        self.max_duration_ = [int(D) for D in md]

    # -- the per-shard interface (structlearn.learning.shards), shared with structlearn.distributed -------
    def _shard_from_data(self, X, lengths=None, labels=None):
        """The validated :class:`~structlearn.learning.shards.Shard` of ``X``, ``lengths`` and partial
        ``labels`` (N, C) (as ``fit``); its ``allowed`` is the (N, Σ_c M_c) bool mask of
        :func:`~structlearn.hsmm._multichannel_em.label_masks` or None."""
        X = _as_float_2d(X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
        C = len(self._resolve_channels(X.shape[1]))
        return Shard(X, lengths, offsets, _mce.label_masks(labels, X.shape[0], self._n_states_per_channel(C))[1])

    # -- partial_fit (structlearn.hsmm._shard_online.ShardOnlineMixin) -------------------------------
    def _online_attributes(self):
        return ("startprob_", "coupling_", "transmat_", "duration_", "emission_")

    def _online_init(self, shard):
        """The first chunk's initialisation, as ``fit`` does (``max_duration=None``: its longest sequence)."""
        self._set_dimensions(shard.X.shape[1], shard.lengths.max())
        self._init_params(shard.X, shard.lengths, check_random_state(self.random_state), self._shard_known(shard))

    def _check_online(self):
        if self.inference == "exact":
            self._check_exact(self._potentials())
        if "e" in self.params:
            from ..learning.stepwise import check_emission_supported
            for em in self.emission_:
                if em is not None:
                    check_emission_supported(em)

    def _shard_known(self, shard):
        """The known labels (N, C) int64 of a shard (-1 unknown), or None: the inverse of its mask."""
        if shard.allowed is None:
            return None
        out = []
        for mask in _mce.channel_masks(shard.allowed, self._n_states_per_channel(
                len(self._resolve_channels(shard.X.shape[1])))):
            out.append(np.where(mask.sum(axis=1) == 1, np.argmax(mask, axis=1), -1))
        return np.stack(out, axis=1).astype(np.int64)

    def _shard_function(self, posteriors=True):
        """(statistics, params) of the current parameters: ``statistics(params, shard)`` is the E-step of
        one shard (:func:`structlearn.hsmm._multichannel_em.statistics`); ``posteriors`` keeps the
        per-channel γ for the emission M-step in this process (else additive emission statistics
        travel)."""
        return _mce.statistics, (self._potentials(), self.inference, self.max_sweeps, self.sweep_tol,
                                  "e" in self.params, posteriors)

    def _apply_statistics(self, total, X=None):
        """The M-step (:func:`~structlearn.hsmm._multichannel_potentials.m_step`) of summed (or averaged)
        shard statistics; the emissions from the rows ``X`` and ``total.posteriors`` when they travelled,
        else from their sufficient statistics. Fresh parameter arrays (the durations and emissions are
        refitted in place)."""
        C = len(self.channels_)
        pot = MultiChannelPotentials([p.copy() for p in self.startprob_], self.coupling_.copy(),
                                     [[A.copy() for A in row] for row in self.transmat_], self.duration_,
                                     self.emission_, self.channels_, self.max_duration_, self.censoring)
        stats = total.stats if hasattr(total, "stats") else total
        m_step(pot, _mce.channel_statistics(stats, C), self.params)
        self.startprob_, self.coupling_, self.transmat_ = pot.startprob, pot.coupling, pot.transmat
        if "e" in self.params:
            post = getattr(total, "posteriors", None)
            for c, (em, cols) in enumerate(zip(self.emission_, self.channels_)):
                if em is None:
                    continue
                if post is not None:
                    em.fit(X[:, cols], post[str(c)])
                else:
                    from ..learning.stepwise import emission_m_step
                    emission_m_step(em, stats[str(c)]["emission"])

    # ================================================================================================
    # inference
    # ================================================================================================
    def _prepared(self, X, lengths):
        check_is_fitted(self, "startprob_")
        self._check_params()
        X = self._check_X(X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
        return X, lengths, offsets

    def score_per_sequence(self, X, lengths=None):
        """log P(o) of every sequence, float64 (B,) (``"factored"``: the approximation Σ_c log Z_c).
        Time: see ``inference``."""
        X, lengths, offsets = self._prepared(X, lengths)
        return self._infer(X, lengths, offsets)["log_z"]

    def score(self, X, lengths=None):
        """log P(o) summed over sequences (float; -inf if a sequence is impossible)."""
        return float(self.score_per_sequence(X, lengths).sum())

    def predict_proba(self, X, lengths=None):
        """Per channel the smoothed posteriors P(S^c_t = j | o): a list of C float64 arrays (N, M_c), rows
        summing to one within 1e-9, else (or for a sequence with zero likelihood, as :meth:`predict`)
        ``ValueError`` naming the sequence."""
        X, lengths, offsets = self._prepared(X, lengths)
        out = self._infer(X, lengths, offsets)
        return [check_posteriors(g, offsets, out["log_z"], f"the posteriors of channel {c}")
                for c, g in enumerate(self._channel_posteriors(X, out))]

    def _channel_posteriors(self, X, out):
        if "gammas" in out:
            return [g.copy() for g in out["gammas"]]
        N = X.shape[0]
        um = out["chain"].marginals(edge="none").unary
        sizes = [M * D for M, D in zip(out["pot"].n_states, out["pot"].max_duration)]
        grid = um.reshape((N, *sizes))
        C = len(sizes)
        return [grid.sum(axis=tuple(a + 1 for a in range(C) if a != c)).reshape(N, M, -1).sum(axis=2)
                for c, M in enumerate(out["pot"].n_states)]

    def decode(self, X, lengths=None, algorithm="viterbi"):
        """Most likely states of every channel.

        Parameters
        ----------
        algorithm : {"viterbi", "map"}
            ``"viterbi"``: the best joint (state, remaining duration) path (``"exact"``; ``log_prob`` =
            log max P(o, path)); with ``"factored"`` each channel's Viterbi under the averaged coupling
            (``log_prob`` the sum of their scores). ``"map"``: per channel and time the argmax of
            :meth:`predict_proba` (``log_prob`` Σ log max γ).

        Returns
        -------
        log_prob : float
        states : ndarray of int64, shape (N, C)

        Raises
        ------
        ValueError
            Unknown algorithm; a sequence with zero likelihood.
        """
        if algorithm not in ("viterbi", "map"):
            raise ValueError(f"`algorithm` must be 'viterbi' or 'map'; got {algorithm!r}")
        if algorithm == "map":
            gam = self.predict_proba(X, lengths)
            with np.errstate(divide="ignore"):
                lp = float(sum(np.log(g.max(axis=1)).sum() for g in gam))
            return lp, np.stack([g.argmax(axis=1) for g in gam], axis=1).astype(np.int64)
        X, lengths, offsets = self._prepared(X, lengths)
        out = self._infer(X, lengths, offsets)
        _mce.check_possible(out["log_z"], lengths, offsets)
        if "chain" in out:
            labels = out["chain"].argmax()
            return float(out["chain"].max().sum()), out["layout"].state[:, labels].T.astype(np.int64)
        structs = out["factored"].structures
        return (float(sum(s.max().sum() for s in structs)),
                np.stack([s.argmax() for s in structs], axis=1).astype(np.int64))

    def predict(self, X, lengths=None):
        """Viterbi states (N, C) int64 (see :meth:`decode`)."""
        return self.decode(X, lengths)[1]

    def sample(self, n_samples=1, random_state=None, n_sequences=None):
        """One sequence of the generative process (all channels start at t = 0; the last segments are cut
        at ``n_samples``). Returns X (n_samples, F) (NaN in columns no channel observes) and states
        (n_samples, C) int64.

        With ``n_sequences`` (an int) that many sequences from the same random stream (the first is the
        sequence of ``n_sequences=None``), one after the other (``fit(X, lengths)``'s layout), and their
        ``lengths`` (n_sequences,) int64 last. ``ValueError`` when ``n_samples`` or ``n_sequences`` is
        not a positive integer."""
        check_is_fitted(self, "startprob_")
        if not _is_int(n_samples, 1):
            raise ValueError(f"`n_samples` must be a positive integer; got {n_samples!r}")
        rng = check_random_state(random_state)
        pot = self._potentials()
        return sample_sequences(lambda: pot.sample(int(n_samples), self.n_features_in_, rng), n_sequences, 2)

    # ================================================================================================
    # model files
    # ================================================================================================
    @save_doc
    def save(self, path):
        """{save}"""
        from ..distributions.emissions import hmm as _hemi
        from ..utils.modelfile import save_model

        check_is_fitted(self, "startprob_")
        C = len(self.startprob_)
        arrays = {"coupling_": self.coupling_}
        meta = {"max_duration_": [int(d) for d in self.max_duration_], "n_features_in_": int(self.n_features_in_),
                "channels_": [c.tolist() for c in self.channels_],
                **fit_state(self)}
        for c in range(C):
            arrays[f"startprob_{c}"] = self.startprob_[c]
            for k in range(C):
                arrays[f"transmat_{c}_{k}"] = self.transmat_[c][k]
            name, arr, cfg = family_to_file(self.duration_[c], _dur, f"duration{c}")
            arrays.update(arr)
            meta[f"duration{c}_family"], meta[f"duration{c}_config"] = name, cfg
            if self.emission_[c] is not None:
                name, arr, cfg = family_to_file(self.emission_[c], (_emi, _hemi), f"emission{c}")
                arrays.update(arr)
                meta[f"emission{c}_family"], meta[f"emission{c}_config"] = name, cfg
        params = self.get_params()
        for key in ("duration", "emission"):
            if not isinstance(params[key], str):
                params[key] = None  # objects: rebuilt from the fitted families at load
        params["n_states"] = (int(params["n_states"]) if np.ndim(params["n_states"]) == 0
                              else [int(m) for m in params["n_states"]])
        if params["channels"] is not None:
            params["channels"] = [np.atleast_1d(np.asarray(c, dtype=np.int64)).tolist()
                                  for c in params["channels"]]
        if params["max_duration"] is not None:
            params["max_duration"] = (int(params["max_duration"]) if np.ndim(params["max_duration"]) == 0
                                      else [int(d) for d in params["max_duration"]])
        rs = params["random_state"]
        params["random_state"] = int(rs) if isinstance(rs, (int, np.integer)) else None
        params["n_jobs"] = None if params["n_jobs"] is None else int(params["n_jobs"])
        save_model(path, format_name=_FORMAT, version=_FORMAT_VERSION,
                   estimator="structlearn.MultiChannelHSMM", params=params, metadata=meta, arrays=arrays)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; runs no code from the file (families are looked up by
        name in structlearn's duration and emission modules)."""
        from ..distributions.emissions import hmm as _hemi
        from ..utils.modelfile import ModelFileError, load_model

        header, arrays = load_model(path, expected_format=_FORMAT, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        params = dict(header["params"])
        channels = [np.asarray(c, dtype=np.int64) for c in meta["channels_"]]
        C = len(channels)
        durs, ems = [], []
        for c in range(C):
            roles = {f"duration{c}": (_dur, _dur.DurationDistribution)}
            if f"emission{c}_family" in meta:
                roles[f"emission{c}"] = ((_emi, _hemi), _emi.EmissionDistribution)
            fam = families_from_file(meta, arrays, roles)
            if None in fam.values():
                raise ModelFileError(f"{path!r}: channel {c} names no structlearn duration/emission family")
            durs.append(fam[f"duration{c}"])
            ems.append(fam.get(f"emission{c}"))
        if params.get("duration") is None:
            params["duration"] = [type(d)(**(meta.get(f"duration{c}_config") or {})) for c, d in enumerate(durs)]
        if params.get("emission") is None:
            params["emission"] = [None if e is None else type(e)(**(meta.get(f"emission{c}_config") or {}))
                                  for c, e in enumerate(ems)]
        model = cls(**params)
        model.channels_, model.duration_, model.emission_ = channels, durs, ems
        model.startprob_ = [np.asarray(arrays[f"startprob_{c}"], dtype=np.float64) for c in range(C)]
        model.coupling_ = np.asarray(arrays["coupling_"], dtype=np.float64)
        model.transmat_ = [[np.asarray(arrays[f"transmat_{c}_{k}"], dtype=np.float64) for k in range(C)]
                           for c in range(C)]
        model.max_duration_ = [int(d) for d in meta["max_duration_"]]
        model.n_features_in_ = int(meta["n_features_in_"])
        restore_fit_state(model, meta)
        model._check_params()
        return model


def _as_float_2d(X):
    """X as a 2-d float64 array (1-d: one column; NaN = missing; infinite values refused)."""
    arr = as_real_float64(X)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"`X` must be 2-d (n_samples, n_features); got shape {arr.shape}")
    if np.any(np.isinf(arr)):
        raise ValueError("`X` contains infinite values; use NaN for missing observations")
    return arr
