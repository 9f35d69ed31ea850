"""Decoding kernels of the semi-Markov structure: Viterbi trace, k-best, posterior sampling and
scoring (model and messages: :mod:`structlearn.engine.kernels.semimarkov`; arrays in, arrays out). Every
kernel that reads ``transition`` also takes the time-varying ``tv`` (N, K, K), ``tv_on`` (N,) of that
module's docstring: the boundary after row r scores ``tv[r]`` where ``tv_on[r]``.
"""
import math

import numpy as np
from numba import njit, prange

from .semimarkov_window import NEG_INF, mark, sequence, table, varies, window, window_scratch


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
        o, T = sequence(offsets, b)
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
            mark(labels, starts, o, s, e, k)
            if s == 0:
                break
            k = bp_j[o + s, k]
            e = s - 1
    return labels, starts


@njit(cache=True, inline="always")
def _merge(lists, base, step, add, n, kk, head, val, src, rank):
    """Top-kk merge of n lists sorted in descending order: list i is lists[base + step·i, :] + add[i].
    Writes the r-th best value, its list i and rank in that list into val[r], src[r], rank[r] and
    returns how many there are (fewer than kk when the lists run out)."""
    for i in range(n):
        head[i] = 0
    for r in range(kk):
        best = NEG_INF
        bi = -1
        for i in range(n):
            h = head[i]
            if h < kk:
                v = lists[base + step * i, h] + add[i]
                if v > best:
                    best = v
                    bi = i
        if bi < 0:
            return r
        val[r] = best
        src[r] = bi
        rank[r] = head[bi]
        head[bi] += 1
    return kk


@njit(cache=True)
def _kbest_seq(unary, durations, transition, tv, tv_on, start, end, segment, has_segment, o, T, kk,
               labels, starts, scores, b, zeros):
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
    acc, w, wv, wmx, wbd = window_scratch(D, K)
    for t in range(T):
        if t == 0:
            for k in range(K):
                S[0, k, 0] = start[k]
        else:
            # S[t, k, :] = top-kk of {A[t-1, j, r] + transition[j, k]}: K-way merge of sorted lists
            own = varies(tv_on, o + t - 1)
            for k in range(K):
                for j in range(K):
                    head[j] = 0
                for r in range(kk):
                    best = NEG_INF
                    bj = -1
                    for j in range(K):
                        if head[j] < kk:
                            v = A[t - 1, j, head[j]] + (tv[o + t - 1, j, k] if own
                                                        else transition[j, k])
                            if v > best:
                                best = v
                                bj = j
                    if bj < 0:
                        break
                    S[t, k, r] = best
                    S_j[t, k, r] = bj
                    S_r[t, k, r] = head[bj]
                    head[bj] += 1
        # A[t, k, :] = top-kk of {S[t-d+1, k, r] + w(t-d+1, t, k)}: D-way merge (A_d holds d - 1)
        dmax = min(D, t + 1)
        window(unary, durations, segment, has_segment, zeros, A[0], A[0], False, False, True, o, T, t,
               dmax, True, 0, K, acc, w, wv, wmx, wbd)
        for k in range(K):
            for d in range(dmax):
                head[d] = 0
            for r in range(kk):
                best = NEG_INF
                bd = -1
                for d in range(dmax):
                    h = head[d]
                    if h < kk:
                        v = S[t - d, k, h] + w[d, k]
                        if v > best:
                            best = v
                            bd = d
                if bd < 0:
                    break
                A[t, k, r] = best
                A_d[t, k, r] = bd
                A_r[t, k, r] = head[bd]
                head[bd] += 1
    # final: top-kk of {A[T-1, k, r] + end[k]}, then trace each back
    last_k = np.zeros(kk, dtype=np.int32)
    last_r = np.zeros(kk, dtype=np.int32)
    n = _merge(A[T - 1], 0, 1, end, K, kk, head, scores[b], last_k, last_r)
    for r in range(n):
        k = last_k[r]
        rr = last_r[r]
        e = T - 1
        while True:
            d = A_d[e, k, rr] + 1
            r2 = A_r[e, k, rr]
            s = e - d + 1
            mark(labels[r], starts[r], o, s, e, k)
            if s == 0:
                break
            k2 = S_j[s, k, r2]
            rr = S_r[s, k, r2]
            k = k2
            e = s - 1


@njit(cache=True, parallel=True)
def semimarkov_kbest(unary, durations, transition, tv, tv_on, start, end, segment, has_segment, offsets,
                     kk):
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
    zeros = np.zeros(N)  # the window's normalisers (k-best works on unnormalised scores)
    for b in prange(B):
        o, T = sequence(offsets, b)
        if T == 0:
            scores[b, 0] = 0.0
            continue
        _kbest_seq(unary, durations, transition, tv, tv_on, start, end, segment, has_segment, o, T, kk,
                   labels, starts, scores, b, zeros)
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
def semimarkov_sample(unary, durations, transition, tv, tv_on, start, end, segment, has_segment, offsets,
                      alpha, alpha_star, inc, uniforms):
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
        o, T = sequence(offsets, b)
        if T == 0:
            continue
        wts = np.empty(max(D, K))
        acc, _, v, mx, bd = window_scratch(D, K)
        for i in range(n_samples):
            ui = 2 * o + b
            for k in range(K):
                wts[k] = alpha[o + T - 1, k] + end[k]
            k = _draw(wts, K, uniforms[i, ui])
            ui += 1
            e = T - 1
            while True:
                dmax = min(D, e + 1)
                window(unary, durations, segment, has_segment, inc, alpha_star, alpha_star, True,
                       False, False, o, T, e, dmax, True, k, k + 1, acc, v, v, mx, bd)
                for d in range(dmax):
                    wts[d] = v[d, k]
                d = _draw(wts, dmax, uniforms[i, ui]) + 1
                ui += 1
                s = e - d + 1
                mark(labels[i], starts[i], o, s, e, k)
                if s == 0:
                    break
                own = varies(tv_on, o + s - 1)
                for j in range(K):
                    wts[j] = alpha[o + s - 1, j] + (tv[o + s - 1, j, k] if own else transition[j, k])
                k = _draw(wts, K, uniforms[i, ui])
                ui += 1
                e = s - 1
    return labels, starts


@njit(cache=True, parallel=True)
def semimarkov_score(unary, durations, transition, tv, tv_on, start, end, segment, has_segment, offsets,
                     segs, seg_offsets):
    """Score of given segmentations: ``segs`` (S, 3) int64 rows (start, end inclusive, label), local
    to their sequence, sequence b owning rows ``seg_offsets[b]:seg_offsets[b + 1]`` (validated to
    tile the sequence). A segment longer than D scores -inf. Returns (B,). Time O(N + S)."""
    D = durations.shape[1]
    B = offsets.shape[0] - 1
    out = np.zeros(B)
    for b in prange(B):
        o, T = sequence(offsets, b)
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
            w = durations[table(s, e, T), d - 1, k]
            for u in range(s, e + 1):
                w += unary[o + u, k]
            if has_segment:
                w += segment[o + e, d - 1, k]
            total += w
            if prev < 0:
                total += start[k]
            elif varies(tv_on, o + s - 1):
                total += tv[o + s - 1, prev, k]
            else:
                total += transition[prev, k]
            prev = k
        if prev >= 0 and total > NEG_INF:
            total += end[prev]
        out[b] = total
    return out
