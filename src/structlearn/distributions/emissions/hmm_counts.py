"""hmmlearn's names of the count and symbol laws: ``CategoricalHMMEmission``, ``MultinomialHMMEmission``,
``PoissonHMMEmission`` (re-exported by :mod:`structlearn.distributions.emissions.hmm`).

Each is its law of :mod:`structlearn.distributions.emissions.discrete` (:class:`~.discrete.Categorical`,
:class:`~.discrete.Multinomial`, :class:`~.discrete.Poisson`: the log-density, sampling, sufficient
statistics and M-step) in the hmmlearn mode of :class:`~._hmm_family.HMMFamily`, with the constructor
and parameter names of hmmlearn (``emissionprob``, ``lambdas``) that the HMM estimators and model files
use. They only fix options; nothing of the maths is written here.
"""
from ._hmm_family import HMMFamily
from .discrete import Categorical, Multinomial, Poisson

__all__ = ["CategoricalHMMEmission", "MultinomialHMMEmission", "PoissonHMMEmission"]


class CategoricalHMMEmission(HMMFamily, Categorical):
    """:class:`~structlearn.distributions.emissions.discrete.Categorical` in the hmmlearn mode
    (hmmlearn's ``CategoricalHMM``): parameter ``emissionprob`` (K, V), letter ``"e"``.

    Parameters
    ----------
    n_features : int, optional
        Alphabet size V (default: the largest symbol seen at initialisation + 1).
    emissionprob : array-like, shape (K, V), optional
    emissionprob_prior : float or array (K, V), default 1.0
        Dirichlet prior: emissionprob[j] ∝ max(prior − 1 + Σ_t γ_tj I(x_t = v), 0).
    """

    _param_names = ("emissionprob",)
    param_letters = {"emissionprob": "e"}

    def __init__(self, n_features=None, emissionprob=None, emissionprob_prior=1.0):
        super().__init__(emissionprob, n_features, emissionprob_prior, init="hmmlearn")


class MultinomialHMMEmission(HMMFamily, Multinomial):
    """:class:`~structlearn.distributions.emissions.discrete.Multinomial` in the hmmlearn mode (hmmlearn's
    ``MultinomialHMM``): parameter ``emissionprob`` (K, F), letter ``"e"``.

    Parameters
    ----------
    n_trials : int or array-like of int, shape (n_samples,), optional
        Number of trials of every row (an int), or of each row of X (an array, as hmmlearn accepts:
        then X must have exactly that many rows); when given, rows must sum to it. Sampling needs one
        int (given, or kept from training rows that all had the same total).
    emissionprob : array-like, shape (K, F), optional
    """

    _param_names = ("emissionprob",)
    param_letters = {"emissionprob": "e"}
    _fixed_totals = True

    def __init__(self, n_trials=None, emissionprob=None):
        super().__init__(emissionprob, n_trials, init="hmmlearn")


class PoissonHMMEmission(HMMFamily, Poisson):
    """:class:`~structlearn.distributions.emissions.discrete.Poisson` in the hmmlearn mode (hmmlearn's
    ``PoissonHMM``): parameter ``lambdas`` (K, F), letter ``"l"``; whole rows missing only.

    Parameters
    ----------
    lambdas : array-like, shape (K, F), optional
    lambdas_prior, lambdas_weight : float or array, default 0, 0
        hmmlearn's gamma prior (see :class:`~structlearn.distributions.emissions.discrete.Poisson`).
    """

    _param_names = ("lambdas",)
    param_letters = {"lambdas": "l"}

    def __init__(self, lambdas=None, lambdas_prior=0.0, lambdas_weight=0.0):
        super().__init__(lambdas, lambdas_prior, lambdas_weight, init="hmmlearn")
