r"""Explicit-duration hidden semi-Markov model (HSMM): its parameters as semi-Markov potentials.

Model (Yu 2010, "Hidden semi-Markov models", Artificial Intelligence 174, §2.1 and §3.1 — the
explicit-duration HMM of Ferguson 1980): states j = 1..K with initial probabilities π_j, transitions
a_ij with a_ii = 0, durations p_j(d), d = 1..D, and conditionally independent emissions b_j(o_t)
(eq. (12)). A state sequence is a segmentation of the observations into labelled segments; its
probability is

.. math:: π_{j_1} \prod_m p_{j_m}(d_m) \prod_{t \in m} b_{j_m}(o_t) \prod_{m<n} a_{j_m j_{m+1}}

with the first / last segment's duration term replaced according to the boundary conditions
(``censoring``, Yu 2010 §2.2.1; see :mod:`structlearn.distributions.durations.censoring`).

**Architecture.** There is no forward–backward recursion here. :class:`HSMMPotentials` turns
(π, A, durations, emission log-densities) into semi-Markov log-potentials — ``unary`` = log b_j(o_t),
``duration`` = log p_j(d), ``first/last/single_duration`` = the censored tables, ``transition`` =
log a_ij (diagonal -inf), ``start`` = log π — and every inference output is read from the
:class:`~structlearn.engine.structures.SemiMarkov` structure: log Z is the log-likelihood (eq. (4) summed),
token marginals are γ_t(j) (eq. (8)), transition marginals ξ_t(i, j) (eq. (7)), segment marginals
η_t(j, d) (eq. (6)), duration marginals the M-step statistics (§2.3.1), the max semiring the Viterbi
path (eq. (11)). Filtering and prediction (§2.2.2) use the structure's normalised forward messages
(:meth:`HSMMPotentials.filter_terms`). The estimator is
:class:`structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`.
"""
import numpy as np

from ..engine.structures.chain import LinearChain
from ..engine.structures.semimarkov import SemiMarkov
from ..distributions.durations.censoring import (absorbing_states, duration_tables, log_mean, log_survivor,
                                                 log_tail_sum, refuse_absorbing)
from ..distributions.durations import Geometric
from ..distributions.emissions import Categorical

__all__ = ["HSMMPotentials", "check_probabilities", "expected_counts", "state_expectations",
           "transition_marginals"]


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


def check_probabilities(startprob, transmat, K, endprob=None):
    """π (K,), A (K, K) and the optional end probabilities e (K,) as float64 arrays, validated.

    A is non-negative with a zero diagonal (K >= 2); each row i sums to 1 - e_i (to 1 without e), or is
    all zero — an absorbing state (a left-right model's final state), which can only be the last
    segment. Raises ``ValueError`` naming the attribute (``startprob_``, ``transmat_``, ``endprob_``).
    Returns (startprob, transmat, endprob) (endprob None when not given).
    """
    sp = np.asarray(startprob, dtype=np.float64)
    if sp.shape != (K,):
        raise ValueError(f"`startprob_` must have shape ({K},); got {sp.shape}")
    if np.any(sp < 0) or not np.isclose(sp.sum(), 1.0, atol=1e-8):
        raise ValueError(f"`startprob_` must be non-negative and sum to 1 (got sum {sp.sum():.6g})")
    tm = np.asarray(transmat, dtype=np.float64)
    if tm.shape != (K, K):
        raise ValueError(f"`transmat_` must have shape ({K}, {K}); got {tm.shape}")
    if np.any(tm < 0):
        raise ValueError("`transmat_` must be non-negative")
    ep = None
    if endprob is not None:
        ep = np.asarray(endprob, dtype=np.float64)
        if ep.shape != (K,) or np.any(ep < 0) or np.any(ep > 1):
            raise ValueError(f"`endprob_` must be None or probabilities of shape ({K},); got shape "
                             f"{ep.shape}" + (f", values {ep.tolist()}" if ep.shape == (K,) else ""))
    if K >= 2:
        if np.any(np.diag(tm) != 0):
            raise ValueError("`transmat_` must have a zero diagonal (an explicit-duration HSMM has "
                             "no self-transitions, Yu 2010 §3.1; durations model the stay)")
        s = tm.sum(axis=1)
        want = 1.0 - ep if ep is not None else np.ones(K)
        bad = ~(np.isclose(s, want, rtol=0, atol=1e-8) | ((s == 0) & (ep is None)))
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise ValueError("`transmat_` rows must sum to 1" + (" - endprob_" if ep is not None else
                             " (or be all zero: an absorbing final state)")
                             + f"; row {i} sums to {s[i]:.6g}" + (f", endprob_[{i}] = {ep[i]:.6g}"
                                                                   if ep is not None else ""))
    elif ep is not None and not np.isclose(ep[0], 1.0, rtol=0, atol=1e-8):
        raise ValueError(f"`endprob_` of a one-state model must be [1.0] (it has nowhere else to go); "
                         f"got {ep.tolist()}")
    if np.all(tm.sum(axis=1) == 0) and K >= 2:
        raise ValueError("`transmat_` has no non-zero row: every state is absorbing")
    return sp, tm, ep


class HSMMPotentials:
    """The potentials of explicit-duration HSMM parameters on a packed batch.

    Parameters
    ----------
    startprob : ndarray (K,), transmat : ndarray (K, K)
        π and a_ij (zero diagonal), validated by the caller.
    duration, emission : duration and emission objects (:mod:`structlearn.distributions.durations`,
        :mod:`structlearn.distributions.emissions`) with their parameters set.
    max_duration : int
        D.
    censoring : {"none", "right", "both"}
    allow_chain : bool, default True
        Whether :meth:`structure` may return the first-order chain equal to the model
        (:meth:`hmm_equivalent`).
    endprob : ndarray (K,), optional
        End probabilities e_j (``censoring="none"``): the last segment, which ends at the last
        observation, scores log e_j. None: every state may end with weight 1.
    untruncated : bool, default False
        Geometric durations only: the law is the untruncated geometric (the HMM), so the chain is used
        whatever ``max_duration``; ``max_duration`` then only bounds the duration-indexed outputs of
        the semi-Markov structure.
    """

    def __init__(self, startprob, transmat, duration, emission, max_duration, censoring, allow_chain=True,
                 untruncated=False, endprob=None):
        self.startprob = startprob
        self.transmat = transmat
        self.duration = duration
        self.emission = emission
        self.max_duration = int(max_duration)
        self.censoring = censoring
        self.allow_chain = allow_chain
        self.untruncated = bool(untruncated)
        self.endprob = endprob

    def log_end(self):
        """End log-potentials (K,): log e_j, or 0 without end probabilities."""
        return np.zeros(self.n_states) if self.endprob is None else _log(self.endprob)

    @property
    def n_states(self):
        return self.startprob.shape[0]

    def log_pmf(self):
        """The duration log-pmf (D, K) (raises ``ValueError`` on a wrong shape)."""
        D, K = self.max_duration, self.n_states
        lp = self.duration.log_pmf(D)
        if lp.shape != (D, K):
            raise ValueError(f"duration log_pmf must have shape ({D}, {K}); got {lp.shape}")
        return lp

    def log_transitions(self):
        """log a_ij with the diagonal at -inf (no self-transitions), (K, K)."""
        trans = _log(self.transmat)
        np.fill_diagonal(trans, -np.inf)
        return trans

    def semi_markov(self, X, lengths, unary=None):
        """SemiMarkov over the packed batch (X validated); tables cut to the longest sequence."""
        if unary is None:
            unary = self.emission.log_density(X)
        tab = duration_tables(self.log_pmf(), self.censoring)
        Dc = max(1, min(self.max_duration, int(lengths.max()) if lengths.size else 1))
        return SemiMarkov(unary, tab["middle"][:Dc], self.log_transitions(), lengths=lengths,
                          start=_log(self.startprob), end=self.log_end(), allow_same_label=False,
                          first_duration=tab["first"][:Dc], last_duration=tab["last"][:Dc],
                          single_duration=tab["single"][:Dc])

    def alignment(self, X, order):
        """The left-right SemiMarkov over the positions of a state ``order`` (S,) on one sequence ``X``
        (T rows): label p is the p-th segment, of state order[p]; it may only be followed by p + 1, the
        first segment is position 0 and the last position S - 1 (forced alignment)."""
        T = X.shape[0]
        S = order.shape[0]
        tab = duration_tables(self.log_pmf(), self.censoring)
        Dc = max(1, min(self.max_duration, T))
        trans = np.full((S, S), -np.inf)
        lt = self.log_transitions()
        trans[np.arange(S - 1), np.arange(1, S)] = lt[order[:-1], order[1:]]
        start = np.full(S, -np.inf)
        start[0] = _log(self.startprob)[order[0]]
        end = np.full(S, -np.inf)
        end[-1] = self.log_end()[order[-1]]
        return SemiMarkov(self.emission.log_density(X)[:, order], tab["middle"][:Dc, order], trans,
                          lengths=np.array([T]), start=start, end=end, allow_same_label=False,
                          first_duration=tab["first"][:Dc, order], last_duration=tab["last"][:Dc, order],
                          single_duration=tab["single"][:Dc, order])

    def hmm_equivalent(self):
        """(log H, log start, log end) of the first-order chain equal to this HSMM, or None.

        With geometric durations p_j(d) = p_j (1 - p_j)^(d-1) the HSMM is the HMM with
        H = diag(1 - p) + diag(p) A (Yu 2010 §1, §4.6; the residual-life law of a geometric duration is
        the same geometric law, so "both" equals "right"). The only difference is the truncation at
        D, so the chain is used only when (1 - p_j)^D < 1e-20 for every state: then both models agree
        to float64 precision — or always when the geometric law is ``untruncated``. ``end`` is log p_j under ``censoring="none"`` (the last segment ends
        at the last observation), else 0. The chain costs O(N·K²) instead of O(N·(D·K + K²)).
        """
        if not isinstance(self.duration, Geometric) or not self.allow_chain:
            return None
        shift = getattr(self.duration, "shift", None)
        if getattr(self.duration, "estimate_shift", False) or (shift is not None and np.any(np.asarray(shift) > 0)):
            return None     # a shifted geometric is not memoryless: no first-order chain equals it
        p = np.asarray(self.duration.p, dtype=np.float64)
        with np.errstate(divide="ignore"):
            if not self.untruncated and np.any(self.max_duration * np.log1p(-p) > -46.0):
                return None
            H = np.diag(1.0 - p) + p[:, None] * self.transmat
            return _log(H), _log(self.startprob), (np.log(p) if self.censoring == "none"
                                                   else np.zeros_like(p)) + self.log_end()

    def structure(self, X, lengths, allow_chain=False):
        """The SemiMarkov structure, or with ``allow_chain`` the chain equivalent when it exists."""
        eq = self.hmm_equivalent() if allow_chain else None
        if eq is None:
            return self.semi_markov(X, lengths)
        log_h, start, end = eq
        return LinearChain(self.emission.log_density(X), log_h, lengths=lengths, start=start, end=end)

    def sample(self, n_samples, rng):
        """One sequence of ``n_samples`` observations of the generative process: (X, states, segments);
        see :meth:`structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel.sample`."""
        D = self.max_duration
        lp = self.log_pmf()
        refuse_absorbing(lp, self.censoring)
        forever = absorbing_states(lp)  # an absorbing state's segment runs to the end of the sample
        K = self.n_states
        segs = []
        t = 0
        k = int(rng.choice(K, p=self.startprob))
        if self.censoring == "both":
            lfirst = log_survivor(lp) - log_mean(lp)
            pf = np.exp(lfirst[:, k])
            d = int(rng.choice(D, p=pf / pf.sum())) + 1
        else:
            d = n_samples if forever[k] else int(self.duration.sample(np.array([k]), D, rng)[0])
        while True:
            segs.append((t, min(t + d, n_samples) - 1, k))
            t += d
            if t >= n_samples:
                break
            if K == 1:
                raise ValueError("a 1-state HSMM has no transitions: its samples are limited to one "
                                 "segment; ask for at most max_duration observations")
            row = self.transmat[k]
            leave = row.sum()
            if leave <= 0 or (self.endprob is not None and rng.random_sample() >= leave):
                break  # the process ended (absorbing state or end probability): a shorter sample
            k = int(rng.choice(K, p=row / leave))
            d = n_samples if forever[k] else int(self.duration.sample(np.array([k]), D, rng)[0])
        segments = np.array(segs, dtype=np.int64)
        states = np.repeat(segments[:, 2], segments[:, 1] - segments[:, 0] + 1)
        X = self.emission.sample(states, rng)
        return X, states, segments

    # -- filtering and prediction (forward messages only) ----------------------------------------
    def forward_tables(self):
        """(D, K) log tables for a segment that started at 0 / later, closed (ends at t), open
        (still running at t) and continuing (still running at t + 1), right-censored semantics."""
        lp = self.log_pmf()
        refuse_absorbing(lp, self.censoring)
        ls = log_survivor(lp)
        D, K = lp.shape
        ls_next = np.vstack([ls[1:], np.full((1, K), -np.inf)])  # log P(duration >= d + 1)
        middle = {"closed": lp, "open": ls, "cont": ls_next}
        if self.censoring == "both":
            lm = log_mean(lp)
            lr = log_tail_sum(ls)
            lr_next = np.vstack([lr[1:], np.full((1, K), -np.inf)])
            return {"closed": ls - lm, "open": lr - lm, "cont": lr_next - lm}, middle
        return middle, middle

    def filter_terms(self, sm, lengths, offsets):
        """Log (relative to c_t) of the closed / open / continuing sums at every t, (N, K) each, and
        the forward messages of ``sm`` (the SemiMarkov structure of this model)."""
        unary = sm.unary
        fm = sm.forward()
        N, K = unary.shape
        first, middle = self.forward_tables()
        D = min(self.max_duration, int(lengths.max()) if lengths.size else 1)
        local = np.arange(N) - np.repeat(offsets[:-1], lengths)
        u = unary - fm.log_scale[:, None]
        acc = np.zeros((N, K))
        out = {k: np.full((N, K), -np.inf) for k in ("closed", "open", "cont")}
        for d in range(1, D + 1):
            valid = local >= d - 1
            idx = np.flatnonzero(valid)
            s = idx - (d - 1)
            acc[idx] += u[s]
            acc[~valid] = -np.inf
            base = fm.alpha_star[s] + acc[idx]
            is_first = local[s] == 0
            for key in out:
                tab = np.where(is_first[:, None], first[key][d - 1][None, :],
                               middle[key][d - 1][None, :])
                out[key][idx] = np.logaddexp(out[key][idx], base + tab)
        return out, fm


def transition_marginals(sm):
    """γ (N, K) and ξ (N, K, K) with a zero diagonal (a chain's diagonal = staying in a segment)."""
    gamma, xi = sm.marginals()
    if isinstance(sm, LinearChain):
        K = xi.shape[1]
        xi[:, np.arange(K), np.arange(K)] = 0.0
    return gamma, xi


def _censored_fractions(log_pmf, censoring, n_rows):
    """For an observed length d (rows, (n_rows, K)): the probability that a censored segment commenced
    (started inside the window) or terminated (ended inside it), given the censoring mode.

    Returns (first_starts, single_starts, last_ends, single_ends): a first segment under "both" has
    observed part S(d)/μ of which p(d)/μ began at the first observation; a last segment under "right" /
    "both" scores S(d) of which p(d) ended at the last; a segment covering the whole sequence under
    "both" scores Σ_{m>=d} S(m)/μ of which S(d)/μ began (or ended) at the window's edge.
    """
    K = log_pmf.shape[1]
    one = np.ones((n_rows, K))
    if censoring == "none":
        return one, one, one, one
    ls = log_survivor(log_pmf)
    with np.errstate(invalid="ignore"):
        hazard = np.nan_to_num(np.exp(log_pmf - ls))[:n_rows]
        if censoring == "right":
            return one, one, hazard, hazard
        edge = np.nan_to_num(np.exp(ls - log_tail_sum(ls)))[:n_rows]
    return hazard, edge, hazard, edge


def state_expectations(gamma, starts, ends, X, lengths, offsets, emission, durations):
    r"""The per-state expectations (a)–(e), (g) of Yu 2010 §2.2.2 and the expected number of segments,
    shared by the explicit-duration and the general HSMM.

    Parameters
    ----------
    gamma : (N, K) float64, γ_t(j). starts, ends : (N, K) float64
        P(a j-segment starts at row t | o) and P(one ends at row t | o) (the last row of a sequence is
        not used: ``ends_before`` counts the ends followed by a transition).
    X, lengths, offsets : the validated batch. emission : the per-state emission (``symbol_counts`` for
        :class:`~structlearn.distributions.emissions.Categorical`).
    durations : (B, L, K) float64
        Expected number of j-segments of observed length l per sequence (the duration marginals summed
        over the first/middle/last/single tables).

    Returns
    -------
    dict of float64 arrays
        ``ends_before``, ``starts_by`` (N, K); ``occupancy``, ``first_state``, ``n_segments``,
        ``mean_duration`` (B, K); ``mean_observation`` (B, K, F); ``symbol_counts`` (B, K, V) for
        categorical emissions.
    """
    B = lengths.shape[0]
    K = gamma.shape[1]
    ends_before = np.zeros_like(gamma)
    starts_by = np.zeros_like(gamma)
    occ = np.zeros((B, K))
    first = np.zeros((B, K))
    n_seg = np.zeros((B, K))
    F = X.shape[1]
    mean_obs = np.full((B, K, F), np.nan)
    obs = ~np.isnan(X)
    x0 = np.where(obs, X, 0.0)
    for b in range(B):
        o, T = int(offsets[b]), int(lengths[b])
        if T == 0:
            continue
        g = gamma[o:o + T]
        ends_before[o:o + T] = np.cumsum(np.r_[np.zeros((1, K)), ends[o:o + T - 1]], axis=0)
        starts_by[o:o + T] = np.cumsum(starts[o:o + T], axis=0)
        occ[b] = g.sum(0)
        first[b] = g[0]
        n_seg[b] = starts[o:o + T].sum(0)
        num = g.T @ x0[o:o + T]
        den = g.T @ obs[o:o + T].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_obs[b] = np.where(den > 0, num / den, np.nan)
    ell = np.arange(1, durations.shape[1] + 1, dtype=np.float64)
    cnt = durations.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_dur = np.where(cnt > 0, np.einsum("blk,l->bk", durations, ell) / cnt, np.nan)
    out = {"ends_before": ends_before, "starts_by": starts_by, "occupancy": occ, "mean_observation": mean_obs,
           "first_state": first, "n_segments": n_seg, "mean_duration": mean_dur}
    if isinstance(emission, Categorical):
        V = emission.probs.shape[1]
        sc = np.zeros((B, K, V))
        for b in range(B):
            o, T = int(offsets[b]), int(lengths[b])
            x = X[o:o + T, 0]
            ok = ~np.isnan(x)
            for v in range(V):
                sc[b, :, v] = gamma[o:o + T][ok & (x == v)].sum(0)
        out["symbol_counts"] = sc
    return out


def expected_counts(sm, X, lengths, offsets, emission, log_pmf=None, censoring="none"):
    r"""The expectations (a)–(g) of Yu 2010 §2.2.2, per sequence, from the SemiMarkov structure ``sm`` of
    the observations ``X`` (see :meth:`HiddenSemiMarkovModel.expected_counts
    <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel.expected_counts>` for the keys). ``log_pmf``
    (D, K) and ``censoring`` decide whether a censored first / last segment commenced / terminated in the
    window (expectation (f))."""
    gamma, xi = sm.marginals()
    starts = np.zeros_like(gamma)  # j starts at t: after a transition at t - 1, or the first segment
    starts[1:] = xi.sum(axis=1)[:-1]
    first_rows = offsets[:-1][lengths > 0]
    starts[first_rows] = gamma[first_rows]
    dm = sm.duration_marginals()
    out = state_expectations(gamma, starts, xi.sum(axis=2), X, lengths, offsets, emission,
                             dm.middle + dm.first + dm.last + dm.single)
    n_seg = out.pop("n_segments")
    n_starts, n_ends = n_seg.copy(), n_seg.copy()
    if censoring != "none":
        fs, ss, le, se = _censored_fractions(log_pmf, censoring, dm.middle.shape[1])
        n_starts -= ((1 - fs) * dm.first + (1 - ss) * dm.single).sum(axis=1)
        n_ends -= ((1 - le) * dm.last + (1 - se) * dm.single).sum(axis=1)
    out.update(n_starts=n_starts, n_ends=n_ends)
    return out
