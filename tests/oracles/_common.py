"""What every brute-force oracle shares: log-sum-exp, the enumerations (labelings, compositions,
segmentations), the posterior of a list of scored items and the marginals of scored labelings. Imports
nothing from structlearn (only numpy and the standard library), like every oracle.

Segmentations are tuples of ``(start, end, label)`` triples (end inclusive) tiling ``[0, T)``; arguments
are always ``(T, D, K)``: length, maximum duration, number of labels.
"""
import itertools
import math

import numpy as np

NEG_INF = -math.inf


def logsumexp(values):
    """log Σ exp(v) over an iterable of floats; -inf when it is empty or every value is -inf."""
    finite = [v for v in values if v != NEG_INF]
    if not finite:
        return NEG_INF
    m = max(finite)
    return m + math.log(math.fsum(math.exp(v - m) for v in finite))


def labelings(T, K):
    """All K**T label tuples of T positions, in lexicographic order (one empty tuple for T = 0)."""
    return itertools.product(range(K), repeat=T)


def compositions(T, D):
    """All ordered tuples of positive durations <= D summing to T (one empty tuple for T = 0)."""
    if T == 0:
        yield ()
        return
    for d in range(1, min(D, T) + 1):
        for rest in compositions(T - d, D):
            yield (d,) + rest


def segmentations(T, D, K, distinct=False):
    """Every segmentation of T tokens into labelled segments of length <= D, as a tuple of
    (start, end, label); ``distinct``: only those whose consecutive labels differ."""
    for durs in compositions(T, D):
        bounds = []
        s = 0
        for d in durs:
            bounds.append((s, s + d - 1))
            s += d
        for labs in itertools.product(range(K), repeat=len(durs)):
            if distinct and any(a == b for a, b in zip(labs[:-1], labs[1:])):
                continue
            yield tuple((s, e, k) for (s, e), k in zip(bounds, labs))


def best(items):
    """(score, item) of the highest-scoring (item, score) pair, the first one on ties; (-inf, None) when
    every score is -inf or there are none."""
    top, arg = NEG_INF, None
    for item, s in items:
        if s > top:
            top, arg = s, item
    return top, arg


def posterior(items):
    """The distribution p(item) ∝ exp(score) of a list of (item, score) pairs.

    Returns dict with ``log_z``; ``weighted``: (item, score, p) of every item with score > -inf (empty
    when log Z = -inf); ``entropy``; ``ranked``: (score, item) of those items, best first (stable);
    ``probs``: item -> p for every item (0 for score -inf or when log Z = -inf).
    """
    log_z = logsumexp(s for _, s in items)
    weighted = []
    if log_z != NEG_INF:
        weighted = [(y, s, math.exp(s - log_z)) for y, s in items if s != NEG_INF]
    entropy = -math.fsum(p * (s - log_z) for _, s, p in weighted)
    ranked = sorted(((s, y) for y, s in items if s != NEG_INF), key=lambda x: -x[0])
    probs = {y: (math.exp(s - log_z) if log_z != NEG_INF else 0.0) for y, s in items}
    return {"log_z": log_z, "weighted": weighted, "entropy": entropy, "ranked": ranked, "probs": probs}


def labeling_marginals(items, K, partner):
    """Posterior of scored labelings ((y, score) pairs, y a tuple of T labels) with its unary marginals
    ``unary`` (T, K) and pairwise marginals ``edge`` (T, K, K), row n = P(y_n = i, y_partner[n] = j) (0 where
    partner[n] < 0); plus the keys of :func:`posterior`."""
    T = len(partner)
    post = posterior(items)
    um = np.zeros((T, K))
    em = np.zeros((T, K, K))
    for y, _, p in post["weighted"]:
        for n in range(T):
            um[n, y[n]] += p
            if partner[n] >= 0:
                em[n, y[n], y[partner[n]]] += p
    post.update(unary=um, edge=em)
    return post
