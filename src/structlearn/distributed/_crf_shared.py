"""What the distributed fits of the CRF estimators share (:mod:`._crf`, :mod:`._semicrf`, :mod:`._tree`,
:mod:`._higher_order`): the opening of a fit (:func:`start_fit`: the bag check, loading the partitions onto
the workers), the worker-side count of (attribute, label) frequencies and its merge over the partitions
(:func:`count_partitions`, in partition order), the client-side state-feature builder and the L-BFGS loop
over the persisted shards.

Every merge keeps first-appearance orders (dicts used as ordered sets) and adds frequencies, so counts
merged in partition order give the vocabulary, label order and feature set that ``fit`` builds from the
concatenated data (CRFsuite's ``min_freq`` rule, :func:`structlearn.crf.features.build_state_features`).
"""
import time
from functools import partial

import numpy as np

from ..learning.shards import ShardedObjective, objective_statistics
from ._common import block_map, collect, identity, placement, shard_map, tree_reduce, wait_shards

__all__ = ["check_bag", "check_lbfgs", "load", "start_fit", "count_partitions", "release", "pair_counts",
           "merge_counts", "reduce_counts", "state_features", "train_on_shards", "identity"]


def check_bag(data, estimator, elements):
    """ValueError unless ``data`` is a dask bag; ``elements`` names its elements in the message."""
    from dask.bag import Bag

    if not isinstance(data, Bag):
        raise ValueError(f"`data` must be a dask bag of {elements} to fit a {type(estimator).__name__}; "
                         f"got {type(data).__name__}")


def check_lbfgs(estimator):
    """ValueError unless the estimator trains with L-BFGS (the online trainers visit the sequences one
    after another: use ``partial_fit`` for them)."""
    algorithm = estimator.get_params(deep=False).get("algorithm", "lbfgs")
    if algorithm != "lbfgs":
        raise ValueError(f"distributed fitting of a {type(estimator).__name__} needs algorithm='lbfgs' (the "
                         f"online trainers visit the sequences one after another); got "
                         f"algorithm={algorithm!r}")


def load(client, data):
    """(futures of the bag's partitions, each computed once and kept on its worker; ``where``, the
    placement of shard i (:func:`._common.placement`))."""
    where = placement(client)
    return [client.compute(p, **where(i)) for i, p in enumerate(data.to_delayed())], where


def start_fit(client, data, estimator, elements, drop=()):
    """The opening of every distributed CRF fit: the bag checked (:func:`check_bag`, ``elements`` naming
    its elements), the estimator's parameters checked (an L-BFGS trainer, :func:`check_lbfgs`), the
    attributes ``drop`` of an earlier fit removed, then the partitions loaded onto the workers
    (:func:`load`).

    Parameters
    ----------
    client : distributed.Client
    data : dask.bag.Bag
    estimator : CRF estimator
    elements : str
        What the bag's elements are, for the message of a wrong ``data``.
    drop : tuple of str, default ()
        Attributes deleted (when present) once the checks passed.

    Returns
    -------
    t0 : float
        ``time.perf_counter()`` once the checks passed (the start of the featurisation time).
    raw : list of futures
        The partitions, each computed once and kept on its worker.
    where : callable
        The placement of shard i (:func:`._common.placement`).
    """
    check_bag(data, estimator, elements)
    estimator._check_params()
    check_lbfgs(estimator)
    t0 = time.perf_counter()
    for attr in drop:
        if hasattr(estimator, attr):
            delattr(estimator, attr)
    raw, where = load(client, data)   # loaded once, kept on the workers
    return t0, raw, where


def count_partitions(client, raw, split_every, count, *args, empty=("items", "sequence"), **merge):
    """The merged counts (:func:`reduce_counts`) of ``count(*args, partition, i)`` run on the worker of
    every partition; ValueError when they hold no item.

    Parameters
    ----------
    client : distributed.Client
    raw : list of futures
        The partitions (:func:`load`).
    split_every : int
        Fan-in of the reduction tree.
    count : callable
        Module-level worker function ``count(*args, partition, i)`` -> a dict of counts with ``"items"``.
    *args
        Its first arguments (the estimator, ...).
    empty : (str, str), default ("items", "sequence")
        What an item and an element are, for the message of an empty training set.
    **merge
        ``summed`` / ``maxed`` of :func:`merge_counts`.

    Returns
    -------
    dict
        The counts of all partitions, merged in partition order.
    """
    counts = reduce_counts(client, [client.submit(count, *args, r, i, pure=False) for i, r in enumerate(raw)],
                           split_every, **merge)
    if counts["items"] == 0:
        raise ValueError(f"the training set is empty (no {empty[0]} in the bag); give at least one non-empty "
                         f"{empty[1]}")
    return counts


def release(raw):
    """Release (not cancel) the partitions: cancelling would also cancel a later fit's futures of the same
    keys (a bag's partitions are named by their content) while it loads them."""
    for r in raw:
        r.release()


def pair_counts(packed, yy, names, labels, frequency="count"):
    """Worker side: the (attribute name, label) frequencies of one partition and the attributes seen
    with a non-zero value (both dicts in first-appearance order of the attribute ids).

    ``packed``: the partition's items (attribute ids into ``names``); ``yy`` (n_items,) int64 labels
    (positions in ``labels``, any hashable names). ``frequency``: ``"count"`` (items with a non-zero
    value) or ``"value"`` (the sum of the values, zeros included), as ``build_state_features``.
    O(nnz log nnz)."""
    K = len(labels)
    rows = np.repeat(np.arange(packed.n_items, dtype=np.int64), np.diff(packed.item_ptr))
    nz = packed.item_val != 0
    if frequency == "value":
        keys, inverse = np.unique(packed.item_attr * K + yy[rows], return_inverse=True)
        freq = np.bincount(inverse.ravel(), weights=packed.item_val, minlength=keys.size)
    else:
        keys, freq = np.unique(packed.item_attr[nz] * K + yy[rows[nz]], return_counts=True)
    pairs = {(names[k // K], labels[k % K]): float(f) for k, f in zip(keys.tolist(), freq.tolist())}
    seen = {names[a]: None for a in np.unique(packed.item_attr[nz]).tolist()}
    return pairs, seen


def merge_counts(parts, summed=("pairs",), maxed=()):
    """The counts (dicts of str -> dict or int) of consecutive partitions together: the dicts named in
    ``summed`` add their values, those in ``maxed`` keep the largest, other dicts keep the first
    appearance order of their keys (values of the first partition that has the key); numbers add; any
    other value (a str, a bool) is that of the first partition where it is not None."""
    out = {}
    for p in parts:
        for key, v in p.items():
            if key not in out:
                out[key] = dict(v) if isinstance(v, dict) else v
            elif isinstance(v, dict):
                acc = out[key]
                if key in summed:
                    for k, x in v.items():
                        acc[k] = acc.get(k, 0) + x
                elif key in maxed:
                    for k, x in v.items():
                        acc[k] = max(acc.get(k, x), x)
                else:
                    for k, x in v.items():
                        acc.setdefault(k, x)
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and out[key] is not None:
                out[key] += v
            elif out[key] is None:
                out[key] = v
    return out


def reduce_counts(client, futures, split_every, summed=("pairs",), maxed=()):
    """The merged counts (:func:`merge_counts`, in partition order) of the futures of partition counts,
    reduced in a tree of fan-in ``split_every`` on the workers; the result comes to the client."""
    total = tree_reduce(client, partial(merge_counts, summed=summed, maxed=maxed), futures, split_every)
    wait_shards(client, futures)
    return collect(client, [total], [len(futures)])[0]


def state_features(pairs, seen, index, label_index, n_labels, min_freq, all_possible_states):
    """Client side: ``(attr_ptr (A + 1,), feat_label (F,))`` int64 of the merged ``pairs`` / ``seen``
    (:func:`pair_counts`) in the layout of ``build_state_features``: ``index`` maps attribute names to
    ids (A of them), ``label_index`` label names to 0..n_labels-1; pairs below ``min_freq`` are dropped;
    with ``all_possible_states`` every attribute seen with a non-zero value gets every label.
    O(P log P) for P pairs."""
    A, K = len(index), n_labels
    if all_possible_states:
        ok = np.zeros(A, bool)
        ok[[index[n] for n in seen]] = True
        attr_ptr = np.concatenate([[0], np.cumsum(np.where(ok, K, 0))]).astype(np.int64)
        return attr_ptr, np.tile(np.arange(K, dtype=np.int64), int(ok.sum()))
    keys = np.array([index[a] * K + label_index[lab] for a, lab in pairs], np.int64)
    freq = np.array(list(pairs.values()), np.float64)
    order = np.argsort(keys, kind="stable")
    keys, freq = keys[order], freq[order]
    keys = keys[freq >= min_freq]
    attr_ptr = np.concatenate([[0], np.cumsum(np.bincount(keys // K, minlength=A))]).astype(np.int64)
    return attr_ptr, (keys % K).astype(np.int64)


def train_on_shards(estimator, client, model, shards, where, t0, split_every=8, callback=None,
                    statistics=objective_statistics, ranges=None, **train_args):
    """Run the estimator's own L-BFGS loop (``estimator._train``) on the objective whose data term is the
    sum of ``statistics(w, shard)`` over the persisted ``shards`` (futures, shard i placed by
    ``where(i)``): each evaluation sends w once and tree-reduces value and gradient; the penalty
    (``estimator.c2``; ``c1`` in OWL-QN) is added on the client. The shards are computed first, so that
    errors of the data come before training. With ``ranges`` (the shards are the data's own blocks,
    :func:`._common.fixed_blocks`), the sum runs in their fixed tree (:func:`._common.block_map`): the
    weights are bitwise those of the estimator's own ``fit``."""
    collect(client, shards)
    shard_statistics = shard_map(client, shards, where, split_every, callback) if ranges is None else \
        block_map(client, shards, ranges, callback)

    def map_statistics(w):
        return shard_statistics(statistics, w)

    objective = ShardedObjective(map_statistics, model.free_mask(), c2=estimator.c2)
    estimator._train(model, objective, t0, algorithm="lbfgs", **train_args)
    return estimator
