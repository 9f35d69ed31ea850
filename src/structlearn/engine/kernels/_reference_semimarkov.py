"""Plain NumPy twin of :mod:`structlearn.engine.kernels.semimarkov`, used only by the tests.

Written for clarity, not speed: per sequence it materialises the table of segment scores
W[s, d-1, k] = w(s, s+d-1, k) (T, D, K) and runs the two-stage recursion with ``np.logaddexp``; token
marginals are sums of segment marginals over covered tokens (a different route from the kernels'
start/end differences). Same inputs as the kernels: ``durations`` (4, D, K) holds the MIDDLE, FIRST,
LAST and SINGLE tables.
"""
import numpy as np


def _segment_table(unary, durations, segment, T):
    """W[s, d-1, k] for one sequence (rows of ``unary``/``segment`` already sliced); -inf past T."""
    D, K = durations.shape[1:]
    W = np.full((T, D, K), -np.inf)
    for s in range(T):
        for d in range(1, min(D, T - s) + 1):
            e = s + d - 1
            c = (3 if e == T - 1 else 1) if s == 0 else (2 if e == T - 1 else 0)
            w = unary[s:e + 1].sum(axis=0) + durations[c, d - 1]
            if segment is not None:
                w = w + segment[e, d - 1]
            W[s, d - 1] = w
    return W


def _reduce(x, axis, semiring):
    if semiring == "max":
        return np.max(x, axis=axis)
    m = np.max(x, axis=axis, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m_safe), axis=axis)) + np.squeeze(m_safe, axis=axis)
    return out


def _sequence(unary, durations, transition, start, end, segment, semiring):
    """One sequence: (α*, α, log Z) and, in the LOG semiring with log Z > -inf, (β_end, β_start)."""
    T, K = unary.shape
    D = durations.shape[1]
    W = _segment_table(unary, durations, segment, T)
    a_star = np.full((T, K), -np.inf)
    a = np.full((T, K), -np.inf)
    for t in range(T):
        a_star[t] = start if t == 0 else _reduce(a[t - 1][:, None] + transition, 0, semiring)
        cands = np.full((D, K), -np.inf)
        for d in range(1, min(D, t + 1) + 1):
            cands[d - 1] = a_star[t - d + 1] + W[t - d + 1, d - 1]
        a[t] = _reduce(cands, 0, semiring)
    log_z = _reduce(a[T - 1] + end, 0, semiring)
    if semiring != "log" or log_z == -np.inf:
        return W, a_star, a, log_z, None, None
    b_end = np.full((T, K), -np.inf)
    b_start = np.full((T, K), -np.inf)
    for t in range(T - 1, -1, -1):
        b_end[t] = end if t == T - 1 else _reduce(transition + b_start[t + 1][None, :], 1, "log")
        cands = np.full((D, K), -np.inf)
        for d in range(1, min(D, T - t) + 1):
            cands[d - 1] = W[t, d - 1] + b_end[t + d - 1]
        b_start[t] = _reduce(cands, 0, "log")
    return W, a_star, a, log_z, b_end, b_start


def _sequences(unary, lengths, segment):
    """Yield (o, T, unary rows, segment rows or None) of every non-empty sequence."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    for b in range(len(lengths)):
        o, T = offsets[b], int(lengths[b])
        if T:
            yield b, o, T, unary[o:o + T], None if segment is None else segment[o:o + T]


def messages(unary, durations, transition, start, end, lengths, segment=None):
    """Unnormalised packed messages α, α*, β_end, β_start (N, K) each (LOG semiring; β rows stay
    -inf for an infeasible sequence)."""
    unary = np.asarray(unary, dtype=float)
    out = [np.full(unary.shape, -np.inf) for _ in range(4)]
    for _, o, T, u, seg in _sequences(unary, lengths, segment):
        _, a_star, a, _, b_end, b_start = _sequence(u, durations, transition, start, end, seg, "log")
        for x, v in zip(out, (a, a_star, b_end, b_start)):
            if v is not None:
                x[o:o + T] = v
    return tuple(out)


def forward_backward(unary, durations, transition, start, end, lengths, segment=None,
                     semiring="log"):
    """Return log Z (B,) and, for ``semiring="log"``, token (N, K), edge (N, K, K) and segment
    (N, D, K) marginals (``None`` for ``"max"``)."""
    unary = np.asarray(unary, dtype=float)
    N, K = unary.shape
    D = durations.shape[1]
    log_z = np.zeros(len(lengths))
    token = np.zeros((N, K))
    edge = np.zeros((N, K, K))
    seg_marg = np.zeros((N, D, K))
    for b, o, T, u, seg in _sequences(unary, lengths, segment):
        W, a_star, a, log_z[b], b_end, b_start = _sequence(u, durations, transition, start, end, seg,
                                                           semiring)
        if b_end is None:
            continue
        for s in range(T):
            for d in range(1, min(D, T - s) + 1):
                e = s + d - 1
                p = np.exp(a_star[s] + W[s, d - 1] + b_end[e] - log_z[b])
                seg_marg[o + e, d - 1] = p
                token[o + s:o + e + 1] += p
        for n in range(T - 1):
            edge[o + n] = np.exp(a[n][:, None] + transition + b_start[n + 1][None, :] - log_z[b])
    if semiring != "log":
        return log_z, None, None, None
    return log_z, token, edge, seg_marg
