"""Numba kernels of the semi-Markov (segment) structure.

Arrays in, arrays out; no validation (that is done by :class:`structlearn.structures.SemiMarkov`).
All kernels work on a packed ragged batch: sequence b owns rows ``offsets[b]:offsets[b + 1]`` of the
(N, ...) arrays; times inside a sequence are local (0 … T-1) and row = ``offsets[b] + t``.

Model (Sarawagi & Cohen 2004, "Semi-Markov conditional random fields", eq. 3–4; the two-stage
recursion of Yu 2010, "Hidden semi-Markov models", sec. 3.1). A segment of label k over tokens
[s, e] (d = e - s + 1 <= D) scores

    w(s, e, k) = Σ_{u=s..e} unary[u, k] + durations[c, d-1, k] (+ segment[e, d-1, k])

where the duration table ``c`` is chosen by the segment's position in its sequence (the censoring
hooks of the hidden semi-Markov adapter)::

    c = 0  (MIDDLE)  s > 0 and e < T-1
    c = 1  (FIRST)   s = 0 and e < T-1
    c = 2  (LAST)    s > 0 and e = T-1
    c = 3  (SINGLE)  s = 0 and e = T-1

A segmentation scores start[k_1] + Σ_i w_i + Σ_i transition[k_i, k_{i+1}] + end[k_m].

Forward (two stages, so one step costs O(D·K + K²) rather than O(D·K²))::

    α*[0, k] = start[k]
    α*[s, k] = ⊕_j α[s-1, j] + transition[j, k]                     (a k-segment starts at s)
    α[e, k]  = ⊕_{d=1..min(D, e+1)} α*[e-d+1, k] + w(e-d+1, e, k)    (a k-segment ends at e)
    log Z    = ⊕_k α[T-1, k] + end[k]

Backward (mirror image)::

    β_end[T-1, k] = end[k]
    β_end[e, k]   = ⊕_j transition[k, j] + β_start[e+1, j]
    β_start[s, k] = ⊕_{d=1..min(D, T-s)} w(s, s+d-1, k) + β_end[s+d-1, k]

Normalisation (Rabiner 1989 scaling, in log space). On a long sequence α grows like the total score
(~10⁶ for T = 10⁵), and α + β - log Z then loses ~eps·|α| per step, which accumulates. So the kernels
keep per-token normalised messages: with ``inc[t] = max_k`` of the unnormalised α̂ at t and
c_t = Σ_{u<=t} inc[u] (c_{-1} = 0)::

    α̂[e] = α[e] - c_e          α̂*[s] = α*[s] - c_{s-1}
    β̂_end[e] = β_end[e] - (log Z - c_e)      β̂_start[s] = β_start[s] - (log Z - c_{s-1})

The backward reuses the forward's ``inc`` (subtracting Σ_{u=s..e} inc[u] inside each segment), so
every posterior is a local sum: P(k-segment starts at s) = exp(α̂*[s, k] + β̂_start[s, k]),
P(k-segment [s, e]) = exp(α̂*[s, k] + w(s, e, k) - Σ_{u=s..e} inc[u] + β̂_end[e, k]), and
log Z = Σ_t inc[t] + z_fin with z_fin = ⊕_k α̂[T-1, k] + end[k].

Fast path (LOG semiring without ``segment``: forward, backward and the expectations). The window
sum over d factors into per-start and per-duration terms, so it is computed in linear space as
Σ_d ex[k, s] · ed[c, k, d-1] — one multiply-add per (t, d, k) instead of an exp — with
block-local anchors and an exact log-space fallback whenever a window sum is tiny (see
:func:`_window_step`); results agree with the log-space kernels to ~1e-12 relative. The log-space
kernels serve the MAX semiring and ``segment``.

The unary sum of a segment is accumulated as d grows (``acc += unary[...]``) instead of being taken
as a difference of cumulative sums: same O(N·D·K) cost, but exact on long sequences and -inf entries
need no special casing. Only O(N·K) arrays are stored; (N, D, K) is never materialised unless the
caller passes ``segment``.
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import MAX

MIDDLE = 0
FIRST = 1
LAST = 2
SINGLE = 3

NEG_INF = -np.inf


@njit(cache=True, inline="always")
def _table(s, e, T):
    """Duration table c of segment [s, e] in a sequence of length T (see module docstring)."""
    if s == 0:
        return SINGLE if e == T - 1 else FIRST
    return LAST if e == T - 1 else MIDDLE


# --------------------------------------------------------------------------------------------------
# forward / backward
# --------------------------------------------------------------------------------------------------
@njit(cache=True)
def _forward_seq(unary, durations, transition_t, start, end, segment, has_segment, o, T, semiring,
                 alpha, alpha_star, inc, bp_d, bp_j):
    """Normalised forward of one sequence; returns (log_z, z_fin)."""
    K = unary.shape[1]
    D = durations.shape[1]
    acc = np.empty(K)
    mx = np.empty(K)
    ssum = np.empty(K)
    bd = np.empty(K, dtype=np.int32)
    buf = np.empty((D, K))
    total = 0.0
    for t in range(T):
        # stage 1: α̂*[t, k] = ⊕_j α̂[t-1, j] + transition[j, k]
        if t == 0:
            for k in range(K):
                alpha_star[o, k] = start[k]
        else:
            prev = alpha[o + t - 1]
            for k in range(K):
                tk = transition_t[k]
                m = NEG_INF
                arg = 0
                for j in range(K):
                    v = prev[j] + tk[j]
                    if v > m:
                        m = v
                        arg = j
                if semiring == MAX or m == NEG_INF:
                    alpha_star[o + t, k] = m
                    if semiring == MAX:
                        bp_j[o + t, k] = arg
                else:
                    s = 0.0
                    for j in range(K):
                        s += math.exp(prev[j] + tk[j] - m)
                    alpha_star[o + t, k] = m + math.log(s)
        # stage 2: α̂[t, k] ∝ ⊕_d α̂*[t-d+1, k] + w(t-d+1, t, k) - Σ_{u=t-d+1..t-1} inc[u]
        dmax = min(D, t + 1)
        c_mid = LAST if t == T - 1 else MIDDLE
        c_first = SINGLE if t == T - 1 else FIRST
        for k in range(K):
            acc[k] = 0.0
            mx[k] = NEG_INF
            bd[k] = 1
        nacc = 0.0
        for d in range(1, dmax + 1):
            s = t - d + 1
            if d > 1:
                nacc += inc[o + s]
            c = c_first if s == 0 else c_mid
            u = unary[o + s]
            a = alpha_star[o + s]
            du = durations[c, d - 1]
            for k in range(K):
                acc[k] += u[k]
                v = a[k] + acc[k] + du[k] - nacc
                if has_segment:
                    v += segment[o + t, d - 1, k]
                buf[d - 1, k] = v
                if v > mx[k]:
                    mx[k] = v
                    bd[k] = d
        if semiring == MAX:
            for k in range(K):
                bp_d[o + t, k] = bd[k]
        else:
            for k in range(K):
                ssum[k] = 0.0
            for d in range(dmax):
                for k in range(K):
                    if mx[k] > NEG_INF:
                        ssum[k] += math.exp(buf[d, k] - mx[k])
            for k in range(K):
                if mx[k] > NEG_INF:
                    mx[k] += math.log(ssum[k])
        # normalise: inc[t] = max_k α̂[t, k] (0 when every label is impossible)
        m = NEG_INF
        for k in range(K):
            if mx[k] > m:
                m = mx[k]
        if m == NEG_INF:
            m = 0.0
        inc[o + t] = m
        total += m
        for k in range(K):
            alpha[o + t, k] = mx[k] - m
    # log Z = Σ_t inc[t] + ⊕_k α̂[T-1, k] + end[k]
    m = NEG_INF
    for k in range(K):
        v = alpha[o + T - 1, k] + end[k]
        if v > m:
            m = v
    if semiring == MAX or m == NEG_INF:
        z_fin = m
    else:
        s = 0.0
        for k in range(K):
            s += math.exp(alpha[o + T - 1, k] + end[k] - m)
        z_fin = m + math.log(s)
    if z_fin == NEG_INF:
        return NEG_INF, NEG_INF
    return total + z_fin, z_fin


# Linear-space fast path (LOG semiring, no `segment`). Inside a block of ends, the segment sum
#   ⊕_d α̂*[s, k] + Σ_{u=s..e} unary[u, k] - Σ_{u=s..e-1} inc[u] + dur[c, d-1, k]
# factors as exp(P[k, e] + unary[e, k]) · Σ_d exp(α̂*[s, k] - P[k, s]) · exp(dur[c, d-1, k]) with the
# block-local prefix P[k, s] = Σ_{u=a..s-1} (unary[u, k] - inc[u]) (negative sums before the block
# start a). The first factor under the sum is kept as ex[k, s] = exp(α̂*[s, k] - P[k, s] - m[k])
# (anchor m[k], raised when a new term exceeds it by > _RESCALE) and the second as
# ed[c, k, d-1] = exp(dur[c, d-1, k] - max_dur[k]), so a term costs one multiply-add instead of
# an exp. Every block re-derives P, m and ex from α̂* (bounded), so nothing drifts on long
# sequences. Guard: all terms are positive and each underflowed factor loses < 1e-307, so a window
# sum >= _TINY is exact to ~1e-100 relative; below it the window is re-anchored and, if still
# tiny, the term is computed exactly in log space. -inf unaries are skipped by capping d at the
# last forbidden token (P uses 0 there).
_RESCALE = 300.0
_TINY = 1e-200


@njit(cache=True)
def duration_factors(durations):
    """ed (4, K, D) = exp(durations[c, d, k] - max_dur[k]) and max_dur (K,) (0 if all -inf)."""
    C, D, K = durations.shape
    mdur = np.zeros(K)
    for k in range(K):
        m = NEG_INF
        for c in range(C):
            for d in range(D):
                if durations[c, d, k] > m:
                    m = durations[c, d, k]
        mdur[k] = m if m > NEG_INF else 0.0
    ed = np.empty((C, K, D))
    for c in range(C):
        for k in range(K):
            for d in range(D):
                ed[c, k, d] = math.exp(durations[c, d, k] - mdur[k])
    return ed, mdur


@njit(cache=True, inline="always")
def _ufin(x):
    return 0.0 if x == NEG_INF else x


@njit(cache=True)
def _forward_exact_term(unary, durations, alpha_star, inc, o, t, T, k, dm):
    """log Σ_{d=1..dm} exp(α̂*[t-d+1, k] + Σ unary - Σ_{u=s..t-1} inc[u] + dur) in log space."""
    m = NEG_INF
    acc = 0.0
    nacc = 0.0
    for d in range(1, dm + 1):
        s = t - d + 1
        if d > 1:
            nacc += inc[o + s]
        acc += unary[o + s, k]
        v = alpha_star[o + s, k] + acc - nacc + durations[_table(s, t, T), d - 1, k]
        if v > m:
            m = v
    if m == NEG_INF:
        return m
    tot = 0.0
    acc = 0.0
    nacc = 0.0
    for d in range(1, dm + 1):
        s = t - d + 1
        if d > 1:
            nacc += inc[o + s]
        acc += unary[o + s, k]
        tot += math.exp(alpha_star[o + s, k] + acc - nacc + durations[_table(s, t, T), d - 1, k] - m)
    return m + math.log(tot)


@njit(cache=True, inline="always")
def _window_anchor(unary, alpha_star, inc, o, a, lo, k, P, ex, m, blocked):
    """Start a block of ends at a: P[k, s] for lo <= s <= a (P[k, a] = 0), anchor m[k] = the
    largest live x = α̂*[s, k] - P[k, s] and ex[k, s] = exp(x - m[k]) for the live starts."""
    P[k, a] = 0.0
    for s in range(a - 1, lo - 1, -1):
        P[k, s] = P[k, s + 1] - (_ufin(unary[o + s, k]) - inc[o + s])
    live = max(lo, blocked[k] + 1)  # earlier starts can no longer begin a k-segment
    mk = NEG_INF
    for s in range(live, a):
        x = alpha_star[o + s, k] - P[k, s]
        if x > mk:
            mk = x
    m[k] = mk
    for s in range(live, a):
        x = alpha_star[o + s, k] - P[k, s]
        ex[k, s] = math.exp(x - mk) if x > NEG_INF else 0.0


@njit(cache=True, inline="always")
def _window_step(unary, alpha_star, ed, o, t, T, k, lo, D, P, ex, m, blocked):
    """Add start t to label k's window (P[k, t] must be set) and return (S, dm): the longest
    allowed duration dm of a k-segment ending at t and S = Σ_{d<=dm} ex[k, t-d+1] · ed[c, k, d-1].
    Raises the anchor when a new term exceeds it by > _RESCALE; re-anchors on the largest term of
    the window once when S < _TINY (the caller falls back to log space if S stays below)."""
    x = alpha_star[o + t, k] - P[k, t]
    if x > NEG_INF:
        if m[k] == NEG_INF or x > m[k] + _RESCALE:
            f = 0.0 if m[k] == NEG_INF else math.exp(m[k] - x)
            for s in range(max(lo, t - D + 1, blocked[k] + 1), t):
                ex[k, s] *= f
            m[k] = x
        ex[k, t] = math.exp(x - m[k])
    else:
        ex[k, t] = 0.0
    if unary[o + t, k] == NEG_INF:
        blocked[k] = t
    dm = min(D, t + 1, t - blocked[k])
    if dm <= 0:
        return 0.0, 0
    c_mid = LAST if t == T - 1 else MIDDLE
    c_first = SINGLE if t == T - 1 else FIRST
    S = 0.0
    for attempt in range(2):
        S = 0.0
        edk = ed[c_mid, k]
        exk = ex[k]
        for d in range(1, min(dm, t) + 1):
            S += exk[t - d + 1] * edk[d - 1]
        if dm == t + 1:
            S += exk[0] * ed[c_first, k, t]
        if S >= _TINY or attempt == 1:
            break
        mk = NEG_INF
        for s in range(t - dm + 1, t + 1):
            xs = alpha_star[o + s, k] - P[k, s]
            if xs > mk:
                mk = xs
        if mk == NEG_INF:
            break
        for s in range(t - dm + 1, t + 1):  # every start a later end can use
            xs = alpha_star[o + s, k] - P[k, s]
            ex[k, s] = math.exp(xs - mk) if xs > NEG_INF else 0.0
        m[k] = mk
    return S, dm


@njit(cache=True)
def transition_factors(transition):
    """Linear-space transition factors: ``ec[k, j] = exp(transition[j, k] - cmax[k])`` (column k,
    for the forward) and ``er[k, j] = exp(transition[k, j] - rmax[k])`` (row k, for the backward),
    with cmax / rmax the column / row maxima (0 where all -inf)."""
    K = transition.shape[0]
    cmax = np.zeros(K)
    rmax = np.zeros(K)
    for k in range(K):
        mc = NEG_INF
        mr = NEG_INF
        for j in range(K):
            if transition[j, k] > mc:
                mc = transition[j, k]
            if transition[k, j] > mr:
                mr = transition[k, j]
        cmax[k] = mc if mc > NEG_INF else 0.0
        rmax[k] = mr if mr > NEG_INF else 0.0
    ec = np.empty((K, K))
    er = np.empty((K, K))
    for k in range(K):
        for j in range(K):
            ec[k, j] = math.exp(transition[j, k] - cmax[k])
            er[k, j] = math.exp(transition[k, j] - rmax[k])
    return ec, cmax, er, rmax


@njit(cache=True, inline="always")
def _stage1_lin(v, tmat, ef, fmax, out, K, buf):
    """out[k] = ⊕_j v[j] + tmat[k, j] (LOG) in linear space: with mv = max_j v[j],
    out[k] = mv + fmax[k] + log Σ_j exp(v[j] - mv) · ef[k, j], where ef[k, j] =
    exp(tmat[k, j] - fmax[k]); exact log-sum-exp when that sum is < _TINY (same guard as the
    window sums). ``buf`` (K,) is scratch."""
    mv = NEG_INF
    for j in range(K):
        if v[j] > mv:
            mv = v[j]
    if mv == NEG_INF:
        for k in range(K):
            out[k] = NEG_INF
        return
    for j in range(K):
        buf[j] = math.exp(v[j] - mv)
    for k in range(K):
        S = 0.0
        efk = ef[k]
        for j in range(K):
            S += buf[j] * efk[j]
        if S >= _TINY:
            out[k] = mv + fmax[k] + math.log(S)
        else:
            tk = tmat[k]
            mm = NEG_INF
            for j in range(K):
                x = v[j] + tk[j]
                if x > mm:
                    mm = x
            if mm == NEG_INF:
                out[k] = mm
            else:
                sm = 0.0
                for j in range(K):
                    sm += math.exp(v[j] + tk[j] - mm)
                out[k] = mm + math.log(sm)


@njit(cache=True)
def _forward_seq_lin(unary, durations, ed, mdur, transition_t, ec, cmax, start, end, o, T, alpha,
                     alpha_star, inc):
    """Normalised LOG forward of one sequence, linear-space window sums; returns (log_z, z_fin)."""
    K = unary.shape[1]
    D = durations.shape[1]
    L = D
    ex = np.zeros((K, T))
    P = np.zeros((K, T + 1))
    m = np.empty(K)
    blocked = np.full(K, -1, dtype=np.int64)  # last token t' <= t with unary[t', k] = -inf
    at = np.empty(K)
    buf = np.empty(K)
    total = 0.0
    for a in range(0, T, L):
        lo = max(0, a - D + 1)
        for k in range(K):
            _window_anchor(unary, alpha_star, inc, o, a, lo, k, P, ex, m, blocked)
        for t in range(a, min(a + L, T)):
            # stage 1: α̂*[t, k] = ⊕_j α̂[t-1, j] + transition[j, k]
            if t == 0:
                for k in range(K):
                    alpha_star[o, k] = start[k]
            else:
                _stage1_lin(alpha[o + t - 1], transition_t, ec, cmax, alpha_star[o + t], K, buf)
            # stage 2, per label: α̃[t, k] = P[k, t] + unary[t, k] + m[k] + max_dur[k] + log S
            for k in range(K):
                S, dm = _window_step(unary, alpha_star, ed, o, t, T, k, lo, D, P, ex, m, blocked)
                if dm <= 0:
                    at[k] = NEG_INF
                elif S >= _TINY:
                    at[k] = P[k, t] + unary[o + t, k] + m[k] + mdur[k] + math.log(S)
                else:
                    at[k] = _forward_exact_term(unary, durations, alpha_star, inc, o, t, T, k, dm)
            # normalise: inc[t] = max_k α̃[t, k] (0 when every label is impossible)
            mm = NEG_INF
            for k in range(K):
                if at[k] > mm:
                    mm = at[k]
            if mm == NEG_INF:
                mm = 0.0
            inc[o + t] = mm
            total += mm
            for k in range(K):
                alpha[o + t, k] = at[k] - mm
                P[k, t + 1] = P[k, t] + _ufin(unary[o + t, k]) - mm
    mm = NEG_INF
    for k in range(K):
        v = alpha[o + T - 1, k] + end[k]
        if v > mm:
            mm = v
    if mm == NEG_INF:
        return NEG_INF, NEG_INF
    sm = 0.0
    for k in range(K):
        sm += math.exp(alpha[o + T - 1, k] + end[k] - mm)
    z_fin = mm + math.log(sm)
    return total + z_fin, z_fin


@njit(cache=True, parallel=True)
def semimarkov_forward(unary, durations, transition, start, end, segment, has_segment, offsets,
                       semiring):
    """Normalised forward pass in the LOG or MAX semiring.

    Parameters
    ----------
    unary : (N, K) float64; durations : (4, D, K) float64 (tables MIDDLE, FIRST, LAST, SINGLE);
    transition : (K, K) float64 ("from, to"); start, end : (K,) float64;
    segment : (N, D, K) float64 (read only when ``has_segment``; else any (1, 1, 1) array);
    offsets : (B + 1,) int64; semiring : LOG or MAX.

    Returns
    -------
    alpha : (N, K) α̂[e, k]; alpha_star : (N, K) α̂*[s, k]; inc : (N,) per-token normalisers;
    log_z : (B,) log Z (LOG) or best score (MAX), 0 for an empty sequence, -inf if infeasible;
    z_fin : (B,) ⊕_k α̂[T-1, k] + end[k];
    bp_d : (N, K) int32 best duration of α (MAX only, else (0, K));
    bp_j : (N, K) int32 best previous label of α* (MAX only, else (0, K)).

    Time O(N·(D·K + K²)), memory O(N·K).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    alpha = np.empty((N, K))
    alpha_star = np.empty((N, K))
    inc = np.zeros(N)
    log_z = np.zeros(B)
    z_fin = np.zeros(B)
    nbp = N if semiring == MAX else 0
    bp_d = np.zeros((nbp, K), dtype=np.int32)
    bp_j = np.zeros((nbp, K), dtype=np.int32)
    transition_t = np.ascontiguousarray(transition.T)
    linear = semiring != MAX and not has_segment
    ed, mdur = duration_factors(durations)
    ec, cmax, _, _ = transition_factors(transition)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        if linear:
            lz, zf = _forward_seq_lin(unary, durations, ed, mdur, transition_t, ec, cmax, start,
                                      end, o, T, alpha, alpha_star, inc)
        else:
            lz, zf = _forward_seq(unary, durations, transition_t, start, end, segment, has_segment,
                                  o, T, semiring, alpha, alpha_star, inc, bp_d, bp_j)
        log_z[b] = lz
        z_fin[b] = zf
    return alpha, alpha_star, inc, log_z, z_fin, bp_d, bp_j


@njit(cache=True)
def _backward_seq(unary, durations, transition, end, segment, has_segment, o, T, inc, z_fin,
                  beta_end, beta_start):
    K = unary.shape[1]
    D = durations.shape[1]
    acc = np.empty(K)
    mx = np.empty(K)
    ssum = np.empty(K)
    buf = np.empty((D, K))
    for t in range(T - 1, -1, -1):
        # stage 1: β̂_end[t, k] = ⊕_j transition[k, j] + β̂_start[t+1, j]
        if t == T - 1:
            for k in range(K):
                beta_end[o + t, k] = end[k] - z_fin
        else:
            nxt = beta_start[o + t + 1]
            for k in range(K):
                tk = transition[k]
                m = NEG_INF
                for j in range(K):
                    v = nxt[j] + tk[j]
                    if v > m:
                        m = v
                if m == NEG_INF:
                    beta_end[o + t, k] = m
                else:
                    s = 0.0
                    for j in range(K):
                        s += math.exp(nxt[j] + tk[j] - m)
                    beta_end[o + t, k] = m + math.log(s)
        # stage 2: β̂_start[t, k] = ⊕_d w(t, t+d-1, k) - Σ_{u=t..t+d-1} inc[u] + β̂_end[t+d-1, k]
        dmax = min(D, T - t)
        for k in range(K):
            acc[k] = 0.0
            mx[k] = NEG_INF
        nacc = 0.0
        for d in range(1, dmax + 1):
            e = t + d - 1
            nacc += inc[o + e]
            c = _table(t, e, T)
            u = unary[o + e]
            be = beta_end[o + e]
            du = durations[c, d - 1]
            for k in range(K):
                acc[k] += u[k]
                v = acc[k] + du[k] + be[k] - nacc
                if has_segment:
                    v += segment[o + e, d - 1, k]
                buf[d - 1, k] = v
                if v > mx[k]:
                    mx[k] = v
        for k in range(K):
            ssum[k] = 0.0
        for d in range(dmax):
            for k in range(K):
                if mx[k] > NEG_INF:
                    ssum[k] += math.exp(buf[d, k] - mx[k])
        for k in range(K):
            if mx[k] == NEG_INF:
                beta_start[o + t, k] = NEG_INF
            else:
                beta_start[o + t, k] = mx[k] + math.log(ssum[k])


@njit(cache=True)
def _backward_exact_term(unary, durations, beta_end, inc, o, s, T, k, dm):
    """log Σ_{d=1..dm} exp(Σ_{u=s..e} (unary[u, k] - inc[u]) + dur + β̂_end[e, k]) in log space."""
    m = NEG_INF
    acc = 0.0
    for d in range(1, dm + 1):
        e = s + d - 1
        acc += unary[o + e, k] - inc[o + e]
        v = acc + durations[_table(s, e, T), d - 1, k] + beta_end[o + e, k]
        if v > m:
            m = v
    if m == NEG_INF:
        return m
    tot = 0.0
    acc = 0.0
    for d in range(1, dm + 1):
        e = s + d - 1
        acc += unary[o + e, k] - inc[o + e]
        tot += math.exp(acc + durations[_table(s, e, T), d - 1, k] + beta_end[o + e, k] - m)
    return m + math.log(tot)


@njit(cache=True)
def _backward_seq_lin(unary, durations, ed, mdur, transition, er, rmax, end, o, T, inc, z_fin,
                      beta_end, beta_start):
    """Mirror of :func:`_forward_seq_lin`: blocks of starts from the right, block-local suffix
    P[k, e+1] = -Σ_{u=h..e} (unary[u, k] - inc[u]) (P[k, s] = Σ_{u=s..h-1} for s <= h, h = one past
    the block), ey[k, e] = exp(β̂_end[e, k] - P[k, e+1] - m[k]) and
    β̂_start[s, k] = P[k, s] + m[k] + max_dur[k] + log Σ_d ey[k, s+d-1] · ed[c, k, d-1]."""
    K = unary.shape[1]
    D = durations.shape[1]
    L = D
    ey = np.zeros((K, T))
    P = np.zeros((K, T + 1))
    m = np.empty(K)
    blocked = np.full(K, T, dtype=np.int64)  # first token t' >= s with unary[t', k] = -inf
    buf = np.empty(K)
    for hb in range(T, 0, -L):  # block of starts [max(0, hb-L), hb), anchor h = hb
        hi = min(T, hb + D - 1)  # ends e in [hb, hi) may still be reached from the block
        for k in range(K):
            P[k, hb] = 0.0
            for e in range(hb, hi):
                P[k, e + 1] = P[k, e] - (_ufin(unary[o + e, k]) - inc[o + e])
            live = min(hi, blocked[k])  # later ends can no longer close a k-segment
            mk = NEG_INF
            for e in range(hb, live):
                y = beta_end[o + e, k] - P[k, e + 1]
                if y > mk:
                    mk = y
            m[k] = mk
            for e in range(hb, live):
                y = beta_end[o + e, k] - P[k, e + 1]
                ey[k, e] = math.exp(y - mk) if y > NEG_INF else 0.0
        for t in range(hb - 1, max(0, hb - L) - 1, -1):
            # stage 1: β̂_end[t, k] = ⊕_j transition[k, j] + β̂_start[t+1, j]
            if t == T - 1:
                for k in range(K):
                    beta_end[o + t, k] = end[k] - z_fin
            else:
                _stage1_lin(beta_start[o + t + 1], transition, er, rmax, beta_end[o + t], K, buf)
            # stage 2 (start t): window sum of ey · ed over ends t … t+dm-1
            c_mid = FIRST if t == 0 else MIDDLE
            c_last = SINGLE if t == 0 else LAST
            top = min(T, t + D)
            for k in range(K):
                y = beta_end[o + t, k] - P[k, t + 1]
                if y > NEG_INF:
                    if m[k] == NEG_INF or y > m[k] + _RESCALE:
                        f = 0.0 if m[k] == NEG_INF else math.exp(m[k] - y)
                        for e in range(t + 1, min(top, blocked[k])):
                            ey[k, e] *= f
                        m[k] = y
                    ey[k, t] = math.exp(y - m[k])
                else:
                    ey[k, t] = 0.0
                u = unary[o + t, k]
                if u == NEG_INF:
                    blocked[k] = t
                P[k, t] = P[k, t + 1] + _ufin(u) - inc[o + t]
                dm = min(D, T - t, blocked[k] - t)
                if dm <= 0:
                    beta_start[o + t, k] = NEG_INF
                    continue
                S = 0.0
                for attempt in range(2):
                    S = 0.0
                    edk = ed[c_mid, k]
                    eyk = ey[k]
                    for d in range(1, min(dm, T - 1 - t) + 1):
                        S += eyk[t + d - 1] * edk[d - 1]
                    if dm == T - t:
                        S += eyk[T - 1] * ed[c_last, k, dm - 1]
                    if S >= _TINY or attempt == 1:
                        break
                    mk = NEG_INF
                    for e in range(t, t + dm):
                        ye = beta_end[o + e, k] - P[k, e + 1]
                        if ye > mk:
                            mk = ye
                    if mk == NEG_INF:
                        break
                    for e in range(t, t + dm):  # every end a earlier start can use
                        ye = beta_end[o + e, k] - P[k, e + 1]
                        ey[k, e] = math.exp(ye - mk) if ye > NEG_INF else 0.0
                    m[k] = mk
                if S >= _TINY:
                    beta_start[o + t, k] = P[k, t] + m[k] + mdur[k] + math.log(S)
                else:
                    beta_start[o + t, k] = _backward_exact_term(unary, durations, beta_end, inc, o,
                                                                t, T, k, dm)


@njit(cache=True, parallel=True)
def semimarkov_backward(unary, durations, transition, end, segment, has_segment, offsets, inc,
                        z_fin):
    """Backward pass (LOG semiring) normalised by the forward's ``inc`` and ``z_fin``:
    ``beta_end`` (N, K) β̂_end[e, k] and ``beta_start`` (N, K) β̂_start[s, k] of the module
    docstring; -inf rows for infeasible sequences (z_fin = -inf). Time O(N·(D·K + K²)),
    memory O(N·K)."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    beta_end = np.empty((N, K))
    beta_start = np.empty((N, K))
    ed, mdur = duration_factors(durations)
    _, _, er, rmax = transition_factors(transition)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        if z_fin[b] == NEG_INF:
            for t in range(T):
                for k in range(K):
                    beta_end[o + t, k] = NEG_INF
                    beta_start[o + t, k] = NEG_INF
            continue
        if has_segment:
            _backward_seq(unary, durations, transition, end, segment, has_segment, o, T, inc,
                          z_fin[b], beta_end, beta_start)
        else:
            _backward_seq_lin(unary, durations, ed, mdur, transition, er, rmax, end, o, T, inc,
                              z_fin[b], beta_end, beta_start)
    return beta_end, beta_start


# --------------------------------------------------------------------------------------------------
# marginals and expectations
# --------------------------------------------------------------------------------------------------
@njit(cache=True, parallel=True)
def semimarkov_marginals(unary, transition, alpha, alpha_star, beta_end, beta_start, z_fin,
                         offsets):
    """Token and transition marginals from the normalised messages.

    ``token[n, k]`` = P(token n lies in a k-segment) = Σ_{s<=n} P(k-segment starts at s)
    - Σ_{e<n} P(k-segment ends at e) (segments of one label are disjoint and ordered), with
    P(start at s) = exp(α̂*[s, k] + β̂_start[s, k]) and P(end at e) = exp(α̂[e, k] + β̂_end[e, k]);
    clipped to [0, 1] and exactly 0 where ``unary`` is -inf.
    ``edge[n, i, j]`` = P(an i-segment ends at n and a j-segment starts at n+1)
    = exp(α̂[n, i] + transition[i, j] + β̂_start[n+1, j]); 0 on the last row of a sequence.
    Infeasible sequences (z_fin = -inf) get all-zero rows. Time O(N·K²).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    token = np.zeros((N, K))
    edge = np.zeros((N, K, K))
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0 or z_fin[b] == NEG_INF:
            continue
        run = np.zeros(K)
        for n in range(T):
            r = o + n
            for k in range(K):
                run[k] += math.exp(alpha_star[r, k] + beta_start[r, k])
                p = run[k]
                if p < 0.0 or unary[r, k] == NEG_INF:
                    p = 0.0
                elif p > 1.0:
                    p = 1.0
                token[r, k] = p
                run[k] -= math.exp(alpha[r, k] + beta_end[r, k])
            if n < T - 1:
                for i in range(K):
                    ai = alpha[r, i]
                    for j in range(K):
                        edge[r, i, j] = math.exp(ai + transition[i, j] + beta_start[r + 1, j])
    return token, edge


@njit(cache=True)
def _segment_expectations_lin(unary, durations, ed, mdur, o, T, alpha_star, inc, beta_end, dmarg_b):
    """Σ over segments of p·w, and p added to dmarg_b[c, d-1, k], replaying the forward's windows:
    p(s, t, k) = C · ex[k, s] · ed[c, k, d-1] with C = exp(m[k] + max_dur[k] + P[k, t+1] + β̂_end[t, k])
    = P(a k-segment ends at t) / S <= 1 / _TINY, so an underflowed term loses < 1e-107."""
    K = unary.shape[1]
    D = durations.shape[1]
    L = D
    ex = np.zeros((K, T))
    P = np.zeros((K, T + 1))
    m = np.empty(K)
    blocked = np.full(K, -1, dtype=np.int64)
    es = 0.0
    for a in range(0, T, L):
        lo = max(0, a - D + 1)
        for k in range(K):
            _window_anchor(unary, alpha_star, inc, o, a, lo, k, P, ex, m, blocked)
        for t in range(a, min(a + L, T)):
            c_mid = LAST if t == T - 1 else MIDDLE
            c_first = SINGLE if t == T - 1 else FIRST
            for k in range(K):
                S, dm = _window_step(unary, alpha_star, ed, o, t, T, k, lo, D, P, ex, m, blocked)
                P[k, t + 1] = P[k, t] + _ufin(unary[o + t, k]) - inc[o + t]
                be = beta_end[o + t, k]
                if dm <= 0 or be == NEG_INF:
                    continue
                acc = 0.0
                if S >= _TINY:
                    C = math.exp(m[k] + mdur[k] + P[k, t + 1] + be)
                    exk = ex[k]
                    for d in range(1, dm + 1):
                        s = t - d + 1
                        acc += unary[o + s, k]
                        c = c_first if s == 0 else c_mid
                        p = C * exk[s] * ed[c, k, d - 1]
                        if p > 0.0:
                            es += p * (acc + durations[c, d - 1, k])
                            dmarg_b[c, d - 1, k] += p
                else:
                    nacc = 0.0
                    for d in range(1, dm + 1):
                        s = t - d + 1
                        acc += unary[o + s, k]
                        nacc += inc[o + s]
                        c = c_first if s == 0 else c_mid
                        w = acc + durations[c, d - 1, k]
                        p = math.exp(alpha_star[o + s, k] + w - nacc + be)
                        if p > 0.0:
                            es += p * w
                            dmarg_b[c, d - 1, k] += p
    return es


@njit(cache=True, parallel=True)
def semimarkov_expectations(unary, durations, transition, start, end, segment, has_segment, offsets,
                            alpha, alpha_star, inc, beta_end, beta_start, z_fin):
    """Expected score and duration marginals per sequence.

    Returns
    -------
    expected_score : (B,) E[score(y)] under the posterior (terms with zero probability skipped, so
        -inf potentials never give NaN); 0 for empty or infeasible sequences.
    duration_marginals : (B, 4, D, K) expected number of k-segments of length d scored by duration
        table c (MIDDLE, FIRST, LAST, SINGLE).

    Time O(N·(D·K + K²)): every segment's probability is visited once (without ``segment``, as a
    product of the forward's window factors; see :func:`_segment_expectations_lin`).
    """
    N, K = unary.shape
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    expected = np.zeros(B)
    dmarg = np.zeros((B, 4, D, K))
    ed, mdur = duration_factors(durations)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        zf = z_fin[b]
        if T == 0 or zf == NEG_INF:
            continue
        es = 0.0
        for k in range(K):
            p = math.exp(alpha_star[o, k] + beta_start[o, k])
            if p > 0.0:
                es += p * start[k]
            p = math.exp(alpha[o + T - 1, k] + end[k] - zf)
            if p > 0.0:
                es += p * end[k]
        for n in range(T - 1):
            r = o + n
            for i in range(K):
                for j in range(K):
                    p = math.exp(alpha[r, i] + transition[i, j] + beta_start[r + 1, j])
                    if p > 0.0:
                        es += p * transition[i, j]
        if not has_segment:
            es += _segment_expectations_lin(unary, durations, ed, mdur, o, T, alpha_star, inc,
                                            beta_end, dmarg[b])
            expected[b] = es
            continue
        acc = np.empty(K)
        for e in range(T):
            for k in range(K):
                acc[k] = 0.0
            nacc = 0.0
            for d in range(1, min(D, e + 1) + 1):
                s = e - d + 1
                nacc += inc[o + s]
                c = _table(s, e, T)
                for k in range(K):
                    acc[k] += unary[o + s, k]
                    w = acc[k] + durations[c, d - 1, k] + segment[o + e, d - 1, k]
                    p = math.exp(alpha_star[o + s, k] + w - nacc + beta_end[o + e, k])
                    if p > 0.0:
                        es += p * w
                        dmarg[b, c, d - 1, k] += p
        expected[b] = es
    return expected, dmarg


@njit(cache=True, parallel=True)
def semimarkov_segment_marginals(unary, durations, segment, has_segment, offsets, alpha_star, inc,
                                 beta_end, z_fin):
    """Dense segment marginals (N, D, K): ``out[e, d-1, k]`` = P(a k-segment covers [e-d+1, e]).
    Time and memory O(N·D·K)."""
    N, K = unary.shape
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    out = np.zeros((N, D, K))
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0 or z_fin[b] == NEG_INF:
            continue
        acc = np.empty(K)
        for e in range(T):
            for k in range(K):
                acc[k] = 0.0
            nacc = 0.0
            for d in range(1, min(D, e + 1) + 1):
                s = e - d + 1
                nacc += inc[o + s]
                c = _table(s, e, T)
                for k in range(K):
                    acc[k] += unary[o + s, k]
                    w = acc[k] + durations[c, d - 1, k]
                    if has_segment:
                        w += segment[o + e, d - 1, k]
                    out[o + e, d - 1, k] = math.exp(alpha_star[o + s, k] + w - nacc
                                                    + beta_end[o + e, k])
    return out


@njit(cache=True)
def semimarkov_segments_above(unary, durations, segment, has_segment, o, T, e_lo, e_hi, alpha_star,
                              inc, beta_end, zf, threshold):
    """Segments of one sequence (rows o … o+T-1) ending in [e_lo, e_hi) whose marginal exceeds
    ``threshold``: arrays start, end (local, inclusive), label (int64) and prob (float64), ordered by
    end, then duration, then label. Two passes (count, fill); memory O(#hits + K)."""
    K = unary.shape[1]
    D = durations.shape[1]
    acc = np.empty(K)
    starts = np.empty(0, dtype=np.int64)
    ends = np.empty(0, dtype=np.int64)
    labels = np.empty(0, dtype=np.int64)
    probs = np.empty(0)
    if zf == NEG_INF:
        return starts, ends, labels, probs
    for sweep in range(2):
        n = 0
        for e in range(e_lo, e_hi):
            for k in range(K):
                acc[k] = 0.0
            nacc = 0.0
            for d in range(1, min(D, e + 1) + 1):
                s = e - d + 1
                nacc += inc[o + s]
                c = _table(s, e, T)
                for k in range(K):
                    acc[k] += unary[o + s, k]
                    w = acc[k] + durations[c, d - 1, k]
                    if has_segment:
                        w += segment[o + e, d - 1, k]
                    p = math.exp(alpha_star[o + s, k] + w - nacc + beta_end[o + e, k])
                    if p > threshold:
                        if sweep == 1:
                            starts[n] = s
                            ends[n] = e
                            labels[n] = k
                            probs[n] = p
                        n += 1
        if sweep == 0:
            starts = np.empty(n, dtype=np.int64)
            ends = np.empty(n, dtype=np.int64)
            labels = np.empty(n, dtype=np.int64)
            probs = np.empty(n)
    return starts, ends, labels, probs


# --------------------------------------------------------------------------------------------------
# decoding: Viterbi trace, k-best, sampling, scoring
# --------------------------------------------------------------------------------------------------
@njit(cache=True, parallel=True)
def semimarkov_viterbi_trace(alpha, end, bp_d, bp_j, offsets):
    """Trace the MAX-semiring backpointers. Returns token ``labels`` (N,) int64 and ``starts`` (N,)
    bool (True where a segment starts). Sequences whose best score is -inf are left at -1 / False
    (callers raise before). Time O(N)."""
    N, K = alpha.shape
    B = offsets.shape[0] - 1
    labels = np.full(N, -1, dtype=np.int64)
    starts = np.zeros(N, dtype=np.bool_)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        best = NEG_INF
        k = -1
        for j in range(K):
            v = alpha[o + T - 1, j] + end[j]
            if v > best:
                best = v
                k = j
        if k < 0:
            continue
        e = T - 1
        while True:
            d = bp_d[o + e, k]
            s = e - d + 1
            for u in range(s, e + 1):
                labels[o + u] = k
            starts[o + s] = True
            if s == 0:
                break
            k = bp_j[o + s, k]
            e = s - 1
    return labels, starts


@njit(cache=True)
def _kbest_seq(unary, durations, transition, start, end, segment, has_segment, o, T, kk, labels,
               starts, scores, b):
    K = unary.shape[1]
    D = durations.shape[1]
    # A[e, k, r]: r-th best score of a prefix whose last segment has label k and ends at e
    # S[s, k, r]: r-th best score of a prefix followed by the start of a k-segment at s
    A = np.full((T, K, kk), NEG_INF)
    A_d = np.zeros((T, K, kk), dtype=np.int32)
    A_r = np.zeros((T, K, kk), dtype=np.int32)
    S = np.full((T, K, kk), NEG_INF)
    S_j = np.zeros((T, K, kk), dtype=np.int32)
    S_r = np.zeros((T, K, kk), dtype=np.int32)
    head = np.zeros(max(D, K), dtype=np.int64)
    w = np.empty((D, K))
    acc = np.empty(K)
    for t in range(T):
        if t == 0:
            for k in range(K):
                S[0, k, 0] = start[k]
        else:
            # S[t, k, :] = top-kk of {A[t-1, j, r] + transition[j, k]}: K-way merge of sorted lists
            for k in range(K):
                for j in range(K):
                    head[j] = 0
                for r in range(kk):
                    best = NEG_INF
                    bj = -1
                    for j in range(K):
                        if head[j] < kk:
                            v = A[t - 1, j, head[j]] + transition[j, k]
                            if v > best:
                                best = v
                                bj = j
                    if bj < 0:
                        break
                    S[t, k, r] = best
                    S_j[t, k, r] = bj
                    S_r[t, k, r] = head[bj]
                    head[bj] += 1
        # A[t, k, :] = top-kk of {S[t-d+1, k, r] + w(t-d+1, t, k)}: D-way merge
        dmax = min(D, t + 1)
        for k in range(K):
            acc[k] = 0.0
        for d in range(1, dmax + 1):
            s = t - d + 1
            c = _table(s, t, T)
            for k in range(K):
                acc[k] += unary[o + s, k]
                v = acc[k] + durations[c, d - 1, k]
                if has_segment:
                    v += segment[o + t, d - 1, k]
                w[d - 1, k] = v
        for k in range(K):
            for d in range(dmax):
                head[d] = 0
            for r in range(kk):
                best = NEG_INF
                bd = -1
                for d in range(1, dmax + 1):
                    h = head[d - 1]
                    if h < kk:
                        v = S[t - d + 1, k, h] + w[d - 1, k]
                        if v > best:
                            best = v
                            bd = d
                if bd < 0:
                    break
                A[t, k, r] = best
                A_d[t, k, r] = bd
                A_r[t, k, r] = head[bd - 1]
                head[bd - 1] += 1
    # final: top-kk of {A[T-1, k, r] + end[k]}, then trace each back
    for k in range(K):
        head[k] = 0
    for r in range(kk):
        best = NEG_INF
        bk = -1
        for k in range(K):
            if head[k] < kk:
                v = A[T - 1, k, head[k]] + end[k]
                if v > best:
                    best = v
                    bk = k
        if bk < 0:
            break
        scores[b, r] = best
        k = bk
        rr = head[bk]
        head[bk] += 1
        e = T - 1
        while True:
            d = A_d[e, k, rr]
            r2 = A_r[e, k, rr]
            s = e - d + 1
            for u in range(s, e + 1):
                labels[r, o + u] = k
            starts[r, o + s] = True
            if s == 0:
                break
            k2 = S_j[s, k, r2]
            rr = S_r[s, k, r2]
            k = k2
            e = s - 1


@njit(cache=True, parallel=True)
def semimarkov_kbest(unary, durations, transition, start, end, segment, has_segment, offsets, kk):
    """The ``kk`` best segmentations of every sequence (k-best Viterbi over the two-stage recursion:
    each of α*, α keeps a sorted list of its kk best entries, merged from sorted lists).

    Returns ``labels`` (kk, N) int64 (-1 padding), ``starts`` (kk, N) bool (segment starts) and
    ``scores`` (B, kk) float64 (-inf padding). Time O(N·kk·(D·K + K²)), memory O(N·K·kk).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    labels = np.full((kk, N), -1, dtype=np.int64)
    starts = np.zeros((kk, N), dtype=np.bool_)
    scores = np.full((B, kk), NEG_INF)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            scores[b, 0] = 0.0
            continue
        _kbest_seq(unary, durations, transition, start, end, segment, has_segment, o, T, kk, labels,
                   starts, scores, b)
    return labels, starts, scores


@njit(cache=True, inline="always")
def _draw(weights, n, u):
    """Index drawn from the first n log-weights (max-shifted in place to linear) with uniform u."""
    m = NEG_INF
    for i in range(n):
        if weights[i] > m:
            m = weights[i]
    tot = 0.0
    for i in range(n):
        weights[i] = math.exp(weights[i] - m)
        tot += weights[i]
    target = u * tot
    c = 0.0
    last = -1
    for i in range(n):
        if weights[i] > 0.0:
            last = i
            c += weights[i]
            if target < c:
                return i
    return last


@njit(cache=True, parallel=True)
def semimarkov_sample(unary, durations, transition, start, end, segment, has_segment, offsets, alpha,
                      alpha_star, inc, uniforms):
    """Exact posterior samples by forward filtering, backward sampling.

    From the end: draw the last label k ∝ exp(α[T-1, k] + end[k]); then repeatedly the duration
    d ∝ exp(α*[e-d+1, k] + w(e-d+1, e, k)) and, unless the segment starts at 0, the previous label
    j ∝ exp(α[s-1, j] + transition[j, k]). With the normalised α̂, α̂* of the forward, the duration
    weights carry -Σ_{u=s..e-1} inc[u] (α*[s] = α̂*[s] + c_{s-1}). ``uniforms`` (n, 2N + B) in
    [0, 1): sequence b of sample i reads ``uniforms[i, 2·offsets[b] + b:]``. Returns ``labels`` (n, N) int64 and ``starts`` (n, N)
    bool. Sequences must be feasible. Time O(n·N·D) (segment sums recomputed while drawing d).
    """
    N, K = unary.shape
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    n_samples = uniforms.shape[0]
    labels = np.full((n_samples, N), -1, dtype=np.int64)
    starts = np.zeros((n_samples, N), dtype=np.bool_)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        wts = np.empty(max(D, K))
        for i in range(n_samples):
            ui = 2 * o + b
            for k in range(K):
                wts[k] = alpha[o + T - 1, k] + end[k]
            k = _draw(wts, K, uniforms[i, ui])
            ui += 1
            e = T - 1
            while True:
                dmax = min(D, e + 1)
                acc = 0.0
                nacc = 0.0
                for d in range(1, dmax + 1):
                    s = e - d + 1
                    if d > 1:
                        nacc += inc[o + s]
                    acc += unary[o + s, k]
                    v = alpha_star[o + s, k] + acc - nacc + durations[_table(s, e, T), d - 1, k]
                    if has_segment:
                        v += segment[o + e, d - 1, k]
                    wts[d - 1] = v
                d = _draw(wts, dmax, uniforms[i, ui]) + 1
                ui += 1
                s = e - d + 1
                for u in range(s, e + 1):
                    labels[i, o + u] = k
                starts[i, o + s] = True
                if s == 0:
                    break
                for j in range(K):
                    wts[j] = alpha[o + s - 1, j] + transition[j, k]
                k = _draw(wts, K, uniforms[i, ui])
                ui += 1
                e = s - 1
    return labels, starts


@njit(cache=True, parallel=True)
def semimarkov_score(unary, durations, transition, start, end, segment, has_segment, offsets, segs,
                     seg_offsets):
    """Score of given segmentations: ``segs`` (S, 3) int64 rows (start, end inclusive, label), local
    to their sequence, sequence b owning rows ``seg_offsets[b]:seg_offsets[b + 1]`` (validated to
    tile the sequence). A segment longer than D scores -inf. Returns (B,). Time O(N + S)."""
    K = unary.shape[1]
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    out = np.zeros(B)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        total = 0.0
        prev = -1
        for i in range(seg_offsets[b], seg_offsets[b + 1]):
            s = segs[i, 0]
            e = segs[i, 1]
            k = segs[i, 2]
            d = e - s + 1
            if d > D:
                total = NEG_INF
                break
            w = durations[_table(s, e, T), d - 1, k]
            for u in range(s, e + 1):
                w += unary[o + u, k]
            if has_segment:
                w += segment[o + e, d - 1, k]
            total += w
            if prev < 0:
                total += start[k]
            else:
                total += transition[prev, k]
            prev = k
        if prev >= 0 and total > NEG_INF:
            total += end[prev]
        out[b] = total
    return out
