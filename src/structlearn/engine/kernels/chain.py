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
forbidden label; :func:`structlearn.engine.kernels._common.lse_step`) is recomputed exactly in log space,
so results match the plain log-space recursion to rounding error for potentials of any scale and are
exactly -inf where nothing is allowed. Marginals with stationary transitions run the scaled
linear-space recursion of :mod:`structlearn.engine.kernels.chain_scaled` (log space only on the tokens that
need it).

Batches run in parallel over sequences (Numba threads) unless they are a single sequence or too
small for waking the other threads to pay (:func:`_serial`): launching an idle thread for one long
sequence cost more than the whole pass on a busy machine (Viterbi of 10⁵ tokens, K = 5: 55 ms with 2
threads, 6.5 ms on one).
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..semirings import LOG, MAX
from ._common import LIN_MIN
from ._common import argmax_sum as _argmax_sum
from ._common import draw_log as _draw
from ._common import exp_shifted_vec as _exp_shifted_vec
from ._common import final_sum as _final
from ._common import local_marginals as _local_marginals
from ._common import shift_rows as _shift_rows
from ._common import shifted_exp as _shifted_exp
from ._common import top_k as _top_k
from .chain_scaled import linear_marginals_seq
from .chain_steps import _log_edge, _log_step, _max_step, _tr, _viterbi_pass

PAR_MIN_WORK = 200_000  # below this many N·K·(K + 1) operations a batch runs on the calling thread


@njit(cache=True, inline="always")
def _serial(B, N, K, n_threads):
    """Whether a batch of B sequences (N rows, K labels) runs on the calling thread: one sequence, one
    Numba thread (``n_threads``: ``numba.get_num_threads()`` of the caller, 0 when unknown; kernels
    cannot ask Numba themselves and stay cached on disk), or too little work for waking the other
    threads to pay."""
    return B < 2 or n_threads == 1 or N * K * (K + 1) < PAR_MIN_WORK


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




@njit(cache=True)
def _forward_seq(unary, M, start, o, T, semiring, ahat, inc, eT, cmax):
    """Normalised forward pass of one sequence, for dense and sparse transitions alike.

    Stores ``ahat[r] = α[r] - M_r`` (row max 0) and ``inc[r] = M_r - M_{r-1}``, so log-scores never
    grow with t (marginals stay exact on chains of any length) and log Z = Σ inc + final term; in the
    MAX semiring ``ahat`` holds the normalised Viterbi scores. ``M``: the dense trans (S, K, K) or
    the CSC pattern (tptr, tsrc, tlogv); eT/cmax: its column-shifted exps (LOG; see
    :func:`~structlearn.engine.kernels.chain_steps._log_step`).
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
    row-shifted exps and row maxima (see :func:`~structlearn.engine.kernels.chain_steps._log_step`).
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


@njit(cache=True)
def _passes_seq(unary, M, start, end, offsets, semiring, E, emax, backward, b, scores, inc, out):
    """One sequence of :func:`chain_passes`."""
    o = offsets[b]
    T = offsets[b + 1] - o
    if T == 0:
        return
    if backward:
        _backward_seq(unary, M, end, o, T, scores, inc, E, emax)
    else:
        _forward_seq(unary, M, start, o, T, semiring, scores, inc, E, emax)
        out[b] = _total(inc, o, T) + _final(scores[o + T - 1], end, semiring)


@njit(cache=True, parallel=True)
def _passes_par(unary, M, start, end, offsets, semiring, E, emax, backward, scores, inc, out):
    for b in prange(offsets.shape[0] - 1):
        _passes_seq(unary, M, start, end, offsets, semiring, E, emax, backward, b, scores, inc, out)


@njit(cache=True)
def chain_passes(unary, M, start, end, offsets, semiring, E, emax, backward, n_threads=0):
    """Normalised forward (``backward`` False) or backward (LOG, ``backward`` True) passes of every
    sequence, for dense and sparse transitions alike (``M``, ``E``, ``emax`` as in
    :func:`_forward_seq` / :func:`_backward_seq`). Returns the scores (N, K), their shifts ``inc``
    (N,) and, forward, log Z (or the max score) (B,) (zeros backward; ``start`` unused there).
    ``n_threads``: see :func:`_serial`."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    scores = np.empty((N, K))
    inc = np.empty(N)
    out = np.zeros(B)
    if _serial(B, N, K, n_threads):
        for b in range(B):
            _passes_seq(unary, M, start, end, offsets, semiring, E, emax, backward, b, scores, inc, out)
    else:
        _passes_par(unary, M, start, end, offsets, semiring, E, emax, backward, scores, inc, out)
    return scores, inc, out



@njit(cache=True)
def chain_forward(unary, trans, start, end, offsets, semiring, n_threads=0):
    """Normalised forward scores in the given semiring.

    Returns ``ahat`` (N, K), ``inc`` (N,) and log Z (or max score) (B,); the forward log-scores are
    ``α[r] = ahat[r] + Σ_{r' ≤ r in the same sequence} inc[r']``.
    """
    eT, cmax = _shifted_exp(trans[0], 0)
    return chain_passes(unary, trans, start, end, offsets, semiring, eT, cmax, False, n_threads)


@njit(cache=True)
def chain_backward(unary, trans, end, offsets, n_threads=0):
    """Normalised backward scores (LOG): ``bhat`` (N, K) and ``inc`` (N,), with
    ``β[r] = bhat[r] + Σ_{r' ≥ r in the same sequence} inc[r']``."""
    eT, rmax = _shifted_exp(trans[0], 1)
    beta, inc, _ = chain_passes(unary, trans, end, end, offsets, LOG, np.ascontiguousarray(eT.T), rmax,
                                True, n_threads)
    return beta, inc




class ChainSetup(NamedTuple):
    """Per-batch constants of :func:`marginals_seq` (flat: a parallel loop cannot capture a nested
    named tuple).

    Log-space recursion: column-shifted exp of the (first) transition matrix ``eTc``/``cmax``
    (forward), row-shifted exp ``eTr``/``rmax`` and its contiguous transpose ``eTrt`` (backward, edge
    marginals). Scaled linear-space recursion (stationary transitions; the same field names as
    :class:`structlearn.engine.kernels.chain_sparse.SparseSetup`, so one set of helpers reads both): ``fwd``/
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


@njit(cache=True)
def _linear_setup(trans_s, start, end):
    """Linear-space constants (fwd, bwd, gmax, es, smax, ee, emax, ok) of :class:`ChainSetup` for a
    stationary transition matrix (fwd: its globally shifted exp, bwd: the transpose); ok: every finite
    transition is at least ``LIN_MIN`` after the shift (start / end that do not fit get zeros in es /
    ee and are handled in log space)."""
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
    es, smax, _ = _exp_shifted_vec(start)
    ee, emax, _ = _exp_shifted_vec(end)
    return eT, np.ascontiguousarray(eT.T), gmax, es, smax, ee, emax, ok


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
    """Marginals of one sequence (rows o .. o+T-1 of ``unary``); returns log Z (-inf: infeasible, its
    token marginals 0).

    ``setup``: :func:`marginals_setup` of (trans, start, end); ``work``: a :class:`ChainWork` with at
    least o + T rows. Token marginals go to umarg[o:o+T]; edge marginals to emarg[r] rows (mode 1) or
    are added into the (K, K) array ee_dst (modes 2 and 3). Stationary transitions run the scaled
    recursion (:func:`~structlearn.engine.kernels.chain_scaled.linear_marginals_seq`), time-varying ones (or
    transitions whose weights spread beyond linear space) the log-space one. Also for callers that
    fuse inference with their own per-sequence work (CRF training: potentials in, gradient out,
    without (N, K) intermediates).
    """
    S = trans.shape[0]
    if setup.lin_ok:
        return linear_marginals_seq(unary, setup, setup.fwd, setup.bwd, setup.fwd,
                                    (trans, setup.eTc, setup.cmax), (trans, setup.eTrt, setup.rmax),
                                    (trans, setup.eTr, setup.rmax), start, end, o, T, edge_mode, work,
                                    umarg, emarg, ee_dst)
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
            _log_edge(trans, alpha[r], unary[r + 1], beta[r + 1], setup.eTr, setup.rmax, log_norm, dst)
        else:
            eT_s, rm_s = _shifted_exp(trans[r], 1)
            _log_edge(trans[r:r + 1], alpha[r], unary[r + 1], beta[r + 1], eT_s, rm_s, log_norm, dst)
    return lz


#: rows of a block of a marginals pass with summed edge marginals (edge_mode 3), and the most blocks
CHUNK_ROWS, MAX_CHUNKS = 1024, 64


@njit(cache=True, inline="always")
def _chunking(B, edge_mode, N):
    """Blocks of a marginals pass: (n_chunks, sequences per chunk, rows of the edge output for
    ``edge_mode`` 0 (none), 1 (per row, N), 2 (per sequence, B), 3 (per chunk, summed after in chunk
    order)). The blocks depend on the batch only (about ``CHUNK_ROWS`` rows each, at most
    ``MAX_CHUNKS``), never on the thread count or on whether the pass runs on the calling thread, so the
    summed edge marginals are bitwise the same for any number of threads."""
    n_chunks = 1 if B == 0 else max(1, min(B, N // CHUNK_ROWS, MAX_CHUNKS))
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


@njit(cache=True)
def _marginals_block(unary, trans, start, end, offsets, edge_mode, setup, work, log_z, umarg, emarg,
                     scratch, c, step):
    """Sequences of block c of :func:`chain_marginals`."""
    B = offsets.shape[0] - 1
    for b in range(c * step, min(B, (c + 1) * step)):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        dst = _edge_dst(emarg, scratch, edge_mode, b, c)
        log_z[b] = marginals_seq(unary, trans, start, end, o, T, edge_mode, setup, work, umarg, emarg,
                                 dst)


@njit(cache=True, parallel=True)
def _marginals_par(unary, trans, start, end, offsets, edge_mode, setup, work, log_z, umarg, emarg,
                   scratch, n_chunks, step):
    for c in prange(n_chunks):
        _marginals_block(unary, trans, start, end, offsets, edge_mode, setup, work, log_z, umarg, emarg,
                         scratch, c, step)


@njit(cache=True)
def chain_marginals(unary, trans, start, end, offsets, edge_mode, n_threads=0):
    """log Z (B,), unary marginals (N, K) and edge marginals.

    edge_mode 0: none (returns a (0, K, K) array); 1: full (N, K, K), row t = P(y_t, y_t+1), rows at
    sequence ends 0; 2: per-sequence sums (B, K, K); 3: the sum over the whole batch (1, K, K) (expected
    transition counts for training, memory O(K²) per block of sequences; the blocks and the order of
    their sum depend on the batch only, :func:`_chunking`). ``n_threads``: ``numba.get_num_threads()`` (see :func:`_serial`).

    Marginals are normalised locally at every token, P(y_t = k) ∝ exp(ahat[t, k] + bhat[t, k]), which is
    exact and keeps them accurate to rounding error however long the chain (scores of 10⁸ in log space
    would otherwise cost 8 digits). Stationary transitions use the scaled linear-space recursion
    (:func:`~structlearn.engine.kernels.chain_scaled.linear_marginals_seq`). Parallel over blocks of
    sequences unless :func:`_serial`.
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    work = chain_work(N, K)
    log_z = np.zeros(B)
    umarg = np.zeros((N, K))
    serial = _serial(B, N, K, n_threads)
    n_chunks, step, rows = _chunking(B, edge_mode, N)
    emarg = np.zeros((rows, K, K))
    scratch = np.zeros((1, K, K))
    setup = marginals_setup(trans, start, end)
    if serial:
        for c in range(n_chunks):
            _marginals_block(unary, trans, start, end, offsets, edge_mode, setup, work, log_z, umarg, emarg,
                             scratch, c, step)
    else:
        _marginals_par(unary, trans, start, end, offsets, edge_mode, setup, work, log_z, umarg, emarg,
                       scratch, n_chunks, step)
    if edge_mode == 3:
        return log_z, umarg, _sum_chunks(emarg.reshape((n_chunks, K * K))).reshape((1, K, K))
    return log_z, umarg, emarg


@njit(cache=True)
def viterbi_seq(unary, trans, start, end, o, T, delta, bp, labels):
    """Max-product decoding of one sequence (rows o:o+T); writes labels[o:o+T], returns the best score.

    δ[0, j] = start[j] + unary[0, j];  δ[t, j] = unary[t, j] + max_i δ[t-1, i] + trans[t-1, i, j];
    back-pointers bp[t, j] = the first argmax i (:func:`~structlearn.engine.kernels.chain_steps._viterbi_pass`).
    Labels are left untouched when the sequence is infeasible (-inf). ``bp`` (int, indexed by packed
    row) is scratch; ``delta`` is not used (two rows of δ are kept internally). ``trans``: the dense
    (S, K, K) array or a CSC pattern (tptr, tsrc, tlogv) (the max then runs over the stored
    transitions).
    """
    last = o + T - 1
    m, arg = _argmax_sum(_viterbi_pass(trans, unary, start, o, T, bp), end)
    if m == -np.inf:
        return m
    labels[last] = arg
    for r in range(last, o, -1):
        labels[r - 1] = bp[r, labels[r]]
    return m


@njit(cache=True)
def _viterbi_block(unary, trans, start, end, offsets, b0, b1, bp, labels, best):
    for b in range(b0, b1):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T > 0:
            best[b] = viterbi_seq(unary, trans, start, end, o, T, bp, bp, labels)


@njit(cache=True, parallel=True)
def _viterbi_par(unary, trans, start, end, offsets, bp, labels, best):
    for b in prange(offsets.shape[0] - 1):
        _viterbi_block(unary, trans, start, end, offsets, b, b + 1, bp, labels, best)


@njit(cache=True)
def chain_viterbi(unary, trans, start, end, offsets, n_threads=0):
    """Max-product decoding: best scores (B,) and labels (N,) (-1 rows for infeasible sequences);
    ``trans`` dense or a CSC pattern as in :func:`viterbi_seq`. Time O(N·K²) (O(N·(E + K)) for a
    pattern), memory O(N·K) back-pointers (int32). ``n_threads``: see :func:`_serial`."""
    N, K = unary.shape
    B = offsets.shape[0] - 1
    labels = np.full(N, -1, dtype=np.int64)
    best = np.zeros(B)
    bp = np.empty((N, K), dtype=np.int32)
    if _serial(B, N, K, n_threads):
        _viterbi_block(unary, trans, start, end, offsets, 0, B, bp, labels, best)
    else:
        _viterbi_par(unary, trans, start, end, offsets, bp, labels, best)
    return best, labels


@njit(cache=True)
def _score_seq(unary, trans, start, end, offsets, labels, b, out):
    o = offsets[b]
    T = offsets[b + 1] - o
    if T == 0:
        return
    S = trans.shape[0]
    s = start[labels[o]] + end[labels[o + T - 1]]
    for r in range(o, o + T):
        s += unary[r, labels[r]]
        if r + 1 < o + T:
            s += trans[_tr(S, r), labels[r], labels[r + 1]]
    out[b] = s


@njit(cache=True, parallel=True)
def _score_par(unary, trans, start, end, offsets, labels, out):
    for b in prange(offsets.shape[0] - 1):
        _score_seq(unary, trans, start, end, offsets, labels, b, out)


@njit(cache=True)
def chain_score(unary, trans, start, end, offsets, labels, n_threads=0):
    """Log-score (B,) of the packed labeling ``labels`` (N,); ``n_threads``: see :func:`_serial`."""
    B = offsets.shape[0] - 1
    out = np.zeros(B)
    if B < 2 or n_threads == 1 or unary.shape[0] < PAR_MIN_WORK:  # O(N) work
        for b in range(B):
            _score_seq(unary, trans, start, end, offsets, labels, b, out)
    else:
        _score_par(unary, trans, start, end, offsets, labels, out)
    return out


@njit(cache=True)
def _sample_seq(alpha, log_z, trans, end, offsets, uniforms, b, out):
    o = offsets[b]
    T = offsets[b + 1] - o
    if T == 0 or log_z[b] == -np.inf:
        return
    K = alpha.shape[1]
    S = trans.shape[0]
    w = np.empty(K)
    for s in range(uniforms.shape[0]):
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


@njit(cache=True, parallel=True)
def _sample_par(alpha, log_z, trans, end, offsets, uniforms, out):
    for b in prange(offsets.shape[0] - 1):
        _sample_seq(alpha, log_z, trans, end, offsets, uniforms, b, out)


@njit(cache=True)
def chain_sample(alpha, log_z, trans, end, offsets, uniforms, n_threads=0):
    """Exact posterior samples by forward filtering, backward sampling.

    ``alpha``: normalised forward scores ``ahat`` from :func:`chain_forward` (LOG; only differences
    within a row matter); ``uniforms`` (n, N) in [0, 1). Returns (n, N) labels.
    Sequences with log Z = -inf are left at -1. ``n_threads``: see :func:`_serial`.
    """
    N, K = alpha.shape
    B = offsets.shape[0] - 1
    out = np.full((uniforms.shape[0], N), -1, dtype=np.int64)
    if _serial(B, N * uniforms.shape[0], K, n_threads):
        for b in range(B):
            _sample_seq(alpha, log_z, trans, end, offsets, uniforms, b, out)
    else:
        _sample_par(alpha, log_z, trans, end, offsets, uniforms, out)
    return out


@njit(cache=True)
def _kbest_seq(unary, trans, start, end, offsets, k, b, scores, labels):
    """The k best labelings of sequence b (see :func:`chain_kbest`)."""
    K = unary.shape[1]
    S = trans.shape[0]
    o = offsets[b]
    T = offsets[b + 1] - o
    if T == 0:
        if k > 0:
            scores[b, 0] = 0.0
        return
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


@njit(cache=True, parallel=True)
def _kbest_par(unary, trans, start, end, offsets, k, scores, labels):
    for b in prange(offsets.shape[0] - 1):
        _kbest_seq(unary, trans, start, end, offsets, k, b, scores, labels)


@njit(cache=True)
def chain_kbest(unary, trans, start, end, offsets, k, n_threads=0):
    """The k best labelings of every sequence (exact, best first).

    Each cell (t, j) keeps the top-k partial scores ending in label j with back-pointers
    (previous label, previous rank). Time O(N·K²·k·log(K·k)), memory O(N·K·k).
    Returns scores (B, k) (-inf padding) and labels (k, N) (-1 padding). ``n_threads``: see
    :func:`_serial`.
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    scores = np.full((B, k), -np.inf)
    labels = np.full((k, N), -1, dtype=np.int64)
    if _serial(B, N * k, K, n_threads):
        for b in range(B):
            _kbest_seq(unary, trans, start, end, offsets, k, b, scores, labels)
    else:
        _kbest_par(unary, trans, start, end, offsets, k, scores, labels)
    return scores, labels
