"""Numba kernels of the super-label semi-Markov structure (the general hidden semi-Markov model and its
special cases): linear-space ("scaled") forward and backward with per-state emission factors.

Arrays in, arrays out; no validation (that is done by
:class:`structlearn.engine.structures.semimarkov_super.SuperLabelSemiMarkov`). Packed ragged batch as in
:mod:`structlearn.engine.kernels.semimarkov`: sequence b owns rows ``offsets[b]:offsets[b + 1]``.

Model (Yu 2010, "Hidden semi-Markov models", §2.1, forward (4) and backward (5)). M states, durations
1 … D, K = M·D labels k = j·D + d - 1: label (j, d) is a j-segment of duration exactly d — or, with
``open_end``, a last segment cut at the end of the sequence after any observed length l <= d. A segment
[s, e] of label k scores Σ_{u=s..e} unary[u, j] (per-state unaries, (N, M)); consecutive labels score
transition[k, k'], the first start[k] and the last end[k]. The transition is

* dense: a (K, K) log-matrix (time O(T·K²));
* factored: transition[k, k'] = A[k, j'] + B[i, k'] with i the state of k and j' the state of k' (the
  leave / enter scores of Yu's special cases: residential time §3.3 has A = 0, variable transition §3.2
  has B[i, k'] = log p_j'(d') for every i). The stage then goes through the M states,
  α*[s, k'] = ⊕_i B[i, k'] + (⊕_{k of state i} α[s-1, k] + A[k, j']), time O(T·M·K) = O(T·M²·D).

Forward (log semantics; every label has one window term, so a step costs O(K) plus the transition)::

    α*[0, k] = start[k]
    α[e, k]  = α*[e-d+1, k] + Σ_{u=e-d+1..e} unary[u, j]          (k = (j, d); at e = T-1 with open_end:
                                                                 ⊕ over the cut lengths l <= d)
    α*[s, k'] = ⊕_k α[s-1, k] + transition[k, k']
    log Z    = ⊕_k α[T-1, k] + end[k]

Representation. Messages are kept in linear space, normalised per token (Rabiner 1989 scaling):
α̃[e] = exp(α[e] - c_e) with c_e = Σ_{u<=e} inc[u] and inc[e] = log Σ_k (unnormalised α̃[e, k]), and
α̃*[s] = exp(α*[s] - c_{s-1}). The segment factor exp(Σ_{u=s..e} unary[u, j] - inc[u]) is split into a
per-start factor F[j, s] = exp(lF[j, s]) and a per-end factor exp(μ_j(e) + unary[e, j] - inc[e]), where
μ_j is a running per-state sum and lF[j, s] = -μ_j(s) (anchored: an anchor move shifts μ_j and every
stored lF[j, ·] of the window by the same amount). So one token costs O(M) exponentials, not O(K).
Anchors are raised when a new factor would exceed exp(RESCALE) and lowered when every factor of the
window fell below exp(-RESCALE) (:mod:`~structlearn.engine.kernels.semimarkov_super_steps`); a normaliser below
the linear range is recomputed in log space (dense passes) or marks the sequence for the exact path
(factored passes, which keep no per-label history to recompute from). A token at which no segment ends
(starts, backward) takes the largest open segment's running score as its normaliser
(:func:`~structlearn.engine.kernels.semimarkov_super_steps.idle_scale`), so one segment that alone spans
hundreds of tokens stays in range. Both passes form their normaliser with
:func:`~structlearn.engine.kernels.semimarkov_super_steps.combine`. The backward mirrors this
with its own normalisers incb (so segments that the forward's normaliser absorbs at their end do not
leave the backward's range) and the posterior weight of a boundary between
s-1 and s is ω_s = exp(c_{s-1} + cb_s - log Z), cb_s = Σ_{u>=s} incb[u].

The passes are split by transition: the shared per-token steps (anchors, normalisers) in
:mod:`~structlearn.engine.kernels.semimarkov_super_steps`, the dense passes in
:mod:`~structlearn.engine.kernels.semimarkov_super_dense`, the factored ones (which never read a per-label array
along a segment's diagonal) in :mod:`~structlearn.engine.kernels.semimarkov_super_factored`, Viterbi in
:mod:`~structlearn.engine.kernels.semimarkov_super_decode`.

What the linear representation cannot hold is a label whose weight is below ~1e-300 of the others of
its state at the same token (as in any scaled forward–backward); the backward checks that the posteriors
are consistent (Σ_j γ_t(j) = 1 within 1e-9 at every t, ω finite) and reports each sequence where they are
not, for the caller to recompute it exactly (:class:`~structlearn.engine.structures.SemiMarkov` on the same
super-labels).

Numba's on-disk cache does not notice changes to a callee in another module: after editing
:mod:`~structlearn.engine.kernels.semimarkov_super_factored`, ``_dense`` or ``_steps``, clear the cache (or edit
this module) before timing.
"""
import math

import numpy as np
from numba import njit, prange

from . import semimarkov_super_dense as _dense
from . import semimarkov_super_factored as _fac
from .semimarkov_super_steps import DENSE, FACTORED
from .semimarkov_window import NEG_INF, sequence

__all__ = ["DENSE", "FACTORED", "super_forward", "super_posterior", "super_token_marginals"]


@njit(cache=True)
def _z_fin(alpha, r, end):
    """log Σ_k alpha[r, k] exp(end[k]) (-inf when every term is 0)."""
    K = alpha.shape[1]
    mx = NEG_INF
    for k in range(K):
        if alpha[r, k] > 0.0 and end[k] > NEG_INF:
            mx = max(mx, math.log(alpha[r, k]) + end[k])
    if mx == NEG_INF:
        return mx
    s = 0.0
    for k in range(K):
        if alpha[r, k] > 0.0 and end[k] > NEG_INF:
            s += math.exp(math.log(alpha[r, k]) + end[k] - mx)
    return mx + math.log(s)


@njit(cache=True, parallel=True)
def super_forward(unary, D, start, end, open_end, mode, E, At, has_a, Bf, b_vec, kap, offsets, store):
    """Scaled forward of the super-label structure (LOG semiring).

    Parameters
    ----------
    unary : (N, M) float64 log; D : int; start, end : (K,) float64 log; open_end : bool;
    mode : DENSE or FACTORED; E : (K, K) linear exp(transition - tmax) (DENSE; else any 2-d);
    At : (M, K) linear exp(A[k, j'] - amax) transposed (read when ``has_a``); Bf : (M, K) linear
    exp(B - bmax) (only row 0 when ``b_vec``); kap : exp(tmax) or exp(amax + bmax); offsets : (B + 1,);
    store : whether to return the α̃ / α̃* rows (always for DENSE).

    Returns
    -------
    astar, alpha : (N, K) α̃*, α̃ (linear; (0, K) for FACTORED without ``store``); inc : (N,);
    log_z, z_fin : (B,) (z_fin = log Σ_k α̃[T-1, k] exp(end[k]); log Z = Σ inc + z_fin, -inf if
    infeasible, 0 if empty); mid : (M, M, N) the bridge values Σ_{k of state i} α̃[t, k] Ã[k, j']
    (FACTORED; zeros for DENSE); alpha_last : (B, K) α̃[T-1]; ok : (B,) bool, False where a normaliser
    fell below the linear range (recompute that sequence exactly).

    Time O(N·(K + M·K)) factored (O(N·K) without ``leave``), O(N·K²) dense; memory O(N·M²) factored,
    O(N·K) dense or with ``store``.
    """
    N, M = unary.shape
    K = M * D
    B = offsets.shape[0] - 1
    rows = N if (store or mode == DENSE) else 0
    astar = np.zeros((rows, K))
    alpha = np.zeros((rows, K))
    inc = np.zeros(N)
    mid = np.zeros((M, M, N if mode == FACTORED else 0))
    log_z = np.zeros(B)
    z_fin = np.zeros(B)
    ok = np.ones(B, dtype=np.bool_)
    alpha_last = np.zeros((B, K))
    Wab = np.zeros((M * M if (mode == FACTORED and has_a and b_vec) else 0, D))
    for j in range(M if Wab.shape[0] else 0):
        for jp in range(M):
            for d in range(D):
                Wab[j * M + jp, d] = Bf[0, j * D + d] * At[jp, j * D + d]
    for b in prange(B):
        o, T = sequence(offsets, b)
        if T == 0:
            continue
        if mode == DENSE:
            total = _dense.forward_seq(unary, start, open_end, E, kap, D, o, T, astar, alpha, inc)
            zf = _z_fin(alpha, o + T - 1, end)
            for k in range(K):
                alpha_last[b, k] = alpha[o + T - 1, k]
        else:
            total, zf, ok[b] = _fac.forward_seq(unary, start, end, open_end, At, has_a, Bf, b_vec, Wab, kap,
                                                D, o, T, mid, inc, store, alpha, astar, alpha_last[b])
        z_fin[b] = zf
        log_z[b] = NEG_INF if zf == NEG_INF else total + zf
    return astar, alpha, inc, log_z, z_fin, mid, alpha_last, ok


@njit(cache=True, parallel=True)
def super_posterior(unary, D, start, end, open_end, mode, Et, At, has_a, Bf, b_vec, kap, offsets, astar,
                    alpha, inc, mid, z_fin, want_enter, want_leave, want_dense, store):
    """Backward pass (self-normalised, see the module docstring) and the posterior statistics of the
    super-label structure, from the forward's ``astar``, ``alpha`` (rows needed for DENSE and for
    ``want_dense``), ``inc``, ``mid`` and ``z_fin``.

    Returns
    -------
    ok : (B,) bool, False where the posteriors failed the consistency check (recompute exactly);
    segments : (B, K) expected number of k-segments (DENSE only; FACTORED: zeros, see
        :meth:`structlearn.engine.structures.semimarkov_super.SuperLabelSemiMarkov.posterior_counts`);
    first : (B, K) P(the first segment has label k);
    enter : (B, M, K) Σ_s ω_s mid[i, j', s-1] β̌_start[s, k'] (times B̃[i, k'] kap: the expected
        transitions from state i into label k'; FACTORED with ``want_enter``);
    leave, leave0 : (B, M, K) [j', k]: the expected transitions from label k into state j' are
        (leave · b̃[k] + leave0) · Ã[k, j'] · kap (FACTORED with ``want_leave``; ``leave`` holds the starts
        whose weight is a per-state scalar times b̃, ``leave0`` the others);
    dense : (B, K, K) Σ_t ω_{t+1} α̃[t, k] β̌_start[t+1, k'] (times exp(transition): the expected
        transitions; DENSE always, FACTORED with ``want_dense``; else (B, 0, 0));
    gamma : (N, M) γ_t(j) = P(token t lies in a j-segment);
    pstart, beta_start, beta_end : (N, K) with ``store`` (else (0, K)): P(a k-segment starts at s) and the
        backward messages normalised like the forward's (β̃ = β̌ · ω).

    Time O(N·(K + M·K)) factored, plus O(N·M·K) per requested bridge count; O(N·K²) dense or with
    ``want_dense``.
    """
    N, M = unary.shape
    K = M * D
    B = offsets.shape[0] - 1
    ok = np.ones(B, dtype=np.bool_)
    seg = np.zeros((B, K))
    first = np.zeros((B, K))
    nf = B if mode == FACTORED else 0
    enter = np.zeros((nf, M, K))
    leave = np.zeros((nf, M, K))
    leave0 = np.zeros((nf, M, K))
    nd = K if (want_dense or mode == DENSE) else 0
    dense = np.zeros((B, nd, nd))
    gamma = np.zeros((N, M))
    nr = N if store else 0
    pstart = np.zeros((nr, K))
    bstart_out = np.zeros((nr, K))
    bend_out = np.zeros((nr, K))
    for b in prange(B):
        o, T = sequence(offsets, b)
        if T == 0 or z_fin[b] == NEG_INF:
            continue
        if mode == DENSE:
            ok[b] = _dense.backward_seq(unary, end, open_end, Et, kap, D, o, T, astar, alpha, inc, z_fin[b],
                                        store, seg[b], first[b], dense[b], gamma, pstart, bstart_out,
                                        bend_out)
        else:
            ok[b] = _fac.backward_seq(unary, start, end, open_end, At, has_a, Bf, b_vec, kap, D, o, T, mid,
                                      inc, z_fin[b], want_enter, want_leave, want_dense, store, alpha,
                                      first[b], enter[b], leave[b], leave0[b], dense[b], gamma, pstart,
                                      bstart_out, bend_out)
    return ok, seg, first, enter, leave, dense, gamma, pstart, bstart_out, bend_out, leave0


@njit(cache=True, parallel=True)
def super_token_marginals(pstart, D, offsets):
    """Token marginals (N, K) of the super-labels from the start posteriors ``pstart`` (N, K):
    token[t, (j, d)] = Σ_{s = t-d+1 .. t} pstart[s, (j, d)] (a label covers d tokens, a cut last segment
    the tokens to the end), clipped to [0, 1]. Time O(N·K)."""
    N, K = pstart.shape
    B = offsets.shape[0] - 1
    token = np.zeros((N, K))
    for b in prange(B):
        o, T = sequence(offsets, b)
        run = np.zeros(K)
        for t in range(T):
            for k in range(K):
                run[k] += pstart[o + t, k]
                d = k % D + 1
                if t - d >= 0:
                    run[k] -= pstart[o + t - d, k]
                token[o + t, k] = min(max(run[k], 0.0), 1.0)
    return token
