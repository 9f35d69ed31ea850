"""Count and symbol emissions with hmmlearn's parametrisation: categorical, multinomial and Poisson
(see :mod:`structlearn.distributions.emissions.hmm`, which re-exports them)."""
import numpy as np
from scipy import special
from scipy.stats import multinomial
from sklearn.utils import check_random_state

from structlearn.distributions.emissions._hmm_family import HMMFamily, _as_float_2d, _check_rows, _jsonable, _per_state, observed_rows

__all__ = ["CategoricalHMMEmission", "MultinomialHMMEmission", "PoissonHMMEmission"]


class _DiscreteFamily(HMMFamily):
    """Rows of symbol probabilities ``emissionprob`` (K, V): categorical and multinomial."""

    _param_names = ("emissionprob",)
    letters = "e"
    param_letters = {"emissionprob": "e"}

    @property
    def n_features(self):
        return self._n_features if self.emissionprob is None else int(self.emissionprob.shape[1])

    def _validate(self):
        p = self.emissionprob
        if p.ndim != 2:
            raise ValueError(f"`{self._name('emissionprob')}` must have shape (n_components, n_features); "
                             f"got {p.shape}")
        if self._n_features is not None and p.shape[1] != self._n_features:
            raise ValueError(f"`{self._name('emissionprob')}` has {p.shape[1]} columns but n_features="
                             f"{self._n_features}")
        _check_rows(p, self._name("emissionprob"))

    def _check_counts(self, X, what):
        raw = np.asarray(X)
        if np.issubdtype(raw.dtype, np.integer):  # whole numbers without missing rows: only the sign
            X = _as_float_2d(raw)
            if raw.size and raw.min() < 0:
                bad = int(np.flatnonzero((X < 0).any(axis=1))[0])
                raise ValueError(f"{what} must be non-negative whole numbers; row {bad} is {X[bad].tolist()}")
            return X, np.ones(X.shape[0], dtype=bool)
        X = _as_float_2d(X)
        obs = observed_rows(X)
        x = X[obs] if not obs.all() else X
        if np.any(x < 0) or np.any(x != np.round(x)):
            bad = int(np.flatnonzero(obs)[np.flatnonzero(((x < 0) | (x != np.round(x))).any(axis=1))[0]])
            raise ValueError(f"{what} must be non-negative whole numbers (or an all-NaN row for a missing "
                             f"observation); row {bad} is {X[bad].tolist()}")
        return X, obs

    def _new_probs(self, counts):
        tot = counts.sum(axis=1, keepdims=True)
        ok = tot[:, 0] > 0
        new = self.emissionprob.copy()
        new[ok] = counts[ok] / tot[ok]
        self.emissionprob = new

    def _initialize(self, X, K, random_state, params):
        if self._n_features is None:
            self._n_features = self._infer_n_features(X)
        if "e" in params or self.emissionprob is None:
            p = check_random_state(random_state).rand(K, self._n_features)
            self.emissionprob = p / p.sum(axis=1, keepdims=True)
        self._validate()

    def n_parameters(self):
        """K·(V − 1)."""
        K, V = self.emissionprob.shape
        return K * (V - 1)


class CategoricalHMMEmission(_DiscreteFamily):
    """Categorical emissions b_j(v) = emissionprob[j, v] (hmmlearn's ``CategoricalHMM``).

    Parameters
    ----------
    n_features : int, optional
        Alphabet size V (default: the largest symbol seen at initialisation + 1).
    emissionprob : array-like, shape (K, V), optional
    emissionprob_prior : float or array (K, V), default 1.0
        Dirichlet prior: emissionprob[j] ∝ max(prior − 1 + Σ_t γ_tj I(x_t = v), 0).

    X is one column of symbols 0..V−1 (whole numbers; NaN rows missing), or one-hot rows, hmmlearn's
    ``MultinomialHMM(n_trials=1)`` encoding: X of shape (n_samples, V) with V >= 2, every observed row
    0 but for a single 1 (the symbol of row t is the column of its 1). The rule is the number of
    columns: one column is always read as symbols, several always as one-hot rows (which must then
    have V columns when the alphabet size is known; without it, V is the number of columns). Both
    encodings give the same numbers.
    """

    def __init__(self, n_features=None, emissionprob=None, emissionprob_prior=1.0):
        self._n_features = None if n_features is None else int(n_features)
        self.emissionprob_prior = emissionprob_prior
        self._set_params(emissionprob=emissionprob)

    def _config(self):
        return {"n_features": self.n_features, "emissionprob_prior": _jsonable(self.emissionprob_prior)}

    def check_X(self, X):
        X, obs = self._check_counts(X, "categorical symbols")
        if X.shape[1] > 1:
            return self._check_one_hot(X, obs)
        if X.shape[1] != 1:
            raise ValueError(f"categorical emissions take one column of symbols, X of shape (n_samples, 1), "
                             f"or one-hot rows (n_samples, n_features); got X of shape {X.shape}")
        V = self.n_features
        x = X[:, 0] if obs.all() else X[obs, 0]
        if V is not None and x.size and x.max() >= V:
            bad = int(np.flatnonzero(obs & (np.nan_to_num(X[:, 0], nan=-1) >= V))[0])
            raise ValueError(f"symbol {int(X[bad, 0])} at row {bad} is outside the alphabet 0..{V - 1} "
                             f"(n_features={V}); pass a larger `n_features`")
        return X

    def _check_one_hot(self, X, obs):
        """One-hot rows X (N, V) (non-negative whole numbers), checked: V columns, a single 1 per
        observed row; returned as they are (every method reads the symbol with :meth:`_symbols`)."""
        V = self.n_features
        if V is not None and X.shape[1] != V:
            raise ValueError(f"one-hot rows must have n_features={V} columns (one per symbol); got X of "
                             f"shape {X.shape}")
        x = X[obs] if not obs.all() else X
        bad = x.sum(axis=1) != 1
        if np.any(bad):
            row = int(np.flatnonzero(obs)[np.flatnonzero(bad)[0]])
            raise ValueError(f"categorical emissions take one column of symbols or one-hot rows (a single 1 "
                             f"per row, hmmlearn's MultinomialHMM with n_trials=1); row {row} of X is "
                             f"{X[row].tolist()}")
        return X

    @staticmethod
    def _symbols(X):
        """The symbols (N,) int64 of observed rows X: its column, or the column of each one-hot row's 1."""
        return X[:, 0].astype(np.int64) if X.shape[1] == 1 else np.argmax(X, axis=1)

    @staticmethod
    def _infer_n_features(X):
        if X.shape[1] > 1:
            return int(X.shape[1])  # one-hot rows: one column per symbol
        return int(X[:, 0].max()) + 1 if X.shape[0] else 1

    def _log_density(self, X):
        with np.errstate(divide="ignore"):
            table = np.ascontiguousarray(np.log(self.emissionprob).T)  # (V, K): one row per symbol
        return np.take(table, self._symbols(X), axis=0)  # (3x faster than fancy indexing)

    def statistics(self, X, w):
        """``post`` Σ_t w_tk (K,) and ``counts`` Σ_t w_tk [x_t = v] (K, V) of symbol rows X (N, 1) or
        one-hot rows (N, V) under posterior weights w (N, K) (see
        :meth:`~structlearn.distributions.emissions._hmm_family.HMMFamily.m_step`)."""
        K = w.shape[1]
        V = self.n_features
        x = self._symbols(X)
        counts = np.array([np.bincount(x, weights=w[:, k], minlength=V) for k in range(K)]).reshape(K, V)
        return {"post": w.sum(axis=0), "counts": counts}

    def _m_step(self, stats, params):
        if "e" not in params:
            return
        K, V = self.emissionprob.shape
        prior = np.broadcast_to(np.asarray(self.emissionprob_prior, dtype=np.float64), (K, V))
        self._new_probs(np.maximum(prior - 1 + stats["counts"], 0))

    def sample_one(self, state, rng):
        cdf = np.cumsum(self.emissionprob[state])
        return [(cdf > rng.rand()).argmax()]


def _check_n_trials(value, name="n_trials"):
    """``n_trials`` as None, an int, or an int64 array (one count per row); ``ValueError`` otherwise."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"`{name}` must be None, a non-negative integer or a 1-d array of them (one per "
                         f"row of X); got {value!r}")
    if arr.ndim > 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr != np.round(arr)):
        raise ValueError(f"`{name}` must be None, a non-negative integer or a 1-d array of them (one per "
                         f"row of X); got {value!r}")
    return int(arr) if arr.ndim == 0 else arr.astype(np.int64)


class MultinomialHMMEmission(_DiscreteFamily):
    """Multinomial counts: x_t ~ Multinomial(n_t, emissionprob[j]) (hmmlearn's ``MultinomialHMM``).

    Parameters
    ----------
    n_trials : int or array-like of int, shape (n_samples,), optional
        Number of trials of every row (an int), or of each row of X (an array, as hmmlearn accepts:
        then X must have exactly that many rows); when given, rows must sum to it. Sampling needs one
        int (given, or kept from training rows that all had the same total).
    emissionprob : array-like, shape (K, F), optional

    log b_j(x) = log n! − Σ_f log x_f! + Σ_f x_f log p_jf with n = Σ_f x_f; ``fit``:
    p_jf ∝ Σ_t γ_tj x_tf (no prior, as hmmlearn).
    """

    def __init__(self, n_trials=None, emissionprob=None):
        self.n_trials = _check_n_trials(n_trials)
        self._n_features = None
        self._set_params(emissionprob=emissionprob)

    def _config(self):
        return {"n_trials": _jsonable(self.n_trials)}

    def check_X(self, X):
        X, obs = self._check_counts(X, "multinomial counts")
        if self.n_features is not None and X.shape[1] != self.n_features:
            raise ValueError(f"`X` has {X.shape[1]} columns but the model has {self.n_features} features")
        n = self.n_trials
        if n is not None and np.ndim(n) and n.shape[0] != X.shape[0]:
            raise ValueError(f"`n_trials` has {n.shape[0]} entries (one per row) but X has {X.shape[0]} "
                             f"rows; pass an int, or one count per row of this X")
        if n is not None and obs.any():
            tot = X[obs].sum(axis=1)
            want = n[obs] if np.ndim(n) else n
            if np.any(tot != want):
                i = int(np.flatnonzero(tot != want)[0])
                bad = int(np.flatnonzero(obs)[i])
                need = int(want[i]) if np.ndim(n) else n
                raise ValueError(f"row {bad} of X sums to {int(np.nansum(X[bad]))} but n_trials={need}"
                                 f"{' for that row' if np.ndim(n) else ''}: every row must count its "
                                 f"n_trials draws")
        return X

    @staticmethod
    def _infer_n_features(X):
        return int(X.shape[1])

    def _log_density(self, X):
        n = X.sum(axis=1)
        base = special.gammaln(n + 1) - special.gammaln(X + 1).sum(axis=1)
        with np.errstate(divide="ignore"):
            return base[:, None] + special.xlogy(X[:, None, :], self.emissionprob[None]).sum(axis=2)

    def statistics(self, X, w):
        """``post`` Σ_t w_tk (K,) and ``x`` Σ_t w_tk x_t (K, F) (expected category counts)."""
        return {"post": w.sum(axis=0), "x": w.T @ X}

    def _m_step(self, stats, params):
        if "e" in params:
            self._new_probs(np.array(stats["x"], dtype=np.float64))

    def _initialize(self, X, K, random_state, params):
        super()._initialize(X, K, random_state, params)
        if self.n_trials is None and X.shape[0]:
            tot = np.unique(X.sum(axis=1))
            if tot.size == 1:
                self.n_trials = int(tot[0])

    def sample_one(self, state, rng):
        if self.n_trials is None or np.ndim(self.n_trials):
            why = "it is per row" if self.n_trials is not None else "the training rows had different totals"
            raise ValueError(f"sampling a MultinomialHMM needs one integer `n_trials` ({why}); set "
                             f"n_trials to an int")
        return multinomial.rvs(n=self.n_trials, p=self.emissionprob[state], random_state=rng)


class PoissonHMMEmission(HMMFamily):
    """Independent Poisson counts per feature, rates ``lambdas`` (K, F) (hmmlearn's ``PoissonHMM``).

    Parameters
    ----------
    lambdas : array-like, shape (K, F), optional
    lambdas_prior, lambdas_weight : float or array, default 0, 0
        Gamma prior (α, β): λ_j = (α + n ȳ_j) / (β + n) with ȳ_j = Σ_t γ_tj x_t / Σ_t γ_tj and, as in
        hmmlearn 0.3, n the total posterior mass Σ_tj γ_tj (the number of observed rows); with the
        default zeros this is the MLE ȳ_j.
    """

    _param_names = ("lambdas",)
    letters = "l"
    param_letters = {"lambdas": "l"}

    def __init__(self, lambdas=None, lambdas_prior=0.0, lambdas_weight=0.0):
        self.lambdas_prior, self.lambdas_weight = lambdas_prior, lambdas_weight
        self._set_params(lambdas=lambdas)

    def _config(self):
        return {"lambdas_prior": _jsonable(self.lambdas_prior),
                "lambdas_weight": _jsonable(self.lambdas_weight)}

    @property
    def n_features(self):
        return None if self.lambdas is None else int(self.lambdas.shape[1])

    def _validate(self):
        lam = self.lambdas
        if lam.ndim != 2:
            raise ValueError(f"`{self._name('lambdas')}` must have shape (n_components, n_features); got "
                             f"{lam.shape}")
        if not np.all(np.isfinite(lam)) or np.any(lam < 0):
            raise ValueError(f"`{self._name('lambdas')}` must be finite and non-negative")

    def check_X(self, X):
        X = _as_float_2d(X, self.n_features)
        x = X[observed_rows(X)]
        if np.any(x < 0) or np.any(x != np.round(x)):
            raise ValueError("Poisson counts must be non-negative whole numbers (or an all-NaN row for a "
                             "missing observation)")
        return X

    def _log_density(self, X):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (special.xlogy(X[:, None, :], self.lambdas[None]) - self.lambdas[None]
                 - special.gammaln(X + 1)[:, None, :])
        return t.sum(axis=2)

    def statistics(self, X, w):
        """``post`` Σ_t w_tk (K,) and ``x`` Σ_t w_tk x_t (K, F)."""
        return {"post": w.sum(axis=0), "x": w.T @ X}

    def _m_step(self, stats, params):
        if "l" not in params:
            return
        post = stats["post"]
        ok = post > 0
        n = post.sum()
        ybar = stats["x"][ok] / post[ok, None]
        new = self.lambdas.copy()
        K, F = new.shape
        new[ok] = ((_per_state(self.lambdas_prior, K, (F,))[ok] + n * ybar)
                   / (_per_state(self.lambdas_weight, K, (F,))[ok] + n))
        self.lambdas = new

    def _initialize(self, X, K, random_state, params):
        if "l" in params or self.lambdas is None:
            mean, var = (X.mean(), X.var()) if X.size else (1.0, 1.0)
            if not (mean > 0 and var > 0):  # constant or all-zero counts: hmmlearn's moments are undefined
                mean = var = max(float(mean), 1e-3)
            self.lambdas = check_random_state(random_state).gamma(
                shape=mean ** 2 / var, scale=var / mean, size=(K, X.shape[1]))
        self._validate()

    def sample_one(self, state, rng):
        return rng.poisson(self.lambdas[state])

    def n_parameters(self):
        """K·F."""
        return int(self.lambdas.size)
