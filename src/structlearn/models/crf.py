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
import numpy as np

from ..structures import LinearChain
import numba

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
        g = np.empty(self.n_params)
        gs, gt, gst, gen = self.split(g)
        gs[...] = state_gradient_tokens(resid, packed.item_ptr, packed.item_attr, packed.item_val,
                                        self.attr_ptr, self.feat_label, numba.get_num_threads())
        gt[...] = np.where(self.trans_features, edge_sum, 0.0)
        gst[...] = np.where(self.forbidden_start, 0.0, start_resid)
        gen[...] = np.where(self.forbidden_end, 0.0, end_resid)
        return g

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
