r"""Parametric duration families of the HSMM: shifted Poisson, geometric, negative binomial, discretised
gamma, log-normal and Gaussian (Yu 2010, "Hidden semi-Markov models", §4.1).

Each family is truncated at the maximum duration D and renormalised, and carries a shift / minimum
duration s_j (:class:`ShiftMixin`, R mhsmm's ``shift``; a shifted geometric is no longer the HMM's law):
p_j(d) ∝ f_j(d - s_j) for d > s_j. Parameters are float64 arrays of shape (K,). The M-step maximises
Q = Σ_d n_d log p(d) - F log μ (see :mod:`structlearn.distributions.durations`) by a closed form where one exists,
otherwise by damped Newton steps on finite-difference derivatives in unconstrained coordinates, keeping
the best of the start, the current parameters and the optimum (never decreasing Q).
"""
import math

import numpy as np
from scipy import special

from ._base import (_NEG_INF, _TAIL_EPS, DurationDistribution, ShiftMixin, _check_positive_int, _checked_log_pmf,
                    _newton_maximize, _normalise_log, _q_value, _weighted_moments)

__all__ = ["Poisson", "Geometric", "NegativeBinomial", "Gamma", "LogNormal", "DiscreteGaussian"]


class _Parametric(ShiftMixin, DurationDistribution):
    """Parametric family: ``_log_f(params, d)`` untruncated log-masses with params broadcast over d.

    Subclasses define ``_param_names``, ``_log_f(values, d)`` where values is a tuple of (K,) or
    scalar arrays and d a (D, 1) or (D, K) array of durations >= 1, ``_to_theta``/``_from_theta``
    (unconstrained coordinates of one state), ``_start`` (moment / closed-form estimate) and
    ``_closed_form`` (True when ``_start`` is the exact MLE of an untruncated, uncensored fit).
    ``_shiftable = False`` removes the shift.
    """

    _closed_form = False
    _shiftable = True

    def __init__(self, shift=None, estimate_shift=False, **values):
        self._init_shift(shift, estimate_shift)
        for n in self._param_names:
            v = values.get(n)
            setattr(self, n, None if v is None else np.atleast_1d(np.array(v, dtype=np.float64)))
        if self._is_set():
            self._validate()

    def _config(self):
        return super()._config() if self._shiftable else {}

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
        self._validate_shift()

    def _values(self, k=None):
        if k is None:
            return tuple(getattr(self, n) for n in self._param_names)
        return tuple(getattr(self, n)[k:k + 1] for n in self._param_names)

    def log_pmf(self, max_duration):
        """Truncated, renormalised (and shifted) log p_j(d), shape (D, K), float64."""
        self._require()
        D = _check_positive_int(max_duration, "max_duration")
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        if self.shift is None or not np.any(self.shift):
            lf = self._log_f(self._values(), d)
        else:
            dd = d - np.minimum(self.shift, D - 1)[None, :]  # a shift >= D is cut to D - 1
            ok = dd >= 1
            with np.errstate(divide="ignore", invalid="ignore"):
                lf = np.where(ok, self._log_f(self._values(), np.where(ok, dd, 1.0)), _NEG_INF)
        return _checked_log_pmf(_normalise_log(lf), D, ~self._absorbing())

    def _absorbing(self):
        """(K,) bool: the states whose law never ends (no mass on any finite d; ``log_pmf`` all -inf)."""
        return np.zeros(self.n_states, dtype=bool)

    def _log_pmf_one(self, values, D, s=0):
        d = np.arange(1, D - s + 1, dtype=np.float64)[:, None]
        lp = _normalise_log(self._log_f(values, d))[:, 0]
        return lp if s == 0 else self._place(lp, s, D)

    def n_parameters(self, max_duration):
        """Free parameters: one per parameter name and state (K or 2K), + K with ``estimate_shift``."""
        return len(self._param_names) * self.n_states + self._n_shift_parameters()

    def _tail(self, values, D):
        """Untruncated mass beyond D (for one state)."""
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        return max(0.0, 1.0 - float(np.exp(special.logsumexp(self._log_f(values, d)))))

    def fit(self, counts, left_weight=None):
        """Weighted MLE of Q = Σ_d n_d log p(d) - F log μ per state (module docstring).

        A state whose counts sum to zero keeps its parameters. Never decreases Q: the result is the
        best of the closed-form / moment start, the current parameters and a numerical optimum (for
        each candidate shift when ``estimate_shift``).
        """
        counts = np.asarray(counts, dtype=np.float64)
        D, K = counts.shape
        left = np.zeros(K) if left_weight is None else np.asarray(left_weight, dtype=np.float64)
        have = self._is_set()
        cur_shift = self._shift_array() if have else np.zeros(K, dtype=np.int64)
        new = [np.empty(K) for _ in self._param_names]
        new_shift = cur_shift.astype(np.float64).copy()
        for k in range(K):
            n = np.maximum(counts[:, k], 0.0)
            N = n.sum()
            F = max(0.0, float(left[k]))
            cur = self._values(k) if have else None
            if N <= 0:
                vals = cur if cur is not None else self._start(np.ones(D) / D)
            else:
                def fit_at(s, n=n, F=F, cur=cur, k=k):
                    c = cur if (cur is not None and s == cur_shift[k]) else None
                    vals_s, q_s = self._fit_one(self._clean_counts(n, s), F, D, c, s)
                    return q_s, vals_s

                if self._shiftable:
                    _, vals, new_shift[k] = self._best_shift(n, k, fit_at)
                else:
                    vals = fit_at(0)[1]
            for i, v in enumerate(vals):
                new[i][k] = float(np.asarray(v).ravel()[0])
        for name, v in zip(self._param_names, new):
            setattr(self, name, v)
        if self._shiftable and (self.shift is not None or np.any(new_shift)):
            self.shift = new_shift
        return self

    def _fit_one(self, n, F, D, cur, s=0):
        """(values, Q) of one state from counts n (D,) that are zero at d <= s, under shift s."""

        def q_of(values):
            try:
                return _q_value(self._log_pmf_one(values, D, s), n, F)
            except (ValueError, FloatingPointError):
                return _NEG_INF

        start = self._start(n[s:])
        if self._closed_form and F == 0 and self._tail(start, D - s) < _TAIL_EPS:
            return start, q_of(start)
        N = n.sum()
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
            return cand, q
        return cands[best], scores[best]

    def _reset_shift(self, n_states):
        if self._shiftable:
            self.shift = np.zeros(n_states)

    def initialize(self, n_states, max_duration, means, random_state=None):  # pragma: no cover
        raise NotImplementedError


class Poisson(_Parametric):
    """Shifted Poisson durations: d - 1 ~ Poisson(λ), d >= 1 (Yu 2010 §4.1; mhsmm ``"poisson"``, shift 1).

    Parameters
    ----------
    lam : array-like of float64, shape (K,), optional
        λ_j >= 0 (mean duration λ_j + 1 before truncation).
    shift : array-like of float64, shape (K,), optional
        Whole numbers s_j >= 0: p_j(d) ∝ f_j(d - s_j) (:class:`ShiftMixin`); default 0.
    estimate_shift : bool, default False
        Estimate s_j in the M-step (R mhsmm's ``shift``).

    Notes
    -----
    M-step: λ = Σ_d n_d (d - 1) / Σ_d n_d when truncation at D is negligible and F = 0, otherwise
    numerical maximisation of Q from that start.
    """

    _param_names = ("lam",)
    _ranges = {"lam": (0.0, np.inf, False)}
    _closed_form = True

    def __init__(self, lam=None, shift=None, estimate_shift=False):
        super().__init__(shift, estimate_shift, lam=lam)

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
        self.shift = None
        self.lam = np.maximum(np.asarray(means, dtype=np.float64) - 1.0, 1e-3)
        return self


class Geometric(_Parametric):
    """Geometric durations p_j(d) = p (1 - p)^(d - 1), d >= 1: the implicit duration of an HMM with
    self-transition probability 1 - p (Yu 2010 §1, §4.6).

    Parameters
    ----------
    p : array-like of float64, shape (K,), optional
        Ending probability per step, 0 <= p <= 1. p = 0 is an absorbing state: it never leaves, so
        p_j(d) = 0 for every d (``log_pmf`` is -inf on 1..D, the one column without mass) and its
        survivor function is S_j(d) = 1 for every d (:func:`~structlearn.distributions.durations.censoring.log_survivor`).
        Such a state can only be the right-censored last segment of a sequence (``censoring="right"``);
        under ``"none"`` every sequence ending in it has probability 0, and ``"both"`` refuses it (no
        residual-life law: infinite mean). EM keeps p = 0 (no segment of it ever ends).
    shift : array-like of float64, shape (K,), optional
        Minimum duration minus one s_j: p_j(d) = p (1 - p)^(d - s_j - 1) for d > s_j (R mhsmm's
        ``shift``). A shifted geometric is no longer memoryless, so an HSMM with one runs on the
        semi-Markov structure (never the HMM shortcut).
    estimate_shift : bool, default False
        Estimate s_j in the M-step (the best integer shift below the smallest duration with mass).

    Notes
    -----
    M-step: p = Σ n_d / Σ (d - s) n_d when truncation is negligible and F = 0 (with right-censored
    counts completed by :func:`complete_counts` this is the Baum–Welch update of a self-transition).
    """

    _param_names = ("p",)
    _ranges = {"p": (0.0, 1.0, False)}
    _closed_form = True

    def __init__(self, p=None, shift=None, estimate_shift=False):
        super().__init__(shift=shift, estimate_shift=estimate_shift, p=p)

    def _absorbing(self):
        return np.asarray(self.p) == 0

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
        self.shift = None
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
    shift : array-like of float64, shape (K,), optional
        Whole numbers s_j >= 0: p_j(d) ∝ f_j(d - s_j) (:class:`ShiftMixin`); default 0.
    estimate_shift : bool, default False
        Estimate s_j in the M-step (R mhsmm's ``shift``).

    Notes
    -----
    M-step: numerical maximisation of Q over (log n, logit p) from the moment estimate.
    """

    _param_names = ("n", "p")
    _ranges = {"n": (0.0, np.inf, True), "p": (0.0, 1.0, True)}

    def __init__(self, n=None, p=None, shift=None, estimate_shift=False):
        super().__init__(shift, estimate_shift, n=n, p=p)

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
        self.shift = None
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
    shift : array-like of float64, shape (K,), optional
        Whole numbers s_j >= 0: p_j(d) ∝ f_j(d - s_j) (:class:`ShiftMixin`); default 0.
    estimate_shift : bool, default False
        Estimate s_j in the M-step (R mhsmm's ``shift``).

    Notes
    -----
    M-step: numerical maximisation of Q over (log shape, log scale) from the moment estimate of
    d - 1/2.
    """

    _param_names = ("shape", "scale")
    _ranges = {"shape": (0.0, np.inf, True), "scale": (0.0, np.inf, True)}

    def __init__(self, shape=None, scale=None, shift=None, estimate_shift=False):
        super().__init__(shift, estimate_shift, shape=shape, scale=scale)

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
        self.shift = None
        m = np.maximum(np.asarray(means, dtype=np.float64) - 0.5, 0.5)
        self.shape = np.full(m.shape, 2.0)
        self.scale = m / 2.0
        return self


class _MuSigma(_Parametric):
    """A family with per-state location ``mu`` (any finite value) and scale ``sigma`` > 0."""

    _param_names = ("mu", "sigma")
    _ranges = {"mu": (-np.inf, np.inf, False), "sigma": (0.0, np.inf, True)}

    def __init__(self, mu=None, sigma=None, shift=None, estimate_shift=False):
        super().__init__(shift, estimate_shift, mu=mu, sigma=sigma)

    def _validate(self):
        self.mu = np.asarray(self.mu, dtype=np.float64)
        if not np.all(np.isfinite(self.mu)):
            raise ValueError(f"{type(self).__name__} parameter `mu` must be finite")
        super()._validate()


class LogNormal(_MuSigma):
    """Discretised log-normal durations p_j(d) ∝ F(d) - F(d - 1), F the cdf of exp(N(mu, sigma²))
    (Yu 2010 §4.1).

    Parameters
    ----------
    mu : array-like of float64, shape (K,), optional
        Mean of the log duration.
    sigma : array-like of float64, shape (K,), optional
        Standard deviation of the log duration, > 0.
    shift : array-like of float64, shape (K,), optional
        Whole numbers s_j >= 0: p_j(d) ∝ f_j(d - s_j) (:class:`ShiftMixin`); default 0.
    estimate_shift : bool, default False
        Estimate s_j in the M-step (R mhsmm's ``shift``).

    Notes
    -----
    M-step: numerical maximisation of Q over (mu, log sigma) from the moments of log(d - 1/2).
    """

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
        self.shift = None
        m = np.maximum(np.asarray(means, dtype=np.float64) - 0.5, 0.5)
        self.sigma = np.full(m.shape, 0.5)
        self.mu = np.log(m) - 0.125
        return self



class DiscreteGaussian(_MuSigma):
    r"""Discretised Gaussian durations p_j(d) ∝ Φ((d + ½ - μ_j)/σ_j) - Φ((d - ½ - μ_j)/σ_j), d >= 1
    (a normal law rounded to the nearest integer, truncated to 1..D; Yu 2010 §4.1).

    Parameters
    ----------
    mu : array-like of float64, shape (K,), optional
        Location (the mean duration when the mass below ½ and above D is negligible).
    sigma : array-like of float64, shape (K,), optional
        Scale, > 0.
    shift : array-like of float64, shape (K,), optional
        Whole numbers s_j >= 0: p_j(d) ∝ f_j(d - s_j) (:class:`ShiftMixin`); default 0.
    estimate_shift : bool, default False
        Estimate s_j in the M-step (R mhsmm's ``shift``).

    Notes
    -----
    log-masses in log space on both tails (``scipy.special.log_ndtr``), so a far tail is finite.
    M-step: numerical maximisation of Q over (μ, log σ) from the weighted mean and standard
    deviation of d (with Sheppard's correction σ² - 1/12). Cost O(D) per evaluation of Q.
    """

    @staticmethod
    def _log_f(values, d):
        mu, sigma = values
        return _log_interval_normal((d + 0.5 - mu) / sigma, (d - 0.5 - mu) / sigma)

    def _start(self, w):
        m, v = _weighted_moments(w)
        return (np.array([m]), np.array([math.sqrt(max(v - 1.0 / 12.0, 1e-2))]))

    @staticmethod
    def _to_theta(values):
        return np.array([float(values[0][0]), math.log(float(values[1][0]))])

    @staticmethod
    def _from_theta(theta):
        return (np.array([float(np.clip(theta[0], -1e6, 1e6))]),
                np.array([math.exp(np.clip(theta[1], -7.0, 12.0))]))

    def initialize(self, n_states, max_duration, means, random_state=None):
        self.shift = None
        m = np.maximum(np.asarray(means, dtype=np.float64), 1.0)
        self.mu = m.copy()
        self.sigma = np.maximum(0.5 * m, 1.0)
        return self
