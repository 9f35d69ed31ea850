"""The dask plumbing shared by every distributed fit: shard placement, the tree reduction of shard
statistics, and the map of a shard-statistics function over persisted shards."""
from ..learning.shards import reduce_statistics

__all__ = ["identity", "placement", "tree_reduce", "shard_map", "sum_shards"]


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
    worker travels instead of one per shard)."""
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
        return tree_reduce(client, reduce_statistics, stats, split_every).result()

    return map_statistics
