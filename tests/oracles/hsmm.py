"""Brute-force oracle of the explicit-duration hidden semi-Markov model (imports nothing from structlearn).

A tiny HSMM is given in linear space: start probabilities ``pi`` (K,), transitions ``A`` (K, K) with a
zero diagonal, duration pmf ``pmf`` (D, K) (row d-1 = duration d) and emission log-densities
``log_b`` (T, K). Every segmentation of 0..T-1 into labelled segments of length <= D is enumerated and
weighted according to the censoring mode (Yu 2010 §2.2.1):

* "none":  every segment scores p(d);
* "right": the last segment scores S(d) = P(duration >= d);
* "both":  additionally the first segment scores the residual-life pmf S(d) / mu, and a segment
           covering the whole sequence the residual survivor sum_{d' >= d} S(d') / mu.
"""
import math

import numpy as np

from ._common import segmentations


def _survivor(p):
    return np.cumsum(p[::-1], axis=0)[::-1]


def duration_weight(pmf, d, k, first, last, censoring):
    """Linear weight of a k-segment of length d at the given position."""
    p = pmf[:, k]
    D = p.shape[0]
    if d > D:
        return 0.0
    S = _survivor(p)
    mu = float(np.dot(np.arange(1, D + 1), p))
    if censoring == "none":
        return float(p[d - 1])
    if censoring == "right":
        return float(S[d - 1]) if last else float(p[d - 1])
    # both
    if first and last:
        return float(S[d - 1:].sum()) / mu
    if first:
        return float(S[d - 1]) / mu
    if last:
        return float(S[d - 1])
    return float(p[d - 1])


def weight(segs, pi, A, pmf, log_b, censoring, T=None, open_last=None):
    """Linear weight of a segmentation (``open_last`` overrides whether the last segment is censored:
    True = survivor (S), False = complete pmf, None = by censoring mode and position)."""
    T = log_b.shape[0] if T is None else T
    w = pi[segs[0][2]]
    for i, (s, e, k) in enumerate(segs):
        d = e - s + 1
        first = s == 0
        last = e == T - 1
        if open_last is not None and last:
            last = open_last
        dw = duration_weight(pmf, d, k, first, last, censoring)
        w *= dw * math.exp(float(log_b[s:e + 1, k].sum()))
        if i + 1 < len(segs):
            w *= A[k, segs[i + 1][2]]
    return w


def enumerate_all(pi, A, pmf, log_b, censoring):
    T, K = log_b.shape
    D = pmf.shape[0]
    return [(list(segs), weight(segs, pi, A, pmf, log_b, censoring))
            for segs in segmentations(T, D, K, distinct=True)]


def posteriors(pi, A, pmf, log_b, censoring):
    """Likelihood and every smoothed posterior by enumeration.

    Returns dict with ``loglik``, ``gamma`` (T, K), ``xi`` (T, K, K) (row t: i ends at t, j starts at
    t+1), ``eta`` (T, D, K) [end, d-1, k], ``viterbi`` (segments, log weight), ``items``.
    """
    T, K = log_b.shape
    D = pmf.shape[0]
    items = enumerate_all(pi, A, pmf, log_b, censoring)
    L = sum(w for _, w in items)
    gamma = np.zeros((T, K))
    xi = np.zeros((T, K, K))
    eta = np.zeros((T, D, K))
    best, best_w = None, -1.0
    for segs, w in items:
        if w <= 0:
            continue
        for i, (s, e, k) in enumerate(segs):
            gamma[s:e + 1, k] += w
            eta[e, e - s, k] += w
            if i + 1 < len(segs):
                xi[e, k, segs[i + 1][2]] += w
        if w > best_w:
            best, best_w = segs, w
    out = {"loglik": math.log(L) if L > 0 else -math.inf, "items": items}
    if L > 0:
        out.update(gamma=gamma / L, xi=xi / L, eta=eta / L, viterbi=(best, math.log(best_w)))
    return out


def prefix_filter(pi, A, pmf, log_b, censoring):
    """Filtering and one-step prediction by enumeration over every prefix 0..t.

    The prefix likelihood uses the right-censored (generative) semantics: the segment running at t
    scores its survivor. Returns dict of (T, K) arrays: ``state`` P(S_t = j | o_0:t), ``end``
    P(segment j ends at t | o_0:t), ``start_next`` P(segment j starts at t+1 | o_0:t), and
    ``loglik`` (T,) log P(o_0:t).
    """
    T, K = log_b.shape
    D = pmf.shape[0]
    mode = "both" if censoring == "both" else "right"
    state = np.zeros((T, K))
    end = np.zeros((T, K))
    start_next = np.zeros((T, K))
    ll = np.zeros(T)
    for t in range(T):
        lb = log_b[:t + 1]
        Z = 0.0
        for segs in segmentations(t + 1, D, K, distinct=True):
            w_open = weight(segs, pi, A, pmf, lb, mode, T=t + 1, open_last=True)
            w_closed = weight(segs, pi, A, pmf, lb, mode, T=t + 1, open_last=False)
            k = segs[-1][2]
            Z += w_open
            for s, e, j in segs:
                if s <= t <= e:
                    state[t, j] += w_open
            end[t, k] += w_closed
            start_next[t] += w_closed * A[k]
        if Z > 0:
            state[t] /= Z
            end[t] /= Z
            start_next[t] /= Z
            ll[t] = math.log(Z)
        else:
            state[t] = end[t] = start_next[t] = 0.0
            ll[t] = -math.inf
    return {"state": state, "end": end, "start_next": start_next, "loglik": ll}


def expanded_hmm_loglik(pi, A, pmf, log_b, censoring):
    """Log-likelihood by the forward algorithm of the HMM over (state, remaining duration)
    (Ferguson 1980; Yu 2010 §1, §4.6). Independent of the enumeration."""
    T, K = log_b.shape
    D = pmf.shape[0]
    S = _survivor(pmf)
    mu = np.arange(1, D + 1) @ pmf
    if censoring == "both":
        init = pi[None, :] * (S / mu[None, :])  # (D, K) remaining r
    else:
        init = pi[None, :] * pmf
    b = np.exp(log_b)
    alpha = init * b[0][None, :]  # alpha[r-1, k]
    for t in range(1, T):
        new = np.zeros((D, K))
        new[:-1] = alpha[1:]  # remaining r+1 -> r
        leave = alpha[0] @ A  # (K,) enters j
        new += leave[None, :] * pmf
        alpha = new * b[t][None, :]
    if censoring == "none":
        total = alpha[0].sum()
    else:
        total = alpha.sum()
    return math.log(total) if total > 0 else -math.inf


def commence_terminate(pi, A, pmf, log_b, censoring):
    """Expected number of segments of each state that commence / terminate inside the window, (K,) each
    (Yu 2010 §2.2.2 expectation (f)), by enumerating the hidden parts of the censored segments.

    Every segmentation is extended by the time ``e`` the first segment had already run before the first
    observation (``"both"``: e = 0..D-1, the stationary law p(L) / mu of (total L, elapsed e), e < L) and
    by the total duration ``L`` of the last segment (``"right"``/``"both"``: any L >= its observed
    length, weight p(L)). A segment commences in the window unless it is the first with e > 0, and
    terminates in it unless it is the last with L longer than what was observed.
    """
    T, K = log_b.shape
    D = pmf.shape[0]
    mus = pmf.T @ np.arange(1, D + 1)
    starts = np.zeros(K)
    ends = np.zeros(K)
    total = 0.0
    for segs in segmentations(T, D, K, distinct=True):
        base = pi[segs[0][2]]
        for i, (s, e, k) in enumerate(segs):
            base *= math.exp(float(log_b[s:e + 1, k].sum()))
            if i + 1 < len(segs):
                base *= A[k, segs[i + 1][2]]
        for i in range(1, len(segs) - 1):
            s, e, k = segs[i]
            base *= pmf[e - s, k]
        n = len(segs)
        s0, e0, k0 = segs[0]
        sl, el, kl = segs[-1]
        elapsed = range(D) if censoring == "both" else [0]
        for ea in elapsed:
            d0 = e0 - s0 + 1 + ea  # the first segment's length so far (all of it if it is also the last)
            totals = range(1, D + 1) if censoring != "none" else None
            if n == 1:
                cands = [L for L in (totals or [d0]) if L >= d0]
                for L in cands:
                    w = base * (pmf[L - 1, k0] / (mus[k0] if censoring == "both" else 1.0))
                    total += w
                    starts[k0] += w * (ea == 0)
                    ends[k0] += w * (L == d0)
                continue
            if censoring == "both":
                if d0 > D:
                    continue
                w_first = pmf[d0 - 1, k0] / mus[k0]
            else:
                w_first = pmf[d0 - 1, k0]
            dl = el - sl + 1
            for L in (totals or [dl]):
                if L < dl:
                    continue
                w = base * w_first * pmf[L - 1, kl]
                total += w
                for i, (s, e, k) in enumerate(segs):
                    starts[k] += w * (i > 0 or ea == 0)
                    ends[k] += w * (i < n - 1 or L == dl)
    return starts / total, ends / total
