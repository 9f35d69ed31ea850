"""``structlearn.distributed.fit`` of a :class:`~structlearn.LinearChainCRF`: L-BFGS over persisted dask
shards.

Three passes over the data, all on the workers:

1. every partition is counted where it lives (:func:`_count`): its attribute names and labels in order of
   first appearance, the (attribute, label) frequencies of its state features, its label bigrams; the
   counts are merged by a tree reduction in partition order (:func:`_merge`), so the vocabulary, the label
   order and the feature set (``min_freq``, CRFsuite's frequency rule) are those ``fit`` builds from the
   concatenated data;
2. the client builds the feature model and sends it once; every partition is encoded against it and
   becomes the data term of the objective on that shard (:func:`_objective`), persisted on its worker;
3. each L-BFGS evaluation sends w (a task) and tree-reduces the shards' value and gradient
   (:func:`structlearn.learning.shards.objective_statistics`); the optimiser, its stopping rules and the
   penalty run on the client in the estimator's own training loop.
"""
import time

import numpy as np

from ..learning.objectives import ChainCLL
from ..learning.shards import ShardedObjective, objective_statistics
from ..models.features import AttributeVocabulary
from ._common import identity, placement, shard_map, tree_reduce

__all__ = ["fit_crf"]


def _split(part):
    """(X, y) of a partition of (x_sequence, y_sequence) pairs."""
    X, y = [], []
    for i, pair in enumerate(part):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"every element of the bag must be a pair (items, labels) of one sequence; "
                             f"element {i} of a partition is a {type(pair).__name__}")
        X.append(pair[0])
        y.append(pair[1])
    return X, y


def _count(estimator, part):
    """Worker side: the counts of one partition (names, labels, feature and bigram frequencies)."""
    X, y = _split(part)
    est = estimator.__class__(**estimator.get_params())
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, None, grow=True)
    yy = est._fit_labels(y, packed)
    K = len(est.classes_)
    rows = np.repeat(np.arange(packed.n_items, dtype=np.int64), np.diff(packed.item_ptr))
    nz = packed.item_val != 0
    if not estimator.start_end_features:  # CRFsuite's frequency rule: the value sum (build_state_features)
        keys, inverse = np.unique(packed.item_attr * K + yy[rows], return_inverse=True)
        freq = np.bincount(inverse.ravel(), weights=packed.item_val, minlength=keys.size)
    else:
        keys, freq = np.unique(packed.item_attr[nz] * K + yy[rows[nz]], return_counts=True)
    names, labels = vocab.names, est.classes_
    pairs = {(names[k // K], labels[k % K]): float(f) for k, f in zip(keys.tolist(), freq.tolist())}
    same = np.ones(packed.n_items, bool)
    same[packed.offsets[1:] - 1] = False
    idx = np.flatnonzero(same[:-1])
    bigrams = {(labels[a], labels[b]): None for a, b in zip(yy[idx].tolist(), yy[idx + 1].tolist())}
    seen = {names[a]: None for a in np.unique(packed.item_attr[nz]).tolist()}
    return {"names": dict.fromkeys(names), "labels": dict.fromkeys(labels), "pairs": pairs,
            "bigrams": bigrams, "seen": seen, "items": int(packed.n_items), "sequences": len(X)}


def _merge(parts):
    """The counts of consecutive partitions together (first-appearance orders kept, frequencies added)."""
    out = {"names": {}, "labels": {}, "pairs": {}, "bigrams": {}, "seen": {}, "items": 0, "sequences": 0}
    for p in parts:
        for key in ("names", "labels", "bigrams", "seen"):
            out[key].update(p[key])
        pairs = out["pairs"]
        for k, v in p["pairs"].items():
            pairs[k] = pairs.get(k, 0.0) + v
        out["items"] += p["items"]
        out["sequences"] += p["sequences"]
    return out


def _objective(estimator, model, names, classes, part):
    """Worker side: the data term (CLL without penalty) of one partition under the feature model."""
    X, y = _split(part)
    est = estimator.__class__(**estimator.get_params())
    est.classes_ = list(classes)
    est._label_index = {lab: k for k, lab in enumerate(classes)}
    packed = AttributeVocabulary(names).encode(X, None)
    yy = est._encode_labels(y, packed)
    est._check_gold_allowed(yy, packed, model.forbidden, model.forbidden_start, model.forbidden_end)
    return ChainCLL(model, packed, yy, c2=0.0)


def fit_crf(estimator, data, client, *, split_every=8, callback=None):
    """Fit a LinearChainCRF (``algorithm="lbfgs"``) on a dask bag of (items, labels) pairs; see
    :func:`structlearn.distributed.fit`."""
    from dask.bag import Bag

    if not isinstance(data, Bag):
        raise ValueError(f"`data` must be a dask bag of (items, labels) pairs, one per sequence, to fit a "
                         f"{type(estimator).__name__}; got {type(data).__name__}")
    estimator._check_params()
    if estimator.algorithm != "lbfgs":
        raise ValueError(f"distributed fitting of a {type(estimator).__name__} needs algorithm='lbfgs' (the "
                         f"online trainers visit the sequences one after another); got "
                         f"algorithm={estimator.algorithm!r}")
    t0 = time.perf_counter()
    parts = data.to_delayed()

    where = placement(client)
    raw = [client.compute(p, **where(i)) for i, p in enumerate(parts)]   # loaded once, kept on the workers
    try:
        counts = tree_reduce(client, _merge, [client.submit(_count, estimator, r, pure=False) for r in raw],
                              split_every).result()
        if counts["items"] == 0:
            raise ValueError("the training set is empty (no items in the bag); give at least one non-empty "
                             "sequence")
        names, classes = list(counts["names"]), list(counts["labels"])
        vocab = AttributeVocabulary(names)
        K, A = len(classes), len(names)
        label_index = {lab: k for k, lab in enumerate(classes)}
        if estimator.all_possible_states:
            seen = np.zeros(A, bool)
            seen[[vocab.index[n] for n in counts["seen"]]] = True
            attr_ptr = np.concatenate([[0], np.cumsum(np.where(seen, K, 0))]).astype(np.int64)
            feat_label = np.tile(np.arange(K, dtype=np.int64), int(seen.sum()))
        else:
            keys = np.array([vocab.index[a] * K + label_index[lab] for a, lab in counts["pairs"]], np.int64)
            freq = np.array(list(counts["pairs"].values()), np.float64)
            order = np.argsort(keys, kind="stable")
            keys, freq = keys[order], freq[order]
            keys = keys[freq >= estimator.min_freq]
            attr_ptr = np.concatenate([[0], np.cumsum(np.bincount(keys // K, minlength=A))]).astype(np.int64)
            feat_label = (keys % K).astype(np.int64)
        trans = np.ones((K, K), bool) if estimator.all_possible_transitions else np.zeros((K, K), bool)
        for a, b in counts["bigrams"]:
            trans[label_index[a], label_index[b]] = True
        estimator.classes_ = classes
        estimator._label_index = label_index
        model = estimator._chain_model(vocab, attr_ptr, feat_label, trans)
        estimator.featurize_seconds_ = time.perf_counter() - t0
        model_f = client.submit(identity, model, pure=False)
        names_f = client.submit(identity, names, pure=False)
        shards = [client.submit(_objective, estimator, model_f, names_f, classes, r, pure=False, **where(i))
                  for i, r in enumerate(raw)]
        client.gather(shards)   # errors of the data (a forbidden gold transition, ...) before training
        shard_statistics = shard_map(client, shards, where, split_every, callback)

        def map_statistics(w):
            return shard_statistics(objective_statistics, w)

        objective = ShardedObjective(map_statistics, model.free_mask(), c2=estimator.c2)
        estimator._train(model, objective, t0, algorithm="lbfgs")
        if estimator.model_filename:
            estimator._save_model_filename()
        return estimator
    finally:
        client.cancel(raw)
