"""Estimators of the general HSMM family (scikit-learn API): :class:`GeneralHSMM` (Yu 2010 §2.1),
:class:`VariableTransitionHMM` (§3.2) and :class:`ResidentialTimeHMM` (§3.3).

All three share one adapter (:class:`structlearn.hsmm._general_potentials.GeneralHSMMPotentials`, the super-label
semi-Markov structure), one E-step and the EM loop (:mod:`structlearn.hsmm._general_em`,
:func:`structlearn.learning.em.run_em`); they differ only in how their parameters map to π_(j,d) and
a_(i,d')(j,d) and in their M-step. The explicit-duration model is
:class:`structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`.
"""
import copy
from collections import namedtuple

import numpy as np
from scipy import special
from ..learning.training import EstimatorBase
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _general_em as _gem
from . import _em
from ..learning.em import EM_LOOP_DOC, run_em
from ..utils.docstrings import fill_docstring
from ..learning.shards import Shard, map_shards, data_blocks
from ..distributions import emissions as _emi
from . import _general_potentials as _g
from . import _potentials as _hsmm_model
from . import segment_emissions as _seg
from ..distributions.durations.censoring import CENSORING
from ..distributions.base import check_stochastic_rows
from ..utils.validation import check_allowed_mask, check_lengths
from ._criteria import InformationCriteria
from ..learning.restarts import check_em_options, fit_restarts, label_mask, warn_empty_states
from . import _general_files as _files
from ._queries import Prediction, SegmentEnds, SubpathQueries, cum_scale, state_runs, with_empty_prefixes
from ..learning.posterior_check import check_posteriors
from ..learning.sampling import sample_sequences
from ._shard_online import ShardOnlineMixin

__all__ = ["GeneralHSMM", "VariableTransitionHMM", "ResidentialTimeHMM", "SegmentFiltered"]

#: Filtering per duration (Yu 2010 §2.2.2), float64: ``ended`` (N, M, D) P(S_[t-d+1:t] = j | o_1:t) (a
#: j-segment of duration d ends at t; normalised over (j, d) as in the seed); ``next`` (N, M, D)
#: P(S_[t+1:t+d] = j | o_1:t) (the predicted next segment, same normaliser); ``log_likelihood`` (N,)
#: log P(o_1:t, a segment ends at t).
SegmentFiltered = namedtuple("SegmentFiltered", ["ended", "next", "log_likelihood"])

_FORMAT_VERSION = 1


class _SuperLabelHSMM(ShardOnlineMixin, SubpathQueries, InformationCriteria, EstimatorBase):
    """The surface shared by the three estimators (fit / score / posteriors / decode / filter / sample /
    information criteria / model files). Subclasses define ``_general()`` (log π, log a), ``_m_step``,
    ``_init_transitions`` and ``_check_params``."""

    _censoring_modes = CENSORING
    _letters = "ste"

    def __init__(self, n_states=2, max_duration=20, emission="gaussian", censoring="right", n_iter=100,
                 tol=1e-4, n_init=1, init="kmeans", params="ste", init_params="ste", random_state=None,
                 verbose=False, n_jobs=None):
        self._store_params(locals())

    # -- validation ------------------------------------------------------------------------------------
    def _validate_hyper(self):
        for name, lo in (("n_states", 1), ("max_duration", 1), ("n_iter", 0), ("n_init", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"`{name}` must be an integer >= {lo}; got {v!r}")
        if self.censoring not in self._censoring_modes:
            raise ValueError(f"`censoring` must be one of {self._censoring_modes} for "
                             f"{type(self).__name__}; got {self.censoring!r}")
        if not (isinstance(self.tol, (int, float, np.floating)) and self.tol >= 0):
            raise ValueError(f"`tol` must be a non-negative number; got {self.tol!r}")
        check_em_options(self, self._letters, "s start, t transitions, e emissions")

    def _validate_data(self, X, lengths):
        emission = getattr(self, "emission_", None) or self._make_emission()
        X = _emi.check_observations(emission, X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
        return X, lengths, offsets

    def _check_array(self, name, shape, n_axes):
        """``name`` as float64 of ``shape``, a distribution over its last ``n_axes`` axes (ValueError
        naming it otherwise; :func:`~structlearn.distributions.base.check_stochastic_rows`)."""
        a = np.asarray(getattr(self, name), dtype=np.float64)
        if a.shape != shape:
            raise ValueError(f"`{name}` must have shape {shape}; got {a.shape}")
        check_stochastic_rows(a.reshape(-1, int(np.prod(shape[len(shape) - n_axes:]))), name)
        setattr(self, name, a)

    # -- the adapter -----------------------------------------------------------------------------------
    def _make_emission(self):
        """A fresh copy of the ``emission`` argument (per-state emissions; GeneralHSMM: or segment ones)."""
        return _emi.make_emission(self.emission)

    def _is_segmental(self):
        return hasattr(self.emission_, "log_segment")

    def _potentials(self, censoring=None):
        ls, la = self._general()
        censoring = self.censoring if censoring is None else censoring
        if self._is_segmental():
            return _g.GeneralHSMMPotentials(ls, la, None, censoring, segment_emission=self.emission_.log_segment)
        return _g.GeneralHSMMPotentials(ls, la, self.emission_, censoring)

    def _prepare(self, X, lengths):
        check_is_fitted(self, "startprob_")
        self._check_params()
        X, lengths, offsets = self._validate_data(X, lengths)
        return X, lengths, offsets, self._potentials().semi_markov(X, lengths, offsets)

    def _one_sequence_structure(self, X_seq):
        T = X_seq.shape[0]
        return self._potentials().semi_markov(X_seq, np.array([T]), np.array([0, T]))

    def _state_mask(self, allowed):
        return np.repeat(allowed, self.max_duration_, axis=1)

    def to_structure(self, X, lengths=None):
        """The super-label :class:`~structlearn.engine.structures.SemiMarkov` structure of this model on ``X``
        (label k = j·D + d - 1); its ``log_partition()`` is the log-likelihood of each sequence."""
        return self._prepare(X, lengths)[3]

    # -- EM ----------------------------------------------------------------------------------------------
    def fit(self, X, lengths=None, labels=None):
        """Estimate the parameters by EM (Yu 2010 §2.3.1) with ``n_init`` restarts.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            Packed observations (NaN = missing). lengths : array-like of int (B,), optional.
        labels : array-like of int, shape (N,), optional
            Known states, -1 where unknown: EM on the paths that agree with them, maximising
            log P(o, s ∈ labels) (as :meth:`HiddenSemiMarkovModel.fit
            <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel.fit>`); fully labelled data give the
            closed-form estimate in one M-step.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad hyper-parameters or data, or a sequence with zero likelihood.

        Notes
        -----
        {em_loop}
        """
        self._validate_hyper()
        X, lengths, offsets = self._validate_data(X, lengths)
        known, allowed = label_mask(labels, X.shape[0], self.n_states)
        shards = data_blocks(Shard(X, lengths, offsets, allowed))
        return self._fit_sharded(lambda f, p: map_shards(f, p, shards, self.n_jobs), (X, lengths, known),
                                 int(lengths.max()), X.shape[1], X, lengths)

    def _fit_sharded(self, map_statistics, init_data, max_length, n_features, X=None, lengths=None):
        """EM with restarts whose E-step maps the per-shard function over the shards (as
        :meth:`HiddenSemiMarkovModel._fit_sharded <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel>`);
        ``X``, ``lengths``: all rows in this process (posteriors travel) or None. Returns self."""
        self.max_duration_ = int(self.max_duration)
        self.n_features_in_ = int(n_features)
        Xi, Li, known = init_data
        fit_restarts(self, {"startprob_": "s", "transmat_": "t", "emission_": "e"},
                     lambda rng, restart: self._init_params(Xi, Li, rng, restart, known),
                     lambda monitor, restart: self._em_sharded(map_statistics, monitor, restart, X, lengths))
        return self

    def _shard_from_data(self, X, lengths=None, labels=None):
        """The validated :class:`~structlearn.learning.shards.Shard` of ``X``, ``lengths`` and partial
        ``labels`` (as ``fit``)."""
        X, lengths, offsets = self._validate_data(X, lengths)
        return Shard(X, lengths, offsets, label_mask(labels, X.shape[0], self.n_states)[1])

    # -- the per-shard interface (structlearn.learning.shards), shared with structlearn.distributed ---------
    def _online_attributes(self):
        """The fitted parameters whose identity ties ``partial_fit``'s running statistics to them."""
        return ("startprob_", "transmat_", "emission_")

    def _shard_function(self, posteriors=True):
        """(statistics, params) of the current parameters: ``statistics(params, shard)`` is the E-step of
        one shard (:func:`structlearn.hsmm._general_em.shard_statistics`) with the counts this
        parameterisation's M-step reads (``_count_keys``)."""
        return _gem.shard_statistics, (self._potentials(), self._count_keys, "e" in self.params, posteriors)

    def _apply_statistics(self, total, X=None, lengths=None):
        """The M-step of the summed shard statistics (rows ``X``, ``lengths`` needed when they carry
        posteriors)."""
        counts = dict(total.stats)
        if total.posteriors is not None:
            counts.update(total.posteriors)
        sp, tm = self._m_step(counts)
        if "s" in self.params:
            self.startprob_ = sp
        if "t" in self.params:
            self.transmat_ = tm
        if "e" in self.params and self._is_segmental():
            if hasattr(self.emission_, "fit"):
                self.emission_.fit(X, lengths, counts["eta"])
        elif "e" in self.params:
            if total.posteriors is not None:
                self.emission_.fit(X, counts["gamma"])
            else:
                from ..learning.stepwise import emission_m_step
                emission_m_step(self.emission_, counts["emission"])
        warn_empty_states(counts["occupancy"][None, :])

    def _em_sharded(self, map_statistics, monitor, restart=0, X=None, lengths=None):
        """EM (:func:`run_em`) whose E-step is ``map_statistics(statistics, params)`` -> the summed
        :class:`~structlearn.learning.shards.ShardStatistics` of all shards: local blocks in ``fit``,
        dask workers in :func:`structlearn.distributed.fit` (``X`` None: no posteriors travel)."""
        def e_step():
            total = map_statistics(*self._shard_function(posteriors=X is not None))
            return total, total.value

        return run_em(e_step, lambda total: self._apply_statistics(total, X, lengths), monitor)

    def _init_params(self, X, lengths, rng, restart, known=None):
        M, D = self.n_states, self.max_duration_
        ip = self.init_params
        labels = _em.initial_labels(X, M, self.init, rng, restart, known)
        if "e" in ip or not hasattr(self, "emission_"):
            self.emission_ = self._make_emission()
            if self._is_segmental():
                if hasattr(self.emission_, "initialize") and "e" in ip:
                    self.emission_.initialize(X, lengths, M, D, rng)
            elif not hasattr(self.emission_, "initialize"):
                raise ValueError("the emission object has no `initialize`; set its parameters and "
                                 "leave 'e' out of `init_params`")
            else:
                self.emission_.initialize(X, M, labels, rng)
        jitter = bool(restart) or self.init == "random"
        pmf = _gem.initial_pmf(_em.initial_mean_durations(labels, lengths, M, D, rng, jitter), D)
        init = self._initial(pmf, rng if jitter else None)
        for name, letter in (("startprob_", "s"), ("transmat_", "t")):
            if letter in ip:
                setattr(self, name, init[name])
            elif not hasattr(self, name):
                raise ValueError(f"'{letter}' is not in `init_params`: set `{name}` before fit")
        self._check_params()

    @staticmethod
    def _off_diagonal(M, rng):
        """(M, M) row-stochastic destinations with a zero diagonal (uniform, or Dirichlet with ``rng``)."""
        if M == 1:
            return np.zeros((1, 1))
        w = rng.dirichlet(np.full(M - 1, 5.0), size=M) if rng is not None else \
            np.full((M, M - 1), 1.0 / (M - 1))
        return np.array([np.insert(w[i], i, 0.0) for i in range(M)])

    # -- likelihood and posteriors ---------------------------------------------------------------------
    def score_per_sequence(self, X, lengths=None):
        """Log-likelihood log P(o | λ) of every sequence (Yu 2010 eq. (4) summed), float64 (B,)."""
        return self._prepare(X, lengths)[3].log_partition()

    def score(self, X, lengths=None):
        """Total log-likelihood (float; -inf if a sequence is impossible). Time O(N·(M·D)²)."""
        return float(self.score_per_sequence(X, lengths).sum())

    def score_samples(self, X, lengths=None):
        """(log-likelihood, γ (N, M)) with γ_t(j) = P(S_t = j | o) (Yu 2010 eq. (8)); rows sum to one
        within 1e-9, else (or for a sequence with zero likelihood, as :meth:`predict`) ``ValueError``
        naming the sequence."""
        _, _, offsets, sm = self._prepare(X, lengths)
        M, D = self.n_states, self.max_duration_
        log_z = sm.log_partition()
        gamma = sm.marginals(edge="none").unary.reshape(-1, M, D).sum(2)
        return float(log_z.sum()), check_posteriors(gamma, offsets, log_z)

    def predict_proba(self, X, lengths=None):
        """Smoothed posteriors γ_t(j), float64 (N, M)."""
        return self.score_samples(X, lengths)[1]

    def posterior_transitions(self, X, lengths=None):
        """ξ_t(i, d'; j, d) = P(S_[t-d'+1:t] = i, S_[t+1:t+d] = j | o) (Yu 2010 eq. (7)), float64
        (N, M, D, M, D); the last row of every sequence is 0. Memory O(N·(M·D)²)."""
        M, D = self.n_states, self.max_duration_
        return self._prepare(X, lengths)[3].marginals().edge.reshape(-1, M, D, M, D)

    def posterior_durations(self, X, lengths=None):
        """η_t(j, d) = P(S_[t-d+1:t] = j | o) (Yu 2010 eq. (6)): a j-segment of (full) duration d ends
        at t (a right-censored last segment counts at the last row with its completed d), float64
        (N, M, D)."""
        sm = self._prepare(X, lengths)[3]
        fm, bm = sm.forward(), sm.backward()
        with np.errstate(invalid="ignore"):
            eta = np.exp(fm.alpha + bm.beta_end)
        return np.nan_to_num(eta).reshape(-1, self.n_states, self.max_duration_)

    def expected_counts(self, X, lengths=None):
        r"""The expectations (a)–(g) of Yu 2010 §2.2.2 per sequence (the keys of
        :meth:`HiddenSemiMarkovModel.expected_counts
        <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel.expected_counts>`), and the E-step counts.

        Returns
        -------
        dict of float64 arrays
            ``"ends_before"`` (N, M), ``"starts_by"`` (N, M), ``"occupancy"`` (B, M), ``"symbol_counts"``
            (B, M, V) (categorical emissions), ``"mean_observation"`` (B, M, F), ``"first_state"`` (B, M),
            ``"n_starts"`` / ``"n_ends"`` (B, M) — (f): segments that commence / terminate in the window;
            a right-censored last segment of observed length l and label (j, d) terminated iff d = l; under
            ``"both"`` the first segment (π_(j,d) is the law of the state in progress and its remaining
            duration, not of when it began) is not counted as a commencement — ``"mean_duration"`` (B, M)
            (observed segment lengths). E-step counts (:func:`structlearn.hsmm._general_potentials.segment_counts`):
            ``"first"`` (M, D), ``"trans"`` (M, D, M, D), ``"segments"`` (M, D), ``"gamma"`` (N, M).
            Time O(N·(M·D)²) (the forward–backward), memory O(N·M·D).
        """
        X, lengths, offsets, sm = self._prepare(X, lengths)
        M, D = self.n_states, self.max_duration_
        out = _g.segment_counts(sm, M, D, offsets, lengths)
        fm, bm = sm.forward(), sm.backward()
        with np.errstate(invalid="ignore"):
            starts = np.nan_to_num(np.exp(fm.alpha_star + bm.beta_start)).reshape(-1, M, D).sum(2)
            ends = np.nan_to_num(np.exp(fm.alpha + bm.beta_end)).reshape(-1, M, D).sum(2)
        B = lengths.shape[0]
        dm = sm.duration_marginals()
        Dc = dm.middle.shape[1]
        label_d = np.tile(np.arange(1, D + 1), M)  # full duration of every super-label
        censored = label_d[None, :] > np.arange(1, Dc + 1)[:, None]  # (Dc, M·D): went on after T
        not_ended = ((dm.last + dm.single) * censored[None]).reshape(B, Dc, M, D).sum(axis=(1, 3))
        observed = (dm.middle + dm.first + dm.last + dm.single).reshape(B, Dc, M, D).sum(axis=3)
        ex = _hsmm_model.state_expectations(out["gamma"], starts, ends, X, lengths, offsets, self.emission_,
                                            observed)
        n_seg = ex.pop("n_segments")
        first_rows = offsets[:-1][lengths > 0]
        first_starts = np.zeros((B, M))
        if self.censoring == "both":  # the first segment was in progress at t = 1: not a commencement
            first_starts[lengths > 0] = out["gamma"][first_rows]
        out.update(ex, n_starts=n_seg - first_starts, n_ends=n_seg - not_ended)
        return out

    def filter(self, X, lengths=None):
        """Filtered and predicted segment probabilities per duration (Yu 2010 §2.2.2).

        Returns
        -------
        SegmentFiltered
            ``ended`` (N, M, D) P(S_[t-d+1:t] = j | o_1:t) = α_t(j,d) / Σ α_t; ``next`` (N, M, D)
            P(S_[t+1:t+d] = j | o_1:t) = Σ_{i,d'} α_t(i,d') a_(i,d')(j,d) / Σ α_t; ``log_likelihood``
            (N,) log Σ_{j,d} α_t(j, d). Uses the forward messages only (censoring of the last segment
            does not enter: the filter at the last row is the one of a segment ending there). Time
            O(N·(M·D)²).
        """
        X, lengths, offsets, fm, pred = self._prefix_forward(X, lengths)
        M, D = self.n_states, self.max_duration_
        alpha = fm.alpha
        with np.errstate(invalid="ignore"):
            m = alpha.max(axis=1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0.0)
            lse = m + np.log(np.exp(alpha - m).sum(axis=1, keepdims=True))
            ended = np.nan_to_num(np.exp(alpha - lse))
            nxt = np.nan_to_num(np.exp(pred - lse))
        ll = cum_scale(fm.log_scale, lengths, offsets) + lse[:, 0]
        return SegmentFiltered(ended.reshape(-1, M, D), nxt.reshape(-1, M, D), ll)

    def predict_next(self, X, lengths=None):
        """One-step prediction given o_1:t (Yu 2010 §2.2.2), the generative (right-censored) prefix.

        Returns
        -------
        Prediction
            ``start[t, j]`` = P(S_[t+1 = j | o_1:t) = Σ_d P(S_[t+1:t+d] = j | o_1:t) (a j-segment starts at
            t+1; rows sum to P(a segment ends at t | o_1:t)) and ``state[t, j]`` = P(S_{t+1} = j | o_1:t)
            (the running segment goes on, or a new one starts), both (N', M) float64: one row per row of
            X, plus one row for every sequence of length 0 (a new stream: X with 0 rows and
            ``lengths=[0]`` or no ``lengths``), in its place in the batch, with ``start`` = ``state`` =
            P(S_1 = j) = Σ_d π_(j,d) (the empty prefix t = 0, where a segment surely starts).

        Raises
        ------
        ValueError
            For segment emissions (the law of a segment's first observations is not defined by
            b_(j,d)).

        Notes
        -----
        Forward messages only, plus one pass over the elapsed time l with the tails Σ_{d>=l} α*_(j,d):
        time O(N·((M·D)² + M·D²)), memory O(N·M·D).
        """
        X, lengths, offsets, fm, pred = self._prefix_forward(X, lengths)
        M, D = self.n_states, self.max_duration_
        N = X.shape[0]
        if self._is_segmental():
            raise ValueError("`predict_next` needs per-state emissions: a segment emission b_(j,d) does not "
                             "define the probability of a segment's first observations")
        unary = self.emission_.log_density(X) - fm.log_scale[:, None]
        a_star = fm.alpha_star.reshape(N, M, D)
        # tail[s, j, l-1] = log Σ_{d >= l} α̂*[s, (j, d)]: a j-segment started at s lasts at least l
        tail = np.logaddexp.accumulate(a_star[:, :, ::-1], axis=2)[:, :, ::-1]
        tail = np.concatenate([tail, np.full((N, M, 1), -np.inf)], axis=2)
        local = np.arange(N) - np.repeat(offsets[:-1], lengths)
        open_ = np.full((N, M), -np.inf)
        cont = np.full((N, M), -np.inf)
        acc = np.zeros((N, M))
        for ell in range(1, min(D, int(lengths.max()) if lengths.size else 1) + 1):
            idx = np.flatnonzero(local >= ell - 1)
            s0 = idx - (ell - 1)
            acc[idx] += unary[s0]
            open_[idx] = np.logaddexp(open_[idx], tail[s0, :, ell - 1] + acc[idx])
            cont[idx] = np.logaddexp(cont[idx], tail[s0, :, ell] + acc[idx])
        norm = np.logaddexp.reduce(open_, axis=1)
        log_start = np.logaddexp.reduce(pred.reshape(N, M, D), axis=2)
        with np.errstate(invalid="ignore"):
            start = np.nan_to_num(np.exp(log_start - norm[:, None]))
            state = np.nan_to_num(np.exp(np.logaddexp(log_start, cont) - norm[:, None]))
        first = np.exp(special.logsumexp(self._general()[0], axis=1))
        return with_empty_prefixes(Prediction(start, state), lengths, offsets, first)

    def _prefix_forward(self, X, lengths):
        """(X, lengths, offsets, forward messages of the uncensored structure, the prediction α̂*[t+1]
        made at every t) — at every t (the last row too) α̂_t(j, d) is a segment ending at t."""
        check_is_fitted(self, "startprob_")
        self._check_params()
        X, lengths, offsets = self._validate_data(X, lengths)
        sm = self._potentials("none").semi_markov(X, lengths, offsets)
        fm = sm.forward()
        # the prediction made at t is the forward's α̂*[t+1] = ⊕ α̂[t] + log a (same scale c_t); only the
        # last row of each sequence has no next row and gets its transition stage here
        pred = np.empty_like(fm.alpha)
        pred[:-1] = fm.alpha_star[1:]
        last = offsets[1:][lengths > 0] - 1
        pred[last] = np.logaddexp.reduce(fm.alpha[last][:, :, None] + sm._trans[None], axis=1)
        return X, lengths, offsets, fm, pred

    def map_segment_ends(self, X, lengths=None):
        """Joint MAP of the state ending at t and its duration, argmax_{j,d} η_t(j, d) (Yu 2010 eq. (10)).

        Returns
        -------
        SegmentEnds
            ``states`` (N,), ``durations`` (N,) int64 (the full d) and ``probs`` (N,) float64. Memory
            O(N·M·D).
        """
        eta = self.posterior_durations(X, lengths)
        N, M, D = eta.shape
        flat = eta.reshape(N, M * D)
        arg = np.argmax(flat, axis=1)
        return SegmentEnds((arg // D).astype(np.int64), (arg % D + 1).astype(np.int64), flat[np.arange(N), arg])

    # -- decoding ------------------------------------------------------------------------------------
    def decode(self, X, lengths=None, algorithm="viterbi", return_segments=False, constraints=None):
        """Most likely states: ``"viterbi"`` the best (state, duration) path (Yu 2010 eq. (11), log_prob
        = log max P(o, s)); ``"map"`` the per-time argmax of γ_t (log_prob = Σ_t log max_j γ_t(j)).

        Returns
        -------
        log_prob : float; states : int64 (N,); with ``return_segments`` a list of B (n_seg, 4) int64
        arrays of (start, end, state, duration) rows (local, end inclusive; the duration is the full d,
        which exceeds end - start + 1 for a censored last segment). ``"map"`` gives the runs and d = the
        run length.

        ``constraints`` (N, M) bool, optional: the states each row may take (Yu 2010 §2.2.3); only the
        paths that agree are decoded (``ValueError`` naming the sequence when none does).
        """
        if algorithm not in ("viterbi", "map"):
            raise ValueError(f"`algorithm` must be 'viterbi' or 'map'; got {algorithm!r}")
        X, lengths, offsets, sm = self._prepare(X, lengths)
        D = self.max_duration_
        under = ""
        if constraints is not None:
            mask = check_allowed_mask(constraints, (X.shape[0], self.n_states), "constraints")
            sm = sm.constrain(self._state_mask(mask))
            under = " under `constraints`"
        if algorithm == "viterbi":
            sm._raise_if_infeasible(sm.max(), "the Viterbi path" + under)
            labels = sm.argmax()
            log_prob = float(sm.max().sum())
            states = labels // D
            segs = None
            if return_segments:
                segs = [np.column_stack([s[:, 0], s[:, 1], s[:, 2] // D, s[:, 2] % D + 1]).astype(np.int64)
                        for s in sm.argmax_segments()]
        else:
            sm._raise_if_infeasible(sm.log_partition(), "the MAP states" + under)
            gamma = sm.marginals(edge="none").unary.reshape(-1, self.n_states, D).sum(2)
            states = np.argmax(gamma, axis=1).astype(np.int64)
            with np.errstate(divide="ignore"):
                log_prob = float(np.log(gamma.max(axis=1)).sum())
            segs = None
            if return_segments:
                segs = [np.column_stack([r, r[:, 1] - r[:, 0] + 1]).astype(np.int64)
                        for r in state_runs(states, lengths, offsets)]
        return (log_prob, states.astype(np.int64), segs) if return_segments else \
            (log_prob, states.astype(np.int64))

    def predict(self, X, lengths=None):
        """Viterbi states (Yu 2010 eq. (11)), int64 (N,)."""
        return self.decode(X, lengths)[1]

    # -- sampling, information criteria ------------------------------------------------------------
    def sample(self, n_samples=1, random_state=None, n_sequences=None):
        """Draw one sequence: (X (n, F), states (n,) int64, segments (S, 3) int64 [start, end, state]).

        With ``n_sequences`` (an int) that many sequences from the same random stream (the first is the
        sequence of ``n_sequences=None``): X and states one sequence after the other (``fit(X, lengths)``'s
        layout), segments a list (one (S_b, 3) array per sequence, rows local to it), then ``lengths``
        (n_sequences,) int64. ``ValueError`` when ``n_sequences`` is not a positive integer.
        """
        check_is_fitted(self, "startprob_")
        self._check_params()
        rng = check_random_state(random_state)
        pot = self._potentials()
        if self._is_segmental() and not hasattr(self.emission_, "sample"):
            raise ValueError("the segment emission has no `sample`: cannot draw observations")

        def draw():
            states, segments, durations = pot.sample(int(n_samples), rng)
            if self._is_segmental():
                parts = [self.emission_.sample(int(j), int(d), rng)[:e - s + 1]
                         for (s, e, j), d in zip(segments, durations)]
                return np.concatenate(parts), states, segments
            return self.emission_.sample(states, rng), states, segments

        return sample_sequences(draw, n_sequences, 2)

    def _n_free(self):
        raise NotImplementedError

    def n_parameters(self):
        """Number of free parameters EM estimates (letters of ``params``)."""
        check_is_fitted(self, "startprob_")
        ns, nt = self._n_free()
        return (ns if "s" in self.params else 0) + (nt if "t" in self.params else 0) + \
            (int(self.emission_.n_parameters()) if "e" in self.params else 0)

    def _n_rows(self, X, lengths):
        return self._validate_data(X, lengths)[0].shape[0]

    # -- model files -----------------------------------------------------------------------------------
    def save(self, path):
        """Write the fitted model to ``path`` (versioned ``.npz`` + JSON header; no pickle).

        Any family of :mod:`structlearn.distributions.emissions` or :mod:`structlearn.distributions.emissions.hmm` is
        saved, and the segment emissions ``CategoricalSegments`` and ``PolynomialSegments``. Raises
        ``ValueError`` for a custom (non-structlearn) emission object or a callable segment emission (a file
        runs no code)."""
        check_is_fitted(self, "startprob_")
        _files.save(self, path, _FORMAT_VERSION)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; runs no code from the file (emission families are looked
        up by name in :mod:`structlearn.distributions.emissions` and :mod:`~structlearn.distributions.emissions.hmm`;
        an ``emission`` argument that was an object comes back as a fresh object of its family)."""
        return _files.load(cls, path, _FORMAT_VERSION)


fill_docstring(_SuperLabelHSMM.fit, em_loop=EM_LOOP_DOC)


class GeneralHSMM(_SuperLabelHSMM):
    """The general hidden semi-Markov model (Yu 2010 §2.1): free a_(i,d')(j,d) and π_(j,d).

    Parameters
    ----------
    n_states : int, M. max_duration : int, D (default 20: the state space has M·D super-labels).
    emission : str or emission object (:mod:`structlearn.distributions.emissions`), per-state b_j(o_t).
    censoring : {"none", "right", "both"} (Yu 2010 §2.2.1; under "both" π_(j,d) is the law of the state
        at t = 1 and its remaining duration).
    n_iter, tol, n_init, init, params, init_params, random_state, verbose, n_jobs : as
        :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel` (letters s, t, e).
    segment_emission : None, callable or segment emission object, default None
        Segment emissions b_(j,d)(o_{t+1:t+d}) (Yu 2010 §2.1, eq. (1)) instead of per-state ones (then
        ``emission`` is unused): a callable ``X_seq -> (T, D, M)`` of log b_(j,d) of the segment ending at
        each row (fixed; see :class:`~structlearn.hsmm.segment_emissions.SegmentLogLikelihood`) or an
        object of the protocol of :mod:`structlearn.hsmm.segment_emissions`, e.g.
        ``CategoricalSegments(V)``, the categorical segment table re-estimated by EM from η_t(j, d)
        (copied, never modified). Needs ``censoring="none"`` (the law of a cut segment's observed part
        is not given by b_(j,d)); ``predict_next`` is not available.

    Attributes
    ----------
    startprob_ : float64 (M, D), π_(j,d). transmat_ : float64 (M, D, M, D), a_(i,d')(j,d) (axes previous
    state, its duration, next state, its duration), zero where i == j, each (i, d') row summing to 1
    over (j, d). emission_, monitor_, converged_, log_likelihood_, max_duration_.

    Notes
    -----
    Forward (4), backward (5), ξ (7), γ (8) and re-estimation (§2.3.1 items 1–3) run on the super-label
    structure of :mod:`structlearn.hsmm._general_potentials`
    (:class:`~structlearn.engine.structures.semimarkov_super.SuperLabelSemiMarkov`, dense transition): time
    O(T·(M·D)²) per E-step (Yu's O(M²D²T)), memory O(T·M·D). Measured (``benchmarks/bench_hsmm.py
    --section family``, one thread, 2-core machine): T = 5 000, M = 5, D = 100: E-step 1.76 s, one EM
    iteration 1.02× its E-step, 5.3× the time of a bare loop of its T·(M·D)² multiply-adds.
    """

    _file_format = "general-hsmm"

    def __init__(self, n_states=2, max_duration=20, emission="gaussian", censoring="right", n_iter=100,
                 tol=1e-4, n_init=1, init="kmeans", params="ste", init_params="ste", random_state=None,
                 verbose=False, segment_emission=None, n_jobs=None):
        self._store_params(locals())

    def _validate_hyper(self):
        super()._validate_hyper()
        if self.segment_emission is not None:
            self._make_emission()
            if self.censoring != "none":
                raise ValueError(f"segment emissions need censoring='none' (a censored segment's observed "
                                 f"part has no law under b_(j,d)); got censoring={self.censoring!r}")

    def _make_emission(self):
        se = self.segment_emission
        if se is None:
            return super()._make_emission()
        if hasattr(se, "log_segment"):
            return copy.deepcopy(se)
        return _seg.SegmentLogLikelihood(se)

    def _general(self):
        return _g._log(self.startprob_), _g._log(self.transmat_)

    def _check_params(self):
        M, D = self.n_states, self.max_duration_
        self._check_array("startprob_", (M, D), 2)
        tm = np.asarray(self.transmat_, dtype=np.float64)
        if tm.shape == (M, D, M, D) and M > 1 and np.any(tm[np.arange(M), :, np.arange(M), :] != 0):
            raise ValueError("`transmat_` must be 0 where the next state equals the previous one "
                             "(no self-transitions, Yu 2010 §2.1)")
        if M > 1:
            self._check_array("transmat_", (M, D, M, D), 2)
        emission = getattr(self, "emission_", None)
        if hasattr(emission, "check"):
            emission.check(M, D)

    def _initial(self, pmf, rng):
        M, D = pmf.shape[1], pmf.shape[0]
        sp = (np.full(M, 1.0 / M)[:, None] * pmf.T)
        A = self._off_diagonal(M, rng)
        tm = np.broadcast_to(A[:, None, :, None] * pmf.T[None, None], (M, D, M, D)).copy()
        return {"startprob_": sp, "transmat_": tm}

    _count_keys = ("first", "trans")

    def _m_step(self, counts):
        return _gem.m_step_general(counts, self.startprob_, self.transmat_)

    def _n_free(self):
        M, D = self.n_states, self.max_duration_
        return M * D - 1, (M * D * ((M - 1) * D - 1) if M > 1 else 0)


class ResidentialTimeHMM(_SuperLabelHSMM):
    """Residential-time HMM (Yu 2010 eq. (3), §3.3): a_i(j, d), the next state and its duration depend on
    the state left, not on how long it lasted.

    Attributes
    ----------
    startprob_ : float64 (M, D), π_(j,d). transmat_ : float64 (M, M, D), a_i(j, d), zero where j == i,
    each row i summing to 1 over (j, d). Other parameters and attributes as :class:`GeneralHSMM`.

    Notes
    -----
    Equals :class:`GeneralHSMM` with a_(i,d')(j,d) = a_i(j,d) for every d'. The transition stage is
    factored through the state left (α*_t(j, d) = Σ_i a_i(j, d) · Σ_{d'} α_{t-1}(i, d')), so an E-step
    costs O(T·M²·D) (Yu 2010 §3.3), memory O(T·M²). Measured (``benchmarks/bench_hsmm.py --section
    family``, one thread): T = 10⁵, M = 5, D = 100: E-step 0.48 s, one EM iteration 1.02× its E-step,
    9.8× a bare loop of its T·M²·D multiply-adds.
    """

    _file_format = "residential-time-hmm"

    def _general(self):
        return _g.residential_time(self.startprob_, self.transmat_)

    def _check_params(self):
        M, D = self.n_states, self.max_duration_
        self._check_array("startprob_", (M, D), 2)
        tm = np.asarray(self.transmat_, dtype=np.float64)
        if tm.shape == (M, M, D) and M > 1 and np.any(tm[np.arange(M), np.arange(M), :] != 0):
            raise ValueError("`transmat_` must be 0 where the next state equals the one left (a_i(i, d) "
                             "= 0, Yu 2010 §3.3)")
        if M > 1:
            self._check_array("transmat_", (M, M, D), 2)

    def _initial(self, pmf, rng):
        M = pmf.shape[1]
        A = self._off_diagonal(M, rng)
        return {"startprob_": np.full(M, 1.0 / M)[:, None] * pmf.T,
                "transmat_": A[:, :, None] * pmf.T[None, :, :]}

    _count_keys = ("first", "enter")

    def _m_step(self, counts):
        return _gem.m_step_residential(counts, self.startprob_, self.transmat_)

    def _n_free(self):
        M, D = self.n_states, self.max_duration_
        return M * D - 1, (M * ((M - 1) * D - 1) if M > 1 else 0)


class VariableTransitionHMM(_SuperLabelHSMM):
    """Variable-transition HMM (Yu 2010 §2.1 and §3.2): self-transitions a_jj(τ) that depend on the time
    τ already spent in the state, and a next state that depends on it too.

    Attributes
    ----------
    startprob_ : float64 (M,), π_j. transmat_ : float64 (D, M, M), row (τ, i) = P(next state | state i
    has stayed τ), the diagonal the self-transition a_ii(τ) (a_ii(D) must be 0: every segment ends by
    D), each row summing to 1. Other parameters and attributes as :class:`GeneralHSMM`; ``censoring`` is
    "none" or "right" (under "both" the first segment's residual law is not closed-form in a_jj(τ)).

    Notes
    -----
    Equals :class:`GeneralHSMM` with a_(i,d')(j,d) = a_ij(d') / (1 - a_ii(d')) · p_j(d),
    p_j(d) = Π_{τ<d} a_jj(τ) (1 - a_jj(d)), π_(j,d) = π_j p_j(d). The M-step (hazards and destinations,
    :func:`structlearn.hsmm._general_em.m_step_variable`) is exact. The transition stage is
    factored (a leave term a_ij(d') / (1 - a_ii(d')) per (label, next state) and an enter term p_j(d)),
    so an E-step costs O(T·M²·D) (Yu 2010 §3.2), memory O(T·M²). Measured (``benchmarks/bench_hsmm.py
    --section family``, one thread): T = 10⁵, M = 5, D = 100: E-step 0.69 s, one EM iteration 0.99× its
    E-step, 14× a bare loop of its T·M²·D multiply-adds.
    """

    _file_format = "variable-transition-hmm"

    _censoring_modes = ("none", "right")

    def _validate_hyper(self):
        super()._validate_hyper()
        if self.n_states < 2:
            raise ValueError(f"`n_states` must be >= 2 for VariableTransitionHMM (a state that leaves "
                             f"needs another to enter); got {self.n_states!r}")

    def _general(self):
        return _g.variable_transition(self.startprob_, self.transmat_, self.censoring)

    def _check_params(self):
        M, D = self.n_states, self.max_duration_
        self._check_array("startprob_", (M,), 1)
        tm = np.asarray(self.transmat_, dtype=np.float64)
        if tm.shape == (D, M, M) and np.any(tm[-1, np.arange(M), np.arange(M)] != 0):
            raise ValueError(f"`transmat_[{D - 1}]` must have a zero diagonal: a state that has stayed "
                             f"max_duration={D} must leave")
        self._check_array("transmat_", (D, M, M), 1)

    def _initial(self, pmf, rng):
        D, M = pmf.shape
        surv = np.cumsum(pmf[::-1], axis=0)[::-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            h = np.where(surv > 0, pmf / surv, 1.0)
        h[-1] = 1.0
        A = self._off_diagonal(M, rng)
        tm = h[:, :, None] * A[None]
        tm[:, np.arange(M), np.arange(M)] = 1.0 - h
        return {"startprob_": np.full(M, 1.0 / M), "transmat_": tm}

    _count_keys = ("first", "segments", "leave")

    def _m_step(self, counts):
        return _gem.m_step_variable(counts, self.startprob_, self.transmat_)

    def _n_free(self):
        M, D = self.n_states, self.max_duration_
        return M - 1, (D - 1) * M * (M - 1) + M * (M - 2)
