"""Brute-force oracle for graph CRFs with partial labels: enumerate every labeling of small graphs.
Imports nothing from structlearn."""
import numpy as np

from ._common import best, labelings, logsumexp


def _scores(nf, edges, ef, W_node, W_edge):
    """(labeling, score) of every labeling of one graph, in lexicographic order."""
    K = W_node.shape[1]
    n = nf.shape[0]
    unary = nf @ W_node
    pair = np.einsum("ef,fij->eij", ef, W_edge)
    return [(x, sum(unary[v, x[v]] for v in range(n)) + sum(pair[e, x[u], x[v]] for e, (u, v) in enumerate(edges)))
            for x in labelings(n, K)]


def graph_crf_nll(samples, labels, W_node, W_edge, weights=None):
    """Σ_i weight_i · (log Z_i − log Z_i(visible clamped)) by enumeration.

    samples: list of (node_features (n, D), edges (m, 2), edge_features (m, F)); labels: list of (n,)
    int arrays with -1 for hidden nodes; W_node (D, K); W_edge (F, K, K).
    """
    total = 0.0
    for i, ((nf, edges, ef), y) in enumerate(zip(samples, labels)):
        items = _scores(nf, edges, ef, W_node, W_edge)
        clamped = [s for x, s in items if all(y[v] < 0 or y[v] == x[v] for v in range(len(x)))]
        wt = 1.0 if weights is None else float(weights[i])
        total += wt * (logsumexp(s for _, s in items) - logsumexp(clamped))
    return total


def graph_map(nf, edges, ef, W_node, W_edge):
    """Highest-scoring labeling (n,) of one graph by enumeration (first in lexicographic order on ties)."""
    return np.array(best(_scores(nf, edges, ef, W_node, W_edge))[1], dtype=np.int64)
