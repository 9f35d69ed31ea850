"""Viterbi tagging with a linear-chain CRF feature model, shared by ``LinearChainCRF.predict`` and the fast
path of ``structlearn tag``.

One function per step of prediction, none of them a second copy of a recursion:

1. :func:`chain_structure`: items -> :class:`~structlearn.crf.features.Packed` (the attribute vocabulary
   of the model; unknown attributes dropped) -> the engine's :class:`~structlearn.engine.structures.LinearChain`
   whose potentials the feature model (:meth:`ChainFeatureModel.structure`) computes from the weights;
2. :func:`viterbi_labels`: the engine's Viterbi (``structure.argmax()``) -> label sequences;
3. :func:`predict_labels`: both.

:func:`chain_model_from_arrays` rebuilds the feature model from the arrays of a ``linear-chain-crf``
model file (``LinearChainCRF.load`` and :mod:`structlearn.io.chain_tagger` both read it so).

This module imports NumPy, :mod:`structlearn.utils.validation`, :mod:`.crf` and :mod:`.features` only (no
scikit-learn, no estimator), so the command line can tag without importing the estimators.
"""
import numpy as np

from ..utils.validation import check_shapes

__all__ = ["CHAIN_FORMAT", "CHAIN_FORMAT_VERSION", "chain_model_from_arrays", "chain_structure",
           "viterbi_labels", "predict_labels", "predict_labels_compiled", "check_state_scores"]

#: the model-file format name and version of :class:`~structlearn.LinearChainCRF` (``structlearn learn``'s
#: default): the header's ``format`` / ``version`` (:mod:`structlearn.utils.modelfile`)
CHAIN_FORMAT = "linear-chain-crf"
CHAIN_FORMAT_VERSION = 1


def chain_model_from_arrays(arrays, n_labels, model_class=None):
    """The :class:`~structlearn.crf._potentials.ChainFeatureModel` stored in a ``linear-chain-crf`` model file.

    Parameters
    ----------
    arrays : mapping str -> ndarray
        The file's arrays: ``attr_ptr`` int64 (A + 1,), ``feat_label`` int64 (F,), ``trans_features``,
        ``forbidden`` bool (K, K), ``forbidden_start``, ``forbidden_end`` bool (K,); optional
        ``start_end`` (0-d bool; default True: files written before it existed had start/end weights)
        and ``trans_attr`` int64 (Ta,).
    n_labels : int
        K, the number of labels (``classes`` of the file's metadata).
    model_class : type, optional
        ``ChainFeatureModel`` (default) or its weight layout alone,
        :class:`~structlearn.crf._layout.ChainLayout` (NumPy only: no kernel is imported).

    Returns
    -------
    ChainFeatureModel (or ``model_class``)

    Raises
    ------
    KeyError
        A required array is missing (``LinearChainCRF.load`` reports it as a malformed model file).
    ValueError
        Index arrays that do not fit each other (:meth:`ChainLayout.check`), masks of the wrong shape, a
        ``start_end`` that is not one boolean, e.g. a corrupted file: the kernels would otherwise read and
        write outside their arrays. The message names the array.
    """
    if model_class is None:
        from ._potentials import ChainFeatureModel as model_class
    K = int(n_labels)
    # the masks' shapes before the constructor combines them (a NumPy broadcast error would not name them)
    check_shapes(arrays, {"trans_features": (K, K), "forbidden": (K, K), "forbidden_start": (K,),
                          "forbidden_end": (K,)})
    if np.ndim(arrays.get("start_end", True)) != 0:
        raise ValueError(f"'start_end' must be a single boolean; got shape {np.shape(arrays['start_end'])}")
    return model_class(arrays["attr_ptr"], arrays["feat_label"], int(n_labels), arrays["trans_features"],
                       arrays["forbidden"], arrays["forbidden_start"], arrays["forbidden_end"],
                       start_end=bool(arrays.get("start_end", True)), trans_attr=arrays.get("trans_attr")).check()


def chain_structure(model, coef, vocab, X, *, lengths=None, constraint_mask=None, check=None):
    """Encode ``X`` against ``vocab`` and build the chain of its sequences under the weights ``coef``.

    Parameters
    ----------
    model : ChainFeatureModel (or any feature model with ``structure(w, packed, allowed)``)
    coef : ndarray of float64, shape (n_params,)
        The weights (``LinearChainCRF.coef_``).
    vocab : AttributeVocabulary
        The model's attribute vocabulary (frozen: attributes not in it are dropped).
    X : list of sequences of items, or a scipy.sparse matrix (N, A) with ``lengths``
        Items as :meth:`AttributeVocabulary.encode` takes them.
    lengths : array-like of int, optional
        Sequence lengths of a sparse ``X``.
    constraint_mask : callable Packed -> ndarray of bool (N, K), optional
        The allowed labels of every item (constrained Viterbi); None: unconstrained.
    check : callable (structure, packed, allowed) -> None, optional
        Called when a mask is given, e.g. to raise when the constraints leave a sequence no labeling.

    Returns
    -------
    packed : Packed
        The encoded items (``offsets`` (B + 1,) int64 split the N items into the B sequences).
    structure : LinearChain
        Log-space potentials: unary (N, K), transitions (K, K) "from, to" (or (N, K, K)), start/end (K,).

    Raises
    ------
    ValueError
        Malformed ``X`` (:meth:`AttributeVocabulary.encode`), a mask of the wrong shape.

    Notes
    -----
    Time O(nnz · labels per attribute) for the state potentials (plus O(N · K²) with transition
    attributes); memory O(N · K).
    """
    packed = vocab.encode(X, lengths)
    allowed = None if constraint_mask is None else constraint_mask(packed)
    structure = model.structure(coef, packed, allowed)
    if allowed is not None and check is not None:
        check(structure, packed, allowed)
    return packed, structure


def check_state_scores(scores, packed):
    """Refuse state scores that are +inf or NaN (finite attribute values whose products with the weights
    overflow float64), naming the sequence and position: the check the engine's chains make of their
    potentials (:func:`~structlearn.utils.validation.check_log_potentials`), for feature models whose
    structures take state scores unchecked (``HigherOrderCRF``'s pattern chain).

    Parameters
    ----------
    scores : ndarray of float64, shape (N, Z)
        One row of state scores per item of ``packed``.
    packed : Packed
        The items (``offsets`` (B + 1,) split them into sequences).

    Raises
    ------
    ValueError
        ``sequence b, position t: ...`` for the first item with a +inf or NaN score.

    Notes
    -----
    Time O(N · Z), no copy of ``scores`` when they are fine.
    """
    ok = scores < np.inf  # False for +inf and NaN
    if ok.all():
        return
    n, z = (int(i) for i in np.argwhere(~ok)[0])
    b = int(np.searchsorted(packed.offsets, n, side="right")) - 1
    raise ValueError(f"sequence {b}, position {n - int(packed.offsets[b])}: a state score is "
                     f"{scores[n, z]} (expected finite log-potentials; the item's attribute values times "
                     f"the model's weights overflow float64): scale the attribute values down")


def viterbi_labels(structure, packed, classes):
    """The Viterbi labeling of every sequence of ``structure``, as lists of labels.

    Parameters
    ----------
    structure : LinearChain (or any chain-like structure with ``argmax()`` -> int64 (N,))
    packed : Packed
        The items of the structure (its ``offsets`` split the labels into sequences).
    classes : sequence
        The labels, indexed by label id (``classes_``).

    Returns
    -------
    list (B) of lists of labels
        The elements of ``classes`` (their own Python objects); an empty list for an empty sequence.

    Notes
    -----
    Viterbi is the max-product recursion of the engine (Rabiner 1989, eq. 30-35; Lafferty et al. 2001):
    time O(N · K²), memory O(N · K).
    """
    return _labels_by_sequence(structure.argmax() if packed.n_items else np.zeros(0, np.int64), packed, classes)


def _labels_by_sequence(label_ids, packed, classes):
    labels = np.asarray(classes, dtype=object)[label_ids] if packed.n_items else np.zeros(0, object)
    off = packed.offsets
    return [list(labels[off[b]:off[b + 1]]) for b in range(len(packed.lengths))]


def predict_labels(model, coef, vocab, classes, X, *, lengths=None, constraint_mask=None, check=None):
    """The most likely label sequence of every sequence of ``X`` (:func:`chain_structure`, then
    :func:`viterbi_labels`): what ``LinearChainCRF.predict`` returns, bit for bit.

    Parameters
    ----------
    model, coef, vocab, X, lengths, constraint_mask, check
        As :func:`chain_structure`.
    classes : sequence
        The labels, indexed by label id.

    Returns
    -------
    list (B) of lists of labels

    Raises
    ------
    ValueError
        As :func:`chain_structure` (and whatever ``check`` raises).

    Notes
    -----
    Time O(nnz · labels per attribute + N · K²), memory O(N · K).
    """
    packed, structure = chain_structure(model, coef, vocab, X, lengths=lengths,
                                        constraint_mask=constraint_mask, check=check)
    return viterbi_labels(structure, packed, classes)


def predict_labels_compiled(layout, coef, vocab, classes, X, kernels, *, lengths=None):
    """:func:`predict_labels` through the ahead-of-time compiled kernels (:mod:`structlearn.engine.kernels.aot`),
    without Numba: the same labels, bit for bit.

    Parameters
    ----------
    layout : ChainLayout (or ChainFeatureModel) without transition attributes
    coef, vocab, classes, X, lengths
        As :func:`predict_labels`.
    kernels : module
        :func:`structlearn.engine.kernels.aot.load`'s module.

    Returns
    -------
    list (B) of lists of labels, or None
        None when a sequence has no feasible labeling (forbidden transitions) or a state score is not
        finite (huge attribute values): :func:`predict_labels` then raises the engine's error naming it.

    Raises
    ------
    ValueError
        Malformed ``X`` (:meth:`AttributeVocabulary.encode`); a layout with transition attributes.

    Notes
    -----
    Time O(nnz · labels per attribute + N · K²) on one thread, memory O(N · K).
    """
    if layout.n_trans_attr:
        raise ValueError("predict_labels_compiled: the compiled kernels take stationary transitions; this "
                         f"model has {layout.n_trans_attr} transition attributes")
    packed = vocab.encode(X, lengths)
    K = layout.n_labels
    w = np.ascontiguousarray(coef, dtype=np.float64)
    unary = kernels.state_potentials(np.ascontiguousarray(w[:layout.n_state]), packed.item_ptr, packed.item_attr,
                                     np.ascontiguousarray(packed.item_val, dtype=np.float64), layout.attr_ptr,
                                     layout.feat_label, K)
    if not np.all(unary < np.inf):  # +inf or NaN: attribute values whose scores overflow; the engine refuses
        return None                 # them (predict_labels raises its error), so must this path
    trans, start, end = layout.transition_potentials(w)
    labels = np.full(packed.n_items, -1, dtype=np.int64)
    best = np.zeros(len(packed.lengths))
    kernels.viterbi(unary, np.ascontiguousarray(trans, dtype=np.float64).reshape(1, K, K),
                    np.ascontiguousarray(start, dtype=np.float64), np.ascontiguousarray(end, dtype=np.float64),
                    packed.offsets, labels, best)
    if np.any(labels < 0):
        return None
    return _labels_by_sequence(labels, packed, classes)
