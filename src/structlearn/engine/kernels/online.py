"""Numba epochs of the online chain-CRF trainers (:mod:`structlearn.crf.online_trainers`).

Each epoch visits the sequences in the given order and, per sequence, builds its potentials from the
current weights and calls the inference engine's single-sequence kernels
(:func:`~structlearn.engine.kernels.chain.viterbi_seq`, :func:`~structlearn.engine.kernels.chain.marginals_seq`) — no
second copy of any recurrence lives here. Parameter layout as :mod:`structlearn.crf._potentials`.
"""
import math

import numpy as np
from numba import njit

from ._common import LIN_MIN, exp_shifted_into
from .chain import ChainSetup, chain_work, marginals_seq, viterbi_seq
from .features import seq_potentials

AP, PA, AROW = 0, 1, 2


@njit(cache=True)
def _boundary_potentials(w, scale, F, K, free, forb, fstart, fend, trans, start, end):
    """trans (1, K, K), start, end from the weights; non-free entries 0, forbidden ones -inf."""
    base = F
    for i in range(K):
        for j in range(K):
            idx = base + i * K + j
            trans[0, i, j] = -np.inf if forb[i, j] else (w[idx] * scale if free[idx] else 0.0)
    base = F + K * K
    for k in range(K):
        start[k] = -np.inf if fstart[k] else (w[base + k] * scale if free[base + k] else 0.0)
        end[k] = -np.inf if fend[k] else (w[base + K + k] * scale if free[base + K + k] else 0.0)


@njit(cache=True, inline="always")
def _touch(idx, coef, d, seen, touched, n_touched):
    """d[idx] += coef, recording idx once in touched; returns the new count."""
    if not seen[idx]:
        seen[idx] = True
        touched[n_touched] = idx
        n_touched += 1
    d[idx] += coef
    return n_touched


@njit(cache=True)
def _on_path(labels, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K, free, coef, coef_u,
             direct, w, u, d, seen, touched, n_touched):
    """Visit the features of the labeling ``labels[o:o+T]`` in CRFsuite's order (per position: its state
    features in item order, then the transition from the previous position; start/end weights, which
    CRFsuite lacks, last), each with its value v (1 for transitions).

    ``direct`` (AP): w[f] += coef · v and u[f] += coef_u · v at once; otherwise d[f] += coef · v, the
    touched indices recorded once, in the order of their first visit. Returns the touched count.
    """
    for r in range(o, o + T):
        lab = labels[r]
        for p in range(item_ptr[r], item_ptr[r + 1]):
            a = item_attr[p]
            val = item_val[p]
            for f in range(attr_ptr[a], attr_ptr[a + 1]):
                if feat_label[f] == lab:
                    if direct:
                        w[f] += coef * val
                        u[f] += coef_u * val
                    else:
                        n_touched = _touch(f, coef * val, d, seen, touched, n_touched)
        if r > o:
            idx = F + labels[r - 1] * K + lab
            if free[idx]:
                if direct:
                    w[idx] += coef
                    u[idx] += coef_u
                else:
                    n_touched = _touch(idx, coef, d, seen, touched, n_touched)
    for idx in (F + K * K + labels[o], F + K * K + K + labels[o + T - 1]):
        if free[idx]:
            if direct:
                w[idx] += coef
                u[idx] += coef_u
            else:
                n_touched = _touch(idx, coef, d, seen, touched, n_touched)
    return n_touched


@njit(cache=True)
def _path_score(labels, o, T, unary, trans, start, end):
    """Score of the labeling ``labels[o:o+T]``, summed in CRFsuite's order (that of its Viterbi recursion):
    start + unary[0], then per position + transition + unary, finally + end."""
    s = start[labels[o]] + unary[o, labels[o]]
    for r in range(o + 1, o + T):
        s += trans[0, labels[r - 1], labels[r]]
        s += unary[r, labels[r]]
    return s + end[labels[o + T - 1]]


@njit(cache=True)
def pa_step(ell, dd, pa_type, c):
    """Passive–aggressive step size τ for the hinge loss ℓ and ‖d‖² = dd (PA, PA-I, PA-II by
    pa_type)."""
    if dd == 0.0:
        return 0.0
    if pa_type == 0:
        return ell / dd
    if pa_type == 1:
        return min(c, ell / dd)
    return ell / (dd + 0.5 / c)


@njit(cache=True)
def large_margin_epoch(kind, w, u, sigma, counter, order, item_ptr, item_attr, item_val, offsets,
                       attr_ptr, feat_label, y, K, free, forb, fstart, fend, pa_type, c,
                       error_sensitive, gamma):
    """One epoch of AP / PA / AROW as CRFsuite's trainers run it. Returns (loss, number of token errors,
    updated counter).

    Per sequence (in ``order``): ŷ = the Viterbi labeling under the current weights (ties to the lowest
    label index); nothing changes when ŷ = y. Otherwise, with d = f(x, y) - f(x, ŷ) and the cost
    ℓ = s(ŷ) - s(y) + e (e = √(token errors) for PA with ``error_sensitive``, 1 without, the token errors
    for AROW):

    - AP: w += d (added feature by feature along both paths); loss += errors / length.
    - PA: w += τ d, τ = ℓ/‖d‖² (pa_type 0), min(c, ℓ/‖d‖²) (1) or ℓ/(‖d‖² + 1/(2c)) (2), τ = 0 when
      ‖d‖² = 0; loss += ℓ.
    - AROW (diagonal Σ = ``sigma``): w += α Σ d with α = ℓ / (γ + Σ_k d_k² Σ_k), then
      1/Σ_k += d_k² / γ; loss += ℓ.

    Averaging sums (AP, PA): u += counter · step, averaged weights w - u / counter; ``counter`` grows by
    one per sequence visited. Every sum runs in CRFsuite's order (:func:`_on_path`, :func:`_path_score`),
    so the weights agree with CRFsuite's to the last bit for the same instance order.
    """
    N = item_ptr.shape[0] - 1
    F = feat_label.shape[0]
    P = w.shape[0]
    unary = np.empty((N, K))
    delta = np.empty((N, K))
    bp = np.zeros((N, K), dtype=np.int32)
    pred = np.zeros(N, dtype=np.int64)
    trans = np.empty((1, K, K))
    start = np.empty(K)
    end = np.empty(K)
    d = np.zeros(P)
    seen = np.zeros(P, dtype=np.bool_)
    touched = np.empty(P, dtype=np.int64)
    loss = 0.0
    errors = 0
    for b in order:
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            counter += 1.0
            continue
        seq_potentials(w, 1.0, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, unary)
        _boundary_potentials(w, 1.0, F, K, free, forb, fstart, fend, trans, start, end)
        viterbi_seq(unary, trans, start, end, o, T, delta, bp, pred)
        nd = 0
        for r in range(o, o + T):
            if pred[r] != y[r]:
                nd += 1
        if nd == 0:
            counter += 1.0
            continue
        errors += nd
        if kind == AP:
            _on_path(y, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K, free, 1.0,
                     counter, True, w, u, d, seen, touched, 0)
            _on_path(pred, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K, free, -1.0,
                     -counter, True, w, u, d, seen, touched, 0)
            loss += nd / T
            counter += 1.0
            continue
        cost = (_path_score(pred, o, T, unary, trans, start, end)
                - _path_score(y, o, T, unary, trans, start, end))
        nt = _on_path(y, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K, free, 1.0, 0.0,
                      False, w, u, d, seen, touched, 0)
        nt = _on_path(pred, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K, free, -1.0, 0.0,
                      False, w, u, d, seen, touched, nt)
        if kind == PA:
            cost += math.sqrt(nd) if error_sensitive else 1.0
            norm2 = 0.0
            for q in range(nt):
                norm2 += d[touched[q]] * d[touched[q]]
            tau = pa_step(cost, norm2, pa_type, c)
            tau_u = tau * counter
            for q in range(nt):
                f = touched[q]
                w[f] += tau * d[f]
                u[f] += tau_u * d[f]
        else:
            cost += nd
            frac = gamma
            for q in range(nt):
                f = touched[q]
                frac += (d[f] * d[f]) * sigma[f]
            alpha = cost / frac
            for q in range(nt):
                f = touched[q]
                w[f] += alpha * sigma[f] * d[f]
                sigma[f] = 1.0 / ((1.0 / sigma[f]) + (d[f] * d[f]) / gamma)
        for q in range(nt):
            f = touched[q]
            d[f] = 0.0
            seen[f] = False
        loss += cost
        counter += 1.0
    return loss, errors, counter


@njit(cache=True)
def _free_boundary(F, K, free, forb, fstart, fend):
    """Parameter indices of the boundary potentials that follow the weights (free and not forbidden):
    (transition indices, their (i, j), start indices, their k, end indices, their k)."""
    n = 0
    for i in range(K):
        for j in range(K):
            if free[F + i * K + j] and not forb[i, j]:
                n += 1
    ti = np.empty(n, dtype=np.int64)
    tij = np.empty((n, 2), dtype=np.int64)
    n = 0
    for i in range(K):
        for j in range(K):
            if free[F + i * K + j] and not forb[i, j]:
                ti[n] = F + i * K + j
                tij[n, 0] = i
                tij[n, 1] = j
                n += 1
    ns = 0
    ne = 0
    for k in range(K):
        if free[F + K * K + k] and not fstart[k]:
            ns += 1
        if free[F + K * K + K + k] and not fend[k]:
            ne += 1
    si = np.empty(ns, dtype=np.int64)
    sk = np.empty(ns, dtype=np.int64)
    ei = np.empty(ne, dtype=np.int64)
    ek = np.empty(ne, dtype=np.int64)
    ns = 0
    ne = 0
    for k in range(K):
        if free[F + K * K + k] and not fstart[k]:
            si[ns] = F + K * K + k
            sk[ns] = k
            ns += 1
        if free[F + K * K + K + k] and not fend[k]:
            ei[ne] = F + K * K + K + k
            ek[ne] = k
            ne += 1
    return ti, tij, si, sk, ei, ek


@njit(cache=True)
def _setup_into(trans, start, end, buf, cmax, rmax, es, ee):
    """:func:`~structlearn.engine.kernels.chain.marginals_setup` of (trans, start, end) computed into the
    reused arrays ``buf`` (5, K, K) and ``cmax``, ``rmax``, ``es``, ``ee`` (K,): the same entries, without
    allocating (SGD builds one per sequence)."""
    K = trans.shape[1]
    T0 = trans[0]
    eTc, eTr, eTrt, fwd, bwd = buf[0], buf[1], buf[2], buf[3], buf[4]
    gmax = -np.inf
    for k in range(K):
        cmax[k] = -np.inf
        rmax[k] = -np.inf
    for i in range(K):
        for j in range(K):
            x = T0[i, j]
            if x > cmax[j]:
                cmax[j] = x
            if x > rmax[i]:
                rmax[i] = x
            if x > gmax:
                gmax = x
    feasible = gmax != -np.inf
    ok = feasible
    for i in range(K):
        for j in range(K):
            x = T0[i, j]
            eTc[i, j] = 0.0 if cmax[j] == -np.inf else math.exp(x - cmax[j])
            e = 0.0 if rmax[i] == -np.inf else math.exp(x - rmax[i])
            eTr[i, j] = e
            eTrt[j, i] = e
            g = 0.0
            if feasible and x != -np.inf:
                g = math.exp(x - gmax)
                if g < LIN_MIN:
                    ok = False
            fwd[i, j] = g
            bwd[j, i] = g
    for k in range(K):
        es[k] = 0.0
        ee[k] = 0.0
    smax, _ = exp_shifted_into(start, es)
    emax, _ = exp_shifted_into(end, ee)
    return ChainSetup(eTc, cmax, eTr, eTrt, rmax, fwd, bwd, gmax, es, smax, ee, emax,
                      ok and trans.shape[0] == 1)


@njit(cache=True)
def sgd_epoch(v, scale, t, t0, lam, order, item_ptr, item_attr, item_val, offsets, attr_ptr,
              feat_label, y, K, free, forb, fstart, fend, n_limit):
    """One epoch of SGD on Σ_i [-log p(y_i|x_i)] + (λ/2) N ‖w‖² with w = scale · v (lazy L2 decay).

    CRFsuite's steps: per sequence η = 1 / (λ (t0 + t)), scale ·= 1 - η λ, then the loss and the
    gradient (expected minus observed feature counts, from the engine's marginals,
    :func:`~structlearn.engine.kernels.chain.marginals_seq`) at the current weights, and v -= (η / scale) ·
    gradient. Returns (loss, scale, t): the sum of the sequences' losses, each before its own step. Only
    the first ``n_limit`` sequences of ``order`` are visited; t0 = inf takes no step (the loss at w).
    """
    N = item_ptr.shape[0] - 1
    F = feat_label.shape[0]
    unary = np.empty((N, K))
    work = chain_work(N, K)
    umarg = np.zeros((N, K))
    emarg = np.zeros((0, K, K))
    trans = np.empty((1, K, K))
    start = np.empty(K)
    end = np.empty(K)
    gtrans = np.zeros((K, K))
    sbuf = np.zeros((5, K, K))
    cmax = np.empty(K)
    rmax = np.empty(K)
    es = np.empty(K)
    ee = np.empty(K)
    _boundary_potentials(v, scale, F, K, free, forb, fstart, fend, trans, start, end)  # fixed entries
    ti, tij, si, sk, ei, ek = _free_boundary(F, K, free, forb, fstart, fend)
    loss = 0.0
    count = 0
    for b in order:
        if count >= n_limit:
            break
        count += 1
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        eta = 1.0 / (lam * (t0 + t))
        t += 1.0
        scale *= 1.0 - eta * lam
        if scale < 1e-30:  # fold the lazy scale into v
            for f in range(v.shape[0]):
                v[f] *= scale
            scale = 1.0
        seq_potentials(v, scale, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, unary)
        # only the free boundary entries follow the weights (as _boundary_potentials computes them)
        for q in range(ti.shape[0]):
            trans[0, tij[q, 0], tij[q, 1]] = v[ti[q]] * scale
        for q in range(si.shape[0]):
            start[sk[q]] = v[si[q]] * scale
        for q in range(ei.shape[0]):
            end[ek[q]] = v[ei[q]] * scale
        for i in range(K):
            for j in range(K):
                gtrans[i, j] = 0.0
        setup = _setup_into(trans, start, end, sbuf, cmax, rmax, es, ee)
        lz = marginals_seq(unary, trans, start, end, o, T, 3, setup, work, umarg, emarg, gtrans)
        gold = start[y[o]] + end[y[o + T - 1]]
        for r in range(o, o + T):
            gold += unary[r, y[r]]
            if r + 1 < o + T:
                gold += trans[0, y[r], y[r + 1]]
        loss += lz - gold
        gain = eta / scale
        for r in range(o, o + T):
            marg = umarg[r]
            marg[y[r]] -= 1.0
            for p in range(item_ptr[r], item_ptr[r + 1]):
                a = item_attr[p]
                val = item_val[p]
                for f in range(attr_ptr[a], attr_ptr[a + 1]):
                    v[f] -= gain * val * marg[feat_label[f]]
            if r == o:
                for k in range(K):
                    if free[F + K * K + k]:
                        v[F + K * K + k] -= gain * marg[k]
            if r == o + T - 1:
                for k in range(K):
                    if free[F + K * K + K + k]:
                        v[F + K * K + K + k] -= gain * marg[k]
            if r + 1 < o + T:
                gtrans[y[r], y[r + 1]] -= 1.0
        for i in range(K):
            for j in range(K):
                idx = F + i * K + j
                if free[idx]:
                    v[idx] -= gain * gtrans[i, j]
    return loss, scale, t
