"""``structlearn.distributed.fit`` of a :class:`~structlearn.SemiMarkovCRF`: L-BFGS over persisted dask
shards of segmented sequences.

The passes over the data, all on the workers (the partitions are loaded once and kept there):

1. with ``label_format="auto"``, every partition says how its labels look (:func:`_format`: the kind of
   its first non-empty label sequence, its labels that are not bio tags); the client resolves the format
   as ``fit`` does on the concatenated labels;
2. every partition is counted where it lives (:func:`_count`): attribute names, segment labels and (for
   the "span" feature) token strings in order of first appearance, the (attribute, segment label)
   frequencies of the state features, the longest segment per label, the pairs of consecutive segment
   labels; the counts are merged by a tree reduction in partition order, so the vocabulary, label order,
   token index, segment-length limits and feature set (``min_freq``) are those ``fit`` builds;
3. every partition is encoded against the merged vocabulary and kept on its worker as a segment batch
   (:func:`_prepare`); with the "span" feature the workers send the hashes of their gold spans, whose
   union is the span vocabulary of ``fit``;
4. every prepared partition becomes the data term of the objective on that shard (a
   :class:`~structlearn.crf.objectives.SemiMarkovCLL` with ``c2=0``, :func:`_objective`); each
   L-BFGS evaluation sends w and tree-reduces the shards' value and gradient; the optimiser runs on the
   client in the estimator's own training loop (``_train``).
"""
import copy
import time

import numpy as np

from ..crf.objectives import SemiMarkovCLL
from ..crf.features import AttributeVocabulary
from ._common import collect
from ._crf_shared import (count_partitions, identity, merge_counts, pair_counts, release, start_fit, state_features,
                          train_on_shards)
from ._elements import split_elements

__all__ = ["fit_semicrf"]

_ELEMENTS = "(items, labels) pairs or (items, labels, tokens) triples, one per sequence,"


def _split(part, partition=0):
    """(X, y, tokens or None) of a partition of (items, labels[, tokens]) elements."""
    return split_elements(part, partition, ("items", "labels", "tokens"), optional=1,
                          given_as={"tokens": "the token strings"})


def _fresh(estimator):
    return estimator.__class__(**estimator.get_params())


def _format(estimator, part, partition=0):
    """Worker side: the kind of the first non-empty label sequence of the partition ("segments" when its
    first entry is a tuple, "tokens" otherwise, None when every sequence is empty) and the number of
    labels that are not bio tags (``SemiMarkovCRF._resolve_format`` over the partition)."""
    _, y, _ = _split(part, partition)
    est = _fresh(estimator)
    first = None
    for seq in y:
        if len(seq):
            first = "segments" if isinstance(seq[0], (tuple, list)) else "tokens"
            break
    nonbio = 0 if first in (None, "segments") else sum(
        est._resolve_format([[t]]) != "bio" for s in y for t in s)
    return {"first": first, "nonbio": int(nonbio)}


def _segments(est, X, y, fmt):
    """(the partition's own vocabulary, packed items, segments (S, 3), segment offsets) of a partition,
    labels numbered in ``est`` in order of first appearance."""
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, None, grow=True)
    segs, so = est._pack_segments(est._segments_of(y, packed.lengths, fmt), grow=True)
    return vocab, packed, segs, so


def _count(estimator, fmt, part, partition=0):
    """Worker side: the counts of one partition (see the module docstring, pass 2)."""
    X, y, tokens = _split(part, partition)
    est = _fresh(estimator)
    est.classes_, est._label_index = [], {}
    vocab, packed, segs, so = _segments(est, X, y, fmt)
    labels = est.classes_
    dur = segs[:, 1] - segs[:, 0] + 1
    seen = np.zeros(len(labels), np.int64)
    np.maximum.at(seen, segs[:, 2], dur)
    try:
        _, same = est._consecutive_segments(segs, so)
    except ValueError as e:
        raise ValueError(f"partition {partition}: {e}") from None
    pairs, attrs = pair_counts(packed, np.repeat(segs[:, 2], dur), vocab.names, labels, "count")
    sf = tuple(estimator.segment_features)
    strings = est._token_strings(X, tokens, packed, check=False) if "span" in sf or "caps" in sf else []
    return {"names": dict.fromkeys(vocab.names), "labels": dict.fromkeys(labels), "pairs": pairs,
            "seen": attrs, "lengths": dict(zip(labels, seen.tolist())),
            "bigrams": {(labels[a], labels[b]): None for a, b in zip(segs[same, 2].tolist(),
                                                                     segs[same + 1, 2].tolist())},
            "tokens": dict.fromkeys(strings) if "span" in sf else {},
            "found": int(any(strings)), "tokens_given": int(tokens is not None),
            "items": int(packed.n_items), "sequences": len(X)}


def _setup(est, fitted):
    """``est`` with the merged fitted state (label order, vocabulary, longest segment, token index)."""
    for k, v in fitted.items():
        setattr(est, k, v)
    est._label_index = {lab: k for k, lab in enumerate(est.classes_)}
    return est


def _prepare(estimator, fitted, fmt, part, partition=0):
    """Worker side: (segment batch, segments, segment offsets, the gold span hashes and labels (n, 2)
    int64) of one partition under the merged vocabulary."""
    X, y, tokens = _split(part, partition)
    est = _setup(_fresh(estimator), fitted)
    batch = est._batch(X, None, tokens)
    packed = batch.packed
    segs, so = est._pack_segments(est._segments_of(y, packed.lengths, fmt), grow=False)
    batch.segments, batch.seg_offsets = segs, so
    spans = np.zeros((0, 2), np.int64)
    if batch.span_id is not None:
        seq = np.repeat(np.arange(len(so) - 1), np.diff(so))
        dur = segs[:, 1] - segs[:, 0] + 1
        h = batch.span_id[segs[:, 1] + packed.offsets[seq], dur - 1]
        spans = np.unique(np.stack([h, segs[:, 2]], axis=1)[h != -1], axis=0)
    return batch, segs, spans


def _spans(prepared):
    return prepared[2]


def _objective(estimator, fitted, model, prepared):
    """Worker side: the data term (SemiMarkovCLL without penalty) of one prepared partition."""
    est = _setup(_fresh(estimator), fitted)
    batch, segs, _ = prepared
    batch = copy.copy(batch)   # span ids mapped on a copy: the persisted batch keeps its hashes
    est._map_spans(batch)
    return SemiMarkovCLL(model, batch, segs, c2=0.0)


def fit_semicrf(estimator, data, client, *, split_every=8, callback=None):
    """Fit a :class:`~structlearn.SemiMarkovCRF` on a dask bag of sequences; see
    :func:`structlearn.distributed.fit`.

    Parameters
    ----------
    estimator : SemiMarkovCRF
        Its parameters as for ``fit`` (``algorithm="lbfgs"``, ``min_freq``, ``max_segment_length``, ...).
    data : dask.bag.Bag
        One element per sequence: a pair ``(items, labels)``, ``items`` one sequence of ``fit``'s ``X``
        (a list of items) and ``labels`` one entry of its ``y`` (token labels, or a list of ``(start, end
        exclusive, label)`` segments, per ``label_format``), or a triple ``(items, labels, tokens)`` with
        the token strings of the "span" / "caps" segment features (``fit``'s ``tokens``; every element a
        triple or none).
    client : distributed.Client
    split_every : int
        Fan-in of the tree reductions.
    callback : callable or None
        ``callback(k)`` on the client before the k-th map over the shards.

    Returns
    -------
    estimator, fitted: its attributes equal those of ``fit`` on the concatenated sequences (weights to
    rounding, the same iterations).

    Raises
    ------
    ValueError
        ``data`` not a bag, a bag element not a pair / triple, an empty training set, and every error of
        ``fit`` (bad segments, a segment longer than ``max_segment_length``, consecutive segments of one
        label with ``allow_same_label=False``, ...).

    Notes
    -----
    Cost: four passes over the partitions where they live (format, count, encode, objective), then per
    L-BFGS evaluation one forward–backward per shard, O(N·(Σ_k L_k + K²)) in total, and the parameters
    (n_params float64) sent to and the gradient reduced from every worker.
    """
    t0, raw, where = start_fit(client, data, estimator, _ELEMENTS, drop=("model_", "coef_"))
    try:
        fmt = estimator.label_format
        if fmt == "auto":
            f = merge_counts(collect(client, [client.submit(_format, estimator, r, i, pure=False)
                                              for i, r in enumerate(raw)]), summed=())
            fmt = "segments" if f["first"] == "segments" else (
                "runs" if f["first"] is None or f["nonbio"] else "bio")
        counts = count_partitions(client, raw, split_every, _count, estimator, fmt, summed=("pairs",),
                                  maxed=("lengths",))
        if counts["tokens_given"] not in (0, len(raw)):
            raise ValueError("give the token strings with every sequence of the bag (triples) or with none "
                             "(pairs)")
        sf = tuple(estimator.segment_features)
        if ("span" in sf or "caps" in sf) and not counts["tokens_given"] and not counts["found"]:
            raise ValueError(f"segment features {list(sf)} need the token strings: no item has the attribute "
                             f"{estimator.token_attribute + '='!r}…; set `token_attribute` or give the "
                             f"tokens (triples)")
        names, classes = list(counts["names"]), list(counts["labels"])
        vocab = AttributeVocabulary(names)
        K = len(classes)
        label_index = {lab: k for k, lab in enumerate(classes)}
        estimator.label_format_ = fmt
        estimator.classes_, estimator._label_index, estimator._vocab = classes, label_index, vocab
        max_lengths = estimator._max_lengths_of(np.array([counts["lengths"][c] for c in classes], np.int64))
        estimator._max_duration = int(max_lengths.max())
        fitted = {"classes_": classes, "_vocab": vocab, "_max_duration": estimator._max_duration}
        if "span" in sf:
            fitted["_tok_index"] = {s: i for i, s in enumerate(counts["tokens"])}
        fitted_f = client.submit(identity, fitted, pure=False)
        prepared = [client.submit(_prepare, estimator, fitted_f, fmt, r, i, pure=False, **where(i))
                    for i, r in enumerate(raw)]
        span_features = None
        if "span" in sf:
            spans = np.concatenate(collect(client, [client.submit(_spans, p, pure=False)
                                                    for p in prepared]))
            estimator._span_hash = np.unique(spans[:, 0])
            span_features = np.zeros((estimator._span_hash.size, K), bool)
            span_features[np.searchsorted(estimator._span_hash, spans[:, 0]), spans[:, 1]] = True
            estimator._tok_index = fitted["_tok_index"]
        else:
            estimator._span_hash = np.zeros(0, np.int64)
            estimator._tok_index = {}
        attr_ptr, feat_label = state_features(counts["pairs"], counts["seen"], vocab.index, label_index, K,
                                              estimator.min_freq, estimator.all_possible_states)
        trans_features = np.ones((K, K), bool) if estimator.all_possible_transitions else \
            np.zeros((K, K), bool)
        for a, b in counts["bigrams"]:
            trans_features[label_index[a], label_index[b]] = True
        model = estimator._feature_model(vocab, attr_ptr, feat_label, max_lengths, trans_features,
                                         span_features)
        estimator.featurize_seconds_ = time.perf_counter() - t0
        fitted["_span_hash"] = estimator._span_hash
        fitted_f = client.submit(identity, fitted, pure=False)
        model_f = client.submit(identity, model, pure=False)
        shards = [client.submit(_objective, estimator, fitted_f, model_f, p, pure=False, **where(i))
                  for i, p in enumerate(prepared)]
        train_on_shards(estimator, client, model, shards, where, t0, split_every, callback,
                        desc="train semi-Markov CRF (lbfgs)")
        estimator.model_ = model
        return estimator
    finally:
        release(raw)
