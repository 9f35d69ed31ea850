"""Linear-chain CRF feature model: a weight vector -> :class:`~structlearn.structures.LinearChain`.

Parameter layout of ``w`` (float64, length ``n_params``)::

    w[:F]                 state features (attribute, label), grouped by attribute
    w[F:F+K²]             transitions "from, to" (row-major)
    w[F+K²:F+K²+K]        start (label of the first token)
    w[F+K²+K:F+K²+2K]     end (label of the last token)

Transitions without a feature (never observed in training, unless ``all_possible_transitions``) keep
weight 0; forbidden transitions/starts/ends (user constraints such as BIO ``O -> I-X``) are -inf
potentials in training and decoding.
"""
import numba
import numpy as np
from numba import njit, prange

from ..kernels.chain import marginals_seq, marginals_setup
from ..structures import LinearChain
from .features import state_gradient_tokens, state_potentials


class ChainFeatureModel:
    """Maps CRF weights to chain potentials and chain marginals to the gradient.

    Parameters
    ----------
    attr_ptr : ndarray of int64, shape (A + 1,)
    feat_label : ndarray of int64, shape (F,)
    n_labels : int
        K.
    trans_features : ndarray of bool, shape (K, K)
        Which transitions are parameters (others keep weight 0).
    forbidden : ndarray of bool, shape (K, K), optional
        Transitions with potential -inf.
    forbidden_start, forbidden_end : ndarray of bool, shape (K,), optional
        Labels that may not start / end a sequence.
    """

    #: attributes with at least this many label features are dense rows in the fused training kernel
    #: (None: max(4, K / 5))
    dense_min_labels = None

    def __init__(self, attr_ptr, feat_label, n_labels, trans_features, forbidden=None,
                 forbidden_start=None, forbidden_end=None):
        K = int(n_labels)
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=np.int64)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=np.int64)
        self.n_labels = K
        self.trans_features = np.asarray(trans_features, bool)
        self.forbidden = np.zeros((K, K), bool) if forbidden is None else np.asarray(forbidden, bool)
        self.forbidden_start = (np.zeros(K, bool) if forbidden_start is None
                                else np.asarray(forbidden_start, bool))
        self.forbidden_end = (np.zeros(K, bool) if forbidden_end is None
                              else np.asarray(forbidden_end, bool))
        self.trans_features &= ~self.forbidden

    @property
    def n_state(self):
        """Number of state features F."""
        return self.feat_label.shape[0]

    @property
    def n_params(self):
        return self.n_state + self.n_labels ** 2 + 2 * self.n_labels

    def split(self, w):
        """Views (state (F,), trans (K, K), start (K,), end (K,)) into ``w``."""
        F, K = self.n_state, self.n_labels
        return (w[:F], w[F:F + K * K].reshape(K, K), w[F + K * K:F + K * K + K],
                w[F + K * K + K:F + K * K + 2 * K])

    def free_mask(self):
        """Boolean (n_params,): which weights are parameters (others stay 0)."""
        m = np.ones(self.n_params, bool)
        _, tr, st, en = self.split(m)
        tr[...] = self.trans_features
        st[...] = ~self.forbidden_start
        en[...] = ~self.forbidden_end
        return m

    def transition_potentials(self, w):
        """(trans (K, K), start (K,), end (K,)) log-potentials with forbidden entries -inf."""
        _, tr, st, en = self.split(w)
        tr = np.where(self.trans_features, tr, 0.0)
        tr[self.forbidden] = -np.inf
        st = np.where(self.forbidden_start, -np.inf, st)
        en = np.where(self.forbidden_end, -np.inf, en)
        return tr, st, en

    def unary_potentials(self, w, packed):
        """State log-potentials (N, K) of a packed batch. Time O(nnz · labels per attribute)."""
        return state_potentials(w[:self.n_state], packed.item_ptr, packed.item_attr, packed.item_val,
                                self.attr_ptr, self.feat_label, self.n_labels)

    def structure(self, w, packed, allowed=None):
        """The :class:`LinearChain` of a packed batch under weights ``w`` (optionally constrained)."""
        tr, st, en = self.transition_potentials(w)
        chain = LinearChain(self.unary_potentials(w, packed), tr, lengths=packed.lengths, start=st,
                            end=en)
        return chain if allowed is None else chain.constrain(allowed)

    def gradient(self, resid, edge_sum, start_resid, end_resid, packed):
        """Assemble the gradient vector from token residuals.

        Parameters
        ----------
        resid : (N, K) expected minus observed label indicators per token.
        edge_sum : (K, K) expected minus observed transition counts.
        start_resid, end_resid : (K,) the same for the first / last labels.
        packed : the batch's packed items.
        """
        state = state_gradient_tokens(resid, packed.item_ptr, packed.item_attr, packed.item_val,
                                      self.attr_ptr, self.feat_label, numba.get_num_threads())
        return self._vector(state, edge_sum, start_resid, end_resid)

    def _vector(self, state, trans, start, end):
        """Parameter-shaped vector of per-feature statistics; entries that are no parameter are 0."""
        g = np.empty(self.n_params)
        gs, gt, gst, gen = self.split(g)
        gs[...] = state
        gt[...] = np.where(self.trans_features, trans, 0.0)
        gst[...] = np.where(self.forbidden_start, 0.0, start)
        gen[...] = np.where(self.forbidden_end, 0.0, end)
        return g

    def expected_counts(self, w, packed, y, n_chunks=None):
        """log Z, gold scores and expected feature counts of a fully labelled batch in one fused pass.

        Per sequence (in parallel over blocks of sequences) it computes the state potentials, runs the
        engine's forward–backward (:func:`structlearn.kernels.chain.marginals_seq`) and scatters the
        marginals into the feature counts, so no (N, K) array is ever built: the value and gradient of
        the CLL cost one pass over the data. Same numbers as ``structure(w, packed)`` followed by
        ``marginals()`` / ``score(y)`` / :meth:`gradient`.

        Returns
        -------
        log_z, gold : ndarray of float64, shape (B,)
        expected : ndarray of float64, shape (n_params,)
            E_p[f(x, y)] (state, transition, start and end counts).
        """
        tr, st, en = self.transition_potentials(w)
        n_chunks = 2 * numba.get_num_threads() if n_chunks is None else int(n_chunks)
        bounds = _chunk_bounds(packed.offsets, n_chunks)
        dense_of, f_idx, f_row, f_lab, n_dense = self._dense_rows()
        cached = getattr(self, "_item_codes", None)
        if cached is None or cached[0] is not packed.item_attr:
            # one int32 per attribute occurrence, read in order: its dense row, or -(attribute + 1);
            # values are not read at all when every one is 1 (indicator attributes). A small working
            # set keeps the pass in cache between L-BFGS iterations.
            row = dense_of[packed.item_attr]
            code = np.where(row >= 0, row, -packed.item_attr - 1)
            if packed.item_attr.size and max(-code.min(), code.max()) >= 2 ** 31:
                code = code.astype(np.int64)
            else:
                code = code.astype(np.int32)
            cached = (packed.item_attr, code, bool(np.all(packed.item_val == 1.0)))
            self._item_codes = cached
        _, item_code, ones = cached
        log_z, gold, gstate, edge, est, een = _chain_cll_kernel(
            np.ascontiguousarray(w[:self.n_state]), f_idx, f_row, f_lab, n_dense, item_code, ones,
            packed.item_ptr, packed.item_val, self.attr_ptr, self.feat_label,
            np.ascontiguousarray(tr)[None], st, en, packed.offsets, np.asarray(y, dtype=np.int64),
            bounds)
        return log_z, gold, self._vector(gstate, edge, est, een)

    def _dense_rows(self):
        """Attributes with many label features, whose weights the fused kernel reads as dense rows.

        An attribute with at least max(4, K / 5) features gets a row of a small dense (A_d, K) block:
        adding and scattering a contiguous row is vectorised and skips the label indirection (the
        frequent attributes of a CoNLL template: ~3 % of attributes, ~93 % of feature occurrences).
        Returns (dense_of (A,) row or -1, feature indices, their rows, their labels, A_d); cached.
        """
        cache = getattr(self, "_dense_cache", None)
        if cache is not None:
            return cache
        K = self.n_labels
        n_feat = np.diff(self.attr_ptr)
        dense = n_feat >= (max(4, K // 5) if self.dense_min_labels is None else self.dense_min_labels)
        budget = 2 ** 22  # at most 4M dense entries (32 MB)
        if dense.sum() * K > budget:
            keep = np.argsort(-n_feat, kind="stable")[:budget // K]
            dense = np.zeros_like(dense)
            dense[keep] = True
        dense_of = np.full(n_feat.shape[0], -1, dtype=np.int64)
        dense_of[dense] = np.arange(int(dense.sum()))
        f_attr = np.repeat(np.arange(n_feat.shape[0]), n_feat)
        f_idx = np.flatnonzero(dense[f_attr])
        self._dense_cache = (dense_of, f_idx, dense_of[f_attr[f_idx]], self.feat_label[f_idx],
                             int(dense.sum()))
        return self._dense_cache

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_dense_cache", None)
        state.pop("_item_codes", None)
        return state

    def feature_counts(self, packed, y):
        """Observed feature counts of labels ``y`` (N,) — the empirical side of the gradient."""
        K = self.n_labels
        onehot = np.zeros((packed.n_items, K))
        onehot[np.arange(packed.n_items), y] = 1.0
        tr = np.zeros((K, K))
        st = np.zeros(K)
        en = np.zeros(K)
        off = packed.offsets
        nz = np.flatnonzero(packed.lengths > 0)
        np.add.at(st, y[off[nz]], 1.0)
        np.add.at(en, y[off[nz + 1] - 1], 1.0)
        same = np.ones(packed.n_items, bool)
        same[off[1:] - 1] = False  # no transition out of the last token of a sequence
        same = same[:max(packed.n_items - 1, 0)]
        if packed.n_items > 1:
            np.add.at(tr, (y[:-1][same], y[1:][same]), 1.0)
        return self.gradient(onehot, tr, st, en, packed)


def _chunk_bounds(offsets, n_chunks):
    """(C + 1,) sequence indices splitting a batch into C ≤ n_chunks blocks of about equal tokens."""
    B = offsets.shape[0] - 1
    if B == 0:
        return np.zeros(1, dtype=np.int64)
    targets = np.linspace(0, offsets[-1], max(1, min(n_chunks, B)) + 1)[1:-1]
    cuts = np.searchsorted(offsets, targets, side="left")
    return np.unique(np.concatenate([[0], cuts, [B]])).astype(np.int64)


@njit(cache=True, parallel=True)
def _chain_cll_kernel(w, f_idx, f_row, f_lab, n_dense, item_code, ones, item_ptr, item_val, attr_ptr,
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
    w_dense = np.zeros((AD, K))
    for i in prange(f_idx.shape[0]):
        w_dense[f_row[i], f_lab[i]] = w[f_idx[i]]
    eTc, cmax, eTr, rmax, tiny_i, tiny_j, eT_fast, lin = marginals_setup(trans, start, end)
    lin_eT, lin_eTt, gmax, es, smax, ee, emax, lin_ok = lin
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
        alpha = np.empty((maxT, K))
        beta = np.empty((maxT, K))
        inca = np.empty(maxT)
        incb = np.empty(maxT)
        emarg = np.zeros((0, K, K))
        for b in range(bounds[c], bounds[c + 1]):
            o = offsets[b]
            T = offsets[b + 1] - o
            if T == 0:
                continue
            for t in range(T):
                n = o + t
                for k in range(K):
                    U[t, k] = 0.0
                for p in range(item_ptr[n], item_ptr[n + 1]):
                    d = item_code[p]
                    v = 1.0 if ones else item_val[p]
                    if d >= 0:
                        for k in range(K):
                            U[t, k] += v * w_dense[d, k]
                    else:
                        a = -d - 1
                        for f in range(attr_ptr[a], attr_ptr[a + 1]):
                            U[t, feat_label[f]] += v * w[f]
            s = start[y[o]] + end[y[o + T - 1]] + U[0, y[o]]
            for t in range(1, T):
                s += U[t, y[o + t]] + trans[0, y[o + t - 1], y[o + t]]
            gold[b] = s
            lz = marginals_seq(U, trans, start, end, 0, T, 3, alpha, beta, inca, incb, M, emarg,
                               ebuf[c], eTc, cmax, eTr, rmax, tiny_i, tiny_j, eT_fast, lin_eT,
                               lin_eTt, gmax, es, smax, ee, emax, lin_ok)
            log_z[b] = lz
            if lz == -np.inf:
                continue
            for k in range(K):
                sbuf[c, k] += M[0, k]
                nbuf[c, k] += M[T - 1, k]
            for t in range(T):
                n = o + t
                for p in range(item_ptr[n], item_ptr[n + 1]):
                    d = item_code[p]
                    v = 1.0 if ones else item_val[p]
                    if d >= 0:
                        for k in range(K):
                            dbuf[c, d, k] += v * M[t, k]
                    else:
                        a = -d - 1
                        for f in range(attr_ptr[a], attr_ptr[a + 1]):
                            gbuf[c, f] += v * M[t, feat_label[f]]
    gstate = np.zeros(F)
    for f in prange(F):
        acc = 0.0
        for c in range(C):
            acc += gbuf[c, f]
        gstate[f] = acc
    for i in prange(f_idx.shape[0]):
        acc = 0.0
        for c in range(C):
            acc += dbuf[c, f_row[i], f_lab[i]]
        gstate[f_idx[i]] = acc
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
