"""Numba kernels of the semi-Markov (segment) structure.

Arrays in, arrays out; no validation (that is done by :class:`structlearn.engine.structures.SemiMarkov`).
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

Time-varying transitions: every kernel that reads ``transition`` also takes ``tv`` (N, K, K) and
``tv_on`` (N,) bool; where ``tv_on[r]``, the boundary between a segment ending at row r and the next
starting at row r + 1 scores ``tv[r, k_i, k_{i+1}]`` instead of ``transition[k_i, k_{i+1}]`` (the linear
chain's row convention: row r is the step from token r to r + 1). Without them ``tv``, ``tv_on`` are
(0, 1, 1) / (0,) stand-ins (:data:`~structlearn.engine.kernels.semimarkov_window.NO_TV`) and the kernels run
the stationary passes unchanged. Such a boundary's K×K stage is exact in log space
(:func:`~structlearn.engine.kernels.semimarkov_window.reduce_row`).

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

The duration marginals of the LOG semiring without ``segment`` come with the scaled backward (each of
its window terms, times the forward's α̂* factor, is a segment posterior), so no pass replays the
forward's windows for them; with ``segment`` :func:`semimarkov_expectations` does.

The kernels are split along their seams: the segment window (one loop for every recursion) in
:mod:`~structlearn.engine.kernels.semimarkov_window`, the linear-space passes of the LOG semiring without
``segment`` (the fast path: forward, backward, expectations) in
:mod:`~structlearn.engine.kernels.semimarkov_scaled`, decoding (Viterbi trace, k-best, sampling, scoring) in :mod:`~structlearn.engine.kernels.semimarkov_decode`.
This module holds the log-space passes (MAX semiring, ``segment``) and the public forward, backward,
marginal and expectation kernels. Only O(N·K) arrays are stored; (N, D, K) is never materialised
unless the caller passes ``segment``.
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import LOG, MAX, reduce_pair
from .semimarkov_scaled import backward_pass, duration_factors, expectation_pass, forward_pass, transition_factors
from .semimarkov_window import (NEG_INF, normalise, reduce_row, sequence, table, varies, window, window_lse,
                                window_scratch)


# --------------------------------------------------------------------------------------------------
# forward / backward
# --------------------------------------------------------------------------------------------------
@njit(cache=True)
def _forward_seq(unary, durations, transition_t, tv, tv_on, start, segment, has_segment, o, T, semiring,
                 alpha, alpha_star, inc, bp_d, bp_j):
    """Normalised log-space forward of one sequence (LOG or MAX, any ``segment``); returns Σ_t inc[t]."""
    K = unary.shape[1]
    D = durations.shape[1]
    acc, _, v, mx, bd = window_scratch(D, K)
    at = np.empty(K)
    total = 0.0
    for t in range(T):
        # stage 1: α̂*[t, k] = ⊕_j α̂[t-1, j] + transition[j, k]
        if t == 0:
            for k in range(K):
                alpha_star[o, k] = start[k]
        else:
            own = varies(tv_on, o + t - 1)  # the boundary after token t-1 has its own matrix
            for k in range(K):
                if own:
                    alpha_star[o + t, k], arg = reduce_row(semiring, alpha, o + t - 1, tv, o + t - 1,
                                                           k, K, True)
                else:
                    alpha_star[o + t, k], arg = reduce_pair(semiring, alpha[o + t - 1],
                                                            transition_t[k], K)
                if semiring == MAX:
                    bp_j[o + t, k] = arg
        # stage 2: α̂[t, k] ∝ ⊕_d α̂*[t-d+1, k] + w(t-d+1, t, k) - Σ_{u=t-d+1..t-1} inc[u]
        dmax = min(D, t + 1)
        window(unary, durations, segment, has_segment, inc, alpha_star, alpha_star, True, False, False,
               o, T, t, dmax, True, 0, K, acc, v, v, mx, bd)
        for k in range(K):
            if semiring == MAX:
                bp_d[o + t, k] = bd[k]
                at[k] = mx[k]
            else:
                at[k] = window_lse(v, dmax, k, mx[k])
        total += normalise(at, alpha, inc, o, t, K)
    return total


@njit(cache=True, parallel=True)
def semimarkov_forward(unary, durations, transition, tv, tv_on, start, end, segment, has_segment,
                       offsets, semiring):
    """Normalised forward pass in the LOG or MAX semiring.

    Parameters
    ----------
    unary : (N, K) float64; durations : (4, D, K) float64 (tables MIDDLE, FIRST, LAST, SINGLE);
    transition : (K, K) float64 ("from, to"); tv : (N, K, K) float64, tv_on : (N,) bool time-varying
    transitions (or the (0, 1, 1) / (0,) stand-ins; module docstring); start, end : (K,) float64;
    segment : (N, D, K) float64 (read only when ``has_segment``; else any (1, 1, 1) array);
    offsets : (B + 1,) int64; semiring : LOG or MAX.

    Returns
    -------
    alpha : (N, K) α̂[e, k]; alpha_star : (N, K) α̂*[s, k]; inc : (N,) per-token normalisers;
    log_z : (B,) log Z (LOG) or best score (MAX), 0 for an empty sequence, -inf if infeasible;
    z_fin : (B,) ⊕_k α̂[T-1, k] + end[k];
    bp_d : (N, K) int32 best duration of α (MAX only, else (0, K));
    bp_j : (N, K) int32 best previous label of α* (MAX only, else (0, K)).

    The LOG semiring without ``segment`` runs the scaled pass
    (:func:`~structlearn.engine.kernels.semimarkov_scaled.forward_pass`). Time O(N·(D·K + K²)), memory O(N·K).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    alpha = np.empty((N, K))
    alpha_star = np.empty_like(alpha)
    inc = np.zeros(N)
    log_z = np.zeros(B)  # 0 for empty sequences
    z_fin = np.zeros_like(log_z)
    nbp = N if semiring == MAX else 0
    bp_d = np.zeros((nbp, K), dtype=np.int32)
    bp_j = np.zeros((nbp, K), dtype=np.int32)
    transition_t = np.ascontiguousarray(transition.T)
    linear = semiring != MAX and not has_segment
    ed, mdur = duration_factors(durations)
    ec, cmax, _, _ = transition_factors(transition)
    for b in prange(B):
        o, T = sequence(offsets, b)
        if T == 0:
            continue
        if linear:
            total = forward_pass(unary, durations, ed, mdur, transition_t, ec, cmax, tv, tv_on, start, o,
                                 T, alpha, alpha_star, inc)
        else:
            total = _forward_seq(unary, durations, transition_t, tv, tv_on, start, segment, has_segment,
                                 o, T, semiring, alpha, alpha_star, inc, bp_d, bp_j)
        # log Z = Σ_t inc[t] + ⊕_k α̂[T-1, k] + end[k]
        zf = reduce_pair(semiring, alpha[o + T - 1], end, K)[0]
        log_z[b] = NEG_INF if zf == NEG_INF else total + zf
        z_fin[b] = zf
    return alpha, alpha_star, inc, log_z, z_fin, bp_d, bp_j


@njit(cache=True)
def _backward_seq(unary, durations, transition, tv, tv_on, end, segment, has_segment, o, T, inc, z_fin,
                  beta_end, beta_start):
    """Normalised log-space LOG backward of one sequence (any ``segment``)."""
    K = unary.shape[1]
    D = durations.shape[1]
    acc, _, v, mx, bd = window_scratch(D, K)
    for t in range(T - 1, -1, -1):
        # stage 1: β̂_end[t, k] = ⊕_j transition[k, j] + β̂_start[t+1, j]
        own = t < T - 1 and varies(tv_on, o + t)
        for k in range(K):
            if t == T - 1:
                beta_end[o + t, k] = end[k] - z_fin
            elif own:
                beta_end[o + t, k] = reduce_row(LOG, beta_start, o + t + 1, tv, o + t, k, K, False)[0]
            else:
                beta_end[o + t, k] = reduce_pair(LOG, beta_start[o + t + 1], transition[k], K)[0]
        # stage 2: β̂_start[t, k] = ⊕_d w(t, t+d-1, k) - Σ_{u=t..t+d-1} inc[u] + β̂_end[t+d-1, k]
        dmax = min(D, T - t)
        window(unary, durations, segment, has_segment, inc, beta_end, beta_end, False, True, False, o,
               T, t, dmax, False, 0, K, acc, v, v, mx, bd)
        for k in range(K):
            beta_start[o + t, k] = window_lse(v, dmax, k, mx[k]) - inc[o + t]


@njit(cache=True, parallel=True)
def semimarkov_backward(unary, durations, transition, tv, tv_on, end, segment, has_segment, offsets,
                        inc, z_fin, alpha_star):
    """Backward pass (LOG semiring) normalised by the forward's ``inc`` and ``z_fin``:
    ``beta_end`` (N, K) β̂_end[e, k] and ``beta_start`` (N, K) β̂_start[s, k] of the module
    docstring; -inf rows for infeasible sequences (z_fin = -inf). Without ``segment`` it runs the
    scaled pass (:func:`~structlearn.engine.kernels.semimarkov_scaled.backward_pass`), which also returns
    ``duration_marginals`` (B, 4, D, K) (the expected segments per table, duration and label, from the
    forward's ``alpha_star``); with ``segment`` that array is empty (B, 0, 0, 0) (see
    :func:`semimarkov_expectations`). Time O(N·(D·K + K²)), memory O(N·K)."""
    N, K = unary.shape
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    beta_end = np.empty((N, K))
    beta_start = np.empty((N, K))
    ed, mdur = duration_factors(durations)
    _, _, er, rmax = transition_factors(transition)
    nd = 0 if has_segment else D
    dm = np.zeros((B, 4, K, nd))
    for b in prange(B):
        o, T = sequence(offsets, b)
        if T == 0:
            continue
        if z_fin[b] == NEG_INF:
            for t in range(T):
                for k in range(K):
                    beta_end[o + t, k] = NEG_INF
                    beta_start[o + t, k] = NEG_INF
        elif has_segment:
            _backward_seq(unary, durations, transition, tv, tv_on, end, segment, has_segment, o, T, inc,
                          z_fin[b], beta_end, beta_start)
        else:
            backward_pass(unary, durations, ed, mdur, transition, er, rmax, tv, tv_on, end, o, T, inc,
                          z_fin[b], beta_end, beta_start, alpha_star, dm[b], True)
    return beta_end, beta_start, np.ascontiguousarray(dm.transpose(0, 1, 3, 2))


# --------------------------------------------------------------------------------------------------
# marginals and expectations
# --------------------------------------------------------------------------------------------------
@njit(cache=True, parallel=True)
def semimarkov_marginals(unary, transition, tv, tv_on, alpha, alpha_star, beta_end, beta_start, z_fin,
                         offsets, edge_rows=True):
    """Token and transition marginals from the normalised messages.

    ``token[n, k]`` = P(token n lies in a k-segment) = Σ_{s<=n} P(k-segment starts at s)
    - Σ_{e<n} P(k-segment ends at e) (segments of one label are disjoint and ordered), with
    P(start at s) = exp(α̂*[s, k] + β̂_start[s, k]) and P(end at e) = exp(α̂[e, k] + β̂_end[e, k]);
    clipped to [0, 1] and exactly 0 where ``unary`` is -inf.
    ``edge[n, i, j]`` = P(an i-segment ends at n and a j-segment starts at n+1)
    = exp(α̂[n, i] + transition[i, j] + β̂_start[n+1, j]) (``tv[n, i, j]`` where ``tv_on[n]``); 0 on the
    last row of a sequence. With
    ``edge_rows=False`` ``edge`` is (B, K, K), the sum over the rows of each sequence (memory
    O(B·K²) instead of O(N·K²)). Infeasible sequences (z_fin = -inf) get all-zero rows. Time
    O(N·K²).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    token = np.zeros((N, K))
    edge = np.zeros((N if edge_rows else B, K, K))
    for b in prange(B):
        o, T = sequence(offsets, b)
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
                row = r if edge_rows else np.int64(b)
                own = varies(tv_on, r)
                for i in range(K):
                    ai = alpha[r, i]
                    if ai == NEG_INF:
                        continue
                    for j in range(K):
                        tij = tv[r, i, j] if own else transition[i, j]
                        edge[row, i, j] += math.exp(ai + tij + beta_start[r + 1, j])
    return token, edge


@njit(cache=True, parallel=True)
def semimarkov_expectations(unary, durations, transition, tv, tv_on, start, end, segment, has_segment,
                            offsets, alpha, alpha_star, inc, beta_end, beta_start, z_fin):
    """Expected score and duration marginals per sequence.

    Returns
    -------
    expected_score : (B,) E[score(y)] under the posterior (terms with zero probability skipped, so
        -inf potentials never give NaN); 0 for empty or infeasible sequences.
    duration_marginals : (B, 4, D, K) expected number of k-segments of length d scored by duration
        table c (MIDDLE, FIRST, LAST, SINGLE).

    Time O(N·(D·K + K²)): every segment's probability is visited once (without ``segment``, as a
    product of the forward's window factors: the scaled forward pass in its expectation mode).
    """
    N, K = unary.shape
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    expected = np.zeros(B)
    dmarg = np.zeros((B, 4, D, K))
    ed, mdur = duration_factors(durations)
    for b in prange(B):
        o, T = sequence(offsets, b)
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
            own = varies(tv_on, r)
            for i in range(K):
                for j in range(K):
                    tij = tv[r, i, j] if own else transition[i, j]
                    p = math.exp(alpha[r, i] + tij + beta_start[r + 1, j])
                    if p > 0.0:
                        es += p * tij
        if not has_segment:
            expected[b] = es + expectation_pass(unary, durations, ed, mdur, o, T, alpha_star, inc,
                                                beta_end, dmarg[b])
            continue
        acc, w, v, mx, bd = window_scratch(D, K)
        for e in range(T):
            dmax = min(D, e + 1)
            window(unary, durations, segment, True, inc, alpha_star, beta_end, True, True, True, o, T,
                   e, dmax, True, 0, K, acc, w, v, mx, bd)
            ie = inc[o + e]
            for d in range(1, dmax + 1):
                c = table(e - d + 1, e, T)
                for k in range(K):
                    p = math.exp(v[d - 1, k] - ie)
                    if p > 0.0:
                        es += p * w[d - 1, k]
                        dmarg[b, c, d - 1, k] += p
        expected[b] = es
    return expected, dmarg


@njit(cache=True, parallel=True)
def semimarkov_segment_marginals(unary, durations, segment, has_segment, offsets, alpha_star, inc,
                                 beta_end, z_fin):
    """Dense segment marginals (N, D, K): ``out[e, d-1, k]`` = P(a k-segment covers [e-d+1, e])
    = exp(α̂*[s, k] + w(s, e, k) - Σ_{u=s..e} inc[u] + β̂_end[e, k]). Time and memory O(N·D·K)."""
    N, K = unary.shape
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    out = np.zeros((N, D, K))
    for b in prange(B):
        o, T = sequence(offsets, b)
        if T == 0 or z_fin[b] == NEG_INF:
            continue
        acc, _, v, mx, bd = window_scratch(D, K)
        for e in range(T):
            dmax = min(D, e + 1)
            window(unary, durations, segment, has_segment, inc, alpha_star, beta_end, True, True, False,
                   o, T, e, dmax, True, 0, K, acc, v, v, mx, bd)
            for d in range(dmax):
                for k in range(K):
                    out[o + e, d, k] = math.exp(v[d, k] - inc[o + e])
    return out


@njit(cache=True)
def semimarkov_segments_above(unary, durations, segment, has_segment, o, T, e_lo, e_hi, alpha_star,
                              inc, beta_end, zf, threshold):
    """Segments of one sequence (rows o … o+T-1) ending in [e_lo, e_hi) whose marginal exceeds
    ``threshold``: arrays start, end (local, inclusive), label (int64) and prob (float64), ordered by
    end, then duration, then label. Two passes (count, fill); memory O(#hits + D·K)."""
    K = unary.shape[1]
    D = durations.shape[1]
    acc, _, v, mx, bd = window_scratch(D, K)
    starts = np.empty(0, dtype=np.int64)
    ends = np.empty(0, dtype=np.int64)
    labels = np.empty(0, dtype=np.int64)
    probs = np.empty(0)
    if zf == NEG_INF:
        return starts, ends, labels, probs
    for sweep in range(2):
        n = 0
        for e in range(e_lo, e_hi):
            dmax = min(D, e + 1)
            window(unary, durations, segment, has_segment, inc, alpha_star, beta_end, True, True, False,
                   o, T, e, dmax, True, 0, K, acc, v, v, mx, bd)
            for d in range(1, dmax + 1):
                for k in range(K):
                    p = math.exp(v[d - 1, k] - inc[o + e])
                    if p > threshold:
                        if sweep == 1:
                            starts[n] = e - d + 1
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
