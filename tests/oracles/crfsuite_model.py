"""CRFsuite's crf1d model and training objective, by enumeration (imports nothing from structlearn).

CRFsuite (Okazaki 2007, ``lib/crf/src/crf1d_feature.c``, ``crf1d_encode.c``, ``train_lbfgs.c``) scores a
label sequence with state features (attribute, label) seen in the training data and transition
features (label, next label) seen in the training data — no start or end features::

    s(x, y) = Σ_t Σ_a x_{t,a} w[a, y_t] + Σ_{t<T-1} w[y_t, y_{t+1}]
    L(w)    = Σ_b [log Z(x_b) - s(x_b, y_b)] + c2 ‖w‖²

Items are dicts attribute name -> float value (string values already spelt ``name=value``); labels are
strings. Features are named ``("state", attr, label)`` and ``("trans", label, label)``; their order is
the order of first appearance, which does not matter to the tests (they compare by name).

The same functions give CRFSuite 0.13's tree model (``tree=True``: ``parents[b][t]`` is the parent of
node t or -1 for a root; transitions are (child label, parent label) edges, no root-label feature).
"""
import math

import numpy as np

from ._common import labelings, logsumexp


def features(X, y, parents=None, min_freq=0.0):
    """Feature names of CRFsuite's model of a training set: state features (attribute, label) whose
    attribute values, summed over the items of that label, reach ``min_freq``, and the transitions seen
    (``crf1df_generate``: a feature's frequency is the sum of its values)."""
    freq = {}
    for b, (xs, ys) in enumerate(zip(X, y)):
        for t, (item, lab) in enumerate(zip(xs, ys)):
            for a, v in item.items():
                freq[("state", a, lab)] = freq.get(("state", a, lab), 0.0) + v
            nxt = _next(parents, b, t, ys)
            if nxt is not None:
                freq[("trans", lab, nxt)] = freq.get(("trans", lab, nxt), 0.0) + 1.0
    return [n for n, f in freq.items() if f >= min_freq]


def _next(parents, b, t, ys):
    """The label a transition from token/node t goes to, or None."""
    if parents is None:
        return ys[t + 1] if t + 1 < len(ys) else None
    p = parents[b][t]
    return None if p < 0 else ys[p]


def feature_vector(names, xs, ys, parents=None, b=0):
    """f(x, y) over ``names`` (float64)."""
    index = {n: i for i, n in enumerate(names)}
    f = np.zeros(len(names))
    for t, (item, lab) in enumerate(zip(xs, ys)):
        for a, v in item.items():
            i = index.get(("state", a, lab))
            if i is not None:
                f[i] += v
        nxt = _next(parents, b, t, ys)
        if nxt is not None:
            i = index.get(("trans", lab, nxt))
            if i is not None:
                f[i] += 1.0
    return f


def _all(names, xs, labels, parents, b):
    """(labelings, their feature vectors (M, P)) of one sequence / tree."""
    labs = [tuple(labels[k] for k in ks) for ks in labelings(len(xs), len(labels))]
    return labs, np.array([feature_vector(names, xs, ys, parents, b) for ys in labs])


def objective(names, w, X, y, labels, c2=0.0, parents=None):
    """(L(w), ∇L(w), ∇²L(w)) of CRFsuite's objective by enumeration of every labeling."""
    P = len(names)
    value, grad, hess = c2 * float(w @ w), 2.0 * c2 * w, 2.0 * c2 * np.eye(P)
    for b, (xs, ys) in enumerate(zip(X, y)):
        _, F = _all(names, xs, labels, parents, b)
        scores = F @ w
        log_z = logsumexp(scores.tolist())
        p = np.exp(scores - log_z)
        gold = feature_vector(names, xs, ys, parents, b)
        mean = p @ F
        value += log_z - float(gold @ w)
        grad += mean - gold
        hess += (F * p[:, None]).T @ F - np.outer(mean, mean)
    return value, grad, hess


def fit(names, X, y, labels, c2, parents=None, tol=1e-12, max_iter=100):
    """The minimiser of :func:`objective` (c2 > 0: strictly convex) by Newton's method with halving."""
    w = np.zeros(len(names))
    for _ in range(max_iter):
        value, g, H = objective(names, w, X, y, labels, c2, parents)
        if np.abs(g).max() < tol:
            break
        step = np.linalg.solve(H, g)
        s = 1.0
        while objective(names, w - s * step, X, y, labels, c2, parents)[0] > value and s > 1e-10:
            s /= 2
        w = w - s * step
    return w


def marginals(names, w, xs, labels, parents=None):
    """(T, K) posterior marginals and log Z of one sequence / tree."""
    labs, F = _all(names, xs, labels, parents, 0)
    scores = F @ w
    log_z = logsumexp(scores.tolist())
    out = np.zeros((len(xs), len(labels)))
    for ys, s in zip(labs, scores):
        pr = math.exp(s - log_z)
        for t, lab in enumerate(ys):
            out[t, labels.index(lab)] += pr
    return out, log_z


def sequence_probability(names, w, xs, ys, labels, parents=None):
    """p(y | x) of one sequence / tree."""
    _, log_z = marginals(names, w, xs, labels, parents)
    return math.exp(float(feature_vector(names, xs, ys, parents) @ w) - log_z)
