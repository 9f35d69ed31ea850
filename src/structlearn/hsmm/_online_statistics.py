r"""Online (stepwise) EM for the explicit-duration HSMM (Yu 2010 §2.3.3).

Stepwise EM (Cappé & Moulines 2009, "On-line expectation–maximization algorithm for latent data
models", JRSS B 71(3), eq. (5); Liang & Klein 2009, "Online EM for unsupervised models", NAACL, §3)
keeps a running average of the expected complete-data sufficient statistics,

.. math:: s_k = (1 - ρ_k) s_{k-1} + ρ_k \bar s(\text{chunk}_k; θ_{k-1}), \qquad ρ_k = (k + 2)^{-κ},
          \; κ ∈ (0.5, 1],

and after every chunk sets θ_k to the M-step of s_k / w_k (w_k = Σ-weight of the average, so the
first chunk enters with weight one). Each chunk's E-step is the exact forward–backward of that chunk
(:func:`structlearn.hsmm._em.e_step`); its sequences are independent (a segment running across
a chunk boundary is cut and censored as at any sequence end).

The statistics (all float64, one chunk's sums over its rows / sequences):

* ``"s"``: Σ_b γ_{first row of b}(j), (K,);
* ``"t"``: expected transition counts Σ_t ξ_t(i, j), (K, K), zero diagonal, and with end
  probabilities (``censoring="none"``) the expected number of sequences ending in j, (K,);
* ``"d"``: the completed duration counts n_d(j) (D, K) and left-censored weights F_j (K,) of
  :func:`structlearn.distributions.durations.censoring.complete_counts` (semi-Markov structure), or the expected stays
  and leaves (K,) of the equivalent chain for untruncated geometric durations; every duration family's
  ``fit(counts, left_weight)`` is a function of these, so any family works;
* ``"e"``: the weighted sufficient statistics of the emission family (:func:`emission_statistics`):
  univariate / diagonal / full Gaussian, Poisson and categorical. Other families raise ``ValueError``.

Every M-step is the one of batch EM (:func:`structlearn.hsmm._em.m_step` and the families'
``fit``) applied to averaged statistics, so the limit points of stepwise EM on a stationary stream
solve the same equations as batch EM on its chunks (Cappé & Moulines 2009, Theorem 1, for the
population version); with fresh statistics one step *is* one batch EM step on the chunk.

Measured (tests/hsmm/test_hsmm_online.py, one pass, κ = 0.7, seed 0): K = 2 (Poisson durations,
Gaussian emissions), 100 chunks of 250 rows: means 0.011, variances 3.7 %, mean durations 1.4 % from
batch EM on the same chunks; K = 3, 150 chunks of 300 rows: means ≤ 0.015, variances ≤ 2.9 %, mean
durations ≤ 2.9 %, transitions ≤ 0.028 (Poisson and nonparametric durations). One 300-row chunk
(K = 3, D = 40) costs ≈ 3 ms.
"""
import numpy as np

from ._em import e_step, expected_statistics
from ._em import m_step_from_statistics as _batch_m_step
from structlearn.learning.stepwise import (OnlineStatistics, check_emission_supported, emission_m_step,  # noqa: F401
                                           emission_statistics, has_additive_statistics, step_size)

__all__ = ["chunk_statistics", "m_step_from_statistics"]

def chunk_statistics(potentials, X, lengths, offsets, params):
    """E-step of one chunk: its expected sufficient statistics (module docstring) and log-likelihood.

    Parameters
    ----------
    potentials : HSMMPotentials
        The current parameters (:class:`structlearn.hsmm._potentials.HSMMPotentials`).
    X : ndarray of float64, shape (N, F); lengths (B,), offsets (B + 1,)
        The chunk, validated.
    params : str
        Letters of the parameters to estimate (``s``, ``t``, ``d``, ``e``).

    Returns
    -------
    stats : dict
        Keys ``"start"`` (K,), ``"trans"`` (K, K) (and ``"ends"`` (K,) with end probabilities),
        ``"counts"`` (D, K) and ``"left"`` (K,), or
        ``"stays"`` and ``"leaves"`` (K,) on the chain, and ``"emission"`` (a dict), for the letters asked.
    log_likelihood : float
        log P(chunk | θ) summed over its sequences (before the update).
    gamma : ndarray of float64, shape (N, K)
        The state posteriors of the chunk.

    Raises
    ------
    ValueError
        A sequence of the chunk with zero likelihood (:func:`~structlearn.hsmm._em.e_step`).

    Time O(N·(D·K + K²)), memory O(N·K + D·K) (the semi-Markov forward–backward).
    """
    sm, ll = e_step(potentials, X, lengths, offsets)
    stats, gamma = expected_statistics(potentials, sm, lengths, offsets, params)
    if "e" in params:
        stats["emission"] = emission_statistics(potentials.emission, X, gamma)
    return stats, ll, gamma


def m_step_from_statistics(potentials, stats):
    """The M-step of batch EM (:func:`structlearn.hsmm._em.m_step`) on (averaged) statistics.

    Returns the new (startprob, transmat); the duration and emission objects of ``potentials`` (and
    its ``endprob``, when it has end probabilities) are refitted in place. Parameters whose statistics
    are absent, and states without mass, keep their values.
    """
    startprob, transmat = _batch_m_step(potentials, stats)
    if "emission" in stats:
        emission_m_step(potentials.emission, stats["emission"])
    return startprob, transmat
