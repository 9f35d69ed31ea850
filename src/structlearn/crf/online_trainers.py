"""Online trainers for chain CRFs, as in CRFsuite: SGD with L2 (``l2sgd``), averaged perceptron (``ap``),
passive–aggressive (``pa``) and AROW (``arow``).

Each epoch runs in one Numba kernel (:mod:`structlearn.engine.kernels.online`) that visits the sequences in a
shuffled order and, per sequence, builds its potentials from the current weights and calls the
inference engine's single-sequence kernels (:func:`~structlearn.engine.kernels.chain.viterbi_seq`,
:func:`~structlearn.engine.kernels.chain.marginals_seq`) — no second copy of any recurrence lives here. The
epoch loops (:func:`large_margin_loop`, :func:`l2sgd_loop`) are shared with
:mod:`structlearn.crf._tree_online_trainers`.

References: Collins (2002) perceptron with averaging; Crammer et al. (2006) passive–aggressive (PA, PA-I,
PA-II); Mejer & Crammer (2010) AROW for structured prediction; Shalev-Shwartz et al. (2007) / Bottou's
SGD step size η_t = 1 / (λ (t0 + t)) with CRFsuite's calibration of η0.
"""
import numbers
import time

import numpy as np
from sklearn.utils import check_random_state

from ..engine.kernels.online import AP, AROW, PA, large_margin_epoch, sgd_epoch
from ._crfsuite_rng import CRFsuiteShuffle

KINDS = {"ap": AP, "pa": PA, "arow": AROW}
SHUFFLES = ("crfsuite", "numpy")


def large_margin_loop(run_epoch, kind, n_params, n_items, *, max_iterations, epsilon, averaging, variance,
                      callback, stop=None):
    """The epoch loop of AP / PA / AROW, shared by the chain and tree trainers.

    ``run_epoch(w, u, sigma, counter) -> (loss, errors, counter)`` runs one epoch in place on the
    weights ``w``, the averaging sums ``u`` and the AROW variances ``sigma``. Stops after
    ``max_iterations`` epochs, or when ``stop(loss, errors)`` is true after an epoch (by default: the
    fraction of mislabelled items of the epoch is below ``epsilon``, strictly: ``epsilon=0`` runs every
    epoch). Returns (w, n_epochs, converged), w averaged for AP and (with ``averaging``) PA.
    """
    w = np.zeros(n_params)
    u = np.zeros(n_params)
    sigma = np.full(n_params, float(variance))
    counter = 1.0
    n_items = max(n_items, 1)
    converged = False
    epoch = 0
    for epoch in range(1, int(max_iterations) + 1):
        t0 = time.perf_counter()
        loss, errors, counter = run_epoch(w, u, sigma, counter)
        if callback is not None:
            callback({"iteration": epoch, "loss": float(loss), "error_rate": errors / n_items,
                      "active_features": int(np.count_nonzero(w)), "seconds": time.perf_counter() - t0})
        if (stop(loss, errors) if stop is not None else errors / n_items < epsilon):
            converged = True
            break
    average = kind == AP or (kind == PA and averaging)
    # as CRFsuite: w - (1/counter)·u (not u / counter, which rounds differently)
    return (w - (1.0 / counter) * u if average else w), epoch, converged


def crfsuite_seed(random_state):
    """The ``srand`` seed of CRFsuite's shuffling stream for ``random_state``: 1 (a process that never seeds,
    as CRFsuite) for None, the int itself for an int, ``randint(2**31)`` drawn from a RandomState."""
    if random_state is None:
        return 1
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(2**31))


def check_shuffle(shuffle):
    """``shuffle`` validated: ``"crfsuite"`` or ``"numpy"``."""
    if shuffle not in SHUFFLES:
        raise ValueError(f"shuffle: expected one of {SHUFFLES}, got {shuffle!r}")
    return shuffle


def draw_order(source, n):
    """The next instance order (int64) of ``source``: a :class:`CRFsuiteShuffle` (CRFsuite's
    ``dataset_shuffle``, the permutation kept between draws) or a RandomState (``permutation(n)``)."""
    if isinstance(source, CRFsuiteShuffle):
        return source.shuffle()
    return source.permutation(n).astype(np.int64)


def order_source(shuffle, n, random_state):
    """Where the instance orders over ``n`` instances come from, for :func:`draw_order`: ``shuffle="crfsuite"``,
    CRFsuite's ``dataset_shuffle`` from glibc ``rand()`` seeded by :func:`crfsuite_seed`
    (:class:`~structlearn.crf._crfsuite_rng.CRFsuiteShuffle`, the permutation kept between draws);
    ``"numpy"``, ``check_random_state(random_state)`` (a fresh ``permutation(n)`` per draw)."""
    if check_shuffle(shuffle) == "crfsuite":
        return CRFsuiteShuffle(max(int(n), 1), seed=crfsuite_seed(random_state))
    return check_random_state(random_state)


def epoch_orders(shuffle, n, random_state):
    """A function returning the instance order (int64) of each next epoch over ``n`` instances, drawn from
    :func:`order_source`."""
    source = order_source(shuffle, n, random_state)
    return lambda: draw_order(source, n)


def calibrate_eta(run_epoch, n, n_params, lam, rng, *, eta, rate, samples, candidates, max_trials, w0=None):
    """CRFsuite's calibration of the SGD rate η0 (``l2sgd``); returns the best η.

    One order is drawn from ``rng`` (:func:`draw_order`) and its first S = min(n, ``samples``) instances
    are the sample. The reference is the objective Σ loss + (λ/2) ‖w‖² S at w = ``w0`` (default 0, as
    CRFsuite; a warm start passes its weights) on the sample. Each trial runs one pass over the sample
    from ``w0`` with t0 = 1 / (λ η) and scores the same objective at its end; a trial is *good* when that
    is finite and below the reference. Rates go up (η, η·rate, …) while trials are good and
    fewer than ``candidates`` good ones were seen, then down from η/rate (η/rate², …) until
    ``candidates`` more good ones; at most ``max_trials`` - 1 trials in all. The best-scoring finite
    trial's η is returned (``eta`` when none is finite).

    ``run_epoch(order, v, scale, t, t0) -> (loss, scale, t)`` as in :func:`l2sgd_loop`.
    """
    sample = draw_order(rng, n)[:min(n, int(samples))]
    S = len(sample)
    w0 = np.zeros(n_params) if w0 is None else np.asarray(w0, dtype=np.float64)
    # t0 = inf: every step is 0, so the pass sums the losses at w0
    init_loss = run_epoch(sample, w0.copy(), 1.0, 0.0, np.inf)[0] + 0.5 * lam * float(w0 @ w0) * S
    best_eta, best_loss = float(eta), np.inf
    cand = float(eta)
    num, dec, trials = int(candidates), False, 1
    while num > 0 or not dec:
        v = w0.copy()
        with np.errstate(over="ignore", invalid="ignore"):
            loss, scale, _ = run_epoch(sample, v, 1.0, 0.0, 1.0 / (lam * cand))
            v *= scale
            loss += 0.5 * lam * float(v @ v) * S
        good = bool(np.isfinite(loss)) and loss < init_loss
        if good:
            num -= 1
        if np.isfinite(loss) and loss < best_loss:
            best_eta, best_loss = cand, loss
        if dec:
            cand /= rate
        elif good and num > 0:
            cand *= rate
        else:
            dec, num, cand = True, int(candidates), float(eta) / rate
        trials += 1
        if trials >= max_trials:
            break
    return best_eta


def l2sgd_loop(run_epoch, n, n_params, lam, rng, *, c2, max_iterations, period, delta, eta, rate,
               samples, candidates, max_trials, callback):
    """Calibration of η0 and the epoch loop of ``l2sgd`` (CRFsuite's), shared by the chain and tree trainers.

    ``run_epoch(order, v, scale, t, t0) -> (loss, scale, t)`` runs one SGD pass over the instances
    ``order`` (int64) with w = scale · v. ``rng`` draws the orders (:func:`draw_order`): one for the
    calibration of η0 (:func:`calibrate_eta`), then one per epoch. From w = 0 and t = 0, with
    t0 = 1 / (λ η0), each epoch's objective is Σ loss + (λ/2) ‖w‖² n (the lazy scale folded into the
    weights at the end of each epoch). Stops when the relative improvement (f[e - period] - f[e]) / f[e]
    over ``period`` epochs is below ``delta`` (tested from epoch period + 1 on), or after
    ``max_iterations`` epochs. Returns (w, n_epochs, converged) with w the weights of the epoch of the
    lowest objective, as CRFsuite.
    """
    best_eta = calibrate_eta(run_epoch, n, n_params, lam, rng, eta=eta, rate=rate, samples=samples,
                             candidates=candidates, max_trials=max_trials)
    v = np.zeros(n_params)
    best_w, best_obj = v.copy(), np.inf
    t = 0.0
    t0_ = 1.0 / (lam * best_eta)
    history = []
    converged = False
    epoch = 0
    for epoch in range(1, int(max_iterations) + 1):
        tt = time.perf_counter()
        loss, scale, t = run_epoch(draw_order(rng, n), v, 1.0, t, t0_)
        v *= scale
        obj = loss + 0.5 * lam * float(v @ v) * n
        if callback is not None:
            callback({"iteration": epoch, "loss": float(obj), "eta0": best_eta,
                      "active_features": int(np.count_nonzero(v)), "seconds": time.perf_counter() - tt})
        if not np.isfinite(obj):
            raise FloatingPointError(f"l2sgd diverged at epoch {epoch} (objective {obj}); lower "
                                     f"`calibration_eta`")
        if obj < best_obj:
            best_obj = obj
            best_w[:] = v
        history.append(obj)
        if len(history) > period:
            with np.errstate(divide="ignore", invalid="ignore"):
                improvement = (np.float64(history[-1 - period]) - obj) / np.float64(obj)
            if improvement < delta:
                converged = True
                break
    return best_w, epoch, converged


def _model_arrays(model):
    return (model.attr_ptr, model.feat_label, model.n_labels, model.free_mask(), model.forbidden,
            model.forbidden_start, model.forbidden_end)


def large_margin(algorithm, model, packed, y, *, max_iterations=100, epsilon=0.0, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0, random_state=None,
                 callback=None, shuffle="crfsuite"):
    """Train by AP / PA / AROW as CRFsuite does; returns (w, n_epochs, converged).

    The updates are those of :func:`~structlearn.engine.kernels.online.large_margin_epoch`, the instance
    order that of ``shuffle`` (:func:`epoch_orders`; ``"crfsuite"``: CRFsuite's own, from ``random_state``).
    Stops after ``max_iterations`` epochs, or, as CRFsuite, when the epoch's loss divided by the number of
    sequences is below ``epsilon`` (AROW: at most ``epsilon``, so ``epsilon=0`` stops AROW after an epoch
    without mistakes) — the loss of AP being Σ (token errors / length) over the sequences, that of PA and
    AROW the sum of the costs ℓ. AP always averages; PA averages when ``averaging``; AROW does not.
    """
    kind = KINDS[algorithm]
    B = len(packed.lengths)
    next_order = epoch_orders(shuffle, B, random_state)
    attr_ptr, feat_label, K, free, forb, fstart, fend = _model_arrays(model)
    n_seq = max(B, 1)

    def stop(loss, errors):
        return loss / n_seq <= epsilon if kind == AROW else loss / n_seq < epsilon

    def run_epoch(w, u, sigma, counter):
        order = next_order()
        return large_margin_epoch(
            kind, w, u, sigma, counter, order, packed.item_ptr, packed.item_attr, packed.item_val,
            packed.offsets, attr_ptr, feat_label, y, K, free, forb, fstart, fend, int(pa_type),
            float(c), bool(error_sensitive), float(gamma))

    return large_margin_loop(run_epoch, kind, model.n_params, packed.n_items,
                             max_iterations=max_iterations, epsilon=epsilon, averaging=averaging,
                             variance=variance, callback=callback, stop=stop)


def l2sgd(model, packed, y, n_attributes=None, *, c2=1.0, max_iterations=1000, period=10, delta=1e-6,
          eta=0.1, rate=2.0, samples=1000, candidates=10, max_trials=20, random_state=None,
          shuffle="crfsuite", callback=None):
    """SGD with L2 regularisation (CRFsuite's ``l2sgd``); returns (w, n_epochs, converged).

    λ = 2·c2 / N so that N·(λ/2)‖w‖² = c2‖w‖² (CRFsuite scaling). η0 is calibrated as CRFsuite does
    (:func:`calibrate_eta`); the epochs, the stopping test and the weights returned (those of the epoch
    of the lowest objective) are CRFsuite's (:func:`l2sgd_loop`).

    Parameters
    ----------
    shuffle : {"crfsuite", "numpy"}, default "crfsuite"
        The instance orders. ``"crfsuite"``: CRFsuite's own (:class:`~structlearn.crf._crfsuite_rng.CRFsuiteShuffle`
        with the seed :func:`crfsuite_seed` of ``random_state``: 1 for None, as a CRFsuite process that never
        seeds), so that training reproduces CRFsuite's; ``"numpy"``: ``permutation`` of
        ``check_random_state(random_state)``.
    """
    attr_ptr, feat_label, K, free, forb, fstart, fend = _model_arrays(model)
    B = len(packed.lengths)
    lam = 2.0 * float(c2) / max(B, 1)
    if lam <= 0:
        lam = 1e-12
    rng = order_source(shuffle, B, random_state)
    args = (packed.item_ptr, packed.item_attr, packed.item_val, packed.offsets, attr_ptr, feat_label,
            y, K, free, forb, fstart, fend)

    def run_epoch(order, v, scale, t, t0):
        return sgd_epoch(v, scale, t, t0, lam, order, *args, len(order))

    return l2sgd_loop(run_epoch, B, model.n_params, lam, rng, c2=c2, max_iterations=max_iterations,
                      period=period, delta=delta, eta=eta, rate=rate, samples=samples,
                      candidates=candidates, max_trials=max_trials, callback=callback)


# ----------------------------------------------------------------------------------------------------
# streaming: one epoch per call, the trainer's state kept between calls (LinearChainCRF.partial_fit)
# ----------------------------------------------------------------------------------------------------
class StreamState:
    """What an online trainer keeps between two epochs on different batches of a stream.

    Arrays are in the feature model's parameter layout (:mod:`structlearn.crf._potentials`) and follow it
    when the model grows (:meth:`remap`).

    Attributes
    ----------
    algorithm : {"l2sgd", "ap", "pa", "arow"}
    w : ndarray (n_params,)
        ap/pa/arow: the current (not averaged) weights; l2sgd: ``v`` with weights ``scale · v``.
    u : ndarray (n_params,) or None
        ap/pa/arow: the averaging sums Σ counter·step (averaged weights ``w - u / counter``).
    sigma : ndarray (n_params,) or None
        ap/pa/arow: AROW's diagonal variances (unused by ap/pa, which the kernel ignores).
    counter : float
        ap/pa/arow: 1 + the number of sequences visited.
    scale, t, eta0 : float
        l2sgd: lazy L2 scale, the number of SGD steps taken, the calibrated rate η0 (None until the
        first batch calibrates it).
    n_sequences, n_epochs : int
        Sequences visited (each visit counts) and epochs (calls) so far.
    rng : numpy.random.RandomState
        Shuffling of every epoch, drawn from in the order ``fit`` draws (calibration sample, epochs).
    shuffler : CRFsuiteShuffle or None
        l2sgd with ``shuffle="crfsuite"``: CRFsuite's shuffling stream, in place of ``rng`` (None until
        the first batch).
    """

    def __init__(self, algorithm, n_params, rng, variance=1.0):
        self.algorithm = algorithm
        self.rng = rng
        self.w = np.zeros(n_params)
        large = algorithm != "l2sgd"
        self.u = np.zeros(n_params) if large else None
        self.sigma = np.full(n_params, float(variance)) if large else None
        self.counter = 1.0
        self.scale, self.t, self.eta0 = 1.0, 0.0, None
        self.shuffler = None
        self.n_sequences = 0
        self.n_epochs = 0

    def remap(self, index, n_params, variance=1.0):
        """Move the state into a grown parameter vector: old parameter ``i`` goes to ``index[i]``; new
        entries are 0 (weights, sums) and ``variance`` (AROW's variances)."""
        def move(a, fill):
            out = np.full(n_params, fill)
            out[index] = a
            return out

        self.w = move(self.w, 0.0)
        if self.u is not None:
            self.u = move(self.u, 0.0)
            self.sigma = move(self.sigma, float(variance))

    def weights(self, averaging=True):
        """The weights a predictor uses: averaged for ap (and pa with ``averaging``)."""
        if self.algorithm == "l2sgd":
            return self.w * self.scale
        kind = KINDS[self.algorithm]
        if kind == AP or (kind == PA and averaging):
            return self.w - (1.0 / self.counter) * self.u
        return self.w.copy()


def large_margin_stream_epoch(state, model, packed, y, *, pa_type=1, c=1.0, error_sensitive=True,
                              gamma=1.0):
    """One AP / PA / AROW epoch over the batch (shuffled by ``state.rng``), continuing ``state``.

    The same kernel and draws as an epoch of :func:`large_margin`; returns (loss, token errors).
    """
    attr_ptr, feat_label, K, free, forb, fstart, fend = _model_arrays(model)
    order = state.rng.permutation(len(packed.lengths)).astype(np.int64)
    loss, errors, state.counter = large_margin_epoch(
        KINDS[state.algorithm], state.w, state.u, state.sigma, state.counter, order, packed.item_ptr,
        packed.item_attr, packed.item_val, packed.offsets, attr_ptr, feat_label, y, K, free, forb, fstart,
        fend, int(pa_type), float(c), bool(error_sensitive), float(gamma))
    state.n_sequences += len(packed.lengths)
    state.n_epochs += 1
    return float(loss), int(errors)


def l2sgd_stream_epoch(state, model, packed, y, lam, *, eta=0.1, rate=2.0, samples=1000, candidates=10,
                       max_trials=20, random_state=None, shuffle="crfsuite"):
    """One SGD epoch over the batch with L2 weight ``lam``, continuing ``state``; η0 is calibrated on the
    first batch (:func:`calibrate_eta`) and kept.

    Step η_t = 1 / (λ (t0 + t)) with t0 = 1 / (λ η0), i.e. Bottou's η_t = η0 / (1 + λ η0 t) with the
    step counter t continued across calls (λ may change between calls); the lazy scale is folded into
    the weights at the end of the epoch. The batch is shuffled as :func:`l2sgd` shuffles (``shuffle``:
    ``"crfsuite"``, CRFsuite's stream seeded by :func:`crfsuite_seed` of ``random_state`` at the first
    call and continued across calls, a new permutation when the batch size changes; ``"numpy"``:
    ``state.rng``), so k calls on the same data are k epochs of :func:`l2sgd` (``period`` aside). Returns
    the batch's loss Σ -log p(y|x) accumulated during the pass.
    """
    check_shuffle(shuffle)
    attr_ptr, feat_label, K, free, forb, fstart, fend = _model_arrays(model)
    B = len(packed.lengths)
    lam = float(lam) if lam > 0 else 1e-12
    args = (packed.item_ptr, packed.item_attr, packed.item_val, packed.offsets, attr_ptr, feat_label,
            y, K, free, forb, fstart, fend)

    def run_epoch(order, v, scale, t, t0):
        return sgd_epoch(v, scale, t, t0, lam, order, *args, len(order))

    source = state.rng
    if shuffle == "crfsuite":
        source = state.shuffler
        if source is None or source.n != B:
            new = CRFsuiteShuffle(B, crfsuite_seed(random_state) if source is None else 1)
            if source is not None:
                new.rng = source.rng   # one rand() stream for the whole stream
            source = state.shuffler = new
    if state.eta0 is None:
        state.eta0 = calibrate_eta(run_epoch, B, model.n_params, lam, source, eta=eta, rate=rate,
                                   samples=samples, candidates=candidates, max_trials=max_trials,
                                   w0=state.w * state.scale)
    loss, scale, state.t = run_epoch(draw_order(source, B), state.w, state.scale, state.t,
                                     1.0 / (lam * state.eta0))
    state.w *= scale
    state.scale = 1.0
    state.n_sequences += B
    state.n_epochs += 1
    return float(loss)
