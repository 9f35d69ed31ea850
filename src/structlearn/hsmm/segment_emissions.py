r"""Segment emissions b_(j,d)(o_{t+1:t+d}) of the general hidden semi-Markov model (Yu 2010 §2.1, eq. (1)).

A segment's observations are generated jointly, given its state j and duration d, instead of one by one.
:class:`CategoricalSegments` is the categorical segment table for small alphabets: every pattern of d
symbols has its own probability under every (j, d),

.. math:: b_{(j,d)}(o_{t+1:t+d}) = θ_{j,d}[\mathrm{code}(o_{t+1:t+d})], \qquad
          \sum_{c < V^d} θ_{j,d}[c] = 1,

with code = Σ_u o_{t+u} V^{d-u} (base-V digits, first symbol most significant). Its EM re-estimate is the
expected pattern count θ_{j,d}[c] ∝ Σ_t η_t(j, d) [code(o_{t-d+1:t}) = c] (Yu 2010 §2.3.1 item 3 for
segment emissions). The table has M·Σ_d V^d entries: V^D must stay small (at most 2·10⁶).

Protocol used by :class:`structlearn.GeneralHSMM` (``segment_emission=``): ``log_segment(X_seq)`` → (T, D, M)
float64, ``[e, d-1, j]`` = log b_(j,d)(o_{e-d+1:e}) (entries with d > e + 1 unused); optionally
``initialize(X, lengths, n_states, max_duration, rng)``, ``fit(X, lengths, eta)`` with η (N, M, D),
``sample(state, duration, rng)`` and ``n_parameters()``.
"""
import numpy as np

from ..utils.validation import as_real_float64

__all__ = ["CategoricalSegments", "SegmentLogLikelihood", "check_symbols"]

MAX_PATTERNS = 2_000_000


def check_symbols(X, n_symbols, name="X"):
    """(N,) int64 symbols of a one-column X with values in 0..V-1 (``ValueError`` naming ``name``
    otherwise; missing values are not allowed: a segment's probability needs all its symbols)."""
    X = as_real_float64(X, name)
    if X.ndim != 2 or X.shape[1] != 1:
        raise ValueError(f"`{name}` must have one column of symbols for categorical segment emissions; got "
                         f"shape {X.shape}")
    x = X[:, 0]
    bad = np.flatnonzero(~np.isfinite(x) | (x < 0) | (x >= n_symbols) | (x != np.round(x)))
    if bad.size:
        raise ValueError(f"`{name}` must hold symbols 0..{n_symbols - 1} (no missing values) for categorical "
                         f"segment emissions; got {x[bad[0]]!r} at row {int(bad[0])}")
    return x.astype(np.int64)


class CategoricalSegments:
    """Categorical segment table θ_{j,d} over the V^d patterns of d symbols (module docstring).

    Parameters
    ----------
    n_symbols : int
        Alphabet size V (symbols 0..V-1 in a one-column X).
    probs : list of D arrays, optional
        ``probs[d-1]`` (M, V^d) float64, rows summing to 1 (linear space). Set by ``initialize``/``fit``.
    pseudocount : float, default 0.0
        Added to every expected pattern count in ``fit`` (0: the maximum-likelihood estimate).
    """

    def __init__(self, n_symbols, probs=None, pseudocount=0.0):
        if isinstance(n_symbols, bool) or not isinstance(n_symbols, (int, np.integer)) or n_symbols < 1:
            raise ValueError(f"`n_symbols` must be a positive integer; got {n_symbols!r}")
        if not (np.isfinite(pseudocount) and pseudocount >= 0):
            raise ValueError(f"`pseudocount` must be a non-negative number; got {pseudocount!r}")
        self.n_symbols = int(n_symbols)
        self.pseudocount = float(pseudocount)
        self.probs = None if probs is None else [np.asarray(p, dtype=np.float64) for p in probs]

    def __repr__(self):
        shape = None if self.probs is None else (self.probs[0].shape[0], len(self.probs))
        return f"CategoricalSegments(n_symbols={self.n_symbols}, (M, D)={shape})"

    # -- shapes ----------------------------------------------------------------------------------------
    def _check_size(self, max_duration):
        n = self.n_symbols ** int(max_duration)
        if n > MAX_PATTERNS:
            raise ValueError(f"a categorical segment table needs V^D = {self.n_symbols}^{max_duration} = {n} "
                             f"patterns per state (> {MAX_PATTERNS}); use a smaller max_duration or alphabet")

    def check(self, n_states, max_duration):
        """Raise ``ValueError`` unless ``probs`` holds D tables (M, V^d) of distributions."""
        if self.probs is None:
            raise ValueError("the categorical segment table has no parameters: set `probs` or let fit "
                             "initialise it ('e' in init_params)")
        V = self.n_symbols
        if len(self.probs) != max_duration:
            raise ValueError(f"`probs` must hold max_duration={max_duration} tables; got {len(self.probs)}")
        for d, p in enumerate(self.probs, start=1):
            if p.shape != (n_states, V ** d):
                raise ValueError(f"`probs[{d - 1}]` must have shape ({n_states}, {V ** d}); got {p.shape}")
            s = p.sum(axis=1)
            if np.any(p < 0) or not np.allclose(s, 1.0, atol=1e-8):
                i = int(np.argmax(np.abs(s - 1)))
                raise ValueError(f"`probs[{d - 1}]` rows must be distributions; row {i} sums to {s[i]:.6g}")

    @property
    def n_states(self):
        return None if self.probs is None else self.probs[0].shape[0]

    def n_parameters(self):
        """Free parameters M·Σ_d (V^d - 1)."""
        return int(sum(p.shape[0] * (p.shape[1] - 1) for p in self.probs))

    def check_X(self, X):
        """X as a validated (N, 1) float64 array of symbols 0..V-1 (``ValueError`` otherwise)."""
        X = as_real_float64(X)
        if X.ndim == 1:
            X = X[:, None]
        check_symbols(X, self.n_symbols)
        return X

    # -- codes -----------------------------------------------------------------------------------------
    def codes(self, x, max_duration):
        """(T, D) int64: ``[e, d-1]`` = code of the pattern x[e-d+1 .. e] (-1 where d > e + 1)."""
        T = x.shape[0]
        D = int(max_duration)
        out = np.full((T, D), -1, dtype=np.int64)
        code = np.zeros(T, dtype=np.int64)
        for d in range(1, D + 1):
            # code_d[e] = code_{d-1}[e] + x[e-d+1] V^{d-1}
            valid = np.arange(T) >= d - 1
            idx = np.flatnonzero(valid)
            code[idx] = code[idx] + x[idx - (d - 1)] * self.n_symbols ** (d - 1)
            out[idx, d - 1] = code[idx]
        return out

    # -- the protocol ----------------------------------------------------------------------------------
    def log_segment(self, X_seq):
        """log b_(j,d)(o_{e-d+1:e}) of one sequence, (T, D, M) float64 (-inf for an impossible pattern, 0
        where d > e + 1). Time O(T·D·M)."""
        M, D = self.probs[0].shape[0], len(self.probs)
        x = check_symbols(X_seq, self.n_symbols)
        codes = self.codes(x, D)
        out = np.zeros((x.shape[0], D, M))
        with np.errstate(divide="ignore"):
            for d in range(1, D + 1):
                ok = codes[:, d - 1] >= 0
                out[ok, d - 1, :] = np.log(self.probs[d - 1][:, codes[ok, d - 1]]).T
        return out

    def initialize(self, X, lengths, n_states, max_duration, rng):
        """Pattern frequencies of every window of the data, perturbed per state (Gamma noise) so the states
        differ; every pattern keeps a small positive probability."""
        self._check_size(max_duration)
        x = check_symbols(X, self.n_symbols)
        V, M, D = self.n_symbols, int(n_states), int(max_duration)
        counts = [np.zeros(V ** d) for d in range(1, D + 1)]
        o = 0
        for T in np.asarray(lengths, dtype=np.int64):
            c = self.codes(x[o:o + T], D)
            for d in range(1, D + 1):
                v = c[:, d - 1]
                counts[d - 1] += np.bincount(v[v >= 0], minlength=V ** d)
            o += int(T)
        self.probs = []
        for cnt in counts:
            w = (cnt[None, :] + 0.5) * rng.gamma(4.0, 0.25, size=(M, cnt.size))
            self.probs.append(w / w.sum(axis=1, keepdims=True))
        return self

    def fit(self, X, lengths, eta):
        """EM re-estimate from η (N, M, D) = P(a (j, d)-segment ends at row t | o): θ_{j,d} ∝ expected
        pattern counts (+ ``pseudocount``). A (j, d) without mass keeps its row."""
        x = check_symbols(X, self.n_symbols)
        V = self.n_symbols
        M, D = self.probs[0].shape[0], len(self.probs)
        acc = [np.zeros((M, V ** d)) for d in range(1, D + 1)]
        o = 0
        for T in np.asarray(lengths, dtype=np.int64):
            T = int(T)
            c = self.codes(x[o:o + T], D)
            for d in range(1, D + 1):
                ok = np.flatnonzero(c[:, d - 1] >= 0)
                for j in range(M):
                    acc[d - 1][j] += np.bincount(c[ok, d - 1], weights=eta[o + ok, j, d - 1],
                                                 minlength=V ** d)
            o += T
        new = []
        for d in range(1, D + 1):
            a = acc[d - 1] + self.pseudocount
            tot = a.sum(axis=1)
            ok = tot > 0
            p = self.probs[d - 1].copy()
            p[ok] = a[ok] / tot[ok, None]
            new.append(p)
        self.probs = new
        return self

    def sample(self, state, duration, rng):
        """One pattern of ``duration`` symbols of state ``state``, float64 (duration, 1)."""
        p = self.probs[duration - 1][state]
        code = int(rng.choice(p.size, p=p))
        digits = [(code // self.n_symbols ** (duration - u)) % self.n_symbols for u in range(1, duration + 1)]
        return np.asarray(digits, dtype=np.float64)[:, None]


class SegmentLogLikelihood:
    """A fixed, user-supplied segment emission: ``function(X_seq) -> (T, D, M)`` float64 with ``[e, d-1, j]``
    = log b_(j,d)(o_{e-d+1:e}) of one sequence (T rows). EM does not re-estimate it.

    Parameters
    ----------
    function : callable
    """

    def __init__(self, function):
        if not callable(function):
            raise ValueError(f"`segment_emission` must be a callable X_seq -> (T, D, M) log-likelihoods or a "
                             f"segment emission object; got {function!r}")
        self.function = function

    def __repr__(self):
        return f"SegmentLogLikelihood({self.function!r})"

    def check_X(self, X):
        """X as a 2-d float64 array (a 1-d array is one feature)."""
        X = as_real_float64(X)
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2:
            raise ValueError(f"`X` must be 2-d (n_rows, n_features); got shape {X.shape}")
        return X

    def log_segment(self, X_seq):
        return self.function(X_seq)

    def n_parameters(self):
        return 0
