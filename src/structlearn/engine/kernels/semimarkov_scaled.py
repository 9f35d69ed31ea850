"""Linear-space ("scaled") passes of the semi-Markov kernels: the LOG semiring without ``segment``
(model and normalisation: :mod:`structlearn.engine.kernels.semimarkov`).

The window sum over d factors into per-start and per-duration terms, so it is computed in linear space
as Σ_d ex[k, s] · ed[c, k, d-1] — one multiply-add per (t, d, k) instead of an exp — with block-local
anchors and an exact log-space fallback (:func:`~structlearn.engine.kernels.semimarkov_window.window`)
whenever a window sum is tiny; results agree with the log-space kernels to ~1e-12 relative.
:func:`forward_pass` is the forward and, replaying the same windows against a finished forward and
backward, the segment expectations; :func:`backward_pass` is its mirror.
"""
import math

import numpy as np
from numba import njit, uint64

from ..semirings import LOG, reduce_pair
from .semimarkov_window import (FIRST, MIDDLE, NEG_INF, NO_TV, NO_TV_ON, reduce_row, table, varies, window, window_lse,
                                window_scratch)

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


@njit(cache=True)
def _window_retry(alpha_star, ed, o, t, T, k, dm, P, ex, m):
    """Cold path of the forward's window sum (S < _TINY): re-anchor label k's window on its largest term
    and return the sum S = Σ_{d<=dm} ex[k, t-d+1] · ed[c, k, d-1] again (the caller falls back to log
    space if it stays below _TINY)."""
    mk = NEG_INF
    for s in range(t - dm + 1, t + 1):
        xs = alpha_star[o + s, k] - P[k, s]
        if xs > mk:
            mk = xs
    if mk == NEG_INF:
        return 0.0
    for s in range(t - dm + 1, t + 1):  # every start a later end can use
        xs = alpha_star[o + s, k] - P[k, s]
        ex[k, s] = math.exp(xs - mk) if xs > NEG_INF else 0.0
    m[k] = mk
    c_mid = table(1, t, T)
    S = 0.0
    for d in range(1, min(dm, t) + 1):
        S += ex[k, t - d + 1] * ed[c_mid, k, d - 1]
    if dm == t + 1:
        S += ex[k, 0] * ed[table(0, t, T), k, t]
    return S


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
def stage1_lin(v, tmat, ef, fmax, out, K, buf):
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
            out[k] = reduce_pair(LOG, v, tmat[k], K)[0]


@njit(cache=True)
def _stage1_exact(V, rv, tmat, k, K):
    """Cold path of the scaled passes' transition stage: log Σ_j exp(V[rv, j] + tmat[k, j])."""
    m = NEG_INF
    for j in range(K):
        x = V[rv, j] + tmat[k, j]
        if x > m:
            m = x
    if m == NEG_INF:
        return m
    s = 0.0
    for j in range(K):
        s += math.exp(V[rv, j] + tmat[k, j] - m)
    return m + math.log(s)


@njit(cache=True, inline="always")
def _pass_scratch(K, T, blocked0):
    """Arrays of a scaled pass over a sequence of length T: window factors (K, T), block prefix P
    (K, T + 1), anchors m (K,), a (K,) buffer and ``blocked`` (K,) int64 set to ``blocked0``."""
    return (np.zeros((K, T)), np.zeros((K, T + 1)), np.empty(K), np.empty(K),
            np.full(K, blocked0, dtype=np.int64))


@njit(cache=True)
def _exact_window(unary, durations, inc, left, right, use_left, use_right, o, T, t, dm, at_end, k):
    """Cold path of the scaled passes: label k's window of token t in log space, with its own
    scratch (kept out of the hot passes: the inlined window's size slowed them by a few percent).
    Returns (v, w, log Σ_d exp v[d-1, k]) of :func:`~structlearn.engine.kernels.semimarkov_window.window`."""
    D = durations.shape[1]
    K = unary.shape[1]
    acc, w, v, mx, bd = window_scratch(D, K)
    window(unary, durations, _NO_SEGMENT, False, inc, left, right, use_left, use_right, True, o, T, t,
           dm, at_end, k, k + 1, acc, w, v, mx, bd)
    return v, w, window_lse(v, dm, k, mx[k])


#: the absent segment potentials of the scaled passes
_NO_SEGMENT = np.zeros((1, 1, 1))


@njit(cache=True, fastmath={"reassoc", "contract"})
def forward_pass(unary, durations, ed, mdur, transition_t, ec, cmax, tv, tv_on, start, o, T, alpha,
                 alpha_star, inc):
    """The normalised LOG forward of one sequence: :func:`_forward_body` with ``expect`` False."""
    return _forward_body(unary, durations, ed, mdur, transition_t, ec, cmax, tv, tv_on, start, o, T,
                         alpha, alpha_star, inc, False, alpha, _NO_DMARG)


@njit(cache=True, fastmath={"reassoc", "contract"})
def expectation_pass(unary, durations, ed, mdur, o, T, alpha_star, inc, beta_end, dmarg_b):
    """The window replay of a finished forward: :func:`_forward_body` with ``expect`` True."""
    # transition_t, ec, cmax, start and alpha are not read in this mode (stand-ins of their types)
    return _forward_body(unary, durations, ed, mdur, unary, unary, mdur, NO_TV, NO_TV_ON, mdur, o, T,
                         alpha_star, alpha_star, inc, True, beta_end, dmarg_b)


#: dmarg_b of the plain forward (never written)
_NO_DMARG = np.zeros((1, 1, 1))


@njit(cache=True, inline="always")
def _forward_body(unary, durations, ed, mdur, transition_t, ec, cmax, tv, tv_on, start, o, T, alpha,
                  alpha_star, inc, expect, beta_end, dmarg_b):
    """The scaled forward of one sequence, in one of two modes (inlined into :func:`forward_pass`
    and :func:`expectation_pass` with ``expect`` a constant, so each compiles only its own branch).

    ``expect`` False: the normalised LOG forward; fills alpha, alpha_star and inc (rows o … o+T-1)
    and returns Σ_t inc[t] (``beta_end``, ``dmarg_b`` unread). A boundary with its own transition
    matrix (``tv[r]``, :func:`~structlearn.engine.kernels.semimarkov_window.varies`) takes the exact
    log-space stage instead of the linear-space factors ``ec`` of the stationary matrix.
    ``expect`` True: replays the windows of a finished forward (alpha_star, inc read) against its
    backward's ``beta_end``: returns Σ over segments of p·w and adds p to dmarg_b[c, d-1, k], with
    p(s, t, k) = C · ex[k, s] · ed[c, k, d-1] and C = exp(m[k] + max_dur[k] + P[k, t+1] + β̂_end[t, k])
    = P(a k-segment ends at t) / S <= 1 / _TINY, so an underflowed term loses < 1e-107.
    """
    K = unary.shape[1]
    D = durations.shape[1]
    L = D
    # ex: window factors; blocked[k]: last token t' <= t with unary[t', k] = -inf
    ex, P, m, buf, blocked = _pass_scratch(K, T, -1)
    at = np.empty(K)
    total = 0.0
    for a in range(0, T, L):
        lo = max(0, a - D + 1)
        for k in range(K):
            _window_anchor(unary, alpha_star, inc, o, a, lo, k, P, ex, m, blocked)
        for t in range(a, min(a + L, T)):
            if not expect:
                # stage 1: α̂*[t, k] = ⊕_j α̂[t-1, j] + transition[j, k]
                if t == 0:
                    for k in range(K):
                        alpha_star[o, k] = start[k]
                elif varies(tv_on, o + t - 1):  # this boundary's own matrix tv[o + t - 1]
                    for k in range(K):
                        alpha_star[o + t, k] = reduce_row(LOG, alpha, o + t - 1, tv, o + t - 1, k, K,
                                                          True)[0]
                else:  # (stage1_rows, written out: a helper with array arguments costs reference counts)
                    r = o + t - 1
                    mv = NEG_INF
                    for j in range(K):
                        if alpha[r, j] > mv:
                            mv = alpha[r, j]
                    for j in range(K):
                        buf[j] = math.exp(alpha[r, j] - mv) if mv > NEG_INF else 0.0
                    for k in range(K):
                        S1 = 0.0
                        for j in range(K):
                            S1 += buf[j] * ec[k, j]
                        if mv == NEG_INF:
                            alpha_star[o + t, k] = NEG_INF
                        elif S1 >= _TINY:
                            alpha_star[o + t, k] = mv + cmax[k] + math.log(S1)
                        else:
                            alpha_star[o + t, k] = _stage1_exact(alpha, r, transition_t, k, K)
            c_mid = table(1, t, T)
            c_first = table(0, t, T)
            ut = uint64(t)
            for k in range(K):
                # the window step of label k (written out: a helper with array arguments called per
                # (t, k) costs reference counts): add start t, raising the anchor when its term exceeds
                # it by > _RESCALE, then S = Σ_{d<=dm} ex[k, t-d+1] · ed[c, k, d-1]
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
                S = 0.0
                if dm > 0:
                    for c in range(min(dm, t)):  # unsigned indices: no negative-index tests
                        cu = uint64(c)
                        S += ex[k, ut - cu] * ed[c_mid, k, cu]
                    if dm == t + 1:
                        S += ex[k, 0] * ed[c_first, k, t]
                    if S < _TINY:
                        S = _window_retry(alpha_star, ed, o, t, T, k, dm, P, ex, m)
                if not expect:
                    # stage 2: α̃[t, k] = P[k, t] + unary[t, k] + m[k] + max_dur[k] + log S
                    if dm <= 0:
                        at[k] = NEG_INF
                    elif S >= _TINY:
                        at[k] = P[k, t] + unary[o + t, k] + m[k] + mdur[k] + math.log(S)
                    else:
                        at[k] = _exact_window(unary, durations, inc, alpha_star, beta_end, True,
                                              False, o, T, t, dm, True, k)[2]
                    continue
                P[k, t + 1] = P[k, t] + _ufin(unary[o + t, k]) - inc[o + t]
                be = beta_end[o + t, k]
                if dm <= 0 or be == NEG_INF:
                    continue
                if S >= _TINY:
                    C = math.exp(m[k] + mdur[k] + P[k, t + 1] + be)
                    sw = 0.0
                    for d in range(1, dm + 1):
                        s = t - d + 1
                        sw += unary[o + s, k]
                        c = c_first if s == 0 else c_mid
                        p = C * ex[k, s] * ed[c, k, d - 1]
                        if p > 0.0:
                            total += p * (sw + durations[c, d - 1, k])
                            dmarg_b[c, d - 1, k] += p
                else:
                    vv, wv, _ = _exact_window(unary, durations, inc, alpha_star, beta_end, True,
                                              True, o, T, t, dm, True, k)
                    for d in range(1, dm + 1):
                        p = math.exp(vv[d - 1, k] - inc[o + t])
                        if p > 0.0:
                            total += p * wv[d - 1, k]
                            dmarg_b[table(t - d + 1, t, T), d - 1, k] += p
            if not expect:
                # normalise (semimarkov_window.normalise, written out: the inlined helper's array
                # arguments cost reference counts per token)
                mm = NEG_INF
                for k in range(K):
                    if at[k] > mm:
                        mm = at[k]
                if mm == NEG_INF:
                    mm = 0.0
                inc[o + t] = mm
                for k in range(K):
                    alpha[o + t, k] = at[k] - mm
                total += mm
                for k in range(K):
                    P[k, t + 1] = P[k, t] + _ufin(unary[o + t, k]) - mm
    return total


@njit(cache=True, fastmath={"reassoc", "contract"})
def backward_pass(unary, durations, ed, mdur, transition, er, rmax, tv, tv_on, end, o, T, inc, z_fin,
                  beta_end, beta_start, alpha_star, dm_b, want_dm):
    """Mirror of :func:`forward_pass`, the normalised LOG backward of one sequence: blocks of starts
    from the right, block-local suffix
    P[k, e+1] = -Σ_{u=h..e} (unary[u, k] - inc[u]) (P[k, s] = Σ_{u=s..h-1} for s <= h, h = one past
    the block), ey[k, e] = exp(β̂_end[e, k] - P[k, e+1] - m[k]) and
    β̂_start[s, k] = P[k, s] + m[k] + max_dur[k] + log Σ_d ey[k, s+d-1] · ed[c, k, d-1].

    With ``want_dm`` it also adds the duration marginals of the sequence to ``dm_b`` (4, K, D)
    [table, label, d-1], from the forward's ``alpha_star``: each window term is, times
    C = exp(α̂*[s, k] + P[k, s] + m[k] + max_dur[k]), the posterior of its segment (C · S is
    P(a k-segment starts at s) <= 1 and S >= _TINY, so C <= 1e200). This is what the forward's window
    replay (:func:`expectation_pass`) computes, for one multiply-add per term of the backward."""
    K = unary.shape[1]
    D = durations.shape[1]
    L = D
    # ey: window factors; blocked[k]: first token t' >= s with unary[t', k] = -inf
    ey, P, m, buf, blocked = _pass_scratch(K, T, T)
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
            elif varies(tv_on, o + t):  # this boundary's own matrix tv[o + t]
                for k in range(K):
                    beta_end[o + t, k] = reduce_row(LOG, beta_start, o + t + 1, tv, o + t, k, K,
                                                    False)[0]
            else:  # (stage1_rows, written out)
                r = o + t + 1
                mv = NEG_INF
                for j in range(K):
                    if beta_start[r, j] > mv:
                        mv = beta_start[r, j]
                for j in range(K):
                    buf[j] = math.exp(beta_start[r, j] - mv) if mv > NEG_INF else 0.0
                for k in range(K):
                    S1 = 0.0
                    for j in range(K):
                        S1 += buf[j] * er[k, j]
                    if mv == NEG_INF:
                        beta_end[o + t, k] = NEG_INF
                    elif S1 >= _TINY:
                        beta_end[o + t, k] = mv + rmax[k] + math.log(S1)
                    else:
                        beta_end[o + t, k] = _stage1_exact(beta_start, r, transition, k, K)
            # stage 2 (start t): window sum of ey · ed over ends t … t+dm-1
            c_mid = FIRST if t == 0 else MIDDLE
            c_last = table(t, T - 1, T)
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
                ut = uint64(t)
                for attempt in range(2):
                    S = 0.0
                    for c in range(min(dm, T - 1 - t)):
                        cu = uint64(c)
                        S += ey[k, ut + cu] * ed[c_mid, k, cu]
                    if dm == T - t:
                        S += ey[k, T - 1] * ed[c_last, k, dm - 1]
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
                    if want_dm and alpha_star[o + t, k] > NEG_INF:
                        C = math.exp(alpha_star[o + t, k] + P[k, t] + m[k] + mdur[k])
                        n = min(dm, T - 1 - t)
                        ut = uint64(t)
                        for c in range(n):
                            cu = uint64(c)
                            dm_b[c_mid, k, cu] += C * ey[k, ut + cu] * ed[c_mid, k, cu]
                        if dm == T - t:
                            dm_b[c_last, k, dm - 1] += C * ey[k, T - 1] * ed[c_last, k, dm - 1]
                else:
                    vv, _, lse = _exact_window(unary, durations, inc, beta_end, beta_end, False, True, o,
                                               T, t, dm, False, k)
                    beta_start[o + t, k] = lse - inc[o + t]
                    if want_dm and alpha_star[o + t, k] > NEG_INF:
                        for d in range(1, dm + 1):
                            p = math.exp(alpha_star[o + t, k] + vv[d - 1, k] - inc[o + t])
                            dm_b[table(t, t + d - 1, T), k, d - 1] += p
