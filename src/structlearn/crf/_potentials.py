"""Linear-chain CRF feature model: a weight vector -> :class:`~structlearn.engine.structures.LinearChain`.

The layout of the weight vector ``w``, which transitions are parameters and the -inf potentials of
forbidden ones: :mod:`structlearn.crf._layout`.
"""
import numpy as np

from .._threading import reduction_blocks
from ..engine.kernels.crf import chain_cll
from ..engine.kernels.features import state_gradient_tokens, state_potentials
from ..engine.structures import LinearChain
from ._layout import ChainLayout
from .features import dense_feature_rows, next_token_values


class ChainFeatureModel(ChainLayout):
    """Maps CRF weights to chain potentials and chain marginals to the gradient.

    Parameters
    ----------
    attr_ptr, feat_label, n_labels, trans_features, forbidden, forbidden_start, forbidden_end, start_end, trans_attr
        The weight layout: see :class:`~structlearn.crf._layout.ChainLayout`, which also gives the
        transition potentials; this class adds the state potentials, the chain, the fused objective and
        the gradient (Numba kernels).
    """

    #: attributes with at least this many label features are dense rows in the fused training kernel
    #: (None: max(4, K / 5))
    dense_min_labels = None

    def unary_potentials(self, w, packed):
        """State log-potentials (N, K) of a packed batch. Time O(nnz · labels per attribute)."""
        return state_potentials(w[:self.n_state], packed.item_ptr, packed.item_attr, packed.item_val,
                                self.attr_ptr, self.feat_label, self.n_labels)

    def _next_values(self, packed):
        """Sparse (N, Ta): row n holds the transition-attribute values of token n + 1 of the same
        sequence (0 on the last token of a sequence), the step n -> n + 1 of time-varying transitions."""
        return next_token_values(packed, self.trans_attr)

    def edge_potentials(self, w, packed):
        """Transition log-potentials: (K, K), or (N, K, K) with transition attributes (row n: the step
        from token n to n + 1; forbidden pairs -inf). Time and memory O(N·K²) in the second case."""
        tr, _, _ = self.transition_potentials(w)
        if not self.n_trans_attr:
            return tr
        K = self.n_labels
        W = np.where(self.forbidden, 0.0, self.split_trans_attr(w)).reshape(self.n_trans_attr, K * K)
        out = np.asarray(self._next_values(packed) @ W).reshape(-1, K, K) + tr
        out[:, self.forbidden] = -np.inf
        return out

    def structure(self, w, packed, allowed=None):
        """The :class:`LinearChain` of a packed batch under weights ``w`` (optionally constrained)."""
        tr, st, en = self.transition_potentials(w)
        tr = self.edge_potentials(w, packed) if self.n_trans_attr else tr
        chain = LinearChain(self.unary_potentials(w, packed), tr, lengths=packed.lengths, start=st,
                            end=en)
        return chain if allowed is None else chain.constrain(allowed)

    def gradient(self, resid, edge_sum, start_resid, end_resid, packed, edge_full=None):
        """Assemble the gradient vector from token residuals.

        Parameters
        ----------
        resid : (N, K) expected minus observed label indicators per token.
        edge_sum : (K, K) expected minus observed transition counts.
        start_resid, end_resid : (K,) the same for the first / last labels.
        packed : the batch's packed items.
        edge_full : (N, K, K) expected minus observed pair indicators per step, optional
            Needed with transition attributes (their statistics are Σ_n x_{n+1,a} · edge_full[n]).
        """
        state = state_gradient_tokens(resid, packed.item_ptr, packed.item_attr, packed.item_val,
                                      self.attr_ptr, self.feat_label, reduction_blocks(resid.shape[0]))
        g = self._vector(state, edge_sum, start_resid, end_resid)
        if self.n_trans_attr:
            K = self.n_labels
            ta = np.asarray(self._next_values(packed).T @ edge_full.reshape(-1, K * K))
            self.split_trans_attr(g)[...] = np.where(self.forbidden, 0.0, ta.reshape(-1, K, K))
        return g

    def _vector(self, state, trans, start, end):
        """Parameter-shaped vector of per-feature statistics; entries that are no parameter are 0."""
        g = np.zeros(self.n_params)
        gs, gt, gst, gen = self.split(g)
        gs[...] = state
        gt[...] = np.where(self.trans_features, trans, 0.0)
        gst[...] = np.where(self.forbidden_start | (not self.start_end), 0.0, start)
        gen[...] = np.where(self.forbidden_end | (not self.start_end), 0.0, end)
        return g

    def expected_counts(self, w, packed, y, n_chunks=None):
        """log Z, gold scores and expected feature counts of a fully labelled batch in one fused pass.

        Per sequence (in parallel over blocks of sequences) it computes the state potentials, runs the
        engine's forward–backward (:func:`structlearn.engine.kernels.crf.chain_cll` calling
        :func:`structlearn.engine.kernels.chain.marginals_seq`) and scatters the
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
        n_chunks = reduction_blocks(packed.offsets[-1]) if n_chunks is None else int(n_chunks)
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
        log_z, gold, gstate, edge, est, een = chain_cll(
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
        self._dense_cache = dense_feature_rows(self.attr_ptr, self.feat_label, self.n_labels,
                                               self.dense_min_labels)
        return self._dense_cache

    def shard_copy(self):
        """A shallow copy (the same arrays and dense rows, built here once) with its own per-batch cache
        (the item codes of the last batch ``expected_counts`` saw): for the shards one process evaluates
        in turn, which would otherwise rebuild each other's codes at every evaluation. O(1) after the
        dense rows."""
        self._dense_rows()
        own = object.__new__(type(self))
        own.__dict__.update(self.__dict__)
        own.__dict__.pop("_item_codes", None)
        return own

    def __setstate__(self, state):
        state.setdefault("start_end", True)
        state.setdefault("trans_attr", np.zeros(0, np.int64))
        self.__dict__.update(state)

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
        full = None
        if self.n_trans_attr:
            full = np.zeros((packed.n_items, K, K))
            idx = np.flatnonzero(same)
            full[idx, y[idx], y[idx + 1]] = 1.0
        return self.gradient(onehot, tr, st, en, packed, full)


def _chunk_bounds(offsets, n_chunks):
    """(C + 1,) sequence indices splitting a batch into C ≤ n_chunks blocks of about equal tokens."""
    B = offsets.shape[0] - 1
    if B == 0:
        return np.zeros(1, dtype=np.int64)
    targets = np.linspace(0, offsets[-1], max(1, min(n_chunks, B)) + 1)[1:-1]
    cuts = np.searchsorted(offsets, targets, side="left")
    return np.unique(np.concatenate([[0], cuts, [B]])).astype(np.int64)
