"""Discrete emission families of the HSMM: categorical symbols, independent Poisson counts, Bernoulli
vectors and multinomial counts (Yu 2010, "Hidden semi-Markov models", §4.2)."""
import numpy as np
from scipy import special
from sklearn.utils import check_random_state

from structlearn.distributions.emissions._base import EmissionDistribution, _as_2d, _weights_for_labels
from structlearn.distributions.base import check_stochastic_rows

__all__ = ["Categorical", "Poisson", "Bernoulli", "Multinomial"]


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
class Bernoulli(EmissionDistribution):
    """Independent binary features: b_j(x) = Π_f p_jf^{x_f} (1 - p_jf)^{1 - x_f} (Yu 2010 §4.2).

    Parameters
    ----------
    probs : array-like of float64, shape (K, F) or (K,), optional
        p_jf = P(x_f = 1 | state j), in [0, 1].
    min_prob : float, default 1e-10
        ``fit`` keeps p in [min_prob, 1 - min_prob] (the constrained maximiser: the objective is concave
        in each p_jf), so a value unseen in a state keeps a small probability.

    X is (N, F) of 0 / 1 (NaN = missing, marginalised per entry). ``fit``: p_jf = Σ_t w_tj x_tf /
    Σ_t w_tj over observed entries (clipped). Cost O(N·K·F).
    """

    _param_names = ("probs",)

    def __init__(self, probs=None, min_prob=1e-10):
        self.min_prob = float(min_prob)
        if not 0.0 <= self.min_prob < 0.5:
            raise ValueError(f"`min_prob` must lie in [0, 0.5); got {min_prob!r}")
        self._set_params(probs=probs)

    def _config(self):
        return {"min_prob": self.min_prob}

    def _validate(self):
        if self.probs.ndim == 1:
            self.probs = self.probs[:, None]
        p = self.probs
        if p.ndim != 2:
            raise ValueError(f"`probs` must have shape (K, F); got {p.shape}")
        if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
            raise ValueError("Bernoulli `probs` must lie in [0, 1]")

    def check_X(self, X):
        X = _as_2d(X)
        obs = ~np.isnan(X)
        if np.any((X[obs] != 0) & (X[obs] != 1)):
            bad = int(np.flatnonzero((obs & (X != 0) & (X != 1)).any(axis=1))[0])
            raise ValueError(f"Bernoulli observations must be 0, 1 or NaN; row {bad} is {X[bad].tolist()}")
        if self.probs is not None and X.shape[1] != self.probs.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but the Bernoulli probabilities have "
                             f"{self.probs.shape[1]}")
        return X

    def log_density(self, X):
        """Σ_f log p(x_f) over observed features, shape (N, K), float64."""
        self._require()
        obs = ~np.isnan(X)
        x = np.where(obs, X, 0.0)
        with np.errstate(divide="ignore"):
            l1, l0 = np.log(self.probs), np.log1p(-self.probs)
        # x·log p + (1 - x)·log(1 - p) without 0·(-inf)
        out = (obs * x) @ np.where(np.isfinite(l1), l1, -1e300).T + (obs * (1 - x)) @ np.where(
            np.isfinite(l0), l0, -1e300).T
        out[out < -1e299] = -np.inf
        return out

    def fit(self, X, weights):
        """Weighted MLE (clipped to [min_prob, 1 - min_prob]); states / features without weight kept."""
        obs = ~np.isnan(X)
        x = np.where(obs, X, 0.0)
        num = weights.T @ x
        den = weights.T @ obs.astype(np.float64)
        new = self.probs.copy() if self.probs is not None else np.full(num.shape, 0.5)
        ok = den > 0
        new[ok] = np.clip(num[ok] / den[ok], self.min_prob, 1.0 - self.min_prob)
        self.probs = new
        return self

    def sample(self, states, random_state=None):
        """Draws, shape (n, F) float64 of 0 / 1."""
        rng = check_random_state(random_state)
        p = self.probs[np.asarray(states)]
        return (rng.random_sample(p.shape) < p).astype(np.float64)

    def initialize(self, X, n_states, labels, random_state=None):
        glob = np.nan_to_num(np.nanmean(X, axis=0), nan=0.5) if X.size else np.full(X.shape[1], 0.5)
        self.probs = np.tile(np.clip(glob, 0.05, 0.95), (n_states, 1))
        self.fit(X, _weights_for_labels(X, n_states, labels))
        self.probs = np.clip(self.probs, 0.01, 0.99)
        return self

    def n_parameters(self):
        """K·F."""
        return self.probs.size


# ------------------------------------------------------------------------------------------------------
class Multinomial(EmissionDistribution):
    r"""Multinomial counts: b_j(x) = n! / Π_v x_v! · Π_v p_jv^{x_v}, n = Σ_v x_v the row's total (any
    total per row; Yu 2010 §4.2, e.g. word or event counts per time bin).

    Parameters
    ----------
    probs : array-like of float64, shape (K, V), optional
        Rows non-negative, summing to one.
    n_trials : int, default 1
        Total count of the rows drawn by :meth:`sample` (``log_density`` and ``fit`` take each row's
        own total).

    X is (N, V) of non-negative whole numbers; an all-NaN row is missing (log density 0); a partly
    missing row raises ``ValueError`` (a multinomial does not factorise over its categories).
    ``fit``: p_jv = Σ_t w_tj x_tv / Σ_t w_tj n_t (exact MLE). Cost O(N·K·V).
    """

    _param_names = ("probs",)

    def __init__(self, probs=None, n_trials=1):
        if isinstance(n_trials, bool) or not isinstance(n_trials, (int, np.integer)) or n_trials < 1:
            raise ValueError(f"`n_trials` must be an integer >= 1; got {n_trials!r}")
        self.n_trials = int(n_trials)
        self._set_params(probs=probs)

    def _config(self):
        return {"n_trials": self.n_trials}

    def _validate(self):
        if self.probs.ndim != 2:
            raise ValueError(f"`probs` must have shape (K, V); got {self.probs.shape}")
        check_stochastic_rows(self.probs, "probs")

    def check_X(self, X):
        X = _as_2d(X)
        miss = np.isnan(X)
        partial = miss.any(axis=1) & ~miss.all(axis=1)
        if partial.any():
            raise ValueError(f"row {int(np.flatnonzero(partial)[0])} of X is partly missing; multinomial "
                             f"rows must be complete or all NaN")
        obs = ~miss
        if np.any(X[obs] < 0) or np.any(X[obs] != np.round(X[obs])):
            raise ValueError("multinomial observations must be non-negative whole numbers (or NaN rows)")
        if self.probs is not None and X.shape[1] != self.probs.shape[1]:
            raise ValueError(f"X has {X.shape[1]} categories but `probs` has {self.probs.shape[1]}")
        return X

    def log_density(self, X):
        """log b_j(x_t), shape (N, K); 0 for missing rows, -inf where a zero probability is hit."""
        self._require()
        rows = ~np.isnan(X).any(axis=1)
        x = np.where(rows[:, None], X, 0.0)
        with np.errstate(divide="ignore"):
            lp = np.log(self.probs)
        term = special.xlogy(x[:, None, :], self.probs[None]).sum(axis=2)
        hit_zero = (x > 0).astype(np.float64) @ np.isneginf(lp).T.astype(np.float64) > 0
        term[hit_zero] = -np.inf
        norm = special.gammaln(x.sum(axis=1) + 1) - special.gammaln(x + 1).sum(axis=1)
        out = term + norm[:, None]
        out[~rows] = 0.0
        return out

    def fit(self, X, weights):
        """Weighted MLE (states without weight keep their probabilities)."""
        rows = ~np.isnan(X).any(axis=1)
        counts = weights[rows].T @ X[rows]  # (K, V)
        tot = counts.sum(axis=1)
        K, V = counts.shape
        new = self.probs.copy() if self.probs is not None else np.full((K, V), 1.0 / V)
        ok = tot > 0
        new[ok] = counts[ok] / tot[ok, None]
        self.probs = new
        return self

    def sample(self, states, random_state=None):
        """Rows of ``n_trials`` counts, shape (n, V) float64."""
        rng = check_random_state(random_state)
        return np.array([rng.multinomial(self.n_trials, self.probs[s]) for s in np.asarray(states)],
                        dtype=np.float64).reshape(-1, self.probs.shape[1])

    def initialize(self, X, n_states, labels, random_state=None):
        rng = check_random_state(random_state)
        rows = ~np.isnan(X).any(axis=1)
        freq = X[rows].sum(axis=0) + 1.0
        freq /= freq.sum()
        p = rng.dirichlet(freq * 10 * X.shape[1], size=n_states) + 1e-3
        self.probs = p / p.sum(axis=1, keepdims=True)
        w = _weights_for_labels(X, n_states, labels)
        if w.sum() > 0:
            self.fit(X, w)
            self.probs = (self.probs + 1e-3) / (1 + 1e-3 * X.shape[1])
        return self

    def n_parameters(self):
        """K·(V - 1)."""
        return self.probs.shape[0] * (self.probs.shape[1] - 1)
