"""EM for the explicit-duration hidden semi-Markov model (Yu 2010, §2.3.1): initial labels, E-step and M-step.

The estimator (:class:`structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`) runs them through
:func:`structlearn.learning.em.run_em`. The E-step is the exact forward–backward of the model's
structure (:class:`structlearn.hsmm._potentials.HSMMPotentials`); the M-step is exact for π and A, and
exact or improving for the duration and emission families, so the likelihood never decreases.
"""
import numpy as np

from ..distributions.durations.censoring import complete_counts
from ..engine.structures.chain import LinearChain
from ..learning.initialisation import initial_labels
from ..learning.shards import ShardStatistics

__all__ = ["initial_labels", "mean_run_lengths", "initial_mean_durations", "e_step", "m_step",
           "expected_statistics", "m_step_from_statistics", "check_possible", "shard_statistics",
           "apply_statistics"]


def mean_run_lengths(labels, lengths, K):
    """Mean length of the runs of every label (K,) over the sequences; NaN for a label with no run."""
    tot = np.zeros(K)
    cnt = np.zeros(K)
    o = 0
    for T in lengths:
        lab = labels[o:o + T]
        o += T
        if T == 0:
            continue
        st = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        en = np.r_[st[1:], T]
        for s, e in zip(st, en):
            if lab[s] >= 0:
                tot[lab[s]] += e - s
                cnt[lab[s]] += 1
    return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def initial_mean_durations(labels, lengths, K, D, rng, jitter):
    """Initial mean durations (K,): the mean run lengths of the initial labels (a label without runs
    gets mean(lengths) / 2K), randomly scaled by up to e^±0.7 with ``jitter``, clipped to
    [1.05, max(1.05, 0.75 D)]."""
    means = mean_run_lengths(labels, lengths, K)
    fallback = max(1.0, float(np.mean(lengths)) / (2.0 * K))
    means = np.where(np.isnan(means), fallback, means)
    if jitter:
        means = means * np.exp(rng.uniform(-0.7, 0.7, K))
    return np.clip(means, 1.05, max(1.05, 0.75 * D))


def e_step(potentials, X, lengths, offsets, allowed=None):
    """(structure, total log-likelihood) of the current parameters; ``ValueError`` naming the first
    sequence with zero likelihood.

    ``allowed`` (N, K) bool, optional: the states each row may take (partial or full labels). The
    structure is then restricted to the paths they allow and the log-likelihood is the one of the
    observations *and* the labels, log P(o, s ∈ allowed); EM on it is monotone as well.
    """
    sm = potentials.structure(X, lengths, allow_chain=True)
    if allowed is not None:
        sm = sm.constrain(allowed)
    log_z = sm.log_partition()
    check_possible(log_z, lengths, offsets, potentials.max_duration, potentials.censoring)
    return sm, float(log_z.sum())


def check_possible(log_z, lengths, offsets, max_duration, censoring):
    """``ValueError`` naming the first sequence whose log-likelihood ``log_z`` (B,) is -inf."""
    bad = np.flatnonzero(log_z == -np.inf)
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"sequence {b} (rows {offsets[b]}:{offsets[b + 1]}, length {lengths[b]}) "
                         f"has zero likelihood under the current parameters (no segmentation into "
                         f"durations <= {max_duration} with non-zero probability"
                         + (", e.g. with censoring='none' its length cannot be reached"
                            if censoring == "none" else "") + ")")


def expected_statistics(potentials, sm, lengths, offsets, params):
    """The E-step's expected sufficient statistics of π, A (and the end probabilities) and the durations,
    for the letters of ``params`` (Yu 2010 §2.3.1).

    Returns
    -------
    stats : dict of float64 arrays
        ``"start"`` (K,) expected first states; ``"trans"`` (K, K) expected i → j transitions (zero
        diagonal) and ``"ends"`` (K,) expected last states when the model has end probabilities;
        durations: ``"counts"`` (D, K) and ``"left"`` (K,) completed by
        :func:`~structlearn.distributions.durations.censoring.complete_counts`, or on the chain of geometric durations
        ``"stays"`` / ``"leaves"`` (K,) (its self-transitions and exits).
    gamma : ndarray of float64, shape (N, K), or None
        γ_t(j) when it was computed (any of ``s``, ``t``, ``e``, or the chain).
    """
    chain = isinstance(sm, LinearChain)
    stats = {}
    gamma = None
    if any(c in params for c in "ste") or ("d" in params and chain):
        gamma, edge = sm.marginals(edge="total")  # (K, K) expected transition counts
        xi = edge.copy()
        np.fill_diagonal(xi, 0.0)  # on the chain the diagonal is staying in a segment
    last = offsets[1:][lengths > 0] - 1
    if "s" in params:
        stats["start"] = gamma[offsets[:-1][lengths > 0]].sum(axis=0)
    if "t" in params:
        stats["trans"] = xi
        if getattr(potentials, "endprob", None) is not None:  # censoring "none": the last segment ends at T
            stats["ends"] = gamma[last].sum(axis=0)
    if "d" in params and chain:
        leaves = xi.sum(axis=1)
        if potentials.censoring == "none":
            leaves = leaves + gamma[last].sum(axis=0)
        stats["stays"], stats["leaves"] = np.diag(edge).copy(), leaves
    elif "d" in params:
        dm = sm.duration_marginals()  # (B, D', K) per table, D' = min(D, longest sequence)
        D = potentials.max_duration
        tables = {name: np.pad(getattr(dm, name).sum(axis=0), ((0, D - dm.middle.shape[1]), (0, 0)))
                  for name in dm._fields}
        stats["counts"], stats["left"] = complete_counts(tables, potentials.duration.log_pmf(D),
                                                         potentials.censoring)
    return stats, gamma


def m_step_from_statistics(potentials, stats):
    """The M-step of π, A (end probabilities) and the durations from :func:`expected_statistics` (or their
    running averages, :mod:`structlearn.hsmm._online_statistics`).

    Returns the new (startprob, transmat); the duration object (and ``endprob``) of ``potentials`` are
    refitted in place. Parameters whose statistics are absent, and states without mass, keep their values.
    """
    startprob, transmat = potentials.startprob, potentials.transmat
    if "start" in stats and stats["start"].sum() > 0:
        startprob = stats["start"] / stats["start"].sum()
    if "trans" in stats and potentials.n_states >= 2:
        c = stats["trans"]
        tot = c.sum(axis=1)
        if "ends" in stats:  # e_i ∝ expected ends in i, a_ij ∝ expected i -> j (rows sum to 1 - e_i)
            tot = tot + stats["ends"]
            ok = tot > 0
            ep = potentials.endprob.copy()
            ep[ok] = stats["ends"][ok] / tot[ok]
            potentials.endprob = ep
        ok = tot > 0
        transmat = transmat.copy()
        transmat[ok] = c[ok] / tot[ok, None]
    duration = potentials.duration
    if "stays" in stats:
        # Baum–Welch update of the equivalent HMM's self-transitions: p = leaves / (stays + leaves); a
        # state never left (one state, an absorbing state) has the MLE p = 0: the smallest positive float
        # keeps the law proper while its chain self-transition 1 - p is 1 in float64
        tot = stats["stays"] + stats["leaves"]
        ok = tot > 0
        p = np.asarray(duration.p, dtype=np.float64).copy()
        p[ok] = np.maximum(stats["leaves"][ok] / tot[ok], np.finfo(np.float64).tiny)
        duration.p = p
    elif "counts" in stats:
        duration.fit(stats["counts"], stats["left"])
    return startprob, transmat


def m_step(potentials, X, lengths, offsets, sm, params, on_empty=None):
    """Re-estimate the parameters named by the letters of ``params`` (``s`` start, ``t`` transitions,
    ``d`` durations, ``e`` emissions) from the posterior of ``sm``.

    Returns the new (startprob, transmat); the duration and emission objects of ``potentials`` (and its
    ``endprob``, when it has end probabilities) are refitted in place. A state without posterior mass
    keeps its parameters; ``on_empty(gamma)`` (e.g. a warning naming such states) is called with the
    (N, K) state posteriors when they are computed.
    """
    stats, gamma = expected_statistics(potentials, sm, lengths, offsets, params)
    if gamma is not None and on_empty is not None:
        on_empty(gamma)
    startprob, transmat = m_step_from_statistics(potentials, stats)
    if "e" in params:
        potentials.emission.fit(X, gamma)
    return startprob, transmat


def shard_statistics(params, shard):
    """The E-step of one shard: the per-shard function of :mod:`structlearn.learning.shards`.

    Parameters
    ----------
    params : tuple (potentials, letters, posteriors)
        ``potentials`` the current :class:`~structlearn.hsmm._potentials.HSMMPotentials`; ``letters`` the
        parameters to estimate (``s``, ``t``, ``d``, ``e``); ``posteriors`` (bool): return the state
        posteriors γ for the emission M-step in this process (``fit``), else the emission family's
        additive sufficient statistics (``"emission"``,
        :func:`structlearn.learning.stepwise.emission_statistics`; distributed fits).
    shard : Shard
        Validated rows, lengths, offsets and the optional (N, K) ``allowed`` mask of partial labels.

    Returns
    -------
    ShardStatistics
        ``stats``: the keys of :func:`expected_statistics` for the letters, plus ``"occupancy"`` (K,)
        Σ_t γ_t(j) when γ was computed and ``"emission"`` (without ``posteriors``, with ``e``); all
        sums over the shard's sequences. ``value``: log P(o | θ) of the shard (log space; with labels
        log P(o, s ∈ allowed)). ``posteriors``: γ (N, K) with ``posteriors`` when computed.

    Raises
    ------
    ValueError
        A sequence of the shard with zero likelihood (numbered within the shard), or an emission family
        without sufficient statistics when ``posteriors`` is False and ``e`` is estimated.

    Time O(N·(D·K + K²)), memory O(N·K) (the semi-Markov forward–backward; O(N·K²) on the chain).
    """
    potentials, letters, posteriors = params
    X, lengths, offsets, allowed = shard
    sm, ll = e_step(potentials, X, lengths, offsets, allowed)
    stats, gamma = expected_statistics(potentials, sm, lengths, offsets, letters)
    if gamma is not None:
        stats["occupancy"] = gamma.sum(axis=0)
    if "e" in letters and not posteriors:
        from ._online_statistics import emission_statistics  # imports this module
        stats["emission"] = emission_statistics(potentials.emission, X, gamma)
    return ShardStatistics(stats, ll, int(lengths.shape[0]), gamma if posteriors else None)


def apply_statistics(potentials, total, params, X=None, on_empty=None):
    """The M-step of the summed shard statistics ``total`` (:func:`shard_statistics`): as :func:`m_step`,
    the emissions refitted from ``X`` and ``total.posteriors`` when they are present, else from
    ``total.stats["emission"]``. ``on_empty(occupancy[None])`` is called when γ was computed.

    Returns the new (startprob, transmat); the duration and emission objects (and ``endprob``) of
    ``potentials`` are refitted in place.
    """
    stats = total.stats
    if "occupancy" in stats and on_empty is not None:
        on_empty(stats["occupancy"][None, :])
    startprob, transmat = m_step_from_statistics(potentials, stats)
    if "e" in params:
        if total.posteriors is not None:
            potentials.emission.fit(X, total.posteriors)
        else:
            from ..learning.stepwise import emission_m_step
            emission_m_step(potentials.emission, stats["emission"])
    return startprob, transmat
