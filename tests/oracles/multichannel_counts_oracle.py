"""Brute-force expected counts of the EM of the coupled multi-channel HSMM (imports nothing from structlearn).

Every channel's segmentations of [0, T) are enumerated with the *full* duration of every segment (the last
may reach past T under right censoring; under "none" it ends at T), the joint configurations are their
Cartesian product, each scored from the generative process

    P = Π_c π_c(j_1^c) p_c(d_1^c) · Π_c Π_{c-segment ending at t < T-1} q_c(next | all states at t)
        p_c(next duration) · Π_t Π_c b_c(t, state^c_t),   q_c(m' | m) = Σ_k θ[c, k] A[c][k][m_k, m'],

and normalised. The expected counts are the posterior expectations of, per channel c:
``start`` (M_c,) the first state; ``counts`` (D_c, M_c) the segments entering (j, d) (every segment, the
first and a censored last one included, with its full duration); ``coupling`` list over k of (M_k, M_c)
the mixed-memory responsibilities Σ_{c-segment ends at t} 1{m_k(t) = a, next = b} θ_ck A[c][k][a, b] /
q_c(b | m(t)) (Saul & Jordan 1999, §3); ``gamma`` (T, M_c) the state posteriors.
"""
import itertools
import math

import numpy as np

from .multichannel_hsmm_oracle import _log, _segmentations


def expected_counts(startprob, coupling, transmat, pmfs, log_emissions, censoring="right"):
    """(log P(o), list of C dicts of expected counts) of one sequence (module docstring).

    ``pmfs[c]`` (D_c, M_c) with ``pmf[d - 1, j] = p_c(d | j)``; ``log_emissions[c]`` (T, M_c) (-inf where a
    label forbids the state)."""
    C = len(startprob)
    M = [len(p) for p in startprob]
    T = log_emissions[0].shape[0]
    per = []
    for c in range(C):
        items = []
        for st, segs in _segmentations(T, M[c], pmfs[c].shape[0], censoring):
            j0, _, d0 = segs[0]
            base = _log(startprob[c][j0]) + sum(_log(pmfs[c][d - 1, j]) for j, _, d in segs)
            base += sum(log_emissions[c][t, st[t]] for t in range(T))
            if base > -math.inf:
                ends = [(s + d - 1, jn) for (_, s, d), (jn, _, _) in zip(segs[:-1], segs[1:])]
                items.append((st, segs, base, ends))
        per.append(items)
    configs = []
    for combo in itertools.product(*per):
        states = np.array([it[0] for it in combo], dtype=np.int64).T  # (T, C)
        lp = sum(it[2] for it in combo)
        for c, it in enumerate(combo):
            for t, jn in it[3]:
                lp += _log(sum(coupling[c, k] * transmat[c][k][states[t, k], jn] for k in range(C)))
        if lp > -math.inf:
            configs.append((combo, states, lp))
    lps = np.array([lp for _, _, lp in configs])
    top = lps.max()
    log_z = top + math.log(np.exp(lps - top).sum())
    out = [{"start": np.zeros(M[c]), "counts": np.zeros((pmfs[c].shape[0], M[c])),
            "coupling": [np.zeros((M[k], M[c])) for k in range(C)], "gamma": np.zeros((T, M[c]))}
           for c in range(C)]
    for (combo, states, lp) in configs:
        w = math.exp(lp - log_z)
        for c, (st, segs, _, ends) in enumerate(combo):
            o = out[c]
            o["start"][segs[0][0]] += w
            for j, _, d in segs:
                o["counts"][d - 1, j] += w
            o["gamma"][np.arange(T), list(st)] += w
            for t, jn in ends:
                q = sum(coupling[c, k] * transmat[c][k][states[t, k], jn] for k in range(C))
                for k in range(C):
                    a = states[t, k]
                    o["coupling"][k][a, jn] += w * coupling[c, k] * transmat[c][k][a, jn] / q
    return log_z, out
