"""Online trainers for chain CRFs, as in CRFsuite: SGD with L2 (``l2sgd``), averaged perceptron (``ap``),
passive–aggressive (``pa``) and AROW (``arow``).

Each epoch runs in one Numba kernel that visits the sequences in a shuffled order and, per sequence,
builds its potentials from the current weights and calls the inference engine's single-sequence
kernels (:func:`~structlearn.kernels.chain.viterbi_seq`, the normalised forward/backward passes) — no
second copy of any recurrence lives here.

References: Collins (2002) perceptron with averaging; Crammer et al. (2006) passive–aggressive (PA, PA-I,
PA-II); Mejer & Crammer (2010) AROW for structured prediction; Shalev-Shwartz et al. (2007) / Bottou's
SGD step size η_t = 1 / (λ (t0 + t)) with CRFsuite's calibration of η0.
"""
import math
import time

import numpy as np
from numba import njit
from sklearn.utils import check_random_state

from ..kernels.chain import _backward_seq, _forward_seq, _shifted_exp, viterbi_seq
from ..semirings import LOG

AP, PA, AROW = 0, 1, 2


@njit(cache=True)
def _seq_potentials(w, scale, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, K, out):
    for r in range(o, o + T):
        for k in range(K):
            out[r, k] = 0.0
        for p in range(item_ptr[r], item_ptr[r + 1]):
            a = item_attr[p]
            v = item_val[p] * scale
            for f in range(attr_ptr[a], attr_ptr[a + 1]):
                out[r, feat_label[f]] += v * w[f]


@njit(cache=True)
def _boundary_potentials(w, scale, F, K, free, trans, start, end):
    """trans (1, K, K), start, end from the weights; non-free entries: -inf if forbidden else 0."""
    base = F
    for i in range(K):
        for j in range(K):
            idx = base + i * K + j
            trans[0, i, j] = w[idx] * scale if free[idx] else 0.0
    base = F + K * K
    for k in range(K):
        start[k] = w[base + k] * scale if free[base + k] else 0.0
        end[k] = w[base + K + k] * scale if free[base + K + k] else 0.0


@njit(cache=True)
def _apply_forbidden(trans, start, end, forb, fstart, fend):
    K = start.shape[0]
    for i in range(K):
        if fstart[i]:
            start[i] = -np.inf
        if fend[i]:
            end[i] = -np.inf
        for j in range(K):
            if forb[i, j]:
                trans[0, i, j] = -np.inf


@njit(cache=True)
def _add_diff(coef, o, T, labels, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K, free,
              d, seen, touched, n_touched):
    """d += coef · f(x, labels) over the sparse feature space, recording touched indices once."""
    for r in range(o, o + T):
        lab = labels[r]
        for p in range(item_ptr[r], item_ptr[r + 1]):
            a = item_attr[p]
            for f in range(attr_ptr[a], attr_ptr[a + 1]):
                if feat_label[f] == lab:
                    if not seen[f]:
                        seen[f] = True
                        touched[n_touched] = f
                        n_touched += 1
                    d[f] += coef * item_val[p]
        if r + 1 < o + T:
            idx = F + lab * K + labels[r + 1]
            if free[idx]:
                if not seen[idx]:
                    seen[idx] = True
                    touched[n_touched] = idx
                    n_touched += 1
                d[idx] += coef
    for idx in (F + K * K + labels[o], F + K * K + K + labels[o + T - 1]):
        if free[idx]:
            if not seen[idx]:
                seen[idx] = True
                touched[n_touched] = idx
                n_touched += 1
            d[idx] += coef
    return n_touched


@njit(cache=True)
def large_margin_epoch(kind, w, u, sigma, counter, order, item_ptr, item_attr, item_val, offsets,
                       attr_ptr, feat_label, y, K, free, forb, fstart, fend, pa_type, c,
                       error_sensitive, gamma):
    """One epoch of AP / PA / AROW. Returns (loss, number of token errors, updated counter).

    d = f(x, y) - f(x, ŷ) with ŷ the Viterbi labeling under the current weights.
    AP: w += d. PA: w += τ d, τ from the hinge loss ℓ = s(ŷ) - s(y) + √(errors) (or 1) and ‖d‖² by
    pa_type 0/1/2. AROW: w += ℓ β Σd, Σ -= β (Σd)², β = 1/(dᵀΣd + γ) (diagonal Σ).
    Averaging (AP, PA with averaging): u += counter · τ d, averaged weights = w - u / counter.
    """
    N = item_ptr.shape[0] - 1
    F = feat_label.shape[0]
    P = w.shape[0]
    unary = np.empty((N, K))
    delta = np.empty((N, K))
    bp = np.zeros((N, K), dtype=np.int32)
    pred = np.zeros(N, dtype=np.int64)
    trans = np.empty((1, K, K))
    start = np.empty(K)
    end = np.empty(K)
    d = np.zeros(P)
    seen = np.zeros(P, dtype=np.bool_)
    touched = np.empty(P, dtype=np.int64)
    loss = 0.0
    errors = 0
    for b in order:
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        _seq_potentials(w, 1.0, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, K, unary)
        _boundary_potentials(w, 1.0, F, K, free, trans, start, end)
        _apply_forbidden(trans, start, end, forb, fstart, fend)
        viterbi_seq(unary, trans, start, end, o, T, delta, bp, pred)
        nd = 0
        for r in range(o, o + T):
            if pred[r] != y[r]:
                nd += 1
        if nd == 0:
            counter += 1.0
            continue
        errors += nd
        nt = _add_diff(1.0, o, T, y, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K, free,
                       d, seen, touched, 0)
        nt = _add_diff(-1.0, o, T, pred, item_ptr, item_attr, item_val, attr_ptr, feat_label, F, K,
                       free, d, seen, touched, nt)
        wd = 0.0
        dd = 0.0
        sd = 0.0
        beta = 0.0
        for q in range(nt):
            f = touched[q]
            wd += w[f] * d[f]
            dd += d[f] * d[f]
            sd += sigma[f] * d[f] * d[f]
        if kind == AP:
            tau = 1.0
            loss += nd
        else:
            ell = -wd + (math.sqrt(nd) if error_sensitive else 1.0)
            if ell < 0.0:
                ell = 0.0
            loss += ell
            if kind == PA:
                if dd == 0.0:
                    tau = 0.0
                elif pa_type == 0:
                    tau = ell / dd
                elif pa_type == 1:
                    tau = min(c, ell / dd)
                else:
                    tau = ell / (dd + 0.5 / c)
            else:
                beta = 1.0 / (sd + gamma)
                tau = ell * beta
        for q in range(nt):
            f = touched[q]
            if kind == AROW:
                step = tau * sigma[f] * d[f]
                sigma[f] -= beta * (sigma[f] * d[f]) ** 2
            else:
                step = tau * d[f]
            w[f] += step
            u[f] += counter * step
            d[f] = 0.0
            seen[f] = False
        counter += 1.0
    return loss, errors, counter


@njit(cache=True)
def sgd_epoch(v, scale, t, t0, lam, order, item_ptr, item_attr, item_val, offsets, attr_ptr,
              feat_label, y, K, free, forb, fstart, fend, n_limit):
    """One epoch of SGD on Σ_i [-log p(y_i|x_i)] + (λ/2) N ‖w‖² with w = scale · v (lazy L2 decay).

    Step η_t = 1 / (λ (t0 + t)); per sequence the gradient is expected minus observed feature counts
    from the engine's normalised forward/backward passes. Returns (loss, scale, t). Only the first
    ``n_limit`` sequences of ``order`` are visited (calibration).
    """
    N = item_ptr.shape[0] - 1
    F = feat_label.shape[0]
    unary = np.empty((N, K))
    alpha = np.empty((N, K))
    beta = np.empty((N, K))
    inca = np.empty(N)
    incb = np.empty(N)
    trans = np.empty((1, K, K))
    start = np.empty(K)
    end = np.empty(K)
    marg = np.empty(K)
    gtrans = np.zeros((K, K))
    loss = 0.0
    count = 0
    for b in order:
        if count >= n_limit:
            break
        count += 1
        o = offsets[b]
        T = offsets[b + 1] - o
        if T == 0:
            continue
        eta = 1.0 / (lam * (t0 + t))
        t += 1.0
        scale *= 1.0 - eta * lam
        if scale < 1e-30:  # fold the lazy scale into v
            for f in range(v.shape[0]):
                v[f] *= scale
            scale = 1.0
        _seq_potentials(v, scale, o, T, item_ptr, item_attr, item_val, attr_ptr, feat_label, K, unary)
        _boundary_potentials(v, scale, F, K, free, trans, start, end)
        _apply_forbidden(trans, start, end, forb, fstart, fend)
        eTc, cmax = _shifted_exp(trans[0], 0)
        eTr, rmax = _shifted_exp(trans[0], 1)
        _forward_seq(unary, trans, start, o, T, LOG, alpha, inca, eTc, cmax)
        _backward_seq(unary, trans, end, o, T, beta, incb, eTr, rmax)
        # log Z from the normalised forward pass
        lz = 0.0
        for r in range(o, o + T):
            lz += inca[r]
        m = -np.inf
        for k in range(K):
            if alpha[o + T - 1, k] + end[k] > m:
                m = alpha[o + T - 1, k] + end[k]
        s = 0.0
        for k in range(K):
            s += math.exp(alpha[o + T - 1, k] + end[k] - m)
        lz += m + math.log(s)
        gold = start[y[o]] + end[y[o + T - 1]]
        for r in range(o, o + T):
            gold += unary[r, y[r]]
            if r + 1 < o + T:
                gold += trans[0, y[r], y[r + 1]]
        loss += lz - gold
        gain = eta / scale
        for i in range(K):
            for j in range(K):
                gtrans[i, j] = 0.0
        for r in range(o, o + T):
            # token marginals, normalised locally
            mm = -np.inf
            for k in range(K):
                marg[k] = alpha[r, k] + beta[r, k]
                if marg[k] > mm:
                    mm = marg[k]
            tot = 0.0
            for k in range(K):
                marg[k] = math.exp(marg[k] - mm) if marg[k] != -np.inf else 0.0
                tot += marg[k]
            for k in range(K):
                marg[k] /= tot
            marg[y[r]] -= 1.0
            for p in range(item_ptr[r], item_ptr[r + 1]):
                a = item_attr[p]
                val = item_val[p]
                for f in range(attr_ptr[a], attr_ptr[a + 1]):
                    v[f] -= gain * val * marg[feat_label[f]]
            if r == o:
                for k in range(K):
                    if free[F + K * K + k]:
                        v[F + K * K + k] -= gain * marg[k]
            if r == o + T - 1:
                for k in range(K):
                    if free[F + K * K + K + k]:
                        v[F + K * K + K + k] -= gain * marg[k]
            if r + 1 < o + T:
                # pairwise marginals P(y_r = i, y_r+1 = j) = exp(α̂_i + trans_ij + unary_j + β̂_j - L)
                ln = mm + math.log(tot) + incb[r]
                for i in range(K):
                    if alpha[r, i] == -np.inf:
                        continue
                    for j in range(K):
                        x = alpha[r, i] + trans[0, i, j] + unary[r + 1, j] + beta[r + 1, j] - ln
                        if x != -np.inf:
                            gtrans[i, j] += math.exp(x)
                gtrans[y[r], y[r + 1]] -= 1.0
        for i in range(K):
            for j in range(K):
                idx = F + i * K + j
                if free[idx]:
                    v[idx] -= gain * gtrans[i, j]
    return loss, scale, t


def _model_arrays(model):
    return (model.attr_ptr, model.feat_label, model.n_labels, model.free_mask(), model.forbidden,
            model.forbidden_start, model.forbidden_end)


def large_margin(algorithm, model, packed, y, *, max_iterations=100, epsilon=0.0, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, random_state=None,
                 callback=None):
    """Train by AP / PA / AROW; returns (w, n_epochs, converged).

    Stops after ``max_iterations`` epochs, or when the fraction of mislabelled tokens in an epoch is at
    most ``epsilon``. AP always averages; PA averages when ``averaging``; AROW does not.
    """
    kind = {"ap": AP, "pa": PA, "arow": AROW}[algorithm]
    rng = check_random_state(random_state)
    attr_ptr, feat_label, K, free, forb, fstart, fend = _model_arrays(model)
    P = model.n_params
    w = np.zeros(P)
    u = np.zeros(P)
    sigma = np.full(P, float(variance))
    counter = 1.0
    n_tokens = max(packed.n_items, 1)
    converged = False
    epoch = 0
    for epoch in range(1, max_iterations + 1):
        t0 = time.perf_counter()
        order = rng.permutation(len(packed.lengths)).astype(np.int64)
        loss, errors, counter = large_margin_epoch(
            kind, w, u, sigma, counter, order, packed.item_ptr, packed.item_attr, packed.item_val,
            packed.offsets, attr_ptr, feat_label, y, K, free, forb, fstart, fend, int(pa_type),
            float(c), bool(error_sensitive), float(gamma))
        if callback is not None:
            callback({"iteration": epoch, "loss": float(loss), "error_rate": errors / n_tokens,
                      "active_features": int(np.count_nonzero(w)), "seconds": time.perf_counter() - t0})
        if errors / n_tokens <= epsilon:
            converged = True
            break
    average = kind == AP or (kind == PA and averaging)
    w_final = w - u / counter if average else w
    return w_final, epoch, converged


def l2sgd(model, packed, y, n_attributes=None, *, c2=1.0, max_iterations=1000, period=10, delta=1e-6,
          eta=0.1, rate=2.0, samples=1000, candidates=10, max_trials=20, random_state=None,
          callback=None):
    """SGD with L2 regularisation (CRFsuite's ``l2sgd``); returns (w, n_epochs, converged).

    λ = 2·c2 / N so that N·(λ/2)‖w‖² = c2‖w‖² (CRFsuite scaling). η0 is calibrated on ``samples``
    sequences: candidate rates η, η·rate, η/rate, … are tried for one pass each and the one with the
    lowest regularised loss kept. Stops when the objective improved by less than ``delta`` (relative)
    over ``period`` epochs, or after ``max_iterations`` epochs.
    """
    rng = check_random_state(random_state)
    attr_ptr, feat_label, K, free, forb, fstart, fend = _model_arrays(model)
    B = len(packed.lengths)
    lam = 2.0 * float(c2) / max(B, 1)
    if lam <= 0:
        lam = 1e-12
    P = model.n_params
    args = (packed.item_ptr, packed.item_attr, packed.item_val, packed.offsets, attr_ptr, feat_label,
            y, K, free, forb, fstart, fend)

    # calibration of eta0 (one pass over a sample, from w = 0)
    sample = rng.permutation(B)[:min(B, int(samples))].astype(np.int64)
    best_eta, best_loss = float(eta), np.inf
    tried = []
    cand = float(eta)
    for trial in range(min(int(max_trials), 2 * int(candidates))):
        v = np.zeros(P)
        loss, scale, _ = sgd_epoch(v, 1.0, 0.0, 1.0 / (lam * cand), lam, sample, *args, len(sample))
        wnorm = scale * scale * float(v @ v)
        obj = loss + 0.5 * lam * len(sample) * wnorm
        tried.append((cand, obj))
        if np.isfinite(obj) and obj < best_loss:
            best_eta, best_loss = cand, obj
            cand *= rate
        else:
            break
    cand = float(eta) / rate
    for trial in range(int(candidates)):
        v = np.zeros(P)
        loss, scale, _ = sgd_epoch(v, 1.0, 0.0, 1.0 / (lam * cand), lam, sample, *args, len(sample))
        obj = loss + 0.5 * lam * len(sample) * scale * scale * float(v @ v)
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
        order = rng.permutation(B).astype(np.int64)
        loss, scale, t = sgd_epoch(v, scale, t, t0_, lam, order, *args, B)
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
