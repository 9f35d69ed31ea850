r"""Discrete Coxian (acyclic phase-type) durations of the HSMM (Yu 2010, "Hidden semi-Markov models", §4.1).

A state's sojourn is the absorption time of a small Markov chain of M phases visited in order: a segment
starts in phase 1; at each step in phase i it stays with probability s_i, moves to phase i + 1 with
a_i = (1 - s_i) c_i, or ends with e_i = (1 - s_i)(1 - c_i) (the last phase ends with e_M = 1 - s_M). The
duration law is the discrete phase-type pmf f(d) = α T^{d-1} e, α = (1, 0, …, 0), T the bidiagonal
sub-stochastic matrix of stays and moves (Neuts 1981; Bladt & Nielsen 2017, "Matrix-Exponential
Distributions in Applied Probability", §1.2; Duong et al. 2005 "Coxian HSMM"). It is the explicit duration
of an HMM whose states are expanded into M left-to-right phases: every geometric (M = 1), negative
binomial with integer size and sum of geometrics is a member, and mixtures of such sums too.
"""
import numpy as np
from scipy import linalg, special

from ._base import DurationDistribution, ShiftMixin, _check_positive_int, _newton_maximize, _normalise_log, _q_value

__all__ = ["Coxian"]


def _phase_tables(stay, proceed, L):
    """Forward table F (L, M): F[t - 1, i] = P(in phase i at step t, not ended), and the (s, a, e) vectors.

    f_1 = α, f_{t+1}(i) = s_i f_t(i) + a_{i-1} f_t(i - 1): a first-order recursion per phase, run as
    an IIR filter (``scipy.signal.lfilter``). Time O(L·M)."""
    M = stay.shape[0]
    leave = 1.0 - stay
    a = np.zeros(M)
    a[:-1] = leave[:-1] * proceed
    e = leave - a
    F = np.empty((L, M))
    x = np.zeros(L)
    x[0] = 1.0
    from scipy import signal  # 0.2 s to import: only the phase-type durations need it
    F[:, 0] = signal.lfilter([1.0], [1.0, -stay[0]], x)
    for i in range(1, M):
        x = np.concatenate([[0.0], a[i - 1] * F[:-1, i - 1]])
        F[:, i] = signal.lfilter([1.0], [1.0, -stay[i]], x)
    return F, stay, a, e


def _log_pmf_base(stay, proceed, D):
    """log f(d) / Σ_{d' <= D} f(d'), d = 1..D, for one state (D,)."""
    F, _, _, e = _phase_tables(stay, proceed, D)
    p = F @ e
    with np.errstate(divide="ignore"):
        return _normalise_log(np.log(np.maximum(p, 0.0))[:, None])[:, 0]


def _em_step(stay, proceed, n):
    """One EM step of the phases for the weighted durations n (D',) truncated at D' (truncated-data EM:
    the durations beyond D' enter as expected phantom paths of weight N / Z per unit probability;
    Dempster, Laird & Rubin 1977 §4.2). Returns the new (stay, proceed). Time O(D'·M + M³)."""
    D = n.shape[0]
    M = stay.shape[0]
    F, s, a, e = _phase_tables(stay, proceed, D + 1)
    p = F[:D] @ e
    nz = n > 0
    w = np.where(nz, n / np.where(p > 0, p, 1.0), 0.0)
    Z = p.sum()
    omega = n.sum() / Z
    # backward h_t(i) = w_t e_i + s_i h_{t+1}(i) + a_i h_{t+1}(i + 1), h_{D'+1} = ω: reversed-time filters
    from scipy import signal  # 0.2 s to import: only the phase-type durations need it

    H = np.empty((D + 1, M))
    H[D] = omega
    for i in range(M - 1, -1, -1):
        y = w[::-1] * e[i]
        if i < M - 1:
            y = y + a[i] * H[1:, i + 1][::-1]
        r, _ = signal.lfilter([1.0], [1.0, -s[i]], y, zi=[s[i] * omega])
        H[:D, i] = r[::-1]
    stays = s * np.einsum("ti,ti->i", F[:D], H[1:])
    moves = np.zeros(M)
    if M > 1:
        moves[:-1] = a[:-1] * np.einsum("ti,ti->i", F[:D, :-1], H[1:, 1:])
    exits = e * (w @ F[:D])
    # phantom paths still running at step D' + 1: expected visits v = ω f_{D'+1} (I - T)^{-1}
    T = np.diag(s) + np.diag(a[:-1], 1)
    v = linalg.solve((np.eye(M) - T).T, omega * F[D], check_finite=False)
    v = np.maximum(v, 0.0)
    stays += v * s
    moves += v * a
    exits += v * e
    tot = stays + moves + exits
    ok = tot > 0
    new_stay = stay.copy()
    new_stay[ok] = np.minimum(stays[ok] / tot[ok], 1.0 - 1e-12)
    new_proceed = proceed.copy()
    out = moves[:-1] + exits[:-1]
    okp = out > 0
    new_proceed[okp] = moves[:-1][okp] / out[okp]
    return new_stay, new_proceed


class Coxian(ShiftMixin, DurationDistribution):
    r"""Discrete Coxian (left-to-right phase-type) durations with M phases per state.

    Parameters
    ----------
    n_phases : int, default 3
        M, the number of phases (M = 1: geometric).
    stay : array-like of float64, shape (K, M), optional
        s_ji, probability of staying in phase i for one more step; 0 <= s < 1.
    proceed : array-like of float64, shape (K, M - 1), optional
        c_ji, probability that leaving phase i < M goes to phase i + 1 rather than ending; 0 <= c <= 1.
    n_inner : int, default 20
        EM iterations over the phases in each M-step.
    shift : array-like of float64, shape (K,), optional
        Whole numbers s_j >= 0: p_j(d) ∝ f_j(d - s_j) (:class:`ShiftMixin`); default 0.
    estimate_shift : bool, default False
        Estimate s_j in the M-step (R mhsmm's ``shift``).

    Notes
    -----
    Log-pmf: the truncated, renormalised f_j(d) = α T_j^{d-1} e_j, time O(D·M) per state (the forward
    recursion over phases as ``scipy.signal.lfilter``). Mean before truncation α (I - T)^{-1} 1.

    ``fit`` (the M-step) runs ``n_inner`` EM iterations over the hidden phase paths from the current
    parameters: a forward–backward over the phases of every duration d weighted by its expected count
    n_d (time O(D·M) per iteration), the durations beyond D entering as phantom truncated observations
    (Dempster, Laird & Rubin 1977 §4.2), so each iteration increases Σ_d n_d log p(d). The left-censored
    term -F log μ of Q is not in the phase EM: with F > 0 the EM result is polished by damped Newton
    steps on Q itself (finite differences, logit coordinates), and the best of the current, EM and
    polished parameters by Q is kept (a generalised EM step, Q never decreases). Free parameters: K·(2M - 1) (+ K with ``estimate_shift``).
    """

    _param_names = ("stay", "proceed")

    def __init__(self, n_phases=3, stay=None, proceed=None, n_inner=20, shift=None, estimate_shift=False):
        self.n_phases = _check_positive_int(n_phases, "n_phases")
        self.n_inner = _check_positive_int(n_inner, "n_inner")
        self._init_shift(shift, estimate_shift)
        self.stay = None if stay is None else np.array(stay, dtype=np.float64)
        self.proceed = None if proceed is None else np.array(proceed, dtype=np.float64)
        if self.stay is not None and self.proceed is None and self.n_phases == 1:
            self.proceed = np.zeros((self.stay.shape[0], 0))
        if self._is_set():
            self._validate()

    def _config(self):
        return {"n_phases": self.n_phases, "n_inner": self.n_inner, **super()._config()}

    def _validate(self):
        M = self.n_phases
        st, pr = self.stay, self.proceed
        if st.ndim != 2 or st.shape[1] != M:
            raise ValueError(f"`stay` must have shape (K, {M}) (n_phases={M}); got {st.shape}")
        if pr.shape != (st.shape[0], M - 1):
            raise ValueError(f"`proceed` must have shape ({st.shape[0]}, {M - 1}); got {pr.shape}")
        if not np.all(np.isfinite(st)) or np.any(st < 0) or np.any(st >= 1):
            raise ValueError("Coxian `stay` probabilities must lie in [0, 1)")
        if not np.all(np.isfinite(pr)) or np.any(pr < 0) or np.any(pr > 1):
            raise ValueError("Coxian `proceed` probabilities must lie in [0, 1]")
        self._validate_shift()

    def log_pmf(self, max_duration):
        """Truncated, renormalised (and shifted) log p_j(d), shape (D, K), float64."""
        return self._shifted_log_pmf(max_duration,
                                     lambda k, n: _log_pmf_base(self.stay[k], self.proceed[k], n))

    def untruncated_mean(self):
        """Mean α (I - T)^{-1} 1 of each state's law before truncation (+ shift), shape (K,)."""
        self._require()
        out = np.empty(self.n_states)
        for k in range(self.n_states):
            _, s, a, _ = _phase_tables(self.stay[k], self.proceed[k], 1)
            T = np.diag(s) + np.diag(a[:-1], 1)
            out[k] = linalg.solve(np.eye(self.n_phases) - T, np.ones(self.n_phases))[0]
        return out + self._shift_array()

    def fit(self, counts, left_weight=None):
        """M-step from expected counts (D, K) and left-censored weights (K,) (class Notes)."""
        counts = np.asarray(counts, dtype=np.float64)
        D, K = counts.shape
        left = np.zeros(K) if left_weight is None else np.asarray(left_weight, dtype=np.float64)
        have = self._is_set()
        cur_shift = self._shift_array() if have else np.zeros(K, dtype=np.int64)
        M = self.n_phases
        stay = self.stay.copy() if have else np.empty((K, M))
        proceed = self.proceed.copy() if have else np.empty((K, M - 1))
        shift = cur_shift.astype(np.float64)
        for k in range(K):
            n = np.maximum(counts[:, k], 0.0)
            N = n.sum()
            F = max(0.0, float(left[k]))
            if N <= 0:
                if not have:
                    stay[k], proceed[k] = self._start(max(2.0, D / 2.0))
                continue
            def fit_at(s, n=n, F=F, k=k):
                nc = self._clean_counts(n, s)
                cur = (stay[k].copy(), proceed[k].copy()) if have and s == cur_shift[k] else None
                best = None
                for c in self._fit_one(nc, F, D, s, cur):
                    q = _q_value(self._place(_log_pmf_base(c[0], c[1], D - s), s, D), nc, F)
                    if best is None or q > best[0]:
                        best = (q, c)
                return best

            _, (stay[k], proceed[k]), shift[k] = self._best_shift(n, k, fit_at)
        self.stay, self.proceed = stay, proceed
        if self.shift is not None or np.any(shift):
            self.shift = shift
        return self

    def _start(self, mean):
        """Phases for a given mean duration: c = 0.5, s chosen so that the untruncated mean is ``mean``."""
        M = self.n_phases
        c = np.full(M - 1, 0.5)
        reach = float(np.sum(0.5 ** np.arange(M)))
        q = min(1.0, reach / max(mean, 1.0))
        return np.full(M, max(0.0, 1.0 - q)), c

    def _fit_one(self, n, F, D, s, cur):
        """Candidates (stay, proceed) for one state: the current ones and the phase EM from them (or from
        the moment start)."""
        ns = n[s:]
        if cur is None:
            d = np.arange(1, ns.shape[0] + 1, dtype=np.float64)
            cur = self._start(float(ns @ d) / ns.sum())
            cur = (np.maximum(cur[0], 0.05), cur[1])
        st, pr = cur[0].copy(), cur[1].copy()
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for _ in range(self.n_inner):
                st_new, pr_new = _em_step(st, pr, ns)
                if not (np.all(np.isfinite(st_new)) and np.all(np.isfinite(pr_new))):
                    break
                done = np.allclose(st_new, st, rtol=0, atol=1e-12) and np.allclose(pr_new, pr, rtol=0,
                                                                                  atol=1e-12)
                st, pr = st_new, pr_new
                if done:
                    break
        out = [cur, (st, pr)]
        if F > 0:  # the phase EM ignores -F log μ: polish Q itself in logit coordinates
            M = self.n_phases

            def unpack(x):
                y = special.expit(np.clip(x, -30.0, 30.0))
                return np.minimum(y[:M], 1.0 - 1e-12), y[M:]

            def q_of(x):
                a, b = unpack(x)
                return _q_value(self._place(_log_pmf_base(a, b, D - s), s, D), n, F)

            y0 = np.clip(np.r_[st, pr], 1e-9, 1.0 - 1e-9)
            with np.errstate(all="ignore"):
                x = _newton_maximize(q_of, special.logit(y0), max_iter=15)
            out.append(unpack(x))
        return out

    def initialize(self, n_states, max_duration, means, random_state=None):
        """Phases with the given mean durations (K,) (see :meth:`_start`)."""
        self.shift = None
        means = np.asarray(means, dtype=np.float64)
        st = np.empty((n_states, self.n_phases))
        pr = np.empty((n_states, self.n_phases - 1))
        for k in range(n_states):
            st[k], pr[k] = self._start(float(means[k]))
        self.stay, self.proceed = st, pr
        return self

    def n_parameters(self, max_duration):
        """Free parameters: K·(2M - 1) (+ K with ``estimate_shift``)."""
        return self.n_states * (2 * self.n_phases - 1) + self._n_shift_parameters()
