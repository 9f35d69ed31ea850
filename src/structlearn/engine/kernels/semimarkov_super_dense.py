"""The dense passes of the super-label semi-Markov kernels (a (K, K) transition; model, representation
and anchors: :mod:`structlearn.engine.kernels.semimarkov_super`).

The transition stage costs O(K²) per token, so the per-label window terms are simply read along the
diagonal of the stored α̃* rows (forward) and of a ring of β̌_end rows (backward): O(K) per token.
"""
import math

import numpy as np
from numba import njit

from .semimarkov_super_steps import (TINY, axpy, combine, factor_state, idle_scale, log_lse, posterior_scale,
                                     posteriors_from_increments, ufin)
from .semimarkov_super_steps import anchor as _anchor
from .semimarkov_window import NEG_INF


@njit(cache=True)
def _forward_exact(astar, lF, c, live_d, o, t, T, M, D, open_end, alpha):
    """Cold path of the forward at token t: alpha[o+t] and inc[t] in log space from log α̃* and the exact
    log factors lF (returns 0 when nothing ends at t)."""
    K = M * D
    lv = np.full(K, NEG_INF)
    last = open_end and t == T - 1
    for j in range(M):
        dm = live_d[j]
        for d in range(1, D + 1):
            k = j * D + d - 1
            if not last and d > dm:
                continue
            acc = NEG_INF
            for ell in range(d if not last else 1, (d if not last else min(d, dm)) + 1):
                a = astar[o + t - ell + 1, k]
                if a > 0.0:
                    x = math.log(a) + lF[j, t - ell + 1]
                    acc = x if acc == NEG_INF else max(acc, x) + math.log1p(math.exp(-abs(acc - x)))
            if acc > NEG_INF:
                lv[k] = acc + c[j]
    _, ic = log_lse(lv)
    if ic == NEG_INF:
        for k in range(K):
            alpha[o + t, k] = 0.0
        return 0.0
    for k in range(K):
        alpha[o + t, k] = math.exp(lv[k] - ic)
    return ic


@njit(cache=True, fastmath={"reassoc", "contract"})
def forward_seq(unary, start, open_end, E, kap, D, o, T, astar, alpha, inc):
    """Scaled forward of one sequence with a dense transition (E linear, times kap); fills astar, alpha
    and inc on rows o … o+T-1 and returns Σ_t inc[t]."""
    M = unary.shape[1]
    K = M * D
    F = np.zeros((M, T))
    lF = np.full((M, T), NEG_INF)
    mu, top, topos, blocked = factor_state(M)
    blocked[:] = -1
    vals = np.zeros(K)
    S = np.zeros(M)
    c = np.zeros(M)
    w = np.zeros(M)
    live_d = np.zeros(M, dtype=np.int64)
    total = 0.0
    for t in range(T):
        # stage 1: α̃*[t] = kap · Σ_k α̃[t-1, k] E[k, ·]
        if t == 0:
            for k in range(K):
                astar[o, k] = math.exp(start[k])
        else:
            for k in range(K):
                astar[o + t, k] = 0.0
            for k in range(K):
                a = alpha[o + t - 1, k]
                if a != 0.0:
                    axpy(a * kap, E, k, 0, astar, o + t, 0, K)
        lo = max(0, t - D + 1)
        last = open_end and t == T - 1
        # stage 2: the start factor of t, then the labels ending at t (read along the diagonal)
        for j in range(M):
            x = unary[o + t, j]
            if x == NEG_INF:
                blocked[j] = t
                top[j] = NEG_INF
            lv = max(lo, blocked[j] + 1)
            _anchor(F, lF, mu, top, topos, j, t, lv, t, x > NEG_INF)
            dm = min(D, t + 1, t - blocked[j])
            live_d[j] = dm
            tot = 0.0
            for d in range(1, D + 1):
                k = j * D + d - 1
                v = 0.0
                if last:
                    for ell in range(1, min(d, dm) + 1):
                        v += astar[o + t - ell + 1, k] * F[j, t - ell + 1]
                elif d <= dm:
                    v = astar[o + t - d + 1, k] * F[j, t - d + 1]
                vals[k] = v
                tot += v
            S[j] = tot
            c[j] = mu[j] + x
        cmax, Z = combine(S, c, w, M)
        if cmax == NEG_INF:
            ic = idle_scale(c, top, M)
            for k in range(K):
                alpha[o + t, k] = 0.0
        elif Z >= TINY:
            ic = cmax + math.log(Z)
            for j in range(M):
                g = w[j] / Z
                for d in range(D):
                    alpha[o + t, j * D + d] = vals[j * D + d] * g
        else:
            ic = _forward_exact(astar, lF, c, live_d, o, t, T, M, D, open_end, alpha)
        inc[o + t] = ic
        total += ic
        for j in range(M):
            mu[j] += ufin(unary[o + t, j]) - ic
    return total


@njit(cache=True)
def _backward_exact(bend, lFb, cb, live_d, s, T, M, D, open_end, bcur):
    """Cold path of the backward at start s: β̌_start[s] (``bcur[0]``) in log space; returns incb[s]."""
    K = M * D
    lv = np.full(K, NEG_INF)
    for j in range(M):
        dm = live_d[j]
        for d in range(1, D + 1):
            k = j * D + d - 1
            e = -1
            if open_end and d >= T - s:
                if dm == T - s:
                    e = T - 1
            elif d <= dm:
                e = s + d - 1
            if e >= 0:
                b = bend[e % D, k]
                if b > 0.0:
                    lv[k] = math.log(b) + lFb[j, e] + cb[j]
    _, ib = log_lse(lv)
    if ib == NEG_INF:
        for k in range(K):
            bcur[0, k] = 0.0
        return 0.0
    for k in range(K):
        bcur[0, k] = math.exp(lv[k] - ib)
    return ib


@njit(cache=True, fastmath={"reassoc", "contract"})
def backward_seq(unary, end, open_end, Et, kap, D, o, T, astar, alpha, inc, zf, store, seg_b, first_b, cd_b,
                 gamma, pstart, bstart_out, bend_out):
    """Self-normalised backward of one sequence with a dense transition and its posterior statistics:
    segments, first, the dense transition counts (times E kap), γ and, with ``store``, the rows; returns
    whether the posteriors passed the consistency check."""
    M = unary.shape[1]
    K = M * D
    Fb = np.zeros((M, T))
    lFb = np.full((M, T), NEG_INF)
    nu, top, topos, blocked = factor_state(M)
    blocked[:] = T
    bend = np.zeros((D, K))
    bcur = np.zeros((1, K))
    bnext = np.zeros((1, K))
    S = np.zeros(M)
    cb = np.zeros(M)
    w = np.zeros(M)
    live_d = np.zeros(M, dtype=np.int64)
    gd = np.zeros((M, T + 1))
    lam = 0.0
    lam_c = 0.0
    om_next = math.exp(-zf)
    ok = True
    for s in range(T - 1, -1, -1):
        slot = s % D
        # stage 1: β̌_end[s] and the transition posteriors of the boundary s | s+1
        if s == T - 1:
            for k in range(K):
                bend[slot, k] = math.exp(end[k])
        else:
            for k in range(K):
                bend[slot, k] = 0.0
            for kp in range(K):
                b = bnext[0, kp]
                if b != 0.0:
                    axpy(b * kap, Et, kp, 0, bend, slot, 0, K)
            for k in range(K):
                a = om_next * alpha[o + s, k]
                if a != 0.0:
                    axpy(a, bnext, 0, 0, cd_b, k, 0, K)
        if store:
            for k in range(K):
                bend_out[o + s, k] = bend[slot, k] * om_next
        # stage 2: the end factor of s, then the labels starting at s
        hi = min(T, s + D)
        for j in range(M):
            x = unary[o + s, j]
            if x == NEG_INF:
                blocked[j] = s
                top[j] = NEG_INF
            hv = min(hi, blocked[j])
            _anchor(Fb, lFb, nu, top, topos, j, s, s + 1, hv, x > NEG_INF)
            dm = min(D, T - s, blocked[j] - s)
            live_d[j] = dm
            tot = 0.0
            for d in range(1, D + 1):
                k = j * D + d - 1
                v = 0.0
                if open_end and d >= T - s:
                    if dm == T - s:
                        v = bend[(T - 1) % D, k] * Fb[j, T - 1]
                elif d <= dm:
                    v = bend[(s + d - 1) % D, k] * Fb[j, s + d - 1]
                bcur[0, k] = v
                tot += v
            S[j] = tot
            cb[j] = nu[j] + x
        cmax, Z = combine(S, cb, w, M)
        if cmax == NEG_INF:
            incb = idle_scale(cb, top, M)
        elif Z >= TINY:
            incb = cmax + math.log(Z)
            for j in range(M):
                g = w[j] / Z
                for d in range(D):
                    bcur[0, j * D + d] *= g
        else:
            incb = _backward_exact(bend, lFb, cb, live_d, s, T, M, D, open_end, bcur)
        for j in range(M):
            nu[j] += ufin(unary[o + s, j]) - incb
        lam, lam_c, om, fine = posterior_scale(lam, lam_c, incb - inc[o + s], zf)
        ok = ok and fine
        for j in range(M):
            pj = 0.0
            for d in range(1, D + 1):
                k = j * D + d - 1
                p = astar[o + s, k] * bcur[0, k] * om
                seg_b[k] += p
                pj += p
                gd[j, min(s + d, T)] -= p
                if store:
                    pstart[o + s, k] = p
            gd[j, s] += pj
        if s == 0:
            for k in range(K):
                first_b[k] = astar[o, k] * bcur[0, k] * om
        if store:
            for k in range(K):
                bstart_out[o + s, k] = bcur[0, k] * om
        for k in range(K):
            bnext[0, k] = bcur[0, k]
        om_next = om
    return posteriors_from_increments(gd, gamma, o, T, M) and ok
