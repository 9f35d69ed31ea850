"""The EM loop shared by the generative models (hidden semi-Markov and hierarchical HMMs).

:func:`run_em` alternates an exact E-step (statistics and the log-likelihood of the current
parameters) with an M-step, records every log-likelihood in a :class:`ConvergenceMonitor` and stops
when the gain of an iteration falls below ``tol``; after ``n_iter`` M-steps it scores the final
parameters once more.

The estimators' E-steps are maps of a per-shard function over blocks of sequences, reduced by addition
(:mod:`structlearn.learning.shards`): in this process, in joblib workers (``n_jobs``) or on dask workers
(:func:`structlearn.distributed.fit`) — this loop is the same in all three.
"""

__all__ = ["ConvergenceMonitor", "run_em"]


class ConvergenceMonitor:
    """Tracks the EM log-likelihood and decides convergence (as hmmlearn's monitor).

    Converged when the gain of the last iteration is below ``tol`` (absolute, in nats summed over
    sequences). ``history`` holds every reported log-likelihood; ``iter`` their number.
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

    def report(self, log_prob):
        """Record one log-likelihood (of the parameters before the M-step of this iteration)."""
        self.history.append(float(log_prob))
        self.iter += 1

    @property
    def converged(self):
        """True when the last gain is below ``tol``."""
        return len(self.history) >= 2 and self.history[-1] - self.history[-2] < self.tol


def run_em(e_step, m_step, monitor, on_iteration=None):
    """EM until ``monitor`` converges or ``monitor.n_iter`` M-steps are done; returns the last log-likelihood.

    Parameters
    ----------
    e_step : callable () -> (statistics, log_likelihood)
        Statistics of the current parameters and their log-likelihood (float).
    m_step : callable (statistics) -> None
        Updates the parameters in place.
    monitor : ConvergenceMonitor
        Receives every log-likelihood (``n_iter + 1`` of them when EM does not converge).
    on_iteration : callable (iteration, log_likelihood) -> None, optional
        Called after every E-step followed by a convergence test (progress bars, verbose output).
    """
    for it in range(monitor.n_iter):
        stats, ll = e_step()
        monitor.report(ll)
        if on_iteration is not None:
            on_iteration(it, ll)
        if monitor.converged:
            return ll
        m_step(stats)
    _, ll = e_step()
    monitor.report(ll)
    return ll
