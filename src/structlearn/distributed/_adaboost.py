"""``structlearn.distributed.fit`` of an :class:`~structlearn.AdaBoostMRF`: boosting over persisted dask shards
of graphs.

Two passes over the data, on the workers, as for a GraphCRF (:mod:`._graph`, whose partition reader and
summary this reuses):

1. every partition of ``(graph, labels)`` pairs is checked and summarised where it lives (its number of
   graphs, feature counts, largest label); the summaries are merged on the client in partition order,
   giving the label count K of ``fit`` on the concatenated data and every graph's place among all B;
2. every partition becomes a :class:`~structlearn.graph._adaboost_shards.BoostShard` (per candidate
   tree the unpenalised exact CLL of its CRF on the partition's graphs, trees drawn as ``fit`` draws
   them: they depend on the graph and the estimator's seed alone), persisted on its worker.

The boosting loop (or the parallel variant's CG) runs on the client in the estimator's own
``AdaBoostMRF._fit_shards``; each of its evaluations — a weak learner's value and gradient, the per-graph
tree likelihoods, the parallel bound — sends its parameters as one task and tree-reduces the shards'
statistics (:func:`~._common.shard_map`).
"""
import numpy as np

from ..graph.adaboost_mrf import AdaBoostMRF
from ..engine.structures.graphs import check_graph_labels, check_graphs
from ._common import collect, placement, shard_map
from ._graph import _count, _split, label_count

__all__ = ["fit_adaboost_mrf"]


def _shard(estimator, K, trees, start, n_total, index, n_shards, part):
    """Worker side: the BoostShard of one partition (graphs ``start``.. of ``n_total``)."""
    X, y, _ = _split(part)
    batch = check_graphs(X)
    yy = check_graph_labels(y, batch, K)
    return estimator._boost_shard(X, batch, yy, K, trees, start, n_total, index, n_shards)


def fit_adaboost_mrf(estimator, data, client, *, split_every=8, callback=None):
    """Fit an AdaBoostMRF on a dask bag of ``(graph, labels)`` pairs (one per graph, as ``fit`` takes them:
    ``graph = (node_features (n, D), edges (m, 2)[, edge_features (m, F)])``, labels (n,) int, -1 hidden);
    see :func:`structlearn.distributed.fit`. The result equals ``estimator.fit`` on the concatenated
    graphs up to rounding (the sums over graphs are added in another order).

    Per evaluation the client sends the weights (D·K + F·K² float64; a weak learner's also the data weights,
    B float64) and receives one summed value and gradient, the B per-graph log-likelihoods, or, for
    ``parallel=True``, S·(D·K + F·K² + 1) float64 (S partitions: each partition's log-sum and gradient in its
    own slot, merged in log space on the client).

    Raises
    ------
    ValueError
        ``data`` not a dask bag; elements that are not (graph, labels) pairs (sample weights: ``fit`` takes
        none); graphs with higher-order factors; partitions with different (D, F); no observed label
        without ``n_labels``; and what ``fit`` raises on the data (raised on a worker, re-raised here).
    """
    from dask.bag import Bag

    if not isinstance(data, Bag):
        raise ValueError(f"`data` must be a dask bag of (graph, labels) pairs, one per graph, to fit an "
                         f"AdaBoostMRF; got {type(data).__name__}")
    if not isinstance(estimator, AdaBoostMRF):
        raise ValueError(f"`estimator` must be an AdaBoostMRF; got {type(estimator).__name__}")
    trees, t0, rs = estimator._begin_fit()   # the seed of the generated trees travels with the estimator
    parts = data.to_delayed()
    where = placement(client)
    raw = [client.compute(p, **where(i)) for i, p in enumerate(parts)]   # loaded once, kept on the workers
    try:
        counts = collect(client, [client.submit(_count, r, pure=False) for r in raw])
        if any(c["weighted"] for c in counts):
            raise ValueError("AdaBoostMRF.fit takes no sample weights: give the bag (graph, labels) pairs, "
                             "not (graph, labels, sample_weight) triples")
        if any(c["arities"] for c in counts):
            raise ValueError("AdaBoostMRF takes pairwise graphs (node_features, edges[, edge_features]); the bag "
                             "holds graphs with higher-order factors")
        shapes = {(c["D"], c["F"]) for c in counts}
        if len(shapes) != 1:
            raise ValueError(f"the graphs of the bag must have the same numbers of node and edge features "
                             f"(D, F); the partitions have {sorted(shapes)}")
        D, F = shapes.pop()
        K = label_count(estimator, counts)
        sizes = [c["graphs"] for c in counts]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        B, S = int(starts[-1]), len(raw)
        shards = [client.submit(_shard, estimator, K, trees, int(starts[i]), B, i, S, r, pure=False, **where(i))
                  for i, r in enumerate(raw)]
        run = shard_map(client, shards, where, split_every, callback)
        return estimator._fit_shards(run, B, D, F, K, rs, t0)
    finally:
        for r in raw:   # released, not cancelled (see _crf.py: a later fit may hold futures of the same keys)
            r.release()
