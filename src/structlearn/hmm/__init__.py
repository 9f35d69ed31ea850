"""Hidden Markov models with hmmlearn's surface: ``from structlearn.hmm import GaussianHMM``.

A thin facade over :mod:`structlearn.hmm.estimators`: ``GaussianHMM`` (spherical / diag / full / tied
covariances), ``GMMHMM``, ``CategoricalHMM``, ``MultinomialHMM`` (counts), ``PoissonHMM`` — hmmlearn's
constructor arguments, attributes and methods — and the generic ``HiddenMarkovModel(emission=...)``
over any emission family of :mod:`structlearn.distributions.emissions`. All run on the exact chain engine
(:class:`structlearn.engine.structures.LinearChain`).
"""
from .estimators import CategoricalHMM, GaussianHMM, GMMHMM, HiddenMarkovModel, MultinomialHMM, PoissonHMM

__all__ = ["GaussianHMM", "GMMHMM", "CategoricalHMM", "MultinomialHMM", "PoissonHMM", "HiddenMarkovModel"]
