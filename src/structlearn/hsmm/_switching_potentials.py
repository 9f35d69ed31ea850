r"""The switching hidden semi-Markov model as an explicit-duration HSMM over (regime, state) pairs.

Model (Duong, Bui, Phung & Venkatesh, "Activity recognition and abnormality detection with the switching
hidden semi-Markov model", CVPR 2005; Yu 2010, "Hidden semi-Markov models", §4 "switching HSMM"): R
regimes ("routines") × M states ("activities"). A regime r runs a semi-Markov chain of its own over the M
states, and a higher-level Markov chain over the regimes switches only at segment boundaries. At the end
of a segment of (regime r, state m):

* the next regime is r' ~ B[r, r'] (``regime_transmat``, a Markov chain whose diagonal may be non-zero);
* if r' = r the next state is m' ~ A_r[m, m'] (``transmat[r]``, zero diagonal as in the explicit-duration
  HSMM); otherwise m' ~ π_{r'}[m'] (``startprob[r']``: the new regime starts from its initial law).

The first segment has r ~ ρ (``regime_startprob``) and m ~ π_r. Durations p_{r,m}(d) are per (regime,
state) or tied across regimes (p_m(d)); emissions b_m(o_t) per state, shared by the regimes, or per
(regime, state).

**Architecture.** No recursion lives here. The pair (r, m) is the product state k = r·M + m of an
explicit-duration HSMM with K = R·M states, whose segment transition matrix is

.. math:: T[(r, m), (r', m')] = B[r, r'] \, (A_r[m, m'] \text{ if } r' = r \text{ else } π_{r'}[m'])

(zero diagonal, rows summing to one) and start probabilities ρ_r π_r[m]; :func:`product_parameters`
builds it, :class:`TiedDuration` / :class:`TiedEmission` present per-state families as K-state ones, and
:func:`product_potentials` hands all of it to :class:`structlearn.hsmm._potentials.HSMMPotentials`, whose
semi-Markov structure does the exact inference. Because log T separates into log B + (log A_r or log π_{r'}),
the M-step of the product's expected start and transition counts onto (ρ, π, B, A) is exact
(:func:`switching_m_step`); tied families are refitted from the counts summed over regimes (their Q is the
sum of the regimes' Q). The estimator is :class:`structlearn.hsmm.switching.SwitchingHSMM`.
"""
import numpy as np

from ._potentials import HSMMPotentials

__all__ = ["product_parameters", "split_states", "check_switching_probabilities", "switching_m_step",
           "TiedDuration", "TiedEmission", "product_potentials"]


def split_states(k, n_states):
    """(regime, state) int64 arrays of product state indices ``k`` (any shape): k = r·M + m."""
    k = np.asarray(k, dtype=np.int64)
    return k // n_states, k % n_states


def product_parameters(regime_startprob, regime_transmat, startprob, transmat):
    """Start probabilities (K,) and the (K, K) segment transition matrix of the product states.

    Parameters
    ----------
    regime_startprob : ndarray of float64, shape (R,)
        ρ_r.
    regime_transmat : ndarray of float64, shape (R, R)
        B[r, r'] (from, to), linear space.
    startprob : ndarray of float64, shape (R, M)
        π_r[m].
    transmat : ndarray of float64, shape (R, M, M)
        A_r[m, m'] (from, to), zero diagonal.

    Returns
    -------
    start : ndarray of float64, shape (K,)
        ρ_r π_r[m] at k = r·M + m.
    trans : ndarray of float64, shape (K, K)
        T[(r, m), (r', m')] = B[r, r'] A_r[m, m'] if r' = r, else B[r, r'] π_{r'}[m'] (linear space; zero
        diagonal when every A_r has one).

    Notes
    -----
    Time and memory O(K²), K = R·M.
    """
    R, M = startprob.shape
    start = (regime_startprob[:, None] * startprob).reshape(R * M)
    within = np.zeros((R, M, R, M))
    r = np.arange(R)
    within[r, :, r, :] = transmat
    switch = np.broadcast_to(startprob[None, None, :, :], (R, M, R, M)).copy()
    switch[r, :, r, :] = 0.0
    trans = regime_transmat[:, None, :, None] * (within + switch)
    return start, trans.reshape(R * M, R * M)


def _check_prob(arr, shape, name, zero_diag_axes=None, rows=True):
    a = np.asarray(arr, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"`{name}` must have shape {shape}; got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"`{name}` must be finite and non-negative")
    if rows:
        s = a.sum(axis=-1)
        bad = ~np.isclose(s, 1.0, rtol=0, atol=1e-8)
        if np.any(bad):
            idx = tuple(int(i) for i in np.argwhere(bad)[0]) if s.ndim else ()
            val = float(s[idx]) if s.ndim else float(s)
            where = f" row {idx if len(idx) > 1 else idx[0]}" if idx else ""
            raise ValueError(f"`{name}`{where} must sum to 1 (got {val:.6g})")
    return a


def check_switching_probabilities(regime_startprob, regime_transmat, startprob, transmat, n_regimes,
                                  n_states):
    """ρ (R,), B (R, R), π (R, M) and A (R, M, M) as validated float64 arrays.

    Raises
    ------
    ValueError
        Naming the attribute (``regime_startprob_``, ``regime_transmat_``, ``startprob_``, ``transmat_``):
        a wrong shape, a negative or non-finite entry, a row (a distribution) not summing to one, a
        non-zero diagonal of A_r (M >= 2: an explicit-duration HSMM has no self-transitions), or, with one
        state per regime (M = 1, R >= 2), a non-zero diagonal of B (staying in the regime would be a
        self-transition of its only state).
    """
    R, M = int(n_regimes), int(n_states)
    rho = _check_prob(regime_startprob, (R,), "regime_startprob_")
    B = _check_prob(regime_transmat, (R, R), "regime_transmat_")
    pi = _check_prob(startprob, (R, M), "startprob_")
    A = _check_prob(transmat, (R, M, M), "transmat_", rows=M >= 2)
    diag = A[:, np.arange(M), np.arange(M)]
    if np.any(diag != 0):
        r, m = (int(i) for i in np.argwhere(diag != 0)[0])
        raise ValueError(f"`transmat_` must have a zero diagonal in every regime (an explicit-duration HSMM "
                         f"has no self-transitions; durations model the stay); transmat_[{r}, {m}, {m}] = "
                         f"{A[r, m, m]:.6g}")
    if M == 1 and R >= 2 and np.any(np.diag(B) != 0):
        raise ValueError("with n_states=1 `regime_transmat_` must have a zero diagonal (staying in a regime "
                         f"would repeat its only state); got diagonal {np.diag(B).tolist()}")
    return rho, B, pi, A


def switching_m_step(start, trans, regime_startprob, regime_transmat, startprob, transmat, letters):
    """The exact M-step of (ρ, π, B, A) from the product's expected counts.

    Parameters
    ----------
    start : ndarray of float64, shape (K,), or None
        Expected number of sequences whose first segment is product state k (``"s"``).
    trans : ndarray of float64, shape (K, K), or None
        Expected number of (r, m) → (r', m') segment transitions (from, to), zero diagonal.
    regime_startprob, regime_transmat, startprob, transmat : ndarray
        The current parameters (shapes as in :func:`product_parameters`); rows without counts keep them.
    letters : str
        ``"s"`` updates ρ and π, ``"t"`` B and A.

    Returns
    -------
    (regime_startprob, regime_transmat, startprob, transmat) : new float64 arrays

    Notes
    -----
    With c0[r, m] the start counts and ξ[r, m, r', m'] the transitions, the expected complete-data
    log-likelihood separates (Duong et al. 2005 §3; the product's log T = log B + log A_r or log π_{r'}),
    and its maximiser is ρ_r ∝ Σ_m c0[r, m]; π_r[m] ∝ c0[r, m] + Σ_{r'' ≠ r} Σ_{m''} ξ[r'', m'', r, m]
    (the first segment and every switch into r); B[r, r'] ∝ Σ_{m, m'} ξ[r, m, r', m'];
    A_r[m, m'] ∝ ξ[r, m, r, m']. Time O(K²).
    """
    R, M = startprob.shape
    rho, B, pi, A = (np.array(a, dtype=np.float64) for a in (regime_startprob, regime_transmat, startprob,
                                                           transmat))
    xi = None if trans is None else np.asarray(trans, dtype=np.float64).reshape(R, M, R, M)
    r = np.arange(R)
    if "s" in letters and start is not None:
        c0 = np.asarray(start, dtype=np.float64).reshape(R, M)
        if c0.sum() > 0:
            rho = c0.sum(axis=1) / c0.sum()
        into = c0.copy()
        if xi is not None:
            sw = xi.sum(axis=1)  # (R from, R to, M to)
            sw[r, r, :] = 0.0
            into += sw.sum(axis=0)
        tot = into.sum(axis=1)
        ok = tot > 0
        pi[ok] = into[ok] / tot[ok, None]
    if "t" in letters and xi is not None:
        cb = xi.sum(axis=(1, 3))
        tot = cb.sum(axis=1)
        ok = tot > 0
        B[ok] = cb[ok] / tot[ok, None]
        if M >= 2:
            ca = xi[r, :, r, :]  # (R, M, M)
            tot = ca.sum(axis=2)
            ok = tot > 0
            A[ok] = ca[ok] / tot[ok][:, None]
    return rho, B, pi, A


class _Tied:
    """An inner family of M states presented as K = R·M product states, one copy per regime."""

    def __init__(self, inner, n_regimes):
        self.inner = inner
        self.n_regimes = int(n_regimes)

    @property
    def n_states(self):
        m = self.inner.n_states
        return None if m is None else m * self.n_regimes


class TiedDuration(_Tied):
    """A duration family of M states presented as K = R·M product states (durations tied across regimes).

    ``log_pmf(D)`` (D, K) repeats the inner family's (D, M) table for every regime; ``fit(counts, left)``
    refits the inner family from the counts summed over regimes (exact: the tied Q is the sum of the
    regimes' Q); ``sample`` draws from the inner family's state k mod M. The inner object is refitted in
    place.
    """

    def _fold(self, a, axis_len):
        return a.reshape(a.shape[:-1] + (self.n_regimes, axis_len)).sum(axis=-2)

    def log_pmf(self, max_duration):
        """Truncated log p_{k mod M}(d), shape (D, K) float64 (log space)."""
        return np.tile(self.inner.log_pmf(max_duration), (1, self.n_regimes))

    def pmf(self, max_duration):
        """p_{k mod M}(d), shape (D, K) float64 (linear space)."""
        return np.exp(self.log_pmf(max_duration))

    def mean(self, max_duration):
        """Mean durations of the truncated laws, shape (K,) float64."""
        return np.tile(self.inner.mean(max_duration), self.n_regimes)

    def fit(self, counts, left_weight=None):
        """M-step from expected counts (D, K) and left-censored weights (K,), summed over regimes."""
        M = self.inner.n_states
        left = None if left_weight is None else self._fold(np.asarray(left_weight), M)
        self.inner.fit(self._fold(np.asarray(counts), M), left)

    def sample(self, states, max_duration, random_state=None):
        """One duration in 1..D per product state in ``states`` (int64, same shape)."""
        return self.inner.sample(np.asarray(states) % self.inner.n_states, max_duration, random_state)

    def n_parameters(self, max_duration):
        """Free parameters of the inner (M-state) family."""
        return self.inner.n_parameters(max_duration)


class TiedEmission(_Tied):
    """An emission family of M states presented as K = R·M product states (emissions shared by regimes).

    ``log_density(X)`` (N, K) repeats the inner (N, M) log-densities for every regime; ``fit(X, weights)``
    refits the inner family from the (N, K) weights summed over regimes (exact: the weighted
    log-likelihood of a tied state is the sum over regimes); ``sample`` uses state k mod M.
    """

    def check_X(self, X):
        """``X`` validated by the inner family (2-d float64, NaN = missing)."""
        from ..distributions.emissions import check_observations
        return check_observations(self.inner, X)

    def log_density(self, X):
        """log b_{k mod M}(x_t), shape (N, K) float64 (log space)."""
        return np.tile(self.inner.log_density(X), (1, self.n_regimes))

    def fit(self, X, weights):
        """Weighted maximum likelihood with the (N, K) weights summed over regimes into (N, M)."""
        w = np.asarray(weights)
        self.inner.fit(X, w.reshape(w.shape[0], self.n_regimes, -1).sum(axis=1))

    def sample(self, states, random_state=None):
        """Observations (n, F) float64 of the product states ``states`` (n,)."""
        return self.inner.sample(np.asarray(states) % self.inner.n_states, random_state)

    def n_parameters(self):
        """Free parameters of the inner (M-state) family."""
        return self.inner.n_parameters()


def product_potentials(regime_startprob, regime_transmat, startprob, transmat, duration, emission,
                       max_duration, censoring, tie_durations, tie_emissions, untruncated=False):
    """The :class:`~structlearn.hsmm._potentials.HSMMPotentials` of the product states (K = R·M).

    ``duration`` has M states when ``tie_durations`` (else K), ``emission`` M states when ``tie_emissions``
    (else K), ordered k = r·M + m; with R = 1 they are used as they are (the plain HSMM, chain of geometric
    durations included). Inference on the result costs time O(N·(K² + D·K)) and memory O(N·K) per pass.
    """
    R = regime_startprob.shape[0]
    start, trans = product_parameters(regime_startprob, regime_transmat, startprob, transmat)
    if R > 1 and tie_durations:
        duration = TiedDuration(duration, R)
    if R > 1 and tie_emissions:
        emission = TiedEmission(emission, R)
    return HSMMPotentials(start, trans, duration, emission, max_duration, censoring,
                          untruncated=untruncated and R == 1 or (untruncated and not tie_durations))
