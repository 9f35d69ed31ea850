"""Oracle of the event-sequence observation model (imports nothing from structlearn).

Written tick by tick with the standard library: the log-density of a grid of marks (-1 = no event, NaN
= unobserved), the closed-form weighted maximum-likelihood estimates, and the grid of marked events.
"""
import math


def log_density(x, rate, probs, informative_gaps=True):
    """(T, K) nested lists: log λ_j + log c_j(v) for a mark v, log(1 - λ_j) for -1 (0 without
    informative gaps), 0 for NaN."""
    out = []
    for v in x:
        row = []
        for j in range(len(rate)):
            if v != v:  # NaN
                row.append(0.0)
            elif v < 0:
                row.append(math.log(1.0 - rate[j]) if informative_gaps else 0.0)
            else:
                lp = math.log(probs[j][int(v)]) if probs[j][int(v)] > 0 else -math.inf
                row.append(lp + (math.log(rate[j]) if informative_gaps else 0.0))
        out.append(row)
    return out


def weighted_mle(x, weights, n_marks):
    """(rate (K,), probs (K, V)) maximising Σ_t Σ_j w_tj log b_j(x_t), by explicit sums."""
    K = len(weights[0])
    rate, probs = [], []
    for j in range(K):
        n_obs = sum(w[j] for v, w in zip(x, weights) if v == v)
        counts = [sum(w[j] for v, w in zip(x, weights) if v == v and v == m) for m in range(n_marks)]
        n_ev = sum(counts)
        rate.append(n_ev / n_obs)
        probs.append([c / n_ev for c in counts])
    return rate, probs


def grid(times, marks, resolution, start):
    """{tick: mark} of events (one per tick), tick = floor((time - start) / resolution)."""
    out = {}
    for t, m in zip(times, marks):
        out[int(math.floor((t - start) / resolution))] = m
    return out
