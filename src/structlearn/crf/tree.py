"""``TreeCRF``: a scikit-learn estimator that labels every node of a tree (tree-structured CRF)."""
import time

import numpy as np

from . import _tree_online_trainers as tree_online
from .objectives import TreeCLL
from .features import AttributeVocabulary, Packed, build_state_features
from ..utils.validation import check_shapes
from ._tree_potentials import TreeBatch, TreeFeatureModel
from ..engine.structures.tree import validate_parents
from ._base import CRFBase, label_key
from ..learning.posterior_check import check_posteriors
from ..learning.params import (ALGORITHM, ALL_POSSIBLE_STATES, LBFGS_PARAMS, MIN_FREQ, ONLINE_PARAMS, RANDOM_STATE,
                               N_JOBS, VERBOSE, Param)
from ._tree_online import TreeCRFStreamMixin, tree_edges

__all__ = ["TreeCRF", "check_parents", "parents_from_ids"]

_FORMAT = "tree-crf"
_VERSION = 1
ROOT = "<root>"


# ---------------------------------------------------------------------------------------------------
# tree input: parent pointers
# ---------------------------------------------------------------------------------------------------
def parents_from_ids(node_ids, parent_ids):
    """Turn node ids and parent ids (as in CRFSuite-0.13 tree files) into parent *indices*.

    Parameters
    ----------
    node_ids : list (per tree) of list of hashable
        Id of every node, unique within its tree (e.g. ``nodes`` of
        :func:`~structlearn.io.read_crfsuite_tree`).
    parent_ids : list (per tree) of list
        Id of every node's parent; ``-1``, ``None`` or ``"_"`` for a root.

    Returns
    -------
    parents : list of ndarray of int64
        ``parents[s][t]`` is the position (in tree s) of the parent of node t, -1 for a root.

    Raises
    ------
    ValueError
        Lists of different lengths, a duplicate node id, or a parent id that names no node of the same
        tree (a missing parent).
    """
    if len(node_ids) != len(parent_ids):
        raise ValueError(f"`node_ids` has {len(node_ids)} trees but `parent_ids` has {len(parent_ids)}")
    out = []
    for s, (ids, pids) in enumerate(zip(node_ids, parent_ids)):
        if len(ids) != len(pids):
            raise ValueError(f"tree {s}: {len(ids)} node ids but {len(pids)} parent ids")
        pos = {}
        for t, i in enumerate(ids):
            if i in pos:
                raise ValueError(f"tree {s}: node id {i!r} appears twice (nodes {pos[i]} and {t}); node "
                                 f"ids must be unique within a tree")
            pos[i] = t
        row = np.empty(len(ids), dtype=np.int64)
        for t, p in enumerate(pids):
            if p is None or p == -1 or p == "_":
                row[t] = -1
            elif p in pos:
                row[t] = pos[p]
            else:
                raise ValueError(f"tree {s}, node {t} (id {ids[t]!r}): parent id {p!r} names no node of "
                                 f"the same tree (missing parent); use -1, None or '_' for the root")
        out.append(row)
    return out


def check_parents(parents, lengths, *, allow_forest=False, name="parents"):
    """Validate per-tree parent indices against the tree sizes.

    Parameters
    ----------
    parents : list (per tree) of array-like of int
        ``parents[s][t]``: index (within tree s) of the parent of node t, -1 for a root.
    lengths : ndarray of int64, shape (B,)
        Number of nodes of every tree.
    allow_forest : bool
        Accept several roots per entry (a forest); otherwise exactly one root is required.

    Returns
    -------
    local : ndarray of int64, shape (N,)
        Packed local parent indices.
    top : ndarray of int64, shape (N,)
        Packed row of the root of every node's tree (its component within a forest).

    Raises
    ------
    ValueError
        Missing ``parents``, wrong number of trees or nodes, non-integer or missing (None) entries,
        an index out of range, a node that is its own parent, no root, several roots (unless
        ``allow_forest``), or a cycle. The message names the tree and the node.

    Notes
    -----
    Cost: O(N log depth) vectorised (pointer jumping).
    """
    if parents is None:
        raise ValueError(f"`{name}` is required: one sequence of parent indices per tree (-1 for the "
                         f"root), e.g. fit(X, y, parents=[[1, -1, 1], ...])")
    if isinstance(parents, (str, bytes)) or not hasattr(parents, "__len__"):
        raise ValueError(f"`{name}` must be a list with one sequence of parent indices per tree; got "
                         f"{type(parents).__name__}")
    B = len(lengths)
    if len(parents) != B:
        raise ValueError(f"`{name}` has {len(parents)} entries but X has {B} trees; give one sequence of "
                         f"parent indices per tree")
    rows = []
    for s, p in enumerate(parents):
        arr = np.asarray(p)
        T = int(lengths[s])
        if arr.ndim != 1 or arr.shape[0] != T:
            raise ValueError(f"`{name}[{s}]` has shape {arr.shape} but tree {s} has {T} nodes; give one "
                             f"parent index per node (-1 for the root)")
        if T and not np.issubdtype(arr.dtype, np.integer):
            if arr.dtype == object and any(v is None for v in arr):
                t = next(i for i, v in enumerate(arr) if v is None)
                raise ValueError(f"`{name}[{s}][{t}]` is None (missing parent): every node needs the "
                                 f"index of its parent, -1 for the root")
            raise ValueError(f"`{name}[{s}]` must hold integer node indices (-1 for the root); got "
                             f"dtype {arr.dtype}")
        rows.append(arr.astype(np.int64))
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    N = int(offsets[-1])
    packed = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    local, gpar = validate_parents(packed, lengths, offsets, name=name, per_tree=True,
                                   allow_forest=allow_forest,
                                   forest_hint=". Pass allow_forest=True to label each root's tree "
                                               "independently")
    seq = np.repeat(np.arange(B), lengths)
    glob = np.where(gpar >= 0, gpar, np.arange(N))
    top = glob.copy()
    depth = int(lengths.max()) if B else 1
    for _ in range(int(np.ceil(np.log2(max(depth, 2)))) + 1):  # top = 2^j-th ancestor, roots absorb
        top = top[top]
    bad = np.flatnonzero(local[top] != -1) if N else np.zeros(0, np.int64)
    if bad.size:
        n = int(bad[0])
        s, o = int(seq[n]), int(offsets[seq[n]])
        m = n
        for _ in range(int(lengths[s])):  # walk onto the cycle
            m = int(glob[m])
        cyc = [m - o]
        k = int(glob[m])
        while k != m and len(cyc) < 6:
            cyc.append(k - o)
            k = int(glob[k])
        path = " -> ".join(map(str, cyc)) + (" -> ..." if k != m else f" -> {m - o}")
        raise ValueError(f"`{name}[{s}]` contains a cycle through node {m - o} (parent chain {path}); "
                         f"parent pointers must form a tree")
    return local, top


class _Layout:
    """How user trees map onto the internal batch (forests split into one tree per root).

    ``perm[i]`` is the user row of internal row i (None: identity); ``tree_of[b]`` the user tree of
    internal tree b; ``lengths``/``offsets`` are the user trees'.
    """

    __slots__ = ("perm", "tree_of", "lengths", "offsets")

    def __init__(self, perm, tree_of, lengths, offsets):
        self.perm, self.tree_of, self.lengths, self.offsets = perm, tree_of, lengths, offsets

    def rows_to_user(self, flat):
        """Internal row order -> user row order (along axis 0)."""
        if self.perm is None:
            return flat
        out = np.empty_like(flat)
        out[self.perm] = flat
        return out

    def rows_to_internal(self, flat):
        return flat if self.perm is None else flat[self.perm]

    def per_tree(self, values):
        """Sum per-internal-tree values (B_int,) into per-user-tree values (B,)."""
        if self.perm is None:
            return values
        out = np.zeros(len(self.lengths))
        np.add.at(out, self.tree_of, values)
        return out

    def split(self, flat):
        """Split user-order rows into per-tree pieces."""
        return [flat[self.offsets[b]:self.offsets[b + 1]] for b in range(len(self.lengths))]


def _take_rows(packed, rows, lengths):
    """Packed items of the given rows (in that order) with new sequence ``lengths``."""
    starts, ends = packed.item_ptr[rows], packed.item_ptr[rows + 1]
    cnt = ends - starts
    ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
    idx = np.repeat(starts - ptr[:-1], cnt) + np.arange(int(ptr[-1]))
    return Packed(ptr, packed.item_attr[idx], packed.item_val[idx], lengths)


# ---------------------------------------------------------------------------------------------------
# estimator
# ---------------------------------------------------------------------------------------------------
class TreeCRF(TreeCRFStreamMixin, CRFBase):
    """Tree-structured conditional random field: one label per node of a rooted tree.

    Scores (Cohn & Blunsom 2005; belief propagation, Pearl 1982)::

        s(x, y) = Σ_n Σ_a x_{n,a} w[a, y_n]                         node attributes × label
                + Σ_{c ≠ root} w[y_c, y_parent(c)]                 child label × parent label
                + Σ_{c ≠ root} Σ_e z_{c,e} w[e, y_c, y_parent(c)]  × attributes of the edge (optional)
                + w_root[y_root]                                    (only with root_features)

    and p(y | x) = exp(s(x, y)) / Z(x). Inference is exact on the tree (the engine's
    :class:`~structlearn.engine.structures.Tree`: log-space upward/downward passes, max-product with per-child
    back-pointers), so nodes may come in any order and trees may be arbitrarily deep.

    Input
    -----
    ``X`` is a list of trees, each a list of node items (dicts attribute -> value or lists of attribute
    strings, as for :class:`~structlearn.LinearChainCRF`); ``y`` a list of per-node label lists. The tree
    shape is passed separately as ``parents=``: per tree, the index (0-based position in that tree's
    list) of every node's parent, -1 for the root — e.g. ``head - 1`` of a CoNLL-U sentence. Ids such as
    those of CRFSuite-0.13 tree files convert with :func:`parents_from_ids`. Optional
    ``edge_attributes=``: per tree, per node, the attributes of the edge from the node to its parent
    (a string such as the dependency relation, a dict or a list of strings; the root's entry is
    ignored); they add (edge attribute, child label, parent label) features.

    Parameters
    ----------
    algorithm : {"lbfgs", "l2sgd", "ap", "pa", "arow"}, default "lbfgs"
        ``lbfgs``: maximum likelihood with L-BFGS (L2: ``c2``), OWL-QN when ``c1 > 0``; the others are
        CRFsuite's online trainers, run here by a simple per-tree Python loop
        (:mod:`structlearn.crf._tree_online_trainers`; slower than the chain's Numba epochs); they also
        stream, one epoch per :meth:`partial_fit` call on a batch of trees.
    c1, c2, max_iterations, num_memories, epsilon, period, delta, linesearch, max_linesearch,
    calibration_eta, calibration_rate, calibration_samples, calibration_candidates,
    calibration_max_trials, pa_type, c, error_sensitive, averaging, variance, gamma, min_freq,
    all_possible_states :
        As :class:`~structlearn.LinearChainCRF` (CRFsuite's meanings and defaults).
    all_possible_edges : bool, default False
        Generate every (child label, parent label) pair (and, with edge attributes, every
        (edge attribute, pair)) as a feature, not only those seen in training.
    forbidden_edges : None or list of (child_label, parent_label)
        Label pairs with potential -inf on every edge; ``(label, "<root>")`` forbids ``label`` at the
        root.
    allow_forest : bool, default False
        Accept several roots in one entry of ``parents`` and label each root's tree independently
        (outputs are still per entry: k-best lists and probabilities of the whole forest). Otherwise a
        second root is an error.
    root_features : bool, default True
        Learn a weight for the label of the root. ``False`` is CRFSuite 0.13's tree model (which has no
        root feature; state features are then kept by CRFsuite's frequency rule, as
        :class:`~structlearn.LinearChainCRF` with ``start_end_features=False``), so its objective,
        weights and sequence probabilities are that model's. ``structlearn learn --structure tree``
        uses ``False`` unless ``-p root_features=1`` is given.
    random_state : None, int or RandomState
        Shuffling of online algorithms.
    verbose : bool
        Progress bar (tqdm).
    n_jobs : int or None, default None
        L-BFGS over worker processes on this machine, as :class:`~structlearn.LinearChainCRF`'s: the
        result is bitwise that of ``n_jobs=None`` and of any thread count.

    Attributes
    ----------
    classes_ : list of str
        Labels in order of first appearance in training.
    attributes_ : list of str
        Node attribute names seen in training.
    edge_attributes_ : list of str
        Edge attribute names seen in training (empty without ``edge_attributes``).
    state_features_ : dict (attribute, label) -> weight
    edge_features_ : dict (child_label, parent_label) -> weight (forbidden pairs -inf)
    edge_attribute_features_ : dict (edge_attribute, child_label, parent_label) -> weight
    root_features_ : dict label -> weight of the root label (empty without ``root_features``)
    n_iter_, converged_, training_log_, coef_, training_seconds_ :
        As :class:`~structlearn.LinearChainCRF`.

    Notes
    -----
    Cost per L-BFGS iteration: one upward–downward pass over the training trees, O(N·K²), plus
    O(nnz · labels per attribute) for potentials and gradient; with edge attributes the edge potentials
    and pair marginals are per edge, O(N·K²) memory.
    """

    _unit_noun = "tree"
    _parameters = (
        ALGORITHM, *LBFGS_PARAMS, *ONLINE_PARAMS, MIN_FREQ, ALL_POSSIBLE_STATES,
        Param("all_possible_edges", False, "bool",
              "every (child label, parent label) pair is an edge feature, not only those seen"),
        Param("forbidden_edges", None, "pairs|None",
              "(child_label, parent_label) pairs with potential -inf; (label, '<root>') forbids the label "
              "at the root"),
        Param("allow_forest", False, "bool", "several roots per tree: label each root's tree independently"),
        Param("root_features", True, "bool",
              "weights for the label of the root (False: CRFSuite 0.13's tree model, which has none)"),
        RANDOM_STATE, VERBOSE, N_JOBS)

    def __init__(self, algorithm="lbfgs", c1=0.0, c2=1.0, max_iterations=None, num_memories=6,
                 epsilon=1e-5, period=10, delta=1e-5, linesearch="MoreThuente", max_linesearch=20,
                 calibration_eta=0.1, calibration_rate=2.0, calibration_samples=1000,
                 calibration_candidates=10, calibration_max_trials=20, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, min_freq=0.0,
                 all_possible_states=False, all_possible_edges=False, forbidden_edges=None,
                 allow_forest=False, root_features=True, random_state=None, verbose=False,
                 n_jobs=None):
        self._store_params(locals())

    # ------------------------------------------------------------------------------------------------
    # encoding
    # ------------------------------------------------------------------------------------------------
    def _encode_edges(self, edge_attributes, lengths, local, vocab, grow, name="edge_attributes"):
        """Packed edge items (root rows empty) in user order."""
        if isinstance(edge_attributes, (str, bytes)) or not hasattr(edge_attributes, "__len__"):
            raise ValueError(f"`{name}` must be a list (one per tree) of per-node edge attributes; got "
                             f"{type(edge_attributes).__name__}")
        if len(edge_attributes) != len(lengths):
            raise ValueError(f"`{name}` has {len(edge_attributes)} entries but X has {len(lengths)} "
                             f"trees")
        items = []
        r = 0
        for s, row in enumerate(edge_attributes):
            if isinstance(row, (str, bytes, dict)) or not hasattr(row, "__len__") or \
                    len(row) != lengths[s]:
                got = len(row) if hasattr(row, "__len__") and not isinstance(row, (str, dict)) else \
                    type(row).__name__
                raise ValueError(f"`{name}[{s}]` must give one entry per node ({lengths[s]} nodes); got "
                                 f"{got}")
            cur = []
            for t, it in enumerate(row):
                if local[r + t] < 0 or it is None:
                    cur.append(())
                elif isinstance(it, str):
                    cur.append((it,))
                else:
                    cur.append(it)
            items.append(cur)
            r += len(row)
        return vocab.encode(items, grow=grow, name=name)

    def _encode(self, X, parents, edge_attributes, grow, vocab, evocab, edge_name="edge_attributes",
                parents_name="parents"):
        """(user-order Packed, local parents, user-order edge Packed or None, layout, internal batch).

        The internal batch has one tree per root (forests split), nodes grouped by tree.
        """
        nodes = vocab.encode(X, None, grow=grow)
        local, top = check_parents(parents, nodes.lengths, allow_forest=self.allow_forest,
                                   name=parents_name)
        edges = None
        if edge_attributes is not None:
            edges = self._encode_edges(edge_attributes, nodes.lengths, local, evocab, grow, edge_name)
        B = len(nodes.lengths)
        roots = np.flatnonzero(local == -1)
        if roots.size == np.count_nonzero(nodes.lengths):  # plain trees: internal = user order
            layout = _Layout(None, np.arange(B), nodes.lengths, nodes.offsets)
            return nodes, local, edges, layout, TreeBatch(nodes, local, edges)
        perm = np.argsort(top, kind="stable")  # group nodes by their root (which is ordered by tree)
        ilen = np.bincount(np.searchsorted(roots, top[perm]), minlength=roots.size).astype(np.int64)
        ioff = np.concatenate([[0], np.cumsum(ilen)])
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        seq = np.repeat(np.arange(roots.size), ilen)
        uoff = nodes.offsets
        useq = np.repeat(np.arange(B), nodes.lengths)
        gpar = np.where(local >= 0, local + uoff[:-1][useq], -1)[perm]  # user rows of the parents
        ipar = np.where(gpar >= 0, inv[np.maximum(gpar, 0)] - ioff[:-1][seq], -1)
        tree_of = np.searchsorted(uoff, roots, side="right") - 1
        layout = _Layout(perm, tree_of, nodes.lengths, nodes.offsets)
        ibatch = TreeBatch(_take_rows(nodes, perm, ilen), ipar,
                           None if edges is None else _take_rows(edges, perm, ilen))
        return nodes, local, edges, layout, ibatch

    def _forbidden(self, K, known_only=False):
        """(forbidden (child, parent) pairs (K, K), forbidden root labels (K,)) of ``forbidden_edges``;
        with ``known_only`` (labels growing with a stream) pairs naming a label not seen yet are left out
        until it appears."""
        forb = np.zeros((K, K), bool)
        froot = np.zeros(K, bool)
        spec = self.forbidden_edges
        if spec is None:
            return forb, froot
        if known_only:
            known = set(self._label_index) | {ROOT}
            spec = [(a, b) for a, b in spec if label_key(a) in known and label_key(b) in known]
        for a, b in self._label_pairs(spec, "forbidden_edges", (ROOT,)):
            if a == ROOT:
                raise ValueError(f"`forbidden_edges`: {ROOT!r} can only be the parent of a pair "
                                 f"(label, {ROOT!r}), which forbids the label at the root; got {(a, b)!r}")
            if b == ROOT:
                froot[self._label_index[a]] = True
            else:
                forb[self._label_index[a], self._label_index[b]] = True
        return forb, froot

    def _check_gold_allowed(self, yy, nodes, local, forb, froot):
        seq = np.repeat(np.arange(len(nodes.lengths)), nodes.lengths)
        gpar = np.where(local >= 0, local + nodes.offsets[:-1][seq], -1)
        cls = self.classes_
        bad = np.flatnonzero((local < 0) & froot[yy])
        if bad.size:
            n = int(bad[0])
            raise ValueError(f"training tree {seq[n]} has label {cls[yy[n]]!r} at its root (node "
                             f"{n - nodes.offsets[seq[n]]}), which `forbidden_edges` forbids; it would "
                             f"have zero probability")
        ch = np.flatnonzero(local >= 0)
        hit = ch[forb[yy[ch], yy[gpar[ch]]]]
        if hit.size:
            n = int(hit[0])
            raise ValueError(f"training tree {seq[n]}: node {n - nodes.offsets[seq[n]]} labelled "
                             f"{cls[yy[n]]!r} under a parent labelled {cls[yy[gpar[n]]]!r}, a pair that "
                             f"`forbidden_edges` forbids; it would have zero probability")

    # ------------------------------------------------------------------------------------------------
    # fitting
    # ------------------------------------------------------------------------------------------------
    def fit(self, X, y, X_dev=None, y_dev=None, *, parents=None, edge_attributes=None, parents_dev=None,
            edge_attributes_dev=None, allowed=None):
        """Train on trees ``X`` with per-node labels ``y``.

        Parameters
        ----------
        X : list of trees, each a list of items (dict attribute -> value or list of attribute strings)
        y : list of lists of str
            One label per node.
        X_dev, y_dev : optional held-out trees (with ``parents_dev``, ``edge_attributes_dev``); their
            node accuracy is logged every L-BFGS iteration.
        parents : list (per tree) of array-like of int
            Parent index of every node within its tree, -1 for the root. Required.
        edge_attributes : list (per tree) of list (per node) of str, dict or list of str, optional
            Attributes of the edge from each node to its parent (the root's entry is ignored).
        allowed : ndarray of bool (N, K) or None
            Partial labels for lbfgs training: labels allowed per node (rows in the order of X, K in
            ``classes_`` order = first appearance in ``y``). Training maximises log p(y ∈ allowed | x).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Empty training set, items and labels of different lengths, bad parent pointers (see
            :func:`check_parents`), gold labels that use a forbidden edge, bad parameters.
        """
        self._check_params()
        t0 = time.perf_counter()
        vocab = AttributeVocabulary()
        evocab = AttributeVocabulary()
        nodes, local, edges, layout, batch = self._encode(X, parents, edge_attributes, True, vocab,
                                                          evocab)
        self._check_nonempty(nodes, "nodes", "tree")
        yy = self._fit_labels(y, nodes)
        K = len(self.classes_)
        attr_ptr, feat_label = build_state_features(
            nodes, yy, len(vocab), K, self.min_freq, self.all_possible_states,
            frequency="count" if self.root_features else "value")
        gpar, edge_features = tree_edges(nodes, local, yy, K, self.all_possible_edges)
        eptr = epair = None
        if edges is not None and len(evocab):
            pair = np.where(local >= 0, yy * K + yy[np.maximum(gpar, 0)], 0)
            eptr, epair = build_state_features(edges, pair, len(evocab), K * K, self.min_freq,
                                               self.all_possible_edges)
        forb, froot = self._forbidden(K)
        if allowed is None:
            self._check_gold_allowed(yy, nodes, local, forb, froot)
        model = self._feature_model(vocab, evocab, attr_ptr, feat_label, edge_features, eptr, epair, forb,
                                    froot)
        self.featurize_seconds_ = time.perf_counter() - t0
        y_int = layout.rows_to_internal(yy)

        dev = self._dev_set(vocab, evocab, X_dev, y_dev, parents_dev, edge_attributes_dev)
        objective = None
        if self.algorithm == "lbfgs":
            allowed = self._allowed_mask(allowed, nodes.n_items, K)
            objective = TreeCLL(model, batch, y_int, c2=self.c2,
                                allowed=None if allowed is None else layout.rows_to_internal(allowed))
        elif allowed is not None:
            raise ValueError(f"`allowed` (partial labels) needs algorithm='lbfgs'; got "
                             f"{self.algorithm!r}")
        self._train(model, objective, t0, algorithm=self.algorithm, online=tree_online, data=(batch, y_int),
                    dev=dev)
        return self

    def _dev_set(self, vocab, evocab, X_dev, y_dev, parents_dev, edge_attributes_dev):
        """(internal batch, internal labels) of the held-out trees under the training vocabularies and
        ``classes_`` (also used by :mod:`structlearn.distributed`), or None without ``X_dev``."""
        if X_dev is None:
            return None
        nodes, _, _, layout, batch = self._encode(X_dev, parents_dev, edge_attributes_dev, False, vocab, evocab,
                                                  "edge_attributes_dev", "parents_dev")
        return batch, layout.rows_to_internal(self._encode_labels(y_dev, nodes, "y_dev", grow=False))

    def _feature_model(self, vocab, evocab, attr_ptr, feat_label, edge_features, eptr, epair, forb, froot):
        """The TreeFeatureModel of the training features (also built from counts merged over shards by
        :mod:`structlearn.distributed`); sets ``model_``, ``attributes_``, ``edge_attributes_`` and the
        vocabularies."""
        model = TreeFeatureModel(attr_ptr, feat_label, len(self.classes_), edge_features, eptr, epair, forb,
                                 froot, root=bool(self.root_features))
        self.attributes_ = vocab.names
        self.edge_attributes_ = evocab.names
        self._vocab = vocab
        self._evocab = evocab
        self.model_ = model
        return model

    # ------------------------------------------------------------------------------------------------
    # prediction
    # ------------------------------------------------------------------------------------------------
    def _structure(self, X, parents, edge_attributes, constraints=None):
        """(user Packed, layout, Tree over the internal batch)."""
        self._check_fitted()
        if edge_attributes is None and self.model_.n_edge_attr:
            raise ValueError("this TreeCRF was trained with `edge_attributes`; pass `edge_attributes=` "
                             "(one entry per node) to predict too")
        if edge_attributes is not None and not len(self._evocab):
            raise ValueError("this TreeCRF was trained without `edge_attributes`; do not pass them to "
                             "predict")
        nodes, _, _, layout, batch = self._encode(X, parents, edge_attributes, False, self._vocab,
                                                  self._evocab)
        allowed = None
        if constraints is not None:
            allowed = layout.rows_to_internal(self._constraint_mask(constraints, nodes))
        return nodes, layout, self.model_.structure(self.coef_, batch, allowed)

    def predict(self, X, constraints=None, *, parents=None, edge_attributes=None):
        """Most likely labeling of every tree (exact max-product, MAP).

        Parameters
        ----------
        X : list of trees (lists of items)
        constraints : list (one per tree) of dict node index -> label or list of labels, or a boolean
            (N, K) mask (rows in the order of X) — fixes or restricts labels of given nodes.
        parents, edge_attributes : as in :meth:`fit`.

        Returns
        -------
        list of lists of str

        Raises
        ------
        ValueError
            If constraints (with forbidden edges) leave a tree no possible labeling.
        """
        nodes, layout, tree = self._structure(X, parents, edge_attributes, constraints)
        if not nodes.n_items:
            return [[] for _ in nodes.lengths]
        labels = np.asarray(self.classes_, dtype=object)[layout.rows_to_user(tree.argmax())]
        return [list(s) for s in layout.split(labels)]

    def predict_marginals(self, X, *, parents=None, edge_attributes=None, output="dict", edges=False,
                          constraints=None):
        """Posterior node (and edge) marginals.

        Parameters
        ----------
        output : {"dict", "array"}
            ``"dict"``: per tree, per node {label: P(y_n = label | x)}; ``"array"``: per tree a (T, K)
            float64 array, columns in ``classes_`` order.
        edges : bool, default False
            Also return edge marginals P(y_c = i, y_parent(c) = j | x): per tree a (T, K, K) array (row c
            = child c, axes child label, parent label; the root's row is 0), or with ``output="dict"``
            per node {(child_label, parent_label): probability} ({} for a root). Then the result is the
            pair (node marginals, edge marginals).
        """
        if output not in ("dict", "array"):
            raise ValueError(f"`output` must be 'dict' or 'array'; got {output!r}")
        _, layout, tree = self._structure(X, parents, edge_attributes, constraints)
        m = tree.marginals(edge="full" if edges else "none")
        log_z = self._finite_log_z(layout.per_tree(tree.log_partition()))
        unary = layout.rows_to_user(m.unary)
        node = layout.split(unary)
        check_posteriors(unary, np.r_[0, np.cumsum([len(s) for s in node])], log_z, "the marginals",
                         self._unit_noun)
        cls = self.classes_
        if output == "dict":
            node = [[dict(zip(cls, row.tolist())) for row in s] for s in node]
        if not edges:
            return node
        em = layout.split(layout.rows_to_user(m.edge))
        if output == "dict":
            roots = layout.split(layout.rows_to_user(tree.parent < 0))
            pairs = [(a, b) for a in cls for b in cls]
            em = [[{} if r else dict(zip(pairs, e.ravel().tolist())) for e, r in zip(s, rs)]
                  for s, rs in zip(em, roots)]
        return node, em

    def predict_proba_sequence(self, X, *, parents=None, edge_attributes=None):
        """Probability of the MAP labeling of each tree, shape (B,)."""
        _, layout, tree = self._structure(X, parents, edge_attributes)
        log_z = self._finite_log_z(layout.per_tree(tree.log_partition()))
        return np.exp(layout.per_tree(tree.max()) - log_z)

    def sequence_probability(self, X, y, *, parents=None, edge_attributes=None):
        """Probability p(y | x) of given labelings, shape (B,)."""
        nodes, layout, tree = self._structure(X, parents, edge_attributes)
        yy = layout.rows_to_internal(self._encode_labels(y, nodes, grow=False))
        log_z = self._finite_log_z(layout.per_tree(tree.log_partition()))
        return np.exp(layout.per_tree(tree.score(yy)) - log_z)

    def kbest(self, X, k=5, *, parents=None, edge_attributes=None, constraints=None):
        """The k most likely labelings of every tree with their probabilities (exact k-best max-product).

        For a forest (``allow_forest=True``) the k best joint labelings of its trees are combined from
        each tree's k best lists.

        Returns
        -------
        list (per tree) of lists of (labels (list of str), probability), best first.
        """
        nodes, layout, tree = self._structure(X, parents, edge_attributes, constraints)
        log_z = tree.log_partition()
        self._finite_log_z(layout.per_tree(log_z))
        kb = tree.kbest(k)
        cls = np.asarray(self.classes_, dtype=object)
        ioff = tree.offsets
        parts = [[] for _ in nodes.lengths]
        for b, u in enumerate(layout.tree_of):
            parts[u].append(b)
        out = []
        for u, comps in enumerate(parts):
            lz = float(sum(log_z[b] for b in comps))
            combos = [(0.0, ())]
            for b in comps:
                cand = [(s + float(kb.scores[b, r]), lab + (r,)) for s, lab in combos for r in range(k)
                        if kb.scores[b, r] > -np.inf]
                cand.sort(key=lambda c: -c[0])
                combos = cand[:k]
            res = []
            o0, o1 = layout.offsets[u], layout.offsets[u + 1]
            for score, rank in combos:
                lab = np.empty(o1 - o0, dtype=object)
                for b, r in zip(comps, rank):
                    rows = np.arange(ioff[b], ioff[b + 1])
                    user = rows if layout.perm is None else layout.perm[rows]
                    lab[user - o0] = cls[kb.labels[r, rows]]
                res.append((list(lab), float(np.exp(score - lz))))
            out.append(res)
        return out

    def score(self, X, y, *, parents=None, edge_attributes=None):
        """Node accuracy of ``predict(X)`` against ``y``."""
        return self._token_accuracy(self.predict(X, parents=parents, edge_attributes=edge_attributes), y,
                                    "tree", "nodes")

    # ------------------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------------------
    @property
    def state_features_(self):
        """dict (attribute, label) -> weight of the state features."""
        self._check_fitted()
        return self._state_weights(self.model_.feat_label, self.classes_)

    @property
    def edge_features_(self):
        """dict (child_label, parent_label) -> weight; forbidden pairs appear with -inf."""
        self._check_fitted()
        m = self.model_
        ed = np.where(m.edge_features, m.split(self.coef_)[1], 0.0)
        cls = self.classes_
        return {(a, b): (-np.inf if m.forbidden[i, j] else float(ed[i, j]))
                for i, a in enumerate(cls) for j, b in enumerate(cls)
                if m.edge_features[i, j] or m.forbidden[i, j]}

    @property
    def edge_attribute_features_(self):
        """dict (edge_attribute, child_label, parent_label) -> weight."""
        self._check_fitted()
        m = self.model_
        K = m.n_labels
        ea = m.split(self.coef_)[2]
        attrs = np.repeat(np.arange(len(m.edge_attr_ptr) - 1), np.diff(m.edge_attr_ptr))
        names, cls = self.edge_attributes_, self.classes_
        return {(names[a], cls[p // K], cls[p % K]): float(v)
                for a, p, v in zip(attrs, m.edge_feat_pair, ea) if not m.forbidden.ravel()[p]}

    @property
    def root_features_(self):
        """dict label -> weight of that label at the root (-inf where forbidden)."""
        self._check_fitted()
        r = self.model_.root_potentials(self.coef_)
        return {c: float(r[k]) for k, c in enumerate(self.classes_)
                if self.model_.root or self.model_.forbidden_root[k]}

    # ------------------------------------------------------------------------------------------------
    # model files
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.TreeCRF")

    def _file_metadata(self):
        return {**super()._file_metadata(), "edge_attributes": list(self.edge_attributes_)}

    def _file_arrays(self):
        m = self.model_
        return {"attr_ptr": m.attr_ptr, "feat_label": m.feat_label, "edge_features": m.edge_features,
                "edge_attr_ptr": m.edge_attr_ptr, "edge_feat_pair": m.edge_feat_pair,
                "forbidden": m.forbidden, "forbidden_root": m.forbidden_root, "root": np.array(m.root)}

    def _restore(self, meta, arrays):
        self._restore_labels(meta)
        self.edge_attributes_ = list(meta["edge_attributes"])
        self._evocab = AttributeVocabulary(self.edge_attributes_)
        K = len(self.classes_)
        check_shapes(arrays, {"edge_features": (K, K), "forbidden": (K, K), "forbidden_root": (K,)})
        self.model_ = TreeFeatureModel(arrays["attr_ptr"], arrays["feat_label"], K,
                                       arrays["edge_features"], arrays["edge_attr_ptr"],
                                       arrays["edge_feat_pair"], arrays["forbidden"], arrays["forbidden_root"],
                                       root=bool(arrays.get("root", True))).check()

    def _file_consistent(self):
        return super()._file_consistent() and len(self._evocab) == len(self.model_.edge_attr_ptr) - 1
