r"""The per-shard interface of training: statistics of one shard of data given the parameters, additive
across shards.

Every model of structlearn is trained by summing per-sequence quantities, so its training data can be
cut into *shards* (blocks of whole sequences) whose statistics are computed independently — in this
process, in joblib worker processes (``n_jobs``) or on dask workers (:mod:`structlearn.distributed`) —
and added. The interface is one function and two small types:

``statistics(params, shard) -> ShardStatistics``
    a module-level (picklable) function of a picklable parameter snapshot ``params`` and a
    :class:`Shard`. EM models return the expected sufficient statistics of the E-step and the
    log-likelihood of the shard; a CRF returns its objective value and gradient
    (``ShardStatistics({"gradient": g}, value=f)``).

The totals over shards are :func:`reduce_statistics` of the parts (any bracketing: a tree reduction
gives the same sums up to rounding), and the optimiser — the M-step of EM, L-BFGS of a CRF — runs once
on the total. :func:`map_shards` is the single-process map (sequential, or joblib processes with
``n_jobs``) that the estimators' ``fit`` use; :mod:`structlearn.distributed` maps the same function over
persisted dask shards.

``ShardStatistics.posteriors`` is the one non-additive part: per-row state posteriors γ (N, K) that a
shard may return when the caller keeps the data in the same process and the model's M-step needs the
rows (an emission family without sufficient statistics, e.g. a Gaussian mixture); parts are then
concatenated in shard order, so the shards must be the data's blocks in order. Distributed fits ask
for statistics without posteriors.

How an estimator adopts it. The EM estimators give themselves a private
``_shard_function(distributed)`` returning ``(statistics, params)`` for their current parameters,
compute ``map_shards(statistics, params, shards)`` where ``fit`` computed its E-step, and apply the
total in the M-step. The CRF estimators train by L-BFGS on a :class:`ShardedObjective`: a shard is the
data term of their objective on a block of sequences (a CLL of :mod:`structlearn.learning.objectives`
without penalty), :func:`objective_statistics` its value and gradient at w, and the penalty
(c2‖w‖², the mask of free weights) is added once to the total — ``fit`` runs it over one local shard
(:meth:`ShardedObjective.local`), :mod:`structlearn.distributed` over persisted dask shards. The
hierarchical HMM adopts it as the EM estimators do (its shards return the expected counts of θ); the
graph CRF as the CRFs do, with :func:`structlearn.learning.graph_objective.graph_objective_statistics`
(a :class:`~structlearn.learning.graph_objective.GraphCLL` without penalty per shard of graphs).
"""
from typing import NamedTuple

import numpy as np

from .objectives import penalise

__all__ = ["Shard", "ShardStatistics", "make_shard", "split_shards", "add_statistics",
           "reduce_statistics", "map_shards", "statistics_nbytes", "objective_statistics", "ShardedObjective", "ProcessShards"]


class Shard(NamedTuple):
    """A block of whole sequences, validated.

    Attributes
    ----------
    X : ndarray of float64, shape (N, F)
        Packed observations (rows of all sequences of the shard, in order).
    lengths : ndarray of int64, shape (B,)
    offsets : ndarray of int64, shape (B + 1,)
        Row of the start of every sequence (``offsets[-1] == N``).
    allowed : ndarray of bool, shape (N, K), or None
        States each row may take (partial labels), when the model is fitted with labels.
    """

    X: np.ndarray
    lengths: np.ndarray
    offsets: np.ndarray
    allowed: object = None

    @property
    def n_rows(self):
        return int(self.offsets[-1])


class ShardStatistics(NamedTuple):
    """Statistics of one shard (or of a sum of shards).

    Attributes
    ----------
    stats : dict of str -> ndarray of float64 (nested dicts allowed)
        Additive statistics: EM models' expected sufficient statistics, a CRF's ``"gradient"``.
    value : float
        Additive value: the log-likelihood (EM, log space, summed over sequences) or the objective.
    n_sequences : int
        Number of sequences summed.
    posteriors : ndarray of float64, shape (N, ...), dict of such arrays, or None
        Per-row posteriors (non-additive, concatenated in shard order along the rows), only when asked
        for.
    """

    stats: dict
    value: float
    n_sequences: int = 0
    posteriors: object = None


def make_shard(X, lengths, allowed=None):
    """A :class:`Shard` of validated ``X`` (N, F) float64 and ``lengths`` (B,) (offsets computed)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Shard(X, lengths, offsets, allowed)


def split_shards(shard, n_shards):
    """Cut a shard into at most ``n_shards`` contiguous blocks of whole sequences with about equal numbers
    of rows (views, no copy); one block when ``n_shards <= 1`` or the shard has one sequence."""
    offsets = shard.offsets
    B = offsets.shape[0] - 1
    n = max(1, min(int(n_shards), B))
    if n == 1:
        return [shard]
    N = offsets[-1]
    cuts = sorted(set([0, B] + [int(np.searchsorted(offsets, N * i / n)) for i in range(1, n)]))
    out = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        if b > a:
            r0, r1 = offsets[a], offsets[b]
            out.append(Shard(shard.X[r0:r1], shard.lengths[a:b], offsets[a:b + 1] - r0,
                             None if shard.allowed is None else shard.allowed[r0:r1]))
    return out


def _add(a, b):
    if isinstance(a, dict):
        if a.keys() != b.keys():
            raise ValueError(f"shard statistics differ in their keys: {sorted(a)} and {sorted(b)}")
        return {k: _add(a[k], b[k]) for k in a}
    return a + b


def _concat(posteriors):
    """Row-wise concatenation of the parts' posteriors (arrays, or dicts of arrays); None if one is None."""
    if any(p is None for p in posteriors):
        return None
    if isinstance(posteriors[0], dict):
        return {k: np.concatenate([p[k] for p in posteriors]) for k in posteriors[0]}
    return np.concatenate(posteriors)


def add_statistics(a, b):
    """The statistics of two shards together (``a`` first, for the posteriors)."""
    post = _concat([a.posteriors, b.posteriors])
    return ShardStatistics(_add(a.stats, b.stats), a.value + b.value, a.n_sequences + b.n_sequences, post)


def reduce_statistics(parts):
    """The sum of a non-empty sequence of :class:`ShardStatistics` (posteriors concatenated in order)."""
    parts = list(parts)
    if not parts:
        raise ValueError("`parts` must hold at least one ShardStatistics; got none")
    if len(parts) == 1:
        return parts[0]
    stats = parts[0].stats
    for p in parts[1:]:
        stats = _add(stats, p.stats)
    post = _concat([p.posteriors for p in parts])
    return ShardStatistics(stats, float(sum(p.value for p in parts)), sum(p.n_sequences for p in parts), post)


def map_shards(statistics, params, shards, n_jobs=None):
    """``reduce_statistics([statistics(params, s) for s in shards])``, in this process or, with
    ``n_jobs`` (joblib, processes; -1 all cores) and several shards, in worker processes.

    Raises whatever ``statistics`` raises (e.g. ``ValueError`` for a sequence with zero likelihood).
    """
    shards = list(shards)
    from joblib import effective_n_jobs
    if n_jobs is None or len(shards) == 1 or effective_n_jobs(n_jobs) == 1:
        return reduce_statistics([statistics(params, s) for s in shards])
    from joblib import Parallel, delayed
    return reduce_statistics(Parallel(n_jobs=n_jobs)(delayed(statistics)(params, s) for s in shards))


def statistics_nbytes(stats):
    """Bytes of the float64 arrays of a (nested) statistics dict: what one shard sends per iteration."""
    if isinstance(stats, ShardStatistics):
        stats = stats.stats
    if isinstance(stats, dict):
        return int(sum(statistics_nbytes(v) for v in stats.values()))
    return int(np.asarray(stats).nbytes)


def objective_statistics(w, objective):
    """Statistics of one CRF shard at weights ``w`` (float64, (n_params,)): ``{"gradient": ∇}`` and the
    value of ``objective``, the shard's data term (a CLL of :mod:`structlearn.learning.objectives` built
    with ``c2=0``: Σ_b log Z(x_b) - s(x_b, y_b) over its sequences, masked gradient). Additive across
    shards. Cost: one forward–backward over the shard."""
    g = np.zeros_like(w)
    value = objective(w, g)
    return ShardStatistics({"gradient": g}, float(value), int(len(getattr(objective.packed, "lengths", ()))))


class ShardedObjective:
    """A CRF training objective over shards: ``L(w) = Σ_shards data term + c2‖w‖² + c1‖w‖₁`` and its
    gradient (zero outside ``mask``), the callable ``(w, g) -> value`` that L-BFGS minimises.

    Parameters
    ----------
    map_statistics : callable w -> ShardStatistics
        The sum over the shards of :func:`objective_statistics` (in this process, or on dask workers).
    mask : ndarray of bool, shape (n_params,)
        The weights that are parameters (``model.free_mask()``).
    c2, c1 : float
        Penalties, added once to the total (CRFsuite scaling). L-BFGS with OWL-QN gets ``c1`` itself and
        ``c1=0`` here.
    """

    def __init__(self, map_statistics, mask, c2=0.0, c1=0.0):
        self.map_statistics = map_statistics
        self.mask = mask
        self.c2 = float(c2)
        self.c1 = float(c1)
        self.n_evals = 0

    @classmethod
    def local(cls, objective):
        """``objective`` (a penalised CLL) as one local shard: its penalty moves to the wrapper, so values
        and gradients are bitwise those of ``objective`` itself."""
        if isinstance(objective, cls):
            return objective
        c2, c1 = objective.c2, objective.c1
        objective.c2 = objective.c1 = 0.0
        return cls(lambda w: objective_statistics(w, objective), objective.mask, c2, c1)

    def __call__(self, w, g=None):
        """Return L(w); write ∇L(w) into ``g`` if given."""
        self.n_evals += 1
        total = self.map_statistics(w)
        if g is not None:
            g[...] = total.stats["gradient"]
        return penalise(w, total.value, g, self.c2, self.c1, self.mask)

    def value_and_grad(self, w):
        """Return ``(L(w), ∇L(w))`` (the interface of
        :func:`~structlearn.learning.optimizers.minimize_cg`)."""
        g = np.zeros_like(w, dtype=np.float64)
        value = self(w, g)
        return value, g


# -- shards held by worker processes (``n_jobs`` of the CRFs) ------------------------------------------
_HELD = None


def _hold(shard, n_threads):
    """Worker initialiser: keep ``shard`` (an unpenalised objective) for the whole fit."""
    global _HELD
    _HELD = shard
    if n_threads:
        import numba
        numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))


def _held_statistics(statistics, w):
    return statistics(w, _HELD)


class ProcessShards:
    """The shards of a CRF objective held by worker processes for the whole fit: the map of
    :class:`ShardedObjective` with ``n_jobs`` on one machine.

    Each shard goes to its own worker process once (inherited by ``fork`` on Linux, pickled once with
    ``spawn`` elsewhere); every evaluation then sends only ``w`` (8·n_params bytes) to each worker and gets
    back its value and gradient, which are added in shard order (so the total is the same for every run
    with the same ``n_jobs``; it differs from one process's sum by rounding only). joblib would send the
    shard with every evaluation, which is why the pool is kept here. Numba's threads are shared out
    between the workers (``NUMBA_NUM_THREADS // n_workers`` each, at least one). Use as a context manager
    (or call :meth:`close`); the workers exit with it.

    Parameters
    ----------
    shards : list of callables (w, g) -> value
        Unpenalised objectives (:meth:`structlearn.learning.objectives.ChainCLL.split`), picklable.
    statistics : callable (w, shard) -> ShardStatistics, module-level
        The per-shard function (default :func:`objective_statistics`; graph CRFs:
        :func:`structlearn.learning.graph_objective.graph_objective_statistics`).
    """

    def __init__(self, shards, statistics=objective_statistics):
        self.statistics = statistics
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        import numba
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(method)
        threads = max(1, numba.get_num_threads() // max(1, len(shards)))
        self._pools = []
        try:
            for shard in shards:
                self._pools.append(ProcessPoolExecutor(1, mp_context=ctx, initializer=_hold,
                                                       initargs=(shard, threads)))
        except BaseException:
            self.close()
            raise

    def __call__(self, w):
        """The sum over the workers' shards of ``statistics`` at ``w``."""
        futures = [pool.submit(_held_statistics, self.statistics, w) for pool in self._pools]
        return reduce_statistics([f.result() for f in futures])

    def close(self):
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
