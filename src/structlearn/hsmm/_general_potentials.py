r"""The general hidden semi-Markov model (Yu 2010 §2.1) and its special cases as semi-Markov potentials.

Model (Yu 2010, "Hidden semi-Markov models", Artificial Intelligence 174, §2.1): states j = 1..M, durations
d = 1..D; a segment is a pair (j, d). The parameters are the joint initial distribution π_(j,d), the
transitions a_(i,d')(j,d) = P(S_[t+1:t+d] = j | S_[t-d'+1:t] = i) with zero self-transitions
(Σ_{j≠i, d} a_(i,d')(j,d) = 1), and emissions: per-state b_j(o_t) (conditionally independent, their product
over a segment) or segment emissions b_(j,d)(o_{t+1:t+d}).

**Adapter.** Every model of the family is read by one structure over the M·D *super-labels*
k = j·D + (d - 1), label k a segment of exactly duration d:
:class:`~structlearn.engine.structures.semimarkov_super.SuperLabelSemiMarkov` (per-state emissions), or with
segment emissions the generic :class:`~structlearn.engine.structures.SemiMarkov` (duration table 0 at d, -inf
elsewhere). The two-stage recursion is exactly Yu's forward (4) and backward (5): α[t, k] = α_t(j, d),
α*[t+1, k] = Σ_{(i,d')} α_t(i, d') a_(i,d')(j,d), the transition marginals are ξ_t(i, d'; j, d)
(eq. (7)), the token marginals summed over d are γ_t(j) (eq. (8)). Its cost is set by the transition
(:func:`factor_transitions`): a general a_(i,d')(j,d) is a dense (M·D)² stage, O(T·(M·D)²) time (Yu's
O(M²D²T)); the residential-time and variable-transition forms (and the explicit-duration one) factor
through the M states, O(T·M²·D) time (Yu 2010 §3.2–3.3); memory O(T·M²) for the expected counts
(O(T·M·D) for posteriors per label).

**Special cases** (§2.1, §3) are maps from their own parameters to (log π_(j,d), log a_(i,d')(j,d)):
:func:`explicit_duration` (a_ij p_j(d), §3.1), :func:`variable_transition` (§3.2: duration-dependent
self-transitions a_jj(τ), so p_j(d) = Π_{τ<d} a_jj(τ) (1 - a_jj(d)) and the next state depends on the
time spent), :func:`residential_time` (§3.3: a_i(j, d), the next state's duration depends on the state
left). Their M-steps are projections of the general expected counts (:func:`segment_counts`), exact for
each parameterisation.

**Boundary conditions** (§2.2.1, ``censoring``): "none" — the first segment starts at o_1 and the last ends
at o_T; "right" — the last segment may end after o_T (its label (j, d) has d >= its observed length);
"both" — in addition the first segment may have begun before o_1: π_(j,d) is then the law of the state in
progress at t = 1 and its *remaining* duration d (for the explicit-duration special case the residual-life
law of p_j, :mod:`structlearn.distributions.durations.censoring`).
"""
import numpy as np

from ..engine.structures.semimarkov import SemiMarkov
from ..engine.structures.semimarkov_super import SuperLabelSemiMarkov, super_label_tables
from ..distributions.durations.censoring import duration_tables

__all__ = ["GeneralHSMMPotentials", "super_duration_tables", "factor_transitions", "explicit_duration",
           "variable_transition", "residential_time", "vt_durations", "segment_counts", "ExpectedCounts",
           "normalise_rows"]


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


def super_duration_tables(M, D, Dc, censoring):
    """(middle, first, last, single) log duration tables (Dc, M·D) of the super-labels on the generic
    semi-Markov structure (:func:`structlearn.engine.structures.semimarkov_super.super_label_tables`): label
    k = j·D + d - 1 takes exactly duration d; with ``censoring`` "right" or "both" a last (or only)
    segment of observed length l may carry any label with d >= l."""
    return super_label_tables(M, D, Dc, censoring != "none")


def factor_transitions(log_trans):
    """The cheapest exact form of a super-label transition matrix (M, D, M, D) (self-transition blocks
    already at -inf).

    Returns
    -------
    dict
        ``{"kind": "residential", "enter": (M, K)}`` when a_(i,d')(j,d) does not depend on d' (Yu 2010
        §3.3, and the explicit-duration model §3.1): transition[k, k'] = enter[i, k'];
        ``{"kind": "variable", "leave": (K, M), "enter": (K,)}`` when log a_(i,d')(j,d) = q[(i,d'), j] +
        v[(j,d)] up to 1e-12 relative (§3.2: a_ij(d') / (1 - a_ii(d')) · p_j(d)); else
        ``{"kind": "general", "transition": (K, K)}``. The factored kinds are what
        :class:`~structlearn.engine.structures.semimarkov_super.SuperLabelSemiMarkov` runs in O(T·M²·D).
    """
    la = np.asarray(log_trans, dtype=np.float64)
    M, D = la.shape[0], la.shape[1]
    K = M * D
    if np.array_equal(la, np.broadcast_to(la[:, :1], la.shape)):
        return {"kind": "residential", "enter": np.ascontiguousarray(la[:, 0].reshape(M, K))}
    fin = np.isfinite(la)
    with np.errstate(invalid="ignore"):
        v = np.where(fin, la, -np.inf).max(axis=(0, 1))  # (M, D): [j, d]
        q = np.where(fin, la - v[None, None], -np.inf).max(axis=3)  # (M, D, M): [i, d', j]
        rebuilt = q[:, :, :, None] + v[None, None]
        err = np.abs(np.where(fin, la - rebuilt, 0.0))
    if np.array_equal(fin, np.isfinite(rebuilt)) and np.all(
            err <= 1e-12 * (1.0 + np.abs(np.where(fin, la, 0.0)))):
        return {"kind": "variable", "leave": np.ascontiguousarray(q.reshape(K, M)),
                "enter": np.ascontiguousarray(v.reshape(K))}
    return {"kind": "general", "transition": la.reshape(K, K)}


class GeneralHSMMPotentials:
    """Potentials of general-HSMM parameters on a packed batch of observations.

    Parameters
    ----------
    log_start : ndarray of float64, shape (M, D)
        log π_(j,d) (log space).
    log_trans : ndarray of float64, shape (M, D, M, D)
        log a_(i,d')(j,d), axes (previous state, its duration, next state, its duration); the blocks
        i == j are ignored (set to -inf: no self-transitions).
    emission : emission object (:mod:`structlearn.distributions.emissions`) or None
        Per-state emissions b_j(o_t) with its parameters set; None with ``segment_emission``.
    censoring : {"none", "right", "both"}
    segment_emission : callable or None
        ``segment_emission(X_seq) -> (T, D, M)`` float64, ``[e, d-1, j]`` = log b_(j,d)(o_{e-d+1:e}) of one
        sequence (entries with d > e+1 are ignored); replaces the per-state emissions.
    """

    def __init__(self, log_start, log_trans, emission, censoring, segment_emission=None):
        self.log_start = np.asarray(log_start, dtype=np.float64)
        self.log_trans = np.asarray(log_trans, dtype=np.float64)
        self.emission = emission
        self.censoring = censoring
        self.segment_emission = segment_emission

    @property
    def n_states(self):
        return self.log_start.shape[0]

    @property
    def max_duration(self):
        return self.log_start.shape[1]

    def transition_matrix(self):
        """log a as the (M·D, M·D) super-label transition matrix, self-transition blocks at -inf."""
        M, D = self.log_start.shape
        t = self.log_trans.copy()
        for j in range(M):
            t[j, :, j, :] = -np.inf
        return t.reshape(M * D, M * D)

    def segment_potentials(self, X, lengths, offsets, Dc):
        """(N, Dc, M·D) segment log-potentials of ``segment_emission`` (label (j, d) at its own d)."""
        M, D = self.log_start.shape
        N = X.shape[0]
        seg = np.zeros((N, Dc, M * D))
        cols = np.arange(M) * D
        for b in range(lengths.shape[0]):
            o, T = int(offsets[b]), int(lengths[b])
            if T == 0:
                continue
            v = np.asarray(self.segment_emission(X[o:o + T]), dtype=np.float64)
            if v.shape != (T, D, M):
                raise ValueError(f"`segment_emission` must return shape (T, D, M) = ({T}, {D}, {M}) for "
                                 f"a sequence of length {T}; got {v.shape}")
            for d in range(1, Dc + 1):
                seg[o:o + T, d - 1, cols + d - 1] = v[:, d - 1, :]
        return seg

    def factors(self):
        """The transition in its cheapest exact form (:func:`factor_transitions`), computed once."""
        if getattr(self, "_factors", None) is None:
            M, D = self.log_start.shape
            self._factors = factor_transitions(self.transition_matrix().reshape(M, D, M, D))
        return self._factors

    def semi_markov(self, X, lengths, offsets):
        """The structure over the super-labels (X validated): a
        :class:`~structlearn.engine.structures.semimarkov_super.SuperLabelSemiMarkov` with the transition of
        :meth:`factors` (time O(N·M²·D) per pass for the residential-time and variable-transition forms,
        O(N·(M·D)²) for the general one), or with ``segment_emission`` the generic
        :class:`~structlearn.engine.structures.SemiMarkov` (segment potentials, O(N·(M·D)²)). Time to build
        O(N·M) (O(N·M·D²) with segment emissions)."""
        M, D = self.log_start.shape
        if self.segment_emission is not None:
            Dc = max(1, min(D, int(lengths.max()) if lengths.size else 1))
            middle, first, last, single = super_duration_tables(M, D, Dc, self.censoring)
            return SemiMarkov(np.zeros((X.shape[0], M * D)), middle, self.transition_matrix(),
                              lengths=lengths, start=self.log_start.ravel(), end=np.zeros(M * D),
                              segment=self.segment_potentials(X, lengths, offsets, Dc),
                              allow_same_label=True, first_duration=first, last_duration=last,
                              single_duration=single)
        f = self.factors()
        trans = {k: v for k, v in f.items() if k != "kind"}
        return SuperLabelSemiMarkov(self.emission.log_density(X), D, lengths=lengths,
                                    start=self.log_start.ravel(), open_end=self.censoring != "none",
                                    **trans)

    def sample(self, n_samples, rng):
        """One sequence of the generative process: (states (n,), segments (S, 3) [start, end, state],
        segment durations (S,) — the full duration d of each, which may exceed what is observed)."""
        M, D = self.log_start.shape
        pi = np.exp(self.log_start).ravel()
        A = np.exp(self.transition_matrix())
        k = int(rng.choice(M * D, p=pi / pi.sum()))
        segs, durs, t = [], [], 0
        while True:
            j, d = divmod(k, D)
            d += 1
            segs.append((t, min(t + d, n_samples) - 1, j))
            durs.append(d)
            t += d
            if t >= n_samples:
                break
            row = A[k]
            if row.sum() <= 0:
                raise ValueError(f"state {j} with duration {d} has no transition: its samples end after "
                                 f"{t} observations; ask for at most {t}")
            k = int(rng.choice(M * D, p=row / row.sum()))
        segments = np.array(segs, dtype=np.int64)
        states = np.repeat(segments[:, 2], segments[:, 1] - segments[:, 0] + 1)
        return states, segments, np.array(durs, dtype=np.int64)


# ------------------------------------------------------------------------------------------------------
# special cases: their parameters -> (log π_(j,d), log a_(i,d')(j,d))
# ------------------------------------------------------------------------------------------------------
def _first_law(log_pmf, censoring):
    """(D, M) log law of the first segment's (remaining) duration: p_j(d), or under "both" the residual
    life law r_j(d) = S_j(d) / μ_j (:func:`structlearn.distributions.durations.censoring.duration_tables`)."""
    return duration_tables(log_pmf, censoring)["first"] if censoring == "both" else log_pmf


def explicit_duration(startprob, transmat, log_pmf, censoring):
    """Explicit-duration HMM (Yu 2010 §3.1): π_(j,d) = π_j p_j(d) (residual law under "both"),
    a_(i,d')(j,d) = a_ij p_j(d). ``log_pmf`` (D, M). Returns (log_start (M, D), log_trans (M, D, M, D))."""
    D, M = log_pmf.shape
    ls = _log(startprob)[:, None] + _first_law(log_pmf, censoring).T
    la = _log(transmat)[:, None, :, None] + log_pmf.T[None, None, :, :]
    return ls, np.broadcast_to(la, (M, D, M, D)).copy()


def vt_durations(self_trans):
    """p_j(d) = Π_{τ<d} a_jj(τ) · (1 - a_jj(d)) as a (D, M) log-pmf, from ``self_trans`` (D, M) = a_jj(τ)
    (the last row is treated as 0: every segment ends by D)."""
    a = np.asarray(self_trans, dtype=np.float64).copy()
    a[-1] = 0.0
    with np.errstate(divide="ignore"):
        stay = np.vstack([np.zeros((1, a.shape[1])), np.cumsum(np.log(a[:-1]), axis=0)])
        return stay + np.log1p(-a)


def variable_transition(startprob, transmat, censoring):
    """Variable-transition HMM (Yu 2010 §2.1 and §3.2): ``transmat`` (D, M, M), row (τ, i) = P(next state |
    state i has stayed τ), diagonal = the self-transition a_ii(τ) (a_ii(D) is taken as 0). Then
    a_(i,d')(j,d) = a_ij(d') / (1 - a_ii(d')) · p_j(d) with p_j from :func:`vt_durations`, and
    π_(j,d) = π_j p_j(d). Returns (log_start (M, D), log_trans (M, D, M, D))."""
    tm = np.asarray(transmat, dtype=np.float64)
    D, M, _ = tm.shape
    diag = tm[:, np.arange(M), np.arange(M)].copy()  # (D, M)
    diag[-1] = 0.0
    log_pmf = vt_durations(diag)
    leave = 1.0 - diag
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(leave[:, :, None] > 0, tm / np.where(leave > 0, leave, 1.0)[:, :, None], 0.0)
    q[:, np.arange(M), np.arange(M)] = 0.0
    la = _log(q).transpose(1, 0, 2)[:, :, :, None] + log_pmf.T[None, None, :, :]  # (i, d', j, d)
    ls = _log(startprob)[:, None] + _first_law(log_pmf, censoring).T
    return ls, la


def residential_time(startprob, transmat):
    """Residential-time HMM (Yu 2010 §2.1 eq. (3) and §3.3): ``transmat`` (M, M, D) = a_i(j, d) (state i
    ended, j follows with duration d), ``startprob`` (M, D) = π_(j,d). a_(i,d')(j,d) = a_i(j,d) for every
    d'. Returns (log_start (M, D), log_trans (M, D, M, D))."""
    tm = np.asarray(transmat, dtype=np.float64)
    M, _, D = tm.shape
    la = np.broadcast_to(_log(tm)[:, None, :, :], (M, D, M, D)).copy()
    return _log(startprob), la


# ------------------------------------------------------------------------------------------------------
# expected counts of the general model (the E-step statistics every special case projects)
# ------------------------------------------------------------------------------------------------------
class ExpectedCounts(dict):
    """The expected counts of a super-label posterior, computed as they are read (a dict whose missing
    keys are filled on first access).

    Keys: ``first`` (M, D) Σ_sequences P(the first segment is (j, d)); ``segments`` (M, D) expected number
    of (j, d)-segments (first ones included; a censored last segment counts with its full d); ``gamma``
    (N, M) γ_t(j) (Yu 2010 eq. (8)); ``trans`` (M, D, M, D) Σ_t ξ_t(i, d'; j, d) (eq. (7), summed);
    ``enter`` (M, M, D) = trans summed over d' (the residential-time statistics, §3.3); ``leave``
    (M, D, M) = trans summed over d (the variable-transition destinations, §3.2). Construction runs the
    posterior with the transition counts that are cheap for the structure (``enter`` / ``leave`` of a
    factored transition, time O(N·M²·D); ``trans`` of a dense one, O(N·(M·D)²)); reading another
    transition key costs one more backward pass (``trans`` of a factored structure: O(N·(M·D)²)).
    """

    KEYS = ("first", "segments", "gamma", "trans", "enter", "leave")

    def __init__(self, sm, M, D, offsets, lengths):
        super().__init__()
        self._sm, self._M, self._D = sm, M, D
        self._offsets, self._lengths = offsets, lengths
        if isinstance(sm, SuperLabelSemiMarkov):
            dense = sm.dense_transition is not None
            natural = {"enter": not dense and sm.enter is not None and sm.enter.ndim == 2,
                       "leave": not dense and sm.leave is not None, "trans": dense}
        else:
            natural = {"trans": True}
        self._compute({k for k, v in natural.items() if v})

    def _compute(self, which):
        M, D, sm = self._M, self._D, self._sm
        if isinstance(sm, SuperLabelSemiMarkov):
            c = sm.posterior_counts(enter="enter" in which, leave="leave" in which, dense="trans" in which)
        else:
            token, edge = sm.marginals(edge="total")
            first = token[self._offsets[:-1][self._lengths > 0]].sum(axis=0)
            c = {"first": first, "segments": first + edge.sum(axis=0), "dense": edge,
                 "gamma": token.reshape(-1, M, D).sum(axis=2)}
        self.setdefault("first", c["first"].reshape(M, D))
        self.setdefault("segments", c["segments"].reshape(M, D))
        self.setdefault("gamma", c["gamma"])
        if c.get("dense") is not None:
            trans = c["dense"].reshape(M, D, M, D)
            self["trans"] = trans
            self.setdefault("enter", trans.sum(axis=1))
            self.setdefault("leave", trans.sum(axis=3))
        if "enter" in c:
            self.setdefault("enter", c["enter"].reshape(M, M, D))
        if "leave" in c:
            self.setdefault("leave", c["leave"].reshape(M, D, M))

    def __missing__(self, key):
        if key not in self.KEYS:
            raise KeyError(key)
        self._compute({key})
        return self[key]


def segment_counts(sm, M, D, offsets, lengths, lazy=False):
    """Expected counts of a super-label structure ``sm``
    (:class:`~structlearn.engine.structures.semimarkov_super.SuperLabelSemiMarkov` or the generic
    :class:`~structlearn.engine.structures.SemiMarkov` over the same labels).

    Returns
    -------
    dict of float64 arrays
        ``first`` (M, D), ``segments`` (M, D), ``gamma`` (N, M), ``trans`` (M, D, M, D), ``enter``
        (M, M, D), ``leave`` (M, D, M) (see :class:`ExpectedCounts`); with ``lazy`` the
        :class:`ExpectedCounts` itself, whose transition keys are computed when read.
    """
    counts = ExpectedCounts(sm, M, D, offsets, lengths)
    if lazy:
        return counts
    return {k: counts[k] for k in ExpectedCounts.KEYS}


def normalise_rows(counts, old, axes):
    """counts normalised to sum to one over ``axes``; where a row has no mass, ``old`` is kept."""
    tot = counts.sum(axis=axes, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        new = counts / tot
    return np.where(tot > 0, new, old)
