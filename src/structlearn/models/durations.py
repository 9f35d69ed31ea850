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
==================  ====================================================  ============================

Censoring (Yu 2010 §2.2.1) is generic over the families: :func:`duration_tables` (log-potentials of the
first / middle / last / only segment of a sequence) and :func:`complete_counts` (the E-step completion
of censored segments used by the M-step) live in :mod:`structlearn.models.censoring` and are part of
this module's public names.

**Protocol.** Every family implements the small protocol an HSMM needs; to add a family, subclass
:class:`DurationDistribution` (or pass any object with the same methods):

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
"""
import math

import numpy as np
from scipy import optimize, special, stats
from sklearn.utils import check_random_state

from .censoring import CENSORING, complete_counts, duration_tables, log_mean, log_survivor
from .distribution import Distribution, check_stochastic_rows, make_family

__all__ = [
    "CENSORING", "NonParametric", "Poisson", "NegativeBinomial", "Geometric", "Gamma", "LogNormal",
    "DURATION_FAMILIES", "make_duration", "duration_tables", "complete_counts", "log_survivor",
    "log_mean",
]

_NEG_INF = -np.inf
_TAIL_EPS = 1e-13  # untruncated mass beyond D below which truncation is ignored by closed forms


def _q_value(log_p, counts, left):
    """Q = Σ n_d log p(d) - F log μ for one state (terms with n_d == 0 skipped)."""
    nz = counts > 0
    if np.any(log_p[nz] == _NEG_INF):
        return _NEG_INF
    q = float(np.dot(counts[nz], log_p[nz]))
    if left > 0:
        d = np.arange(1, log_p.shape[0] + 1, dtype=np.float64)
        q -= left * float(special.logsumexp(log_p + np.log(d)))
    return q


def _normalise_log(lf):
    """Renormalise a (D, K) table of log-masses over axis 0 (truncation at D)."""
    z = special.logsumexp(lf, axis=0)
    with np.errstate(invalid="ignore"):
        out = lf - z
    out[:, z == _NEG_INF] = _NEG_INF
    return out


def _check_positive_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}")
    return int(value)


# ------------------------------------------------------------------------------------------------------
# protocol base
# ------------------------------------------------------------------------------------------------------
class DurationDistribution(Distribution):
    """Base class of the duration families (see the module docstring for the protocol).

    Subclasses define ``_param_names`` and ``log_pmf``; ``sample``, ``mean``, ``var`` are generic.
    """

    # -- derived quantities (generic) ------------------------------------------------------------
    def log_pmf(self, max_duration):  # pragma: no cover - abstract
        raise NotImplementedError

    def pmf(self, max_duration):
        """Truncated, renormalised probabilities p_j(d), shape (D, K) (linear space)."""
        return np.exp(self.log_pmf(max_duration))

    def mean(self, max_duration):
        """Mean duration Σ_d d p_j(d) of the truncated distribution, shape (K,)."""
        p = self.pmf(max_duration)
        d = np.arange(1, p.shape[0] + 1, dtype=np.float64)
        return d @ p

    def var(self, max_duration):
        """Variance of the truncated duration distribution, shape (K,)."""
        p = self.pmf(max_duration)
        d = np.arange(1, p.shape[0] + 1, dtype=np.float64)
        m = d @ p
        return (d ** 2) @ p - m ** 2

    def sample(self, states, max_duration, random_state=None):
        """Draw one duration for each entry of ``states`` (int array, any shape) from p_state(·).

        Returns int64 array of the same shape, values in 1..D. Inverse-cdf sampling, O(D·K + n log D).
        """
        rng = check_random_state(random_state)
        states = np.asarray(states, dtype=np.int64)
        cdf = np.cumsum(self.pmf(max_duration), axis=0)  # (D, K)
        cdf /= cdf[-1]
        u = rng.random_sample(states.shape)
        out = np.empty(states.shape, dtype=np.int64)
        flat_s, flat_u, flat_o = states.ravel(), u.ravel(), out.reshape(-1)
        for i in range(flat_s.size):
            flat_o[i] = np.searchsorted(cdf[:, flat_s[i]], flat_u[i], side="right") + 1
        np.minimum(out, max_duration, out=out)
        return out

    def n_parameters(self, max_duration):  # pragma: no cover - overridden
        raise NotImplementedError


# ------------------------------------------------------------------------------------------------------
# non-parametric
# ------------------------------------------------------------------------------------------------------
class NonParametric(DurationDistribution):
    """Categorical duration distribution on 1..D (Ferguson 1980; Yu 2010 §3.1, §4.1).

    Parameters
    ----------
    probs : array-like of float64, shape (K, D'), optional
        ``probs[j, d - 1] = p_j(d)``; rows must be non-negative and sum to one. When the model's D
        differs from D', the rows are truncated or zero-padded and renormalised.

    Notes
    -----
    ``fit`` is the exact maximiser of Q (module docstring): with F = 0, p_j(d) ∝ n_d (Yu 2010 §2.3.1,
    ii); with F > 0, p_d = n_d / (N - F + F d / μ) where μ solves Σ_d p_d = 1 (one-dimensional root
    search, ``scipy.optimize.brentq``). A state without mass keeps its previous probabilities.
    """

    _param_names = ("probs",)

    def __init__(self, probs=None):
        self.probs = None if probs is None else np.array(probs, dtype=np.float64)
        if self.probs is not None:
            self._validate()

    def _validate(self):
        p = self.probs
        if p.ndim != 2 or p.shape[1] < 1:
            raise ValueError(f"`probs` must have shape (K, D) (one row of duration probabilities per "
                             f"state); got {p.shape}")
        check_stochastic_rows(p, "probs", " (duration probabilities)")

    def log_pmf(self, max_duration):
        """Truncated, renormalised log p_j(d), shape (D, K), float64 (-inf for zero probability)."""
        self._require()
        D = _check_positive_int(max_duration, "max_duration")
        p = self.probs
        if p.shape[1] >= D:
            p = p[:, :D]
        else:
            p = np.concatenate([p, np.zeros((p.shape[0], D - p.shape[1]))], axis=1)
        with np.errstate(divide="ignore"):
            lp = np.log(p.T)
        out = _normalise_log(lp)
        bad = np.flatnonzero(np.all(out == _NEG_INF, axis=0))
        if bad.size:
            raise ValueError(f"duration distribution of state {int(bad[0])} has no mass on 1..{D}; "
                             f"increase `max_duration`")
        return out

    def fit(self, counts, left_weight=None):
        """Exact weighted MLE from expected counts (D, K) and left-censored weights (K,)."""
        counts = np.asarray(counts, dtype=np.float64)
        D, K = counts.shape
        left = np.zeros(K) if left_weight is None else np.asarray(left_weight, dtype=np.float64)
        old = None if self.probs is None else self.log_pmf(D)
        new = np.zeros((K, D))
        for k in range(K):
            n = np.maximum(counts[:, k], 0.0)
            N = n.sum()
            if N <= 0:
                if old is None:
                    new[k] = 1.0 / D
                else:
                    new[k] = np.exp(old[:, k])
                continue
            F = min(float(left[k]), N)
            if F <= 0:
                p = n / N
            else:
                d = np.arange(1, D + 1, dtype=np.float64)
                if F >= N * (1 - 1e-12):
                    p = n / d
                    p /= p.sum()
                else:
                    def g(mu):
                        return np.sum(n / (N - F + F * d / mu)) - 1.0
                    lo, hi = 1.0, float(D)
                    if g(hi) <= 0:
                        mu = hi
                    elif g(lo) >= 0:
                        mu = lo
                    else:
                        mu = optimize.brentq(g, lo, hi, xtol=1e-14, rtol=1e-14)
                    p = n / (N - F + F * d / mu)
                    p /= p.sum()
            if old is not None:
                with np.errstate(divide="ignore"):
                    q_new = _q_value(np.log(p), n, F)
                if q_new < _q_value(old[:, k], n, F):
                    p = np.exp(old[:, k])
            new[k] = p
        self.probs = new
        return self

    def initialize(self, n_states, max_duration, means, random_state=None):
        """Broad initial pmfs with the given means: ½ shifted Poisson + ½ geometric, truncated."""
        D = max_duration
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        means = np.clip(np.asarray(means, dtype=np.float64), 1.0 + 1e-6, None)
        lam = means - 1.0
        pois = np.exp(stats.poisson.logpmf(d - 1, lam[None, :]))
        q = 1.0 / means
        geo = q * (1 - q) ** (d - 1)
        p = 0.5 * pois / pois.sum(0) + 0.5 * geo / geo.sum(0) + 1e-6
        self.probs = (p / p.sum(0)).T.copy()
        return self

    def n_parameters(self, max_duration):
        """Free parameters: K·(D - 1)."""
        return self.n_states * (int(max_duration) - 1)


# ------------------------------------------------------------------------------------------------------
# parametric families
# ------------------------------------------------------------------------------------------------------
class _Parametric(DurationDistribution):
    """Parametric family: ``_log_f(params, d)`` untruncated log-masses with params broadcast over d.

    Subclasses define ``_param_names``, ``_log_f(values, d)`` where values is a tuple of (K,) or
    scalar arrays and d a (D, 1) array, ``_to_theta``/``_from_theta`` (unconstrained coordinates of
    one state), ``_start`` (moment / closed-form estimate) and ``_closed_form`` (True when ``_start``
    is the exact MLE of an untruncated, uncensored fit).
    """

    _closed_form = False

    def __init__(self, **values):
        for n in self._param_names:
            v = values.get(n)
            setattr(self, n, None if v is None else np.atleast_1d(np.array(v, dtype=np.float64)))
        if self._is_set():
            self._validate()

    def _validate(self):
        shapes = {np.shape(getattr(self, n)) for n in self._param_names}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise ValueError(f"{type(self).__name__} parameters {self._param_names} must be 1-d arrays "
                             f"of the same length (one value per state); got shapes "
                             f"{[np.shape(getattr(self, n)) for n in self._param_names]}")
        for n in self._param_names:
            v = getattr(self, n)
            lo, hi, lo_open = self._ranges[n]
            ok = np.isfinite(v) & (v > lo if lo_open else v >= lo) & (v <= hi)
            if not np.all(ok):
                j = int(np.flatnonzero(~ok)[0])
                rng = f"{'(' if lo_open else '['}{lo}, {hi}]"
                raise ValueError(f"{type(self).__name__} parameter `{n}` must lie in {rng}; got "
                                 f"{v[j]!r} for state {j}")

    def _values(self, k=None):
        if k is None:
            return tuple(getattr(self, n) for n in self._param_names)
        return tuple(getattr(self, n)[k:k + 1] for n in self._param_names)

    def log_pmf(self, max_duration):
        """Truncated, renormalised log p_j(d), shape (D, K), float64."""
        self._require()
        D = _check_positive_int(max_duration, "max_duration")
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        out = _normalise_log(self._log_f(self._values(), d))
        bad = np.flatnonzero(np.all(out == _NEG_INF, axis=0))
        if bad.size:
            raise ValueError(f"duration distribution of state {int(bad[0])} has no mass on 1..{D}")
        return out

    def _log_pmf_one(self, values, D):
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        return _normalise_log(self._log_f(values, d))[:, 0]

    def n_parameters(self, max_duration):
        """Free parameters: one per parameter name and state (K or 2K)."""
        return len(self._param_names) * self.n_states

    def _tail(self, values, D):
        """Untruncated mass beyond D (for one state)."""
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        return max(0.0, 1.0 - float(np.exp(special.logsumexp(self._log_f(values, d)))))

    def fit(self, counts, left_weight=None):
        """Weighted MLE of Q = Σ_d n_d log p(d) - F log μ per state (module docstring).

        A state whose counts sum to zero keeps its parameters. Never decreases Q: the result is the
        best of the closed-form / moment start, the current parameters and a numerical optimum.
        """
        counts = np.asarray(counts, dtype=np.float64)
        D, K = counts.shape
        left = np.zeros(K) if left_weight is None else np.asarray(left_weight, dtype=np.float64)
        have = self._is_set()
        new = [np.empty(K) for _ in self._param_names]
        for k in range(K):
            n = np.maximum(counts[:, k], 0.0)
            N = n.sum()
            F = max(0.0, float(left[k]))
            cur = self._values(k) if have else None
            if N <= 0:
                vals = cur if cur is not None else self._start(np.ones(D) / D)
            else:
                vals = self._fit_one(n, F, D, cur)
            for i, v in enumerate(vals):
                new[i][k] = float(np.asarray(v).ravel()[0])
        for name, v in zip(self._param_names, new):
            setattr(self, name, v)
        return self

    def _fit_one(self, n, F, D, cur):
        start = self._start(n)
        if self._closed_form and F == 0 and self._tail(start, D) < _TAIL_EPS:
            return start
        N = n.sum()

        def q_of(values):
            try:
                return _q_value(self._log_pmf_one(values, D), n, F)
            except (ValueError, FloatingPointError):
                return _NEG_INF

        cands = [start] + ([cur] if cur is not None else [])
        scores = [q_of(c) for c in cands]
        best = int(np.argmax(scores))
        x0 = self._to_theta(cands[best])

        def neg(theta):
            q = q_of(self._from_theta(theta))
            return 1e300 if not np.isfinite(q) else -q / N

        with np.errstate(all="ignore"):
            x = _newton_maximize(lambda th: -neg(th), x0)
        cand = self._from_theta(x)
        q = q_of(cand)
        if q > scores[best]:
            return cand
        return cands[best]

    def initialize(self, n_states, max_duration, means, random_state=None):  # pragma: no cover
        raise NotImplementedError


def _newton_maximize(f, x0, max_iter=25):
    """Maximise a smooth function of a few unconstrained variables: Newton steps on central
    finite-difference derivatives (gradient ascent when the Hessian is not negative definite),
    with backtracking so that f never decreases. Pure NumPy (no BLAS threads, no SciPy overhead):
    an M-step calls it once per state and EM iteration."""
    x = np.asarray(x0, dtype=np.float64).copy()
    n = x.shape[0]
    fx = f(x)
    if not np.isfinite(fx):
        return x
    for _ in range(max_iter):
        h = 1e-4 * np.maximum(1.0, np.abs(x))
        g = np.empty(n)
        H = np.empty((n, n))
        fp = np.empty(n)
        fm = np.empty(n)
        for i in range(n):
            e = np.zeros(n)
            e[i] = h[i]
            fp[i], fm[i] = f(x + e), f(x - e)
            g[i] = (fp[i] - fm[i]) / (2 * h[i])
            H[i, i] = (fp[i] - 2 * fx + fm[i]) / h[i] ** 2
        for i in range(n):
            for j in range(i + 1, n):
                ei = np.zeros(n)
                ej = np.zeros(n)
                ei[i], ej[j] = h[i], h[j]
                H[i, j] = H[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej)
                                     + f(x - ei - ej)) / (4 * h[i] * h[j])
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(H))):
            break
        step = None
        if np.all(np.linalg.eigvalsh(H) < 0):
            step = -np.linalg.solve(H, g)
        if step is None or not np.all(np.isfinite(step)) or step @ g <= 0:
            step = g / max(1.0, float(np.abs(np.diag(H)).max()))
        norm = float(np.abs(step).max())
        if norm > 5.0:
            step *= 5.0 / norm
        t = 1.0
        improved = False
        while t > 1e-10:
            xn = x + t * step
            fn = f(xn)
            if np.isfinite(fn) and fn >= fx:
                improved = fn > fx
                break
            t *= 0.5
        if not improved:
            break
        gain = fn - fx
        x, fx = xn, fn
        if gain <= 1e-14 * (1.0 + abs(fx)) and float(np.abs(t * step).max()) < 1e-9:
            break
    return x


def _weighted_moments(n, shift=0.0, transform=None):
    d = np.arange(1, n.shape[0] + 1, dtype=np.float64) - shift
    if transform is not None:
        d = transform(d)
    N = n.sum()
    m = float(n @ d) / N
    v = float(n @ (d - m) ** 2) / N
    return m, v


class Poisson(_Parametric):
    """Shifted Poisson durations: d - 1 ~ Poisson(λ), d >= 1 (Yu 2010 §4.1; mhsmm ``"poisson"``, shift 1).

    Parameters
    ----------
    lam : array-like of float64, shape (K,), optional
        λ_j >= 0 (mean duration λ_j + 1 before truncation).

    Notes
    -----
    M-step: λ = Σ_d n_d (d - 1) / Σ_d n_d when truncation at D is negligible and F = 0, otherwise
    numerical maximisation of Q from that start.
    """

    _param_names = ("lam",)
    _ranges = {"lam": (0.0, np.inf, False)}
    _closed_form = True

    def __init__(self, lam=None):
        super().__init__(lam=lam)

    @staticmethod
    def _log_f(values, d):
        (lam,) = values
        # xlogy: 0 · log 0 = 0 (λ = 0 puts all mass on d = 1)
        return special.xlogy(d - 1, lam) - lam - special.gammaln(d)

    def _start(self, n):
        m, _ = _weighted_moments(n, shift=1.0)
        return (np.array([max(m, 0.0)]),)

    @staticmethod
    def _to_theta(values):
        return np.array([math.log(max(float(values[0][0]), 1e-10))])

    @staticmethod
    def _from_theta(theta):
        return (np.array([math.exp(min(theta[0], 25.0))]),)

    def initialize(self, n_states, max_duration, means, random_state=None):
        self.lam = np.maximum(np.asarray(means, dtype=np.float64) - 1.0, 1e-3)
        return self


class Geometric(_Parametric):
    """Geometric durations p_j(d) = p (1 - p)^(d - 1), d >= 1: the implicit duration of an HMM with
    self-transition probability 1 - p (Yu 2010 §1, §4.6).

    Parameters
    ----------
    p : array-like of float64, shape (K,), optional
        Ending probability per step, 0 < p <= 1.

    Notes
    -----
    M-step: p = Σ n_d / Σ d n_d when truncation is negligible and F = 0 (with right-censored counts
    completed by :func:`complete_counts` this is the Baum–Welch update of a self-transition).
    """

    _param_names = ("p",)
    _ranges = {"p": (0.0, 1.0, True)}
    _closed_form = True

    def __init__(self, p=None):
        super().__init__(p=p)

    @staticmethod
    def _log_f(values, d):
        (p,) = values
        with np.errstate(divide="ignore"):
            return np.log(p) + special.xlog1py(d - 1, -p)

    def _start(self, n):
        d = np.arange(1, n.shape[0] + 1, dtype=np.float64)
        return (np.array([min(1.0, n.sum() / float(n @ d))]),)

    def _tail(self, values, D):
        p = float(values[0][0])
        return 0.0 if p >= 1 else math.exp(D * math.log1p(-p))

    @staticmethod
    def _to_theta(values):
        p = min(max(float(values[0][0]), 1e-12), 1 - 1e-15)
        return np.array([math.log(p) - math.log1p(-p)])

    @staticmethod
    def _from_theta(theta):
        return (np.array([special.expit(theta[0])]),)

    def initialize(self, n_states, max_duration, means, random_state=None):
        self.p = 1.0 / np.maximum(np.asarray(means, dtype=np.float64), 1.0 + 1e-3)
        return self


class NegativeBinomial(_Parametric):
    """Shifted negative binomial durations: d - 1 ~ NB(n, p) (``scipy.stats.nbinom``; Yu 2010 §4.1.1;
    mhsmm ``"nbinom"``). Mean n (1 - p) / p + 1 before truncation.

    Parameters
    ----------
    n : array-like of float64, shape (K,), optional
        Size r > 0 (real-valued).
    p : array-like of float64, shape (K,), optional
        0 < p <= 1.

    Notes
    -----
    M-step: numerical maximisation of Q over (log n, logit p) from the moment estimate.
    """

    _param_names = ("n", "p")
    _ranges = {"n": (0.0, np.inf, True), "p": (0.0, 1.0, True)}

    def __init__(self, n=None, p=None):
        super().__init__(n=n, p=p)

    @staticmethod
    def _log_f(values, d):
        n, p = values
        k = d - 1
        return (special.gammaln(k + n) - special.gammaln(n) - special.gammaln(k + 1)
                + special.xlogy(n, p) + special.xlog1py(k, -p))

    def _start(self, w):
        m, v = _weighted_moments(w, shift=1.0)
        m = max(m, 1e-6)
        if v > m * (1 + 1e-6):
            r = m * m / (v - m)
        else:
            r = 1e4
        return (np.array([r]), np.array([r / (r + m)]))

    @staticmethod
    def _to_theta(values):
        r = max(float(values[0][0]), 1e-12)
        p = min(max(float(values[1][0]), 1e-12), 1 - 1e-15)
        return np.array([math.log(r), math.log(p) - math.log1p(-p)])

    @staticmethod
    def _from_theta(theta):
        return (np.array([math.exp(np.clip(theta[0], -30, 30))]), np.array([special.expit(theta[1])]))

    def initialize(self, n_states, max_duration, means, random_state=None):
        m = np.maximum(np.asarray(means, dtype=np.float64) - 1.0, 1e-3)
        self.n = np.full(m.shape, 2.0)
        self.p = self.n / (self.n + m)
        return self


def _log_diff(lo_hi, lo_lo, up_hi, up_lo):
    """log(F(d) - F(d-1)) from lower-tail (F) and upper-tail (1 - F) values at d and d - 1, using
    the tail in which the difference is computed without cancellation."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(lo_hi < 0.5, np.log(lo_hi - lo_lo), np.log(up_lo - up_hi))
    return np.where(np.isnan(out), _NEG_INF, out)


def _log_interval_normal(z_hi, z_lo):
    """log(Φ(z_hi) - Φ(z_lo)) accurate in both tails (log-space normal cdf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = special.log_ndtr(z_hi) + np.log1p(-np.exp(special.log_ndtr(z_lo)
                                                          - special.log_ndtr(z_hi)))
        upper = special.log_ndtr(-z_lo) + np.log1p(-np.exp(special.log_ndtr(-z_hi)
                                                           - special.log_ndtr(-z_lo)))
        out = np.where(z_hi < 0, lower, upper)
    return np.where(np.isnan(out), _NEG_INF, out)


class Gamma(_Parametric):
    """Discretised gamma durations p_j(d) ∝ F(d) - F(d - 1), F the Gamma(shape, scale) cdf
    (Yu 2010 §4.1.1; Levinson 1986 used the continuous gamma).

    Parameters
    ----------
    shape, scale : array-like of float64, shape (K,), optional
        Both > 0.

    Notes
    -----
    M-step: numerical maximisation of Q over (log shape, log scale) from the moment estimate of
    d - 1/2.
    """

    _param_names = ("shape", "scale")
    _ranges = {"shape": (0.0, np.inf, True), "scale": (0.0, np.inf, True)}

    def __init__(self, shape=None, scale=None):
        super().__init__(shape=shape, scale=scale)

    @staticmethod
    def _log_f(values, d):
        a, s = values
        x_hi, x_lo = d / s, (d - 1) / s
        return _log_diff(special.gammainc(a, x_hi), special.gammainc(a, x_lo),
                         special.gammaincc(a, x_hi), special.gammaincc(a, x_lo))

    def _start(self, w):
        m, v = _weighted_moments(w, shift=0.5)
        v = max(v, 1.0 / 12.0)
        return (np.array([m * m / v]), np.array([v / m]))

    @staticmethod
    def _to_theta(values):
        return np.log([float(values[0][0]), float(values[1][0])])

    @staticmethod
    def _from_theta(theta):
        t = np.clip(theta, -30, 30)
        return (np.array([math.exp(t[0])]), np.array([math.exp(t[1])]))

    def initialize(self, n_states, max_duration, means, random_state=None):
        m = np.maximum(np.asarray(means, dtype=np.float64) - 0.5, 0.5)
        self.shape = np.full(m.shape, 2.0)
        self.scale = m / 2.0
        return self


class LogNormal(_Parametric):
    """Discretised log-normal durations p_j(d) ∝ F(d) - F(d - 1), F the cdf of exp(N(mu, sigma²))
    (Yu 2010 §4.1).

    Parameters
    ----------
    mu : array-like of float64, shape (K,), optional
        Mean of the log duration.
    sigma : array-like of float64, shape (K,), optional
        Standard deviation of the log duration, > 0.

    Notes
    -----
    M-step: numerical maximisation of Q over (mu, log sigma) from the moments of log(d - 1/2).
    """

    _param_names = ("mu", "sigma")
    _ranges = {"mu": (-np.inf, np.inf, False), "sigma": (0.0, np.inf, True)}

    def __init__(self, mu=None, sigma=None):
        super().__init__(mu=mu, sigma=sigma)

    def _validate(self):
        self.mu = np.asarray(self.mu, dtype=np.float64)
        if not np.all(np.isfinite(self.mu)):
            raise ValueError("LogNormal parameter `mu` must be finite")
        super()._validate()

    @staticmethod
    def _log_f(values, d):
        mu, sigma = values
        with np.errstate(divide="ignore"):
            z_lo = (np.log(d - 1) - mu) / sigma
        return _log_interval_normal((np.log(d) - mu) / sigma, z_lo)

    def _start(self, w):
        m, v = _weighted_moments(w, shift=0.5, transform=np.log)
        return (np.array([m]), np.array([math.sqrt(max(v, 1e-4))]))

    @staticmethod
    def _to_theta(values):
        return np.array([float(values[0][0]), math.log(float(values[1][0]))])

    @staticmethod
    def _from_theta(theta):
        # bounded so that exp(mu) and the cdf stay representable (a flat histogram drives the
        # truncated-lognormal MLE towards mu -> inf)
        return (np.array([float(np.clip(theta[0], -30.0, 30.0))]),
                np.array([math.exp(np.clip(theta[1], -7.0, 3.5))]))

    def initialize(self, n_states, max_duration, means, random_state=None):
        m = np.maximum(np.asarray(means, dtype=np.float64) - 0.5, 0.5)
        self.sigma = np.full(m.shape, 0.5)
        self.mu = np.log(m) - 0.125
        return self


#: Families selectable by name in :class:`structlearn.HiddenSemiMarkovModel` (``duration=...``).
DURATION_FAMILIES = {
    "nonparametric": NonParametric,
    "poisson": Poisson,
    "negative_binomial": NegativeBinomial,
    "nbinom": NegativeBinomial,
    "geometric": Geometric,
    "gamma": Gamma,
    "lognormal": LogNormal,
}


def make_duration(spec):
    """A fresh duration object from a family name (see ``DURATION_FAMILIES``) or a copy of an object.

    Raises
    ------
    ValueError
        Unknown family name, or an object lacking ``log_pmf`` / ``fit``.
    """
    return make_family(spec, DURATION_FAMILIES, "duration", ("log_pmf", "fit", "n_parameters"))
