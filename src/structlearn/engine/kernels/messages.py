"""Numba message passing on factor graphs of any arity: loopy BP and tree-reweighted BP (one engine).

Arrays in, arrays out; no validation. Conventions (packed batch of B graphs, V variables, F factors,
P = Σ_f arity(f) factor–variable slots):

- ``var_pot``: (V, K) log-potentials of the variables themselves (0 when every potential is a
  factor), K = the largest cardinality; ``card``: (V,) cardinalities (labels ``card[v]..K-1`` are
  padding, never read).
- ``fptr`` (F + 1,): the slots of factor f are ``fptr[f]..fptr[f+1]-1``; ``fvar`` (P,) the GLOBAL
  variable of every slot; ``fstride`` (P,) its stride in the factor's table; ``slot_fac`` (P,) the
  factor of every slot.
- ``tab`` (T,) flat log-tables; factor f scores ``x`` with ``tab[toff[f] + Σ_p x[fvar[p]]·fstride[p]]``
  (C order, strides, tables may be shared between factors).
- ``vptr`` (V + 1,), ``vslot`` (P,): the slots of variable v are ``vslot[vptr[v]:vptr[v+1]]`` (CSR).
- ``rho`` (F,) factor appearance weights in (0, 1]; ρ ≡ 1 is ordinary BP.
- ``fac_off`` (B + 1,): factors of graph b; ``forder`` (F,): a permutation of the factors that keeps
  every graph's factors in its range (the sequential sweep order).
- ``msg`` (P, K): log-message from the factor of slot p to its variable, over that variable's labels.

Recurrence (Wainwright, Jaakkola & Willsky 2005, eq. 39, on factor graphs as in libDAI's TRWBP; with
ρ ≡ 1 Kschischang, Frey & Loeliger 2001's sum-product), log domain, semiring ⊕ (logaddexp or max)::

    n_{j→I}(x_j) = θ_j(x_j) + Σ_{J ∋ j} ρ_J m_{J→j}(x_j) − m_{I→j}(x_j)          (cavity)
    m_{I→i}(x_i) = ⊕_{x_I \\ x_i} θ_I(x_I) / ρ_I + Σ_{j ∈ I \\ i} n_{j→I}(x_j)       (then normalised)
    log b_i ∝ θ_i + Σ_{I ∋ i} ρ_I m_{I→i},   log b_I ∝ θ_I / ρ_I + Σ_{j ∈ I} n_{j→I}

For ρ_I = 1 the term of m_{I→j} cancels and is skipped. A message that is 0 for a label makes the
cavity -inf there, so ``-inf - (-inf)`` is never formed.

log Z from the beliefs (the negative Bethe free energy for ρ ≡ 1, Yedidia, Freeman & Weiss 2005; the
TRW upper bound, WJW 2005 eq. 25, at a fixed point otherwise)::

    log Z ≈ Σ_I [⟨b_I, θ_I⟩ + ρ_I H(b_I)] + Σ_i [⟨b_i, θ_i⟩ + (1 − Σ_{I ∋ i} ρ_I) H(b_i)]

Messages are normalised to log-sum-exp 0; damping is geometric, ``log m ← (1−α) log m_new + α log
m_old``; the residual is max |m_new − m_old| in linear space. The unit of every schedule is a factor
(all its outgoing messages from the same cavities). ``PARALLEL``: every factor from the previous
iteration's messages; ``SEQUENTIAL``: factors in ``forder``, then in reverse, each from the newest
messages (with ``forder`` leaves-to-root, one iteration is exact on a forest); ``RESIDUAL`` (Elidan,
McGraw & Koller 2006): always the factor whose pending update moves a message most; one iteration is
F factor updates.
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import MAX
from ._common import serial_twin

PARALLEL = 0
SEQUENTIAL = 1
RESIDUAL = 2
SCHEDULES = {"parallel": PARALLEL, "sequential": SEQUENTIAL, "residual": RESIDUAL}


@njit(cache=True, inline="always")
def _next_entry(xs, idx, a, p0, fstride, card, fvar):
    """Step a factor's assignment ``xs`` (a variables, the last changing fastest) and its flat table
    index ``idx`` to the next entry; returns (idx, True) after the last one (``xs`` back to zeros)."""
    j = a - 1
    while j >= 0:
        xs[j] += 1
        idx += fstride[p0 + j]
        if xs[j] < card[fvar[p0 + j]]:
            return idx, False
        idx -= xs[j] * fstride[p0 + j]
        xs[j] = 0
        j -= 1
    return idx, True


@njit(cache=True, inline="always")
def run_outputs(fptr, B):
    """The largest factor arity (at least 1) and the per-graph outputs of an iterative run over B graphs:
    ``converged`` (B,) bool, ``n_iter`` (B,) int64, ``max_residual`` (B,) float64 (zeros)."""
    amax = 1
    for f in range(fptr.shape[0] - 1):
        amax = max(amax, fptr[f + 1] - fptr[f])
    return amax, np.zeros(B, dtype=np.bool_), np.zeros(B, dtype=np.int64), np.zeros(B, dtype=np.float64)


@njit(cache=True, inline="always")
def next_assignment(xs, a, p0, card, fvar):
    """Step a factor's assignment ``xs`` (a variables, the last changing fastest) to the next one; True
    after the last one (``xs`` back to zeros)."""
    j = a - 1
    while j >= 0:
        xs[j] += 1
        if xs[j] < card[fvar[p0 + j]]:
            return False
        xs[j] = 0
        j -= 1
    return True


@njit(cache=True)
def _cavity(v, skip, var_pot, card, vptr, vslot, slot_fac, msg, rho, out):
    """n_{v→I} into out[:card[v]]; ``skip`` is the slot of I at v (-1: the full belief of v)."""
    k = card[v]
    for x in range(k):
        out[x] = var_pot[v, x]
    for q in range(vptr[v], vptr[v + 1]):
        p = vslot[q]
        c = rho[slot_fac[p]]
        if p == skip:
            c = c - 1.0
        if c == 0.0:
            continue
        for x in range(k):
            if out[x] == -np.inf:
                continue
            m = msg[p, x]
            if m == -np.inf:
                out[x] = -np.inf
            else:
                out[x] += c * m


@njit(cache=True, inline="always")
def _normalise(x, k):
    """Shift x[:k] to log-sum-exp 0 (left all -inf when it is all -inf)."""
    m = -np.inf
    for i in range(k):
        if x[i] > m:
            m = x[i]
    if m == -np.inf:
        return
    s = 0.0
    for i in range(k):
        if x[i] > -np.inf:
            s += math.exp(x[i] - m)
    z = m + math.log(s)
    for i in range(k):
        x[i] -= z


@njit(cache=True)
def _factor_cavities(f, var_pot, card, fptr, fvar, vptr, vslot, slot_fac, msg, rho, cav):
    """Cavities n_{j→f} of every slot of f into cav[p - fptr[f], :]."""
    for p in range(fptr[f], fptr[f + 1]):
        _cavity(fvar[p], p, var_pot, card, vptr, vslot, slot_fac, msg, rho, cav[p - fptr[f]])


@njit(cache=True)
def _factor_out(f, target, card, fptr, fvar, fstride, tab, toff, rho, cav, semiring, xs, acc, out):
    """m_{f→fvar[target]} (unnormalised) into out[:card]: one pass over f's table (odometer ``xs``).

    Sum-product accumulates an online log-sum-exp per label (running max and scaled sum)."""
    p0, p1 = fptr[f], fptr[f + 1]
    a = p1 - p0
    t = target - p0
    kt = card[fvar[target]]
    inv = 1.0 / rho[f]
    for x in range(kt):
        out[x] = -np.inf
        acc[x] = 0.0
    for j in range(a):
        xs[j] = 0
    idx = toff[f]
    while True:
        th = tab[idx]
        v = -np.inf
        if th > -np.inf:
            v = th * inv
            for j in range(a):
                if j != t:
                    c = cav[j, xs[j]]
                    if c == -np.inf:
                        v = -np.inf
                        break
                    v += c
        if v > -np.inf:
            xt = xs[t]
            m = out[xt]
            if semiring == MAX:
                if v > m:
                    out[xt] = v
            elif v > m:
                acc[xt] = acc[xt] * math.exp(m - v) + 1.0 if m > -np.inf else 1.0
                out[xt] = v
            else:
                acc[xt] += math.exp(v - m)
        # odometer: last slot fastest
        idx, wrapped = _next_entry(xs, idx, a, p0, fstride, card, fvar)
        if wrapped:
            break
    if semiring != MAX:
        for x in range(kt):
            if out[x] > -np.inf:
                out[x] += math.log(acc[x])


@njit(cache=True)
def linear_tables(card, fptr, fvar, fstride, tab, toff, boff, rho):
    """exp(θ_f / ρ_f − max θ_f / ρ_f) of every factor, compact C order (boff layout), and whether the
    factor's finite entries span less than 600 nats (``eok``, F,): only those use the linear-space
    sum-product update (no entry underflows)."""
    F = fptr.shape[0] - 1
    amax = 1
    for f in range(F):
        amax = max(amax, fptr[f + 1] - fptr[f])
    etab = np.zeros(boff[-1])
    eok = np.zeros(F, dtype=np.bool_)
    xs = np.empty(amax, dtype=np.int64)
    for f in range(F):
        p0 = fptr[f]
        a = fptr[f + 1] - p0
        inv = 1.0 / rho[f]
        hi, lo = -np.inf, np.inf
        for rep in range(2):
            for j in range(a):
                xs[j] = 0
            idx = toff[f]
            o = boff[f]
            while True:
                th = tab[idx]
                if th > -np.inf:
                    v = th * inv
                    if rep == 0:
                        hi = max(hi, v)
                        lo = min(lo, v)
                    else:
                        etab[o] = math.exp(v - hi)
                o += 1
                idx, wrapped = _next_entry(xs, idx, a, p0, fstride, card, fvar)
                if wrapped:
                    break
            if hi == -np.inf:
                break
        eok[f] = hi > -np.inf and hi - lo < 600.0
    return etab, eok


@njit(cache=True)
def _factor_out_linear(f, target, card, fptr, fvar, etab, boff, ecav, xs, out):
    """Sum-product m_{f→fvar[target]} in linear space: out[x] = log Σ etab · Π_{j≠t} ecav[j, x_j] (up to a
    constant, removed by the normalisation). Returns False when some label gets 0 (the caller then
    recomputes in the log domain, which tells a true zero from an underflow)."""
    p0, p1 = fptr[f], fptr[f + 1]
    a = p1 - p0
    t = target - p0
    kt = card[fvar[target]]
    for x in range(kt):
        out[x] = 0.0
    for j in range(a):
        xs[j] = 0
    if a == 2:                                   # pairwise: a plain double loop
        k0, k1 = card[fvar[p0]], card[fvar[p0 + 1]]
        o = boff[f]
        for i in range(k0):
            for j in range(k1):
                w = etab[o + i * k1 + j]
                if t == 0:
                    out[i] += w * ecav[1, j]
                else:
                    out[j] += w * ecav[0, i]
    else:
        o = boff[f]
        while True:
            w = etab[o]
            if w > 0.0:
                for j in range(a):
                    if j != t:
                        w *= ecav[j, xs[j]]
                out[xs[t]] += w
            o += 1
            if next_assignment(xs, a, p0, card, fvar):
                break
    for x in range(kt):
        if out[x] <= 0.0:
            return False
        out[x] = math.log(out[x])
    return True


@njit(cache=True)
def _update_factor(f, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho, msg,
                   semiring, damping, cav, xs, new, etab, boff, eok, ecav):
    """New (normalised, damped) messages of every slot of f into new[p - fptr[f], :]; the residual.

    Sum-product on a factor whose table spans < 600 nats (``eok``) runs in linear space: the cavities
    are exponentiated once (a·K exps instead of a·|table|), see :func:`_factor_out_linear`."""
    _factor_cavities(f, var_pot, card, fptr, fvar, vptr, vslot, slot_fac, msg, rho, cav)
    lin = semiring != MAX and eok[f]
    if lin:
        for j in range(fptr[f + 1] - fptr[f]):
            k = card[fvar[fptr[f] + j]]
            cm = -np.inf
            for x in range(k):
                cm = max(cm, cav[j, x])
            for x in range(k):
                ecav[j, x] = math.exp(cav[j, x] - cm) if cav[j, x] > -np.inf else 0.0
    res = 0.0
    for p in range(fptr[f], fptr[f + 1]):
        row = new[p - fptr[f]]
        k = card[fvar[p]]
        if not (lin and _factor_out_linear(f, p, card, fptr, fvar, etab, boff, ecav, xs, row)):
            _factor_out(f, p, card, fptr, fvar, fstride, tab, toff, rho, cav, semiring, xs,
                        cav[cav.shape[0] - 1], row)
        _normalise(row, k)
        if damping > 0.0:
            for x in range(k):
                a, b = row[x], msg[p, x]
                row[x] = -np.inf if (a == -np.inf or b == -np.inf) else (1.0 - damping) * a + damping * b
            _normalise(row, k)
        for x in range(k):
            a, b = row[x], msg[p, x]
            r = abs((math.exp(a) if a > -np.inf else 0.0) - (math.exp(b) if b > -np.inf else 0.0))
            if r > res:
                res = r
    return res


@njit(cache=True)
def _commit(f, fptr, fvar, card, new, msg):
    for p in range(fptr[f], fptr[f + 1]):
        for x in range(card[fvar[p]]):
            msg[p, x] = new[p - fptr[f], x]


@njit(cache=True)
def _one_graph(b, amax, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho, fac_off,
               forder, msg, semiring, schedule, damping, max_iter, tol, etab, boff, eok, converged, n_iter,
               max_res):
    """BP/TRW on graph b (the body of :func:`message_passing`)."""
    K = var_pot.shape[1]
    f0, f1 = fac_off[b], fac_off[b + 1]
    M = f1 - f0
    if M == 0:
        converged[b] = True
        return
    cav = np.empty((amax + 1, K))  # the last row: _factor_out's scratch
    ecav = np.empty((amax, K))
    xs = np.empty(amax, dtype=np.int64)
    new = np.empty((amax, K))
    if schedule == RESIDUAL:
        c, n_up, res = _residual(f0, f1, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot,
                                 slot_fac, rho, msg, semiring, damping, max_iter, tol, cav, xs, amax,
                                 etab, boff, eok, ecav)
        converged[b] = c
        n_iter[b] = (n_up + M - 1) // M
        max_res[b] = res
        return
    p0, p1 = fptr[f0], fptr[f1]
    buf = np.empty((p1 - p0, K)) if schedule == PARALLEL else np.empty((0, K))
    it = 0
    res = np.inf
    while it < max_iter:
        it += 1
        res = 0.0
        for j in range(2 * M if schedule == SEQUENTIAL else M):
            if schedule == PARALLEL:
                f = f0 + j
            elif j < M:
                f = forder[f0 + j]            # forward sweep in forder …
            else:
                f = forder[f1 - 1 - (j - M)]  # … then backward
            r = _update_factor(f, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot,
                               slot_fac, rho, msg, semiring, damping, cav, xs, new, etab, boff, eok,
                               ecav)
            if r > res:
                res = r
            if schedule == PARALLEL:
                for p in range(fptr[f], fptr[f + 1]):
                    for x in range(K):
                        buf[p - p0, x] = new[p - fptr[f], x] if x < card[fvar[p]] else -np.inf
            else:
                _commit(f, fptr, fvar, card, new, msg)
        if schedule == PARALLEL:
            for p in range(p0, p1):
                for x in range(K):
                    msg[p, x] = buf[p - p0, x]
        if res < tol:
            converged[b] = True
            break
    n_iter[b] = it
    max_res[b] = res


@njit(cache=True, parallel=True)
def message_passing(var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho, fac_off,
                    forder, msg, semiring, schedule, damping, max_iter, tol, etab, boff, eok):
    """Run BP/TRW on every graph; ``msg`` (P, K) holds the initial messages and is updated in place.

    ``etab``, ``eok`` from :func:`linear_tables` (with the same ρ) over the compact layout ``boff``.

    Returns ``converged`` (B,) bool, ``n_iter`` (B,) int64 and ``max_residual`` (B,) float64 (of the
    last iteration). Parallel over graphs. Time per iteration O(Σ_f arity(f)·(|table_f| +
    Σ_{v ∈ f} deg(v)·K)), memory O(P·K).
    """
    amax, converged, n_iter, max_res = run_outputs(fptr, fac_off.shape[0] - 1)
    for b in prange(fac_off.shape[0] - 1):
        _one_graph(b, amax, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho, fac_off, forder,
                   msg, semiring, schedule, damping, max_iter, tol, etab, boff, eok, converged, n_iter, max_res)
    return converged, n_iter, max_res


message_passing_serial = serial_twin(message_passing, "message_passing_serial",
                                     ":func:`message_passing` without threads (for one graph: no thread "
                                     "start-up and barrier cost).")


@njit(cache=True)
def _seg_set(seg, P, j, val):
    """Set leaf j of the max segment tree ``seg`` (2P,) and update its ancestors."""
    i = P + j
    seg[i] = val
    i >>= 1
    while i >= 1:
        a, c = seg[2 * i], seg[2 * i + 1]
        seg[i] = a if a >= c else c
        i >>= 1


@njit(cache=True)
def _residual(f0, f1, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho, msg,
              semiring, damping, max_iter, tol, cav, xs, amax, etab, boff, eok, ecav):
    """Residual BP (Elidan, McGraw & Koller 2006) over the factors f0..f1-1 of one graph.

    Every factor keeps its pending messages and their largest residual in a max segment tree
    (O(log F) per change); the largest is committed, then every factor sharing a variable with it is
    recomputed. Stops when every pending residual is below ``tol`` or after ``max_iter · F`` commits.
    Returns (converged, number of commits, largest pending residual).
    """
    K = msg.shape[1]
    M = f1 - f0
    P = 1
    while P < M:
        P *= 2
    seg = np.full(2 * P, -1.0)
    p0 = fptr[f0]
    pend = np.empty((fptr[f1] - p0, K))
    new = np.empty((amax, K))
    for f in range(f0, f1):
        r = _update_factor(f, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot, slot_fac, rho,
                           msg, semiring, damping, cav, xs, new, etab, boff, eok, ecav)
        for p in range(fptr[f], fptr[f + 1]):
            for x in range(K):
                pend[p - p0, x] = new[p - fptr[f], x]
        seg[P + f - f0] = r
    for i in range(P - 1, 0, -1):
        a, c = seg[2 * i], seg[2 * i + 1]
        seg[i] = a if a >= c else c
    count = 0
    limit = max_iter * M
    while seg[1] >= tol and count < limit:
        i = 1
        while i < P:
            i = 2 * i if seg[2 * i] >= seg[2 * i + 1] else 2 * i + 1
        f = f0 + i - P
        for p in range(fptr[f], fptr[f + 1]):
            for x in range(card[fvar[p]]):
                msg[p, x] = pend[p - p0, x]
        _seg_set(seg, P, f - f0, 0.0)
        count += 1
        # the factors at f's variables (f included when ρ_f < 1) read the committed messages
        for p in range(fptr[f], fptr[f + 1]):
            v = fvar[p]
            for q in range(vptr[v], vptr[v + 1]):
                g = slot_fac[vslot[q]]
                if g == f and rho[f] == 1.0:
                    continue
                r = _update_factor(g, var_pot, card, fptr, fvar, fstride, tab, toff, vptr, vslot,
                                   slot_fac, rho, msg, semiring, damping, cav, xs, new, etab, boff, eok,
                                   ecav)
                for p2 in range(fptr[g], fptr[g + 1]):
                    for x in range(K):
                        pend[p2 - p0, x] = new[p2 - fptr[g], x]
                _seg_set(seg, P, g - f0, r)
    return seg[1] < tol, count, max(seg[1], 0.0)
