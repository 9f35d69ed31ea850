"""Brute-force oracle for graph CRFs with features on factors of any arity and partial labels: enumerate
every labeling of small graphs. Imports nothing from structlearn.

Model: score(x) = Σ_n (nf[n] @ W_node)[x_n] + Σ_e (Σ_f ef[e, f] W_edge[f])[x_u, x_v]
                 + Σ_h (Σ_g ff[h, g] W[r_h][g])[x_{scope_h}]
with W[r] of shape (G, K, ..., K) (r label axes, axis j = j-th node of the scope).
"""
import itertools
import math

import numpy as np

from ._common import logsumexp as _logsumexp


def labeling_scores(sample, W_node, W_edge, W_factor):
    """(labeling tuple, score) of every labeling of one graph, lexicographic order.

    sample: (node_features (n, D), edges (m, 2), edge_features (m, F), factors (list of scopes),
    factor_features (H, G)); W_node (D, K); W_edge (F, K, K); W_factor dict arity -> (G, K, ..., K).
    """
    nf, edges, ef, factors, ff = sample
    nf = np.asarray(nf, dtype=float)
    K = W_node.shape[1]
    n = nf.shape[0]
    out = []
    for x in itertools.product(range(K), repeat=n):
        s = 0.0
        for v in range(n):
            for d in range(nf.shape[1]):
                s += nf[v, d] * W_node[d, x[v]]
        for e, (u, v) in enumerate(np.asarray(edges).reshape(-1, 2).tolist()):
            for f in range(W_edge.shape[0]):
                s += ef[e][f] * W_edge[f, x[u], x[v]]
        for h, scope in enumerate(factors):
            W = W_factor[len(scope)]
            idx = tuple(x[v] for v in scope)
            for g in range(W.shape[0]):
                s += ff[h][g] * W[(g,) + idx]
        out.append((x, s))
    return out


def log_partition(sample, W_node, W_edge, W_factor, labels=None):
    """log Z of one graph, or with ``labels`` (n,) (-1 hidden) the clamped log Z(v, o)."""
    items = labeling_scores(sample, W_node, W_edge, W_factor)
    if labels is not None:
        items = [(x, s) for x, s in items if all(labels[v] < 0 or labels[v] == x[v] for v in range(len(x)))]
    return _logsumexp(s for _, s in items)


def negative_log_likelihood(samples, labels, W_node, W_edge, W_factor, weights=None):
    """Σ_i weight_i (log Z_i − log Z_i(v_i, o_i)); graphs without an observed label contribute 0."""
    total = 0.0
    for i, (sample, y) in enumerate(zip(samples, labels)):
        if not any(v >= 0 for v in y):
            continue
        wt = 1.0 if weights is None else float(weights[i])
        total += wt * (log_partition(sample, W_node, W_edge, W_factor)
                       - log_partition(sample, W_node, W_edge, W_factor, y))
    return total


def node_marginals(sample, W_node, W_edge, W_factor, K):
    """P(x_n = k), shape (n, K)."""
    items = labeling_scores(sample, W_node, W_edge, W_factor)
    lz = _logsumexp(s for _, s in items)
    n = len(items[0][0])
    out = np.zeros((n, K))
    for x, s in items:
        p = math.exp(s - lz)
        for v in range(n):
            out[v, x[v]] += p
    return out


def map_labeling(sample, W_node, W_edge, W_factor):
    """The highest-scoring labeling (first in lexicographic order on ties), shape (n,) int."""
    best = max(labeling_scores(sample, W_node, W_edge, W_factor), key=lambda t: t[1])
    return np.array(best[0], dtype=np.int64)
