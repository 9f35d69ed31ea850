"""Message steps of the chain kernels for dense and sparse transitions alike, chosen at compile time
by the type of the transition argument (``numba.extending.overload``): a dense (S, K, K) array, or a
pattern tuple (ptr, idx, vals) (the CSC form for forward steps, CSR for backward ones; see
:mod:`structlearn.engine.kernels.chain_sparse`). :func:`structlearn.engine.kernels.chain._forward_seq`,
``_backward_seq`` and ``viterbi_seq`` are written once on these steps.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ._common import exp_shift as _exp_shift
from ._common import lse_step as _lse_step
from ._common import pair_prob as _pair_prob
from ._common import safe_scale as _safe_scale
from ._common import shifted_exp as _shifted_exp
from ._common import sparse_step as _sparse_step


@njit(cache=True, inline="always")
def _tr(S, t):
    return 0 if S == 1 else t


def _log_step(M, vec, t, E, emax, axis, acc, out):
    """One LOG message step on the transitions of row t: out[j] = ⊕_i vec[i] + M[t, i, j] (axis 0,
    forward) or out[i] = ⊕_j M[t, i, j] + vec[j] (axis 1, backward), in linear space on ``E``/``emax``
    with an exact log-space fallback; returns max(vec) (-inf: out all -inf).

    Dense ``M`` (S, K, K): ``E``/``emax`` as for :func:`~structlearn.engine.kernels._common.lse_step` of a
    stationary M (recomputed per step when S > 1). Pattern ``M = (ptr, idx, vals)`` (CSC for axis 0,
    CSR for axis 1; stationary, t unused): ``E``/``emax`` the exps of ``vals`` shifted per column /
    row (:func:`structlearn.engine.kernels._common.sparse_step`). Only callable from kernels (the
    implementations are the overloads below, chosen at compile time)."""
    raise NotImplementedError


@overload(_log_step, inline="always")
def _log_step_impl(M, vec, t, E, emax, axis, acc, out):
    if isinstance(M, types.Array):
        def dense(M, vec, t, E, emax, axis, acc, out):
            S = M.shape[0]
            ts = _tr(S, t)
            if S != 1:
                E, emax = _shifted_exp(M[ts], axis)
                if axis == 1:
                    E = np.ascontiguousarray(E.T)
            return _lse_step(vec, M[ts], E, emax, axis, acc, out)
        return dense

    def pattern(M, vec, t, E, emax, axis, acc, out):
        return _sparse_step(vec, M[0], M[1], M[2], E, emax, acc, out)
    return pattern


def _max_step(M, vec, t, u, out, arg):
    """One MAX forward step: out[j] = u[j] + max_i vec[i] + M[t, i, j] and arg[j] = its first argmax
    i (0 when every term is -inf), for a dense M (S, K, K) or, over the stored i → j, for a CSC
    pattern M = (ptr, src, vals) (t unused). Only callable from kernels (overloads below)."""
    raise NotImplementedError


@overload(_max_step, inline="always")
def _max_step_impl(M, vec, t, u, out, arg):
    if isinstance(M, types.Array):
        def dense(M, vec, t, u, out, arg):
            ts = _tr(M.shape[0], t)
            for j in range(out.shape[0]):
                m = -np.inf
                a = 0
                for i in range(vec.shape[0]):
                    v = vec[i] + M[ts, i, j]
                    if v > m:
                        m = v
                        a = i
                out[j] = u[j] + m
                arg[j] = a
        return dense

    def pattern(M, vec, t, u, out, arg):
        ptr, src, vals = M
        for j in range(out.shape[0]):
            m = -np.inf
            a = 0
            for q in range(ptr[j], ptr[j + 1]):
                v = vec[src[q]] + vals[q]
                if v > m:
                    m = v
                    a = src[q]
            out[j] = u[j] + m
            arg[j] = a
    return pattern


def _log_edge(M, a, u, b, E, emax, log_norm, out):
    """Add the pairwise marginals of one step, P(i → j) = exp(a[i] + M[i → j] + u[j] + b[j] - log_norm),
    into ``out``: (K, K) for a dense stationary M (S, K, K) (row 0 is read) with ``E``/``emax`` its
    row-shifted exp and row maxima (:func:`~structlearn.engine.kernels._common.shifted_exp` axis 1), or (E,)
    at the stored transitions of a CSR pattern M = (ptr, idx, vals) with ``E``/``emax`` the row-shifted
    exps of ``vals`` and the row maxima. ``a``, ``b``: log forward / backward scores of the two tokens,
    ``u``: the unary of the second; ``log_norm``: the log normaliser of the step. A linear-space product
    with an exact fallback per entry (:func:`~structlearn.engine.kernels._common.pair_prob`). Only callable
    from kernels (overloads below, not inlined: a cold path)."""
    raise NotImplementedError


@njit(cache=True, inline="always")
def _edge_right(u, b):
    """The right factor of a pairwise marginal step: v = u + b (K,), q = exp(v - max v) and the max
    (-inf: nothing allowed)."""
    K = u.shape[0]
    v = np.empty(K)
    q = np.empty(K)
    for j in range(K):
        v[j] = u[j] + b[j]
    return v, q, _exp_shift(v, q)


@overload(_log_edge)
def _log_edge_impl(M, a, u, b, E, emax, log_norm, out):
    if isinstance(M, types.Array):
        def dense(M, a, u, b, E, emax, log_norm, out):
            K = a.shape[0]
            v, q, qm = _edge_right(u, b)
            if qm == -np.inf:
                return
            for i in range(K):
                if a[i] == -np.inf or emax[i] == -np.inf:
                    continue
                fast, s = _safe_scale(a[i] + emax[i] + qm - log_norm)
                for j in range(K):
                    out[i, j] += _pair_prob(fast, s, E[i, j], q[j], a[i] + M[0, i, j] + v[j] - log_norm)
        return dense

    def pattern(M, a, u, b, E, emax, log_norm, out):
        ptr, idx, vals = M
        K = a.shape[0]
        v, q, qm = _edge_right(u, b)
        if qm == -np.inf:
            return
        for i in range(K):
            if a[i] == -np.inf or emax[i] == -np.inf:
                continue
            fast, s = _safe_scale(a[i] + emax[i] + qm - log_norm)
            for e in range(ptr[i], ptr[i + 1]):
                j = idx[e]
                out[e] += _pair_prob(fast, s, E[e], q[j], a[i] + vals[e] + v[j] - log_norm)
    return pattern


_SMALL_K = 16  # up to this many labels the Viterbi step reads the transposed matrix (a max per label)


def _viterbi_pass(M, unary, start, o, T, bp):
    """Max-product forward pass of one sequence (rows o .. o+T-1): δ[0, j] = start[j] + unary[o, j],
    δ[t, j] = unary[o+t, j] + max_i (δ[t-1, i] + M[i → j]) with back-pointers bp[o+t, j] = the first
    argmax i (0 when every term is -inf); returns the last row δ[T-1] (K,).

    Dense M (S, K, K): for a stationary M with at most ``_SMALL_K`` labels the max over i runs along a
    row of the transposed matrix; otherwise i runs outside and the update over j is an element-wise
    compare-and-select on contiguous rows (vectorised). A CSC pattern M = (ptr, src, vals): the max
    over the stored i → j. Both keep only two rows of δ (the scores are exactly those of the log-space
    recursion, in the same order of additions). Only callable from kernels (overloads below)."""
    raise NotImplementedError


@overload(_viterbi_pass)
def _viterbi_pass_impl(M, unary, start, o, T, bp):
    if isinstance(M, types.Array):
        def dense(M, unary, start, o, T, bp):
            K = unary.shape[1]
            S = M.shape[0]
            prev = np.empty(K)
            cur = np.empty(K)
            arg = np.zeros(K, dtype=np.int64)
            for j in range(K):
                prev[j] = start[j] + unary[o, j]
            if S == 1 and K <= _SMALL_K:
                At = np.ascontiguousarray(M[0].T)
                for r in range(o + 1, o + T):
                    for j in range(K):
                        m = prev[0] + At[j, 0]
                        a = 0
                        i = 1
                        while i + 1 < K:  # pairs first (a shorter dependency chain), ties to the lower i
                            v1 = prev[i] + At[j, i]
                            v2 = prev[i + 1] + At[j, i + 1]
                            second = v2 > v1
                            v = v2 if second else v1
                            iv = i + 1 if second else i
                            better = v > m
                            m = v if better else m
                            a = iv if better else a
                            i += 2
                        if i < K:
                            v = prev[i] + At[j, i]
                            better = v > m
                            m = v if better else m
                            a = i if better else a
                        cur[j] = unary[r, j] + m
                        bp[r, j] = a
                    prev, cur = cur, prev
                return prev
            for r in range(o + 1, o + T):
                ts = _tr(S, r - 1)
                for j in range(K):
                    cur[j] = prev[0] + M[ts, 0, j]
                    arg[j] = 0
                for i in range(1, K):
                    pi = prev[i]
                    for j in range(K):
                        v = pi + M[ts, i, j]
                        c = cur[j]
                        better = v > c
                        cur[j] = v if better else c
                        arg[j] = i if better else arg[j]
                for j in range(K):
                    cur[j] += unary[r, j]
                    bp[r, j] = arg[j]
                prev, cur = cur, prev
            return prev
        return dense

    def pattern(M, unary, start, o, T, bp):
        ptr, src, vals = M
        K = unary.shape[1]
        prev = np.empty(K)
        cur = np.empty(K)
        for j in range(K):
            prev[j] = start[j] + unary[o, j]
        for r in range(o + 1, o + T):
            for j in range(K):
                m = -np.inf
                a = 0
                for q in range(ptr[j], ptr[j + 1]):
                    v = prev[src[q]] + vals[q]
                    if v > m:
                        m = v
                        a = src[q]
                cur[j] = unary[r, j] + m
                bp[r, j] = a
            prev, cur = cur, prev
        return prev
    return pattern
