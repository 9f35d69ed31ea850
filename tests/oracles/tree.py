"""Brute-force oracle for trees: enumerate all K**T labelings of one tree. Imports nothing from
structlearn."""
from ._common import labelings, labeling_marginals


def tree_scores(unary, edge, parent, root_score=None):
    """All labelings of one tree and their scores.

    unary (T, K); edge (K, K) shared or (T, K, K), edge[c, i, j] = child c labelled i under parent
    labelled j; parent (T,) local indices, -1 for the root; root_score (K,) or None.
    """
    T, K = unary.shape
    out = []
    for y in labelings(T, K):
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


def tree_oracle(unary, edge, parent, root_score=None):
    """log Z, max, unary marginals (T, K), edge marginals (T, K, K) with row c = P(y_c = i,
    y_parent(c) = j) (root row 0), entropy, best-first (score, y) list of feasible labelings, probs."""
    T, K = unary.shape
    items = tree_scores(unary, edge, parent, root_score)
    post = labeling_marginals(items, K, parent)
    return {"log_z": post["log_z"], "max": max(s for _, s in items), "unary": post["unary"], "edge": post["edge"],
            "entropy": post["entropy"], "ranked": post["ranked"], "probs": post["probs"]}
