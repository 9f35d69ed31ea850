"""Filtering, prediction and segment queries of the explicit-duration HSMM (Yu 2010 §2.2.2, §2.2.4).

:class:`SegmentQueries` is mixed into :class:`structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`; every output
here reads the forward messages or the posteriors of the model's :class:`~structlearn.engine.structures.SemiMarkov`
structure. :func:`cum_scale` and :func:`state_runs` are shared with the general HSMM family.
"""
import math
from collections import namedtuple

import numpy as np
from scipy import special

__all__ = ["SegmentQueries", "SubpathQueries", "Filtered", "Prediction", "SegmentEnds", "cum_scale", "state_runs",
           "with_empty_prefixes"]

#: Filtering result (Yu 2010 §2.2.2), all float64: ``state`` (N, K) P(S_t = j | o_1:t); ``end`` (N, K)
#: P(S_t] = j | o_1:t) (a j-segment ends at t); ``log_likelihood`` (N,) log P(o_1:t).
Filtered = namedtuple("Filtered", ["state", "end", "log_likelihood"])

#: One-step prediction (Yu 2010 §2.2.2), float64 (N, K): ``start`` P(S_[t+1 = j | o_1:t) (a j-segment
#: starts at t+1; rows sum to P(a segment ends at t | o_1:t)); ``state`` P(S_{t+1} = j | o_1:t).
Prediction = namedtuple("Prediction", ["start", "state"])

#: Joint MAP of the state ending at t and its duration (Yu 2010 eq. (10)): ``states`` (N,) int64,
#: ``durations`` (N,) int64, ``probs`` (N,) float64 = max_{j,d} η_t(j, d) (posterior, not normalised
#: by P(a segment ends at t)).
SegmentEnds = namedtuple("SegmentEnds", ["states", "durations", "probs"])


def cum_scale(log_scale, lengths, offsets):
    """log P(o_1:t) of every row from the forward's per-row log scales (N,), restarted per sequence."""
    c = np.cumsum(log_scale)
    starts = offsets[:-1][lengths > 0]
    prev = np.r_[0.0, c][starts]
    return c - np.repeat(prev, lengths[lengths > 0])


def with_empty_prefixes(pred, lengths, offsets, first):
    """``pred`` (a :data:`Prediction` with one row per row of X) with one row inserted for every
    sequence of length 0, at its place in the batch: the forecast from the empty prefix, ``start`` =
    ``state`` = P(S_1 = j) = ``first`` (K,) (a segment starts at the first observation)."""
    empty = np.flatnonzero(lengths == 0)
    if empty.size == 0:
        return pred
    at = offsets[:-1][empty]
    row = np.asarray(first, dtype=np.float64)[None]
    return Prediction(np.insert(pred.start, at, row, axis=0), np.insert(pred.state, at, row, axis=0))


def state_runs(states, lengths, offsets):
    """Per sequence, the (n_run, 3) int64 (start, end, state) rows of the runs of equal states (local,
    end inclusive)."""
    out = []
    for b in range(lengths.shape[0]):
        o, T = int(offsets[b]), int(lengths[b])
        lab = states[o:o + T]
        if T == 0:
            out.append(np.zeros((0, 3), dtype=np.int64))
            continue
        st = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        en = np.r_[st[1:] - 1, T - 1]
        out.append(np.stack([st, en, lab[st]], axis=1).astype(np.int64))
    return out


class SubpathQueries:
    """The confidence of the segment-end estimate and subpath posteriors (Yu 2010 §2.2.4), shared by the
    explicit-duration HSMM and the general family. The host provides ``_prepare``, ``posterior_durations``
    (rows first), ``n_states`` and the hooks ``_one_sequence_structure`` / ``_state_mask``.
    """

    def confidence(self, X, lengths=None):
        """Confidence of the eq. (10) estimate (Yu 2010 §2.2.4):
        max_{j,d} η_t(j, d) / Σ_{j,d} η_t(j, d), shape (N,) float64 in [0, 1].

        Low values show where state estimation errors are likely; 0 where no segment can end at t.
        """
        eta = self.posterior_durations(X, lengths)
        tot = eta.sum(axis=(1, 2))
        mx = eta.max(axis=(1, 2))
        return np.divide(mx, tot, out=np.zeros_like(tot), where=tot > 0)

    def segment_posterior(self, X, segments, lengths=None, sequence=0, exact_start=True,
                          exact_end=True):
        """Posterior probability of a subpath P[s_{t+1:t+k} | o] (Yu 2010 §2.2.4).

        Parameters
        ----------
        X, lengths
            Observations as in :meth:`fit`.
        segments : array-like of int, shape (S, 3)
            Consecutive (start, end, state) rows (local to ``sequence``, end inclusive) covering
            [t+1, t+k]; consecutive states must differ.
        sequence : int, default 0
            Which sequence of the batch.
        exact_start, exact_end : bool, default True
            Require the first segment to start exactly at its start (the state differs just before)
            and the last to end exactly at its end. With False, the first (last) segment may extend
            earlier (later), i.e. only the labels of the covered tokens are constrained.

        Returns
        -------
        float
            L' / L where L' sums the paths through the constrained lattice (Yu 2010 §2.2.4, the
            constrained forward–backward of Culotta & McCallum 2004). Time O(T·(D·K + K²)).

        Raises
        ------
        ValueError
            Malformed segments (not consecutive, outside the sequence, bad state) or a sequence
            with zero likelihood.
        """
        X, lengths, offsets, _ = self._prepare(X, lengths)
        B = lengths.shape[0]
        if isinstance(sequence, bool) or not isinstance(sequence, (int, np.integer)) or not 0 <= sequence < B:
            raise ValueError(f"`sequence` must be an integer in [0, {B}); got {sequence!r}")
        o, T = int(offsets[sequence]), int(lengths[sequence])
        seg = np.asarray(segments)
        if seg.ndim != 2 or seg.shape[1] != 3 or seg.shape[0] < 1 or not np.issubdtype(seg.dtype, np.integer):
            raise ValueError(f"`segments` must be an int array of shape (S, 3) with S >= 1 (start, end, "
                             f"state); got shape {seg.shape}, dtype {seg.dtype}")
        s, e, k = seg[:, 0], seg[:, 1], seg[:, 2]
        if (s[0] < 0 or e[-1] >= T or np.any(e < s) or np.any(s[1:] != e[:-1] + 1)
                or k.min() < 0 or k.max() >= self.n_states):
            raise ValueError(f"`segments` must be consecutive (start, end, state) rows inside [0, {T}) "
                             f"with states in [0, {self.n_states}); got {seg.tolist()}")
        if np.any(k[1:] == k[:-1]):
            return 0.0
        sm = self._one_sequence_structure(X[o:o + T])
        log_z = float(sm.log_partition()[0])
        if log_z == -np.inf:
            raise ValueError(f"sequence {sequence} has zero likelihood; its subpath posterior is "
                             f"undefined")
        allowed = np.ones((T, self.n_states), dtype=bool)
        for si, ei, ki in seg:
            allowed[si:ei + 1] = False
            allowed[si:ei + 1, ki] = True
        if exact_start and s[0] > 0:
            allowed[s[0] - 1, k[0]] = False
        if exact_end and e[-1] < T - 1:
            allowed[e[-1] + 1, k[-1]] = False
        log_zc = float(sm.constrain(self._state_mask(allowed)).log_partition()[0])
        return math.exp(log_zc - log_z) if log_zc > -np.inf else 0.0

    # hooks of the host model (the explicit-duration HSMM; the general family overrides them)
    def _one_sequence_structure(self, X_seq):
        return self._potentials().semi_markov(X_seq, np.array([X_seq.shape[0]]))

    def _state_mask(self, allowed):
        """A (T, K) mask over states as a mask over the structure's labels."""
        return allowed


class SegmentQueries(SubpathQueries):
    """Filtering, one-step prediction, the joint MAP of segment ends, confidence and subpath posteriors.

    The host estimator provides ``_prepare(X, lengths)`` → (X, lengths, offsets, structure),
    ``_potentials()`` (:class:`structlearn.hsmm._potentials.HSMMPotentials`), ``posterior_durations`` and
    ``n_states``.
    """

    # ================================================================================================
    # filtering and prediction (forward messages only)
    # ================================================================================================
    def filter(self, X, lengths=None):
        """Filtered probabilities given the observations so far (Yu 2010 §2.2.2).

        ``state[t, j]`` = P(S_t = j | o_1:t), ``end[t, j]`` = P(S_t] = j | o_1:t) (a j-segment ends
        exactly at t), ``log_likelihood[t]`` = log P(o_1:t). The prefix likelihood follows the
        generative (right-censored) process: the segment running at t scores its survivor
        function, whatever ``censoring`` (with ``"both"`` the first segment follows the
        residual-life law).

        Returns
        -------
        Filtered
            ``state`` (N, K), ``end`` (N, K), ``log_likelihood`` (N,), float64.

        Notes
        -----
        Uses only forward messages (:meth:`SemiMarkov.forward`) plus one pass over d: time
        O(N·(D·K + K²)), memory O(N·K).
        """
        X, lengths, offsets, sm = self._prepare(X, lengths)
        terms, fm = self._potentials().filter_terms(sm, lengths, offsets)
        norm = special.logsumexp(terms["open"], axis=1)
        with np.errstate(invalid="ignore"):
            state = np.exp(terms["open"] - norm[:, None])
            end = np.exp(terms["closed"] - norm[:, None])
        bad = norm == -np.inf
        state[bad] = 0.0
        end[bad] = 0.0
        c = cum_scale(fm.log_scale, lengths, offsets)
        return Filtered(state, end, c + norm)

    def predict_next(self, X, lengths=None):
        """One-step prediction given o_1:t (Yu 2010 §2.2.2).

        Parameters
        ----------
        X, lengths
            Observations as in :meth:`fit`. A sequence of length 0 (a new stream, e.g. X with 0 rows
            and ``lengths=[0]`` or no ``lengths``) asks for the forecast from the empty prefix.

        Returns
        -------
        Prediction
            ``start[t, j]`` = P(S_[t+1 = j | o_1:t) = Σ_{i≠j} P(S_t] = i | o_1:t) a_ij (a j-segment
            starts at t+1) and ``state[t, j]`` = P(S_{t+1} = j | o_1:t) (the running segment
            continues, or a new one starts), both (N', K) float64: one row per row of X, plus one row
            for every sequence of length 0, in its place in the batch, with ``start`` = ``state`` =
            P(S_1 = j) = ``startprob_`` (the empty prefix t = 0, where a segment surely starts).
        """
        X, lengths, offsets, sm = self._prepare(X, lengths)
        potentials = self._potentials()
        terms, _ = potentials.filter_terms(sm, lengths, offsets)
        norm = special.logsumexp(terms["open"], axis=1)
        trans = potentials.log_transitions()
        log_start = special.logsumexp(terms["closed"][:, :, None] + trans[None], axis=1)
        log_state = np.logaddexp(log_start, terms["cont"])
        with np.errstate(invalid="ignore"):
            start = np.exp(log_start - norm[:, None])
            state = np.exp(log_state - norm[:, None])
        bad = norm == -np.inf
        start[bad] = 0.0
        state[bad] = 0.0
        return with_empty_prefixes(Prediction(start, state), lengths, offsets, potentials.startprob)

    def map_segment_ends(self, X, lengths=None):
        """Joint MAP of the state ending at t and its duration, (ŝ_t, d̂_t) = argmax η_t(i, d)
        (Yu 2010 eq. (10)).

        Returns
        -------
        SegmentEnds
            ``states`` (N,), ``durations`` (N,) int64 and ``probs`` (N,) float64 = η_t(ŝ_t, d̂_t).
            Memory O(N·D·K).
        """
        eta = self.posterior_durations(X, lengths)
        N, D, K = eta.shape
        flat = eta.reshape(N, D * K)
        arg = np.argmax(flat, axis=1)
        return SegmentEnds((arg % K).astype(np.int64), (arg // K + 1).astype(np.int64),
                           flat[np.arange(N), arg])

