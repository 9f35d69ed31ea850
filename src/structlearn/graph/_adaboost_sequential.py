r"""Sequential AdaBoost.MRF (Tran, Phung & Venkatesh, "Learning Structured Outputs from Partial Labels using
Forest Ensemble", arXiv:1407.6432 (2014), Figure 8; cited as Tran et al. (2014)): the round loop, the α step
and the clique-cover bookkeeping of the forest, for :class:`~structlearn.graph.adaboost_mrf.AdaBoostMRF`.

The forest is a *superimposition* of its trees (Tran et al. (2014), §4: "if a node or an edge belongs to the
aggregated network, it must belong to one of the individual sub-networks"), and the Hölder step of the bound
(eqs. (20)–(21)) assumes every kept learner has α_j > 0. Here a clique e's *cover* is
:math:`\rho_e = \sum_{l: e \in \tau_l} \alpha_l` (the edge-appearance weight of the LogOP, the ρ_e of the
parallel variant); every node lies in every spanning forest, so only edges can be uncovered. The cover of an
edge depends only on which candidate trees contain it, so the loop needs, per *pattern* (the set of candidate
trees containing an edge, a bit mask), only whether some edge has it: ``tree_patterns`` of the summary.
"""
import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import logsumexp

from ..learning.optimizers import minimize_cg
from ._adaboost_shards import MAX_COVER_TREES, Restricted, ShardedLearner, per_graph_statistics

__all__ = ["holder_alpha_step", "cover_limits", "fit_sequential", "DEFAULT_COVER_SHARE"]

DEFAULT_COVER_SHARE = 0.8   # default floor: this fraction of 1/L, the cover of a one-tree clique in a uniform forest


def holder_alpha_step(H, h, beta, lower=0.0, upper=1.0):
    r"""The 1-D step of sequential AdaBoost.MRF: α ∈ [lower, upper] minimising the bound of the new ensemble.

    .. math:: \log L_H(\alpha) = \log \sum_i \exp\big(-\beta\,[(1-\alpha) H_i + \alpha h_i]\big)

    (Tran et al. (2014), eqs. (22)–(23) and Figure 8), a convex function of α whose slope at 0 is
    :math:`-\beta \sum_i D(i)\,(h_i - H_i)`, :math:`D(i) \propto \exp(-\beta H_i)`: condition (29),
    :math:`\sum_i D(i)\,[h_i - H_i] > 0`, is exactly "the bound decreases for some α > 0".

    Parameters
    ----------
    H : ndarray of float64, shape (B,)
        Current ensemble per graph, :math:`H_{l-1}(v_i, o_i) = \sum_j \alpha_j \log P_{\tau_j}(v_i | o_i)` (log space).
    h : ndarray of float64, shape (B,)
        New weak learner per graph, :math:`\log P_{\tau_l}(v_i | o_i)`.
    beta : float
        β ∈ (0, 1].
    lower, upper : float
        The interval of α, 0 ≤ lower ≤ upper ≤ 1 (default [0, 1]: the unconstrained step).

    Returns
    -------
    alpha : float
        The minimiser in [lower, upper]: ``lower`` when the slope there is ≥ 0 (with lower = 0: when
        condition (29) fails), ``upper`` when the slope at ``upper`` is still ≤ 0, else the root of the slope
        (Brent, to 1e-14).
    log_bound : float
        :math:`\log L_H(\alpha)`.
    condition : float
        :math:`\sum_i D(i)\,[h_i - H_i]` with :math:`\sum_i D(i) = 1` (nats).

    Notes
    -----
    Cost O(B) per slope evaluation, O(B log(1/tol)) in all.
    """
    if not 0.0 <= lower <= upper <= 1.0:
        raise ValueError(f"`lower` and `upper` must satisfy 0 <= lower <= upper <= 1; got {lower!r}, {upper!r}")
    H, h = np.asarray(H, dtype=np.float64), np.asarray(h, dtype=np.float64)
    d = h - H

    def slope(a):                     # d/dα log L_H(α) / β, up to the positive factor β
        z = -beta * (H + a * d)
        return -float(np.exp(z - logsumexp(z)) @ d)

    condition = -slope(0.0)
    if not (condition > 0 if lower == 0.0 else slope(lower) < 0):
        alpha = float(lower)
    elif slope(upper) <= 0:
        alpha = float(upper)
    else:
        alpha = float(brentq(slope, lower, upper, xtol=1e-14, rtol=4 * np.finfo(float).eps))
    return alpha, float(logsumexp(-beta * (H + alpha * d))), condition


def cover_limits(patterns, omega):
    r"""The cover of the forest with tree weights ``omega`` (L,) (ω_t = Σ α_l over the kept learners of tree
    t): (ρ_min, ρ_in (L,), ρ_out (L,)) — the smallest ρ_e over the edges lying in some candidate tree, and per
    tree t the smallest over its own edges (∞ if none) and over the coverable edges outside it (∞ if none)."""
    L = omega.shape[0]
    present = np.flatnonzero(patterns[1:] > 0) + 1               # patterns of edges in some tree
    bits = (present[:, None] >> np.arange(L)[None, :]) & 1       # (P, L)
    rho = bits @ omega
    inside = np.where(bits == 1, rho[:, None], np.inf).min(axis=0) if present.size else np.full(L, np.inf)
    outside = np.where(bits == 0, rho[:, None], np.inf).min(axis=0) if present.size else np.full(L, np.inf)
    return (float(rho.min()) if present.size else np.inf), inside, outside


def _alpha_range(t, rho_min, rho_in, rho_out, floor, max_alpha):
    """[lower, upper] of α for a learner of tree t, or None when the tree may not enter this round.

    Cover round (ρ_min < floor): only trees holding a scarcest edge, α at least what lifts it to the floor,
    (floor − ρ)/(1 − ρ). Otherwise: α at most what keeps every edge outside the tree at the floor,
    1 − floor/ρ_out (the others gain)."""
    if rho_min < floor:
        if not rho_in[t] <= rho_min:
            return None
        return (floor - rho_min) / (1.0 - rho_min), max_alpha
    upper = max_alpha if np.isinf(rho_out[t]) else min(max_alpha, 1.0 - floor / rho_out[t])
    return (0.0, upper) if upper > 0 else None


def fit_sequential(est, run, cands, moves, beta, n_params, B, patterns):
    """Figure 8 of Tran et al. (2014) as built here (see the notes of ``AdaBoostMRF``): fills ``est.rounds_``,
    ``est.bound_``, ``est.objective_``, ``est.converged_`` and the kept learners. ``run``: the sum over the
    shards; ``cands``: (tree, feature subset) pairs; ``moves``: per candidate the parameters it fits;
    ``patterns``: :func:`~._adaboost_shards.pattern_counts` of all graphs. H, h and D are (B,) vectors here."""
    n_trees = patterns.shape[0].bit_length() - 1 if patterns.shape[0] > 1 else 0
    if n_trees == 0:
        raise ValueError(f"`trees`: the sequential algorithm tracks the cover of at most {MAX_COVER_TREES} "
                         f"candidate trees; got more")
    floor = est.cover_floor if est.cover_floor is not None else min(est.max_alpha, DEFAULT_COVER_SHARE / n_trees)
    if not 0 < floor <= est.max_alpha:
        raise ValueError(f"`cover_floor` must be in (0, max_alpha = {est.max_alpha:g}]; got {floor!r}")
    H = np.zeros(B)                      # H_{l−1}(v_i, o_i) = Σ_j α_j log P_τj(v_i | o_i)
    alphas, coefs, chosen = [], [], []
    w_ens = np.zeros(n_params)           # Σ_j α_j w_j so far (carried weights included)
    last = {}                            # candidate -> the parameters it was last trained to
    log_bound = None                     # of the ensemble; `value` is the selection criterion's
    value_prev = np.inf
    l2 = est.criterion == "bound+l2"

    def criterion(a, h, w_c):           # log L_H, or J = (B/β)(log L_H − log B) + c2‖w‖² ("bound+l2")
        lh = float(logsumexp(-beta * ((1 - a) * H + a * h)))
        if not l2:
            return lh
        w = (1 - a) * w_ens + a * w_c
        return float(B / beta * (lh - np.log(B)) + est.c2 * (w @ w))

    est.converged_ = False
    L = len(cands)
    cyclic = est.selection == "cyclic"
    stale, turn = 0, 0
    omega = np.zeros(n_trees)            # Σ α of the kept learners per tree
    for r in range(est.n_rounds):
        rho_min, rho_in, rho_out = cover_limits(patterns, omega)
        cover = bool(alphas) and rho_min < floor
        ranges = [None if not alphas else _alpha_range(cands[c][0], rho_min, rho_in, rho_out, floor, est.max_alpha)
                  for c in range(L)]
        allowed = [c for c in range(L) if not alphas or ranges[c] is not None]
        if cyclic:
            order = [(turn + k) % L for k in range(L)]
            allowed = [c for c in order if c in allowed][:1]
            turn = (allowed[0] + 1) % L if allowed else turn
        # D_l(i) ∝ exp(−β H_{l−1}(v_i, o_i)), the per-instance term of L_H; mean 1 (GraphCLL's scale)
        D = B * np.exp(-beta * H - logsumexp(-beta * H))
        before, tried = log_bound, []
        for c in allowed:
            t, free = cands[c][0], moves[c]
            learner = ShardedLearner(run, t, D, est.c2)                 # Σ_i D(i) (−log P_τ) + c2‖w‖²
            if est.warm_start == "fresh":
                start = np.zeros(n_params)
            else:
                start = w_ens if est.warm_start == "ensemble" or c not in last else last[c]
            w_c = start.copy()
            w_c[free] = minimize_cg(Restricted(learner, start, free), start[free], est.cg_iterations)[0]
            last[c] = w_c
            h = -run(per_graph_statistics, (t, w_c)).stats["per_graph"]   # h_l(i) = log P_τ(v_i | o_i)
            if not alphas:                                               # round 1: H = h, α = 1
                alpha, lb, cond = 1.0, float(logsumexp(-beta * h)), np.inf
            else:
                lo, hi = ranges[c]
                alpha, lb, cond = holder_alpha_step(H, h, beta, lo, hi)
                if l2:                  # α minimising J instead (bounded Brent on [lo, hi], then the ends)
                    def f(a, h=h, w_c=w_c):
                        return criterion(a, h, w_c)
                    res = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
                    alpha = min((lo, float(res.x), hi), key=f)
                    lb = float(logsumexp(-beta * ((1 - alpha) * H + alpha * h)))
            tried.append({"candidate": c, "tree": t, "features": cands[c][1], "alpha": alpha, "log_bound": lb,
                          "condition_29": float(cond), "w": w_c, "h": h, "value": criterion(alpha, h, w_c)})
        ok = [t for t in tried if t["alpha"] > 0 and (l2 or cover or t["condition_29"] > 0)]
        # a cover round prefers the learners meeting (29); otherwise the tree is selected by L_H alone
        pool = [t for t in ok if t["condition_29"] > 0] if cover and not l2 else ok
        best = min(pool or ok or tried, key=lambda t: t["value"]) if tried else None
        improved = best is not None and bool(ok) and (cover or np.isinf(value_prev) or
                                                      best["value"] < value_prev - est.tol * max(1.0, abs(value_prev)))
        if improved:
            alpha = best["alpha"]
            alphas = [a * (1.0 - alpha) for a in alphas] + [alpha]       # Σ α = 1
            omega = omega * (1.0 - alpha)
            omega[best["tree"]] += alpha
            coefs.append(best["w"])
            chosen.append(best["candidate"])
            H = (1.0 - alpha) * H + alpha * best["h"]
            w_ens = (1.0 - alpha) * w_ens + alpha * best["w"]
            log_bound, value_prev = best["log_bound"], best["value"]
            est.bound_.append(log_bound)
            est.objective_.append(value_prev)
        cover_after = cover_limits(patterns, omega)[0]
        est.rounds_.append({
            "round": r + 1, "tree": -1 if best is None else int(best["tree"]),
            "features": -1 if best is None else int(best["features"]),
            "alpha": 0.0 if best is None else float(best["alpha"]),
            "log_bound": np.nan if best is None else float(best["log_bound"]),
            "log_bound_before": np.nan if before is None else float(before),
            "condition_29": np.nan if best is None else float(best["condition_29"]), "accepted": improved,
            "cover_round": cover, "forced": bool(improved and cover and not best["condition_29"] > 0),
            "min_cover": float(cover_after), "weights": list(alphas), "tree_weights": omega.tolist(),
            "candidates": [{k: t[k] for k in ("tree", "features", "alpha", "log_bound", "condition_29")}
                           for t in tried]})
        if est.verbose and best is not None:
            print(f"round {r + 1:3d}  tree {best['tree']}  features {best['features']}  alpha {best['alpha']:.4f}  "
                  f"(29) {best['condition_29']:+.4g}  log L_H {best['log_bound']:.6g}  min cover {cover_after:.3g}"
                  f"{'  (cover round)' if cover else ''}{'' if improved else '  (rejected)'}")
        if not improved:
            # a rejected learner warm-started from itself trains on next round (and a tree kept out by the
            # floor may become admissible): stop after a whole cycle of rejections; otherwise at once
            stale += 1
            if stale >= (L if cyclic or est.warm_start == "learner" else 1):
                est.converged_ = True
                break
            continue
        stale = 0
    keep = [j for j, a in enumerate(alphas) if a > 0]     # learners whose weight underflowed to 0 are dropped
    est.alphas_ = np.array([alphas[j] for j in keep])
    est.learner_coefs_ = np.array([coefs[j] for j in keep]).reshape(len(keep), n_params)
    est.learner_trees_ = np.array([cands[chosen[j]][0] for j in keep], dtype=np.int64)
    est.learner_features_ = np.array([cands[chosen[j]][1] for j in keep], dtype=np.int64)
