"""Gaussian emission families of the HSMM: univariate, multivariate (full / diagonal) and mixtures
(Yu 2010, "Hidden semi-Markov models", §4.2; Rabiner 1989 eqs. 49-54)."""
import numpy as np
from scipy import special
from sklearn.utils import check_random_state

from structlearn.distributions.emissions._base import _LOG_2PI, EmissionDistribution, _as_2d, _check_covariance_type

__all__ = ["Gaussian", "MultivariateGaussian", "GaussianMixture"]


def _weighted_mean_cov(X, w, min_covar, diag):
    """Weighted mean and covariance of complete rows X (n, F) with weights w (n,)."""
    tot = w.sum()
    mu = (w @ X) / tot
    Xc = X - mu
    if diag:
        var = (w @ (Xc * Xc)) / tot
        return mu, np.maximum(var, min_covar)
    cov = (Xc.T * w) @ Xc / tot
    return mu, _clip_eig(cov, min_covar)


def _clip_eig(cov, floor):
    cov = 0.5 * (cov + cov.T)
    vals, vecs = np.linalg.eigh(cov)
    if vals.min() >= floor:
        return cov
    vals = np.maximum(vals, floor)
    return (vecs * vals) @ vecs.T


def _diag_logpdf(X, means, var):
    """(N, K) log N(x; μ_k, diag var_k) over observed features of X (NaN marginalised)."""
    obs = ~np.isnan(X)
    x = np.where(obs, X, 0.0)
    out = np.zeros((X.shape[0], means.shape[0]))
    for k in range(means.shape[0]):
        t = -0.5 * ((x - means[k]) ** 2 / var[k] + np.log(var[k]) + _LOG_2PI)
        out[:, k] = np.where(obs, t, 0.0).sum(axis=1)
    return out


def _full_logpdf(X, means, covars):
    """(N, K) log N(x; μ_k, Σ_k) for complete rows; NaN rows give 0."""
    miss = np.isnan(X)
    rows_all = miss.all(axis=1)
    partial = miss.any(axis=1) & ~rows_all
    if partial.any():
        r = int(np.flatnonzero(partial)[0])
        raise ValueError(f"row {r} of X is partly missing; full-covariance emissions need complete "
                         f"rows (or all-NaN rows for a missing observation); use "
                         f"covariance_type='diag' to marginalise missing features")
    N, F = X.shape
    out = np.zeros((N, means.shape[0]))
    ok = ~rows_all
    Xo = X[ok]
    for k in range(means.shape[0]):
        L = np.linalg.cholesky(covars[k])
        z = np.linalg.solve(L, (Xo - means[k]).T)
        logdet = 2 * np.log(np.diag(L)).sum()
        out[ok, k] = -0.5 * ((z * z).sum(axis=0) + logdet + F * _LOG_2PI)
    return out


class Gaussian(EmissionDistribution):
    """Univariate Gaussian emissions b_j(x) = N(x; μ_j, σ²_j) (Yu 2010 §4.2).

    Parameters
    ----------
    means, variances : array-like of float64, shape (K,), optional
        Variances > 0.
    min_covar : float, default 1e-3
        Lower bound on fitted variances.

    ``fit``: weighted mean and variance (variance clipped at ``min_covar``).
    """

    _param_names = ("means", "variances")

    def __init__(self, means=None, variances=None, min_covar=1e-3):
        self.means = None if means is None else np.array(means, dtype=np.float64).ravel()
        self.variances = None if variances is None else np.array(variances, dtype=np.float64).ravel()
        self.min_covar = float(min_covar)
        if self._is_set():
            self._validate()

    def _config(self):
        return {"min_covar": self.min_covar}

    def _validate(self):
        self.means = np.asarray(self.means, dtype=np.float64).ravel()
        self.variances = np.asarray(self.variances, dtype=np.float64).ravel()
        if self.means.shape != self.variances.shape:
            raise ValueError(f"`means` and `variances` must both have shape (K,); got "
                             f"{self.means.shape} and {self.variances.shape}")
        if not np.all(np.isfinite(self.means)):
            raise ValueError("`means` must be finite")
        if not np.all(np.isfinite(self.variances)) or np.any(self.variances <= 0):
            raise ValueError("`variances` must be finite and positive")

    def check_X(self, X):
        X = _as_2d(X)
        if X.shape[1] != 1:
            raise ValueError(f"Gaussian emissions are univariate (one column); got X of shape "
                             f"{X.shape}; use MultivariateGaussian for several features")
        return X

    def log_density(self, X):
        """log N(x_t; μ_j, σ²_j), shape (N, K); 0 for missing rows."""
        self._require()
        return _diag_logpdf(X, self.means[:, None], self.variances[:, None])

    def fit(self, X, weights):
        """Weighted MLE (states without weight keep their parameters)."""
        obs = ~np.isnan(X[:, 0])
        x, w = X[obs, 0], weights[obs]
        means = self.means.copy() if self.means is not None else np.zeros(w.shape[1])
        var = self.variances.copy() if self.variances is not None else np.ones(w.shape[1])
        for k in range(w.shape[1]):
            tot = w[:, k].sum()
            if tot > 0:
                m = w[:, k] @ x / tot
                means[k] = m
                var[k] = max(w[:, k] @ (x - m) ** 2 / tot, self.min_covar)
        self.means, self.variances = means, var
        return self

    def sample(self, states, random_state=None):
        """Draws, shape (n, 1)."""
        rng = check_random_state(random_state)
        s = np.asarray(states)
        return (self.means[s] + np.sqrt(self.variances[s]) * rng.standard_normal(s.shape))[:, None]

    def initialize(self, X, n_states, labels, random_state=None):
        x = X[:, 0]
        obs = ~np.isnan(x)
        v = max(float(np.var(x[obs])) if obs.sum() > 1 else 1.0, self.min_covar)
        self.means = np.full(n_states, float(np.mean(x[obs])) if obs.any() else 0.0)
        self.variances = np.full(n_states, v)
        w = np.zeros((X.shape[0], n_states))
        ok = labels >= 0
        w[np.flatnonzero(ok), labels[ok]] = 1.0
        self.fit(X, w)
        return self

    def n_parameters(self):
        """2K."""
        return 2 * self.means.shape[0]


class MultivariateGaussian(EmissionDistribution):
    """Multivariate Gaussian emissions b_j(x) = N(x; μ_j, Σ_j) (Yu 2010 §4.2).

    Parameters
    ----------
    covariance_type : {"full", "diag"}, default "full"
    means : array-like of float64, shape (K, F), optional
    covars : array-like of float64, shape (K, F, F) ("full") or (K, F) ("diag"), optional
        Positive definite / positive.
    min_covar : float, default 1e-3
        Lower bound on fitted covariance eigenvalues (variances for "diag").

    Diagonal covariances marginalise missing features; full covariances need complete (or all-NaN)
    rows. ``fit``: weighted mean and covariance, eigenvalues clipped at ``min_covar``.
    """

    _param_names = ("means", "covars")

    def __init__(self, covariance_type="full", means=None, covars=None, min_covar=1e-3):
        self.covariance_type = _check_covariance_type(covariance_type)
        self.min_covar = float(min_covar)
        self._set_params(means=means, covars=covars)

    def _config(self):
        return {"covariance_type": self.covariance_type, "min_covar": self.min_covar}

    def _validate(self):
        m, c = self.means, self.covars
        if m.ndim != 2:
            raise ValueError(f"`means` must have shape (K, F); got {m.shape}")
        K, F = m.shape
        want = (K, F, F) if self.covariance_type == "full" else (K, F)
        if c.shape != want:
            raise ValueError(f"`covars` must have shape {want} for covariance_type="
                             f"{self.covariance_type!r}; got {c.shape}")
        if not np.all(np.isfinite(m)) or not np.all(np.isfinite(c)):
            raise ValueError("`means` and `covars` must be finite")
        if self.covariance_type == "diag":
            if np.any(c <= 0):
                raise ValueError("diagonal `covars` must be positive")
        else:
            for k in range(K):
                if not np.allclose(c[k], c[k].T) or np.linalg.eigvalsh(c[k]).min() <= 0:
                    raise ValueError(f"`covars[{k}]` must be symmetric positive definite")

    def check_X(self, X):
        return _as_2d(X, n_features=None if self.means is None else self.means.shape[1])

    def log_density(self, X):
        """log N(x_t; μ_j, Σ_j), shape (N, K); 0 for missing rows."""
        self._require()
        if self.covariance_type == "diag":
            return _diag_logpdf(X, self.means, self.covars)
        return _full_logpdf(X, self.means, self.covars)

    def fit(self, X, weights):
        """Weighted MLE per state (states without weight keep their parameters)."""
        diag = self.covariance_type == "diag"
        K = weights.shape[1]
        F = X.shape[1]
        means = self.means.copy() if self.means is not None else np.zeros((K, F))
        covars = (self.covars.copy() if self.covars is not None
                  else (np.ones((K, F)) if diag else np.tile(np.eye(F), (K, 1, 1))))
        if diag:
            obs = ~np.isnan(X)
            x = np.where(obs, X, 0.0)
            den = weights.T @ obs.astype(np.float64)  # (K, F)
            num = weights.T @ x
            ok = den > 0
            new_m = np.where(ok, num / np.where(ok, den, 1.0), means)
            sq = weights.T @ (obs * x * x)
            new_v = np.where(ok, sq / np.where(ok, den, 1.0) - new_m ** 2, covars)
            means, covars = new_m, np.maximum(new_v, self.min_covar)
        else:
            complete = ~np.isnan(X).any(axis=1)
            Xc, wc = X[complete], weights[complete]
            for k in range(K):
                if wc[:, k].sum() > 0:
                    means[k], covars[k] = _weighted_mean_cov(Xc, wc[:, k], self.min_covar, False)
        self.means, self.covars = means, covars
        return self

    def sample(self, states, random_state=None):
        """Draws, shape (n, F)."""
        rng = check_random_state(random_state)
        s = np.asarray(states)
        F = self.means.shape[1]
        z = rng.standard_normal((s.shape[0], F))
        if self.covariance_type == "diag":
            return self.means[s] + np.sqrt(self.covars[s]) * z
        L = np.linalg.cholesky(self.covars)
        return self.means[s] + np.einsum("nij,nj->ni", L[s], z)

    def initialize(self, X, n_states, labels, random_state=None):
        F = X.shape[1]
        complete = ~np.isnan(X).any(axis=1)
        Xc = X[complete] if complete.any() else np.nan_to_num(X)
        mu = np.nanmean(X, axis=0)
        if self.covariance_type == "diag":
            v = np.maximum(np.nanvar(X, axis=0), self.min_covar)
            self.covars = np.tile(v, (n_states, 1))
        else:
            cov = np.cov(Xc.T).reshape(F, F) if Xc.shape[0] > 1 else np.eye(F)
            self.covars = np.tile(_clip_eig(cov, self.min_covar), (n_states, 1, 1))
        self.means = np.tile(mu, (n_states, 1))
        w = np.zeros((X.shape[0], n_states))
        ok = labels >= 0
        w[np.flatnonzero(ok), labels[ok]] = 1.0
        # a state with too few initial points would collapse to min_covar: give it the global one
        glob = self.covars[0].copy()
        cnt = w.sum(0)
        self.fit(X, w)
        self.covars[cnt < 2 * F + 1] = glob
        return self

    def n_parameters(self):
        """K·F means + K·F (diag) or K·F(F+1)/2 (full) covariance entries."""
        K, F = self.means.shape
        return K * F + (K * F if self.covariance_type == "diag" else K * F * (F + 1) // 2)


class GaussianMixture(EmissionDistribution):
    """Gaussian-mixture emissions b_j(x) = Σ_m c_jm N(x; μ_jm, Σ_jm) (Yu 2010 §4.2; Rabiner 1989 eq. 49).

    Parameters
    ----------
    n_mix : int, default 2
        Components per state M.
    covariance_type : {"diag", "full"}, default "diag"
    weights : array-like, shape (K, M), optional
    means : array-like, shape (K, M, F), optional
    covars : array-like, shape (K, M, F) ("diag") or (K, M, F, F) ("full"), optional
    min_covar : float, default 1e-3

    ``fit`` performs one EM step of the weighted mixture per state (Baum–Welch for mixtures,
    Rabiner 1989 eqs. 52–54), which never decreases the weighted log-likelihood.
    """

    _param_names = ("weights", "means", "covars")

    def __init__(self, n_mix=2, covariance_type="diag", weights=None, means=None, covars=None,
                 min_covar=1e-3):
        _check_covariance_type(covariance_type)
        if isinstance(n_mix, bool) or not isinstance(n_mix, (int, np.integer)) or n_mix < 1:
            raise ValueError(f"`n_mix` must be a positive integer; got {n_mix!r}")
        self.n_mix = int(n_mix)
        self.covariance_type = covariance_type
        self.min_covar = float(min_covar)
        self._set_params(weights=weights, means=means, covars=covars)

    def _config(self):
        return {"n_mix": self.n_mix, "covariance_type": self.covariance_type,
                "min_covar": self.min_covar}

    def _validate(self):
        w, m, c = self.weights, self.means, self.covars
        if m.ndim != 3:
            raise ValueError(f"`means` must have shape (K, M, F); got {m.shape}")
        K, M, F = m.shape
        if w.shape != (K, M):
            raise ValueError(f"`weights` must have shape ({K}, {M}); got {w.shape}")
        if np.any(w < 0) or not np.allclose(w.sum(1), 1.0, atol=1e-8):
            raise ValueError("mixture `weights` must be non-negative with rows summing to 1")
        want = (K, M, F) if self.covariance_type == "diag" else (K, M, F, F)
        if c.shape != want:
            raise ValueError(f"`covars` must have shape {want}; got {c.shape}")
        if self.covariance_type == "diag" and np.any(c <= 0):
            raise ValueError("diagonal `covars` must be positive")
        self.n_mix = M

    def check_X(self, X):
        return _as_2d(X, n_features=None if self.means is None else self.means.shape[2])

    def _component_logpdf(self, X):
        """(N, K, M) log c_jm + log N(x; μ_jm, Σ_jm)."""
        K, M, F = self.means.shape
        out = np.empty((X.shape[0], K, M))
        with np.errstate(divide="ignore"):
            lw = np.log(self.weights)
        for m in range(M):
            if self.covariance_type == "diag":
                out[:, :, m] = _diag_logpdf(X, self.means[:, m], self.covars[:, m])
            else:
                out[:, :, m] = _full_logpdf(X, self.means[:, m], self.covars[:, m])
        rows_all = np.isnan(X).all(axis=1)
        out += lw[None]
        out[rows_all] = lw[None]  # missing row: Σ_m c_m · 1 = 1
        return out

    def log_density(self, X):
        """log Σ_m c_jm N(x_t; μ_jm, Σ_jm), shape (N, K); 0 for missing rows."""
        self._require()
        return special.logsumexp(self._component_logpdf(X), axis=2)

    def fit(self, X, weights):
        """One weighted EM step per state (states without weight keep their parameters)."""
        comp = self._component_logpdf(X)
        resp = np.exp(comp - special.logsumexp(comp, axis=2, keepdims=True))  # (N, K, M)
        rows_obs = ~np.isnan(X).all(axis=1)
        K, M, F = self.means.shape
        diag = self.covariance_type == "diag"
        if not diag:
            rows_obs &= ~np.isnan(X).any(axis=1)
        Xo = X[rows_obs]
        for k in range(K):
            wk = weights[rows_obs, k]
            if wk.sum() <= 0:
                continue
            r = resp[rows_obs, k] * wk[:, None]  # (n, M)
            tot = r.sum(0)
            self.weights[k] = tot / tot.sum()
            for m in range(M):
                if tot[m] <= 0:
                    continue
                if diag:
                    obs = ~np.isnan(Xo)
                    x = np.where(obs, Xo, 0.0)
                    den = r[:, m] @ obs
                    ok = den > 0
                    mu = np.where(ok, (r[:, m] @ x) / np.where(ok, den, 1), self.means[k, m])
                    var = np.where(ok, (r[:, m] @ (obs * (x - mu) ** 2)) / np.where(ok, den, 1),
                                   self.covars[k, m])
                    self.means[k, m], self.covars[k, m] = mu, np.maximum(var, self.min_covar)
                else:
                    self.means[k, m], self.covars[k, m] = _weighted_mean_cov(
                        Xo, r[:, m], self.min_covar, False)
        return self

    def sample(self, states, random_state=None):
        """Draws, shape (n, F)."""
        rng = check_random_state(random_state)
        s = np.asarray(states)
        K, M, F = self.means.shape
        out = np.empty((s.shape[0], F))
        for i, k in enumerate(s):
            m = rng.choice(M, p=self.weights[k])
            z = rng.standard_normal(F)
            if self.covariance_type == "diag":
                out[i] = self.means[k, m] + np.sqrt(self.covars[k, m]) * z
            else:
                out[i] = self.means[k, m] + np.linalg.cholesky(self.covars[k, m]) @ z
        return out

    def initialize(self, X, n_states, labels, random_state=None):
        rng = check_random_state(random_state)
        base = MultivariateGaussian(self.covariance_type, min_covar=self.min_covar)
        base.initialize(X, n_states, labels, rng)
        K, M = n_states, self.n_mix
        F = X.shape[1]
        self.weights = np.full((K, M), 1.0 / M)
        self.means = np.empty((K, M, F))
        diag = self.covariance_type == "diag"
        self.covars = np.empty((K, M, F) if diag else (K, M, F, F))
        for k in range(K):
            sd = np.sqrt(base.covars[k] if diag else np.diag(base.covars[k]))
            for m in range(M):
                self.means[k, m] = base.means[k] + 0.5 * sd * rng.standard_normal(F)
                self.covars[k, m] = base.covars[k]
        return self

    def n_parameters(self):
        """K(M - 1) weights + K·M·F means + covariance entries."""
        K, M, F = self.means.shape
        cov = K * M * F if self.covariance_type == "diag" else K * M * F * (F + 1) // 2
        return K * (M - 1) + K * M * F + cov
