"""The maths the Gaussian emission laws share: log-densities (NaN-marginalising numpy for the HSMM's
missing entries, the Numba kernels of :mod:`structlearn.engine.kernels.gaussian` for complete rows),
covariance checks and conversions, weighted scatter matrices, hmmlearn's initial means and covariances
and its mixture covariance update (scatter about the E-step means, priors and their defaults). Used by
:mod:`structlearn.distributions.emissions.gaussian` and :mod:`structlearn.distributions.emissions.hmm`."""
import warnings

import numpy as np
from scipy import linalg

from ...engine.kernels import gaussian as _kg
from ._base import _LOG_2PI

__all__ = ["COVARIANCE_TYPES", "full_covariances", "gaussian_log_density"]

#: The covariance types of the Gaussian laws (hmmlearn's).
COVARIANCE_TYPES = ("spherical", "diag", "full", "tied")


def _check_covariance_type(value, allowed=COVARIANCE_TYPES, owner=""):
    if value not in allowed:
        raise ValueError(f"`covariance_type` must be one of {list(allowed)}{owner}; got {value!r}")
    return value


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
    """``cov`` symmetrised with its eigenvalues clipped from below at ``floor``."""
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


#: Added to the diagonal of a covariance that is not positive definite at density time (hmmlearn's value).
SINGULAR_JITTER = 1e-7


def _cholesky(cov, c):
    """Lower Cholesky factor of covariance ``c``; hmmlearn's retry with ``SINGULAR_JITTER`` on the diagonal."""
    try:
        return linalg.cholesky(cov, lower=True)
    except linalg.LinAlgError:
        pass
    try:
        L = linalg.cholesky(cov + SINGULAR_JITTER * np.eye(cov.shape[0]), lower=True)
    except linalg.LinAlgError:
        raise ValueError(f"covariance {c} is not symmetric positive definite") from None
    warnings.warn(f"covariance {c} is not positive definite (a state with too few observations?): its density "
                  f"uses it with {SINGULAR_JITTER:g} added to the diagonal, as hmmlearn does", RuntimeWarning,
                  stacklevel=3)
    return L


def gaussian_log_density(X, means, covars, covariance_type):
    """log N(x_n; μ_c, Σ_c) of complete rows, shape (N, C) float64.

    ``means`` (C, F); ``covars`` (C,) spherical, (C, F) diag, (C, F, F) full or (F, F) tied. Diagonal
    variances are floored at the smallest positive float (as hmmlearn). A full or tied covariance whose
    Cholesky factorisation fails (a state EM left with too few observations) is used with
    ``SINGULAR_JITTER`` added to its diagonal, as hmmlearn does, with a ``RuntimeWarning`` naming it; one
    that still fails raises ``ValueError``. The per-row work runs in the Numba kernels of
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
            L = _cholesky(cov[c], c)
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


def _gmm_prior_defaults(covariance_type, n_mix, n_features, covars_prior, covars_weight):
    """hmmlearn's GMMHMM defaults for ``None`` covariance priors (they make the M-step the MLE)."""
    F, M = n_features, n_mix
    prior, weight = {"full": (0.0, -(1.0 + F + 1.0)), "tied": (0.0, -(M + F + 1.0)),
                     "diag": (-1.5, 0.0), "spherical": (-(M + 2.0) / 2.0, 0.0)}[covariance_type]
    return (prior if covars_prior is None else covars_prior,
            weight if covars_weight is None else covars_weight)


def _mixture_scatter(X, r, means, covariance_type):
    """Σ_t r_tkm (x_t − μ_km)(x_t − μ_km)ᵀ of complete rows X (N, F) with responsibilities r (N, K, M) in
    the compact form of ``covariance_type`` ((K, M) spherical, (K, M, F) diag, (K, M, F, F) full, summed
    over components (K, F, F) tied)."""
    K, M, F = means.shape
    ct = covariance_type
    c_n = np.zeros({"spherical": (K, M), "diag": (K, M, F), "full": (K, M, F, F), "tied": (K, F, F)}[ct])
    for k in range(K):
        for m in range(M):
            d = X - means[k, m]
            rk = r[:, k, m]
            if ct == "full":
                c_n[k, m] = (d * rk[:, None]).T @ d
            elif ct == "diag":
                c_n[k, m] = rk @ (d * d)
            elif ct == "spherical":
                c_n[k, m] = rk @ (d * d).sum(axis=1)
            else:
                c_n[k] += (d * rk[:, None]).T @ d
    return c_n


def _mixture_covars(covariance_type, c_n, dm, lam, mix_sum, post_sum, cp, cw):
    """hmmlearn's MAP mixture covariances from the scatter ``c_n`` (:func:`_mixture_scatter`), the means'
    offsets ``dm`` (K, M, F) from their prior mean, the means' prior weight ``lam`` (K, M), the component
    and state weights ``mix_sum`` (K, M), ``post_sum`` (K,) and the covariance prior ``cp``, ``cw``."""
    K, M, F = dm.shape
    if covariance_type == "full":
        psi = np.transpose(np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, M, F, F)), (0, 1, 3, 2))
        nu = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K, M))
        num = psi + lam[:, :, None, None] * dm[..., :, None] * dm[..., None, :] + c_n
        return num / (mix_sum + 1 + nu + F + 1)[:, :, None, None]
    if covariance_type == "diag":
        alpha = np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, M, F))
        beta = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K, M, F))
        num = lam[:, :, None] * dm ** 2 + 2 * beta + c_n
        return num / (mix_sum[:, :, None] + 1 + 2 * (alpha + 1))
    if covariance_type == "spherical":
        alpha = np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, M))
        beta = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K, M))
        num = lam * (dm * dm).sum(axis=-1) + 2 * beta + c_n
        return num / (F * (mix_sum + 1) + 2 * (alpha + 1))
    psi = np.transpose(np.broadcast_to(np.asarray(cp, dtype=np.float64), (K, F, F)), (0, 2, 1))
    nu = np.broadcast_to(np.asarray(cw, dtype=np.float64), (K,))
    num = np.einsum("km,kmi,kmj->kij", lam, dm, dm) + psi + c_n
    return num / (post_sum + M + nu + F + 1)[:, None, None]
