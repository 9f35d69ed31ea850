"""Duration (sojourn-time) families of the hidden semi-Markov models: ``from structlearn.durations import Coxian``.

A thin facade over :mod:`structlearn.distributions.durations` (Yu 2010, "Hidden semi-Markov models", §4.1):
non-parametric, Poisson, negative binomial, geometric, gamma, log-normal, discretised Gaussian, discrete
Coxian (phase-type), convex-monotone and generic exponential-family durations, each with a shift /
minimum duration (``shift=``, ``estimate_shift=True``) except the geometric. Pass one to
``HiddenSemiMarkovModel(duration=...)`` (an object, or its name in ``DURATION_FAMILIES``).
"""
from .distributions.durations import (BASE_MEASURES, DURATION_FAMILIES, STATISTICS, ConvexMonotone, Coxian,
                                      DiscreteGaussian, DurationDistribution, ExponentialFamily, Gamma, Geometric,
                                      LogNormal, NegativeBinomial, NonParametric, Poisson, make_duration)

__all__ = ["DurationDistribution", "NonParametric", "Poisson", "NegativeBinomial", "Geometric", "Gamma",
           "LogNormal", "DiscreteGaussian", "Coxian", "ConvexMonotone", "ExponentialFamily", "STATISTICS",
           "BASE_MEASURES", "DURATION_FAMILIES", "make_duration"]
