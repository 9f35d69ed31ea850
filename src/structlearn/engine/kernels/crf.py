"""Fused Numba kernel of the linear-chain CRF objective (:class:`structlearn.crf._potentials.ChainFeatureModel`):
state potentials, forward–backward and expected feature counts in one pass per block of sequences."""
import numpy as np
from numba import njit, prange

from .chain import ChainSetup, chain_work, marginals_seq, marginals_setup
from .features import dense_weight_rows, gather_item_row, scatter_item_row, sum_feature_blocks


@njit(cache=True, parallel=True)
def chain_cll(w, f_idx, f_row, f_lab, n_dense, item_code, ones, item_ptr, item_val, attr_ptr,
                      feat_label, trans, start, end, offsets, y, bounds):
    """Fused potentials → forward–backward → expected counts, parallel over blocks of sequences.

    Features ``f_idx`` (of label ``f_lab``) live in rows ``f_row`` of a dense (n_dense, K) weight
    block (0 where (a, k) is no feature); occurrences p with ``item_code[p] >= 0`` read and collect
    that whole row of it, the others (code -(a + 1)) go through the sparse feature list of attribute
    a. ``ones``: every value is 1 (``item_val`` is not read). Returns log Z (B,), gold score
    (B,), expected state feature counts (F,), expected transition counts (K, K), expected start / end
    label counts (K,). Infeasible sequences (log Z = -inf) add nothing.
    """
    K = trans.shape[1]
    F = feat_label.shape[0]
    B = offsets.shape[0] - 1
    C = bounds.shape[0] - 1
    AD = n_dense
    w_dense = dense_weight_rows(w, f_idx, f_row, f_lab, AD, K)
    st = marginals_setup(trans, start, end)
    # built by its constructor here: a parallel loop captures a named tuple only then (Numba)
    setup = ChainSetup(st.eTc, st.cmax, st.eTr, st.eTrt, st.rmax, st.fwd, st.bwd, st.gmax, st.es,
                       st.smax, st.ee, st.emax, st.lin_ok)
    log_z = np.zeros(B)
    gold = np.zeros(B)
    ebuf = np.zeros((C, K, K))
    sbuf = np.zeros((C, K))
    nbuf = np.zeros((C, K))
    gbuf = np.zeros((C, F))
    dbuf = np.zeros((C, AD, K))
    for c in prange(C):
        maxT = 1
        for b in range(bounds[c], bounds[c + 1]):
            maxT = max(maxT, offsets[b + 1] - offsets[b])
        U = np.empty((maxT, K))
        M = np.zeros((maxT, K))
        work = chain_work(maxT, K)
        emarg = np.zeros((0, K, K))
        for b in range(bounds[c], bounds[c + 1]):
            o = offsets[b]
            T = offsets[b + 1] - o
            if T == 0:
                continue
            for t in range(T):
                gather_item_row(U, t, o + t, item_ptr, item_code, item_val, ones, w_dense, attr_ptr, feat_label, w)
            s = start[y[o]] + end[y[o + T - 1]] + U[0, y[o]]
            for t in range(1, T):
                s += U[t, y[o + t]] + trans[0, y[o + t - 1], y[o + t]]
            gold[b] = s
            lz = marginals_seq(U, trans, start, end, 0, T, 3, setup, work, M, emarg, ebuf[c])
            log_z[b] = lz
            if lz == -np.inf:
                continue
            for k in range(K):
                sbuf[c, k] += M[0, k]
                nbuf[c, k] += M[T - 1, k]
            for t in range(T):
                scatter_item_row(M, t, o + t, item_ptr, item_code, item_val, ones, attr_ptr, feat_label, dbuf[c],
                                 gbuf[c])
    gstate = sum_feature_blocks(gbuf, dbuf, f_idx, f_row, f_lab)
    edge = np.zeros((K, K))
    est = np.zeros(K)
    een = np.zeros(K)
    for c in range(C):
        for i in range(K):
            est[i] += sbuf[c, i]
            een[i] += nbuf[c, i]
            for j in range(K):
                edge[i, j] += ebuf[c, i, j]
    return log_z, gold, gstate, edge, est, een
