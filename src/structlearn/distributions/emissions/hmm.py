r"""Emission families with hmmlearn's parametrisation, initialisation and MAP M-steps.

This module holds ``GaussianHMMEmission`` (the law :class:`~structlearn.distributions.emissions.gaussian.
MultivariateGaussian` in the hmmlearn mode, fixing options only), ``GMMHMMEmission`` (which still carries its
own mixture update beside :class:`~structlearn.distributions.emissions.gaussian.GaussianMixture`) and re-exports the
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
from scipy import special
from sklearn.utils import check_random_state

from structlearn.distributions.emissions._base import EmissionDistribution
from structlearn.distributions.emissions._gaussian_maths import (COVARIANCE_TYPES, _check_covariance_type, _check_covars,
                                                                 _data_covariance, _kmeans_centers, full_covariances,
                                                                 gaussian_log_density)
from structlearn.distributions.emissions.gaussian import MultivariateGaussian
from structlearn.distributions.emissions._hmm_family import HMMFamily, _as_float_2d, _check_rows, _jsonable, observed_rows
from structlearn.distributions.emissions.hmm_counts import CategoricalHMMEmission, MultinomialHMMEmission, PoissonHMMEmission

__all__ = ["GaussianHMMEmission", "GMMHMMEmission", "CategoricalHMMEmission", "MultinomialHMMEmission",
           "PoissonHMMEmission", "COVARIANCE_TYPES", "gaussian_log_density", "full_covariances",
           "observed_rows"]

class GaussianHMMEmission(HMMFamily, MultivariateGaussian):
    r""":class:`~structlearn.distributions.emissions.gaussian.MultivariateGaussian` in the hmmlearn mode
    (hmmlearn's ``GaussianHMM``): covariance types "spherical", "diag", "full", "tied", hmmlearn's
    default covariance prior, letters ``"mc"``; whole rows missing only.

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
        Inverse-gamma or inverse-Wishart prior (see the law); hmmlearn's default adds 1e-2 to every
        scatter.
    """

    covariance_types = COVARIANCE_TYPES
    _missing_entries = False

    def __init__(self, covariance_type="diag", means=None, covars=None, min_covar=1e-3, means_prior=0.0,
                 means_weight=0.0, covars_prior=1e-2, covars_weight=1.0):
        super().__init__(covariance_type, means, covars, min_covar, means_prior, means_weight, covars_prior,
                         covars_weight, init="hmmlearn")


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
