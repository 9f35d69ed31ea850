"""Scaled (linear-space) forward–backward of one sequence with stationary transitions, for dense and
sparse transition matrices alike (:func:`linear_marginals_seq`, called by
:func:`structlearn.engine.kernels.chain.marginals_seq` and the sparse chain kernels).

The classical scaled recursion (Rabiner 1989, "A tutorial on hidden Markov models", §V.A; CRFsuite's
crf1d_context) keeps α and β in linear space, normalised at every token::

    â[0]   ∝ exp(start + unary[0])
    â[t]   ∝ (â[t-1] @ Â) ⊙ exp(unary[t] - max unary[t]),      Â = exp(trans - max trans)
    b̂[T-1] ∝ exp(end)
    b̂[t]   ∝ Â @ (exp(unary[t+1] - max unary[t+1]) ⊙ b̂[t+1])
    log Z  = Σ_t log(normaliser of â[t]) + shifts + log Σ_k â[T-1, k] exp(end[k])

with one exp per label and token (and one log per ~hundred tokens: the normalisers are multiplied and
their log taken when the product leaves [1e-200, 1e200]). Marginals are normalised locally at every
token, P(y_t = k) = â[t, k] b̂[t, k] / Σ_k â[t, k] b̂[t, k], so they stay exact however long the chain.

**Exactness, token by token.** A linear vector that enters a product with Â has entries ≤ 1 and every
nonzero entry ≥ ``IN_MIN``; zeros only where the exact value is zero (a -inf potential, an unreachable
label); the nonzero entries of Â are ≥ ``LIN_MIN`` (checked once per batch, ``lin_ok``). Every product
term is then ≥ 1e-290, a normal float, so sums of positive terms are exact to rounding. A row whose
entries spread beyond that (emission densities hundreds of nats apart, tiny transition weights into
a label) is kept in log space instead — flagged per token — and the next step from it is the exact
log-space step (:func:`structlearn.engine.kernels.chain_steps._log_step`, linear product with a per-entry
log-space fallback); the recursion returns to linear space at the first row that fits again. Token
marginals and pairwise marginals of flagged tokens are computed in log space
(:func:`structlearn.engine.kernels._common.local_marginals`, :func:`~structlearn.engine.kernels.chain_steps._log_edge`).
Results therefore equal the log-space recursion to rounding error for potentials of any scale, and
the cost of the log-space arithmetic is paid only on the tokens that need it.
"""
import math

import numpy as np
from numba import njit, types
from numba.extending import overload

from ..semirings import LOG
from ._common import final_sum as _final
from ._common import local_marginals as _local_marginals
from ._common import shift_rows as _shift_rows
from .chain_steps import _log_edge, _log_step

IN_MIN = 1e-190  # nonzero entries of a linear vector entering a product with the transitions
TOT_MIN = 1e-100  # normaliser of a linear row (keeps its entries >= IN_MIN * TOT_MIN, normal floats)
Z_MIN = 1e-70  # token normaliser Σ_k â b̂ of linear-space marginals
_LOG_IN = math.log(IN_MIN)
_FLUSH_LO = 1e-200  # the running product of normalisers is logged when it leaves [_FLUSH_LO, _FLUSH_HI]
_FLUSH_HI = 1e200
# No fast-math flags on the forward-backward below: it is inlined into many cached callers, and with
# reassoc / arcp / nsz (and even contract, FMA) LLVM rounds each inlined copy differently, so a first
# run (calling the freshly compiled function) and later runs (the copy inside a cache-loaded caller), or
# fit and partial_fit, differed in the last bits (tests/engine/test_compile_reproducible.py)

# per-token flags
FL = 1  # forward row in log space
BL = 2  # backward row in log space
BC = 4  # nb[r] holds the log normaliser of the backward row (it came from, or stayed in, log space)
VL = 8  # exp(unary) ⊙ b̂ of this token did not fit linear space (the backward step into it ran in log)
ML = 16  # token marginals computed in log space


def _lin_product(M, x, r, acc):
    """acc[k] = Σ_i x[r, i] · M[i, k] for a dense (K, K) M, or for a pattern M = (ptr, idx, vals)
    acc[k] = Σ_{q ∈ ptr[k]:ptr[k+1]} x[r, idx[q]] · vals[q] (a CSC column or a CSR row per k). Only
    callable from kernels (the implementations are the overloads below, chosen at compile time)."""
    raise NotImplementedError


@overload(_lin_product, inline="always")
def _lin_product_impl(M, x, r, acc):
    if isinstance(M, types.Array):
        def dense(M, x, r, acc):  # row-major, contiguous, vectorised
            K = acc.shape[0]
            for k in range(K):
                acc[k] = 0.0
            for i in range(x.shape[1]):
                xi = x[r, i]
                if xi != 0.0:
                    for k in range(K):
                        acc[k] += xi * M[i, k]
        return dense

    def pattern(M, x, r, acc):
        ptr, idx, vals = M
        for k in range(acc.shape[0]):
            acc[k] = 0.0
            for q in range(ptr[k], ptr[k + 1]):
                acc[k] += x[r, idx[q]] * vals[q]
    return pattern


@njit(cache=True, inline="always")
def _edge_lin(flags, t):
    """Whether the pairwise marginals of step t → t + 1 are computed in linear space."""
    return (flags[t] & (FL | BC | ML)) == 0 and (flags[t + 1] & VL) == 0


def _lin_edges(M, a, q, flags, o, T, emarg, ee_dst, edge_mode):
    """Linear-space edge marginals a[o+t, i] · M[i → j] · q[o+t+1, j] of one sequence's steps t < T - 1
    that are linear (:func:`_edge_lin`; the others were added in log space): a dense M writes them to
    emarg[o + t] (K, K) (mode 1) or adds their sum into ee_dst (K, K) (modes 2, 3, as
    Σ_t a_t ⊗ q_t+1 multiplied by M once); a pattern M = (ptr, idx, vals) writes (adds) them at the
    stored transitions into emarg[o + t] (E,) (ee_dst (E,)). One call per sequence: inlined per
    token, its array arguments took reference counts a token (Numba's pruning missed them)."""
    raise NotImplementedError


@overload(_lin_edges, inline="always")
def _lin_edges_impl(M, a, q, flags, o, T, emarg, ee_dst, edge_mode):
    if isinstance(M, types.Array):
        def dense(M, a, q, flags, o, T, emarg, ee_dst, edge_mode):
            K = a.shape[1]
            if edge_mode == 1:
                for t in range(T - 1):
                    if _edge_lin(flags, t):
                        for i in range(K):
                            for j in range(K):
                                emarg[o + t, i, j] = a[o + t, i] * M[i, j] * q[o + t + 1, j]
                return
            pair = np.zeros((K, K))
            for t in range(T - 1):
                if _edge_lin(flags, t):
                    for i in range(K):
                        ai = a[o + t, i]
                        if ai != 0.0:
                            for j in range(K):
                                pair[i, j] += ai * q[o + t + 1, j]
            for i in range(K):
                for j in range(K):
                    ee_dst[i, j] += M[i, j] * pair[i, j]
        return dense

    def pattern(M, a, q, flags, o, T, emarg, ee_dst, edge_mode):
        ptr, idx, vals = M
        for t in range(T - 1):
            if not _edge_lin(flags, t):
                continue
            for i in range(a.shape[1]):
                ai = a[o + t, i]
                if ai != 0.0:
                    for e in range(ptr[i], ptr[i + 1]):
                        v = ai * vals[e] * q[o + t + 1, idx[e]]
                        if edge_mode == 1:
                            emarg[o + t, e] += v
                        else:
                            ee_dst[e] += v
    return pattern


# ---- cold paths: rows in log space (own functions, so the hot loops stay small) -------------------
@njit(cache=True)
def _to_linear(x, r, lo):
    """Turn the log row x[r] (max 0) into a linear row of sum 1 in place when every finite entry is at
    least ``lo`` (then all nonzero entries are >= IN_MIN); returns log of the sum removed, or nan
    (x[r] unchanged) when the row does not fit."""
    K = x.shape[1]
    for k in range(K):
        if x[r, k] != -np.inf and x[r, k] < lo:
            return np.nan
    s = 0.0
    for k in range(K):
        e = math.exp(x[r, k])
        x[r, k] = e
        s += e
    inv = 1.0 / s
    for k in range(K):
        x[r, k] *= inv
    return math.log(s)


@njit(cache=True)
def _log_row(x, r, is_log, out):
    """out = x[r] if the row is in log space, else log x[r] (-inf for 0)."""
    for k in range(x.shape[1]):
        v = x[r, k]
        out[k] = v if is_log else (math.log(v) if v > 0.0 else -np.inf)


@njit(cache=True)
def _first_row(pot, unary, x, o, r, lo):
    """Row r of a pass started from log-potentials ``pot`` (start: x[r] ∝ exp(pot + unary[o]); end:
    x[r] ∝ exp(pot), ``o`` < 0): shifted, and linear when it fits. Returns (its log scale, log-row?)."""
    for k in range(x.shape[1]):
        x[r, k] = pot[k] if o < 0 else (-np.inf if unary[o, k] == -np.inf else pot[k] + unary[o, k])
    s = _shift_rows(x[r])
    if s == -np.inf:
        return s, True
    ls = _to_linear(x, r, lo)
    if np.isnan(ls):
        return s, True
    return s + ls, False


@njit(cache=True)
def _log_from_linear(acc, shift, unary, n, x, r):
    """x[r] = log acc + shift + unary[n] (the exact sums of a linear step whose result does not fit
    linear space; unary[n] added only for n >= 0), shifted; returns the shift (-inf: all -inf)."""
    for k in range(x.shape[1]):
        u = 0.0 if n < 0 else unary[n, k]
        x[r, k] = math.log(acc[k]) + shift + u if acc[k] > 0.0 and u != -np.inf else -np.inf
    return _shift_rows(x[r])


@njit(cache=True)
def _forward_log_step(logf, unary, fa, r, prev_log, acc, lo):
    """Forward row r from row r - 1 in log space (exact); linear when it fits. Returns (log scale,
    log-row?) (-inf: infeasible)."""
    Mlog, E, emax = logf
    K = fa.shape[1]
    vec = np.empty(K)
    _log_row(fa, r - 1, prev_log, vec)
    _log_step(Mlog, vec, r - 1, E, emax, 0, acc, fa[r])
    for k in range(K):
        fa[r, k] = -np.inf if unary[r, k] == -np.inf else fa[r, k] + unary[r, k]
    s = _shift_rows(fa[r])
    if s == -np.inf:
        return s, True
    ls = _to_linear(fa, r, lo)
    return (s, True) if np.isnan(ls) else (s + ls, False)


@njit(cache=True)
def _backward_log_step(logb, unary, fb, r, next_log, acc, lo):
    """Backward row r from row r + 1 in log space (exact); linear when it fits. Returns (log
    normaliser, flags of row r)."""
    Mlog, E, emax = logb
    K = fb.shape[1]
    lv = np.empty(K)
    _log_row(fb, r + 1, next_log, lv)
    for j in range(K):
        lv[j] = -np.inf if unary[r + 1, j] == -np.inf else lv[j] + unary[r + 1, j]
    _log_step(Mlog, lv, r, E, emax, 1, acc, fb[r])
    s = _shift_rows(fb[r])
    ls = _to_linear(fb, r, lo)
    return (s, BL | BC) if np.isnan(ls) else (s + ls, BC)


@njit(cache=True)
def _log_marginals(fa, fb, f, r):
    """Token marginals of row r from the log forms of its rows, written into fb[r]; returns the log
    normaliser log Σ_k â b̂."""
    K = fa.shape[1]
    la = np.empty(K)
    lb = np.empty(K)
    _log_row(fa, r, (f & FL) != 0, la)
    _log_row(fb, r, (f & BL) != 0, lb)
    return _local_marginals(la, lb, fb[r])


@njit(cache=True)
def _log_edge_step(loge, unary, fa, fb, nb, flags, t, r, gmax, lz_t, dst):
    """Pairwise marginals of the step r → r + 1 (token t of the sequence) in log space, added into
    dst; ``lz_t``: log Σ_k â[r] b̂[r]."""
    Mlog, E, emax = loge
    K = fa.shape[1]
    la = np.empty(K)
    lb = np.empty(K)
    _log_row(fa, r, (flags[t] & FL) != 0, la)
    _log_row(fb, r + 1, (flags[t + 1] & BL) != 0, lb)
    if flags[t] & BC:
        lnb = nb[r]
    else:  # linear backward step: its normaliser is relative to the shifts of Â and of unary[r + 1]
        mu = -np.inf
        for k in range(K):
            mu = max(mu, unary[r + 1, k])
        lnb = math.log(nb[r]) + gmax + mu
    _log_edge(Mlog, la, unary[r + 1], lb, E, emax, lnb + lz_t, dst)


@njit(cache=True)
def _infeasible(umarg, o, T):
    for r in range(o, o + T):
        for k in range(umarg.shape[1]):
            umarg[r, k] = 0.0
    return -np.inf


@njit(cache=True)
def _final_term(fa, r, is_log, lin, end):
    """log Σ_k α̂[r, k] exp(end[k]) of the last forward row."""
    K = fa.shape[1]
    ok = False
    for k in range(K):
        if lin.ee[k] == 1.0:  # end's shifted exps fit linear space (else they are all 0)
            ok = True
    if ok and not is_log:
        s = 0.0
        for k in range(K):
            s += fa[r, k] * lin.ee[k]
        return math.log(s) + lin.emax if s > 0.0 else -np.inf
    la = np.empty(K)
    _log_row(fa, r, is_log, la)
    return _final(la, end, LOG)


@njit(cache=True)
def linear_marginals_seq(unary, lin, Mf, Mb, Me, logf, logb, loge, start, end, o, T, edge_mode, work,
                         umarg, emarg, ee_dst):
    """Scaled forward–backward of one sequence (rows o .. o+T-1, stationary transitions); returns log Z
    (-inf: infeasible, rows of umarg zero). See the module docstring.

    ``lin``: a :class:`~structlearn.engine.kernels.chain.ChainSetup` or
    :class:`~structlearn.engine.kernels.chain_sparse.SparseSetup` (``gmax``, ``ee``/``emax``); ``Mf``, ``Mb``,
    ``Me``: the globally shifted exps of the transitions as read by the forward product, the backward
    product and the edge marginals (dense: lin.fwd, lin.bwd, lin.fwd; sparse: CSC and CSR patterns, see
    :func:`_lin_product`); ``logf``, ``logb``, ``loge``: (log-space transitions, shifted exps, maxima)
    of the forward, backward and edge log-space steps (dense: (trans, eTc, cmax), (trans, eTrt, rmax),
    (trans, eTr, rmax)). ``work``: a :class:`~structlearn.engine.kernels.chain.ChainWork` with rows o .. o+T-1
    (forward rows, exp(unary) ⊙ b̂, backward normalisers). Token marginals go to umarg[o:o+T] (also the
    backward rows while running); edge marginals to emarg[r] (mode 1) or added into ee_dst (modes 2,
    3). Time O(T·K²) (O(T·(E + K)) sparse) plus O(K) exps and logs per token held in log space.
    """
    K = unary.shape[1]
    fa = work.alpha
    eu = work.beta
    nb = work.incb
    fb = umarg
    gmax = lin.gmax
    lo = _LOG_IN + math.log(K)
    flags = np.zeros(T, dtype=np.int8)
    acc = np.empty(K)
    # ---- forward: â[t] = (â[t-1] @ Â) ⊙ exp(unary[t] - mu) / tot
    lz, is_log = _first_row(start, unary, fa, o, o, lo)
    if lz == -np.inf:
        return _infeasible(umarg, o, T)
    if is_log:
        flags[0] = FL
    prod = 1.0
    for t in range(1, T):
        r = o + t
        mu = -np.inf
        for k in range(K):
            mu = max(mu, unary[r, k])
        if mu == -np.inf:
            return _infeasible(umarg, o, T)
        for k in range(K):
            eu[r, k] = math.exp(unary[r, k] - mu)
        if flags[t - 1] & FL:
            s, is_log = _forward_log_step(logf, unary, fa, r, True, acc, lo)
            if s == -np.inf:
                return _infeasible(umarg, o, T)
            lz += s
            flags[t] = FL if is_log else 0
            continue
        _lin_product(Mf, fa, r - 1, acc)
        tot = 0.0
        mn = np.inf
        for k in range(K):
            a = acc[k] * eu[r, k]
            fa[r, k] = a
            tot += a
            if acc[k] > 0.0 and unary[r, k] != -np.inf:  # exactly nonzero: must be large enough
                mn = min(mn, a)
        if tot >= TOT_MIN and mn >= IN_MIN * tot:
            inv = 1.0 / tot
            for k in range(K):
                fa[r, k] *= inv
            lz += mu + gmax
            prod *= tot
            if prod < _FLUSH_LO or prod > _FLUSH_HI:
                lz += math.log(prod)
                prod = 1.0
        else:
            s = _log_from_linear(acc, gmax, unary, r, fa, r)
            if s == -np.inf:
                return _infeasible(umarg, o, T)
            lz += s
            flags[t] = FL
    last = o + T - 1
    lz += math.log(prod) + _final_term(fa, last, (flags[T - 1] & FL) != 0, lin, end)
    if lz == -np.inf:
        return _infeasible(umarg, o, T)
    # ---- backward: b̂[t] = Â @ (exp(unary[t+1] - mu) ⊙ b̂[t+1]) / nb[t]
    _, is_log = _first_row(end, unary, fb, -1, last, lo)
    if is_log:
        flags[T - 1] |= BL
    for t in range(T - 2, -1, -1):
        r = o + t
        n = r + 1
        ok = (flags[t + 1] & BL) == 0
        if ok:
            mn = np.inf
            for k in range(K):
                x = eu[n, k] * fb[n, k]
                eu[n, k] = x
                if fb[n, k] > 0.0 and unary[n, k] != -np.inf:
                    mn = min(mn, x)
            ok = mn >= IN_MIN
        if not ok:
            flags[t + 1] |= VL
            lnb, f = _backward_log_step(logb, unary, fb, r, (flags[t + 1] & BL) != 0, acc, lo)
            nb[r] = lnb
            flags[t] |= f
            continue
        _lin_product(Mb, eu, n, acc)
        tot = 0.0
        mn = np.inf
        for i in range(K):
            tot += acc[i]
            if acc[i] > 0.0:
                mn = min(mn, acc[i])
        if tot >= TOT_MIN and mn >= IN_MIN * tot:
            inv = 1.0 / tot
            for i in range(K):
                fb[r, i] = acc[i] * inv
            nb[r] = tot
        else:
            mu = -np.inf
            for k in range(K):
                mu = max(mu, unary[n, k])
            nb[r] = _log_from_linear(acc, gmax + mu, unary, -1, fb, r)
            flags[t] |= BL | BC
    # ---- token marginals (into fb = umarg), log-space edges, left factors of the linear edges
    lz_prev = 0.0
    for t in range(T):
        r = o + t
        if edge_mode != 0 and t > 0 and not _edge_lin(flags, t - 1):
            _log_edge_step(loge, unary, fa, fb, nb, flags, t - 1, r - 1, gmax, lz_prev,
                           emarg[r - 1] if edge_mode == 1 else ee_dst)
        f = flags[t]
        if (f & (FL | BL)) == 0:
            z = 0.0
            for k in range(K):
                z += fa[r, k] * fb[r, k]
            if z >= Z_MIN:
                iz = 1.0 / z
                for k in range(K):
                    fb[r, k] = fa[r, k] * fb[r, k] * iz
                if edge_mode != 0 and t < T - 1:
                    if _edge_lin(flags, t):  # P(i, j) = â[t, i] Â[i, j] q[t+1, j] / (nb[t] z)
                        sc = iz / nb[r]
                        for k in range(K):
                            fa[r, k] *= sc
                    else:
                        lz_prev = math.log(z)
                continue
            flags[t] = f | ML
        lz_prev = _log_marginals(fa, fb, flags[t], r)
    if edge_mode != 0:
        _lin_edges(Me, fa, eu, flags, o, T, emarg, ee_dst, edge_mode)
    return lz
