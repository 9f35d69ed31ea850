"""Semi-Markov CRF feature model: a weight vector -> :class:`~structlearn.engine.structures.SemiMarkov`.

The segment score of a k-segment [s, e] (end inclusive) is (Sarawagi & Cohen 2004, eqs. 3–5;
eq. "sm-alpha", s(y, [i-d, i]))::

    w(s, e, k) = Σ_{u=s..e} Σ_{(a, v) in x_u} v·w_state[a, k]          token state features over the span
               + w_dur[e - s, k]                                       duration ("length") features
               + Σ_{(a, v) in x_s} v·w_first[a, k]                     (segment feature "first")
               + Σ_{(a, v) in x_e} v·w_last[a, k]                      (segment feature "last")
               + w_span[string(x_s..x_e), k]                           (segment feature "span")
               + w_caps[k] · [every token of the span is capitalised]  (segment feature "caps")

plus ``transition[k_i, k_{i+1}]`` between consecutive segments and ``start``/``end`` weights of the
first / last segment's label. With transition attributes (``trans_attr``), the boundary between a
segment ending at token e and the next starting at s = e + 1 also scores
``Σ_a x_{s,a} · W[a, k_i, k_{i+1}]`` (the attribute's value at the first token of the new segment: the
observation-conditioned transitions t(y', y, x, i-1, i) of the seed, the linear chain's "value at token
t+1"); the engine then gets time-varying transitions (N, K, K), row e. State features are those of the linear-chain CRF (same attribute
encoding, :mod:`structlearn.crf.features`); the first four terms of the score are the engine's
``unary`` (N, K) and ``duration`` (D, K) potentials, the segment-level ones its ``segment`` (N, D, K)
potential, which is only materialised when a segment feature is switched on.

Parameter layout of ``w`` (float64, length ``n_params``)::

    state F | transition K² | start K | end K | duration D·K | first F | last F | span S·K | caps K
    | transition attributes Ta·K²

(first … caps only when the corresponding segment feature is used, the last block only with
transition attributes; W[a, i, j] of a forbidden pair, or of i = j with ``allow_same_label=False``,
stays 0). Durations longer than the
label's maximum segment length are -inf; transitions never observed in training keep weight 0.

The objective is the linear-chain CRF's negative CLL
(:class:`~structlearn.crf.objectives.SemiMarkovCLL`) with the engine's semi-Markov marginals as
expectations. Large batches are evaluated in chunks of sequences so that (N, D, K) and (N, K, K)
intermediates stay bounded (``CHUNK_ENTRIES``).
"""
import numpy as np

from .._threading import reduction_blocks
from ..engine.kernels.features import state_gradient_tokens, state_potentials
from ..engine.kernels.semicrf import (segment_potentials, segment_statistics, semicrf_expectations, state_gradient3,
                                      state_potentials3)
from ..engine.kernels.semimarkov_window import NO_TV, NO_TV_ON
from ..engine.structures import SemiMarkov
from ..utils.validation import check_feature_index, check_shapes
from ._layout import first_dim, forwarded
from .features import next_token_values

SEGMENT_FEATURES = ("first", "last", "span", "caps")

#: Upper bound on N_chunk · max(D, K) · K entries of the per-chunk intermediates.
CHUNK_ENTRIES = 4_000_000


# ---------------------------------------------------------------------------------------------------
# batches
# ---------------------------------------------------------------------------------------------------
class SegmentBatch:
    """A packed batch for the semi-Markov feature model.

    Parameters
    ----------
    packed : :class:`~structlearn.crf.features.Packed`
        Token items (N tokens in B sequences).
    span_id : ndarray of int64, shape (N, D), optional
        Id of the span string of [e-d+1, e] in the model's span vocabulary (-1: unknown / none).
    caps : ndarray of bool, shape (N, D), optional
        Whether [e-d+1, e] is all capitalised.
    segments : ndarray of int64, shape (S, 3), optional
        Gold segments (start, end inclusive, label), local to their sequence, concatenated;
        ``seg_offsets`` (B + 1,) delimits each sequence's rows.
    """

    def __init__(self, packed, span_id=None, caps=None, segments=None, seg_offsets=None):
        self.packed = packed
        self.span_id = span_id
        self.caps = caps
        self.segments = segments
        self.seg_offsets = seg_offsets

    lengths, offsets, n_items = forwarded("packed", "lengths", "offsets", "n_items")

    def next_values(self, attr_ids):
        """Sparse (N, Ta) values of the transition attributes at the next token
        (:func:`~structlearn.crf.features.next_token_values`), cached on the batch."""
        cached = getattr(self, "_next_values", None)
        if cached is None or not np.array_equal(cached[0], attr_ids):
            cached = (np.array(attr_ids), next_token_values(self.packed, attr_ids))
            self._next_values = cached
        return cached[1]

    def slice(self, b0, b1):
        """The contiguous sub-batch of sequences b0..b1-1 (views of the arrays; gold segments kept)."""
        r0, r1 = int(self.offsets[b0]), int(self.offsets[b1])
        rows = slice(r0, r1)
        segments = seg_offsets = None
        if self.segments is not None:
            s0, s1 = int(self.seg_offsets[b0]), int(self.seg_offsets[b1])
            segments, seg_offsets = self.segments[s0:s1], self.seg_offsets[b0:b1 + 1] - s0
        return SegmentBatch(self.packed.slice(b0, b1), None if self.span_id is None else self.span_id[rows],
                            None if self.caps is None else self.caps[rows], segments, seg_offsets)

    def segment_lists(self, segs=None):
        """Per-sequence (n_seg, 3) arrays of ``segs`` (default the gold segments)."""
        segs = self.segments if segs is None else segs
        so = self.seg_offsets
        return [segs[so[b]:so[b + 1]] for b in range(len(so) - 1)]


def chunk_bounds(lengths, per_token):
    """Sequence index boundaries [0, b1, ..., B] of chunks of at most CHUNK_ENTRIES / per_token tokens
    (a longer sequence gets a chunk of its own)."""
    cap = max(1, CHUNK_ENTRIES // max(1, per_token))
    bounds = [0]
    acc = 0
    for b, n in enumerate(lengths):
        if acc and acc + n > cap:
            bounds.append(b)
            acc = 0
        acc += int(n)
    bounds.append(len(lengths))
    return bounds


class ChunkedSemiMarkov:
    """The semi-Markov structures of a batch, one per chunk of sequences, built on demand.

    Exposes what the CLL objective and the estimator need: ``log_partition``, ``score``, ``constrain``,
    ``parts()`` (iterates (b0, b1, SemiMarkov)) and the objective's ``expectations`` (cached).
    """

    def __init__(self, model, w, batch, allowed=None):
        self.model = model
        self.w = w
        self.batch = batch
        self.allowed = allowed
        K, D = model.n_labels, model.max_duration
        per = K * max(D, K) if model.has_segment_features else K * K
        self.bounds = chunk_bounds(batch.lengths, per)
        p = model.split(w)
        packed = batch.packed
        args = (packed.item_ptr, packed.item_attr, packed.item_val, model.attr_ptr, model.feat_label, K)
        self._unary = state_potentials(p["state"], *args)
        if allowed is not None:
            self._unary = np.where(allowed, self._unary, -np.inf)
        self._first = state_potentials(p["first"], *args) if "first" in model.segment_features \
            else np.zeros((1, K))
        self._last = state_potentials(p["last"], *args) if "last" in model.segment_features \
            else np.zeros((1, K))
        self._pots = model.chain_potentials(w)
        # time-varying transitions (N, K, K) with transition attributes, else None
        self._tv = model.edge_potentials(w, batch)[0] if model.n_trans_attr else None
        self._cache = {}

    def parts(self):
        """Yield (b0, b1, SemiMarkov) for every chunk of sequences [b0, b1)."""
        m, batch = self.model, self.batch
        off = batch.offsets
        trans, start, end, dur = self._pots
        p = m.split(self.w)
        for b0, b1 in zip(self.bounds[:-1], self.bounds[1:]):
            o0, o1 = int(off[b0]), int(off[b1])
            seg = None
            if m.has_segment_features:
                span_id = batch.span_id if batch.span_id is not None else np.full((1, 1), -1, np.int64)
                caps = batch.caps if batch.caps is not None else np.zeros((1, 1), np.bool_)
                seg = segment_potentials(self._first, self._last, p["span"], span_id, caps, p["caps"],
                                         off[b0:b1 + 1], o0, m.max_duration, m.use_flags)
            tr = trans if self._tv is None else self._tv[o0:o1]
            yield b0, b1, SemiMarkov(self._unary[o0:o1], dur, tr, lengths=batch.lengths[b0:b1],
                                     start=start, end=end, segment=seg,
                                     allow_same_label=m.allow_same_label)

    def constrain(self, allowed):
        return ChunkedSemiMarkov(self.model, self.w, self.batch, allowed)

    def log_partition(self):
        if "log_z" not in self._cache:
            self._cache["log_z"] = np.concatenate(
                [sm.log_partition() for _, _, sm in self.parts()] or [np.zeros(0)])
        return self._cache["log_z"]

    def score(self, segs):
        """Scores (B,) of the gold segments of the batch (``segs`` = ``batch.segments``) or of a list of
        B (n_seg, 3) arrays."""
        if isinstance(segs, np.ndarray) and segs.ndim == 2 and self.batch.seg_offsets is not None \
                and segs.shape[0] == self.batch.seg_offsets[-1]:
            if "gold" in self._cache:
                return self._cache["gold"]
            segs = self.batch.segment_lists(segs)
        out = [sm.score(list(segs[b0:b1])) for b0, b1, sm in self.parts()]
        return np.concatenate(out) if out else np.zeros(0)

    def expectations(self):
        """(statistics tuple, log Z (B,)) — see :meth:`SemiMarkovFeatureModel.gradient`."""
        if "stats" in self._cache:
            return self._cache["stats"], self._cache["log_z"]
        m, batch = self.model, self.batch
        N, K, D = batch.n_items, m.n_labels, m.max_duration
        off = batch.offsets
        token = np.zeros((N, K))
        edge = np.zeros((K, K))
        edge_rows = np.zeros((N, K, K)) if m.n_trans_attr else None
        dur = np.zeros((D, K))
        first = np.zeros((N, K)) if m.has_segment_features else None
        last = np.zeros((N, K)) if m.has_segment_features else None
        g_span = np.zeros((m.n_spans, K)) if m.has_segment_features else None
        g_caps = np.zeros(K) if m.has_segment_features else None
        log_z, gold = [], []
        want_gold = self.allowed is None and batch.segments is not None
        gold_lists = batch.segment_lists() if want_gold else None
        span_id = batch.span_id if batch.span_id is not None else np.full((1, 1), -1, np.int64)
        caps = batch.caps if batch.caps is not None else np.zeros((1, 1), np.bool_)
        for b0, b1, sm in self.parts():
            o0, o1 = int(off[b0]), int(off[b1])
            mg = sm.marginals()
            token[o0:o1] = mg.unary
            edge += mg.edge.sum(axis=0)
            if edge_rows is not None:
                edge_rows[o0:o1] = mg.edge
            dm = sm.duration_marginals()
            dur += (dm.middle + dm.first + dm.last + dm.single).sum(axis=0)
            if m.has_segment_features:
                M = sm.segment_marginals()
                segment_statistics(M, off[b0:b1 + 1], o0, span_id, caps, m.use_flags, first, last,
                                   g_span, g_caps)
            log_z.append(sm.log_partition())
            if want_gold:
                gold.append(sm.score(gold_lists[b0:b1]))
        nz = np.flatnonzero(batch.lengths > 0)
        stats = (token, edge, token[off[nz]].sum(axis=0), token[off[nz + 1] - 1].sum(axis=0), dur,
                 first, last, g_span, g_caps, edge_rows)
        self._cache["stats"] = stats
        self._cache["log_z"] = np.concatenate(log_z) if log_z else np.zeros(0)
        if want_gold:
            self._cache["gold"] = np.concatenate(gold) if gold else np.zeros(0)
        return stats, self._cache["log_z"]


# ---------------------------------------------------------------------------------------------------
# the feature model
# ---------------------------------------------------------------------------------------------------
class SemiMarkovFeatureModel:
    """Maps semi-Markov CRF weights to :class:`SemiMarkov` potentials and its marginals to the gradient.

    Mirrors :class:`~structlearn.crf._potentials.ChainFeatureModel` (same state features and encoding).

    Parameters
    ----------
    attr_ptr : ndarray of int64, shape (A + 1,)
    feat_label : ndarray of int64, shape (F,)
        State features (attribute, label), grouped by attribute (also used by "first" / "last").
    n_labels : int
        K segment labels.
    max_lengths : ndarray of int64, shape (K,)
        Longest segment of every label (D = max); longer durations get potential -inf.
    trans_features : ndarray of bool, shape (K, K)
        Which segment-label transitions are parameters.
    allow_same_label : bool
        Whether consecutive segments may share a label.
    segment_features : tuple of str
        Subset of ``("first", "last", "span", "caps")``.
    span_features : ndarray of bool, shape (S, K), optional
        Which (span string, label) pairs are parameters ("span" only; S strings in the vocabulary).
    forbidden : ndarray of bool, shape (K, K), optional
        Transitions with potential -inf.
    trans_attr : ndarray of int64, shape (Ta,), optional
        Attribute ids whose value at the first token of a segment scales a weight ``W[a, k_prev, k]``
        of the boundary into it (observation-conditioned transitions; the structure then gets
        time-varying transitions (N, K, K), row e = the boundary after token e).
    """

    def __init__(self, attr_ptr, feat_label, n_labels, max_lengths, trans_features, allow_same_label,
                 segment_features=(), span_features=None, forbidden=None, trans_attr=None):
        K = int(n_labels)
        self.trans_attr = np.ascontiguousarray(np.zeros(0, np.int64) if trans_attr is None
                                               else trans_attr, dtype=np.int64)
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=np.int64)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=np.int64)
        self.n_labels = K
        self.max_lengths = np.asarray(max_lengths, dtype=np.int64)
        self.max_duration = int(self.max_lengths.max())
        self.allow_same_label = bool(allow_same_label)
        self.segment_features = tuple(f for f in SEGMENT_FEATURES if f in segment_features)
        self.has_segment_features = bool(self.segment_features)
        self.use_flags = np.array([f in self.segment_features for f in SEGMENT_FEATURES])
        self.span_features = (np.zeros((0, K), bool) if span_features is None
                              else np.asarray(span_features, bool))
        self.n_spans = self.span_features.shape[0] if "span" in self.segment_features else 0
        self.forbidden = np.zeros((K, K), bool) if forbidden is None else np.asarray(forbidden, bool)
        tf = np.asarray(trans_features, bool) & ~self.forbidden
        if not self.allow_same_label:
            np.fill_diagonal(tf, False)
        self.trans_features = tf
        D = self.max_duration
        self.dur_features = np.arange(1, D + 1)[:, None] <= self.max_lengths[None, :]
        sizes = [("state", self.n_state), ("trans", K * K), ("start", K), ("end", K), ("dur", D * K)]
        for f in self.segment_features:
            sizes.append((f, {"first": self.n_state, "last": self.n_state, "span": self.n_spans * K,
                              "caps": K}[f]))
        if self.n_trans_attr:
            sizes.append(("trans_attr", self.n_trans_attr * K * K))
        # W[a, i, j] is a parameter where the transition is possible
        self.trans_attr_features = ~self.forbidden
        if not self.allow_same_label:
            np.fill_diagonal(self.trans_attr_features, False)
        self._layout = {}
        pos = 0
        for name, n in sizes:
            self._layout[name] = (pos, pos + n)
            pos += n
        self.n_params = pos

    def check(self):
        """Check the index arrays against each other (a model read from a file); returns ``self``.

        Raises
        ------
        ValueError
            ``attr_ptr`` does not rise from 0 to F, a ``feat_label`` outside [0, K), a transition attribute
            outside [0, A), ``max_lengths`` below 1, or a mask of the wrong shape: the kernels would read
            outside their arrays.
        """
        K, ta = self.n_labels, self.trans_attr
        check_feature_index(self.attr_ptr, self.feat_label, K)
        check_shapes(vars(self), {"max_lengths": (K,), "trans_features": (K, K), "forbidden": (K, K),
                                  "span_features": (self.span_features.shape[0], K)})
        if np.any(self.max_lengths < 1):
            raise ValueError(f"'max_lengths' must be at least 1; got {self.max_lengths.tolist()}")
        A = self.attr_ptr.size - 1
        if ta.ndim != 1 or (ta.size and (ta.min() < 0 or ta.max() >= A)):
            raise ValueError(f"'trans_attr' must hold attribute ids in [0, {A}); got {ta.tolist()[:10]}")
        return self

    n_state = first_dim("feat_label")
    n_trans_attr = first_dim("trans_attr", "Number of transition attributes Ta.")

    def split_trans_attr(self, w):
        """View (Ta, K, K) of the transition-attribute weights W in ``w``."""
        return self.split(w)["trans_attr"]

    def edge_potentials(self, w, batch):
        """Time-varying transition log-potentials of a batch with transition attributes.

        Returns
        -------
        tv : ndarray of float64, shape (N, K, K)
            Row e: the boundary after token e, ``transition + Σ_a x_{e+1,a} · W[a]`` (forbidden pairs
            and, with ``allow_same_label=False``, the diagonal -inf); the stationary transitions on
            rows without an active attribute.
        active : ndarray of bool, shape (N,)
            Rows where some transition attribute is non-zero at token e + 1.

        Time and memory O(N·K²).
        """
        tr = self.chain_potentials(w)[0]
        K, Ta = self.n_labels, self.n_trans_attr
        nv = batch.next_values(self.trans_attr)
        W = np.where(self.trans_attr_features, self.split_trans_attr(w), 0.0).reshape(Ta, K * K)
        tv = np.asarray(nv @ W).reshape(-1, K, K) + tr
        tv[:, self.forbidden] = -np.inf
        if not self.allow_same_label:
            tv[:, np.arange(K), np.arange(K)] = -np.inf
        return tv, np.diff(nv.indptr) > 0

    def split(self, w):
        """Dict of views into ``w``: state (F,), trans (K, K), start, end (K,), dur (D, K) and, when used,
        first, last (F,), span (S, K), caps (K,); unused blocks are zero arrays."""
        K, D = self.n_labels, self.max_duration
        shapes = {"trans": (K, K), "dur": (D, K), "span": (self.n_spans, K),
                  "trans_attr": (self.n_trans_attr, K, K)}
        out = {"first": np.zeros(0), "last": np.zeros(0), "span": np.zeros((0, K)), "caps": np.zeros(K),
               "trans_attr": np.zeros((0, K, K))}
        for name, (a, b) in self._layout.items():
            v = w[a:b]
            out[name] = v.reshape(shapes[name]) if name in shapes else v
        return out

    def free_mask(self):
        """Boolean (n_params,): which weights are parameters (others stay 0)."""
        m = np.ones(self.n_params, bool)
        p = self.split(m)
        p["trans"][...] = self.trans_features
        p["dur"][...] = self.dur_features
        if "span" in self.segment_features:
            p["span"][...] = self.span_features
        p["trans_attr"][...] = self.trans_attr_features
        return m

    def chain_potentials(self, w):
        """(transition (K, K), start (K,), end (K,), duration (D, K)) log-potentials."""
        p = self.split(w)
        tr = np.where(self.trans_features, p["trans"], 0.0)
        tr[self.forbidden] = -np.inf
        dur = np.where(self.dur_features, p["dur"], -np.inf)
        return tr, p["start"].copy(), p["end"].copy(), dur

    def structure(self, w, batch, allowed=None):
        """The (chunked) semi-Markov structures of ``batch`` under ``w``, optionally constrained by a
        boolean (N, K) mask of allowed segment labels per token."""
        return ChunkedSemiMarkov(self, w, batch, allowed)

    def token_potentials(self, w, batch):
        """(unary, begin, last) float64 (N, K) each: state, "first" and "last" token scores (zeros for
        an unused block)."""
        p = self.split(w)
        packed = batch.packed
        K = self.n_labels
        args = (packed.item_ptr, packed.item_attr, packed.item_val, self.attr_ptr, self.feat_label, K)
        if "first" in self.segment_features and "last" in self.segment_features:
            return state_potentials3(p["state"], p["first"], p["last"], *args)
        out = []
        for name in ("state", "first", "last"):
            if name == "state" or name in self.segment_features:
                out.append(state_potentials(p[name], *args))
            else:
                out.append(np.zeros((packed.n_items, K)))
        return tuple(out)

    def expectations(self, w, batch):
        """Fused forward–backward (:func:`structlearn.engine.kernels.semicrf.semicrf_expectations`): the
        statistics tuple of :meth:`gradient` and log Z (B,), without building (N, D, K) arrays.
        Time O(N·(Σ_k L_k + K²)) plus O(nnz · labels per attribute), parallel over sequences."""
        unary, begin, last = self.token_potentials(w, batch)
        p = self.split(w)
        tr, st, en, dur = self.chain_potentials(w)
        if not self.allow_same_label:
            np.fill_diagonal(tr, -np.inf)
        use_span = "span" in self.segment_features and batch.span_id is not None
        use_caps = "caps" in self.segment_features and batch.caps is not None
        span_id = batch.span_id if use_span else np.full((1, 1), -1, np.int64)
        caps = batch.caps if use_caps else np.zeros((1, 1), np.bool_)
        span_w = np.ascontiguousarray(p["span"]) if use_span else np.zeros((0, self.n_labels))
        caps_w = np.ascontiguousarray(p["caps"]) if "caps" in self.segment_features \
            else np.zeros(self.n_labels)
        tv, tv_on = self.edge_potentials(w, batch) if self.n_trans_attr else (NO_TV, NO_TV_ON)
        res = semicrf_expectations(unary, begin, last, dur, self.max_lengths, tr, st, en, span_id,
                                   span_w, caps, caps_w, use_span, use_caps, batch.offsets,
                                   _blocks(batch), self.n_spans, tv, tv_on)
        log_z, token, first, last_m, edge, g_dur, g_st, g_en, g_span, g_caps, edge_rows = res
        if not use_span:
            g_span = np.zeros((self.n_spans, self.n_labels))
        edge_rows = edge_rows if self.n_trans_attr else None
        return (token, edge, g_st, g_en, g_dur, first, last_m, g_span, g_caps, edge_rows), log_z

    def gradient(self, stats, batch):
        """Gradient vector (n_params,) from expected (or observed) statistics.

        ``stats`` = (token (N, K), edge (K, K), start (K,), end (K,), dur (D, K), first (N, K), last (N, K),
        span (S, K), caps (K,), edge_rows (N, K, K)): per-token label occupancy, transition counts,
        first / last segment labels, (duration, label) counts, for segment features the per-token
        segment-start and segment-end occupancies, span-string and all-caps counts, and for transition
        attributes the transition counts of every boundary row e (None when unused); the statistic of
        W[a] is Σ_e x_{e+1,a} · edge_rows[e].
        """
        token, edge, st, en, dur, first, last, g_span, g_caps, edge_rows = stats
        packed = batch.packed
        g = np.zeros(self.n_params)
        p = self.split(g)
        args = (packed.item_ptr, packed.item_attr, packed.item_val, self.attr_ptr, self.feat_label,
                reduction_blocks(token.shape[0]))
        if "first" in self.segment_features and "last" in self.segment_features:
            g3 = state_gradient3(np.ascontiguousarray(token), np.ascontiguousarray(first),
                                 np.ascontiguousarray(last), *args)
            p["state"][...] = g3[0]
            p["first"][...] = g3[1]
            p["last"][...] = g3[2]
        else:
            p["state"][...] = state_gradient_tokens(np.ascontiguousarray(token), *args)
        p["trans"][...] = np.where(self.trans_features, edge, 0.0)
        p["start"][...] = st
        p["end"][...] = en
        p["dur"][...] = np.where(self.dur_features, dur, 0.0)
        if "first" in self.segment_features and "last" not in self.segment_features:
            p["first"][...] = state_gradient_tokens(np.ascontiguousarray(first), *args)
        if "last" in self.segment_features and "first" not in self.segment_features:
            p["last"][...] = state_gradient_tokens(np.ascontiguousarray(last), *args)
        if "span" in self.segment_features:
            p["span"][...] = np.where(self.span_features, g_span, 0.0)
        if "caps" in self.segment_features:
            p["caps"][...] = g_caps
        if self.n_trans_attr:
            K = self.n_labels
            ta = np.asarray(batch.next_values(self.trans_attr).T @ edge_rows.reshape(-1, K * K))
            p["trans_attr"][...] = np.where(self.trans_attr_features, ta.reshape(-1, K, K), 0.0)
        return g

    def gold_statistics(self, batch, segs=None):
        """The statistics of :meth:`gradient` for given segments (default the batch's gold)."""
        segs = batch.segments if segs is None else segs
        N, K, D = batch.n_items, self.n_labels, self.max_duration
        so = batch.seg_offsets
        seq = np.repeat(np.arange(len(so) - 1), np.diff(so))
        o = batch.offsets[seq]
        s, e, k = segs[:, 0] + o, segs[:, 1] + o, segs[:, 2]
        d = e - s
        cover = np.zeros(N + 1)
        token = np.zeros((N, K))
        # occupancy: +1 at s, -1 after e, per label
        diff = np.zeros((N + 1, K))
        np.add.at(diff, (s, k), 1.0)
        np.add.at(diff, (e + 1, k), -1.0)
        token[...] = np.cumsum(diff, axis=0)[:N]
        del cover
        edge = np.zeros((K, K))
        same = np.flatnonzero(seq[1:] == seq[:-1]) if len(seq) > 1 else np.zeros(0, np.int64)
        np.add.at(edge, (k[same], k[same + 1]), 1.0)
        edge_rows = None
        if self.n_trans_attr:
            edge_rows = np.zeros((N, K, K))
            np.add.at(edge_rows, (e[same], k[same], k[same + 1]), 1.0)
        st = np.zeros(K)
        en = np.zeros(K)
        firsts = so[:-1][np.diff(so) > 0]
        lasts = so[1:][np.diff(so) > 0] - 1
        np.add.at(st, k[firsts], 1.0)
        np.add.at(en, k[lasts], 1.0)
        dur = np.zeros((D, K))
        ok = d < D
        np.add.at(dur, (d[ok], k[ok]), 1.0)
        first = last = g_span = g_caps = None
        if self.has_segment_features:
            first = np.zeros((N, K))
            last = np.zeros((N, K))
            np.add.at(first, (s, k), 1.0)
            np.add.at(last, (e, k), 1.0)
            g_span = np.zeros((self.n_spans, K))
            g_caps = np.zeros(K)
            if "span" in self.segment_features and batch.span_id is not None:
                sid = batch.span_id[e[ok], d[ok]]
                good = sid >= 0
                np.add.at(g_span, (sid[good], k[ok][good]), 1.0)
            if "caps" in self.segment_features and batch.caps is not None:
                cp = batch.caps[e[ok], d[ok]]
                np.add.at(g_caps, k[ok][cp], 1.0)
        return (token, edge, st, en, dur, first, last, g_span, g_caps, edge_rows)

    def __setstate__(self, state):
        # models pickled before transition attributes
        state.setdefault("trans_attr", np.zeros(0, np.int64))
        self.__dict__.update(state)
        if "trans_attr_features" not in state:
            self.trans_attr_features = ~self.forbidden
            if not self.allow_same_label:
                np.fill_diagonal(self.trans_attr_features, False)

    def feature_counts(self, batch, y=None):
        """Observed feature counts of the batch's gold segments (the empirical side of the gradient)."""
        return self.gradient(self.gold_statistics(batch), batch)


def _blocks(batch):
    """Sequence boundaries (C + 1,) of blocks with about equal token counts, fixed by the batch
    (:func:`structlearn._threading.reduction_blocks`, about 1024 tokens each, at most 64: the per-block
    statistics are summed in block order, so the result does not depend on the thread count); cached
    on the batch."""
    bl = getattr(batch, "_blocks", None)
    if bl is None:
        off = batch.offsets
        B = len(off) - 1
        C = max(1, min(B, reduction_blocks(off[-1], 64, 1024)))
        cuts = np.searchsorted(off[1:], np.linspace(0, off[-1], C + 1)[1:-1], side="left") + 1
        bl = np.unique(np.concatenate([[0], np.clip(cuts, 0, B), [B]])).astype(np.int64)
        batch._blocks = bl
    return bl
