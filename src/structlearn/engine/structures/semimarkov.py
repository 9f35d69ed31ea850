"""Semi-Markov structures: segmentations of a packed ragged batch into labelled segments."""
from collections import namedtuple

import numpy as np

from ..kernels import semimarkov as _k
from ..kernels import semimarkov_decode as _kd
from ..kernels import semimarkov_window as _kw
from ..semirings import LOG, MAX
from ...utils.validation import check_log_potentials, finite_abs_max
from ._base import KBest, Marginals, StructureBase

#: Expected number of segments per (duration, label) in each sequence, split by the duration table
#: that scored them. Each field is (B, D, K) float64: ``middle`` (segments touching neither end,
#: scored by ``duration``), ``first`` (start at token 0 but end before T-1, ``first_duration``),
#: ``last`` (end at T-1 but start after 0, ``last_duration``) and ``single`` (the whole sequence,
#: ``single_duration``). Index [b, d-1, k].
DurationMarginals = namedtuple("DurationMarginals", ["middle", "first", "last", "single"])

#: Normalised forward messages of :meth:`SemiMarkov.forward` (LOG semiring), all float64.
#: ``alpha`` (N, K): α̂[e, k] = α[e, k] - c_e, ``alpha_star`` (N, K): α̂*[s, k] = α*[s, k] - c_{s-1},
#: ``log_scale`` (N,): the per-token normalisers inc[t], c_t = Σ_{u<=t} inc[u] within a sequence
#: (c_{-1} = 0), ``log_z`` (B,). Here α[e, k] is the log-sum of prefixes whose last segment has
#: label k and ends at e, and α*[s, k] that of prefixes followed by the start of a k-segment at s
#: (including its transition or start score).
ForwardMessages = namedtuple("ForwardMessages", ["alpha", "alpha_star", "log_scale", "log_z"])

#: Backward messages of :meth:`SemiMarkov.backward`, normalised with the forward's scales:
#: ``beta_end`` (N, K): β̂_end[e, k] = β_end[e, k] - (log Z - c_e) and ``beta_start`` (N, K):
#: β̂_start[s, k] = β_start[s, k] - (log Z - c_{s-1}), where β_end[e, k] is the log-sum of suffixes
#: after a k-segment ending at e (transitions and end score included) and β_start[s, k] that of a
#: k-segment starting at s together with everything after it. -inf for infeasible sequences.
BackwardMessages = namedtuple("BackwardMessages", ["beta_end", "beta_start"])

#: Above this many entries ``segment_marginals`` refuses to build the dense (N, D, K) array.
DENSE_SEGMENT_LIMIT = 20_000_000

#: Largest |unary| the linear-space posterior passes take as they are: their block prefix sums of
#: (unary - scale) lose eps·|unary| absolutely, so one row near 1e15 (an outlier far in a Gaussian's
#: tail) spoils the posteriors of the whole block (rows summing to 1.2, or NaN).
EXTREME_UNARY = 1e5

#: How many segment ends ``iter_segment_marginals`` scans per kernel call (bounds its memory).
_ITER_CHUNK = 4096


class SemiMarkov(StructureBase):
    r"""Distribution over segmentations of every sequence into labelled segments (semi-Markov CRF /
    hidden semi-Markov posterior).

    A segmentation of a sequence of T tokens is a list of segments :math:`(s_i, e_i, k_i)`,
    i = 1…m, tiling [0, T) (:math:`s_1 = 0`, :math:`s_{i+1} = e_i + 1`, :math:`e_m = T-1`) with
    durations :math:`d_i = e_i - s_i + 1 \le D`. Its score is

    .. math::

        s(y) = start[k_1] + \sum_i w(s_i, e_i, k_i) + \sum_{i<m} transition[e_i, k_i, k_{i+1}] + end[k_m],

        w(s, e, k) = \sum_{u=s}^{e} unary[u, k] + dur_{s,e}[e - s, k] \;(+\; segment[e, e - s, k])

    and :math:`p(y) = \exp(s(y) - \log Z)` (Sarawagi & Cohen 2004, "Semi-Markov conditional random
    fields", eqs. 3–5). The duration table
    :math:`dur_{s,e}` is chosen by where the segment lies (censoring hooks for hidden semi-Markov
    models, Yu 2010, "Hidden semi-Markov models", sec. 3.4):

    ================================  ===================
    segment                           table
    ================================  ===================
    s > 0 and e < T-1 (interior)      ``duration``
    s = 0 and e < T-1 (first)         ``first_duration``
    s > 0 and e = T-1 (last)          ``last_duration``
    s = 0 and e = T-1 (whole seq.)    ``single_duration``
    ================================  ===================

    Parameters
    ----------
    unary : array-like of float64, shape (N, K)
        Log-potential of label k at token n; N = sum(lengths). -inf forbids a label at a token.
    duration : array-like of float64, shape (D, K)
        Log-potential of a k-segment of length d at row d-1. -inf forbids a duration.
    transition : array-like of float64, shape (K, K) or (N, K, K)
        Log-potentials "from, to" between consecutive segments: ``transition[i, j]`` scores an
        i-segment followed by a j-segment. Time-varying form (N, K, K), the linear chain's row
        convention (:class:`~structlearn.engine.structures.LinearChain`): row n scores the boundary between
        a segment ending at token n and the next starting at token n + 1 (the same row as
        ``marginals().edge``); rows at sequence ends are never read. A stationary matrix is the
        time-varying one with every row equal (the math above writes ``transition[e_i]`` for both).
        Observation-conditioned transitions t(y', y, x, i-1, i) of a semi-Markov CRF are this form.
    lengths : array-like of int, shape (B,), optional
        Lengths of the B packed sequences; default one sequence of N tokens.
    start, end : array-like of float64, shape (K,), optional
        Log-potentials of the label of the first / last segment of every sequence; default 0.
    segment : array-like of float64, shape (N, D, K), optional
        Extra log-potential of every segment, indexed by its end token, duration - 1 and label:
        ``segment[e, d-1, k]`` scores the k-segment [e-d+1, e]. Only then is (N, D, K) memory used.
    max_duration : int, optional
        Longest allowed segment, ``1 <= max_duration <= D``; default D. Rows past it are ignored.
    allow_same_label : bool, default True
        If False, consecutive segments never share a label (the diagonal of ``transition`` is
        treated as -inf; the variant of Sarawagi & Cohen 2004). Then a segmentation is determined by its token
        labels (runs = segments).
    first_duration, last_duration, single_duration : array-like of float64, shape (D, K), optional
        Duration log-potentials that replace ``duration`` for the first segment, the last segment
        and a segment that is both (the whole sequence), as in the table above. Defaults:
        ``first_duration`` and ``last_duration`` default to ``duration``; ``single_duration``
        defaults to ``first_duration`` if only that is given, to ``last_duration`` if only that is
        given, and to ``duration`` if neither is given. When both ``first_duration`` and
        ``last_duration`` are given, ``single_duration`` must be given too (there is no canonical
        combination of left and right censoring).

    Raises
    ------
    ValueError
        Shapes that disagree (``transition`` neither (K, K) nor (N, K, K)), NaN or +inf potentials,
        lengths that do not sum to N, a bad
        ``max_duration``, or first and last durations given without ``single_duration``.

    Notes
    -----
    Forward and backward use the two-stage recursion over segment starts and ends (see
    :mod:`structlearn.engine.kernels.semimarkov`): time O(N·(D·K + K²)), memory O(N·K), parallel over
    sequences; time-varying transitions cost the same order, their K×K stage in log space (K² exps per
    boundary whose row differs from the most frequent row, which keeps the linear-space stationary
    stage). Messages are normalised per token (:meth:`forward`, :meth:`backward` expose them,
    with their scales), so long sequences lose no precision. Segment unary sums are accumulated
    along d, not differenced from cumulative sums. Without ``segment``, the LOG-semiring window
    sums run in linear space (one multiply-add per (t, d, k)) with an exact log-space fallback
    whenever a sum could underflow; with ``segment`` and for the MAX semiring they run in log
    space. When some finite |unary| exceeds :data:`EXTREME_UNARY` (an outlier far in a Gaussian's tail),
    the posteriors (:meth:`marginals`, :meth:`segment_marginals`) come from the unary shifted per token
    by its largest entry, in log space, token rows divided by their total where they miss one by no
    more than the rounding of such potentials: they sum to one at any magnitude (``log_partition`` is
    unchanged). For hidden semi-Markov models, :meth:`duration_marginals` gives the expected duration
    counts per duration table and ``marginals().edge`` the expected transitions. Infeasible sequences (every segmentation has potential
    -inf) get ``log_partition`` -inf, zero marginals and make ``argmax``/``kbest``/``sample`` raise
    ``ValueError`` naming the sequence. Empty sequences have log Z = 0 and one (empty)
    segmentation.

    Attributes
    ----------
    unary, duration, transition, start, end, first_duration, last_duration, single_duration, segment
        The validated float64 potentials (durations cut to ``max_duration`` rows; ``segment`` is None
        when not given). ``transition`` is as given, (K, K) or (N, K, K) (its diagonal is not
        overwritten).
    stationary : bool
        Whether ``transition`` is (K, K).
    max_duration : int
        D in use.
    lengths, offsets, n_labels
        Packed-batch bookkeeping (see :class:`StructureBase`).
    """

    def __init__(self, unary, duration, transition, *, lengths=None, start=None, end=None,
                 segment=None, max_duration=None, allow_same_label=True, first_duration=None,
                 last_duration=None, single_duration=None):
        unary = check_log_potentials(unary, "unary", ndim=2)
        N, K = unary.shape
        self._init_batch(N, K, lengths)
        duration = check_log_potentials(duration, "duration", ndim=2)
        if duration.shape[1] != K or duration.shape[0] < 1:
            raise ValueError(f"`duration` must have shape (D, K) with D >= 1 and K = {K} (the labels "
                             f"of `unary`); got {duration.shape}")
        D_full = duration.shape[0]
        if max_duration is None:
            D = D_full
        else:
            if (not isinstance(max_duration, (int, np.integer)) or isinstance(max_duration, bool)
                    or not 1 <= max_duration <= D_full):
                raise ValueError(f"`max_duration` must be an integer in [1, {D_full}] (the rows of "
                                 f"`duration`); got {max_duration!r}")
            D = int(max_duration)
        self.max_duration = D
        self.allow_same_label = bool(allow_same_label)
        self.unary = unary
        transition = check_log_potentials(transition, "transition", ndim=(2, 3))
        if transition.shape not in ((K, K), (N, K, K)):
            raise ValueError(f"`transition` must have shape (K, K) = ({K}, {K}) or (N, K, K) = "
                             f"({N}, {K}, {K}); got {transition.shape}")
        self.transition = transition
        self.stationary = transition.ndim == 2
        self.start = np.zeros(K) if start is None else check_log_potentials(start, "start", (K,))
        self.end = np.zeros(K) if end is None else check_log_potentials(end, "end", (K,))

        def table(x, name):
            return None if x is None else check_log_potentials(x, name, (D_full, K))[:D].copy()

        if first_duration is not None and last_duration is not None and single_duration is None:
            raise ValueError("`single_duration` must be given when both `first_duration` and "
                             "`last_duration` are: a segment spanning the whole sequence is both "
                             "first and last, and no default combines the two")
        self.duration = np.ascontiguousarray(duration[:D])
        first = table(first_duration, "first_duration")
        last = table(last_duration, "last_duration")
        single = table(single_duration, "single_duration")
        self.first_duration = self.duration if first is None else first
        self.last_duration = self.duration if last is None else last
        if single is None:
            single = first if first is not None else (last if last is not None else self.duration)
        self.single_duration = single
        if segment is None:
            self.segment = None
        else:
            segment = check_log_potentials(segment, "segment", (N, D_full, K))
            self.segment = np.ascontiguousarray(segment[:, :D])
        self._durations = np.ascontiguousarray(np.stack(
            [self.duration, self.first_duration, self.last_duration, self.single_duration]))
        if self.stationary:
            trans = self.transition.copy()
            self._tv, self._tv_on = _kw.NO_TV, _kw.NO_TV_ON
        else:
            trans, self._tv, self._tv_on = self._varying(self.transition)
        if not self.allow_same_label:
            np.fill_diagonal(trans, -np.inf)
            if not self.stationary:
                self._tv[:, np.arange(K), np.arange(K)] = -np.inf
        self._trans = trans
        self._cache = {}

    def _varying(self, tv):
        """(base (K, K), tv (N, K, K), tv_on (N,)) of time-varying transitions: the base is the most
        frequent boundary row, and only rows that differ from it are flagged (the kernels run the
        stationary linear-space stage elsewhere, with bitwise the same numbers as the base). Rows at
        sequence ends are never read. Time O(N·K² log N)."""
        N, K = self.n_rows, self.n_labels
        on = np.ones(N, bool)
        on[self.offsets[1:][self.lengths > 0] - 1] = False
        base = np.zeros((K, K))
        if on.any():
            rows, inv, cnt = np.unique(tv[on].reshape(-1, K * K), axis=0, return_inverse=True,
                                       return_counts=True)
            top = int(np.argmax(cnt))
            base = rows[top].reshape(K, K).copy()
            on[on] = np.asarray(inv).ravel() != top
        return base, np.ascontiguousarray(tv, dtype=np.float64).copy(), on

    # -- plumbing ----------------------------------------------------------------------------------
    def _kargs(self):
        has_seg = self.segment is not None
        seg = self.segment if has_seg else np.zeros((1, 1, 1))
        return (self.unary, self._durations, self._trans, self._tv, self._tv_on, self.start, self.end,
                seg, has_seg, self.offsets)

    def _forward(self, semiring=LOG):
        key = ("forward", semiring)
        if key not in self._cache:
            self._cache[key] = _k.semimarkov_forward(*self._kargs(), semiring)
        return self._cache[key]

    def _posterior(self):
        """Normalised LOG-semiring messages (see :mod:`structlearn.engine.kernels.semimarkov`):
        (alpha, alpha_star, inc, beta_end, beta_start, log_z, z_fin)."""
        alpha, alpha_star, inc, log_z, z_fin, _, _ = self._forward(LOG)
        if "backward" not in self._cache:
            u, durs, trans, tv, tv_on, _, end, seg, has_seg, offsets = self._kargs()
            # without `segment` the scaled backward also yields the duration marginals (one
            # multiply-add per window term), so no pass replays the forward's windows for them
            self._cache["backward"] = _k.semimarkov_backward(u, durs, trans, tv, tv_on, end, seg,
                                                             has_seg, offsets, inc, z_fin, alpha_star)
        beta_end, beta_start, _ = self._cache["backward"]
        return alpha, alpha_star, inc, beta_end, beta_start, log_z, z_fin

    def _segment_list(self, labels, starts, row=None):
        """Per-sequence (n_seg, 3) int64 arrays from token labels + segment-start flags."""
        out = []
        for b in range(self.batch_size):
            o, T = int(self.offsets[b]), int(self.lengths[b])
            lab = labels[o:o + T]
            st = np.flatnonzero(starts[o:o + T])
            if T == 0 or lab[0] < 0:
                out.append(np.zeros((0, 3), dtype=np.int64))
                continue
            en = np.append(st[1:] - 1, T - 1)
            out.append(np.stack([st, en, lab[st]], axis=1).astype(np.int64))
        return out

    # -- log semiring ------------------------------------------------------------------------------
    def log_partition(self):
        """Log partition function log Z (log-sum over segmentations) of every sequence.

        Returns
        -------
        log_z : ndarray of float64, shape (B,)
            -inf for an infeasible sequence, 0.0 for an empty one. Time O(N·(D·K + K²)), memory
            O(N·K).
        """
        return self._forward(LOG)[3].copy()

    def forward(self):
        """Normalised forward messages (two-stage recursion, Sarawagi & Cohen 2004, eq. 3).

        Returns
        -------
        ForwardMessages
            ``alpha``, ``alpha_star`` (N, K), ``log_scale`` (N,), ``log_z`` (B,); see
            :data:`ForwardMessages`. Unnormalised values are α[e] = α̂[e] + c_e and
            α*[s] = α̂*[s] + c_{s-1}; a posterior needs no global sums, e.g. P(a k-segment covers
            [s, e]) = exp(α̂*[s, k] + w(s, e, k) - Σ_{u=s..e} log_scale[u] + β̂_end[e, k]).
            Time O(N·(D·K + K²)), memory O(N·K).
        """
        alpha, alpha_star, inc, log_z, _, _, _ = self._forward(LOG)
        return ForwardMessages(alpha.copy(), alpha_star.copy(), inc.copy(), log_z.copy())

    def backward(self):
        """Backward messages normalised with the forward's scales (Sarawagi & Cohen 2004, §3.1).

        Returns
        -------
        BackwardMessages
            ``beta_end``, ``beta_start`` (N, K); see :data:`BackwardMessages`. P(a k-segment starts
            at s) = exp(α̂*[s, k] + β̂_start[s, k]); P(one ends at e) = exp(α̂[e, k] + β̂_end[e, k]).
            Time O(N·(D·K + K²)), memory O(N·K).
        """
        _, _, _, beta_end, beta_start, _, _ = self._posterior()
        return BackwardMessages(beta_end.copy(), beta_start.copy())

    def marginals(self, edge="full"):
        """Token and transition marginals (the gradient of log Z with respect to ``unary`` and to
        the per-boundary transition scores).

        Parameters
        ----------
        edge : {"full", "sum", "total", "none"}
            ``"full"``: ``edge`` (N, K, K), row n = P(a segment boundary between tokens n and n+1,
            with label i before and j after) — the transition marginals; the last row of each
            sequence is 0. ``"sum"``: (B, K, K), their sum over each sequence (expected transition
            counts, memory O(B·K²)); ``"total"``: (K, K), summed over the batch; ``"none"``: None.

        Returns
        -------
        Marginals
            ``unary`` (N, K) float64: P(token n lies in a segment labelled k); ``edge`` as above.
            Linear space; rows of infeasible sequences are 0. Time O(N·(D·K + K²)).

        Raises
        ------
        ValueError
            ``edge`` not one of the four modes.
        """
        if edge not in ("full", "sum", "total", "none"):
            raise ValueError(f"`edge` must be one of ['full', 'none', 'sum', 'total']; got {edge!r}")
        twin = self._posterior_twin()
        if twin is not self:
            return twin.marginals(edge)
        key = "marginals" if edge == "full" else "marginals_sum"
        if key not in self._cache:
            alpha, alpha_star, _, beta_end, beta_start, _, z_fin = self._posterior()
            token, em = _k.semimarkov_marginals(
                self.unary, self._trans, self._tv, self._tv_on, alpha, alpha_star, beta_end,
                beta_start, z_fin, self.offsets, key == "marginals")
            if self._cache.get("extreme") and self.segment is not None:
                # Σ_k P(token n in a k-segment) = 1 exactly; at these magnitudes each start and end
                # probability carries ~D·eps·|unary| of rounding, so the running sums are divided by
                # their row total (the chain's γ_t = α_t β_t / Σ_j α_t(j) β_t(j)) — only where they
                # miss 1 by no more than that rounding: a larger miss is left for the caller to see
                fin = np.isfinite(self.unary)
                rounding = 16 * self.max_duration * np.finfo(np.float64).eps * np.abs(self.unary[fin]).max()
                tot = token.sum(axis=1, keepdims=True)
                ok = (tot > 0) & (np.abs(tot - 1.0) <= 1e-9 + rounding)
                token = np.divide(token, tot, out=token.copy(), where=ok)
            self._cache[key] = Marginals(token, em)
        token, em = self._cache[key]
        if edge == "total":
            em = em.sum(axis=0)
        return Marginals(token.copy(), None if edge == "none" else em.copy())

    def _posterior_twin(self):
        """The structure whose posteriors this one's are: itself, or when some finite |unary| exceeds
        :data:`EXTREME_UNARY` the same structure with every row of ``unary`` shifted by its largest
        finite entry (a constant per token: every segmentation covers each token once, so no posterior
        changes) and its passes in log space (zero ``segment`` potentials, when they fit in
        DENSE_SEGMENT_LIMIT entries; beyond, the shifted unary runs the linear-space passes, whose
        rows are left as they are: the estimators check their sums and raise)."""
        if "twin" not in self._cache:
            u = self.unary
            fin = np.isfinite(u)
            twin = self
            if fin.any() and np.abs(u[fin]).max() > EXTREME_UNARY:
                shift = np.where(fin, u, -np.inf).max(axis=1)
                shift[~np.isfinite(shift)] = 0.0
                N, D, K = self.n_rows, self.max_duration, self.n_labels
                seg = self.segment
                if seg is None and N * D * K <= DENSE_SEGMENT_LIMIT:
                    seg = np.zeros((N, D, K))
                twin = SemiMarkov(u - shift[:, None], self.duration, self.transition, lengths=self.lengths,
                                  start=self.start, end=self.end, segment=seg,
                                  allow_same_label=self.allow_same_label, first_duration=self.first_duration,
                                  last_duration=self.last_duration, single_duration=self.single_duration)
                twin._cache["twin"] = twin  # already in the exact form
                twin._cache["extreme"] = True
            self._cache["twin"] = twin
        return self._cache["twin"]

    def segment_marginals(self):
        """Dense segment marginals.

        Returns
        -------
        ndarray of float64, shape (N, D, K)
            ``[e, d-1, k]`` = P(the segmentation contains the k-segment [e-d+1, e]) (linear space);
            0 where d exceeds e+1 (local) or the sequence is infeasible. Time and memory O(N·D·K).

        Raises
        ------
        ValueError
            If N·D·K > 2·10⁷; use :meth:`iter_segment_marginals` then.
        """
        N, D, K = self.n_rows, self.max_duration, self.n_labels
        if N * D * K > DENSE_SEGMENT_LIMIT:
            raise ValueError(f"segment_marginals would build a dense (N, D, K) = ({N}, {D}, {K}) array "
                             f"({N * D * K} > {DENSE_SEGMENT_LIMIT} entries); use "
                             f"iter_segment_marginals(threshold) to stream the segments whose "
                             f"marginal exceeds a threshold")
        twin = self._posterior_twin()
        if twin is not self:
            return twin.segment_marginals()
        _, alpha_star, inc, beta_end, _, _, z_fin = self._posterior()
        u, durs, _, _, _, _, _, seg, has_seg, offsets = self._kargs()
        return _k.semimarkov_segment_marginals(u, durs, seg, has_seg, offsets, alpha_star, inc,
                                               beta_end, z_fin)

    def iter_segment_marginals(self, threshold=1e-6):
        """Stream the segments whose marginal probability exceeds ``threshold``.

        Parameters
        ----------
        threshold : float, default 1e-6
            Yield segments with marginal > threshold (>= 0; 0 yields every possible segment).

        Yields
        ------
        (b, start, end, label, prob) : (int, int, int, int, float)
            Sequence index, local start and end (inclusive), label and marginal, by sequence, then
            end, then duration, then label. Memory O(#segments above threshold in a block of 4096
            ends); total time O(N·D·K).
        """
        threshold = float(threshold)
        if not threshold >= 0:
            raise ValueError(f"`threshold` must be a non-negative number; got {threshold!r}")
        _, alpha_star, inc, beta_end, _, _, z_fin = self._posterior()
        u, durs, _, _, _, _, _, seg, has_seg, _ = self._kargs()
        for b in range(self.batch_size):
            o, T = int(self.offsets[b]), int(self.lengths[b])
            for lo in range(0, T, _ITER_CHUNK):
                st, en, lab, pr = _k.semimarkov_segments_above(
                    u, durs, seg, has_seg, o, T, lo, min(T, lo + _ITER_CHUNK), alpha_star, inc,
                    beta_end, float(z_fin[b]), threshold)
                for i in range(st.shape[0]):
                    yield b, int(st[i]), int(en[i]), int(lab[i]), float(pr[i])

    def _expectations(self):
        if "expectations" not in self._cache:
            alpha, alpha_star, inc, beta_end, beta_start, _, z_fin = self._posterior()
            self._cache["expectations"] = _k.semimarkov_expectations(
                *self._kargs(), alpha, alpha_star, inc, beta_end, beta_start, z_fin)
        return self._cache["expectations"]

    def _expected_score(self):
        """E[s(y)] per sequence from the marginals (no segment potentials): Σ unary · token + Σ durations
        · duration marginals + Σ transition · edges + start · P(first) + end · P(last), skipping
        zero-probability terms (so -inf potentials never give NaN)."""
        rows = not self.stationary and self._tv_on.any()  # some boundary has its own matrix
        token, edge = self.marginals(edge="full" if rows else "sum")
        self._posterior()
        dm = self._cache["backward"][2]  # (B, 4, D, K)

        def dot(p, x):
            return np.where(p > 0, p * np.where(p > 0, x, 0.0), 0.0)

        B = self.batch_size
        out = np.zeros(B)
        row_seq = np.repeat(np.arange(B), self.lengths)
        np.add.at(out, row_seq, dot(token, self.unary).sum(axis=1))
        out += dot(dm, self._durations[None]).sum(axis=(1, 2, 3))
        if not rows:
            out += dot(edge, self._trans[None]).sum(axis=(1, 2))
        else:  # per boundary row: its own matrix where flagged, else the base
            trans = np.where(self._tv_on[:, None, None], self._tv, self._trans[None])
            np.add.at(out, row_seq, dot(edge, trans).sum(axis=(1, 2)))
        ne = self.lengths > 0
        first, last = self.offsets[:-1][ne], self.offsets[1:][ne] - 1
        out[ne] += (dot(token[first], self.start[None]).sum(axis=1)
                    + dot(token[last], self.end[None]).sum(axis=1))
        return out

    def duration_marginals(self):
        """Expected number of segments per (duration, label), split by duration table.

        Returns
        -------
        DurationMarginals
            Fields ``middle``, ``first``, ``last``, ``single``, each (B, D, K) float64, index
            [b, d-1, k] (see :data:`DurationMarginals`); their sum over fields and d, k is the
            expected number of segments. These are the expected sufficient statistics of the
            duration tables (M-step of a hidden semi-Markov model). Zero for infeasible sequences.
            Without ``segment`` they come with the backward pass that :meth:`marginals` needs (one
            multiply-add per window term, cached: no pass of their own); with ``segment`` an extra
            pass, time O(N·D·K).
        """
        if self.segment is None:
            self._posterior()
            dm = self._cache["backward"][2]
        else:
            dm = self._expectations()[1]
        return DurationMarginals(*(dm[:, c].copy() for c in range(4)))

    def entropy(self):
        """Entropy of p(y) over segmentations, H = log Z - E[s(y)] (nats), shape (B,).

        E[s(y)] sums every potential times its marginal, skipping zero-probability terms so -inf
        potentials never give NaN (Rush 2020, "Torch-Struct", entropy semiring by marginals); without
        ``segment`` from the token, transition and duration marginals (no extra pass).
        -inf for an infeasible sequence, 0 for an empty one. Time O(N·(D·K + K²)).
        """
        log_z = self.log_partition()
        expected = self._expected_score() if self.segment is None else self._expectations()[0]
        with np.errstate(invalid="ignore"):
            h = np.maximum(log_z - expected, 0.0)
        return np.where(log_z == -np.inf, -np.inf, h)

    def sample_segments(self, n, random_state=None):
        """Exact posterior samples as segment lists (forward filtering, backward sampling).

        Parameters
        ----------
        n : int
            Number of samples.
        random_state : None, int or numpy.random.RandomState

        Returns
        -------
        list of length B of lists of length n of ndarray of int64, shape (n_seg, 3)
            ``out[b][i]`` holds rows (start, end, label) of sample i of sequence b (local, end
            inclusive). Same draws as :meth:`sample` with the same ``random_state``.

        Raises
        ------
        ValueError
            If a sequence is infeasible.
        """
        labels, starts = self._sample(n, random_state)
        per_sample = [self._segment_list(labels[i], starts[i]) for i in range(labels.shape[0])]
        return [[per_sample[i][b] for i in range(labels.shape[0])] for b in range(self.batch_size)]

    def sample(self, n, random_state=None):
        """Exact posterior samples as token labels, int64 array of shape (n, N).

        Cost O(n·N·D). Raises ``ValueError`` if a sequence is infeasible. See
        :meth:`sample_segments` for the segments of the same draws.
        """
        return self._sample(n, random_state)[0]

    def _sample(self, n, random_state):
        n = self._check_n(n)
        alpha, alpha_star, inc, log_z, _, _, _ = self._forward(LOG)
        self._raise_if_infeasible(log_z, "sample")
        u = self._uniforms(random_state, (n, 2 * self.n_rows + self.batch_size))
        return _kd.semimarkov_sample(*self._kargs(), alpha, alpha_star, inc, u)

    # -- max semiring ------------------------------------------------------------------------------
    def max(self):
        """Score of the best segmentation of every sequence, shape (B,) (-inf if infeasible)."""
        return self._forward(MAX)[3].copy()

    def _raise_if_infeasible(self, log_z, what):
        """As the base class; a sequence whose score is -inf while a bound on its scores is not finite is
        named as an overflow too (+inf − +inf inside the recursion reads as "no labeling"). Potentials
        are finite or -inf (checked), so only their sums overflow; the bound is computed on this error
        path only."""
        bad = np.flatnonzero(log_z == -np.inf)
        if bad.size:
            over = bad[~np.isfinite(self._score_bounds(bad))]
            if over.size:
                self._raise_overflow(int(over[0]), log_z[over[0]], what)
        super()._raise_if_infeasible(log_z, what)

    def _score_bounds(self, seqs):
        """Upper bounds (len(seqs),) on |score| of any segmentation of the sequences ``seqs`` (+inf when
        it overflows): the largest finite |unary| of every token plus, per token, the largest finite
        |potential| of each duration, transition, start, end and segment table."""
        tables = (finite_abs_max(self._durations) + finite_abs_max(self.transition)
                  + finite_abs_max(self.start) + finite_abs_max(self.end))
        out = np.empty(len(seqs))
        with np.errstate(over="ignore"):
            for i, b in enumerate(seqs):
                o, o1 = int(self.offsets[b]), int(self.offsets[b + 1])
                seg = finite_abs_max(self.segment[o:o1]) if self.segment is not None else 0.0
                out[i] = finite_abs_max(self.unary[o:o1], axis=1).sum() + (o1 - o) * (tables + seg)
        return out

    def _viterbi(self):
        if "viterbi" not in self._cache:
            alpha, _, _, best, _, bp_d, bp_j = self._forward(MAX)
            self._raise_if_infeasible(best, "argmax")
            self._cache["viterbi"] = _kd.semimarkov_viterbi_trace(alpha, self.end, bp_d, bp_j,
                                                                 self.offsets)
        return self._cache["viterbi"]

    def argmax(self):
        """Token labels of the best segmentation (semi-Markov Viterbi), int64 array of shape (N,).

        Raises ``ValueError`` naming the sequence if one is infeasible. Time O(N·(D·K + K²)).
        """
        return self._viterbi()[0].copy()

    def argmax_segments(self):
        """Best segmentation of every sequence: list of B int64 arrays of shape (n_seg, 3) with rows
        (start, end, label), local to the sequence, end inclusive. Raises like :meth:`argmax`."""
        labels, starts = self._viterbi()
        return self._segment_list(labels, starts)

    def _kbest(self, k):
        k = self._check_k(k)
        key = ("kbest", k)
        if key not in self._cache:
            self._raise_if_infeasible(self.max(), "kbest")
            self._cache[key] = _kd.semimarkov_kbest(*self._kargs(), k)
        return self._cache[key]

    def kbest(self, k):
        """The k best segmentations, best first (exact k-best Viterbi over segmentations).

        Two segmentations with the same token labels (possible when ``allow_same_label=True``) are
        distinct items, so ``labels`` rows may repeat.

        Returns
        -------
        KBest
            ``labels`` (k, N) int64 token labels of the r-th best segmentation (-1 where a sequence
            has fewer feasible segmentations), ``scores`` (B, k) float64 (-inf padding).

        Raises
        ------
        ValueError
            If k is not a positive integer or a sequence is infeasible.

        Notes
        -----
        Time O(N·k·(D·K + K²)), memory O(T_max·K·k) per sequence in flight.
        """
        labels, _, scores = self._kbest(k)
        return KBest(labels.copy(), scores.copy())

    def kbest_segments(self, k):
        """The k best segmentations as segment lists.

        Returns
        -------
        list of length B of lists of (score, segments)
            ``out[b]`` holds up to k pairs, best first: the float score and an int64 (n_seg, 3)
            array of (start, end, label) rows (local, end inclusive). Shorter when a sequence has
            fewer feasible segmentations. Raises like :meth:`kbest`.
        """
        labels, starts, scores = self._kbest(k)
        out = [[] for _ in range(self.batch_size)]
        for r in range(labels.shape[0]):
            segs = self._segment_list(labels[r], starts[r])
            for b in range(self.batch_size):
                if scores[b, r] > -np.inf:
                    out[b].append((float(scores[b, r]), segs[b]))
        return out

    # -- other -------------------------------------------------------------------------------------
    def score(self, segments):
        """Log-score s(y) of given segmentations, shape (B,).

        Parameters
        ----------
        segments : list of B array-likes of int, shape (n_seg, 3), or array-like of int, shape (N,)
            Per sequence, rows (start, end, label), local to the sequence and end inclusive, that
            tile [0, T) in order (an empty sequence takes a (0, 3) array). Alternatively packed
            token labels (N,) when ``allow_same_label=False``: each run of equal labels is one
            segment (with ``allow_same_label=True`` token labels do not determine the segmentation,
            and are refused).

        Returns
        -------
        ndarray of float64, shape (B,)
            -inf for a segmentation with a forbidden part (a -inf potential, a segment longer than
            ``max_duration``, or two consecutive segments with one label when
            ``allow_same_label=False``). Time O(N).

        Raises
        ------
        ValueError
            Segments that do not tile their sequence, labels outside [0, K), a wrong number of
            sequences, or token labels with ``allow_same_label=True``.
        """
        segs, seg_offsets = self._check_segments(segments)
        return _kd.semimarkov_score(*self._kargs(), segs, seg_offsets)

    def _check_segments(self, segments):
        B, K = self.batch_size, self.n_labels
        if isinstance(segments, np.ndarray) and segments.ndim == 1:
            return self._runs_from_labels(segments)
        if not isinstance(segments, (list, tuple)) or len(segments) != B:
            raise ValueError(f"`segments` must be a list of B = {B} arrays of shape (n_seg, 3) "
                             f"(start, end, label) or packed token labels of shape ({self.n_rows},); "
                             f"got {type(segments).__name__}"
                             + (f" of length {len(segments)}" if hasattr(segments, "__len__") else ""))
        arrays = []
        for b, seg in enumerate(segments):
            arr = np.asarray(seg)
            if arr.size == 0:
                arr = arr.reshape(0, 3)
            if arr.ndim != 2 or arr.shape[1] != 3:
                raise ValueError(f"`segments[{b}]` must have shape (n_seg, 3) (start, end, label); "
                                 f"got {arr.shape}")
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise ValueError(f"`segments[{b}]` must hold integers; got dtype {arr.dtype}")
            arr = arr.astype(np.int64)
            T = int(self.lengths[b])
            if T == 0:
                if arr.shape[0]:
                    raise ValueError(f"`segments[{b}]` must be empty: sequence {b} has length 0; "
                                     f"got {arr.shape[0]} segments")
            else:
                s, e, lab = arr[:, 0], arr[:, 1], arr[:, 2]
                ok = (arr.shape[0] > 0 and s[0] == 0 and e[-1] == T - 1 and np.all(e >= s)
                      and np.all(s[1:] == e[:-1] + 1))
                if not ok:
                    raise ValueError(f"`segments[{b}]` must tile [0, {T}) in order: first start 0, "
                                     f"each start = previous end + 1, last end {T - 1}, end >= start; "
                                     f"got {arr.tolist()}")
                if lab.min() < 0 or lab.max() >= K:
                    raise ValueError(f"`segments[{b}]` labels must lie in [0, {K}); got "
                                     f"{lab.tolist()}")
            arrays.append(arr)
        seg_offsets = np.zeros(B + 1, dtype=np.int64)
        np.cumsum([a.shape[0] for a in arrays], out=seg_offsets[1:])
        segs = np.concatenate(arrays) if arrays else np.zeros((0, 3), dtype=np.int64)
        return np.ascontiguousarray(segs, dtype=np.int64), seg_offsets

    def _runs_from_labels(self, labels):
        if self.allow_same_label:
            raise ValueError("token labels do not determine a segmentation when "
                             "allow_same_label=True (a run may be several segments); pass a list of "
                             "(n_seg, 3) segment arrays instead")
        from ...utils.validation import check_labels
        labels = check_labels(labels, self.n_rows, self.n_labels, name="segments")
        segs = []
        for b in range(self.batch_size):
            o, T = int(self.offsets[b]), int(self.lengths[b])
            lab = labels[o:o + T]
            if T == 0:
                segs.append(np.zeros((0, 3), dtype=np.int64))
                continue
            st = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
            en = np.append(st[1:] - 1, T - 1)
            segs.append(np.stack([st, en, lab[st]], axis=1))
        return self._check_segments(segs)

    def constrain(self, allowed):
        """A new structure restricted to segmentations allowed by the boolean mask ``allowed``
        (N, K): a k-segment is allowed only if every token it covers allows k.

        Forced decoding allows one label per token; partial labels allow several. The partial-label
        loss is ``log_partition() - constrain(allowed).log_partition()``.
        """
        out = SemiMarkov.__new__(SemiMarkov)
        out.__dict__.update(self.__dict__)
        out.unary = self._masked_unary(self.unary, allowed)
        out._cache = {}
        return out
