r"""Online (stepwise) EM for the explicit-duration HSMM (Yu 2010 §2.3.3).

Stepwise EM (Cappé & Moulines 2009, "On-line expectation–maximization algorithm for latent data
models", JRSS B 71(3), eq. (5); Liang & Klein 2009, "Online EM for unsupervised models", NAACL, §3)
keeps a running average of the expected complete-data sufficient statistics,

.. math:: s_k = (1 - ρ_k) s_{k-1} + ρ_k \bar s(\text{chunk}_k; θ_{k-1}), \qquad ρ_k = (k + 2)^{-κ},
          \; κ ∈ (0.5, 1],

and after every chunk sets θ_k to the M-step of s_k / w_k (w_k = Σ-weight of the average, so the
first chunk enters with weight one). Each chunk's E-step is the exact forward–backward of that chunk
(:func:`structlearn.learning.hsmm_em.e_step`); its sequences are independent (a segment running across
a chunk boundary is cut and censored as at any sequence end).

The statistics (all float64, one chunk's sums over its rows / sequences):

* ``"s"``: Σ_b γ_{first row of b}(j), (K,);
* ``"t"``: expected transition counts Σ_t ξ_t(i, j), (K, K), zero diagonal, and with end
  probabilities (``censoring="none"``) the expected number of sequences ending in j, (K,);
* ``"d"``: the completed duration counts n_d(j) (D, K) and left-censored weights F_j (K,) of
  :func:`structlearn.models.censoring.complete_counts` (semi-Markov structure), or the expected stays
  and leaves (K,) of the equivalent chain for untruncated geometric durations; every duration family's
  ``fit(counts, left_weight)`` is a function of these, so any family works;
* ``"e"``: the weighted sufficient statistics of the emission family (:func:`emission_statistics`):
  univariate / diagonal / full Gaussian, Poisson and categorical. Other families raise ``ValueError``.

Every M-step is the one of batch EM (:func:`structlearn.learning.hsmm_em.m_step` and the families'
``fit``) applied to averaged statistics, so the limit points of stepwise EM on a stationary stream
solve the same equations as batch EM on its chunks (Cappé & Moulines 2009, Theorem 1, for the
population version); with fresh statistics one step *is* one batch EM step on the chunk.

Measured (tests/estimators/test_hsmm_online.py, one pass, κ = 0.7, seed 0): K = 2 (Poisson durations,
Gaussian emissions), 100 chunks of 250 rows: means 0.011, variances 3.7 %, mean durations 1.4 % from
batch EM on the same chunks; K = 3, 150 chunks of 300 rows: means ≤ 0.015, variances ≤ 2.9 %, mean
durations ≤ 2.9 %, transitions ≤ 0.028 (Poisson and nonparametric durations). One 300-row chunk
(K = 3, D = 40) costs ≈ 3 ms.
"""
import numpy as np

from ..models import emissions as _emi
from .hsmm_em import e_step, expected_statistics
from .hsmm_em import m_step_from_statistics as _batch_m_step

__all__ = ["step_size", "check_emission_supported", "emission_statistics", "emission_m_step",
           "chunk_statistics", "OnlineStatistics", "m_step_from_statistics"]

_SUPPORTED = "Gaussian, MultivariateGaussian ('full' or 'diag'), Poisson, Categorical"


def step_size(k, kappa):
    """ρ_k = (k + 2)^(-κ) for the k-th chunk (k = 0, 1, ...); κ ∈ (0.5, 1] (Liang & Klein 2009, §3)."""
    return float((k + 2.0) ** (-kappa))


def check_emission_supported(emission):
    """``ValueError`` unless online EM has sufficient statistics for this emission family."""
    if not isinstance(emission, (_emi.Gaussian, _emi.MultivariateGaussian, _emi.Poisson,
                                 _emi.Categorical)):
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
    """Weighted sufficient statistics of the emission family on one chunk.

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
        Gaussian: ``w``, ``x``, ``xx`` (K,) (Σ γ, Σ γ x, Σ γ x² over observed rows);
        diagonal Gaussian: ``w``, ``x``, ``xx`` (K, F) (per feature, over observed entries);
        full Gaussian: ``w`` (K,), ``x`` (K, F), ``xx`` (K, F, F) over complete rows;
        Poisson: ``w``, ``x`` (K, F); Categorical: ``counts`` (K, V). Time O(N·K·F) (O(N·K·F²) full).

    Raises
    ------
    ValueError
        For another family.
    """
    check_emission_supported(emission)
    if isinstance(emission, _emi.Categorical):
        x = X[:, 0]
        obs = ~np.isnan(x)
        V = emission.n_features
        xi = x[obs].astype(np.int64)
        counts = np.stack([np.bincount(xi, weights=gamma[obs, k], minlength=V)
                           for k in range(gamma.shape[1])])
        return {"counts": counts}
    if isinstance(emission, _emi.MultivariateGaussian) and emission.covariance_type == "full":
        complete = ~np.isnan(X).any(axis=1)
        Xc, g = X[complete], gamma[complete]
        return {"w": g.sum(axis=0), "x": g.T @ Xc, "xx": np.einsum("nk,ni,nj->kij", g, Xc, Xc)}
    obs = ~np.isnan(X)
    x = np.where(obs, X, 0.0)
    den = gamma.T @ obs.astype(np.float64)  # (K, F)
    out = {"w": den, "x": gamma.T @ x}
    if not isinstance(emission, _emi.Poisson):
        out["xx"] = gamma.T @ (x * x)
    if isinstance(emission, _emi.Gaussian):
        out = {k: v[:, 0] for k, v in out.items()}
    return out


def emission_m_step(emission, stats):
    """Set the emission parameters to the weighted MLE of the statistics (in place), as ``fit`` does:
    variances and covariance eigenvalues clipped at ``min_covar``; a state (feature) without weight
    keeps its parameters. ``ValueError`` for an unsupported family."""
    check_emission_supported(emission)
    if isinstance(emission, _emi.Categorical):
        c = stats["counts"]
        tot = c.sum(axis=1)
        keep = tot > 0
        probs = emission.probs.copy()
        probs[keep] = c[keep] / tot[keep, None]
        emission.probs = probs
        return emission
    w, sx = stats["w"], stats["x"]
    ok = w > 0
    safe = np.where(ok, w, 1.0)
    if isinstance(emission, _emi.Poisson):
        emission.lam = np.where(ok, sx / safe, emission.lam)
        return emission
    if isinstance(emission, _emi.MultivariateGaussian) and emission.covariance_type == "full":
        means, covars = emission.means.copy(), emission.covars.copy()
        for k in np.flatnonzero(ok):
            m = sx[k] / w[k]
            means[k] = m
            covars[k] = _emi._clip_eig(stats["xx"][k] / w[k] - np.outer(m, m), emission.min_covar)
        emission.means, emission.covars = means, covars
        return emission
    m = sx / safe
    var = np.maximum(stats["xx"] / safe - m * m, emission.min_covar)
    if isinstance(emission, _emi.Gaussian):
        emission.means = np.where(ok, m, emission.means)
        emission.variances = np.where(ok, var, emission.variances)
    else:
        emission.means = np.where(ok, m, emission.means)
        emission.covars = np.where(ok, var, emission.covars)
    return emission


def chunk_statistics(potentials, X, lengths, offsets, params):
    """E-step of one chunk: its expected sufficient statistics (module docstring) and log-likelihood.

    Parameters
    ----------
    potentials : HSMMPotentials
        The current parameters (:class:`structlearn.models.hsmm.HSMMPotentials`).
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
        A sequence of the chunk with zero likelihood (:func:`~structlearn.learning.hsmm_em.e_step`).

    Time O(N·(D·K + K²)), memory O(N·K + D·K) (the semi-Markov forward–backward).
    """
    sm, ll = e_step(potentials, X, lengths, offsets)
    stats, gamma = expected_statistics(potentials, sm, lengths, offsets, params)
    if "e" in params:
        stats["emission"] = emission_statistics(potentials.emission, X, gamma)
    return stats, ll, gamma


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


def m_step_from_statistics(potentials, stats):
    """The M-step of batch EM (:func:`structlearn.learning.hsmm_em.m_step`) on (averaged) statistics.

    Returns the new (startprob, transmat); the duration and emission objects of ``potentials`` (and
    its ``endprob``, when it has end probabilities) are refitted in place. Parameters whose statistics
    are absent, and states without mass, keep their values.
    """
    startprob, transmat = _batch_m_step(potentials, stats)
    if "emission" in stats:
        emission_m_step(potentials.emission, stats["emission"])
    return startprob, transmat
