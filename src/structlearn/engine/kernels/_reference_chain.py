"""Plain NumPy twin of the chain kernels (log space, one sequence at a time). Used only by tests."""
import numpy as np
from scipy.special import logsumexp


def _seq_trans(trans, o, T):
    return np.broadcast_to(trans, (T, *trans.shape)) if trans.ndim == 2 else trans[o:o + T]


def log_partition_and_marginals(unary, trans, start, end, offsets):
    N, K = unary.shape
    B = len(offsets) - 1
    log_z = np.zeros(B)
    um = np.zeros((N, K))
    with np.errstate(invalid="ignore", divide="ignore"):
        for b in range(B):
            o, T = offsets[b], offsets[b + 1] - offsets[b]
            if T == 0:
                continue
            tr = _seq_trans(trans, o, T)
            a = np.empty((T, K))
            be = np.empty((T, K))
            a[0] = start + unary[o]
            for t in range(1, T):
                a[t] = unary[o + t] + logsumexp(a[t - 1][:, None] + tr[t - 1], axis=0)
            be[T - 1] = end
            for t in range(T - 2, -1, -1):
                be[t] = logsumexp(tr[t] + unary[o + t + 1] + be[t + 1], axis=1)
            log_z[b] = logsumexp(a[T - 1] + end)
            if log_z[b] > -np.inf:
                um[o:o + T] = np.exp(a + be - log_z[b])
    return log_z, np.nan_to_num(um, nan=0.0)


def viterbi_score(unary, trans, start, end, offsets):
    B = len(offsets) - 1
    out = np.zeros(B)
    for b in range(B):
        o, T = offsets[b], offsets[b + 1] - offsets[b]
        if T == 0:
            continue
        tr = _seq_trans(trans, o, T)
        d = start + unary[o]
        for t in range(1, T):
            d = unary[o + t] + np.max(d[:, None] + tr[t - 1], axis=0)
        out[b] = np.max(d + end)
    return out
