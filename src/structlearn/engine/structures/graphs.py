"""Graph samples for CRFs on general graphs: validation, the packed batch, and graph builders.

A graph sample is ``(node_features (n, D), edges (m, 2)[, edge_features (m, F)])``, or with factors of
any arity ``(node_features, edges, edge_features, factors, factor_features)`` (or the same as a dict, see
:func:`check_graphs`); :func:`check_graphs` validates a list of them and packs it into a
:class:`GraphBatch`, whose :meth:`~GraphBatch.factor_graph` gives the pairwise
:class:`~structlearn.engine.structures.FactorGraph` of given potentials and :meth:`~GraphBatch.factor_layout`
the factor graph with the higher-order factors. Builders: :func:`grid_graph` (4-connected grids) and
:func:`two_level_edges` / :func:`two_level_chain` / :func:`two_level_trees` (2-level dynamic CRFs,
Tran, Phung & Venkatesh, "Learning Structured Outputs from Partial Labels using Forest Ensemble",
arXiv:1407.6432 (2014), Figure 4).
"""
import numpy as np

from .factor_graph import FactorGraph, check_edge_ends
from .graph_factors import FactorLayout, check_factor_part, check_feature_rows

__all__ = ["GraphBatch", "check_graphs", "check_graph_labels", "grid_graph", "two_level_edges",
           "two_level_chain", "two_level_trees"]


class GraphBatch:
    """A validated, packed batch of B graphs (N nodes, E edges, H higher-order factors in all).

    Attributes
    ----------
    node_features : ndarray of float64, shape (N, D)
    edges : ndarray of int64, shape (E, 2)
        Edge ends local to their graph.
    edge_features : ndarray of float64, shape (E, F)
    lengths, edge_lengths, factor_lengths : ndarray of int64, shape (B,)
        Nodes, edges and higher-order factors per graph.
    offsets, edge_offsets, factor_offsets : ndarray of int64, shape (B + 1,)
    factor_vars : ndarray of int64, shape (P,)
        Scopes of the higher-order factors (node indices local to their graph), concatenated; factor h
        is ``factor_vars[factor_ptr[h]:factor_ptr[h + 1]]``.
    factor_ptr : ndarray of int64, shape (H + 1,)
    factor_features : ndarray of float64, shape (H, G)
        G = 0 when no sample declared factors.
    """

    def __init__(self, node_features, edges, edge_features, lengths, edge_lengths, factor_vars=None,
                 factor_ptr=None, factor_features=None, factor_lengths=None):
        self.node_features = node_features
        self.edges = edges
        self.edge_features = edge_features
        self.lengths = lengths
        self.edge_lengths = edge_lengths
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.edge_offsets = np.concatenate([[0], np.cumsum(edge_lengths)]).astype(np.int64)
        if factor_ptr is None:
            factor_vars, factor_ptr = np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
            factor_features = np.zeros((0, 0))
            factor_lengths = np.zeros(lengths.shape[0], dtype=np.int64)
        self.factor_vars = factor_vars
        self.factor_ptr = factor_ptr
        self.factor_features = factor_features
        self.factor_lengths = factor_lengths
        self.factor_offsets = np.concatenate([[0], np.cumsum(factor_lengths)]).astype(np.int64)

    @property
    def n_graphs(self):
        return int(self.lengths.shape[0])

    @property
    def n_node_features(self):
        return int(self.node_features.shape[1])

    @property
    def n_edge_features(self):
        return int(self.edge_features.shape[1])

    @property
    def n_factor_features(self):
        """G, the features of every higher-order factor (0 when no sample declared factors)."""
        return int(self.factor_features.shape[1])

    @property
    def n_factors(self):
        """H, the higher-order factors of all graphs."""
        return int(self.factor_ptr.shape[0] - 1)

    @property
    def factor_arity(self):
        """Arity of every higher-order factor, shape (H,) int64."""
        return np.diff(self.factor_ptr)

    @property
    def factor_arities(self):
        """The distinct arities of the higher-order factors, sorted (a tuple of int; () for none)."""
        return tuple(int(r) for r in np.unique(self.factor_arity))

    @property
    def has_factors(self):
        """Whether any graph has a higher-order factor."""
        return self.n_factors > 0

    def factor_graph_index(self):
        """Graph index of every higher-order factor, shape (H,)."""
        return np.repeat(np.arange(self.n_graphs), self.factor_lengths)

    def factor_layout(self, n_labels):
        """The :class:`~structlearn.engine.structures.graph_factors.FactorLayout` of these graphs with K =
        ``n_labels`` labels (cached per K)."""
        cache = self.__dict__.setdefault("_layouts", {})
        if n_labels not in cache:
            cache[n_labels] = FactorLayout(self, n_labels)
        return cache[n_labels]

    def node_graph(self):
        """Graph index of every node, shape (N,)."""
        return np.repeat(np.arange(self.n_graphs), self.lengths)

    def edge_graph(self):
        """Graph index of every edge, shape (E,)."""
        return np.repeat(np.arange(self.n_graphs), self.edge_lengths)

    def global_edges(self):
        """Edge ends as packed (global) node indices: ``(u (E,), v (E,))`` int64."""
        start = self.offsets[:-1][self.edge_graph()]
        return self.edges[:, 0] + start, self.edges[:, 1] + start

    def node_index(self, graphs):
        """Packed indices of the nodes of ``graphs`` (int array), graph after graph, shape (Σ n,)."""
        return _ranges(self.offsets, np.asarray(graphs, dtype=np.int64))

    def subset(self, graphs):
        """The batch of the graphs ``graphs`` (int array, in that order)."""
        graphs = np.asarray(graphs, dtype=np.int64)
        nodes = _ranges(self.offsets, graphs)
        edges = _ranges(self.edge_offsets, graphs)
        facs = _ranges(self.factor_offsets, graphs)
        ar = self.factor_arity[facs]
        ptr = np.concatenate([[0], np.cumsum(ar)]).astype(np.int64)
        fv = self.factor_vars[_ranges(self.factor_ptr, facs)]
        return GraphBatch(self.node_features[nodes], self.edges[edges], self.edge_features[edges],
                          self.lengths[graphs], self.edge_lengths[graphs], fv, ptr, self.factor_features[facs],
                          self.factor_lengths[graphs])

    def with_edges(self, keep):
        """The same graphs with only the edges where the boolean mask ``keep`` (E,) is True (the
        higher-order factors are kept)."""
        keep = np.asarray(keep, dtype=bool)
        el = np.bincount(self.edge_graph()[keep], minlength=self.n_graphs).astype(np.int64)
        return GraphBatch(self.node_features, self.edges[keep], self.edge_features[keep], self.lengths, el,
                          self.factor_vars, self.factor_ptr, self.factor_features, self.factor_lengths)

    def split(self, flat, edges=False):
        """Split a packed per-node (or per-edge) array into a list of per-graph arrays."""
        off = self.edge_offsets if edges else self.offsets
        return [flat[off[b]:off[b + 1]] for b in range(self.n_graphs)]

    def is_forest(self):
        """Whether every graph is a forest (no cycle, no parallel edges), shape (B,) bool."""
        return self.factor_graph(np.zeros((self.node_features.shape[0], 1)), np.zeros((1, 1))).is_forest

    def factor_graph(self, unary, pairwise):
        """The pairwise :class:`FactorGraph` of these graphs with log-potentials unary (N, K), pairwise
        (E, K, K); the higher-order factors are not in it (see :meth:`factor_layout`)."""
        return FactorGraph(unary, self.edges, pairwise, lengths=self.lengths, edge_lengths=self.edge_lengths)


def _ranges(offsets, graphs):
    if graphs.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts, stops = offsets[graphs], offsets[graphs + 1]
    lens = stops - starts
    idx = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return idx + np.repeat(starts, lens)


_KEYS = ("node_features", "edges", "edge_features", "factors", "factor_features")


def _sample_parts(x, i, name, allow_factors):
    """The five parts of sample i (absent ones None) and whether it declares factors."""
    where = f"`{name}`[{i}]"
    if isinstance(x, dict):
        bad = sorted(set(x) - set(_KEYS))
        if bad or "node_features" not in x:
            raise ValueError(f"{where} as a dict needs the key 'node_features' and may have only "
                             f"{list(_KEYS)}; got keys {sorted(x)}")
        parts = [x.get(k) for k in _KEYS]
        if parts[1] is None:
            parts[1] = np.zeros((0, 2), dtype=np.int64)
    elif isinstance(x, (tuple, list)) and len(x) in (2, 3, 5):
        parts = list(x) + [None] * (5 - len(x))
    else:
        forms = ("(node_features, edges[, edge_features]), (node_features, edges, edge_features, factors, "
                 "factor_features) or a dict of those keys") if allow_factors else \
            "(node_features, edges[, edge_features]) (this estimator takes no higher-order factors)"
        raise ValueError(f"{where} must be a graph sample {forms}; got {type(x).__name__}"
                         + (f" of length {len(x)}" if hasattr(x, "__len__") else ""))
    declared = parts[3] is not None or parts[4] is not None
    if declared and not allow_factors:
        raise ValueError(f"{where} carries higher-order factors; this estimator takes (node_features, "
                         f"edges[, edge_features]) samples only")
    if parts[3] is None and parts[4] is not None:
        raise ValueError(f"{where} has factor_features but no factors")
    return parts, declared


def check_graphs(X, *, n_node_features=None, n_edge_features=None, n_factor_features=None,
                 allow_factors=False, name="X"):
    """Validate a list of graph samples and pack them.

    Parameters
    ----------
    X : list of tuple or dict
        Every sample is ``(node_features, edges)`` or ``(node_features, edges, edge_features)`` with
        node_features (n, D) float, edges (m, 2) int (node indices 0..n-1, no self loops) and
        edge_features (m, F) float. Without edge features every edge has the single constant feature 1.
        With ``allow_factors``, also ``(node_features, edges, edge_features, factors, factor_features)``
        (edge_features may be None) or a dict with the keys ``node_features`` (required), ``edges``,
        ``edge_features``, ``factors``, ``factor_features``: ``factors`` a list of H scopes, each a
        tuple of distinct node indices (any arity ≥ 1, arities mixed), ``factor_features`` (H, G)
        float (None: the single constant feature 1). Samples with and without factors may be mixed
        (a graph without factors has none); G must agree between the samples that have factors.
    n_node_features, n_edge_features, n_factor_features : int, optional
        Required D, F and G (those seen in training).
    allow_factors : bool
        Accept higher-order factors (else a sample that carries them is refused).

    Returns
    -------
    GraphBatch

    Raises
    ------
    ValueError
        An empty list, a sample of another form, wrong array dimensions, D, F or G that differ
        between samples (or from training), NaN/inf features, non-integer edges, edge ends out of range,
        self loops; factor scopes that are empty, out of range or repeat a node.

    Notes
    -----
    Time O(Σ (n·D + m·F + H·G)) plus a Python step per higher-order factor.
    """
    if isinstance(X, dict) or (isinstance(X, tuple) and len(X) in (2, 3, 5) and np.ndim(X[0]) == 2):
        raise ValueError(f"`{name}` must be a list of graph samples; got a single sample (wrap it in a list)")
    try:
        B = len(X)
    except TypeError:
        raise ValueError(f"`{name}` must be a list of (node_features, edges[, edge_features]) tuples; got "
                         f"{type(X).__name__}") from None
    if B == 0:
        raise ValueError(f"`{name}` is empty; expected at least one graph")
    nfs, eds, efs, fvs, fas, ffs = [], [], [], [], [], []
    lengths = np.zeros(B, dtype=np.int64)
    elens = np.zeros(B, dtype=np.int64)
    flens = np.zeros(B, dtype=np.int64)
    D, F, G = n_node_features, n_edge_features, n_factor_features
    for i, x in enumerate(X):
        x, declared = _sample_parts(x, i, name, allow_factors)
        nf = np.asarray(x[0], dtype=np.float64)
        if nf.ndim != 2:
            raise ValueError(f"`{name}`[{i}] node_features must be 2-d (n_nodes, n_features); got shape "
                             f"{nf.shape}")
        if not np.all(np.isfinite(nf)):
            raise ValueError(f"`{name}`[{i}] node_features contain NaN or inf (first at row "
                             f"{int(np.argwhere(~np.isfinite(nf))[0, 0])})")
        if D is None:
            D = nf.shape[1]
        elif nf.shape[1] != D:
            raise ValueError(f"`{name}`[{i}] node_features have {nf.shape[1]} columns; expected {D}")
        n = nf.shape[0]
        ed = np.asarray(x[1])
        if ed.size == 0:
            ed = np.zeros((0, 2), dtype=np.int64)
        if ed.ndim != 2 or ed.shape[1] != 2:
            raise ValueError(f"`{name}`[{i}] edges must have shape (n_edges, 2); got {ed.shape}")
        if not np.issubdtype(ed.dtype, np.integer):
            raise ValueError(f"`{name}`[{i}] edges must hold integer node indices; got dtype {ed.dtype}")
        ed = ed.astype(np.int64)
        m = ed.shape[0]
        check_edge_ends(ed[:, 0], ed[:, 1], n, name=f"`{name}`[{i}] edges")
        ef = check_feature_rows(x[2], m, F, f"`{name}`[{i}] edge_features", "n_edges", "F")
        if F is None:
            F = ef.shape[1]
        elif ef.shape[1] != F:
            raise ValueError(f"`{name}`[{i}] has {ef.shape[1]} edge features; expected {F} (samples without "
                             f"edge_features have the single constant feature 1)")
        if declared:
            fv, ar, ff = check_factor_part(x[3], x[4], n, G, f"`{name}`[{i}]")
            G = ff.shape[1]
            fvs.append(fv)
            fas.append(ar)
            ffs.append(ff)
            flens[i] = ar.size
        nfs.append(nf)
        eds.append(ed)
        efs.append(ef)
        lengths[i], elens[i] = n, m
    batch = GraphBatch(np.ascontiguousarray(np.concatenate(nfs)), np.concatenate(eds),
                       np.ascontiguousarray(np.concatenate(efs)), lengths, elens)
    if fvs or G is not None:
        G = G if G is not None else 0
        ar = np.concatenate(fas) if fas else np.zeros(0, dtype=np.int64)
        batch = GraphBatch(batch.node_features, batch.edges, batch.edge_features, lengths, elens,
                           np.concatenate(fvs) if fvs else np.zeros(0, dtype=np.int64),
                           np.concatenate([[0], np.cumsum(ar)]).astype(np.int64),
                           np.ascontiguousarray(np.concatenate(ffs)) if ffs else np.zeros((0, G)), flens)
    return batch


def check_graph_labels(y, batch, n_labels, *, name="y"):
    """Validate per-graph labels (-1 = hidden) against a batch; packed int64 array (N,).

    Raises ValueError for a wrong number of graphs, a graph whose label count differs from its node
    count, non-integer labels or labels outside -1..n_labels-1.
    """
    try:
        B = len(y)
    except TypeError:
        raise ValueError(f"`{name}` must be a list with one label array per graph") from None
    if B != batch.n_graphs:
        raise ValueError(f"`{name}` has {B} label arrays but X has {batch.n_graphs} graphs")
    out = []
    for i, yi in enumerate(y):
        a = np.asarray(yi)
        if a.ndim != 1 or a.shape[0] != batch.lengths[i]:
            raise ValueError(f"`{name}`[{i}] must have shape ({int(batch.lengths[i])},) (one label per node); "
                             f"got {a.shape}")
        if a.size and not np.issubdtype(a.dtype, np.integer):
            if not (np.issubdtype(a.dtype, np.floating) and np.all(a == np.round(a))):
                raise ValueError(f"`{name}`[{i}] must hold integer labels (-1 = hidden); got dtype {a.dtype}")
        a = a.astype(np.int64)
        bad = np.flatnonzero((a < -1) | (a >= n_labels))
        if bad.size:
            raise ValueError(f"`{name}`[{i}][{int(bad[0])}] = {int(a[bad[0]])} is out of range: labels must "
                             f"lie in 0..{n_labels - 1} (or -1 for a hidden node)")
        out.append(a)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


# -- builders -----------------------------------------------------------------------------------------
def _check_positive(name, v, what=""):
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
        raise ValueError(f"`{name}` must be a positive integer{what}; got {v!r}")


def grid_graph(height, width):
    """Edges of a ``height × width`` 4-connected grid, shape (E, 2) int64, E = h(w−1) + (h−1)w.

    Node ``r * width + c`` is row r, column c (row-major). Horizontal edges ``(r, c)–(r, c+1)`` come
    first (row by row), then vertical edges ``(r, c)–(r+1, c)``.
    """
    _check_positive("height", height)
    _check_positive("width", width)
    idx = np.arange(height * width).reshape(height, width)
    h = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1)
    v = np.stack([idx[:-1].ravel(), idx[1:].ravel()], axis=1)
    return np.concatenate([h, v]).astype(np.int64).reshape(-1, 2)


def two_level_edges(T):
    """Edges of a 2-level dynamic CRF over T time slices and their types (Tran et al. (2014), Figure 4).

    Nodes: ``0..T−1`` the top level (e.g. complex activities) at times 0..T−1, ``T..2T−1`` the bottom
    level (primitive activities). Edges in this order: the top chain ``(t, t+1)`` (T − 1 edges, indices
    0..T−2), the bottom chain ``(T+t, T+t+1)`` (T − 1 edges, indices T−1..2T−3), the vertical
    (parent–child) edges ``(t, T+t)`` (T edges, indices 2T−2..3T−3).

    Returns
    -------
    edges : ndarray of int64, shape (3T − 2, 2)
    edge_type : ndarray of int64, shape (3T − 2,)
        0 top transition, 1 bottom transition, 2 parent–child.

    Raises
    ------
    ValueError
        T not a positive integer.
    """
    _check_positive("T", T, " (time slices)")
    t = np.arange(T, dtype=np.int64)
    top = np.stack([t[:-1], t[1:]], axis=1)
    vertical = np.stack([t, t + T], axis=1)
    edges = np.concatenate([top, top + T, vertical]).reshape(-1, 2)
    edge_type = np.repeat(np.arange(3, dtype=np.int64), [T - 1, T - 1, T])
    return edges, edge_type


def two_level_chain(T):
    """The edges alone of :func:`two_level_edges`, shape (3T − 2, 2) int64."""
    return two_level_edges(T)[0]


def two_level_trees(T):
    """The two spanning trees of a 2-level DCRF (Tran et al. (2014), Figure 4) as edge indices into
    :func:`two_level_edges`: (top chain + parent–child edges, bottom chain + parent–child edges), each
    (2T − 1,) int64."""
    m = max(T - 1, 0)
    vertical = np.arange(2 * m, 2 * m + T, dtype=np.int64)
    return [np.concatenate([np.arange(m, dtype=np.int64), vertical]),
            np.concatenate([np.arange(m, 2 * m, dtype=np.int64), vertical])]
