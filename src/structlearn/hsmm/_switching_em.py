"""The per-shard E-step of the switching HSMM (Duong et al. 2005; Yu 2010 §4): the explicit-duration HSMM's
:func:`structlearn.hsmm._em.shard_statistics` on the product states (regime, state), with the two
things the product adds.

* Partial labels name states m, not product states (r, m): a shard carries the (N, M) mask of
  :func:`~structlearn.learning.restarts.label_mask` and it is tiled here to the (N, R·M) mask of the
  product (k = r·M + m allowed iff m is), so that what travels (and what
  :func:`structlearn.distributed.fit` reads back as the known states of its initialisation data) is the
  per-state mask.
* Tied emissions (:class:`~structlearn.hsmm._switching_potentials.TiedEmission`) have M states seen as R·M:
  without posteriors (distributed fits) the additive emission statistics are those of the inner M-state
  family on γ summed over regimes (:func:`structlearn.learning.stepwise.emission_statistics`), so the
  M-step from statistics (:func:`~structlearn.learning.stepwise.emission_m_step` on the inner family)
  is the one ``TiedEmission.fit`` does from rows, up to rounding.

The estimator is :class:`structlearn.hsmm.switching.SwitchingHSMM`.
"""
import numpy as np

from ._switching_potentials import TiedEmission
from . import _em
from ..learning.shards import Shard, ShardStatistics

__all__ = ["shard_statistics", "product_mask"]


def product_mask(allowed, n_regimes):
    """The (N, R·M) bool mask of the product states (k = r·M + m allowed iff ``allowed[t, m]``) of an
    (N, M) mask of states, or None for None. Time and memory O(N·R·M)."""
    return None if allowed is None else np.tile(allowed, (1, int(n_regimes)))


def shard_statistics(params, shard):
    """The E-step of one shard of a switching HSMM (module-level, picklable: the per-shard function of
    :mod:`structlearn.learning.shards`).

    Parameters
    ----------
    params : tuple (potentials, letters, posteriors, n_regimes)
        ``potentials``: the product-state :class:`~structlearn.hsmm._potentials.HSMMPotentials`
        (:func:`structlearn.hsmm._switching_potentials.product_potentials`); ``letters``: the statistics to
        compute (``s``, ``t``, ``d``, ``e`` as in :func:`structlearn.hsmm._em.shard_statistics`);
        ``posteriors`` (bool): return γ (N, R·M) for the emission M-step in this process (``fit``), else
        the emission family's additive sufficient statistics; ``n_regimes``: R.
    shard : Shard
        Validated rows X (N, F) float64, lengths, offsets and the optional (N, M) bool mask of partial
        labels (states m; tiled over the regimes here).

    Returns
    -------
    ShardStatistics
        As :func:`structlearn.hsmm._em.shard_statistics` (keys ``start`` (K,), ``trans`` (K, K),
        ``counts`` (D, K) / ``left`` (K,) or ``stays`` / ``leaves`` (K,), ``occupancy`` (K,), K = R·M);
        without ``posteriors`` and with ``e``: ``"emission"``, the statistics of the emission family with
        M states (tied: γ summed over the regimes) or R·M states (untied). ``value``: log P(o | θ) of the
        shard (with labels log P(o, s ∈ labels)), log space.

    Raises
    ------
    ValueError
        A sequence of the shard with zero likelihood; an emission family without sufficient statistics
        (a Gaussian mixture) when ``posteriors`` is False and ``e`` is estimated.

    Notes
    -----
    Time O(N·(K² + D·K)), memory O(N·K): the semi-Markov forward–backward on the product states.
    """
    potentials, letters, posteriors, n_regimes = params
    X, lengths, offsets, allowed = shard
    want_emission = "e" in letters and not posteriors
    out = _em.shard_statistics((potentials, letters, bool(posteriors) or want_emission),
                               Shard(X, lengths, offsets, product_mask(allowed, n_regimes)))
    if not want_emission:
        return out
    from ..learning.stepwise import emission_statistics

    gamma = out.posteriors
    emission = potentials.emission
    if isinstance(emission, TiedEmission):
        emission, gamma = emission.inner, gamma.reshape(gamma.shape[0], emission.n_regimes, -1).sum(axis=1)
    stats = dict(out.stats)
    stats["emission"] = emission_statistics(emission, X, gamma)
    return ShardStatistics(stats, out.value, out.n_sequences, None)
