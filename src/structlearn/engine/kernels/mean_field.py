"""Numba naive mean field on factor graphs of any arity (the layout of :mod:`structlearn.engine.kernels.messages`).

Coordinate ascent on the fully factorised q(x) = Π_i q_i(x_i) (Wainwright & Jordan 2008, §5.3; Koller &
Friedman 2009, Algorithm 11.7), one variable at a time in index order::

    log q_i(x_i) ∝ θ_i(x_i) + Σ_{I ∋ i} Σ_{x_I \\ x_i} θ_I(x_I) Π_{j ∈ I \\ i} q_j(x_j)

Every update can only raise the evidence lower bound

    L(q) = Σ_I E_q[θ_I] + Σ_i (E_{q_i}[θ_i] + H(q_i)) ≤ log Z,

so the sweeps are monotone. Configurations of zero weight under q are skipped (0 · (-inf) = 0); a -inf
entry of positive weight makes the label impossible (q_i(x_i) = 0). Converged when a sweep changes no
q_i(x_i) by ``tol`` or more.
"""
import math

import numpy as np
from numba import njit, prange

from ._common import serial_twin
from .messages import _next_entry, run_outputs


@njit(cache=True)
def _expected(f, target, card, fptr, fvar, fstride, tab, toff, q, xs, out):
    """out[x] += E_{q_{f \\ target}}[θ_f | x_target = x] (out[x] = -inf when a -inf entry has weight)."""
    p0, p1 = fptr[f], fptr[f + 1]
    a = p1 - p0
    t = target - p0
    for j in range(a):
        xs[j] = 0
    idx = toff[f]
    while True:
        w = 1.0
        for j in range(a):
            if j != t:
                w *= q[fvar[p0 + j], xs[j]]
        if w > 0.0:
            x = xs[t]
            th = tab[idx]
            if th == -np.inf:
                out[x] = -np.inf
            elif out[x] > -np.inf:
                out[x] += w * th
        idx, wrapped = _next_entry(xs, idx, a, p0, fstride, card, fvar)
        if wrapped:
            break


@njit(cache=True)
def _mf_graph(b, amax, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, var_off, fac_off,
              q, max_iter, tol, converged, n_iter, max_res, elbo):
    """Mean field on graph b (the body of :func:`mean_field`)."""
    K = var_pot.shape[1]
    xs = np.empty(amax, dtype=np.int64)
    s = np.empty(K)
    it = 0
    res = np.inf
    while it < max_iter:
        it += 1
        res = 0.0
        for v in range(var_off[b], var_off[b + 1]):
            k = card[v]
            for x in range(k):
                s[x] = var_pot[v, x]
            for r in range(vptr[v], vptr[v + 1]):
                p = vslot[r]
                _expected(slot_fac[p], p, card, fptr, fvar, fstride, tab, toff, q, xs, s)
            m = -np.inf
            for x in range(k):
                if s[x] > m:
                    m = s[x]
            if m == -np.inf:            # every label impossible: keep q_v, the bound is -inf
                continue
            z = 0.0
            for x in range(k):
                s[x] = math.exp(s[x] - m) if s[x] > -np.inf else 0.0
                z += s[x]
            for x in range(k):
                nq = s[x] / z
                d = abs(nq - q[v, x])
                if d > res:
                    res = d
                q[v, x] = nq
        if res < tol:
            converged[b] = True
            break
    n_iter[b] = it
    max_res[b] = res
    # L(q) = Σ_v (E[θ_v] + H(q_v)) + Σ_f E[θ_f]
    total = 0.0
    for v in range(var_off[b], var_off[b + 1]):
        for x in range(card[v]):
            w = q[v, x]
            if w > 0.0:
                total += w * (var_pot[v, x] - math.log(w))
    for f in range(fac_off[b], fac_off[b + 1]):
        p0, p1 = fptr[f], fptr[f + 1]
        a = p1 - p0
        for j in range(a):
            xs[j] = 0
        idx = toff[f]
        while True:
            w = 1.0
            for j in range(a):
                w *= q[fvar[p0 + j], xs[j]]
            if w > 0.0:
                total += w * tab[idx]
            idx, wrapped = _next_entry(xs, idx, a, p0, fstride, card, fvar)
            if wrapped:
                break
    elbo[b] = total


@njit(cache=True, parallel=True)
def mean_field(var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, var_off, fac_off, q,
               max_iter, tol):
    """Run naive mean field on every graph; ``q`` (V, K) linear-space initial marginals, updated in place.

    Returns ``converged`` (B,) bool, ``n_iter`` (B,) int64, ``max_residual`` (B,) float64 and ``elbo``
    (B,) float64, the lower bound L(q) on log Z at the final q (-inf when q puts weight on a forbidden
    configuration). Parallel over graphs; time per sweep O(Σ_f arity(f)·|table_f|).
    """
    amax, converged, n_iter, max_res = run_outputs(fptr, var_off.shape[0] - 1)
    elbo = np.zeros(var_off.shape[0] - 1, dtype=np.float64)
    for b in prange(var_off.shape[0] - 1):
        _mf_graph(b, amax, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, var_off, fac_off, q,
                  max_iter, tol, converged, n_iter, max_res, elbo)
    return converged, n_iter, max_res, elbo


mean_field_serial = serial_twin(mean_field, "mean_field_serial",
                                ":func:`mean_field` without threads (one graph: no thread start-up cost).")
