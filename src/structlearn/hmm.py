"""Hidden Markov models with hmmlearn's surface: ``from structlearn.hmm import GaussianHMM``.

A thin facade over :mod:`structlearn.estimators.hmm`: ``GaussianHMM`` (spherical / diag / full / tied
covariances), ``GMMHMM``, ``CategoricalHMM``, ``MultinomialHMM`` (counts), ``PoissonHMM`` — hmmlearn's
constructor arguments, attributes and methods — and the generic ``HiddenMarkovModel(emission=...)``
over any emission family of :mod:`structlearn.models.emissions`. All run on the exact chain engine
(:class:`structlearn.structures.LinearChain`).
"""
from .estimators.hmm import CategoricalHMM, GaussianHMM, GMMHMM, HiddenMarkovModel, MultinomialHMM, PoissonHMM

__all__ = ["GaussianHMM", "GMMHMM", "CategoricalHMM", "MultinomialHMM", "PoissonHMM", "HiddenMarkovModel"]
