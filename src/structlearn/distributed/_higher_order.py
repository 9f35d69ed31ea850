"""``structlearn.distributed.fit`` of a :class:`~structlearn.HigherOrderCRF` (chain and ``segments=True``
forms): L-BFGS over persisted dask shards.

Two passes over the data, on the workers (the partitions are loaded once and kept there):

1. every partition is counted where it lives (:func:`_count`): attribute names and labels in order of
   first appearance, the label n-grams of length 2..order+1 of its label sequences (chain) or of its
   segment-label sequences (segments: the runs of equal labels), the (attribute, state n-gram)
   frequencies (the n-grams of length ≤ ``state_order`` ending at a token, or at the token's segment)
   and, for segments, the longest run of every label; the counts are merged by a tree reduction in
   partition order, and the client builds from them the patterns of ``LabelPatterns.from_labels`` (the
   K unigrams, then the seen n-grams by length, each length in code order), the state features of
   ``build_pattern_state_features`` / ``build_segment_state_features`` (``min_freq``) and the model;
2. every partition is encoded against the merged vocabulary and labels and becomes the data term of the
   objective on that shard (:class:`~structlearn.crf.objectives.HigherOrderCLL` or
   :class:`~structlearn.crf.objectives.SegmentCLL` with ``c2=0``, :func:`_objective`); each L-BFGS
   evaluation sends w and tree-reduces the shards' value and gradient; the optimiser runs on the client
   in the estimator's own training loop (``_train``).

Partial labels (chain form): a bag element may be a triple (items, labels, allowed), ``allowed`` naming
the labels allowed per token as for the LinearChainCRF (:mod:`._elements`); the triple's labels count in
pass 1 as a pair's (as ``fit(X, y, allowed=...)`` counts ``y``), and in pass 2 the worker turns the names
into the (n_items, K) mask of the merged label order, so the shard's term is that of
``HigherOrderCLL(..., allowed=mask)``: log p(y ∈ allowed | x), a pair's tokens allowing their label only.

Held-out data (``X_dev``, ``y_dev``, as ``fit``'s) stay on the client: encoded with the merged vocabulary
and labels by the estimator's own ``_dev_set`` before any shard is built, and decoded there every L-BFGS
iteration (``"dev_accuracy"`` in ``training_log_``).
"""
import itertools
import time

import numpy as np

from ..crf.objectives import HigherOrderCLL, SegmentCLL
from ..crf.features import AttributeVocabulary
from ..crf._higher_order_potentials import LabelPatterns, _codes, _positions
from ..crf._segment_patterns import runs
from ._elements import allowed_mask, split_elements
from ._crf_shared import count_partitions, identity, release, start_fit, state_features, train_on_shards

__all__ = ["fit_higher_order_crf"]

_ELEMENTS = "(items, labels) pairs (or (items, labels, allowed) triples), one per sequence,"


def _split(part, partition=0, segments=False):
    """(X, y, allowed) of a partition of (items, labels) pairs and (items, labels, allowed) triples
    (:func:`._elements.split_elements`; ``allowed[j]`` None for a pair); ``segments``: triples refused,
    as ``fit`` refuses ``allowed`` with ``segments=True``."""
    X, y, allowed = split_elements(part, partition, ("items", "labels", "allowed"), optional=1, partial=True)
    if segments:
        j = next((j for j, a in enumerate(allowed) if a is not None), None)
        if j is not None:
            raise ValueError(f"element {j} of partition {partition}: `allowed` (partial labels) is not "
                             f"supported with segments=True; give (items, labels) pairs")
    return X, y, allowed


def _decode(code, k, labels):
    """The label names of the k-gram of integer code ``code`` (base len(labels), first label most
    significant)."""
    K, z = len(labels), []
    for _ in range(k):
        z.append(labels[code % K])
        code //= K
    return tuple(reversed(z))


def _ngrams(seq_labels, offsets, k, labels):
    """Worker side: per position, the code of the k-gram ending there (-1 where it does not fit), and
    the set (dict) of the k-grams seen, as label-name tuples in code order."""
    c = _codes(seq_labels, _positions(offsets), k, len(labels))
    return c, {_decode(v, k, labels): None for v in np.unique(c[c >= 0]).tolist()}


def _count(estimator, part, partition=0):
    """Worker side: the counts of one partition (see the module docstring, pass 1); a partition of empty
    sequences counts nothing."""
    X, y, _ = _split(part, partition, estimator.segments)
    est = estimator.__class__(**estimator.get_params())
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, None, grow=True)
    yy = est._fit_labels(y, packed)
    labels, names = est.classes_, vocab.names
    order, s = int(estimator.order), int(est._state_order())
    if estimator.segments:
        s0, s1, sl, so = runs(yy, packed.offsets)
        seq_labels, offsets, dur = sl, so, s1 - s0 + 1
        lengths = {}
        for lab, d in zip(sl.tolist(), dur.tolist()):
            lengths[labels[lab]] = max(lengths.get(labels[lab], 1), d)
    else:
        seq_labels, offsets, dur, lengths = yy, packed.offsets, None, {}
    ngrams = {}
    state = []   # per state length k: the (N,) codes of the k-gram ending at every token (its segment)
    for k in range(1, order + 2):
        c, seen = _ngrams(seq_labels, offsets, k, labels)
        if k >= 2:
            ngrams.update(seen)
        if k <= s:
            state.append(c if dur is None else np.repeat(c, dur))
    rows = np.repeat(np.arange(packed.n_items, dtype=np.int64), np.diff(packed.item_ptr))
    nz = packed.item_val != 0
    r, a = rows[nz], packed.item_attr[nz]
    pairs = {}
    for k, c in enumerate(state, start=1):
        z = c[r]
        ok = z >= 0
        if not ok.any():
            continue
        keys, freq = np.unique(np.stack([a[ok], z[ok]], axis=1), axis=0, return_counts=True)
        for (ai, zi), f in zip(keys.tolist(), freq.tolist()):
            key = (names[ai], _decode(zi, k, labels))
            pairs[key] = pairs.get(key, 0) + f
    return {"names": dict.fromkeys(names), "labels": dict.fromkeys(labels), "pairs": pairs,
            "seen": {names[i]: None for i in np.unique(a).tolist()}, "ngrams": ngrams, "lengths": lengths,
            "items": int(packed.n_items), "sequences": len(X)}


def _patterns(estimator, ngrams, label_index):
    """``LabelPatterns.from_labels`` of the merged n-grams (label-name tuples): the K unigrams, then per
    length the seen n-grams (all K**n with ``all_possible_transitions``) in code order, the state lengths
    first."""
    K, order, s = len(label_index), int(estimator.order), int(estimator._state_order())
    by_len = {k: [] for k in range(1, order + 2)}
    for z in ngrams:
        by_len[len(z)].append(tuple(label_index[lab] for lab in z))
    for k in by_len:
        every = k == 1 or estimator.all_possible_transitions
        by_len[k] = list(itertools.product(range(K), repeat=k)) if every else sorted(by_len[k])
    ordered = [z for k in range(1, s + 1) for z in by_len[k]] + \
        [z for k in range(s + 1, order + 2) for z in by_len[k]]
    return LabelPatterns(ordered, K, order, s)


def _objective(estimator, classes, names, model, part, partition=0):
    """Worker side: the data term (HigherOrderCLL / SegmentCLL without penalty) of one partition; with
    triples, the partial-label CLL (``HigherOrderCLL(..., allowed=mask)``, :func:`._elements.allowed_mask`)."""
    X, y, allowed = _split(part, partition, estimator.segments)
    est = estimator.__class__(**estimator.get_params())
    est.classes_ = list(classes)
    est._label_index = {lab: k for k, lab in enumerate(classes)}
    packed = AttributeVocabulary(names).encode(X, None)
    yy = est._encode_labels(y, packed)
    if estimator.segments:    # segment models keep no per-batch cache
        return SegmentCLL(model, packed, yy, c2=0.0)
    mask = allowed_mask(allowed, yy, packed, est._label_index, partition)
    return HigherOrderCLL(model.shard_copy(), packed, yy, c2=0.0, allowed=mask)


def fit_higher_order_crf(estimator, data, client, *, split_every=8, callback=None, X_dev=None, y_dev=None):
    """Fit a :class:`~structlearn.HigherOrderCRF` (either form) on a dask bag of sequences; see
    :func:`structlearn.distributed.fit`.

    Parameters
    ----------
    estimator : HigherOrderCRF
        Its parameters as for ``fit`` (``order``, ``segments``, ``patterns``, ``state_order``,
        ``min_freq``, ...).
    data : dask.bag.Bag
        One element per sequence: a pair ``(items, labels)`` — one entry of ``fit``'s ``X`` (a list of
        items) and of its ``y`` (a list of labels, one per item) — or a triple ``(items, labels,
        allowed)`` with partial labels (chain form only, as ``fit``), pairs and triples mixed freely.
        ``allowed`` is None (every label at every token) or a list with one entry per token: None (every
        label), a label, or a non-empty set/list of labels — label names, not positions (a partition does
        not know the merged label order).
    client : distributed.Client
    split_every : int
        Fan-in of the tree reductions.
    callback : callable or None
        ``callback(k)`` on the client before the k-th map over the shards.
    X_dev, y_dev : list of sequences of items, list of lists of labels, optional
        Held-out data as ``fit``'s, kept on the client; its token accuracy is logged every iteration
        (``"dev_accuracy"`` in ``training_log_``).

    Returns
    -------
    estimator, fitted: its attributes equal those of ``fit(X, y, X_dev, y_dev, allowed=mask)`` on the
    concatenated sequences (``mask`` (N, K) in ``classes_`` order: a triple's allowed labels, a pair's gold
    label; ``fit(X, y, X_dev, y_dev)`` when the bag holds no triple), weights to rounding, the same
    iterations and held-out accuracies.

    Raises
    ------
    ValueError
        ``data`` not a bag, a bag element not a pair or triple, a triple with ``segments=True``, an
        ``allowed`` that is malformed, names a label absent from every ``labels`` or leaves a token no
        label (each naming the element and the partition), an empty training set, and every error of
        ``fit`` (labels that do not fit the items, K**d too large for ``patterns="dense"``, bad
        parameters; held-out labels that do not fit the items or are absent from the training labels).

    Notes
    -----
    Cost: two passes over the partitions where they live (the count O(nnz · state_order)), then per
    L-BFGS evaluation one forward–backward per shard (time as ``fit``'s, see the estimator) and the
    parameters (n_params float64) sent to and the gradient reduced from every worker. With partial labels
    a shard also holds its (n_items, K) bool mask and each evaluation runs the forward–backward twice,
    unconstrained and constrained, as ``fit(..., allowed=...)`` does. The model has no forbidden
    transitions, so a mask that leaves every token a label always leaves its sequence a labelling.
    """
    t0, raw, where = start_fit(client, data, estimator, _ELEMENTS)
    try:
        counts = count_partitions(client, raw, split_every, _count, estimator, summed=("pairs",),
                                  maxed=("lengths",))
        names, classes = list(counts["names"]), list(counts["labels"])
        vocab = AttributeVocabulary(names)
        label_index = {lab: k for k, lab in enumerate(classes)}
        estimator.classes_, estimator._label_index = classes, label_index
        pats = _patterns(estimator, counts["ngrams"], label_index)
        if not estimator.segments and estimator._mode() == "dense":
            pats.dense()  # fail early when K**d is too large
        Zs = pats.n_state_patterns
        state_index = {tuple(classes[v] for v in z): i for i, z in enumerate(pats.patterns[:Zs])}
        attr_ptr, feat = state_features(counts["pairs"], counts["seen"], vocab.index, state_index,
                                        Zs, estimator.min_freq,
                                        estimator.all_possible_states)
        max_lengths = None
        if estimator.segments:
            max_lengths = np.array([counts["lengths"][c] for c in classes], np.int64)
        model = estimator._model_of(pats, attr_ptr, feat, max_lengths)
        estimator.attributes_, estimator._vocab, estimator.model_ = names, vocab, model
        estimator.featurize_seconds_ = time.perf_counter() - t0
        dev = estimator._dev_set(vocab, X_dev, y_dev)
        model_f = client.submit(identity, model, pure=False)
        shards = [client.submit(_objective, estimator, classes, names, model_f, r, i, pure=False, **where(i))
                  for i, r in enumerate(raw)]
        return train_on_shards(estimator, client, model, shards, where, t0, split_every, callback, dev=dev)
    finally:
        release(raw)
