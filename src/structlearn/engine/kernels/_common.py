"""Small Numba helpers shared by the chain and tree kernels (one copy of each).

The LOG-semiring message steps of the chain and tree kernels are all one pattern, written here once:
exp-shift the incoming vector, multiply it in linear space by the exp-shifted matrix, and recompute
exactly in log space every entry whose shifted sum may have lost terms (:func:`lse_step`); pairwise
marginals are the same linear product with an exact log-space fallback (:func:`pair_prob`).
"""
import math
import types

import numpy as np
from numba import njit

from ..semirings import MAX

TINY = 1e-200  # below this a shifted linear-space sum may have lost terms: recompute in log space
SAFE = 1e-140  # linear-space factors at least this large multiply without loss (pairwise marginals)
LIN_MIN = 1e-100  # scaled linear-space recursion: factors are 0 or >= this, so products stay normal


@njit(cache=True, inline="always")
def vmax(x):
    """Largest entry of a 1-d array (-inf when empty)."""
    m = -np.inf
    for k in range(x.shape[0]):
        if x[k] > m:
            m = x[k]
    return m


@njit(cache=True, inline="always")
def argmax_sum(a, b):
    """(max_k a[k] + b[k], its first argmax) (-inf, 0 when every term is -inf)."""
    m = -np.inf
    arg = 0
    for k in range(a.shape[0]):
        v = a[k] + b[k]
        if v > m:
            m = v
            arg = k
    return m, arg


@njit(cache=True, inline="always")
def shift_rows(x):
    """x -= max(x) in place (unless it is -inf); returns the max."""
    m = vmax(x)
    if m != -np.inf:
        for k in range(x.shape[0]):
            x[k] -= m
    return m


@njit(cache=True)
def shifted_exp(mat, axis):
    """exp(mat - max) with the max taken per column (axis 0) or per row (axis 1), and that max.

    A column/row that is all -inf has max -inf and exp 0.
    """
    K = mat.shape[0]
    out = np.empty((K, K))
    mx = np.full(K, -np.inf)
    for i in range(K):
        for j in range(K):
            k = j if axis == 0 else i
            if mat[i, j] > mx[k]:
                mx[k] = mat[i, j]
    for i in range(K):
        for j in range(K):
            k = j if axis == 0 else i
            out[i, j] = 0.0 if mx[k] == -np.inf else math.exp(mat[i, j] - mx[k])
    return out, mx


@njit(cache=True, inline="always")
def _term(vec, mat, idx, k, axis):
    """vec[k] + mat[k, idx] (axis 0: a column of mat) or mat[idx, k] + vec[k] (axis 1: a row)."""
    if axis == 0:
        return vec[k] + mat[k, idx]
    return mat[idx, k] + vec[k]


@njit(cache=True, inline="always")
def lse_line(vec, mat, idx, axis):
    """Exact ⊕_k vec[k] + mat[k, idx] (axis 0) or ⊕_k mat[idx, k] + vec[k] (axis 1) in the LOG
    semiring (-inf when every term is -inf)."""
    K = vec.shape[0]
    m = -np.inf
    for k in range(K):
        v = _term(vec, mat, idx, k, axis)
        if v > m:
            m = v
    if m == -np.inf:
        return m
    s = 0.0
    for k in range(K):
        v = _term(vec, mat, idx, k, axis)
        if v != -np.inf:
            s += math.exp(v - m)
    return m + math.log(s)


@njit(cache=True, inline="always")
def lse_col(vec, mat, j):
    """Exact ⊕_i vec[i] + mat[i, j] in the LOG semiring (-inf when every term is -inf)."""
    return lse_line(vec, mat, j, 0)


@njit(cache=True, inline="always")
def lse_row(mat, vec, i):
    """Exact ⊕_j mat[i, j] + vec[j] in the LOG semiring (-inf when every term is -inf)."""
    return lse_line(vec, mat, i, 1)


@njit(cache=True, inline="always")
def step_max(vec, out):
    """Shift of a message step: max(vec); when it is -inf, every entry of out is set to -inf."""
    m = vmax(vec)
    if m == -np.inf:
        for k in range(out.shape[0]):
            out[k] = -np.inf
    return m


@njit(cache=True, inline="always")
def lse_step(vec, mat, E, emax, axis, acc, out):
    """One LOG message step: out[j] = ⊕_i vec[i] + mat[i, j] (axis 0) or out[i] = ⊕_j mat[i, j] + vec[j]
    (axis 1), in linear space with an exact log-space fallback.

    ``E``, ``emax``: for axis 0 ``shifted_exp(mat, 0)``; for axis 1 the TRANSPOSE (contiguous) of
    ``shifted_exp(mat, 1)[0]`` and its row maxima — so that both directions run the same row-major,
    vectorised product acc = exp(vec - max) @ E. Entries whose shifted sum is below ``TINY`` (underflow
    risk, or nothing allowed) are recomputed exactly. ``acc``: (K,) scratch. Returns max(vec); when it
    is -inf, out is all -inf.
    """
    K = vec.shape[0]
    m = step_max(vec, out)
    if m == -np.inf:
        return m
    for k in range(K):
        acc[k] = 0.0
    for i in range(K):
        pi = math.exp(vec[i] - m)
        if pi != 0.0:
            for k in range(K):
                acc[k] += pi * E[i, k]
    for k in range(K):
        if emax[k] == -np.inf:
            out[k] = -np.inf
        elif acc[k] > TINY:
            out[k] = m + emax[k] + math.log(acc[k])
        else:
            out[k] = lse_line(vec, mat, k, axis)
    return m


@njit(cache=True, inline="always")
def lse_sparse(vec, ptr, idx, vals, k):
    """Exact ⊕_{q ∈ ptr[k]:ptr[k+1]} vec[idx[q]] + vals[q] (a column of the CSC pattern or a row of
    the CSR one; -inf when every term is -inf)."""
    m = -np.inf
    for q in range(ptr[k], ptr[k + 1]):
        v = vec[idx[q]] + vals[q]
        if v > m:
            m = v
    if m == -np.inf:
        return m
    s = 0.0
    for q in range(ptr[k], ptr[k + 1]):
        v = vec[idx[q]] + vals[q]
        if v != -np.inf:
            s += math.exp(v - m)
    return m + math.log(s)


@njit(cache=True, inline="always")
def sparse_step(vec, ptr, idx, vals, evals, emax, p, out):
    """One LOG message step on the pattern: out[k] = ⊕_{q ∈ ptr[k]:ptr[k+1]} vec[idx[q]] + vals[q],
    in linear space on ``evals`` (the values shifted by ``emax`` per column/row) with the exact
    fallback :func:`lse_sparse` where the shifted sum is below ``TINY``. ``p``: (K,) scratch.
    Returns max(vec); when it is -inf, out is all -inf."""
    K = out.shape[0]
    m = step_max(vec, out)
    if m == -np.inf:
        return m
    for i in range(vec.shape[0]):
        p[i] = math.exp(vec[i] - m)
    for k in range(K):
        if emax[k] == -np.inf:
            out[k] = -np.inf
            continue
        s = 0.0
        for q in range(ptr[k], ptr[k + 1]):
            s += p[idx[q]] * evals[q]
        out[k] = m + emax[k] + math.log(s) if s > TINY else lse_sparse(vec, ptr, idx, vals, k)
    return m


@njit(cache=True, inline="always")
def exp_shift(x, out):
    """out = exp(x - max x) (0 where x is -inf); returns the max (-inf: out left untouched)."""
    m = vmax(x)
    if m != -np.inf:
        for k in range(x.shape[0]):
            out[k] = math.exp(x[k] - m) if x[k] != -np.inf else 0.0
    return m


@njit(cache=True, inline="always")
def safe_scale(x):
    """(ok, exp(x)) where exp(x) is a factor safe to multiply with two others >= SAFE (|x| < 460)."""
    if -460.0 < x < 460.0:
        return True, math.exp(x)
    return False, 0.0


@njit(cache=True, inline="always")
def pair_prob(fast, a, e, q, x):
    """A pairwise marginal: the linear product a·e·q when it is safe (``fast`` and both factors at
    least ``SAFE``), else exp(x) from its exact log-probability x (0 for -inf)."""
    if fast and e > SAFE and q > SAFE:
        return a * e * q
    if x == -np.inf:
        return 0.0
    return math.exp(x)


@njit(cache=True, inline="always")
def local_marginals(a, b, out):
    """out[k] = P(k) ∝ exp(a[k] + b[k]), normalised locally; returns log Σ_k exp(a[k] + b[k]).

    When every term is -inf, returns -inf and leaves out untouched.
    """
    K = a.shape[0]
    m, _ = argmax_sum(a, b)
    if m == -np.inf:
        return m
    tot = 0.0
    for k in range(K):
        v = a[k] + b[k]
        e = math.exp(v - m) if v != -np.inf else 0.0
        out[k] = e
        tot += e
    inv = 1.0 / tot
    for k in range(K):
        out[k] *= inv
    return m + math.log(tot)


@njit(cache=True, inline="always")
def final_sum(a, b, semiring):
    """⊕_k a[k] + b[k] in the given semiring (logaddexp for LOG, max for MAX)."""
    m, _ = argmax_sum(a, b)
    if semiring == MAX or m == -np.inf:
        return m
    s = 0.0
    for k in range(a.shape[0]):
        v = a[k] + b[k]
        if v != -np.inf:
            s += math.exp(v - m)
    return m + math.log(s)


@njit(cache=True, inline="always")
def exp_shifted_into(x, out):
    """out = exp(x - max) for the scaled linear-space recursion; returns (max, ok): ok is False when
    everything is -inf or a finite entry falls below ``LIN_MIN`` after the shift."""
    m = vmax(x)
    if m == -np.inf:
        return m, False
    ok = True
    for k in range(x.shape[0]):
        if x[k] != -np.inf:
            v = math.exp(x[k] - m)
            out[k] = v
            if v < LIN_MIN:
                ok = False
        else:
            out[k] = 0.0
    return m, ok


@njit(cache=True)
def exp_shifted_vec(x):
    """(exp(x - max), max, ok) as :func:`exp_shifted_into`, in a new array (zeros when not ok)."""
    out = np.zeros(x.shape[0])
    m, ok = exp_shifted_into(x, out)
    return out, m, ok


@njit(cache=True)
def top_k(cand, cnt, k):
    """Indices of the min(k, cnt) largest finite values of cand[:cnt], best first (stable)."""
    order = np.argsort(-cand[:cnt], kind="mergesort")
    m = 0
    while m < min(k, cnt) and cand[order[m]] != -np.inf:
        m += 1
    return order[:m]


@njit(cache=True)
def draw_log(logw, u):
    """Index drawn with probabilities ∝ exp(logw), using the uniform u in [0, 1)."""
    K = logw.shape[0]
    m = vmax(logw)
    tot = 0.0
    for k in range(K):
        if logw[k] != -np.inf:
            tot += math.exp(logw[k] - m)
    target = u * tot
    acc = 0.0
    last_ok = 0
    for k in range(K):
        if logw[k] != -np.inf:
            acc += math.exp(logw[k] - m)
            last_ok = k
            if acc > target:
                return k
    return last_ok


def serial_twin(kernel, name, doc):
    """A kernel that runs the code of the parallel kernel ``kernel`` (an ``njit(parallel=True)`` dispatcher)
    without threads (its ``prange`` loops as plain loops): for one graph or sequence, where starting
    threads costs more than it saves. The twin is a module-level dispatcher of its own ``name`` (its own
    entry in Numba's cache), so the code is written once and cached twice."""
    py = kernel.py_func
    twin = types.FunctionType(py.__code__, py.__globals__, name, py.__defaults__, py.__closure__)
    twin.__qualname__ = name
    twin.__doc__ = doc
    return njit(cache=True)(twin)
