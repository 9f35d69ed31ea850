"""Viterbi kernel of the super-label semi-Markov structure (model and layout:
:mod:`structlearn.engine.kernels.semimarkov_super`; arrays in, arrays out).

MAX semiring in log space (no exponentials: additions and comparisons only), with the same factored
transition stage as the forward: α*[s, k'] = max_i B[i, k'] + max_{k of state i} (α[s-1, k] + A[k, j']).
Segment sums are per-state prefix sums of (unary - inc) re-based at every block of D tokens, so they are
exact to ~1e-12 relative on long sequences; the per-token normaliser inc[t] = max_k α[t, k] keeps the
messages bounded.
"""
import numpy as np
from numba import njit, prange

from .semimarkov_super_steps import DENSE
from .semimarkov_window import NEG_INF, mark, sequence


@njit(cache=True, inline="always")
def _ufin(x):
    return 0.0 if x == NEG_INF else x


@njit(cache=True)
def _viterbi_seq(unary, start, end, open_end, mode, Tl, Al, has_a, Bl, b_vec, D, o, T, labels, starts):
    """Best segmentation of one sequence; returns its score (-inf if infeasible, labels left at -1)."""
    M = unary.shape[1]
    K = M * D
    P = np.zeros((M, T + 1))  # block-local Σ_{u<t} (unary[u, j] - inc[u])
    inc = np.zeros(T)
    ring = np.full((D, K), NEG_INF)  # α̂*[s] at slot s % D
    cur = np.full(K, NEG_INF)  # α̂[t]
    y = np.empty(K)
    blocked = np.full(M, -1, dtype=np.int64)
    best_l = np.ones(K, dtype=np.int64)
    ndense = T if mode == DENSE else 0
    arg_dense = np.zeros((ndense, K), dtype=np.int32)
    nfac = 0 if mode == DENSE else T
    midmax = np.full((nfac, M, M), NEG_INF)
    argk = np.zeros((nfac, M, M), dtype=np.int32)
    for a in range(0, T, D):
        lo = max(0, a - D + 1)
        for j in range(M):
            P[j, a] = 0.0
            for s in range(a - 1, lo - 1, -1):
                P[j, s] = P[j, s + 1] - (_ufin(unary[o + s, j]) - inc[s])
        for t in range(a, min(a + D, T)):
            slot = t % D
            # stage 1: α̂*[t]
            if t == 0:
                for k in range(K):
                    ring[slot, k] = start[k]
            elif mode == DENSE:
                for k in range(K):
                    y[k] = NEG_INF
                for k in range(K):
                    av = cur[k]
                    if av == NEG_INF:
                        continue
                    for kp in range(K):
                        v = av + Tl[k, kp]
                        if v > y[kp]:
                            y[kp] = v
                            arg_dense[t, kp] = k
                for k in range(K):
                    ring[slot, k] = y[k]
            else:
                r = t - 1
                for i in range(M):
                    for jp in range(M):
                        bv = NEG_INF
                        bk = i * D
                        for d in range(D):
                            k = i * D + d
                            v = cur[k] + Al[jp, k] if has_a else cur[k]
                            if v > bv:
                                bv = v
                                bk = k
                        midmax[r, i, jp] = bv
                        argk[r, i, jp] = bk
                for jp in range(M):
                    for d in range(D):
                        kp = jp * D + d
                        bv = NEG_INF
                        for i in range(M):
                            v = midmax[r, i, jp] + (Bl[0, kp] if b_vec else Bl[i, kp])
                            if v > bv:
                                bv = v
                        ring[slot, kp] = bv
            # stage 2: the labels ending at t
            last = open_end and t == T - 1
            mx = NEG_INF
            for j in range(M):
                x = unary[o + t, j]
                if x == NEG_INF:
                    blocked[j] = t
                dm = min(D, t + 1, t - blocked[j])
                for d in range(1, D + 1):
                    k = j * D + d - 1
                    v = NEG_INF
                    if last:
                        for ell in range(1, min(d, dm) + 1):
                            s = t - ell + 1
                            c = ring[s % D, k] + P[j, t] - P[j, s] + x
                            if c > v:
                                v = c
                                best_l[k] = ell
                    elif d <= dm:
                        s = t - d + 1
                        v = ring[s % D, k] + P[j, t] - P[j, s] + x
                    cur[k] = v
                    if v > mx:
                        mx = v
            ic = 0.0 if mx == NEG_INF else mx
            inc[t] = ic
            for k in range(K):
                cur[k] -= ic
            for j in range(M):
                P[j, t + 1] = P[j, t] + _ufin(unary[o + t, j]) - ic
    total = 0.0
    for t in range(T):
        total += inc[t]
    # trace back
    bv = NEG_INF
    k = -1
    for kk in range(K):
        v = cur[kk] + end[kk]
        if v > bv:
            bv = v
            k = kk
    if k < 0:
        return NEG_INF
    e = T - 1
    ell = best_l[k] if open_end else k % D + 1
    while True:
        s = e - ell + 1
        mark(labels, starts, o, s, e, k)
        if s == 0:
            break
        jp = k // D
        if mode == DENSE:
            k = arg_dense[s, k]
        else:
            bi = 0
            bb = NEG_INF
            for i in range(M):
                v = midmax[s - 1, i, jp] + (Bl[0, k] if b_vec else Bl[i, k])
                if v > bb:
                    bb = v
                    bi = i
            k = argk[s - 1, bi, jp]
        e = s - 1
        ell = k % D + 1
    return total + bv


@njit(cache=True, parallel=True)
def super_viterbi(unary, D, start, end, open_end, mode, Tl, Al, has_a, Bl, b_vec, offsets):
    """Best segmentation of every sequence of the super-label structure (MAX semiring).

    Parameters as :func:`structlearn.engine.kernels.semimarkov_super.super_forward`, in log space: Tl (K, K)
    the dense transition (DENSE), Al (M, K) = A transposed (read when ``has_a``), Bl (M, K) (row 0 when
    ``b_vec``).

    Returns
    -------
    best : (B,) best score (-inf if infeasible, 0 if empty); labels : (N,) int64 super-labels (-1 for
    infeasible sequences); starts : (N,) bool segment starts.

    Time O(N·(K + M·K)) factored, O(N·K²) dense; memory O(T·M²) (factored) or O(T·K) (dense) per sequence.
    """
    N, M = unary.shape
    B = offsets.shape[0] - 1
    best = np.zeros(B)
    labels = np.full(N, -1, dtype=np.int64)
    starts = np.zeros(N, dtype=np.bool_)
    for b in prange(B):
        o, T = sequence(offsets, b)
        if T == 0:
            continue
        best[b] = _viterbi_seq(unary, start, end, open_end, mode, Tl, Al, has_a, Bl, b_vec, D, o, T,
                               labels, starts)
    return best, labels, starts
