"""Brute-force oracle for higher-order semi-Markov CRFs whose features look at segment-label n-grams
(Nguyen, Ye, Lee & Chieu 2011): enumerate every segmentation into labelled segments (consecutive labels
differ, lengths ≤ D) and score it directly. Imports nothing from structlearn.

A segmentation with segment labels k_1..k_m scores

    start[k_1] + end[k_m] + Σ_i ( dur[len_i - 1, k_i]
                                  + Σ_{j : patterns[j] = k_{i-n+1..i}} (wpat[j] + [j < Zs] Σ_{u in seg i} phi[u, j]) )

with n = len(patterns[j]) and the n-gram entirely inside the sequence (i - n + 1 ≥ 0); phi (T, Zs) holds
the token potentials of the first Zs patterns (the state patterns), -inf durations forbid a length.
"""
import math

import numpy as np

from ._common import posterior, segmentations


def active_patterns(segs, patterns):
    """[(segment index i, pattern id j)] of the patterns ending at every segment."""
    labs = [k for _, _, k in segs]
    out = []
    for i in range(len(labs)):
        for j, z in enumerate(patterns):
            n = len(z)
            if i - n + 1 >= 0 and tuple(labs[i - n + 1:i + 1]) == tuple(z):
                out.append((i, j))
    return out


def score(segs, phi, dur, patterns, wpat, start, end):
    """Log-score of one segmentation (tuple of (start, end, label), end inclusive)."""
    if not segs:
        return 0.0
    Zs = phi.shape[1]
    s = start[segs[0][2]] + end[segs[-1][2]]
    for a, b, k in segs:
        s += dur[b - a, k]
    for i, j in active_patterns(segs, patterns):
        a, b, _ = segs[i]
        s += wpat[j]
        if j < Zs:
            s += math.fsum(phi[u, j] for u in range(a, b + 1))
    return s


def oracle(phi, dur, patterns, wpat, start, end, K):
    """Everything of one sequence of T = phi.shape[0] tokens, by enumeration.

    Returns dict: ``log_z``; ``labels`` (T, K) token label marginals; ``tok`` (T, Zs) P(state pattern j
    ends at the segment holding token t); ``counts`` (Z,) expected number of segments where pattern j
    ends; ``dur`` (D, K) expected segments per (length, label); ``first``, ``last`` (K,) label marginals
    of the first / last token; ``ranked`` list of (score, token labels tuple), best first, one per
    segmentation with a finite score.
    """
    T, Zs = phi.shape
    D = dur.shape[0]
    items = [(segs, score(segs, phi, dur, patterns, wpat, start, end))
             for segs in segmentations(T, D, K, distinct=True)]
    post = posterior(items)
    lab = np.zeros((T, K))
    tok = np.zeros((T, Zs))
    counts = np.zeros(len(patterns))
    dcount = np.zeros((D, K))
    for segs, _, p in post["weighted"]:
        for a, b, k in segs:
            lab[a:b + 1, k] += p
            dcount[b - a, k] += p
        for i, j in active_patterns(segs, patterns):
            counts[j] += p
            if j < Zs:
                a, b, _ = segs[i]
                tok[a:b + 1, j] += p
    ranked = [(s, tuple(k for a, b, k in segs for _ in range(a, b + 1))) for s, segs in post["ranked"]]
    first = lab[0] if T else np.zeros(K)
    last = lab[-1] if T else np.zeros(K)
    return {"log_z": post["log_z"], "labels": lab, "tok": tok, "counts": counts, "dur": dcount,
            "first": first, "last": last, "ranked": ranked}
