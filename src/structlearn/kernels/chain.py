"""Numba kernels for linear chains (first-order, packed ragged batches).

Arrays in, arrays out; no validation. Conventions:

- ``unary``: (N, K) log-potentials, rows of all sequences concatenated; ``offsets``: (B + 1,).
- ``trans``: (S, K, K) log-potentials "from, to"; S = 1 for a stationary transition, S = N for a
  time-varying one where row t scores the step from token t to t + 1 (rows at sequence ends unused).
- ``start``, ``end``: (K,) log-potentials of the first / last label.

The recurrences (Lafferty et al. 2001; seed 000 eqs. "folc-alpha", "folc-beta")::

    α[0, j]   = start[j] + unary[0, j]
    α[t, j]   = unary[t, j] + ⊕_i (α[t-1, i] + trans[t-1, i, j])
    β[T-1, i] = end[i]
    β[t, i]   = ⊕_j (trans[t, i, j] + unary[t+1, j] + β[t+1, j])
    log Z     = ⊕_j (α[T-1, j] + end[j])

In the LOG semiring the matrix–vector step runs in linear space on exp-shifted values (one exp per label
and step instead of K), and any column whose shifted sum falls below ``_TINY`` (underflow risk, or a
forbidden label) is recomputed exactly in log space, so results match the plain log-space recursion to
rounding error for potentials of any scale and are exactly -inf where nothing is allowed.
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import LOG, MAX
from ._common import draw_log as _draw
from ._common import final_sum as _final
from ._common import lse_col as _logsumexp_col
from ._common import lse_row as _logsumexp_row
from ._common import shifted_exp as _shifted_exp

_TINY = 1e-200  # below this a shifted linear-space sum may have lost terms: recompute in log space
_HUGE = 1e200


@njit(cache=True, inline="always")
def _tr(S, t):
    return 0 if S == 1 else t


@njit(cache=True)
def _forward_seq(unary, trans, start, o, T, semiring, ahat, inc, eT, cmax):
    """Normalised forward pass of one sequence.

    Stores ``ahat[r] = α[r] - M_r`` (row max 0) and ``inc[r] = M_r - M_{r-1}``, so log-scores never
    grow with t (marginals stay exact on chains of any length) and log Z = Σ inc + final term.
    eT/cmax: column-shifted exp of a stationary trans (LOG).
    """
    K = unary.shape[1]
    S = trans.shape[0]
    m = -np.inf
    for j in range(K):
        v = start[j] + unary[o, j]
        if v > m:
            m = v
    inc[o] = m
    for j in range(K):
        ahat[o, j] = start[j] + unary[o, j] - m if m != -np.inf else -np.inf
    acc = np.empty(K)
    for t in range(1, T):
        r = o + t
        ts = _tr(S, r - 1)
        prev = ahat[r - 1]
        if inc[r - 1] == -np.inf:  # infeasible prefix stays infeasible
            inc[r] = -np.inf
            for j in range(K):
                ahat[r, j] = -np.inf
            continue
        if semiring == MAX:
            for j in range(K):
                best = -np.inf
                for i in range(K):
                    v = prev[i] + trans[ts, i, j]
                    if v > best:
                        best = v
                ahat[r, j] = unary[r, j] + best
        else:
            # linear-space step (prev has max 0) with exact log-space fallback per column
            if S != 1:
                eT, cmax = _shifted_exp(trans[ts], 0)
            for j in range(K):
                acc[j] = 0.0
            for i in range(K):  # acc = p @ eT, row-major (contiguous, vectorised)
                pi = math.exp(prev[i])
                if pi != 0.0:
                    for j in range(K):
                        acc[j] += pi * eT[i, j]
            for j in range(K):
                if cmax[j] == -np.inf or unary[r, j] == -np.inf:
                    ahat[r, j] = -np.inf
                    continue
                s = acc[j]
                if s > _TINY:
                    ahat[r, j] = unary[r, j] + cmax[j] + math.log(s)
                else:
                    ahat[r, j] = unary[r, j] + _logsumexp_col(prev, trans[ts], j)
        m = -np.inf
        for j in range(K):
            if ahat[r, j] > m:
                m = ahat[r, j]
        inc[r] = m
        if m != -np.inf:
            for j in range(K):
                ahat[r, j] -= m


@njit(cache=True)
def _backward_seq(unary, trans, end, o, T, bhat, inc, eT, rmax):
    """Normalised backward pass of one sequence (LOG semiring).

    Stores ``bhat[r] = β[r] - S_r`` (row max 0 below the last row) and ``inc[r] = S_r - S_{r+1}``.
    eT/rmax: row-shifted exp of a stationary trans.
    """
    K = unary.shape[1]
    S = trans.shape[0]
    last = o + T - 1
    for i in range(K):
        bhat[last, i] = end[i]
    inc[last] = 0.0
    v = np.empty(K)
    acc = np.empty(K)
    eTt = np.ascontiguousarray(eT.T)
    for t in range(T - 2, -1, -1):
        r = o + t
        ts = _tr(S, r)
        if S != 1:
            eT, rmax = _shifted_exp(trans[ts], 1)
            eTt = np.ascontiguousarray(eT.T)
        m = -np.inf
        for j in range(K):
            v[j] = unary[r + 1, j] + bhat[r + 1, j]
            if v[j] > m:
                m = v[j]
        if m == -np.inf:
            inc[r] = -np.inf
            for i in range(K):
                bhat[r, i] = -np.inf
            continue
        for i in range(K):
            acc[i] = 0.0
        for j in range(K):  # acc = eT @ q via the transpose (contiguous, vectorised)
            qj = math.exp(v[j] - m)
            if qj != 0.0:
                for i in range(K):
                    acc[i] += qj * eTt[j, i]
        mm = -np.inf
        for i in range(K):
            if rmax[i] == -np.inf:
                bhat[r, i] = -np.inf
                continue
            s = acc[i]
            if s > _TINY:
                bhat[r, i] = m + rmax[i] + math.log(s)
            else:
                bhat[r, i] = _logsumexp_row(trans[ts], v, i)
            if bhat[r, i] > mm:
                mm = bhat[r, i]
        inc[r] = mm
        if mm != -np.inf:
            for i in range(K):
                bhat[r, i] -= mm


@njit(cache=True, parallel=True)
def chain_forward(unary, trans, start, end, offsets, semiring):
    """Normalised forward scores in the given semiring.

    Returns ``ahat`` (N, K), ``inc`` (N,) and log Z (or max score) (B,); the forward log-scores are
    ``α[r] = ahat[r] + Σ_{r' ≤ r in the same sequence} inc[r']``.
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    alpha = np.empty((N, K))
    inc = np.empty(N)
    out = np.zeros(B)
    eT, cmax = _shifted_exp(trans[0], 0)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        _forward_seq(unary, trans, start, o, T, semiring, alpha, inc, eT, cmax)
        out[b] = _total(inc, o, T) + _final(alpha[o + T - 1], end, semiring)
    return alpha, inc, out


@njit(cache=True, inline="always")
def _total(inc, o, T):
    s = 0.0
    for r in range(o, o + T):
        s += inc[r]
    return s


@njit(cache=True, parallel=True)
def chain_backward(unary, trans, end, offsets):
    """Normalised backward scores (LOG): ``bhat`` (N, K) and ``inc`` (N,), with
    ``β[r] = bhat[r] + Σ_{r' ≥ r in the same sequence} inc[r']``."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    beta = np.empty((N, K))
    inc = np.empty(N)
    eT, rmax = _shifted_exp(trans[0], 1)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        _backward_seq(unary, trans, end, o, T, beta, inc, eT, rmax)
    return beta, inc


@njit(cache=True)
def _edge_marginals_step(ahat_r, trans_s, eT, rmax, unary_n, bhat_n, log_norm, out):
    """Add P(y_t = i, y_t+1 = j) into out (K, K) for one step.

    P(i, j) = exp(ahat_r[i] + trans_s[i, j] + unary_n[j] + bhat_n[j] - log_norm), where log_norm is the
    local normaliser (see :func:`chain_marginals`). Fast linear-space product with exact fallback.
    """
    K = ahat_r.shape[0]
    q = np.empty(K)
    v = np.empty(K)
    qm = -np.inf
    for j in range(K):
        v[j] = unary_n[j] + bhat_n[j]
        if v[j] > qm:
            qm = v[j]
    if qm == -np.inf:
        return
    for j in range(K):
        q[j] = math.exp(v[j] - qm)
    for i in range(K):
        if ahat_r[i] == -np.inf or rmax[i] == -np.inf:
            continue
        e = ahat_r[i] + rmax[i] + qm - log_norm
        if e < 460.0 and e > -460.0:
            a = math.exp(e)
            for j in range(K):
                if q[j] > 1e-140 and eT[i, j] > 1e-140:
                    out[i, j] += a * eT[i, j] * q[j]
                else:
                    w = ahat_r[i] + trans_s[i, j] + v[j] - log_norm
                    if w != -np.inf:
                        out[i, j] += math.exp(w)
        else:
            for j in range(K):
                w = ahat_r[i] + trans_s[i, j] + v[j] - log_norm
                if w != -np.inf:
                    out[i, j] += math.exp(w)


_LIN_MIN = 1e-100  # linear-space factors are 0 or >= this, so products of three stay normal


@njit(cache=True)
def _exp_shifted_vec(x):
    """(exp(x - max), max, ok): ok is False if a finite entry falls below _LIN_MIN after the shift."""
    K = x.shape[0]
    m = -np.inf
    for k in range(K):
        if x[k] > m:
            m = x[k]
    out = np.zeros(K)
    if m == -np.inf:
        return out, m, False
    ok = True
    for k in range(K):
        if x[k] != -np.inf:
            out[k] = math.exp(x[k] - m)
            if out[k] < _LIN_MIN:
                ok = False
    return out, m, ok


@njit(cache=True, inline="always")
def _exp_shifted_into(x, out):
    """out = exp(x - max) without allocating; returns (max, ok) as :func:`_exp_shifted_vec`."""
    K = x.shape[0]
    m = -np.inf
    for k in range(K):
        if x[k] > m:
            m = x[k]
    if m == -np.inf:
        return m, False
    ok = True
    for k in range(K):
        if x[k] != -np.inf:
            v = math.exp(x[k] - m)
            out[k] = v
            if v < _LIN_MIN:
                ok = False
        else:
            out[k] = 0.0
    return m, ok


@njit(cache=True, fastmath={"reassoc", "contract", "arcp", "nsz"})
def _linear_marginals_seq(unary, eT, eTt, gmax, es, smax, ee, emax, o, T, edge_mode, umarg, emarg,
                          ee_dst):
    """Scaled linear-space forward–backward of one sequence (stationary transitions).

    The classical scaled recursion (Rabiner 1989; CRFsuite's crf1d_context): α and β are kept in linear
    space, renormalised at every token, with log Z = Σ log(scales). It needs one exp per label and
    token instead of several exps and logs. Every factor is either exactly 0 (a -inf potential) or
    >= _LIN_MIN, so no product underflows; if that cannot be guaranteed (extreme potentials), it returns
    (False, 0) and writes nothing, and the caller runs the log-space recursion instead.
    """
    K = unary.shape[1]
    fail = (False, 0.0)
    fa = np.empty((T, K))
    fb = np.empty((T, K))
    eu = np.empty((T, K))
    nb = np.empty(T)
    lz = 0.0
    acc = np.empty(K)
    for t in range(T):
        r = o + t
        um, ok = _exp_shifted_into(unary[r], eu[t])
        if not ok:
            return fail
        if t == 0:
            for k in range(K):
                acc[k] = es[k] * eu[t, k]
            lz += um + smax
        else:
            for k in range(K):
                acc[k] = 0.0
            for i in range(K):
                ai = fa[t - 1, i]
                if ai != 0.0:
                    for k in range(K):
                        acc[k] += ai * eT[i, k]
            for k in range(K):
                acc[k] *= eu[t, k]
            lz += um + gmax
        tot = 0.0
        for k in range(K):
            tot += acc[k]
        if not tot > 0.0:
            return fail
        inv = 1.0 / tot
        for k in range(K):
            v = acc[k] * inv
            if v != 0.0 and v < _LIN_MIN:
                return fail
            fa[t, k] = v
        lz += math.log(tot)
    fin = 0.0
    for k in range(K):
        fin += fa[T - 1, k] * ee[k]
    if not fin > 0.0:
        return fail
    lz += math.log(fin) + emax
    # backward, normalised: fb[t] ∝ β[t]; nb[t] is the normaliser applied at t
    tot = 0.0
    for k in range(K):
        tot += ee[k]
    nb[T - 1] = tot
    for k in range(K):
        fb[T - 1, k] = ee[k] / tot
    q = np.empty(K)
    for t in range(T - 2, -1, -1):
        for k in range(K):
            acc[k] = 0.0
        for j in range(K):
            qj = eu[t + 1, j] * fb[t + 1, j]
            if qj != 0.0:
                for i in range(K):
                    acc[i] += qj * eTt[j, i]
        tot = 0.0
        for k in range(K):
            tot += acc[k]
        if not tot > 0.0:
            return fail
        inv = 1.0 / tot
        for k in range(K):
            v = acc[k] * inv
            if v != 0.0 and v < _LIN_MIN:
                return fail
            fb[t, k] = v
        nb[t] = tot
    # marginals; edge totals as Σ_t a_t ⊗ q_t, multiplied by eT once per sequence
    pair = np.zeros((K, K)) if edge_mode >= 2 else np.zeros((0, 0))
    for t in range(T):
        r = o + t
        z = 0.0
        for k in range(K):
            z += fa[t, k] * fb[t, k]
        iz = 1.0 / z
        for k in range(K):
            umarg[r, k] = fa[t, k] * fb[t, k] * iz
        if edge_mode == 0 or t == T - 1:
            continue
        # P(i, j) = fa[t, i] eT[i, j] eu[t+1, j] fb[t+1, j] / (nb[t] · z)
        inv = iz / nb[t]
        for j in range(K):
            q[j] = eu[t + 1, j] * fb[t + 1, j]
        if edge_mode == 1:
            for i in range(K):
                ai = fa[t, i] * inv
                for j in range(K):
                    emarg[r, i, j] = ai * eT[i, j] * q[j]
        else:
            for i in range(K):
                ai = fa[t, i] * inv
                if ai != 0.0:
                    for j in range(K):
                        pair[i, j] += ai * q[j]
    if edge_mode >= 2:
        for i in range(K):
            for j in range(K):
                ee_dst[i, j] += eT[i, j] * pair[i, j]
    return True, lz


@njit(cache=True)
def _linear_setup(trans_s, start, end):
    """Globally shifted exp of a stationary transition matrix, its transpose, and exp start/end."""
    K = trans_s.shape[0]
    gmax = -np.inf
    for i in range(K):
        for j in range(K):
            if trans_s[i, j] > gmax:
                gmax = trans_s[i, j]
    eT = np.zeros((K, K))
    ok = gmax != -np.inf
    if ok:
        for i in range(K):
            for j in range(K):
                if trans_s[i, j] != -np.inf:
                    eT[i, j] = math.exp(trans_s[i, j] - gmax)
                    if eT[i, j] < _LIN_MIN:
                        ok = False
    es, smax, ok1 = _exp_shifted_vec(start)
    ee, emax, ok2 = _exp_shifted_vec(end)
    return eT, np.ascontiguousarray(eT.T), gmax, es, smax, ee, emax, ok and ok1 and ok2


@njit(cache=True)
def _tiny_entries(eT):
    """(i, j) of entries 0 < eT[i, j] < 1e-250 (a product with them could lose relative precision)."""
    K = eT.shape[0]
    n = 0
    for i in range(K):
        for j in range(K):
            if eT[i, j] > 0.0 and eT[i, j] < 1e-250:
                n += 1
    ti = np.empty(n, dtype=np.int64)
    tj = np.empty(n, dtype=np.int64)
    n = 0
    for i in range(K):
        for j in range(K):
            if eT[i, j] > 0.0 and eT[i, j] < 1e-250:
                ti[n] = i
                tj[n] = j
                n += 1
    return ti, tj


@njit(cache=True)
def _marginals_seq(unary, trans, start, end, o, T, edge_mode, alpha, beta, inca, incb, umarg, emarg,
                   ee_dst, lin, eTc, cmax, eTr, rmax, tiny_i, tiny_j, eT_fast):
    """Marginals of one sequence; returns log Z. Edge marginals go to emarg[r] rows (mode 1) or are
    added into the (K, K) array ee_dst (modes 2 and 3)."""
    K = unary.shape[1]
    S = trans.shape[0]
    lin_eT, lin_eTt, gmax, es, smax, ee, emax, lin_ok = lin
    if lin_ok:
        ok, lz = _linear_marginals_seq(unary, lin_eT, lin_eTt, gmax, es, smax, ee, emax, o, T,
                                       edge_mode, umarg, emarg, ee_dst)
        if ok:
            return lz
    _forward_seq(unary, trans, start, o, T, LOG, alpha, inca, eTc, cmax)
    lz = _total(inca, o, T) + _final(alpha[o + T - 1], end, LOG)
    if lz == -np.inf:
        return lz
    _backward_seq(unary, trans, end, o, T, beta, incb, eTr, rmax)
    w = np.empty(K)
    a = np.empty(K)
    q = np.empty(K)
    v = np.empty(K)
    acc = np.zeros((K, K))
    for r in range(o, o + T):
        m = -np.inf
        for k in range(K):
            w[k] = alpha[r, k] + beta[r, k]
            if w[k] > m:
                m = w[k]
        tot = 0.0
        for k in range(K):
            if w[k] != -np.inf:
                w[k] = math.exp(w[k] - m)
                tot += w[k]
            else:
                w[k] = 0.0
        for k in range(K):
            umarg[r, k] = w[k] / tot
        if edge_mode == 0 or r == o + T - 1:
            continue
        # log normaliser of P(y_r, y_r+1): Σ_ij exp(ahat + trans + unary + bhat) = exp(log_norm)
        log_norm = m + math.log(tot) + incb[r]
        ts = _tr(S, r)
        fast = S == 1
        if fast:
            qm = -np.inf
            for j in range(K):
                v[j] = unary[r + 1, j] + beta[r + 1, j]
                if v[j] > qm:
                    qm = v[j]
            for j in range(K):
                q[j] = math.exp(v[j] - qm) if v[j] != -np.inf else 0.0
            for i in range(K):
                if alpha[r, i] == -np.inf or rmax[i] == -np.inf:
                    a[i] = 0.0
                    continue
                e = alpha[r, i] + rmax[i] + qm - log_norm
                if e > 600.0:
                    fast = False
                    break
                a[i] = math.exp(e)
        dst = emarg[r] if edge_mode == 1 else ee_dst
        if fast:
            if edge_mode != 1:
                for i in range(K):
                    ai = a[i]
                    if ai != 0.0:
                        for j in range(K):
                            acc[i, j] += ai * q[j]
            else:
                for i in range(K):
                    ai = a[i]
                    for j in range(K):
                        dst[i, j] = ai * eT_fast[i, j] * q[j]
            for p in range(tiny_i.shape[0]):
                i = tiny_i[p]
                j = tiny_j[p]
                x = alpha[r, i] + trans[0, i, j] + unary[r + 1, j] + beta[r + 1, j] - log_norm
                if x != -np.inf:
                    dst[i, j] += math.exp(x)
        else:
            eT_s, rm_s = _shifted_exp(trans[ts], 1)
            _edge_marginals_step(alpha[r], trans[ts], eT_s, rm_s, unary[r + 1], beta[r + 1],
                                 log_norm, dst)
    if edge_mode != 1 and S == 1:
        for i in range(K):
            for j in range(K):
                ee_dst[i, j] += eT_fast[i, j] * acc[i, j]
    return lz


@njit(cache=True)
def marginals_setup(trans, start, end):
    """Per-batch constants of :func:`marginals_seq` (shifted exps of the transition matrix, the
    linear-space set-up); computed once per call, shared by every sequence."""
    eTc, cmax = _shifted_exp(trans[0], 0)
    eTr, rmax = _shifted_exp(trans[0], 1)
    # stationary fast path for edge marginals: P_t(i, j) = a_t[i] · eT[i, j] · q_t[j]; entries of eT
    # too small for a safe product ("tiny") are accumulated exactly in log space instead
    tiny_i, tiny_j = _tiny_entries(eTr)
    eT_fast = eTr.copy()
    for p in range(tiny_i.shape[0]):
        eT_fast[tiny_i[p], tiny_j[p]] = 0.0
    lin_eT, lin_eTt, gmax, es, smax, ee, emax, lin_ok = _linear_setup(trans[0], start, end)
    lin = (lin_eT, lin_eTt, gmax, es, smax, ee, emax, lin_ok and trans.shape[0] == 1)
    return eTc, cmax, eTr, rmax, tiny_i, tiny_j, eT_fast, lin


@njit(cache=True)
def marginals_seq(unary, trans, start, end, o, T, edge_mode, alpha, beta, inca, incb, umarg, emarg,
                  ee_dst, eTc, cmax, eTr, rmax, tiny_i, tiny_j, eT_fast, lin_eT, lin_eTt, gmax, es, smax,
                  ee, emax, lin_ok):
    """Marginals of one sequence (rows o .. o+T-1 of ``unary``) given :func:`marginals_setup`'s
    constants (flattened, so that a parallel loop can capture them); returns log Z. For callers that
    fuse inference with their own per-sequence work (CRF training: potentials in, gradient out,
    without (N, K) intermediates)."""
    lin = (lin_eT, lin_eTt, gmax, es, smax, ee, emax, lin_ok)
    return _marginals_seq(unary, trans, start, end, o, T, edge_mode, alpha, beta, inca, incb, umarg,
                          emarg, ee_dst, lin, eTc, cmax, eTr, rmax, tiny_i, tiny_j, eT_fast)


@njit(cache=True, parallel=True)
def chain_marginals(unary, trans, start, end, offsets, edge_mode, n_threads=1):
    """log Z (B,), unary marginals (N, K) and edge marginals.

    edge_mode 0: none (returns a (0, K, K) array); 1: full (N, K, K), row t = P(y_t, y_t+1), rows at
    sequence ends 0; 2: per-sequence sums (B, K, K); 3: the sum over the whole batch (1, K, K) (expected
    transition counts for training, memory O(K²) per block of sequences; pass ``n_threads`` =
    ``numba.get_num_threads()`` so the batch is split into enough blocks).

    Marginals are normalised locally at every token, P(y_t = k) ∝ exp(ahat[t, k] + bhat[t, k]), which is
    exact and keeps them accurate to rounding error however long the chain (scores of 10⁸ in log space
    would otherwise cost 8 digits). Stationary transitions use the scaled linear-space recursion when
    the potentials allow it exactly (see :func:`_linear_marginals_seq`).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    alpha = np.empty((N, K))
    beta = np.empty((N, K))
    inca = np.empty(N)
    incb = np.empty(N)
    log_z = np.zeros(B)
    umarg = np.zeros((N, K))
    n_chunks = min(B, 8 * n_threads) if B > 0 else 1
    if edge_mode == 1:
        emarg = np.zeros((N, K, K))
    elif edge_mode == 2:
        emarg = np.zeros((B, K, K))
    elif edge_mode == 3:
        emarg = np.zeros((n_chunks, K, K))
    else:
        emarg = np.zeros((0, K, K))
    scratch = np.zeros((1, K, K))
    eTc, cmax, eTr, rmax, tiny_i, tiny_j, eT_fast, lin = marginals_setup(trans, start, end)
    step = (B + n_chunks - 1) // n_chunks if B > 0 else 1
    for c in prange(n_chunks):
        for b in range(c * step, min(B, (c + 1) * step)):
            o = offsets[b]
            T = offsets[b + 1] - o
            if T == 0:
                continue
            if edge_mode == 2:
                dst = emarg[b]
            elif edge_mode == 3:
                dst = emarg[c]
            else:
                dst = scratch[0]
            log_z[b] = _marginals_seq(unary, trans, start, end, o, T, edge_mode, alpha, beta, inca,
                                      incb, umarg, emarg, dst, lin, eTc, cmax, eTr, rmax, tiny_i,
                                      tiny_j, eT_fast)
    if edge_mode == 3:
        total = np.zeros((1, K, K))
        for c in range(n_chunks):
            for i in range(K):
                for j in range(K):
                    total[0, i, j] += emarg[c, i, j]
        return log_z, umarg, total
    return log_z, umarg, emarg


@njit(cache=True)
def viterbi_seq(unary, trans, start, end, o, T, delta, bp, labels):
    """Max-product decoding of one sequence (rows o:o+T); writes labels[o:o+T], returns the best score.

    δ[0, j] = start[j] + unary[0, j];  δ[t, j] = unary[t, j] + max_i δ[t-1, i] + trans[t-1, i, j];
    back-pointers bp[t, j] = argmax_i. Labels are left untouched when the sequence is infeasible (-inf).
    ``delta``/``bp`` are scratch arrays indexed by packed row.
    """
    K = unary.shape[1]
    S = trans.shape[0]
    for j in range(K):
        delta[o, j] = start[j] + unary[o, j]
    for r in range(o + 1, o + T):
        ts = _tr(S, r - 1)
        for j in range(K):
            m = -np.inf
            arg = 0
            for i in range(K):
                v = delta[r - 1, i] + trans[ts, i, j]
                if v > m:
                    m = v
                    arg = i
            delta[r, j] = unary[r, j] + m
            bp[r, j] = arg
    last = o + T - 1
    m = -np.inf
    arg = 0
    for j in range(K):
        v = delta[last, j] + end[j]
        if v > m:
            m = v
            arg = j
    if m == -np.inf:
        return m
    labels[last] = arg
    for r in range(last, o, -1):
        labels[r - 1] = bp[r, labels[r]]
    return m


@njit(cache=True, parallel=True)
def chain_viterbi(unary, trans, start, end, offsets):
    """Max-product decoding: best scores (B,) and labels (N,) (-1 rows for infeasible sequences)."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    labels = np.full(N, -1, dtype=np.int64)
    best = np.zeros(B)
    delta = np.empty((N, K))
    bp = np.zeros((N, K), dtype=np.int32)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        best[b] = viterbi_seq(unary, trans, start, end, o, T, delta, bp, labels)
    return best, labels


@njit(cache=True, parallel=True)
def chain_score(unary, trans, start, end, offsets, labels):
    """Log-score (B,) of the packed labeling ``labels`` (N,)."""
    B = offsets.shape[0] - 1
    S = trans.shape[0]
    out = np.zeros(B)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        s = start[labels[o]] + end[labels[o + T - 1]]
        for r in range(o, o + T):
            s += unary[r, labels[r]]
            if r + 1 < o + T:
                s += trans[_tr(S, r), labels[r], labels[r + 1]]
        out[b] = s
    return out


@njit(cache=True, parallel=True)
def chain_sample(alpha, log_z, trans, end, offsets, uniforms):
    """Exact posterior samples by forward filtering, backward sampling.

    ``alpha``: normalised forward scores ``ahat`` from :func:`chain_forward` (LOG; only differences
    within a row matter); ``uniforms`` (n, N) in [0, 1). Returns (n, N) labels.
    Sequences with log Z = -inf are left at -1.
    """
    n = uniforms.shape[0]
    N, K = alpha.shape
    B = offsets.shape[0] - 1
    S = trans.shape[0]
    out = np.full((n, N), -1, dtype=np.int64)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0 or log_z[b] == -np.inf:
            continue
        w = np.empty(K)
        for s in range(n):
            last = o + T - 1
            # P(y_T-1 = j) ∝ exp(alpha + end)
            for j in range(K):
                w[j] = alpha[last, j] + end[j]
            out[s, last] = _draw(w, uniforms[s, last])
            for r in range(last - 1, o - 1, -1):
                nxt = out[s, r + 1]
                ts = _tr(S, r)
                for i in range(K):
                    w[i] = alpha[r, i] + trans[ts, i, nxt]
                out[s, r] = _draw(w, uniforms[s, r])
    return out


@njit(cache=True, parallel=True)
def chain_kbest(unary, trans, start, end, offsets, k):
    """The k best labelings of every sequence (exact, best first).

    Each cell (t, j) keeps the top-k partial scores ending in label j with back-pointers
    (previous label, previous rank). Time O(N·K²·k·log(K·k)), memory O(N·K·k).
    Returns scores (B, k) (-inf padding) and labels (k, N) (-1 padding).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    S = trans.shape[0]
    scores = np.full((B, k), -np.inf)
    labels = np.full((k, N), -1, dtype=np.int64)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            if k > 0:
                scores[b, 0] = 0.0
            continue
        sc = np.full((T, K, k), -np.inf)
        bpl = np.full((T, K, k), -1, dtype=np.int64)
        bpr = np.full((T, K, k), -1, dtype=np.int64)
        for j in range(K):
            sc[0, j, 0] = start[j] + unary[o, j]
        cand = np.empty(K * k)
        for t in range(1, T):
            ts = _tr(S, o + t - 1)
            for j in range(K):
                for i in range(K):
                    for r in range(k):
                        cand[i * k + r] = sc[t - 1, i, r] + trans[ts, i, j]
                order = np.argsort(-cand, kind="mergesort")
                for r in range(k):
                    c = order[r]
                    v = cand[c]
                    if v == -np.inf:
                        break
                    sc[t, j, r] = v + unary[o + t, j]
                    bpl[t, j, r] = c // k
                    bpr[t, j, r] = c % k
        fin = np.empty(K * k)
        for j in range(K):
            for r in range(k):
                fin[j * k + r] = sc[T - 1, j, r] + end[j]
        order = np.argsort(-fin, kind="mergesort")
        for r in range(k):
            c = order[r]
            v = fin[c]
            if v == -np.inf:
                break
            scores[b, r] = v
            j = c // k
            rk = c % k
            for t in range(T - 1, -1, -1):
                labels[r, o + t] = j
                if t > 0:
                    j2 = bpl[t, j, rk]
                    rk = bpr[t, j, rk]
                    j = j2
    return scores, labels
