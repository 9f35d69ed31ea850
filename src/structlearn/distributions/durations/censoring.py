r"""Boundary conditions of the explicit-duration HSMM: transforms of a (D, K) duration log-pmf.

Censoring (Yu 2010 §2.2.1) is handled generically for every duration family, from its (D, K) log-pmf, by
:func:`duration_tables` (log-potentials of the first / middle / last / only segment of a sequence) and
:func:`complete_counts` (the E-step completion of censored segments used by the M-step):

* ``"none"`` — the simplifying assumption: the first segment starts at the first observation and the
  last one ends at the last; every segment scores log p_j(d).
* ``"right"`` — the last segment may continue after the last observation (Guédon 2003; R packages
  mhsmm / hsmm): it scores the survivor function log S_j(d) = log P(duration >= d).
* ``"both"`` — the general assumption: the process is a stationary renewal process observed through a
  window. The first segment started at or before the first observation; its observed part is the
  *forward recurrence time* (residual life) r_j(d) = S_j(d) / μ_j, μ_j = Σ_d d p_j(d) (the standard
  equilibrium residual-life law of renewal theory, which is Yu's π_{j,d} "equilibrium distribution"
  of §2.2.1). A first segment that also reaches past the last observation scores
  R_j(d) = P(residual >= d) = Σ_{d'>=d} S_j(d') / μ_j. The last segment is right-censored as above.

Every function takes ``log_pmf[d - 1, j] = log p_j(d)`` (see :mod:`structlearn.distributions.durations`).
"""
import numpy as np
from scipy import special

__all__ = ["CENSORING", "duration_tables", "complete_counts", "log_survivor", "log_mean", "log_tail_sum",
           "absorbing_states", "refuse_absorbing"]

#: Boundary conditions of Yu 2010 §2.2.1.
CENSORING = ("none", "right", "both")

_NEG_INF = -np.inf


# ------------------------------------------------------------------------------------------------------
def log_tail_sum(a):
    """log Σ_{d' >= d} exp(a[d']) along axis 0 (exact at -inf): the log tail sums of a log table."""
    with np.errstate(invalid="ignore"):
        return np.logaddexp.accumulate(a[::-1], axis=0)[::-1]


def absorbing_states(log_pmf):
    """(K,) bool: the columns of a (D, K) log-pmf without mass on 1..D — absorbing states, which never
    end (e.g. a geometric law with p = 0)."""
    return np.all(np.asarray(log_pmf) == _NEG_INF, axis=0)


def log_survivor(log_pmf):
    """Log survivor function log S_j(d) = log P(duration >= d), shape (D, K), from a (D, K) log-pmf.

    A column without mass on 1..D is an absorbing state (it never ends): S_j(d) = 1 for every d."""
    ls = log_tail_sum(np.asarray(log_pmf, dtype=np.float64))
    ls[:, absorbing_states(log_pmf)] = 0.0
    return ls


def refuse_absorbing(log_pmf, censoring):
    """``ValueError`` under ``censoring="both"`` when a state is absorbing (:func:`absorbing_states`): the
    residual-life law S_j(d) / μ_j of the first segment needs a finite mean."""
    if censoring == "both":
        bad = np.flatnonzero(absorbing_states(log_pmf))
        if bad.size:
            raise ValueError(f"state {int(bad[0])} has an absorbing duration (no mass on 1..D, e.g. a "
                             f"geometric law with p = 0): under censoring='both' its first segment has no "
                             f"residual-life law (infinite mean); use censoring='right'")


def log_mean(log_pmf):
    """Log of the mean duration log μ_j = log Σ_d d p_j(d), shape (K,)."""
    log_pmf = np.asarray(log_pmf, dtype=np.float64)
    d = np.arange(1, log_pmf.shape[0] + 1, dtype=np.float64)
    return special.logsumexp(log_pmf + np.log(d)[:, None], axis=0)


def duration_tables(log_pmf, censoring):
    r"""Duration log-potentials of the first, middle, last and only segment of a sequence.

    Parameters
    ----------
    log_pmf : array-like of float64, shape (D, K)
        ``log_pmf[d - 1, j] = log p_j(d)`` (rows sum to one in linear space over d).
    censoring : {"none", "right", "both"}
        Boundary conditions (module docstring; Yu 2010 §2.2.1).

    Returns
    -------
    dict of str -> ndarray of float64, shape (D, K)
        Keys ``"first"`` (segment starts at the first observation and ends before the last),
        ``"middle"``, ``"last"`` (starts after the first observation and ends at the last) and
        ``"single"`` (covers the whole sequence). Log space; -inf where impossible. An absorbing state
        (a column without mass) is -inf but where its survivor S = 1 enters (0).

        ========  ===========  ==========  ===================
        key       "none"       "right"     "both"
        ========  ===========  ==========  ===================
        first     log p        log p       log S - log μ
        middle    log p        log p       log p
        last      log p        log S       log S
        single    log p        log S       log Σ_{d'>=d} S(d') - log μ
        ========  ===========  ==========  ===================

    Raises
    ------
    ValueError
        An absorbing state under ``censoring="both"`` (:func:`refuse_absorbing`).

    Notes
    -----
    Cost: time and memory O(D·K).
    """
    lp = np.asarray(log_pmf, dtype=np.float64)
    refuse_absorbing(lp, censoring)
    if censoring == "none":
        return {"first": lp, "middle": lp, "last": lp, "single": lp}
    ls = log_survivor(lp)
    if censoring == "right":
        return {"first": lp, "middle": lp, "last": ls, "single": ls}
    if censoring == "both":
        lm = log_mean(lp)
        return {"first": ls - lm, "middle": lp, "last": ls, "single": log_tail_sum(ls) - lm}
    raise ValueError(f"`censoring` must be one of {CENSORING}; got {censoring!r}")


def complete_counts(table_counts, log_pmf, censoring):
    r"""E-step completion of censored segments: expected complete-duration counts for the M-step.

    Parameters
    ----------
    table_counts : dict of str -> array-like of float64, shape (D, K)
        Expected number of segments of *observed* length d in state j, split by the duration table
        that scored them (keys ``"first"``, ``"middle"``, ``"last"``, ``"single"`` as in
        :func:`duration_tables`; missing keys count as zero).
    log_pmf : array-like of float64, shape (D, K)
        Current duration log-pmf (the parameters of the E-step).
    censoring : {"none", "right", "both"}

    Returns
    -------
    counts : ndarray of float64, shape (D, K)
        Expected number of segments of complete duration d: uncensored counts as they are; a
        right-censored segment of observed length d is spread over d' >= d with weights
        p(d') / S(d); a left-censored first segment of residual d over d' >= d with p(d') / S(d); a
        doubly-censored segment of observed length d over d' >= d with (d' - d + 1) p(d') / (μ R(d)).
    left_weight : ndarray of float64, shape (K,)
        Expected number of left-censored segments F (each adds -log μ to the complete-data
        log-likelihood); zeros unless ``censoring == "both"``.

    Notes
    -----
    The completion is the E-step of EM over an augmented model whose latent variables include the
    unobserved total duration of censored segments (Guédon 2003, "Estimating hidden semi-Markov
    chains from discrete sequences", J. Comput. Graph. Stat. 12(3), §3), so an exact or improving
    M-step on (counts, left_weight) never decreases the observed-data likelihood.
    Cost: time and memory O(D·K).
    """
    lp = np.asarray(log_pmf, dtype=np.float64)
    D, K = lp.shape

    def get(key):
        v = table_counts.get(key)
        return np.zeros((D, K)) if v is None else np.asarray(v, dtype=np.float64)

    first, middle, last, single = get("first"), get("middle"), get("last"), get("single")
    left = np.zeros(K)
    if censoring == "none":
        return first + middle + last + single, left
    if censoring not in CENSORING:
        raise ValueError(f"`censoring` must be one of {CENSORING}; got {censoring!r}")
    p = np.exp(lp)
    ls = log_survivor(lp)
    counts = middle.copy()
    right = last + (single if censoring == "right" else 0.0)
    if censoring == "right":
        counts += first
    else:
        right = right + first  # left-censored residual d: total d' >= d with weight p(d') / S(d)
        left = first.sum(axis=0) + single.sum(axis=0)
    counts += _times(p, np.cumsum(_safe_ratio(right, ls), axis=0))
    if censoring == "both" and np.any(single > 0):
        lm = log_mean(lp)
        lr = log_tail_sum(ls) - lm  # log R(d)
        c = _safe_ratio(single, lr + lm)  # c_d / (μ R(d))
        d = np.arange(1, D + 1, dtype=np.float64)[:, None]
        a = np.cumsum(c, axis=0)
        b = np.cumsum(c * d, axis=0)
        counts += _times(p, np.maximum((d + 1.0) * a - b, 0.0))
    return counts, left


def _safe_ratio(weights, log_den):
    """weights / exp(log_den), with 0 where weights == 0 (even when the denominator is 0)."""
    out = np.zeros_like(weights)
    # a positive weight on an impossible event (denominator 0) is a rounding remnant: dropped
    nz = (weights > 0) & (log_den > _NEG_INF)
    with np.errstate(over="ignore"):
        out[nz] = np.exp(np.log(weights[nz]) - log_den[nz])
    out[~np.isfinite(out)] = 0.0
    return out


def _times(p, x):
    """p · x with 0 · inf = 0 (p = 0 where a duration is impossible)."""
    with np.errstate(invalid="ignore"):
        return np.where(p > 0, p * x, 0.0)
