"""EM of the hierarchical HMM on the per-shard interface (:mod:`structlearn.learning.shards`).

:class:`HHMMLearningMixin` holds what ``HierarchicalHMM.fit`` and :func:`structlearn.distributed.fit`
share: the E-step of one shard (:func:`_shard_statistics`: expected counts of θ, the emission weights or
the emission family's sufficient statistics, the log-likelihood), the EM loop over a map of shards
(``_fit_sharded``), the M-step and the random initialisation.
"""
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ..learning import stepwise as _online
from ..learning.em import ConvergenceMonitor, converged_by_tol, run_em
from ..learning.shards import Shard, ShardStatistics
from ..distributions import emissions as _emi
from .parsimonious import MixedMemoryTransitions
from ..learning.training import rolls_back, training
from ..learning.restarts import check_n_jobs, warn_empty_states

__all__ = ["HHMMLearningMixin"]


def _shard_statistics(params, shard):
    """The E-step of one shard (the per-shard function of :mod:`structlearn.learning.shards`).

    ``params`` = (model, update_emission, posteriors): ``model`` a parameter snapshot of the estimator
    (:meth:`HierarchicalHMM._snapshot`: automaton and emission); ``posteriors`` keeps the emission weights
    (N, P) for the emission M-step in this process (``fit``), else, when ``update_emission``, the
    family's additive statistics travel (``"emission"``,
    :func:`structlearn.learning.stepwise.emission_statistics`; distributed fits).

    Returns a :class:`~structlearn.learning.shards.ShardStatistics`: ``stats["counts"]`` the expected
    parameter counts (:meth:`Hierarchy.theta` layout, tied parameters pooled), ``value`` the shard's
    log-likelihood; ``ValueError`` naming a sequence of the shard with probability 0.
    """
    model, update_emission, posteriors = params
    X, lengths, offsets, _ = shard
    counts, weights, ll = model._e_step(X, lengths, offsets)
    stats = {"counts": counts}
    if update_emission and not posteriors:
        stats["emission"] = _online.emission_statistics(model.emission_, X, weights)
    return ShardStatistics(stats, ll, int(lengths.shape[0]), weights if posteriors else None)


def _warn_unvisited(h, counts):
    """:class:`~structlearn.learning.restarts.EmptyStateWarning` naming (by its paths from the root,
    ``'root/A/x'``, one per context a shared state is called in) every state of the hierarchy ``h`` that
    the E-step's expected counts (:meth:`Hierarchy.theta` layout) never enter: expected vertical entries
    (start) plus horizontal entries (trans into it) 0. Its start, trans and end rows, and for a
    production state its emission, are kept by the M-step."""
    entries, names = [], []
    root = h.submodel_names[0]
    for m in range(h.n_submodels):
        K = len(h.children[m])
        b = int(h._base[m])
        into = counts[b:b + K] + counts[b + K:b + K + K * K].reshape(K, K).sum(axis=0)
        for i in range(K):
            paths = [p for u, p in enumerate(h.instance_paths) if h._inst_sub[u] == m and h._inst_pos[u] == i]
            entries.append(into[i])
            names.append(repr(", ".join("/".join((root,) + tuple(p)) for p in paths)))
    warn_empty_states(np.array(entries)[None, :], names=names)


class HHMMLearningMixin:
    """EM of :class:`~structlearn.HierarchicalHMM` over shards (see the module docstring)."""

    # -- the per-shard interface (structlearn.learning.shards), shared with structlearn.distributed ----
    def _validate_hyper(self):
        """Check the hyper-parameters and build the automaton and emission (``ValueError``)."""
        check_n_jobs(self.n_jobs)
        self._build(refit=True)

    def _shard_from_data(self, X, lengths=None):
        """The validated :class:`~structlearn.learning.shards.Shard` of ``X``, ``lengths`` (as ``fit``)."""
        return Shard(*self._data(X, lengths))

    def _shard_summary(self, shard):
        """What the distributed fit counts on every shard before EM: the alphabet of categorical
        emissions (largest symbol + 1; 0 without observed symbol or for another family)."""
        x = shard.X[:, 0] if isinstance(self.emission_, _emi.Categorical) else np.zeros(0)
        x = x[~np.isnan(x)]
        return {"n_symbols": int(x.max()) + 1 if x.size else 0}

    @staticmethod
    def _merge_shard_summaries(summaries):
        """The keyword arguments of :meth:`_fit_sharded` from the shards' summaries (in shard order)."""
        return {"n_symbols": max(s["n_symbols"] for s in summaries)}

    def _snapshot(self):
        """The parameters the E-step of a shard needs: a shallow copy sharing ``hierarchy_`` and
        ``emission_`` (no cached inference engine, no constructor ``hierarchy`` spec), picklable."""
        model = object.__new__(type(self))
        model.__dict__.update(self.__dict__)
        model.__dict__.pop("_dbn_cache", None)
        model.__dict__.pop("transition_model_", None)
        model.hierarchy = None
        return model

    def _shard_function(self, posteriors=True):
        """(statistics, params) of the current parameters: ``statistics(params, shard)`` is the E-step of
        one shard (:func:`_shard_statistics`); ``posteriors`` keeps the emission weights for the
        emission M-step in this process (else the family's additive statistics travel)."""
        return _shard_statistics, (self._snapshot(), "e" in self.params, posteriors)

    def _fit_sharded(self, map_statistics, init_data, max_length, n_features, X=None, n_symbols=None):
        """EM whose E-step maps the per-shard function over the shards (``map_statistics(statistics,
        params)`` -> summed ShardStatistics); ``init_params`` are drawn from ``init_data`` = (X, lengths,
        None). ``X``: all rows in this process (the emission weights travel, the emission's own ``fit``
        runs on the rows; ``fit``) or None (the family's additive statistics,
        :mod:`structlearn.hsmm._online_statistics`; :func:`structlearn.distributed.fit`). ``n_symbols``:
        the alphabet of all shards (categorical emissions initialised from ``init_data``). Returns
        self."""
        Xi = init_data[0]
        self._build(refit=True)
        h = self.hierarchy_
        self.n_features_in_ = int(n_features)
        if X is None and "e" in self.params:
            _online.check_emission_supported(self.emission_)
        if (n_symbols and isinstance(self.emission_, _emi.Categorical)
                and getattr(self.emission_, "n_features", None) is None):
            self.emission_.n_features = int(n_symbols)
        rng = check_random_state(self.random_state)
        if self.init_params:
            self._random_init(Xi, rng)
        self._require_emission()
        topo = h.theta() > 0
        self.transition_model_ = None
        if self.transitions == "mixed-memory":
            self.transition_model_ = MixedMemoryTransitions(h)
            rows = [h.trans[m] for m in range(1, h.n_submodels)] + [h.end[m] for m in range(1, h.n_submodels)]
            if self.inference not in ("jtree", "factored-frontier") and any(np.any(r == 0) for r in rows):
                raise ValueError("transitions='mixed-memory' fills the structural zeros of the horizontal "
                                 "CPDs, which the flattened chain's topology excludes; use "
                                 "inference='jtree' (or 'factored-frontier') or a hierarchy without "
                                 "zero 'trans'/'end' entries")
        monitor = ConvergenceMonitor(self.tol, self.n_iter, self.verbose)

        def e_step():
            total = map_statistics(*self._shard_function(posteriors=X is not None))
            return total, total.value

        def m_step(total):
            _warn_unvisited(h, total.stats["counts"])
            self._m_step(X, total.stats["counts"], total.posteriors, topo, total.stats.get("emission"))

        def report(it, ll):
            if self.verbose:
                print(f"EM iteration {it}: log-likelihood {ll:.6f}")

        with training(self):  # interrupted (or failed): converged_ False, the exception raised again
            ll = run_em(e_step, m_step, monitor, report)
        history = monitor.history
        self.converged_ = converged_by_tol(monitor)
        if not self.converged_ and self.n_iter > 0:
            gain = history[-1] - history[-2] if len(history) > 1 else float("nan")
            warnings.warn(f"EM did not converge in {self.n_iter} iterations (last gain "
                          f"{gain:.3g} >= tol {self.tol})", ConvergenceWarning)
        self.monitor_history_ = history
        self.log_likelihood_ = ll
        self.n_iter_ = monitor.iter
        return self

    @rolls_back
    def partial_fit(self, X, lengths=None, kappa=0.7):
        """One step of online (stepwise) EM on a chunk of a stream (Cappé & Moulines 2009), the
        behaviour of ``partial_fit`` of the HMMs and HSMMs.

        The chunk's expected counts of θ and the emission family's sufficient statistics (exact E-step of
        the chunk, its sequences independent) are blended into running averages with step
        ρ_k = (k + 2)^(-κ) (k = ``n_chunks_seen_`` before the call); then every parameter named in
        ``params`` is set to the M-step of :meth:`fit` on the averages (structural zeros and tied
        parameters as in ``fit``). The first call builds the hierarchy and draws ``init_params`` from the
        chunk as ``fit`` does; later calls continue from the current parameters, and a ``fit`` in
        between restarts the running statistics.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
            The chunk (codes for a categorical emission: give it ``n_features`` when later chunks may hold
            symbols the first one lacks).
        lengths : array-like of int, shape (n_sequences,), optional
        kappa : float, default 0.7
            Step-size exponent κ ∈ (0.5, 1].

        Returns
        -------
        self
            With ``n_chunks_seen_`` and ``chunk_log_likelihood_`` (log P(chunk) before the update).

        Raises
        ------
        ValueError
            Bad ``kappa``, data or hyper-parameters; an emission family without additive sufficient
            statistics while ``"e"`` is in ``params``; a sequence of the chunk with probability 0.

        Notes
        -----
        Cost per call: the E-step of the chunk (that of ``fit``'s iterations); the running statistics take
        the size of θ plus the emission's statistics, independent of the stream's length.
        """
        if (isinstance(kappa, bool) or not isinstance(kappa, (int, float, np.floating))
                or not 0.5 < kappa <= 1.0):
            raise ValueError(f"`kappa` must be a number in (0.5, 1]; got {kappa!r}")
        check_n_jobs(self.n_jobs)
        fresh = getattr(self, "hierarchy_", None) is None or not hasattr(self, "n_features_in_")
        X, lengths, offsets = self._data(X, lengths, refit=fresh)
        if "e" in self.params:
            _online.check_emission_supported(self.emission_)
        if fresh:
            if isinstance(self.emission_, _emi.Categorical) and getattr(self.emission_, "n_features",
                                                                         None) is None:
                x = X[:, 0][~np.isnan(X[:, 0])]
                self.emission_.n_features = int(x.max()) + 1 if x.size else 1
            if self.init_params:
                self._random_init(X, check_random_state(self.random_state))
            self.n_features_in_ = int(X.shape[1])
            self.transition_model_ = None
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features but the model has {self.n_features_in_}")
        self._require_emission()
        h = self.hierarchy_
        state = getattr(self, "_online_state", None)
        if state is None or getattr(self, "_online_marker", None) is not h:
            state = _online.OnlineStatistics()
            state.topology = h.theta() > 0  # the structural zeros of the stream's start
        total = _shard_statistics(self._shard_function(posteriors=False)[1], Shard(X, lengths, offsets))
        state.update(total.stats, _online.step_size(state.n_updates, float(kappa)))
        avg = state.average()
        self._m_step(None, avg["counts"], None, state.topology, avg.get("emission"))
        self._online_state, self._online_marker = state, h
        self.n_chunks_seen_ = state.n_updates
        self.chunk_log_likelihood_ = float(total.value)
        return self

    def _m_step(self, X, counts, weights, topo, emission_stats=None):
        """Parameters from the expected counts; the emissions from the rows ``X`` and their weights, or
        from the family's summed sufficient statistics ``emission_stats`` when given."""
        h = self.hierarchy_
        theta = h.theta()
        new = h.normalize_counts(counts * topo, theta)
        if getattr(self, "transition_model_", None) is not None and "t" in self.params:
            new = self.transition_model_.m_step(counts, new, h)
        keep = np.ones_like(theta, dtype=bool)
        for m in range(h.n_submodels):
            K = len(h.children[m])
            b = h._base[m]
            if "s" not in self.params:
                keep[b:b + K] = False
            if "t" not in self.params:
                keep[b + K:b + 2 * K + K * K] = False
        h.set_theta(np.where(keep, new, theta))
        if "e" in self.params:
            if emission_stats is not None:
                _online.emission_m_step(self.emission_, emission_stats)
            else:
                self.emission_.fit(X, weights)

    def _random_init(self, X, rng):
        h = self.hierarchy_
        theta = h.theta()
        topo = theta > 0
        if "s" in self.init_params or "t" in self.init_params:
            new = np.where(topo, rng.gamma(5.0, size=theta.shape), 0.0)
            new = h.normalize_counts(new, theta)
            keep = np.zeros_like(topo)
            for m in range(h.n_submodels):
                K = len(h.children[m])
                b = h._base[m]
                keep[b:b + K] = "s" in self.init_params
                keep[b + K:b + 2 * K + K * K] = "t" in self.init_params
            h.set_theta(np.where(keep, new, theta))
        if "e" in self.init_params:
            P = len(h.production_names)
            if not hasattr(self.emission_, "initialize"):
                raise ValueError("the emission object has no `initialize`; set its parameters and drop "
                                 "'e' from `init_params`")
            self.emission_.initialize(X, P, rng.randint(P, size=X.shape[0]), rng)
