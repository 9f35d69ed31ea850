"""hmmlearn's options of the emission laws: parameter letters, the M-step from sufficient statistics with
priors, and the hmmlearn mode of the thin ``*HMMEmission`` names (missing rows, initialisation, ``_``
suffixed names in messages); see :mod:`structlearn.distributions.emissions.hmm`.

Two mixins: :class:`LawOptions`, shared by every law that has weighted sufficient statistics
(``statistics(X, weights)`` and ``_m_step(stats, params)``), and :class:`HMMFamily`, added by the
hmmlearn-shaped names (``CategoricalHMMEmission`` ...) on top of their law, which only fixes options.
The laws themselves (log-density, sampling, statistics, M-step) live in
:mod:`~structlearn.distributions.emissions.discrete` and :mod:`~structlearn.distributions.emissions.gaussian`."""
import inspect

import numpy as np
from sklearn.utils import check_random_state

from ...utils.validation import as_real_float64

__all__ = ["observed_rows", "LawOptions", "HMMFamily"]


def _all_finite(X):
    """True when X holds no NaN and no ±inf (one pass without temporaries: their sum is finite; a sum
    that overflows only sends the caller to its exact checks)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(X.sum()))


def observed_rows(X):
    """Boolean mask (N,) of the observed rows of X; ``ValueError`` for a partly missing row."""
    if _all_finite(X):
        return np.ones(X.shape[0], dtype=bool)
    miss = np.isnan(X)
    rows = miss.all(axis=1)
    partial = miss.any(axis=1) & ~rows
    if partial.any():
        r = int(np.flatnonzero(partial)[0])
        raise ValueError(f"row {r} of X is partly missing (NaN in some features only); these emissions "
                         f"take complete rows or all-NaN rows (a missing observation). To marginalise "
                         f"single features use HiddenMarkovModel(emission=MultivariateGaussian('diag'))")
    return ~rows


def _as_float_2d(X, n_features=None, what="features"):
    arr = as_real_float64(X)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"`X` must be 2-d (n_samples, n_features); got shape {arr.shape}")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"`X` has {arr.shape[1]} columns but the model has {n_features} {what}")
    if not _all_finite(arr):
        if np.isinf(arr).any():
            raise ValueError("`X` contains infinite values; use NaN (a whole row) for a missing observation")
        observed_rows(arr)
    return arr


def _per_state(value, K, trailing):
    """``value`` broadcast to (K,) + trailing; a 1-d array of length K (K != trailing) is per state."""
    v = np.asarray(value, dtype=np.float64)
    if not trailing and v.size == K:
        return v.reshape(K)
    if v.ndim == 1 and v.shape[0] == K and trailing and (len(trailing) != 1 or trailing[0] != K):
        v = v.reshape((K,) + (1,) * len(trailing))
    return np.broadcast_to(v, (K,) + tuple(trailing))


def _jsonable(value):
    return np.asarray(value).tolist() if isinstance(value, (np.ndarray, list, tuple)) else value


def _check_rows(p, name):
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"`{name}` must be finite and non-negative")
    s = p.sum(axis=-1)
    if not np.allclose(s, 1.0):
        j = np.unravel_index(int(np.argmax(np.abs(s - 1))), s.shape)
        raise ValueError(f"`{name}` rows must sum to 1; row {tuple(int(i) for i in j) if len(j) > 1 else int(j[0])} "
                         f"sums to {s[j]:.6g}")


def _alias(name):
    """A property that reads and writes the attribute ``name`` (hmmlearn's name of a law's parameter)."""
    return property(lambda self: getattr(self, name), lambda self, v: setattr(self, name, v),
                    doc=f"The same array as ``{name}`` (hmmlearn's name).")


class LawOptions:
    """hmmlearn's options shared by the emission laws with sufficient statistics.

    ``letters`` are the law's parameter letters (hmmlearn's ``params`` / ``init_params``);
    ``fit(X, weights, params)`` and ``m_step(stats, params)`` update only the parameters named by those
    letters (default all) and a state without weight keeps its parameters. ``init`` chooses the
    initialisation: ``"labels"`` (from initial hard labels, the HSMM's) or ``"hmmlearn"``.
    ``suffix`` is appended to parameter names in messages (the estimators set ``"_"``).
    """

    letters = ""
    param_letters = {}
    suffix = ""
    init = "labels"

    def _name(self, n):
        return f"{n}{self.suffix}"

    def _params(self, params):
        return self.letters if params is None else "".join(c for c in self.letters if c in params)

    def _law_config(self, **config):
        """``config`` plus the ``init`` option where it is not the default."""
        return config if type(self).init == self.init else {**config, "init": self.init}

    def fit(self, X, weights, params=None):
        """MAP update (the MLE without priors) of the parameters named in ``params`` (letters; default all)
        from weights (N, K), e.g. the posteriors γ: ``m_step(statistics(X, weights), params)``. Missing
        observations carry no weight; states without weight keep their parameters."""
        return self.m_step(self.statistics(X, np.asarray(weights, dtype=np.float64)), params)

    def m_step(self, stats, params=None):
        """The M-step of :meth:`fit` from weighted sufficient statistics (``statistics(X, weights)``, or
        an average of several, as online EM keeps them): the parameters named in ``params`` (default
        all) are set to their MAP estimate; states with no weight (``stats["post"]`` 0) keep theirs."""
        return self._update(np.asarray(stats["post"]), lambda p: self._m_step(stats, p), params)

    def _update(self, post, step, params):
        keep = ~(post > 0)
        old = {n: None if getattr(self, n) is None else np.array(getattr(self, n)) for n in self._param_names}
        with np.errstate(divide="ignore", invalid="ignore"):
            step(self._params(params))
        if keep.any():
            self._restore_states(old, keep)
        return self

    def _restore_states(self, old, keep):
        for n in self._param_names:
            if old[n] is not None and old[n].shape[:1] == getattr(self, n).shape[:1]:
                getattr(self, n)[keep] = old[n][keep]

    def log_density(self, X):
        """log b_j(x_n), shape (N, K) float64; 0 for missing (all-NaN) rows."""
        self._require()
        if _all_finite(X):
            return self._log_density(X)
        obs = observed_rows(X)
        out = np.zeros((X.shape[0], self.n_states))
        out[obs] = self._log_density(X[obs])
        return out

    def initialize(self, X, n_states, labels=None, random_state=None, params=None):
        """Initial parameters: from the hard ``labels`` (N,) (-1 = unlabelled) with ``init="labels"``, or
        hmmlearn's for the letters in ``params`` (default all) from the observed rows of X."""
        if self.init == "labels" and labels is not None:
            return self._initialize_from_labels(X, int(n_states), np.asarray(labels), random_state)
        obs = observed_rows(X)
        self._initialize(X[obs], int(n_states), random_state, self._params(params))
        return self


class HMMFamily(LawOptions):
    """The hmmlearn mode of a law (mixed in before it by the ``*HMMEmission`` names): observations are
    complete or all-NaN rows (partly missing rows raise ``ValueError``), ``fit`` drops missing rows,
    ``initialize`` is hmmlearn's, ``sample_one`` draws one state's observation (the HMM's sampler)."""

    init = "hmmlearn"
    _missing_entries = False

    def _config(self):
        """The constructor settings of this name (the law's options it exposes)."""
        names = inspect.signature(type(self).__init__).parameters
        return {k: v for k, v in super()._config().items() if k in names}

    def sample(self, states, random_state=None):
        """One draw per state, shape (n, F) float64 (the draws of :meth:`sample_one` in order)."""
        rng = check_random_state(random_state)
        rows = [np.atleast_1d(self.sample_one(int(s), rng)) for s in np.asarray(states)]
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)

    def sample_one(self, state, rng):
        """One draw of state ``state`` (F,) with the law's per-state sampler (hmmlearn's draws)."""
        return self._draw_one(state, rng)

    def fit(self, X, weights, params=None):
        obs = observed_rows(X)
        Xo, w = (X, weights) if obs.all() else (X[obs], weights[obs])
        w = np.asarray(w, dtype=np.float64)
        if hasattr(self, "statistics"):
            return self.m_step(self.statistics(Xo, w), params)
        return self._update(w.sum(axis=0), lambda p: self._fit(Xo, w, p), params)

    fit.__doc__ = LawOptions.fit.__doc__ + """ Families without ``statistics`` (the Gaussian mixture)
        take one EM step of the mixture (``_fit``)."""
