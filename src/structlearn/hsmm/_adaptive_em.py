r"""Estimation of the random-walk variances of the adaptive-factor HSMM
(:mod:`structlearn.hsmm._adaptive_factor`; Yu 2010 §4 "adaptive factor HSMM").

With the base HSMM fitted, the training sequences are segmented (Viterbi) and each segment n gives a
measurement of each log factor with its variance (the same quantities the online filter uses with hard
segments): z_n = log d_n - E_j[log d], r_n = Var_j[log d] for log κ (not for a censored first /
last segment), and z_n = log(Σa / Σb), r_n from
:func:`~structlearn.hsmm._adaptive_factor.log_factor_measurement` for log η. The factor is a
Gaussian random walk observed with noise (a local-level model, Harvey 1989 "Forecasting, structural
time series models and the Kalman filter" §3.2), so the marginal likelihood
of the measurements is the product of the Kalman filter's innovation densities,

.. math:: \log L(q) = -\tfrac12 \sum_n \big[\log 2π S_n + (z_n - m_{n|n-1})^2 / S_n\big],
          \qquad S_n = P_{n|n-1} + r_n,

with m_{1|0} = 0, P_{1|0} = q, P_{n+1|n} = P_{n|n} + q — the recursion of
:class:`~structlearn.hsmm._adaptive_factor.FactorWalk` with certain segment ends. q̂ maximises it over
{0} ∪ a log grid refined by a bounded scalar search (:func:`estimate_walk_variance`).

The measurements are per sequence and the walk restarts at every sequence, so they are computed shard by
shard (:func:`shard_measurements`, the per-shard function of :mod:`structlearn.learning.shards`: in this
process, joblib processes or dask workers) and gathered on the caller (:func:`gather_measurements`); the
log-likelihood adds the sequences' terms exactly (``math.fsum``), so q̂ does not depend on the order in
which the shards come back. They are not additive sufficient statistics: log L(q) is a non-linear function
of them for every q, and the search evaluates it for some 50 values of q.
"""
import math

import numpy as np
from scipy import optimize

from ._adaptive_factor import emission_evidence, log_duration_moments, log_factor_measurement
from ..learning.shards import ShardStatistics

__all__ = ["segment_measurements", "walk_log_likelihood", "estimate_walk_variance", "shard_measurements",
           "gather_measurements"]


def segment_measurements(emission, log_pmf, X, segments, censoring, what):
    """Per-segment measurements (z, r) of one log factor, shape (n_seg,) each (NaN: no evidence).

    Parameters
    ----------
    emission : emission object
        The base emission law (``what="emission"``).
    log_pmf : ndarray of float64, shape (D, K)
        The base duration log-pmf (``what="duration"``).
    X : ndarray of float64, shape (T, F)
        One sequence.
    segments : ndarray of int64, shape (n_seg, 3)
        (start, end, state) rows, end inclusive, in time order.
    censoring : {"none", "right", "both"}
        Which durations are censored: the last segment unless ``"none"``, the first with ``"both"``.
    what : {"duration", "emission"}

    Time O(T·K·F + n_seg).
    """
    n = len(segments)
    z, r = np.full(n, np.nan), np.full(n, np.nan)
    if what == "duration":
        m, v = log_duration_moments(log_pmf)
        for i, (s, e, j) in enumerate(segments):
            if (i == n - 1 and censoring != "none") or (i == 0 and censoring == "both"):
                continue
            z[i], r[i] = np.log(e - s + 1) - m[j], v[j]
        return z, r
    K = log_pmf.shape[1]
    for i, (s, e, j) in enumerate(segments):
        w = np.zeros((e - s + 1, K))
        w[:, j] = 1.0
        a, b = emission_evidence(emission, X[s:e + 1], w)
        z[i], r[i] = log_factor_measurement(emission, float(a.sum()), float(b.sum()))
    return z, r


def walk_log_likelihood(measurements, walk_var):
    """log L(q) of the module docstring summed over sequences.

    Parameters
    ----------
    measurements : list of (z, r) pairs of ndarrays (n_seg,)
        One pair per sequence (NaN z: a segment without evidence, which only predicts).
    walk_var : float
        q >= 0.

    Returns
    -------
    float
        The log-likelihood (0 without finite measurements). Time O(total segments).
    """
    q = float(walk_var)
    totals = []
    for z, r in measurements:
        total = 0.0
        m, P = 0.0, q
        for zn, rn in zip(z, r):
            if np.isfinite(zn):
                S = P + rn
                total -= 0.5 * (np.log(2 * np.pi * S) + (zn - m) ** 2 / S)
                g = P / S
                m += g * (zn - m)
                P *= 1.0 - g
            P += q
        totals.append(total)
    return float(math.fsum(totals))  # exact sum: independent of the order of the sequences


def estimate_walk_variance(measurements, grid=None):
    """q̂ = argmax log L(q) over {0} ∪ ``grid``, refined by a bounded search around the best grid value.

    Parameters
    ----------
    measurements : list of (z, r) pairs
        As :func:`walk_log_likelihood`.
    grid : array-like of float, optional
        Positive candidates; default 40 values log-spaced in [1e-6, 10].

    Returns
    -------
    float
        q̂ >= 0 (0 when no positive value improves on the fixed factor, or without measurements).

    Time O(n_grid · total segments).
    """
    if not any(np.isfinite(z).any() for z, _ in measurements):
        return 0.0
    grid = np.logspace(-6, 1, 40) if grid is None else np.asarray(grid, dtype=np.float64)
    cand = np.r_[0.0, grid]
    ll = np.array([walk_log_likelihood(measurements, q) for q in cand])
    best = int(np.argmax(ll))
    if best == 0:
        return 0.0
    lo = np.log(cand[max(best - 1, 1)])
    hi = np.log(cand[min(best + 1, cand.size - 1)])
    if hi > lo:
        res = optimize.minimize_scalar(lambda u: -walk_log_likelihood(measurements, np.exp(u)),
                                       bounds=(lo, hi), method="bounded", options={"xatol": 1e-3})
        if -res.fun > ll[best]:
            return float(np.exp(res.x))
    return float(cand[best])


def shard_measurements(params, shard):
    """The measurements of one shard of sequences (module-level, picklable: the per-shard function of
    :mod:`structlearn.learning.shards`).

    Parameters
    ----------
    params : tuple (base, log_pmf, censoring, whats)
        ``base``: the fitted base model, any object with ``decode(X, lengths, return_segments=True)``
        returning the Viterbi segments of every sequence third (a
        :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`) and ``emission_``; ``log_pmf`` (D, K)
        its duration log-pmf; ``censoring`` as :func:`segment_measurements`; ``whats``: the factors to
        measure, a tuple of ``"duration"`` / ``"emission"``.
    shard : Shard
        Validated rows X (N, F) float64, lengths (B,), offsets (B + 1,); its ``allowed`` mask (partial
        labels of the base EM) is not used: the segments are the unconstrained Viterbi path, as ``fit``.

    Returns
    -------
    ShardStatistics
        ``stats`` empty and ``value`` 0 (nothing is additive); ``posteriors``: a dict, for each factor
        ``what`` in ``whats``, of ``what + "_z"`` and ``what + "_r"`` (n_seg,) float64, the measurements of
        all segments of the shard in sequence order (NaN: no evidence), and ``what + "_n"`` (B,) int64,
        the number of segments of each sequence — concatenated over shards by
        :func:`~structlearn.learning.shards.reduce_statistics`; :func:`gather_measurements` splits them
        back into sequences.

    Raises
    ------
    ValueError
        A sequence with zero likelihood under the base model (from ``decode``).

    Notes
    -----
    Time O(N·(D·K + K²)) (the Viterbi pass) + O(N·K·F) per factor; memory O(N·K).
    """
    base, log_pmf, censoring, whats = params
    X, lengths, offsets, _ = shard
    out = {}
    if whats:
        segs = base.decode(X, lengths, return_segments=True)[2]
    for what in whats:
        meas = [segment_measurements(base.emission_, log_pmf, X[offsets[b]:offsets[b + 1]], np.asarray(segs[b]),
                                     censoring, what) for b in range(len(lengths))]
        out[what + "_z"] = np.concatenate([z for z, _ in meas]) if meas else np.zeros(0)
        out[what + "_r"] = np.concatenate([r for _, r in meas]) if meas else np.zeros(0)
        out[what + "_n"] = np.array([z.shape[0] for z, _ in meas], dtype=np.int64)
    return ShardStatistics({}, 0.0, int(len(lengths)), out)


def gather_measurements(total, what):
    """The per-sequence measurements ``[(z, r), ...]`` (the input of :func:`estimate_walk_variance`) of
    factor ``what`` from the reduced :func:`shard_measurements` of all shards (``total.posteriors``)."""
    post = total.posteriors
    cuts = np.cumsum(post[what + "_n"])[:-1]
    return list(zip(np.split(post[what + "_z"], cuts), np.split(post[what + "_r"], cuts)))
