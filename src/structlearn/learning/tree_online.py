"""Online trainers for tree CRFs: SGD with L2 (``l2sgd``), averaged perceptron (``ap``),
passive–aggressive (``pa``) and AROW (``arow``) — the same updates as :mod:`structlearn.learning.online`.

Deliberately simple: a Python loop over the trees of a shuffled epoch, one tree at a time (per-instance
updates, as CRFsuite), each step calling the feature model and the :class:`~structlearn.structures.Tree`
structure (exact MAP by max-product for the large-margin family, exact marginals for SGD). There is no
second copy of any recurrence and no tree-specific Numba kernel; the price is Python overhead per tree
(≈ 0.5–1 ms; an epoch over the 8,544 SST training trees takes seconds). Gradients and feature-difference
vectors are dense (n_params,) per tree, so a step costs O(n_params) on top of the tree's O(T·K²).

References: Collins (2002) perceptron with averaging; Crammer et al. (2006) passive–aggressive (PA, PA-I,
PA-II); Mejer & Crammer (2010) AROW for structured prediction; Bottou's SGD step size
η_t = 1 / (λ (t0 + t)) with CRFsuite's calibration of η0.
"""
import math
import time

import numpy as np
from sklearn.utils import check_random_state

from .objectives import TreeCLL

__all__ = ["large_margin", "l2sgd"]


def _split_trees(batch):
    """One single-tree sub-batch per non-empty tree (views)."""
    return [(b, batch.slice(b, b + 1)) for b in range(len(batch.lengths)) if batch.lengths[b] > 0]


def large_margin(algorithm, model, batch, y, *, max_iterations=100, epsilon=0.0, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, random_state=None,
                 callback=None):
    """Train by AP / PA / AROW on a :class:`~structlearn.models.tree_crf.TreeBatch`.

    Returns (w, epochs, converged).

    Per tree: ŷ = argmax under the current weights; if ŷ ≠ y, d = f(x, y) − f(x, ŷ) and
    AP: w += d; PA: w += τ d with the hinge loss ℓ = s(ŷ) − s(y) + √(node errors) (or 1) and τ from
    ``pa_type`` 0/1/2; AROW: w += ℓ β Σd, Σ −= β (Σd)², β = 1 / (dᵀΣd + γ) (diagonal Σ). Averaged
    weights (AP; PA with ``averaging``) are w − u / counter with u += counter · step. Stops after
    ``max_iterations`` epochs or when the fraction of mislabelled nodes in an epoch is ≤ ``epsilon``.
    """
    if algorithm not in ("ap", "pa", "arow"):
        raise ValueError(f"`algorithm` must be 'ap', 'pa' or 'arow'; got {algorithm!r}")
    rng = check_random_state(random_state)
    P = model.n_params
    w = np.zeros(P)
    u = np.zeros(P)
    sigma = np.full(P, float(variance))
    counter = 1.0
    trees = _split_trees(batch)
    n_nodes = max(batch.n_items, 1)
    converged = False
    epoch = 0
    for epoch in range(1, int(max_iterations) + 1):
        t0 = time.perf_counter()
        loss = 0.0
        errors = 0
        for i in rng.permutation(len(trees)):
            b, sub = trees[i]
            o = batch.offsets[b]
            yb = y[o:o + sub.n_items]
            pred = model.structure(w, sub).argmax()
            nd = int(np.count_nonzero(pred != yb))
            if nd == 0:
                counter += 1.0
                continue
            errors += nd
            d = model.feature_counts(sub, yb) - model.feature_counts(sub, pred)
            idx = np.flatnonzero(d)
            dv = d[idx]
            if algorithm == "ap":
                step = dv
                loss += nd
            else:
                ell = max(0.0, -float(w[idx] @ dv) + (math.sqrt(nd) if error_sensitive else 1.0))
                loss += ell
                if algorithm == "pa":
                    dd = float(dv @ dv)
                    if dd == 0.0:
                        tau = 0.0
                    elif pa_type == 0:
                        tau = ell / dd
                    elif pa_type == 1:
                        tau = min(c, ell / dd)
                    else:
                        tau = ell / (dd + 0.5 / c)
                    step = tau * dv
                else:
                    sd = sigma[idx] * dv
                    beta = 1.0 / (float(sd @ dv) + gamma)
                    step = ell * beta * sd
                    sigma[idx] -= beta * sd * sd
            w[idx] += step
            u[idx] += counter * step
            counter += 1.0
        if callback is not None:
            callback({"iteration": epoch, "loss": float(loss), "error_rate": errors / n_nodes,
                      "active_features": int(np.count_nonzero(w)), "seconds": time.perf_counter() - t0})
        if errors / n_nodes <= epsilon:
            converged = True
            break
    average = algorithm == "ap" or (algorithm == "pa" and averaging)
    return (w - u / counter if average else w), epoch, converged


def _sgd_epoch(model, trees, batch, y, order, v, scale, t, t0, lam, limit=None):
    """One SGD pass over ``trees[order]`` with w = scale · v; returns (Σ −log p, scale, t)."""
    loss = 0.0
    g = np.empty(model.n_params)
    for i in order[:limit]:
        b, sub = trees[i]
        o = batch.offsets[b]
        eta = 1.0 / (lam * (t0 + t))
        t += 1.0
        scale *= 1.0 - eta * lam
        if scale < 1e-30:  # fold the lazy L2 scale into v
            v *= scale
            scale = 1.0
        loss += TreeCLL(model, sub, y[o:o + sub.n_items])(scale * v, g)
        v -= (eta / scale) * g
    return loss, scale, t


def l2sgd(model, batch, y, *, c2=1.0, max_iterations=1000, period=10, delta=1e-6, eta=0.1, rate=2.0,
          samples=1000, candidates=10, max_trials=20, random_state=None, callback=None):
    """SGD with L2 regularisation on trees (CRFsuite's ``l2sgd``); returns (w, epochs, converged).

    λ = 2·c2 / B so that B·(λ/2)‖w‖² = c2‖w‖². η0 is calibrated on ``samples`` trees as in
    :func:`structlearn.learning.online.l2sgd` (η, η·rate, … while the regularised loss of one pass
    improves, then η/rate, …). Stops when the objective improved by less than ``delta`` (relative) over
    ``period`` epochs, or after ``max_iterations`` epochs.
    """
    rng = check_random_state(random_state)
    trees = _split_trees(batch)
    B = max(len(trees), 1)
    lam = 2.0 * float(c2) / B
    if lam <= 0:
        lam = 1e-12
    P = model.n_params

    def trial(cand, sample):
        v = np.zeros(P)
        loss, scale, _ = _sgd_epoch(model, trees, batch, y, sample, v, 1.0, 0.0, 1.0 / (lam * cand), lam)
        return loss + 0.5 * lam * len(sample) * scale * scale * float(v @ v)

    sample = rng.permutation(len(trees))[:min(len(trees), int(samples))]
    best_eta, best_loss = float(eta), np.inf
    cand = float(eta)
    for _ in range(min(int(max_trials), 2 * int(candidates))):
        obj = trial(cand, sample)
        if np.isfinite(obj) and obj < best_loss:
            best_eta, best_loss = cand, obj
            cand *= rate
        else:
            break
    cand = float(eta) / rate
    for _ in range(int(candidates)):
        obj = trial(cand, sample)
        if np.isfinite(obj) and obj < best_loss:
            best_eta, best_loss = cand, obj
            cand /= rate
        else:
            break

    v = np.zeros(P)
    scale, t = 1.0, 0.0
    t0_ = 1.0 / (lam * best_eta)
    history = []
    converged = False
    epoch = 0
    for epoch in range(1, int(max_iterations) + 1):
        tt = time.perf_counter()
        loss, scale, t = _sgd_epoch(model, trees, batch, y, rng.permutation(len(trees)), v, scale, t,
                                    t0_, lam)
        obj = loss + float(c2) * scale * scale * float(v @ v)
        history.append(obj)
        if callback is not None:
            callback({"iteration": epoch, "loss": float(obj), "eta0": best_eta,
                      "active_features": int(np.count_nonzero(v)), "seconds": time.perf_counter() - tt})
        if not np.isfinite(obj):
            raise FloatingPointError(f"l2sgd diverged at epoch {epoch} (objective {obj}); lower "
                                     f"`calibration_eta`")
        if len(history) > period:
            old = history[-1 - period]
            if (old - obj) / max(abs(obj), 1e-300) < delta:
                converged = True
                break
    return v * scale, epoch, converged
