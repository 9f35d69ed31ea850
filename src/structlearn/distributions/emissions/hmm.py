r"""Emission families with hmmlearn's parametrisation, initialisation and MAP M-steps.

This module holds ``GaussianHMMEmission`` and ``GMMHMMEmission`` (the laws
:class:`~structlearn.distributions.emissions.gaussian.MultivariateGaussian` and
:class:`~structlearn.distributions.emissions.gaussian.GaussianMixture` in the hmmlearn mode, fixing options
only) and re-exports the
count names of :mod:`structlearn.distributions.emissions.hmm_counts` (``CategoricalHMMEmission``,
``MultinomialHMMEmission``, ``PoissonHMMEmission``: the laws ``Categorical``, ``Multinomial`` and
``Poisson`` of :mod:`structlearn.distributions.emissions.discrete` in the hmmlearn mode, fixing options
only); the mixins are in :mod:`structlearn.distributions.emissions._hmm_family`.

The hidden Markov estimators of :mod:`structlearn.hmm` (``GaussianHMM``, ``GMMHMM``, ``CategoricalHMM``,
``MultinomialHMM``, ``PoissonHMM``) keep their emission parameters in one of these objects; each follows
the emission protocol of :mod:`structlearn.distributions.emissions` (``log_density``, ``fit``, ``sample``,
``initialize``, ``n_parameters``, ``check_X``, ``get_state``/``set_state``), so they also serve
:class:`structlearn.HiddenSemiMarkovModel` and the generic ``HiddenMarkovModel``.

What makes them hmmlearn's (0.3.x) is written once per family:

- the parameter letters of ``params`` / ``init_params`` (``letters``): Gaussian ``"mc"`` (means,
  covariances), GMM ``"mcw"`` (+ mixture weights), categorical and multinomial ``"e"`` (emission
  probabilities), Poisson ``"l"`` (rates); ``fit(X, weights, params)`` updates only those named;
- the M-step with hmmlearn's priors (the maximisers of the expected complete-data log-likelihood plus
  the log prior, Huang, Acero & Hon 2001, "Spoken Language Processing", §9.3 pp. 443–445; Dirichlet
  rows for discrete emissions; normal / inverse-gamma / inverse-Wishart for Gaussians), including its
  defaults (``GaussianHMM``'s ``covars_prior=1e-2`` regularises every fitted covariance);
- the initialisation: k-means means (``sklearn.cluster.KMeans(n_init=10)`` seeded with the
  estimator's ``random_state``), covariances from the data covariance plus ``min_covar`` on the
  diagonal, random emission probabilities, gamma-distributed Poisson rates.

The priors are constructor settings; arrays broadcast against the parameter they regularise (a 1-d
array of length K is per state). **Missing observations**: a row that is all NaN is unobserved (log
density 0 in every state, no weight in ``fit``); partly missing rows raise ``ValueError`` (use
``HiddenMarkovModel(emission=MultivariateGaussian("diag"))`` to marginalise single features).

Error messages name parameters with ``suffix`` appended (the estimators pass ``"_"``: ``covars_``).
"""
from ._gaussian_maths import COVARIANCE_TYPES, full_covariances, gaussian_log_density
from .gaussian import GaussianMixture, MultivariateGaussian
from ._hmm_family import HMMFamily, observed_rows
from .hmm_counts import CategoricalHMMEmission, MultinomialHMMEmission, PoissonHMMEmission

__all__ = ["GaussianHMMEmission", "GMMHMMEmission", "CategoricalHMMEmission", "MultinomialHMMEmission",
           "PoissonHMMEmission", "COVARIANCE_TYPES", "gaussian_log_density", "full_covariances",
           "observed_rows"]

class GaussianHMMEmission(HMMFamily, MultivariateGaussian):
    r""":class:`~structlearn.distributions.emissions.gaussian.MultivariateGaussian` in the hmmlearn mode
    (hmmlearn's ``GaussianHMM``): covariance types "spherical", "diag", "full", "tied", hmmlearn's
    default covariance prior, letters ``"mc"``; whole rows missing only.

    Parameters
    ----------
    covariance_type : {"spherical", "diag", "full", "tied"}, default "diag"
        Σ_j = σ²_j I, diagonal, full, or one full Σ shared by all states.
    means : array-like, shape (K, F), optional
    covars : array-like, optional
        Compact form: (K,) spherical, (K, F) diag, (K, F, F) full, (F, F) tied.
    min_covar : float, default 1e-3
        Added to the diagonal of the data covariance that initialises ``covars`` (as hmmlearn; the
        M-step's regulariser is ``covars_prior``).
    means_prior, means_weight : float or array, default 0, 0
        Normal prior on the means: mean μ₀ (broadcast to (K, F)) and precision scale λ.
    covars_prior, covars_weight : float or array, default 1e-2, 1
        Inverse-gamma or inverse-Wishart prior (see the law); hmmlearn's default adds 1e-2 to every
        scatter.
    """

    covariance_types = COVARIANCE_TYPES
    _missing_entries = False

    def __init__(self, covariance_type="diag", means=None, covars=None, min_covar=1e-3, means_prior=0.0,
                 means_weight=0.0, covars_prior=1e-2, covars_weight=1.0):
        super().__init__(covariance_type, means, covars, min_covar, means_prior, means_weight, covars_prior,
                         covars_weight, init="hmmlearn")


class GMMHMMEmission(HMMFamily, GaussianMixture):
    r""":class:`~structlearn.distributions.emissions.gaussian.GaussianMixture` in the hmmlearn mode
    (hmmlearn's ``GMMHMM``): hmmlearn's one-step update with its priors, covariance types "spherical",
    "diag", "full", "tied" (the M components of a state share one full covariance), letters ``"mcw"``,
    hmmlearn's initialisation; whole rows missing only.

    Parameters
    ----------
    n_mix : int, default 1
        Components per state M.
    covariance_type : {"spherical", "diag", "full", "tied"}, default "diag"
    weights : array-like, shape (K, M), optional
    means : array-like, shape (K, M, F), optional
    covars : array-like, optional
        (K, M) spherical, (K, M, F) diag, (K, M, F, F) full, (K, F, F) tied.
    min_covar : float, default 1e-3
        Added to the diagonal of the initial data covariance.
    weights_prior : float or array (K, M), default 1.0
        Dirichlet prior of the mixture weights.
    means_prior, means_weight : default 0, 0
        Normal prior of the component means.
    covars_prior, covars_weight : default None
        Inverse-gamma / inverse-Wishart prior; ``None`` takes hmmlearn's defaults for the covariance
        type, which make the update the maximum-likelihood one.
    """

    update = "hmmlearn"

    def __init__(self, n_mix=1, covariance_type="diag", weights=None, means=None, covars=None,
                 min_covar=1e-3, weights_prior=1.0, means_prior=0.0, means_weight=0.0, covars_prior=None,
                 covars_weight=None):
        super().__init__(n_mix, covariance_type, weights, means, covars, min_covar, weights_prior, means_prior,
                         means_weight, covars_prior, covars_weight, update="hmmlearn", init="hmmlearn")
