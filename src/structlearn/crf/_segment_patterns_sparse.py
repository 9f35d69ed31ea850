"""Higher-order semi-Markov CRF with *sparse* segment-label patterns: the super-labels are the pattern
prefixes seen in training instead of all tuples of the last d segment labels.

Nguyen, Ye, Lee & Chieu (2011), "Semi-Markov conditional random field with high-order features" (ICML
workshop on structured sparsity; the semi-Markov form of Ye, Lee, Chieu & Wu 2009 and Qian et al. 2009;
Cuong, Ye, Lee & Chieu 2014, JMLR 15). The seed (appendix, "Higher-order CRFs") gives the α/β recursions
over label tuples and says the same change "also applies to" the semi-Markov ones (the dense form). With Z
the segment-label n-grams (length ≤ d + 1) of the training data, the forward states are

    P = {the K single labels} ∪ {proper prefixes of every z ∈ Z} ∪ {z ∈ Z : |z| ≤ s}

(s = ``state_order``), without the strings where two neighbours are equal (consecutive segments differ in
label, so no history ends in one). The state after segment labels k_1..k_i is the longest suffix of
k_1..k_i in P; after the next label y it is δ(p, y) = the longest suffix of p·y in P. Because every
pattern's proper prefixes and every state pattern are in P, the patterns that end at a segment are
exactly the suffixes in Z of p·y (transition weights, a function of the edge (p, y)) and the state
patterns that end there are the suffixes of δ(p, y) (state features, a function of the state): the
model is a first-order semi-Markov CRF over P (the forward over segment-label prefix states of Nguyen et
al. 2011), which runs on the engine's :class:`~structlearn.engine.structures.SemiMarkov` with a -inf
transition table off the automaton's edges. No recursion of its own (an adapter, like
:class:`~structlearn.crf._segment_patterns.SegmentPatternModel`, the dense form, whose states are all
tuples: the same model, the same numbers, K·(K-1)**(d-1) states instead of |P|).
"""
import numpy as np
import scipy.sparse as sp

from ._higher_order_potentials import state_feature_layout
from ._segment_patterns import SegmentPatternModel, runs

__all__ = ["SparseSegmentPatternModel", "segment_prefix_automaton", "build_segment_state_features"]


def _no_repeat(z):
    return all(a != b for a, b in zip(z[:-1], z[1:]))


def segment_prefix_automaton(patterns):
    """The prefix automaton of a segment-label pattern set (Nguyen et al. 2011).

    Parameters
    ----------
    patterns : LabelPatterns
        K labels, patterns of length 1..d+1 (unigrams first, then those of length ≤ s =
        ``state_order``, the state patterns, ids < Zs).

    Returns
    -------
    dict
        ``states`` list of S tuples (the K unigrams first, state k = (k,)), ``last`` (S,) int64 the
        state's last label, ``src``/``dst``/``label`` (E,) int64 the edges δ(src, label) = dst for every
        label ≠ last[src], ``trans_inc`` (E, Z) sparse 0/1 the patterns of length ≥ 2 ending on each
        edge, ``state_map`` (S, Zs) sparse 0/1 the state patterns that are suffixes of each state.

    Notes
    -----
    Time O(S·K·d) dictionary look-ups, memory O(S·K). S ≤ K + Σ_z |z| (one state per distinct prefix).
    """
    K, Z = patterns.n_labels, patterns.n_patterns
    Zs = patterns.n_state_patterns
    index = patterns.index
    cand = {(k,) for k in range(K)}
    for i, z in enumerate(patterns.patterns):
        cand.update(z[:j] for j in range(1, len(z)))
        if i < Zs:
            cand.add(z)
    states = [(k,) for k in range(K)] + sorted((z for z in cand if len(z) > 1 and _no_repeat(z)),
                                               key=lambda z: (len(z), z))
    sid = {z: i for i, z in enumerate(states)}
    last = np.array([z[-1] for z in states], np.int64)
    src, dst, lab, pat_ptr, pat_ids = [], [], [], [0], []
    for p, pz in enumerate(states):
        for y in range(K):
            if y == pz[-1]:
                continue
            s = pz + (y,)
            q = next(sid[s[i:]] for i in range(len(s)) if s[i:] in sid)
            src.append(p)
            dst.append(q)
            lab.append(y)
            pat_ids.extend(index[s[i:]] for i in range(len(s) - 1) if s[i:] in index)
            pat_ptr.append(len(pat_ids))
    E = len(src)
    trans_inc = sp.csr_matrix((np.ones(len(pat_ids)), np.asarray(pat_ids, np.int64),
                               np.asarray(pat_ptr, np.int64)), shape=(E, Z))
    rows, cols = [], []
    for q, qz in enumerate(states):
        for i in range(len(qz)):
            z = index.get(qz[i:], -1)
            if 0 <= z < Zs:
                rows.append(q)
                cols.append(z)
    state_map = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(states), Zs))
    return {"states": states, "last": last, "src": np.asarray(src, np.int64),
            "dst": np.asarray(dst, np.int64), "label": np.asarray(lab, np.int64), "trans_inc": trans_inc,
            "state_map": state_map}


def build_segment_state_features(packed, y, patterns, n_attributes, min_freq=0.0,
                                 all_possible_states=False):
    """State features (attribute, state pattern) of a segment model: (a, z) exists when attribute a occurs
    (non-zero) at a token of a gold segment where state pattern z (a segment-label n-gram, |z| ≤ s) ends,
    at least ``min_freq`` times; ``all_possible_states``: every attribute seen gets every state pattern.

    Returns ``attr_ptr`` (A + 1,) int64 and ``feat_pat`` (F,) int64 (state-pattern ids < Zs), grouped by
    attribute, ids ascending (with s = 1 the layout of
    :func:`~structlearn.crf.features.build_state_features`). Time O(nnz · s).
    """
    Zs = patterns.n_state_patterns
    if all_possible_states:
        return state_feature_layout(packed, n_attributes, Zs, None)
    s = patterns.state_order
    s0, s1, sl, so = runs(np.asarray(y, np.int64), packed.offsets)
    N = packed.n_items
    ids = np.full((N, s), -1, np.int64)  # state pattern of length k ending at each token's segment
    for b in range(len(packed.offsets) - 1):
        labs = sl[so[b]:so[b + 1]].tolist()
        for i in range(len(labs)):
            for k in range(1, min(s, i + 1) + 1):
                z = patterns.index.get(tuple(labs[i - k + 1:i + 1]), -1)
                if 0 <= z < Zs:
                    ids[s0[so[b] + i]:s1[so[b] + i] + 1, k - 1] = z
    return state_feature_layout(packed, n_attributes, Zs, ids, min_freq)


class SparseSegmentPatternModel(SegmentPatternModel):
    """Higher-order semi-Markov CRF over the pattern-prefix states of :func:`segment_prefix_automaton`
    (Nguyen, Ye, Lee & Chieu 2011), on the :class:`~structlearn.engine.structures.SemiMarkov` engine.

    A segmentation (segments = runs of equal token labels) with segment labels k_1..k_m scores

        start[k_1] + Σ_i (Σ_{u in seg i} Σ_{z ∈ Zs, z suffix of k_1..k_i} Σ_a x_{u,a} w_state[a, z]
                          + w_dur[len_i - 1, k_i] + Σ_{z ∈ Z, |z| ≥ 2, z suffix of k_1..k_i} w_pat[z])
        + end[k_m]

    (Nguyen et al. 2011: features of a segment and the labels of the last |z| segments; Zs the state
    patterns, segment-label n-grams of length ≤ ``state_order``). With ``state_order = 1`` it is the model of the dense
    :class:`~structlearn.crf._segment_patterns.SegmentPatternModel` (same parameter layout, same log Z,
    marginals and gradient).

    Parameters
    ----------
    patterns : LabelPatterns
        Segment-label patterns (:meth:`LabelPatterns.from_labels` on the runs' labels).
    attr_ptr : ndarray of int64, shape (A + 1,)
    feat_pat : ndarray of int64, shape (F,)
        State-pattern id (< Zs) of every state feature (:func:`build_segment_state_features`).
    max_lengths : ndarray of int64, shape (K,)
        Longest segment of every label.

    Notes
    -----
    Parameter layout as the dense model: ``w[:F]`` state (attribute, state pattern), ``w[F:F+Z]``
    patterns (unigrams stay 0), ``w[F+Z:F+Z+D·K]`` durations (D, K), then start (K,), end (K,). One
    evaluation costs O(nnz·Zs/A + N·(D·S + S²)) time with S = |P| states (the engine's two-stage
    forward–backward, Sarawagi & Cohen 2004), memory O(N·S) plus the transition marginals (S², blocked
    over sequences). On CoNLL-2002 Spanish (9 BIO labels, order 3) S is in the hundreds where the dense
    form needs K·(K-1)**2 + K·(K-1) + K = 657 tuples.
    """

    def __init__(self, patterns, attr_ptr, feat_pat, max_lengths):
        self.patterns = patterns
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=np.int64)
        self.feat_label = np.ascontiguousarray(feat_pat, dtype=np.int64)
        if self.feat_label.size and (self.feat_label.min() < 0
                                     or self.feat_label.max() >= patterns.n_state_patterns):
            raise ValueError(f"`feat_pat` must hold state-pattern ids in [0, {patterns.n_state_patterns}); "
                             f"got values in [{self.feat_label.min()}, {self.feat_label.max()}]")
        self.n_labels = K = patterns.n_labels
        self.max_lengths = np.asarray(max_lengths, np.int64)
        if self.max_lengths.shape != (K,) or np.any(self.max_lengths < 1):
            raise ValueError(f"`max_lengths` must be K = {K} integers ≥ 1; got {self.max_lengths!r}")
        self.D = int(self.max_lengths.max())
        au = segment_prefix_automaton(patterns)
        self.tuples = au["states"]  # the super-labels (named as in the dense model)
        self.last = au["last"]
        self.first_state = np.array([len(z) == 1 for z in self.tuples], bool)
        self.src, self.dst = au["src"], au["dst"]
        self.trans_inc = au["trans_inc"]
        self.state_map = au["state_map"]
        self._first_of = {k: k for k in range(K)}
        self._step = {(int(a), int(y)): int(b) for a, b, y in zip(au["src"], au["dst"], au["label"])}

    @property
    def feat_pat(self):
        """State-pattern id of every state feature (F,) int64 (an alias of ``feat_label``)."""
        return self.feat_label
