r"""Online (stepwise) EM for the hidden Markov models of :mod:`structlearn.hmm`.

The scheme is the HSMM's (:mod:`structlearn.hsmm._online_statistics`, whose
:class:`~structlearn.learning.stepwise.OnlineStatistics` and
:func:`~structlearn.learning.stepwise.step_size` are used as they are): stepwise EM (Cappé &
Moulines 2009, "On-line expectation–maximization algorithm for latent data models", JRSS B 71(3),
eq. (5); Liang & Klein 2009, "Online EM for unsupervised models", NAACL, §3) keeps a running average
of the expected complete-data sufficient statistics of the chunks,

.. math:: s_k = (1 - ρ_k) s_{k-1} + ρ_k \bar s(\text{chunk}_k; θ_{k-1}), \qquad ρ_k = (k + 2)^{-κ},

and after every chunk sets θ_k to the M-step of batch EM applied to s_k / w_k. Each chunk's E-step is
the exact forward–backward of that chunk (its sequences independent).

The statistics of one chunk (float64):

* ``"start"``: Σ_b γ_{first row of b}(j), (K,); ``"trans"``: Σ_t ξ_t(i, j), (K, K) — the M-step of π
  and A is the estimator's (hmmlearn's MAP update with Dirichlet priors, fixed zeros kept);
* ``"emission"``: the weighted sufficient statistics of the emission family
  (:func:`emission_statistics`): the families of :mod:`structlearn.distributions.emissions.hmm` through their
  ``statistics`` (Gaussian of every covariance type, categorical, multinomial, Poisson: the quantities
  their ``fit`` is a function of, so the M-step of batch EM is reused as it is, priors included), and
  the families of :mod:`structlearn.distributions.emissions` that
  :func:`structlearn.learning.stepwise.emission_statistics` supports. The Gaussian mixture
  (``GMMHMM``) has no fixed sufficient statistics (its M-step centres the scatter at the E-step's
  means) and raises ``ValueError``.
"""
import numpy as np

from ..distributions.emissions._hmm_family import HMMFamily, observed_rows
from ..learning import stepwise as _stepwise
from ..learning.stepwise import OnlineStatistics, step_size

__all__ = ["OnlineStatistics", "step_size", "check_emission_supported", "emission_statistics",
           "emission_m_step", "chain_statistics"]


def check_emission_supported(emission):
    """``ValueError`` unless online EM has sufficient statistics for this emission family."""
    if isinstance(emission, HMMFamily):
        if not hasattr(emission, "statistics"):
            raise ValueError(f"online EM (partial_fit) has no sufficient statistics for "
                             f"{type(emission).__name__} (the mixture M-step centres its scatter at the "
                             f"E-step's means); use `fit`, or leave the emission letters out of `params`")
        return
    _stepwise.check_emission_supported(emission)


def has_additive_statistics(emission):
    """Whether the HMM emission family's M-step runs on additive sufficient statistics (every family but
    the Gaussian mixture's; :func:`check_emission_supported`)."""
    if isinstance(emission, HMMFamily):
        return hasattr(emission, "statistics")
    return _stepwise.has_additive_statistics(emission)


def emission_statistics(emission, X, gamma):
    """Weighted sufficient statistics of the emission family on one chunk.

    Parameters
    ----------
    emission : emission object
        A family of :mod:`structlearn.distributions.emissions.hmm` with ``statistics``, or one supported by
        :func:`structlearn.learning.stepwise.emission_statistics`.
    X : ndarray of float64, shape (N, F)
        Validated observations (all-NaN rows missing).
    gamma : ndarray of float64, shape (N, K)
        State posteriors γ_t(j).

    Returns
    -------
    dict of str -> ndarray of float64
        The family's statistics over the observed rows (``post`` (K,), Σ γ, and its moments; see the
        family's ``statistics``). Time O(N·K·F) (O(N·K·F²) full covariances).

    Raises
    ------
    ValueError
        For a family without sufficient statistics (:func:`check_emission_supported`).
    """
    check_emission_supported(emission)
    if isinstance(emission, HMMFamily):
        obs = observed_rows(X)
        Xo, g = (X, gamma) if obs.all() else (X[obs], gamma[obs])
        return emission.statistics(Xo, np.asarray(g, dtype=np.float64))
    return _stepwise.emission_statistics(emission, X, gamma)


def emission_m_step(emission, stats, params=None):
    """Set the emission parameters to the M-step of batch EM on (averaged) statistics, in place: the
    family's ``m_step`` (only the letters in ``params``, default all; MAP with its priors), or
    :func:`structlearn.learning.stepwise.emission_m_step`. States without weight keep their
    parameters. Returns the emission object."""
    if isinstance(emission, HMMFamily):
        return emission.m_step(stats, params)
    return _stepwise.emission_m_step(emission, stats)


def chain_statistics(gamma, xi, lengths, offsets):
    """The chain statistics of one chunk: ``{"start": Σ_b γ_{first row of b} (K,), "trans": Σ_t ξ_t
    (K, K)}`` from its posteriors γ (N, K) and expected transitions Σ_t ξ_t (K, K)."""
    first = offsets[:-1][lengths > 0]
    return {"start": gamma[first].sum(axis=0), "trans": np.array(xi, dtype=np.float64)}
