"""Message steps of the chain kernels for dense and sparse transitions alike, chosen at compile time
by the type of the transition argument (``numba.extending.overload``): a dense (S, K, K) array, or a
pattern tuple (ptr, idx, vals) (the CSC form for forward steps, CSR for backward ones; see
:mod:`structlearn.kernels.chain_sparse`). :func:`structlearn.kernels.chain._forward_seq`,
``_backward_seq`` and ``viterbi_seq`` are written once on these steps.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ._common import lse_step as _lse_step
from ._common import shifted_exp as _shifted_exp
from ._common import sparse_step as _sparse_step


@njit(cache=True, inline="always")
def _tr(S, t):
    return 0 if S == 1 else t


def _log_step(M, vec, t, E, emax, axis, acc, out):
    """One LOG message step on the transitions of row t: out[j] = ⊕_i vec[i] + M[t, i, j] (axis 0,
    forward) or out[i] = ⊕_j M[t, i, j] + vec[j] (axis 1, backward), in linear space on ``E``/``emax``
    with an exact log-space fallback; returns max(vec) (-inf: out all -inf).

    Dense ``M`` (S, K, K): ``E``/``emax`` as for :func:`~structlearn.kernels._common.lse_step` of a
    stationary M (recomputed per step when S > 1). Pattern ``M = (ptr, idx, vals)`` (CSC for axis 0,
    CSR for axis 1; stationary, t unused): ``E``/``emax`` the exps of ``vals`` shifted per column /
    row (:func:`structlearn.kernels._common.sparse_step`). Only callable from kernels (the
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
