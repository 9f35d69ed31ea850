"""Plain NumPy twin of the tree kernels (log space, one tree at a time). Used only by tests.

Written differently from the Numba kernels on purpose: nodes are ordered by depth (computed by
repeated relaxation), and the context of each child is summed over its siblings explicitly
(O(degree²) per node) instead of with prefix/suffix sums.
"""
import numpy as np
from scipy.special import logsumexp


def _depths(par):
    T = par.shape[0]
    depth = np.where(par < 0, 0, -1)
    for _ in range(T):
        todo = (depth < 0) & (par >= 0)
        if not todo.any():
            break
        ok = todo & (depth[np.maximum(par, 0)] >= 0)
        depth[ok] = depth[par[ok]] + 1
    return depth


def tree_reference(unary, edge, parent, root_score, offsets):
    """log Z (B,), max score (B,), unary marginals (N, K), edge marginals (N, K, K).

    ``parent`` local (-1 for roots); ``edge`` (K, K) or (N, K, K).
    """
    N, K = unary.shape
    B = len(offsets) - 1
    log_z = np.zeros(B)
    best = np.zeros(B)
    um = np.zeros((N, K))
    em = np.zeros((N, K, K))
    with np.errstate(invalid="ignore", divide="ignore"):
        for b in range(B):
            o, T = offsets[b], offsets[b + 1] - offsets[b]
            if T == 0:
                continue
            par = np.asarray(parent[o:o + T])
            u = unary[o:o + T]
            ed = np.broadcast_to(edge, (T, K, K)) if edge.ndim == 2 else edge[o:o + T]
            depth = _depths(par)
            up = np.argsort(-depth, kind="stable")   # deepest first
            root = int(np.flatnonzero(par < 0)[0])
            children = [np.flatnonzero(par == n) for n in range(T)]
            ins = np.zeros((T, K))
            msg = np.zeros((T, K))
            ins_m = np.zeros((T, K))
            msg_m = np.zeros((T, K))
            for n in up:
                ins[n] = u[n] + msg[children[n]].sum(axis=0)
                ins_m[n] = u[n] + msg_m[children[n]].sum(axis=0)
                if par[n] >= 0:
                    msg[n] = logsumexp(ins[n][:, None] + ed[n], axis=0)
                    msg_m[n] = np.max(ins_m[n][:, None] + ed[n], axis=0)
            log_z[b] = logsumexp(ins[root] + root_score)
            best[b] = np.max(ins_m[root] + root_score)
            if log_z[b] == -np.inf:
                continue
            outs = np.zeros((T, K))
            outs[root] = root_score
            for n in up[::-1]:
                p = par[n]
                if p < 0:
                    continue
                others = [c for c in children[p] if c != n]
                ctx = outs[p] + u[p] + msg[others].sum(axis=0)
                outs[n] = logsumexp(ed[n] + ctx[None, :], axis=1)
                em[o + n] = np.exp(ins[n][:, None] + ed[n] + ctx[None, :] - log_z[b])
            um[o:o + T] = np.exp(ins + outs - log_z[b])
    return log_z, best, np.nan_to_num(um, nan=0.0), np.nan_to_num(em, nan=0.0)
