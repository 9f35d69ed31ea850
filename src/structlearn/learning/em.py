"""The EM loop shared by the generative models (hidden Markov, hidden semi-Markov and hierarchical HMMs).

:func:`run_em` runs hmmlearn's loop: every iteration is an exact E-step (statistics and the
log-likelihood of the current parameters), the M-step, the report of that log-likelihood to a
:class:`ConvergenceMonitor` and the convergence test. The M-step of the iteration on which the test
passes is applied too, so the returned parameters are those after the last M-step (as hmmlearn's
``fit``); one more E-step then scores them (the returned log-likelihood, not reported to the monitor).

The estimators' E-steps are maps of a per-shard function over blocks of sequences, reduced by addition
(:mod:`structlearn.learning.shards`): in this process, in joblib workers (``n_jobs``) or on dask workers
(:func:`structlearn.distributed.fit`) — this loop is the same in all three.
"""

__all__ = ["ConvergenceMonitor", "run_em", "converged_by_tol", "EM_LOOP_DOC"]

#: The ``Notes`` paragraph of every EM ``fit`` that runs :func:`run_em` (filled in by ``fill_docstring``).
EM_LOOP_DOC = """EM runs hmmlearn's loop (:func:`structlearn.learning.em.run_em`): per iteration E-step, M-step,
report to ``monitor_``, convergence test. The M-step of the iteration on which the gain falls below
``tol`` (or of the ``n_iter``-th) is applied too: the parameters are those after the last M-step,
``monitor_.iter`` counts the M-steps and ``monitor_.history`` holds the log-likelihood before each
of them. ``log_likelihood_`` is that of the fitted parameters (one more E-step, not in the
history); ``converged_`` is True only when the gain fell below ``tol``."""


class ConvergenceMonitor:
    """Records the EM log-likelihoods and decides when EM stops (hmmlearn's monitor).

    ``history`` holds every reported log-likelihood (that of the parameters before each M-step), ``iter``
    their number (= the number of M-steps). ``converged`` is hmmlearn's stopping rule: ``n_iter``
    iterations ran, or the gain of the last one is below ``tol`` (absolute, in nats summed over
    sequences). Whether EM met ``tol`` (the estimators' ``converged_``) is :func:`converged_by_tol`.
    """

    def __init__(self, tol, n_iter, verbose=False):
        self.tol = float(tol)
        self.n_iter = int(n_iter)
        self.verbose = bool(verbose)
        self.history = []
        self.iter = 0

    def __repr__(self):
        return (f"ConvergenceMonitor(tol={self.tol}, n_iter={self.n_iter}, iter={self.iter}, "
                f"converged={self.converged})")

    def _reset(self):
        """Forget the history (hmmlearn's ``_reset``, called at the start of every fit)."""
        self.history = []
        self.iter = 0

    def report(self, log_prob):
        """Record the log-likelihood of one iteration (of the parameters before its M-step)."""
        self.history.append(float(log_prob))
        self.iter += 1

    @property
    def converged(self):
        """True when EM stops: ``n_iter`` iterations ran or the last gain is below ``tol``."""
        return (self.iter == self.n_iter
                or (len(self.history) >= 2 and self.history[-1] - self.history[-2] < self.tol))


def converged_by_tol(monitor):
    """Whether EM converged rather than ran out of iterations: the last gain of ``monitor.history`` is
    below ``monitor.tol``, or (a monitor with its own ``converged`` rule, as hmmlearn allows) the loop
    stopped before ``monitor.n_iter`` iterations. False when no iteration ran."""
    h = list(monitor.history)
    if len(h) >= 2 and h[-1] - h[-2] < monitor.tol:
        return True
    return 0 < monitor.iter < monitor.n_iter and bool(monitor.converged)


def run_em(e_step, m_step, monitor, on_iteration=None):
    """hmmlearn's EM loop; returns the log-likelihood of the final parameters.

    Per iteration: ``e_step()``, ``m_step`` of its statistics, ``monitor.report`` of its log-likelihood,
    ``on_iteration``, and a stop when ``monitor.converged`` (at most ``monitor.n_iter`` iterations). The
    M-step of the last iteration is always applied: the parameters are those after ``monitor.iter``
    M-steps, and ``monitor.history`` holds the log-likelihoods before each of them (exactly hmmlearn's
    ``fit``). A last ``e_step()`` scores the final parameters; it is not reported.

    Parameters
    ----------
    e_step : callable () -> (statistics, log_likelihood)
        Statistics of the current parameters and their log-likelihood (float).
    m_step : callable (statistics) -> None
        Updates the parameters in place.
    monitor : ConvergenceMonitor
        Reset (hmmlearn's ``_reset`` when it has one), then receives one log-likelihood per iteration.
    on_iteration : callable (iteration, log_likelihood) -> None, optional
        Called after every report (progress bars, verbose output).

    Returns
    -------
    float
        The log-likelihood of the returned parameters.
    """
    reset = getattr(monitor, "_reset", None)
    if reset is not None:
        reset()
    for it in range(monitor.n_iter):
        stats, ll = e_step()
        m_step(stats)
        monitor.report(ll)
        if on_iteration is not None:
            on_iteration(it, ll)
        if monitor.converged:
            break
    return float(e_step()[1])
