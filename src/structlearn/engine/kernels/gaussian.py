"""Numba kernels of Gaussian log-densities (the emission densities of the hidden Markov models).

Arrays in, arrays out; no validation. Every (row, component) term is computed directly from the
difference to the mean (no expansion x² − 2xμ + μ², so no cancellation however far the data lie from
the origin)::

    diag: log N(x; μ_c, diag(1/p_c)) = log_norm[c] − ½ Σ_f (x_f − μ_cf)² p_cf
    full: log N(x; μ_c, Σ_c)        = log_norm[c] − ½ ‖(x − μ_c) P_c‖²,  P_c = L_c⁻ᵀ (Σ_c = L_c L_cᵀ)

with ``log_norm[c] = −½ (F log 2π + log |Σ_c|)``. The data come transposed, ``XT`` (F, N), so that the
innermost loop runs along the rows (contiguous, vectorised) and the results are (C, N). Time
O(N·C·F) (diag), O(N·C·F²) (full); memory O(N·C) for the output.
"""
import numpy as np
from numba import njit


@njit(cache=True, fastmath={"contract"})
def gaussian_diag_log_density(XT, means, prec, log_norm):
    """log-densities (C, N) of the columns of XT (F, N) under C diagonal Gaussians: means (C, F),
    precisions prec (C, F) (1 / variance), log_norm (C,)."""
    F, N = XT.shape
    C = means.shape[0]
    out = np.empty((C, N))
    for c in range(C):
        for n in range(N):
            out[c, n] = log_norm[c]
        for f in range(F):
            m = means[c, f]
            h = -0.5 * prec[c, f]
            for n in range(N):
                d = XT[f, n] - m
                out[c, n] += h * d * d
    return out


@njit(cache=True, fastmath={"contract"})
def gaussian_full_log_density(XT, means, prec_chol, log_norm):
    """log-densities (C, N) of the columns of XT (F, N) under C full Gaussians: means (C, F),
    prec_chol (C, F, F) the transposed inverse Cholesky factors P_c = L_c⁻ᵀ (so that (x − μ_c) P_c
    is whitened), log_norm (C,)."""
    F, N = XT.shape
    C = means.shape[0]
    out = np.empty((C, N))
    z = np.empty(N)
    for c in range(C):
        for n in range(N):
            out[c, n] = log_norm[c]
        for g in range(F):
            for n in range(N):
                z[n] = 0.0
            for f in range(F):
                m = means[c, f]
                p = prec_chol[c, f, g]
                for n in range(N):
                    z[n] += (XT[f, n] - m) * p
            for n in range(N):
                out[c, n] -= 0.5 * z[n] * z[n]
    return out
