"""Numba kernels for linear chains with a sparse stationary transition matrix (packed ragged batches).

Arrays in, arrays out; no validation. Same conventions as :mod:`structlearn.kernels.chain`, except the
transition matrix, which is stationary and given in CSR form "from, to":

- ``indptr`` (K + 1,) int64, ``indices`` (E,) int64 (destination labels, any order within a row),
  ``logv`` (E,) float64 log-potentials of the E stored transitions; transitions not stored are -inf
  (a stored -inf is legal too).
- ``unary``: (N, K) log-potentials; ``offsets``: (B + 1,); ``start``, ``end``: (K,).

The recurrences are those of the dense kernels (Lafferty et al. 2001; seed 000 eqs. "folc-alpha",
"folc-beta") restricted to the stored transitions, so a step costs O(E + K) instead of O(K²)::

    α[t, j]   = unary[t, j] + ⊕_{i : (i, j) stored} (α[t-1, i] + logv[i → j])
    β[t, i]   = ⊕_{j : (i, j) stored} (logv[i → j] + unary[t+1, j] + β[t+1, j])

Messages are normalised per token (``ahat``/``inc``, ``bhat``/``inc`` exactly as in the dense kernels).
In the LOG semiring a step runs in linear space on exp-shifted values (one exp per label and step; the
transition values are shifted by their column max for α and row max for β) and every column/row whose
shifted sum falls below ``_TINY`` (underflow risk, or nothing allowed) is recomputed exactly in log
space, so results equal the plain log-space recursion to rounding error and are exactly -inf where
nothing is allowed.
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import LOG, MAX
from ._common import final_sum as _final

_TINY = 1e-200  # below this a shifted linear-space sum may have lost terms: recompute in log space
_SAFE = 1e-140  # linear-space factors at least this large multiply without loss (edge marginals)
_LIN_MIN = 1e-100  # scaled linear-space recursion: factors are 0 or >= this, so products stay normal


@njit(cache=True)
def csr_transpose(indptr, indices, K):
    """CSC view of a CSR pattern: (tptr (K + 1,), tsrc (E,) source labels, tpos (E,) CSR positions),
    entries of every column in increasing source order."""
    E = indices.shape[0]
    tptr = np.zeros(K + 1, dtype=np.int64)
    for e in range(E):
        tptr[indices[e] + 1] += 1
    for j in range(K):
        tptr[j + 1] += tptr[j]
    fill = tptr[:-1].copy()
    tsrc = np.empty(E, dtype=np.int64)
    tpos = np.empty(E, dtype=np.int64)
    for i in range(K):
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            tsrc[fill[j]] = i
            tpos[fill[j]] = e
            fill[j] += 1
    return tptr, tsrc, tpos


@njit(cache=True)
def _shifted(indptr, logv, K):
    """exp(logv - max of its row) with the row maxima (-inf for an empty / all -inf row)."""
    E = logv.shape[0]
    mx = np.full(K, -np.inf)
    out = np.zeros(E)
    for i in range(K):
        for e in range(indptr[i], indptr[i + 1]):
            if logv[e] > mx[i]:
                mx[i] = logv[e]
        if mx[i] != -np.inf:
            for e in range(indptr[i], indptr[i + 1]):
                if logv[e] != -np.inf:
                    out[e] = math.exp(logv[e] - mx[i])
    return out, mx


@njit(cache=True)
def _setup(indptr, indices, logv, K):
    """Column-major copy of the pattern with column-shifted exps (forward) and row-shifted exps
    (backward, edge marginals)."""
    tptr, tsrc, tpos = csr_transpose(indptr, indices, K)
    E = logv.shape[0]
    tlogv = np.empty(E)
    for p in range(E):
        tlogv[p] = logv[tpos[p]]
    ecol, cmax = _shifted(tptr, tlogv, K)
    erow, rmax = _shifted(indptr, logv, K)
    return tptr, tsrc, tlogv, ecol, cmax, erow, rmax


@njit(cache=True)
def _forward_seq(unary, tptr, tsrc, tlogv, ecol, cmax, start, o, T, semiring, ahat, inc):
    """Normalised forward pass of one sequence: ``ahat[r] = α[r] - M_r`` (row max 0), ``inc[r] = M_r -
    M_{r-1}``; in the MAX semiring ``ahat`` holds the normalised Viterbi scores."""
    K = unary.shape[1]
    m = -np.inf
    for j in range(K):
        v = start[j] + unary[o, j]
        if v > m:
            m = v
    inc[o] = m
    for j in range(K):
        ahat[o, j] = start[j] + unary[o, j] - m if m != -np.inf else -np.inf
    p = np.empty(K)
    for t in range(1, T):
        r = o + t
        prev = ahat[r - 1]
        if inc[r - 1] == -np.inf:  # infeasible prefix stays infeasible
            inc[r] = -np.inf
            for j in range(K):
                ahat[r, j] = -np.inf
            continue
        if semiring == MAX:
            for j in range(K):
                best = -np.inf
                for q in range(tptr[j], tptr[j + 1]):
                    v = prev[tsrc[q]] + tlogv[q]
                    if v > best:
                        best = v
                ahat[r, j] = unary[r, j] + best
        else:
            for i in range(K):
                p[i] = math.exp(prev[i])
            for j in range(K):
                if cmax[j] == -np.inf or unary[r, j] == -np.inf:
                    ahat[r, j] = -np.inf
                    continue
                s = 0.0
                for q in range(tptr[j], tptr[j + 1]):
                    s += p[tsrc[q]] * ecol[q]
                if s > _TINY:
                    ahat[r, j] = unary[r, j] + cmax[j] + math.log(s)
                else:  # exact column logsumexp
                    mm = -np.inf
                    for q in range(tptr[j], tptr[j + 1]):
                        v = prev[tsrc[q]] + tlogv[q]
                        if v > mm:
                            mm = v
                    if mm == -np.inf:
                        ahat[r, j] = -np.inf
                    else:
                        s = 0.0
                        for q in range(tptr[j], tptr[j + 1]):
                            v = prev[tsrc[q]] + tlogv[q]
                            if v != -np.inf:
                                s += math.exp(v - mm)
                        ahat[r, j] = unary[r, j] + mm + math.log(s)
        m = -np.inf
        for j in range(K):
            if ahat[r, j] > m:
                m = ahat[r, j]
        inc[r] = m
        if m != -np.inf:
            for j in range(K):
                ahat[r, j] -= m


@njit(cache=True)
def _backward_seq(unary, indptr, indices, logv, erow, rmax, end, o, T, bhat, inc):
    """Normalised backward pass of one sequence (LOG): ``bhat[r] = β[r] - S_r``, ``inc[r] = S_r - S_{r+1}``."""
    K = unary.shape[1]
    last = o + T - 1
    for i in range(K):
        bhat[last, i] = end[i]
    inc[last] = 0.0
    v = np.empty(K)
    q = np.empty(K)
    for t in range(T - 2, -1, -1):
        r = o + t
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
        for j in range(K):
            q[j] = math.exp(v[j] - m)
        mm = -np.inf
        for i in range(K):
            if rmax[i] == -np.inf:
                bhat[r, i] = -np.inf
                continue
            s = 0.0
            for e in range(indptr[i], indptr[i + 1]):
                s += erow[e] * q[indices[e]]
            if s > _TINY:
                bhat[r, i] = m + rmax[i] + math.log(s)
            else:  # exact row logsumexp
                mx = -np.inf
                for e in range(indptr[i], indptr[i + 1]):
                    w = logv[e] + v[indices[e]]
                    if w > mx:
                        mx = w
                if mx == -np.inf:
                    bhat[r, i] = -np.inf
                else:
                    s = 0.0
                    for e in range(indptr[i], indptr[i + 1]):
                        w = logv[e] + v[indices[e]]
                        if w != -np.inf:
                            s += math.exp(w - mx)
                    bhat[r, i] = mx + math.log(s)
            if bhat[r, i] > mm:
                mm = bhat[r, i]
        inc[r] = mm
        if mm != -np.inf:
            for i in range(K):
                bhat[r, i] -= mm


@njit(cache=True, inline="always")
def _total(inc, o, T):
    s = 0.0
    for r in range(o, o + T):
        s += inc[r]
    return s


@njit(cache=True, parallel=True)
def sparse_chain_forward(unary, indptr, indices, logv, start, end, offsets, semiring):
    """Normalised forward scores: ``ahat`` (N, K), ``inc`` (N,) and log Z (or the max score) (B,);
    ``α[r] = ahat[r] + Σ_{r' ≤ r in the same sequence} inc[r']``. Time O(N·(E + K))."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    tptr, tsrc, tlogv, ecol, cmax, erow, rmax = _setup(indptr, indices, logv, K)
    alpha = np.empty((N, K))
    inc = np.empty(N)
    out = np.zeros(B)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        _forward_seq(unary, tptr, tsrc, tlogv, ecol, cmax, start, o, T, semiring, alpha, inc)
        out[b] = _total(inc, o, T) + _final(alpha[o + T - 1], end, semiring)
    return alpha, inc, out


@njit(cache=True, parallel=True)
def sparse_chain_backward(unary, indptr, indices, logv, end, offsets):
    """Normalised backward scores (LOG): ``bhat`` (N, K), ``inc`` (N,), with
    ``β[r] = bhat[r] + Σ_{r' ≥ r in the same sequence} inc[r']``. Time O(N·(E + K))."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    erow, rmax = _shifted(indptr, logv, K)
    beta = np.empty((N, K))
    inc = np.empty(N)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        _backward_seq(unary, indptr, indices, logv, erow, rmax, end, o, T, beta, inc)
    return beta, inc


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


@njit(cache=True)
def _linear_setup(indptr, logv, tptr, tlogv, start, end):
    """Globally shifted exps of the stored values (CSR and CSC order) and of start/end; ok is False
    when a finite value falls below _LIN_MIN after the shift (then the log-space path runs)."""
    E = logv.shape[0]
    gmax = -np.inf
    for e in range(E):
        if logv[e] > gmax:
            gmax = logv[e]
    ok = gmax != -np.inf
    er = np.zeros(E)
    ec = np.zeros(E)
    if ok:
        for e in range(E):
            if logv[e] != -np.inf:
                er[e] = math.exp(logv[e] - gmax)
                if er[e] < _LIN_MIN:
                    ok = False
            if tlogv[e] != -np.inf:
                ec[e] = math.exp(tlogv[e] - gmax)
    es, smax, ok1 = _exp_shifted_vec(start)
    ee, emax, ok2 = _exp_shifted_vec(end)
    return er, ec, gmax, es, smax, ee, emax, ok and ok1 and ok2


@njit(cache=True)
def _linear_marginals_seq(unary, indptr, indices, tptr, tsrc, lin, o, T, edge_mode, umarg, emarg, dst):
    """Scaled linear-space forward–backward of one sequence (Rabiner 1989), as the dense kernel's
    ``_linear_marginals_seq``: α, β in linear space renormalised at every token, one exp per label and
    token. Returns (False, 0) and writes nothing when a factor would fall below _LIN_MIN (the caller then
    runs the log-space recursion)."""
    K = unary.shape[1]
    er, ec, gmax, es, smax, ee, emax, _ = lin
    fail = (False, 0.0)
    fa = np.empty((T, K))
    fb = np.empty((T, K))
    eu = np.empty((T, K))
    nb = np.empty(T)
    lz = 0.0
    acc = np.empty(K)
    for t in range(T):
        row, um, ok = _exp_shifted_vec(unary[o + t])
        if not ok:
            return fail
        for k in range(K):
            eu[t, k] = row[k]
        if t == 0:
            for k in range(K):
                acc[k] = es[k] * row[k]
            lz += um + smax
        else:
            for j in range(K):
                sacc = 0.0
                for q in range(tptr[j], tptr[j + 1]):
                    sacc += fa[t - 1, tsrc[q]] * ec[q]
                acc[j] = sacc * row[j]
            lz += um + gmax
        tot = 0.0
        for k in range(K):
            tot += acc[k]
        if not tot > 0.0:
            return fail
        for k in range(K):
            v = acc[k] / tot
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
    tot = 0.0
    for k in range(K):
        tot += ee[k]
    nb[T - 1] = tot
    for k in range(K):
        fb[T - 1, k] = ee[k] / tot
    qv = np.empty(K)
    for t in range(T - 2, -1, -1):
        for j in range(K):
            qv[j] = eu[t + 1, j] * fb[t + 1, j]
        tot = 0.0
        for i in range(K):
            sacc = 0.0
            for e in range(indptr[i], indptr[i + 1]):
                sacc += er[e] * qv[indices[e]]
            acc[i] = sacc
            tot += sacc
        if not tot > 0.0:
            return fail
        for k in range(K):
            v = acc[k] / tot
            if v != 0.0 and v < _LIN_MIN:
                return fail
            fb[t, k] = v
        nb[t] = tot
    for t in range(T):
        r = o + t
        z = 0.0
        for k in range(K):
            z += fa[t, k] * fb[t, k]
        for k in range(K):
            umarg[r, k] = fa[t, k] * fb[t, k] / z
        if edge_mode == 0 or t == T - 1:
            continue
        # P(i -> j) = fa[t, i] er[i -> j] eu[t+1, j] fb[t+1, j] / (nb[t] · z)
        inv = 1.0 / (nb[t] * z)
        out = emarg[r] if edge_mode == 1 else dst
        for j in range(K):
            qv[j] = eu[t + 1, j] * fb[t + 1, j]
        for i in range(K):
            ai = fa[t, i] * inv
            if ai != 0.0:
                for e in range(indptr[i], indptr[i + 1]):
                    out[e] += ai * er[e] * qv[indices[e]]
    return True, lz


@njit(cache=True)
def _marginals_seq(unary, indptr, indices, logv, setup, lin, start, end, o, T, edge_mode, alpha, beta,
                   inca, incb, umarg, emarg, dst):
    """Marginals of one sequence; returns log Z. Edge marginals go to emarg[r] (mode 1) or are added
    into the (E,) array dst (modes 2 and 3)."""
    K = unary.shape[1]
    tptr, tsrc, tlogv, ecol, cmax, erow, rmax = setup
    if lin[7]:
        ok, lz = _linear_marginals_seq(unary, indptr, indices, tptr, tsrc, lin, o, T, edge_mode, umarg,
                                       emarg, dst)
        if ok:
            return lz
    _forward_seq(unary, tptr, tsrc, tlogv, ecol, cmax, start, o, T, LOG, alpha, inca)
    lz = _total(inca, o, T) + _final(alpha[o + T - 1], end, LOG)
    if lz == -np.inf:
        return lz
    _backward_seq(unary, indptr, indices, logv, erow, rmax, end, o, T, beta, incb)
    w = np.empty(K)
    v = np.empty(K)
    q = np.empty(K)
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
        # P(y_r = i, y_r+1 = j) = exp(ahat[r, i] + logv[i → j] + unary[r+1, j] + bhat[r+1, j] - log_norm)
        # with the local normaliser log_norm = log Σ_i exp(ahat[r, i] + bhat[r, i]) + incb[r]
        log_norm = m + math.log(tot) + incb[r]
        out = emarg[r] if edge_mode == 1 else dst
        qm = -np.inf
        for j in range(K):
            v[j] = unary[r + 1, j] + beta[r + 1, j]
            if v[j] > qm:
                qm = v[j]
        for j in range(K):
            q[j] = math.exp(v[j] - qm) if v[j] != -np.inf else 0.0
        for i in range(K):
            if alpha[r, i] == -np.inf or rmax[i] == -np.inf:
                continue
            ea = alpha[r, i] + rmax[i] + qm - log_norm
            fast = ea < 460.0 and ea > -460.0
            a = math.exp(ea) if fast else 0.0
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                if fast and q[j] > _SAFE and erow[e] > _SAFE:
                    out[e] += a * erow[e] * q[j]
                else:
                    x = alpha[r, i] + logv[e] + v[j] - log_norm
                    if x != -np.inf:
                        out[e] += math.exp(x)
    return lz


@njit(cache=True, parallel=True)
def sparse_chain_marginals(unary, indptr, indices, logv, start, end, offsets, edge_mode, n_threads=1):
    """log Z (B,), token marginals (N, K) and edge marginals on the stored transitions.

    edge_mode 0: none (a (0, E) array); 1: full (N, E), row t = P(y_t = i, y_t+1 = j) for the stored
    (i → j) in CSR order, rows at sequence ends 0; 2: per-sequence sums (B, E); 3: the sum over the
    batch (1, E) (expected transition counts; pass ``n_threads`` = ``numba.get_num_threads()``).
    Marginals are normalised locally at every token (exact however long the chain). When the
    potentials allow it exactly, a sequence runs the scaled linear-space recursion (one exp per label
    and token); otherwise the log-space one. Time O(N·(E + K)), memory O(N·K) plus the edge output.
    """
    N, K = unary.shape
    E = indices.shape[0]
    B = offsets.shape[0] - 1
    setup = _setup(indptr, indices, logv, K)
    lin = _linear_setup(indptr, logv, setup[0], setup[2], start, end)
    alpha = np.empty((N, K))
    beta = np.empty((N, K))
    inca = np.empty(N)
    incb = np.empty(N)
    log_z = np.zeros(B)
    umarg = np.zeros((N, K))
    n_chunks = min(B, 8 * n_threads) if B > 0 else 1
    if edge_mode == 1:
        emarg = np.zeros((N, E))
    elif edge_mode == 2:
        emarg = np.zeros((B, E))
    elif edge_mode == 3:
        emarg = np.zeros((n_chunks, E))
    else:
        emarg = np.zeros((0, E))
    scratch = np.zeros((1, E))
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
            log_z[b] = _marginals_seq(unary, indptr, indices, logv, setup, lin, start, end, o, T,
                                      edge_mode, alpha, beta, inca, incb, umarg, emarg, dst)
    if edge_mode == 3:
        total = np.zeros((1, E))
        for c in range(n_chunks):
            for e in range(E):
                total[0, e] += emarg[c, e]
        return log_z, umarg, total
    return log_z, umarg, emarg


@njit(cache=True)
def _viterbi_seq(unary, tptr, tsrc, tlogv, start, end, o, T, delta, bp, labels):
    """Max-product decoding of one sequence; writes labels[o:o+T], returns the best score (-inf: labels
    untouched). δ[t, j] = unary[t, j] + max_{i → j stored} δ[t-1, i] + logv[i → j]."""
    K = unary.shape[1]
    for j in range(K):
        delta[o, j] = start[j] + unary[o, j]
    for r in range(o + 1, o + T):
        for j in range(K):
            m = -np.inf
            arg = 0
            for q in range(tptr[j], tptr[j + 1]):
                v = delta[r - 1, tsrc[q]] + tlogv[q]
                if v > m:
                    m = v
                    arg = tsrc[q]
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
def sparse_chain_viterbi(unary, indptr, indices, logv, start, end, offsets):
    """Max-product decoding: best scores (B,) and labels (N,) (-1 rows for infeasible sequences).
    Time O(N·(E + K)), memory O(N·K)."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    tptr, tsrc, tpos = csr_transpose(indptr, indices, K)
    tlogv = np.empty(tpos.shape[0])
    for p in range(tpos.shape[0]):
        tlogv[p] = logv[tpos[p]]
    labels = np.full(N, -1, dtype=np.int64)
    best = np.zeros(B)
    delta = np.empty((N, K))
    bp = np.zeros((N, K), dtype=np.int64)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        best[b] = _viterbi_seq(unary, tptr, tsrc, tlogv, start, end, o, T, delta, bp, labels)
    return best, labels
