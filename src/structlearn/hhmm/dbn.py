"""The hierarchical HMM as a dynamic Bayesian network (Murphy & Paskin 2001 §4, Fig. 2): representation (b) of
:mod:`structlearn.hhmm.model`, an independent check of the flattened chain."""
from collections import namedtuple

import numpy as np

from .model import log_sum_exp

__all__ = ["HHMMDBN", "DenseDBN", "dense_dbn"]


class HHMMDBN:
    r"""The HHMM as a dynamic Bayesian network (Murphy & Paskin 2001 §4, Fig. 2).

    Per level d = 1..D: Q^d_t takes the index of a child within the sub-model selected by the context
    Q^{1:d-1}_t (or the value ``None`` below a production state; such padded levels always have
    F^d_t = 1), F^d_t ∈ {0, 1}. CPDs are tables keyed by the context tuple:

    - ``start[d][ctx]`` (K,): P(Q^d_t = j | F^d_{t-1} = 1 or t = 1, ctx) — the vertical distribution π;
    - ``trans[d][ctx]`` (K, K): Ã(i, j) = P(Q^d_t = j | Q^d_{t-1} = i, F^{d+1}_{t-1} = 1,
      F^d_{t-1} = 0, ctx) — the *rescaled* automaton transitions Ã(i, j) = a(i, j) / (1 - e(i))
      (Murphy & Paskin 2001 §4.1: the DBN never enters the end state; a row with e(i) = 1 is never used
      and is set to 0);
      Q^d_t = Q^d_{t-1} when F^{d+1}_{t-1} = 0;
    - ``end[d][ctx]`` (K,): P(F^d_t = 1 | Q^d_t = i, F^{d+1}_t = 1, ctx) = e(i); F^d_t = 0 when
      F^{d+1}_t = 0 (F^{D+1} ≡ 1);
    - the root (level 1 parent) is called once: F^1_t = 1 with t < T has probability 0 of continuing.
      ``clamp_final`` (``finish="all"``) clamps all F_T = 1.

    :meth:`log_likelihood` runs a generic forward pass over the joint slice (Q_t, F_t) using only these
    CPDs (time O(T·J²), J = number of joint slice values) — an independent check of the flattened HMM.
    """

    def __init__(self, depth, start, trans, end, production, clamp_final):
        self.depth = depth
        self.start, self.trans, self.end = start, trans, end
        self.production = production  # full context tuple -> production index
        self.clamp_final = clamp_final

    def joint_states(self):
        """All slice values (Q tuple padded with None, F tuple) with non-zero probability."""
        out = []
        for q in self.production:
            k = len(q)
            qq = q + (None,) * (self.depth - k)
            for cut in range(k + 1):  # F^d = 1 for d > cut
                out.append((qq, tuple(int(d > cut) for d in range(1, self.depth + 1))))
        return out

    def _log_q_given(self, q, prev_q, prev_f):
        """log P(Q_t = q | Q_{t-1}, F_{t-1}) (prev_q None: first slice) as a product over levels."""
        lp = 0.0
        D = self.depth
        for d in range(1, D + 1):
            ctx = tuple(q[:d - 1])
            if q[d - 1] is None:
                continue  # padded level: deterministic given the context
            if prev_q is None:
                p = self.start[d][ctx][q[d - 1]]
            else:
                f_self = prev_f[d - 1]
                f_below = prev_f[d] if d < D else 1
                if d == 1 and f_self == 1:
                    return -np.inf  # the root has finished: nothing is emitted after
                if f_self == 1:
                    p = self.start[d][ctx][q[d - 1]]
                elif tuple(prev_q[:d]) != tuple(q[:d - 1]) + (prev_q[d - 1],) or prev_q[d - 1] is None:
                    return -np.inf  # an unfinished level keeps its context
                elif f_below == 1:
                    p = self.trans[d][ctx][prev_q[d - 1], q[d - 1]]
                else:
                    p = 1.0 if prev_q[d - 1] == q[d - 1] else 0.0
            if p <= 0:
                return -np.inf
            lp += np.log(p)
        return lp

    def _log_f_given(self, q, f):
        lp = 0.0
        D = self.depth
        for d in range(D, 0, -1):
            below = f[d] if d < D else 1
            if q[d - 1] is None:
                if f[d - 1] != 1:
                    return -np.inf
                continue
            e = self.end[d][tuple(q[:d - 1])][q[d - 1]] if below == 1 else 0.0
            p = e if f[d - 1] == 1 else 1.0 - e
            if p <= 0:
                return -np.inf
            lp += np.log(p)
        return lp

    def log_likelihood(self, log_emission):
        """log P(o_1:T) from the CPDs alone. ``log_emission`` (T, P): log b_p(o_t) per production."""
        J = self.joint_states()
        T = log_emission.shape[0]
        if T == 0:
            return 0.0
        prod = np.array([self.production[tuple(x for x in q if x is not None)] for q, _ in J])
        lf = np.array([self._log_f_given(q, f) for q, f in J])
        l0 = np.array([self._log_q_given(q, None, None) for q, _ in J]) + lf
        tr = np.array([[self._log_q_given(q, pq, pf) for q, _ in J] for pq, pf in J]) + lf[None, :]
        alpha = l0 + log_emission[0, prod]
        for t in range(1, T):
            alpha = log_sum_exp(alpha[:, None] + tr, axis=0) + log_emission[t, prod]
        if self.clamp_final:
            final = np.array([0.0 if all(f) else -np.inf for _, f in J])
            alpha = alpha + final
        return float(log_sum_exp(alpha))


#: Dense, context-indexed CPD tables of the DBN over padded level domains (what the junction tree and
#: the factored frontier run on); see :func:`dense_dbn`.
DenseDBN = namedtuple("DenseDBN", ["dims", "stack_cfg", "cfg_stack", "stack_prod", "log_prior", "fcpd",
                                   "qcpd", "ctx_sub", "inst_grid"])


def dense_dbn(h):
    r"""The DBN of Murphy & Paskin 2001 §4 as dense log-space tables over padded level domains.

    Level d (1..D) takes values 0..n_d - 1: the child positions (n_d = the largest number of children
    of a sub-model called at level d) plus, when some production state sits above level d, a last value
    *none* (the padded levels below a production state: entered with probability 1, never moving,
    always finished). Stack values are flat row-major indices over ``dims`` = (n_1, …, n_D).

    Parameters
    ----------
    h : :class:`~structlearn.hhmm.model.Hierarchy`

    Returns
    -------
    DenseDBN
        ``dims`` (D,) int64; ``stack_cfg`` (nQ,) configuration of every stack value (-1: none);
        ``cfg_stack`` (S,); ``stack_prod`` (nQ,) production index (-1: not a configuration);
        ``log_prior`` (nQ,) log P(Q_1); ``fcpd[d-1]`` (n_1, …, n_d, 2, 2): log P(F^d_t = f | Q^{1:d}_t,
        F^{d+1}_t = f') at ``[q_1..q_d, f, f']`` (F^{D+1} ≡ 1: the f' = 0 slice of the last level is
        -inf); ``qcpd[d-1]`` (n_1, …, n_{d-1}, n_d, 2, 2, n_d): log P(Q^d_{t+1} = j | Q^{1:d-1}_{t+1},
        Q^d_t = i, F^d_t = f, F^{d+1}_t = f') at ``[ctx, i, f, f', j]`` — the vertical entry π (f = 1),
        the end-rescaled transition Ã = a / (1 - e) (f = 0, f' = 1) or a copy (f' = 0) (seed §4.1; the
        root never re-enters, so its f = 1 slice is -inf); ``ctx_sub[d-1]`` (n_1·…·n_{d-1},) the
        sub-model called in every level-d context (-1: padded or impossible); ``inst_grid`` (U,) the flat
        index of every instance's position prefix in its level's grid.

    Notes
    -----
    Cost: time and memory O(Σ_d n_1·…·n_d·n_d).
    """
    D = h.depth
    U = len(h.instance_paths)
    pos = [None] * U
    for u in range(U):
        par = int(h._inst_parent[u])
        pos[u] = (pos[par] if par >= 0 else ()) + (int(h._inst_pos[u]),)
    # level-d contexts (length d-1 prefixes): the root, abstract instances, production instances
    kmax = [0] * D
    pad = [False] * D
    kmax[0] = len(h.children[0])
    for u in range(U):
        lev = int(h._inst_level[u])
        name = h.instance_paths[u][-1]
        if name in h._sub_index:
            kmax[lev] = max(kmax[lev], len(h.children[h._sub_index[name]]))
        else:
            for lv in range(lev, D):
                pad[lv] = True
    dims = np.array([kmax[d] + pad[d] for d in range(D)], dtype=np.int64)
    none = [kmax[d] if pad[d] else -1 for d in range(D)]
    neg = -np.inf
    lstart = [np.full(tuple(dims[:d + 1]), neg) for d in range(D)]
    ltrans = [np.full(tuple(dims[:d + 1]) + (dims[d],), neg) for d in range(D)]
    lend = [np.full(tuple(dims[:d + 1]), neg) for d in range(D)]
    l1m = [np.full(tuple(dims[:d + 1]), neg) for d in range(D)]
    ctx_sub = [np.full(int(np.prod(dims[:d])), -1, dtype=np.int64) for d in range(D)]

    def put(d, ctx, m):
        s, a, e = h.start[m], h.trans[m], h.end[m]
        K = len(s)
        with np.errstate(divide="ignore", invalid="ignore"):
            lstart[d][ctx + (slice(0, K),)] = np.log(s)
            at = np.where((1 - e)[:, None] > 0, a / (1 - e)[:, None], 0.0)
            ltrans[d][ctx + (slice(0, K), slice(0, K))] = np.log(at)
            lend[d][ctx + (slice(0, K),)] = np.log(e)
            l1m[d][ctx + (slice(0, K),)] = np.log1p(-e)
        ctx_sub[d][np.ravel_multi_index(ctx, dims[:d]) if d else 0] = m

    def put_pad(d, ctx):
        n = none[d]
        lstart[d][ctx + (n,)] = 0.0
        ltrans[d][ctx + (n, n)] = 0.0
        lend[d][ctx + (n,)] = 0.0

    put(0, (), 0)
    for u in range(U):
        lev = int(h._inst_level[u])
        if lev >= D:
            continue
        name = h.instance_paths[u][-1]
        if name in h._sub_index:
            put(lev, pos[u], h._sub_index[name])
        else:
            ctx = pos[u]
            for lv in range(lev, D):
                put_pad(lv, ctx)
                ctx = ctx + (none[lv],)
    fcpd, qcpd = [], []
    for d in range(D):
        f = np.full(tuple(dims[:d + 1]) + (2, 2), neg)
        f[..., 1, 1] = lend[d]
        f[..., 0, 1] = l1m[d]
        if d < D - 1:
            f[..., 0, 0] = 0.0
        fcpd.append(f)
        n = dims[d]
        q = np.full(tuple(dims[:d]) + (n, 2, 2, n), neg)
        if d > 0:
            q[..., 1, 1, :] = lstart[d][(slice(None),) * d + (None,)]
        q[..., 0, 1, :] = ltrans[d]
        if d < D - 1:
            q[..., 0, 0, :] = np.where(np.eye(n, dtype=bool), 0.0, neg)
        qcpd.append(q)
    log_prior = np.zeros(tuple(dims))
    for d in range(D):
        log_prior = log_prior + lstart[d][(Ellipsis,) + (None,) * (D - d - 1)]
    nQ = int(np.prod(dims))
    S = h.n_configs
    cfg_stack = np.empty(S, dtype=np.int64)
    for s, u in enumerate(h._cfg_inst):
        p = pos[u]
        full = p + tuple(none[lv] for lv in range(len(p), D))
        cfg_stack[s] = np.ravel_multi_index(full, dims)
    stack_cfg = np.full(nQ, -1, dtype=np.int64)
    stack_cfg[cfg_stack] = np.arange(S)
    stack_prod = np.full(nQ, -1, dtype=np.int64)
    stack_prod[cfg_stack] = h._cfg_prod
    inst_grid = np.array([np.ravel_multi_index(pos[u], dims[:len(pos[u])]) for u in range(U)],
                         dtype=np.int64)
    return DenseDBN(dims, stack_cfg, cfg_stack, stack_prod, log_prior.ravel(), fcpd, qcpd, ctx_sub,
                    inst_grid)
