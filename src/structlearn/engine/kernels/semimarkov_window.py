"""The segment window of the semi-Markov kernels, written once (model, duration tables and
normalisation: :mod:`structlearn.engine.kernels.semimarkov`).

Every semi-Markov recursion visits, for an anchor token t, the window of segments that end at t
(``[t-d+1, t]``: forward, posteriors, k-best, sampling) or start at t (``[t, t+d-1]``: backward),
d = 1 … dmax. :func:`window` computes, in log space, their scores w(s, e, k) (the unary sum is
accumulated as d grows, exact on long sequences and without special cases for -inf entries), the
normalised log-weights v = w + left[s, k] + right[e, k] - Σ inc[u] over the window's tokens other than
t, and the best d per label. :func:`normalise` is the per-token normaliser of the forward (the K×K
stage of the two-stage recursion is :func:`structlearn.engine.semirings.reduce_pair`; with time-varying
transitions a boundary row that has its own matrix takes :func:`reduce_row`, see :func:`varies`).

The segment term of w is :func:`segment_term`, chosen at compile time by the type of ``segment``: a
(N, D, K) array of segment potentials, or the semi-CRF's feature tuple (its begin / last / span /
all-caps terms, looked up on the fly so no (N, D, K) array is built).
"""
import math

import numpy as np
from numba import njit, types
from numba.extending import overload

from ..semirings import LOG


MIDDLE = 0
FIRST = 1
LAST = 2
SINGLE = 3

NEG_INF = -np.inf


@njit(cache=True, inline="always")
def table(s, e, T):
    """Duration table c of segment [s, e] in a sequence of length T (MIDDLE, FIRST, LAST, SINGLE)."""
    if s == 0:
        return SINGLE if e == T - 1 else FIRST
    return LAST if e == T - 1 else MIDDLE


@njit(cache=True, inline="always")
def sequence(offsets, b):
    """(first row o, length T) of sequence b of a packed batch."""
    o = offsets[b]
    return o, offsets[b + 1] - o


@njit(cache=True, inline="always")
def window_scratch(D, K):
    """Scratch arrays (acc (K,), w (D, K), v (D, K), mx (K,), bd (K,) int32) of :func:`window`."""
    return np.empty(K), np.empty((D, K)), np.empty((D, K)), np.empty(K), np.empty(K, dtype=np.int32)


def segment_term(segment, o, s, e, d, k):
    """The segment potential of the k-segment [s, e] (d = e - s + 1) of the sequence at row o.

    ``segment`` is a float64 (N, D, K) array (→ segment[o+e, d-1, k]) or the semi-CRF feature tuple
    (begin (N, K), last (N, K), span_id (N, D) int64, span_z (S+1, K), caps (N, D) bool, caps_w (K,),
    use_span, use_caps (int64 0/1)) (→ begin[o+s, k] + last[o+e, k] + span_z[span_id[o+e, d-1], k]
    + caps_w[k]·caps[o+e, d-1]). span_z is the span weights with a last row of zeros, which id -1 (no
    span feature) selects; with use_span / use_caps 0, span_id / caps may be (1, 1) dummies holding -1
    / False (the row and column are multiplied by the flag). No branches: a branch inside an inlined
    helper called per (d, k) keeps its reference counts in the loop. Numba only: compiled per type by
    the overload below."""
    raise NotImplementedError("segment_term is called from Numba kernels only")


@overload(segment_term, inline="always")
def _segment_term(segment, o, s, e, d, k):
    if isinstance(segment, types.Array):
        def dense(segment, o, s, e, d, k):
            return segment[o + e, d - 1, k]
        return dense
    if isinstance(segment, types.BaseTuple):
        def features(segment, o, s, e, d, k):
            us = segment[6]
            uc = segment[7]
            return (segment[0][o + s, k] + segment[1][o + e, k]
                    + segment[3][segment[2][(o + e) * us, (d - 1) * us], k]
                    + segment[5][k] * segment[4][(o + e) * uc, (d - 1) * uc])
        return features
    return None


def label_dmax(lmax, k, dmax):
    """The longest segment of label k in a window of ``dmax``: min(lmax[k], dmax), or dmax when
    ``lmax`` is None (every label the same). Numba only: compiled per type by the overload below."""
    raise NotImplementedError("label_dmax is called from Numba kernels only")


@overload(label_dmax, inline="always")
def _label_dmax(lmax, k, dmax):
    if lmax is None or isinstance(lmax, (types.NoneType, types.Omitted)):
        return lambda lmax, k, dmax: dmax
    return lambda lmax, k, dmax: min(lmax[k], dmax)


@njit(cache=True, inline="always")
def window(unary, durations, segment, has_segment, inc, left, right, use_left, use_right, keep_w, o,
           T, t, dmax, at_end, k0, k1, acc, w, v, mx, bd, lmax=None):
    """The window of token t (sequence rows o … o+T-1) for labels k0 <= k < k1, d = 1 … dmax.

    Segment [s, e] = [t-d+1, t] if ``at_end`` else [t, t+d-1]. Writes w[d-1, k] = w(s, e, k) (only
    when ``keep_w``), v[d-1, k] = w(s, e, k) + left[o+s, k] (if ``use_left``) + right[o+e, k] (if
    ``use_right``) - Σ inc[o+u] over the tokens u of [s, e] other than t (w includes
    :func:`segment_term` when ``has_segment``), and mx[k] = max_d v,
    bd[k] = its first arg max d (1 when all are -inf). ``acc`` (K,) is scratch. With ``lmax`` (int
    (K,), the semi-CRF's longest segment per label) label k stops at d = min(lmax[k], dmax); v and w
    beyond it are left unwritten.
    """
    for k in range(k0, k1):
        acc[k] = 0.0
        mx[k] = NEG_INF
        bd[k] = 1
    nacc = 0.0
    for d in range(1, dmax + 1):
        if at_end:
            s = t - d + 1
            e = t
            u = s
        else:
            s = t
            e = t + d - 1
            u = e
        if d > 1:
            nacc += inc[o + u]
        c = table(s, e, T)  # (indexed, not viewed: a view per step costs a reference count)
        for k in range(k0, k1):
            if d > label_dmax(lmax, k, dmax):
                continue
            acc[k] += unary[o + u, k]
            x = acc[k] + durations[c, d - 1, k]
            if has_segment:
                x += segment_term(segment, o, s, e, d, k)
            if keep_w:
                w[d - 1, k] = x
            if use_left:
                x += left[o + s, k]
            if use_right:
                x += right[o + e, k]
            x -= nacc
            v[d - 1, k] = x
            if x > mx[k]:
                mx[k] = x
                bd[k] = d


@njit(cache=True, inline="always")
def window_lse(v, n, k, m):
    """log Σ_{d<n} exp(v[d, k]) given its maximum m (-inf if m is)."""
    if m == NEG_INF:
        return m
    s = 0.0
    for d in range(n):
        s += math.exp(v[d, k] - m)
    return m + math.log(s)


@njit(cache=True, inline="always")
def normalise(at, alpha, inc, o, t, K):
    """inc[o+t] = max_k at[k] (0 when every label is impossible), alpha[o+t] = at - inc[o+t];
    returns inc[o+t]."""
    m = NEG_INF
    for k in range(K):
        if at[k] > m:
            m = at[k]
    if m == NEG_INF:
        m = 0.0
    inc[o + t] = m
    for k in range(K):
        alpha[o + t, k] = at[k] - m
    return m


@njit(cache=True, inline="always")
def mark(labels, starts, o, s, e, k):
    """Write the k-segment [s, e] of a traced segmentation into rows ``labels``, ``starts``."""
    for u in range(s, e + 1):
        labels[o + u] = k
    starts[o + s] = True


#: The stand-ins of the time-varying transitions when every boundary uses the stationary matrix: a
#: (0, 1, 1) ``tv`` and a (0,) ``tv_on`` (see :func:`varies`).
NO_TV = np.zeros((0, 1, 1))
NO_TV_ON = np.zeros(0, dtype=np.bool_)


@njit(cache=True, inline="always")
def varies(tv_on, r):
    """Whether the segment boundary after token row r (a segment ending at r, the next starting at r + 1)
    has its own transition matrix ``tv[r]`` instead of the stationary one. ``tv_on`` is (N,) bool with
    time-varying transitions and (0,) without (:data:`NO_TV_ON`), so the stationary kernels pay one
    length test per boundary."""
    return tv_on.shape[0] > 0 and tv_on[r]


@njit(cache=True)
def reduce_row(semiring, V, rv, tv, r, k, K, into):
    """The K×K stage at a boundary with its own matrix ``tv[r]`` ("from, to"), exact in log space:
    ``into`` True: (⊕_j V[rv, j] ⊗ tv[r, j, k], arg) (transitions into k, forward);
    ``into`` False: (⊕_j tv[r, k, j] ⊗ V[rv, j], arg) (transitions out of k, backward).
    -inf and arg 0 when every term is -inf (:func:`structlearn.engine.semirings.reduce_pair`'s contract)."""
    m = NEG_INF
    arg = 0
    for j in range(K):
        x = V[rv, j] + (tv[r, j, k] if into else tv[r, k, j])
        if x > m:
            m = x
            arg = j
    if semiring != LOG or m == NEG_INF:
        return m, arg
    s = 0.0
    for j in range(K):
        s += math.exp(V[rv, j] + (tv[r, j, k] if into else tv[r, k, j]) - m)
    return m + math.log(s), arg
