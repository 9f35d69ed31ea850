"""Online trainers for tree CRFs: SGD with L2 (``l2sgd``), averaged perceptron (``ap``),
passive–aggressive (``pa``) and AROW (``arow``) — the same updates as :mod:`structlearn.crf.online_trainers`.

Deliberately simple: a Python loop over the trees of a shuffled epoch, one tree at a time (per-instance
updates, as CRFsuite), each step calling the feature model and the :class:`~structlearn.engine.structures.Tree`
structure (exact MAP by max-product for the large-margin family, exact marginals for SGD). There is no
second copy of any recurrence and no tree-specific Numba kernel; the price is Python overhead per tree
(≈ 0.5–1 ms; an epoch over the 8,544 SST training trees takes seconds). Gradients and feature-difference
vectors are dense (n_params,) per tree, so a step costs O(n_params) on top of the tree's O(T·K²).

References: Collins (2002) perceptron with averaging; Crammer et al. (2006) passive–aggressive (PA, PA-I,
PA-II); Mejer & Crammer (2010) AROW for structured prediction; Bottou's SGD step size
η_t = 1 / (λ (t0 + t)) with CRFsuite's calibration of η0.
"""
import math

import numpy as np
from sklearn.utils import check_random_state

from ..engine.kernels.online import AP, PA, pa_step
from .objectives import TreeCLL
from .online_trainers import KINDS, calibrate_eta, l2sgd_loop, large_margin_loop

__all__ = ["large_margin", "l2sgd", 
           "large_margin_stream_epoch", "l2sgd_stream_epoch", "n_trees"]


def _split_trees(batch):
    """One single-tree sub-batch per non-empty tree (views)."""
    return [(b, batch.slice(b, b + 1)) for b in range(len(batch.lengths)) if batch.lengths[b] > 0]


def n_trees(batch):
    """The number of instances the trainers visit per epoch: the non-empty trees of ``batch``."""
    return int(np.count_nonzero(batch.lengths))


def _large_margin_epoch(kind, model, trees, batch, y, order, w, u, sigma, counter, pa_type, c,
                        error_sensitive, gamma):
    """One AP / PA / AROW pass over ``trees[order]``, updating ``w``, ``u`` and ``sigma`` in place;
    returns (loss, mislabelled nodes, counter)."""
    loss = 0.0
    errors = 0
    for i in order:
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
        if kind == AP:
            step = dv
            loss += nd
        else:
            ell = max(0.0, -float(w[idx] @ dv) + (math.sqrt(nd) if error_sensitive else 1.0))
            loss += ell
            if kind == PA:
                step = pa_step(ell, float(dv @ dv), int(pa_type), float(c)) * dv
            else:
                sd = sigma[idx] * dv
                beta = 1.0 / (float(sd @ dv) + gamma)
                step = ell * beta * sd
                sigma[idx] -= beta * sd * sd
        w[idx] += step
        u[idx] += counter * step
        counter += 1.0
    return loss, errors, counter


def large_margin(algorithm, model, batch, y, *, max_iterations=100, epsilon=0.0, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, random_state=None,
                 callback=None):
    """Train by AP / PA / AROW on a :class:`~structlearn.crf._tree_potentials.TreeBatch`.

    Returns (w, epochs, converged).

    Per tree: ŷ = argmax under the current weights; if ŷ ≠ y, d = f(x, y) − f(x, ŷ) and
    AP: w += d; PA: w += τ d with the hinge loss ℓ = s(ŷ) − s(y) + √(node errors) (or 1) and τ from
    ``pa_type`` 0/1/2; AROW: w += ℓ β Σd, Σ −= β (Σd)², β = 1 / (dᵀΣd + γ) (diagonal Σ). Averaged
    weights (AP; PA with ``averaging``) are w − u / counter with u += counter · step. Stops after
    ``max_iterations`` epochs or when the fraction of mislabelled nodes in an epoch is ≤ ``epsilon``
    (the epoch loop is :func:`structlearn.crf.online_trainers.large_margin_loop`).
    """
    if algorithm not in KINDS:
        raise ValueError(f"`algorithm` must be 'ap', 'pa' or 'arow'; got {algorithm!r}")
    kind = KINDS[algorithm]
    rng = check_random_state(random_state)
    trees = _split_trees(batch)

    def run_epoch(w, u, sigma, counter):
        return _large_margin_epoch(kind, model, trees, batch, y, rng.permutation(len(trees)), w, u, sigma,
                                   counter, pa_type, c, error_sensitive, gamma)

    return large_margin_loop(run_epoch, kind, model.n_params, batch.n_items,
                             max_iterations=max_iterations, epsilon=epsilon, averaging=averaging,
                             variance=variance, callback=callback)


def _sgd_epoch(model, trees, batch, y, order, v, scale, t, t0, lam):
    """One SGD pass over ``trees[order]`` with w = scale · v; returns (Σ −log p, scale, t)."""
    loss = 0.0
    g = np.empty(model.n_params)
    for i in order:
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

    λ = 2·c2 / B so that B·(λ/2)‖w‖² = c2‖w‖². η0 calibration and stopping as
    :func:`structlearn.crf.online_trainers.l2sgd` (one loop, :func:`~structlearn.crf.online_trainers.l2sgd_loop`).
    """
    rng = check_random_state(random_state)
    trees = _split_trees(batch)
    lam = 2.0 * float(c2) / max(len(trees), 1)
    if lam <= 0:
        lam = 1e-12

    def run_epoch(order, v, scale, t, t0):
        return _sgd_epoch(model, trees, batch, y, order, v, scale, t, t0, lam)

    return l2sgd_loop(run_epoch, len(trees), model.n_params, lam, rng, c2=c2,
                      max_iterations=max_iterations, period=period, delta=delta, eta=eta, rate=rate,
                      samples=samples, candidates=candidates, max_trials=max_trials, callback=callback)


# ----------------------------------------------------------------------------------------------------
# streaming: one epoch per call, the trainer's state kept between calls (TreeCRF.partial_fit)
# ----------------------------------------------------------------------------------------------------
def large_margin_stream_epoch(state, model, batch, y, *, pa_type=1, c=1.0, error_sensitive=True, gamma=1.0):
    """One AP / PA / AROW epoch over the trees of ``batch`` (shuffled by ``state.rng``), continuing
    ``state`` (:class:`~structlearn.crf.online_trainers.StreamState`).

    The same per-tree steps and the same draws as an epoch of :func:`large_margin`; returns
    (loss, mislabelled nodes). ``state.n_sequences`` counts the non-empty trees visited.
    """
    trees = _split_trees(batch)
    loss, errors, state.counter = _large_margin_epoch(
        KINDS[state.algorithm], model, trees, batch, y, state.rng.permutation(len(trees)), state.w, state.u,
        state.sigma, state.counter, pa_type, c, error_sensitive, gamma)
    state.n_sequences += len(trees)
    state.n_epochs += 1
    return float(loss), int(errors)


def l2sgd_stream_epoch(state, model, batch, y, lam, *, eta=0.1, rate=2.0, samples=1000, candidates=10,
                       max_trials=20, random_state=None):
    """One SGD epoch over the trees of ``batch`` (shuffled by ``state.rng``) with L2 weight ``lam``,
    continuing ``state``; η0 is calibrated on the first batch
    (:func:`~structlearn.crf.online_trainers.calibrate_eta`) and kept.

    Step η_t = 1 / (λ (t0 + t)), t0 = 1 / (λ η0), the step counter t continued across calls (as
    :func:`structlearn.crf.online_trainers.l2sgd_stream_epoch`). The same per-tree steps and draws as an
    epoch of :func:`l2sgd`; returns the batch's Σ −log p(y|x) accumulated during the pass. Trees are
    shuffled by ``state.rng`` (``random_state`` is accepted for the chain trainer's signature and unused).
    """
    trees = _split_trees(batch)
    lam = float(lam) if lam > 0 else 1e-12

    def run_epoch(order, v, scale, t, t0):
        return _sgd_epoch(model, trees, batch, y, order, v, scale, t, t0, lam)

    if state.eta0 is None:
        state.eta0 = calibrate_eta(run_epoch, len(trees), model.n_params, lam, state.rng, eta=eta, rate=rate,
                                   samples=samples, candidates=candidates, max_trials=max_trials,
                                   w0=state.w * state.scale)
    loss, scale, state.t = run_epoch(state.rng.permutation(len(trees)).astype(np.int64), state.w,
                                     state.scale, state.t, 1.0 / (lam * state.eta0))
    state.w *= scale   # the lazy scale folded in at the end of the epoch, as l2sgd_loop does
    state.scale = 1.0
    state.n_sequences += len(trees)
    state.n_epochs += 1
    return float(loss)
