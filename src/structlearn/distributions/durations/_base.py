r"""The protocol base of the HSMM duration families and the helpers they share.

:class:`DurationDistribution` (the protocol of :mod:`structlearn.distributions.durations`), the M-step objective
Q (:func:`_q_value`), renormalisation at the maximum duration D, the derivative-free Newton maximiser used
by the parametric M-steps, and :class:`ShiftMixin`, the shift / minimum duration of every parametric
family (R mhsmm's ``shift``; Yu 2010 §4.1).
"""
import numpy as np
from scipy import special
from sklearn.utils import check_random_state

from ..base import Distribution

__all__ = ["DurationDistribution", "ShiftMixin"]

_NEG_INF = -np.inf
_TAIL_EPS = 1e-13  # untruncated mass beyond D below which truncation is ignored by closed forms
#: relative count below which a duration d <= shift is treated as impossible when the shift is estimated
#: (mhsmm uses an absolute 1e-20): the expected counts of the E-step are never exactly zero
SHIFT_TOL = 1e-12


def _q_value(log_p, counts, left):
    """Q = Σ n_d log p(d) - F log μ for one state (terms with n_d == 0 skipped)."""
    nz = counts > 0
    if np.any(log_p[nz] == _NEG_INF):
        return _NEG_INF
    q = float(np.dot(counts[nz], log_p[nz]))
    if left > 0:
        d = np.arange(1, log_p.shape[0] + 1, dtype=np.float64)
        q -= left * float(special.logsumexp(log_p + np.log(d)))
    return q


def _normalise_log(lf):
    """Renormalise a (D, K) table of log-masses over axis 0 (truncation at D)."""
    z = special.logsumexp(lf, axis=0)
    with np.errstate(invalid="ignore"):
        out = lf - z
    out[:, z == _NEG_INF] = _NEG_INF
    return out


def _check_positive_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}")
    return int(value)


# ------------------------------------------------------------------------------------------------------
# protocol base
# ------------------------------------------------------------------------------------------------------
def _checked_log_pmf(out, D, ends=None, hint=""):
    """``out`` (D, K) once every state (of the mask ``ends``, default all) has mass on 1..D."""
    dead = np.all(out == _NEG_INF, axis=0)
    bad = np.flatnonzero(dead if ends is None else dead & ends)
    if bad.size:
        raise ValueError(f"duration distribution of state {int(bad[0])} has no mass on 1..{D}{hint}")
    return out


class DurationDistribution(Distribution):
    """Base class of the duration families (see the module docstring for the protocol).

    Subclasses define ``_param_names`` and ``log_pmf``; ``sample``, ``mean``, ``var`` are generic.
    """

    # -- derived quantities (generic) ------------------------------------------------------------
    def log_pmf(self, max_duration):  # pragma: no cover - abstract
        raise NotImplementedError

    def pmf(self, max_duration):
        """Truncated, renormalised probabilities p_j(d), shape (D, K) (linear space)."""
        return np.exp(self.log_pmf(max_duration))

    def mean(self, max_duration):
        """Mean duration Σ_d d p_j(d) of the truncated distribution, shape (K,)."""
        p = self.pmf(max_duration)
        d = np.arange(1, p.shape[0] + 1, dtype=np.float64)
        return d @ p

    def var(self, max_duration):
        """Variance of the truncated duration distribution, shape (K,)."""
        p = self.pmf(max_duration)
        d = np.arange(1, p.shape[0] + 1, dtype=np.float64)
        m = d @ p
        return (d ** 2) @ p - m ** 2

    def sample(self, states, max_duration, random_state=None):
        """Draw one duration for each entry of ``states`` (int array, any shape) from p_state(·).

        Returns int64 array of the same shape, values in 1..D (D for a state without mass on 1..D, an
        absorbing state, which never ends). Inverse-cdf sampling, O(D·K + n log D).
        """
        rng = check_random_state(random_state)
        states = np.asarray(states, dtype=np.int64)
        cdf = np.cumsum(self.pmf(max_duration), axis=0)  # (D, K)
        with np.errstate(invalid="ignore", divide="ignore"):
            cdf = np.where(cdf[-1] > 0, cdf / cdf[-1], 0.0)
        u = rng.random_sample(states.shape)
        out = np.empty(states.shape, dtype=np.int64)
        flat_s, flat_u, flat_o = states.ravel(), u.ravel(), out.reshape(-1)
        for i in range(flat_s.size):
            flat_o[i] = np.searchsorted(cdf[:, flat_s[i]], flat_u[i], side="right") + 1
        np.minimum(out, max_duration, out=out)
        return out

    def n_parameters(self, max_duration):  # pragma: no cover - overridden
        raise NotImplementedError


def _newton_maximize(f, x0, max_iter=25):
    """Maximise a smooth function of a few unconstrained variables: Newton steps on central
    finite-difference derivatives (gradient ascent when the Hessian is not negative definite),
    with backtracking so that f never decreases. Pure NumPy (no BLAS threads, no SciPy overhead):
    an M-step calls it once per state and EM iteration."""
    x = np.asarray(x0, dtype=np.float64).copy()
    n = x.shape[0]
    fx = f(x)
    if not np.isfinite(fx):
        return x
    for _ in range(max_iter):
        h = 1e-4 * np.maximum(1.0, np.abs(x))
        g = np.empty(n)
        H = np.empty((n, n))
        fp = np.empty(n)
        fm = np.empty(n)
        for i in range(n):
            e = np.zeros(n)
            e[i] = h[i]
            fp[i], fm[i] = f(x + e), f(x - e)
            g[i] = (fp[i] - fm[i]) / (2 * h[i])
            H[i, i] = (fp[i] - 2 * fx + fm[i]) / h[i] ** 2
        for i in range(n):
            for j in range(i + 1, n):
                ei = np.zeros(n)
                ej = np.zeros(n)
                ei[i], ej[j] = h[i], h[j]
                H[i, j] = H[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej)
                                     + f(x - ei - ej)) / (4 * h[i] * h[j])
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(H))):
            break
        step = None
        if np.all(np.linalg.eigvalsh(H) < 0):
            step = -np.linalg.solve(H, g)
        if step is None or not np.all(np.isfinite(step)) or step @ g <= 0:
            step = g / max(1.0, float(np.abs(np.diag(H)).max()))
        norm = float(np.abs(step).max())
        if norm > 5.0:
            step *= 5.0 / norm
        t = 1.0
        improved = False
        while t > 1e-10:
            xn = x + t * step
            fn = f(xn)
            if np.isfinite(fn) and fn >= fx:
                improved = fn > fx
                break
            t *= 0.5
        if not improved:
            break
        gain = fn - fx
        x, fx = xn, fn
        if gain <= 1e-14 * (1.0 + abs(fx)) and float(np.abs(t * step).max()) < 1e-9:
            break
    return x


def _weighted_moments(n, shift=0.0, transform=None):
    d = np.arange(1, n.shape[0] + 1, dtype=np.float64) - shift
    if transform is not None:
        d = transform(d)
    N = n.sum()
    m = float(n @ d) / N
    v = float(n @ (d - m) ** 2) / N
    return m, v


class ShiftMixin:
    r"""Shift (minimum duration) s_j of a parametric duration family, as R mhsmm's ``shift``.

    The shifted law is p_j(d) = f_j(d - s_j) / Σ_{d'=1}^{D - s_j} f_j(d') for d > s_j and 0 for
    d <= s_j, f_j the family's (untruncated) law on 1, 2, …: s_j = 0 is the family itself. ``shift`` is
    a float64 array (K,) of whole numbers in 0..D-1 (``None`` = all zero).

    With ``estimate_shift=True`` the M-step maximises Q (see :mod:`structlearn.distributions.durations`) jointly
    over s_j and the family's parameters: s ranges over 0..d_min - 1, d_min the shortest duration whose
    expected count exceeds ``SHIFT_TOL`` (1e-12) times the state's total (mhsmm uses an absolute
    threshold 1e-20); for each s tried the family is fitted to the counts of d > s, and the best (s, θ)
    by Q is kept. The shifts are searched from the current one up and down while Q improves (two
    worse shifts in a row end a direction). Cost: a few fits of the family per state and M-step. The
    shift adds K free parameters.

    Notes
    -----
    Within EM the counts of d <= s are exactly zero once s is set, so the shift may fall but rises only
    past durations of negligible expected count; with completely observed durations (all labels
    known) it is the maximum-likelihood shift.
    """

    def _init_shift(self, shift, estimate_shift):
        self.estimate_shift = bool(estimate_shift)
        self.shift = None if shift is None else np.atleast_1d(np.array(shift, dtype=np.float64))

    def _config(self):
        return {"estimate_shift": self.estimate_shift}

    def _shift_array(self):
        """The shifts as int64 (K,) (zeros when ``shift`` is None)."""
        if self.shift is None:
            return np.zeros(self.n_states or 0, dtype=np.int64)
        return self.shift.astype(np.int64)

    def _validate_shift(self):
        if self.shift is None:
            return
        s = self.shift
        if s.shape != (self.n_states,) or not np.all(np.isfinite(s)) or np.any(s < 0) \
                or np.any(s != np.round(s)):
            raise ValueError(f"{type(self).__name__} `shift` must be an array of {self.n_states} whole "
                             f"numbers >= 0 (one minimum duration - 1 per state); got {s!r}")

    def get_state(self):
        arrays, config = super().get_state()
        if getattr(self, "_shiftable", True):
            arrays["shift"] = self._shift_array().astype(np.float64)
        return arrays, config

    def set_state(self, arrays):
        shift = arrays.get("shift") if hasattr(arrays, "get") else None
        self.shift = None if shift is None else np.asarray(shift, dtype=np.float64).copy()
        return super().set_state(arrays)

    def _shift_candidates(self, n, k):
        """Shifts allowed for state k with counts n (D,): [current] without ``estimate_shift``, else
        0..d_min - 1 (class docstring)."""
        D = n.shape[0]
        cur = int(self._shift_array()[k]) if self.shift is not None else 0
        if not self.estimate_shift:
            return [min(cur, D - 1)]
        big = np.flatnonzero(n > SHIFT_TOL * n.sum())
        top = int(big[0]) if big.size else 0
        return list(range(0, min(top, D - 1) + 1))

    def _best_shift(self, n, k, fit_at):
        """argmax over the allowed shifts of Q: ``fit_at(s)`` → (Q, result). A local search over s from
        the current shift (up, then down, while Q improves, stopping after two worse shifts in a row):
        the profile Q(s) of a unimodal family is unimodal in practice, and the current shift is always
        evaluated, so Q never decreases. Returns (Q, result, s)."""
        allowed = self._shift_candidates(n, k)
        cur = int(self._shift_array()[k]) if self.shift is not None else 0
        start = min(max(cur, allowed[0]), allowed[-1])
        q0, r0 = fit_at(start)
        best = (q0, r0, start)
        for step in (1, -1):
            worse, s = 0, start + step
            while allowed[0] <= s <= allowed[-1] and worse < 2:
                q, r = fit_at(s)
                if q > best[0]:
                    best, worse = (q, r, s), 0
                else:
                    worse += 1
                s += step
        return best

    @staticmethod
    def _clean_counts(n, s):
        """Counts with the durations d <= s dropped (negligible by construction of the candidates)."""
        out = n.copy()
        out[:s] = 0.0
        return out

    @staticmethod
    def _place(log_p_base, s, D):
        """A log-pmf on 1..D - s moved to s + 1..D (log 0 below)."""
        out = np.full(D, _NEG_INF)
        out[s:] = log_p_base
        return out

    def _shifted_log_pmf(self, max_duration, base):
        """Truncated, renormalised and shifted log p_j(d), shape (D, K), float64: ``base(k, n)`` is
        state k's renormalised log-pmf on 1..n."""
        self._require()
        D = _check_positive_int(max_duration, "max_duration")
        sh = self._shift_array()
        out = np.empty((D, self.n_states))
        for k in range(self.n_states):
            s = int(min(sh[k], D - 1))
            out[:, k] = self._place(base(k, D - s), s, D)
        return _checked_log_pmf(out, D)

    def _n_shift_parameters(self):
        return self.n_states if self.estimate_shift else 0
