r"""Inside–outside for hierarchical HMMs (Fine, Singer & Tishby 1998, §3), plain NumPy, log space.

The O(T³) reference against which the linear-time flattened/DBN inference of
:mod:`structlearn.hhmm.model` is tested. Arrays in, arrays out; no validation.

Sub-model m (children c_1..c_K, log π, log a, log e). For a span s..e (0-based, inclusive):

- G_c(s, e): log P(child c, entered at s, emits o_s..o_e and finishes at e). A production child:
  log b_c(o_s) if s = e; an abstract child: G of the sub-model it calls.
- Chain-forward inside m, C[i, s, e] = log P(m entered at s, its current child i finishes at e)::

      C[i, s, e] = ⊕( π_i + G_i(s, e),  ⊕_{e'=s}^{e-1} ⊕_j C[j, s, e'] + a_ji + G_i(e'+1, e) )
      G_m(s, e)  = ⊕_i C[i, s, e] + e_i                       (Fine et al. eq. for η_in)

- Chain-backward, Suf[i, b, e] = log P(after child i finished at b, m goes on and finishes at e)::

      Suf[i, b, e] = ⊕( e_i [b = e],  ⊕_k a_ik + R[k, b+1, e] ),   R[k, a, e] = ⊕_b G_k(a, b) + Suf[k, b, e]

- Prefix, Pre[i, s, a] = log P(m entered at s reaches child i entered at a)
  = ⊕(π_i [a = s], ⊕_j C[j, s, a-1] + a_ji).
- Outside of an instance u (a node in context) calling m, Out_u(s, e) (everything but the span): the
  root has Out(0, T-1) = 0 (the whole string, all sub-models finished at T); a child i of u::

      Out_(u,i)(a, b) = ⊕_{s ≤ a, e ≥ b} Out_u(s, e) + Pre[i, s, a] + Suf[i, b, e]

  computed in two O(T³) log-matrix products.
- Posteriors: P(instance v active over a..b) = exp(Out_v(a, b) + G_v(a, b) - log Z); summing over
  a ≤ t ≤ b gives P(v active at t), summing over a with b = t gives P(v finishes at t).

Cost: time O(T³·K) per instance and sub-model, memory O(T²·K) (log-matrix products through BLAS).
"""
import numpy as np

_NEG = -np.inf


def _lse(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m, axis=axis)


def _lmm(X, Y):
    """log(exp(X) @ exp(Y)) with row/column shifts (exact up to rounding when no product underflows)."""
    mx = np.max(X, axis=1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    my = np.max(Y, axis=0, keepdims=True)
    my = np.where(np.isfinite(my), my, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(X - mx) @ np.exp(Y - my)) + mx + my


def _inside(sub, G_child, T):
    """C (K, T, T), W (K, T, T) = ⊕_j C[j] + a_ji, G_m (T, T) of one sub-model."""
    kids, lpi, la, le = sub
    K = len(kids)
    C = np.full((K, T, T), _NEG)
    W = np.full((K, T, T), _NEG)
    Gk = np.stack(G_child)  # (K, T, T)
    for e in range(T):
        # term 1: enter child i at s and it spans s..e
        t1 = lpi[:, None] + Gk[:, :e + 1, e]                     # (K, s)
        if e > 0:
            # term 2: ⊕_{e'<e} W[i, s, e'] + G_i(e'+1, e)
            t2 = _lse(W[:, :e + 1, :e] + Gk[:, None, 1:e + 1, e], axis=2)   # (K, s)
            C[:, :e + 1, e] = np.logaddexp(t1, t2)
        else:
            C[:, :1, 0] = t1
        # W[:, s, e] = ⊕_j C[j, s, e] + a_ji
        W[:, :e + 1, e] = _lse(C[None, :, :e + 1, e] + la.T[:, :, None], axis=1)
    Gm = _lse(C + le[:, None, None], axis=0)
    return C, W, Gm


def _suffix(sub, G_child, T):
    """Suf (K, T, T): log P(after child i finished at b, the sub-model finishes at e)."""
    kids, lpi, la, le = sub
    K = len(kids)
    Gk = np.stack(G_child)
    Suf = np.full((K, T, T), _NEG)
    R = np.full((K, T + 1, T), _NEG)
    idx = np.arange(T)
    for a in range(T - 1, -1, -1):
        # Suf[:, a, e] = ⊕(e_i [a = e], ⊕_k a_ik + R[k, a+1, e])
        nxt = _lse(la[:, :, None] + R[None, :, a + 1, :], axis=1)   # (K, e)
        nxt[:, a] = np.logaddexp(nxt[:, a], le)
        nxt[:, :a] = _NEG
        Suf[:, a, :] = nxt
        # R[k, a, e] = ⊕_{b ≥ a} G_k(a, b) + Suf[k, b, e]
        R[:, a, :] = _lse(Gk[:, a, a:, None] + Suf[:, a:, :], axis=1)
    Suf[:, idx[:, None] > idx[None, :]] = _NEG
    return Suf


def hhmm_inside_outside(subs, log_emission):
    """Inside–outside of one sequence under ``finish="all"``.

    Parameters
    ----------
    subs : list of (children, log_pi (K,), log_a (K, K), log_e (K,)); index 0 is the root; children are
        ("p", production index) or ("m", sub-model index).
    log_emission : (T, P) log b_p(o_t).

    Returns
    -------
    log_z : float
    active, finish : dict path -> (T,) float64, for every instance; a path is the tuple of child
        positions from the root.
    """
    T = log_emission.shape[0]
    M = len(subs)
    if T == 0:
        return 0.0, {}, {}
    diag = np.arange(T)
    prodG = {}

    def G_prod(p):
        if p not in prodG:
            g = np.full((T, T), _NEG)
            g[diag, diag] = log_emission[:, p]
            prodG[p] = g
        return prodG[p]

    # inside, bottom-up over the call graph (memoised per sub-model: shared sub-models once)
    inside = {}

    def solve(m):
        if m in inside:
            return inside[m]
        kids = subs[m][0]
        Gc = [G_prod(x) if kind == "p" else solve(x)[2] for kind, x in kids]
        C, W, Gm = _inside(subs[m], Gc, T)
        Suf = _suffix(subs[m], Gc, T)
        inside[m] = (C, W, Gm, Suf, Gc)
        return inside[m]

    for m in range(M - 1, -1, -1):
        solve(m)
    log_z = float(inside[0][2][0, T - 1])
    active, finish = {}, {}
    upper = diag[:, None] <= diag[None, :]

    def outside(m, path, out):
        C, W, Gm, Suf, Gc = inside[m]
        kids, lpi, la, le = subs[m]
        for i, (kind, x) in enumerate(kids):
            # Pre[i, s, a] = ⊕(π_i [a = s], W[i, s, a-1])
            pre = np.full((T, T), _NEG)
            pre[:, 1:] = W[i, :, :-1]
            pre[diag, diag] = np.logaddexp(pre[diag, diag], lpi[i])
            pre[~upper] = _NEG
            L = _lmm(pre.T, out)               # (a, e) = ⊕_s Pre[i, s, a] + Out(s, e)
            L[~upper] = _NEG
            child_out = _lmm(L, Suf[i].T)      # (a, b) = ⊕_e L(a, e) + Suf[i, b, e]
            child_out[~upper] = _NEG
            p = path + (i,)
            with np.errstate(invalid="ignore"):
                mass = np.exp(child_out + Gc[i] - log_z)
            mass[~np.isfinite(mass)] = 0.0
            mass[~upper] = 0.0
            # active at t: Σ_{a ≤ t ≤ b} mass[a, b]; finishing at t: Σ_a mass[a, t]
            rows = np.cumsum(mass, axis=0)     # Σ_{a ≤ t} mass[a, b] at [t, b]
            active[p] = np.array([rows[t, t:].sum() for t in range(T)])
            finish[p] = mass.sum(axis=0)
            if kind == "m":
                outside(x, p, child_out)

    if np.isfinite(log_z):
        root_out = np.full((T, T), _NEG)
        root_out[0, T - 1] = 0.0
        outside(0, (), root_out)
    return log_z, active, finish
