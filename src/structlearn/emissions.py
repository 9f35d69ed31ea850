"""Observation (emission) families of the hidden semi-Markov models: ``from structlearn.emissions import VonMises``.

A thin facade over :mod:`structlearn.distributions.emissions` (Yu 2010, "Hidden semi-Markov models", §4.2):
categorical, Poisson, Gaussian, multivariate Gaussian, Gaussian mixture, Bernoulli, multinomial counts,
von Mises angles, multi-stream products with missing values per stream, and marked events at irregular
times on a tick grid (:class:`EventSequence`, :func:`events_to_grid`; Yu 2010 §4.2). Pass one to
``HiddenSemiMarkovModel(emission=...)`` (an object, or its name in ``EMISSION_FAMILIES``).
The segmental model :class:`PolynomialSegments` (a polynomial trajectory in time-in-segment per state,
:mod:`structlearn.distributions.emissions.segment_regression`) is a segment emission: ``GeneralHSMM(segment_emission=...)``.
"""
from .distributions.emissions import (EMISSION_FAMILIES, Bernoulli, Categorical, EmissionDistribution, Gaussian,
                                      GaussianMixture, Multinomial, MultiStream, MultivariateGaussian, Poisson,
                                      VonMises, make_emission)
from .distributions.emissions.event import EventSequence, events_to_grid
from .distributions.emissions.segment_regression import PolynomialSegments

__all__ = ["EmissionDistribution", "Categorical", "Poisson", "Gaussian", "MultivariateGaussian",
           "GaussianMixture", "Bernoulli", "Multinomial", "VonMises", "MultiStream", "EMISSION_FAMILIES",
           "make_emission", "PolynomialSegments", "EventSequence", "events_to_grid"]
