r"""Discrete emission laws: categorical symbols, independent Poisson counts, Bernoulli vectors and
multinomial counts (Yu 2010, "Hidden semi-Markov models", §4.2), each written once for every HMM, HSMM and
HHMM.

The categorical, Poisson and multinomial laws carry hmmlearn's options (:class:`~structlearn.distributions.
emissions._hmm_family.LawOptions`): parameter letters (``"e"`` probabilities, ``"l"`` rates) for updating
some parameters only, hmmlearn's priors (``emissionprob_prior``, ``lambdas_prior`` / ``lambdas_weight``)
in the M-step from sufficient statistics (``statistics`` / ``m_step``, shared by batch, online and
distributed EM), and ``init="hmmlearn"`` (random rows, gamma-distributed rates) next to the default
initialisation from hard labels. hmmlearn's names of the parameters are aliases (``emissionprob`` for
``probs``, ``lambdas`` for ``lam``); the hmmlearn-shaped names (``CategoricalHMMEmission`` ...) of
:mod:`~structlearn.distributions.emissions.hmm_counts` only fix these options.
"""
import numpy as np
from scipy import special
from scipy.stats import multinomial
from sklearn.utils import check_random_state

from ._base import EmissionDistribution, _as_2d, _weights_for_labels
from ._hmm_family import (LawOptions, _alias, _all_finite, _as_float_2d, _check_rows, _jsonable, _per_state,
                          observed_rows)

__all__ = ["Categorical", "Poisson", "Bernoulli", "Multinomial"]


def _observed(X, w):
    """The observed rows of X and their weights (all of them without missing rows)."""
    if _all_finite(X):
        return X, w
    obs = observed_rows(X)
    return X[obs], w[obs]


class _ProbabilityRows(LawOptions, EmissionDistribution):
    """Rows of probabilities ``probs`` (K, V) (hmmlearn's ``emissionprob``): categorical and multinomial."""

    _param_names = ("probs",)
    letters = "e"
    param_letters = {"probs": "e"}
    emissionprob = _alias("probs")

    @property
    def n_features(self):
        """V, the alphabet size or number of categories (None before it is known)."""
        return self._n_features if self.probs is None else int(self.probs.shape[1])

    @n_features.setter
    def n_features(self, value):
        self._n_features = None if value is None else int(value)

    def _validate(self):
        p, name = self.probs, self._name(self._param_names[0])
        if p.ndim != 2:
            raise ValueError(f"`{name}` must have shape (n_components, n_features); got {p.shape}")
        if self._n_features is not None and p.shape[1] != self._n_features:
            raise ValueError(f"`{name}` has {p.shape[1]} columns but n_features={self._n_features}")
        _check_rows(p, name)

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
        """Rows of ``counts`` (K, V) normalised; a row without counts keeps its probabilities."""
        tot = counts.sum(axis=1, keepdims=True)
        ok = tot[:, 0] > 0
        K, V = counts.shape
        new = self.probs.copy() if self.probs is not None else np.full((K, V), 1.0 / V)
        new[ok] = counts[ok] / tot[ok]
        self.probs = new

    def _initialize(self, X, K, random_state, params):
        """hmmlearn's: random rows (``random_state.rand``, normalised)."""
        if self._n_features is None:
            self._n_features = self._infer_n_features(X)
        if "e" in params or self.probs is None:
            p = check_random_state(random_state).rand(K, self._n_features)
            self.probs = p / p.sum(axis=1, keepdims=True)
        self._validate()

    def _dirichlet_rows(self, counts, n_states, random_state):
        """Rows drawn around the smoothed frequencies of ``counts`` (V,) (the initialisation from labels)."""
        freq = counts + 1.0
        freq /= freq.sum()
        V = freq.shape[0]
        p = check_random_state(random_state).dirichlet(freq * 10 * V, size=n_states) + 1e-3
        return p / p.sum(axis=1, keepdims=True)

    def n_parameters(self):
        """K·(V − 1)."""
        K, V = self.probs.shape
        return K * (V - 1)


class Categorical(_ProbabilityRows):
    """Categorical emissions b_j(v) = probs[j, v] for symbols v = 0..V-1 (Yu 2010 §2.3.1 iii, §4.2).

    Parameters
    ----------
    probs : array-like of float64, shape (K, V), optional
        Rows non-negative, summing to one (hmmlearn's ``emissionprob``, an alias).
    n_features : int, optional
        Alphabet size V. When not given it is taken from ``probs`` or, at initialisation, as the
        largest symbol seen + 1. Symbols outside [0, V) raise ``ValueError``.
    emissionprob_prior : float or array (K, V), default 1.0
        hmmlearn's Dirichlet prior: probs[j] ∝ max(prior − 1 + Σ_t γ_tj I(x_t = v), 0) (1: the MLE).
    init : {"labels", "hmmlearn"}, default "labels"
        Initialisation: Dirichlet rows around the symbol frequencies, or hmmlearn's random rows.

    Notes
    -----
    X is one column of symbols 0..V−1 (whole numbers; NaN rows missing), or one-hot rows, hmmlearn's
    ``MultinomialHMM(n_trials=1)`` encoding: X of shape (n_samples, V) with V >= 2, every observed row
    0 but for a single 1 (the symbol of row t is the column of its 1). The rule is the number of
    columns: one column is always read as symbols, several always as one-hot rows (which must then
    have V columns when the alphabet size is known; without it, V is the number of columns). Both
    encodings give the same numbers. Parameter letter ``"e"``.
    """

    def __init__(self, probs=None, n_features=None, emissionprob_prior=1.0, init="labels"):
        self.n_features = n_features
        self.emissionprob_prior = emissionprob_prior
        self.init = init
        self._set_params(probs=probs)

    def _config(self):
        return self._law_config(n_features=self.n_features,
                                emissionprob_prior=_jsonable(self.emissionprob_prior))

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
        :meth:`~structlearn.distributions.emissions._hmm_family.LawOptions.m_step`); missing rows dropped."""
        X, w = _observed(X, w)
        K = w.shape[1]
        V = self.n_features
        x = self._symbols(X)
        counts = np.array([np.bincount(x, weights=w[:, k], minlength=V) for k in range(K)]).reshape(K, V)
        return {"post": w.sum(axis=0), "counts": counts}

    def _m_step(self, stats, params):
        if "e" not in params:
            return
        K, V = stats["counts"].shape
        prior = np.broadcast_to(np.asarray(self.emissionprob_prior, dtype=np.float64), (K, V))
        self._new_probs(np.maximum(prior - 1 + stats["counts"], 0))

    def _draw_one(self, state, rng):
        cdf = np.cumsum(self.probs[state])
        return [(cdf > rng.rand()).argmax()]

    def sample(self, states, random_state=None):
        """One symbol per state, shape (n, 1) float64."""
        rng = check_random_state(random_state)
        cdf = np.cumsum(self.probs, axis=1)
        u = rng.random_sample(len(states))
        out = np.array([np.searchsorted(cdf[s], u_, side="right") for s, u_ in zip(states, u)],
                       dtype=np.float64)
        return np.minimum(out, self.probs.shape[1] - 1)[:, None]

    def _initialize_from_labels(self, X, n_states, labels, random_state):
        obs = observed_rows(X)
        if self._n_features is None:
            self._n_features = self._infer_n_features(X[obs]) if obs.any() else 1
        sym = self._symbols(X[obs])
        self.probs = self._dirichlet_rows(np.bincount(sym, minlength=self.n_features), n_states, random_state)
        return self



def _check_n_trials(value, name="n_trials", minimum=0):
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
    if np.any(arr < minimum):
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}")
    return int(arr) if arr.ndim == 0 else arr.astype(np.int64)


class Multinomial(_ProbabilityRows):
    r"""Multinomial counts: b_j(x) = n! / Π_v x_v! · Π_v p_jv^{x_v}, n = Σ_v x_v the row's total (Yu 2010
    §4.2, e.g. word or event counts per time bin; hmmlearn's ``MultinomialHMM``).

    Parameters
    ----------
    probs : array-like of float64, shape (K, V), optional
        Rows non-negative, summing to one (hmmlearn's ``emissionprob``, an alias).
    n_trials : int or array-like of int, shape (n_samples,), default 1
        Total count of the rows drawn by :meth:`sample`; ``log_density`` and ``fit`` take each row's
        own total. In the hmmlearn mode (``MultinomialHMMEmission``) it may be ``None`` or one count per
        row of X, and rows must sum to it.
    init : {"labels", "hmmlearn"}, default "labels"
        Initialisation: Dirichlet rows around the category frequencies refined on the labels, or
        hmmlearn's random rows.

    Notes
    -----
    X is (N, V) of non-negative whole numbers; an all-NaN row is missing (log density 0); a partly
    missing row raises ``ValueError`` (a multinomial does not factorise over its categories).
    ``fit``: p_jv = Σ_t w_tj x_tv / Σ_t w_tj n_t (exact MLE; no prior, as hmmlearn). Parameter letter
    ``"e"``. Cost O(N·K·V).
    """

    _fixed_totals = False  # hmmlearn's rows must sum to n_trials

    def __init__(self, probs=None, n_trials=1, init="labels"):
        self.n_trials = _check_n_trials(n_trials, minimum=0 if self._fixed_totals else 1)
        if self.n_trials is None and not self._fixed_totals:
            raise ValueError("`n_trials` must be an integer >= 1; got None")
        self.n_features = None
        self.init = init
        self._set_params(probs=probs)

    def _config(self):
        return self._law_config(n_trials=_jsonable(self.n_trials))

    def check_X(self, X):
        X, obs = self._check_counts(X, "multinomial counts")
        if self.n_features is not None and X.shape[1] != self.n_features:
            raise ValueError(f"`X` has {X.shape[1]} columns but the model has {self.n_features} features")
        n = self.n_trials if self._fixed_totals else None
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
        """``post`` Σ_t w_tk (K,) and ``x`` Σ_t w_tk x_t (K, F) (expected category counts) over the
        observed rows."""
        X, w = _observed(X, w)
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

    def _draw_one(self, state, rng):
        if self.n_trials is None or np.ndim(self.n_trials):
            why = "it is per row" if self.n_trials is not None else "the training rows had different totals"
            raise ValueError(f"sampling a MultinomialHMM needs one integer `n_trials` ({why}); set "
                             f"n_trials to an int")
        return multinomial.rvs(n=self.n_trials, p=self.probs[state], random_state=rng)

    def sample(self, states, random_state=None):
        """Rows of ``n_trials`` counts, shape (n, V) float64."""
        rng = check_random_state(random_state)
        return np.array([rng.multinomial(self.n_trials, self.probs[s]) for s in np.asarray(states)],
                        dtype=np.float64).reshape(-1, self.probs.shape[1])

    def _initialize_from_labels(self, X, n_states, labels, random_state):
        rows = ~np.isnan(X).any(axis=1)
        self.probs = self._dirichlet_rows(X[rows].sum(axis=0), n_states, random_state)
        w = _weights_for_labels(X, n_states, labels)
        if w.sum() > 0:
            self.fit(X, w)
            self.probs = (self.probs + 1e-3) / (1 + 1e-3 * X.shape[1])
        return self


# ------------------------------------------------------------------------------------------------------
class Poisson(LawOptions, EmissionDistribution):
    """Independent Poisson counts per feature: b_j(x) = Π_f λ_jf^x_f e^{-λ_jf} / x_f! (Yu 2010 §4.2;
    hmmlearn's ``PoissonHMM``).

    Parameters
    ----------
    lam : array-like of float64, shape (K, F) or (K,), optional
        Rates λ_jf >= 0 (hmmlearn's ``lambdas``, an alias).
    lambdas_prior, lambdas_weight : float or array, default 0, 0
        hmmlearn's gamma prior (α, β): λ_j = (α + n ȳ_j) / (β + n) with ȳ_j = Σ_t γ_tj x_t / Σ_t γ_tj and,
        as in hmmlearn 0.3, n the total posterior mass Σ_tj γ_tj (per feature over its observed
        entries); with the default zeros this is the MLE ȳ_j.
    init : {"labels", "hmmlearn"}, default "labels"
        Initialisation: the rates of the labelled rows, or hmmlearn's gamma-distributed rates.

    Notes
    -----
    NaN entries are marginalised (skipped); in the hmmlearn mode (``PoissonHMMEmission``) only whole
    rows may be missing. Parameter letter ``"l"``.
    """

    _param_names = ("lam",)
    letters = "l"
    param_letters = {"lam": "l"}
    lambdas = _alias("lam")
    _missing_entries = True

    def __init__(self, lam=None, lambdas_prior=0.0, lambdas_weight=0.0, init="labels"):
        self.lambdas_prior, self.lambdas_weight = lambdas_prior, lambdas_weight
        self.init = init
        self._set_params(lam=lam)

    def _config(self):
        return self._law_config(lambdas_prior=_jsonable(self.lambdas_prior),
                                lambdas_weight=_jsonable(self.lambdas_weight))

    @property
    def n_features(self):
        """F, or None before the rates are set."""
        return None if self.lam is None else int(self.lam.shape[1])

    def _validate(self):
        name = self._name(self._param_names[0])
        if self.lam.ndim == 1 and self._missing_entries:
            self.lam = self.lam[:, None]
        if self.lam.ndim != 2:
            raise ValueError(f"`{name}` must have shape (n_components, n_features); got {self.lam.shape}")
        if not np.all(np.isfinite(self.lam)) or np.any(self.lam < 0):
            raise ValueError(f"Poisson rates `{name}` must be finite and non-negative")

    def check_X(self, X):
        if self._missing_entries:
            X = _as_2d(X)
            if self.lam is not None and X.shape[1] != self.lam.shape[1]:
                raise ValueError(f"X has {X.shape[1]} features but the Poisson rates have {self.lam.shape[1]}")
        else:
            X = _as_float_2d(X, self.n_features)
        x = X[~np.isnan(X)]
        if np.any(x < 0) or np.any(x != np.round(x)):
            raise ValueError("Poisson counts must be non-negative whole numbers (or NaN for a missing "
                             "observation)")
        return X

    def _log_density(self, X):
        with np.errstate(divide="ignore", invalid="ignore"):
            # xlogy: 0 · log 0 = 0, so a zero rate gives probability one to a zero count
            return (special.xlogy(X[:, None, :], self.lam[None]) - self.lam[None]
                    - special.gammaln(X + 1)[:, None, :])

    def log_density(self, X):
        """Σ_f log Poisson(x_f; λ_jf) over observed features, shape (N, K)."""
        self._require()
        if _all_finite(X):
            return self._log_density(X).sum(axis=2)
        obs = ~np.isnan(X)
        term = np.where(obs[:, None, :], self._log_density(np.where(obs, X, 0.0)), 0.0)
        return term.sum(axis=2)

    def statistics(self, X, w):
        """``post`` Σ_t w_tk (K,) and ``x`` Σ_t w_tk x_t (K, F) over the observed rows; where single
        entries may be missing (not in the hmmlearn mode) also ``den`` Σ_t w_tk [x_tf observed] (K, F)."""
        if not self._missing_entries:
            X, w = _observed(X, w)
            return {"post": w.sum(axis=0), "x": w.T @ X}
        obs = ~np.isnan(X)
        rows = obs.any(axis=1)
        return {"post": w[rows].sum(axis=0), "x": w.T @ np.where(obs, X, 0.0),
                "den": w.T @ obs.astype(np.float64)}

    def _m_step(self, stats, params):
        if "l" not in params:
            return
        post, x = stats["post"], stats["x"]
        K, F = x.shape
        if "den" in stats:
            den = stats["den"]
            n = np.broadcast_to(den.sum(axis=0), (K, F))
        else:
            den = np.broadcast_to(post[:, None], (K, F))
            n = np.broadcast_to(post.sum(), (K, F))
        ok = den > 0
        ybar = x[ok] / den[ok]
        new = self.lam.copy() if self.lam is not None else np.ones((K, F))
        new[ok] = ((_per_state(self.lambdas_prior, K, (F,))[ok] + n[ok] * ybar)
                   / (_per_state(self.lambdas_weight, K, (F,))[ok] + n[ok]))
        self.lam = new

    def _initialize(self, X, K, random_state, params):
        """hmmlearn's: rates drawn from a gamma law with the data's mean and variance."""
        if "l" in params or self.lam is None:
            mean, var = (X.mean(), X.var()) if X.size else (1.0, 1.0)
            if not (mean > 0 and var > 0):  # constant or all-zero counts: hmmlearn's moments are undefined
                mean = var = max(float(mean), 1e-3)
            self.lam = check_random_state(random_state).gamma(
                shape=mean ** 2 / var, scale=var / mean, size=(K, X.shape[1]))
        self._validate()

    def _initialize_from_labels(self, X, n_states, labels, random_state):
        obs = ~np.isnan(X)
        glob = np.nanmean(X, axis=0) if obs.any() else np.ones(X.shape[1])
        self.lam = np.tile(np.nan_to_num(glob, nan=1.0), (n_states, 1))
        self.fit(X, _weights_for_labels(X, n_states, labels))
        self.lam = np.maximum(self.lam, 1e-3)
        return self

    def _draw_one(self, state, rng):
        return rng.poisson(self.lam[state])

    def sample(self, states, random_state=None):
        """Counts, shape (n, F) float64."""
        rng = check_random_state(random_state)
        return rng.poisson(self.lam[np.asarray(states)]).astype(np.float64)

    def n_parameters(self):
        """K·F."""
        return int(self.lam.size)


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

    Notes
    -----
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


