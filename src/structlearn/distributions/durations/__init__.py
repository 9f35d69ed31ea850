r"""Duration (sojourn-time) distributions of the explicit-duration hidden semi-Markov model.

State j of an explicit-duration HSMM stays for d ∈ {1, …, D} steps with probability p_j(d) (Yu 2010,
"Hidden semi-Markov models", §2.1 eq. (2), §3.1 and §4.1). Every family here is **truncated at the
maximum duration D and renormalised**: ``log_pmf(D)[d - 1, j] = log f_j(d) - log Σ_{d'<=D} f_j(d')``.

Families (all vectorised over the K states; parameters are float64 arrays of shape (K,)):

==================  ====================================================  ============================
class               untruncated f_j(d), d = 1, 2, …                        parameters
==================  ====================================================  ============================
NonParametric       categorical on 1..D                                    ``probs`` (K, D)
Poisson             d - 1 ~ Poisson(λ) (shifted by one)                    ``lam``
NegativeBinomial    d - 1 ~ NB(r, p): C(d-2+r, d-1) p^r (1-p)^(d-1)       ``n`` (r > 0), ``p``
Geometric           p (1 - p)^(d - 1)                                      ``p``
Gamma               F(d) - F(d - 1), F the Gamma(shape, scale) cdf         ``shape``, ``scale``
LogNormal           F(d) - F(d - 1), F the LogNormal(μ, σ) cdf             ``mu``, ``sigma``
DiscreteGaussian    Φ((d + ½ - μ)/σ) - Φ((d - ½ - μ)/σ)                    ``mu``, ``sigma``
Coxian              α T^{d-1} e, M phases left to right (phase-type)       ``stay`` (K, M), ``proceed``
                                                                           (K, M - 1)
ConvexMonotone      Σ_m π_m T_m(d), T_m triangular: convex, non-increasing ``weights`` (K, D)
ExponentialFamily   h(d) exp(η · T(d)), user-defined T and h               ``eta`` (K, P)
==================  ====================================================  ============================

Every parametric family takes a **shift** (minimum duration - 1) s_j, p_j(d) ∝ f_j(d - s_j), fixed
(``shift=``) or estimated in the M-step (``estimate_shift=True``, R mhsmm's ``shift``;
:class:`~structlearn.distributions.durations._base.ShiftMixin`). A shifted geometric is not the HMM's implicit
law any more: an HSMM with one never takes the first-order-chain shortcut.

Censoring (Yu 2010 §2.2.1) is generic over the families: :func:`duration_tables` (log-potentials of the
first / middle / last / only segment of a sequence) and :func:`complete_counts` (the E-step completion
of censored segments used by the M-step) live in :mod:`structlearn.distributions.durations.censoring` and are part of
this module's public names.

**Protocol.** Every family implements the small protocol an HSMM needs; to add a family, subclass
:class:`DurationDistribution` (or pass any object with the same methods; for an exponential family
it is enough to override two functions of :class:`ExponentialFamily`):

- ``n_states`` — K, or ``None`` before the parameters are set;
- ``log_pmf(D)`` → (D, K) float64, the truncated, renormalised log p_j(d);
- ``fit(counts, left_weight=None)`` — the M-step below, from expected counts (D, K) and left-censored
  weights (K,); a state whose counts sum to zero keeps its parameters;
- ``sample(states, D, random_state)`` → int64 durations in 1..D (generic in the base class);
- ``mean(D)``, ``var(D)`` (generic) and ``n_parameters(D)``, the number of free parameters;
- ``initialize(n_states, D, means, random_state)`` — initial parameters with the given mean durations
  (K,), used by ``fit`` when ``"d"`` is in ``init_params``;
- ``get_state()`` → (arrays, config) and ``set_state(arrays)`` — model files (generic in the base
  class: the arrays named in ``_param_names``; ``config`` the constructor settings of ``_config()``).

The M-step (``fit``) maximises the expected complete-data log-likelihood of the durations,

.. math:: Q(θ) = \sum_{d=1}^{D} n_d \log p_θ(d) - F \log μ_θ,

where ``counts`` n_d holds the expected number of segments of (completed) duration d and ``left_weight``
F the expected number of left-censored first segments (whose complete-data likelihood of total duration
d' and residual r <= d' is p(d') / μ). Closed forms are used where they exist (non-parametric always,
through a one-dimensional root search when F > 0; Poisson, geometric when truncation is negligible);
other cases are maximised numerically (damped Newton steps on finite-difference derivatives, in
unconstrained coordinates) from the better of the moment estimate and the current parameters, and
the best of the candidates is kept, so Q never decreases (a generalised EM step).

The implementation is split by kind: :mod:`._duration_base` (protocol, Q, shift),
:mod:`.duration_nonparametric`, :mod:`.duration_parametric`, :mod:`.duration_phase` (Coxian) and
:mod:`.duration_expfam`; this module re-exports them and holds the name registry.
"""
from ._base import SHIFT_TOL, DurationDistribution, ShiftMixin
from ._base import _newton_maximize, _normalise_log, _q_value, _weighted_moments  # noqa: F401
from .censoring import CENSORING, complete_counts, duration_tables, log_mean, log_survivor
from ..base import make_family
from .expfam import BASE_MEASURES, STATISTICS, ExponentialFamily
from .nonparametric import ConvexMonotone, NonParametric, triangular_basis
from .parametric import DiscreteGaussian, Gamma, Geometric, LogNormal, NegativeBinomial, Poisson
from .parametric import _Parametric  # noqa: F401
from .phase import Coxian

__all__ = [
    "CENSORING", "DurationDistribution", "NonParametric", "Poisson", "NegativeBinomial", "Geometric",
    "Gamma", "LogNormal", "DiscreteGaussian", "Coxian", "ConvexMonotone", "ExponentialFamily",
    "ShiftMixin", "SHIFT_TOL", "STATISTICS", "BASE_MEASURES", "triangular_basis",
    "DURATION_FAMILIES", "make_duration", "duration_tables", "complete_counts", "log_survivor",
    "log_mean",
]

#: Families selectable by name in :class:`structlearn.HiddenSemiMarkovModel` (``duration=...``); the
#: lower-case class names are keys too (model files name a family by its class).
DURATION_FAMILIES = {
    "nonparametric": NonParametric,
    "poisson": Poisson,
    "negative_binomial": NegativeBinomial,
    "negativebinomial": NegativeBinomial,
    "nbinom": NegativeBinomial,
    "geometric": Geometric,
    "gamma": Gamma,
    "lognormal": LogNormal,
    "discrete_gaussian": DiscreteGaussian,
    "discretegaussian": DiscreteGaussian,
    "coxian": Coxian,
    "convex_monotone": ConvexMonotone,
    "convexmonotone": ConvexMonotone,
    "exponential_family": ExponentialFamily,
    "exponentialfamily": ExponentialFamily,
}


def make_duration(spec):
    """A fresh duration object from a family name (see ``DURATION_FAMILIES``) or a copy of an object.

    Raises
    ------
    ValueError
        Unknown family name, or an object lacking ``log_pmf`` / ``fit``.
    """
    return make_family(spec, DURATION_FAMILIES, "duration", ("log_pmf", "fit", "n_parameters"))
