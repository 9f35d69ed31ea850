"""``structlearn.distributed.fit`` of a :class:`~structlearn.TreeCRF` (``algorithm="lbfgs"``): L-BFGS over
persisted dask shards of trees.

Two passes over the data, on the workers (the partitions are loaded once and kept there):

1. every partition is checked and counted where it lives (:func:`_count`): node and edge attribute names
   and labels in order of first appearance, the (node attribute, label) and (edge attribute, (child
   label, parent label)) frequencies, the (child label, parent label) pairs of its edges; the counts are
   merged by a tree reduction in partition order, so the vocabularies, the label order and the feature
   sets (``min_freq``; CRFsuite's value-sum rule without ``root_features``) are those ``fit`` builds;
2. every partition is encoded against the merged vocabularies and becomes the data term of the
   objective on that shard (a :class:`~structlearn.learning.objectives.TreeCLL` with ``c2=0``,
   :func:`_objective`); each L-BFGS evaluation sends w and tree-reduces the shards' value and gradient;
   the optimiser runs on the client in the estimator's own training loop (``_train``).

The online trainers (``l2sgd``, ``ap``, ``pa``, ``arow``) stream with ``partial_fit`` instead.
"""
import time

import numpy as np

from ..learning.objectives import TreeCLL
from ..models.features import AttributeVocabulary
from ._elements import split_elements
from ._crf_shared import (check_bag, check_lbfgs, identity, load, pair_counts, reduce_counts, release,
                          state_features, train_on_shards)

__all__ = ["fit_tree_crf"]

_ELEMENTS = "(items, labels, parents) or (items, labels, parents, edge_attributes) tuples, one per tree,"


def _split(part, partition=0):
    """(X, y, parents, edge attributes or None) of a partition of (items, labels, parents[,
    edge_attributes]) elements."""
    return split_elements(part, partition, ("items", "labels", "parents", "edge_attributes"), optional=1,
                          unit="tree", given_as={"edge_attributes": "edge attributes"})


def _fresh(estimator):
    return estimator.__class__(**estimator.get_params())


def _count(estimator, part, partition=0):
    """Worker side: the counts of one partition (see the module docstring, pass 1)."""
    X, y, P, E = _split(part, partition)
    est = _fresh(estimator)
    vocab, evocab = AttributeVocabulary(), AttributeVocabulary()
    nodes, local, edges, _, _ = est._encode(X, P, E, True, vocab, evocab)
    yy = est._fit_labels(y, nodes)
    labels = est.classes_
    K = len(labels)
    pairs, seen = pair_counts(nodes, yy, vocab.names, labels,
                              "count" if estimator.root_features else "value")
    seq = np.repeat(np.arange(len(nodes.lengths)), nodes.lengths)
    gpar = np.where(local >= 0, local + nodes.offsets[:-1][seq], -1)
    ch = np.flatnonzero(local >= 0)
    out = {"names": dict.fromkeys(vocab.names), "labels": dict.fromkeys(labels), "pairs": pairs,
           "seen": seen, "links": {(labels[a], labels[b]): None for a, b in zip(yy[ch].tolist(),
                                                                             yy[gpar[ch]].tolist())},
           "enames": dict.fromkeys(evocab.names), "epairs": {}, "eseen": {},
           "with_edges": int(E is not None), "items": int(nodes.n_items), "sequences": len(X)}
    if edges is not None:
        code = np.where(local >= 0, yy * K + yy[np.maximum(gpar, 0)], 0)
        out["epairs"], out["eseen"] = pair_counts(edges, code, evocab.names,
                                                  [(a, b) for a in labels for b in labels], "count")
    return out


def _objective(estimator, classes, names, enames, model, part, partition=0):
    """Worker side: the data term (TreeCLL without penalty) of one partition under the merged
    vocabularies and label order."""
    X, y, P, E = _split(part, partition)
    est = _fresh(estimator)
    est.classes_ = list(classes)
    est._label_index = {lab: k for k, lab in enumerate(classes)}
    nodes, local, _, layout, batch = est._encode(X, P, E, False, AttributeVocabulary(names),
                                                 AttributeVocabulary(enames))
    yy = est._encode_labels(y, nodes)
    try:
        est._check_gold_allowed(yy, nodes, local, *est._forbidden(len(classes)))
    except ValueError as e:
        raise ValueError(f"partition {partition}: {e}") from None
    return TreeCLL(model, batch, layout.rows_to_internal(yy), c2=0.0)


def fit_tree_crf(estimator, data, client, *, split_every=8, callback=None):
    """Fit a :class:`~structlearn.TreeCRF` (``algorithm="lbfgs"``) on a dask bag of trees; see
    :func:`structlearn.distributed.fit`.

    Parameters
    ----------
    estimator : TreeCRF
        Its parameters as for ``fit`` (``min_freq``, ``root_features``, ``forbidden_edges``, ...).
    data : dask.bag.Bag
        One element per tree: a triple ``(items, labels, parents)`` — one entry of ``fit``'s ``X``, ``y``
        and ``parents`` (the parent position of every node, -1 at the root) — or a 4-tuple that adds the
        tree's entry of ``edge_attributes`` (every element a 4-tuple or none).
    client : distributed.Client
    split_every : int
        Fan-in of the tree reductions.
    callback : callable or None
        ``callback(k)`` on the client before the k-th map over the shards.

    Returns
    -------
    estimator, fitted: its attributes equal those of ``fit`` on the concatenated trees (weights to
    rounding, the same iterations). Held-out data and partial labels (``fit``'s ``X_dev``, ``allowed``)
    are not taken here.

    Raises
    ------
    ValueError
        ``data`` not a bag, a bag element not a triple / 4-tuple, edge attributes on some trees only, an
        empty training set, an online ``algorithm``, and every error of ``fit`` (bad parents, labels that
        do not fit the nodes, a gold edge that ``forbidden_edges`` forbids, ...).

    Notes
    -----
    Cost: two passes over the partitions where they live, then per L-BFGS evaluation one upward–downward
    pass per shard, O(N·K²) in total, and the parameters (n_params float64) sent to and the gradient
    reduced from every worker.
    """
    check_bag(data, estimator, _ELEMENTS)
    estimator._check_params()
    check_lbfgs(estimator)
    t0 = time.perf_counter()
    raw, where = load(client, data)   # loaded once, kept on the workers
    try:
        counts = reduce_counts(client, [client.submit(_count, estimator, r, i, pure=False)
                                        for i, r in enumerate(raw)], split_every,
                               summed=("pairs", "epairs"))
        if counts["items"] == 0:
            raise ValueError("the training set is empty (no nodes in the bag); give at least one non-empty "
                             "tree")
        if counts["with_edges"] not in (0, len(raw)):
            raise ValueError("give edge attributes with every tree of the bag (4-tuples) or with none "
                             "(triples)")
        names, enames, classes = list(counts["names"]), list(counts["enames"]), list(counts["labels"])
        vocab, evocab = AttributeVocabulary(names), AttributeVocabulary(enames)
        K = len(classes)
        label_index = {lab: k for k, lab in enumerate(classes)}
        estimator.classes_, estimator._label_index = classes, label_index
        attr_ptr, feat_label = state_features(counts["pairs"], counts["seen"], vocab.index, label_index, K,
                                              estimator.min_freq, estimator.all_possible_states)
        edge_features = np.full((K, K), bool(estimator.all_possible_edges))
        for a, b in counts["links"]:
            edge_features[label_index[a], label_index[b]] = True
        eptr = epair = None
        if counts["with_edges"] and enames:
            pair_index = {(a, b): i * K + j for i, a in enumerate(classes) for j, b in enumerate(classes)}
            eptr, epair = state_features(counts["epairs"], counts["eseen"], evocab.index, pair_index, K * K,
                                         estimator.min_freq, estimator.all_possible_edges)
        forb, froot = estimator._forbidden(K)
        model = estimator._feature_model(vocab, evocab, attr_ptr, feat_label, edge_features, eptr, epair,
                                         forb, froot)
        estimator.featurize_seconds_ = time.perf_counter() - t0
        model_f = client.submit(identity, model, pure=False)
        shards = [client.submit(_objective, estimator, classes, names, enames, model_f, r, i, pure=False,
                                **where(i))
                  for i, r in enumerate(raw)]
        return train_on_shards(estimator, client, model, shards, where, t0, split_every, callback)
    finally:
        release(raw)
