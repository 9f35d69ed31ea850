"""Pure-torch chain recursions (any device, differentiable to any order): the sequential forward,
the O(log T)-depth parallel scan in the log semiring, and Viterbi with back-pointers.

These are the torch twins of :mod:`structlearn.engine.kernels.chain` for devices the Numba engine cannot
reach (CUDA) and for double differentiation; on CPU the engine is used (it is faster: see
``benchmarks/bench_torch.py``). Transitions come as ``trans4`` of shape (B or 1, T or 1, K, K),
"from, to"; step t (from token t-1 to t) uses ``trans4[:, t - 1]`` (or ``[:, 0]`` when stationary).

Recurrences (Lafferty et al. 2001; Sutton & McCallum 2012 §4.1)::

    α[0, j] = start[j] + unary[0, j]
    α[t, j] = unary[t, j] + ⊕_i (α[t-1, i] + trans[t-1, i, j])
    log Z   = ⊕_j (α[L-1, j] + end[j])

The scan writes the same sum as a product of K×K matrices M_t[i, j] = trans[t-1, i, j] + unary[t, j]
in the log semiring, log Z = ⊕ (α0 ⊗ M_1 ⊗ … ⊗ M_{L-1} + end), reduced pairwise in ⌈log₂ T⌉ levels
(padding steps are the semiring identity), as in Rush 2020 ("Torch-Struct", §4, parallel scan).
"""
from typing import List, Tuple

import torch

from ._batch import logsumexp

#: Elements of one (n, K, K, K) block of a log-semiring matrix product (bounds its memory).
_CHUNK_ELEMS = 1 << 24


def step_transition(trans4: torch.Tensor, t: int) -> torch.Tensor:
    """Transition of the step from token t-1 to t: (B or 1, K, K)."""
    return trans4[:, t - 1] if trans4.shape[1] > 1 else trans4[:, 0]


def forward_sequential(unary, trans4, start, end, lengths):
    """log Z (B,) by the sequential forward recursion; time O(B·T·K²), depth O(T)."""
    B, T, K = unary.shape
    if T == 0:
        return unary.new_zeros(B)
    alpha = start + unary[:, 0]
    for t in range(1, T):
        new = logsumexp(alpha[:, :, None] + step_transition(trans4, t), dim=1) + unary[:, t]
        alpha = torch.where((lengths > t)[:, None], new, alpha)
    log_z = logsumexp(alpha + end, dim=-1)
    return torch.where(lengths > 0, log_z, torch.zeros_like(log_z))


def log_identity(K, like):
    """K×K identity of the log semiring: 0 on the diagonal, -inf elsewhere."""
    eye = torch.full((K, K), float("-inf"), dtype=like.dtype, device=like.device)
    return eye.fill_diagonal_(0.0)


def _chunks(n, K):
    step = max(1, _CHUNK_ELEMS // max(1, K ** 3))
    return [(a, min(n, a + step)) for a in range(0, n, step)]


class _LogMatmul(torch.autograd.Function):
    """C[n, i, j] = ⊕_k A[n, i, k] + B[n, k, j] (log semiring), computed and differentiated in
    blocks so that the (n, K, K, K) sum never lives in memory at once (autograd of a broadcast
    logsumexp keeps it). Backward: ∂C[i,j]/∂A[i,k] = ∂C[i,j]/∂B[k,j] = exp(A[i,k] + B[k,j] - C[i,j]);
    written with torch ops, so it is differentiable again (entropy gradients)."""

    @staticmethod
    def forward(ctx, A, B):
        n, K = A.shape[0], A.shape[-1]
        parts = [torch.logsumexp(A[a:b, :, :, None] + B[a:b, None, :, :], dim=2) for a, b in _chunks(n, K)]
        C = torch.cat(parts) if parts else A.new_empty((0, K, K))
        ctx.save_for_backward(A, B, C)
        return C

    @staticmethod
    def backward(ctx, G):
        A, B, C = ctx.saved_tensors
        n, K = A.shape[0], A.shape[-1]
        Cs = torch.where(torch.isfinite(C), C, torch.zeros_like(C))
        gA, gB = [], []
        for a, b in _chunks(n, K):
            P = torch.exp(A[a:b, :, :, None] + B[a:b, None, :, :] - Cs[a:b, :, None, :])  # [n, i, k, j]
            PG = P * G[a:b, :, None, :]
            gA.append(PG.sum(-1))
            gB.append(PG.sum(1))
        if not gA:
            return torch.zeros_like(A), torch.zeros_like(B)
        return torch.cat(gA), torch.cat(gB)


def log_matmul(A, B):
    """Log-semiring product of stacks of K×K matrices, (..., K, K) each (same leading shape)."""
    lead = A.shape[:-2]
    K = A.shape[-1]
    out = _LogMatmul.apply(A.reshape(-1, K, K), B.reshape(-1, K, K))
    return out.reshape(lead + (K, K))


def forward_scan(unary, trans4, start, end, lengths):
    """log Z (B,) by a pairwise (tree) reduction of the step matrices: depth O(log T), work
    O(B·T·K³), memory O(B·T·K²) (plus blocks of (n, K, K, K))."""
    B, T, K = unary.shape
    if T == 0:
        return unary.new_zeros(B)
    a0 = start + unary[:, 0]
    if T == 1:
        log_z = logsumexp(a0 + end, dim=-1)
        return torch.where(lengths > 0, log_z, torch.zeros_like(log_z))
    tr = trans4 if trans4.shape[1] > 1 else trans4.expand(trans4.shape[0], T, K, K)
    M = tr[:, :T - 1] + unary[:, 1:, None, :]                           # (B, T-1, K, K)
    M = M.expand(B, T - 1, K, K)
    eye = log_identity(K, unary)
    active = torch.arange(1, T, device=unary.device)[None, :] < lengths[:, None]
    M = torch.where(active[:, :, None, None], M, eye)
    while M.shape[1] > 1:
        if M.shape[1] % 2:
            M = torch.cat([M, eye.expand(B, 1, K, K)], dim=1)
        M = log_matmul(M[:, 0::2], M[:, 1::2])
    P = M[:, 0]
    log_z = logsumexp((a0[:, :, None] + P + end[None, None, :]).reshape(B, K * K), dim=-1)
    return torch.where(lengths > 0, log_z, torch.zeros_like(log_z))


def viterbi(unary: torch.Tensor, trans4: torch.Tensor, start: torch.Tensor, end: torch.Tensor,
            lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Max-product decoding: best scores (B,) and labels (B, T) (-1 at padding).

    δ[0, j] = start[j] + unary[0, j]; δ[t, j] = unary[t, j] + max_i δ[t-1, i] + trans[t-1, i, j],
    back-pointers bp[t, j] = argmax_i (identity at padding steps), then the back-trace. Written
    with tensor ops only (TorchScript-compatible; no data-dependent Python control flow).
    """
    B, T, K = unary.shape
    if T == 0:
        return unary.new_zeros(B), torch.zeros((B, 0), dtype=torch.int64, device=unary.device)
    ident = torch.arange(K, device=unary.device).expand(B, K)
    delta = start + unary[:, 0]
    bps = [ident]
    for t in range(1, T):
        tr = trans4[:, t - 1] if trans4.shape[1] > 1 else trans4[:, 0]
        best, bp = (delta[:, :, None] + tr).max(dim=1)
        on = (lengths > t)[:, None]
        delta = torch.where(on, best + unary[:, t], delta)
        bps.append(torch.where(on, bp, ident))
    bp_all = torch.stack(bps, dim=1)                                 # (B, T, K); row 0 unused
    score, last = (delta + end).max(dim=-1)
    labels = [last]
    cur = last
    for t in range(T - 1, 0, -1):
        cur = bp_all[:, t].gather(1, cur[:, None])[:, 0]
        labels.append(cur)
    y = torch.stack(labels, dim=1).flip([1])
    on = torch.arange(T, device=unary.device)[None, :] < lengths[:, None]
    y = torch.where(on, y, torch.full_like(y, -1))
    score = torch.where(lengths > 0, score, torch.zeros_like(score))
    return score, y


# -- the CRF layer's pure-torch path (TorchScript, torch.compile, torch.export, CUDA) ---------------------
# Written for ``torch.jit.script``: annotated, tensor ops only, one Python loop over time. Inputs are
# batch-first: emissions (B, T, K), a boolean prefix mask (B, T), transitions (K, K) "from, to",
# start / end (K,). Forbidden entries (-inf) are raised to ``CRF_NEG`` inside the log-sum-exp
# recursions: exp(CRF_NEG - m) is exactly 0, as exp(-inf - m) is, so every finite result is unchanged,
# but a column whose entries are all forbidden no longer makes the gradient of ``torch.logsumexp``
# NaN (exp(-inf - (-inf))). Results at or below ``CRF_NEG / 2`` are infeasible and reported as -inf.

#: Stand-in for -inf inside the pure-torch CRF recursions (see above).
CRF_NEG = -1e30


def _neg() -> float:
    return CRF_NEG if not torch.jit.is_scripting() else -1e30     # TorchScript reads no global floats


def _crf_inputs(emissions: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
                neg: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Time-major emissions (T, B, K) and mask (T, B, 1), transitions (K, K), -inf raised to ``neg``."""
    return (emissions.clamp(min=neg).transpose(0, 1), mask.transpose(0, 1).unsqueeze(2),
            transitions.clamp(min=neg))


def _crf_alphas(em: torch.Tensor, on: torch.Tensor, tr: torch.Tensor, start: torch.Tensor,
                keep: bool) -> List[torch.Tensor]:
    """Forward messages α[t] (B, K), α[0] = start + e[0], α[t, j] = e[t, j] + ⊕_i α[t-1, i] + trans[i, j]
    (padding steps keep α): every α[t] if ``keep``, else only the last."""
    alpha = start + em[0]
    alphas = [alpha]
    for t in range(1, em.shape[0]):
        nxt = torch.logsumexp(alpha.unsqueeze(2) + tr, dim=1) + em[t]
        alpha = torch.where(on[t], nxt, alpha)
        if keep:
            alphas.append(alpha)
    if not keep:
        alphas = [alpha]
    return alphas


def crf_log_partition(emissions: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
                      start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """log Z (B,) of a linear-chain CRF by the forward recursion α[t, j] = e[t, j] + ⊕_i α[t-1, i] +
    trans[i, j]; 0 for an empty sequence, -inf for an infeasible one. Time O(B·T·K²), depth O(T)."""
    B, T, K = emissions.shape
    if T == 0:
        return emissions.new_zeros(B)
    neg = _neg()
    em, on, tr = _crf_inputs(emissions, mask, transitions, neg)
    alpha = _crf_alphas(em, on, tr, start.clamp(min=neg), False)[-1]
    log_z = torch.logsumexp(alpha + end.clamp(min=neg), dim=1)
    log_z = torch.where(log_z <= neg / 2, torch.full_like(log_z, float("-inf")), log_z)
    return torch.where(mask[:, 0], log_z, torch.zeros_like(log_z))


def crf_score(emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
              start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """Score s(y) (B,) of the tag sequences ``tags`` (B, T) (padding ignored); 0 for an empty one."""
    B, T, K = emissions.shape
    if T == 0:
        return emissions.new_zeros(B)
    y = torch.where(mask, tags, torch.zeros_like(tags))
    e = emissions.gather(2, y.unsqueeze(2)).squeeze(2)
    s = torch.where(mask, e, torch.zeros_like(e)).sum(1)
    if T > 1:
        tr = transitions[y[:, :-1], y[:, 1:]]
        s = s + torch.where(mask[:, 1:], tr, torch.zeros_like(tr)).sum(1)
    lengths = mask.sum(1)
    last = y.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    ends = start[y[:, 0]] + end[last]
    return s + torch.where(lengths > 0, ends, torch.zeros_like(ends))


def crf_marginals(emissions: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
                  start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """Posterior marginals P(y_t = k) (B, T, K) by the forward–backward recursions (0 at padding and
    for infeasible sequences); β[L-1] = end, β[t, i] = ⊕_j trans[i, j] + e[t+1, j] + β[t+1, j].
    Time O(B·T·K²), memory O(B·T·K)."""
    B, T, K = emissions.shape
    if T == 0:
        return torch.zeros_like(emissions)
    neg = _neg()
    em, on, tr = _crf_inputs(emissions, mask, transitions, neg)
    en = end.clamp(min=neg).expand(B, K)
    alphas = _crf_alphas(em, on, tr, start.clamp(min=neg), True)
    log_z = torch.logsumexp(alphas[-1] + en, dim=1)                     # (B,)
    beta = en
    betas = [beta]
    for t in range(T - 2, -1, -1):
        nxt = torch.logsumexp(tr + (em[t + 1] + beta).unsqueeze(1), dim=2)
        beta = torch.where(on[t + 1], nxt, en)
        betas.append(beta)
    betas.reverse()
    a = torch.stack(alphas, dim=1)
    b = torch.stack(betas, dim=1)                                       # (B, T, K)
    ok = mask.unsqueeze(2) & (log_z > neg / 2)[:, None, None]
    m = torch.exp(a + b - log_z[:, None, None])
    return torch.where(ok, m, torch.zeros_like(m))


def crf_viterbi(emissions: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor, start: torch.Tensor,
                end: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Best scores (B,) and tags (B, T) (-1 at padding) of a linear-chain CRF by back-pointer Viterbi,
    δ[t, j] = e[t, j] + max_i δ[t-1, i] + trans[i, j]; 0 and all -1 for an empty sequence. The loop
    over time runs four kernels per step (padding steps keep δ; the back-trace starts each sequence at
    its own last position). Time O(B·T·K²), memory O(B·T·K)."""
    B, T, K = emissions.shape
    if T == 0:
        return emissions.new_zeros(B), torch.zeros((B, 0), dtype=torch.int64, device=emissions.device)
    em = emissions.transpose(0, 1)                                      # (T, B, K)
    on = mask.transpose(0, 1)                                           # (T, B)
    on3 = on.unsqueeze(2)
    delta = start + em[0]
    bps = []
    for t in range(1, T):
        best, bp = (delta.unsqueeze(2) + transitions).max(dim=1)
        delta = torch.where(on3[t], best + em[t], delta)
        bps.append(bp)
    score, cur = (delta + end).max(dim=1)
    tags = [cur]
    for t in range(T - 1, 0, -1):
        prev = bps[t - 1].gather(1, cur.unsqueeze(1)).squeeze(1)
        cur = torch.where(on[t], prev, cur)
        tags.append(cur)
    tags.reverse()
    y = torch.stack(tags, dim=1)
    y = torch.where(mask, y, torch.full_like(y, -1))
    return torch.where(mask[:, 0], score, torch.zeros_like(score)), y
