"""``SemiMarkovCRF``: a scikit-learn estimator that labels whole segments (semi-Markov CRF)."""
import re
import time

import numpy as np

from ..engine.kernels.semicrf import span_all_caps, span_hashes
from .objectives import SemiMarkovCLL
from ..metrics.sequence import labels_from_segments, segments_from_labels
from .features import AttributeVocabulary, build_state_features
from ..utils.validation import check_shapes
from ._semi_markov_potentials import SEGMENT_FEATURES, SegmentBatch, SemiMarkovFeatureModel
from ._base import CRFBase
from ..learning.posterior_check import check_posteriors
from ..learning.params import (ALL_POSSIBLE_STATES, ALL_POSSIBLE_TRANSITIONS, LBFGS_PARAMS, MIN_FREQ, N_JOBS, VERBOSE,
                               Param)

_FORMAT = "semi-markov-crf"
_VERSION = 1
_BIO = re.compile(r"^[BIES]-.+")
LABEL_FORMATS = ("auto", "bio", "runs", "segments")


class SemiMarkovCRF(CRFBase):
    """Semi-Markov conditional random field (Sarawagi & Cohen 2004).

    Labels whole segments: a segmentation of a sequence into labelled segments (s, e, k) scores

    ``Σ_segments [Σ_{u=s..e} Σ_a x_{u,a} w[a, k] + w_dur[e-s, k] + segment features] +
    Σ_i (w_trans[k_i, k_{i+1}] + Σ_{a in transition_attributes} x_{s_{i+1},a} W[a, k_i, k_{i+1}]) +
    w_start[k_1] + w_end[k_m]``

    (see :mod:`structlearn.crf._semi_markov_potentials`); inference is the engine's
    :class:`~structlearn.engine.structures.SemiMarkov`, training the linear-chain CRF's negative conditional
    log-likelihood with L-BFGS / OWL-QN (:func:`~structlearn.learning.optimizers.lbfgs`). Token items are
    encoded exactly as for :class:`~structlearn.LinearChainCRF`.

    Parameters
    ----------
    algorithm : {"lbfgs"}, default "lbfgs"
        Maximum likelihood with L-BFGS (OWL-QN when ``c1 > 0``). The online trainers of the linear chain
        are not available for segments.
    c1, c2 : float, default 0 and 1
        L1 and L2 coefficients (CRFsuite scaling, as :class:`~structlearn.LinearChainCRF`).
    max_iterations : int, optional
        L-BFGS iterations (unlimited by default).
    num_memories, epsilon, period, delta, linesearch, max_linesearch :
        L-BFGS settings, CRFsuite's defaults (6, 1e-5, 10, 1e-5, "MoreThuente", 20).
    min_freq : float, default 0
        Keep state features seen at least this many times.
    all_possible_states, all_possible_transitions : bool, default False
        Every (attribute, label) / (label, label) pair is a feature, not only those seen.
    max_segment_length : None, "per-label", "global", int or dict label -> int, default None
        Longest segment; longer segments are impossible (duration potential -inf).

        - ``"per-label"`` (or ``None``, the default): per label, the longest training segment of that
          label — CRFSuite 0.13's rule (its ``semimarkov.c`` keeps one maximum per label and its forward
          recursion reads the last label's); tighter, so faster, and never proposes e.g. a 12-token
          punctuation segment;
        - ``"global"``: one length L for every label, the longest training segment of any label — seed
          000's wording ("the maximum possible length (L) of a segment with identical labels that exists
          in the training set") and Sarawagi & Cohen 2004, §3;
        - an int: that L for every label (not CRFSuite 0.13's ``-p feature.max_seg_len=N``, whose sign
          only chooses between the semi-Markov and the linear-chain model: see ``structlearn learn --help``);
        - a dict label -> int: per label, labels not in it keep their longest training segment.

        Measured on CoNLL-2000 chunking (first 2,000 training sentences, chunking template,
        ``allow_same_label=True``, 60 L-BFGS iterations, the full test set; 2-core shared machine):
        ``"per-label"`` (NP 12, VP 7, PP 4, O 1, ...) chunk F1 0.9183, fit 91 s; ``"global"`` (L = 12 for
        every label) chunk F1 0.9184, fit 142 s — the same accuracy at 1.6x the training time.
    allow_same_label : bool, default False
        Whether two consecutive segments may share a label. False is Sarawagi & Cohen 2004's variant (segments are
        maximal runs); chunking and word segmentation need True.
    segment_features : sequence of str, default ("first", "last")
        Segment-level features, any of ``"first"`` (the first token's attributes × label), ``"last"``
        (the last token's), ``"span"`` (the whole span's token string × label, strings seen in
        training) and ``"caps"`` (every token of the span starts with an upper-case letter × label).
        Duration (length × label) features are always on. Token state features summed over a span
        cannot tell a segment's first token from the others; "first" and "last" give the semi-Markov
        CRF the information of the linear chain's B- / E- tags (CoNLL-2000 chunk F1 0.8716 without
        them at 70 iterations, 0.9363 with them, converged; linear chain 0.9361). Training never
        builds (N, D, K) arrays (fused kernel, :mod:`structlearn.engine.kernels.semicrf`); prediction with
        segment features builds the (N, D, K) segment potential in chunks of sequences, O(N·D·K).
    token_attribute : str, default "w[0]"
        Where "span" and "caps" find the token's string when ``tokens`` is not passed: the item
        attribute ``"w[0]=<token>"`` (or a dict item ``{"w[0]": "<token>"}``).
    label_format : {"auto", "bio", "runs", "segments"}, default "auto"
        How ``y`` gives the segments. ``"bio"``: token tags B-X / I-X (also IOB1, IOBES); every token
        tagged ``outside`` is a one-token segment labelled ``outside``. ``"runs"``: every maximal run of
        equal token labels is one segment. ``"segments"``: per sequence a list of
        ``(start, end, label)`` with ``end`` exclusive; tokens no segment covers become one-token
        ``outside`` segments. ``"auto"``: segments if ``y``'s items are tuples, else bio if every label
        is ``outside`` or matches ``[BIES]-…``, else runs.
    outside : str, default "O"
        The outside label of the bio / segments formats.
    transition_attributes : None or list of str
        Attribute × label-pair transition features (the seed's observation-conditioned transition
        scores t(y', y, x, i−1, i), as ``LinearChainCRF(transition_attributes=...)``): for every listed
        attribute a (names as in ``attributes_``, e.g. ``"w:,"`` for ``{"w": ","}``) a weight
        ``W[a, k_i, k_{i+1}]`` per pair of consecutive segment labels, scaled by a's value at the first
        token of the new segment ("the segment starts at a comma"). The segment boundaries then have
        time-varying transitions (the engine's (N, K, K) form, row e = the boundary after token e):
        O(N·K²) more time and memory per pass. Pairs that cannot follow each other (and equal labels
        with ``allow_same_label=False``) keep W = 0. Names never seen in training are an error.
    verbose : bool
        Per-iteration progress (tqdm).
    n_jobs : int or None, default None
        L-BFGS over worker processes on this machine, as :class:`~structlearn.LinearChainCRF`'s: the
        result is bitwise that of ``n_jobs=None`` and of any thread count.

    Attributes
    ----------
    classes_ : list of str
        Segment labels in order of first appearance (for bio: chunk types, and ``outside``).
    label_format_ : str
        The resolved label format.
    max_lengths_ : dict label -> int
    attributes_ : list of str
    coef_ : ndarray of float64, shape (n_params,)
    transition_attribute_features_ : dict (attribute, label_from, label_to) -> float
        The non-zero transition-attribute weights W.
    n_iter_, converged_, training_log_, training_seconds_

    Notes
    -----
    Time per L-BFGS iteration: one fused semi-Markov forward–backward that returns log Z and every
    expected feature count (:func:`structlearn.engine.kernels.semicrf.semicrf_expectations`),
    O(N·(Σ_k L_k + K²)) with L_k the longest segment of label k, plus O(nnz · labels per attribute)
    for potentials and gradient; memory O(N·K) (parallel over sequences, Numba); with
    ``transition_attributes`` O(N·K²) more time and memory, a boundary with an active attribute costing
    K² exps. Prediction,
    marginals and k-best run on :class:`~structlearn.engine.structures.SemiMarkov`, O(N·(D·K + K²)), with
    segment features O(N·D·K) in chunks of at most 4·10⁶ entries.
    """

    _score_noun = "segmentation"
    _parameters = (
        Param("algorithm", "lbfgs", "{lbfgs}",
              "trainer: lbfgs only (the online trainers do not handle segments)"),
        *LBFGS_PARAMS, MIN_FREQ, ALL_POSSIBLE_STATES, ALL_POSSIBLE_TRANSITIONS,
        Param("max_segment_length", None, "int>=1|dict|None|{per-label,global}",
              "longest segment: an int, a dict label -> length, 'global' (the longest training segment) "
              "or 'per-label'/None (per label, its longest training segment)"),
        Param("allow_same_label", False, "bool", "consecutive segments may share a label"),
        Param("segment_features", ("first", "last"), "list{" + ",".join(SEGMENT_FEATURES) + "}",
              "segment features among " + ", ".join(SEGMENT_FEATURES) + " (duration features always on)"),
        Param("token_attribute", "w[0]", "str", "item attribute holding the token string (span, caps)"),
        Param("label_format", "auto", "{" + ",".join(LABEL_FORMATS) + "}",
              "how y gives the segments: bio tags, runs of equal labels, (start, end, label) lists"),
        Param("outside", "O", "str", "the outside label of the bio / segments formats"),
        Param("transition_attributes", None, "any",
              "attribute names whose value at a segment's first token scales a (previous label, label) "
              "weight"),
        VERBOSE, N_JOBS)

    def __init__(self, algorithm="lbfgs", c1=0.0, c2=1.0, max_iterations=None, num_memories=6,
                 epsilon=1e-5, period=10, delta=1e-5, linesearch="MoreThuente", max_linesearch=20,
                 min_freq=0.0, all_possible_states=False, all_possible_transitions=False,
                 max_segment_length=None, allow_same_label=False, segment_features=("first", "last"),
                 token_attribute="w[0]", label_format="auto", outside="O", transition_attributes=None,
                 verbose=False, n_jobs=None):
        self._store_params(locals())

    # ------------------------------------------------------------------------------------------------
    # label conversion
    # ------------------------------------------------------------------------------------------------
    def _resolve_format(self, y):
        fmt = self.label_format
        if fmt != "auto":
            return fmt
        for seq in y:
            if len(seq):
                return "segments" if isinstance(seq[0], (tuple, list)) else (
                    "bio" if all(str(t) == self.outside or _BIO.match(str(t)) for s in y for t in s)
                    else "runs")
        return "runs"

    def _segments_of(self, y, lengths, fmt, name="y"):
        """Per-sequence lists of (start, end inclusive, label str) tiling each sequence."""
        if y is None or isinstance(y, (str, bytes)) or not hasattr(y, "__len__"):
            raise ValueError(f"`{name}` must be a list of label sequences or segment lists; got "
                             f"{type(y).__name__}")
        if len(y) != len(lengths):
            raise ValueError(f"`{name}` has {len(y)} sequences but X has {len(lengths)}")
        out = []
        for b, (seq, T) in enumerate(zip(y, lengths)):
            T = int(T)
            if fmt == "segments":
                cover = np.zeros(T, bool)
                segs = []
                for item in seq:
                    try:
                        s, e, lab = item
                        s, e = int(s), int(e)
                    except (TypeError, ValueError):
                        raise ValueError(f"`{name}[{b}]`: segments must be (start, end, label) with end "
                                         f"exclusive; got {item!r}") from None
                    if not 0 <= s < e <= T or cover[s:e].any():
                        raise ValueError(f"`{name}[{b}]`: segment {item!r} is empty, outside [0, {T}) or "
                                         f"overlaps another (end is exclusive)")
                    cover[s:e] = True
                    segs.append((s, e - 1, str(lab)))
                segs += [(t, t, self.outside) for t in np.flatnonzero(~cover)]
                segs.sort()
            else:
                if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__") or len(seq) != T:
                    raise ValueError(f"sequence {b}: {T} items but "
                                     f"{len(seq) if hasattr(seq, '__len__') else 'no'} labels in "
                                     f"`{name}[{b}]`; every item needs exactly one label")
                labs = [str(t) for t in seq]
                if fmt == "bio":
                    segs = [(s, e - 1, typ) for s, e, typ in segments_from_labels(labs)]
                    cover = np.zeros(T, bool)
                    for s, e, _ in segs:
                        cover[s:e + 1] = True
                    segs += [(t, t, self.outside) for t in np.flatnonzero(~cover)]
                    segs.sort()
                else:
                    segs = []
                    s = 0
                    for t in range(1, T + 1):
                        if t == T or labs[t] != labs[s]:
                            segs.append((s, t - 1, labs[s]))
                            s = t
            out.append(segs)
        return out

    def _pack_segments(self, seg_lists, grow):
        rows = []
        counts = []
        for b, segs in enumerate(seg_lists):
            counts.append(len(segs))
            for s, e, lab in segs:
                k = self._label_index.get(lab)
                if k is None:
                    if not grow:
                        raise ValueError(f"sequence {b}: label {lab!r} was not seen in training (known "
                                         f"labels: {self.classes_[:10]})")
                    k = self._label_index[lab] = len(self.classes_)
                    self.classes_.append(lab)
                rows.append((s, e, k))
        segs = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
        so = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return segs, so

    # ------------------------------------------------------------------------------------------------
    # token strings (segment features "span" and "caps")
    # ------------------------------------------------------------------------------------------------
    def _token_strings(self, X, tokens, packed, check=True):
        if tokens is not None:
            if len(tokens) != len(packed.lengths) or any(
                    len(t) != n for t, n in zip(tokens, packed.lengths)):
                raise ValueError("`tokens` must give one string per item of every sequence of X")
            return [str(t) for seq in tokens for t in seq]
        ta = self.token_attribute
        pre = ta + "="
        out = []
        found = False
        for seq in X:
            for item in seq:
                tok = ""
                if isinstance(item, dict):
                    v = item.get(ta)
                    if isinstance(v, str):
                        tok = v
                    else:
                        for key in item:
                            if key.startswith(pre):
                                tok = key[len(pre):]
                                break
                else:
                    for a in item:
                        if isinstance(a, str) and a.startswith(pre):
                            tok = a[len(pre):]
                            break
                found = found or bool(tok)
                out.append(tok)
        if check and not found and out:
            raise ValueError(f"segment features {list(self.segment_features)} need the token strings: no "
                             f"item has the attribute {pre!r}…; set `token_attribute` or pass `tokens`")
        return out

    def _batch(self, X, lengths=None, tokens=None, grow=False):
        packed = self._vocab.encode(X, lengths, grow=grow)
        span_id = caps = None
        sf = self.model_.segment_features if hasattr(self, "model_") else tuple(self.segment_features)
        D = self._max_duration
        if "span" in sf or "caps" in sf:
            strings = self._token_strings(X, tokens, packed)
            if "span" in sf:
                if grow:
                    self._tok_index = {}
                    for s in strings:
                        self._tok_index.setdefault(s, len(self._tok_index))
                ids = np.array([self._tok_index.get(s, -1) for s in strings], dtype=np.int64)
                span_id = span_hashes(ids, packed.offsets, D)  # hashes; mapped to ids below
            if "caps" in sf:
                is_cap = np.array([s[:1].isupper() for s in strings], dtype=np.bool_)
                caps = span_all_caps(is_cap, packed.offsets, D)
        return SegmentBatch(packed, span_id, caps)

    def _map_spans(self, batch):
        if batch.span_id is None:
            return
        h = batch.span_id
        table = self._span_hash
        if table.size == 0:
            batch.span_id = np.full(h.shape, -1, np.int64)
            return
        pos = np.clip(np.searchsorted(table, h), 0, table.size - 1)
        batch.span_id = np.where((table[pos] == h) & (h != -1), pos, -1).astype(np.int64)

    # ------------------------------------------------------------------------------------------------
    # fitting (the steps that structlearn.distributed shares: it feeds them counts merged over shards)
    # ------------------------------------------------------------------------------------------------
    def _max_lengths_of(self, seen):
        """(K,) int longest segment per label of ``max_segment_length``, given ``seen`` (K,) int64, the
        longest training segment per label (``classes_`` order); ValueError when a training segment is
        longer."""
        K = len(seen)
        msl = self.max_segment_length
        if msl is None or msl == "per-label":
            max_lengths = np.maximum(seen, 1)
        elif msl == "global":
            max_lengths = np.full(K, max(int(seen.max(initial=1)), 1))
        elif isinstance(msl, dict):
            max_lengths = np.array([int(msl.get(c, seen[k])) for k, c in enumerate(self.classes_)])
        else:
            max_lengths = np.full(K, int(msl))
        bad = np.flatnonzero(seen > max_lengths)
        if bad.size:
            k = int(bad[0])
            raise ValueError(f"a training segment labelled {self.classes_[k]!r} has length {seen[k]} > "
                             f"max_segment_length {max_lengths[k]}; raise `max_segment_length`")
        return max_lengths

    def _consecutive_segments(self, segs, so):
        """(sequence of every segment (S,), rows i of ``segs`` followed by a segment of the same sequence);
        ValueError for two consecutive segments of one label with ``allow_same_label=False``."""
        seq = np.repeat(np.arange(len(so) - 1), np.diff(so))
        same = np.flatnonzero(seq[1:] == seq[:-1]) if len(seq) > 1 else np.zeros(0, np.int64)
        if not self.allow_same_label:
            hit = same[segs[same, 2] == segs[same + 1, 2]]
            if hit.size:
                b = int(seq[hit[0]])
                raise ValueError(f"training sequence {b} has two consecutive segments labelled "
                                 f"{self.classes_[segs[hit[0], 2]]!r}, impossible with "
                                 f"allow_same_label=False; set allow_same_label=True")
        return seq, same

    def _feature_model(self, vocab, attr_ptr, feat_label, max_lengths, trans_features, span_features):
        """The SemiMarkovFeatureModel of the training features; sets ``attributes_`` and
        ``max_lengths_``."""
        model = SemiMarkovFeatureModel(attr_ptr, feat_label, len(self.classes_), max_lengths, trans_features,
                                       self.allow_same_label, tuple(self.segment_features),
                                       span_features, trans_attr=self._transition_attribute_ids(vocab))
        self.attributes_ = vocab.names
        self.max_lengths_ = {c: int(max_lengths[k]) for k, c in enumerate(self.classes_)}
        return model

    def fit(self, X, y, *, lengths=None, tokens=None, callback=None):
        """Train on sequences ``X`` with segmentations ``y``.

        Parameters
        ----------
        X : list of sequences of items, or scipy.sparse matrix (N, F) with ``lengths``
            Items as for :class:`~structlearn.LinearChainCRF` (python-crfsuite format).
        y : list of label sequences, or list of lists of (start, end exclusive, label)
            See ``label_format``.
        tokens : list of lists of str, optional
            Token strings for the "span" / "caps" segment features (default: from ``token_attribute``).
        callback : callable, optional
            Called with every iteration's log entry; returning True stops training.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Empty training set, labels that do not fit the items, overlapping segments, a gold segment
            longer than ``max_segment_length``, consecutive same-label segments with
            ``allow_same_label=False``, bad parameters.
        """
        self._check_params()
        t0 = time.perf_counter()
        for attr in ("model_", "coef_"):
            if hasattr(self, attr):
                delattr(self, attr)
        vocab = AttributeVocabulary()
        self._vocab = vocab
        packed = vocab.encode(X, lengths, grow=True)
        self._check_nonempty(packed)
        fmt = self._resolve_format(y)
        self.label_format_ = fmt
        self.classes_ = []
        self._label_index = {}
        seg_lists = self._segments_of(y, packed.lengths, fmt)
        segs, so = self._pack_segments(seg_lists, grow=True)
        K = len(self.classes_)
        dur = segs[:, 1] - segs[:, 0] + 1
        seen = np.zeros(K, np.int64)
        np.maximum.at(seen, segs[:, 2], dur)
        max_lengths = self._max_lengths_of(seen)
        seq, same = self._consecutive_segments(segs, so)
        self._max_duration = int(max_lengths.max())
        batch = self._batch(X, lengths, tokens, grow=True)
        batch.segments, batch.seg_offsets = segs, so
        # span vocabulary: the strings of the gold spans
        n_spans, span_features = 0, None
        if batch.span_id is not None:
            o = packed.offsets[seq]
            h = batch.span_id[segs[:, 1] + o, dur - 1]
            ok = h != -1
            self._span_hash = np.unique(h[ok])
            self._map_spans(batch)
            n_spans = self._span_hash.size
            span_features = np.zeros((n_spans, K), bool)
            sid = batch.span_id[segs[:, 1] + o, dur - 1]
            span_features[sid[sid >= 0], segs[sid >= 0, 2]] = True
        else:
            self._span_hash = np.zeros(0, np.int64)
            self._tok_index = {}
        token_y = np.repeat(segs[:, 2], dur)
        A = len(vocab)
        attr_ptr, feat_label = build_state_features(packed, token_y, A, K, self.min_freq,
                                                    self.all_possible_states)
        if self.all_possible_transitions:
            trans_features = np.ones((K, K), bool)
        else:
            trans_features = np.zeros((K, K), bool)
            trans_features[segs[same, 2], segs[same + 1, 2]] = True
        model = self._feature_model(vocab, attr_ptr, feat_label, max_lengths, trans_features, span_features)
        self.featurize_seconds_ = time.perf_counter() - t0

        objective = SemiMarkovCLL(model, batch, segs, c2=self.c2)
        self._train(model, objective, t0, callback=callback, desc="train semi-Markov CRF (lbfgs)")
        self.model_ = model
        return self

    # ------------------------------------------------------------------------------------------------
    # prediction
    # ------------------------------------------------------------------------------------------------
    def _structure(self, X, lengths=None, tokens=None, constraints=None):
        self._check_fitted()
        batch = self._batch(X, lengths, tokens)
        self._map_spans(batch)
        allowed = (None if constraints is None
                   else self._constraint_mask(constraints, batch.packed, what="segment label"))
        return batch, self.model_.structure(self.coef_, batch, allowed)

    def _public_segments(self, arr):
        """(n_seg, 3) local inclusive -> list of (start, end exclusive, label), outside dropped."""
        cls = self.classes_
        drop = self.label_format_ in ("bio", "segments")
        return [(int(s), int(e) + 1, cls[k]) for s, e, k in arr
                if not (drop and cls[k] == self.outside)]

    def _token_labels(self, arr, T):
        cls = self.classes_
        if self.label_format_ == "runs":
            out = [None] * T
            for s, e, k in arr:
                out[s:e + 1] = [cls[k]] * (e - s + 1)
            return out
        return labels_from_segments([(s, e, lab) for s, e, lab in self._public_segments(arr)], T,
                                    "IOB2", self.outside)

    def _argmax(self, X, lengths, tokens, constraints):
        batch, sm = self._structure(X, lengths, tokens, constraints)
        out = []
        for _, _, part in sm.parts():
            out.extend(part.argmax_segments())
        return batch, out

    def predict_segments(self, X, constraints=None, *, lengths=None, tokens=None):
        """Best segmentation of every sequence (semi-Markov Viterbi).

        Parameters
        ----------
        X : list of sequences of items
        constraints : list of dict position -> segment label(s) (one per sequence), or bool (N, K)
            Restrict the label of the segment covering a token (constrained decoding).

        Returns
        -------
        list of lists of (start, end exclusive, label)
            Outside segments are left out for the bio / segments label formats.

        Raises
        ------
        ValueError
            If a sequence has no possible segmentation (e.g. constraints with allow_same_label=False).
        """
        _, segs = self._argmax(X, lengths, tokens, constraints)
        return [self._public_segments(a) for a in segs]

    def predict(self, X, constraints=None, *, lengths=None, tokens=None):
        """Token labels of the best segmentation: IOB2 tags (bio / segments formats) or the segment label
        of every token (runs). Same arguments as :meth:`predict_segments`."""
        batch, segs = self._argmax(X, lengths, tokens, constraints)
        return [self._token_labels(a, int(T)) for a, T in zip(segs, batch.lengths)]

    def predict_single(self, xseq):
        """Token labels of one sequence."""
        return self.predict([xseq])[0]

    def predict_marginals(self, X, *, lengths=None, tokens=None):
        """P(token t lies in a segment labelled k): list of (T, K) float64 arrays (``classes_`` order)."""
        batch, sm = self._structure(X, lengths, tokens)
        out = []
        for b0, _, part in sm.parts():
            log_z = self._finite_log_z(part.log_partition(), b0)
            u = part.marginals().unary
            check_posteriors(u, part.offsets, log_z, "the marginals", self._unit_noun, first=b0)
            out.extend(u[part.offsets[b]:part.offsets[b + 1]] for b in range(part.batch_size))
        return out

    def predict_segment_marginals(self, X, threshold=1e-3, *, lengths=None, tokens=None):
        """Segments whose posterior probability exceeds ``threshold``.

        Returns
        -------
        list (per sequence) of lists of (start, end exclusive, label, probability)
            Time O(N·D·K).
        """
        batch, sm = self._structure(X, lengths, tokens)
        out = [[] for _ in range(len(batch.lengths))]
        cls = self.classes_
        for b0, _, part in sm.parts():
            self._finite_log_z(part.log_partition(), b0)
            for b, s, e, k, p in part.iter_segment_marginals(threshold):
                out[b0 + b].append((s, e + 1, cls[k], p))
        return out

    def kbest(self, X, k=5, *, output="segments", lengths=None, tokens=None):
        """The k most likely segmentations of every sequence with their probabilities.

        Parameters
        ----------
        output : {"segments", "labels"}
            Each segmentation as in :meth:`predict_segments` or as token labels as in :meth:`predict`.

        Returns
        -------
        list (per sequence) of lists of (segments or labels, probability), best first.
        Time O(N·k·(D·K + K²)).
        """
        if output not in ("segments", "labels"):
            raise ValueError(f"`output` must be 'segments' or 'labels'; got {output!r}")
        batch, sm = self._structure(X, lengths, tokens)
        out = []
        for b0, _, part in sm.parts():
            log_z = self._finite_log_z(part.log_partition(), b0)
            for b, items in enumerate(part.kbest_segments(k)):
                T = int(batch.lengths[b0 + b])
                conv = (self._public_segments if output == "segments"
                        else (lambda a, T=T: self._token_labels(a, T)))
                out.append([(conv(a), float(np.exp(sc - log_z[b]))) for sc, a in items])
        return out

    def predict_proba_sequence(self, X, *, lengths=None, tokens=None):
        """Probability of the best segmentation of each sequence, shape (B,)."""
        _, sm = self._structure(X, lengths, tokens)
        out = [np.exp(part.max() - self._finite_log_z(part.log_partition(), b0)) for b0, _, part in sm.parts()]
        return np.concatenate(out) if out else np.zeros(0)

    def log_partition(self, X, *, lengths=None, tokens=None):
        """log Z(x) of every sequence, shape (B,)."""
        return self._structure(X, lengths, tokens)[1].log_partition()

    def segmentation_probability(self, X, y, *, lengths=None, tokens=None):
        """p(segmentation | x) of given segmentations (any label format of ``fit``), shape (B,)."""
        batch, sm = self._structure(X, lengths, tokens)
        fmt = self.label_format_ if self.label_format == "auto" else self.label_format
        if self.label_format == "auto":
            fmt = self._resolve_format(y) if any(len(s) for s in y) else self.label_format_
        segs, so = self._pack_segments(self._segments_of(y, batch.lengths, fmt), grow=False)
        batch.segments, batch.seg_offsets = segs, so
        return np.exp(sm.score(batch.segment_lists()) - sm.log_partition())

    def score(self, X, y):
        """Segment F1 of :meth:`predict_segments` against ``y`` (exact (start, end, label) matches)."""
        batch, pred = self._argmax(X, None, None, None)
        fmt = self._resolve_format(y) if self.label_format == "auto" else self.label_format
        gold = self._segments_of(y, batch.lengths, fmt)
        tp = n_pred = n_gold = 0
        for p, g in zip(pred, gold):
            ps = set(self._public_segments(p))
            gs = {(s, e + 1, lab) for s, e, lab in g
                  if not (self.label_format_ in ("bio", "segments") and lab == self.outside)}
            tp += len(ps & gs)
            n_pred += len(ps)
            n_gold += len(gs)
        if n_pred + n_gold == 0:
            return 1.0
        return 2.0 * tp / (n_pred + n_gold)

    # ------------------------------------------------------------------------------------------------
    # model files
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.SemiMarkovCRF")

    def _file_metadata(self):
        tok = [None] * len(getattr(self, "_tok_index", {}))
        for s, i in getattr(self, "_tok_index", {}).items():
            tok[i] = s
        return {**super()._file_metadata(), "label_format": self.label_format_, "tokens": tok}

    def _file_arrays(self):
        m = self.model_
        return {"attr_ptr": m.attr_ptr, "feat_label": m.feat_label, "max_lengths": m.max_lengths,
                "trans_features": m.trans_features, "forbidden": m.forbidden,
                "span_features": m.span_features, "span_hash": self._span_hash,
                "trans_attr": m.trans_attr}

    def _restore(self, meta, arrays):
        self._restore_labels(meta)
        self.label_format_ = meta["label_format"]
        self._tok_index = {s: i for i, s in enumerate(meta.get("tokens", []))}
        self._span_hash = h = np.asarray(arrays["span_hash"], dtype=np.int64)
        K = len(self.classes_)
        check_shapes(arrays, {"trans_features": (K, K), "forbidden": (K, K), "max_lengths": (K,),
                              "span_features": (np.shape(arrays["span_features"])[:1] + (K,))})
        # durations bound the (D, K) blocks: at most the stored weights (a corrupted file must not allocate)
        ml = np.asarray(arrays["max_lengths"])
        if ml.size and (ml.min() < 1 or ml.max() > self.coef_.size):
            raise ValueError(f"'max_lengths' must lie in [1, {self.coef_.size}]; got {ml.tolist()}")
        if "span" in self.segment_features and (h.ndim != 1 or h.size != np.shape(arrays["span_features"])[0]
                                                or np.any(h[1:] <= h[:-1])):  # no diff: hashes overflow
            raise ValueError(f"'span_hash' must be {np.shape(arrays['span_features'])[0]} increasing hashes "
                             f"(one per row of 'span_features'); got shape {h.shape}")
        self.model_ = SemiMarkovFeatureModel(
            arrays["attr_ptr"], arrays["feat_label"], K, arrays["max_lengths"],
            arrays["trans_features"], self.allow_same_label, self.segment_features,
            arrays["span_features"], arrays["forbidden"],
            trans_attr=arrays["trans_attr"] if "trans_attr" in arrays else None).check()  # older files: none
        self._max_duration = self.model_.max_duration
        self.max_lengths_ = {c: int(v) for c, v in zip(self.classes_, self.model_.max_lengths)}
