"""Higher-order semi-Markov CRF: segment-label n-grams on the :class:`~structlearn.engine.structures.SemiMarkov`
engine by dense expansion to tuples of segment labels (the segment twin of
:mod:`structlearn.crf._higher_order_potentials`, which holds the label-pattern sets). The sparse form, over the
prefixes of the patterns seen in training, is :mod:`structlearn.crf._segment_patterns_sparse`; both
run through :class:`SegmentPatternChain`.
"""
import itertools

import numpy as np
import scipy.sparse as sp

from .._threading import reduction_blocks
from ..engine.kernels.features import state_gradient_tokens, state_potentials
from ..engine.structures import SemiMarkov
from ..engine.structures._base import KBest, Marginals
from ..utils.validation import check_allowed_mask, check_feature_index, check_labels
from ._layout import first_dim

__all__ = ["SegmentPatternModel", "SegmentPatternChain", "runs"]


def runs(y, offsets):
    """Segments of the runs of equal labels: (seg_start (S,), seg_end (S,) inclusive, seg_label (S,),
    seg_offsets (B + 1,)), global token indices."""
    N = y.shape[0]
    new = np.ones(N, bool)
    if N:
        new[1:] = y[1:] != y[:-1]
        new[offsets[:-1][offsets[:-1] < N]] = True
    starts = np.flatnonzero(new)
    ends = np.concatenate([starts[1:], [N]]) - 1 if N else np.zeros(0, np.int64)
    if N:  # a run never crosses a sequence end
        seq_end = offsets[np.searchsorted(offsets, starts, side="right")] - 1
        ends = np.minimum(ends, seq_end)
    seg_offsets = np.searchsorted(starts, offsets).astype(np.int64)
    return starts.astype(np.int64), ends.astype(np.int64), y[starts] if N else np.zeros(0, np.int64), \
        seg_offsets


class SegmentPatternModel:
    """Higher-order semi-Markov CRF: segment-label n-grams on the :class:`~structlearn.engine.structures.SemiMarkov`
    engine through a dense expansion (Cuong et al. 2014, JMLR 15: the extension "is possible for
    both linear-chain- and semi-Markov CRFs").

    Segments are runs of equal token labels (Sarawagi & Cohen 2004's variant: consecutive segments have different
    labels). A segmentation with segment labels k_1..k_m scores

        start[k_1] + Σ_i (Σ_{u in seg i} Σ_a x_{u,a} w_state[a, k_i] + w_dur[len_i - 1, k_i])
                   + Σ_i Σ_{z ∈ Z, k_{i-|z|+1..i} = z} w_pat[z] + end[k_m]

    with Z the segment-label n-grams of length 2..d+1 seen in training. The expansion's states are
    tuples of the last d segment labels, padded at the front with a pad symbol for the first segments;
    the transition between overlapping tuples carries the in-range n-gram weights. Segments longer than
    the longest training run of their label are forbidden. Cost per pass O(N·(D·K' + K'²)) with
    K' = Σ_{n=1..d} K·(K-1)**(n-1) tuple states (657 for K = 9, d = 3); memory O(N·K') plus the
    transition marginals, K'² per sequence, summed over blocks of sequences
    (:attr:`SegmentPatternChain.block_entries`).

    Attributes
    ----------
    tuples : list of tuple
        The S super-labels (here padded d-tuples); ``last`` (S,) int64 their last segment label,
        ``first_state`` (S,) bool those that may start a sequence.
    src, dst : ndarray of int64, shape (E,)
        The expansion's edges; ``trans_inc`` (E, Z) sparse 0/1: the n-grams (n ≥ 2) each one completes.
    state_map : scipy.sparse.csr_matrix, shape (S, Zs)
        The state patterns of every super-label (here Zs = K, its last label): the token unary of
        super-label q is Σ_z state_map[q, z]·phi[:, z].

    Parameter layout: ``w[:F]`` state (attribute, label); ``w[F:F+Z]`` patterns (unigrams stay 0);
    ``w[F+Z:F+Z+D·K]`` durations (D, K); then start (K,), end (K,).
    """

    def __init__(self, patterns, attr_ptr, feat_label, max_lengths):
        self.patterns = patterns
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=np.int64)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=np.int64)
        self.n_labels = K = patterns.n_labels
        self.max_lengths = np.asarray(max_lengths, np.int64)
        self.D = int(self.max_lengths.max())
        d = patterns.order
        pad = K
        tuples = [t for t in itertools.product(range(K + 1), repeat=d)
                  if t[-1] != pad and _pads_first(t, pad) and all(
                      a != b for a, b in zip(t[:-1], t[1:]) if a != pad)]
        self.tuples = tuples
        index = {t: i for i, t in enumerate(tuples)}
        self.last = np.array([t[-1] for t in tuples], np.int64)
        self.first_state = np.array([all(v == pad for v in t[:-1]) for t in tuples], bool)
        src, dst, pat_ptr, pat_ids = [], [], [0], []
        for i, t in enumerate(tuples):
            for k in range(K):
                if k == t[-1]:
                    continue
                s = t + (k,)
                j = index[s[1:]]
                src.append(i)
                dst.append(j)
                for ell in range(2, d + 2):
                    z = s[d + 1 - ell:]
                    if pad in z:
                        break
                    zi = patterns.index.get(z)
                    if zi is not None:
                        pat_ids.append(zi)
                pat_ptr.append(len(pat_ids))
        self.src = np.asarray(src, np.int64)
        self.dst = np.asarray(dst, np.int64)
        E = len(src)
        self.trans_inc = sp.csr_matrix((np.ones(len(pat_ids)), np.asarray(pat_ids, np.int64),
                                        np.asarray(pat_ptr, np.int64)), shape=(E, patterns.n_patterns))
        S = len(tuples)
        self.state_map = sp.csr_matrix((np.ones(S), (np.arange(S), self.last)), shape=(S, K))
        self._first_of = {k: index[(pad,) * (d - 1) + (k,)] for k in range(K)}
        self._step = {(int(a), int(self.last[b])): int(b) for a, b in zip(self.src, self.dst)}

    def check(self):
        """Check the index arrays (a model read from a file); returns ``self``. ValueError: ``attr_ptr``
        does not rise from 0 to F, a ``feat_pat`` outside the state patterns, or ``max_lengths`` not K
        integers ≥ 1."""
        check_feature_index(self.attr_ptr, self.feat_label, self.state_map.shape[1], ids_name="feat_pat")
        if self.max_lengths.shape != (self.n_labels,) or np.any(self.max_lengths < 1):
            raise ValueError(f"'max_lengths' must be K = {self.n_labels} integers ≥ 1; got {self.max_lengths!r}")
        return self

    @property
    def n_states(self):
        return len(self.tuples)

    n_state = first_dim("feat_label")

    @property
    def n_params(self):
        return self.n_state + self.patterns.n_patterns + self.D * self.n_labels + 2 * self.n_labels

    def split(self, w):
        F, Z, D, K = self.n_state, self.patterns.n_patterns, self.D, self.n_labels
        o = F + Z + D * K
        return w[:F], w[F:F + Z], w[F + Z:o].reshape(D, K), w[o:o + K], w[o + K:o + 2 * K]

    def free_mask(self):
        m = np.ones(self.n_params, bool)
        _, mp, md, _, _ = self.split(m)
        mp[...] = self.patterns.lengths >= 2
        md[...] = np.arange(1, self.D + 1)[:, None] <= self.max_lengths[None, :]
        return m

    def structure(self, w, packed, allowed=None):
        """The expanded :class:`SegmentPatternChain` of a packed batch."""
        ws, wp, wd, st, en = self.split(w)
        wp = np.where(self.patterns.lengths >= 2, wp, 0.0)
        phi = state_potentials(ws, packed.item_ptr, packed.item_attr, packed.item_val, self.attr_ptr,
                               self.feat_label, self.state_map.shape[1])
        unary = np.ascontiguousarray(phi @ self.state_map.T)  # (N, S): Σ of the state's state patterns
        if allowed is not None:
            ok = check_allowed_mask(allowed, (packed.n_items, self.n_labels))
            unary = np.where(ok[:, self.last], unary, -np.inf)
        S = self.n_states
        dur = np.where(np.arange(1, self.D + 1)[:, None] <= self.max_lengths[None, :], wd, -np.inf)
        tr = np.full((S, S), -np.inf)
        tr[self.src, self.dst] = np.asarray(self.trans_inc @ wp)
        start = np.where(self.first_state, st[self.last], -np.inf)
        sm = SemiMarkov(unary, np.ascontiguousarray(dur[:, self.last]), tr, lengths=packed.lengths,
                        start=start, end=en[self.last], allow_same_label=True)
        return SegmentPatternChain(self, sm)

    def gold(self, y, offsets):
        """Gold segments in the expanded state space: list of B (n_seg, 3) arrays (local positions)."""
        s0, s1, lab, so = runs(y, offsets)
        out = []
        for b in range(len(offsets) - 1):
            rows = []
            state = -1
            for i in range(so[b], so[b + 1]):
                k = int(lab[i])
                state = self._first_of[k] if state < 0 else self._step[(state, k)]
                rows.append((s0[i] - offsets[b], s1[i] - offsets[b], state))
            out.append(np.asarray(rows, np.int64).reshape(-1, 3))
        return out

    def statistics(self, tok, dur, edge, first, last, packed):
        """Gradient vector from token state-pattern marginals (N, Zs) (``tok = U @ state_map`` with U
        the (N, S) state marginals; Zs = K here), duration counts (D, K), expanded edge totals (E,),
        first / last label totals (K,)."""
        g = np.empty(self.n_params)
        gs, gp, gd, gst, gen = self.split(g)
        gs[...] = state_gradient_tokens(np.ascontiguousarray(tok), packed.item_ptr, packed.item_attr,
                                        packed.item_val, self.attr_ptr, self.feat_label,
                                        reduction_blocks(tok.shape[0]))
        gp[...] = np.where(self.patterns.lengths >= 2, np.asarray(self.trans_inc.T @ edge).ravel(), 0.0)
        gd[...] = np.where(self.free_mask_dur(), dur, 0.0)
        gst[...] = first
        gen[...] = last
        return g

    def free_mask_dur(self):
        return np.arange(1, self.D + 1)[:, None] <= self.max_lengths[None, :]

    def feature_counts(self, packed, y):
        """Observed feature counts (n_params,) of gold token labels ``y`` (N,) (segments = runs)."""
        K = self.n_labels
        N = packed.n_items
        golds = self.gold(y, packed.offsets)
        tstate = np.zeros(N, np.int64)
        for b, segs in enumerate(golds):
            for a, e, q in segs:
                tstate[packed.offsets[b] + a:packed.offsets[b] + e + 1] = q
        onehot = sp.csr_matrix((np.ones(N), (np.arange(N), tstate)), shape=(N, self.n_states))
        tok = (onehot @ self.state_map).toarray()
        s0, s1, sl, so = runs(y, packed.offsets)
        dur = np.zeros((self.D, K))
        np.add.at(dur, (s1 - s0, sl), 1.0)
        edge = np.zeros(len(self.src))
        emap = {(int(a), int(b)): e for e, (a, b) in enumerate(zip(self.src, self.dst))}
        for b, segs in enumerate(golds):
            for i in range(1, len(segs)):
                edge[emap[(int(segs[i - 1, 2]), int(segs[i, 2]))]] += 1.0
        nz = np.flatnonzero(packed.lengths > 0)
        first = np.bincount(y[packed.offsets[nz]], minlength=K).astype(np.float64)
        last = np.bincount(y[packed.offsets[nz + 1] - 1], minlength=K).astype(np.float64)
        return self.statistics(tok, dur, edge, first, last, packed)


def _pads_first(t, pad):
    seen_real = False
    for v in t:
        if v != pad:
            seen_real = True
        elif seen_real:
            return False
    return True


class SegmentPatternChain:
    """A :class:`~structlearn.engine.structures.SemiMarkov` over super-label states (tuples of the last segment
    labels, or pattern prefixes in the sparse form) seen through its segment labels.

    Every super-label path with a finite score is the image of exactly one labelling: the first state is
    fixed by the first segment's label (start is -inf elsewhere) and each next state by the previous
    state and the next segment's label (the transition table is -inf off the automaton's edges, and
    consecutive segments differ in label, so a labelling's runs are its segments). Hence log Z, the
    marginals, Viterbi and the k best paths of the expanded structure are those of the labellings.
    """

    #: largest number of entries (sequences × S²) of the per-sequence transition marginals
    #: :meth:`expected` holds at once; above it the batch is evaluated in blocks of sequences
    block_entries = 2 ** 24

    def __init__(self, model, semimarkov):
        self.model = model
        self.sm = semimarkov
        self.n_rows = semimarkov.n_rows
        self.lengths = semimarkov.lengths
        self.offsets = semimarkov.offsets

    def log_partition(self):
        return self.sm.log_partition()

    def max(self):
        return self.sm.max()

    def argmax(self):
        """Token labels (N,) of the best segmentation."""
        return self.model.last[self.sm.argmax()]

    def score(self, labels):
        """Log-score (B,) of packed token labels (N,), segments = runs of equal labels."""
        labels = check_labels(labels, self.n_rows, self.model.n_labels)
        return self.sm.score(self.model.gold(labels, self.offsets))

    def argmax_segments(self):
        """List of B (n_seg, 3) arrays (start, end, label), local positions."""
        out = []
        for s in self.sm.argmax_segments():
            s = s.copy()
            s[:, 2] = self.model.last[s[:, 2]]
            out.append(s)
        return out

    def kbest(self, k):
        """The k best labellings, best first: the engine's exact k-best Viterbi over super-label paths
        (:meth:`structlearn.engine.structures.SemiMarkov.kbest`) mapped to token labels (one path per labelling,
        see the class docstring, so no two rows of a sequence repeat).

        Returns
        -------
        KBest
            ``labels`` (k, N) int64 (-1 where a sequence has fewer labellings), ``scores`` (B, k) float64
            log-scores (-inf padding). Time O(N·k·(D·S + S²)) for S super-labels.

        Raises
        ------
        ValueError
            ``k`` not a positive integer, or an infeasible sequence.
        """
        kb = self.sm.kbest(k)
        labels = np.where(kb.labels >= 0, self.model.last[np.maximum(kb.labels, 0)], -1)
        return KBest(labels, kb.scores)

    def kbest_segments(self, k):
        """The k best segmentations: list of B lists of (score, (n_seg, 3) int64 (start, end, label))."""
        out = []
        for lst in self.sm.kbest_segments(k):
            res = []
            for sc, segs in lst:
                segs = segs.copy()
                segs[:, 2] = self.model.last[segs[:, 2]]
                res.append((sc, segs))
            out.append(res)
        return out

    def marginals(self, edge="none"):
        """Label marginals P(token n in a segment labelled k), ``unary`` (N, K)."""
        U = self.sm.marginals(edge="none").unary
        lab = np.zeros((self.n_rows, self.model.n_labels))
        np.add.at(lab.T, self.model.last, U.T)
        return Marginals(lab, None)

    def _blocks(self):
        """Engine structures over blocks of sequences, each holding ≤ ``block_entries`` transition
        marginal entries: [(first sequence, last + 1, SemiMarkov)]."""
        sm = self.sm
        B = len(self.lengths)
        per = max(1, self.block_entries // max(1, sm.n_labels ** 2))
        if B <= per:
            return [(0, B, sm)]
        out = []
        for b0 in range(0, B, per):
            b1 = min(B, b0 + per)
            o0, o1 = self.offsets[b0], self.offsets[b1]
            out.append((b0, b1, SemiMarkov(sm.unary[o0:o1], sm.duration, sm.transition,
                                           lengths=self.lengths[b0:b1], start=sm.start, end=sm.end,
                                           allow_same_label=True)))
        return out

    def expected(self, packed):
        """(log Z (B,), expected feature counts (n_params,)). Memory O(N·S + block_entries)."""
        m = self.model
        K, S = m.n_labels, m.n_states
        log_z = np.empty(len(self.lengths))
        U = np.empty((self.n_rows, S))
        dexp = np.zeros((m.D, S))
        etot = np.zeros((S, S))
        for b0, b1, sm in self._blocks():
            o0, o1 = self.offsets[b0], self.offsets[b1]
            marg = sm.marginals(edge="total")
            U[o0:o1] = marg.unary
            etot += marg.edge
            dexp += sum(f.sum(axis=0) for f in sm.duration_marginals())  # (D, S)
            log_z[b0:b1] = sm.log_partition()
        lab = np.zeros((self.n_rows, K))
        np.add.at(lab.T, m.last, U.T)
        tok = np.asarray(U @ m.state_map)
        dur = np.zeros((m.D, K))
        np.add.at(dur.T, m.last, dexp.T)
        nz = np.flatnonzero(self.lengths > 0)
        first = lab[self.offsets[nz]].sum(axis=0)
        last = lab[self.offsets[nz + 1] - 1].sum(axis=0)
        return log_z, m.statistics(tok, dur, etot[m.src, m.dst], first, last, packed)
