"""An interrupted fit (Ctrl-C: SIGINT, or any error of the objective / an E-step) raises to the caller and is
never reported as converged: L-BFGS (pylbfgs drops an exception of the objective and turns one of its
progress callback into a SystemError), the online CRF trainers and the EM loops of the HMM, HSMM and HHMM
families. The interrupt is raised deterministically at a chosen call, not by a timed kill."""
import numpy as np
import pytest

from structlearn.learning.optimizers import lbfgs


def _quadratic(x, g):
    g[:] = 2.0 * (x - 3.0)
    return float(((x - 3.0) ** 2).sum())


def _failing_at(call, exc, f=_quadratic):
    """``f`` that raises ``exc`` at its ``call``-th call (counting from 1) and from then on."""
    n = [0]

    def wrapped(*args):
        n[0] += 1
        if n[0] >= call:
            raise exc
        return f(*args)
    wrapped.calls = n
    return wrapped


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), ValueError("objective failed")])
def test_lbfgs_raises_what_the_objective_raised(exc):
    objective = _failing_at(3, exc)
    with pytest.raises(type(exc)):
        lbfgs(objective, np.zeros(3), max_iterations=50)
    assert objective.calls[0] == 3   # libLBFGS stopped without calling the objective again


def test_lbfgs_raises_what_the_callback_raised():
    callback = _failing_at(2, KeyboardInterrupt, f=lambda entry: False)
    with pytest.raises(KeyboardInterrupt):  # was a SystemError from lbfgs._lowlevel
        lbfgs(_quadratic, np.zeros(3), max_iterations=50, callback=callback)
