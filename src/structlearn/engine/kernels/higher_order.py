"""Numba kernels for higher-order chains over label patterns (packed ragged batches).

Arrays in, arrays out; no validation. Two exact algorithms for the same distribution:

**Sparse** (Cuong, Ye, Lee & Chieu 2014, "Conditional random field with high-order dependencies for
sequence labeling and segmentation", JMLR 15, §3).
``Z`` is a set of label patterns; a pattern z scores position t when ``y[t-|z|+1 .. t] == z``. The forward
states are ``P = {ε} ∪ Y ∪ {proper prefixes of patterns}`` (prefix-closed). The state after t tokens is
the longest suffix of ``y[0..t]`` in P; it is the longest P-suffix of ``p·y_t`` (``p`` the state after
t - 1 tokens), and the patterns that end at t are exactly the Z-suffixes of ``p·y_t``. So every
pair (p, y) is one edge ``e = p·K + y`` with destination ``dst[e]`` (longest-suffix relation) and score

    ψ[t, e] = econst[e] + Σ_{z in es_pat[es_ptr[e]:es_ptr[e+1]]} phi[t, z]      (+ start[y] at t = 0)

where ``econst[e]`` is the sum of the constant pattern weights of the Z-suffixes of p·y and
``phi[t, z]`` the token-dependent part of the first Zs ("state") patterns. Recurrences::

    α[-1]    = δ_ε
    α[t, q]  = ⊕_{e : dst[e] = q} α[t-1, e // K] + ψ[t, e]
    β[T-1,q] = end[last(q)]
    β[t, p]  = ⊕_{y} ψ[t+1, p·K + y] + β[t+1, dst[p·K + y]]
    log Z    = ⊕_q α[T-1, q] + end[last(q)]
    μ[t, e]  = exp(α[t-1, e // K] + ψ[t, e] + β[t, dst[e]] - log Z)

In the LOG semiring α and β are kept scaled per token (α̂ sums to 1; β̂ divided by the same
normalisers, as in scaled forward–backward), so marginals never subtract O(T)-sized log-scores.

The token-dependent part of ψ depends on the edge only through its set of state patterns, its
*class* c = cls[e] (C classes, C ≪ E: with state patterns up to bigrams C ≤ K + K²), so the kernels
take per-token class potentials ``phic[t, c] = Σ_{z in class c} phi[t, z]`` and
ψ[t, e] = econst[e] + phic[t, cls[e]]. The scaled linear-space pass (:func:`_linear_seq`) uses the
factorisation exp ψ = exp(econst[e] - max) · exp(phic[t, c] - max_t): C exponentials per token, none per
edge, and collects the marginals of token t while computing β̂[t - 1]; it declines (NaN) when the
potentials are too spread for scaled products, and :func:`_log_seq` (the log-space recursion) runs.

Cost per token O(|P|·K + C·patterns per class), memory O(T·|P|) per sequence.

**Dense** helpers: the expansion to d-tuples of labels (a first-order chain over K**d states,
α[y_1..y_d] of Ye et al. 2009); see :mod:`structlearn.crf._higher_order_potentials` for the layout.
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import LOG, MAX, reduce_pair

_NEG = -np.inf


_SPREAD = 300.0  # linear path only if every finite ψ[t, e] is within this many nats of its token's max
_SMALL = 1e-150  # ... and every non-zero scaled α̂ / 1/β̂ stays above this (no underflow in products)


@njit(cache=True)
def class_scores(phi, r0, T, cls_ptr, cls_pat, cls_label, allowed, a0, out):
    """Token potentials of the edge classes: out[t, c] = Σ_{z in class c} phi[r0 + t, z] for t < T,
    -inf where the class's label is not allowed at row a0 + t of ``allowed`` (an empty ``allowed``
    allows every label). ``out`` has at least T rows and C columns."""
    C = cls_label.shape[0]
    check = allowed.shape[0] > 0
    for t in range(T):
        for c in range(C):
            if check and not allowed[a0 + t, cls_label[c]]:
                out[t, c] = _NEG
                continue
            v = 0.0
            for j in range(cls_ptr[c], cls_ptr[c + 1]):
                v += phi[r0 + t, cls_pat[j]]
            out[t, c] = v


@njit(cache=True)
def edge_setup(econst):
    """(max_e econst, exp(econst - max) (E,), whether every edge constant is within _SPREAD / 2 nats of
    the max: the linear path's condition on the constant factor of ψ)."""
    E = econst.shape[0]
    cmax = _NEG
    for e in range(E):
        if econst[e] > cmax:
            cmax = econst[e]
    eec = np.empty(E)
    ok = cmax > _NEG
    for e in range(E):
        v = econst[e] - cmax
        if not v >= -0.5 * _SPREAD:
            ok = False
        eec[e] = math.exp(v)
    return cmax, eec, ok


@njit(cache=True)
def _edge_scores(phic, econst, cls, start, T, K):
    """ψ (T, E) of one sequence from its class potentials phic (T, C) (log-space path, Viterbi)."""
    E = econst.shape[0]
    psi = np.empty((T, E))
    for t in range(T):
        for e in range(E):
            c = phic[t, cls[e]]
            if c == _NEG:
                psi[t, e] = _NEG
                continue
            v = econst[e] + c
            if t == 0:
                v += start[e % K]
            psi[t, e] = v
    return psi


@njit(cache=True)
def _forward(psi, dst, P, K, T, semiring, alpha, bp, inc):
    """α (T, P) in log space; LOG (α̂ normalised per token, log normalisers in inc (T,))
    or MAX (unnormalised, with back-pointers bp (T, P) edge ids)."""
    E = dst.shape[0]
    mx = np.empty(P)
    acc = np.empty(P)
    for t in range(T):
        for q in range(P):
            mx[q] = _NEG
            acc[q] = 0.0
            if semiring == MAX:
                bp[t, q] = -1
        # pass 1: the largest incoming value per destination
        for e in range(E):
            p = e // K
            a = (0.0 if p == 0 else _NEG) if t == 0 else alpha[t - 1, p]
            if a == _NEG:
                continue
            v = a + psi[t, e]
            q = dst[e]
            if v > mx[q]:
                mx[q] = v
                if semiring == MAX:
                    bp[t, q] = e
        if semiring == MAX:
            for q in range(P):
                alpha[t, q] = mx[q]
            continue
        # pass 2: shifted sums
        for e in range(E):
            p = e // K
            a = (0.0 if p == 0 else _NEG) if t == 0 else alpha[t - 1, p]
            q = dst[e]
            if a == _NEG or mx[q] == _NEG:
                continue
            v = a + psi[t, e]
            if v != _NEG:
                acc[q] += math.exp(v - mx[q])
        # normalise: α̂[t] = α[t] - inc[t] with log Σ_q exp α̂[t, q] = 0 (scaled forward)
        m = _NEG
        for q in range(P):
            alpha[t, q] = mx[q] + math.log(acc[q]) if mx[q] != _NEG else _NEG
            if alpha[t, q] > m:
                m = alpha[t, q]
        if m == _NEG:
            inc[t] = _NEG
            continue
        z = 0.0
        for q in range(P):
            if alpha[t, q] != _NEG:
                z += math.exp(alpha[t, q] - m)
        inc[t] = m + math.log(z)
        for q in range(P):
            alpha[t, q] -= inc[t]


@njit(cache=True)
def _final(alpha_last, p_last, end, semiring):
    """(⊕_q α[T-1, q] + end[last label of q], arg q) over the states q with a last label; arg -1 when
    every term is -inf."""
    P = alpha_last.shape[0]
    row = np.empty(P)
    for q in range(P):
        row[q] = end[p_last[q]] if p_last[q] >= 0 else _NEG
    m, arg = reduce_pair(semiring, alpha_last, row, P)
    return m, (arg if m > _NEG else -1)


@njit(cache=True)
def _backward(psi, dst, p_last, end, P, K, T, beta, inc, log_r):
    """β̂ (T, P) in log space, scaled with the forward normalisers: β̂[T-1, q] = end[last(q)] - log r,
    β̂[t, p] = ⊕_y ψ[t+1, p·K+y] + β̂[t+1, dst] - inc[t+1]; then μ[t, e] = exp(α̂[t-1, p] + ψ[t, e] +
    β̂[t, dst[e]] - inc[t]) with every term O(1) (no cancellation of O(T) log-scores)."""
    for q in range(P):
        beta[T - 1, q] = end[p_last[q]] - log_r if p_last[q] >= 0 else _NEG
    for t in range(T - 2, -1, -1):
        for p in range(P):
            m = _NEG
            for y in range(K):
                e = p * K + y
                v = psi[t + 1, e] + beta[t + 1, dst[e]]
                if v > m:
                    m = v
            if m == _NEG:
                beta[t, p] = _NEG
                continue
            s = 0.0
            for y in range(K):
                e = p * K + y
                v = psi[t + 1, e] + beta[t + 1, dst[e]]
                if v != _NEG:
                    s += math.exp(v - m)
            beta[t, p] = m + math.log(s) - inc[t + 1]


@njit(cache=True)
def _linear_seq(phic, econst, cmax, eec, cls, dst, p_last, start, end, nd, nd_ptr, nd_src, root_pos, P, K, T, muc,
                ebuf, A, X):
    """Scaled forward–backward in linear space for one sequence.

    ψ[t, e] = econst[e] + phic[t, cls[e]] factorises, so exp ψ = exp(econst[e] - cmax) ·
    exp(phic[t, c] - max_c phic[t, c]) · const: C exponentials per token (C classes ≪ E edges), none
    per edge. The marginals of token t are collected while β̂[t - 1] is computed (one pass per
    direction). Adds μ into ``muc`` (T, C) and ``ebuf`` (E,) (zeroed by the caller) and returns log Z
    (-inf if infeasible), or NaN when the potentials are too spread for the scaled products to be exact
    (``muc``/``ebuf`` then hold partial sums; the caller runs the log-space path).
    """
    C = phic.shape[1]
    eph = np.empty((T, C))
    lsc = np.empty(T)  # log of the linear normaliser s_t; inc[t] = M[t] + lsc[t]
    inc = np.empty(T)
    ep0 = np.empty(K)
    m = _NEG
    for y in range(K):  # t = 0: only the edges out of ε, with the start weights
        c = phic[0, cls[y]]
        v = _NEG if c == _NEG else econst[y] + c + start[y]
        ep0[y] = v
        if v > m:
            m = v
    if m == _NEG:
        return _NEG
    for y in range(K):
        v = ep0[y] - m
        if v == _NEG:
            ep0[y] = 0.0
        elif v < -_SPREAD:
            return np.nan
        else:
            ep0[y] = math.exp(v)
    inc[0] = m
    for t in range(1, T):
        m = _NEG
        for c in range(C):
            if phic[t, c] > m:
                m = phic[t, c]
        if m == _NEG:
            return _NEG
        for c in range(C):
            v = phic[t, c] - m
            if v == _NEG:
                eph[t, c] = 0.0
            elif v < -0.5 * _SPREAD:
                return np.nan
            else:
                eph[t, c] = math.exp(v)
        inc[t] = cmax + m
    alpha = np.zeros((T, P))
    for y in range(K):
        alpha[0, dst[y]] += ep0[y]
    for t in range(T):
        if t > 0:
            # A[t, i]: the mass of α̂[t-1] that leaves by non-default edge nd[i]: its own state's and that
            # of the states whose edge reaches it through default edges
            for i in range(nd.shape[0]):
                a = 0.0
                for j in range(nd_ptr[i], nd_ptr[i + 1]):
                    a += alpha[t - 1, nd_src[j]]
                A[t, i] = a
                if a != 0.0:
                    e = nd[i]
                    alpha[t, dst[e]] += a * eec[e] * eph[t, cls[e]]
        sm = 0.0
        for q in range(P):
            sm += alpha[t, q]
        if sm == 0.0:
            return _NEG
        for q in range(P):
            a = alpha[t, q] / sm
            if a != 0.0 and a < _SMALL:
                return np.nan
            alpha[t, q] = a
        lsc[t] = math.log(sm)
        inc[t] += lsc[t]
    # log r = log Σ_q α̂[T-1, q] exp(end[last(q)])
    m = _NEG
    for q in range(P):
        if alpha[T - 1, q] > 0.0 and p_last[q] >= 0:
            v = math.log(alpha[T - 1, q]) + end[p_last[q]]
            if v > m:
                m = v
    if m == _NEG:
        return _NEG
    sm = 0.0
    for q in range(P):
        if alpha[T - 1, q] > 0.0 and p_last[q] >= 0:
            v = math.log(alpha[T - 1, q]) + end[p_last[q]]
            if v != _NEG:
                sm += math.exp(v - m)
    log_r = m + math.log(sm)
    beta = np.zeros((T, P))
    for q in range(P):
        if p_last[q] >= 0:
            v = end[p_last[q]] - log_r
            if v > -np.log(_SMALL):
                return np.nan
            beta[T - 1, q] = math.exp(v)
    # β̂[t-1, p] = Σ_y ep[t, e] β̂[t, dst[e]] / s_t and μ[t, e] = α̂[t-1, p] ep[t, e] β̂[t, dst[e]] / s_t;
    # a default edge has the terms of (fail(p), y) (filled shallowest first), and its marginal mass is
    # counted on the non-default edge that carried it (same dst, class and patterns)
    for t in range(T - 1, 0, -1):
        inv = math.exp(-lsc[t])
        for i in range(nd.shape[0]):
            e = nd[i]
            x = eec[e] * eph[t, cls[e]] * beta[t, dst[e]]
            X[i] = x
            mu = A[t, i] * x * inv
            ebuf[e] += mu
            muc[t, cls[e]] += mu
        beta[t - 1, 0] = 0.0
        for p in range(1, P):
            acc = 0.0
            for e in range(p * K, p * K + K):
                acc += X[root_pos[e]]
            acc *= inv
            if acc > 1.0 / _SMALL:
                return np.nan
            beta[t - 1, p] = acc
    inv = math.exp(-lsc[0])
    for y in range(K):
        mu = ep0[y] * beta[0, dst[y]] * inv
        ebuf[y] += mu
        muc[0, cls[y]] += mu
    lz = log_r
    for t in range(T):
        lz += inc[t]
    return lz


@njit(cache=True)
def _log_seq(phic, econst, cls, dst, p_last, start, end, P, K, T, muc, ebuf):
    """The log-space forward–backward of one sequence (any potentials): log Z, μ into ``muc``/``ebuf``."""
    E = dst.shape[0]
    psi = _edge_scores(phic, econst, cls, start, T, K)
    alpha = np.empty((T, P))
    inc = np.empty(T)
    _forward(psi, dst, P, K, T, LOG, alpha, np.zeros((1, 1), np.int64), inc)
    if inc[T - 1] == _NEG:
        return _NEG
    log_r, _ = _final(alpha[T - 1], p_last, end, LOG)
    if log_r == _NEG:
        return _NEG
    lz = log_r
    for t in range(T):
        lz += inc[t]
    beta = np.empty((T, P))
    _backward(psi, dst, p_last, end, P, K, T, beta, inc, log_r)
    for t in range(T):
        for e in range(E):
            p = e // K
            a = (0.0 if p == 0 else _NEG) if t == 0 else alpha[t - 1, p]
            if a == _NEG:
                continue
            v = a + psi[t, e] + beta[t, dst[e]] - inc[t]
            if v == _NEG:
                continue
            mu = math.exp(v)
            ebuf[e] += mu
            muc[t, cls[e]] += mu
    return lz


@njit(cache=True)
def seq_marginals(phic, econst, cmax, eec, linear, cls, dst, p_last, start, end, nd, nd_ptr, nd_src, root_pos, P, K,
                  T, muc, ebuf, A, X):
    """log Z of one sequence from its class potentials phic (≥ T, C); sets ``muc[:T]`` to the class
    marginals μ[t, c] = P(the edge at t is of class c) and ``ebuf`` (E,) to Σ_t μ[t, e].

    With ``linear`` (and :func:`edge_setup`'s condition) the scaled linear-space pass runs first, the
    log-space recursion when it declines. ``nd`` (non-default edges out of non-empty states),
    ``nd_ptr``/``nd_src`` (the states whose mass each carries), ``root_pos`` (E,) (position in ``nd`` of
    the edge that carries an edge's mass): see :meth:`structlearn.crf._higher_order_potentials.LabelPatterns.sparse`.
    Work buffers ``A`` (≥ T, |nd|), ``X`` (|nd|,). In the edge totals ``ebuf`` the mass of a default
    edge is counted on the non-default edge with the same patterns that carried it.
    Time O(T·(|P|·K + C)), memory O(T·(|P| + E)).
    """
    C = muc.shape[1]
    if linear:
        muc[:T] = 0.0
        ebuf[:] = 0.0
        lz = _linear_seq(phic, econst, cmax, eec, cls, dst, p_last, start, end, nd, nd_ptr, nd_src, root_pos,
                         P, K, T, muc, ebuf, A, X)
        if not np.isnan(lz):
            return lz
    for t in range(T):
        for c in range(C):
            muc[t, c] = 0.0
    ebuf[:] = 0.0
    return _log_seq(phic, econst, cls, dst, p_last, start, end, P, K, T, muc, ebuf)


@njit(cache=True, parallel=True)
def pattern_marginals(phi, econst, cls, cls_ptr, cls_pat, cls_label, dst, p_last, nd, nd_ptr, nd_src, root_pos, start,
                      end, allowed, offsets, n_chunks, linear=True):
    """log Z, label marginals, token pattern marginals and edge totals of the sparse model.

    With ``linear`` a sequence runs the scaled linear-space pass (:func:`_linear_seq`) and falls back
    to the log-space recursion when its potentials are too spread; without, always log space.

    Returns
    -------
    log_z : (B,)
    lab : (N, K) P(y_t = k)
    tok : (N, Zs) P(state pattern z ends at t)
    etot : (E,) Σ_t μ[t, e] over the batch (the linear pass counts the mass of a default edge on the
        non-default edge with the same patterns that carried it: ``incidence.T @ etot`` is unchanged)
    """
    B = offsets.shape[0] - 1
    N = phi.shape[0]
    Zs = phi.shape[1]
    K = start.shape[0]
    E = econst.shape[0]
    P = p_last.shape[0]
    C = cls_label.shape[0]
    cmax, eec, ok = edge_setup(econst)
    lin = linear and ok
    log_z = np.zeros(B)
    lab = np.zeros((N, K))
    tok = np.zeros((N, Zs))
    bufs = np.zeros((n_chunks, E))
    step = (B + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        maxT = 1
        for b in range(ch * step, min(B, (ch + 1) * step)):
            maxT = max(maxT, offsets[b + 1] - offsets[b])
        phic = np.empty((maxT, C))
        muc = np.empty((maxT, C))
        ebuf = np.empty(E)
        A = np.empty((maxT, E))
        X = np.empty(E)
        for b in range(ch * step, min(B, (ch + 1) * step)):
            o = offsets[b]
            T = offsets[b + 1] - o
            if T == 0:
                continue
            class_scores(phi, o, T, cls_ptr, cls_pat, cls_label, allowed, o, phic)
            lz = seq_marginals(phic, econst, cmax, eec, lin, cls, dst, p_last, start, end, nd, nd_ptr, nd_src, root_pos,
                               P, K, T, muc, ebuf, A, X)
            log_z[b] = lz
            if lz == _NEG:
                continue
            for e in range(E):
                bufs[ch, e] += ebuf[e]
            for t in range(T):
                n = o + t
                for c in range(C):
                    m = muc[t, c]
                    lab[n, cls_label[c]] += m
                    for j in range(cls_ptr[c], cls_ptr[c + 1]):
                        tok[n, cls_pat[j]] += m
    etot = np.zeros(E)
    for ch in range(n_chunks):
        for e in range(E):
            etot[e] += bufs[ch, e]
    return log_z, lab, tok, etot


@njit(cache=True, parallel=True)
def pattern_viterbi(phi, econst, cls, cls_ptr, cls_pat, cls_label, dst, p_last, nd, nd_ptr, nd_src, root_pos, start,
                    end, allowed, offsets):
    """Best score (B,) and best labels (N,) (-1 in infeasible sequences) of the sparse model."""
    B = offsets.shape[0] - 1
    N = phi.shape[0]
    K = start.shape[0]
    P = p_last.shape[0]
    C = cls_label.shape[0]
    best = np.zeros(B)
    labels = np.full(N, -1, np.int64)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        phic = np.empty((T, C))
        class_scores(phi, o, T, cls_ptr, cls_pat, cls_label, allowed, o, phic)
        psi = _edge_scores(phic, econst, cls, start, T, K)
        alpha = np.empty((T, P))
        bp = np.empty((T, P), np.int64)
        _forward(psi, dst, P, K, T, MAX, alpha, bp, np.empty(0))
        m, q = _final(alpha[T - 1], p_last, end, MAX)
        best[b] = m
        if m == _NEG:
            continue
        for t in range(T - 1, -1, -1):
            e = bp[t, q]
            labels[o + t] = e % K
            q = e // K
    return best, labels


@njit(cache=True, parallel=True)
def pattern_path(labels, dst, K, offsets):
    """Edge ids (N,) taken by the automaton on the given labels (the gold path)."""
    B = offsets.shape[0] - 1
    out = np.empty(labels.shape[0], np.int64)
    for b in prange(B):
        p = 0
        for n in range(offsets[b], offsets[b + 1]):
            e = p * K + labels[n]
            out[n] = e
            p = dst[e]
    return out


# ---------------------------------------------------------------------------------------------------
# dense expansion to d-tuples
# ---------------------------------------------------------------------------------------------------
@njit(cache=True, parallel=True)
def dense_unary(phi, wpat, suffix, tpat, pos, allowed, K):
    """Unary log-potentials (N, K**d) of the d-tuple expansion.

    ``suffix[k-1, s]``: pattern id of the length-k suffix of tuple s (-1 if not a pattern);
    ``tpat[s, y]``: pattern id of the (d+1)-gram s·y (-1 if none); ``pos[n]``: position in its sequence.
    unary[n, s] = Σ_{k ≤ min(d, pos+1)} (wpat[z_k] + phi[n, z_k]) minus, for 1 ≤ pos ≤ d-1, the
    stationary transition weight from the padded predecessor s // K (a (d+1)-gram out of range).
    """
    N = phi.shape[0]
    Zs = phi.shape[1]
    d = suffix.shape[0]
    S = suffix.shape[1]
    out = np.empty((N, S))
    for n in prange(N):
        tau = pos[n]
        kmax = min(d, tau + 1)
        for s in range(S):
            if not allowed[n, s % K]:
                out[n, s] = _NEG
                continue
            v = 0.0
            for k in range(kmax):
                z = suffix[k, s]
                if z >= 0:
                    v += wpat[z]
                    if z < Zs:
                        v += phi[n, z]
            if tau >= 1 and tau <= d - 1:
                z = tpat[s // K, s % K]
                if z >= 0:
                    v -= wpat[z]
            out[n, s] = v
    return out


@njit(cache=True)
def dense_collect(U, suffix, tpat, pos, K, Zs, Z):
    """Token pattern marginals (N, Zs), label marginals (N, K), pattern totals (Z,) of patterns up to
    length d (with the padded-transition correction) from the expanded unary marginals U (N, K**d)."""
    N = U.shape[0]
    d = suffix.shape[0]
    S = suffix.shape[1]
    tok = np.zeros((N, Zs))
    lab = np.zeros((N, K))
    tot = np.zeros(Z)
    for n in range(N):
        tau = pos[n]
        kmax = min(d, tau + 1)
        for s in range(S):
            u = U[n, s]
            if u == 0.0:
                continue
            lab[n, s % K] += u
            for k in range(kmax):
                z = suffix[k, s]
                if z >= 0:
                    tot[z] += u
                    if z < Zs:
                        tok[n, z] += u
            if tau >= 1 and tau <= d - 1:
                z = tpat[s // K, s % K]
                if z >= 0:
                    tot[z] -= u
    return tok, lab, tot
