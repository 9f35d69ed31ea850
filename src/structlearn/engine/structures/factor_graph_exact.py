"""Exact inference on one factor graph by a junction tree (clique tree) from a greedy elimination order.

Elimination of v (in the order of :func:`structlearn.engine.kernels.elimination.elimination_order`, min-fill or
min-weight) creates the clique C_v = {v} ∪ N(v) of the moral graph with fill edges; its separator
C_v \\ {v} lies in the clique of the earliest-eliminated separator variable, its parent (Koller &
Friedman 2009, §10.4.1). Every factor goes to the clique of its first-eliminated variable, which holds
its whole scope. Calibration is two passes of the semiring ⊕ (logsumexp: marginals, Shafer–Shenoy;
max: max-marginals, Koller & Friedman §13.3); the downward message to a child c is
⊕_{C \\ S_c}(β_C − μ_{c↑}), with −inf where μ_{c↑} is −inf (those entries have zero belief in c
whatever the message says). MAP: traceback in reverse elimination order, each variable the argmax of
its clique's upward table given the variables decoded before it (exact under ties).

Tables are NumPy arrays in the log domain with one axis per clique variable (sorted). Time and memory
O(Σ_cliques Π_{v ∈ C} card[v]); ``log Z`` alone keeps only the tables in flight.
"""
import collections
import threading
from dataclasses import dataclass

import numpy as np

from ..kernels.elimination import HEURISTICS, elimination_order, upward_pass
from ..semirings import LOG, MAX

#: Cliques with more table entries than this are built by vectorised NumPy (fast exp, SIMD adds); the
#: others, where Python's per-call cost would dominate, in one compiled call per run of cliques.
BIG_CLIQUE = 4096


@dataclass
class JunctionTree:
    """The compiled junction tree of one graph (:meth:`FactorGraph.junction_tree`).

    Attributes
    ----------
    order : ndarray of int64, shape (n,)
        Elimination order (local variable indices); clique i eliminates ``order[i]``.
    cliques : list of tuple of int
        Sorted variables of every clique, in elimination order.
    parent : ndarray of int64, shape (m,)
        Parent clique (-1 for a root; one root per connected component).
    var_clique, factor_clique : ndarray of int64, shapes (n,) and (F,)
        The clique that holds every variable's potential / every factor.
    table_sizes : ndarray of int64, shape (m,)
        Entries of every clique table, Π_{v ∈ C} card[v] (capped at 2**62).
    treewidth : int
        max |C| − 1 of this order (an upper bound on the graph's treewidth).
    heuristic : str
    """

    order: np.ndarray
    cliques: list
    parent: np.ndarray
    var_clique: np.ndarray
    factor_clique: np.ndarray
    table_sizes: np.ndarray
    treewidth: int
    heuristic: str

    @property
    def total_size(self):
        """Σ table_sizes: entries stored by a calibration (marginals, max-marginals, MAP)."""
        return int(self.table_sizes.astype(np.float64).sum())

    def largest(self):
        """(index, variables, entries) of the largest clique."""
        i = int(np.argmax(self.table_sizes)) if len(self.cliques) else 0
        return i, (self.cliques[i] if self.cliques else ()), int(self.table_sizes[i]) if self.cliques else 0

    def compiled(self, K, scopes, fby, children, seps):
        """The arrays of :func:`~structlearn.engine.kernels.elimination.upward_pass` (cached): potentials are read
        from ``[var_pot (n, K).ravel(), tables[0].ravel(), …]`` (C order over every scope)."""
        if getattr(self, "_compiled", None) is not None:
            return self._compiled
        card = self._card
        n, m = len(card), len(self.cliques)
        fbase = n * K + np.concatenate([[0], np.cumsum([int(np.prod([card[v] for v in s])) for s in scopes])])
        amax = max((len(C) for C in self.cliques), default=1)
        shape_flat, shape_off, elim = [], [0], []
        full_off, msg_off, t_ptr, kinds, bases, strides = [0], [0], [0], [], [], []
        for i, C in enumerate(self.cliques):
            v = int(self.order[i])
            ax = {a: j for j, a in enumerate(C)}
            shape = [int(card[a]) for a in C]
            shape_flat += shape
            shape_off.append(len(shape_flat))
            elim.append(ax[v])
            size = int(np.prod(shape))
            full_off.append(full_off[-1] + size)
            msg_off.append(msg_off[-1] + size // int(card[v]))

            def term(kind, base, vs):
                row = np.zeros(amax, dtype=np.int64)
                for a, w in zip(vs, _c_strides(np.array([int(card[u]) for u in vs], dtype=np.int64))):
                    row[ax[a]] = w
                kinds.append(kind)
                bases.append(base)
                strides.append(row)

            term(0, v * K, (v,))
            for f in fby[i]:
                term(0, int(fbase[f]), scopes[f])
            for c in children[i]:
                term(1, msg_off[c], seps[c])
            t_ptr.append(len(kinds))
        i64 = (lambda x: np.asarray(x, dtype=np.int64))
        self._compiled = (i64(shape_flat), i64(shape_off), i64(elim), i64(full_off), i64(msg_off), i64(t_ptr),
                          i64(kinds), i64(bases), np.array(strides, dtype=np.int64).reshape(-1, amax))
        return self._compiled

    def check(self, max_table_size, memory_limit, store, graph=0):
        """ValueError naming the largest clique when a table or the stored total exceeds the limits."""
        i, C, size = self.largest()
        need = 8 * (self.total_size if store else 2 * size)
        if size > max_table_size or need > memory_limit:
            what = (f"a clique table of {size} entries > max_table_size={max_table_size}" if size > max_table_size
                    else f"{need / 2**20:.1f} MiB of tables > memory_limit={memory_limit / 2**20:.1f} MiB")
            raise ValueError(
                f"exact inference on graph {graph} needs {what}: largest clique {i} has variables "
                f"{list(C)} ({len(C)} variables, treewidth {self.treewidth} under a {self.heuristic} order); "
                f"use method='bp', 'trw' or 'mf', or raise max_table_size / memory_limit")


def plan_junction_tree(card, scopes, heuristic="auto"):
    """Compile the junction tree of one graph: variables with ``card`` (n,), factors with ``scopes``
    (list of tuples of local variable indices). Time O(n · (Δ² + n)) for the order, memory O(n²).

    ``heuristic``: ``"min-fill"``, ``"min-weight"``, ``"natural"`` (the variables' own order) or
    ``"auto"``: the cheapest of the three by Σ of clique table sizes (greedy orders are far from optimal
    on grids: min-fill gives treewidth 29 on a 20 × 20 grid, the row-major order 20).
    """
    if heuristic == "auto":
        plans = [plan_junction_tree(card, scopes, h) for h in ("min-fill", "min-weight", "natural")]
        return min(plans, key=lambda p: (float(p.table_sizes.astype(np.float64).sum()), p.treewidth))
    if heuristic == "natural":
        plan = plan_from_order(card, scopes, np.arange(len(card)))
        plan.heuristic = "natural"
        return plan
    if heuristic not in HEURISTICS:
        raise ValueError(f"`order` must be one of {sorted(HEURISTICS) + ['auto', 'natural']} or a "
                         f"permutation array; got {heuristic!r}")
    n = len(card)
    card = np.asarray(card, dtype=np.int64)
    adj = np.zeros((n, n), dtype=np.bool_)
    for s in scopes:
        s = np.asarray(s, dtype=np.int64)
        adj[np.ix_(s, s)] = True
    adj[np.arange(n), np.arange(n)] = False
    order = elimination_order(adj.copy(), card, HEURISTICS[heuristic])
    return _plan_from_order(adj, card, scopes, order, heuristic)


def _plan_from_order(adj, card, scopes, order, heuristic):
    n = card.shape[0]
    nbrs = [set(np.flatnonzero(adj[v]).tolist()) for v in range(n)]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    cliques = []
    for v in order.tolist():
        nb = nbrs[v]
        for a in nb:
            nbrs[a] |= nb
            nbrs[a].discard(a)
            nbrs[a].discard(v)
        cliques.append(tuple(sorted(nb | {v})))
    parent = np.full(n, -1, dtype=np.int64)
    for i, C in enumerate(cliques):
        sep = [pos[a] for a in C if a != order[i]]
        if sep:
            parent[i] = min(sep)
    fcl = np.array([int(pos[list(s)].min()) for s in scopes], dtype=np.int64) if scopes else \
        np.zeros(0, dtype=np.int64)
    sizes = np.array([int(min(np.prod(card[list(C)], dtype=np.float64), 2.0**62)) for C in cliques], dtype=np.int64)
    tw = max((len(C) for C in cliques), default=1) - 1
    plan = JunctionTree(order, cliques, parent, pos.copy(), fcl, sizes, tw, str(heuristic))
    plan._card = card.copy()
    return plan


_PLANS = collections.OrderedDict()   # (card, scopes, order, K) -> JunctionTree, least recently used first
_PLANS_LOCK = threading.Lock()
PLAN_CACHE_SIZE = 4096


def shared_plan(card, scopes, order, n_labels):
    """The :class:`JunctionTree` of ``plan_junction_tree(card, scopes, order)`` (``order`` a heuristic name)
    or ``plan_from_order`` (an array), shared by every graph of the same structure in this process.

    Planning is deterministic in (card, scopes, order) and the plan's compiled arrays in ``n_labels`` too,
    so graphs of one shape (and the same graph rebuilt with new potentials, as an objective does at every
    evaluation) reuse one plan instead of planning again. The ``PLAN_CACHE_SIZE`` most recently used plans
    are kept. The plan returned is shared: read it, never modify it.
    """
    card = np.asarray(card, dtype=np.int64)
    scopes_key = tuple(tuple(int(v) for v in s) for s in scopes)
    order_key = order if isinstance(order, str) else tuple(np.asarray(order).tolist())
    key = (card.tobytes(), scopes_key, order_key, int(n_labels))
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            return plan
    plan = (plan_junction_tree(card, scopes, order) if isinstance(order, str)
            else plan_from_order(card, scopes, order))
    with _PLANS_LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > PLAN_CACHE_SIZE:
            _PLANS.popitem(last=False)
    return plan


def plan_from_order(card, scopes, order):
    """The junction tree of a given elimination order (a permutation of the n variables)."""
    n = len(card)
    card = np.asarray(card, dtype=np.int64)
    order = np.asarray(order)
    if order.shape != (n,) or not np.issubdtype(order.dtype, np.integer) or \
            not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError(f"`order` as an array must be a permutation of the {n} variables of the graph; got "
                         f"{order.dtype} {order.shape}")
    adj = np.zeros((n, n), dtype=np.bool_)
    for s in scopes:
        s = np.asarray(s, dtype=np.int64)
        adj[np.ix_(s, s)] = True
    adj[np.arange(n), np.arange(n)] = False
    return _plan_from_order(adj, card, scopes, order.astype(np.int64), "given")


def _reduce(table, axes, sr):
    """⊕ over ``axes`` (logsumexp or max), -inf safe: max, then one exp / sum / log in place."""
    if not axes:
        return table
    axes = tuple(axes)
    if sr == MAX:
        return table.max(axis=axes)
    m = table.max(axis=axes, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    tmp = table - m
    with np.errstate(divide="ignore", under="ignore"):
        np.exp(tmp, out=tmp)
        out = np.log(tmp.sum(axis=axes))
    return out + np.squeeze(m, axis=axes)


def _c_strides(shape):
    """C-order strides (in entries) of a table of ``shape``."""
    st = np.ones(len(shape), dtype=np.int64)
    for j in range(len(shape) - 2, -1, -1):
        st[j] = st[j + 1] * shape[j + 1]
    return st


def _expand(table, vars_, target, card):
    """View a table over sorted ``vars_`` broadcastable to the sorted superset ``target``."""
    s = set(vars_)
    return table.reshape([int(card[v]) if v in s else 1 for v in target])


def _normalised(logt):
    """exp(logt − logsumexp(logt)) (all 0 when all -inf)."""
    z = _reduce(logt, range(logt.ndim), LOG)
    if z == -np.inf:
        return np.zeros(logt.shape)
    with np.errstate(under="ignore"):
        return np.exp(logt - z)


def run_junction_tree(plan, card, var_pot, scopes, tables, sr, calibrate):
    """Exact inference on one graph with a compiled plan.

    Parameters
    ----------
    plan : JunctionTree
    card : ndarray of int64, shape (n,)
    var_pot : ndarray of float64, shape (n, K)
        Log-potentials of the variables (-inf padding beyond card).
    scopes : list of tuple of int, length F
    tables : list of ndarray of float64
        ``tables[f]`` has shape ``[card[v] for v in scopes[f]]`` (log space).
    sr : int
        LOG or MAX.
    calibrate : bool
        Also the (max-)marginals (and, for MAX, the decoding); otherwise log Z / the max alone.

    Returns
    -------
    log_z : float
        log Z (LOG) or the maximum score (MAX); -inf when no labeling is feasible.
    var_marg : ndarray of float64, shape (n, K) or None
        Marginals (LOG) or max-marginals normalised to sum 1 (MAX), linear space.
    factor_marg : list of ndarray or None
        Same for every factor, shaped like its table.
    labels : ndarray of int64, shape (n,) or None
        A MAP labeling (MAX, calibrate, feasible).
    """
    n, K = var_pot.shape
    m = len(plan.cliques)
    cl, order, parent = plan.cliques, plan.order, plan.parent
    children = [[] for _ in range(m)]
    for i in range(m):
        if parent[i] >= 0:
            children[parent[i]].append(i)
    fby = [[] for _ in range(m)]
    for f, i in enumerate(plan.factor_clique.tolist()):
        fby[i].append(f)
    seps = [tuple(a for a in cl[i] if a != order[i]) for i in range(m)]
    comp = plan.compiled(K, scopes, fby, children, seps)
    src = np.concatenate([np.ascontiguousarray(var_pot, dtype=np.float64).ravel()] +
                         [np.ascontiguousarray(t, dtype=np.float64).ravel() for t in tables])
    store = calibrate or sr == MAX
    shape_flat, shape_off, elim, full_off, msg_off, t_ptr, t_kind, t_base, t_stride = comp
    msgbuf = np.empty(msg_off[-1])
    full = np.empty(full_off[-1] if store else 0)
    big = plan.table_sizes > BIG_CLIQUE
    total = 0.0
    i = 0
    while i < m:            # runs of small cliques in one compiled call; large ones vectorised by NumPy
        j = i
        while j < m and big[j] == big[i]:
            j += 1
        if not big[i]:
            total += float(upward_pass(*comp, plan.parent, src, sr, store, np.arange(i, j), msgbuf, full))
        for c in range(i, j) if big[i] else ():
            shape = shape_flat[shape_off[c]:shape_off[c + 1]]
            t = np.zeros(shape)
            for r in range(t_ptr[c], t_ptr[c + 1]):
                base = src if t_kind[r] == 0 else msgbuf
                t += np.lib.stride_tricks.as_strided(base[t_base[r]:], tuple(shape),
                                                     tuple(8 * int(w) for w in t_stride[r, :shape.size]))
            mc = _reduce(t, [int(elim[c])], sr)
            msgbuf[msg_off[c]:msg_off[c + 1]] = np.ravel(mc)
            if store:
                full[full_off[c]:full_off[c + 1]] = t.ravel()
            if plan.parent[c] < 0:
                total += float(mc)
        i = j
    up, inc = [None] * m, [None] * m
    if store:
        for i in range(m):
            up[i] = msgbuf[comp[4][i]:comp[4][i + 1]].reshape([int(card[a]) for a in seps[i]])
            inc[i] = full[comp[3][i]:comp[3][i + 1]].reshape([int(card[a]) for a in cl[i]])
    if not calibrate:
        return total, None, None, None
    labels = None
    if sr == MAX and total > -np.inf:
        labels = np.zeros(n, dtype=np.int64)
        for i in reversed(range(m)):
            v = int(order[i])
            idx = tuple(slice(None) if a == v else labels[a] for a in cl[i])
            labels[v] = int(np.argmax(inc[i][idx]))
    var_marg = np.zeros((n, K))
    factor_marg = [np.zeros(np.shape(tb)) for tb in tables]
    if total == -np.inf:
        return total, var_marg, factor_marg, labels
    down = [None] * m
    vby = [[] for _ in range(m)]
    for v, i in enumerate(plan.var_clique.tolist()):
        vby[i].append(v)
    for i in reversed(range(m)):
        C = cl[i]
        bel = inc[i] if down[i] is None else inc[i] + _expand(down[i], seps[i], C, card)
        inc[i] = down[i] = None
        for c in children[i]:
            u = _expand(up[c], seps[c], C, card)
            with np.errstate(invalid="ignore"):
                t = np.where(u == -np.inf, -np.inf, bel - u)
            down[c] = _reduce(t, [k for k, a in enumerate(C) if a not in set(seps[c])], sr)
            up[c] = None
        # LOG: the clique's normalised belief once, each marginal a sum of it (one exp of the table instead of
        # one per variable and factor); MAX: max-marginals, each normalised on its own
        p = _normalised(bel) if sr == LOG and (vby[i] or fby[i]) else None
        for v in vby[i]:
            axes = tuple(k for k, a in enumerate(C) if a != v)
            var_marg[v, :card[v]] = p.sum(axis=axes) if p is not None else _normalised(_reduce(bel, axes, sr))
        for f in fby[i]:
            s = scopes[f]
            ss = set(s)
            axes = tuple(k for k, a in enumerate(C) if a not in ss)
            srt = sorted(s)
            mt = p.sum(axis=axes) if p is not None else _reduce(bel, axes, sr)   # axes in sorted order
            mt = np.transpose(mt, [srt.index(a) for a in s])
            factor_marg[f] = mt if p is not None else _normalised(mt)
    return total, var_marg, factor_marg, labels
