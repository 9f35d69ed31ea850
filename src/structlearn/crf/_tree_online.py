"""``partial_fit`` of :class:`~structlearn.TreeCRF`: the online trainers (``l2sgd``, ``ap``, ``pa``,
``arow``) run one epoch per call on a batch of trees of a stream, their state kept between calls, while
the node- and edge-attribute vocabularies, the labels and the features grow with the stream.

The epochs are the ones ``fit`` runs (:mod:`structlearn.crf._tree_online_trainers`: the same per-tree steps
and the same random draws); what is kept between calls is
:class:`~structlearn.crf.online_trainers.StreamState` plus the pending feature frequencies
(:func:`~structlearn.crf.features.grow_state_features`), as for
:meth:`structlearn.LinearChainCRF.partial_fit` (:mod:`._crf_online`, whose stream record and checks are
reused here).
"""
import time

import numpy as np

from . import online_trainers as online
from . import _tree_online_trainers as tree_online
from .features import AttributeVocabulary, grow_state_features
from ._tree_potentials import TreeFeatureModel
from ..utils.interrupts import as_interrupt
from ._online import (ChainCRFStreamMixin, commit_stream, new_stream_state, open_stream, roll_back, stream_classes,
                      stream_epoch)

__all__ = ["TreeCRFStreamMixin", "tree_edges", "tree_index_in"]



def _feature_positions(old_ptr, old_label, new_ptr, new_label, n_labels, relabel=None):
    """Positions among the new (attribute, label) features of the old ones (int64, one per old
    feature); ``relabel`` maps old label ids to new ones. ValueError if one is missing."""
    old_label = old_label if relabel is None else relabel(old_label)
    keys = np.repeat(np.arange(len(old_ptr) - 1, dtype=np.int64), np.diff(old_ptr)) * n_labels + old_label
    keys2 = np.repeat(np.arange(len(new_ptr) - 1, dtype=np.int64), np.diff(new_ptr)) * n_labels + new_label
    if not keys.size:
        return np.zeros(0, np.int64)
    order = np.argsort(keys2, kind="stable")
    at = np.minimum(np.searchsorted(keys2[order], keys), max(keys2.size - 1, 0))
    if keys2.size == 0 or not np.array_equal(keys2[order[at]], keys):
        raise ValueError("a feature of the model is missing from the grown model")
    return order[at].astype(np.int64)


def _pair_relabel(K, K2):
    """Pair index child·K + parent of K labels -> the same pair among K2 ≥ K labels."""
    return lambda p: (p // K) * K2 + p % K


def tree_edges(nodes, local, yy, K, all_possible, old_edges=None, K0=0):
    """The batch's parents and edge features.

    Parameters
    ----------
    nodes : Packed
        The batch's nodes (``lengths``, ``offsets``).
    local : ndarray of int64, shape (N,)
        Parent of every node within its tree, -1 at roots.
    yy : ndarray of int64, shape (N,)
        Label ids of the nodes.
    K : int
        Number of labels.
    all_possible : bool
        Every (child, parent) label pair is an edge feature.
    old_edges : ndarray of bool, shape (K0, K0), optional
        Edge features kept from an earlier model (its labels first).
    K0 : int, default 0
        Labels of the earlier model.

    Returns
    -------
    gpar : ndarray of int64, shape (N,)
        Parent of every node in the batch, -1 at roots.
    edge_features : ndarray of bool, shape (K, K)
        ``[child label, parent label]``: all pairs, or those of ``old_edges`` and of the batch's edges.
    """
    seq = np.repeat(np.arange(len(nodes.lengths)), nodes.lengths)
    gpar = np.where(local >= 0, local + nodes.offsets[:-1][seq], -1)
    ch = np.flatnonzero(local >= 0)
    if all_possible:
        edge_features = np.ones((K, K), bool)
    else:
        edge_features = np.zeros((K, K), bool)
        if old_edges is not None:
            edge_features[:K0, :K0] = old_edges
        edge_features[yy[ch], yy[gpar[ch]]] = True
    return gpar, edge_features


def tree_index_in(old, grown):
    """Positions in ``grown``'s parameter vector of the parameters of ``old`` (int64, (old.n_params,)).

    Both are :class:`~structlearn.crf._tree_potentials.TreeFeatureModel`; ``grown`` is ``old`` after its
    node / edge attributes, labels and features grew (attribute ids and labels 0..K-1 keep their
    meaning, every feature of ``old`` is still there). Layout (see :mod:`structlearn.crf._tree_potentials`):
    state features, K² edges (child, parent), edge-attribute features (pair index child·K + parent,
    renumbered for the grown K), K root labels. Cost O(P log P).

    Raises
    ------
    ValueError
        ``grown`` has fewer labels or attributes than ``old``, or lacks one of its features.
    """
    K, K2 = old.n_labels, grown.n_labels
    if K2 < K or len(grown.attr_ptr) < len(old.attr_ptr) or len(grown.edge_attr_ptr) < len(old.edge_attr_ptr):
        raise ValueError(f"the model ({len(old.attr_ptr) - 1} attributes, {K} labels) is not contained in "
                         f"the grown one ({len(grown.attr_ptr) - 1} attributes, {K2} labels)")
    state = _feature_positions(old.attr_ptr, old.feat_label, grown.attr_ptr, grown.feat_label, K2)
    eattr = _feature_positions(old.edge_attr_ptr, old.edge_feat_pair, grown.edge_attr_ptr,
                               grown.edge_feat_pair, K2 * K2, _pair_relabel(K, K2))
    F2, Fe2 = grown.n_state, grown.n_edge_attr
    i, j = np.divmod(np.arange(K * K, dtype=np.int64), K)
    labels = np.arange(K, dtype=np.int64)
    return np.concatenate([state, F2 + i * K2 + j, F2 + K2 * K2 + eattr,
                           F2 + K2 * K2 + Fe2 + labels]).astype(np.int64)


class TreeCRFStreamMixin:
    """``partial_fit`` for :class:`~structlearn.TreeCRF` (which provides ``_encode``, ``_forbidden``,
    ``_check_gold_allowed`` and the label helpers of ``CRFBase``)."""

    _check_labels_known = ChainCRFStreamMixin._check_labels_known

    def partial_fit(self, X, y, classes=None, *, parents=None, edge_attributes=None, n_sequences=None):
        """One epoch of the online trainer on a batch of trees of a stream, continuing from the
        previous calls.

        The batch's trees are visited in an order shuffled by ``random_state`` (one generator for the
        whole stream) and the trainer's update applied per tree, exactly as one epoch of :meth:`fit`
        with the same ``algorithm`` (:mod:`structlearn.crf._tree_online_trainers`): on a first call,
        ``partial_fit(X, y, parents=P)`` gives the weights of ``fit(X, y, parents=P)`` with
        ``max_iterations=1`` (bitwise), and for ap/pa/arow k calls on the same data those of
        ``max_iterations=k`` (l2sgd: with ``n_sequences`` = the number of trees).

        Kept between calls: the weights and the trainer's state — ap/pa: the raw weights, the
        averaging sums and the counter (``coef_`` is the averaged weights, as ``fit`` returns); arow:
        the weights and the diagonal variances; l2sgd: the weights (with their lazy L2 scale), the step
        counter t and η0, calibrated as ``fit`` does (``calibration_*``) on the first batch only, the
        rate η_t = η0 / (1 + λ η0 t) with t continuing across calls. ``coef_`` after each call is what
        :meth:`predict` uses, so prediction between calls works.

        L2 weight of l2sgd: λ = 2·c2 / n with n = ``n_sequences`` if given, else the number of trees
        seen so far by the stream (this batch included; a tree passed again counts again). Trees are
        counted as the trainers visit them: non-empty trees, and with ``allow_forest`` each root's
        tree. On data of n trees the objective is then ``fit``'s, ``-Σ log p(y|x) + c2‖w‖²``; for
        several passes over a fixed training set give its size as ``n_sequences``.

        Growth: node attributes, edge attributes, labels and the features over them new in a batch
        are added (their weights and sums 0, AROW variances ``variance``); nothing is removed — the
        (attribute, label) state features, the (child label, parent label) edge features and the
        (edge attribute, child label, parent label) features. ``min_freq`` is applied to the
        frequencies counted over all batches seen so far (state features with :meth:`fit`'s
        frequency rule, see ``root_features``); ``all_possible_states`` / ``all_possible_edges`` give
        every attribute / edge attribute seen so far every label / label pair seen so far;
        ``forbidden_edges`` pairs naming a label not seen yet apply once it appears. Once the stream
        has edge attributes every batch must pass ``edge_attributes`` (as :meth:`predict` needs them);
        they may first appear in a later batch. With ``classes`` on the first call the label set is
        fixed then (scikit-learn's convention): labels in that order, a later label outside it is an
        error.

        The first call on an estimator that is not fitted starts a stream. After :meth:`fit` or
        :meth:`load` (or an assignment of ``coef_``, or a change of ``algorithm``) the next call
        continues from the fitted weights, vocabularies, labels and features; the trainer's own state
        restarts (averaging from the fitted weights, counter 1; AROW variances ``variance``; l2sgd:
        t = 0, η0 calibrated on that batch, n counted from that call). :meth:`fit` after
        ``partial_fit`` starts afresh; to restart a stream use :func:`sklearn.base.clone`.

        Parameters
        ----------
        X : list of B trees, each a list of items (dict attribute -> value or list of attribute strings)
            The batch.
        y : list of B lists of labels
            One label per node.
        classes : list of labels, optional
            The whole label set, fixed on the first call; on later calls None or the same set.
        parents : list (per tree) of array-like of int
            Parent index of every node within its tree, -1 for the root. Required.
        edge_attributes : list (per tree) of list (per node) of str, dict or list of str, optional
            Attributes of the edge from each node to its parent (the root's entry is ignored).
        n_sequences : int, optional
            l2sgd only (ignored by ap/pa/arow): the n of λ = 2·c2 / n, in trees (see above).

        Returns
        -------
        self
            With ``coef_``, ``model_``, ``classes_``, ``attributes_``, ``edge_attributes_`` for the
            model so far, ``n_iter_`` the number of epochs (calls) of the stream, ``converged_``
            (ap/pa/arow: the batch's share of mislabelled nodes < ``epsilon``; l2sgd: False) and one
            ``training_log_`` entry per call: ``loss`` (l2sgd: Σ_batch -log p(y|x) during the pass +
            c2‖w‖²·B/n; ap: mislabelled nodes; pa/arow: the hinge losses), ``n_sequences`` (B, trees
            visited) and the trainer's fields as in :meth:`fit`.

        Raises
        ------
        ValueError
            ``algorithm="lbfgs"`` (it needs the whole data set: use :meth:`fit`); ``classes`` not a
            list of distinct labels, given after the first call without fixing the labels then, or a
            different set; a label outside the fixed ``classes``; an empty batch; no
            ``edge_attributes`` once the stream has edge attributes; ``n_sequences`` not a positive
            int; the errors of :meth:`fit` (bad parent pointers, items and labels of different
            lengths, a gold label pair that ``forbidden_edges`` forbids, ...). The estimator is
            unchanged after an error.

        Notes
        -----
        Cost per call: one epoch, per tree one max-product (ap/pa/arow) or upward–downward (l2sgd)
        pass, O(T·K²), plus a dense O(P) step per tree (P parameters), in a Python loop over the
        trees (≈ 0.5–1 ms each); the first l2sgd call adds up to 2·``calibration_candidates`` trial
        passes over ``calibration_samples`` trees. Growth costs O(P log P) to move the state into the
        grown layout plus O(nnz log nnz) counting. Memory: the batch plus O(P) state and the
        frequencies of the pairs still below ``min_freq``.

        References
        ----------
        CRFsuite's trainers (Okazaki 2007); Cohn & Blunsom (2005) tree CRFs; L. Bottou, "Stochastic
        gradient descent tricks" (2012); Collins (2002); Crammer et al. (2006); Mejer & Crammer (2010).
        """
        t0 = time.perf_counter()
        fixed, stream, coef, new_stream, warm, saved = open_stream(self, classes, n_sequences,
                                                                   "int (a number of trees)")
        if new_stream and not warm:  # a fresh stream
            vocab, evocab = AttributeVocabulary(), AttributeVocabulary()
        else:
            vocab, evocab = self._vocab, self._evocab
        stream_classes(self, new_stream, warm, fixed)
        if edge_attributes is None and len(evocab):
            roll_back(self, saved, [])
            raise ValueError("this TreeCRF's stream has edge attributes; pass `edge_attributes=` (one entry "
                             "per node) with every batch")
        n_attr0, n_eattr0 = len(vocab), len(evocab)
        try:
            if new_stream:
                stream = new_stream_state(self, fixed, warm, coef)
            fixed_now = stream.fixed_classes
            nodes, local, edges, layout, batch = self._encode(X, parents, edge_attributes, True, vocab, evocab)
            self._check_nonempty(nodes, "nodes", "tree")
            if fixed_now:
                self._check_labels_known(y)
            yy = self._encode_labels(y, nodes, grow=not fixed_now)
            model, pending = self._grown_tree_model(stream, vocab, evocab, nodes, local, edges, yy,
                                                    known_only=not fixed_now)
            self._check_gold_allowed(yy, nodes, local, model.forbidden, model.forbidden_root)
            y_int = layout.rows_to_internal(yy)
            featurize_seconds = time.perf_counter() - t0

            # the trainer's state in the grown layout, then one epoch (the stream's state changes from
            # here: after an error it is dropped and the next call restarts it from coef_)
            old = stream.model
            if stream.trainer is None:
                stream.trainer = online.StreamState(self.algorithm, model.n_params, stream.rng, self.variance)
            elif (old.n_labels, old.n_state, old.n_edge_attr) != (model.n_labels, model.n_state,
                                                                  model.n_edge_attr):
                self.__dict__.pop("_stream", None)
                stream.trainer.remap(tree_index_in(old, model), model.n_params, self.variance)
            trainer = stream.trainer
            w, entry, converged = stream_epoch(self, tree_online, trainer, model, batch, y_int,
                                               tree_online.n_trees(batch), nodes.n_items, n_sequences)
        except BaseException as exc:
            roll_back(self, saved, [(vocab, n_attr0), (evocab, n_eattr0)])
            raise as_interrupt(exc)  # the exception itself, or the Ctrl-C a Numba kernel wrapped

        self._vocab, self._evocab = vocab, evocab
        self.attributes_ = vocab.names
        self.edge_attributes_ = evocab.names
        commit_stream(self, stream, model, pending, w, trainer, converged, entry, new_stream, featurize_seconds,
                      t0)
        return self

    def _grown_tree_model(self, stream, vocab, evocab, nodes, local, edges, yy, known_only):
        """The feature model after the batch (user-order ``nodes``, ``local`` parents, ``edges``,
        labels ``yy``): the stream's model (if any) grown by the batch's attributes, labels and
        features, and the pending frequencies after it: (node pending, edge pending, K of the edge
        pending's pair indices)."""
        K, A, E = len(self.classes_), len(vocab), len(evocab)
        old = stream.model
        K0 = 0 if old is None else old.n_labels
        node_pending, edge_pending, Kp = stream.pending if stream.pending is not None else (None, None, K)
        attr_ptr, feat_label, node_pending = grow_state_features(
            nodes, yy, A, K, self.min_freq, self.all_possible_states,
            frequency="count" if self.root_features else "value",
            features=None if old is None else (old.attr_ptr, old.feat_label), pending=node_pending)
        gpar, edge_features = tree_edges(nodes, local, yy, K, self.all_possible_edges,
                                         None if old is None else old.edge_features, K0)
        if edge_pending is not None and Kp != K:  # pair indices child·K + parent for the grown K
            edge_pending = (edge_pending[0], _pair_relabel(Kp, K)(edge_pending[1]), edge_pending[2])
        eptr = epair = None
        if edges is not None and E:
            feats = None
            if old is not None and old.n_edge_attr:
                feats = (old.edge_attr_ptr, _pair_relabel(K0, K)(old.edge_feat_pair))
            pair = np.where(local >= 0, yy * K + yy[np.maximum(gpar, 0)], 0)
            eptr, epair, edge_pending = grow_state_features(edges, pair, E, K * K, self.min_freq,
                                                            self.all_possible_edges, features=feats,
                                                            pending=edge_pending)
        elif old is not None and old.n_edge_attr:  # unreachable: batches must then bring edge attributes
            raise ValueError("`edge_attributes` missing for a stream with edge attributes")
        forb, froot = self._forbidden(K, known_only)
        model = TreeFeatureModel(attr_ptr, feat_label, K, edge_features, eptr, epair, forb, froot,
                                 root=bool(self.root_features))
        return model, (node_pending, edge_pending, K)
