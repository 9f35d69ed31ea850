"""Small Numba helpers shared by the chain and tree kernels (one copy of each)."""
import math

import numpy as np
from numba import njit

from ..semirings import MAX


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
def lse_col(vec, mat, j):
    """Exact ⊕_i vec[i] + mat[i, j] in the LOG semiring (-inf when every term is -inf)."""
    K = vec.shape[0]
    m = -np.inf
    for i in range(K):
        v = vec[i] + mat[i, j]
        if v > m:
            m = v
    if m == -np.inf:
        return m
    s = 0.0
    for i in range(K):
        v = vec[i] + mat[i, j]
        if v != -np.inf:
            s += math.exp(v - m)
    return m + math.log(s)


@njit(cache=True, inline="always")
def lse_row(mat, vec, i):
    """Exact ⊕_j mat[i, j] + vec[j] in the LOG semiring (-inf when every term is -inf)."""
    K = vec.shape[0]
    m = -np.inf
    for j in range(K):
        v = mat[i, j] + vec[j]
        if v > m:
            m = v
    if m == -np.inf:
        return m
    s = 0.0
    for j in range(K):
        v = mat[i, j] + vec[j]
        if v != -np.inf:
            s += math.exp(v - m)
    return m + math.log(s)


@njit(cache=True, inline="always")
def final_sum(a, b, semiring):
    """⊕_k a[k] + b[k] in the given semiring (logaddexp for LOG, max for MAX)."""
    K = a.shape[0]
    m = -np.inf
    for k in range(K):
        v = a[k] + b[k]
        if v > m:
            m = v
    if semiring == MAX or m == -np.inf:
        return m
    s = 0.0
    for k in range(K):
        v = a[k] + b[k]
        if v != -np.inf:
            s += math.exp(v - m)
    return m + math.log(s)


@njit(cache=True)
def draw_log(logw, u):
    """Index drawn with probabilities ∝ exp(logw), using the uniform u in [0, 1)."""
    K = logw.shape[0]
    m = -np.inf
    for k in range(K):
        if logw[k] > m:
            m = logw[k]
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
