"""Higher-order factors of graph samples: validation of a sample's ``factors`` / ``factor_features`` and
the :class:`FactorLayout` that turns the node, edge and factor log-potentials of a packed
:class:`~structlearn.engine.structures.graphs.GraphBatch` into one
:class:`~structlearn.engine.structures.FactorGraph` of factors of any arity.

A sample's factors are a list of scopes (tuples of distinct node indices local to the graph, any arity
≥ 1, arities mixed) with features ``factor_features`` (n_factors, G); the CRF's table of factor f of arity
r is ``Σ_g factor_features[f, g] · W_r[g]`` reshaped (K,)*r, axis j the j-th variable of the scope
(NumPy C order). The layout packs, graph after graph, the graph's edges (arity-2 factors) then its
higher-order factors, builds the factor graph's structure once (:meth:`FactorGraph.from_factors`:
validation, packing, sweep order, junction-tree plans, all cached) and afterwards only writes new tables
into it, so an evaluation of the learning objective costs the inference alone.
"""
import numpy as np

from .factor_graph import FactorGraph

__all__ = ["FactorLayout", "check_factor_part"]


def check_feature_rows(value, rows, width, what, rows_name, col):
    """Per-edge or per-factor features as float64 (rows, width): ``None`` is the single constant feature
    1 (rows, 1); an empty 1-d array stands for (0, width). ``ValueError`` naming ``what`` when the rows
    differ from ``rows`` or a value is not finite (the width is the caller's to check)."""
    if value is None:
        return np.ones((rows, 1))
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 1 and rows == 0 and arr.size == 0:
        arr = arr.reshape(0, width if width is not None else 1)
    if arr.ndim != 2 or arr.shape[0] != rows:
        raise ValueError(f"{what} must have shape ({rows_name}, {col}) = ({rows}, {col}); got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} contain NaN or inf")
    return arr


def check_factor_part(factors, factor_features, n, G, where):
    """Validate the factors of one graph with n nodes.

    Parameters
    ----------
    factors : sequence of sequences of int, or int array of shape (n_factors, r)
        Scopes: distinct node indices 0..n-1, at least one per factor.
    factor_features : array-like of float, shape (n_factors, G), or None
        None: every factor has the single constant feature 1 (G = 1).
    n : int
        Nodes of the graph.
    G : int or None
        Required number of factor features (None: any).
    where : str
        Name of the sample in error messages (e.g. "`X`[3]").

    Returns
    -------
    scope_vars : ndarray of int64, shape (P,)
        Concatenated scopes.
    arity : ndarray of int64, shape (n_factors,)
    features : ndarray of float64, shape (n_factors, G)

    Raises
    ------
    ValueError
        A scope that is empty, not integer, out of range or repeats a node; features of the wrong shape,
        NaN/inf, or a G that differs from ``G``.
    """
    if isinstance(factors, np.ndarray) and factors.ndim == 2:
        factors = list(factors)
    elif isinstance(factors, np.ndarray) and factors.size == 0:
        factors = []
    try:
        n_f = len(factors)
    except TypeError:
        raise ValueError(f"{where} factors must be a list of scopes (tuples of node indices); got "
                         f"{type(factors).__name__}") from None
    scopes, arity = [], np.zeros(n_f, dtype=np.int64)
    for f in range(n_f):
        s = np.asarray(factors[f])
        if s.ndim == 0:
            s = s.reshape(1)
        if s.ndim != 1 or s.size == 0 or not np.issubdtype(s.dtype, np.integer):
            raise ValueError(f"{where} factors[{f}] must be a non-empty tuple of integer node indices; got "
                             f"{s.dtype} array of shape {s.shape}")
        s = s.astype(np.int64)
        if s.min() < 0 or s.max() >= n:
            raise ValueError(f"{where} factors[{f}] = {tuple(s.tolist())} is out of range: the graph has {n} "
                             f"nodes (indices 0..{n - 1})")
        if np.unique(s).size != s.size:
            raise ValueError(f"{where} factors[{f}] = {tuple(s.tolist())} repeats a node; a factor's nodes "
                             f"must be distinct")
        scopes.append(s)
        arity[f] = s.size
    ff = check_feature_rows(factor_features, n_f, G, f"{where} factor_features", "n_factors", "G")
    if G is not None and ff.shape[1] != G:
        raise ValueError(f"{where} has {ff.shape[1]} factor features; expected G = {G} (every graph must "
                         f"have the same number of factor features; samples without factor_features have "
                         f"the single constant feature 1)")
    vars_ = np.concatenate(scopes) if scopes else np.zeros(0, dtype=np.int64)
    return vars_, arity, ff


class FactorLayout:
    """The factor graph of a batch of graph samples with higher-order factors, for changing potentials.

    Parameters
    ----------
    batch : GraphBatch
        B graphs, N nodes, E edges, H higher-order factors.
    n_labels : int
        K, the labels of every node.

    Attributes
    ----------
    template : FactorGraph
        Structure only (zero tables), batch of B graphs; graph b's factors are its edges then its
        higher-order factors.
    edge_index : ndarray of int64, shape (E, K²)
        Positions of every edge's table in the flat table / belief array.
    factor_index : dict int -> ndarray of int64, shape (H_r, K^r)
        Per arity r: positions of the tables of the arity-r factors, in batch order.
    factor_rows : dict int -> ndarray of int64, shape (H_r,)
        Per arity r: the rows of ``batch.factor_features`` of those factors.

    Notes
    -----
    Building costs one :meth:`FactorGraph.from_factors` (a Python pass over the E + H factors); every
    :meth:`graph` afterwards is O(N·K + E·K² + Σ_r H_r·K^r) array copies, and the structure's caches
    (forest flags, sweep order, junction-tree plans, TRW weights) are shared by every graph it returns.
    """

    def __init__(self, batch, n_labels):
        K = self.n_labels = int(n_labels)
        B, E = batch.n_graphs, batch.edges.shape[0]
        eo, fo = batch.edge_offsets, batch.factor_offsets
        el, fl = batch.edge_lengths, batch.factor_lengths
        tot = el + fl
        toff = np.concatenate([[0], np.cumsum(tot)]).astype(np.int64)
        g_edge = np.repeat(np.arange(B), el)
        g_fac = np.repeat(np.arange(B), fl)
        H = int(fl.sum())
        fid_edge = toff[:-1][g_edge] + (np.arange(E) - eo[:-1][g_edge])
        fid_fac = toff[:-1][g_fac] + el[g_fac] + (np.arange(H) - fo[:-1][g_fac])
        arity = batch.factor_arity
        scopes = [None] * int(toff[-1])
        for e, f in enumerate(fid_edge.tolist()):
            scopes[f] = batch.edges[e]
        ptr = batch.factor_ptr
        for h, f in enumerate(fid_fac.tolist()):
            scopes[f] = batch.factor_vars[ptr[h]:ptr[h + 1]]
        tables = [np.zeros((K,) * len(s)) for s in scopes]
        N = batch.node_features.shape[0]
        self.template = FactorGraph.from_factors(np.full(N, K, dtype=np.int64), scopes, tables,
                                                 lengths=batch.lengths, factor_lengths=tot)
        start = np.zeros(len(scopes) + 1, dtype=np.int64)
        np.cumsum([K ** len(s) for s in scopes], out=start[1:])
        self.n_table = int(start[-1])
        self.edge_index = start[fid_edge][:, None] + np.arange(K * K)
        self.factor_index, self.factor_rows = {}, {}
        for r in np.unique(arity).tolist():
            rows = np.flatnonzero(arity == r)
            self.factor_rows[r] = rows
            self.factor_index[r] = start[fid_fac[rows]][:, None] + np.arange(K ** r)
        self.max_arity = int(max([2 if E else 1] + list(self.factor_index)))

    def graph(self, unary, pairwise, tables):
        """The FactorGraph with node log-potentials ``unary`` (N, K), edge tables ``pairwise``
        (E, K, K) and, per arity r, factor tables ``tables[r]`` (H_r, K^r) (C order over the scope)."""
        tab = np.empty(self.n_table)
        tab[self.edge_index] = pairwise.reshape(self.edge_index.shape)
        for r, idx in self.factor_index.items():
            tab[idx] = tables[r]
        g = FactorGraph.__new__(FactorGraph)
        g.__dict__.update(self.template.__dict__)   # the structure and its caches are shared
        g._tab = tab
        g.unary = np.ascontiguousarray(unary, dtype=np.float64)
        return g

    def edge_beliefs(self, result):
        """Edge (pseudo-)marginals (E, K²) of an inference result on a :meth:`graph`."""
        return result.factor_beliefs[self.edge_index]

    def factor_beliefs(self, result, r):
        """(Pseudo-)marginals (H_r, K^r) of the arity-r factors of an inference result."""
        return result.factor_beliefs[self.factor_index[r]]

    def trw_weights(self, options):
        """TRW factor weights of the structure (arity ≤ 2: uniform spanning trees; otherwise
        ``options.n_trees`` sampled hyperforests), shape (E + H,)."""
        if self.max_arity <= 2:
            return self.template.edge_appearance()
        return self.template.sampled_appearance(options.n_trees, options.random_state)
