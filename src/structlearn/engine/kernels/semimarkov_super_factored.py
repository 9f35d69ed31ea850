"""The factored passes of the super-label semi-Markov kernels (transition[k, k'] = A[k, j'] + B[i, k'];
model, representation and anchors: :mod:`structlearn.engine.kernels.semimarkov_super`).

A label (j, d) started at s ends at e = s + d - 1, so per-label messages meet along a diagonal of the
(time, label) plane; reading a per-label array along it is a strided gather that costs more than the whole
transition stage when M is small. These passes never do: every quantity a token needs is accumulated
*when it is produced*, as "scalar times a fixed row" added into per-state rings of slots indexed by the
token that will consume it (the multiply-add of the arithmetic bound, over contiguous memory):

* forward, at the start s: X = α̃*[s, (j, ·)] · F[j, s] goes to the end slots s+d-1 of state j: their sum
  S_j (the window sum of the labels ending there) and, with A, Σ_d X[(j, d)] Ã[(j, d), j'] (the bridge
  values mid[j, j', e] = Σ_{k of j} α̃[e, k] Ã[k, j'] once the end factor is known). With B the same for
  every i (variable transition), α̃*[s, (j, d)] = kap · b̃[(j, d)] · Σ_i mid[i, j, s-1] is a per-state
  scalar times a fixed row, so no α̃* row is formed at all.
* backward, at the end e: Y = β̌_end[e, (j, ·)] · Fb[j, e] goes to the start slots e-d+1: their sum and the
  bridge values bmid[i, j', s] = Σ_{k' of j'} B̃[i, k'] β̌_start[s, k']. Without A (residential time)
  β̌_end[e, (i, d')] = kap · Σ_j' bmid[i, j', e+1] is a per-state scalar z_i(e), and β̌_start[s, (j, d)] =
  g_j(s) · z_j(s+d-1) is a contiguous run of that series.

The posterior statistics use the same series: P(a j-segment starts at s) = ω_s kap Σ_i mid[i, j, s-1]
bmid[i, j, s], P(one ends at e) = ω_{e+1} kap Σ_j' mid[j, j', e] bmid[j, j', e+1]; the expected
transitions from state i into label (j, d) (``enter``) Σ_s ω_s mid[i, j, s-1] g_j(s) z_j(s+d-1) (times
B̃ kap), from label (i, d') into state j' (``leave``, with B the same for every i)
Σ_s G_i(s) H_{i,j'}(s+d'-1) with G_i(s) = ω_s g_i(s) kap Σ_i' mid[i', i, s-1] and H_{i,j'}(e) =
Fb[i, e] bmid[i, j', e+1] (times b̃ Ã kap). A token costs O(K) plus O(M·K) per factor that depends on
both sides (one for residential time and for variable transition).

Anchor moves of state j multiply every ring of state j, and a forbidden token (unary -inf) clears them.
A per-token normaliser below ZMIN marks the sequence for an exact recomputation.
"""
import math

import numpy as np
from numba import njit

from .semimarkov_super_steps import (FLUSH, RESCALE, ZMIN, add_factor, axpy, combine, factor_state, fill, idle_scale,
                                     posterior_scale, posteriors_from_increments, ring_add, ring_axpy, ring_axpy2,
                                     ring_size, scal, scale_of, slide, ufin)
from .semimarkov_window import NEG_INF


@njit(cache=True, inline="always")
def _scale_rows(a, lo, hi, f):
    """a[lo:hi, :] *= f."""
    for r in range(lo, hi):
        for c in range(a.shape[1]):
            a[r, c] *= f


@njit(cache=True, inline="always")
def _scale_window(a, r, lo, hi, f):
    """a[r, lo:hi] *= f."""
    for c in range(lo, hi):
        a[r, c] *= f


@njit(cache=True, inline="always")
def _astar_row(row, t, estart, mid, msum, Bf, b_vec, has_a, kap, M, D, o):
    """row[0] = α̃*[t] (the start scores at t = 0; else kap · Σ_i B̃[i, k] mid[i, j, t-1])."""
    K = M * D
    if t == 0:
        for k in range(K):
            row[0, k] = estart[k]
        return
    for k in range(K):
        row[0, k] = 0.0
    if b_vec:
        for j in range(M):
            f = kap * msum[j, t - 1]
            for d in range(D):
                row[0, j * D + d] = f * Bf[0, j * D + d]
        return
    for i in range(M):
        if not has_a:  # mid[i, j, ·] is the same for every j: one pass over the row
            m = kap * mid[i, 0, o + t - 1]
            if m != 0.0:
                axpy(m, Bf, i, 0, row, 0, 0, K)
            continue
        for j in range(M):
            m = kap * mid[i, j, o + t - 1]
            if m != 0.0:
                axpy(m, Bf, i, j * D, row, 0, j * D, D)


# --------------------------------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------------------------------
@njit(cache=True, fastmath={"reassoc", "contract"})
def forward_seq(unary, start, end, open_end, At, has_a, Bf, b_vec, Wab, kap, D, o, T, mid, inc, store,
                alpha, astar, alpha_last):
    """Scaled forward of one sequence with a factored transition: fills inc[o:o+T], the bridge values
    mid[:, :, o:o+T], alpha_last (K,) = α̃[T-1] and, with ``store``, the α̃ / α̃* rows. ``Wab`` (M·M, D)
    = b̃[(j, d)] · Ã[(j, d), j'] (used with ``b_vec`` and ``has_a``). Returns (Σ_t inc[t], z_fin, ok)."""
    M = unary.shape[1]
    K = M * D
    W = ring_size(D)
    mask = W - 1
    F = np.zeros((M, T))
    lF = np.full((M, T), NEG_INF)
    mu, top, topos, blocked = factor_state(M)
    blocked[:] = -1
    msum = np.zeros((M, T))
    estart = np.empty(K)
    for k in range(K):
        estart[k] = math.exp(start[k])
    acc_s = np.zeros((M, W))
    acc_m = np.zeros((M * M if has_a else 0, W))
    ring = np.zeros((W, K))  # α̃* rows of the last W starts (the last token, z_fin and ``store``)
    row = np.zeros((1, K))
    S = np.zeros(M)
    c = np.zeros(M)
    w = np.zeros(M)
    live_d = np.zeros(M, dtype=np.int64)
    ok = True
    total = 0.0
    for t in range(T):
        lo = max(0, t - D + 1)
        need_row = store or t >= T - D or t == 0 or not b_vec
        if need_row:  # α̃*[t] (written out: a helper with array arguments costs reference counts)
            if t == 0:
                for k in range(K):
                    row[0, k] = estart[k]
            elif b_vec:
                for j in range(M):
                    scal(kap * msum[j, t - 1], Bf, 0, j * D, row, 0, j * D, D)
            else:
                for k in range(K):
                    row[0, k] = 0.0
                for i in range(M):
                    if not has_a:
                        m = kap * mid[i, 0, o + t - 1]
                        for k in range(K):
                            row[0, k] += m * Bf[i, k]
                    else:
                        for j in range(M):
                            axpy(kap * mid[i, j, o + t - 1], Bf, i, j * D, row, 0, j * D, D)
            for k in range(K):
                ring[t & mask, k] = row[0, k]
        for j in range(M):
            x = unary[o + t, j]
            if x == NEG_INF:  # every pending segment of state j covers t
                blocked[j] = t
                top[j] = NEG_INF
                for r in range(W):
                    acc_s[j, r] = 0.0
                for jp in range(M if has_a else 0):
                    for r in range(W):
                        acc_m[j * M + jp, r] = 0.0
            lv = max(lo, blocked[j] + 1)
            # the anchor step (steps.anchor, written out)
            mv = 0.0
            if top[j] > NEG_INF and not (topos[j] >= lv and topos[j] < t):
                if t > lv and lF[j, t - 1] >= -0.5 * RESCALE:
                    top[j] = lF[j, t - 1]
                    topos[j] = t - 1
                else:
                    mv = slide(F, lF, mu, top, topos, j, lv, t)
            xf = -mu[j]
            if x > NEG_INF and top[j] > NEG_INF and xf <= RESCALE:
                F[j, t] = math.exp(xf) if xf > FLUSH else 0.0
                lF[j, t] = xf
                if xf > top[j]:
                    top[j] = xf
                    topos[j] = t
            else:
                mv += add_factor(F, lF, mu, top, topos, j, t, lv, t, x > NEG_INF)
            if mv != 0.0:
                f = scale_of(mv)
                _scale_window(acc_s, j, 0, W, f)
                if has_a:
                    _scale_rows(acc_m, j * M, (j + 1) * M, f)
            live_d[j] = min(D, t + 1, t - blocked[j])
            # the start t of state j: its labels' contributions to the end slots t … t+D-1
            fj = F[j, t]
            if fj != 0.0:
                n = min(D, T - t)
                if b_vec and t > 0:
                    cf = kap * msum[j, t - 1] * fj
                    ring_axpy(cf, Bf, 0, j * D, acc_s, j, t & mask, n)
                    for jp in range(M if has_a else 0):
                        ring_axpy(cf, Wab, j * M + jp, 0, acc_m, j * M + jp, t & mask, n)
                else:
                    ring_axpy(fj, row, 0, j * D, acc_s, j, t & mask, n)
                    for jp in range(M if has_a else 0):
                        ring_axpy2(fj, row, 0, j * D, At, jp, j * D, acc_m, j * M + jp, t & mask, n)
            c[j] = mu[j] + x
        last = t == T - 1
        if last and open_end:
            # a cut last segment: label (j, d) with any observed length l <= min(d, live d)
            for j in range(M):
                dm = live_d[j]
                tot = 0.0
                for d in range(1, D + 1):
                    for ell in range(1, min(d, dm) + 1):
                        tot += ring[(T - ell) & mask, j * D + d - 1] * F[j, T - ell]
                S[j] = tot
        else:
            for j in range(M):
                S[j] = acc_s[j, t & mask] if live_d[j] > 0 else 0.0
        cmax, Z = combine(S, c, w, M)
        if cmax == NEG_INF:
            ic = idle_scale(c, top, M)
        else:
            if Z < ZMIN:
                ok = False
            ic = cmax + math.log(Z)
        inc[o + t] = ic
        total += ic
        for j in range(M):
            g = w[j] / Z if cmax > NEG_INF else 0.0
            if has_a:
                for jp in range(M):
                    mid[j, jp, o + t] = acc_m[j * M + jp, t & mask] * g
                    acc_m[j * M + jp, t & mask] = 0.0
            else:
                for jp in range(M):
                    mid[j, jp, o + t] = S[j] * g
            acc_s[j, t & mask] = 0.0
            mu[j] += ufin(unary[o + t, j]) - ic
            if store or last:
                dm = live_d[j]
                for d in range(1, D + 1):
                    k = j * D + d - 1
                    v = 0.0
                    if last and open_end:
                        for ell in range(1, min(d, dm) + 1):
                            v += ring[(T - ell) & mask, k] * F[j, T - ell]
                    elif d <= dm:
                        v = ring[(t - d + 1) & mask, k] * F[j, t - d + 1]
                    v *= g
                    if store:
                        alpha[o + t, k] = v
                    if last:
                        alpha_last[k] = v
        for jp in range(M):
            sv = 0.0
            for i in range(M):
                sv += mid[i, jp, o + t]
            msum[jp, t] = sv
        if store:
            for k in range(K):
                astar[o + t, k] = ring[t & mask, k]
    # z_fin = log Σ_k α̃[T-1, k] exp(end[k])
    mx = NEG_INF
    for k in range(K):
        if alpha_last[k] > 0.0 and end[k] > NEG_INF:
            mx = max(mx, math.log(alpha_last[k]) + end[k])
    if mx == NEG_INF:
        return total, NEG_INF, ok
    sv = 0.0
    for k in range(K):
        if alpha_last[k] > 0.0 and end[k] > NEG_INF:
            sv += math.exp(math.log(alpha_last[k]) + end[k] - mx)
    return total, mx + math.log(sv), ok


# --------------------------------------------------------------------------------------------------
# backward
# --------------------------------------------------------------------------------------------------
@njit(cache=True, fastmath={"reassoc", "contract"})
def backward_seq(unary, start, end, open_end, At, has_a, Bf, b_vec, kap, D, o, T, mid, inc, zf, want_enter,
                 want_leave, want_dense, store, alpha, first_b, cb_b, ca_b, ca0_b, cd_b, gamma, pstart,
                 bstart_out, bend_out):
    """Self-normalised backward of one sequence with a factored transition and its posterior statistics
    (see the module docstring); returns whether they passed the consistency check."""
    M = unary.shape[1]
    K = M * D
    W = ring_size(D)
    mask = W - 1
    Fb = np.zeros((M, T))
    lFb = np.full((M, T), NEG_INF)
    nu, top, topos, blocked = factor_state(M)
    blocked[:] = T
    bmid = np.zeros((M * M, T + 1))
    bsum = np.zeros((M, T + 1))
    msum = np.zeros((M, T))
    for t in range(T):
        for jp in range(M):
            sv = 0.0
            for i in range(M):
                sv += mid[i, jp, o + t]
            msum[jp, t] = sv
    estart = np.empty(K)
    eend = np.empty(K)
    for k in range(K):
        estart[k] = math.exp(start[k])
        eend[k] = math.exp(end[k])
    scalar = not has_a  # β̌_end[e, (i, ·)] is one number per state
    acc_s = np.zeros((M, W))
    nb = M if b_vec else M * M
    acc_b = np.zeros((nb, W))
    z = np.zeros((M, T))  # scalar mode: z_j(e) = β̌_end[e, (j, ·)] Fb[j, e]
    yring = np.zeros((W if not scalar else 0, K))  # row mode: Y rows of the last W ends
    H = np.zeros((M * M if want_leave else 0, T))
    ybuf = np.zeros((1, K))
    brow = np.zeros((1, K))
    arow = np.zeros((1, K))
    S = np.zeros(M)
    cb = np.zeros(M)
    w = np.zeros(M)
    g = np.zeros(M)
    direct_b = np.zeros(nb)
    live_d = np.zeros(M, dtype=np.int64)
    gd = np.zeros((M, T + 1))
    lam = 0.0
    lam_c = 0.0
    ok = True
    om_next = math.exp(-zf)
    for s in range(T - 1, -1, -1):
        key = (-s) & mask
        hi = min(T, s + D)
        # the end s: its factor, then (s < T-1) its contributions to the start slots s-d+1
        if not scalar and s < T - 1:  # β̌_end[s] = kap · Σ_j' Ã[k, j'] bmid[i, j', s+1]
            for k in range(K):
                ybuf[0, k] = 0.0
            for i in range(M):
                for jp in range(M):
                    axpy(kap * bmid[i * M + jp, s + 1], At, jp, i * D, ybuf, 0, i * D, D)
        for j in range(M):
            x = unary[o + s, j]
            if x == NEG_INF:  # every pending segment of state j covers s
                blocked[j] = s
                top[j] = NEG_INF
                for r in range(W):
                    acc_s[j, r] = 0.0
                if b_vec:
                    for r in range(W):
                        acc_b[j, r] = 0.0
                else:
                    for i in range(M):
                        for r in range(W):
                            acc_b[i * M + j, r] = 0.0
            hv = min(hi, blocked[j])
            # the anchor step (steps.anchor, written out)
            mv = 0.0
            if top[j] > NEG_INF and not (topos[j] >= s + 1 and topos[j] < hv):
                if hv > s + 1 and lFb[j, s + 1] >= -0.5 * RESCALE:
                    top[j] = lFb[j, s + 1]
                    topos[j] = s + 1
                else:
                    mv = slide(Fb, lFb, nu, top, topos, j, s + 1, hv)
            xf = -nu[j]
            if x > NEG_INF and top[j] > NEG_INF and xf <= RESCALE:
                Fb[j, s] = math.exp(xf) if xf > FLUSH else 0.0
                lFb[j, s] = xf
                if xf > top[j]:
                    top[j] = xf
                    topos[j] = s
            else:
                mv += add_factor(Fb, lFb, nu, top, topos, j, s, s + 1, hv, x > NEG_INF)
            if mv != 0.0:
                f = scale_of(mv)
                _scale_window(acc_s, j, 0, W, f)
                if b_vec:
                    _scale_window(acc_b, j, 0, W, f)
                else:
                    for i in range(M):
                        _scale_window(acc_b, i * M + j, 0, W, f)
                if scalar:
                    _scale_window(z, j, s + 1, hv, f)
                else:
                    for r in range(W):
                        for d in range(D):
                            yring[r, j * D + d] *= f
                if want_leave:
                    for jp in range(M):
                        _scale_window(H, j * M + jp, s + 1, hv, f)
            live_d[j] = min(D, T - s, blocked[j] - s)
            fb = Fb[j, s]
            if s < T - 1 and fb != 0.0:
                n = min(D, s + 1)
                if scalar:
                    zj = kap * bsum[j, s + 1] * fb
                    z[j, s] = zj
                    ring_add(zj, acc_s, j, key, n)
                    if b_vec:
                        ring_axpy(zj, Bf, 0, j * D, acc_b, j, key, n)
                    else:
                        for i in range(M):
                            ring_axpy(zj, Bf, i, j * D, acc_b, i * M + j, key, n)
                else:
                    scal(fb, ybuf, 0, j * D, ybuf, 0, j * D, D)
                    scal(1.0, ybuf, 0, j * D, yring, s & mask, j * D, D)
                    ring_axpy(1.0, ybuf, 0, j * D, acc_s, j, key, n)
                    if b_vec:
                        ring_axpy2(1.0, Bf, 0, j * D, ybuf, 0, j * D, acc_b, j, key, n)
                    else:
                        for i in range(M):
                            ring_axpy2(1.0, Bf, i, j * D, ybuf, 0, j * D, acc_b, i * M + j, key, n)
                if want_leave:
                    for jp in range(M):
                        H[j * M + jp, s] = fb * bmid[j * M + jp, s + 1]
            elif scalar:
                z[j, s] = 0.0
            elif s < T - 1:
                fill(yring, s & mask, j * D, D, 0.0)
            cb[j] = nu[j] + x
        # the starts s: window sums (the end T-1 added directly: its scores are per label)
        for r in range(nb):
            direct_b[r] = 0.0
        for j in range(M):
            dm = live_d[j]
            tot = acc_s[j, key] if dm > 0 else 0.0
            if dm > 0 and dm == T - s:
                hi_d = D if open_end else T - s
                fe = Fb[j, T - 1]
                for d in range(T - s, hi_d + 1):
                    v = eend[j * D + d - 1] * fe
                    tot += v
                    if b_vec:
                        direct_b[j] += Bf[0, j * D + d - 1] * v
                    else:
                        for i in range(M):
                            direct_b[i * M + j] += Bf[i, j * D + d - 1] * v
            S[j] = tot
        cmax, Z = combine(S, cb, w, M)
        if cmax == NEG_INF:
            incb = idle_scale(cb, top, M)
        else:
            if Z < ZMIN:
                ok = False
            incb = cmax + math.log(Z)
        for j in range(M):
            g[j] = w[j] / Z if cmax > NEG_INF else 0.0
            nu[j] += ufin(unary[o + s, j]) - incb
        lam, lam_c, om, fine = posterior_scale(lam, lam_c, incb - inc[o + s], zf)
        ok = ok and fine
        # the bridge values of s
        for jp in range(M):
            live = live_d[jp] > 0
            if b_vec:
                v = (acc_b[jp, key] + direct_b[jp]) * g[jp] if live else 0.0
                for i in range(M):
                    bmid[i * M + jp, s] = v
                acc_b[jp, key] = 0.0
            else:
                for i in range(M):
                    r = i * M + jp
                    bmid[r, s] = (acc_b[r, key] + direct_b[r]) * g[jp] if live else 0.0
                    acc_b[r, key] = 0.0
            acc_s[jp, key] = 0.0
        for i in range(M):
            sv = 0.0
            for jp in range(M):
                sv += bmid[i * M + jp, s]
            bsum[i, s] = sv
        # β̌_start[s] as a row, when a statistic needs it per label
        need_row = store or s == 0 or want_dense or (want_enter and not scalar)
        if need_row:
            for j in range(M):
                dm = live_d[j]
                for d in range(1, D + 1):
                    k = j * D + d - 1
                    v = 0.0
                    if dm > 0 and dm == T - s and d >= T - s and (open_end or d == T - s):
                        v = eend[k] * Fb[j, T - 1]
                    elif d <= dm and s + d - 1 < T - 1:
                        v = z[j, s + d - 1] if scalar else yring[(s + d - 1) & mask, k]
                    brow[0, k] = v * g[j]
        # posteriors: the starts at s and the boundary s-1 | s
        for j in range(M):
            if s == 0:
                pj = 0.0
                for d in range(D):
                    p = estart[j * D + d] * brow[0, j * D + d] * om
                    first_b[j * D + d] = p
                    pj += p
                gd[j, 0] += pj
                continue
            ps = 0.0
            pe = 0.0
            for i in range(M):
                ps += mid[i, j, o + s - 1] * bmid[i * M + j, s]
                pe += mid[j, i, o + s - 1] * bmid[j * M + i, s]
            gd[j, s] += om * kap * ps
            gd[j, s] -= om * kap * pe
            if want_enter:
                n = min(live_d[j], T - 1 - s)
                for i in range(M):
                    m = om * mid[i, j, o + s - 1] * g[j]
                    if m == 0.0:
                        continue
                    if scalar:
                        axpy(m, z, j, s, cb_b, i, j * D, n)
                        # labels that reach the last token: their β̌_start is per label
                        for d in range(n + 1, D + 1):
                            cb_b[i, j * D + d - 1] += om * mid[i, j, o + s - 1] * brow[0, j * D + d - 1] \
                                if need_row else 0.0
                    else:
                        axpy(om * mid[i, j, o + s - 1], brow, 0, j * D, cb_b, i, j * D, D)
        if want_enter and scalar and not need_row:
            # the labels that reach the last token from s (only the last D starts)
            if T - s <= D:
                for j in range(M):
                    dm = live_d[j]
                    if dm == T - s and s > 0:
                        hi_d = D if open_end else T - s
                        for d in range(T - s, hi_d + 1):
                            v = eend[j * D + d - 1] * Fb[j, T - 1] * g[j]
                            for i in range(M):
                                cb_b[i, j * D + d - 1] += om * mid[i, j, o + s - 1] * v
        if want_leave:
            for i in range(M):
                n = min(live_d[i], T - 1 - s)  # segments with a next state
                if n <= 0:
                    continue
                if s == 0 or not b_vec:
                    # per-label start weights (the start scores, or a full B)
                    if s > 0:
                        _astar_row(arow, s, estart, mid, msum, Bf, b_vec, has_a, kap, M, D, o)
                    for d in range(1, n + 1):
                        k = i * D + d - 1
                        a = estart[k] if s == 0 else arow[0, k]
                        cw = om * g[i] * a
                        for jp in range(M):
                            ca0_b[jp, k] += cw * H[i * M + jp, s + d - 1]
                else:
                    G = om * g[i] * kap * msum[i, s - 1]
                    if G == 0.0:
                        continue
                    for jp in range(M):
                        axpy(G, H, i * M + jp, s, ca_b, jp, i * D, n)
        if want_dense and s > 0:
            for k in range(K):
                a = om * alpha[o + s - 1, k]
                if a != 0.0:
                    axpy(a, brow, 0, 0, cd_b, k, 0, K)
        if store:
            _astar_row(arow, s, estart, mid, msum, Bf, b_vec, has_a, kap, M, D, o)
            for k in range(K):
                pstart[o + s, k] = arow[0, k] * brow[0, k] * om
                bstart_out[o + s, k] = brow[0, k] * om
            for i in range(M):
                for d in range(D):
                    k = i * D + d
                    if s == T - 1:
                        v = eend[k]
                    elif has_a:
                        v = 0.0
                        for jp in range(M):
                            v += At[jp, k] * bmid[i * M + jp, s + 1]
                        v *= kap
                    else:
                        v = kap * bsum[i, s + 1]
                    bend_out[o + s, k] = v * om_next
        om_next = om
    return posteriors_from_increments(gd, gamma, o, T, M) and ok
