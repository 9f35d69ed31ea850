"""Brute-force oracle for pairwise factor graphs: enumerate every joint assignment of one small graph.
Imports nothing from structlearn."""
import itertools
import math

import numpy as np

from ._common import best, posterior


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
