"""``structlearn.distributed.fit`` of a :class:`~structlearn.TreeCRF` (``algorithm="lbfgs"``): L-BFGS over
persisted dask shards of trees.

Two passes over the data, on the workers (the partitions are loaded once and kept there):

1. every partition is checked and counted where it lives (:func:`_count`): node and edge attribute names
   and labels in order of first appearance, the (node attribute, label) and (edge attribute, (child
   label, parent label)) frequencies, the (child label, parent label) pairs of its edges; the counts are
   merged by a tree reduction in partition order, so the vocabularies, the label order and the feature
   sets (``min_freq``; CRFsuite's value-sum rule without ``root_features``) are those ``fit`` builds;
2. every partition is encoded against the merged vocabularies and becomes the data term of the
   objective on that shard (a :class:`~structlearn.crf.objectives.TreeCLL` with ``c2=0``,
   :func:`_objective`); each L-BFGS evaluation sends w and tree-reduces the shards' value and gradient;
   the optimiser runs on the client in the estimator's own training loop (``_train``).

Partial labels: an element may end with ``allowed``, the labels allowed per node named as for the
LinearChainCRF (:mod:`._elements`), in a 5-tuple (items, labels, parents, edge_attributes, allowed) whose
edge_attributes is None when the bag has none; the tree's labels count in pass 1 as without it (as
``fit(..., allowed=...)`` counts ``y``), and in pass 2 the worker turns the names into the (n_nodes, K)
mask of the merged label order, so the shard's term is that of ``TreeCLL(..., allowed=mask)``:
log p(y ∈ allowed | x), a tree without ``allowed`` allowing its gold labels only. With
``forbidden_edges`` every tree is checked to keep a permitted labelling (:func:`_check_feasible`).

Held-out trees (``X_dev``, ``y_dev``, ``parents_dev``, ``edge_attributes_dev``, as ``fit``'s) stay on the
client: encoded with the merged vocabularies and labels by the estimator's own ``_dev_set`` before any
shard is built, and decoded there every L-BFGS iteration (``"dev_accuracy"`` in ``training_log_``).

The online trainers (``l2sgd``, ``ap``, ``pa``, ``arow``) stream with ``partial_fit`` instead.
"""
import time

import numpy as np

from ..crf.objectives import TreeCLL
from ..crf.features import AttributeVocabulary
from ._elements import allowed_mask, split_elements
from ._crf_shared import count_partitions, identity, pair_counts, release, start_fit, state_features, train_on_shards

__all__ = ["fit_tree_crf"]

_ELEMENTS = "(items, labels, parents), (items, labels, parents, edge_attributes) or (items, labels, " \
    "parents, edge_attributes, allowed) tuples, one per tree,"


def _split(part, partition=0):
    """(X, y, parents, edge attributes or None, allowed) of a partition of (items, labels, parents[,
    edge_attributes[, allowed]]) elements; ``allowed[j]`` None for a tree without partial labels
    (:func:`._elements.split_elements`)."""
    return split_elements(part, partition, ("items", "labels", "parents", "edge_attributes", "allowed"),
                          optional=2, unit="tree", given_as={"edge_attributes": "edge attributes"},
                          partial=True)


def _fresh(estimator):
    return estimator.__class__(**estimator.get_params())


def _count(estimator, part, partition=0):
    """Worker side: the counts of one partition (see the module docstring, pass 1)."""
    X, y, P, E, _ = _split(part, partition)
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
    vocabularies and label order; with partial labels, that of ``TreeCLL(..., allowed=mask)``
    (:func:`._elements.allowed_mask`, rows in the order of the nodes, then the layout's)."""
    X, y, P, E, allowed = _split(part, partition)
    est = _fresh(estimator)
    est.classes_ = list(classes)
    est._label_index = {lab: k for k, lab in enumerate(classes)}
    nodes, local, _, layout, batch = est._encode(X, P, E, False, AttributeVocabulary(names),
                                                 AttributeVocabulary(enames))
    yy = est._encode_labels(y, nodes)
    forb, froot = est._forbidden(len(classes))
    mask = allowed_mask(allowed, yy, nodes, est._label_index, partition)
    if mask is None:
        try:
            est._check_gold_allowed(yy, nodes, local, forb, froot)
        except ValueError as e:
            raise ValueError(f"partition {partition}: {e}") from None
    elif forb.any() or froot.any():
        _check_feasible(mask, nodes, local, forb, froot, partition)
    return TreeCLL(model, batch, layout.rows_to_internal(yy), c2=0.0,
                   allowed=None if mask is None else layout.rows_to_internal(mask))


def _check_feasible(mask, nodes, local, forb, froot, partition):
    """ValueError unless every tree has a labelling within ``mask`` (N, K) that ``forbidden_edges``
    allows (``forb`` (child, parent) pairs, ``froot`` root labels), else its probability is zero: the
    labels each node can take with a permitted labelling of its subtree, deepest nodes first; O(N·K²)
    on booleans (and O(N·depth) for the depths)."""
    seq = np.repeat(np.arange(len(nodes.lengths)), nodes.lengths)
    gpar = np.where(local >= 0, local + nodes.offsets[:-1][seq], -1)
    depth = np.zeros(gpar.size, np.int64)
    up = gpar.copy()
    while (up >= 0).any():
        depth += up >= 0
        up = np.where(up >= 0, gpar[np.maximum(up, 0)], -1)
    reach, ok = mask.copy(), ~forb
    for d in range(int(depth.max(initial=0)), 0, -1):
        ch = np.flatnonzero(depth == d)
        # parent labels that some permitted label of the child (and its subtree) may sit under
        np.logical_and.at(reach, gpar[ch], (reach[ch][:, :, None] & ok[None]).any(axis=1))
    roots = np.flatnonzero(gpar < 0)
    bad = roots[~(reach[roots] & ~froot).any(axis=1)]
    if bad.size:
        j = int(seq[bad[0]])
        raise ValueError(f"element {j} of partition {partition}: every labelling that its labels (or "
                         f"allowed labels) permit uses an edge (child label, parent label) or a root "
                         f"label that `forbidden_edges` forbids; it would have zero probability")


def fit_tree_crf(estimator, data, client, *, split_every=8, callback=None, X_dev=None, y_dev=None,
                 parents_dev=None, edge_attributes_dev=None):
    """Fit a :class:`~structlearn.TreeCRF` (``algorithm="lbfgs"``) on a dask bag of trees; see
    :func:`structlearn.distributed.fit`.

    Parameters
    ----------
    estimator : TreeCRF
        Its parameters as for ``fit`` (``min_freq``, ``root_features``, ``forbidden_edges``, ...).
    data : dask.bag.Bag
        One element per tree: a triple ``(items, labels, parents)`` — one entry of ``fit``'s ``X``, ``y``
        and ``parents`` (the parent position of every node, -1 at the root) — or a 4-tuple that adds the
        tree's entry of ``edge_attributes`` (every tree has edge attributes or none), or a 5-tuple
        ``(items, labels, parents, edge_attributes, allowed)`` that adds partial labels (edge_attributes
        None when the bag has none); trees with and without ``allowed`` mix freely. ``allowed`` is None
        (every label at every node) or a list with one entry per node: None (every label), a label, or a
        non-empty set/list of labels — label names, not positions (a partition does not know the merged
        label order).
    client : distributed.Client
    split_every : int
        Fan-in of the tree reductions.
    callback : callable or None
        ``callback(k)`` on the client before the k-th map over the shards.
    X_dev, y_dev, parents_dev, edge_attributes_dev : optional
        Held-out trees as ``fit``'s, kept on the client; their node accuracy is logged every iteration
        (``"dev_accuracy"`` in ``training_log_``).

    Returns
    -------
    estimator, fitted: its attributes equal those of ``fit(X, y, X_dev, y_dev, parents=...,
    edge_attributes=..., parents_dev=..., edge_attributes_dev=..., allowed=mask)`` on the concatenated
    trees (``mask`` (N, K) in ``classes_`` order: a tree's allowed labels, else its gold labels; ``fit``
    without ``allowed`` when no tree has one), weights to rounding, the same iterations and held-out
    accuracies.

    Raises
    ------
    ValueError
        ``data`` not a bag, a bag element not a triple / 4-tuple / 5-tuple, edge attributes on some trees
        only, an ``allowed`` that is malformed, names a label absent from every ``labels``, leaves a node
        no label or leaves a tree no labelling that ``forbidden_edges`` permits (each naming the element
        and the partition), an empty training set, an online ``algorithm`` (partial labels need
        ``algorithm="lbfgs"`` in ``fit`` too), and every error of ``fit`` (bad parents, labels that do
        not fit the nodes, a gold edge that ``forbidden_edges`` forbids, bad held-out trees or labels,
        ...).

    Notes
    -----
    Cost: two passes over the partitions where they live, then per L-BFGS evaluation one upward–downward
    pass per shard, O(N·K²) in total, and the parameters (n_params float64) sent to and the gradient
    reduced from every worker. With partial labels a shard also holds its (n_nodes, K) bool mask (with
    ``forbidden_edges``, checked in O(N·K²)) and each evaluation runs the pass twice, unconstrained and
    constrained, as ``fit(..., allowed=...)`` does.
    """
    t0, raw, where = start_fit(client, data, estimator, _ELEMENTS)
    try:
        counts = count_partitions(client, raw, split_every, _count, estimator, empty=("nodes", "tree"),
                                  summed=("pairs", "epairs"))
        if counts["with_edges"] not in (0, len(raw)):
            raise ValueError("give edge attributes with every tree of the bag (4-tuples, or 5-tuples whose "
                             "edge_attributes is not None) or with none (triples, or None in 5-tuples)")
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
        dev = estimator._dev_set(vocab, evocab, X_dev, y_dev, parents_dev, edge_attributes_dev)
        model_f = client.submit(identity, model, pure=False)
        shards = [client.submit(_objective, estimator, classes, names, enames, model_f, r, i, pure=False,
                                **where(i))
                  for i, r in enumerate(raw)]
        return train_on_shards(estimator, client, model, shards, where, t0, split_every, callback, dev=dev)
    finally:
        release(raw)
