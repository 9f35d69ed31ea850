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


# -- the fused objectives' feature steps (a dense row block for frequent attributes, the sparse list for
# -- the others), shared by the linear-chain CRF (kernels.crf) and the higher-order CRF (kernels.higher_order_cll)
@njit(cache=True)
def dense_weight_rows(w, f_idx, f_row, f_col, n_dense, n_cols):
    """The (n_dense, n_cols) block of weights ``w[f_idx[i]]`` at ``(f_row[i], f_col[i])`` (0 elsewhere)."""
    w_dense = np.zeros((n_dense, n_cols))
    for i in range(f_idx.shape[0]):
        w_dense[f_row[i], f_col[i]] = w[f_idx[i]]
    return w_dense


@njit(cache=True, inline="always")
def gather_item_row(U, t, n, item_ptr, item_code, item_val, ones, w_dense, attr_ptr, feat_col, w):
    """U[t, :] = Σ over the items p of token n of v_p · (their weight row): ``item_code[p] >= 0`` reads
    the dense row ``w_dense[item_code[p]]``, code -(a + 1) the sparse features of attribute a (column
    ``feat_col[f]``). ``ones``: every value is 1 (``item_val`` not read)."""
    for k in range(U.shape[1]):
        U[t, k] = 0.0
    for p in range(item_ptr[n], item_ptr[n + 1]):
        d = item_code[p]
        v = 1.0 if ones else item_val[p]
        if d >= 0:
            for k in range(U.shape[1]):
                U[t, k] += v * w_dense[d, k]
        else:
            a = -d - 1
            for f in range(attr_ptr[a], attr_ptr[a + 1]):
                U[t, feat_col[f]] += v * w[f]


@njit(cache=True, inline="always")
def scatter_item_row(M, t, n, item_ptr, item_code, item_val, ones, attr_ptr, feat_col, dbuf, gbuf):
    """The transpose of :func:`gather_item_row`: add v_p · M[t, :] to the dense rows ``dbuf`` and to the
    sparse features' ``gbuf`` (expected feature counts of one block of sequences)."""
    for p in range(item_ptr[n], item_ptr[n + 1]):
        d = item_code[p]
        v = 1.0 if ones else item_val[p]
        if d >= 0:
            for k in range(M.shape[1]):
                dbuf[d, k] += v * M[t, k]
        else:
            a = -d - 1
            for f in range(attr_ptr[a], attr_ptr[a + 1]):
                gbuf[f] += v * M[t, feat_col[f]]


@njit(cache=True, parallel=True)
def sum_feature_blocks(gbuf, dbuf, f_idx, f_row, f_col):
    """The expected state-feature counts (F,): the blocks' sparse counts ``gbuf`` (C, F) summed, then the
    dense rows ``dbuf`` (C, n_dense, n_cols) summed into their features ``f_idx``."""
    C, F = gbuf.shape
    out = np.zeros(F)
    for f in prange(F):
        acc = 0.0
        for c in range(C):
            acc += gbuf[c, f]
        out[f] = acc
    for i in prange(f_idx.shape[0]):
        acc = 0.0
        for c in range(C):
            acc += dbuf[c, f_row[i], f_col[i]]
        out[f_idx[i]] = acc
    return out
