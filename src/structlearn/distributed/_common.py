"""The dask plumbing shared by every distributed fit: shard placement, the tree reduction of shard
statistics, the map of a shard-statistics function over persisted shards, and every wait of the client
for the workers' results (bounded by the ``timeout`` of the running fit)."""
import asyncio
import contextlib
import contextvars
import ctypes
import numbers
import os
import sys

import numpy as np

from ..learning.shards import block_cuts, combine_partials, contiguous_ranges, reduce_statistics, tree_partials

__all__ = ["identity", "placement", "tree_reduce", "shard_map", "sum_shards", "keep_heap", "check_timeout",
           "waiting_at_most", "wait_shards", "collect", "fixed_blocks", "block_map"]

#: seconds the client waits for one round of the workers' results in the running fit (None: no limit)
_TIMEOUT = contextvars.ContextVar("structlearn_distributed_timeout", default=None)

_HEAP_KEPT = False
#: glibc's mallopt parameters (malloc.h) and the values keep_heap sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 * 2**20   # glibc's largest (HEAP_MAX / 2 on 64-bit)
_TRIM_THRESHOLD = 256 * 2**20


def keep_heap():
    """Let this worker process reuse freed heap memory for the kernels' large temporary arrays.

    A dask nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-
    environ``), so that freed memory goes back to the OS. Setting it also freezes glibc's mmap threshold
    at 128 KiB, so every array above that (a shard's gradient, the kernels' per-block buffers) is a fresh
    ``mmap`` whose pages fault in again on every evaluation: measured on the CoNLL-2000 CRF, 57 000–71 000
    page faults and 0.16–0.23 s of system time per map over 8 shards, the worker's evaluation 1.2–1.5× the
    same evaluation in a plain process. This raises the mmap threshold to 32 MiB and the trim threshold to
    256 MiB in this process (``mallopt``), once, when that variable is set and the C library is glibc;
    elsewhere (or when the user set ``MALLOC_MMAP_THRESHOLD_``) it does nothing. Returns whether it set
    them."""
    global _HEAP_KEPT
    if _HEAP_KEPT or not sys.platform.startswith("linux") or "MALLOC_TRIM_THRESHOLD_" not in os.environ \
            or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1 and \
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1
    except (OSError, AttributeError):
        ok = False
    _HEAP_KEPT = True
    return ok


def check_timeout(timeout):
    """``timeout`` as a float of seconds > 0 or None (ValueError naming it otherwise)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0 \
            or timeout != timeout:
        raise ValueError(f"`timeout` must be None (wait forever) or a number of seconds > 0; got {timeout!r}")
    return float(timeout)


@contextlib.contextmanager
def waiting_at_most(timeout):
    """Within the block, :func:`wait_shards` and :func:`collect` (every wait of a distributed fit) wait at
    most ``timeout`` seconds (None: without limit)."""
    token = _TIMEOUT.set(timeout)
    try:
        yield
    finally:
        _TIMEOUT.reset(token)


def wait_shards(client, futures, counts=None):
    """Block until every future of ``futures`` (a list) is finished, at most the running fit's timeout.

    ``counts[i]``: how many shards future i stands for (default 1 each), for the message.

    Raises
    ------
    TimeoutError
        After the timeout, naming how many shards were still outstanding and how many workers the
        scheduler has (every worker lost: dask keeps the tasks waiting for one, without an error).
    """
    timeout = _TIMEOUT.get()
    if timeout is None or not futures:
        return
    from distributed import wait
    try:
        wait(futures, timeout=timeout)
    except (TimeoutError, asyncio.TimeoutError):
        counts = [1] * len(futures) if counts is None else counts
        out = sum(c for f, c in zip(futures, counts) if not f.done())
        workers = len(client.scheduler_info().get("workers", {}))
        raise TimeoutError(f"structlearn.distributed.fit: {out} of {sum(counts)} shards still outstanding after "
                           f"waiting timeout={timeout:g} s; the scheduler has {workers} worker(s): workers may "
                           f"be lost (start or restart them), or the shards need longer (pass a larger "
                           f"`timeout`, or None to wait forever)") from None


def collect(client, futures, counts=None):
    """``client.gather(futures)`` (a list) after :func:`wait_shards`: at most the running fit's timeout."""
    wait_shards(client, futures, counts)
    return client.gather(futures)


def identity(x):
    """A task that holds a value (parameters sent as a task keep their lineage: a lost copy is recomputed)."""
    return x


def placement(client):
    """``where(i)``: the keyword arguments that put shard i on worker i mod W, a loose restriction (another
    worker takes it when that one is gone), so shards and their tasks are balanced over the workers."""
    workers = sorted(client.scheduler_info()["workers"])

    def where(i):
        return dict(workers=[workers[i % len(workers)]], allow_other_workers=True) if workers else {}

    return where


def tree_reduce(client, function, parts, split_every):
    """The future of ``function`` applied in a tree of fan-in ``split_every`` over the futures ``parts``
    (``function`` maps a list to one value of the same kind, e.g. ``reduce_statistics``)."""
    while len(parts) > 1:
        parts = [client.submit(function, parts[i:i + split_every], pure=False)
                 for i in range(0, len(parts), split_every)]
    return parts[0]


def sum_shards(function, params, *shards):
    """Worker side: ``function(params, shard)`` of several shards added where they live (one result per
    worker travels instead of one per shard); the first call in a worker process runs :func:`keep_heap`."""
    keep_heap()
    return reduce_statistics([function(params, s) for s in shards])


def shard_map(client, shards, where, split_every, callback=None):
    """``map_statistics(function, params)``: ``function(params, shard)`` on every persisted shard, run where
    the shard lives and summed there (one task per worker over the shards placed on it: a worker sends one
    statistics object per map, not one per shard), then tree-reduced over the workers; the total (a
    ShardStatistics) comes back to the client. The parameters travel once, as a task (not a scatter: the
    scheduler keeps its lineage, so a worker lost while holding them does not lose them; workers fetch them
    from each other, one copy per worker). A worker lost mid-fit: dask recomputes its shards on another
    worker and reruns the group's task there. ``callback(k)`` is called on the client before the k-th map
    (k = 0, 1, …)."""
    calls = [0]
    groups = {}
    for i, s in enumerate(shards):
        key = tuple(where(i).get("workers", ()))
        groups.setdefault(key, (i, []))[1].append(s)

    def map_statistics(function, params):
        if callback is not None:
            callback(calls[0])
        calls[0] += 1
        p = client.submit(identity, params, pure=False)
        stats = [client.submit(sum_shards, function, p, *members, pure=False, **where(first))
                 for first, members in groups.values()]
        total = tree_reduce(client, reduce_statistics, stats, split_every)
        wait_shards(client, stats, [len(members) for _, members in groups.values()])
        return collect(client, [total], [len(shards)])[0]

    return map_statistics


# -- the data's own blocks: the same sums as a fit in one process ------------------------------------------
def _assemble(take, concat, spec, *parts):
    """Worker side: one block from the sequences a..b-1 of ``parts[k]`` for ``spec[k] = (i, a, b)`` (i:
    the partition's index), in order."""
    return concat([take(part, a, b, i) for part, (i, a, b) in zip(parts, spec)])


def fixed_blocks(client, parts, lengths, take, concat, rows=None, max_blocks=None):
    """The blocks of :func:`structlearn.learning.shards.block_cuts` of the whole data set, assembled on
    the workers from the partitions: ``(futures of the blocks, ranges)``.

    ``parts`` are futures of the partitions in order, ``lengths[i]`` the sequence lengths of partition i;
    ``take(part, a, b, i)`` (module-level) returns the sequences a..b-1 of partition i and ``concat`` joins
    such pieces into one block. The blocks depend on the sequences only (never on the partitions or the
    workers), so the statistics summed over them in the fixed tree (:func:`block_map`) are bitwise those of
    the estimator's own ``fit`` on the concatenated data, however the data are partitioned and whichever
    worker computes which block. ``ranges``: contiguous ranges of blocks (a, b), one per worker (about
    equal rows); the blocks of range r live on worker r."""
    counts = [len(x) for x in lengths]
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(np.concatenate([np.asarray(x, np.int64) for x in lengths]))])
    cuts = block_cuts(offsets, rows, max_blocks)
    workers = sorted(client.scheduler_info()["workers"])
    ranges = contiguous_ranges(np.diff(offsets[cuts]), max(1, len(workers)))
    blocks = []
    for r, (ra, rb) in enumerate(ranges):
        where = dict(workers=[workers[r % len(workers)]], allow_other_workers=True) if workers else {}
        for j in range(ra, rb):
            a, b = int(cuts[j]), int(cuts[j + 1])
            spec, futs = [], []
            for i in range(len(parts)):
                lo, hi = max(a, starts[i]), min(b, starts[i + 1])
                if hi > lo:
                    spec.append((i, int(lo - starts[i]), int(hi - starts[i])))
                    futs.append(parts[i])
            blocks.append(client.submit(_assemble, take, concat, spec, *futs, pure=False, **where))
    return blocks, ranges


def _range_partials(function, params, first, n, *blocks):
    """Worker side: the fixed tree's partial sums of ``function(params, block)`` over blocks
    first..first+len(blocks)-1 of n (:func:`structlearn.learning.shards.tree_partials`)."""
    keep_heap()
    return tree_partials(lambda i: function(params, blocks[i - first]), first, first + len(blocks), n)


def block_map(client, blocks, ranges, callback=None):
    """``map_statistics(function, params)``: the sum over ``blocks`` (of :func:`fixed_blocks`) of
    ``function(params, block)`` in the fixed tree: one task per range of blocks, run where those blocks
    live, returns its partial sums; the client adds them where the tree adds them (bitwise the sum of one
    process over the same blocks). Parameters travel once, as a task; a lost worker's blocks are
    recomputed elsewhere by dask. ``callback(k)`` is called on the client before the k-th map."""
    calls = [0]
    n = len(blocks)
    workers = sorted(client.scheduler_info()["workers"])

    def map_statistics(function, params):
        if callback is not None:
            callback(calls[0])
        calls[0] += 1
        p = client.submit(identity, params, pure=False)
        futures = []
        for r, (a, b) in enumerate(ranges):
            where = dict(workers=[workers[r % len(workers)]], allow_other_workers=True) if workers else {}
            futures.append(client.submit(_range_partials, function, p, a, n, *blocks[a:b], pure=False,
                                         **where))
        partials = {}
        for part in collect(client, futures):
            partials.update(part)
        return combine_partials(partials, n)

    return map_statistics
