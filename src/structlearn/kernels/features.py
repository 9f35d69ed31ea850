"""Numba kernels of the sparse attribute feature model (state potentials and their gradient).

An item (token, node) n holds attribute occurrences ``item_attr[item_ptr[n]:item_ptr[n + 1]]`` with
values ``item_val``; attribute a has features ``attr_ptr[a]:attr_ptr[a + 1]`` with labels
``feat_label``; ``w`` holds one weight per feature.
"""
import numpy as np
from numba import njit, prange


@njit(cache=True, inline="always")
def add_item_potentials(w, scale, n, item_ptr, item_attr, item_val, attr_ptr, feat_label, out):
    """out[k] += Σ_{(a, v) in item n} scale · v · w[f(a, k)] (out: (K,))."""
    for p in range(item_ptr[n], item_ptr[n + 1]):
        a = item_attr[p]
        v = item_val[p] * scale
        for f in range(attr_ptr[a], attr_ptr[a + 1]):
            out[feat_label[f]] += v * w[f]


@njit(cache=True, parallel=True)
def state_potentials(w, item_ptr, item_attr, item_val, attr_ptr, feat_label, K):
    """unary[n, k] = Σ_{(a, v) in item n} v · w[f(a, k)], shape (N, K). Time O(nnz · labels/attr)."""
    N = item_ptr.shape[0] - 1
    out = np.zeros((N, K))
    for n in prange(N):
        add_item_potentials(w, 1.0, n, item_ptr, item_attr, item_val, attr_ptr, feat_label, out[n])
    return out


@njit(cache=True)
def seq_potentials(w, scale, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, out):
    """Rows o .. o+T-1 of :func:`state_potentials` under the weights scale · w, written into out."""
    K = out.shape[1]
    for r in range(o, o + T):
        for k in range(K):
            out[r, k] = 0.0
        add_item_potentials(w, scale, r, item_ptr, item_attr, item_val, attr_ptr, feat_label, out[r])


@njit(cache=True, parallel=True)
def state_gradient_tokens(resid, item_ptr, item_attr, item_val, attr_ptr, feat_label, n_chunks):
    """g[f(a, k)] = Σ_n Σ_{(a, v) in item n} v · resid[n, k], shape (F,).

    Token-major (the access pattern of :func:`state_potentials`), parallel over ``n_chunks`` blocks of
    tokens, each with its own gradient buffer, summed at the end.
    """
    N = item_ptr.shape[0] - 1
    F = feat_label.shape[0]
    bufs = np.zeros((n_chunks, F))
    step = (N + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        g = bufs[c]
        for n in range(c * step, min(N, (c + 1) * step)):
            for p in range(item_ptr[n], item_ptr[n + 1]):
                a = item_attr[p]
                v = item_val[p]
                for f in range(attr_ptr[a], attr_ptr[a + 1]):
                    g[f] += v * resid[n, feat_label[f]]
    out = bufs[0].copy()
    for c in range(1, n_chunks):
        for f in range(F):
            out[f] += bufs[c, f]
    return out
