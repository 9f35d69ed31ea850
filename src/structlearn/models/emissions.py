r"""Emission (observation) distributions of the hidden semi-Markov model.

Observations are conditionally independent given the state: b_{j,d}(o_{t+1:t+d}) = Π_τ b_j(o_τ)
(Yu 2010, "Hidden semi-Markov models", eq. (12), §4.2). Every family here is vectorised over the K
states and works on a 2-d float array X of shape (N, F) (N observations, F features).

==========================  =============================================  =============================
class                       b_j(x)                                          parameters
==========================  =============================================  =============================
Categorical                 probs[j, x] (x in 0..V-1, one column)          ``probs`` (K, V)
Poisson                     Π_f Poisson(x_f; λ_jf) (independent counts)    ``lam`` (K, F)
Gaussian                    N(x; μ_j, σ²_j) (one column)                   ``means`` (K,), ``variances`` (K,)
MultivariateGaussian        N(x; μ_j, Σ_j), ``covariance_type`` full/diag  ``means`` (K, F), ``covars``
GaussianMixture             Σ_m c_jm N(x; μ_jm, Σ_jm)                       ``weights`` (K, M), ``means``
                                                                            (K, M, F), ``covars``
==========================  =============================================  =============================

**Missing observations.** A NaN entry is unobserved: a row of NaN has density 1 (log density 0) in
every state, and a partly missing row is marginalised over its missing features where the family
factorises over features (Poisson, diagonal Gaussians). Full-covariance families refuse partly
missing rows (``ValueError``). Missing rows carry no weight in ``fit``.

**Protocol.** To add a family, subclass :class:`EmissionDistribution` (or pass any object with the same
methods):

- ``n_states`` — K, or ``None`` before the parameters are set;
- ``log_density(X)`` → (N, K) float64, log b_j(x_t);
- ``fit(X, weights)`` — weighted maximum likelihood with weights (N, K), e.g. the posteriors γ_t(j)
  of Yu 2010 §2.3.1 iii; a state whose weights sum to zero keeps its parameters;
- ``sample(states, random_state)`` → (n, F) float64;
- ``n_parameters()`` — the number of free parameters;
- ``check_X(X)`` → the validated 2-d float array (optional: :func:`check_observations` falls back to
  a numeric 2-d check);
- ``initialize(X, n_states, labels, random_state)`` — initial parameters from initial hard labels
  (N,) (-1 = unlabelled), used by ``fit`` when ``"e"`` is in ``init_params``;
- ``get_state()`` → (arrays, config) and ``set_state(arrays)`` — model files (generic in the base
  class: the arrays named in ``_param_names``; ``config`` the constructor settings of ``_config()``).

Every ``fit`` is an exact (constrained) maximiser of the weighted log-likelihood, except
``GaussianMixture`` which takes one EM step of the mixture; both never decrease it, so the HSMM's EM
stays monotone. Variances are kept >= ``min_covar`` (covariance eigenvalues clipped from below, which
is the constrained maximiser).
"""
import numpy as np
from scipy import special
from sklearn.utils import check_random_state

from .distribution import Distribution, check_stochastic_rows, make_family

__all__ = ["Categorical", "Poisson", "Gaussian", "MultivariateGaussian", "GaussianMixture",
           "EMISSION_FAMILIES", "make_emission", "check_observations"]

_LOG_2PI = np.log(2 * np.pi)


def _as_2d(X, name="X", n_features=None):
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric array; got {type(X).__name__} ({exc})") from None
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"`{name}` must be 2-d (n_samples, n_features); got shape {arr.shape}")
    if np.any(np.isinf(arr)):
        raise ValueError(f"`{name}` contains infinite values; use NaN for missing observations")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"X has {arr.shape[1]} features but the means have {n_features}")
    return arr


def check_observations(emission, X):
    """``X`` validated by ``emission.check_X`` when the object has it, else as a numeric 2-d array."""
    return emission.check_X(X) if hasattr(emission, "check_X") else _as_2d(X)


def _check_covariance_type(covariance_type):
    if covariance_type not in ("full", "diag"):
        raise ValueError(f"`covariance_type` must be 'full' or 'diag'; got {covariance_type!r}")
    return covariance_type


class EmissionDistribution(Distribution):
    """Base class (see the module docstring for the protocol)."""

    def _set_params(self, **values):
        """Set the named parameter arrays (float64 copies, ``None`` kept) and validate once all are set."""
        for name, v in values.items():
            setattr(self, name, None if v is None else np.array(v, dtype=np.float64))
        if self._is_set():
            self._validate()

    def check_X(self, X):
        """The observations as a 2-d float64 array (NaN = missing; infinite values refused)."""
        return _as_2d(X)


# ------------------------------------------------------------------------------------------------------
class Categorical(EmissionDistribution):
    """Discrete emissions: b_j(v) = probs[j, v] for symbols v = 0..V-1 (Yu 2010 §2.3.1 iii, §4.2).

    Parameters
    ----------
    probs : array-like of float64, shape (K, V), optional
        Rows non-negative, summing to one.
    n_features : int, optional
        Alphabet size V. When not given it is taken from ``probs`` or, at initialisation, as the
        largest symbol seen + 1. Symbols outside [0, V) raise ``ValueError``.

    X is (N, 1) with whole numbers (NaN = missing). ``fit``: probs[j, v] ∝ Σ_t γ_t(j) I(o_t = v).
    """

    _param_names = ("probs",)

    def __init__(self, probs=None, n_features=None):
        self.n_features = n_features
        self._set_params(probs=probs)

    def _config(self):
        return {"n_features": None if self.n_features is None else int(self.n_features)}

    def _validate(self):
        p = self.probs
        if p.ndim != 2:
            raise ValueError(f"`probs` must have shape (K, V); got {p.shape}")
        check_stochastic_rows(p, "probs")
        if self.n_features is None:
            self.n_features = p.shape[1]
        elif p.shape[1] != self.n_features:
            raise ValueError(f"`probs` has {p.shape[1]} symbols but n_features={self.n_features}")

    def check_X(self, X):
        X = _as_2d(X)
        if X.shape[1] != 1:
            raise ValueError(f"categorical emissions take one column of symbols; got X of shape "
                             f"{X.shape}")
        x = X[:, 0]
        obs = ~np.isnan(x)
        if np.any(x[obs] != np.round(x[obs])) or np.any(x[obs] < 0):
            raise ValueError("categorical observations must be non-negative whole numbers (symbols "
                             "0..V-1) or NaN")
        if self.n_features is not None and obs.any() and x[obs].max() >= self.n_features:
            bad = int(np.flatnonzero(obs & (x >= self.n_features))[0])
            raise ValueError(f"symbol {int(x[bad])} at row {bad} is outside the alphabet 0.."
                             f"{self.n_features - 1} (n_features={self.n_features}); pass a larger "
                             f"`n_features`")
        return X

    def log_density(self, X):
        """log b_j(x_t), shape (N, K) float64; 0 for missing rows, -inf for a zero probability."""
        self._require()
        x = X[:, 0]
        obs = ~np.isnan(x)
        out = np.zeros((X.shape[0], self.probs.shape[0]))
        with np.errstate(divide="ignore"):
            lp = np.log(self.probs)
        out[obs] = lp[:, x[obs].astype(np.int64)].T
        return out

    def fit(self, X, weights):
        """Weighted MLE: probs[j, v] = Σ_t w_tj I(x_t = v) / Σ_t w_tj (states without weight kept)."""
        x = X[:, 0]
        obs = ~np.isnan(x)
        V = self.n_features
        counts = np.zeros((weights.shape[1], V))
        for k in range(weights.shape[1]):
            counts[k] = np.bincount(x[obs].astype(np.int64), weights=weights[obs, k], minlength=V)
        tot = counts.sum(axis=1)
        keep = tot > 0
        new = self.probs.copy() if self.probs is not None else np.full((weights.shape[1], V), 1.0 / V)
        new[keep] = counts[keep] / tot[keep, None]
        self.probs = new
        return self

    def sample(self, states, random_state=None):
        """One symbol per state, shape (n, 1) float64."""
        rng = check_random_state(random_state)
        cdf = np.cumsum(self.probs, axis=1)
        u = rng.random_sample(len(states))
        out = np.array([np.searchsorted(cdf[s], u_, side="right") for s, u_ in zip(states, u)],
                       dtype=np.float64)
        return np.minimum(out, self.probs.shape[1] - 1)[:, None]

    def initialize(self, X, n_states, labels, random_state=None):
        x = X[:, 0]
        obs = ~np.isnan(x)
        if self.n_features is None:
            self.n_features = int(x[obs].max()) + 1 if obs.any() else 1
        rng = check_random_state(random_state)
        freq = np.bincount(x[obs].astype(np.int64), minlength=self.n_features) + 1.0
        freq /= freq.sum()
        p = rng.dirichlet(freq * 10 * self.n_features, size=n_states) + 1e-3
        self.probs = p / p.sum(axis=1, keepdims=True)
        return self

    def n_parameters(self):
        """K·(V - 1)."""
        return self.probs.shape[0] * (self.probs.shape[1] - 1)


# ------------------------------------------------------------------------------------------------------
class Poisson(EmissionDistribution):
    """Independent Poisson counts per feature: b_j(x) = Π_f λ_jf^x_f e^{-λ_jf} / x_f! (Yu 2010 §4.2).

    Parameters
    ----------
    lam : array-like of float64, shape (K, F) or (K,), optional
        Rates λ_jf >= 0.

    NaN entries are marginalised (skipped). ``fit``: λ_jf = Σ_t w_tj x_tf / Σ_t w_tj over observed
    entries.
    """

    _param_names = ("lam",)

    def __init__(self, lam=None):
        self._set_params(lam=lam)

    def _validate(self):
        if self.lam.ndim == 1:
            self.lam = self.lam[:, None]
        if self.lam.ndim != 2:
            raise ValueError(f"`lam` must have shape (K, F); got {self.lam.shape}")
        if not np.all(np.isfinite(self.lam)) or np.any(self.lam < 0):
            raise ValueError("Poisson rates `lam` must be finite and non-negative")

    def check_X(self, X):
        X = _as_2d(X)
        obs = ~np.isnan(X)
        if np.any(X[obs] < 0) or np.any(X[obs] != np.round(X[obs])):
            raise ValueError("Poisson observations must be non-negative whole numbers (or NaN)")
        if self.lam is not None and X.shape[1] != self.lam.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but the Poisson rates have "
                             f"{self.lam.shape[1]}")
        return X

    def log_density(self, X):
        """Σ_f log Poisson(x_f; λ_jf) over observed features, shape (N, K)."""
        self._require()
        obs = ~np.isnan(X)
        x = np.where(obs, X, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            # xlogy: 0 · log 0 = 0, so a zero rate gives probability one to a zero count
            term = (special.xlogy(x[:, None, :], self.lam[None]) - self.lam[None]
                    - special.gammaln(x + 1)[:, None, :])
        term = np.where(obs[:, None, :], term, 0.0)
        return term.sum(axis=2)

    def fit(self, X, weights):
        """Weighted MLE of the rates (states or features without weight keep their rate)."""
        obs = ~np.isnan(X)
        x = np.where(obs, X, 0.0)
        num = weights.T @ x  # (K, F)
        den = weights.T @ obs.astype(np.float64)
        new = self.lam.copy() if self.lam is not None else np.ones_like(num)
        ok = den > 0
        new[ok] = num[ok] / den[ok]
        self.lam = new
        return self

    def sample(self, states, random_state=None):
        """Counts, shape (n, F) float64."""
        rng = check_random_state(random_state)
        return rng.poisson(self.lam[np.asarray(states)]).astype(np.float64)

    def initialize(self, X, n_states, labels, random_state=None):
        obs = ~np.isnan(X)
        glob = np.nanmean(X, axis=0) if obs.any() else np.ones(X.shape[1])
        self.lam = np.tile(np.nan_to_num(glob, nan=1.0), (n_states, 1))
        w = np.zeros((X.shape[0], n_states))
        ok = labels >= 0
        w[np.flatnonzero(ok), labels[ok]] = 1.0
        self.fit(X, w)
        self.lam = np.maximum(self.lam, 1e-3)
        return self

    def n_parameters(self):
        """K·F."""
        return self.lam.size


# ------------------------------------------------------------------------------------------------------
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


#: Families selectable by name in :class:`structlearn.HiddenSemiMarkovModel` (``emission=...``).
EMISSION_FAMILIES = {
    "categorical": Categorical,
    "poisson": Poisson,
    "gaussian": Gaussian,
    "multivariate_gaussian": MultivariateGaussian,
    "diag_gaussian": lambda: MultivariateGaussian("diag"),
    "gmm": GaussianMixture,
}


def make_emission(spec):
    """A fresh emission object from a family name (see ``EMISSION_FAMILIES``) or a copy of an object.

    Raises
    ------
    ValueError
        Unknown family name, or an object lacking the protocol methods.
    """
    return make_family(spec, EMISSION_FAMILIES, "emission", ("log_density", "fit", "sample", "n_parameters"))
