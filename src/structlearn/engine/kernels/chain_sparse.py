"""Numba kernels for linear chains with a sparse stationary transition matrix (packed ragged batches).

Arrays in, arrays out; no validation. Same conventions as :mod:`structlearn.engine.kernels.chain`, except the
transition matrix, which is stationary and given in CSR form "from, to":

- ``indptr`` (K + 1,) int64, ``indices`` (E,) int64 (destination labels, any order within a row),
  ``logv`` (E,) float64 log-potentials of the E stored transitions; transitions not stored are -inf
  (a stored -inf is legal too).
- ``unary``: (N, K) log-potentials; ``offsets``: (B + 1,); ``start``, ``end``: (K,).

The recurrences are those of the dense kernels (Lafferty et al. 2001; Sutton & McCallum 2012 §4.1,
"folc-beta") restricted to the stored transitions, so a step costs O(E + K) instead of O(K²)::

    α[t, j]   = unary[t, j] + ⊕_{i : (i, j) stored} (α[t-1, i] + logv[i → j])
    β[t, i]   = ⊕_{j : (i, j) stored} (logv[i → j] + unary[t+1, j] + β[t+1, j])

Messages are normalised per token (``ahat``/``inc``, ``bhat``/``inc`` exactly as in the dense kernels).
In the LOG semiring a step runs in linear space on exp-shifted values (one exp per label and step; the
transition values are shifted by their column max for α and row max for β) and every column/row whose
shifted sum falls below ``TINY`` (underflow risk, or nothing allowed) is recomputed exactly in log
space (:func:`structlearn.engine.kernels._common.sparse_step`), so results equal the plain log-space
recursion to rounding error and are exactly -inf where nothing is allowed. The passes themselves are
those of the dense kernels (:func:`structlearn.engine.kernels.chain._forward_seq` / ``_backward_seq``,
which take the CSC / CSR pattern in place of the dense matrix).
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..semirings import LOG
from ._common import LIN_MIN
from ._common import exp_shifted_vec as _exp_shifted_vec
from ._common import final_sum as _final
from ._common import local_marginals as _local_marginals
from ._common import vmax as _vmax
from .chain import (_backward_seq, _chunking, _edge_dst, _forward_seq, _serial, _sum_chunks, _total, chain_passes,
                    chain_viterbi, chain_work)
from .chain_scaled import linear_marginals_seq
from .chain_steps import _log_edge


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
def _csc(indptr, indices, logv, K):
    """(tptr, tsrc, tlogv): the pattern column by column with its values."""
    tptr, tsrc, tpos = csr_transpose(indptr, indices, K)
    tlogv = np.empty(tpos.shape[0])
    for p in range(tpos.shape[0]):
        tlogv[p] = logv[tpos[p]]
    return tptr, tsrc, tlogv


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


class SparseSetup(NamedTuple):
    """Per-batch constants (flat, so that a parallel loop can capture it).

    Log-space recursion: the pattern column by column (``tptr``, ``tsrc``, ``tlogv``) with
    column-shifted exps ``ecol``/``cmax`` (forward) and the row-shifted exps ``erow``/``rmax`` of the
    CSR values (backward, edge marginals). Scaled linear-space recursion: the fields of
    :class:`structlearn.engine.kernels.chain.ChainSetup` of the same names, with ``fwd`` the globally shifted
    exps in CSC order and ``bwd`` in CSR order.
    """
    tptr: np.ndarray
    tsrc: np.ndarray
    tlogv: np.ndarray
    ecol: np.ndarray
    cmax: np.ndarray
    erow: np.ndarray
    rmax: np.ndarray
    fwd: np.ndarray
    bwd: np.ndarray
    gmax: float
    es: np.ndarray
    smax: float
    ee: np.ndarray
    emax: float
    lin_ok: bool


@njit(cache=True)
def _linear_setup(logv, tlogv, start, end):
    """Globally shifted exps of the stored values (CSC and CSR order) and of start/end; ok is False
    when a finite transition falls below LIN_MIN after the shift (then the log-space path runs; start
    / end that do not fit get zeros and are handled in log space)."""
    E = logv.shape[0]
    gmax = _vmax(logv)
    ok = gmax != -np.inf
    er = np.zeros(E)
    ec = np.zeros(E)
    if ok:
        for e in range(E):
            if logv[e] != -np.inf:
                er[e] = math.exp(logv[e] - gmax)
                if er[e] < LIN_MIN:
                    ok = False
            if tlogv[e] != -np.inf:
                ec[e] = math.exp(tlogv[e] - gmax)
    es, smax, _ = _exp_shifted_vec(start)
    ee, emax, _ = _exp_shifted_vec(end)
    return ec, er, gmax, es, smax, ee, emax, ok


@njit(cache=True)
def _setup(indptr, indices, logv, start, end, K):
    """The :class:`SparseSetup` of a transition pattern."""
    tptr, tsrc, tlogv = _csc(indptr, indices, logv, K)
    ecol, cmax = _shifted(tptr, tlogv, K)
    erow, rmax = _shifted(indptr, logv, K)
    fwd, bwd, gmax, es, smax, ee, emax, ok = _linear_setup(logv, tlogv, start, end)
    return SparseSetup(tptr, tsrc, tlogv, ecol, cmax, erow, rmax, fwd, bwd, gmax, es, smax, ee, emax,
                       ok)


@njit(cache=True)
def sparse_chain_forward(unary, indptr, indices, logv, start, end, offsets, semiring, n_threads=0):
    """Normalised forward scores: ``ahat`` (N, K), ``inc`` (N,) and log Z (or the max score) (B,);
    ``α[r] = ahat[r] + Σ_{r' ≤ r in the same sequence} inc[r']``. Time O(N·(E + K))."""
    tptr, tsrc, tlogv = _csc(indptr, indices, logv, unary.shape[1])
    ecol, cmax = _shifted(tptr, tlogv, unary.shape[1])
    return chain_passes(unary, (tptr, tsrc, tlogv), start, end, offsets, semiring, ecol, cmax, False,
                        n_threads)


@njit(cache=True)
def sparse_chain_backward(unary, indptr, indices, logv, end, offsets, n_threads=0):
    """Normalised backward scores (LOG): ``bhat`` (N, K), ``inc`` (N,), with
    ``β[r] = bhat[r] + Σ_{r' ≥ r in the same sequence} inc[r']``. Time O(N·(E + K))."""
    erow, rmax = _shifted(indptr, logv, unary.shape[1])
    beta, inc, _ = chain_passes(unary, (indptr, indices, logv), end, end, offsets, LOG, erow, rmax, True,
                                n_threads)
    return beta, inc


@njit(cache=True)
def _marginals_seq(unary, indptr, indices, logv, st, start, end, o, T, edge_mode, work, umarg, emarg,
                   dst):
    """Marginals of one sequence (``work``: a :class:`~structlearn.engine.kernels.chain.ChainWork`); returns
    log Z. Edge marginals go to emarg[r] (mode 1) or are added into the (E,) array dst (modes 2, 3)."""
    csr = (indptr, indices, logv)
    if st.lin_ok:
        return linear_marginals_seq(unary, st, (st.tptr, st.tsrc, st.fwd), (indptr, indices, st.bwd),
                                    (indptr, indices, st.bwd), ((st.tptr, st.tsrc, st.tlogv), st.ecol,
                                                                st.cmax),
                                    (csr, st.erow, st.rmax), (csr, st.erow, st.rmax), start, end, o, T,
                                    edge_mode, work, umarg, emarg, dst)
    alpha = work.alpha
    beta = work.beta
    incb = work.incb
    _forward_seq(unary, (st.tptr, st.tsrc, st.tlogv), start, o, T, LOG, alpha, work.inca, st.ecol,
                 st.cmax)
    lz = _total(work.inca, o, T) + _final(alpha[o + T - 1], end, LOG)
    if lz == -np.inf:
        return lz
    _backward_seq(unary, csr, end, o, T, beta, incb, st.erow, st.rmax)
    for r in range(o, o + T):
        log_norm = _local_marginals(alpha[r], beta[r], umarg[r])
        if edge_mode == 0 or r == o + T - 1:
            continue
        # P(y_r = i, y_r+1 = j) = exp(ahat[r, i] + logv[i → j] + unary[r+1, j] + bhat[r+1, j] - log_norm)
        # with the local normaliser log_norm = log Σ_i exp(ahat[r, i] + bhat[r, i]) + incb[r]
        _log_edge(csr, alpha[r], unary[r + 1], beta[r + 1], st.erow, st.rmax, log_norm + incb[r],
                  emarg[r] if edge_mode == 1 else dst)
    return lz


@njit(cache=True)
def _marginals_block(unary, indptr, indices, logv, st, start, end, offsets, edge_mode, work, log_z,
                     umarg, emarg, scratch, c, step):
    B = offsets.shape[0] - 1
    for b in range(c * step, min(B, (c + 1) * step)):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        dst = _edge_dst(emarg, scratch, edge_mode, b, c)
        log_z[b] = _marginals_seq(unary, indptr, indices, logv, st, start, end, o, T, edge_mode, work,
                                  umarg, emarg, dst)


@njit(cache=True, parallel=True)
def _marginals_par(unary, indptr, indices, logv, st, start, end, offsets, edge_mode, work, log_z, umarg,
                   emarg, scratch, n_chunks, step):
    for c in prange(n_chunks):
        _marginals_block(unary, indptr, indices, logv, st, start, end, offsets, edge_mode, work, log_z,
                         umarg, emarg, scratch, c, step)


@njit(cache=True)
def sparse_chain_marginals(unary, indptr, indices, logv, start, end, offsets, edge_mode, n_threads=0):
    """log Z (B,), token marginals (N, K) and edge marginals on the stored transitions.

    edge_mode 0: none (a (0, E) array); 1: full (N, E), row t = P(y_t = i, y_t+1 = j) for the stored
    (i → j) in CSR order, rows at sequence ends 0; 2: per-sequence sums (B, E); 3: the sum over the
    batch (1, E) (expected transition counts, summed over blocks fixed by the batch,
    :func:`~structlearn.engine.kernels.chain._chunking`; ``n_threads``: ``numba.get_num_threads()``, see :func:`~structlearn.engine.kernels.chain._serial`).
    Marginals are normalised locally at every token (exact however long the chain). When the
    transitions allow it, a sequence runs the scaled linear-space recursion (one exp per label and
    token; log space only on the tokens that need it,
    :func:`~structlearn.engine.kernels.chain_scaled.linear_marginals_seq`); otherwise the log-space one.
    Time O(N·(E + K)), memory O(N·K) plus the edge output. Parallel over blocks of sequences unless
    :func:`~structlearn.engine.kernels.chain._serial`.
    """
    N, K = unary.shape
    E = indices.shape[0]
    B = offsets.shape[0] - 1
    st = _setup(indptr, indices, logv, start, end, K)
    work = chain_work(N, K)
    log_z = np.zeros(B)
    umarg = np.zeros((N, K))
    serial = _serial(B, N, K, n_threads)
    n_chunks, step, rows = _chunking(B, edge_mode, N)
    emarg = np.zeros((rows, E))
    scratch = np.zeros((1, E))
    if serial:
        for c in range(n_chunks):
            _marginals_block(unary, indptr, indices, logv, st, start, end, offsets, edge_mode, work, log_z,
                             umarg, emarg, scratch, c, step)
    else:
        _marginals_par(unary, indptr, indices, logv, st, start, end, offsets, edge_mode, work, log_z,
                       umarg, emarg, scratch, n_chunks, step)
    if edge_mode == 3:
        return log_z, umarg, _sum_chunks(emarg)
    return log_z, umarg, emarg


@njit(cache=True)
def sparse_chain_viterbi(unary, indptr, indices, logv, start, end, offsets, n_threads=0):
    """Max-product decoding: best scores (B,) and labels (N,) (-1 rows for infeasible sequences).
    Time O(N·(E + K)), memory O(N·K)."""
    tptr, tsrc, tlogv = _csc(indptr, indices, logv, unary.shape[1])
    return chain_viterbi(unary, (tptr, tsrc, tlogv), start, end, offsets, n_threads)
