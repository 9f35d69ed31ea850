"""Brute-force oracle of the coupled multi-channel explicit-duration HSMM (imports nothing from structlearn).

Every channel's segmentations of [0, T) are enumerated with the *full* duration of every segment (the last
one may reach past T under right censoring); the joint configurations are their Cartesian product, each
scored directly from the generative process:

    P = Π_c π_c(j_1^c) p_c(d_1^c) · Π_c Π_{c-segment ending at t < T-1} q_c(next state | all states at t)
        p_c(next duration) · Π_t Π_c b_c(t, state^c_t),
    q_c(m' | m_1..m_C) = Σ_k θ[c, k] A[c][k][m_k, m'].
"""
import itertools
import math

import numpy as np


def _segmentations(T, M, D, censoring):
    """All (states (T,) tuple, segments [(state, start, full duration)]) of one channel."""
    out = []

    def rec(start, segs):
        if start >= T:
            states = []
            for j, s, d in segs:
                states.extend([j] * d)
            out.append((tuple(states[:T]), list(segs)))
            return
        for j in range(M):
            for d in range(1, D + 1):
                if start + d > T and censoring == "none":
                    continue
                rec(start + d, segs + [(j, start, d)])

    rec(0, [])
    return out


def enumerate_joint(startprob, coupling, transmat, pmfs, log_emissions, censoring="right"):
    """Every joint configuration with its log-probability.

    Parameters
    ----------
    startprob : list of C arrays (M_c,)
    coupling : array (C, C)
    transmat : list of C lists of C arrays, transmat[c][k] (M_k, M_c)
    pmfs : list of C arrays (D_c, M_c), pmf[d - 1, j] = p_c(d | j)
    log_emissions : list of C arrays (T, M_c)
    censoring : "right" or "none"

    Returns
    -------
    list of (states (T, C) int array, log_prob float)
    """
    C = len(startprob)
    T = log_emissions[0].shape[0]
    per = []
    for c in range(C):
        items = []
        for st, segs in _segmentations(T, len(startprob[c]), pmfs[c].shape[0], censoring):
            j0, _, d0 = segs[0]
            base = _log(startprob[c][j0]) + _log(pmfs[c][d0 - 1, j0])
            base += sum(_log(pmfs[c][dn - 1, jn]) for jn, _, dn in segs[1:])
            base += sum(log_emissions[c][t, st[t]] for t in range(T))
            # (t, next state) of every segment end before the last observation
            ends = [(s + d - 1, jn) for (_, s, d), (jn, _, _) in zip(segs[:-1], segs[1:])]
            if base > -math.inf:
                items.append((st, base, ends))
        per.append(items)
    out = []
    for combo in itertools.product(*per):
        states = np.array([st for st, _, _ in combo], dtype=np.int64).T  # (T, C)
        lp = sum(base for _, base, _ in combo)
        for c, (_, _, ends) in enumerate(combo):
            for t, jn in ends:
                lp += _log(sum(coupling[c, k] * transmat[c][k][states[t, k], jn] for k in range(C)))
        out.append((states, lp))
    return out


def _log(x):
    return math.log(x) if x > 0 else -math.inf


def oracle(startprob, coupling, transmat, pmfs, log_emissions, censoring="right"):
    """(log Z, per-channel posteriors list of (T, M_c), best joint states (T, C), best log score)."""
    configs = enumerate_joint(startprob, coupling, transmat, pmfs, log_emissions, censoring)
    lps = np.array([lp for _, lp in configs])
    top = lps.max()
    log_z = top + math.log(np.exp(lps - top).sum())
    T = log_emissions[0].shape[0]
    post = [np.zeros((T, len(p))) for p in startprob]
    for (states, lp) in configs:
        w = math.exp(lp - log_z)
        for c in range(len(startprob)):
            post[c][np.arange(T), states[:, c]] += w
    best = int(np.argmax(lps))
    return log_z, post, configs[best][0], float(lps[best])
