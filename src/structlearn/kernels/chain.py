"""Numba kernels for linear chains (first-order, packed ragged batches).

Arrays in, arrays out; no validation. Conventions:

- ``unary``: (N, K) log-potentials, rows of all sequences concatenated; ``offsets``: (B + 1,).
- ``trans``: (S, K, K) log-potentials "from, to"; S = 1 for a stationary transition, S = N for a
  time-varying one where row t scores the step from token t to t + 1 (rows at sequence ends unused).
- ``start``, ``end``: (K,) log-potentials of the first / last label.

The recurrences (Lafferty et al. 2001; Sutton & McCallum 2012 §4.1)::

    α[0, j]   = start[j] + unary[0, j]
    α[t, j]   = unary[t, j] + ⊕_i (α[t-1, i] + trans[t-1, i, j])
    β[T-1, i] = end[i]
    β[t, i]   = ⊕_j (trans[t, i, j] + unary[t+1, j] + β[t+1, j])
    log Z     = ⊕_j (α[T-1, j] + end[j])

In the LOG semiring the matrix–vector step runs in linear space on exp-shifted values (one exp per label
and step instead of K), and any column whose shifted sum falls below ``TINY`` (underflow risk, or a
forbidden label; :func:`structlearn.kernels._common.lse_step`) is recomputed exactly in log space,
so results match the plain log-space recursion to rounding error for potentials of any scale and are exactly -inf where nothing is allowed.
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ..semirings import LOG, MAX
from ._common import LIN_MIN
from ._common import argmax_sum as _argmax_sum
from ._common import draw_log as _draw
from ._common import exp_shift as _exp_shift
from ._common import exp_shifted_into as _exp_shifted_into
from ._common import exp_shifted_vec as _exp_shifted_vec
from ._common import final_sum as _final
from ._common import local_marginals as _local_marginals
from ._common import pair_prob as _pair_prob
from ._common import safe_scale as _safe_scale
from ._common import shift_rows as _shift_rows
from ._common import shifted_exp as _shifted_exp
from ._common import top_k as _top_k
from .chain_steps import _log_step, _max_step, _tr


@njit(cache=True, inline="always")
def _total(inc, o, T):
    """Σ inc[o:o+T] (log Z of a sequence is this sum of shifts plus its final term)."""
    s = 0.0
    for r in range(o, o + T):
        s += inc[r]
    return s


@njit(cache=True, inline="always")
def _init_forward(unary, start, o, ahat, inc):
    """First row of a normalised forward pass: ahat[o] = start + unary[o] - M_o, inc[o] = M_o."""
    K = unary.shape[1]
    for j in range(K):
        ahat[o, j] = start[j] + unary[o, j]
    inc[o] = _shift_rows(ahat[o])


@njit(cache=True, inline="always")
def _infeasible_row(row, inc, r):
    """Mark row r infeasible: every entry and its shift -inf."""
    inc[r] = -np.inf
    for k in range(row.shape[0]):
        row[k] = -np.inf


@njit(cache=True, inline="always")
def _backtrack(delta, end, bp, o, T, labels):
    """Viterbi read-out of one sequence from its δ rows and back-pointers; returns the best score
    (-inf: labels untouched)."""
    last = o + T - 1
    m, arg = _argmax_sum(delta[last], end)
    if m == -np.inf:
        return m
    labels[last] = arg
    for r in range(last, o, -1):
        labels[r - 1] = bp[r, labels[r]]
    return m


@njit(cache=True)
def _forward_seq(unary, M, start, o, T, semiring, ahat, inc, eT, cmax):
    """Normalised forward pass of one sequence, for dense and sparse transitions alike.

    Stores ``ahat[r] = α[r] - M_r`` (row max 0) and ``inc[r] = M_r - M_{r-1}``, so log-scores never
    grow with t (marginals stay exact on chains of any length) and log Z = Σ inc + final term; in the
    MAX semiring ``ahat`` holds the normalised Viterbi scores. ``M``: the dense trans (S, K, K) or
    the CSC pattern (tptr, tsrc, tlogv); eT/cmax: its column-shifted exps (LOG; see
    :func:`~structlearn.kernels.chain_steps._log_step`).
    """
    K = unary.shape[1]
    _init_forward(unary, start, o, ahat, inc)
    acc = np.empty(K)
    arg = np.empty(K, dtype=np.int64)
    for t in range(1, T):
        r = o + t
        prev = ahat[r - 1]
        if inc[r - 1] == -np.inf:  # infeasible prefix stays infeasible
            _infeasible_row(ahat[r], inc, r)
            continue
        if semiring == MAX:
            _max_step(M, prev, r - 1, unary[r], ahat[r], arg)
        else:
            # linear-space step (prev has max 0) with exact log-space fallback per column
            _log_step(M, prev, r - 1, eT, cmax, 0, acc, ahat[r])
            for j in range(K):
                ahat[r, j] = -np.inf if unary[r, j] == -np.inf else unary[r, j] + ahat[r, j]
        inc[r] = _shift_rows(ahat[r])


@njit(cache=True)
def _backward_seq(unary, M, end, o, T, bhat, inc, eTt, rmax):
    """Normalised backward pass of one sequence (LOG semiring), for dense and sparse transitions.

    Stores ``bhat[r] = β[r] - S_r`` (row max 0 below the last row) and ``inc[r] = S_r - S_{r+1}``.
    ``M``: the dense trans (S, K, K) with eTt/rmax the transpose (contiguous) of the row-shifted exp
    of a stationary trans and its row maxima, or the CSR pattern (indptr, indices, logv) with its
    row-shifted exps and row maxima (see :func:`~structlearn.kernels.chain_steps._log_step`).
    """
    K = unary.shape[1]
    last = o + T - 1
    for i in range(K):
        bhat[last, i] = end[i]
    inc[last] = 0.0
    v = np.empty(K)
    acc = np.empty(K)
    for t in range(T - 2, -1, -1):
        r = o + t
        for j in range(K):
            v[j] = unary[r + 1, j] + bhat[r + 1, j]
        if _log_step(M, v, r, eTt, rmax, 1, acc, bhat[r]) == -np.inf:
            inc[r] = -np.inf
            continue
        inc[r] = _shift_rows(bhat[r])


@njit(cache=True, parallel=True)
def chain_passes(unary, M, start, end, offsets, semiring, E, emax, backward):
    """Normalised forward (``backward`` False) or backward (LOG, ``backward`` True) passes of every
    sequence, for dense and sparse transitions alike (``M``, ``E``, ``emax`` as in
    :func:`_forward_seq` / :func:`_backward_seq`). Returns the scores (N, K), their shifts ``inc``
    (N,) and, forward, log Z (or the max score) (B,) (zeros backward; ``start`` unused there)."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    scores = np.empty((N, K))
    inc = np.empty(N)
    out = np.zeros(B)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        if backward:
            _backward_seq(unary, M, end, o, T, scores, inc, E, emax)
        else:
            _forward_seq(unary, M, start, o, T, semiring, scores, inc, E, emax)
            out[b] = _total(inc, o, T) + _final(scores[o + T - 1], end, semiring)
    return scores, inc, out


@njit(cache=True)
def chain_forward(unary, trans, start, end, offsets, semiring):
    """Normalised forward scores in the given semiring.

    Returns ``ahat`` (N, K), ``inc`` (N,) and log Z (or max score) (B,); the forward log-scores are
    ``α[r] = ahat[r] + Σ_{r' ≤ r in the same sequence} inc[r']``.
    """
    eT, cmax = _shifted_exp(trans[0], 0)
    return chain_passes(unary, trans, start, end, offsets, semiring, eT, cmax, False)


@njit(cache=True)
def chain_backward(unary, trans, end, offsets):
    """Normalised backward scores (LOG): ``bhat`` (N, K) and ``inc`` (N,), with
    ``β[r] = bhat[r] + Σ_{r' ≥ r in the same sequence} inc[r']``."""
    eT, rmax = _shifted_exp(trans[0], 1)
    beta, inc, _ = chain_passes(unary, trans, end, end, offsets, LOG, np.ascontiguousarray(eT.T), rmax,
                                True)
    return beta, inc


@njit(cache=True)
def _edge_marginals_step(ahat_r, trans_s, eT, rmax, unary_n, bhat_n, log_norm, out):
    """Add P(y_t = i, y_t+1 = j) into out (K, K) for one step.

    P(i, j) = exp(ahat_r[i] + trans_s[i, j] + unary_n[j] + bhat_n[j] - log_norm), where log_norm is the
    local normaliser (see :func:`chain_marginals`); eT/rmax: row-shifted exp of trans_s. Fast
    linear-space product with exact fallback (:func:`~structlearn.kernels._common.pair_prob`).
    """
    K = ahat_r.shape[0]
    q = np.empty(K)
    v = np.empty(K)
    for j in range(K):
        v[j] = unary_n[j] + bhat_n[j]
    qm = _exp_shift(v, q)
    if qm == -np.inf:
        return
    for i in range(K):
        if ahat_r[i] == -np.inf or rmax[i] == -np.inf:
            continue
        fast, a = _safe_scale(ahat_r[i] + rmax[i] + qm - log_norm)
        for j in range(K):
            out[i, j] += _pair_prob(fast, a, eT[i, j], q[j], ahat_r[i] + trans_s[i, j] + v[j] - log_norm)


class ChainSetup(NamedTuple):
    """Per-batch constants of :func:`marginals_seq` (flat: a parallel loop cannot capture a nested
    named tuple).

    Log-space recursion: column-shifted exp of the (first) transition matrix ``eTc``/``cmax``
    (forward), row-shifted exp ``eTr``/``rmax`` and its contiguous transpose ``eTrt`` (backward, edge
    marginals). Scaled linear-space recursion (stationary transitions; the same field names as
    :class:`structlearn.kernels.chain_sparse.SparseSetup`, so one set of helpers reads both): ``fwd``/
    ``bwd`` the globally shifted exp of the transitions in the layout the forward / backward product
    reads (here the matrix and its transpose), ``gmax`` the shift, ``es``/``ee`` the shifted exp of
    start / end with shifts ``smax``/``emax``, ``lin_ok``: every finite factor is at least ``LIN_MIN``
    (else the log-space recursion runs).
    """
    eTc: np.ndarray
    cmax: np.ndarray
    eTr: np.ndarray
    eTrt: np.ndarray
    rmax: np.ndarray
    fwd: np.ndarray
    bwd: np.ndarray
    gmax: float
    es: np.ndarray
    smax: float
    ee: np.ndarray
    emax: float
    lin_ok: bool


class ChainWork(NamedTuple):
    """Scratch of :func:`marginals_seq` indexed by row: normalised forward/backward scores (R, K)
    and their shifts (R,)."""
    alpha: np.ndarray
    beta: np.ndarray
    inca: np.ndarray
    incb: np.ndarray


@njit(cache=True)
def chain_work(R, K):
    """A :class:`ChainWork` for sequences of up to R rows."""
    return ChainWork(np.empty((R, K)), np.empty((R, K)), np.empty(R), np.empty(R))


@njit(cache=True, inline="always")
def _scale_into(acc, out, r):
    """out[r] = acc / Σ acc for the scaled recursion; returns Σ acc, or 0.0 (failure) when the sum is
    not positive or a nonzero entry falls below ``LIN_MIN``."""
    tot = 0.0
    for k in range(acc.shape[0]):
        tot += acc[k]
    if not tot > 0.0:
        return 0.0
    inv = 1.0 / tot
    for k in range(acc.shape[0]):
        v = acc[k] * inv
        if v != 0.0 and v < LIN_MIN:
            return 0.0
        out[r, k] = v
    return tot


@njit(cache=True, inline="always")
def _linear_buffers(T, K):
    """Scratch of the scaled recursion of one sequence: forward fa, backward fb, shifted exp of the
    unary eu (T, K); backward normalisers nb (T,)."""
    return np.empty((T, K)), np.empty((T, K)), np.empty((T, K)), np.empty(T)


@njit(cache=True, inline="always")
def _linear_ends(lin, fa, fb, r):
    """End of the scaled forward pass and start of the backward one at row r: returns (log of the
    final weight Σ fa[r]·ee plus its shift, or nan when it is not positive, and the normaliser Σ ee of
    fb[r] = ee / Σ ee)."""
    fin = 0.0
    tot = 0.0
    for k in range(fa.shape[1]):
        fin += fa[r, k] * lin.ee[k]
        tot += lin.ee[k]
    for k in range(fa.shape[1]):
        fb[r, k] = lin.ee[k] / tot
    if not fin > 0.0:
        return np.nan, tot
    return math.log(fin) + lin.emax, tot


@njit(cache=True, inline="always")
def _linear_token(fa, fb, t, out, r):
    """Token marginals out[r] = fa[t]·fb[t] / z of the scaled recursion; returns 1 / z."""
    z = 0.0
    for k in range(fa.shape[1]):
        z += fa[t, k] * fb[t, k]
    iz = 1.0 / z
    for k in range(fa.shape[1]):
        out[r, k] = fa[t, k] * fb[t, k] * iz
    return iz


def _lin_product(M, x, r, acc):
    """acc[k] = Σ_i x[r, i] · M[i, k] for a dense (K, K) M, or for a pattern M = (ptr, idx, vals)
    acc[k] = Σ_{q ∈ ptr[k]:ptr[k+1]} x[r, idx[q]] · vals[q] (a CSC column or a CSR row per k). Only
    callable from kernels (the implementations are the overloads below, chosen at compile time)."""
    raise NotImplementedError


@overload(_lin_product, inline="always")
def _lin_product_impl(M, x, r, acc):
    if isinstance(M, types.Array):
        def dense(M, x, r, acc):  # row-major, contiguous, vectorised
            K = acc.shape[0]
            for k in range(K):
                acc[k] = 0.0
            for i in range(x.shape[1]):
                xi = x[r, i]
                if xi != 0.0:
                    for k in range(K):
                        acc[k] += xi * M[i, k]
        return dense

    def pattern(M, x, r, acc):
        ptr, idx, vals = M
        for k in range(acc.shape[0]):
            acc[k] = 0.0
            for q in range(ptr[k], ptr[k + 1]):
                acc[k] += x[r, idx[q]] * vals[q]
    return pattern


def _lin_edges(M, a, q, T, emarg, o, ee_dst, edge_mode):
    """Edge marginals a[t, i] · M[i → j] · q[t + 1, j] of one sequence's steps t < T - 1: a dense M
    writes them to emarg[o + t] (K, K) (mode 1) or adds their sum into ee_dst (K, K) (modes 2, 3, as
    Σ_t a_t ⊗ q_t+1 multiplied by M once); a pattern M = (ptr, idx, vals) writes (adds) them at the
    stored transitions into emarg[o + t] (E,) (ee_dst (E,)). One call per sequence: inlined per
    token, its array arguments took five reference counts a token (Numba's pruning missed them), a
    fifth of the K = 5 marginals' time."""
    raise NotImplementedError


@overload(_lin_edges, inline="always")
def _lin_edges_impl(M, a, q, T, emarg, o, ee_dst, edge_mode):
    if isinstance(M, types.Array):
        def dense(M, a, q, T, emarg, o, ee_dst, edge_mode):
            K = a.shape[1]
            if edge_mode == 1:
                for t in range(T - 1):
                    for i in range(K):
                        for j in range(K):
                            emarg[o + t, i, j] = a[t, i] * M[i, j] * q[t + 1, j]
                return
            pair = np.zeros((K, K))
            for t in range(T - 1):
                for i in range(K):
                    ai = a[t, i]
                    if ai != 0.0:
                        for j in range(K):
                            pair[i, j] += ai * q[t + 1, j]
            for i in range(K):
                for j in range(K):
                    ee_dst[i, j] += M[i, j] * pair[i, j]
        return dense

    def pattern(M, a, q, T, emarg, o, ee_dst, edge_mode):
        ptr, idx, vals = M
        for t in range(T - 1):
            for i in range(a.shape[1]):
                ai = a[t, i]
                if ai != 0.0:
                    for e in range(ptr[i], ptr[i + 1]):
                        v = ai * vals[e] * q[t + 1, idx[e]]
                        if edge_mode == 1:
                            emarg[o + t, e] += v
                        else:
                            ee_dst[e] += v
    return pattern


@njit(cache=True, fastmath={"reassoc", "contract", "arcp", "nsz"})
def linear_marginals_seq(unary, lin, Mf, Mb, Me, o, T, edge_mode, umarg, emarg, ee_dst):
    """Scaled linear-space forward–backward of one sequence (stationary transitions), for dense and
    sparse transitions alike.

    The classical scaled recursion (Rabiner 1989; CRFsuite's crf1d_context): α and β are kept in linear
    space, renormalised at every token, with log Z = Σ log(scales). It needs one exp per label and
    token instead of several exps and logs. Every factor is either exactly 0 (a -inf potential) or
    >= LIN_MIN, so no product underflows; if that cannot be guaranteed (extreme potentials), it returns
    (False, 0) and writes nothing, and the caller runs the log-space recursion instead.

    ``lin``: a :class:`ChainSetup` (or :class:`~structlearn.kernels.chain_sparse.SparseSetup`);
    ``Mf``, ``Mb``, ``Me``: the transitions as read by the forward product, the backward product and
    the edge marginals (dense: lin.fwd, lin.bwd, lin.fwd; sparse: CSC and CSR patterns, see
    :func:`_lin_product`). Edge marginals go to emarg[r] (mode 1) or are added into ee_dst.
    """
    K = unary.shape[1]
    fail = (False, 0.0)
    fa, fb, eu, nb = _linear_buffers(T, K)
    acc = np.empty(K)
    lz = 0.0
    for t in range(T):
        um, ok = _exp_shifted_into(unary[o + t], eu[t])
        if not ok:
            return fail
        if t == 0:
            for k in range(K):
                acc[k] = lin.es[k] * eu[t, k]
        else:
            _lin_product(Mf, fa, t - 1, acc)
            for k in range(K):
                acc[k] *= eu[t, k]
        tot = _scale_into(acc, fa, t)
        if tot == 0.0:
            return fail
        lz += um + (lin.smax if t == 0 else lin.gmax) + math.log(tot)
    # backward, normalised: fb[t] ∝ β[t]; nb[t] is the normaliser applied at t
    fin, nlast = _linear_ends(lin, fa, fb, T - 1)
    nb[T - 1] = nlast
    if np.isnan(fin):
        return fail
    lz += fin
    for t in range(T - 2, -1, -1):
        for j in range(K):
            eu[t + 1, j] *= fb[t + 1, j]  # eu[t+1] ⊙ fb[t+1], also the edges' right factor below
        _lin_product(Mb, eu, t + 1, acc)
        nb[t] = _scale_into(acc, fb, t)
        if nb[t] == 0.0:
            return fail
    # marginals; P(i, j) = fa[t, i] M[i → j] eu[t+1, j] fb[t+1, j] / (nb[t] · z), with fa[t]
    # rescaled in place to the left factor once row t's token marginals are out
    for t in range(T):
        iz = _linear_token(fa, fb, t, umarg, o + t)
        if edge_mode != 0 and t < T - 1:
            inv = iz / nb[t]
            for j in range(K):
                fa[t, j] *= inv
    if edge_mode != 0:
        _lin_edges(Me, fa, eu, T, emarg, o, ee_dst, edge_mode)
    return True, lz


@njit(cache=True)
def _linear_setup(trans_s, start, end):
    """Linear-space constants (fwd, bwd, gmax, es, smax, ee, emax, ok) of :class:`ChainSetup` for a
    stationary transition matrix (fwd: its globally shifted exp, bwd: the transpose)."""
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
                    if eT[i, j] < LIN_MIN:
                        ok = False
    es, smax, ok1 = _exp_shifted_vec(start)
    ee, emax, ok2 = _exp_shifted_vec(end)
    return eT, np.ascontiguousarray(eT.T), gmax, es, smax, ee, emax, ok and ok1 and ok2


@njit(cache=True)
def marginals_setup(trans, start, end):
    """Per-batch constants of :func:`marginals_seq` (a :class:`ChainSetup`); computed once per call,
    shared by every sequence."""
    eTc, cmax = _shifted_exp(trans[0], 0)
    eTr, rmax = _shifted_exp(trans[0], 1)
    fwd, bwd, gmax, es, smax, ee, emax, ok = _linear_setup(trans[0], start, end)
    return ChainSetup(eTc, cmax, eTr, np.ascontiguousarray(eTr.T), rmax, fwd, bwd, gmax, es, smax, ee,
                      emax, ok and trans.shape[0] == 1)


@njit(cache=True)
def marginals_seq(unary, trans, start, end, o, T, edge_mode, setup, work, umarg, emarg, ee_dst):
    """Marginals of one sequence (rows o .. o+T-1 of ``unary``); returns log Z.

    ``setup``: :func:`marginals_setup` of (trans, start, end); ``work``: a :class:`ChainWork` with at
    least o + T rows. Token marginals go to umarg[o:o+T]; edge marginals to emarg[r] rows (mode 1) or
    are added into the (K, K) array ee_dst (modes 2 and 3). Also for callers that fuse inference with
    their own per-sequence work (CRF training: potentials in, gradient out, without (N, K)
    intermediates).
    """
    S = trans.shape[0]
    if setup.lin_ok:
        ok, lz = linear_marginals_seq(unary, setup, setup.fwd, setup.bwd, setup.fwd, o, T, edge_mode,
                                      umarg, emarg, ee_dst)
        if ok:
            return lz
    alpha = work.alpha
    beta = work.beta
    _forward_seq(unary, trans, start, o, T, LOG, alpha, work.inca, setup.eTc, setup.cmax)
    lz = _total(work.inca, o, T) + _final(alpha[o + T - 1], end, LOG)
    if lz == -np.inf:
        return lz
    _backward_seq(unary, trans, end, o, T, beta, work.incb, setup.eTrt, setup.rmax)
    for r in range(o, o + T):
        # P(y_r = k) ∝ exp(ahat[r, k] + bhat[r, k]), normalised locally
        log_norm = _local_marginals(alpha[r], beta[r], umarg[r])
        if edge_mode == 0 or r == o + T - 1:
            continue
        # log normaliser of P(y_r, y_r+1): Σ_ij exp(ahat + trans + unary + bhat) = exp(log_norm)
        log_norm += work.incb[r]
        dst = emarg[r] if edge_mode == 1 else ee_dst
        if S == 1:
            _edge_marginals_step(alpha[r], trans[0], setup.eTr, setup.rmax, unary[r + 1], beta[r + 1],
                                 log_norm, dst)
        else:
            eT_s, rm_s = _shifted_exp(trans[r], 1)
            _edge_marginals_step(alpha[r], trans[r], eT_s, rm_s, unary[r + 1], beta[r + 1], log_norm,
                                 dst)
    return lz


@njit(cache=True, inline="always")
def _chunking(B, n_threads, edge_mode, N):
    """Blocks of a parallel marginals pass: (n_chunks, sequences per chunk, rows of the edge output
    for ``edge_mode`` 0 (none), 1 (per row, N), 2 (per sequence, B), 3 (per chunk, summed after))."""
    n_chunks = min(B, 8 * n_threads) if B > 0 else 1
    step = (B + n_chunks - 1) // n_chunks if B > 0 else 1
    rows = N if edge_mode == 1 else (B if edge_mode == 2 else (n_chunks if edge_mode == 3 else 0))
    return n_chunks, step, rows


@njit(cache=True)
def _sum_chunks(parts):
    """(1, M) sum of the rows of parts (C, M), in row order."""
    total = np.zeros((1, parts.shape[1]))
    for c in range(parts.shape[0]):
        for e in range(parts.shape[1]):
            total[0, e] += parts[c, e]
    return total


@njit(cache=True, inline="always")
def _edge_dst(emarg, scratch, edge_mode, b, c):
    """The (K, K) or (E,) row that sequence b of chunk c adds its edge marginals into (modes 2, 3;
    otherwise a scratch row)."""
    if edge_mode == 2:
        return emarg[b]
    if edge_mode == 3:
        return emarg[c]
    return scratch[0]


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
    the potentials allow it exactly (see :func:`linear_marginals_seq`).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    # named tuples captured by a parallel loop must be built by their constructor in this function
    # (Numba's parfor lowering looks the class up there)
    work = ChainWork(np.empty((N, K)), np.empty((N, K)), np.empty(N), np.empty(N))
    log_z = np.zeros(B)
    umarg = np.zeros((N, K))
    n_chunks, step, rows = _chunking(B, n_threads, edge_mode, N)
    emarg = np.zeros((rows, K, K))
    scratch = np.zeros((1, K, K))
    st = marginals_setup(trans, start, end)
    setup = ChainSetup(st.eTc, st.cmax, st.eTr, st.eTrt, st.rmax, st.fwd, st.bwd, st.gmax, st.es,
                       st.smax, st.ee, st.emax, st.lin_ok)
    for c in prange(n_chunks):
        for b in range(c * step, min(B, (c + 1) * step)):
            o = offsets[b]
            T = offsets[b + 1] - o
            if T == 0:
                continue
            dst = _edge_dst(emarg, scratch, edge_mode, b, c)
            log_z[b] = marginals_seq(unary, trans, start, end, o, T, edge_mode, setup, work, umarg,
                                     emarg, dst)
    if edge_mode == 3:
        return log_z, umarg, _sum_chunks(emarg.reshape((n_chunks, K * K))).reshape((1, K, K))
    return log_z, umarg, emarg


@njit(cache=True)
def viterbi_seq(unary, trans, start, end, o, T, delta, bp, labels):
    """Max-product decoding of one sequence (rows o:o+T); writes labels[o:o+T], returns the best score.

    δ[0, j] = start[j] + unary[0, j];  δ[t, j] = unary[t, j] + max_i δ[t-1, i] + trans[t-1, i, j];
    back-pointers bp[t, j] = argmax_i. Labels are left untouched when the sequence is infeasible (-inf).
    ``delta``/``bp`` are scratch arrays indexed by packed row. ``trans``: the dense (S, K, K) array or
    a CSC pattern (tptr, tsrc, tlogv) (the max then runs over the stored transitions; see
    :func:`~structlearn.kernels.chain_steps._max_step`).
    """
    K = unary.shape[1]
    for j in range(K):
        delta[o, j] = start[j] + unary[o, j]
    for r in range(o + 1, o + T):
        _max_step(trans, delta[r - 1], r - 1, unary[r], delta[r], bp[r])
    return _backtrack(delta, end, bp, o, T, labels)


@njit(cache=True, parallel=True)
def chain_viterbi(unary, trans, start, end, offsets):
    """Max-product decoding: best scores (B,) and labels (N,) (-1 rows for infeasible sequences);
    ``trans`` dense or a CSC pattern as in :func:`viterbi_seq`."""
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
                order = _top_k(cand, K * k, k)
                for r in range(order.shape[0]):
                    c = order[r]
                    v = cand[c]
                    sc[t, j, r] = v + unary[o + t, j]
                    bpl[t, j, r] = c // k
                    bpr[t, j, r] = c % k
        fin = np.empty(K * k)
        for j in range(K):
            for r in range(k):
                fin[j * k + r] = sc[T - 1, j, r] + end[j]
        order = _top_k(fin, K * k, k)
        for r in range(order.shape[0]):
            c = order[r]
            scores[b, r] = fin[c]
            j = c // k
            rk = c % k
            for t in range(T - 1, -1, -1):
                labels[r, o + t] = j
                if t > 0:
                    j2 = bpl[t, j, rk]
                    rk = bpr[t, j, rk]
                    j = j2
    return scores, labels
