"""Gaussian emission laws (Yu 2010, "Hidden semi-Markov models", §4.2; Rabiner 1989 eqs. 49-54):
:class:`MultivariateGaussian`, the one Gaussian law of every HMM, HSMM and HHMM (hmmlearn's covariance types,
priors, parameter letters and initialisation as options, :class:`~._hmm_family.LawOptions`; its hmmlearn mode
is ``GaussianHMMEmission`` of :mod:`~structlearn.distributions.emissions.hmm`), :class:`Gaussian`, its
one-feature diagonal case with parameters of shape (K,), and :class:`GaussianMixture`, the one mixture law
(hmmlearn's one-step update, priors, letters, initialisation and per-state "tied" covariances as options;
its hmmlearn mode is ``GMMHMMEmission``)."""
import numpy as np
from scipy import special
from sklearn.utils import check_random_state

from ._base import EmissionDistribution, _as_2d, _weights_for_labels
from ._gaussian_maths import (COVARIANCE_TYPES, _check_covariance_type, _check_covars, _clip_eig, _data_covariance,
                              _diag_logpdf, _full_logpdf, _gmm_prior_defaults, _kmeans_centers, _mixture_covars,
                              _mixture_scatter, _weighted_mean_cov, _weighted_scatter, full_covariances,
                              gaussian_log_density)
from ._hmm_family import LawOptions, _as_float_2d, _check_rows, _jsonable, _per_state

__all__ = ["Gaussian", "MultivariateGaussian", "GaussianMixture"]


class MultivariateGaussian(LawOptions, EmissionDistribution):
    r"""Gaussian emissions b_j(x) = N(x; μ_j, Σ_j) (Yu 2010 §4.2; hmmlearn's ``GaussianHMM``), the one
    Gaussian law of every HMM, HSMM and HHMM.

    Parameters
    ----------
    covariance_type : {"full", "diag"}, default "full"
        Full or diagonal Σ_j. The law also holds hmmlearn's "spherical" (Σ_j = σ²_j I) and "tied" (one
        full Σ for all states), which its hmmlearn mode
        (:class:`~structlearn.distributions.emissions.hmm.GaussianHMMEmission`) offers.
    means : array-like of float64, shape (K, F), optional
    covars : array-like of float64, optional
        Compact form: (K, F, F) full, (K, F) diag ((K,) spherical, (F, F) tied); positive (definite).
    min_covar : float, default 1e-3
        Without a covariance prior (``covars_prior=None``), the floor of the fitted covariance
        eigenvalues (variances for "diag"); in the initialisation from labels, of the initial ones; in
        hmmlearn's initialisation, added to the diagonal of the data covariance.
    means_prior, means_weight : float or array, default 0, 0
        hmmlearn's normal prior on the means: mean μ₀ (broadcast to (K, F)) and precision scale λ.
    covars_prior, covars_weight : float or array or None, default None, 1
        ``None``: no covariance prior; the M-step is the weighted MLE E[xxᵀ] − μμᵀ clipped at
        ``min_covar`` (with the means prior, if any, in μ). Else hmmlearn's inverse-gamma (diag,
        spherical: Σ_j ← (covars_prior + S) / max(max(covars_weight − 1, 0) + n_j, 1e-5)) or
        inverse-Wishart (full, tied: (covars_prior + S) / (max(covars_weight − F, 0) + n_j); a scalar
        covars_prior is added to every entry of the scatter S) prior.
    init : {"labels", "hmmlearn"}, default "labels"
        Initialisation: the per-state moments of initially labelled rows, or hmmlearn's (k-means
        means, data covariance plus ``min_covar`` on the diagonal).

    Notes
    -----
    Diagonal covariances marginalise missing features; full covariances need complete (or all-NaN)
    rows; in the hmmlearn mode only whole rows may be missing. Parameter letters ``"m"`` (means),
    ``"c"`` (covariances). MAP M-step (hmmlearn 0.3; Huang, Acero & Hon 2001 pp. 443–445) with
    n_j = Σ_t γ_tj: μ_j = (λ μ₀ + Σ_t γ_tj x_t) / (λ + n_j); S_j = λ (μ_j − μ₀)(μ_j − μ₀)ᵀ +
    Σ_t γ_tj (x_t − μ_j)(x_t − μ_j)ᵀ (diagonal for spherical/diag, averaged over features for spherical,
    summed over states for tied). Time O(N·K·F) diag, O(N·K·F²) full.
    """

    _param_names = ("means", "covars")
    letters = "mc"
    param_letters = {"means": "m", "covars": "c"}
    covariance_types = ("full", "diag")
    _missing_entries = True

    def __init__(self, covariance_type="full", means=None, covars=None, min_covar=1e-3, means_prior=0.0,
                 means_weight=0.0, covars_prior=None, covars_weight=1.0, init="labels"):
        owner = "" if len(self.covariance_types) == 4 else (f" for {type(self).__name__} (GaussianHMMEmission "
                                                            f"has {list(COVARIANCE_TYPES)})")
        self.covariance_type = _check_covariance_type(covariance_type, self.covariance_types, owner)
        self.min_covar = float(min_covar)
        self.means_prior, self.means_weight = means_prior, means_weight
        self.covars_prior, self.covars_weight = covars_prior, covars_weight
        self.init = init
        self._set_params(means=means, covars=covars)

    def _config(self):
        return self._law_config(
            covariance_type=self.covariance_type, min_covar=self.min_covar,
            means_prior=_jsonable(self.means_prior), means_weight=_jsonable(self.means_weight),
            covars_prior=_jsonable(self.covars_prior), covars_weight=_jsonable(self.covars_weight))

    @property
    def n_features(self):
        """F, or None before the means are set."""
        return None if self.means is None else int(self.means.shape[1])

    def _validate(self):
        m = self.means
        if m.ndim != 2:
            raise ValueError(f"`{self._name('means')}` must have shape (n_components, n_features); got "
                             f"{m.shape}")
        if not np.all(np.isfinite(m)):
            raise ValueError(f"`{self._name('means')}` must be finite")
        K, F = m.shape
        c = self.covars
        if self.covariance_type == "spherical" and c.shape == (K, F) and np.allclose(c, c[:, :1]):
            self.covars = c = c[:, 0].copy()  # hmmlearn stores fitted spherical variances tiled (K, F)
        _check_covars(c, self.covariance_type, K, F, self._name("covars"))

    def full_covars(self):
        """Covariances as (K, F, F) matrices."""
        K, F = self.means.shape
        return full_covariances(self.covars, self.covariance_type, K, F)

    def check_X(self, X):
        if self._missing_entries:
            return _as_2d(X, n_features=self.n_features)
        return _as_float_2d(X, self.n_features)

    def _log_density(self, X):
        return gaussian_log_density(X, self.means, self.covars, self.covariance_type)

    def log_density(self, X):
        """log N(x_t; μ_j, Σ_j), shape (N, K); 0 for missing rows (missing features of a diagonal law
        marginalised)."""
        if not self._missing_entries:
            return LawOptions.log_density(self, X)
        self._require()
        if self.covariance_type == "diag":
            return _diag_logpdf(X, self.means, self.covars)
        return _full_logpdf(X, self.means, self.covars)

    def statistics(self, X, w):
        """Weighted sufficient statistics of ``X`` (N, F) under weights ``w`` (N, K), float64: ``post``
        Σ_t w_tk (K,), ``x`` Σ_t w_tk x_t (K, F) and ``xx`` Σ_t w_tk x_t² (K, F) (spherical, diag) or
        Σ_t w_tk x_t x_tᵀ (K, F, F) (full, tied), over complete rows; a diagonal law with missing entries
        sums over observed entries and adds ``den`` Σ_t w_tk [x_tf observed] (K, F). The M-step
        (:meth:`~structlearn.distributions.emissions._hmm_family.LawOptions.m_step`) is a function of
        these only, so batch, online and distributed EM share it. Time O(N·K·F) (O(N·K·F²) full, tied)."""
        if self._missing_entries and self.covariance_type == "diag":
            obs = ~np.isnan(X)
            x = np.where(obs, X, 0.0)
            return {"post": w[obs.any(axis=1)].sum(axis=0), "den": w.T @ obs.astype(np.float64),
                    "x": w.T @ x, "xx": w.T @ (x * x)}
        if self._missing_entries:  # full: the complete rows (the HSMM's scatter, summed by einsum)
            complete = ~np.isnan(X).any(axis=1)
            X, w = X[complete], w[complete]
            return {"post": w.sum(axis=0), "x": w.T @ X, "xx": np.einsum("nk,ni,nj->kij", w, X, X)}
        xx = w.T @ (X * X) if self.covariance_type in ("spherical", "diag") else _weighted_scatter(X, w)
        return {"post": w.sum(axis=0), "x": w.T @ X, "xx": xx}

    def fit(self, X, weights, params=None):
        """As :meth:`LawOptions.fit`, except that the MLE (``covars_prior=None``) of every parameter of a
        full (or univariate) law with missing entries takes the two-pass moments of the rows
        (Σ_t w_tk (x_t − μ_k)(x_t − μ_k)ᵀ / n_k, the HSMM's: no cancellation in E[xxᵀ] − μμᵀ)."""
        if (not self._missing_entries or self.covars_prior is not None or self._params(params) != self.letters
                or self.means is None or self.covariance_type != ("diag" if self.means.ndim == 1 else "full")):
            return LawOptions.fit(self, X, weights, params)
        self._two_pass(X, np.asarray(weights, dtype=np.float64))
        return self

    def _two_pass(self, X, w):
        complete = ~np.isnan(X).any(axis=1)
        Xc, wc = X[complete], w[complete]
        for k in np.flatnonzero(wc.sum(axis=0) > 0):
            self.means[k], self.covars[k] = _weighted_mean_cov(Xc, wc[:, k], self.min_covar, False)

    def _m_step(self, stats, params):
        if self.covars_prior is None:
            return self._mle_step(stats, params)
        post, obs = stats["post"], stats["x"]
        K, F = obs.shape
        denom = stats.get("den", post[:, None])
        mp = _per_state(self.means_prior, K, (F,))
        mw = _per_state(self.means_weight, K, (F,))
        if "m" in params:
            self.means = (mw * mp + obs) / (mw + denom)
        if "c" not in params:
            return
        means = self.means
        diff = means - mp
        ct = self.covariance_type
        if ct in ("spherical", "diag"):
            cp = _per_state(self.covars_prior, K, (F,))
            cw = _per_state(self.covars_weight, K, (F,))
            c_n = mw * diff ** 2 + stats["xx"] - 2 * means * obs + means ** 2 * denom
            c = (cp + c_n) / np.maximum(np.maximum(cw - 1, 0) + denom, 1e-5)
            self.covars = c.mean(axis=1) if ct == "spherical" else c
            return
        mwk = _per_state(self.means_weight, K, ())  # full / tied: one precision scale per state
        c_n = np.array(stats["xx"], dtype=np.float64)  # Σ_t γ_tk x_t x_tᵀ (K, F, F)
        for k in range(K):
            om = np.outer(obs[k], means[k])
            c_n[k] += (mwk[k] * np.outer(diff[k], diff[k]) - om - om.T + np.outer(means[k], means[k]) * post[k])
        cw = np.maximum(_per_state(self.covars_weight, K, ()) - F, 0)
        cp = np.asarray(self.covars_prior, dtype=np.float64)
        if ct == "tied":
            self.covars = (cp + c_n.sum(axis=0)) / (cw[0] + post.sum())
        else:
            cp = cp.reshape(K, 1, 1) if cp.ndim == 1 and cp.shape[0] == K else cp
            self.covars = (cp + c_n) / (cw[:, None, None] + post[:, None, None])

    def _mle_step(self, stats, params):
        """``covars_prior=None``: means as with a prior, covariances E[xxᵀ] − μμᵀ clipped at ``min_covar``
        (μ the new means; about the current means when ``"m"`` is not in ``params``)."""
        if self.covariance_type not in ("full", "diag"):
            raise ValueError(f"covars_prior=None (no prior) needs covariance_type 'full' or 'diag'; got "
                             f"{self.covariance_type!r}")
        post, x, xx = stats["post"], stats["x"], stats["xx"]
        K, F = x.shape
        diag = self.covariance_type == "diag"
        den = stats.get("den", post[:, None])
        ok = den > 0
        safe = np.where(ok, den, 1.0)
        mw = _per_state(self.means_weight, K, (F,))
        new_m = (mw * _per_state(self.means_prior, K, (F,)) + x) / (mw + safe)
        old_m = self.means if self.means is not None else np.zeros((K, F))
        if "m" in params:
            self.means = np.where(ok, new_m, old_m)
        if "c" not in params:
            return
        m, xbar = (new_m, None) if "m" in params else (old_m, x / safe)
        if diag:
            old_c = self.covars if self.covars is not None else np.ones((K, F))
            var = xx / safe - m * m if xbar is None else xx / safe - 2 * m * xbar + m * m
            self.covars = np.where(ok, np.maximum(var, self.min_covar), old_c)
            return
        covars = self.covars.copy() if self.covars is not None else np.tile(np.eye(F), (K, 1, 1))
        for k in np.flatnonzero(post > 0):
            s = xx[k] / post[k] - np.outer(m[k], m[k])
            if xbar is not None:
                s += 2 * np.outer(m[k], m[k]) - np.outer(xbar[k], m[k]) - np.outer(m[k], xbar[k])
            covars[k] = _clip_eig(s, self.min_covar)
        self.covars = covars

    def _restore_states(self, old, keep):
        if old["means"] is not None:
            self.means[keep] = old["means"][keep]
        if old["covars"] is not None and self.covariance_type != "tied":
            self.covars[keep] = old["covars"][keep]

    def _initialize(self, X, K, random_state, params):
        """hmmlearn's: k-means means, the data covariance plus ``min_covar`` on the diagonal."""
        if "m" in params or self.means is None:
            self.means = _kmeans_centers(X, K, random_state)[0]
        if "c" in params or self.covars is None:
            cv = _data_covariance(X, self.min_covar)
            F = X.shape[1]
            self.covars = {"spherical": np.full(K, cv.mean()), "diag": np.tile(np.diag(cv), (K, 1)),
                           "full": np.tile(cv, (K, 1, 1)), "tied": cv.copy()}[self.covariance_type]
            self.covars = self.covars.reshape({"spherical": (K,), "diag": (K, F), "full": (K, F, F),
                                               "tied": (F, F)}[self.covariance_type])
        self._validate()

    def _initialize_from_labels(self, X, n_states, labels, random_state):
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
        w = _weights_for_labels(X, n_states, labels)
        # a state with too few initial points would collapse to min_covar: give it the global one
        glob = self.covars[0].copy()
        cnt = w.sum(0)
        self.fit(X, w)
        self.covars[cnt < 2 * F + 1] = glob
        return self

    def _draw_one(self, state, rng):
        """One draw of state ``state`` (F,) (``rng.multivariate_normal``, as hmmlearn)."""
        return rng.multivariate_normal(self.means[state], self.full_covars()[state])

    def sample(self, states, random_state=None):
        """Draws, shape (n, F)."""
        rng = check_random_state(random_state)
        s = np.asarray(states)
        F = self.means.shape[1]
        z = rng.standard_normal((s.shape[0], F))
        if self.covariance_type == "diag":
            return self.means[s] + np.sqrt(self.covars[s]) * z
        L = np.linalg.cholesky(self.full_covars())
        return self.means[s] + np.einsum("nij,nj->ni", L[s], z)

    def n_parameters(self):
        """K·F means + K (spherical), K·F (diag), K·F(F+1)/2 (full), F(F+1)/2 (tied) covariance entries."""
        K, F = self.means.shape
        return K * F + {"spherical": K, "diag": K * F, "full": K * F * (F + 1) // 2,
                        "tied": F * (F + 1) // 2}[self.covariance_type]


class Gaussian(MultivariateGaussian):
    """Univariate Gaussian emissions b_j(x) = N(x; μ_j, σ²_j) (Yu 2010 §4.2): the one-feature diagonal
    :class:`MultivariateGaussian`, with parameters of shape (K,).

    Parameters
    ----------
    means, variances : array-like of float64, shape (K,), optional
        Variances > 0.
    min_covar : float, default 1e-3
        Lower bound on fitted variances.

    Notes
    -----
    ``fit``: weighted mean and variance (variance clipped at ``min_covar``).
    """

    _param_names = ("means", "variances")
    covariance_types = ("diag",)

    def __init__(self, means=None, variances=None, min_covar=1e-3):
        super().__init__("diag", min_covar=min_covar)
        self.means = None if means is None else np.array(means, dtype=np.float64).ravel()
        self.variances = None if variances is None else np.array(variances, dtype=np.float64).ravel()
        if self._is_set():
            self._validate()

    def _config(self):
        return {"min_covar": self.min_covar}

    def _law(self):
        """These parameters as a one-feature diagonal law (means (K, 1), covars (K, 1))."""
        return MultivariateGaussian("diag", self.means[:, None], self.variances[:, None], self.min_covar)

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

    @property
    def covars(self):
        """The variances as (K, 1) diagonal covariances (the law's form)."""
        return None if self.variances is None else self.variances[:, None]

    @covars.setter
    def covars(self, value):
        self.variances = None if value is None else np.asarray(value, dtype=np.float64).reshape(-1)

    @property
    def n_features(self):
        """1 (None before the means are set)."""
        return None if self.means is None else 1

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

    def _m_step(self, stats, params):
        K = stats["post"].shape[0]
        law = MultivariateGaussian("diag", min_covar=self.min_covar)
        law.means = None if self.means is None else self.means[:, None]
        law.covars = None if self.variances is None else self.variances[:, None]
        law._m_step(stats, params)
        self.means, self.variances = law.means.reshape(K), law.covars.reshape(K)

    def _restore_states(self, old, keep):
        LawOptions._restore_states(self, old, keep)

    def sample(self, states, random_state=None):
        """Draws, shape (n, 1)."""
        return self._law().sample(states, random_state)

    def _initialize_from_labels(self, X, n_states, labels, random_state):
        x = X[:, 0]
        obs = ~np.isnan(x)
        v = max(float(np.var(x[obs])) if obs.sum() > 1 else 1.0, self.min_covar)
        self.means = np.full(n_states, float(np.mean(x[obs])) if obs.any() else 0.0)
        self.variances = np.full(n_states, v)
        return self.fit(X, _weights_for_labels(X, n_states, labels))

    def _two_pass(self, X, w):
        obs = ~np.isnan(X[:, 0])
        x, w = X[obs, 0], w[obs]
        for k in np.flatnonzero(w.sum(axis=0) > 0):
            self.means[k], self.variances[k] = _weighted_mean_cov(x, w[:, k], self.min_covar, True)

    def n_parameters(self):
        """2K."""
        return 2 * self.means.shape[0]


class GaussianMixture(LawOptions, EmissionDistribution):
    r"""Gaussian-mixture emissions b_j(x) = Σ_m w_jm N(x; μ_jm, Σ_jm) (Yu 2010 §4.2; Rabiner 1989 eq. 49;
    hmmlearn's ``GMMHMM``), the one mixture law of every HMM, HSMM and HHMM.

    Parameters
    ----------
    n_mix : int, default 2
        Components per state M.
    covariance_type : {"diag", "full", "spherical", "tied"}, default "diag"
        Diagonal or full Σ_jm; with ``update="hmmlearn"`` also "spherical" (Σ_jm = σ²_jm I) and "tied"
        (the M components of a state share one full covariance, hmmlearn's meaning).
    weights : array-like, shape (K, M), optional
    means : array-like, shape (K, M, F), optional
    covars : array-like, optional
        (K, M, F) diag, (K, M, F, F) full, (K, M) spherical, (K, F, F) tied.
    min_covar : float, default 1e-3
        With ``update="moments"``, the floor of the fitted variances (covariance eigenvalues); in
        hmmlearn's initialisation, added to the diagonal of the data covariance.
    weights_prior : float or array (K, M), default 1.0
        Dirichlet prior of the mixture weights (``update="hmmlearn"``).
    means_prior, means_weight : float or array, default 0, 0
        Normal prior of the component means (``update="hmmlearn"``).
    covars_prior, covars_weight : float or array or None, default None, None
        Inverse-gamma / inverse-Wishart prior (``update="hmmlearn"``); ``None`` takes hmmlearn's defaults
        for the covariance type, which make the update the maximum-likelihood one.
    update : {"moments", "hmmlearn"}, default "moments"
        The M-step (below); the priors are options of ``"hmmlearn"`` only.
    init : {"labels", "hmmlearn"}, default "labels"
        Initialisation: around the per-state Gaussians of initially labelled rows (component means
        drawn at half a standard deviation), or hmmlearn's (k-means states, k-means components within
        each, data covariance plus ``min_covar``, uniform weights).

    Notes
    -----
    ``fit`` takes one EM step of the weighted mixture per state (Baum–Welch for mixtures, Rabiner 1989
    eqs. 52–54), from the responsibilities r_tjm = γ_tj w_jm N_jm(x_t) / b_j(x_t). ``update="moments"``
    (the HSMM's): weights, means and two-pass covariances of each component from the responsibilities
    (missing features of a diagonal law marginalised, variances clipped at ``min_covar``; all parameters
    at once). ``update="hmmlearn"`` (hmmlearn 0.3's, parameter letters ``"w"``, ``"m"``, ``"c"``): MAP
    estimates with the priors, the covariance scatter centred at the E-step means (a coordinate ascent
    step); complete rows only. Both never decrease the weighted likelihood without priors. Outside the
    hmmlearn mode (:class:`~structlearn.distributions.emissions.hmm.GMMHMMEmission`) missing features of a
    diagonal law are marginalised in the log-density; full covariances need complete (or all-NaN) rows.
    """

    _param_names = ("weights", "means", "covars")
    letters = "mcw"
    param_letters = {"weights": "w", "means": "m", "covars": "c"}
    update = "moments"
    _missing_entries = True

    def __init__(self, n_mix=2, covariance_type="diag", weights=None, means=None, covars=None, min_covar=1e-3,
                 weights_prior=1.0, means_prior=0.0, means_weight=0.0, covars_prior=None, covars_weight=None,
                 update="moments", init="labels"):
        if isinstance(n_mix, bool) or not isinstance(n_mix, (int, np.integer)) or n_mix < 1:
            raise ValueError(f"`n_mix` must be a positive integer; got {n_mix!r}")
        if update not in ("moments", "hmmlearn"):
            raise ValueError(f"`update` must be 'moments' or 'hmmlearn'; got {update!r}")
        self.n_mix, self.update, self.init = int(n_mix), update, init
        allowed = COVARIANCE_TYPES if update == "hmmlearn" else ("full", "diag")
        self.covariance_type = _check_covariance_type(
            covariance_type, allowed, "" if update == "hmmlearn" else " with update='moments'")
        self.min_covar = float(min_covar)
        self.weights_prior, self.means_prior, self.means_weight = weights_prior, means_prior, means_weight
        self.covars_prior, self.covars_weight = covars_prior, covars_weight
        if update == "moments" and (np.any(np.asarray(weights_prior) != 1.0) or np.any(np.asarray(means_weight) != 0)
                                    or covars_prior is not None or covars_weight is not None):
            raise ValueError("the priors of GaussianMixture are options of update='hmmlearn'")
        self._set_params(weights=weights, means=means, covars=covars)

    def _config(self):
        config = {"n_mix": self.n_mix, "covariance_type": self.covariance_type, "min_covar": self.min_covar}
        if self.update == "hmmlearn":
            config.update(weights_prior=_jsonable(self.weights_prior), means_prior=_jsonable(self.means_prior),
                          means_weight=_jsonable(self.means_weight), covars_prior=_jsonable(self.covars_prior),
                          covars_weight=_jsonable(self.covars_weight))
        if self.update != type(self).update:
            config["update"] = self.update
        return self._law_config(**config)

    @property
    def n_features(self):
        """F, or None before the means are set."""
        return None if self.means is None else int(self.means.shape[2])

    def _validate(self):
        w, m, c = self.weights, self.means, self.covars
        if m.ndim != 3:
            raise ValueError(f"`{self._name('means')}` must have shape (n_components, n_mix, n_features); "
                             f"got {m.shape}")
        K, M, F = m.shape
        if M != self.n_mix:
            raise ValueError(f"`{self._name('means')}` has {M} mixture components but n_mix={self.n_mix}")
        if w.shape != (K, M):
            raise ValueError(f"`{self._name('weights')}` must have shape ({K}, {M}); got {w.shape}")
        _check_rows(w, self._name("weights"))
        if not np.all(np.isfinite(m)):
            raise ValueError(f"`{self._name('means')}` must be finite")
        ct = self.covariance_type
        want = {"spherical": (K, M), "diag": (K, M, F), "full": (K, M, F, F), "tied": (K, F, F)}[ct]
        if c.shape != want:
            raise ValueError(f"`{self._name('covars')}` must have shape {want} for covariance_type={ct!r}; "
                             f"got {c.shape}")
        if ct == "tied":
            _check_covars(c, "full", K, F, self._name("covars"))
        elif ct == "full":
            for k in range(K):
                _check_covars(c[k], "full", M, F, self._name("covars"))
        elif np.any(c < 0) or not np.all(np.isfinite(c)) or (self.update == "moments" and np.any(c == 0)):
            raise ValueError(f"`{self._name('covars')}` must be finite and "
                             f"{'non-negative' if self.update == 'hmmlearn' else 'positive'}")

    def check_X(self, X):
        if self._missing_entries:
            return _as_2d(X, n_features=self.n_features)
        return _as_float_2d(X, self.n_features)

    def _component_covars(self, k):
        """Covariances of the components of state k in the compact form of gaussian_log_density."""
        if self.covariance_type == "tied":
            return np.broadcast_to(self.covars[k], (self.n_mix,) + self.covars[k].shape), "full"
        return self.covars[k], self.covariance_type

    def _law_covars(self):
        """All covariances as (K, M, F) variances ("diag") or (K, M, F, F) matrices ("full")."""
        K, M, F = self.means.shape
        if self.covariance_type == "spherical":
            return np.repeat(self.covars[:, :, None], F, axis=2), "diag"
        if self.covariance_type == "tied":
            return np.broadcast_to(self.covars[:, None], (K, M, F, F)), "full"
        return self.covars, self.covariance_type

    def _component_logpdf(self, X):
        """(N, K, M) log w_jm + log N(x; μ_jm, Σ_jm), missing features of a diagonal law marginalised."""
        K, M, F = self.means.shape
        cov, ct = self._law_covars()
        out = np.empty((X.shape[0], K, M))
        with np.errstate(divide="ignore"):
            lw = np.log(self.weights)
        for m in range(M):
            if ct == "diag":
                out[:, :, m] = _diag_logpdf(X, self.means[:, m], cov[:, m])
            else:
                out[:, :, m] = _full_logpdf(X, self.means[:, m], cov[:, m])
        rows_all = np.isnan(X).all(axis=1)
        out += lw[None]
        out[rows_all] = lw[None]  # missing row: Σ_m w_m · 1 = 1
        return out

    def _weighted_components(self, X, k):
        """(N, M) log w_km + log N(x; μ_km, Σ_km) of complete rows (the Numba kernels)."""
        cov, ct = self._component_covars(k)
        with np.errstate(divide="ignore"):
            return gaussian_log_density(X, self.means[k], cov, ct) + np.log(self.weights[k])

    def _log_density(self, X):
        out = np.empty((X.shape[0], self.means.shape[0]))
        for k in range(out.shape[1]):
            with np.errstate(under="ignore"):
                out[:, k] = special.logsumexp(self._weighted_components(X, k), axis=1)
        return out

    def log_density(self, X):
        """log Σ_m w_jm N(x_t; μ_jm, Σ_jm), shape (N, K); 0 for missing rows."""
        if not self._missing_entries:
            return LawOptions.log_density(self, X)
        self._require()
        return special.logsumexp(self._component_logpdf(X), axis=2)

    def fit(self, X, weights, params=None):
        """One weighted EM step of the mixture per state (``update``; states without weight keep their
        parameters); ``params`` (letters, default all) with ``update="hmmlearn"`` only."""
        if self.update == "moments":
            if self._params(params) != self.letters:
                raise ValueError("update='moments' updates all parameters ('mcw'); use update='hmmlearn' "
                                 "to update some")
            return self._moments_step(X, weights)
        complete = ~np.isnan(X).any(axis=1)
        Xo, w = (X, weights) if complete.all() else (X[complete], weights[complete])
        w = np.asarray(w, dtype=np.float64)
        return self._update(w.sum(axis=0), lambda p: self._fit(Xo, w, p), params)

    def _moments_step(self, X, weights):
        """The HSMM's step: per-component weighted moments from the responsibilities."""
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
                    self.means[k, m], self.covars[k, m] = _weighted_mean_cov(Xo, r[:, m], self.min_covar, False)
        return self

    def _fit(self, X, w, params):
        """hmmlearn's step on complete rows X (N, F) with weights w (N, K) for the letters ``params``."""
        K, M, F = self.means.shape
        ct = self.covariance_type
        cp, cw = _gmm_prior_defaults(ct, M, F, self.covars_prior, self.covars_weight)
        resp = np.empty((X.shape[0], K, M))
        for k in range(K):
            lw = self._weighted_components(X, k)
            if M == 1:
                resp[:, k] = 1.0
            else:
                with np.errstate(under="ignore"):
                    resp[:, k] = np.exp(lw - special.logsumexp(lw, axis=1, keepdims=True))
        with np.errstate(under="ignore"):
            r = w[:, :, None] * resp  # (N, K, M)
        mix_sum, post_sum = r.sum(axis=0), w.sum(axis=0)  # (K, M), (K,)
        lam = np.broadcast_to(np.asarray(self.means_weight, dtype=np.float64), (K, M))
        mu0 = np.broadcast_to(np.asarray(self.means_prior, dtype=np.float64), (K, M, F))
        c_n = _mixture_scatter(X, r, self.means, ct) if "c" in params else None  # about the E-step means
        if "w" in params:
            a1 = np.broadcast_to(np.asarray(self.weights_prior, dtype=np.float64), (K, M)) - 1
            self.weights = (mix_sum + a1) / (post_sum + a1.sum(axis=1))[:, None]
        if "m" in params:
            m_n = lam[:, :, None] * mu0 + np.einsum("nkm,nf->kmf", r, X)
            m_d = mix_sum + lam
            m_d[(self.weights == 0) & (m_n == 0).all(axis=-1)] = 1
            self.means = m_n / m_d[:, :, None]
        if "c" in params:
            self.covars = _mixture_covars(ct, c_n, self.means - mu0, lam, mix_sum, post_sum, cp, cw)

    def initialize(self, X, n_states, labels=None, random_state=None, params=None):
        """Initial parameters (``init``): around the per-state Gaussians of the hard ``labels`` (N,)
        (-1 = unlabelled), or hmmlearn's for the letters in ``params`` (default all)."""
        if self.init != "labels":
            return LawOptions.initialize(self, X, n_states, labels, random_state, params)
        rng = check_random_state(random_state)
        ct = self.covariance_type
        diag = ct in ("diag", "spherical")
        base = MultivariateGaussian("diag" if diag else "full", min_covar=self.min_covar)
        base.initialize(X, n_states, labels, rng)
        K, M = n_states, self.n_mix
        F = X.shape[1]
        self.weights = np.full((K, M), 1.0 / M)
        self.means = np.empty((K, M, F))
        self.covars = np.empty((K, M, F) if diag else (K, M, F, F))
        for k in range(K):
            sd = np.sqrt(base.covars[k] if diag else np.diag(base.covars[k]))
            for m in range(M):
                self.means[k, m] = base.means[k] + 0.5 * sd * rng.standard_normal(F)
                self.covars[k, m] = base.covars[k]
        if ct in ("spherical", "tied"):
            self.covars = self.covars.mean(axis=2) if ct == "spherical" else np.array(base.covars)
        return self

    def _initialize(self, X, K, random_state, params):
        """hmmlearn's: k-means states, k-means components within each, the data covariance plus
        ``min_covar``, uniform weights."""
        M = self.n_mix
        cv = _data_covariance(X, self.min_covar)
        rng = check_random_state(random_state)
        if "m" in params or self.means is None:
            centers, labels = _kmeans_centers(X, K, random_state)
            centroid = centers.mean(axis=0)
            means = []
            for k in range(K):
                Xk = X[labels == k]
                if Xk.shape[0] >= M:
                    means.append(_kmeans_centers(Xk, M, random_state)[0])
                else:  # too few points in the cluster: draw around the overall centroid
                    means.append(rng.multivariate_normal(centroid, cv, size=M))
            self.means = np.stack(means)
        if "w" in params or self.weights is None:
            self.weights = np.full((K, M), 1.0 / M)
        if "c" in params or self.covars is None:
            self.covars = {"tied": lambda: np.tile(cv, (K, 1, 1)), "full": lambda: np.tile(cv, (K, M, 1, 1)),
                           "diag": lambda: np.tile(np.diag(cv), (K, M, 1)),
                           "spherical": lambda: np.full((K, M), cv.mean())}[self.covariance_type]()
        self._validate()

    def sample(self, states, random_state=None):
        """Draws, shape (n, F): a component from ``weights[state]``, then a standard normal draw."""
        rng = check_random_state(random_state)
        s = np.asarray(states)
        K, M, F = self.means.shape
        cov, ct = self._law_covars()
        out = np.empty((s.shape[0], F))
        for i, k in enumerate(s):
            m = rng.choice(M, p=self.weights[k])
            z = rng.standard_normal(F)
            if ct == "diag":
                out[i] = self.means[k, m] + np.sqrt(cov[k, m]) * z
            else:
                out[i] = self.means[k, m] + np.linalg.cholesky(cov[k, m]) @ z
        return out

    def _draw_one(self, state, rng):
        """One draw (F,) as hmmlearn: a component from ``weights[state]``, then ``rng.multivariate_normal``."""
        m = rng.choice(self.n_mix, p=self.weights[state])
        cov, ct = self._component_covars(state)
        full = full_covariances(cov, ct, self.n_mix, self.means.shape[2])
        return rng.multivariate_normal(self.means[state, m], full[m])

    def n_parameters(self):
        """K(M − 1) weights + K·M·F means + covariance entries (K·M, K·M·F, K·M·F(F+1)/2, K·F(F+1)/2).

        (hmmlearn 0.3 counts M − 1 weights in total, which undercounts by (K − 1)(M − 1).)"""
        K, M, F = self.means.shape
        cov = {"spherical": K * M, "diag": K * M * F, "full": K * M * F * (F + 1) // 2,
               "tied": K * F * (F + 1) // 2}[self.covariance_type]
        return K * (M - 1) + K * M * F + cov
