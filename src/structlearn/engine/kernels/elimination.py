"""Numba greedy elimination orders on an undirected graph (the moral graph of a factor graph).

Arrays in, arrays out. ``adj`` (n, n) bool is the symmetric adjacency (no self loops), ``card`` (n,)
the variables' cardinalities. At every step the remaining variable with the smallest key is eliminated
(ties: the smallest index) and its neighbours are joined into a clique (Koller & Friedman 2009, §9.4.3):

- ``MIN_FILL``: key (number of fill edges, clique weight);
- ``MIN_WEIGHT``: key (clique weight, number of fill edges), the weight being Π_{u ∈ {v} ∪ N(v)} card[u].

Only the variables within distance 2 of the eliminated one change key; they alone are rescored.
Time O(n · (Δ² + n)) per order for maximal degree Δ, memory O(n²).

:func:`upward_pass` runs the collect pass of a compiled junction tree (the plan of
:mod:`structlearn.engine.structures.factor_graph_exact`) in one call.
"""
import math

import numpy as np
from numba import njit

MIN_FILL = 0
MIN_WEIGHT = 1
HEURISTICS = {"min-fill": MIN_FILL, "min-weight": MIN_WEIGHT}


@njit(cache=True)
def _score(v, adj, alive, card, heuristic):
    n = adj.shape[0]
    nb = np.empty(n, dtype=np.int64)
    d = 0
    w = float(card[v])
    for u in range(n):
        if alive[u] and adj[v, u]:
            nb[d] = u
            d += 1
            w *= card[u]
    fill = 0
    for i in range(d):
        for j in range(i + 1, d):
            if not adj[nb[i], nb[j]]:
                fill += 1
    if heuristic == MIN_FILL:
        return float(fill), w
    return w, float(fill)


@njit(cache=True)
def elimination_order(adj, card, heuristic):
    """Greedy elimination order (n,) int64; ``adj`` is modified (fill edges added)."""
    n = adj.shape[0]
    alive = np.ones(n, dtype=np.bool_)
    k1 = np.empty(n)
    k2 = np.empty(n)
    for v in range(n):
        k1[v], k2[v] = _score(v, adj, alive, card, heuristic)
    order = np.empty(n, dtype=np.int64)
    touched = np.zeros(n, dtype=np.bool_)
    for step in range(n):
        best = -1
        for v in range(n):
            if alive[v] and (best < 0 or k1[v] < k1[best] or (k1[v] == k1[best] and k2[v] < k2[best])):
                best = v
        order[step] = best
        alive[best] = False
        nb = np.flatnonzero(adj[best] & alive)
        for i in range(nb.shape[0]):
            for j in range(i + 1, nb.shape[0]):
                adj[nb[i], nb[j]] = True
                adj[nb[j], nb[i]] = True
        touched[:] = False
        for i in range(nb.shape[0]):
            touched[nb[i]] = True
            for u in range(n):
                if alive[u] and adj[nb[i], u]:
                    touched[u] = True
        for u in range(n):
            if touched[u]:
                k1[u], k2[u] = _score(u, adj, alive, card, heuristic)
    return order


@njit(cache=True)
def upward_pass(shape_flat, shape_off, elim, full_off, msg_off, t_ptr, t_kind, t_base, t_stride, parent, src,
                semiring, store, cliques, msgbuf, full):
    """The whole upward (collect) pass of a compiled junction tree in one call.

    Clique i has the cardinalities ``shape_flat[shape_off[i]:shape_off[i+1]]`` (its sorted variables) and
    eliminates axis ``elim[i]``; its terms are ``t_ptr[i]..t_ptr[i+1]-1``: term τ reads
    ``src[t_base[τ] + Σ_j x_j t_stride[τ, j]]`` (``t_kind`` 0: potentials) or the same in the message buffer
    (``t_kind`` 1: a child's upward message, written earlier). The message of clique i, ⊕_{x_elim} of its
    table (logsumexp or max), goes to ``msgbuf[msg_off[i]:msg_off[i+1]]`` in C order over the other axes;
    with ``store`` the table itself goes to ``full[full_off[i]:full_off[i+1]]`` (C order). Only the cliques
    listed in ``cliques`` (increasing) are computed, into the caller's ``msgbuf`` / ``full``. Returns the
    Σ over those that are roots of their message (log Z or the max). Time O(Σ_i |C_i| · terms_i).
    """
    m = elim.shape[0]
    amax, tmax, kmax = 1, 1, 1
    for i in range(m):
        amax = max(amax, shape_off[i + 1] - shape_off[i])
        tmax = max(tmax, t_ptr[i + 1] - t_ptr[i])
        kmax = max(kmax, shape_flat[shape_off[i] + elim[i]])
    xs = np.zeros(amax, dtype=np.int64)
    fs = np.ones(amax, dtype=np.int64)
    idx = np.empty(tmax, dtype=np.int64)
    buf = np.empty(kmax)
    total = 0.0
    for i in cliques:
        s0 = shape_off[i]
        a = shape_off[i + 1] - s0
        e = elim[i]
        k = shape_flat[s0 + e]
        tp0, tp1 = t_ptr[i], t_ptr[i + 1]
        fs[a - 1] = 1
        for j in range(a - 2, -1, -1):
            fs[j] = fs[j + 1] * shape_flat[s0 + j + 1]
        n_out = 1
        for j in range(a):
            xs[j] = 0
            if j != e:
                n_out *= shape_flat[s0 + j]
        for t in range(tp0, tp1):
            idx[t - tp0] = t_base[t]
        fo = full_off[i]
        mo = msg_off[i]
        for o in range(n_out):
            mx = -np.inf
            for x in range(k):
                v = 0.0
                for t in range(tp0, tp1):
                    q = idx[t - tp0] + x * t_stride[t, e]
                    v += src[q] if t_kind[t] == 0 else msgbuf[q]
                buf[x] = v
                if store:
                    full[fo + x * fs[e]] = v
                if v > mx:
                    mx = v
            r = mx
            if semiring != 1 and mx > -np.inf:
                if k == 2:                      # log(e^a + e^b) = max + log1p(e^(min − max))
                    r = mx + math.log1p(math.exp(min(buf[0], buf[1]) - mx))
                else:
                    s = 0.0
                    for x in range(k):
                        s += math.exp(buf[x] - mx)
                    r = mx + math.log(s)
            msgbuf[mo + o] = r
            if parent[i] < 0:
                total += r
            j = a - 1
            while j >= 0:
                if j == e:
                    j -= 1
                    continue
                xs[j] += 1
                for t in range(tp0, tp1):
                    idx[t - tp0] += t_stride[t, j]
                fo += fs[j]
                if xs[j] < shape_flat[s0 + j]:
                    break
                for t in range(tp0, tp1):
                    idx[t - tp0] -= xs[j] * t_stride[t, j]
                fo -= xs[j] * fs[j]
                xs[j] = 0
                j -= 1
    return total
