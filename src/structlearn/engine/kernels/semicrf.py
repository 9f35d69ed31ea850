"""Numba kernels of the semi-Markov CRF: the training objective (log Z and all expected feature statistics in
one fused forward–backward pass) and the feature model's kernels (arrays in, arrays out; no validation).

A k-segment [s, e] (d = e - s + 1 <= L_k, the label's longest segment) scores (Sarawagi & Cohen 2004,
"Semi-Markov conditional random fields", eqs. 3–5)::

    w(s, e, k) = Σ_{u=s..e} unary[u, k] + dur[d-1, k] + begin[s, k] + last[e, k]
               + span_w[span_id[e, d-1], k]   (if span_id >= 0)
               + caps_w[k] · caps[e, d-1]

and a segmentation start[k_1] + Σ_i w_i + Σ_i trans[k_i, k_{i+1}] + end[k_m]. ``begin`` / ``last``
are the token attributes of a segment's first / last token (the linear chain's B- / E- tag features),
``span`` / ``caps`` are looked up on the fly, so no (N, D, K) array is ever built.

Recursions (log space; α* / β_start at segment starts, α / β_end at segment ends)::

    α*[0, k] = start[k];   α*[s, k] = log Σ_j exp(α[s-1, j] + trans[j, k])
    α[e, k]  = log Σ_{d=1..min(L_k, e+1)} exp(α*[e-d+1, k] + w(e-d+1, e, k))
    log Z    = log Σ_k exp(α[T-1, k] + end[k])
    β_end[T-1, k] = end[k];   β_end[e, k] = log Σ_j exp(trans[k, j] + β_start[e+1, j])

The forward keeps the normalised window terms r[e, d-1, k] = exp(α*[s, k] + w(s, e, k) - α[e, k])
(a (T, D, K) buffer per block of sequences, never (N, D, K)); the window is the engine's
(:func:`structlearn.engine.kernels.semimarkov_window.window` with the feature tuple as its segment term and
each label's own L_k); the backward then works with posteriors
and needs one exp per (token, label) instead of one per (token, length, label)::

    P(k ends at e)       = exp(α[e, k] + β_end[e, k] - log Z)
    P(k-segment [s, e])  = r[e, e-s, k] · P(k ends at e)
    P(k starts at s)     = Σ_e P(k-segment [s, e]);   β_start[s, k] = log P(k starts at s) - α*[s, k] + log Z
    P(j -> k at s)       = exp(α[s-1, j] + trans[j, k] + β_start[s, k] - log Z)

(posteriors below ~1e-300 underflow to 0, which only drops terms of that size).

Observation-conditioned transitions (time-varying, the engine's ``tv`` (N, K, K) / ``tv_on`` (N,) of
:mod:`structlearn.engine.kernels.semimarkov`): the boundary after token row r (a segment ending at r, the next
starting at r + 1) scores ``tv[r, j, k]`` where ``tv_on[r]``, else ``trans[j, k]``. Such a boundary's
α* / β_end stage is exact in log space
(:func:`~structlearn.engine.kernels.semimarkov_window.reduce_row`) and its transition posteriors are also
written to ``edge_rows[r]`` (the statistics of the transition-attribute weights).

The K×K transition sums of α* and β_end are the semi-Markov engine's transition stage
(:func:`structlearn.engine.kernels.semimarkov_scaled.stage1_lin`: linear space, one exp per label and token,
exact log-space fallback when a sum is tiny, so -inf transitions (``allow_same_label=False``) never
produce NaN); the transition posteriors use exp(trans - max) likewise, in log space when a scale would
overflow. Window sums over d use L_k exps per
(token, label), in the forward only. Time O(N·(Σ_k L_k + K²)), memory O(N·K) + O(T_max·D·K) per
block; parallel over blocks of sequences, each block with its own accumulators (summed at the end,
deterministic for a given block count).
Messages are not rescaled: meant for sentences (a few thousand tokens at most), not for 10⁵-token
sequences (use :class:`structlearn.engine.structures.SemiMarkov` there).

The second half of the module holds the kernels of the semi-CRF feature model
(:mod:`structlearn.crf._semi_markov_potentials`): span hashes and all-caps spans, the dense segment potentials and
their statistics (engine path), and the fused "state"/"first"/"last" potentials and gradient.
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import LOG, reduce_pair
from .semimarkov_scaled import stage1_lin, transition_factors
from .semimarkov_window import reduce_row, varies, window, window_scratch

NEG_INF = -np.inf

@njit(cache=True)
def _seq_pass(unary, segment, dur4, zeros, maxlen, trans, expT, tmax, stage, tv, tv_on, start, end, o, T,
              alpha, astar, bstart, token, g_first, g_last, edge, edge_rows, g_dur, g_start, g_end, g_span,
              g_caps, scratch, vbuf, wbuf, bend, r):
    """One sequence: forward, then a backward pass that produces the posteriors directly, accumulating
    the expected statistics (block buffers ``edge``, ``g_dur``, ``g_start``, ``g_end``, ``g_span``,
    ``g_caps``; per-token rows of ``token``, ``g_first``, ``g_last`` and, at boundaries with their own
    matrix ``tv[r]``, ``edge_rows[r]`` written). Returns log Z.

    The forward keeps r[e, d-1, k] = P(the k-segment ending at e has length d | one ends there)
    (``r`` is a (T, D, K) block buffer), so the backward needs one exp per (token, label):
    P(k-segment [s, e]) = r[e, e-s, k] · P(a k-segment ends at e), P(k-segment starts at s) = Σ_e of
    those, β_start[s, k] = log P(starts at s) - α*[s, k] + log Z."""
    K = unary.shape[1]
    trans_t, ec, cmax, er, rmax = stage
    span_id, caps, use_span, use_caps = segment[2], segment[4], segment[6] != 0, segment[7] != 0
    acc, wv, vv, mx, bd = scratch
    lmax = 0
    for k in range(K):
        lmax = max(lmax, maxlen[k])
    # ---- forward
    for t in range(T):
        n = o + t
        if t == 0:
            for k in range(K):
                astar[n, k] = start[k]
        elif varies(tv_on, n - 1):  # this boundary's own matrix tv[n - 1]
            for k in range(K):
                astar[n, k] = reduce_row(LOG, alpha, n - 1, tv, n - 1, k, K, True)[0]
        else:  # α*[s, k] = log Σ_j exp(α[s-1, j] + trans[j, k]): the engine's transition stage
            stage1_lin(alpha[n - 1], trans_t, ec, cmax, astar[n], K, vbuf)
        # α[e, k] = log Σ_d exp(α*[e-d+1, k] + w(e-d+1, e, k)): the engine's window (label k up to
        # its own L_k); r = the normalised terms
        window(unary, dur4, segment, True, zeros, astar, astar, True, False, False, o, T, t,
               min(lmax, t + 1), True, 0, K, acc, wv, vv, mx, bd, maxlen)
        for k in range(K):
            L = min(maxlen[k], t + 1)
            m = mx[k]
            if m == NEG_INF:
                alpha[n, k] = NEG_INF
                for d in range(L):
                    r[t, d, k] = 0.0
                continue
            sm = 0.0
            for d in range(L):
                x = math.exp(vv[d, k] - m)
                r[t, d, k] = x
                sm += x
            inv = 1.0 / sm
            for d in range(L):
                r[t, d, k] *= inv
            alpha[n, k] = m + math.log(sm)
    log_z = reduce_pair(LOG, alpha[o + T - 1], end, K)[0]
    for t in range(T):
        for k in range(K):
            token[o + t, k] = 0.0
            g_first[o + t, k] = 0.0
            g_last[o + t, k] = 0.0
    if not log_z > NEG_INF:
        return log_z
    # ---- backward, producing posteriors
    for t in range(T - 1, -1, -1):
        n = o + t
        # β_end[n, k] = log Σ_j exp(trans[k, j] + β_start[n+1, j])
        if t == T - 1:
            for k in range(K):
                bend[k] = end[k]
        elif varies(tv_on, n):
            for k in range(K):
                bend[k] = reduce_row(LOG, bstart, n + 1, tv, n, k, K, False)[0]
        else:
            stage1_lin(bstart[n + 1], trans, er, rmax, bend, K, wbuf)
        # P(a k-segment ends at n)
        for k in range(K):
            x = alpha[n, k] + bend[k] - log_z
            g_last[n, k] = math.exp(x) if x > NEG_INF else 0.0
        # segments starting at n: P([n, e], k) = r[e, e-n, k] · P(k ends at e)
        for k in range(K):
            L = min(maxlen[k], T - t)
            ps = 0.0
            for d in range(1, L + 1):
                e = n + d - 1
                p = r[t + d - 1, d - 1, k] * g_last[e, k]
                if p == 0.0:
                    continue
                ps += p
                if t + d < T:
                    token[e + 1, k] -= p   # difference array: +p at n, -p after e
                g_dur[d - 1, k] += p
                if use_span:
                    sid = span_id[e, d - 1]
                    if sid >= 0:
                        g_span[sid, k] += p
                if use_caps and caps[e, d - 1]:
                    g_caps[k] += p
            token[n, k] += ps
            g_first[n, k] = ps
            bstart[n, k] = math.log(ps) - astar[n, k] + log_z if ps > 0.0 else NEG_INF
        # transitions into a segment starting at n: P = exp(α[n-1, j] + trans[j, k] + β_start[n, k] - log Z)
        if t > 0 and varies(tv_on, n - 1):
            for j in range(K):
                if alpha[n - 1, j] == NEG_INF:
                    continue
                for k in range(K):
                    p = math.exp(alpha[n - 1, j] + tv[n - 1, j, k] + bstart[n, k] - log_z)
                    edge[j, k] += p
                    edge_rows[n - 1, j, k] = p
        elif t > 0:
            ma = NEG_INF
            for j in range(K):
                if alpha[n - 1, j] > ma:
                    ma = alpha[n - 1, j]
            mb = NEG_INF
            for k in range(K):
                if bstart[n, k] > mb:
                    mb = bstart[n, k]
            if ma == NEG_INF or mb == NEG_INF:
                continue
            sc = ma + tmax + mb - log_z
            if sc < 700.0:
                f = math.exp(sc)
                for j in range(K):
                    vbuf[j] = math.exp(alpha[n - 1, j] - ma)
                for k in range(K):
                    wbuf[k] = math.exp(bstart[n, k] - mb) * f
                for j in range(K):
                    vj = vbuf[j]
                    if vj == 0.0:
                        continue
                    for k in range(K):
                        edge[j, k] += vj * expT[j, k] * wbuf[k]
            else:
                for j in range(K):
                    for k in range(K):
                        edge[j, k] += math.exp(alpha[n - 1, j] + trans[j, k] + bstart[n, k] - log_z)
    for k in range(K):
        g_start[k] += g_first[o, k]
        g_end[k] += g_last[o + T - 1, k]
    for t in range(1, T):
        for k in range(K):
            token[o + t, k] += token[o + t - 1, k]
    return log_z


@njit(cache=True, parallel=True)
def semicrf_expectations(unary, begin, last, dur, maxlen, trans, start, end, span_id, span_w, caps,
                         caps_w, use_span, use_caps, offsets, blocks, n_spans, tv, tv_on):
    """log Z and expected statistics of a packed batch of sequences.

    Parameters
    ----------
    unary, begin, last : float64 (N, K)
        Per-token label scores summed over a segment / of its first token / of its last token.
    dur : float64 (D, K); maxlen : int64 (K,), 1 <= maxlen[k] <= D
    trans : float64 (K, K) ("from, to"; -inf forbids); start, end : float64 (K,)
    span_id : int64 (N, D) or dummy; span_w : float64 (S, K); caps : bool (N, D) or dummy;
    caps_w : float64 (K,); use_span, use_caps : bool
    offsets : int64 (B + 1,); blocks : int64 (C + 1,) sequence boundaries of the parallel blocks
    n_spans : int, S
    tv : float64 (N, K, K), tv_on : bool (N,)
        Time-varying transitions (the boundary after row r scores ``tv[r]`` where ``tv_on[r]``), or the
        (0, 1, 1) / (0,) stand-ins :data:`~structlearn.engine.kernels.semimarkov_window.NO_TV`, ``NO_TV_ON``.

    Returns
    -------
    log_z (B,), token (N, K) segment-label occupancy, first (N, K) / last (N, K) expected segment
    starts / ends, edge (K, K), dur (D, K), start (K,), end (K,), span (S, K), caps (K,),
    edge_rows (N, K, K) the transition posteriors of the boundaries with ``tv_on`` (0 elsewhere; (0, K, K)
    without time-varying transitions)
    """
    N, K = unary.shape
    D = dur.shape[0]
    B = offsets.shape[0] - 1
    C = blocks.shape[0] - 1
    tmax = NEG_INF
    for j in range(K):
        for k in range(K):
            if trans[j, k] > tmax:
                tmax = trans[j, k]
    if tmax == NEG_INF:
        tmax = 0.0
    expT = np.empty((K, K))
    for j in range(K):
        for k in range(K):
            expT[j, k] = math.exp(trans[j, k] - tmax)
    ec, cmax, er, rmax = transition_factors(trans)
    stage = (np.ascontiguousarray(trans.T), ec, cmax, er, rmax)
    alpha = np.empty((N, K))
    astar = np.empty((N, K))
    bstart = np.empty((N, K))
    token = np.empty((N, K))
    g_first = np.empty((N, K))
    g_last = np.empty((N, K))
    log_z = np.zeros(B)
    edge = np.zeros((C, K, K))
    g_dur = np.zeros((C, D, K))
    g_start = np.zeros((C, K))
    g_end = np.zeros((C, K))
    S = n_spans if use_span else 0
    g_span = np.zeros((C, S, K))
    g_caps = np.zeros((C, K))
    edge_rows = np.zeros((N if tv_on.shape[0] > 0 else 0, K, K))
    dur4 = np.empty((4, D, K))  # one duration table for all four boundary cases
    for c in range(4):
        dur4[c] = dur
    zeros = np.zeros(N)  # the window's per-token normaliser: none (messages are not rescaled)
    span_z = np.zeros((S + 1, K))  # the span weights and a row of zeros for "no span feature" (-1)
    span_z[:S] = span_w[:S]
    segment = (begin, last, span_id, span_z, caps, caps_w, np.int64(use_span), np.int64(use_caps))
    for c in prange(C):
        scratch = window_scratch(D, K)
        vbuf = np.empty(K)
        wbuf = np.empty(K)
        bend = np.empty(K)
        Tmax = 0
        for b in range(blocks[c], blocks[c + 1]):
            Tmax = max(Tmax, offsets[b + 1] - offsets[b])
        r = np.empty((Tmax, D, K))
        for b in range(blocks[c], blocks[c + 1]):
            o = offsets[b]
            T = offsets[b + 1] - o
            if T == 0:
                continue
            log_z[b] = _seq_pass(unary, segment, dur4, zeros, maxlen, trans, expT, tmax, stage, tv,
                                 tv_on, start, end, o, T, alpha, astar, bstart, token, g_first, g_last,
                                 edge[c], edge_rows, g_dur[c], g_start[c], g_end[c], g_span[c],
                                 g_caps[c], scratch, vbuf, wbuf, bend, r)
    for c in range(1, C):
        edge[0] += edge[c]
        g_dur[0] += g_dur[c]
        g_start[0] += g_start[c]
        g_end[0] += g_end[c]
        g_span[0] += g_span[c]
        g_caps[0] += g_caps[c]
    return (log_z, token, g_first, g_last, edge[0].copy(), g_dur[0].copy(), g_start[0].copy(),
            g_end[0].copy(), g_span[0].copy(), g_caps[0].copy(), edge_rows)


# --------------------------------------------------------------------------------------------------
# segment features of the semi-CRF feature model
# --------------------------------------------------------------------------------------------------
_HASH_MUL = np.int64(1000003)
_HASH_XOR = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as int64



@njit(cache=True, parallel=True)
def span_hashes(tok_id, offsets, D):
    """h[e, d-1] = polynomial hash of token ids tok_id[e-d+1..e] (int64, wrapping), -1 where the span
    leaves its sequence or holds an unknown token (id < 0). Shape (N, D). Time O(N·D)."""
    N = tok_id.shape[0]
    out = np.full((N, D), -1, dtype=np.int64)
    B = offsets.shape[0] - 1
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        for t in range(T):
            h = np.int64(7)
            for d in range(min(D, t + 1)):
                i = tok_id[o + t - d]
                if i < 0:
                    break
                h = h * _HASH_MUL + np.int64(i + 1)
                out[o + t, d] = h ^ (np.int64(d + 1) * _HASH_XOR)
    return out


@njit(cache=True, parallel=True)
def span_all_caps(is_cap, offsets, D):
    """c[e, d-1] = every token of [e-d+1, e] is capitalised (bool (N, D)). Time O(N·D)."""
    N = is_cap.shape[0]
    out = np.zeros((N, D), dtype=np.bool_)
    B = offsets.shape[0] - 1
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        for t in range(T):
            for d in range(min(D, t + 1)):
                if not is_cap[o + t - d]:
                    break
                out[o + t, d] = True
    return out


@njit(cache=True, parallel=True)
def segment_potentials(first, last, span_w, span_id, caps, caps_w, offsets, o0, D, use):
    """segment[e, d-1, k] of the sequences ``offsets`` (rows local, global row = o0 + local):
    first[s, k] + last[e, k] + span_w[span_id[e, d-1], k] + caps_w[k]·caps[e, d-1] for the switched-on
    terms ``use`` = (first, last, span, caps); 0 for spans that leave their sequence. Shape (N, D, K)."""
    N = offsets[offsets.shape[0] - 1] - offsets[0]
    K = first.shape[1]
    out = np.zeros((N, D, K))
    B = offsets.shape[0] - 1
    for b in prange(B):
        o = offsets[b] - offsets[0]
        T = offsets[b + 1] - offsets[b]
        for t in range(T):
            e = o + t
            ge = o0 + e
            for d in range(min(D, t + 1)):
                gs = ge - d
                sid = span_id[ge, d] if use[2] else -1
                cp = caps[ge, d] if use[3] else False
                for k in range(K):
                    v = 0.0
                    if use[0]:
                        v += first[gs, k]
                    if use[1]:
                        v += last[ge, k]
                    if sid >= 0:
                        v += span_w[sid, k]
                    if cp:
                        v += caps_w[k]
                    out[e, d, k] = v
    return out


@njit(cache=True)
def segment_statistics(M, offsets, o0, span_id, caps, use, first, last, g_span, g_caps):
    """Accumulate segment-feature statistics of segment marginals M (N_chunk, D, K) in place:
    first[s, k] += M (segments starting at s), last[e, k] += M, g_span[id, k] += M, g_caps[k] += M·caps.
    Global rows are o0 + local. Time O(N·D·K)."""
    D = M.shape[1]
    K = M.shape[2]
    B = offsets.shape[0] - 1
    for b in range(B):
        o = offsets[b] - offsets[0]
        T = offsets[b + 1] - offsets[b]
        for t in range(T):
            ge = o0 + o + t
            for d in range(min(D, t + 1)):
                sid = span_id[ge, d] if use[2] else -1
                cp = caps[ge, d] if use[3] else False
                for k in range(K):
                    p = M[o + t, d, k]
                    if p == 0.0:
                        continue
                    first[ge - d, k] += p
                    last[ge, k] += p
                    if sid >= 0:
                        g_span[sid, k] += p
                    if cp:
                        g_caps[k] += p


@njit(cache=True, parallel=True)
def state_potentials3(w_state, w_first, w_last, item_ptr, item_attr, item_val, attr_ptr, feat_label, K):
    """The "state", "first" and "last" token scores (N, K) each in one pass over the items (the three
    blocks share the feature index f(a, k)). Time O(nnz · labels/attr)."""
    N = item_ptr.shape[0] - 1
    u = np.zeros((N, K))
    b = np.zeros((N, K))
    e = np.zeros((N, K))
    for n in prange(N):
        for p in range(item_ptr[n], item_ptr[n + 1]):
            a = item_attr[p]
            v = item_val[p]
            for f in range(attr_ptr[a], attr_ptr[a + 1]):
                k = feat_label[f]
                u[n, k] += v * w_state[f]
                b[n, k] += v * w_first[f]
                e[n, k] += v * w_last[f]
    return u, b, e


@njit(cache=True, parallel=True)
def state_gradient3(token, first, last, item_ptr, item_attr, item_val, attr_ptr, feat_label, n_chunks):
    """g_state[f(a, k)] = Σ_n Σ_{(a, v) in item n} v · token[n, k], and likewise g_first (``first``) and
    g_last (``last``), shapes (F,), in one pass; parallel over ``n_chunks`` blocks of tokens with their
    own buffers."""
    N = item_ptr.shape[0] - 1
    F = feat_label.shape[0]
    bufs = np.zeros((n_chunks, 3, F))
    step = (N + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        gs = bufs[c, 0]
        gf = bufs[c, 1]
        gl = bufs[c, 2]
        for n in range(c * step, min(N, (c + 1) * step)):
            for p in range(item_ptr[n], item_ptr[n + 1]):
                a = item_attr[p]
                v = item_val[p]
                for f in range(attr_ptr[a], attr_ptr[a + 1]):
                    k = feat_label[f]
                    gs[f] += v * token[n, k]
                    gf[f] += v * first[n, k]
                    gl[f] += v * last[n, k]
    out = bufs[0].copy()
    for c in range(1, n_chunks):
        for i in range(3):
            for f in range(F):
                out[i, f] += bufs[c, i, f]
    return out
