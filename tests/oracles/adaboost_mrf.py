"""Brute-force oracle for AdaBoost.MRF (Tran, Phung & Venkatesh 2014, eqs. (22)–(23)): the Hölder bound
of a forest of tree CRFs by enumerating every labeling, and the 1-D α step by a grid search.
Imports nothing from structlearn."""
import numpy as np

from ._common import logsumexp
from .graph_crf import graph_crf_nll


def tree_log_likelihoods(samples, labels, tree_edges, W_node, W_edge):
    """log P_τ(v_i | o_i) (B,) of the CRF (W_node (D, K), W_edge (F, K, K)) on the edges ``tree_edges``
    (one index array per graph) of each graph, by enumeration."""
    out = []
    for (nf, edges, ef), y, idx in zip(samples, labels, tree_edges):
        idx = np.asarray(idx, dtype=int)
        out.append(-graph_crf_nll([(nf, edges[idx], ef[idx])], [y], W_node, W_edge))
    return np.array(out)


def holder_log_bound(samples, labels, learners, beta):
    """log L_H = log Σ_i exp(−β Σ_l α_l log P_τl(v_i | o_i)); learners: list of (α, tree_edges, W_node,
    W_edge) with tree_edges one index array per graph."""
    H = sum(a * tree_log_likelihoods(samples, labels, t, wn, we) for a, t, wn, we in learners)
    return logsumexp(-beta * H)


def alpha_grid_search(H, h, beta, n=200001):
    """(α, log L_H) minimising log Σ_i exp(−β((1 − α) H_i + α h_i)) over an even grid of [0, 1]."""
    H, h = np.asarray(H, float), np.asarray(h, float)
    best = (np.inf, None)
    for chunk in np.array_split(np.linspace(0.0, 1.0, n), 20):
        z = -beta * ((1 - chunk[:, None]) * H + chunk[:, None] * h)
        m = z.max(axis=1, keepdims=True)
        vals = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True))).ravel()
        j = int(np.argmin(vals))
        if vals[j] < best[0]:
            best = (float(vals[j]), float(chunk[j]))
    return best[1], best[0]
