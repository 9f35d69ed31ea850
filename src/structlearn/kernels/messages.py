"""Numba message passing on pairwise graphs: loopy belief propagation and tree-reweighted BP (one engine).

Arrays in, arrays out; no validation. Conventions (packed batch of B graphs):

- ``unary``: (N, K) log-potentials, nodes of all graphs concatenated; K = K_max.
- ``nlab``: (N,) number of labels of every node (labels ``nlab[n]..K-1`` are padding, never read).
- ``node_off`` (B + 1,), ``edge_off`` (B + 1,): nodes and edges of graph b.
- ``eu``, ``ev``: (E,) GLOBAL node indices of the two ends of every edge.
- ``pair``: (S, K, K) log-potentials, ``pair[e, i, j]`` scores ``x_eu = i, x_ev = j``; S = 1 for one
  matrix shared by all edges, S = E for one per edge.
- ``rho``: (E,) edge appearance probabilities in (0, 1]; ρ ≡ 1 is ordinary BP.
- Directed messages: ``2e`` is eu → ev (over the labels of ev), ``2e + 1`` is ev → eu. ``msg`` (2E, K).
- ``in_ptr`` (N + 1,), ``in_msg`` (2E,): the messages arriving at node n are
  ``in_msg[in_ptr[n]:in_ptr[n + 1]]`` (CSR).

Recurrence (Wainwright, Jaakkola & Willsky 2005, "A new class of upper bounds on the log partition
function", eq. 39; with ρ ≡ 1 it is Pearl's / Yedidia et al.'s BP), in the log domain and a semiring ⊕
(logaddexp for sum-product, max for max-product)::

    cav_{t\\s}(x_t) = θ_t(x_t) + Σ_{v ∈ N(t)} ρ_vt log m_{v→t}(x_t) − log m_{s→t}(x_t)
    log m_{t→s}(x_s) = ⊕_{x_t} θ_st(x_s, x_t) / ρ_st + cav_{t\\s}(x_t)            (then normalised)
    log b_s(x_s)     ∝ θ_s(x_s) + Σ_{v ∈ N(s)} ρ_vs log m_{v→s}(x_s)
    log b_st(x_s, x_t) ∝ θ_st / ρ_st + cav_{s\\t}(x_s) + cav_{t\\s}(x_t)

With ρ_st = 1 the term of m_{s→t} cancels and is skipped (ordinary BP, same code path). With ρ_st < 1
a message ``m_{s→t}(x_t) = 0`` makes ``cav_{t\\s}(x_t) = -inf`` (the label has zero belief at t), so
no ``-inf - (-inf)`` is ever formed: -inf potentials never give NaN.

Log-partition estimate from the beliefs (Yedidia, Freeman & Weiss 2005, the negative Bethe free energy,
for ρ ≡ 1; the TRW upper bound of WJW 2005 eq. 25 at a fixed point otherwise)::

    log Z ≈ Σ_s ⟨b_s, θ_s⟩ + Σ_st ⟨b_st, θ_st⟩ + Σ_s H(b_s) − Σ_st ρ_st I(b_st)
    I(b_st) = Σ b_st (log b_st − log b_s − log b_t)

Messages are normalised to log-sum-exp 0 after every update; damping is geometric,
``log m ← (1 − α) log m_new + α log m_old``; the residual is the largest change of a message in linear
space, max |m_new − m_old| (never NaN), and a graph has converged when a whole iteration moves no message
by ``tol`` or more. Schedules: ``PARALLEL`` (flooding: all messages from the previous iteration's),
``SEQUENTIAL`` (u → v in edge order, then v → u in reverse edge order, each from the newest messages)
and ``RESIDUAL`` (Elidan, McGraw & Koller 2006: always commit the message whose pending update moves it
most; one "iteration" = 2E updates).
"""
import math

import numpy as np
from numba import njit, prange

from ..semirings import MAX

PARALLEL = 0
SEQUENTIAL = 1
RESIDUAL = 2
SCHEDULES = {"parallel": PARALLEL, "sequential": SEQUENTIAL, "residual": RESIDUAL}


@njit(cache=True, inline="always")
def _pr(S, e):
    """Row of ``pair`` used by edge e (0 when one matrix is shared)."""
    return 0 if S == 1 else e


@njit(cache=True)
def _cavity(t, skip, unary, nlab, in_ptr, in_msg, msg, rho, out):
    """cav_{t\\s} into out[:nlab[t]]; ``skip`` is the message s → t (or -1 for the full belief)."""
    kt = nlab[t]
    for x in range(kt):
        out[x] = unary[t, x]
    for p in range(in_ptr[t], in_ptr[t + 1]):
        d = in_msg[p]
        c = rho[d >> 1]
        if d == skip:
            c = c - 1.0
        if c == 0.0:
            continue
        for x in range(kt):
            if out[x] == -np.inf:
                continue
            m = msg[d, x]
            if m == -np.inf:
                out[x] = -np.inf
            else:
                out[x] += c * m


@njit(cache=True)
def _update(d, unary, nlab, eu, ev, pair, rho, in_ptr, in_msg, msg, semiring, damping, cav, tmp,
            new):
    """Compute message d into new[:k_s] (normalised, damped); return its linear-space residual."""
    e = d >> 1
    S = pair.shape[0]
    pe = _pr(S, e)
    if d & 1 == 0:
        t, s = eu[e], ev[e]
    else:
        t, s = ev[e], eu[e]
    kt, ks = nlab[t], nlab[s]
    _cavity(t, d ^ 1, unary, nlab, in_ptr, in_msg, msg, rho, cav)
    inv = 1.0 / rho[e]
    fwd = d & 1 == 0
    for xs in range(ks):
        # ⊕_{x_t} θ_st(x_s, x_t) / ρ_st + cav(x_t): max, then (sum-product) one shifted sum of exps
        acc = -np.inf
        for xt in range(kt):
            c = cav[xt]
            th = pair[pe, xt, xs] if fwd else pair[pe, xs, xt]
            if c == -np.inf or th == -np.inf:
                v = -np.inf
            else:
                v = th * inv + c
            tmp[xt] = v
            if v > acc:
                acc = v
        if semiring != MAX and acc > -np.inf:
            tot = 0.0
            for xt in range(kt):
                if tmp[xt] > -np.inf:
                    tot += math.exp(tmp[xt] - acc)
            acc += math.log(tot)
        new[xs] = acc
    _normalise(new, ks)
    if damping > 0.0:
        for xs in range(ks):
            a, b = new[xs], msg[d, xs]
            if a == -np.inf or b == -np.inf:
                new[xs] = -np.inf
            else:
                new[xs] = (1.0 - damping) * a + damping * b
        _normalise(new, ks)
    res = 0.0
    for xs in range(ks):
        a, b = new[xs], msg[d, xs]
        r = abs((math.exp(a) if a > -np.inf else 0.0) - (math.exp(b) if b > -np.inf else 0.0))
        if r > res:
            res = r
    return res


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


@njit(cache=True, parallel=True)
def message_passing(unary, nlab, node_off, edge_off, eu, ev, pair, rho, in_ptr, in_msg, msg,
                    semiring, schedule, damping, max_iter, tol):
    """Run BP/TRW on every graph; ``msg`` (2E, K) holds the initial messages and is updated in place.

    Returns ``converged`` (B,) bool, ``n_iter`` (B,) int64 and ``max_residual`` (B,) float64 (the
    residual of the last iteration). Parallel over graphs. Time per iteration O(Σ_e K² + Σ_n deg(n)²·K).
    """
    B = node_off.shape[0] - 1
    K = unary.shape[1]
    converged = np.zeros(B, dtype=np.bool_)
    n_iter = np.zeros(B, dtype=np.int64)
    max_res = np.zeros(B, dtype=np.float64)
    for b in prange(B):
        e0, e1 = edge_off[b], edge_off[b + 1]
        M = 2 * (e1 - e0)
        if M == 0:
            converged[b] = True
            continue
        cav = np.empty(K)
        tmp = np.empty(K)
        new = np.empty(K)
        buf = np.empty((M, K)) if schedule == PARALLEL else np.empty((0, K))
        it = 0
        res = np.inf
        while schedule != RESIDUAL and it < max_iter:
            it += 1
            res = 0.0
            for j in range(M):
                if schedule == PARALLEL:
                    d = 2 * e0 + j  # flooding: every message from the previous iteration's messages
                elif j < M // 2:
                    d = 2 * (e0 + j)  # sequential: forward sweep u → v in edge order, …
                else:
                    d = 2 * (e1 - 1 - (j - M // 2)) + 1  # … then backward sweep v → u reversed
                r = _update(d, unary, nlab, eu, ev, pair, rho, in_ptr, in_msg, msg, semiring,
                            damping, cav, tmp, new)
                if r > res:
                    res = r
                ks = nlab[ev[d >> 1]] if d & 1 == 0 else nlab[eu[d >> 1]]
                if schedule == PARALLEL:
                    for x in range(K):
                        buf[j, x] = new[x] if x < ks else -np.inf
                else:
                    for x in range(ks):
                        msg[d, x] = new[x]
            if schedule == PARALLEL:
                for j in range(M):
                    for x in range(K):
                        msg[2 * e0 + j, x] = buf[j, x]
            if res < tol:
                converged[b] = True
                break
        if schedule == RESIDUAL:
            c, n_up, res = _residual(2 * e0, M, unary, nlab, eu, ev, pair, rho, in_ptr, in_msg, msg,
                                     semiring, damping, max_iter, tol, cav, tmp, new)
            converged[b] = c
            it = (n_up + M - 1) // M
        n_iter[b] = it
        max_res[b] = res
    return converged, n_iter, max_res


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
def _residual(d0, M, unary, nlab, eu, ev, pair, rho, in_ptr, in_msg, msg, semiring, damping, max_iter,
              tol, cav, tmp, new):
    """Residual BP (Elidan, McGraw & Koller 2006) on the messages d0..d0+M-1 of one graph.

    Every message keeps its pending new value and residual; the largest residual (a max segment tree,
    O(log M) per change) is committed, then the messages out of its receiver are recomputed. Stops when
    every pending residual is below ``tol`` or after ``max_iter · M`` updates. Returns (converged,
    number of updates, largest pending residual).
    """
    K = msg.shape[1]
    P = 1
    while P < M:
        P *= 2
    seg = np.full(2 * P, -1.0)
    pend = np.empty((M, K))
    for j in range(M):
        r = _update(d0 + j, unary, nlab, eu, ev, pair, rho, in_ptr, in_msg, msg, semiring, damping,
                    cav, tmp, new)
        for x in range(K):
            pend[j, x] = new[x]
        seg[P + j] = r
    for i in range(P - 1, 0, -1):
        a, c = seg[2 * i], seg[2 * i + 1]
        seg[i] = a if a >= c else c
    count = 0
    limit = max_iter * M
    while seg[1] >= tol and count < limit:
        i = 1
        while i < P:
            i = 2 * i if seg[2 * i] >= seg[2 * i + 1] else 2 * i + 1
        j = i - P
        d = d0 + j
        s = ev[d >> 1] if d & 1 == 0 else eu[d >> 1]
        for x in range(nlab[s]):
            msg[d, x] = pend[j, x]
        _seg_set(seg, P, j, 0.0)
        count += 1
        # messages out of the receiver s (the reverses of the messages into s) depend on m_d
        for p in range(in_ptr[s], in_ptr[s + 1]):
            d2 = in_msg[p] ^ 1
            r = _update(d2, unary, nlab, eu, ev, pair, rho, in_ptr, in_msg, msg, semiring, damping,
                        cav, tmp, new)
            for x in range(K):
                pend[d2 - d0, x] = new[x]
            _seg_set(seg, P, d2 - d0, r)
    return seg[1] < tol, count, max(seg[1], 0.0)


@njit(cache=True, parallel=True)
def beliefs(unary, nlab, node_off, edge_off, eu, ev, pair, rho, in_ptr, in_msg, msg):
    """Node and edge log-beliefs (normalised) and the Bethe / TRW log-partition estimate per graph.

    Returns ``log_bn`` (N, K), ``log_be`` (E, K, K) (-inf on padding) and ``log_z`` (B,) (-inf when a
    node or edge has all-zero belief).
    """
    B = node_off.shape[0] - 1
    K = unary.shape[1]
    N = unary.shape[0]
    E = eu.shape[0]
    S = pair.shape[0]
    log_bn = np.full((N, K), -np.inf)
    log_be = np.full((E, K, K), -np.inf)
    log_z = np.zeros(B)
    for b in prange(B):
        cu = np.empty(K)
        cv = np.empty(K)
        total = 0.0
        dead = False
        for n in range(node_off[b], node_off[b + 1]):
            k = nlab[n]
            _cavity(n, -1, unary, nlab, in_ptr, in_msg, msg, rho, cu)
            _normalise(cu, k)
            if k == 0 or cu[0:k].max() == -np.inf:
                dead = True
                continue
            for x in range(k):
                lb = cu[x]
                log_bn[n, x] = lb
                if lb > -np.inf:
                    p = math.exp(lb)
                    total += p * (unary[n, x] - lb)        # ⟨b, θ⟩ + H(b)
        for e in range(edge_off[b], edge_off[b + 1]):
            u, v = eu[e], ev[e]
            ku, kv = nlab[u], nlab[v]
            pe = _pr(S, e)
            _cavity(u, 2 * e + 1, unary, nlab, in_ptr, in_msg, msg, rho, cu)
            _cavity(v, 2 * e, unary, nlab, in_ptr, in_msg, msg, rho, cv)
            inv = 1.0 / rho[e]
            m = -np.inf
            for i in range(ku):
                for j in range(kv):
                    th = pair[pe, i, j]
                    if cu[i] == -np.inf or cv[j] == -np.inf or th == -np.inf:
                        val = -np.inf
                    else:
                        val = th * inv + cu[i] + cv[j]
                    log_be[e, i, j] = val
                    if val > m:
                        m = val
            if m == -np.inf:
                dead = True
                continue
            s = 0.0
            for i in range(ku):
                for j in range(kv):
                    if log_be[e, i, j] > -np.inf:
                        s += math.exp(log_be[e, i, j] - m)
            z = m + math.log(s)
            r = rho[e]
            for i in range(ku):
                for j in range(kv):
                    lb = log_be[e, i, j]
                    if lb == -np.inf:
                        continue
                    lb -= z
                    log_be[e, i, j] = lb
                    p = math.exp(lb)
                    total += p * pair[pe, i, j]
                    if log_bn[u, i] > -np.inf and log_bn[v, j] > -np.inf:
                        total -= r * p * (lb - log_bn[u, i] - log_bn[v, j])
        log_z[b] = -np.inf if dead else total
    return log_bn, log_be, log_z
