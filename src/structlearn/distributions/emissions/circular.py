r"""Circular emissions of the HSMM: the von Mises law of an angle (Mardia & Jupp 2000, "Directional
Statistics", §3.5.4, §5.3; Yu 2010, "Hidden semi-Markov models", §4.2: any parametric b_j)."""
import numpy as np
from scipy import optimize, special
from sklearn.utils import check_random_state

from ._base import EmissionDistribution, _as_2d, _weights_for_labels

__all__ = ["VonMises", "mean_resultant_inverse"]

_LOG_2PI = np.log(2 * np.pi)


def _a1(kappa):
    """A(κ) = I_1(κ) / I_0(κ) (exponentially scaled Bessel functions: no overflow)."""
    return special.i1e(kappa) / special.i0e(kappa)


def mean_resultant_inverse(rbar, max_kappa=1e6):
    """κ solving A(κ) = I_1(κ)/I_0(κ) = R̄ (the von Mises MLE of the concentration, Mardia & Jupp
    §5.3.1), by ``scipy.optimize.brentq`` on [0, max_kappa]; 0 for R̄ <= 0, ``max_kappa`` when R̄ is
    beyond A(max_kappa)."""
    rbar = float(rbar)
    if rbar <= 0:
        return 0.0
    if rbar >= _a1(max_kappa):
        return float(max_kappa)
    return float(optimize.brentq(lambda k: _a1(k) - rbar, 0.0, max_kappa, xtol=1e-14, rtol=1e-14))


class VonMises(EmissionDistribution):
    r"""Von Mises emissions of an angle: b_j(x) = exp(κ_j cos(x - μ_j)) / (2π I_0(κ_j)).

    Parameters
    ----------
    mu : array-like of float64, shape (K,), optional
        Mean directions (radians, any real; reported in (-π, π] after ``fit``).
    kappa : array-like of float64, shape (K,), optional
        Concentrations κ_j >= 0 (κ = 0: uniform on the circle).
    max_kappa : float, default 1e6
        Upper bound of the fitted concentrations (a state whose angles coincide).

    Notes
    -----
    X is (N, 1) angles in radians (NaN = missing). ``fit`` is the exact weighted MLE: μ = atan2(S, C),
    κ = A^{-1}(R̄) with C = Σ_t w_t cos x_t, S = Σ_t w_t sin x_t, R̄ = √(C² + S²) / Σ_t w_t
    (Mardia & Jupp 2000 §5.3.1; :func:`mean_resultant_inverse`). Cost O(N·K).
    """

    _param_names = ("mu", "kappa")

    def __init__(self, mu=None, kappa=None, max_kappa=1e6):
        self.max_kappa = float(max_kappa)
        self._set_params(mu=mu, kappa=kappa)

    def _config(self):
        return {"max_kappa": self.max_kappa}

    def _validate(self):
        self.mu, self.kappa = np.atleast_1d(self.mu), np.atleast_1d(self.kappa)
        if self.mu.ndim != 1 or self.mu.shape != self.kappa.shape:
            raise ValueError(f"`mu` and `kappa` must both have shape (K,); got {self.mu.shape} and "
                             f"{self.kappa.shape}")
        if not np.all(np.isfinite(self.mu)):
            raise ValueError("von Mises `mu` must be finite")
        if not np.all(np.isfinite(self.kappa)) or np.any(self.kappa < 0):
            raise ValueError("von Mises `kappa` must be finite and non-negative")

    def check_X(self, X):
        X = _as_2d(X)
        if X.shape[1] != 1:
            raise ValueError(f"von Mises emissions take one column of angles; got X of shape {X.shape}; "
                             f"use MultiStream for several angles")
        return X

    def log_density(self, X):
        """κ cos(x - μ) - log(2π I_0(κ)), shape (N, K); 0 for missing rows."""
        self._require()
        x = X[:, 0]
        obs = ~np.isnan(x)
        k = self.kappa
        # log I_0(κ) = log i0e(κ) + κ
        out = k[None] * (np.cos(np.where(obs, x, 0.0)[:, None] - self.mu[None]) - 1.0) \
            - (_LOG_2PI + np.log(special.i0e(k)))[None]
        out[~obs] = 0.0
        return out

    def fit(self, X, weights):
        """Exact weighted MLE (states without weight keep their parameters)."""
        x = X[:, 0]
        obs = ~np.isnan(x)
        w = weights[obs]
        c, s = w.T @ np.cos(x[obs]), w.T @ np.sin(x[obs])
        tot = w.sum(axis=0)
        K = weights.shape[1]
        mu = self.mu.copy() if self.mu is not None else np.zeros(K)
        kappa = self.kappa.copy() if self.kappa is not None else np.zeros(K)
        for k in range(K):
            if tot[k] > 0:
                mu[k] = np.arctan2(s[k], c[k])
                kappa[k] = mean_resultant_inverse(np.hypot(c[k], s[k]) / tot[k], self.max_kappa)
        self.mu, self.kappa = mu, kappa
        return self

    def sample(self, states, random_state=None):
        """Angles in [-π, π), shape (n, 1)."""
        rng = check_random_state(random_state)
        s = np.asarray(states)
        return rng.vonmises(self.mu[s], self.kappa[s])[:, None]

    def initialize(self, X, n_states, labels, random_state=None):
        self.mu = np.zeros(n_states)
        self.kappa = np.zeros(n_states)
        self.fit(X, _weights_for_labels(X, n_states, labels))
        self.kappa = np.minimum(self.kappa, 100.0)
        return self

    def n_parameters(self):
        """2K."""
        return 2 * self.mu.shape[0]
