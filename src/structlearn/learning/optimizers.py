"""Optimisers for CRF training: L-BFGS / OWL-QN (libLBFGS through pylbfgs), SGD with L2, and the online
large-margin family (averaged perceptron, passive–aggressive, AROW) — the set CRFsuite offers.

Every optimiser takes an objective ``f(w, g) -> value`` (gradient written into g) or, for online
methods, a per-sequence decoder, and returns ``(w, n_iter, converged, log)``; ``log`` is a list of dicts
(iteration, loss, gradient norm, active features, seconds).
"""
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits


def lbfgs(objective, x0, *, c1=0.0, m=6, epsilon=1e-5, period=10, delta=1e-5, max_iterations=None,
          linesearch="MoreThuente", max_linesearch=20, callback=None, mask=None):
    """Minimise ``objective(w, g)`` (+ c1‖w‖₁) by L-BFGS, or OWL-QN when ``c1 > 0`` (Andrew & Gao 2007).

    Stopping criteria as CRFsuite: ‖g‖ / max(1, ‖w‖) < ``epsilon``, or the relative improvement of the
    objective over the last ``period`` iterations below ``delta``, or ``max_iterations``.
    """
    import lbfgs as _lbfgs

    ls = {"MoreThuente": "default", "Backtracking": "wolfe", "StrongBacktracking": "strongwolfe"}
    if linesearch not in ls:
        raise ValueError(f"`linesearch` must be one of {sorted(ls)}; got {linesearch!r}")
    line_search = ls[linesearch]
    if c1 > 0:
        line_search = "wolfe"  # OWL-QN needs the backtracking line search (CRFsuite switches too)
    log = []
    t0 = [time.perf_counter()]
    state = {"x": np.array(x0, dtype=np.float64), "fx": None}

    def f(x, g):
        return objective(x, g)

    def progress(x, g, fx, xnorm, gnorm, step, k, ls_evals):
        now = time.perf_counter()
        active = int(np.count_nonzero(x)) if mask is None else int(np.count_nonzero(x[mask]))
        entry = {"iteration": int(k), "loss": float(fx), "gradient_norm": float(gnorm),
                 "weight_norm": float(xnorm), "active_features": active, "step": float(step),
                 "line_search_evals": int(ls_evals), "seconds": now - t0[0]}
        t0[0] = now
        log.append(entry)
        state["x"] = x.copy()
        state["fx"] = fx
        if callback is not None:
            return 1 if callback(entry) else 0
        return 0

    kwargs = dict(m=m, epsilon=epsilon, past=period, delta=delta,
                  max_iterations=0 if max_iterations is None else int(max_iterations),
                  line_search=line_search, max_linesearch=max_linesearch)
    if c1 > 0:
        kwargs["orthantwise_c"] = float(c1)
    converged = True
    reason = "stopping criterion met"
    try:
        # BLAS on one thread while training: the objectives run their own parallel Numba kernels, and
        # idle OpenBLAS threads spinning after a vector product (w @ w) would take their cores (on 2
        # cores that costs ~40% of every evaluation)
        with warnings.catch_warnings(record=True) as caught, \
                threadpool_limits(limits=1, user_api="blas"):
            warnings.simplefilter("always")
            x = _lbfgs.fmin_lbfgs(f, np.array(x0, dtype=np.float64), progress=progress, **kwargs)
        for wmsg in caught:  # libLBFGS statuses that pylbfgs reports as warnings
            reason = str(wmsg.message)
            if "maximum number of iterations" in reason.lower():
                converged = False
    except _lbfgs.LBFGSError as exc:
        # libLBFGS ends with an "error" status both near the optimum (rounding error: no step
        # improves, as CRFsuite also accepts) and at max_iterations; keep the last iterate.
        x = state["x"]
        reason = str(exc).strip()
        if reason in ("1", "2"):  # LBFGS_STOP (the delta/period test), LBFGS_ALREADY_MINIMIZED
            reason = "objective improved less than `delta` over `period` iterations" if reason == "1" \
                else "the initial point is already a minimiser"
            converged = True
        else:
            converged = "rounding error" in reason.lower()
    except KeyboardInterrupt:  # pragma: no cover - keep the best weights so far
        x, converged = state["x"], False
    if max_iterations is not None and len(log) >= max_iterations:
        converged = False
        reason = f"max_iterations={max_iterations} reached"
    if log:
        log[-1]["stop_reason"] = reason
    return np.asarray(x), len(log), converged, log
