r"""Numba kernels for HHMM inference on its DBN: the chain of slice junction trees, Viterbi traceback and
(Murphy & Paskin 2001 §5; Murphy 2002, PhD thesis §3.3 "the interface algorithm"). The factored
frontier's kernels are :mod:`structlearn.engine.kernels.hhmm_ff`.

Arrays in, arrays out; no validation. The clique tree of one 1.5-slice DBN (slice t's Q, F nodes and
slice t+1's Q nodes, the interface) is given as flat arrays built by
:class:`structlearn.hhmm.jtree.SliceJunctionTree`:

- ``psi`` (Σ|C|,) log clique potentials (the static CPD factors), block c at ``clq_off[c]:clq_off[c+1]``
  (row-major over the clique's variables);
- directed edges ``de`` (two per tree edge, ``rev[de]`` the opposite one): ``src[de]``, ``dst[de]``;
  message ``de`` lives in ``msg[msg_off[de]:msg_off[de+1]]`` (over the separator); ``maps[map_off[de] + x]``
  is the separator entry of entry x of clique ``src[de]``;
- ``in_ptr``/``in_list``: the directed edges entering every clique;
- schedules: arrays of directed edges in the order they are sent (collect = leaves to root).

Shafer–Shenoy messages in the semiring (LOG: log-sum-exp, MAX: max)::

    μ_{a→b}(S_ab) = ⊕_{C_a \ S_ab} ( ψ_a + Σ_{c ∈ N(a), c ≠ b} μ_{c→a} )

The interface clique ``cA`` holds the Q_t factor (α_t, the emission), the root ``cR`` is exactly Q_{t+1}
(the β_{t+1} factor). Stack values are flat indices over the level dimensions ``dims`` (row-major).
"""
import math

import numpy as np
from numba import njit

from ..semirings import MAX


@njit(cache=True)
def _scatter(values, index, out, semiring, acc):
    """out[j] = ⊕_{k: index[k] = j} values[k] (out is overwritten; -inf where nothing arrives);
    ``acc``: scratch of at least len(out)."""
    for j in range(out.shape[0]):
        out[j] = -np.inf
    for k in range(values.shape[0]):
        j = index[k]
        if values[k] > out[j]:
            out[j] = values[k]
    if semiring == MAX:
        return
    for j in range(out.shape[0]):
        acc[j] = 0.0
    for k in range(values.shape[0]):
        j = index[k]
        if values[k] > -np.inf:
            acc[j] += math.exp(values[k] - out[j])
    for j in range(out.shape[0]):
        if acc[j] > 0.0:
            out[j] += math.log(acc[j])


@njit(cache=True)
def _lse(x):
    m = -np.inf
    for k in range(x.shape[0]):
        if x[k] > m:
            m = x[k]
    if m == -np.inf:
        return m
    s = 0.0
    for k in range(x.shape[0]):
        s += math.exp(x[k] - m)
    return m + math.log(s)


@njit(cache=True)
def _gathered(work, c, clq_off, msg, msg_off, maps, map_off, rev, in_ptr, in_list, skip, buf):
    """ψ_c + Σ incoming messages (all but the directed edge ``skip``; -1: all), written into the
    scratch ``buf`` (a view of it is returned)."""
    a0 = clq_off[c]
    size = clq_off[c + 1] - a0
    tmp = buf[:size]
    for x in range(size):
        tmp[x] = work[a0 + x]
    for k in range(in_ptr[c], in_ptr[c + 1]):
        e2 = in_list[k]
        if e2 == skip:
            continue
        mo = msg_off[e2]
        mp = map_off[rev[e2]]
        for x in range(size):
            tmp[x] += msg[mo + maps[mp + x]]
    return tmp


@njit(cache=True)
def _run(sched, work, clq_off, msg, msg_off, maps, map_off, src, rev, in_ptr, in_list, semiring, buf,
         acc):
    for s in range(sched.shape[0]):
        de = sched[s]
        a = src[de]
        tmp = _gathered(work, a, clq_off, msg, msg_off, maps, map_off, rev, in_ptr, in_list, rev[de], buf)
        size = clq_off[a + 1] - clq_off[a]
        _scatter(tmp, maps[map_off[de]:map_off[de] + size], msg[msg_off[de]:msg_off[de + 1]], semiring,
                 acc)


@njit(cache=True)
def _scratch(clq_off, msg_off, nQ):
    big = 0
    for c in range(clq_off.shape[0] - 1):
        big = max(big, clq_off[c + 1] - clq_off[c])
    small = nQ
    for de in range(msg_off.shape[0] - 1):
        small = max(small, msg_off[de + 1] - msg_off[de])
    return np.empty(big), np.empty(small)


@njit(cache=True)
def _set_block(work, base, c, clq_off, add, index):
    a0 = clq_off[c]
    for x in range(clq_off[c + 1] - a0):
        work[a0 + x] = base[a0 + x] + add[index[x]]


@njit(cache=True)
def jtree_forward(psi_mid, psi_last, clq_off, msg_off, maps, map_off, src, rev, in_ptr, in_list, up,
                  cA, mapA, cR, mapB, log_em, log_prior, log_b_last, semiring):
    """Forward pass through the chain of slice junction trees of one sequence.

    ``log_em`` (T, nQ) log-emission of every stack value (-inf: not a stack configuration);
    ``log_prior`` (nQ,) log P(Q_1); ``log_b_last`` (nQ,) the β_{T+1} factor of the last slice (whose
    potentials ``psi_last`` carry the final clamp of the F nodes).

    Recurrence (α_t(q) = P(Q_t = q | o_1:t-1), normalised; c_t the log normaliser)::

        α'_{t+1}(q') = ⊕_{Q_t, F_t} α_t(Q_t) + e_t(Q_t) + Σ_d log P(F^d_t | ·) + Σ_d log P(Q^d_{t+1} | ·)

    computed by collecting the slice tree towards its root (the Q_{t+1} clique).

    Returns ``alpha`` (T, nQ), ``log_c`` (T,); log P(o_1:T) = Σ_t log_c[t] (the last entry is the final
    slice's total). Time O(T·Σ_C |C|·deg), memory O(T·nQ + Σ_C |C|).
    """
    T, nQ = log_em.shape
    alpha = np.full((T, nQ), -np.inf)
    log_c = np.zeros(T)
    msg = np.empty(msg_off[-1])
    work = psi_mid.copy()
    nxt = np.empty(nQ)
    zero = np.zeros(nQ)
    a_t = np.empty(nQ)
    buf, acc = _scratch(clq_off, msg_off, nQ)
    if T == 0:
        return alpha, log_c
    alpha[0] = log_prior
    for t in range(T):
        base = psi_mid if t < T - 1 else psi_last
        if t == T - 1:
            work[:] = psi_last
        for j in range(nQ):
            a_t[j] = alpha[t, j] + log_em[t, j]
        _set_block(work, base, cA, clq_off, a_t, mapA)
        _set_block(work, base, cR, clq_off, zero if t < T - 1 else log_b_last, mapB)
        _run(up, work, clq_off, msg, msg_off, maps, map_off, src, rev, in_ptr, in_list, semiring, buf,
             acc)
        bel = _gathered(work, cR, clq_off, msg, msg_off, maps, map_off, rev, in_ptr, in_list, -1, buf)
        _scatter(bel, mapB, nxt, semiring, acc)
        if semiring == MAX:
            c = -np.inf
            for j in range(nQ):
                if nxt[j] > c:
                    c = nxt[j]
        else:
            c = _lse(nxt)
        log_c[t] = c
        if c == -np.inf:
            log_c[t:] = -np.inf
            break
        if t < T - 1:
            for j in range(nQ):
                alpha[t + 1, j] = nxt[j] - c
    return alpha, log_c


@njit(cache=True)
def jtree_backward(psi_mid, psi_last, clq_off, msg_off, maps, map_off, src, rev, in_ptr, in_list, to_a,
                   from_a, cA, mapA, cR, mapB, log_em, alpha, log_b_last, out_clq, out_map_off,
                   out_off, out_t_from, out_t_to, store, store_off):
    """Backward pass with calibration of every slice tree: smoothed family marginals (LOG semiring).

    Slice t: ψ + e_t on the interface clique, β_{t+1} on the root; collect towards the interface clique
    gives β_t(Q_t) = P(o_t:T | Q_t) (scaled); α_t is then added and the tree distributed from there, so
    every clique holds the posterior of its variables.

    Outputs: ``gamma`` (T, nQ) P(Q_t | o_1:T); for output k (a factor's family, marginalised out of
    clique ``out_clq[k]`` through the map at ``out_map_off[k]`` onto ``out_off[k+1] - out_off[k]``
    entries): accumulated over slices ``out_t_from[k] <= t < T + out_t_to[k]`` into ``acc``
    (Σ out sizes,), and, when ``store[k]``, kept per slice in ``per_t`` (T, Σ stored sizes), output k
    from column ``store_off[k]``. Time O(T·Σ_C |C|·deg).
    """
    T, nQ = log_em.shape
    n_out = out_clq.shape[0]
    width = out_off[-1]
    gamma = np.zeros((T, nQ))
    acc = np.zeros(width)
    n_store = 0
    st_width = 0
    for k in range(n_out):
        if store[k]:
            n_store = T
            st_width = max(st_width, store_off[k] + out_off[k + 1] - out_off[k])
    per_t = np.zeros((n_store, st_width))
    msg = np.empty(msg_off[-1])
    work = psi_mid.copy()
    beta = log_b_last.copy()
    tmpq = np.empty(nQ)
    buf, sacc = _scratch(clq_off, msg_off, nQ)
    for t in range(T - 1, -1, -1):
        base = psi_last if t == T - 1 else psi_mid
        if t == T - 1:
            work[:] = psi_last
        elif t == T - 2:
            work[:] = psi_mid
        _set_block(work, base, cA, clq_off, log_em[t], mapA)
        _set_block(work, base, cR, clq_off, beta, mapB)
        _run(to_a, work, clq_off, msg, msg_off, maps, map_off, src, rev, in_ptr, in_list, 0, buf, sacc)
        belA = _gathered(work, cA, clq_off, msg, msg_off, maps, map_off, rev, in_ptr, in_list, -1, buf)
        _scatter(belA, mapA, tmpq, 0, sacc)
        m = -np.inf
        for j in range(nQ):
            if tmpq[j] > m:
                m = tmpq[j]
        if m == -np.inf:
            m = 0.0
        for j in range(nQ):
            beta[j] = tmpq[j] - m
        a0 = clq_off[cA]
        for x in range(clq_off[cA + 1] - a0):
            work[a0 + x] += alpha[t, mapA[x]]
        _run(from_a, work, clq_off, msg, msg_off, maps, map_off, src, rev, in_ptr, in_list, 0, buf, sacc)
        belA = _gathered(work, cA, clq_off, msg, msg_off, maps, map_off, rev, in_ptr, in_list, -1, buf)
        lz = _lse(belA)
        if lz == -np.inf:
            continue
        for x in range(belA.shape[0]):
            gamma[t, mapA[x]] += math.exp(belA[x] - lz)
        for k in range(n_out):
            if t < out_t_from[k] or t >= T + out_t_to[k]:
                continue
            c = out_clq[k]
            bel = _gathered(work, c, clq_off, msg, msg_off, maps, map_off, rev, in_ptr, in_list, -1, buf)
            mp = out_map_off[k]
            o = out_off[k]
            for x in range(bel.shape[0]):
                if bel[x] > -np.inf:
                    p = math.exp(bel[x] - lz)
                    acc[o + maps[mp + x]] += p
                    if store[k]:
                        per_t[t, store_off[k] + maps[mp + x]] += p
    return gamma, acc, per_t


@njit(cache=True)
def _digits(q, dims, out):
    D = dims.shape[0]
    for d in range(D - 1, -1, -1):
        out[d] = q % dims[d]
        q //= dims[d]


@njit(cache=True)
def _cut_qscore(qd, qn, c, dims, qcpd, q_off):
    """Σ_d log P(Q^d_{t+1} = qn_d | Q^d_t = qd_d, F_t of cut level c, Q^{1:d-1}_{t+1} = qn) (uniform
    per-level tables (n_1..n_{d-1}, n_d, 2, 2, n_d) flattened at ``q_off[d]``)."""
    D = dims.shape[0]
    s = 0.0
    ctx = 0
    for d in range(D):
        n = dims[d]
        fd = 1 if d + 1 > c else 0
        fb = 1 if d + 2 > c else 0
        idx = (((ctx * n + qd[d]) * 2 + fd) * 2 + fb) * n + qn[d]
        s += qcpd[q_off[d] + idx]
        if s == -np.inf:
            return s
        ctx = ctx * n + qn[d]
    return s


@njit(cache=True)
def viterbi_traceback(alpha, log_em, fscore, final_score, dims, qcpd, q_off):
    """Best (Q_t, cut level c_t) sequence given the max-product forward messages ``alpha`` (T, nQ).

    ``fscore`` (D + 1, nQ): Σ_d log P(F^d_t | Q_t, F^{d+1}_t) for the F pattern of cut level c
    (F^d = 1 exactly for d > c); ``final_score`` (D + 1, nQ) the same term at the last slice (the F_T
    clamp, or 0 for the unclamped "none" case at c = D where F_T is summed out). Backwards::

        (q_t, c_t) = argmax α_t(q) + e_t(q) + fscore[c, q] + Σ_d log P(Q^d_{t+1} = q_{t+1} | q, c)

    Returns ``q`` (T,) int64 stack values, ``cut`` (T,) int64. Time O(T·nQ·D²).
    """
    T, nQ = log_em.shape
    D = dims.shape[0]
    q = np.zeros(T, dtype=np.int64)
    cut = np.zeros(T, dtype=np.int64)
    if T == 0:
        return q, cut
    best = -np.inf
    for s in range(nQ):
        for c in range(D + 1):
            v = alpha[T - 1, s] + log_em[T - 1, s] + final_score[c, s]
            if v > best:
                best = v
                q[T - 1] = s
                cut[T - 1] = c
    qd = np.empty(D, dtype=np.int64)
    qn = np.empty(D, dtype=np.int64)
    for t in range(T - 2, -1, -1):
        _digits(q[t + 1], dims, qn)
        best = -np.inf
        for s in range(nQ):
            a = alpha[t, s] + log_em[t, s]
            if a == -np.inf:
                continue
            _digits(s, dims, qd)
            for c in range(1, D + 1):
                v = a + fscore[c, s]
                if v == -np.inf:
                    continue
                v += _cut_qscore(qd, qn, c, dims, qcpd, q_off)
                if v > best:
                    best = v
                    q[t] = s
                    cut[t] = c
    return q, cut
