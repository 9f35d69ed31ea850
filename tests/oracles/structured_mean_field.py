"""Brute-force structured mean field: the same cluster-by-cluster coordinate ascent as
structlearn.engine.structures.factor_graph_smf, every quantity by enumeration of joint labelings (q_c(x_c) ∝
exp(E_{q_-c}[s(x)]) over all x), and the evidence lower bound E_q[s] + H(q) of the resulting product
distribution. Imports nothing from structlearn."""
import itertools

import numpy as np


def _score(x, unary, scopes, tables):
    s = sum(unary[i][x[i]] for i in range(len(x)))
    for sc, t in zip(scopes, tables):
        s += t[tuple(x[v] for v in sc)]
    return s


def structured_mean_field(card, unary, scopes, tables, clusters, n_sweeps, q0):
    """Run ``n_sweeps`` sweeps from the node marginals ``q0`` (list of 1-d arrays); return (elbo, node
    marginals, the cluster joints)."""
    n = len(card)
    joints = []
    for c in clusters:  # initial q_c: product of q0 over the cluster
        joints.append({xc: float(np.prod([q0[v][xc[j]] for j, v in enumerate(c)]))
                       for xc in itertools.product(*[range(card[v]) for v in c])})
    for _ in range(n_sweeps):
        for ci, c in enumerate(clusters):
            others = [k for k in range(len(clusters)) if k != ci]
            logit = {}
            for xc in itertools.product(*[range(card[v]) for v in c]):
                acc, blocked = 0.0, False
                for rest in itertools.product(*[list(joints[k].items()) for k in others]):
                    w = float(np.prod([p for _, p in rest]))
                    if w == 0:
                        continue
                    x = [0] * n
                    for j, v in enumerate(c):
                        x[v] = xc[j]
                    for k, (xk, _) in zip(others, rest):
                        for j, v in enumerate(clusters[k]):
                            x[v] = xk[j]
                    s = _score(x, unary, scopes, tables)
                    if s == -np.inf:
                        blocked = True
                    else:
                        acc += w * s
                logit[xc] = -np.inf if blocked else acc
            m = max(logit.values())
            z = sum(np.exp(v - m) for v in logit.values())
            joints[ci] = {xc: float(np.exp(v - m) / z) for xc, v in logit.items()}
    # ELBO of the product of the cluster joints
    elbo = 0.0
    for rest in itertools.product(*[list(j.items()) for j in joints]):
        w = float(np.prod([p for _, p in rest]))
        if w == 0:
            continue
        x = [0] * n
        for k, (xk, _) in enumerate(rest):
            for j, v in enumerate(clusters[k]):
                x[v] = xk[j]
        elbo += w * (_score(x, unary, scopes, tables) - np.log(w))
    marg = [np.zeros(card[v]) for v in range(n)]
    for k, c in enumerate(clusters):
        for xc, p in joints[k].items():
            for j, v in enumerate(c):
                marg[v][xc[j]] += p
    return elbo, marg, joints


def log_partition(card, unary, scopes, tables):
    vals = [_score(list(x), unary, scopes, tables) for x in itertools.product(*[range(k) for k in card])]
    m = max(vals)
    return m + np.log(sum(np.exp(v - m) for v in vals)) if m > -np.inf else -np.inf
