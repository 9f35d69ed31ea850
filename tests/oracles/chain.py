"""Brute-force oracle for linear chains: enumerate all K**T label sequences. Imports nothing from
structlearn."""
import itertools
import math

import numpy as np


def chain_scores(unary, trans, start, end):
    """All labelings of one sequence and their scores. trans: (K, K) or (T, K, K)."""
    T, K = unary.shape
    out = []
    for y in itertools.product(range(K), repeat=T):
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


def _lse(vals):
    vals = [v for v in vals if v != -math.inf]
    if not vals:
        return -math.inf
    m = max(vals)
    return m + math.log(sum(math.exp(v - m) for v in vals))


def chain_oracle(unary, trans, start, end):
    """log Z, max, unary marginals (T, K), edge marginals (T, K, K), entropy, sorted (score, y) list."""
    T, K = unary.shape
    items = chain_scores(unary, trans, start, end)
    log_z = _lse([s for _, s in items])
    mx = max(s for _, s in items) if items else 0.0
    um = np.zeros((T, K))
    em = np.zeros((T, K, K))
    ent = 0.0
    if log_z != -math.inf:
        for y, s in items:
            if s == -math.inf:
                continue
            p = math.exp(s - log_z)
            ent -= p * (s - log_z)
            for t in range(T):
                um[t, y[t]] += p
                if t + 1 < T:
                    em[t, y[t], y[t + 1]] += p
    ranked = sorted(((s, y) for y, s in items if s != -math.inf), key=lambda x: -x[0])
    return {"log_z": log_z, "max": mx, "unary": um, "edge": em, "entropy": ent, "ranked": ranked,
            "probs": {y: (math.exp(s - log_z) if log_z != -math.inf else 0.0) for y, s in items}}
