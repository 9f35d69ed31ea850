"""Per-token steps shared by the passes of the super-label semi-Markov kernels (model, representation
and anchors: :mod:`structlearn.engine.kernels.semimarkov_super`)."""
import math

import numpy as np
from numba import njit, uint64

from .semimarkov_window import NEG_INF

#: an anchor move happens when a factor would leave [exp(-RESCALE), exp(RESCALE)]
RESCALE = 300.0
#: below this a linear-space normaliser is recomputed in log space
TINY = 1e-200
#: factors below exp(FLUSH) are stored as 0 (no subnormal arithmetic; their exact log is kept in lF)
FLUSH = -700.0
#: the posterior check: |Σ_j γ_t(j) - 1| must stay below this at every t
CHECK = 1e-9

DENSE = 0
FACTORED = 1


@njit(cache=True, inline="always")
def ufin(x):
    return 0.0 if x == NEG_INF else x


@njit(cache=True)
def posteriors_from_increments(gd, gamma, o, T, M):
    """γ_{o+t}(j) = Σ_{u<=t} gd[j, u] (clipped to [0, 1]) for t < T; returns whether Σ_j γ_t(j) = 1 within
    :data:`CHECK` at every t (the posterior check of the super-label passes)."""
    ok = True
    run = np.zeros(M)
    for t in range(T):
        tot = 0.0
        for j in range(M):
            run[j] += gd[j, t]
            gamma[o + t, j] = min(max(run[j], 0.0), 1.0)
            tot += run[j]
        if not abs(tot - 1.0) <= CHECK:
            ok = False
    return ok


# The helpers below index with unsigned offsets: Numba wraps negative signed indices around, and that
# per-element test (for any index that is not a plain range variable, e.g. ``ox + c``) keeps LLVM from
# vectorising the loop (measured: 3x slower than the same loop with uint64 indices).
@njit(cache=True, inline="always")
def axpy(alpha, x, ix, ox, y, iy, oy, n):
    """y[iy, oy+c] += alpha · x[ix, ox+c] for c < n."""
    ux = uint64(ox)
    uy = uint64(oy)
    for c in range(n):
        cu = uint64(c)
        y[iy, uy + cu] += alpha * x[ix, ux + cu]


@njit(cache=True, inline="always")
def scal(alpha, x, ix, ox, y, iy, oy, n):
    """y[iy, oy+c] = alpha · x[ix, ox+c] for c < n."""
    ux = uint64(ox)
    uy = uint64(oy)
    for c in range(n):
        cu = uint64(c)
        y[iy, uy + cu] = alpha * x[ix, ux + cu]


@njit(cache=True, inline="always")
def fill(y, iy, oy, n, v):
    """y[iy, oy+c] = v for c < n."""
    uy = uint64(oy)
    for c in range(n):
        y[iy, uy + uint64(c)] = v


@njit(cache=True)
def shift(F, lF, j, lo, hi, delta):
    """Move the anchor of state j by ``delta``: lF[j, lo:hi] -= delta and F = exp(lF) there (by one
    multiplication while exp(-delta) is in range; dead entries, lF = -inf, stay 0)."""
    if abs(delta) < 600.0:
        f = math.exp(-delta)
        for p in range(lo, hi):
            lF[j, p] -= delta
            F[j, p] = F[j, p] * f if lF[j, p] > FLUSH else 0.0
    else:
        for p in range(lo, hi):
            lF[j, p] -= delta
            F[j, p] = math.exp(lF[j, p]) if lF[j, p] > FLUSH else 0.0


@njit(cache=True)
def slide(F, lF, run, top, topos, j, lo, hi):
    """The window of state j is now [lo, hi): when its largest factor left it, find the new one, and lower
    the anchor when every factor fell below exp(-RESCALE). Returns the anchor move (0.0 if none): every
    other quantity that holds the factors of the window must be multiplied by exp(-move)."""
    if top[j] == NEG_INF or (topos[j] >= lo and topos[j] < hi):
        return 0.0
    if hi > lo and lF[j, hi - 1] >= -0.5 * RESCALE:
        # the newest factor is a lower bound of the window's largest that needs no lowering
        top[j] = lF[j, hi - 1]
        topos[j] = hi - 1
        return 0.0
    best = NEG_INF
    pos = -1
    for p in range(lo, hi):
        if lF[j, p] > best:
            best = lF[j, p]
            pos = p
    top[j] = best
    topos[j] = pos
    if best > NEG_INF and best < -RESCALE:
        run[j] += best
        shift(F, lF, j, lo, hi, best)
        top[j] = 0.0
        return best
    return 0.0


@njit(cache=True)
def add_factor(F, lF, run, top, topos, j, p, lo, hi, live):
    """Add the factor of position p (start in the forward, end in the backward) to state j's window
    [lo, hi) (p excluded): lF[j, p] = -run[j], raising the anchor when it would exceed exp(RESCALE) or
    the window holds no live factor. Returns the anchor move (0.0 if none), as :func:`slide`."""
    if not live:
        F[j, p] = 0.0
        lF[j, p] = NEG_INF
        return 0.0
    x = -run[j]
    moved = 0.0
    if top[j] == NEG_INF or x > RESCALE:
        run[j] += x
        shift(F, lF, j, lo, hi, x)
        top[j] -= x
        moved = x
        x = 0.0
    F[j, p] = math.exp(x) if x > FLUSH else 0.0
    lF[j, p] = x
    if x > top[j]:
        top[j] = x
        topos[j] = p
    return moved


@njit(cache=True, inline="always")
def anchor(F, lF, run, top, topos, j, p, lo, hi, live):
    """The per-token anchor step of state j: the window is now [lo, hi) and position p is added
    (:func:`slide`, then :func:`add_factor`), with the common cases inline and the helpers called only
    when an anchor may move (a call with array arguments costs reference counts). Returns the move."""
    mv = 0.0
    if top[j] > NEG_INF and not (topos[j] >= lo and topos[j] < hi):
        if hi > lo and lF[j, hi - 1] >= -0.5 * RESCALE:
            top[j] = lF[j, hi - 1]
            topos[j] = hi - 1
        else:
            mv = slide(F, lF, run, top, topos, j, lo, hi)
    x = -run[j]
    if live and top[j] > NEG_INF and x <= RESCALE:
        F[j, p] = math.exp(x) if x > FLUSH else 0.0
        lF[j, p] = x
        if x > top[j]:
            top[j] = x
            topos[j] = p
        return mv
    return mv + add_factor(F, lF, run, top, topos, j, p, lo, hi, live)


@njit(cache=True, inline="always")
def factor_state(M):
    """Per-sequence anchor state: run (M,), top (M,), topos (M,) int64, blocked (M,) int64."""
    return np.zeros(M), np.full(M, NEG_INF), np.full(M, -1, dtype=np.int64), np.empty(M, dtype=np.int64)




@njit(cache=True, inline="always")
def scale_of(move):
    """exp(-move), the factor that an anchor move applies to stored factors (1.0 for no move)."""
    return 1.0 if move == 0.0 else math.exp(-move)


@njit(cache=True, inline="always")
def ring_axpy(alpha, x, ix, ox, ring, ir, start, n):
    """ring[ir, (start + c) mod W] += alpha · x[ix, ox + c] for c < n <= W (W = ring.shape[1]; the
    slots of consecutive durations), as two contiguous runs."""
    W = ring.shape[1]
    n1 = min(n, W - start)
    ux = uint64(ox)
    us = uint64(start)
    uw = uint64(W)
    for c in range(n1):
        cu = uint64(c)
        ring[ir, us + cu] += alpha * x[ix, ux + cu]
    for c in range(n1, n):
        cu = uint64(c)
        ring[ir, us + cu - uw] += alpha * x[ix, ux + cu]


@njit(cache=True, inline="always")
def ring_axpy2(alpha, x, ix, ox, z, iz, oz, ring, ir, start, n):
    """ring[ir, (start + c) mod W] += alpha · x[ix, ox + c] · z[iz, oz + c] for c < n <= W."""
    W = ring.shape[1]
    n1 = min(n, W - start)
    ux = uint64(ox)
    uz = uint64(oz)
    us = uint64(start)
    uw = uint64(W)
    for c in range(n1):
        cu = uint64(c)
        ring[ir, us + cu] += alpha * x[ix, ux + cu] * z[iz, uz + cu]
    for c in range(n1, n):
        cu = uint64(c)
        ring[ir, us + cu - uw] += alpha * x[ix, ux + cu] * z[iz, uz + cu]


@njit(cache=True, inline="always")
def ring_add(alpha, ring, ir, start, n):
    """ring[ir, (start + c) mod W] += alpha for c < n <= W (two contiguous runs)."""
    W = ring.shape[1]
    n1 = min(n, W - start)
    us = uint64(start)
    uw = uint64(W)
    for c in range(n1):
        ring[ir, us + uint64(c)] += alpha
    for c in range(n1, n):
        ring[ir, us + uint64(c) - uw] += alpha


@njit(cache=True)
def ring_size(D):
    """The smallest power of two >= D + 1 (a ring of end or start slots)."""
    W = 1
    while W < D + 1:
        W *= 2
    return W


#: smallest per-token normaliser the linear passes accept; below it a sequence is recomputed exactly
ZMIN = 1e-290


@njit(cache=True)
def combine(S, c, w, M):
    """The per-token normaliser from per-state window sums S[j] and log end factors c[j]: fills
    w[j] = exp(c[j] - cmax) (0 where S[j] = 0) and returns (cmax, Z = Σ_j S[j] w[j]); cmax = -inf when
    no state has a window term."""
    cmax = NEG_INF
    for j in range(M):
        if S[j] > 0.0 and c[j] > cmax:
            cmax = c[j]
    Z = 0.0
    if cmax == NEG_INF:
        return cmax, Z
    for j in range(M):
        w[j] = math.exp(c[j] - cmax) if S[j] > 0.0 else 0.0
        Z += S[j] * w[j]
    return cmax, Z


@njit(cache=True, inline="always")
def idle_scale(c, top, M):
    """The normaliser of a token at which no segment ends (forward) or starts (backward): the largest
    log end factor c[j] of a state whose window holds a live factor (top[j] > -inf), else 0. Any value
    is exact there (the message row is 0); this one keeps the running sums of the open segments at the
    top of the linear range, so a segment that alone spans many tokens does not underflow."""
    m = NEG_INF
    for j in range(M):
        if top[j] > NEG_INF and c[j] > m:
            m = c[j]
    return m if m > NEG_INF else 0.0


@njit(cache=True)
def log_lse(lv):
    """(max, log Σ exp) of a log vector (-inf, -inf when empty of finite entries)."""
    mx = NEG_INF
    for k in range(lv.shape[0]):
        if lv[k] > mx:
            mx = lv[k]
    if mx == NEG_INF:
        return mx, mx
    s = 0.0
    for k in range(lv.shape[0]):
        s += math.exp(lv[k] - mx)
    return mx, mx + math.log(s)


@njit(cache=True)
def kahan(total, comp, x):
    """(total + x, its compensation) — compensated summation of the log-scale differences (a separate
    function: the passes that call it allow reassociation, which would cancel the compensation)."""
    y = x - comp
    t = total + y
    return t, (t - total) - y


@njit(cache=True, inline="always")
def posterior_scale(lam, lam_c, inc, zf):
    """The backward passes' running log-scale: λ += inc (compensated, :func:`kahan`), and ω = exp(λ - zf)
    capped at exp(690). Returns (λ, its compensation, ω, False when the cap was hit)."""
    lam, lam_c = kahan(lam, lam_c, inc)
    lw = lam - zf
    fine = lw < 690.0
    if not fine:
        lw = 690.0
    return lam, lam_c, math.exp(lw), fine
