r"""Segmental observation model of the general HSMM: a polynomial trajectory in time-in-segment per state
(Yu 2010, "Hidden semi-Markov models", §4.2 "segmental model"; Ostendorf, Digalakis & Kimball 1996, "From
HMMs to segment models", §3.2 polynomial trajectory models).

A segment of state j and duration d that starts at row s generates o_{s+u} = β_j · φ(u) + ε_u,
ε_u ~ N(0, σ_j²) independent, u = 0..d-1, φ(u) = (1, u, …, u^P): the segment emission is

.. math:: \log b_{(j,d)}(o_{s:s+d-1}) = \sum_{u<d} \log N(o_{s+u}; β_j · φ(u), σ_j^2).

Protocol of :mod:`structlearn.hsmm.segment_emissions` (``GeneralHSMM(segment_emission=...)``):
``log_segment``, ``initialize``, ``fit`` (weighted least squares over the segment posteriors η),
``sample``, ``n_parameters``, ``check_X``, ``check``. NaN observations are missing (log density 0,
no weight in ``fit``).
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...utils.validation import as_real_float64

__all__ = ["PolynomialSegments"]

_LOG_2PI = np.log(2 * np.pi)


class PolynomialSegments:
    r"""Polynomial regression of the observations on time-in-segment, per state (module docstring).

    Parameters
    ----------
    degree : int, default 1
        P, the polynomial degree (0: a constant level per state, i.e. Gaussian emissions).
    coef : array-like of float64, shape (M, P + 1), optional
        β_j (intercept first).
    variances : array-like of float64, shape (M,), optional
        σ_j² > 0.
    min_var : float, default 1e-6
        Lower bound of the fitted variances.

    Notes
    -----
    ``log_segment`` costs O(T·D²·M) time (every window of every duration) and O(T·D·M) memory. ``fit`` is
    the exact weighted MLE given η_t(j, d) = P(a (j, d)-segment ends at row t | o): β_j solves the
    weighted normal equations Σ_{t,d} η_t(j, d) Σ_u φ(u) φ(u)ᵀ β_j = Σ_{t,d} η_t(j, d) Σ_u φ(u) o_{t-d+1+u}
    (weighted least squares), then σ_j² is the weighted mean squared residual. Time O(T·D²·(M + P²)).
    """

    def __init__(self, degree=1, coef=None, variances=None, min_var=1e-6):
        if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 0:
            raise ValueError(f"`degree` must be an integer >= 0; got {degree!r}")
        self.degree = int(degree)
        self.min_var = float(min_var)
        self.coef = None if coef is None else np.array(coef, dtype=np.float64)
        self.variances = None if variances is None else np.array(variances, dtype=np.float64)
        if self.coef is not None and self.variances is not None:
            self._validate()

    def __repr__(self):
        return (f"PolynomialSegments(degree={self.degree}, coef={self.coef!r}, "
                f"variances={self.variances!r})")

    def _validate(self):
        P = self.degree + 1
        if self.coef.ndim != 2 or self.coef.shape[1] != P:
            raise ValueError(f"`coef` must have shape (M, {P}) (degree={self.degree}); got {self.coef.shape}")
        if self.variances.shape != (self.coef.shape[0],):
            raise ValueError(f"`variances` must have shape ({self.coef.shape[0]},); got {self.variances.shape}")
        if not np.all(np.isfinite(self.coef)):
            raise ValueError("`coef` must be finite")
        if not np.all(np.isfinite(self.variances)) or np.any(self.variances <= 0):
            raise ValueError("`variances` must be finite and positive")

    @property
    def n_states(self):
        return None if self.coef is None else int(self.coef.shape[0])

    def check(self, n_states, max_duration):
        """``ValueError`` unless parameters for ``n_states`` states are set."""
        if self.coef is None or self.variances is None:
            raise ValueError("the polynomial segment model has no parameters: set `coef` and `variances` or "
                             "let fit initialise them ('e' in init_params)")
        self._validate()
        self._max_duration = max_duration
        if self.coef.shape[0] != n_states:
            raise ValueError(f"`coef` has {self.coef.shape[0]} rows but the model has {n_states} states")

    def check_X(self, X):
        """X as a validated (N, 1) float64 array (NaN = missing; infinite values refused)."""
        X = as_real_float64(X)
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2 or X.shape[1] != 1:
            raise ValueError(f"polynomial segment emissions take one column; got X of shape {X.shape}")
        if np.any(np.isinf(X)):
            raise ValueError("`X` contains infinite values; use NaN for missing observations")
        return X

    def _basis(self, D):
        return np.vander(np.arange(D, dtype=np.float64), self.degree + 1, increasing=True)  # (D, P + 1)

    def _windows(self, x, d):
        """Windows (T - d + 1, d) of x ending at rows d - 1..T - 1, their mask and zero-filled values."""
        W = sliding_window_view(x, d)
        mask = ~np.isnan(W)
        return mask, np.where(mask, W, 0.0)

    def log_segment(self, X_seq):
        """log b_(j,d)(o_{e-d+1:e}), (T, D, M) float64 (0 where d > e + 1)."""
        x = self.check_X(X_seq)[:, 0]
        T = x.shape[0]
        M = self.coef.shape[0]
        D = self._max_duration
        mean = self._basis(D) @ self.coef.T  # (D, M): β_j · φ(u)
        out = np.zeros((T, D, M))
        lv = np.log(self.variances)
        for d in range(1, min(D, T) + 1):
            mask, W = self._windows(x, d)
            r = (W[:, :, None] - mean[None, :d, :]) ** 2 * mask[:, :, None]  # (n, d, M)
            nobs = mask.sum(axis=1)[:, None]
            out[d - 1:, d - 1, :] = -0.5 * (r.sum(axis=1) / self.variances[None] + nobs * (_LOG_2PI + lv[None]))
        return out

    def initialize(self, X, lengths, n_states, max_duration, rng):
        """Constant trajectories at spread quantiles of the data (slopes 0), the data variance."""
        x = self.check_X(X)[:, 0]
        obs = x[~np.isnan(x)]
        self._max_duration = int(max_duration)
        q = np.quantile(obs, (np.arange(n_states) + 0.5) / n_states) if obs.size else np.zeros(n_states)
        sd = float(np.std(obs)) if obs.size > 1 else 1.0
        self.coef = np.zeros((n_states, self.degree + 1))
        self.coef[:, 0] = q + 0.05 * sd * rng.standard_normal(n_states)
        self.variances = np.full(n_states, max(sd * sd, self.min_var))
        return self

    def fit(self, X, lengths, eta):
        """Weighted least squares from η (N, M, D) (class Notes); states without mass keep their values."""
        x = self.check_X(X)[:, 0]
        M, D = eta.shape[1], eta.shape[2]
        self._max_duration = D
        Phi = self._basis(D)
        P = Phi.shape[1]
        A = np.zeros((M, P, P))
        b = np.zeros((M, P))
        cnt = np.zeros(M)
        o = 0
        parts = []
        for T in np.asarray(lengths, dtype=np.int64):
            T = int(T)
            xs = x[o:o + T]
            for d in range(1, min(D, T) + 1):
                mask, W = self._windows(xs, d)
                E = eta[o + d - 1:o + T, :, d - 1]  # (n, M)
                cu = E.T @ mask  # (M, d)
                A += np.einsum("md,dp,dq->mpq", cu, Phi[:d], Phi[:d])
                b += (E.T @ W) @ Phi[:d]
                cnt += cu.sum(axis=1)
                parts.append((E, mask, W, d))
            o += T
        coef = self.coef.copy() if self.coef is not None else np.zeros((M, P))
        var = self.variances.copy() if self.variances is not None else np.ones(M)
        ok = cnt > 0
        for j in np.flatnonzero(ok):
            coef[j] = np.linalg.lstsq(A[j], b[j], rcond=None)[0]
        mean = Phi @ coef.T  # (D, M)
        ss = np.zeros(M)
        for E, mask, W, d in parts:
            r = ((W[:, :, None] - mean[None, :d, :]) ** 2 * mask[:, :, None]).sum(axis=1)  # (n, M)
            ss += (E * r).sum(axis=0)
        var[ok] = np.maximum(ss[ok] / cnt[ok], self.min_var)
        self.coef, self.variances = coef, var
        return self

    def sample(self, state, duration, rng):
        """One segment of ``duration`` observations of state ``state``, float64 (duration, 1)."""
        mean = self._basis(duration) @ self.coef[state]
        return (mean + np.sqrt(self.variances[state]) * rng.standard_normal(duration))[:, None]

    def n_parameters(self):
        """Free parameters M·(P + 2)."""
        return int(self.coef.size + self.variances.size)

    @property
    def _max_duration(self):
        return getattr(self, "_D", None) or 1

    @_max_duration.setter
    def _max_duration(self, value):
        self._D = int(value)
