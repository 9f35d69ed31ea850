r"""Emission families with hmmlearn's parametrisation, initialisation and MAP M-steps.

This module holds the Gaussian families (``GaussianHMMEmission``, ``GMMHMMEmission``, which still carry
their own maths beside the laws of :mod:`structlearn.distributions.emissions.gaussian`) and re-exports the
count names of :mod:`structlearn.distributions.emissions.hmm_counts` (``CategoricalHMMEmission``,
``MultinomialHMMEmission``, ``PoissonHMMEmission``: the laws ``Categorical``, ``Multinomial`` and
``Poisson`` of :mod:`structlearn.distributions.emissions.discrete` in the hmmlearn mode, fixing options
only); the mixins are in :mod:`structlearn.distributions.emissions._hmm_family`.

The hidden Markov estimators of :mod:`structlearn.hmm` (``GaussianHMM``, ``GMMHMM``, ``CategoricalHMM``,
``MultinomialHMM``, ``PoissonHMM``) keep their emission parameters in one of these objects; each follows
the emission protocol of :mod:`structlearn.distributions.emissions` (``log_density``, ``fit``, ``sample``,
``initialize``, ``n_parameters``, ``check_X``, ``get_state``/``set_state``), so they also serve
:class:`structlearn.HiddenSemiMarkovModel` and the generic ``HiddenMarkovModel``.

What makes them hmmlearn's (0.3.x) is written once per family:

- the parameter letters of ``params`` / ``init_params`` (``letters``): Gaussian ``"mc"`` (means,
  covariances), GMM ``"mcw"`` (+ mixture weights), categorical and multinomial ``"e"`` (emission
  probabilities), Poisson ``"l"`` (rates); ``fit(X, weights, params)`` updates only those named;
- the M-step with hmmlearn's priors (the maximisers of the expected complete-data log-likelihood plus
  the log prior, Huang, Acero & Hon 2001, "Spoken Language Processing", §9.3 pp. 443–445; Dirichlet
  rows for discrete emissions; normal / inverse-gamma / inverse-Wishart for Gaussians), including its
  defaults (``GaussianHMM``'s ``covars_prior=1e-2`` regularises every fitted covariance);
- the initialisation: k-means means (``sklearn.cluster.KMeans(n_init=10)`` seeded with the
  estimator's ``random_state``), covariances from the data covariance plus ``min_covar`` on the
  diagonal, random emission probabilities, gamma-distributed Poisson rates.

The priors are constructor settings; arrays broadcast against the parameter they regularise (a 1-d
array of length K is per state). **Missing observations**: a row that is all NaN is unobserved (log
density 0 in every state, no weight in ``fit``); partly missing rows raise ``ValueError`` (use
``HiddenMarkovModel(emission=MultivariateGaussian("diag"))`` to marginalise single features).

Error messages name parameters with ``suffix`` appended (the estimators pass ``"_"``: ``covars_``).
"""
import numpy as np
from scipy import linalg, special
from sklearn.utils import check_random_state

from structlearn.engine.kernels import gaussian as _kg
from structlearn.distributions.emissions._base import EmissionDistribution
from structlearn.distributions.emissions._hmm_family import HMMFamily, _as_float_2d, _check_rows, _jsonable, _per_state, observed_rows
from structlearn.distributions.emissions.hmm_counts import CategoricalHMMEmission, MultinomialHMMEmission, PoissonHMMEmission

__all__ = ["GaussianHMMEmission", "GMMHMMEmission", "CategoricalHMMEmission", "MultinomialHMMEmission",
           "PoissonHMMEmission", "COVARIANCE_TYPES", "gaussian_log_density", "full_covariances",
           "observed_rows"]

COVARIANCE_TYPES = ("spherical", "diag", "full", "tied")
_LOG_2PI = np.log(2 * np.pi)


# ------------------------------------------------------------------------------------------------------
# Gaussian helpers
# ------------------------------------------------------------------------------------------------------
def _check_covariance_type(value):
    if value not in COVARIANCE_TYPES:
        raise ValueError(f"`covariance_type` must be one of {list(COVARIANCE_TYPES)}; got {value!r}")
    return value


def full_covariances(covars, covariance_type, n_states, n_features):
    """Covariances in the full (K, F, F) form from the compact one of ``covariance_type``."""
    c = np.asarray(covars, dtype=np.float64)
    if covariance_type == "full":
        return c
    if covariance_type == "tied":
        return np.broadcast_to(c, (n_states, n_features, n_features)).copy()
    if covariance_type == "spherical":
        c = c.reshape(n_states, 1, 1)
        return c * np.eye(n_features)[None]
    return c[:, :, None] * np.eye(n_features)[None]


def gaussian_log_density(X, means, covars, covariance_type):
    """log N(x_n; μ_c, Σ_c) of complete rows, shape (N, C) float64.

    ``means`` (C, F); ``covars`` (C,) spherical, (C, F) diag, (C, F, F) full or (F, F) tied. Diagonal
    variances are floored at the smallest positive float (as hmmlearn); a full covariance that is not
    positive definite raises ``ValueError``. The per-row work runs in the Numba kernels of
    :mod:`structlearn.engine.kernels.gaussian` (directly on x − μ: no cancellation). Time O(N·C·F) (diag) or
    O(N·C·F²) (full).
    """
    XT = np.ascontiguousarray(np.asarray(X, dtype=np.float64).T)  # (F, N): the kernels run along rows
    means = np.ascontiguousarray(means, dtype=np.float64)
    C, F = means.shape
    if covariance_type in ("spherical", "diag"):
        var = np.asarray(covars, dtype=np.float64)
        var = np.broadcast_to(var.reshape(C, 1) if var.ndim == 1 else var, (C, F))
        prec = np.ascontiguousarray(1.0 / np.maximum(var, np.finfo(np.float64).tiny))
        log_norm = -0.5 * (F * _LOG_2PI - np.log(prec).sum(axis=1))
        return np.ascontiguousarray(_kg.gaussian_diag_log_density(XT, means, prec, log_norm).T)
    cov = np.broadcast_to(covars, (C, F, F)) if covariance_type == "tied" else covars
    prec_chol = np.empty((C, F, F))
    log_norm = np.empty(C)
    for c in range(C):
        if covariance_type != "tied" or c == 0:
            try:
                L = linalg.cholesky(cov[c], lower=True)
            except linalg.LinAlgError:
                raise ValueError(f"covariance {c} is not symmetric positive definite") from None
            # z = L⁻¹(x − μ) as (x − μ) L⁻ᵀ
            P = linalg.solve_triangular(L, np.eye(F), lower=True).T
            half_logdet = np.log(np.diag(L)).sum()
        prec_chol[c] = P
        log_norm[c] = -0.5 * F * _LOG_2PI - half_logdet
    return np.ascontiguousarray(_kg.gaussian_full_log_density(XT, means, prec_chol, log_norm).T)


def _check_covars(c, covariance_type, K, F, name):
    """``ValueError`` unless ``c`` has the compact shape of ``covariance_type`` and is positive (definite)."""
    want = {"spherical": (K,), "diag": (K, F), "full": (K, F, F), "tied": (F, F)}[covariance_type]
    if c.shape != want:
        raise ValueError(f"`{name}` must have shape {want} for covariance_type={covariance_type!r}; "
                         f"got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError(f"`{name}` must be finite")
    if covariance_type in ("spherical", "diag"):
        if np.any(c <= 0):
            idx = np.unravel_index(int(np.argmin(c)), c.shape)
            raise ValueError(f"`{name}` must be positive ({covariance_type!r} variances); got {c[idx]:.6g} "
                             f"at index {tuple(int(i) for i in idx)}")
        return
    mats = c[None] if covariance_type == "tied" else c
    for k, m in enumerate(mats):
        where = "" if covariance_type == "tied" else f" of state {k}"
        if not np.allclose(m, m.T):
            raise ValueError(f"`{name}`: the covariance{where} is not symmetric")
        ev = np.linalg.eigvalsh(m).min()
        if ev <= 0:
            raise ValueError(f"`{name}`: the covariance{where} is not positive definite (smallest "
                             f"eigenvalue {ev:.6g})")


def _weighted_scatter(X, w, max_entries=2 ** 25):
    """Σ_t w_tk x_t x_tᵀ, shape (K, F, F): one (K, N) @ (N, F²) product when the N·F² outer products fit
    in ``max_entries`` floats, else a product per state."""
    N, F = X.shape
    K = w.shape[1]
    if N * F * F <= max_entries:
        outer = (X[:, :, None] * X[:, None, :]).reshape(N, F * F)
        return (w.T @ outer).reshape(K, F, F)
    return np.stack([(X * w[:, k:k + 1]).T @ X for k in range(K)])


def _kmeans_centers(X, n_clusters, random_state):
    from sklearn.cluster import KMeans
    km = KMeans(n_clusters=n_clusters, random_state=random_state, n_init=10)
    labels = km.fit_predict(X)
    return km.cluster_centers_, labels


def _data_covariance(X, min_covar):
    """np.cov(X.T) + min_covar·I as a (F, F) array (hmmlearn's initial covariance)."""
    F = X.shape[1]
    cv = np.cov(X.T) + min_covar * np.eye(F) if X.shape[0] > 1 else np.eye(F)
    return np.asarray(cv, dtype=np.float64).reshape(F, F)


# ------------------------------------------------------------------------------------------------------
class GaussianHMMEmission(HMMFamily, EmissionDistribution):
    r"""Gaussian emissions N(x; μ_j, Σ_j) with hmmlearn's ``GaussianHMM`` parametrisation.

    Parameters
    ----------
    covariance_type : {"spherical", "diag", "full", "tied"}, default "diag"
        Σ_j = σ²_j I, diagonal, full, or one full Σ shared by all states.
    means : array-like, shape (K, F), optional
    covars : array-like, optional
        Compact form: (K,) spherical, (K, F) diag, (K, F, F) full, (F, F) tied.
    min_covar : float, default 1e-3
        Added to the diagonal of the data covariance that initialises ``covars`` (as hmmlearn; the
        M-step's regulariser is ``covars_prior``).
    means_prior, means_weight : float or array, default 0, 0
        Normal prior on the means: mean μ₀ (broadcast to (K, F)) and precision scale λ.
    covars_prior, covars_weight : float or array, default 1e-2, 1
        Inverse-gamma (spherical, diag: Σ_j ← (covars_prior + S) / (max(covars_weight - 1, 0) + n_j),
        floored at 1e-5 in the denominator) or inverse-Wishart (full, tied: (covars_prior + S) /
        (max(covars_weight - F, 0) + n_j); a scalar covars_prior is added to every entry of the
        scatter matrix S, as hmmlearn does) prior.

    Notes
    -----
    M-step (hmmlearn 0.3; Huang, Acero & Hon 2001 pp. 443–445) with n_j = Σ_t γ_tj:
    μ_j = (λ μ₀ + Σ_t γ_tj x_t) / (λ + n_j); S_j = λ (μ_j − μ₀)(μ_j − μ₀)ᵀ + Σ_t γ_tj (x_t − μ_j)(x_t − μ_j)ᵀ
    (diagonal for spherical/diag, averaged over features for spherical, summed over states for tied).
    Time O(N·K·F) diag, O(N·K·F²) full.
    """

    _param_names = ("means", "covars")
    letters = "mc"
    param_letters = {"means": "m", "covars": "c"}

    def __init__(self, covariance_type="diag", means=None, covars=None, min_covar=1e-3, means_prior=0.0,
                 means_weight=0.0, covars_prior=1e-2, covars_weight=1.0):
        self.covariance_type = _check_covariance_type(covariance_type)
        self.min_covar = float(min_covar)
        self.means_prior, self.means_weight = means_prior, means_weight
        self.covars_prior, self.covars_weight = covars_prior, covars_weight
        self._set_params(means=means, covars=covars)

    def _config(self):
        return {"covariance_type": self.covariance_type, "min_covar": self.min_covar,
                "means_prior": _jsonable(self.means_prior), "means_weight": _jsonable(self.means_weight),
                "covars_prior": _jsonable(self.covars_prior),
                "covars_weight": _jsonable(self.covars_weight)}

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
        return _as_float_2d(X, self.n_features)

    def _log_density(self, X):
        return gaussian_log_density(X, self.means, self.covars, self.covariance_type)

    def statistics(self, X, w):
        """Weighted sufficient statistics of complete rows ``X`` (N, F) under posterior weights ``w``
        (N, K): ``post`` Σ_t w_tk (K,), ``x`` Σ_t w_tk x_t (K, F) and ``xx`` Σ_t w_tk x_t² (K, F)
        (spherical, diag) or Σ_t w_tk x_t x_tᵀ (K, F, F) (full, tied); float64. The M-step
        (:meth:`~structlearn.distributions.emissions._hmm_family.LawOptions.m_step`) is a function of these only, so batch EM (``fit``) and online EM (averaged
        statistics, :mod:`structlearn.hmm._online_statistics`) share it. Time O(N·K·F) (O(N·K·F²) full,
        tied)."""
        xx = w.T @ (X * X) if self.covariance_type in ("spherical", "diag") else _weighted_scatter(X, w)
        return {"post": w.sum(axis=0), "x": w.T @ X, "xx": xx}

    def _m_step(self, stats, params):
        post, obs = stats["post"], stats["x"]
        K, F = obs.shape
        denom = post[:, None]
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

    def _restore_states(self, old, keep):
        if old["means"] is not None:
            self.means[keep] = old["means"][keep]
        if old["covars"] is not None and self.covariance_type != "tied":
            self.covars[keep] = old["covars"][keep]

    def _initialize(self, X, K, random_state, params):
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

    def sample_one(self, state, rng):
        """One draw of state ``state`` (F,) (``rng.multivariate_normal``, as hmmlearn)."""
        return rng.multivariate_normal(self.means[state], self.full_covars()[state])

    def n_parameters(self):
        """hmmlearn's count: K·F means + K (spherical), K·F (diag), K·F(F+1)/2 (full), F(F+1)/2 (tied)."""
        K, F = self.means.shape
        return K * F + {"spherical": K, "diag": K * F, "full": K * F * (F + 1) // 2,
                        "tied": F * (F + 1) // 2}[self.covariance_type]


# ------------------------------------------------------------------------------------------------------
def _gmm_prior_defaults(covariance_type, n_mix, n_features, covars_prior, covars_weight):
    """hmmlearn's GMMHMM defaults for ``None`` covariance priors (they make the M-step the MLE)."""
    F, M = n_features, n_mix
    prior, weight = {"full": (0.0, -(1.0 + F + 1.0)), "tied": (0.0, -(M + F + 1.0)),
                     "diag": (-1.5, 0.0), "spherical": (-(M + 2.0) / 2.0, 0.0)}[covariance_type]
    return (prior if covars_prior is None else covars_prior,
            weight if covars_weight is None else covars_weight)


class GMMHMMEmission(HMMFamily, EmissionDistribution):
    r"""Gaussian-mixture emissions b_j(x) = Σ_m w_jm N(x; μ_jm, Σ_jm) with hmmlearn's ``GMMHMM``
    parametrisation.

    Parameters
    ----------
    n_mix : int, default 1
        Components per state M.
    covariance_type : {"spherical", "diag", "full", "tied"}, default "diag"
        "tied": the M components of a state share one full covariance (hmmlearn's meaning).
    weights : array-like, shape (K, M), optional
    means : array-like, shape (K, M, F), optional
    covars : array-like, optional
        (K, M) spherical, (K, M, F) diag, (K, M, F, F) full, (K, F, F) tied.
    min_covar : float, default 1e-3
        Added to the diagonal of the initial data covariance.
    weights_prior : float or array (K, M), default 1.0
        Dirichlet prior of the mixture weights.
    means_prior, means_weight : default 0, 0
        Normal prior of the component means.
    covars_prior, covars_weight : default None
        Inverse-gamma / inverse-Wishart prior; ``None`` takes hmmlearn's defaults, which make the
        update the maximum-likelihood one.

    Notes
    -----
    One EM step of the mixture inside the HMM's M-step (Rabiner 1989, eqs. 52–54), as hmmlearn 0.3
    computes it: responsibilities r_tjm = γ_tj w_jm N_jm(x_t) / b_j(x_t); the covariance scatter is
    centred at the means of the E-step (the means are then re-estimated), which is a coordinate
    ascent step and never decreases the likelihood without priors.
    """

    _param_names = ("weights", "means", "covars")
    letters = "mcw"
    param_letters = {"weights": "w", "means": "m", "covars": "c"}

    def __init__(self, n_mix=1, covariance_type="diag", weights=None, means=None, covars=None,
                 min_covar=1e-3, weights_prior=1.0, means_prior=0.0, means_weight=0.0, covars_prior=None,
                 covars_weight=None):
        if isinstance(n_mix, bool) or not isinstance(n_mix, (int, np.integer)) or n_mix < 1:
            raise ValueError(f"`n_mix` must be a positive integer; got {n_mix!r}")
        self.n_mix = int(n_mix)
        self.covariance_type = _check_covariance_type(covariance_type)
        self.min_covar = float(min_covar)
        self.weights_prior, self.means_prior, self.means_weight = weights_prior, means_prior, means_weight
        self.covars_prior, self.covars_weight = covars_prior, covars_weight
        self._set_params(weights=weights, means=means, covars=covars)

    def _config(self):
        return {"n_mix": self.n_mix, "covariance_type": self.covariance_type, "min_covar": self.min_covar,
                "weights_prior": _jsonable(self.weights_prior), "means_prior": _jsonable(self.means_prior),
                "means_weight": _jsonable(self.means_weight), "covars_prior": _jsonable(self.covars_prior),
                "covars_weight": _jsonable(self.covars_weight)}

    @property
    def n_features(self):
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
        elif np.any(c < 0) or not np.all(np.isfinite(c)):
            raise ValueError(f"`{self._name('covars')}` must be finite and non-negative")

    def _component_covars(self, k):
        """Covariances of the components of state k in the compact form of gaussian_log_density."""
        ct = self.covariance_type
        if ct == "tied":
            return np.broadcast_to(self.covars[k], (self.n_mix,) + self.covars[k].shape), "full"
        return self.covars[k], ct

    def check_X(self, X):
        return _as_float_2d(X, self.n_features)

    def _weighted_components(self, X, k):
        cov, ct = self._component_covars(k)
        with np.errstate(divide="ignore"):
            return gaussian_log_density(X, self.means[k], cov, ct) + np.log(self.weights[k])

    def _log_density(self, X):
        out = np.empty((X.shape[0], self.means.shape[0]))
        for k in range(out.shape[1]):
            with np.errstate(under="ignore"):
                out[:, k] = special.logsumexp(self._weighted_components(X, k), axis=1)
        return out

    def _fit(self, X, w, params):
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
        mix_sum = r.sum(axis=0)  # (K, M)
        post_sum = w.sum(axis=0)  # (K,)
        lam = np.broadcast_to(np.asarray(self.means_weight, dtype=np.float64), (K, M))
        mu0 = np.broadcast_to(np.asarray(self.means_prior, dtype=np.float64), (K, M, F))
        c_n = None
        if "c" in params:  # scatter about the E-step means
            c_n = np.zeros_like(self.covars)
            for k in range(K):
                for m in range(M):
                    d = X - self.means[k, m]
                    rk = r[:, k, m]
                    if ct == "full":
                        c_n[k, m] = (d * rk[:, None]).T @ d
                    elif ct == "diag":
                        c_n[k, m] = rk @ (d * d)
                    elif ct == "spherical":
                        c_n[k, m] = rk @ (d * d).sum(axis=1)
                    else:
                        c_n[k] += (d * rk[:, None]).T @ d
        if "w" in params:
            a1 = np.broadcast_to(np.asarray(self.weights_prior, dtype=np.float64), (K, M)) - 1
            self.weights = (mix_sum + a1) / (post_sum + a1.sum(axis=1))[:, None]
        if "m" in params:
            m_n = lam[:, :, None] * mu0 + np.einsum("nkm,nf->kmf", r, X)
            m_d = mix_sum + lam
            m_d[(self.weights == 0) & (m_n == 0).all(axis=-1)] = 1
            self.means = m_n / m_d[:, :, None]
        if "c" in params:
            dm = self.means - mu0
            if ct == "full":
                psi = np.transpose(np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, M, F, F)),
                                   (0, 1, 3, 2))
                nu = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K, M))
                num = psi + lam[:, :, None, None] * dm[..., :, None] * dm[..., None, :] + c_n
                self.covars = num / (mix_sum + 1 + nu + F + 1)[:, :, None, None]
            elif ct == "diag":
                alpha = np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, M, F))
                beta = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K, M, F))
                num = lam[:, :, None] * dm ** 2 + 2 * beta + c_n
                self.covars = num / (mix_sum[:, :, None] + 1 + 2 * (alpha + 1))
            elif ct == "spherical":
                alpha = np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, M))
                beta = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K, M))
                num = lam * (dm * dm).sum(axis=-1) + 2 * beta + c_n
                self.covars = num / (F * (mix_sum + 1) + 2 * (alpha + 1))
            else:
                psi = np.transpose(np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, F, F)), (0, 2, 1))
                nu = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K,))
                num = np.einsum("km,kmi,kmj->kij", lam, dm, dm) + psi + c_n
                self.covars = num / (post_sum + M + nu + F + 1)[:, None, None]

    def _initialize(self, X, K, random_state, params):
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
            ct = self.covariance_type
            self.covars = {"tied": lambda: np.tile(cv, (K, 1, 1)), "full": lambda: np.tile(cv, (K, M, 1, 1)),
                           "diag": lambda: np.tile(np.diag(cv), (K, M, 1)),
                           "spherical": lambda: np.full((K, M), cv.mean())}[ct]()
        self._validate()

    def sample_one(self, state, rng):
        """One draw (F,): a component from ``weights_[state]``, then its Gaussian (as hmmlearn)."""
        m = rng.choice(self.n_mix, p=self.weights[state])
        cov, ct = self._component_covars(state)
        F = self.means.shape[2]
        full = full_covariances(cov, "full" if ct == "full" else ct, self.n_mix, F)
        return rng.multivariate_normal(self.means[state, m], full[m])

    def n_parameters(self):
        """K(M − 1) weights + K·M·F means + covariance entries (K·M, K·M·F, K·M·F(F+1)/2, K·F(F+1)/2).

        (hmmlearn 0.3 counts M − 1 weights in total, which undercounts by (K − 1)(M − 1).)"""
        K, M, F = self.means.shape
        cov = {"spherical": K * M, "diag": K * M * F, "full": K * M * F * (F + 1) // 2,
               "tied": K * F * (F + 1) // 2}[self.covariance_type]
        return K * (M - 1) + K * M * F + cov
