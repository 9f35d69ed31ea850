"""Optimisers for CRF training: L-BFGS / OWL-QN (libLBFGS through pylbfgs), SGD with L2, and the online
large-margin family (averaged perceptron, passive–aggressive, AROW) — the set CRFsuite offers.

Every optimiser takes an objective ``f(w, g) -> value`` (gradient written into g; :func:`minimize_cg`:
an object with ``value_and_grad(w) -> (value, gradient)``) or, for online methods, a per-sequence
decoder, and returns ``(w, n_iter, converged, log)``; ``log`` is a list of dicts (iteration, loss,
gradient norm, active features, seconds). For the piecewise-smooth objectives of loopy inference
(:class:`~structlearn.graph.objective.GraphCLL` with BP / TRW): :func:`lbfgs_restarts` and
:func:`minimize_cg`.
"""
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from ..utils.interrupts import as_interrupt


def lbfgs(objective, x0, *, c1=0.0, m=6, epsilon=1e-5, period=10, delta=1e-5, max_iterations=None,
          linesearch="MoreThuente", max_linesearch=20, callback=None, mask=None, status=None):
    """Minimise ``objective(w, g)`` (+ c1‖w‖₁) by L-BFGS, or OWL-QN when ``c1 > 0`` (Andrew & Gao 2007).

    Stopping criteria as CRFsuite: ‖g‖ / max(1, ‖w‖) < ``epsilon``, or the relative improvement of the
    objective over the last ``period`` iterations below ``delta``, or ``max_iterations``.

    ``status``, a dict, receives ``"stop_reason"`` (libLBFGS's status in words), also when no iteration
    completed (a line search that fails at once), where ``log`` is empty.

    Raises
    ------
    BaseException
        Whatever ``objective`` or ``callback`` raised (a ``KeyboardInterrupt`` included; one that a Numba
        kernel wrapped in a ``SystemError`` as a ``KeyboardInterrupt`` again), once libLBFGS has stopped:
        an interrupted run is never reported as converged.
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

    # An exception of the objective or the callback (a KeyboardInterrupt, an error) cannot cross libLBFGS:
    # pylbfgs drops one raised by the objective (the run then ends as if it had converged) and turns one
    # raised by ``progress`` into a SystemError. It is kept here instead, the run is stopped (the
    # objective returns NaN without computing, which ends libLBFGS's line search at once; ``progress``
    # returns 1), and it is raised again when libLBFGS has returned.
    raised = []

    def f(x, g):
        if raised:
            g[:] = 0.0
            return np.nan
        try:
            return objective(x, g)
        except BaseException as exc:  # noqa: BLE001 - raised again below, after libLBFGS returns
            raised.append(exc)
            g[:] = 0.0
            return np.nan

    def progress(x, g, fx, xnorm, gnorm, step, k, ls_evals):
        if raised:
            return 1
        try:
            return _progress(x, g, fx, xnorm, gnorm, step, k, ls_evals)
        except BaseException as exc:  # noqa: BLE001 - raised again below
            raised.append(exc)
            return 1

    def _progress(x, g, fx, xnorm, gnorm, step, k, ls_evals):
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
    error = None
    caught = []
    try:
        # BLAS on one thread while training: the objectives run their own parallel Numba kernels, and
        # idle OpenBLAS threads spinning after a vector product (w @ w) would take their cores (on 2
        # cores that costs ~40% of every evaluation)
        with warnings.catch_warnings(record=True) as caught, \
                threadpool_limits(limits=1, user_api="blas"):
            warnings.simplefilter("always")
            x = _lbfgs.fmin_lbfgs(f, np.array(x0, dtype=np.float64), progress=progress, **kwargs)
    except _lbfgs.LBFGSError as exc:
        error = exc
    except SystemError:  # pylbfgs's, when a callback raised: that exception is in `raised`
        if not raised:
            raise
    for wmsg in caught:
        if not _from_pylbfgs(wmsg):  # the objective's own (a compile notice, a BP non-convergence)
            warnings.warn_explicit(wmsg.message, wmsg.category, wmsg.filename, wmsg.lineno)
        elif error is None:
            reason = str(wmsg.message)  # libLBFGS statuses that pylbfgs reports as warnings
            if "maximum number of iterations" in reason.lower():
                converged = False
    if raised:  # an interrupt or an error of the objective / callback: never a convergence
        raise as_interrupt(raised[0])
    if error is not None:
        # libLBFGS ends with an "error" status both near the optimum (rounding error: no step
        # improves, as CRFsuite also accepts) and at max_iterations; keep the last iterate.
        x = state["x"]
        reason = str(error).strip()
        if reason in ("1", "2"):  # LBFGS_STOP (the delta/period test), LBFGS_ALREADY_MINIMIZED
            reason = "objective improved less than `delta` over `period` iterations" if reason == "1" \
                else "the initial point is already a minimiser"
            converged = True
        else:
            converged = "rounding error" in reason.lower()
    if max_iterations is not None and len(log) >= max_iterations:
        converged = False
        reason = f"max_iterations={max_iterations} reached"
    if log:
        log[-1]["stop_reason"] = reason
    if status is not None:
        status["stop_reason"] = reason
    return np.asarray(x), len(log), converged, log


def _from_pylbfgs(wmsg):
    """Whether a caught warning is one of pylbfgs's status reports (a plain UserWarning issued from its
    package; the objective runs inside pylbfgs's frames, so its warnings may name that package too)."""
    import lbfgs

    return wmsg.category is UserWarning and os.path.dirname(os.path.abspath(wmsg.filename)) == os.path.dirname(os.path.abspath(lbfgs.__file__))


def lbfgs_restarts(objective, w0, max_iterations, *, callback=None, max_restarts=5):
    """:func:`lbfgs`, restarted (memory cleared) after a failed line search while iterations remain.

    Loopy BP / TRW objectives are only piecewise smooth (message passing may jump between fixed points,
    warm-started messages make the value depend on the path), which stops libLBFGS's line search early;
    a restart from the last point usually keeps making progress. Stops when a run converges, ends for
    another reason than its line search, or makes no progress from a fresh start (then a (local)
    optimum: converged), after ``max_restarts`` restarts, or at ``max_iterations`` in all.

    Parameters
    ----------
    objective : callable ``f(w, g) -> value``
    w0 : array-like of float64
    max_iterations : int
        Iterations over all runs together.
    callback : callable ``callback(entry) -> bool``, optional
        As :func:`lbfgs`; ``entry["iteration"]`` counts from 1 in every run.
    max_restarts : int

    Returns
    -------
    (w, n_iter, converged, log)
        As :func:`lbfgs`; ``log`` holds the entries of every run, ``converged`` is False when
        ``max_iterations`` was reached.
    """
    w, total, restarts = np.asarray(w0, dtype=np.float64), 0, 0
    best = None
    history = []
    while True:
        w_new, n_iter, converged, log = lbfgs(objective, w, max_iterations=max_iterations - total,
                                              callback=callback)
        history += log
        total += n_iter
        loss = log[-1]["loss"] if log else None
        if n_iter:
            w = w_new
        reason = log[-1].get("stop_reason", "") if log else ""
        line_search_failed = "line-search" in reason or "line search" in reason.lower()
        improved = loss is not None and (best is None or loss < best - 1e-8 * max(1.0, abs(best)))
        if loss is not None and (best is None or loss < best):
            best = loss
        if converged or not line_search_failed or not improved or total >= max_iterations \
                or restarts >= max_restarts:
            if line_search_failed and not improved:
                converged = True   # no progress from a fresh start either: a (local) optimum
            return w, total, converged and total < max_iterations, history
        restarts += 1


def minimize_cg(objective, w0, max_iterations, *, gtol=1e-5):
    """Minimise ``objective.value_and_grad`` by nonlinear conjugate gradient (scipy, Polak–Ribière).

    ``scipy.optimize.minimize(method="CG")``, stopping when the gradient's largest entry is below
    ``gtol`` or after ``max_iterations``; Tran et al. (2014, §5) found it better than L-BFGS for loopy
    BP and exact learning of 2-level DCRFs. Warns ``ConvergenceWarning`` when it makes no step from
    ``w0`` (a badly scaled objective).

    Returns
    -------
    (w, n_iter, converged, log)
        As :func:`lbfgs`; log entries hold ``iteration``, ``loss``, ``gradient_norm``, ``seconds``.
    """
    from scipy.optimize import minimize

    log = []
    t0 = [time.perf_counter()]
    last = {}

    def fun(w):
        v, g = objective.value_and_grad(w)
        last["v"], last["g"] = v, g
        return v, g

    def callback(xk):
        now = time.perf_counter()
        log.append({"iteration": len(log) + 1, "loss": float(last.get("v", np.nan)),
                    "gradient_norm": float(np.linalg.norm(last.get("g", np.zeros(1)))),
                    "seconds": now - t0[0]})
        t0[0] = now

    res = minimize(fun, np.array(w0, dtype=np.float64), jac=True, method="CG", callback=callback,
                   options={"maxiter": int(max_iterations), "gtol": gtol})
    converged = bool(res.success)
    if log:
        log[-1]["stop_reason"] = str(res.message)
    if res.nit == 0 and not res.success:
        warnings.warn(f"conjugate gradient made no progress from its starting point ({res.message}, gradient "
                      f"norm {np.linalg.norm(last.get('g', np.zeros(1))):.3g}); the objective is probably badly "
                      f"scaled: standardise the features", ConvergenceWarning)
    return np.asarray(res.x), int(res.nit), converged, log


def penalise(w, value, g, c2, c1, mask):
    """``value`` + c2‖w‖² + c1‖w‖₁; adds their (sub)gradient to ``g`` (if given) and zeroes its entries
    outside ``mask`` (the weights that are no parameters). Returns the penalised value."""
    if c2 > 0:
        value += c2 * float(w @ w)
        if g is not None:
            g += 2.0 * c2 * w
    if c1 > 0:
        value += c1 * float(np.abs(w[mask]).sum())
        if g is not None:
            g += c1 * np.sign(w)
    if g is not None:
        g *= mask
    return value
