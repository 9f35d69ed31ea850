"""Brute-force oracle for graph CRFs with partial labels: enumerate every labeling of small graphs.
Imports nothing from structlearn."""
import itertools
import math

import numpy as np


def _logsumexp(values):
    m = max(values)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(v - m) for v in values))


def graph_crf_nll(samples, labels, W_node, W_edge, weights=None):
    """Σ_i weight_i · (log Z_i − log Z_i(visible clamped)) by enumeration.

    samples: list of (node_features (n, D), edges (m, 2), edge_features (m, F)); labels: list of (n,)
    int arrays with -1 for hidden nodes; W_node (D, K); W_edge (F, K, K).
    """
    K = W_node.shape[1]
    total = 0.0
    for i, ((nf, edges, ef), y) in enumerate(zip(samples, labels)):
        n = nf.shape[0]
        unary = nf @ W_node
        pair = np.einsum("ef,fij->eij", ef, W_edge)
        full, clamped = [], []
        for x in itertools.product(range(K), repeat=n):
            s = sum(unary[v, x[v]] for v in range(n))
            s += sum(pair[e, x[u], x[v]] for e, (u, v) in enumerate(edges))
            full.append(s)
            if all(y[v] < 0 or y[v] == x[v] for v in range(n)):
                clamped.append(s)
        wt = 1.0 if weights is None else float(weights[i])
        total += wt * (_logsumexp(full) - _logsumexp(clamped))
    return total


def graph_map(nf, edges, ef, W_node, W_edge):
    """Highest-scoring labeling (n,) of one graph by enumeration (first in lexicographic order on ties)."""
    K = W_node.shape[1]
    n = nf.shape[0]
    unary = nf @ W_node
    pair = np.einsum("ef,fij->eij", ef, W_edge)
    best, arg = -math.inf, None
    for x in itertools.product(range(K), repeat=n):
        s = sum(unary[v, x[v]] for v in range(n)) + sum(pair[e, x[u], x[v]] for e, (u, v) in enumerate(edges))
        if s > best:
            best, arg = s, x
    return np.array(arg, dtype=np.int64)
