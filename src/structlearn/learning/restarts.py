"""The EM restart loop shared by the hidden semi-Markov estimators (explicit-duration and general family).

:func:`fit_restarts` runs ``n_init`` restarts of EM (each through :func:`structlearn.learning.em.run_em`),
keeps the restart with the highest log-likelihood and sets ``monitor_``, ``converged_`` and
``log_likelihood_``; :func:`warn_empty_states` names the states an E-step left without posterior mass.
"""
import copy
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from .em import ConvergenceMonitor, converged_by_tol
from .training import training

__all__ = ["fit_restarts", "warn_empty_states", "EmptyStateWarning", "label_mask", "check_n_jobs", "check_em_options",
           "n_blocks"]


class EmptyStateWarning(RuntimeWarning):
    """An E-step gave a state no posterior mass: the M-step kept that state's parameters."""


def user_stacklevel():
    """The ``stacklevel`` of :func:`warnings.warn` that points at the first frame outside structlearn
    (the user's ``fit`` call), however deep inside the package the warning is raised."""
    import os
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame, level = frame.f_back, level + 1
    return level


def warn_empty_states(gamma, what="parameters", names=None):
    """Warn (:class:`EmptyStateWarning`) naming every state whose posterior occupancy Σ_t γ_t(j) is 0;
    ``gamma`` (N, K) float64; ``names`` (K,) how to call each state (default its index)."""
    occupancy = np.asarray(gamma).sum(axis=0)
    empty = np.flatnonzero(~(occupancy > 0))
    if empty.size:
        names = ", ".join(str(int(j)) if names is None else str(names[j]) for j in empty)
        warnings.warn(f"state{'s' if empty.size > 1 else ''} {names} received no posterior mass in the "
                      f"E-step; {'their' if empty.size > 1 else 'its'} {what} are kept", EmptyStateWarning,
                      stacklevel=user_stacklevel())


def check_n_jobs(n_jobs):
    """``ValueError`` unless ``n_jobs`` is None or a non-zero integer (joblib's convention, -1 = all cores)."""
    j = n_jobs
    if j is not None and (isinstance(j, bool) or not isinstance(j, (int, np.integer)) or j == 0):
        raise ValueError(f"`n_jobs` must be None or a non-zero integer (-1: all cores); got {j!r}")


def check_em_options(est, letters, meaning):
    """``ValueError`` unless ``est.init`` is 'kmeans', 'quantile' or 'random', ``est.params`` and
    ``est.init_params`` are strings of ``letters`` and ``est.n_jobs`` passes :func:`check_n_jobs`.

    Parameters
    ----------
    est : estimator
        Has the attributes ``init``, ``params``, ``init_params`` and ``n_jobs``.
    letters : str
        The letters ``params`` and ``init_params`` may use.
    meaning : str
        What each letter stands for, as the error message says it (``"s start, t transitions"``).
    """
    if est.init not in ("kmeans", "quantile", "random"):
        raise ValueError(f"`init` must be 'kmeans', 'quantile' or 'random'; got {est.init!r}")
    for name in ("params", "init_params"):
        v = getattr(est, name)
        if not isinstance(v, str) or set(v) - set(letters):
            raise ValueError(f"`{name}` must be a string of letters from {letters!r} ({meaning}); got {v!r}")
    check_n_jobs(est.n_jobs)


def n_blocks(n_jobs):
    """Number of shards the E-step of ``fit`` cuts the data into: joblib's effective number of jobs
    (1 for None)."""
    if n_jobs is None:
        return 1
    from joblib import effective_n_jobs
    return int(effective_n_jobs(n_jobs))


def label_mask(labels, n_rows, n_states):
    """Validated partial labels and the mask they allow.

    Parameters
    ----------
    labels : array-like of int, shape (N,), or None
        Known state of every row, -1 where unknown.
    n_rows, n_states : int

    Returns
    -------
    labels : ndarray of int64, shape (N,), or None
    allowed : ndarray of bool, shape (N, K), or None
        All states where the label is unknown, only the label where it is known.

    Raises
    ------
    ValueError
        Wrong shape, non-integer values, or a value outside [-1, K).
    """
    if labels is None:
        return None, None
    arr = np.asarray(labels)
    if arr.shape != (n_rows,):
        raise ValueError(f"`labels` must have shape ({n_rows},) (one state per row of X, -1 = unknown); "
                         f"got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`labels` must hold integer states (-1 = unknown); got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < -1) | (arr >= n_states))
    if bad.size:
        raise ValueError(f"`labels` must lie in [-1, {n_states}) (-1 = unknown); got {int(arr[bad[0]])} "
                         f"at row {int(bad[0])}")
    allowed = np.ones((n_rows, n_states), dtype=bool)
    known = np.flatnonzero(arr >= 0)
    allowed[known] = False
    allowed[known, arr[known]] = True
    return arr, allowed


def fit_restarts(estimator, attributes, initialize, run):
    """EM with ``estimator.n_init`` restarts; the estimator ends with the best restart's parameters.

    Parameters
    ----------
    estimator : the host estimator (``n_init``, ``init_params``, ``random_state``, ``tol``, ``n_iter``,
        ``verbose``).
    attributes : dict attribute name -> ``init_params`` letter
        The fitted parameters. One whose letter is not in ``init_params`` and that is set at the call
        starts every restart from its value at the call (not from the previous restart's estimate);
        the others are removed before each restart and set by ``initialize`` (an optional one, e.g.
        ``endprob_``, may stay absent).
    initialize : callable (rng, restart) -> None
        Sets the initial parameters of a restart.
    run : callable (monitor, restart) -> float
        Runs EM from them (:func:`~structlearn.learning.em.run_em`) and returns the log-likelihood of
        the parameters it ends with (those after its last M-step).

    Returns
    -------
    float
        The best log-likelihood (also ``estimator.log_likelihood_``).

    Warns
    -----
    ConvergenceWarning
        When the kept restart did not converge within ``n_iter`` iterations.

    Raises
    ------
    BaseException
        What a restart raised (a ``KeyboardInterrupt`` included), after setting ``converged_ = False``.

    Notes
    -----
    Every restart gets a fresh :class:`~structlearn.learning.em.ConvergenceMonitor` (``tol``, ``n_iter``,
    ``verbose``), or a copy of a monitor of another class the user put in ``monitor_`` before the call
    (hmmlearn's way of changing the stopping rule). ``converged_`` is
    :func:`~structlearn.learning.em.converged_by_tol` of the kept restart's monitor (``monitor_``, whose
    ``converged`` is hmmlearn's and also holds when ``n_iter`` ran out).
    """
    est = estimator
    custom = est.__dict__.get("monitor_")
    if type(custom) is ConvergenceMonitor:
        custom = None
    rng = check_random_state(est.random_state)
    fixed = {a: copy.deepcopy(getattr(est, a)) for a, c in attributes.items()
             if c not in est.init_params and hasattr(est, a)}
    with training(est):  # interrupted (or failed): converged_ False, the exception raised again
        best = None
        for restart in range(est.n_init):
            seed = rng.randint(2**31 - 1)
            for a in attributes:
                if a in fixed:
                    setattr(est, a, copy.deepcopy(fixed[a]))
                elif hasattr(est, a):
                    delattr(est, a)
            initialize(np.random.RandomState(seed), restart)
            monitor = (ConvergenceMonitor(est.tol, est.n_iter, est.verbose) if custom is None
                       else copy.deepcopy(custom))
            ll = run(monitor, restart)
            if best is None or ll > best[0]:
                best = (ll, {a: copy.deepcopy(getattr(est, a)) for a in attributes if hasattr(est, a)},
                        monitor)
    ll, snapshot, monitor = best
    for a in attributes:
        if a in snapshot:
            setattr(est, a, snapshot[a])
        elif hasattr(est, a):
            delattr(est, a)
    est.monitor_ = monitor
    est.converged_ = converged_by_tol(monitor)
    est.log_likelihood_ = ll
    if not est.converged_ and est.n_iter > 0:
        h = monitor.history
        gain = h[-1] - h[-2] if len(h) > 1 else float("nan")
        warnings.warn(f"EM did not converge in n_iter={est.n_iter} iterations (last gain {gain:.3g} >= "
                      f"tol={est.tol}); increase `n_iter` or `tol`", ConvergenceWarning, stacklevel=user_stacklevel())
    return ll
