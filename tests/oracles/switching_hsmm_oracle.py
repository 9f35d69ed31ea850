"""Brute-force oracle of the switching hidden semi-Markov model (imports nothing from structlearn).

A tiny switching HSMM (Duong et al. 2005) is given in linear space: regime start ``rho`` (R,), regime
transitions ``B`` (R, R), per-regime state starts ``pi`` (R, M) and transitions ``A`` (R, M, M) (zero
diagonal), durations ``pmf`` (R, M, D) (entry d-1 = duration d) and emission log-densities ``log_b``
(T, R, M). Every segmentation of 0..T-1 into segments of length <= D, each labelled with a (regime, state)
pair, is enumerated and weighted by the generative process written out directly — nothing here builds
the product-state HSMM the package uses:

    rho[r1] pi[r1, m1] * prod_i dur(r_i, m_i, d_i) prod_t b * prod_i B[r_i, r_{i+1}] *
        (A[r_i, m_i, m_{i+1}] if r_{i+1} == r_i else pi[r_{i+1}, m_{i+1}])

with the duration weight of the first / last segment given by the censoring mode ("none", "right":
the last segment scores its survivor S(d) = P(duration >= d)).
"""
import itertools
import math

import numpy as np

from ._common import compositions


def _duration(pmf, r, m, d, last, censoring):
    p = pmf[r, m]
    if d > p.shape[0]:
        return 0.0
    if censoring == "right" and last:
        return float(p[d - 1:].sum())
    return float(p[d - 1])


def weight(segments, rho, B, pi, A, pmf, log_b, censoring):
    """Linear weight of a list of (start, end, regime, state) segments (end inclusive)."""
    T = log_b.shape[0]
    s0, e0, r0, m0 = segments[0]
    w = rho[r0] * pi[r0, m0]
    for i, (s, e, r, m) in enumerate(segments):
        w *= _duration(pmf, r, m, e - s + 1, e == T - 1, censoring)
        w *= math.exp(float(log_b[s:e + 1, r, m].sum()))
        if i + 1 < len(segments):
            _, _, r2, m2 = segments[i + 1]
            w *= B[r, r2] * (A[r, m, m2] if r2 == r else pi[r2, m2])
    return w


def enumerate_all(rho, B, pi, A, pmf, log_b, censoring):
    """Every (segments, weight) pair: segments a tuple of (start, end, regime, state)."""
    T, R, M = log_b.shape
    D = pmf.shape[2]
    pairs = [(r, m) for r in range(R) for m in range(M)]
    out = []
    for durs in compositions(T, D):
        bounds = np.cumsum((0,) + durs)
        for labels in itertools.product(pairs, repeat=len(durs)):
            segs = tuple((int(bounds[i]), int(bounds[i + 1]) - 1, r, m) for i, (r, m) in enumerate(labels))
            out.append((segs, weight(segs, rho, B, pi, A, pmf, log_b, censoring)))
    return out


def posteriors(rho, B, pi, A, pmf, log_b, censoring):
    """Log-likelihood, joint posteriors and the Viterbi path by enumeration.

    Returns dict: ``loglik``; ``joint`` (T, R, M) P(regime r, state m at t | o); ``viterbi_states``,
    ``viterbi_regimes`` (T,) int and ``viterbi_logp`` (the best path's log weight); ``start`` (R, M)
    expected first labels and ``trans`` (R, M, R, M) expected segment transitions (posterior counts).
    """
    T, R, M = log_b.shape
    items = enumerate_all(rho, B, pi, A, pmf, log_b, censoring)
    L = math.fsum(w for _, w in items)
    joint = np.zeros((T, R, M))
    start = np.zeros((R, M))
    trans = np.zeros((R, M, R, M))
    best, best_w = None, -1.0
    for segs, w in items:
        if w <= 0:
            continue
        for i, (s, e, r, m) in enumerate(segs):
            joint[s:e + 1, r, m] += w
            if i + 1 < len(segs):
                trans[r, m, segs[i + 1][2], segs[i + 1][3]] += w
        start[segs[0][2], segs[0][3]] += w
        if w > best_w:
            best, best_w = segs, w
    states = np.zeros(T, dtype=np.int64)
    regimes = np.zeros(T, dtype=np.int64)
    for s, e, r, m in best:
        states[s:e + 1] = m
        regimes[s:e + 1] = r
    return {"loglik": math.log(L), "joint": joint / L, "start": start / L, "trans": trans / L,
            "viterbi_states": states, "viterbi_regimes": regimes, "viterbi_logp": math.log(best_w)}
