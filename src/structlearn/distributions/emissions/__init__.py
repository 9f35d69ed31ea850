r"""Emission (observation) distributions of the hidden semi-Markov model.

Observations are conditionally independent given the state: b_{j,d}(o_{t+1:t+d}) = Π_τ b_j(o_τ)
(Yu 2010, "Hidden semi-Markov models", eq. (12), §4.2). Every family here is vectorised over the K
states and works on a 2-d float array X of shape (N, F) (N observations, F features).

==========================  =============================================  =============================
class                       b_j(x)                                          parameters
==========================  =============================================  =============================
Categorical                 probs[j, x] (x in 0..V-1, one column)          ``probs`` (K, V)
Poisson                     Π_f Poisson(x_f; λ_jf) (independent counts)    ``lam`` (K, F)
Gaussian                    N(x; μ_j, σ²_j) (one column)                   ``means`` (K,), ``variances`` (K,)
MultivariateGaussian        N(x; μ_j, Σ_j), ``covariance_type`` full/diag  ``means`` (K, F), ``covars``
                            (spherical/tied in the hmmlearn mode)
GaussianMixture             Σ_m c_jm N(x; μ_jm, Σ_jm), full/diag           ``weights`` (K, M), ``means``
                            (spherical/tied with ``update="hmmlearn"``)     (K, M, F), ``covars``
Bernoulli                   Π_f p_jf^x_f (1 - p_jf)^(1 - x_f) (binary)     ``probs`` (K, F)
Multinomial                 n!/Π x_v! Π_v p_jv^x_v (counts, any total n)   ``probs`` (K, V)
VonMises                    exp(κ_j cos(x - μ_j)) / (2π I_0(κ_j)) (angle)  ``mu`` (K,), ``kappa`` (K,)
MultiStream                 Π_s b^(s)_j(x^(s)) over column groups          the streams' parameters
==========================  =============================================  =============================

**Missing observations.** A NaN entry is unobserved: a row of NaN has density 1 (log density 0) in
every state, and a partly missing row is marginalised over its missing features where the family
factorises over features (Poisson, Bernoulli, diagonal Gaussians). Full-covariance and multinomial
families refuse partly missing rows (``ValueError``). Missing rows carry no weight in ``fit``. In a
:class:`MultiStream` product each stream has its own missing rows (a missing stream contributes log 1).

**Protocol.** To add a family, subclass :class:`EmissionDistribution` (or pass any object with the same
methods):

- ``n_states`` — K, or ``None`` before the parameters are set;
- ``log_density(X)`` → (N, K) float64, log b_j(x_t);
- ``fit(X, weights)`` — weighted maximum likelihood with weights (N, K), e.g. the posteriors γ_t(j)
  of Yu 2010 §2.3.1 iii; a state whose weights sum to zero keeps its parameters;
- ``sample(states, random_state)`` → (n, F) float64;
- ``n_parameters()`` — the number of free parameters;
- ``check_X(X)`` → the validated 2-d float array (optional: :func:`check_observations` falls back to
  a numeric 2-d check);
- ``initialize(X, n_states, labels, random_state)`` — initial parameters from initial hard labels
  (N,) (-1 = unlabelled), used by ``fit`` when ``"e"`` is in ``init_params``;
- ``get_state()`` → (arrays, config) and ``set_state(arrays)`` — model files (generic in the base
  class: the arrays named in ``_param_names``; ``config`` the constructor settings of ``_config()``).

Every ``fit`` is an exact (constrained) maximiser of the weighted log-likelihood, except
``GaussianMixture`` which takes one EM step of the mixture; both never decrease it, so the HSMM's EM
stays monotone. Variances are kept >= ``min_covar`` (covariance eigenvalues clipped from below, which
is the constrained maximiser).

**One law per family, hmmlearn's options on it.** ``Categorical``, ``Poisson`` and ``Multinomial`` are the
only implementation of their law for every HMM, HSMM and HHMM: they take hmmlearn's priors
(``emissionprob_prior``, ``lambdas_prior`` / ``lambdas_weight``), parameter letters (``fit(X, weights,
params)``, ``m_step(statistics, params)``) and initialisation (``init="hmmlearn"``) as options
(:class:`~._hmm_family.LawOptions`); ``CategoricalHMMEmission``, ``MultinomialHMMEmission`` and
``PoissonHMMEmission`` (:mod:`.hmm_counts`) are these laws in the hmmlearn mode with hmmlearn's parameter
names (``emissionprob``, ``lambdas``). The same holds for ``MultivariateGaussian`` (:mod:`.gaussian`: hmmlearn's
covariance types, priors ``means_prior`` ... ``covars_weight``, letters ``"mc"`` and k-means initialisation;
``Gaussian`` is its one-feature diagonal case) and ``GaussianHMMEmission`` (:mod:`.hmm`), and for the mixture
``GaussianMixture`` (:mod:`.gaussian`: hmmlearn's one-step update ``update="hmmlearn"`` with its priors, the
per-state "tied" and "spherical" covariance types, letters ``"mcw"`` and initialisation as options beside the
HSMM's per-component moments, ``update="moments"``) and ``GMMHMMEmission`` (:mod:`.hmm`).

The implementation is split by kind: :mod:`._base` (protocol base, checks), :mod:`._hmm_family`
(hmmlearn's options), :mod:`.discrete`, :mod:`.gaussian`, :mod:`.circular`, :mod:`.event` and
:mod:`.multistream`; this module re-exports them and holds the name registry.
"""
from ._base import EmissionDistribution, _as_2d, _check_covariance_type, check_observations  # noqa: F401
from ..base import make_family
from .circular import VonMises
from .discrete import Bernoulli, Categorical, Multinomial, Poisson
from .event import EventSequence
from .gaussian import Gaussian, GaussianMixture, MultivariateGaussian
from ._gaussian_maths import _clip_eig, _diag_logpdf, _full_logpdf, _weighted_mean_cov  # noqa: F401
from .multistream import MultiStream

__all__ = ["EmissionDistribution", "Categorical", "Poisson", "Gaussian", "MultivariateGaussian",
           "GaussianMixture", "Bernoulli", "Multinomial", "VonMises", "MultiStream",
           "EventSequence", "EMISSION_FAMILIES", "make_emission", "check_observations"]


#: Families selectable by name in :class:`structlearn.HiddenSemiMarkovModel` (``emission=...``).
EMISSION_FAMILIES = {
    "categorical": Categorical,
    "poisson": Poisson,
    "gaussian": Gaussian,
    "multivariate_gaussian": MultivariateGaussian,
    "diag_gaussian": lambda: MultivariateGaussian("diag"),
    "gmm": GaussianMixture,
    "bernoulli": Bernoulli,
    "multinomial": Multinomial,
    "von_mises": VonMises,
    "vonmises": VonMises,
    "event_sequence": EventSequence,
}


def make_emission(spec):
    """A fresh emission object from a family name (see ``EMISSION_FAMILIES``) or a copy of an object.

    Raises
    ------
    ValueError
        Unknown family name, or an object lacking the protocol methods.
    """
    return make_family(spec, EMISSION_FAMILIES, "emission", ("log_density", "fit", "sample", "n_parameters"))
