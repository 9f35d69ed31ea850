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
data term of their objective on a block of sequences (a CLL of :mod:`structlearn.crf.objectives`
without penalty), :func:`objective_statistics` its value and gradient at w, and the penalty
(c2‖w‖², the mask of free weights) is added once to the total — ``fit`` runs it over one local shard
(:meth:`ShardedObjective.local`), :mod:`structlearn.distributed` over persisted dask shards. The
hierarchical HMM adopts it as the EM estimators do (its shards return the expected counts of θ); the
graph CRF as the CRFs do, with :func:`structlearn.graph.objective.graph_objective_statistics`
(a :class:`~structlearn.graph.objective.GraphCLL` without penalty per shard of graphs).
"""
from typing import NamedTuple

import numpy as np

from .optimizers import penalise
from ..utils.docstrings import fill_docstring

__all__ = ["Shard", "ShardStatistics", "make_shard", "split_shards", "block_cuts", "data_blocks", "slice_shard",
           "concat_shards", "add_statistics", "BLOCKS_DOC", "document_blocks",
           "reduce_statistics", "tree_statistics", "tree_partials", "combine_partials", "contiguous_ranges",
           "map_shards", "statistics_nbytes", "objective_statistics", "ShardedObjective", "ProcessShards"]


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


#: rows of a block of training data (about) and the most blocks: :func:`block_cuts`
BLOCK_ROWS, MAX_BLOCKS = 16384, 64

#: What the docstring of every estimator with ``n_jobs`` says of its blocks (:func:`document_blocks`).
BLOCKS_DOC = """The sequences are cut into blocks fixed by the data (about 16 384 rows each, at most 64,
:func:`structlearn.learning.shards.block_cuts`) whose statistics are added in one fixed tree:
the fit is bitwise the same for every ``n_jobs``, thread count and
:func:`structlearn.distributed.fit`."""


def document_blocks(cls):
    """Class decorator: write :data:`BLOCKS_DOC` in place of the line ``{blocks}`` of the docstring.

    Parameters
    ----------
    cls : type
        A class whose docstring has a line holding only ``{blocks}`` (indented as the text it stands for).

    Returns
    -------
    type
        ``cls``, its ``__doc__`` completed.
    """
    return fill_docstring(cls, blocks=BLOCKS_DOC)


def block_cuts(offsets, rows=None, max_blocks=None):
    """(C + 1,) int64 sequence indices cutting a batch into C blocks of whole sequences with about
    ``rows`` rows each (C = clip(N // rows, 1, min(B, max_blocks)); cuts at the first sequence that
    starts at or after each multiple of N / C).

    The blocks depend on the sequence lengths only — never on ``n_jobs``, threads or workers: every fit
    computes the statistics of these blocks and adds them in one fixed tree (:func:`tree_statistics`),
    whichever process computes which block, so the totals (and the fitted model) are bitwise the same for
    any ``n_jobs``, thread count or dask cluster."""
    rows = BLOCK_ROWS if rows is None else rows
    max_blocks = MAX_BLOCKS if max_blocks is None else max_blocks
    offsets = np.asarray(offsets, dtype=np.int64)
    B = offsets.shape[0] - 1
    if B <= 0:
        return np.zeros(1, dtype=np.int64)
    N = int(offsets[-1])
    n = max(1, min(B, N // int(rows), int(max_blocks)))
    cuts = [int(np.searchsorted(offsets, -(-N * i // n), side="left")) for i in range(1, n)]
    return np.unique(np.array([0] + cuts + [B], dtype=np.int64))


def slice_shard(shard, a, b):
    """Sequences a..b-1 of a shard (views, no copy)."""
    offsets = shard.offsets
    r0, r1 = offsets[a], offsets[b]
    return Shard(shard.X[r0:r1], shard.lengths[a:b], offsets[a:b + 1] - r0,
                 None if shard.allowed is None else shard.allowed[r0:r1])


def concat_shards(shards):
    """The sequences of several shards, in order, as one shard (one piece: itself)."""
    shards = list(shards)
    if len(shards) == 1:
        return shards[0]
    allowed = None
    if any(s.allowed is not None for s in shards):
        width = next(s.allowed.shape[1:] for s in shards if s.allowed is not None)
        allowed = np.concatenate([s.allowed if s.allowed is not None else np.ones((s.n_rows,) + width, bool)
                                  for s in shards])
    return make_shard(np.concatenate([s.X for s in shards]), np.concatenate([s.lengths for s in shards]),
                      allowed)


def data_blocks(shard, rows=None, max_blocks=None):
    """The blocks of :func:`block_cuts` of a shard (views, no copy), in order."""
    cuts = block_cuts(shard.offsets, rows, max_blocks)
    return [slice_shard(shard, a, b) for a, b in zip(cuts[:-1], cuts[1:])]


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


# -- the fixed reduction tree over blocks --------------------------------------------------------------
# The total of n blocks is T(0, n), T(lo, hi) = T(lo, mid) + T(mid, hi) with mid = (lo + hi) // 2 and
# T(i, i + 1) the statistics of block i. A process that holds a contiguous range of blocks computes the
# largest nodes of that tree inside its range (at most 2·log2(n) of them); adding those where the tree adds
# them gives bitwise the same total as one process, for any contiguous ranges.
def tree_statistics(block_statistics, lo, hi):
    """T(lo, hi) of the fixed tree: ``block_statistics(i)`` of blocks lo..hi-1 added pairwise
    (:func:`add_statistics`, posteriors kept in block order). Memory: O(log(hi - lo)) partial sums."""
    if hi - lo == 1:
        return block_statistics(lo)
    mid = (lo + hi) // 2
    return add_statistics(tree_statistics(block_statistics, lo, mid), tree_statistics(block_statistics, mid, hi))


def tree_partials(block_statistics, a, b, n, lo=0, hi=None):
    """{(lo, hi): T(lo, hi)} for the largest nodes of the fixed tree over n blocks that lie in the
    contiguous range [a, b) (``block_statistics(i)`` for i in [a, b))."""
    hi = n if hi is None else hi
    if b <= lo or hi <= a:
        return {}
    if a <= lo and hi <= b:
        return {(lo, hi): tree_statistics(block_statistics, lo, hi)}
    mid = (lo + hi) // 2
    out = tree_partials(block_statistics, a, b, n, lo, mid)
    out.update(tree_partials(block_statistics, a, b, n, mid, hi))
    return out


def combine_partials(partials, n, lo=0, hi=None):
    """T(0, n) from the partial sums of :func:`tree_partials` of contiguous ranges that cover [0, n)."""
    hi = n if hi is None else hi
    if (lo, hi) in partials:
        return partials[(lo, hi)]
    if hi - lo <= 1:
        raise ValueError(f"the partial sums do not cover block {lo} of {n}")
    mid = (lo + hi) // 2
    return add_statistics(combine_partials(partials, n, lo, mid), combine_partials(partials, n, mid, hi))


def contiguous_ranges(weights, n_parts):
    """At most ``n_parts`` contiguous ranges (a, b) of the items with about equal total ``weights``
    (which process computes which blocks: it changes no result)."""
    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[0]
    k = max(1, min(int(n_parts), n))
    cum = np.concatenate([[0.0], np.cumsum(w)])
    cuts = sorted(set([0, n] + [int(np.searchsorted(cum, cum[-1] * i / k, side="left")) for i in range(1, k)]))
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _range_partials(statistics, params, blocks, a, n):
    return tree_partials(lambda i: statistics(params, blocks[i - a]), a, a + len(blocks), n)


def map_shards(statistics, params, shards, n_jobs=None):
    """The sum of ``statistics(params, s)`` over the blocks ``shards`` in the fixed tree of
    :func:`tree_statistics`, in this process or, with ``n_jobs`` (joblib, processes; -1 all cores) and
    several blocks, in worker processes that each compute the tree's nodes of a contiguous range of
    blocks. The result is bitwise the same for every ``n_jobs`` (give it the blocks of
    :func:`data_blocks`, fixed by the data, to make the fit independent of ``n_jobs``).

    Raises whatever ``statistics`` raises (e.g. ``ValueError`` for a sequence with zero likelihood).
    """
    shards = list(shards)
    if not shards:
        raise ValueError("`shards` must hold at least one Shard; got none")
    n = len(shards)
    from joblib import effective_n_jobs
    if n_jobs is None or n == 1 or effective_n_jobs(n_jobs) == 1:
        return tree_statistics(lambda i: statistics(params, shards[i]), 0, n)
    from joblib import Parallel, delayed
    ranges = contiguous_ranges([s.n_rows for s in shards], effective_n_jobs(n_jobs))
    partials = {}
    for part in Parallel(n_jobs=n_jobs)(delayed(_range_partials)(statistics, params, shards[a:b], a, n)
                                        for a, b in ranges):
        partials.update(part)
    return combine_partials(partials, n)


def statistics_nbytes(stats):
    """Bytes of the float64 arrays of a (nested) statistics dict: what one shard sends per iteration."""
    if isinstance(stats, ShardStatistics):
        stats = stats.stats
    if isinstance(stats, dict):
        return int(sum(statistics_nbytes(v) for v in stats.values()))
    return int(np.asarray(stats).nbytes)


def objective_statistics(w, objective):
    """Statistics of one CRF shard at weights ``w`` (float64, (n_params,)): ``{"gradient": ∇}`` and the
    value of ``objective``, the shard's data term (a CLL of :mod:`structlearn.crf.objectives` built
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
        """``objective`` (a penalised CLL) in this process: its penalty moves to the wrapper; its data
        term is the sum of its :meth:`~structlearn.crf.objectives._CLL.blocks` in the fixed tree
        (the same sum as :class:`ProcessShards` over those blocks, bitwise), or, with one block, the
        objective itself (values and gradients bitwise those of ``objective``)."""
        if isinstance(objective, cls):
            return objective
        c2, c1 = objective.c2, objective.c1
        objective.c2 = objective.c1 = 0.0
        blocks = objective.blocks() if hasattr(objective, "blocks") else [objective]
        if len(blocks) == 1:
            return cls(lambda w: objective_statistics(w, objective), objective.mask, c2, c1)
        return cls(lambda w: tree_statistics(lambda i: objective_statistics(w, blocks[i]), 0, len(blocks)),
                   objective.mask, c2, c1)

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


def _hold(blocks, first, n, n_threads):
    """Worker initialiser: keep ``blocks`` (unpenalised objectives of blocks first.. of n) for the whole
    fit."""
    global _HELD
    _HELD = (blocks, first, n)
    if n_threads:
        import numba
        numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))


def _held_statistics(statistics, w):
    blocks, first, n = _HELD
    return tree_partials(lambda i: statistics(w, blocks[i - first]), first, first + len(blocks), n)


class ProcessShards:
    """The blocks of a CRF objective held by worker processes for the whole fit: the map of
    :class:`ShardedObjective` with ``n_jobs`` on one machine.

    Each worker process gets a contiguous range of the blocks once (inherited by ``fork`` on Linux,
    pickled once with ``spawn`` elsewhere); every evaluation then sends only ``w`` (8·n_params bytes) to
    each worker and gets back the partial sums of the fixed tree over the blocks
    (:func:`tree_partials`), which are added where the tree adds them: the total is bitwise that of one
    process over the same blocks (:meth:`ShardedObjective.local`), whatever the number of workers.
    joblib would send the blocks with every evaluation, which is why the pool is kept here. Numba's
    threads are shared out between the workers (``NUMBA_NUM_THREADS // n_workers`` each, at least one;
    the kernels' own blocks do not depend on it). Use as a context manager (or call :meth:`close`); the
    workers exit with it.

    Parameters
    ----------
    shards : list of callables (w, g) -> value
        Unpenalised objectives of contiguous blocks in order (:meth:`structlearn.crf.objectives.
        _CLL.blocks`), picklable.
    statistics : callable (w, shard) -> ShardStatistics, module-level
        The per-shard function (default :func:`objective_statistics`; graph CRFs:
        :func:`structlearn.graph.objective.graph_objective_statistics`).
    n_workers : int, optional
        Worker processes (default one per shard); each holds a contiguous range of shards with about
        equal numbers of sequences.
    """

    def __init__(self, shards, statistics=objective_statistics, n_workers=None):
        self.statistics = statistics
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        import numba
        shards = list(shards)
        self._n = len(shards)
        n_workers = self._n if n_workers is None else max(1, min(int(n_workers), self._n))
        sizes = [len(getattr(getattr(s, "packed", None), "lengths", ())) or 1 for s in shards]
        ranges = contiguous_ranges(sizes, n_workers)
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(method)
        threads = max(1, numba.get_num_threads() // max(1, len(ranges)))
        self._pools = []
        try:
            for a, b in ranges:
                self._pools.append(ProcessPoolExecutor(1, mp_context=ctx, initializer=_hold,
                                                       initargs=(shards[a:b], a, self._n, threads)))
        except BaseException:
            self.close()
            raise

    def __call__(self, w):
        """The sum over the workers' blocks of ``statistics`` at ``w``, in the fixed tree."""
        futures = [pool.submit(_held_statistics, self.statistics, w) for pool in self._pools]
        partials = {}
        for f in futures:
            partials.update(f.result())
        return combine_partials(partials, self._n)

    def close(self):
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
