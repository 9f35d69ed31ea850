"""Brute-force oracle for pairwise factor graphs: enumerate every joint assignment of one small graph.
Imports nothing from structlearn."""
import itertools
import math

import numpy as np

from ._common import best, logsumexp, posterior


def graph_oracle(unary, edges, pairwise, n_labels=None):
    """log Z, max score, one MAP labeling, node marginals (n, K) and edge marginals (E, K, K).

    unary (n, K); edges (E, 2) node indices; pairwise (E, K, K), pairwise[e, i, j] scores x_u = i, x_v = j
    for edges[e] = (u, v); n_labels (n,) labels per node (default K). Marginals are 0 when log Z = -inf.
    """
    n, K = unary.shape
    ks = [K] * n if n_labels is None else [int(k) for k in n_labels]
    items = []
    for x in itertools.product(*[range(k) for k in ks]):
        s = 0.0
        for v in range(n):
            s += unary[v, x[v]]
        for e, (u, v) in enumerate(edges):
            s += pairwise[e, x[u], x[v]]
        items.append((x, s))
    node = np.zeros((n, K))
    edge = np.zeros((len(edges), K, K))
    post = posterior(items)
    if post["log_z"] == -math.inf:
        return -math.inf, -math.inf, None, node, edge
    for x, _, p in post["weighted"]:
        for v in range(n):
            node[v, x[v]] += p
        for e, (u, v) in enumerate(edges):
            edge[e, x[u], x[v]] += p
    m, arg = best(items)
    return post["log_z"], m, np.array(arg), node, edge


def factor_oracle(cards, factors, tables, unary=None):
    """Brute force over every joint assignment of one factor graph with factors of any arity.

    cards (n,) cardinalities; factors: list of scopes (tuples of variable indices); tables: log-tables,
    tables[f][x_{s_0}, x_{s_1}, ...] for scope s = factors[f]; unary (n, K) optional variable
    log-potentials (K = max card). Returns a dict: log_z, max, maps (every maximising assignment),
    var (n, K) marginals, factor (list of marginal tables), var_max (n, K) and factor_max (list):
    max-marginals max_{x: x_v = k} s(x), normalised to sum 1 in linear space. Marginals are 0 when
    log Z = -inf.
    """
    n = len(cards)
    K = max(cards)
    items = []
    for x in itertools.product(*[range(k) for k in cards]):
        s = 0.0
        if unary is not None:
            for v in range(n):
                s += unary[v][x[v]]
        for scope, t in zip(factors, tables):
            s += t[tuple(x[v] for v in scope)]
        items.append((x, s))
    post = posterior(items)
    var = np.zeros((n, K))
    fac = [np.zeros(np.shape(t)) for t in tables]
    vmax = np.full((n, K), -math.inf)
    fmax = [np.full(np.shape(t), -math.inf) for t in tables]
    top = max(s for _, s in items)
    maps = [x for x, s in items if s == top and top > -math.inf]
    if post["log_z"] > -math.inf:
        for x, _, p in post["weighted"]:
            for v in range(n):
                var[v, x[v]] += p
            for f, scope in enumerate(factors):
                fac[f][tuple(x[v] for v in scope)] += p
    for x, s in items:
        for v in range(n):
            vmax[v, x[v]] = max(vmax[v, x[v]], s)
        for f, scope in enumerate(factors):
            i = tuple(x[v] for v in scope)
            fmax[f][i] = max(fmax[f][i], s)

    def normalise(a):
        if top == -math.inf:
            return np.zeros(a.shape)
        z = logsumexp(a.ravel().tolist())
        return np.exp(a - z)

    return {"log_z": post["log_z"], "max": top, "maps": maps, "var": var, "factor": fac,
            "var_max": np.array([normalise(r) for r in vmax]), "factor_max": [normalise(a) for a in fmax]}


def grid_log_z(unary, horizontal, vertical):
    """log Z of an h × w grid MRF by variable elimination in row-major order (a transfer over the frontier
    of the last w variables: memory K**w).

    unary (h, w, K); horizontal (h, w − 1, K, K) scores (r, c)–(r, c + 1); vertical (h − 1, w, K, K)
    scores (r, c)–(r + 1, c) (first index: the upper/left variable).
    """
    h, w, K = unary.shape
    # frontier table over the previous w variables in order (oldest first): axis j ↔ variable t − w + j
    front = None
    for r in range(h):
        for c in range(w):
            new = unary[r, c].copy()
            if front is None:
                front = new.reshape(K)
                continue
            nd = front.ndim
            t = front[..., None] + new.reshape((1,) * nd + (K,))
            if c > 0:        # left neighbour is the last axis of the frontier
                t = t + horizontal[r, c - 1].reshape((1,) * (nd - 1) + (K, K))
            if r > 0:        # upper neighbour is the first axis when the frontier holds w variables
                t = t + vertical[r - 1, c].reshape((K,) + (1,) * (nd - 1) + (K,))
            if nd == w:      # eliminate the oldest variable
                m = t.max(axis=0, keepdims=True)
                t = np.log(np.exp(t - m).sum(axis=0)) + m[0]
            front = t
    m = front.max()
    return float(np.log(np.exp(front - m).sum()) + m)
