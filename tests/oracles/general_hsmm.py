"""Brute-force oracle of the general hidden semi-Markov model (Yu 2010 §2.1; imports nothing from structlearn).

Parameters in linear space: ``pi`` (M, D) = π_(j,d), ``A`` (M, D, M, D) = a_(i,d')(j,d) (self-transitions
i == j are never taken), emission log-densities ``log_b`` (T, M). Every path of (state, full duration)
segments covering 0..T-1 is enumerated: consecutive states differ; with censoring "none" the last segment
ends exactly at T-1; with "right" / "both" its full duration d may exceed what is left (it is cut at T-1).
A path scores π(first) Π a(prev, next) Π_t b(o_t).
"""
import math

import numpy as np

from ._common import best, posterior


def paths(T, M, D, censoring):
    """Every path as a tuple of (start, end, state, full duration), ends inclusive."""
    out = []

    def extend(t, prefix):
        if t == T:
            out.append(tuple(prefix))
            return
        last = prefix[-1][2] if prefix else -1
        for j in range(M):
            if j == last:
                continue
            for d in range(1, D + 1):
                e = t + d - 1
                if e > T - 1:
                    if censoring == "none":
                        continue
                    prefix.append((t, T - 1, j, d))
                    out.append(tuple(prefix))
                    prefix.pop()
                    continue
                prefix.append((t, e, j, d))
                extend(e + 1, prefix)
                prefix.pop()

    extend(0, [])
    return out


def path_score(path, pi, A, log_b):
    first = path[0]
    w = pi[first[2], first[3] - 1]
    for a, b in zip(path[:-1], path[1:]):
        w *= A[a[2], a[3] - 1, b[2], b[3] - 1]
    if w <= 0:
        return -math.inf
    s = math.log(w)
    for (st, en, j, _) in path:
        s += float(np.sum(log_b[st:en + 1, j]))
    return s


def general_posterior(pi, A, log_b, censoring):
    """log Z, γ (T, M), first (M, D), trans (M, D, M, D) expected counts, η (T, M, D) (a (j, d)-segment
    ends at row t; a cut last segment at T-1), and the Viterbi (score, states (T,))."""
    T, M = log_b.shape
    D = pi.shape[1]
    items = [(p, path_score(p, pi, A, log_b)) for p in paths(T, M, D, censoring)]
    post = posterior(items)
    gamma = np.zeros((T, M))
    first = np.zeros((M, D))
    trans = np.zeros((M, D, M, D))
    eta = np.zeros((T, M, D))
    for path, _, p in post["weighted"]:
        first[path[0][2], path[0][3] - 1] += p
        for a, b in zip(path[:-1], path[1:]):
            trans[a[2], a[3] - 1, b[2], b[3] - 1] += p
        for (st, en, j, d) in path:
            gamma[st:en + 1, j] += p
            eta[en, j, d - 1] += p
    top, arg = best(items)
    states = None
    if arg is not None:
        states = np.zeros(T, dtype=np.int64)
        for (st, en, j, _) in arg:
            states[st:en + 1] = j
    return {"log_z": post["log_z"], "gamma": gamma, "first": first, "trans": trans, "eta": eta,
            "viterbi": (top, states)}


# ------------------------------------------------------------------------------------------------------
# the super-label structure in log potentials (any transitions, same-state ones included)
# ------------------------------------------------------------------------------------------------------
def label_paths(T, M, D, open_end):
    """Every segmentation of 0..T-1 into super-labels k = j·D + d - 1 as a tuple of (start, end, k):
    a label lasts exactly d tokens, except (with ``open_end``) the last one, cut after l <= d."""
    out = []

    def extend(t, prefix):
        if t == T:
            out.append(tuple(prefix))
            return
        for j in range(M):
            for d in range(1, D + 1):
                k = j * D + d - 1
                e = t + d - 1
                if e > T - 1:
                    if open_end:
                        out.append(tuple(prefix) + ((t, T - 1, k),))
                    continue
                prefix.append((t, e, k))
                extend(e + 1, prefix)
                prefix.pop()

    extend(0, [])
    return out


def super_label_posterior(unary, D, start, transition, end, open_end):
    """Brute force over :func:`label_paths` with per-state log unaries (T, M), log start / end (K,) and a
    dense log transition (K, K): log Z, token marginals (T, K), start and end posteriors (T, K), expected
    transitions (K, K), first labels (K,), segments per label (K,), γ (T, M) and the best (score, labels
    (T,))."""
    T, M = unary.shape
    K = M * D
    items = []
    for path in label_paths(T, M, D, open_end):
        s = start[path[0][2]] + end[path[-1][2]]
        for (a, b) in zip(path[:-1], path[1:]):
            s += transition[a[2], b[2]]
        for (st, en, k) in path:
            s += float(np.sum(unary[st:en + 1, k // D]))
        items.append((path, s))
    post = posterior(items)
    token = np.zeros((T, K))
    pstart = np.zeros((T, K))
    pend = np.zeros((T, K))
    trans = np.zeros((K, K))
    first = np.zeros(K)
    segments = np.zeros(K)
    gamma = np.zeros((T, M))
    for path, _, p in post["weighted"]:
        first[path[0][2]] += p
        for (a, b) in zip(path[:-1], path[1:]):
            trans[a[2], b[2]] += p
        for (st, en, k) in path:
            token[st:en + 1, k] += p
            gamma[st:en + 1, k // D] += p
            pstart[st, k] += p
            pend[en, k] += p
            segments[k] += p
    top, arg = best(items)
    labels = None
    if arg is not None:
        labels = np.zeros(T, dtype=np.int64)
        for (st, en, k) in arg:
            labels[st:en + 1] = k
    return {"log_z": post["log_z"], "token": token, "pstart": pstart, "pend": pend, "trans": trans,
            "first": first, "segments": segments, "gamma": gamma, "best": (top, labels)}
