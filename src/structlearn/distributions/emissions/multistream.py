r"""Multi-stream emissions of the HSMM: a product of emission families over groups of columns, with missing
values per stream (Yu 2010, "Hidden semi-Markov models", §4.2; the multi-stream observations of speech
HSMMs, Zen et al. 2007 "A hidden semi-Markov model-based speech synthesis system", §2).

b_j(x) = Π_s b^{(s)}_j(x^{(s)}), the streams conditionally independent given the state. A stream whose
columns are all NaN in a row is missing there and contributes log 1 = 0 (every family's convention), so
sensors that drop out, or observations recorded at different rates, share one model.
"""
import numpy as np
from sklearn.utils import check_random_state

from ._base import EmissionDistribution, _as_2d

__all__ = ["MultiStream"]


def _resolve(spec):
    """An emission object from an object, a family name, or a ``{"family", "config"}`` dict (model files:
    the class is looked up by name among :mod:`structlearn.distributions.emissions`' families only)."""
    from .. import emissions as _emi

    if isinstance(spec, dict):
        name = str(spec.get("family"))
        cls = getattr(_emi, name, None)
        if not (isinstance(cls, type) and issubclass(cls, EmissionDistribution)) or cls is MultiStream:
            raise ValueError(f"stream family {name!r} is not an emission family of "
                             f"structlearn.distributions.emissions")
        return cls(**(spec.get("config") or {}))
    return _emi.make_emission(spec)


class MultiStream(EmissionDistribution):
    r"""Product of emission families over column groups (streams), missing values per stream.

    Parameters
    ----------
    streams : sequence of (emission object, family name or {"family": class name, "config": dict})
        One family per stream, e.g. ``[Gaussian(), VonMises(), "bernoulli"]``; objects are used as
        given (their parameters, if set, are the stream's).
    columns : sequence of sequences of int, optional
        The columns of X of each stream (disjoint). Default: one column per stream, in order.

    Notes
    -----
    ``log_density(X)`` (N, K) = Σ_s log b^{(s)}(X[:, columns_s]); ``fit(X, weights)`` fits every stream
    with the same (N, K) weights — the weighted log-likelihood is a sum over streams, so the stream
    maximisers together maximise it (each stream's M-step exact or improving as its family's). Missing
    entries are handled by each family (all-NaN rows of a stream: log 1; partly missing rows as that
    family does). ``sample`` draws every stream independently. Cost: the sum of the streams' costs.
    Model files store each stream's family name, configuration and arrays (prefix ``s<i>.``).
    """

    _param_names = ()

    def __init__(self, streams, columns=None):
        if isinstance(streams, (str, dict)) or not hasattr(streams, "__len__") or len(streams) == 0:
            raise ValueError(f"`streams` must be a non-empty sequence of emission families; got {streams!r}")
        self.streams = [_resolve(s) for s in streams]
        if columns is None:
            columns = [[i] for i in range(len(self.streams))]
        cols = [[int(c) for c in np.atleast_1d(g)] for g in columns]
        if len(cols) != len(self.streams):
            raise ValueError(f"`columns` must give one column group per stream ({len(self.streams)}); "
                             f"got {len(cols)}")
        flat = [c for g in cols for c in g]
        if any(len(g) == 0 for g in cols) or len(set(flat)) != len(flat) or min(flat) < 0:
            raise ValueError(f"`columns` must be non-empty, disjoint groups of column indices >= 0; got {cols}")
        self.columns = cols
        self.n_features = max(flat) + 1

    # -- bookkeeping --------------------------------------------------------------------------------
    @property
    def n_states(self):
        ks = {s.n_states for s in self.streams}
        return ks.pop() if len(ks) == 1 else None

    def _is_set(self):
        return all(s._is_set() if hasattr(s, "_is_set") else s.n_states is not None for s in self.streams)

    def _config(self):
        out = [{"family": type(s).__name__, "config": getattr(s, "_config", dict)()} for s in self.streams]
        return {"streams": out, "columns": [list(g) for g in self.columns]}

    def __repr__(self):
        inner = ", ".join(repr(s) for s in self.streams)
        return f"MultiStream([{inner}], columns={self.columns})"

    def get_state(self):
        self._require()
        arrays = {}
        for i, s in enumerate(self.streams):
            a, _ = s.get_state()
            arrays.update({f"s{i}.{k}": v for k, v in a.items()})
        return arrays, self._config()

    def set_state(self, arrays):
        for i, s in enumerate(self.streams):
            p = f"s{i}."
            s.set_state({k[len(p):]: v for k, v in arrays.items() if k.startswith(p)})
        self._validate()
        return self

    def _validate(self):
        ks = {s.n_states for s in self.streams}
        if len(ks) != 1:
            raise ValueError(f"the streams have parameters for different numbers of states: "
                             f"{[s.n_states for s in self.streams]}")

    # -- the protocol -------------------------------------------------------------------------------
    def _split(self, X):
        return [X[:, g] for g in self.columns]

    def check_X(self, X):
        X = _as_2d(X)
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} columns but the streams use columns 0..{self.n_features - 1}")
        for s, x in zip(self.streams, self._split(X)):
            if hasattr(s, "check_X"):
                s.check_X(x)
        return X

    def log_density(self, X):
        """Σ_s log b^{(s)}_j(x_t^{(s)}), shape (N, K), float64 (a missing stream adds 0)."""
        self._require()
        out = None
        for s, x in zip(self.streams, self._split(X)):
            ld = s.log_density(x)
            out = ld.copy() if out is None else out + ld
        return out

    def fit(self, X, weights):
        """Every stream's weighted M-step with the same weights (N, K)."""
        for s, x in zip(self.streams, self._split(X)):
            s.fit(x, weights)
        return self

    def sample(self, states, random_state=None):
        """Draws, shape (n, n_features), each stream in its columns."""
        rng = check_random_state(random_state)
        states = np.asarray(states)
        out = np.full((states.shape[0], self.n_features), np.nan)
        for s, g in zip(self.streams, self.columns):
            out[:, g] = s.sample(states, rng)
        return out

    def initialize(self, X, n_states, labels, random_state=None):
        rng = check_random_state(random_state)
        for s, x in zip(self.streams, self._split(X)):
            s.initialize(x, n_states, labels, rng)
        return self

    def n_parameters(self):
        """Σ_s free parameters of stream s."""
        return int(sum(s.n_parameters() for s in self.streams))
