"""Brute-force oracle for higher-order chains over label patterns: enumerate all K**T label sequences.
Imports nothing from structlearn.

A pattern z (tuple of labels) is active at position t when y[t-len(z)+1 .. t] == z (inside the sequence);
its log-potential there is ``wpat[z] + phi[t, z]`` (phi only for the first Zs patterns).
"""
import math

import numpy as np

from ._common import best, labelings, posterior, segmentations


def sequence_score(y, patterns, phi, wpat, start, end):
    """Log-score of one labeling y (tuple) and the list of (t, pattern id) active in it."""
    T = len(y)
    if T == 0:
        return 0.0, []
    Zs = phi.shape[1]
    s = start[y[0]] + end[y[-1]]
    active = []
    for t in range(T):
        for i, z in enumerate(patterns):
            k = len(z)
            if t - k + 1 >= 0 and tuple(y[t - k + 1:t + 1]) == tuple(z):
                s += wpat[i] + (phi[t, i] if i < Zs else 0.0)
                active.append((t, i))
    return s, active


def pattern_oracle(patterns, phi, wpat, start, end, K, allowed=None):
    """log Z, label marginals (T, K), state-pattern marginals (T, Zs), expected counts (Z,), best score,
    best labeling of one sequence of T = phi.shape[0] tokens."""
    T, Zs = phi.shape
    items, active = [], {}
    for y in labelings(T, K):
        s, active[y] = sequence_score(y, patterns, phi, wpat, start, end)
        if allowed is not None and any(not allowed[t, y[t]] for t in range(T)):
            s = -math.inf
        items.append((y, s))
    post = posterior(items)
    lab = np.zeros((T, K))
    tok = np.zeros((T, Zs))
    tot = np.zeros(len(patterns))
    for y, _, p in post["weighted"]:
        for t in range(T):
            lab[t, y[t]] += p
        for t, i in active[y]:
            tot[i] += p
            if i < Zs:
                tok[t, i] += p
    top, arg = best(items)
    return post["log_z"], lab, tok, tot, top, arg


def segment_score(segs, unary, dur, patterns, wpat, start, end):
    """Score of one segmentation: start + Σ (token unary + duration) + segment-label n-grams + end."""
    if not segs:
        return 0.0
    labs = [k for _, _, k in segs]
    s = start[labs[0]] + end[labs[-1]]
    for i, (a, b, k) in enumerate(segs):
        s += float(sum(unary[u, k] for u in range(a, b + 1))) + dur[b - a, k]
        for j, z in enumerate(patterns):
            n = len(z)
            if n >= 2 and i - n + 1 >= 0 and tuple(labs[i - n + 1:i + 1]) == tuple(z):
                s += wpat[j]
    return s


def segment_pattern_oracle(unary, dur, patterns, wpat, start, end):
    """log Z, token label marginals (T, K), best score and best segmentation of one sequence."""
    T, K = unary.shape
    D = dur.shape[0]
    items = [(segs, segment_score(segs, unary, dur, patterns, wpat, start, end))
             for segs in segmentations(T, D, K, distinct=True)]
    post = posterior(items)
    lab = np.zeros((T, K))
    for segs, _, p in post["weighted"]:
        for a, b, k in segs:
            lab[a:b + 1, k] += p
    top, arg = best(items)
    return post["log_z"], lab, top, arg
