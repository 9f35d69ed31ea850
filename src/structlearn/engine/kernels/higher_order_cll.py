"""Fused Numba kernel of the higher-order CRF objective (sparse pattern inference,
:class:`structlearn.crf._higher_order_potentials.HigherOrderFeatureModel`): state-pattern potentials,
forward–backward over pattern prefixes and expected feature counts in one pass per block of sequences.

The recursion is :func:`structlearn.engine.kernels.higher_order.seq_marginals` (Cuong et al. 2014, JMLR 15, §3);
this module only feeds it per-sequence potentials built from the attribute occurrences and scatters its
class marginals into the feature counts, so no (N, Zs) array is built (the layout of
:func:`structlearn.engine.kernels.crf.chain_cll` for the first-order chain).
"""
import numpy as np
from numba import njit, prange

from .features import dense_weight_rows, gather_item_row, scatter_item_row, sum_feature_blocks
from .higher_order import class_scores, edge_setup, seq_marginals

_NEG = -np.inf


@njit(cache=True, parallel=True)
def pattern_cll(w, f_idx, f_row, f_col, n_dense, item_code, ones, item_ptr, item_val, attr_ptr, feat_pat,
                n_state_patterns, econst, cls, cls_ptr, cls_pat, cls_label, dst, p_last, nd, nd_ptr, nd_src, root_pos,
                start, end, offsets, gold_edges, bounds, linear):
    """log Z, gold scores and expected counts of a fully labelled batch, parallel over blocks of sequences.

    Parameters
    ----------
    w : ndarray of float64, shape (F,)
        State-feature weights; feature f is (attribute a, state pattern ``feat_pat[f]``) for f in
        ``attr_ptr[a]:attr_ptr[a + 1]``.
    f_idx, f_row, f_col : ndarray of int64, shape (F_d,)
        Features read through a dense (n_dense, Zs) weight block: feature ``f_idx[i]`` sits at
        (``f_row[i]``, ``f_col[i]``). An occurrence p with ``item_code[p] >= 0`` adds / collects that
        whole row; the others (code -(a + 1)) go through attribute a's sparse feature list.
    ones : bool
        Every value is 1 (``item_val`` is not read).
    econst, cls, cls_ptr, cls_pat, cls_label, dst, p_last, nd, nd_ptr, nd_src, root_pos : the automaton (see
        :meth:`structlearn.crf._higher_order_potentials.LabelPatterns.sparse`), ``econst`` (E,) the constant edge
        log-potentials.
    start, end : ndarray of float64, shape (K,)
    offsets : ndarray of int64, shape (B + 1,)
    gold_edges : ndarray of int64, shape (N,)
        Automaton edges of the gold labels.
    bounds : ndarray of int64, shape (C + 1,)
        Sequence indices of the blocks.
    linear : bool
        Allow the scaled linear-space pass.

    Returns
    -------
    log_z, gold : (B,) log Z and gold log-score per sequence (log Z -inf: infeasible, adds nothing)
    gstate : (F,) expected state-feature counts
    etot : (E,) Σ_t μ[t, e] (mass of default edges counted on non-default edges with the same patterns)
    est, een : (K,) expected first / last label counts

    Notes
    -----
    Time O(nnz · Zs) (dense rows) + O(N·|P|·K) (recursion); memory O(n_blocks · (F + n_dense·Zs + E)).
    """
    Zs = n_state_patterns
    K = start.shape[0]
    F = feat_pat.shape[0]
    B = offsets.shape[0] - 1
    NB = bounds.shape[0] - 1
    E = econst.shape[0]
    P = p_last.shape[0]
    C = cls_label.shape[0]
    AD = n_dense
    w_dense = dense_weight_rows(w, f_idx, f_row, f_col, AD, Zs)
    cmax, eec, ok = edge_setup(econst)
    lin = linear and ok
    everything = np.zeros((0, K), np.bool_)
    log_z = np.zeros(B)
    gold = np.zeros(B)
    ebufs = np.zeros((NB, E))
    sbuf = np.zeros((NB, K))
    nbuf = np.zeros((NB, K))
    gbuf = np.zeros((NB, F))
    dbuf = np.zeros((NB, AD, Zs))
    for c in prange(NB):
        maxT = 1
        for b in range(bounds[c], bounds[c + 1]):
            maxT = max(maxT, offsets[b + 1] - offsets[b])
        U = np.empty((maxT, Zs))
        phic = np.empty((maxT, C))
        muc = np.empty((maxT, C))
        ebuf = np.empty(E)
        A = np.empty((maxT, E))
        X = np.empty(E)
        for b in range(bounds[c], bounds[c + 1]):
            o = offsets[b]
            T = offsets[b + 1] - o
            if T == 0:
                continue
            for t in range(T):
                gather_item_row(U, t, o + t, item_ptr, item_code, item_val, ones, w_dense, attr_ptr, feat_pat, w)
            class_scores(U, 0, T, cls_ptr, cls_pat, cls_label, everything, 0, phic)
            s = start[gold_edges[o] % K] + end[gold_edges[o + T - 1] % K]
            for t in range(T):
                e = gold_edges[o + t]
                s += econst[e] + phic[t, cls[e]]
            gold[b] = s
            lz = seq_marginals(phic, econst, cmax, eec, lin, cls, dst, p_last, start, end, nd, nd_ptr, nd_src, root_pos,
                               P, K, T, muc, ebuf, A, X)
            log_z[b] = lz
            if lz == _NEG:
                continue
            for e in range(E):
                ebufs[c, e] += ebuf[e]
            for j in range(C):
                sbuf[c, cls_label[j]] += muc[0, j]
                nbuf[c, cls_label[j]] += muc[T - 1, j]
            for t in range(T):  # token state-pattern marginals, into U (its potentials are used up)
                for k in range(Zs):
                    U[t, k] = 0.0
                for j in range(C):
                    m = muc[t, j]
                    for i in range(cls_ptr[j], cls_ptr[j + 1]):
                        U[t, cls_pat[i]] += m
            for t in range(T):
                scatter_item_row(U, t, o + t, item_ptr, item_code, item_val, ones, attr_ptr, feat_pat, dbuf[c],
                                 gbuf[c])
    gstate = sum_feature_blocks(gbuf, dbuf, f_idx, f_row, f_col)
    etot = np.zeros(E)
    est = np.zeros(K)
    een = np.zeros(K)
    for c in range(NB):
        for e in range(E):
            etot[e] += ebufs[c, e]
        for k in range(K):
            est[k] += sbuf[c, k]
            een[k] += nbuf[c, k]
    return log_z, gold, gstate, etot, est, een
