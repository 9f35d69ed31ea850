"""Brute-force oracle for trees: enumerate all K**T labelings of one tree. Imports nothing from
structlearn."""
import itertools
import math

import numpy as np


def tree_scores(unary, edge, parent, root_score=None):
    """All labelings of one tree and their scores.

    unary (T, K); edge (K, K) shared or (T, K, K), edge[c, i, j] = child c labelled i under parent
    labelled j; parent (T,) local indices, -1 for the root; root_score (K,) or None.
    """
    T, K = unary.shape
    out = []
    for y in itertools.product(range(K), repeat=T):
        s = 0.0
        for n in range(T):
            s += unary[n, y[n]]
            p = parent[n]
            if p < 0:
                if root_score is not None:
                    s += root_score[y[n]]
            else:
                s += edge[y[n], y[p]] if edge.ndim == 2 else edge[n, y[n], y[p]]
        out.append((y, s))
    return out


def _lse(vals):
    vals = [v for v in vals if v != -math.inf]
    if not vals:
        return -math.inf
    m = max(vals)
    return m + math.log(sum(math.exp(v - m) for v in vals))


def tree_oracle(unary, edge, parent, root_score=None):
    """log Z, max, unary marginals (T, K), edge marginals (T, K, K) with row c = P(y_c = i,
    y_parent(c) = j) (root row 0), entropy, best-first (score, y) list of feasible labelings, probs."""
    T, K = unary.shape
    items = tree_scores(unary, edge, parent, root_score)
    log_z = _lse([s for _, s in items])
    mx = max(s for _, s in items)
    um = np.zeros((T, K))
    em = np.zeros((T, K, K))
    ent = 0.0
    if log_z != -math.inf:
        for y, s in items:
            if s == -math.inf:
                continue
            p = math.exp(s - log_z)
            ent -= p * (s - log_z)
            for n in range(T):
                um[n, y[n]] += p
                if parent[n] >= 0:
                    em[n, y[n], y[parent[n]]] += p
    ranked = sorted(((s, y) for y, s in items if s != -math.inf), key=lambda x: -x[0])
    return {"log_z": log_z, "max": mx, "unary": um, "edge": em, "entropy": ent, "ranked": ranked,
            "probs": {y: (math.exp(s - log_z) if log_z != -math.inf else 0.0) for y, s in items}}
