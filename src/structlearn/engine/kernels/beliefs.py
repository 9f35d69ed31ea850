"""Numba beliefs, log Z estimates and MAP decoding from the messages of :mod:`structlearn.engine.kernels.messages`
(same array layout; arrays in, arrays out).

Beliefs: ``log b_i ∝ θ_i + Σ_{I ∋ i} ρ_I m_{I→i}``, ``log b_I ∝ θ_I / ρ_I + Σ_{j ∈ I} n_{j→I}``; log Z
from them (Bethe for ρ ≡ 1, the TRW bound otherwise; see :mod:`structlearn.engine.kernels.messages`). Decoding
walks the factor graph breadth first so that ties are resolved consistently (libDAI's ``findMaximum``).
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import MAX
from ._common import serial_twin
from .messages import _cavity, _factor_cavities, _next_entry, _normalise, next_assignment, run_outputs


@njit(cache=True)
def _beliefs_graph(b, amax, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho,
                   var_off, fac_off, boff, msg, semiring, log_bv, log_bf, log_z):
    """Beliefs and log Z of graph b (the body of :func:`beliefs`)."""
    K = var_pot.shape[1]
    cav = np.empty((amax, K))
    xs = np.empty(amax, dtype=np.int64)
    total = 0.0
    dead = False
    for v in range(var_off[b], var_off[b + 1]):
        k = card[v]
        row = log_bv[v]
        _cavity(v, -1, var_pot, card, vptr, vslot, slot_fac, msg, rho, row)
        _normalise(row, k)
        if row[0:k].max() == -np.inf:
            dead = True
            continue
        c = 1.0
        for q in range(vptr[v], vptr[v + 1]):
            c -= rho[slot_fac[vslot[q]]]
        for x in range(k):
            lb = row[x]
            if lb > -np.inf:
                total += math.exp(lb) * (var_pot[v, x] - c * lb)    # ⟨b, θ⟩ + c·H(b)
    for f in range(fac_off[b], fac_off[b + 1]):
        p0, p1 = fptr[f], fptr[f + 1]
        a = p1 - p0
        _factor_cavities(f, var_pot, card, fptr, fvar, vptr, vslot, slot_fac, msg, rho, cav)
        inv = 1.0 / rho[f]
        for j in range(a):
            xs[j] = 0
        idx = toff[f]
        o = boff[f]
        m = -np.inf
        while True:
            th = tab[idx]
            val = -np.inf
            if th > -np.inf:
                val = th * inv
                for j in range(a):
                    c = cav[j, xs[j]]
                    if c == -np.inf:
                        val = -np.inf
                        break
                    val += c
            log_bf[o] = val
            if val > m:
                m = val
            o += 1
            idx, wrapped = _next_entry(xs, idx, a, p0, fstride, card, fvar)
            if wrapped:
                break
        if m == -np.inf:
            dead = True
            continue
        s = 0.0
        for o in range(boff[f], boff[f + 1]):
            if log_bf[o] > -np.inf:
                s += math.exp(log_bf[o] - m)
        z = m + math.log(s)
        for o in range(boff[f], boff[f + 1]):
            log_bf[o] -= z
        # ⟨b_f, θ_f⟩ + ρ_f H(b_f) = Σ b (θ − ρ log b); θ = ρ (log b + z − Σ cav)
        for j in range(a):
            xs[j] = 0
        idx = toff[f]
        o = boff[f]
        r = rho[f]
        while True:
            lb = log_bf[o]
            if lb > -np.inf:
                total += math.exp(lb) * (tab[idx] - r * lb)
            o += 1
            idx, wrapped = _next_entry(xs, idx, a, p0, fstride, card, fvar)
            if wrapped:
                break
    log_z[b] = -np.inf if (dead or semiring == MAX) else total


@njit(cache=True, parallel=True)
def beliefs(var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho, var_off, fac_off,
            boff, msg, semiring):
    """Variable and factor log-beliefs (normalised to log-sum-exp 0) and the log Z estimate per graph.

    Returns ``log_bv`` (V, K) (-inf on padding), ``log_bf`` (boff[-1],) (factor f's belief in C order
    over its own cardinalities at ``boff[f]..boff[f+1]-1``) and ``log_z`` (B,) (the Bethe / TRW value;
    -inf when some belief is all 0; meaningless for max-product, where the caller scores the decoding).
    """
    B = var_off.shape[0] - 1
    amax = run_outputs(fptr, 0)[0]
    log_bv = np.full(var_pot.shape, -np.inf)
    log_bf = np.full(boff[-1], -np.inf)
    log_z = np.zeros(B)
    for b in prange(B):
        _beliefs_graph(b, amax, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho,
                       var_off, fac_off, boff, msg, semiring, log_bv, log_bf, log_z)
    return log_bv, log_bf, log_z


beliefs_serial = serial_twin(beliefs, "beliefs_serial", ":func:`beliefs` without threads.")


@njit(cache=True)
def decode(card, fptr, fvar, vptr, vslot, slot_fac, boff, var_off, log_bv, log_bf):
    """MAP decoding from (max-)beliefs that resolves ties consistently (libDAI's ``findMaximum``).

    Breadth first over the factor graph: the first unlabelled variable of a component takes the argmax
    of its belief; every factor reached next takes its best table entry that agrees with the labels
    already fixed, which labels its other variables. On a tree with exact max-marginals the result is a
    MAP labeling even under ties. Returns labels (V,) int64. Time O(Σ_f |table_f|).
    """
    V = card.shape[0]
    F = fptr.shape[0] - 1
    labels = np.full(V, -1, dtype=np.int64)
    done = np.zeros(F, dtype=np.bool_)
    queue = np.empty(V, dtype=np.int64)
    amax = 1
    for f in range(F):
        amax = max(amax, fptr[f + 1] - fptr[f])
    xs = np.empty(amax, dtype=np.int64)
    best = np.empty(amax, dtype=np.int64)
    for s in range(V):
        if labels[s] >= 0:
            continue
        k = card[s]
        arg = 0
        for x in range(1, k):
            if log_bv[s, x] > log_bv[s, arg]:
                arg = x
        labels[s] = arg
        head, tail = 0, 1
        queue[0] = s
        while head < tail:
            v = queue[head]
            head += 1
            for q in range(vptr[v], vptr[v + 1]):
                f = slot_fac[vslot[q]]
                if done[f]:
                    continue
                done[f] = True
                p0, p1 = fptr[f], fptr[f + 1]
                a = p1 - p0
                for j in range(a):
                    xs[j] = 0
                    best[j] = -1
                o = boff[f]
                top = -np.inf
                while True:
                    ok = True
                    for j in range(a):
                        lv = labels[fvar[p0 + j]]
                        if lv >= 0 and lv != xs[j]:
                            ok = False
                            break
                    if ok and (best[0] < 0 or log_bf[o] > top):
                        top = log_bf[o]
                        for j in range(a):
                            best[j] = xs[j]
                    o += 1
                    if next_assignment(xs, a, p0, card, fvar):
                        break
                for j in range(a):
                    w = fvar[p0 + j]
                    if labels[w] < 0:
                        labels[w] = best[j]
                        queue[tail] = w
                        tail += 1
    return labels
