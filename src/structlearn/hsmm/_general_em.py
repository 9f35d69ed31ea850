"""EM for the general HSMM and its variable-transition and residential-time special cases (Yu 2010 §2.3.1).

One E-step for all three (:func:`e_step`: the exact forward–backward of the super-label structure of
:class:`structlearn.hsmm._general_potentials.GeneralHSMMPotentials` and its expected counts,
:func:`structlearn.hsmm._general_potentials.segment_counts`), and one M-step per parameterisation, each the exact
maximiser of the expected complete-data log-likelihood of its own parameters, so the likelihood never
decreases. The loop is :func:`structlearn.learning.em.run_em`.
"""
import numpy as np

from ._general_potentials import normalise_rows, segment_counts
from ._em import check_possible
from ..learning.shards import ShardStatistics

__all__ = ["e_step", "m_step_general", "m_step_residential", "m_step_variable", "initial_pmf",
           "shard_statistics"]


def e_step(potentials, X, lengths, offsets, allowed=None):
    """(counts, total log-likelihood) of the current parameters; ``ValueError`` naming the first
    sequence with zero likelihood. ``allowed`` (N, M) bool, optional: the states each row may take
    (labels; the log-likelihood is then log P(o, s ∈ allowed)).

    ``counts`` is a :class:`~structlearn.hsmm._general_potentials.ExpectedCounts` mapping: the statistics the
    structure's transition makes cheap are computed here (``enter`` for the residential-time form,
    ``leave`` for the variable-transition form, ``trans`` for the general one: time O(N·M²·D) or
    O(N·(M·D)²)), any other when an M-step reads it."""
    sm = potentials.semi_markov(X, lengths, offsets)
    M, D = potentials.log_start.shape
    if allowed is not None:
        sm = sm.constrain(np.repeat(allowed, D, axis=1))
    check_possible(sm.log_partition(), lengths, offsets, potentials.max_duration, potentials.censoring)
    counts = segment_counts(sm, M, D, offsets, lengths, lazy=True)
    # after the posterior: the value its consistency check confirmed (or recomputed exactly)
    return counts, float(sm.log_partition().sum())


def _start(counts, old):
    f = counts["first"]
    return f / f.sum() if f.sum() > 0 else old


def m_step_general(counts, startprob, transmat):
    """Yu 2010 §2.3.1 items 1–2: π_(j,d) ∝ E[first segment is (j, d)], a_(i,d')(j,d) ∝ E[Σ_t ξ_t(i,d'; j,d)]
    (rows without mass keep their values). Shapes (M, D) and (M, D, M, D)."""
    return _start(counts, startprob), normalise_rows(counts["trans"], transmat, (2, 3))


def m_step_residential(counts, startprob, transmat):
    """Residential time (§3.3): π_(j,d) as the general model, a_i(j,d) ∝ Σ_{d'} E[ξ_t(i,d'; j,d)]
    (M, M, D) (``counts["enter"]``)."""
    return _start(counts, startprob), normalise_rows(counts["enter"], transmat, (1, 2))


def m_step_variable(counts, startprob, transmat):
    """Variable transition (§3.2), ``transmat`` (D, M, M): with n_j(d) the expected number of j-segments of
    duration d, the hazard h_j(τ) = n_j(τ) / Σ_{d>=τ} n_j(d) gives a_jj(τ) = 1 - h_j(τ), and the
    destinations q_i(j | τ) ∝ Σ_d E[ξ(i,τ; j,d)] give a_ij(τ) = h_i(τ) q_i(j | τ). π_j ∝ E[first segment
    is j]."""
    n = counts["segments"]  # (M, D)
    M, D = n.shape
    surv = np.cumsum(n[:, ::-1], axis=1)[:, ::-1]
    old_diag = transmat[:, np.arange(M), np.arange(M)].T  # (M, D)
    with np.errstate(invalid="ignore", divide="ignore"):
        h = np.where(surv > 0, n / surv, 1.0 - old_diag)
    h[:, -1] = 1.0
    dest = counts["leave"]  # (i, τ, j) = Σ_d E[ξ(i,τ; j,d)]
    old_q = transmat.transpose(1, 0, 2).copy()
    old_q[np.arange(M), :, np.arange(M)] = 0.0
    q = normalise_rows(dest, normalise_rows(old_q, old_q, (2,)), (2,))
    new = (h[:, :, None] * q).transpose(1, 0, 2).copy()  # (τ, i, j)
    new[:, np.arange(M), np.arange(M)] = (1.0 - h).T
    f = counts["first"].sum(axis=1)
    sp = f / f.sum() if f.sum() > 0 else startprob
    return sp, new


def initial_pmf(means, D):
    """(D, M) initial duration pmfs: geometric with the given means (K,), truncated to 1..D."""
    d = np.arange(D)[:, None]
    p = 1.0 / np.maximum(np.asarray(means, dtype=np.float64), 1.0 + 1e-9)
    pmf = p * (1.0 - p) ** d
    return pmf / pmf.sum(axis=0, keepdims=True)


def shard_statistics(params, shard):
    """The E-step of one shard: the per-shard function of :mod:`structlearn.learning.shards`.

    Parameters
    ----------
    params : tuple (potentials, keys, emission_letters, posteriors)
        ``potentials`` the current :class:`~structlearn.hsmm._general_potentials.GeneralHSMMPotentials`;
        ``keys`` the additive counts the M-step reads (of ``first``, ``segments``, ``trans``, ``enter``,
        ``leave``: :class:`~structlearn.hsmm._general_potentials.ExpectedCounts`); ``emission_letters`` True
        when the emissions are re-estimated; ``posteriors`` (bool): return γ (N, M) — and for segment
        emissions η (N, M, D) — for the emission M-step in this process (``fit``), else the emission
        family's additive statistics ``"emission"``
        (:func:`structlearn.learning.stepwise.emission_statistics`; distributed fits).
    shard : Shard
        Validated rows, lengths, offsets and the optional (N, M) ``allowed`` mask of partial labels.

    Returns
    -------
    ShardStatistics
        ``stats``: the ``keys`` (sums over the shard's sequences) and ``"occupancy"`` (M,) Σ_t γ_t(j);
        ``value``: the shard's log-likelihood; ``posteriors``: ``{"gamma": γ}`` (and ``"eta"``) with
        ``posteriors``.

    Raises
    ------
    ValueError
        A sequence of the shard with zero likelihood; segment emissions or an emission family without
        sufficient statistics when ``posteriors`` is False and the emissions are estimated.
    """
    potentials, keys, emission, posteriors = params
    X, lengths, offsets, allowed = shard
    segmental = potentials.segment_emission is not None
    if not segmental:
        counts, ll = e_step(potentials, X, lengths, offsets, allowed)
        eta = None
    else:
        # segment emissions are re-estimated from η_t(j, d) (Yu 2010 §2.3.1 item 3): the same E-step,
        # which also returns the segment-end posteriors
        if emission and not posteriors:
            raise ValueError("segment emissions are re-estimated from the rows and their posteriors "
                             "(no additive statistics): fit them in one process")
        sm = potentials.semi_markov(X, lengths, offsets)
        M, D = potentials.log_start.shape
        if allowed is not None:
            sm = sm.constrain(np.repeat(allowed, D, axis=1))
        log_z = sm.log_partition()
        check_possible(log_z, lengths, offsets, potentials.max_duration, potentials.censoring)
        counts = segment_counts(sm, M, D, offsets, lengths)
        ll = float(log_z.sum())
        eta = None
        if emission:
            fm, bm = sm.forward(), sm.backward()
            with np.errstate(invalid="ignore"):
                eta = np.nan_to_num(np.exp(fm.alpha + bm.beta_end)).reshape(-1, M, D)
    gamma = counts["gamma"]
    stats = {k: np.asarray(counts[k], dtype=np.float64) for k in keys}
    stats["occupancy"] = gamma.sum(axis=0)
    post = None
    if posteriors:
        post = {"gamma": gamma} if eta is None else {"gamma": gamma, "eta": eta}
    elif emission:
        from ..learning.stepwise import emission_statistics
        stats["emission"] = emission_statistics(potentials.emission, X, gamma)
    return ShardStatistics(stats, ll, int(lengths.shape[0]), post)
