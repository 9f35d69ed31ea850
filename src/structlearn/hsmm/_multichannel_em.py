r"""The E-step of one shard of the coupled multi-channel HSMM: the per-shard function of
:mod:`structlearn.learning.shards` for :class:`structlearn.hsmm.multichannel.MultiChannelHSMM`.

One shard (a block of whole sequences) is scored by the exact product chain or the factored
approximation of :class:`structlearn.hsmm._multichannel_potentials.MultiChannelPotentials`; its expected counts
(per channel the first states, the completed duration counts and the mixed-memory responsibility counts
n^{(c,k)} of Saul & Jordan 1999, §3) are sums over its sequences, so the counts of several shards add up
to those of one shard of all their sequences, and the M-step
(:func:`structlearn.hsmm._multichannel_potentials.m_step`) runs once on the total. The emissions are
re-estimated from the rows and the per-channel posteriors γ_c (``fit``, everything in one process) or from
the families' additive sufficient statistics (:func:`structlearn.learning.stepwise.emission_statistics`;
distributed fits and ``partial_fit``).

Layout of the statistics (nested dicts with string keys, so :func:`~structlearn.learning.shards.
reduce_statistics` adds them): ``stats[str(c)]`` holds channel c's ``"start"`` (M_c,), ``"counts"``
(D_c, M_c), ``"left"`` (M_c,), ``"coupling"`` ({str(k): (M_k, M_c)}) and, when asked, ``"emission"``
(the family's statistics); :func:`channel_statistics` turns them back into the list of C dicts that
``m_step`` reads.

With ``inference="factored"`` each shard sweeps its channels until *its own* posteriors stop changing
(max |Δγ| < ``sweep_tol`` over its rows), so a sharded E-step agrees with the one-shard E-step to within
the sweep tolerance, not to rounding (the exact inference agrees to rounding).
"""
import numpy as np

from ..learning.shards import ShardStatistics

__all__ = ["infer", "statistics", "channel_statistics", "check_possible", "channel_masks", "label_masks"]


def check_possible(log_z, lengths, offsets):
    """``ValueError`` naming the first sequence (index and rows within its shard) whose log-likelihood
    ``log_z`` (B,) is -inf."""
    bad = np.flatnonzero(log_z == -np.inf)
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"sequence {b} (rows {offsets[b]}:{offsets[b + 1]}, length {lengths[b]}) has zero "
                         f"likelihood under the current parameters (no joint segmentation of the channels "
                         f"with non-zero probability)")


def label_masks(labels, n_rows, n_states):
    """Validated partial labels of the channels and the mask of the states they allow.

    Parameters
    ----------
    labels : array-like of int, shape (N, C), or None
        Known state of every row and channel, -1 where unknown (a 1-d array is accepted for C = 1).
    n_rows : int
    n_states : sequence of C int
        M_c.

    Returns
    -------
    labels : ndarray of int64, shape (N, C), or None
    allowed : ndarray of bool, shape (N, Σ_c M_c), or None
        The channels' masks side by side (channel c in the columns Σ_{k<c} M_k ... + M_c): every state
        where the label is unknown, only the label where it is known.

    Raises
    ------
    ValueError
        Wrong shape or dtype, or a value outside [-1, M_c) (naming the channel).
    """
    if labels is None:
        return None, None
    C = len(n_states)
    lab = np.asarray(labels)
    if lab.ndim == 1 and C == 1:
        lab = lab[:, None]
    if lab.shape != (n_rows, C) or not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(f"`labels` must be an int array of shape (N, C) = ({n_rows}, {C}) (-1 = unknown); "
                         f"got shape {lab.shape}, dtype {lab.dtype}")
    masks = []
    for c, M in enumerate(n_states):
        col = lab[:, c]
        bad = (col < -1) | (col >= M)
        if np.any(bad):
            raise ValueError(f"`labels[:, {c}]` must hold states in [0, {M}) or -1; got values "
                             f"{np.unique(col[bad])[:5].tolist()}")
        mask = np.ones((n_rows, M), dtype=bool)
        known = col >= 0
        mask[known] = False
        mask[np.flatnonzero(known), col[known]] = True
        masks.append(mask)
    return lab.astype(np.int64), np.concatenate(masks, axis=1)


def channel_masks(allowed, n_states):
    """The per-channel (N, M_c) views of a mask of :func:`label_masks` (None -> None)."""
    if allowed is None:
        return None
    return np.split(allowed, np.cumsum(n_states)[:-1], axis=1)


def infer(pot, inference, X, lengths, offsets, masks=None, max_sweeps=100, sweep_tol=1e-8, counts=False):
    """One inference of ``pot`` (:class:`~structlearn.hsmm._multichannel_potentials.MultiChannelPotentials`) on
    validated rows, a dict: ``"pot"``, ``"log_z"`` (B,) (log space); exact: ``"chain"`` (SparseChain),
    ``"layout"``; factored: ``"factored"`` (:data:`~structlearn.hsmm._multichannel_potentials.Factored`),
    ``"gammas"``; with ``counts`` also ``"gammas"`` (list of C (N, M_c)) and ``"stats"`` (the list of C
    dicts of expected counts). ``masks``: per-channel (N, M_c) bool or None. Cost: see :func:`statistics`."""
    if inference == "exact":
        lay = pot.layout()
        chain = pot.product_chain(X, lengths, masks, lay)
        out = {"pot": pot, "chain": chain, "layout": lay, "log_z": chain.log_partition()}
        if counts:
            out["gammas"], out["stats"] = pot.product_statistics(chain, lay, lengths, offsets)
        return out
    fac = pot.factored(X, lengths, masks, max_sweeps, sweep_tol)
    out = {"pot": pot, "factored": fac, "log_z": fac.log_likelihood, "gammas": fac.gammas}
    if counts:
        out["stats"] = pot.factored_statistics(fac, lengths, offsets)
    return out


def statistics(params, shard):
    """The E-step of one shard (the per-shard function of :mod:`structlearn.learning.shards`).

    Parameters
    ----------
    params : tuple (potentials, inference, max_sweeps, sweep_tol, emission, posteriors)
        ``potentials``: the current :class:`~structlearn.hsmm._multichannel_potentials.MultiChannelPotentials`;
        ``inference``: ``"exact"`` or ``"factored"`` (with ``max_sweeps``, ``sweep_tol``); ``emission``
        (bool): the emissions are re-estimated; ``posteriors`` (bool): return the per-channel γ for the
        emission M-step in this process (``fit``), else — when ``emission`` — every observed channel's
        additive emission statistics (distributed fits, ``partial_fit``).
    shard : Shard
        Validated rows X (N, F), lengths, offsets, and ``allowed`` (N, Σ_c M_c) bool or None (the partial
        labels of :func:`label_masks`).

    Returns
    -------
    ShardStatistics
        ``stats`` (module docstring), summed over the shard's sequences; ``value``: its log-likelihood
        (log space; ``"factored"``: the approximation Σ_c log Z_c); ``posteriors``: ``{str(c): γ_c (N,
        M_c)}`` when asked.

    Raises
    ------
    ValueError
        A sequence of the shard with zero likelihood; an emission family without additive sufficient
        statistics (Gaussian, MultivariateGaussian, Poisson, Categorical have them) when ``emission`` is
        True and ``posteriors`` False.

    Notes
    -----
    Time and memory those of one inference of the shard (see
    :mod:`structlearn.hsmm._multichannel_potentials`): exact O(N·E) time, O(N·S + E) memory; factored
    O(sweeps·N·Σ_c (D_c M_c + M_c² + M_c Σ_k M_k²)) time, O(N·Σ_c M_c²) memory.
    """
    pot, inference, max_sweeps, sweep_tol, emission, posteriors = params
    X, lengths, offsets, allowed = shard
    res = infer(pot, inference, X, lengths, offsets, channel_masks(allowed, pot.n_states), max_sweeps,
                sweep_tol, counts=True)
    log_z, gammas, stats = res["log_z"], res["gammas"], res["stats"]
    check_possible(log_z, lengths, offsets)
    out = {}
    for c, st in enumerate(stats):
        d = {"start": st["start"], "counts": st["counts"], "left": st["left"],
             "coupling": {str(k): n for k, n in enumerate(st["coupling"])}}
        if emission and not posteriors and pot.emissions[c] is not None:
            from ..learning.stepwise import emission_statistics
            d["emission"] = emission_statistics(pot.emissions[c], X[:, pot.channels[c]], gammas[c])
        out[str(c)] = d
    post = {str(c): g for c, g in enumerate(gammas)} if posteriors else None
    return ShardStatistics(out, float(log_z.sum()), int(lengths.shape[0]), post)


def channel_statistics(stats, n_channels):
    """The list of C dicts (``"coupling"`` a list over k) that
    :func:`~structlearn.hsmm._multichannel_potentials.m_step` reads, from the nested dicts of
    :func:`statistics` (summed or averaged)."""
    out = []
    for c in range(n_channels):
        st = dict(stats[str(c)])
        st["coupling"] = [st["coupling"][str(k)] for k in range(n_channels)]
        out.append(st)
    return out
