"""Numba kernels for tree-structured label distributions (packed ragged batches of trees).

Arrays in, arrays out; no validation. Conventions:

- ``unary``: (N, K) log-potentials, nodes of all trees concatenated; ``offsets``: (B + 1,).
- ``edge``: (S, K, K) log-potentials, ``edge[c, i, j]`` scores child c labelled i under its parent
  labelled j; S = 1 for one matrix shared by all edges, S = N for one per child (root rows unused).
- ``root_score``: (K,) log-potential of the root's label.
- ``gpar``: (N,) GLOBAL (packed) parent index of every node, -1 for a root.
- ``pre``: (N,) packed breadth-first order per tree (``pre[o]`` is the root of the tree starting at row
  ``o``; parents come before their children, so reading it backwards visits children before parents).
- ``cptr`` (N + 1,), ``cidx`` (N,): children of node n are ``cidx[cptr[n]:cptr[n + 1]]`` (CSR).

The recurrences (belief propagation on a tree, Pearl 1982; Cohn & Blunsom 2005 §3, written in
the log domain and in a semiring, Goodman 1999)::

    inside[n, i]  = unary[n, i] + Σ_{c ∈ children(n)} msg[c, i]                     (upward, leaves first)
    msg[c, j]     = ⊕_i edge[c, i, j] + inside[c, i]                              (message c → parent)
    log Z         = ⊕_i inside[root, i] + root_score[i]
    outside[r, j] = root_score[j]                                                 (downward, root first)
    ctx[c, j]     = outside[p, j] + unary[p, j] + Σ_{c' ∈ children(p), c' ≠ c} msg[c', j]
    outside[c, i] = ⊕_j edge[c, i, j] + ctx[c, j]
    P(y_n = i)               = exp(inside[n, i] + outside[n, i] - log Z)
    P(y_c = i, y_parent = j) = exp(inside[c, i] + edge[c, i, j] + ctx[c, j] - log Z)

Messages and outside scores are shifted to a maximum of 0 (the shifts of the messages are summed into
log Z) and marginals are normalised per node and per edge, so the magnitudes stay those of one node's
potentials on trees of any depth (a chain of 10⁵ nodes keeps marginals that sum to 1 to ~1e-15).

The seed divides the parent's α by the child's message to get ``ctx``; in the log domain that is a
subtraction which gives ``-inf - (-inf) = NaN`` for forbidden labels. Here ``ctx`` is built from
prefix and suffix sums of the siblings' messages instead: only additions, so -inf potentials stay -inf.
"""
import numpy as np
from numba import njit, prange

from ..semirings import MAX
from ._common import argmax_sum as _argmax_sum
from ._common import draw_log as _draw
from ._common import exp_shift as _exp_shift
from ._common import final_sum as _final
from ._common import local_marginals as _local_marginals
from ._common import lse_col as _lse_col
from ._common import lse_row as _lse_row
from ._common import lse_step as _lse_step
from ._common import pair_prob as _pair_prob
from ._common import safe_scale as _safe_scale
from ._common import shift_rows as _shift_rows
from ._common import shifted_exp as _shifted_exp
from ._common import top_k as _top


@njit(cache=True, inline="always")
def _er(S, c):
    """Row of ``edge`` used by child c (0 when one matrix is shared)."""
    return 0 if S == 1 else c


@njit(cache=True, parallel=True)
def tree_topology(gpar, offsets):
    """Children lists and a breadth-first order of every tree.

    ``gpar`` must hold in-range global parents with exactly one root per non-empty tree (checked by the
    caller). Returns ``pre`` (N,), ``cptr`` (N + 1,), ``cidx`` (N,) and ``n_reached`` (B,): the number of
    nodes reachable from the root; fewer than the tree's length means the parent pointers hold a cycle
    (the unreachable nodes, and only they, lie on or hang below a cycle). Time O(N), memory O(N).
    """
    N = gpar.shape[0]
    B = offsets.shape[0] - 1
    cptr = np.zeros(N + 1, dtype=np.int64)
    for n in range(N):
        if gpar[n] >= 0:
            cptr[gpar[n] + 1] += 1
    for n in range(N):
        cptr[n + 1] += cptr[n]
    fill = cptr[:-1].copy()
    cidx = np.zeros(N, dtype=np.int64)
    for n in range(N):  # counting sort: children of a node in increasing index order
        p = gpar[n]
        if p >= 0:
            cidx[fill[p]] = n
            fill[p] += 1
    pre = np.zeros(N, dtype=np.int64)
    n_reached = np.zeros(B, dtype=np.int64)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        root = -1
        for n in range(o, o + T):
            if gpar[n] < 0:
                root = n
                break
        if root < 0:
            continue
        pre[o] = root
        head = 0
        tail = 1
        while head < tail:
            n = pre[o + head]
            head += 1
            for q in range(cptr[n], cptr[n + 1]):
                if tail < T:
                    pre[o + tail] = cidx[q]
                tail += 1
        n_reached[b] = tail
    return pre, cptr, cidx, n_reached


@njit(cache=True)
def _upward_seq(unary, edge, pre, cptr, cidx, o, T, semiring, ins, msg, bp, ec, cmax, p):
    """Fill ins and msg (and bp in MAX) for the tree whose BFS order is pre[o:o+T].

    Every message is shifted so that its maximum is 0; the shifts are summed (compensated) and returned,
    so that inside scores keep the magnitude of one node's potentials however deep the tree is. The
    true result is ``_final(ins[root]) + shift``. Returns -inf if a message is -inf everywhere.
    ``ec``, ``cmax``: column-shifted exp of a shared edge matrix (LOG fast path); ``p``: (K,) buffer.
    """
    K = unary.shape[1]
    S = edge.shape[0]
    total = 0.0
    comp = 0.0
    for t in range(T - 1, -1, -1):
        n = pre[o + t]
        # inside[n, i] = unary[n, i] + Σ_children msg[c, i]
        for i in range(K):
            v = unary[n, i]
            for q in range(cptr[n], cptr[n + 1]):
                if v == -np.inf:
                    break
                v += msg[cidx[q], i]
            ins[n, i] = v
        if t == 0:
            break
        # msg[n, j] = ⊕_i edge[n, i, j] + inside[n, i]   (bp: the best child label i per parent label j)
        e = _er(S, n)
        if semiring == MAX:
            for j in range(K):
                best = -np.inf
                arg = 0
                for i in range(K):
                    v = ins[n, i] + edge[e, i, j]
                    if v > best:
                        best = v
                        arg = i
                msg[n, j] = best
                bp[n, j] = arg
        elif S == 1:
            # shared edge: linear-space product with an exact log-space fallback per column
            if _lse_step(ins[n], edge[0], ec, cmax, 0, p, msg[n]) == -np.inf:
                return -np.inf
        else:
            for j in range(K):
                msg[n, j] = _lse_col(ins[n], edge[e], j)
        mx = _shift_rows(msg[n])
        if mx == -np.inf:
            return -np.inf
        # Kahan summation of the shifts
        y = mx - comp
        tt = total + y
        comp = (tt - total) - y
        total = tt
    return total


@njit(cache=True, parallel=True)
def tree_upward(unary, edge, root_score, pre, cptr, cidx, offsets, semiring):
    """Upward (leaves → root) pass in the LOG or MAX semiring.

    Returns ``ins`` (N, K) inside scores and ``msg`` (N, K) child → parent messages (root rows
    unspecified), both up to an additive constant per node (messages are shifted to a maximum of 0);
    ``bp`` (N, K) int64 back-pointers (MAX only: the best child label per parent label); and the
    per-tree result (B,): log Z (LOG) or the best score (MAX); 0 for an empty tree.
    Time O(N·K²) (LOG with a shared edge: O(N·K) exps), memory O(N·K).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    ins = np.empty((N, K))
    msg = np.full((N, K), -np.inf)
    bp = np.zeros((N, K) if semiring == MAX else (0, K), dtype=np.int64)
    out = np.zeros(B)
    if edge.shape[0] == 1:
        ec, cmax = _shifted_exp(edge[0], 0)
    else:
        ec, cmax = np.zeros((0, 0)), np.zeros(0)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        p = np.empty(K)
        shift = _upward_seq(unary, edge, pre, cptr, cidx, o, T, semiring, ins, msg, bp, ec, cmax, p)
        if shift == -np.inf:
            out[b] = -np.inf
        else:
            out[b] = _final(ins[pre[o]], root_score, semiring) + shift
    return ins, msg, bp, out


@njit(cache=True)
def _downward_seq(unary, edge, root_score, pre, cptr, cidx, o, T, msg, ctx, outs, oshift, ert, rmax,
                  run, qb):
    """Fill ctx, outs (outside scores, shifted to a maximum of 0) and oshift (the shifts) for one tree,
    LOG semiring, root first. ``ert``, ``rmax``: transpose (contiguous) of the row-shifted exp of a
    shared edge matrix, its row maxima."""
    K = unary.shape[1]
    S = edge.shape[0]
    root = pre[o]
    for j in range(K):
        outs[root, j] = root_score[j]
    oshift[root] = 0.0
    for t in range(T):
        p = pre[o + t]
        a = cptr[p]
        z = cptr[p + 1]
        if a == z:
            continue
        # suffix sums of the later siblings' messages ...
        for j in range(K):
            run[j] = 0.0
        for q in range(z - 1, a - 1, -1):
            c = cidx[q]
            for j in range(K):
                ctx[c, j] = run[j]
                run[j] += msg[c, j]
        # ... plus the parent's outside score, its unary and the earlier siblings (prefix sums)
        for j in range(K):
            run[j] = outs[p, j] + unary[p, j]
        for q in range(a, z):
            c = cidx[q]
            for j in range(K):
                ctx[c, j] += run[j]
                run[j] += msg[c, j]
        # outside[c, i] = ⊕_j edge[c, i, j] + ctx[c, j]
        # (shifted to a maximum of 0: outside scores are needed only up to a constant per node)
        for q in range(a, z):
            c = cidx[q]
            e = _er(S, c)
            if S == 1:
                _lse_step(ctx[c], edge[0], ert, rmax, 1, qb, outs[c])
            else:
                for i in range(K):
                    outs[c, i] = _lse_row(edge[e], ctx[c], i)
            oshift[c] = _shift_rows(outs[c])


@njit(cache=True, parallel=True)
def tree_marginals(unary, edge, root_score, gpar, pre, cptr, cidx, offsets, ins, msg, log_z, edge_mode):
    """Unary and edge marginals from an upward LOG pass, and the expected score E[s(y)] per tree.

    ``edge_mode`` 0: no edge marginals ((0, K, K) returned); 1: full (N, K, K) with row c =
    P(y_c = i, y_parent(c) = j) and root rows 0; 2: per-tree sums (B, K, K). Trees with log Z = -inf
    get zero rows and expected score 0. Terms with zero marginal are skipped in the expectation, so
    -inf potentials never give NaN. Marginals are normalised per node; an edge's normaliser is its
    child's (Σ_ij exp(inside[c, i] + edge[c, i, j] + ctx[c, j]) = Σ_i exp(inside[c, i] + outside[c, i])).
    Time O(N·K²) (with a shared edge: O(N·K) exps plus products), memory O(N·K) (+ the edge output).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    S = edge.shape[0]
    um = np.zeros((N, K))
    if edge_mode == 1:
        em = np.zeros((N, K, K))
    elif edge_mode == 2:
        em = np.zeros((B, K, K))
    else:
        em = np.zeros((0, K, K))
    expected = np.zeros(B)
    ctx = np.zeros((N, K))
    outs = np.zeros((N, K))
    oshift = np.zeros(N)
    if S == 1:
        er, rmax = _shifted_exp(edge[0], 1)
    else:  # unused (a linear product needs a shared edge), but read by _pair_prob
        er, rmax = np.zeros((K, K)), np.full(K, -np.inf)
    ert = np.ascontiguousarray(er.T)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        lz = log_z[b]
        if T == 0 or lz == -np.inf:
            continue
        run = np.empty(K)
        qb = np.empty(K)
        _downward_seq(unary, edge, root_score, pre, cptr, cidx, o, T, msg, ctx, outs, oshift, ert,
                      rmax, run, qb)
        acc = 0.0
        root = pre[o]
        for n in range(o, o + T):
            # P(y_n = i) ∝ exp(inside + outside), normalised per node: both are known only up to a
            # constant, and a local normaliser keeps full precision however large log Z is
            ln = _local_marginals(ins[n], outs[n], um[n])
            if ln == -np.inf:
                continue
            for i in range(K):
                pr = um[n, i]
                if pr > 0.0:
                    acc += pr * unary[n, i]
                    if n == root:
                        acc += pr * root_score[i]
            if n == root:
                continue
            # P(y_c = i, y_parent = j) = exp(inside[c, i] + edge[c, i, j] + ctx[c, j] - L)
            lnorm = ln + oshift[n]
            e = _er(S, n)
            mb = -np.inf
            if S == 1:
                mb = _exp_shift(ctx[n], qb)
            for i in range(K):
                if ins[n, i] == -np.inf:
                    continue
                fast = False
                a = 0.0
                if S == 1 and rmax[i] != -np.inf:
                    fast, a = _safe_scale(ins[n, i] + rmax[i] + mb - lnorm)
                for j in range(K):
                    x = ins[n, i] + edge[e, i, j] + ctx[n, j] - lnorm
                    pr = _pair_prob(fast, a, er[i, j], qb[j], x)
                    if pr > 0.0:
                        acc += pr * edge[e, i, j]
                        if edge_mode == 1:
                            em[n, i, j] = pr
                        elif edge_mode == 2:
                            em[b, i, j] += pr
        expected[b] = acc
    return um, em, expected


@njit(cache=True, parallel=True)
def tree_viterbi(unary, edge, root_score, gpar, pre, cptr, cidx, offsets):
    """Max-product decoding: best scores (B,) and labels (N,) (-1 rows for infeasible trees).

    Upward MAX pass storing, per child, the best child label for each parent label (Cohn & Blunsom 2005, "tree"
    Viterbi), then a downward read-out root first. Time O(N·K²), memory O(N·K).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    ins = np.empty((N, K))
    msg = np.full((N, K), -np.inf)
    bp = np.zeros((N, K), dtype=np.int64)
    best = np.zeros(B)
    labels = np.full(N, -1, dtype=np.int64)
    ec = np.zeros((1, 0))  # unused in MAX
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        shift = _upward_seq(unary, edge, pre, cptr, cidx, o, T, MAX, ins, msg, bp, ec, ec[0], ec[0])
        best[b] = -np.inf if shift == -np.inf else _final(ins[pre[o]], root_score, MAX) + shift
        if best[b] == -np.inf:
            continue
        root = pre[o]
        labels[root] = _argmax_sum(ins[root], root_score)[1]
        for t in range(1, T):
            n = pre[o + t]
            labels[n] = bp[n, labels[gpar[n]]]
    return best, labels


@njit(cache=True, parallel=True)
def tree_score(unary, edge, root_score, gpar, offsets, labels):
    """Log-score (B,) of the packed labeling ``labels`` (N,)."""
    B = offsets.shape[0] - 1
    S = edge.shape[0]
    out = np.zeros(B)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        s = 0.0
        for n in range(o, o + T):
            s += unary[n, labels[n]]
            p = gpar[n]
            if p < 0:
                s += root_score[labels[n]]
            else:
                s += edge[_er(S, n), labels[n], labels[p]]
        out[b] = s
    return out


@njit(cache=True, parallel=True)
def tree_sample(ins, log_z, edge, root_score, gpar, pre, offsets, uniforms):
    """Exact posterior samples: upward sum-product (``ins`` from :func:`tree_upward`), then sample the
    root from exp(ins + root_score) and each child, root first, from exp(ins[c] + edge[c, :, y_parent]).

    ``uniforms`` (n, N) in [0, 1); node n of sample s uses ``uniforms[s, n]``. Returns (n, N) labels,
    -1 for trees with log Z = -inf. Time O(n·N·K).
    """
    n_samples = uniforms.shape[0]
    N, K = ins.shape
    B = offsets.shape[0] - 1
    S = edge.shape[0]
    out = np.full((n_samples, N), -1, dtype=np.int64)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0 or log_z[b] == -np.inf:
            continue
        w = np.empty(K)
        root = pre[o]
        for s in range(n_samples):
            for i in range(K):
                w[i] = ins[root, i] + root_score[i]
            out[s, root] = _draw(w, uniforms[s, root])
            for t in range(1, T):
                c = pre[o + t]
                yp = out[s, gpar[c]]
                e = _er(S, c)
                for i in range(K):
                    w[i] = ins[c, i] + edge[e, i, yp]
                out[s, c] = _draw(w, uniforms[s, c])
    return out


@njit(cache=True, parallel=True)
def tree_kbest(unary, edge, root_score, pre, cptr, cidx, offsets, k):
    """The k best labelings of every tree (exact k-best max-product, best first).

    Every node n and label i keep the k best scores of the subtree below n with y_n = i, as a sorted
    list. The message of child c to its parent is, per parent label j, the k best of
    ``edge[c, i, j] + list[c, i, r]`` over (i, r) with back-pointers (i, r); a parent's list is the
    k-best merge of its unary with its children's messages, one child at a time, keeping per child the
    pair (rank in the running list, rank in the child's message). Two sorted lists are merged looking
    only at pairs of ranks (a, b) with (a + 1)(b + 1) <= k. The labelings are read out root first.
    Time O(N·K²·k log(Kk)), memory O(T·K·k) per tree.
    Returns scores (B, k) (-inf padding) and labels (k, N) (-1 padding).
    """
    N, K = unary.shape
    B = offsets.shape[0] - 1
    S = edge.shape[0]
    scores = np.full((B, k), -np.inf)
    labels = np.full((k, N), -1, dtype=np.int64)
    for b in prange(B):
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            scores[b, 0] = 0.0
            continue
        insk = np.full((T, K, k), -np.inf)   # k best subtree scores below node (local index) by label
        msgk = np.full((T, K, k), -np.inf)   # k best messages to the parent by parent label
        mbl = np.zeros((T, K, k), dtype=np.int32)   # message back-pointer: child label
        mbr = np.zeros((T, K, k), dtype=np.int32)   # message back-pointer: rank in insk[child, label]
        sprev = np.zeros((T, K, k), dtype=np.int32)   # merge back-pointer: rank in the running list
        schild = np.zeros((T, K, k), dtype=np.int32)  # merge back-pointer: rank in this child's message
        cur = np.empty(k)
        nxt = np.empty(k)
        cand = np.empty(max(k * k, K * k))
        ca = np.empty(max(k * k, K * k), dtype=np.int64)
        cb = np.empty(max(k * k, K * k), dtype=np.int64)
        for t in range(T - 1, -1, -1):
            n = pre[o + t]
            ln = n - o
            for i in range(K):
                ncur = 0
                if unary[n, i] != -np.inf:
                    cur[0] = unary[n, i]
                    ncur = 1
                for q in range(cptr[n], cptr[n + 1]):
                    if ncur == 0:
                        break
                    lc = cidx[q] - o
                    cnt = 0
                    for a in range(ncur):
                        for bb in range(k):
                            if (a + 1) * (bb + 1) > k or msgk[lc, i, bb] == -np.inf:
                                break
                            cand[cnt] = cur[a] + msgk[lc, i, bb]
                            ca[cnt] = a
                            cb[cnt] = bb
                            cnt += 1
                    order = _top(cand, cnt, k)
                    ncur = order.shape[0]
                    for r in range(ncur):
                        nxt[r] = cand[order[r]]
                        sprev[lc, i, r] = ca[order[r]]
                        schild[lc, i, r] = cb[order[r]]
                    for r in range(ncur):
                        cur[r] = nxt[r]
                for r in range(ncur):
                    insk[ln, i, r] = cur[r]
            if t == 0:
                break
            e = _er(S, n)
            for j in range(K):
                cnt = 0
                for i in range(K):
                    if edge[e, i, j] == -np.inf:
                        continue
                    for r in range(k):
                        if insk[ln, i, r] == -np.inf:
                            break
                        cand[cnt] = insk[ln, i, r] + edge[e, i, j]
                        ca[cnt] = i
                        cb[cnt] = r
                        cnt += 1
                order = _top(cand, cnt, k)
                for r in range(order.shape[0]):
                    msgk[ln, j, r] = cand[order[r]]
                    mbl[ln, j, r] = ca[order[r]]
                    mbr[ln, j, r] = cb[order[r]]
        # the k best at the root
        root = pre[o]
        cnt = 0
        for i in range(K):
            for r in range(k):
                v = insk[root - o, i, r]
                if v == -np.inf:
                    break
                cand[cnt] = v + root_score[i]
                ca[cnt] = i
                cb[cnt] = r
                cnt += 1
        order = _top(cand, cnt, k)
        lab = np.empty(T, dtype=np.int64)
        rk = np.empty(T, dtype=np.int64)
        for r in range(order.shape[0]):
            scores[b, r] = cand[order[r]]
            lab[root - o] = ca[order[r]]
            rk[root - o] = cb[order[r]]
            for t in range(T):
                n = pre[o + t]
                ln = n - o
                i = lab[ln]
                rr = rk[ln]
                labels[r, n] = i
                # unwind the merges of n's children, last child first
                for q in range(cptr[n + 1] - 1, cptr[n] - 1, -1):
                    lc = cidx[q] - o
                    bb = schild[lc, i, rr]
                    rr = sprev[lc, i, rr]
                    lab[lc] = mbl[lc, i, bb]
                    rk[lc] = mbr[lc, i, bb]
    return scores, labels
