"""L-BFGS reads pylbfgs's status warnings, and passes every other warning the objective issues on to the
caller (a compile notice, a message-passing non-convergence) instead of swallowing it or taking it for the
stop reason."""
import warnings

import numpy as np
import pytest

from structlearn.learning.optimizers import lbfgs


class ObjectiveWarning(UserWarning):
    pass


def _quadratic(x, g):
    if not getattr(_quadratic, "warned", False):
        _quadratic.warned = True
        warnings.warn("from the objective", ObjectiveWarning)
    g[:] = 2.0 * (x - 3.0)
    return float(((x - 3.0) ** 2).sum())


def test_objective_warnings_reach_the_caller_and_are_not_stop_reasons():
    _quadratic.warned = False
    with pytest.warns(ObjectiveWarning, match="from the objective"):
        x, n, converged, log = lbfgs(_quadratic, np.zeros(3), max_iterations=1)
    assert not converged and "from the objective" not in log[-1]["stop_reason"]


def test_a_converged_run_keeps_its_reason():
    _quadratic.warned = True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, n, converged, log = lbfgs(_quadratic, np.zeros(3), max_iterations=50)
    np.testing.assert_allclose(x, 3.0, rtol=1e-6)
    assert converged
