"""Validation and packing of FactorGraph inputs: variables, pairwise edges and factors of any arity.

Everything here runs at the boundary (constructors); the engine gets contiguous arrays in the layout of
:mod:`structlearn.engine.kernels.messages`.
"""
import numpy as np

from ...utils.validation import check_log_potentials


def check_edge_ends(eu, ev, size, *, name="`edges`", graph=None, hint=""):
    """Raise ValueError for the first edge with an end outside ``0..size−1``, then the first self loop.

    Parameters
    ----------
    eu, ev : ndarray of int64, shape (E,)
        Edge ends, local to their graph.
    size : int or ndarray of int64, shape (E,)
        Node count of the graph of every edge.
    name : str
        How the edges are named in the message (``name[e] = (u, v) ...``).
    graph : ndarray of int64, shape (E,), optional
        Graph index of every edge, named in the message.
    hint : str
        Appended to the self-loop message.
    """
    bad = np.flatnonzero((eu < 0) | (eu >= size) | (ev < 0) | (ev >= size))
    if bad.size:
        e = int(bad[0])
        n = int(np.broadcast_to(size, eu.shape)[e])
        where = "the graph" if graph is None else f"graph {int(graph[e])}"
        raise ValueError(f"{name}[{e}] = ({int(eu[e])}, {int(ev[e])}) is out of range: {where} has {n} "
                         f"nodes (local indices 0..{n - 1})")
    bad = np.flatnonzero(eu == ev)
    if bad.size:
        e = int(bad[0])
        raise ValueError(f"{name}[{e}] = ({int(eu[e])}, {int(ev[e])}) is a self loop{hint}")


def _pack_unary(unary, n_labels):
    if isinstance(unary, (list, tuple)) and len(unary) and np.ndim(unary[0]) == 1 and \
            len({len(u) for u in unary}) > 1:
        if n_labels is not None:
            raise ValueError("`n_labels` is taken from the list form of `unary`; do not pass both")
        rows = [check_log_potentials(u, f"unary[{n}]", (None,)) for n, u in enumerate(unary)]
        nlab = np.array([r.shape[0] for r in rows], dtype=np.int64)
        K = int(nlab.max())
        out = np.full((len(rows), K), -np.inf)
        for n, r in enumerate(rows):
            out[n, :r.shape[0]] = r
        return out, nlab
    arr = check_log_potentials(unary, "unary", ndim=2)
    N, K = arr.shape
    if n_labels is None:
        nlab = np.full(N, K, dtype=np.int64)
    else:
        nlab = np.asarray(n_labels)
        if nlab.shape != (N,) or (nlab.size and not np.issubdtype(nlab.dtype, np.integer)):
            raise ValueError(f"`n_labels` must be an int array of shape ({N},); got {nlab.dtype} {nlab.shape}")
        nlab = nlab.astype(np.int64)
        if nlab.size and (nlab.min() < 1 or nlab.max() > K):
            raise ValueError(f"`n_labels` must lie in [1, {K}] (K = unary.shape[1]); got values in "
                             f"[{nlab.min()}, {nlab.max()}]")
        arr = arr.copy()
        arr[np.arange(K)[None, :] >= nlab[:, None]] = -np.inf
    if K == 0:
        raise ValueError("`unary` must have at least one label (K ≥ 1); got shape " + str(arr.shape))
    return arr, nlab


def _check_edges(edges):
    arr = np.asarray(edges)
    if arr.size == 0:
        return 0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"`edges` must have shape (E, 2) (one (u, v) pair per edge); got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`edges` must hold integer node indices; got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    return arr.shape[0], np.ascontiguousarray(arr[:, 0]), np.ascontiguousarray(arr[:, 1])


def _pack_pairwise(pairwise, E, K):
    if isinstance(pairwise, (list, tuple)) and len(pairwise) and np.ndim(pairwise[0]) == 2:
        if len(pairwise) != E:
            raise ValueError(f"`pairwise` as a list must have one (k_u, k_v) array per edge ({E}); got "
                             f"{len(pairwise)}")
        out = np.full((E, K, K), -np.inf)
        for e, p in enumerate(pairwise):
            p = check_log_potentials(p, f"pairwise[{e}]", ndim=2)
            if p.shape[0] > K or p.shape[1] > K:
                raise ValueError(f"`pairwise[{e}]` has shape {p.shape}, larger than (K, K) = ({K}, {K})")
            out[e, :p.shape[0], :p.shape[1]] = p
        return out, False
    arr = check_log_potentials(pairwise, "pairwise", ndim=(2, 3))
    if arr.ndim == 2:
        if arr.shape != (K, K):
            raise ValueError(f"`pairwise` must have shape (K, K) = ({K}, {K}) or (E, K, K) = ({E}, {K}, "
                             f"{K}); got {arr.shape}")
        return np.ascontiguousarray(arr[None]), True
    if arr.shape != (E, K, K):
        raise ValueError(f"`pairwise` must have shape (K, K) = ({K}, {K}) or (E, K, K) = ({E}, {K}, {K}); "
                         f"got {arr.shape}")
    return arr, False


def pack_factors(card, factors, tables, var_start, factor_graph):
    """Validate factors of any arity and pack them for the engine.

    Parameters
    ----------
    card : ndarray of int64, shape (N,)
        Cardinalities of all variables.
    factors : sequence of F sequences of int
        Scopes as variable indices local to their graph (distinct, at least one).
    tables : sequence of F array-likes
        Log-potential tables, ``tables[f]`` of shape ``[card[v] for v in factors[f]]`` (axis j is the
        j-th variable of the scope; -inf forbids).
    var_start : ndarray of int64, shape (B,)
        First global variable of every graph.
    factor_graph : ndarray of int64, shape (F,)
        Graph of every factor.

    Returns
    -------
    scopes : list of tuple (local indices), fvar (P,) global, fptr (F+1,), fstride (P,), tab (T,),
    toff (F,)
    """
    F = len(factors)
    if len(tables) != F:
        raise ValueError(f"`tables` must hold one table per factor ({F}); got {len(tables)}")
    scopes, fvar, fstride, flat, toff = [], [], [], [], np.zeros(F, dtype=np.int64)
    fptr = np.zeros(F + 1, dtype=np.int64)
    pos = 0
    for f in range(F):
        s = np.asarray(factors[f])
        if s.ndim != 1 or s.size == 0 or not np.issubdtype(s.dtype, np.integer):
            raise ValueError(f"`factors[{f}]` must be a non-empty sequence of integer variable indices; got "
                             f"{s.dtype} {s.shape}")
        s = s.astype(np.int64)
        b = int(factor_graph[f])
        n_b = int(var_start[b + 1] - var_start[b])
        if s.min() < 0 or s.max() >= n_b:
            raise ValueError(f"`factors[{f}]` = {s.tolist()} is out of range: graph {b} has {n_b} variables "
                             f"(local indices 0..{n_b - 1})")
        if np.unique(s).size != s.size:
            raise ValueError(f"`factors[{f}]` = {s.tolist()} repeats a variable; a factor's variables must "
                             f"be distinct")
        g = s + var_start[b]
        shape = tuple(int(c) for c in card[g])
        t = check_log_potentials(tables[f], f"tables[{f}]", ndim=len(shape))
        if t.shape != shape:
            raise ValueError(f"`tables[{f}]` must have shape {shape} (the cardinalities of variables "
                             f"{s.tolist()}); got {t.shape}")
        strides = np.ones(len(shape), dtype=np.int64)
        for j in range(len(shape) - 2, -1, -1):
            strides[j] = strides[j + 1] * shape[j + 1]
        scopes.append(tuple(s.tolist()))
        fvar.append(g)
        fstride.append(strides)
        flat.append(np.ascontiguousarray(t).ravel())
        toff[f] = pos
        pos += t.size
        fptr[f + 1] = fptr[f] + s.size
    cat = (lambda xs, dt: np.ascontiguousarray(np.concatenate(xs)).astype(dt) if xs else np.zeros(0, dt))
    return (scopes, cat(fvar, np.int64), fptr, cat(fstride, np.int64), cat(flat, np.float64), toff)
