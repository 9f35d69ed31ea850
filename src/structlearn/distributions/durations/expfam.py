r"""Exponential-family durations of the HSMM: p_j(d) ∝ h(d) exp(η_j · T(d)) on 1..D (Yu 2010, "Hidden
semi-Markov models", §4.1, "exponential family"; Mitchell & Jamieson 1993 use such durations).

Truncated at D, every natural parameter η ∈ R^P gives a proper law (the support is finite), the
log-partition A(η) = log Σ_{d=1}^{D} h(d) exp(η · T(d)) is convex, and the M-step without censoring is the
concave problem max_η Σ_d n_d η · T(d) - N A(η): moment matching E_η[T] = Σ_d n_d T(d) / N, solved by
Newton's method with the exact gradient N (T̄ - E_η T) and Hessian -N Cov_η(T).

**Adding a family** takes two functions: subclass :class:`ExponentialFamily` and override
:meth:`~ExponentialFamily.sufficient_statistics` (T, shape (D, P)) and
:meth:`~ExponentialFamily.log_base_measure` (log h, shape (D,)); or name built-in statistics and base
measures (``statistics=("log_d", "d")``: a discrete gamma-like law d^{η_1} e^{η_2 d}). Only the
built-in names can be written to a model file (loading never executes code).
"""
import numpy as np
from scipy import optimize, special, stats

from ._base import DurationDistribution, ShiftMixin, _check_positive_int, _normalise_log, _q_value

__all__ = ["ExponentialFamily", "STATISTICS", "BASE_MEASURES"]

#: Built-in sufficient statistics T_p(d), by name (d a float64 array of durations >= 1).
STATISTICS = {
    "d": lambda d: d,
    "d2": lambda d: d * d,
    "log_d": np.log,
    "log1p_d": np.log1p,
}

#: Built-in log base measures log h(d), by name.
BASE_MEASURES = {
    "one": np.zeros_like,
    "poisson": lambda d: -special.gammaln(d),  # h(d) = 1 / (d - 1)!: the shifted Poisson
}


class ExponentialFamily(ShiftMixin, DurationDistribution):
    r"""Generic exponential-family durations p_j(d) ∝ h(d) exp(η_j · T(d)), d = 1..D.

    Parameters
    ----------
    statistics : sequence of str, default ("d",)
        Names of the sufficient statistics T (keys of ``STATISTICS``: ``"d"``, ``"d2"``, ``"log_d"``,
        ``"log1p_d"``); ignored by a subclass that overrides :meth:`sufficient_statistics`.
    base : str, default "one"
        Name of the base measure h (``"one"`` or ``"poisson"``: h(d) = 1/(d - 1)!); ignored by a
        subclass that overrides :meth:`log_base_measure`.
    eta : array-like of float64, shape (K, P), optional
        Natural parameters, one row per state.
    max_iter : int, default 50
        Newton iterations of the M-step.
    shift : array-like of float64, shape (K,), optional
        Whole numbers s_j >= 0: p_j(d) ∝ f_j(d - s_j) (:class:`ShiftMixin`); default 0.
    estimate_shift : bool, default False
        Estimate s_j in the M-step (R mhsmm's ``shift``).

    Examples
    --------
    ``statistics=("d",)``: geometric (η = log(1 - p)); with ``base="poisson"``: the shifted Poisson
    (η = log λ); ``("d", "d2")``: a discretised Gaussian; ``("log_d", "d")``: a discrete gamma.

    Notes
    -----
    Cost: O(D·P) per log-pmf; the M-step O(D·P² + P³) per Newton iteration and state. With a
    left-censored weight F > 0 the objective Q = Σ n_d log p(d) - F log μ(η) is maximised by BFGS
    (``scipy.optimize.minimize``, analytic gradient, ∂ log μ / ∂η = Cov_η(d, T) / μ) from the Newton
    solution; the best of the current, Newton and BFGS parameters by Q is kept (never decreasing Q).
    Free parameters: K·P (+ K with ``estimate_shift``).
    """

    _param_names = ("eta",)

    def __init__(self, statistics=("d",), base="one", eta=None, max_iter=50, shift=None,
                 estimate_shift=False):
        if isinstance(statistics, str):
            statistics = (statistics,)
        statistics = tuple(statistics)
        bad = [s for s in statistics if s not in STATISTICS]
        if not statistics or bad:
            raise ValueError(f"`statistics` must be a non-empty sequence of names from {sorted(STATISTICS)}; "
                             f"got {statistics!r}")
        if base not in BASE_MEASURES:
            raise ValueError(f"`base` must be one of {sorted(BASE_MEASURES)}; got {base!r}")
        self.statistics = statistics
        self.base = base
        self.max_iter = _check_positive_int(max_iter, "max_iter")
        self._init_shift(shift, estimate_shift)
        self.eta = None if eta is None else np.array(eta, dtype=np.float64)
        if self.eta is not None:
            if self.eta.ndim == 1:
                self.eta = self.eta[:, None]
            self._validate()

    # -- the two functions that define a family -------------------------------------------------
    def sufficient_statistics(self, d):
        """T(d), float64 (D, P), for durations d (D,) float64 >= 1. Override to add a family."""
        return np.stack([STATISTICS[s](d) for s in self.statistics], axis=1)

    def log_base_measure(self, d):
        """log h(d), float64 (D,), for durations d (D,) float64 >= 1. Override to add a family."""
        return BASE_MEASURES[self.base](d)

    # ----------------------------------------------------------------------------------------------
    def _config(self):
        return {"statistics": list(self.statistics), "base": self.base, "max_iter": self.max_iter,
                **super()._config()}

    def _tables(self, D):
        d = np.arange(1, D + 1, dtype=np.float64)
        T = np.asarray(self.sufficient_statistics(d), dtype=np.float64).reshape(D, -1)
        return T, np.asarray(self.log_base_measure(d), dtype=np.float64).reshape(D)

    def _validate(self):
        e = self.eta
        P = self._tables(1)[0].shape[1]
        if e.ndim != 2 or e.shape[1] != P:
            raise ValueError(f"`eta` must have shape (K, {P}) (one natural parameter per sufficient "
                             f"statistic); got {e.shape}")
        if not np.all(np.isfinite(e)):
            raise ValueError("`eta` must be finite")
        self._validate_shift()

    def log_pmf(self, max_duration):
        """Truncated, renormalised (and shifted) log p_j(d), shape (D, K), float64."""
        def base(k, n):
            T, lh = self._tables(n)
            return _normalise_log((lh + T @ self.eta[k])[:, None])[:, 0]

        return self._shifted_log_pmf(max_duration, base)

    def fit(self, counts, left_weight=None):
        """Weighted MLE from expected counts (D, K) and left-censored weights (K,) (class Notes)."""
        counts = np.asarray(counts, dtype=np.float64)
        D, K = counts.shape
        left = np.zeros(K) if left_weight is None else np.asarray(left_weight, dtype=np.float64)
        have = self._is_set()
        P = self._tables(1)[0].shape[1]
        eta = self.eta.copy() if have else np.zeros((K, P))
        cur_shift = self._shift_array() if have else np.zeros(K, dtype=np.int64)
        shift = cur_shift.astype(np.float64)
        for k in range(K):
            n = np.maximum(counts[:, k], 0.0)
            if n.sum() <= 0:
                continue
            F = max(0.0, float(left[k]))
            def fit_at(s, n=n, F=F, k=k):
                nc = self._clean_counts(n, s)
                cur = eta[k].copy() if have and s == cur_shift[k] else None
                best = None
                for c in self._fit_one(nc, F, D, s, cur):
                    q = self._q(c, nc, F, D, s)
                    if best is None or q > best[0]:
                        best = (q, c)
                return best

            _, eta[k], shift[k] = self._best_shift(n, k, fit_at)
        self.eta = eta
        if self.shift is not None or np.any(shift):
            self.shift = shift
        return self

    def _q(self, eta, n, F, D, s):
        T, lh = self._tables(D - s)
        lp = _normalise_log((lh + T @ eta)[:, None])[:, 0]
        return _q_value(self._place(lp, s, D), n, F)

    def _fit_one(self, n, F, D, s, cur):
        """Candidates η for one state: current, the Newton solution of the uncensored problem, and (F > 0)
        the BFGS solution of Q."""
        ns = n[s:]
        Ds = ns.shape[0]
        T, lh = self._tables(Ds)
        N = ns.sum()
        tbar = ns @ T / N
        P = T.shape[1]
        x = np.zeros(P) if cur is None else cur.copy()

        def obj(e):  # Σ n η·T - N A(η), per N
            return float(tbar @ e - special.logsumexp(lh + T @ e))

        fx = obj(x)
        for _ in range(self.max_iter):
            lp = lh + T @ x
            w = np.exp(lp - special.logsumexp(lp))
            m = w @ T
            g = tbar - m
            C = (T - m).T @ ((T - m) * w[:, None])
            step = np.linalg.lstsq(C + 1e-12 * np.eye(P), g, rcond=None)[0]
            t = 1.0
            while t > 1e-10:
                xn = x + t * step
                fn = obj(xn)
                if np.isfinite(fn) and fn >= fx:
                    break
                t *= 0.5
            else:
                break
            gain = fn - fx
            x, fx = xn, fn
            if gain <= 1e-15 * (1.0 + abs(fx)):
                break
        cands = [x] + ([cur] if cur is not None else [])
        if F > 0:
            d = np.arange(s + 1, D + 1, dtype=np.float64)

            def neg(e):
                lp = lh + T @ e
                lz = special.logsumexp(lp)
                w = np.exp(lp - lz)
                mu = w @ d
                val = ns @ (lp - lz) - F * np.log(mu)
                gm = w @ T
                g = ns @ T - N * gm - F * ((w * d) @ T - mu * gm) / mu
                return -val / N, -g / N

            with np.errstate(all="ignore"):
                res = optimize.minimize(neg, x, jac=True, method="BFGS",
                                        options={"maxiter": 200, "gtol": 1e-10})
            if np.all(np.isfinite(res.x)):
                cands.append(res.x)
        return cands

    def initialize(self, n_states, max_duration, means, random_state=None):
        """η fitted to a broad pmf (½ shifted Poisson + ½ geometric) with the given means (K,)."""
        self.shift = None
        D = max_duration
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        means = np.clip(np.asarray(means, dtype=np.float64), 1.0 + 1e-6, None)
        pois = np.exp(stats.poisson.logpmf(d - 1, (means - 1.0)[None, :]))
        q = 1.0 / means
        geo = q * (1 - q) ** (d - 1)
        pseudo = 0.5 * pois / pois.sum(0) + 0.5 * geo / geo.sum(0) + 1e-6
        self.eta = None
        P = self._tables(1)[0].shape[1]
        self.eta = np.zeros((n_states, P))
        self.fit(pseudo)
        return self

    def n_parameters(self, max_duration):
        """Free parameters: K·P (+ K with ``estimate_shift``)."""
        return self.eta.size + self._n_shift_parameters()
