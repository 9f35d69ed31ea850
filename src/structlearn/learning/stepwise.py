r"""Stepwise EM's shared parts (Cappé & Moulines 2009, "On-line expectation–maximization algorithm for latent
data models", JRSS B 71(3), eq. (5); Liang & Klein 2009, "Online EM for unsupervised models", NAACL, §3):
the step size ρ_k = (k + 2)^(-κ), the running average of expected sufficient statistics
(:class:`OnlineStatistics`), and the emission families' weighted sufficient statistics and M-step from them
(univariate / diagonal / full Gaussian, Poisson, categorical: the laws' own ``statistics`` and
``m_step``), used by the HMM, HSMM and HHMM families'
online and sharded EM.
"""
from ..distributions import emissions as _emi
from ..distributions.emissions._hmm_family import HMMFamily

__all__ = ["step_size", "check_emission_supported", "has_additive_statistics", "emission_statistics",
           "emission_m_step", "OnlineStatistics"]


_SUPPORTED = "Gaussian, MultivariateGaussian ('full' or 'diag'), Poisson, Categorical"


def step_size(k, kappa):
    """ρ_k = (k + 2)^(-κ) for the k-th chunk (k = 0, 1, ...); κ ∈ (0.5, 1] (Liang & Klein 2009, §3)."""
    return float((k + 2.0) ** (-kappa))


def check_emission_supported(emission):
    """``ValueError`` unless online EM has sufficient statistics for this emission family."""
    # the hmmlearn mode of a law (``*HMMEmission``) fits on the posteriors in the HSMM, as before
    if not isinstance(emission, (_emi.Gaussian, _emi.MultivariateGaussian, _emi.Poisson,
                                 _emi.Categorical)) or isinstance(emission, HMMFamily):
        raise ValueError(f"online EM (partial_fit) has no sufficient statistics for the emission "
                         f"family {type(emission).__name__}; supported: {_SUPPORTED} (use `fit`, or "
                         f"leave 'e' out of `params`)")


def has_additive_statistics(emission):
    """Whether the HSMM emission family's M-step runs on additive sufficient statistics
    (:func:`check_emission_supported`): then ``fit`` in one process, worker processes and dask workers
    sum the same per-block statistics and give the same model, bitwise."""
    try:
        check_emission_supported(emission)
    except ValueError:
        return False
    return True


def emission_statistics(emission, X, gamma):
    """Weighted sufficient statistics of the emission family on one chunk: the law's own ``statistics``.

    Parameters
    ----------
    emission : Gaussian, MultivariateGaussian, Poisson or Categorical
    X : ndarray of float64, shape (N, F)
        Validated observations (NaN = missing).
    gamma : ndarray of float64, shape (N, K)
        State posteriors γ_t(j).

    Returns
    -------
    dict of str -> ndarray of float64
        The law's statistics (``post`` (K,) and its moments or counts). Time O(N·K·F) (O(N·K·F²) full).

    Raises
    ------
    ValueError
        For another family.
    """
    check_emission_supported(emission)
    return emission.statistics(X, gamma)


def emission_m_step(emission, stats):
    """Set the emission parameters to the law's M-step of the statistics (in place), as ``fit`` does
    (variances and covariance eigenvalues clipped at ``min_covar``); a state (feature) without weight keeps
    its parameters. ``ValueError`` for an unsupported family."""
    check_emission_supported(emission)
    return emission.m_step(stats)


def _blend(old, new, rho):
    if isinstance(new, dict):
        return {k: _blend(old[k], v, rho) for k, v in new.items()}
    return (1.0 - rho) * old + rho * new


def _scaled(stats, c):
    if isinstance(stats, dict):
        return {k: _scaled(v, c) for k, v in stats.items()}
    return stats * c


class OnlineStatistics:
    """The running average of stepwise EM: s_k = (1 - ρ_k) s_{k-1} + ρ_k s̄_k with total weight
    w_k = (1 - ρ_k) w_{k-1} + ρ_k (w_0 = 0), so :meth:`average` = s_k / w_k is a convex combination of
    the chunks' statistics. Memory: one copy of the statistics (O(K² + D·K + emission size))."""

    def __init__(self):
        self.stats = None
        self.weight = 0.0
        self.n_updates = 0

    def update(self, chunk_stats, rho):
        """Blend in one chunk's statistics with step ``rho`` ∈ (0, 1]; returns self."""
        if self.stats is None or self.stats.keys() != chunk_stats.keys():
            self.stats = _scaled(chunk_stats, 0.0)
            self.weight = 0.0
        self.stats = _blend(self.stats, chunk_stats, rho)
        self.weight = (1.0 - rho) * self.weight + rho
        self.n_updates += 1
        return self

    def average(self):
        """s_k / w_k (the same nesting as the chunk statistics)."""
        return _scaled(self.stats, 1.0 / self.weight)
