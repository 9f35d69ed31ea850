r"""Non-parametric duration families of the HSMM: the categorical law on 1..D and the convex, non-increasing
law (Yu 2010, "Hidden semi-Markov models", §3.1, §4.1).
"""
import numpy as np
from scipy import optimize, stats

from ._base import _NEG_INF, DurationDistribution, _check_positive_int, _checked_log_pmf, _normalise_log, _q_value
from ..base import check_stochastic_rows

__all__ = ["NonParametric", "ConvexMonotone", "triangular_basis"]


def _check_rows(a, name, layout, what):
    """``a`` (K, D), D >= 1, with stochastic rows, else ``ValueError`` (``layout`` says what a row is)."""
    if a.ndim != 2 or a.shape[1] < 1:
        raise ValueError(f"`{name}` must have shape (K, D) ({layout}); got {a.shape}")
    check_stochastic_rows(a, name, what)


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
        _check_rows(self.probs, "probs", "one row of duration probabilities per state",
                    " (duration probabilities)")

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
        return _checked_log_pmf(out, D, hint="; increase `max_duration`")

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


def _pad_rows(p, D):
    """Rows of p (K, D') truncated or zero-padded to D columns."""
    if p.shape[1] >= D:
        return p[:, :D]
    return np.concatenate([p, np.zeros((p.shape[0], D - p.shape[1]))], axis=1)


def triangular_basis(D):
    r"""The triangular pmfs T_m(d) = 2 (m + 1 - d) / (m (m + 1)) on d = 1..m, m = 1..D.

    Returns float64 (D, D), ``A[d - 1, m - 1] = T_m(d)`` (columns sum to one). Every non-increasing
    convex pmf with support in 1..D (and p(D + 1) = 0) is a mixture Σ_m π_m T_m (Durot, Huet, Koladjo &
    Robin 2013, "Least-squares estimation of a convex discrete distribution", Prop. 1). Mean of T_m:
    (m + 2) / 3.
    """
    d = np.arange(1, D + 1, dtype=np.float64)[:, None]
    m = np.arange(1, D + 1, dtype=np.float64)[None, :]
    return np.where(d <= m, 2.0 * (m + 1.0 - d) / (m * (m + 1.0)), 0.0)


class ConvexMonotone(DurationDistribution):
    r"""Convex, non-increasing non-parametric durations (Yu 2010 §4.1, "convex monotone").

    p_j(d) = Σ_{m=1}^{D'} π_jm T_m(d), the mixtures of the triangular pmfs of :func:`triangular_basis`:
    exactly the pmfs on 1..D' that are non-increasing and convex (with p(D' + 1) = 0). A shape
    constraint without a parametric form, e.g. for the sojourns of a state that mostly ends quickly
    but has a long tail.

    Parameters
    ----------
    weights : array-like of float64, shape (K, D'), optional
        Mixing weights π_jm >= 0, rows summing to one. For another D the pmf on 1..D' is truncated or
        zero-padded and renormalised (as :class:`NonParametric`).
    max_iter : int, default 100
        Constrained-Newton iterations of the M-step.

    Notes
    -----
    ``fit`` is the constrained MLE of Q(π) = Σ_d n_d log (Aπ)_d - F log Σ_m π_m (m + 2)/3 over the
    simplex (A the triangular basis): 20 EM steps of the mixture weights (π_m ← π_m Σ_d n_d A_dm /
    (N (Aπ)_d)), then the constrained Newton method of Wang (2007, "On fast computation of the
    non-parametric maximum likelihood estimate of a mixing distribution", JRSS B 69): the quadratic
    model Σ_d n_d ((Aπ)_d / p_d - 2)² of the log-likelihood, Σ π = 1 as a weighted row, minimised over
    π >= 0 by ``scipy.optimize.nnls`` (Lawson–Hanson active set), then a backtracking line search on Q.
    The best of the current, EM and Newton weights by Q is kept, so Q never decreases. With F = 0 Q is
    concave in π and this converges to its maximiser (KKT: Σ_d n_d A_dm / (Aπ)_d <= N, with equality
    where π_m > 0). Cost per state: O(D²) per EM step, O(D³) per Newton iteration (NNLS).
    """

    _param_names = ("weights",)

    def __init__(self, weights=None, max_iter=100):
        self.max_iter = _check_positive_int(max_iter, "max_iter")
        self.weights = None if weights is None else np.array(weights, dtype=np.float64)
        if self.weights is not None:
            self._validate()

    def _config(self):
        return {"max_iter": self.max_iter}

    def _validate(self):
        _check_rows(self.weights, "weights", "mixing weights of the triangular pmfs, one row per state",
                    " (mixing weights)")

    def pmf_rows(self):
        """The pmf rows p_j(d) on 1..D', shape (K, D') (linear space)."""
        self._require()
        return self.weights @ triangular_basis(self.weights.shape[1]).T

    def log_pmf(self, max_duration):
        """Truncated, renormalised log p_j(d), shape (D, K), float64 (-inf for zero probability)."""
        D = _check_positive_int(max_duration, "max_duration")
        with np.errstate(divide="ignore"):
            out = _normalise_log(np.log(_pad_rows(self.pmf_rows(), D).T))
        return _checked_log_pmf(out, D, hint="; increase `max_duration`")

    def fit(self, counts, left_weight=None):
        """Constrained weighted MLE from expected counts (D, K) and left-censored weights (K,)."""
        counts = np.asarray(counts, dtype=np.float64)
        D, K = counts.shape
        left = np.zeros(K) if left_weight is None else np.asarray(left_weight, dtype=np.float64)
        A = triangular_basis(D)
        mu = (np.arange(1, D + 1, dtype=np.float64) + 2.0) / 3.0
        old = None if self.weights is None else _pad_rows(self.weights, D)
        if old is not None:
            s = old.sum(axis=1, keepdims=True)
            old = np.where(s > 0, old / np.where(s > 0, s, 1.0), 1.0 / D)
        new = np.empty((K, D))
        for k in range(K):
            n = np.maximum(counts[:, k], 0.0)
            N = n.sum()
            cur = old[k] if old is not None else None
            if N <= 0:
                new[k] = cur if cur is not None else np.full(D, 1.0 / D)
                continue
            new[k] = self._fit_one(A, mu, n, max(0.0, float(left[k])), cur)
        self.weights = new
        return self

    def _fit_one(self, A, mu, n, F, cur):
        D = n.shape[0]
        N = n.sum()
        nz = n > 0

        def q(pi):
            p = A @ pi
            if np.any(p[nz] <= 0):
                return _NEG_INF
            return float(n[nz] @ np.log(p[nz])) - (F * np.log(mu @ pi) if F > 0 else 0.0)

        x = np.full(D, 1.0 / D) if cur is None else np.maximum(cur, 1e-12 / D)
        x /= x.sum()
        for _ in range(20):  # a few EM steps of the mixture weights: a safe start
            p = A @ x
            x = x * (A.T @ np.where(nz, n / np.where(nz, p, 1.0), 0.0)) / N
            x /= x.sum()
        cands = [x] + ([cur] if cur is not None else [])
        # constrained Newton (Wang 2007): the quadratic model Σ_d n_d ((Aπ)_d / p_d - 2)² of the
        # log-likelihood at p = Aπ, with Σ π = 1 as a heavily weighted row, minimised over π >= 0 by
        # NNLS (Lawson–Hanson active set); then a backtracking line search on Q itself
        sw = np.sqrt(n[nz])
        lam = 10.0 * np.sqrt(N)
        qx = q(x)
        for _ in range(self.max_iter):
            p = A @ x
            S = np.vstack([A[nz] * (sw / p[nz])[:, None], np.full((1, D), lam)])
            y = optimize.nnls(S, np.r_[2.0 * sw, lam], maxiter=50 * D)[0]
            if not y.sum() > 0:
                break
            y /= y.sum()
            t, improved = 1.0, False
            while t > 1e-10:
                z = x + t * (y - x)
                qz = q(z)
                if qz > qx:
                    improved = True
                    break
                t *= 0.5
            if not improved:
                break
            gain = qz - qx
            x, qx = z, qz
            if gain <= 1e-13 * (1.0 + abs(qx)):
                break
        cands.append(x)
        scores = [q(c) for c in cands]
        return cands[int(np.argmax(scores))]

    def initialize(self, n_states, max_duration, means, random_state=None):
        """Weights on a triangle of mean ``means`` (m = 3 mean - 2) plus a little uniform mass."""
        D = max_duration
        means = np.clip(np.asarray(means, dtype=np.float64), 1.0, (D + 2.0) / 3.0)
        w = np.full((n_states, D), 1e-3 / D)
        m = np.clip(np.round(3.0 * means - 2.0).astype(np.int64), 1, D)
        w[np.arange(n_states), m - 1] += 1.0
        self.weights = w / w.sum(axis=1, keepdims=True)
        return self

    def n_parameters(self, max_duration):
        """Effective free parameters Σ_j (2 s_j - 1), s_j the number of triangles with weight > 1e-10 in
        state j (their locations and weights; the constrained MLE is sparse, cf. Meyer & Woodroofe 2000
        on the degrees of freedom of shape-restricted fits). At most K·(2D - 1)."""
        self._require()
        s = (_pad_rows(self.weights, int(max_duration)) > 1e-10).sum(axis=1)
        return int(np.sum(2 * np.maximum(s, 1) - 1))
