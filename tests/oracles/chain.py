"""Brute-force oracle for linear chains: enumerate all K**T label sequences. Imports nothing from
structlearn."""
from ._common import labelings, labeling_marginals


def chain_scores(unary, trans, start, end):
    """All labelings of one sequence and their scores. trans: (K, K) or (T, K, K)."""
    T, K = unary.shape
    out = []
    for y in labelings(T, K):
        if T == 0:
            out.append((y, 0.0))
            continue
        s = start[y[0]] + end[y[-1]]
        for t in range(T):
            s += unary[t, y[t]]
            if t + 1 < T:
                s += (trans[y[t], y[t + 1]] if trans.ndim == 2 else trans[t, y[t], y[t + 1]])
        out.append((y, s))
    return out


def chain_oracle(unary, trans, start, end):
    """log Z, max, unary marginals (T, K), edge marginals (T, K, K), entropy, sorted (score, y) list."""
    T, K = unary.shape
    items = chain_scores(unary, trans, start, end)
    post = labeling_marginals(items, K, [t + 1 if t + 1 < T else -1 for t in range(T)])
    return {"log_z": post["log_z"], "max": max((s for _, s in items), default=0.0), "unary": post["unary"],
            "edge": post["edge"], "entropy": post["entropy"], "ranked": post["ranked"], "probs": post["probs"]}
