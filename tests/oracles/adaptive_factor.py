"""Oracles of the adaptive-factor HSMM pieces (import nothing from structlearn).

``stretched_pmf``: a duration pmf stretched by κ, by the piecewise-linear CDF written point by point.
``local_level_loglik``: the log-likelihood of measurements z_n = x_n + e_n of a Gaussian random walk
x_n = x_{n-1} + w_n (x_0 = 0, w ~ N(0, q), e_n ~ N(0, r_n)) as one dense multivariate normal density:
Cov(z_n, z_m) = q·min(n, m) + r_n [n = m] (n, m counted from 1 over every segment, measured or not).
"""
import math

import numpy as np


def _cdf_at(p, x):
    """F(x) of the pmf p over 1..D, linear between the integers, F(0) = 0, F(x >= D) = 1·Σp."""
    D = len(p)
    if x <= 0:
        return 0.0
    if x >= D:
        return float(sum(p))
    lo = int(math.floor(x))
    below = float(sum(p[:lo]))
    return below + (x - lo) * float(p[lo])


def stretched_pmf(p, kappa):
    """[F(d/κ) - F((d-1)/κ)] for d = 1..D, normalised."""
    D = len(p)
    out = [_cdf_at(p, d / kappa) - _cdf_at(p, (d - 1) / kappa) for d in range(1, D + 1)]
    tot = sum(out)
    return [v / tot for v in out]


def local_level_loglik(z, r, q):
    """Σ over sequences of log N(z_obs; 0, Σ_obs) (NaN z: unmeasured segment)."""
    total = 0.0
    for zs, rs in zip(z, r):
        idx = [i for i, v in enumerate(zs) if v == v]
        if not idx:
            continue
        n = len(idx)
        cov = np.empty((n, n))
        for a, i in enumerate(idx):
            for b, j in enumerate(idx):
                cov[a, b] = q * (min(i, j) + 1) + (rs[i] if i == j else 0.0)
        y = np.array([zs[i] for i in idx])
        sign, logdet = np.linalg.slogdet(cov)
        total += -0.5 * (n * math.log(2 * math.pi) + logdet + float(y @ np.linalg.solve(cov, y)))
    return total
