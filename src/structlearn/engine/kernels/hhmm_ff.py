r"""Numba kernels of the factored frontier on the HHMM DBN (Murphy & Weiss 2001, "The factored frontier
algorithm for approximate inference in DBNs"; Murphy & Paskin 2001 §5): forward filtering in the sum
and max semirings, the backward (smoothing) pass with the family marginals EM needs, and the exact score
of a decoded path.

Arrays in, arrays out; no validation. Layouts are those of
:func:`structlearn.hhmm.dbn.dense_dbn`: stack values are flat row-major indices over the level
dimensions ``dims`` = (n_1, …, n_D); ``qcpd`` is the concatenation of the per-level transition tables
(n_1, …, n_{d-1}, n_d, 2, 2, n_d) (flat block of level d at ``q_off[d]``, entry
``(((ctx·n_d + i)·2 + f)·2 + f')·n_d + j``), the F families (n_1, …, n_d, 2, 2) are concatenated at
``f_off``; ``fscore`` (D + 1, nQ) holds Σ_d log P(F^d_t | Q_t, F^{d+1}_t) for the F pattern of every *cut
level* c (F^d = 1 exactly for d > c: levels below c restart, level c moves horizontally, levels above c
are copied; c = 0: the root ends).

The belief state of slice t is a product of per-level factors ``belief[t, d, :]`` (the factored
frontier); evidence is absorbed exactly on the joint of slice t (the emission depends on every level),
the slice's posterior over (Q_t, C_t) is projected back onto per-level factors.
"""
import math

import numpy as np
from numba import njit

from ..semirings import MAX
from .hhmm_jtree import _cut_qscore, _digits

__all__ = ["ff_forward", "ff_smooth", "path_log_prob"]


@njit(cache=True)
def ff_forward(log_em, dims, log_prior_levels, log_prior, exact_first, fscore, qcpd, q_off, clamp_all,
               semiring):
    """Factored-frontier forward pass (filtering; max-product FF in the MAX semiring).

    Parameters
    ----------
    log_em : (T, nQ) float64
        log p(o_t | Q_t = q) (-inf: not a stack configuration).
    dims : (D,) int64
    log_prior_levels : (D, nmax) float64
        log marginals (LOG) or max-marginals (MAX) of Q^d_1.
    log_prior : (nQ,) float64
        log P(Q_1) (the joint); used for slice 1 when ``exact_first``.
    exact_first : bool
        Slice 1 from the exact joint prior instead of the product of its per-level factors.
    fscore : (D + 1, nQ) float64
    qcpd, q_off : flat transition tables and their level offsets (D + 1,)
    clamp_all : bool
        The F_T = 1 clamp at the last step (``finish="all"``).
    semiring : int
        LOG (sum-product) or MAX (max-product).

    Recurrence (⊕ = Σ or max; b_d the per-level factors of the predicted belief P(Q_t | o_1:t-1))::

        J_t(q, c)   = Π_d b_d(q_d) · p(o_t | q) · P(C_t = c | q)          (exact on the product)
        p_d(i, c)   = ⊕_{q: q_d = i} J_t(q, c)
        b'_d(j)    ∝ ⊕_{q'_{<d}, i, c} Π_{l<d} b'_l(q'_l) · p_d(i, c) · P(Q^d_{t+1} = j | i, c, q'_{<d})

    (levels top-down, each new node from the product of its parents' factors).

    Returns
    -------
    log_c : (T,) float64
        LOG: approximate log P(o_1:t) = Σ_{s<=t} log_c[s] (at T with the clamp, the complete string);
        MAX: the same with maxima.
    post : (T, nQ) float64
        J_t summed over c, normalised to sum (LOG) or max (MAX) 1.
    belief : (T, D, nmax) float64
        The per-level factors b_d of slice t (each summing, LOG, or peaking, MAX, at 1).

    Cost: time O(T·(nQ·D² + Σ_d n_1·…·n_d·n_d·D)), memory O(T·(nQ + D·nmax)).
    """
    T, nQ = log_em.shape
    D = dims.shape[0]
    nmax = log_prior_levels.shape[1]
    b = np.exp(log_prior_levels)
    log_c = np.zeros(T)
    post = np.zeros((T, nQ))
    belief = np.zeros((T, D, nmax))
    digits = np.empty(D, dtype=np.int64)
    p = np.zeros((D, nmax, D + 1))
    J = np.empty(nQ)
    for t in range(T):
        belief[t] = b
        for s in range(nQ):
            v = log_em[t, s]
            if t == 0 and exact_first:
                v += log_prior[s]
            else:
                _digits(s, dims, digits)
                for d in range(D):
                    bd = b[d, digits[d]]
                    v = v + (math.log(bd) if bd > 0 else -np.inf)
            if t == T - 1 and clamp_all:
                v += fscore[0, s]
            J[s] = v
        lz = -np.inf
        for s in range(nQ):
            if J[s] > lz:
                lz = J[s]
        if lz > -np.inf and semiring != MAX:
            acc = 0.0
            for s in range(nQ):
                acc += math.exp(J[s] - lz)
            lz += math.log(acc)
        if lz == -np.inf:
            log_c[t:] = -np.inf
            break
        p[:, :, :] = 0.0
        for s in range(nQ):
            w = math.exp(J[s] - lz)
            post[t, s] = w
            if w == 0.0:
                continue
            _digits(s, dims, digits)
            for c in range(D + 1):
                if fscore[c, s] > -np.inf:
                    wc = w * math.exp(fscore[c, s])
                    for d in range(D):
                        if semiring == MAX:
                            p[d, digits[d], c] = max(p[d, digits[d], c], wc)
                        else:
                            p[d, digits[d], c] += wc
        log_c[t] += lz
        if t == T - 1:
            break
        nb = np.zeros((D, nmax))
        for d in range(D):
            n = dims[d]
            nctx = 1
            for l in range(d):
                nctx *= dims[l]
            for ctx in range(nctx):
                # weight of the context under the product of the new upper-level factors
                w = 1.0
                r = ctx
                for l in range(d - 1, -1, -1):
                    w *= nb[l, r % dims[l]]
                    r //= dims[l]
                if w == 0.0:
                    continue
                for i in range(n):
                    for c in range(1, D + 1):
                        if p[d, i, c] == 0.0:
                            continue
                        fd = 1 if d + 1 > c else 0
                        fb = 1 if d + 2 > c else 0
                        wc = w * p[d, i, c]
                        base = q_off[d] + (((ctx * n + i) * 2 + fd) * 2 + fb) * n
                        for j in range(n):
                            lv = qcpd[base + j]
                            if lv > -np.inf:
                                if semiring == MAX:
                                    nb[d, j] = max(nb[d, j], wc * math.exp(lv))
                                else:
                                    nb[d, j] += wc * math.exp(lv)
            tot = 0.0
            for j in range(n):
                if semiring == MAX:
                    tot = max(tot, nb[d, j])
                else:
                    tot += nb[d, j]
            if tot <= 0.0:
                log_c[t + 1:] = -np.inf
                return log_c, post, belief
            if d == 0:
                log_c[t + 1] += math.log(tot)  # the root goes on after t (part of P(o_1:t+1))
            for j in range(n):
                nb[d, j] /= tot
        b = nb
    return log_c, post, belief


@njit(cache=True)
def ff_smooth(log_em, dims, belief, fscore, qcpd, q_off, f_off, clamp_all, store_f):
    r"""Factored-frontier backward pass: smoothed slice posteriors and the family marginals of EM.

    The backward message of slice t + 1 is kept, like the forward belief, as a product of per-level
    factors λ_d(Q^d_{t+1}). Slice t is then solved exactly given the two factored messages (the HHMM
    transition has only D + 1 shapes, one per cut level c: copy above c, move at c, restart below)::

        V_d(ctx)     = Σ_j π_d(j | ctx) λ_d(j) V_{d+1}(ctx, j),      V_{D+1} = 1     (restarts below)
        H_c(q_{≤c})  = Σ_j Ã_c(q_{<c}, q_c, j) λ_c(j) V_{c+1}(q_{<c}, j)
        h(q, c)      = Π_{d<c} λ_d(q_d) · H_c(q_{≤c})     ≈ P(o_{t+1:T} | Q_t = q, C_t = c)
        post_t(q, c) ∝ Π_d b_d(q_d) · p(o_t | q) · P(C_t = c | q) · h(q, c)

    γ_t = Σ_c post_t; the transition families (the horizontal move at level c, the restarts of the
    levels below, the copies above) and the F families are marginals of the same slice posterior. The
    new backward factors are the loopy-BP messages into every Q^d_t (equivalently the projection of
    post_t onto per-level marginals divided by the forward factors)::

        λ_d(i) ∝ Σ_{q: q_d = i} p(o_t | q) Σ_c P(C_t = c | q) h(q, c) · Π_{l≠d} b_l(q_l)

    Exact for D = 1 (then the factors are the joint). Source: Murphy & Weiss 2001 (the FF backward pass,
    one forward–backward sweep of loopy BP with a left-right schedule, as Murphy & Paskin 2001 §5 says).

    Parameters
    ----------
    log_em : (T, nQ) float64
    dims : (D,) int64
    belief : (T, D, nmax) float64
        The forward factors of :func:`ff_forward` (LOG).
    fscore, qcpd, q_off : as :func:`ff_forward`
    f_off : (D + 1,) int64
        Offsets of the per-level F families (n_1, …, n_d, 2, 2).
    clamp_all : bool
        ``finish="all"``: F_T = 1 (and the last slice's F families are counted).
    store_f : bool
        Keep the per-slice F family marginals.

    Returns
    -------
    gamma : (T, nQ) float64
        P̃(Q_t = q | o_1:T).
    acc_q : (q_off[-1],) float64
        Transition family marginals summed over t < T - 1, in the qcpd layout; the restart entries
        (f = f' = 1) are summed over Q^d_t and kept at Q^d_t = 0.
    acc_f : (f_off[-1],) float64
        F family marginals P̃(Q^{1:d}_t, F^d_t, F^{d+1}_t) summed over t (t < T - 1 unless ``clamp_all``).
    fam_f : (T or 0, f_off[-1]) float64
        The same per slice (when ``store_f``).

    Cost: time O(T·(nQ·D² + Σ_d n_1·…·n_d·n_d)), memory O(T·nQ) (γ) + O(nQ·D).
    """
    T, nQ = log_em.shape
    D = dims.shape[0]
    nmax = belief.shape[2]
    g = np.ones(D + 1, dtype=np.int64)  # g[l] = n_1·…·n_l: the contexts of level l + 1
    for l in range(D):
        g[l + 1] = g[l] * dims[l]
    st = np.empty(D, dtype=np.int64)  # q // st[l] = the prefix q_{1..l+1}
    for l in range(D):
        st[l] = nQ // g[l + 1]
    vo = np.zeros(D + 2, dtype=np.int64)  # V / R of level l over g[l] entries at vo[l]
    for l in range(D + 1):
        vo[l + 1] = vo[l] + g[l]
    ho = np.zeros(D + 1, dtype=np.int64)  # H / M / W of level l over g[l + 1] entries at ho[l]
    for l in range(D):
        ho[l + 1] = ho[l] + g[l + 1]
    gamma = np.zeros((T, nQ))
    acc_q = np.zeros(q_off[-1])
    acc_f = np.zeros(f_off[-1])
    fam_f = np.zeros((T if store_f else 0, f_off[-1]))
    lam = np.ones((D, nmax))
    V = np.empty(vo[-1])
    R = np.empty(vo[-1])
    H = np.empty(ho[-1])
    M = np.empty(ho[-1])
    W = np.empty(ho[-1])
    A = np.empty((nQ, D + 1))
    h = np.empty((nQ, D + 1))
    e = np.empty(nQ)
    digits = np.empty(D, dtype=np.int64)
    pre = np.empty(D + 1)
    suf = np.empty(D + 1)
    for t in range(T - 1, -1, -1):
        last = t == T - 1
        m = -np.inf
        for s in range(nQ):
            if log_em[t, s] > m:
                m = log_em[t, s]
        if m == -np.inf:
            lam[:, :] = 0.0
            continue
        for s in range(nQ):
            e[s] = math.exp(log_em[t, s] - m)
        if last:
            for s in range(nQ):
                for c in range(D + 1):
                    h[s, c] = 1.0 if (c == 0 or not clamp_all) else 0.0
        else:
            for x in range(g[D]):
                V[vo[D] + x] = 1.0
            # restarts below: V_l(ctx) = Σ_j π_l(j | ctx) λ_l(j) V_{l+1}(ctx, j)
            for l in range(D - 1, 0, -1):
                n = dims[l]
                for ctx in range(g[l]):
                    acc = 0.0
                    base = q_off[l] + ((ctx * n * 2 + 1) * 2 + 1) * n  # i = 0, f = f' = 1
                    for j in range(n):
                        lv = qcpd[base + j]
                        if lv > -np.inf:
                            acc += math.exp(lv) * lam[l, j] * V[vo[l + 1] + ctx * n + j]
                    V[vo[l] + ctx] = acc
            # the move at level l: H_l(ctx, i) = Σ_j Ã_l(ctx, i, j) λ_l(j) V_{l+1}(ctx, j)
            for l in range(D):
                n = dims[l]
                for ctx in range(g[l]):
                    for i in range(n):
                        acc = 0.0
                        base = q_off[l] + (((ctx * n + i) * 2 + 0) * 2 + 1) * n
                        for j in range(n):
                            lv = qcpd[base + j]
                            if lv > -np.inf:
                                acc += math.exp(lv) * lam[l, j] * V[vo[l + 1] + ctx * n + j]
                        H[ho[l] + ctx * n + i] = acc
            # h(q, c) = Π_{l < c-1} λ_l(q_l) · H_{c-1}(q_{≤c-1}); the root never re-enters (c = 0)
            for s in range(nQ):
                _digits(s, dims, digits)
                h[s, 0] = 0.0
                pl = 1.0
                for c in range(1, D + 1):
                    hz = c - 1
                    h[s, c] = pl * H[ho[hz] + s // st[hz]]
                    pl *= lam[hz, digits[hz]]
        # slice posterior over (Q_t, C_t)
        Z = 0.0
        for s in range(nQ):
            if e[s] == 0.0:
                for c in range(D + 1):
                    A[s, c] = 0.0
                continue
            _digits(s, dims, digits)
            a = e[s]
            for d in range(D):
                a *= belief[t, d, digits[d]]
            for c in range(D + 1):
                A[s, c] = a * math.exp(fscore[c, s]) if fscore[c, s] > -np.inf else 0.0
                Z += A[s, c] * h[s, c]
        if not Z > 0.0:
            lam[:, :] = 0.0
            continue
        count_f = clamp_all or not last
        for s in range(nQ):
            gs = 0.0
            for c in range(D + 1):
                pc = A[s, c] * h[s, c] / Z
                if pc == 0.0:
                    continue
                gs += pc
                for d in range(D):
                    fd = 1 if d + 1 > c else 0
                    fb = 1 if d + 2 > c else 0
                    idx = f_off[d] + ((s // st[d]) * 2 + fd) * 2 + fb
                    if count_f:
                        acc_f[idx] += pc
                    if store_f:
                        fam_f[t, idx] += pc
                # copies above the moving level: Q^d_{t+1} = Q^d_t for d < c - 1
                if not last:
                    for d in range(c - 1):
                        pr = s // st[d]
                        i = pr % dims[d]
                        acc_q[q_off[d] + (pr * 2 * 2) * dims[d] + i] += pc
            gamma[t, s] = gs
        if not last:
            # forward mass of every moving prefix: M_l(ctx, i) = Σ_{q ⊒ (ctx, i)} A(q, l + 1)
            for x in range(ho[-1]):
                M[x] = 0.0
            for s in range(nQ):
                for c in range(1, D + 1):
                    M[ho[c - 1] + s // st[c - 1]] += A[s, c]
            # horizontal moves: count Ã-family entries, W_l(ctx, j) the mass arriving at (ctx, j)
            for l in range(D):
                n = dims[l]
                for ctx in range(g[l]):
                    pl = 1.0
                    r = ctx
                    for k in range(l - 1, -1, -1):
                        pl *= lam[k, r % dims[k]]
                        r //= dims[k]
                    for j in range(n):
                        W[ho[l] + ctx * n + j] = 0.0
                    if pl == 0.0:
                        continue
                    for i in range(n):
                        mm = M[ho[l] + ctx * n + i] * pl
                        if mm == 0.0:
                            continue
                        base = q_off[l] + (((ctx * n + i) * 2 + 0) * 2 + 1) * n
                        for j in range(n):
                            lv = qcpd[base + j]
                            if lv > -np.inf:
                                w = mm * math.exp(lv) * lam[l, j]
                                W[ho[l] + ctx * n + j] += w
                                acc_q[base + j] += w * V[vo[l + 1] + ctx * n + j] / Z
            # restarts: R_l(ctx) the mass arriving at context ctx of level l from above, top-down
            R[0] = 0.0
            for l in range(D):
                n = dims[l]
                for ctx in range(g[l]):
                    r = R[vo[l] + ctx]
                    base = q_off[l] + ((ctx * n * 2 + 1) * 2 + 1) * n
                    for j in range(n):
                        nxt = W[ho[l] + ctx * n + j]
                        if r > 0.0:
                            lv = qcpd[base + j]
                            if lv > -np.inf:
                                w = r * math.exp(lv) * lam[l, j]
                                acc_q[base + j] += w * V[vo[l + 1] + ctx * n + j] / Z
                                nxt += w
                        if l + 1 < D:
                            R[vo[l + 1] + ctx * n + j] = nxt
        if t == 0:
            break
        # backward factors of slice t (messages into every Q^d_t)
        nl = np.zeros((D, nmax))
        for s in range(nQ):
            w = 0.0
            for c in range(D + 1):
                if fscore[c, s] > -np.inf:
                    w += math.exp(fscore[c, s]) * h[s, c]
            w *= e[s]
            if w == 0.0:
                continue
            _digits(s, dims, digits)
            pre[0] = 1.0
            for d in range(D):
                pre[d + 1] = pre[d] * belief[t, d, digits[d]]
            suf[D] = 1.0
            for d in range(D - 1, -1, -1):
                suf[d] = suf[d + 1] * belief[t, d, digits[d]]
            for d in range(D):
                nl[d, digits[d]] += w * pre[d] * suf[d + 1]
        for d in range(D):
            mx = 0.0
            for j in range(nmax):
                if nl[d, j] > mx:
                    mx = nl[d, j]
            for j in range(nmax):
                lam[d, j] = nl[d, j] / mx if mx > 0.0 else 0.0
    return gamma, acc_q, acc_f, fam_f


@njit(cache=True)
def path_log_prob(q, cut, log_em, log_prior, fscore, final_score, dims, qcpd, q_off):
    """Exact log P(path, o_1:T) of a (Q_t, cut level C_t) sequence: the prior, emissions, F CPDs and
    transition CPDs along it (``final_score`` (D + 1, nQ): the F term of the last slice, as
    :func:`structlearn.engine.kernels.hhmm_jtree.viterbi_traceback`). Time O(T·D)."""
    T = q.shape[0]
    D = dims.shape[0]
    if T == 0:
        return 0.0
    qd = np.empty(D, dtype=np.int64)
    qn = np.empty(D, dtype=np.int64)
    s = log_prior[q[0]]
    for t in range(T):
        s += log_em[t, q[t]]
        if t == T - 1:
            s += final_score[cut[t], q[t]]
        else:
            s += fscore[cut[t], q[t]]
            _digits(q[t], dims, qd)
            _digits(q[t + 1], dims, qn)
            s += _cut_qscore(qd, qn, cut[t], dims, qcpd, q_off)
        if s == -np.inf:
            return s
    return s
