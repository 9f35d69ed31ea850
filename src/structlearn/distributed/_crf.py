"""``structlearn.distributed.fit`` of a :class:`~structlearn.LinearChainCRF`: L-BFGS over persisted dask
shards.

Three passes over the data, all on the workers:

1. every partition is counted where it lives (:func:`_count`): its attribute names and labels in order of
   first appearance, the (attribute, label) frequencies of its state features, its label bigrams; the
   counts are merged by a tree reduction in partition order (:func:`._crf_shared.merge_counts`), so the
   vocabulary, the label order and the feature set (``min_freq``, CRFsuite's frequency rule) are those
   ``fit`` builds from the concatenated data;
2. the client builds the feature model and sends it once; every partition is encoded against it and
   becomes the data term of the objective on that shard (:func:`_objective`), persisted on its worker;
   a bag element may be a triple (items, labels, allowed): partial labels, ``allowed`` naming the labels
   allowed per token (names, not positions: a partition does not know the merged label order); the
   worker turns them into the (n_items, K) mask of ``ChainCLL`` once the label order is merged
   (:func:`._elements.allowed_mask`), so the objective is that of ``fit(X, y, allowed=mask)``;
3. each L-BFGS evaluation sends w (a task) and tree-reduces the shards' value and gradient
   (:func:`structlearn.learning.shards.objective_statistics`); the optimiser, its stopping rules and the
   penalty run on the client in the estimator's own training loop.

Held-out data (``X_dev``, ``y_dev``, as ``fit``'s) stay on the client: encoded with the merged vocabulary
and labels by the estimator's own ``_dev_set`` (so its errors are those of ``fit``) before any shard is
built, and decoded there every L-BFGS iteration (``"dev_accuracy"`` in ``training_log_``).
"""
import re
import time

import numpy as np

from ..crf import objectives
from ..crf.objectives import ChainCLL
from ..crf.features import AttributeVocabulary
from ._crf_shared import count_partitions, identity, pair_counts, release, start_fit, state_features, train_on_shards
from ._common import collect, fixed_blocks
from ._elements import allowed_mask as _mask, split_elements

__all__ = ["fit_crf"]


def _split(part, partition=0):
    """(X, y, allowed) of a partition of (items, labels) pairs and (items, labels, allowed) triples;
    ``allowed[j]`` is None for a pair, else the triple's ``allowed`` checked for shape
    (:func:`._elements.check_allowed`)."""
    return split_elements(part, partition, ("items", "labels", "allowed"), optional=1, partial=True)


def _check_feasible(mask, packed, forb, fstart, fend, partition):
    """ValueError unless every sequence has a labelling within ``mask`` that ``forbidden_transitions``
    allows (else its probability is zero); O(N·K²) on booleans."""
    ok = ~forb
    for j, (o, n) in enumerate(zip(packed.offsets[:-1].tolist(), packed.lengths.tolist())):
        if n == 0:
            continue
        reach = mask[o] & ~fstart
        for t in range(1, n):
            reach = mask[o + t] & ok[reach].any(axis=0)
        if not (reach & ~fend).any():
            raise ValueError(f"element {j} of partition {partition}: every labelling that its labels (or "
                             f"allowed labels) permit uses a transition, start or end that "
                             f"`forbidden_transitions` forbids; it would have zero probability")


def _item_counts(part):
    """Worker side: the number of items (tokens) of every sequence of a partition (elements checked by
    :func:`_count` before)."""
    return [len(e[1]) for e in part]


def _take(part, a, b, partition):
    """Worker side: elements a..b-1 of a partition, each with where it came from (partition, element)."""
    return [(partition, a + j, e) for j, e in enumerate(part[a:b])]


def _concat(pieces):
    return [t for piece in pieces for t in piece]


def _objective_block(estimator, model, names, classes, block, j):
    """Worker side: :func:`_objective` of one of the data's blocks (elements tagged by :func:`_take`); an
    error names the element by its partition and position in the bag, as the user gave it."""
    try:
        return _objective(estimator, model, names, classes, [e for _, _, e in block], j)
    except ValueError as exc:
        def origin(m):
            p, k = block[int(m.group(1))][:2]
            return f"element {k} of partition {p}"
        raise ValueError(re.sub(r"element (\d+) of partition \d+", origin, str(exc))) from None


def _count(estimator, part, partition=0):
    """Worker side: the counts of one partition (names, labels, feature and bigram frequencies; the
    labels of a triple count as a pair's, as ``fit(X, y, allowed=...)`` counts ``y``)."""
    X, y, _ = _split(part, partition)
    est = estimator.__class__(**estimator.get_params())
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, None, grow=True)
    yy = est._fit_labels(y, packed)
    names, labels = vocab.names, est.classes_
    # CRFsuite's frequency rule without start/end features: the value sum (build_state_features)
    pairs, seen = pair_counts(packed, yy, names, labels,
                              "count" if estimator.start_end_features else "value")
    same = np.ones(packed.n_items, bool)
    same[packed.offsets[1:] - 1] = False
    idx = np.flatnonzero(same[:-1])
    bigrams = {(labels[a], labels[b]): None for a, b in zip(yy[idx].tolist(), yy[idx + 1].tolist())}
    return {"names": dict.fromkeys(names), "labels": dict.fromkeys(labels), "pairs": pairs,
            "bigrams": bigrams, "seen": seen, "items": int(packed.n_items), "sequences": len(X)}


def _objective(estimator, model, names, classes, part, partition=0):
    """Worker side: the data term (CLL without penalty) of one partition under the feature model (a
    shallow copy with its own batch cache, :meth:`~structlearn.crf._potentials.ChainFeatureModel.shard_copy`); with triples, the partial-label CLL
    (``ChainCLL(..., allowed=mask)``, :func:`._elements.allowed_mask`)."""
    X, y, allowed = _split(part, partition)
    est = estimator.__class__(**estimator.get_params())
    est.classes_ = list(classes)
    est._label_index = {lab: k for k, lab in enumerate(classes)}
    packed = AttributeVocabulary(names).encode(X, None)
    yy = est._encode_labels(y, packed)
    mask = _mask(allowed, yy, packed, est._label_index, partition)
    if mask is None:
        est._check_gold_allowed(yy, packed, model.forbidden, model.forbidden_start, model.forbidden_end)
    elif model.forbidden.any() or model.forbidden_start.any() or model.forbidden_end.any():
        _check_feasible(mask, packed, model.forbidden, model.forbidden_start, model.forbidden_end, partition)
    return ChainCLL(model.shard_copy(), packed, yy, c2=0.0, allowed=mask)


def fit_crf(estimator, data, client, *, split_every=8, callback=None, X_dev=None, y_dev=None):
    """Fit a LinearChainCRF (``algorithm="lbfgs"``) on a dask bag of (items, labels) pairs and (items,
    labels, allowed) triples (partial labels); see :func:`structlearn.distributed.fit`. The held-out data
    ``X_dev``, ``y_dev`` (as ``fit``'s) stay on the client, encoded with the merged vocabulary and labels
    (``_dev_set``), and their accuracy is logged every iteration."""
    t0, raw, where = start_fit(client, data, estimator, "(items, labels) pairs (or (items, labels, allowed) "
                               "triples), one per sequence,")
    try:
        counts = count_partitions(client, raw, split_every, _count, estimator)
        names, classes = list(counts["names"]), list(counts["labels"])
        vocab = AttributeVocabulary(names)
        K = len(classes)
        label_index = {lab: k for k, lab in enumerate(classes)}
        attr_ptr, feat_label = state_features(counts["pairs"], counts["seen"], vocab.index, label_index, K,
                                              estimator.min_freq, estimator.all_possible_states)
        trans = np.ones((K, K), bool) if estimator.all_possible_transitions else np.zeros((K, K), bool)
        for a, b in counts["bigrams"]:
            trans[label_index[a], label_index[b]] = True
        estimator.classes_ = classes
        estimator._label_index = label_index
        model = estimator._chain_model(vocab, attr_ptr, feat_label, trans)
        estimator.featurize_seconds_ = time.perf_counter() - t0
        dev = estimator._dev_set(vocab, X_dev, y_dev)
        model_f = client.submit(identity, model, pure=False)
        names_f = client.submit(identity, names, pure=False)
        # the objective over the data's own blocks (fixed by the sequences, not by the partitions or the
        # workers), summed in their fixed tree: the weights are bitwise those of estimator.fit
        lengths = collect(client, [client.submit(_item_counts, r, pure=False) for r in raw])
        blocks, ranges = fixed_blocks(client, raw, lengths, _take, _concat, objectives.CRF_BLOCK_ROWS,
                                      objectives.CRF_MAX_BLOCKS)
        shards = [client.submit(_objective_block, estimator, model_f, names_f, classes, b, j, pure=False)
                  for j, b in enumerate(blocks)]
        train_on_shards(estimator, client, model, shards, where, t0, split_every, callback, ranges=ranges,
                        dev=dev)
        if estimator.model_filename:
            estimator._save_model_filename()
        return estimator
    finally:
        release(raw)
