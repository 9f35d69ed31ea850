"""``structlearn.distributed.fit`` of a :class:`~structlearn.GraphCRF`: L-BFGS (or CG) over persisted dask
shards of graphs.

Two passes over the data, on the workers:

1. every partition is checked and summarised where it lives (:func:`_count`): its number of graphs, node
   and edge feature counts, factor feature count and arities (graphs with higher-order factors), the
   largest label and whether it carries sample weights; the summaries are
   merged on the client in partition order, so the label count K (``n_labels`` or 1 + the largest label)
   is the one ``fit`` infers from the concatenated data (GraphCRF builds no other vocabulary);
2. every partition becomes the data term of the objective on that shard (a
   :class:`~structlearn.graph.objective.GraphCLL` with ``c2=0``, :func:`_objective`), persisted
   on its worker; each evaluation sends w (a task) and tree-reduces the shards' value and gradient
   (:func:`~structlearn.graph.objective.graph_objective_statistics`); the optimiser, its
   stopping rules and the penalty run on the client in the estimator's own training loop
   (``GraphCRF._fit_sharded``).
"""
import time

import numpy as np

from ..graph.objective import GraphCLL, graph_objective_statistics
from ..graph.graph_crf import GraphCRF
from ..engine.structures.graphs import check_graph_labels, check_graphs
from ._common import collect, placement, shard_map

__all__ = ["fit_graph_crf"]


def _split(part):
    """(graphs, labels, sample weights or None) of a partition of (graph, labels[, weight]) elements."""
    X, y, sw = [], [], []
    for i, el in enumerate(part):
        if not (isinstance(el, (tuple, list)) and len(el) in (2, 3) and isinstance(el[0], (tuple, list, dict))
                and (len(el) == 2 or np.ndim(el[2]) == 0)):
            raise ValueError(f"every element of the bag must be a pair (graph, labels) or a triple (graph, "
                             f"labels, sample_weight) of one graph; element {i} of a partition is a "
                             f"{type(el).__name__}" + (f" of length {len(el)}" if hasattr(el, "__len__") else ""))
        X.append(el[0])
        y.append(el[1])
        sw.append(el[2] if len(el) == 3 else None)
    if not X:
        raise ValueError("a partition of the bag holds no graph; repartition the bag without empty partitions")
    given = [w is not None for w in sw]
    if any(given) and not all(given):
        raise ValueError("give a sample weight with every graph of the bag (triples) or with none (pairs)")
    return X, y, (np.array(sw, dtype=np.float64) if all(given) else None)


def _count(part):
    """Worker side: the summary of one partition (graphs validated as ``fit`` does)."""
    X, y, sw = _split(part)
    batch = check_graphs(X, allow_factors=True)
    if len(y) != batch.n_graphs:
        raise ValueError(f"`y` has {len(y)} label arrays for {batch.n_graphs} graphs")
    return {"graphs": int(batch.n_graphs), "D": int(batch.n_node_features), "F": int(batch.n_edge_features),
            "G": int(batch.n_factor_features) if batch.has_factors else 0, "arities": batch.factor_arities,
            "top": GraphCRF._largest_label(y), "weighted": sw is not None}


def _objective(estimator, K, factors, part):
    """Worker side: the data term (GraphCLL without penalty) of one partition; ``factors`` = (G, factor
    arities) of the whole bag."""
    X, y, sw = _split(part)
    options = estimator._check_params()
    batch = check_graphs(X, allow_factors=True)
    yy = check_graph_labels(y, batch, K)
    return GraphCLL(batch, yy, K, method=estimator.inference, options=options, c2=0.0, sample_weight=sw,
                    n_factor_features=factors[0], factor_arities=factors[1])


def label_count(estimator, counts):
    """K of a graph CRF fitted on the bag: ``n_labels``, else 1 + the largest observed label over the
    partitions' counts (ValueError when no label is observed)."""
    if estimator.n_labels is not None:
        return int(estimator.n_labels)
    top = max(c["top"] for c in counts)
    if top < 0:
        raise ValueError("`y` holds no observed label (all -1); pass `n_labels`")
    return top + 1


def fit_graph_crf(estimator, data, client, *, split_every=8, callback=None):
    """Fit a GraphCRF on a dask bag of (graph, labels[, sample_weight]) elements; see
    :func:`structlearn.distributed.fit`."""
    from dask.bag import Bag

    if not isinstance(data, Bag):
        raise ValueError(f"`data` must be a dask bag of (graph, labels) pairs or (graph, labels, "
                         f"sample_weight) triples, one per graph, to fit a {type(estimator).__name__}; got "
                         f"{type(data).__name__}")
    estimator._check_params()
    t0 = time.perf_counter()
    parts = data.to_delayed()

    where = placement(client)
    raw = [client.compute(p, **where(i)) for i, p in enumerate(parts)]   # loaded once, kept on the workers
    try:
        counts = collect(client, [client.submit(_count, r, pure=False) for r in raw])
        shapes = {(c["D"], c["F"]) for c in counts}
        if len(shapes) != 1:
            raise ValueError(f"the graphs of the bag must have the same numbers of node and edge features "
                             f"(D, F); the partitions have {sorted(shapes)}")
        if len({c["weighted"] for c in counts}) != 1:
            raise ValueError("give a sample weight with every graph of the bag (triples) or with none (pairs)")
        D, F = shapes.pop()
        gs = {c["G"] for c in counts if c["arities"]}
        if len(gs) > 1:
            raise ValueError(f"the graphs of the bag must have the same number of factor features G; the "
                             f"partitions have {sorted(gs)}")
        factors = (gs.pop() if gs else 0, tuple(sorted({r for c in counts for r in c["arities"]})))
        K = label_count(estimator, counts)
        shards = [client.submit(_objective, estimator, K, factors, r, pure=False, **where(i))
                  for i, r in enumerate(raw)]
        collect(client, shards)   # errors of the data (labels outside 0..K-1, ...) before training
        shard_statistics = shard_map(client, shards, where, split_every, callback)

        def map_statistics(w):
            return shard_statistics(graph_objective_statistics, w)

        return estimator._fit_sharded(map_statistics, D, F, K, t0, factors)
    finally:
        for r in raw:   # released, not cancelled (see _crf.py: a later fit may hold futures of the same keys)
            r.release()
