r"""Event-sequence observations of the HSMM: marked events at irregular times on a fine time grid
(Yu 2010, "Hidden semi-Markov models", §4.2, "event sequence model").

Input format
------------
Time is cut into ticks of a fixed resolution; most ticks carry no observation. A sequence is a
column X of shape (T, 1) (T ticks, float64 holding whole numbers):

* ``x_t = v`` in 0..V-1 — an event with mark v (e.g. the sensor that fired) at tick t;
* ``x_t = -1`` — no event at tick t (a gap: it counts as time but carries no mark);
* ``x_t = NaN`` — tick t was not observed (log density 0 in every state, no weight in ``fit``).

:func:`events_to_grid` builds X from event times and marks. A tick carries at most one event.

The model
---------
In state j an event happens at a tick with probability λ_j (the event rate per tick, so the gaps
between events carry information: each empty tick scores log(1 - λ_j), an inter-event time of g empty
ticks log(1 - λ_j)·g, a discrete-time Poisson process) and its mark follows the categorical law
c_j(v):

.. math:: \log b_j(x_t) = \begin{cases} \log λ_j + \log c_j(v) & x_t = v \ge 0 \\
          \log(1 - λ_j) & x_t = -1 \text{ (informative gaps)} \\
          0 & x_t = -1 \text{ (uninformative gaps) or } x_t = \text{NaN.} \end{cases}

With ``informative_gaps=False`` only the marks inform the states: an event scores log c_j(v) and an
empty tick log 1 = 0 (the likelihood of the marks given the event times, whatever their rate).
"""
import numpy as np
from sklearn.utils import check_random_state

from ._base import EmissionDistribution, _as_2d, _weights_for_labels
from ..base import check_stochastic_rows

__all__ = ["EventSequence", "events_to_grid", "NO_EVENT"]

#: The value of a tick without an event in the grid of :class:`EventSequence`.
NO_EVENT = -1


def events_to_grid(timestamps, marks, resolution, start=None, end=None, on_collision="error"):
    """The tick grid of :class:`EventSequence` from marked events at irregular times.

    Tick t covers the times [start + t·resolution, start + (t + 1)·resolution).

    Parameters
    ----------
    timestamps : array-like, shape (n_events,)
        Event times: numbers (any unit) or ``numpy.datetime64`` values; any order.
    marks : array-like of int, shape (n_events,)
        Mark of each event, a whole number >= 0 (e.g. the sensor id).
    resolution : float or numpy.timedelta64
        Tick length, > 0 (in the unit of ``timestamps``; seconds, or a ``timedelta64``, for
        datetimes).
    start, end : same type as ``timestamps``, optional
        The grid covers [start, end]; defaults: the first and the last event. Events outside are
        refused (``ValueError``).
    on_collision : {"error", "first", "last"}, default "error"
        Several events in one tick: raise, or keep the earliest / the latest of them.

    Returns
    -------
    X : ndarray of float64, shape (T, 1)
        T = floor((end - start) / resolution) + 1 ticks; the mark of the event of each tick, -1
        (:data:`NO_EVENT`) elsewhere.

    Raises
    ------
    ValueError
        Mismatched or empty inputs, a negative or fractional mark, a non-positive ``resolution``, an
        event outside [start, end], or two events in a tick with ``on_collision="error"`` (the
        message gives their number; use a finer resolution or ``"first"`` / ``"last"``).

    Time O(n_events·log n_events + T), memory O(T).
    """
    if on_collision not in ("error", "first", "last"):
        raise ValueError(f"`on_collision` must be 'error', 'first' or 'last'; got {on_collision!r}")
    ts = np.asarray(timestamps)
    mk = np.asarray(marks)
    if ts.ndim != 1 or mk.shape != ts.shape:
        raise ValueError(f"`timestamps` and `marks` must be 1-d arrays of the same length; got shapes "
                         f"{ts.shape} and {mk.shape}")
    if ts.size == 0 and (start is None or end is None):
        raise ValueError("no events: pass `start` and `end` to build an empty grid")
    try:
        mkf = mk.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`marks` must be whole numbers >= 0; got dtype {mk.dtype}") from None
    if np.any(~np.isfinite(mkf)) or np.any(mkf < 0) or np.any(mkf != np.round(mkf)):
        raise ValueError("`marks` must be whole numbers >= 0 (e.g. sensor ids)")
    is_time = np.issubdtype(ts.dtype, np.datetime64)
    lo = ts.min() if start is None else (np.datetime64(start) if is_time else start)
    hi = ts.max() if end is None else (np.datetime64(end) if is_time else end)
    if is_time:
        unit = np.timedelta64(1, "s")
        step = (np.timedelta64(resolution) / unit if isinstance(resolution, np.timedelta64)
                else float(resolution))
        rel = (ts - lo) / unit
        span = float((hi - lo) / unit)
    else:
        try:
            ts = ts.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"`timestamps` must be numbers or datetime64; got dtype {ts.dtype}") from None
        step = float(resolution)
        rel = ts - float(lo)
        span = float(hi) - float(lo)
    if not np.isfinite(step) or step <= 0:
        raise ValueError(f"`resolution` must be > 0; got {resolution!r}")
    if span < 0:
        raise ValueError(f"`end` ({hi}) is before `start` ({lo})")
    if np.any(rel < 0) or np.any(rel > span):
        bad = int(np.flatnonzero((rel < 0) | (rel > span))[0])
        raise ValueError(f"event {bad} at {ts[bad]} lies outside the grid [{lo}, {hi}]")
    T = int(np.floor(span / step)) + 1
    tick = np.minimum(np.floor(rel / step).astype(np.int64), T - 1)
    order = np.argsort(rel, kind="stable")
    tick, mkf = tick[order], mkf[order]
    X = np.full((T, 1), float(NO_EVENT))
    if tick.size:
        dup = tick[1:] == tick[:-1]
        if dup.any():
            if on_collision == "error":
                raise ValueError(f"{int(dup.sum())} events share a tick with an earlier one at "
                                 f"resolution {resolution!r} (first at tick {int(tick[1:][dup][0])}); "
                                 f"use a finer `resolution` or on_collision='first' / 'last'")
            keep = np.r_[True, ~dup] if on_collision == "first" else np.r_[~dup, True]
            tick, mkf = tick[keep], mkf[keep]
        X[tick, 0] = mkf
    return X


class EventSequence(EmissionDistribution):
    r"""Marked events at irregular times on a tick grid (Yu 2010 §4.2, "event sequence model").

    See the module docstring for the input format (X (T, 1): mark v >= 0, -1 = no event, NaN =
    unobserved) and :func:`events_to_grid` to build it.

    Parameters
    ----------
    rate : array-like of float64, shape (K,), optional
        λ_j = P(an event at a tick | state j), in [0, 1].
    probs : array-like of float64, shape (K, V), optional
        Mark law c_j(v) = P(mark v | an event in state j); rows sum to one.
    n_marks : int, optional
        Number of marks V. Default: from ``probs`` or, at initialisation, the largest mark + 1.
        Marks outside [0, V) raise ``ValueError``.
    informative_gaps : bool, default True
        True: an empty tick scores log(1 - λ_j) and an event log λ_j + log c_j(v) (the event times
        carry information); False: an empty tick scores 0 and an event log c_j(v) (only the marks
        inform; ``rate`` is still fitted, for :meth:`sample`).
    min_rate : float, default 1e-10
        ``fit`` keeps λ in [min_rate, 1 - min_rate] (the constrained maximiser: the objective is
        concave in λ_j), so a state without events (or without gaps) in its data keeps a finite
        log-likelihood elsewhere.

    Notes
    -----
    ``log_density`` (N, K) float64 in log space costs time O(N·K); ``fit`` is the exact weighted MLE,

    .. math:: λ_j = \frac{Σ_t w_{tj} [x_t \ge 0]}{Σ_t w_{tj} [x_t \ne \text{NaN}]}, \qquad
              c_j(v) = \frac{Σ_t w_{tj} [x_t = v]}{Σ_t w_{tj} [x_t \ge 0]}

    (clipped rate; a state without weight keeps its rate, one without event weight its marks), time
    O(N·K + K·V). Inside a :class:`~structlearn.HiddenSemiMarkovModel` the duration of a state is in
    ticks: with ticks of 10 s a one-hour activity is D = 360.

    Unsupervised EM: the HSMM's initial state labels are per tick (k-means of the marks), so its
    initial durations are a tick or two, and EM may stay there with every state alike (seen on
    simulated streams of 2 states, rates 0.1 / 0.4 per tick, segments of 20–30 ticks). Start it
    from plausible durations instead (a duration object with its parameters and ``init_params``
    without ``"d"``), or estimate from labels.

    Examples
    --------
    >>> import numpy as np
    >>> from structlearn.distributions.emissions.event import EventSequence, events_to_grid
    >>> X = events_to_grid([0.0, 12.0, 31.0], [2, 0, 2], resolution=10.0)
    >>> X[:, 0].tolist()
    [2.0, 0.0, -1.0, 2.0]
    >>> e = EventSequence(rate=[0.5, 0.1], probs=[[0.5, 0.0, 0.5], [0.2, 0.2, 0.6]])
    >>> np.round(e.log_density(X)[2], 4).tolist()  # the empty tick: log(1 - λ_j)
    [-0.6931, -0.1054]
    """

    _param_names = ("rate", "probs")

    def __init__(self, rate=None, probs=None, n_marks=None, informative_gaps=True, min_rate=1e-10):
        if n_marks is not None and (isinstance(n_marks, bool) or not isinstance(n_marks, (int, np.integer))
                                    or n_marks < 1):
            raise ValueError(f"`n_marks` must be a positive integer or None; got {n_marks!r}")
        if not isinstance(informative_gaps, (bool, np.bool_)):
            raise ValueError(f"`informative_gaps` must be True or False; got {informative_gaps!r}")
        self.n_marks = None if n_marks is None else int(n_marks)
        self.informative_gaps = bool(informative_gaps)
        self.min_rate = float(min_rate)
        if not 0.0 <= self.min_rate < 0.5:
            raise ValueError(f"`min_rate` must lie in [0, 0.5); got {min_rate!r}")
        self._set_params(rate=rate, probs=probs)

    def _config(self):
        return {"n_marks": self.n_marks, "informative_gaps": self.informative_gaps,
                "min_rate": self.min_rate}

    def _validate(self):
        self.rate = np.atleast_1d(self.rate)
        if self.rate.ndim != 1:
            raise ValueError(f"`rate` must have shape (K,); got {self.rate.shape}")
        if not np.all(np.isfinite(self.rate)) or np.any(self.rate < 0) or np.any(self.rate > 1):
            raise ValueError(f"`rate` (event probabilities per tick) must lie in [0, 1]; got {self.rate}")
        p = self.probs
        if p.ndim != 2 or p.shape[0] != self.rate.shape[0]:
            raise ValueError(f"`probs` must have shape (K, V) with K = {self.rate.shape[0]} (the length "
                             f"of `rate`); got {p.shape}")
        check_stochastic_rows(p, "probs")
        if self.n_marks is None:
            self.n_marks = p.shape[1]
        elif p.shape[1] != self.n_marks:
            raise ValueError(f"`probs` has {p.shape[1]} marks but n_marks={self.n_marks}")

    def check_X(self, X):
        """X as (T, 1) float64 (marks >= 0, -1 = no event, NaN = unobserved); ``ValueError`` else."""
        X = _as_2d(X)
        if X.shape[1] != 1:
            raise ValueError(f"event-sequence observations take one column (the mark of each tick, -1 = "
                             f"no event); got X of shape {X.shape}")
        x = X[:, 0]
        obs = ~np.isnan(x)
        bad = obs & ((x != np.round(x)) | (x < NO_EVENT))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"event-sequence observations must be whole numbers >= -1 (mark, or -1 = no "
                             f"event) or NaN; row {i} is {x[i]!r}")
        if self.n_marks is not None and obs.any() and x[obs].max() >= self.n_marks:
            i = int(np.flatnonzero(obs & (x >= self.n_marks))[0])
            raise ValueError(f"mark {int(x[i])} at row {i} is outside 0..{self.n_marks - 1} "
                             f"(n_marks={self.n_marks}); pass a larger `n_marks`")
        return X

    def log_density(self, X):
        """log b_j(x_t), shape (N, K) float64 (module docstring); 0 for unobserved ticks, -inf for a zero
        probability. Time O(N·K)."""
        self._require()
        x = X[:, 0]
        K = self.rate.shape[0]
        out = np.zeros((X.shape[0], K))
        ev = ~np.isnan(x) & (x >= 0)
        with np.errstate(divide="ignore"):
            lp = np.log(self.probs)
            lr, lg = np.log(self.rate), np.log1p(-self.rate)
        out[ev] = lp[:, x[ev].astype(np.int64)].T
        if self.informative_gaps:
            out[ev] += lr
            out[x == NO_EVENT] = lg
        return out

    def fit(self, X, weights):
        """Weighted MLE of rates and mark laws (class Notes); returns self. Time O(N·K + K·V)."""
        x = X[:, 0]
        obs = ~np.isnan(x)
        ev = obs & (x >= 0)
        K = weights.shape[1]
        V = self.n_marks if self.n_marks is not None else (int(x[ev].max()) + 1 if ev.any() else 1)
        self.n_marks = V
        counts = np.zeros((K, V))
        xi = x[ev].astype(np.int64)
        for k in range(K):
            counts[k] = np.bincount(xi, weights=weights[ev, k], minlength=V)
        n_ev = counts.sum(axis=1)
        n_obs = weights[obs].sum(axis=0)
        rate = self.rate.copy() if self.rate is not None else np.full(K, 0.5)
        probs = self.probs.copy() if self.probs is not None else np.full((K, V), 1.0 / V)
        ok = n_obs > 0
        rate[ok] = np.clip(n_ev[ok] / n_obs[ok], self.min_rate, 1.0 - self.min_rate)
        has = n_ev > 0
        probs[has] = counts[has] / n_ev[has, None]
        self.rate, self.probs = rate, probs
        return self

    def sample(self, states, random_state=None):
        """One tick per state: the mark of an event (probability λ_j) or -1, shape (n, 1) float64."""
        self._require()
        rng = check_random_state(random_state)
        s = np.asarray(states, dtype=np.int64)
        u = rng.random_sample(s.size)
        cdf = np.cumsum(self.probs, axis=1)
        v = rng.random_sample(s.size)
        marks = np.array([np.searchsorted(cdf[k], v_, side="right") for k, v_ in zip(s, v)],
                         dtype=np.float64).reshape(-1)
        marks = np.minimum(marks, self.probs.shape[1] - 1)
        return np.where(u < self.rate[s], marks, float(NO_EVENT))[:, None]

    def initialize(self, X, n_states, labels, random_state=None):
        """Rates and mark laws from initial hard labels (-1 = unlabelled), smoothed so that no state
        starts with a zero probability; returns self."""
        x = X[:, 0]
        obs = ~np.isnan(x)
        ev = obs & (x >= 0)
        if self.n_marks is None:
            self.n_marks = int(x[ev].max()) + 1 if ev.any() else 1
        V = self.n_marks
        rng = check_random_state(random_state)
        freq = np.bincount(x[ev].astype(np.int64), minlength=V) + 1.0
        freq /= freq.sum()
        glob = float(ev.sum()) / max(float(obs.sum()), 1.0)
        self.rate = np.full(n_states, np.clip(glob, 0.01, 0.99))
        p = rng.dirichlet(freq * 10 * V, size=n_states) + 1e-3
        self.probs = p / p.sum(axis=1, keepdims=True)
        w = _weights_for_labels(X, n_states, labels)
        if w.sum() > 0:
            self.fit(X, w)
            self.rate = np.clip(self.rate, 1e-3, 1 - 1e-3)
            self.probs = (self.probs + 1e-3) / (1 + 1e-3 * V)
        return self

    def n_parameters(self):
        """K·(V - 1) mark probabilities, plus the K rates when the gaps are informative."""
        K, V = self.probs.shape
        return K * (V - 1) + (K if self.informative_gaps else 0)
