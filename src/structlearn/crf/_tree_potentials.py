"""Tree CRF feature model: a weight vector -> :class:`~structlearn.engine.structures.Tree`, marginals -> gradient.

The tree counterpart of :class:`~structlearn.crf._potentials.ChainFeatureModel`, built from the same pieces of
:mod:`structlearn.crf.features` (attribute vocabulary, packed CSR items, (attribute, label) state
features and their Numba kernels). The score of labels y of one tree (Cohn & Blunsom 2005)::

    s(x, y) = Σ_n Σ_{(a, v) ∈ x_n} v · w_state[a, y_n]                         node attributes × label
            + Σ_{c ≠ root} ( w_edge[y_c, y_parent(c)]                           child label × parent label
                            + Σ_{(e, v) ∈ z_c} v · w_eattr[e, y_c, y_parent(c)] ) × edge attribute
            + w_root[y_root]

where ``z_c`` are the optional attributes of the edge from node c to its parent (e.g. the dependency
relation). Parameter layout of ``w`` (float64, length ``n_params``)::

    w[:F]                     state features (attribute, label), grouped by attribute
    w[F:F+K²]                 edges "child, parent" (row-major)
    w[F+K²:F+K²+Fe]           edge-attribute features (edge attribute, child label, parent label),
                              grouped by edge attribute, pair index child·K + parent
    w[F+K²+Fe:F+K²+Fe+K]      root label

Edge-attribute features are stored like state features with K² "labels" (the label pairs), so the same
kernels (:func:`~structlearn.engine.kernels.features.state_potentials`,
:func:`~structlearn.engine.kernels.features.state_gradient_tokens`) build their potentials and gradients.
Forbidden (child, parent) pairs and forbidden root labels are -inf potentials in training and decoding.
"""
import numpy as np

from .._threading import reduction_blocks
from ..engine.kernels.features import state_gradient_tokens, state_potentials
from ..engine.structures import Tree
from ..utils.validation import check_feature_index, check_shapes
from ._layout import first_dim, forwarded

__all__ = ["TreeBatch", "TreeFeatureModel"]


class TreeBatch:
    """A packed ragged batch of trees: node items, local parent indices and optional edge items.

    Parameters
    ----------
    nodes : Packed
        Items of the N nodes of B trees (``nodes.lengths`` (B,)).
    parent : ndarray of int, shape (N,)
        Parent of every node, local to its tree, -1 for the root. Must already be valid: exactly one
        root per non-empty tree and no cycle (the estimator validates user input;
        :class:`~structlearn.engine.structures.Tree` checks again).
    edges : Packed or None
        Attributes of the edge from each node to its parent (N rows; root rows are ignored).
    """

    __slots__ = ("nodes", "parent", "edges", "gparent", "roots", "root_trees")

    def __init__(self, nodes, parent, edges=None):
        self.nodes = nodes
        self.parent = np.ascontiguousarray(parent, dtype=np.int64)
        if edges is not None and edges.n_items != nodes.n_items:
            raise ValueError(f"`edges` has {edges.n_items} rows but `nodes` has {nodes.n_items}")
        self.edges = edges
        seq = np.repeat(np.arange(nodes.lengths.shape[0]), nodes.lengths)
        self.gparent = np.where(self.parent >= 0, self.parent + nodes.offsets[:-1][seq], -1)
        self.roots = np.flatnonzero(self.parent < 0)
        self.root_trees = seq[self.roots]

    lengths, offsets, n_items = forwarded("nodes", "lengths", "offsets", "n_items")

    def slice(self, b0, b1):
        """The contiguous sub-batch of trees b0..b1-1 (views where possible)."""
        r0, r1 = int(self.offsets[b0]), int(self.offsets[b1])
        edges = None if self.edges is None else self.edges.slice(b0, b1)
        return TreeBatch(self.nodes.slice(b0, b1), self.parent[r0:r1], edges)


class TreeFeatureModel:
    """Maps tree CRF weights to :class:`~structlearn.engine.structures.Tree` potentials and marginals to gradients.

    Parameters
    ----------
    attr_ptr : ndarray of int64, shape (A + 1,)
    feat_label : ndarray of int64, shape (F,)
        State features as built by :func:`~structlearn.crf.features.build_state_features`.
    n_labels : int
        K.
    edge_features : ndarray of bool, shape (K, K)
        Which (child label, parent label) pairs are parameters (others keep weight 0).
    edge_attr_ptr : ndarray of int64, shape (E + 1,), optional
    edge_feat_pair : ndarray of int64, shape (Fe,), optional
        Edge-attribute features, grouped by edge attribute; values are pair indices child·K + parent.
        Default: none (one (K, K) edge matrix shared by all edges, the fast path of the engine).
    forbidden : ndarray of bool, shape (K, K), optional
        (child, parent) label pairs with potential -inf.
    forbidden_root : ndarray of bool, shape (K,), optional
        Labels the root may not take.
    root : bool, default True
        Whether the root-label weights are parameters. ``False`` is CRFSuite 0.13's tree model (no
        root feature): the slots stay in ``w`` with weight 0.
    """

    def __init__(self, attr_ptr, feat_label, n_labels, edge_features, edge_attr_ptr=None,
                 edge_feat_pair=None, forbidden=None, forbidden_root=None, root=True):
        K = int(n_labels)
        self.root = bool(root)
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=np.int64)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=np.int64)
        self.n_labels = K
        self.forbidden = np.zeros((K, K), bool) if forbidden is None else np.asarray(forbidden, bool)
        self.forbidden_root = (np.zeros(K, bool) if forbidden_root is None
                               else np.asarray(forbidden_root, bool))
        self.edge_features = np.asarray(edge_features, bool) & ~self.forbidden
        self.edge_attr_ptr = np.ascontiguousarray(np.zeros(1, np.int64) if edge_attr_ptr is None
                                                  else edge_attr_ptr, dtype=np.int64)
        self.edge_feat_pair = np.ascontiguousarray(np.zeros(0, np.int64) if edge_feat_pair is None
                                                   else edge_feat_pair, dtype=np.int64)

    def check(self):
        """Check the index arrays against each other (a model read from a file); returns ``self``.

        Raises
        ------
        ValueError
            ``attr_ptr`` does not rise from 0 to F, a ``feat_label`` outside [0, K), ``edge_attr_ptr`` does
            not rise from 0 to Fe, an ``edge_feat_pair`` outside [0, K²), or a mask of the wrong shape: the
            kernels would read outside their arrays.
        """
        K = self.n_labels
        check_feature_index(self.attr_ptr, self.feat_label, K)
        check_feature_index(self.edge_attr_ptr, self.edge_feat_pair, K * K, "edge_attr_ptr", "edge_feat_pair")
        check_shapes(vars(self), {"edge_features": (K, K), "forbidden": (K, K), "forbidden_root": (K,)})
        return self

    # -- layout ------------------------------------------------------------------------------------
    n_state = first_dim("feat_label", "Number of state features F.")
    n_edge_attr = first_dim("edge_feat_pair", "Number of edge-attribute features Fe.")

    @property
    def n_params(self):
        return self.n_state + self.n_labels ** 2 + self.n_edge_attr + self.n_labels

    def split(self, w):
        """Views (state (F,), edge (K, K), edge_attr (Fe,), root (K,)) into ``w``."""
        F, K, Fe = self.n_state, self.n_labels, self.n_edge_attr
        return (w[:F], w[F:F + K * K].reshape(K, K), w[F + K * K:F + K * K + Fe],
                w[F + K * K + Fe:F + K * K + Fe + K])

    def free_mask(self):
        """Boolean (n_params,): which weights are parameters (others stay 0)."""
        m = np.ones(self.n_params, bool)
        _, ed, ea, rt = self.split(m)
        ed[...] = self.edge_features
        ea[...] = ~self.forbidden.ravel()[self.edge_feat_pair]
        rt[...] = ~self.forbidden_root & self.root
        return m

    # -- potentials --------------------------------------------------------------------------------
    def unary_potentials(self, w, batch):
        """State log-potentials (N, K). Time O(nnz · labels per attribute)."""
        p = batch.nodes
        return state_potentials(w[:self.n_state], p.item_ptr, p.item_attr, p.item_val, self.attr_ptr,
                                self.feat_label, self.n_labels)

    def uses_edge_attributes(self, batch):
        """True when edge potentials differ per edge (edge-attribute features and edge items)."""
        return self.n_edge_attr > 0 and batch.edges is not None

    def edge_potentials(self, w, batch):
        """Edge log-potentials: (K, K) shared, or (N, K, K) with edge-attribute features.

        ``edge[c, i, j]`` scores child c labelled i under its parent labelled j; forbidden pairs -inf.
        Memory O(N·K²) in the per-edge case.
        """
        _, ed, ea, _ = self.split(w)
        K = self.n_labels
        base = np.where(self.edge_features, ed, 0.0)
        if not self.uses_edge_attributes(batch):
            base[self.forbidden] = -np.inf
            return base
        e = batch.edges
        free = np.where(self.forbidden.ravel()[self.edge_feat_pair], 0.0, ea)
        out = state_potentials(free, e.item_ptr, e.item_attr, e.item_val, self.edge_attr_ptr,
                               self.edge_feat_pair, K * K).reshape(-1, K, K)
        out += base
        out[:, self.forbidden] = -np.inf
        return out

    def root_potentials(self, w):
        """Root-label log-potentials (K,), forbidden labels -inf."""
        return np.where(self.forbidden_root, -np.inf, self.split(w)[3] if self.root else 0.0)

    def structure(self, w, batch, allowed=None):
        """The :class:`~structlearn.engine.structures.Tree` of a batch under weights ``w`` (optionally
        constrained by the boolean mask ``allowed`` (N, K))."""
        tree = Tree(self.unary_potentials(w, batch), self.edge_potentials(w, batch), batch.parent,
                    lengths=batch.lengths, root_score=self.root_potentials(w))
        return tree if allowed is None else tree.constrain(allowed)

    # -- gradient ----------------------------------------------------------------------------------
    def expectations(self, tree, batch):
        """Expected sufficient statistics under ``tree`` and log Z.

        Returns
        -------
        stats : tuple
            ``(node (N, K), edge_sum (K, K), edge_full (N, K, K) or None, root (K,))``: node marginals,
            expected (child, parent) label-pair counts of the batch, per-edge pair marginals (only with
            edge-attribute features) and the expected root-label counts.
        log_z : ndarray, shape (B,)
        """
        if self.uses_edge_attributes(batch):
            m = tree.marginals(edge="full")
            full = m.edge
            esum = full.sum(axis=0)
        else:
            m = tree.marginals(edge="sum")
            full = None
            esum = m.edge.sum(axis=0)
        um = m.unary
        return (um, esum, full, um[batch.roots].sum(axis=0)), tree.log_partition()

    def gradient(self, stats, batch):
        """Assemble the gradient vector (n_params,) from statistics shaped as in :meth:`expectations`."""
        node, esum, full, root = stats
        K = self.n_labels
        g = np.zeros(self.n_params)
        gs, ge, gea, gr = self.split(g)
        p = batch.nodes
        gs[...] = state_gradient_tokens(node, p.item_ptr, p.item_attr, p.item_val, self.attr_ptr,
                                        self.feat_label, reduction_blocks(node.shape[0]))
        ge[...] = np.where(self.edge_features, esum, 0.0)
        if full is not None and self.n_edge_attr:
            e = batch.edges
            val = state_gradient_tokens(np.ascontiguousarray(full.reshape(-1, K * K)), e.item_ptr,
                                        e.item_attr, e.item_val, self.edge_attr_ptr, self.edge_feat_pair,
                                        reduction_blocks(full.shape[0]))
            gea[...] = np.where(self.forbidden.ravel()[self.edge_feat_pair], 0.0, val)
        gr[...] = np.where(self.forbidden_root | (not self.root), 0.0, root)
        return g

    def statistics(self, batch, y):
        """Sufficient statistics of the labeling ``y`` (N,) — the empirical side of the gradient."""
        K, N = self.n_labels, batch.n_items
        y = np.asarray(y, dtype=np.int64)
        node = np.zeros((N, K))
        node[np.arange(N), y] = 1.0
        child = np.flatnonzero(batch.gparent >= 0)
        esum = np.zeros((K, K))
        np.add.at(esum, (y[child], y[batch.gparent[child]]), 1.0)
        full = None
        if self.uses_edge_attributes(batch):
            full = np.zeros((N, K, K))
            full[child, y[child], y[batch.gparent[child]]] = 1.0
        root = np.bincount(y[batch.roots], minlength=K).astype(np.float64)
        return node, esum, full, root

    def __setstate__(self, state):
        state.setdefault("root", True)
        self.__dict__.update(state)

    def feature_counts(self, batch, y):
        """Observed feature counts f(x, y) (n_params,) of labels ``y`` (N,)."""
        return self.gradient(self.statistics(batch, y), batch)
