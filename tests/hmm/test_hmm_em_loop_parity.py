"""hmmlearn's EM loop, side by side: from the same initial parameters every class of structlearn.hmm ends
with hmmlearn's parameters (those after the last M-step, also on the iteration that meets ``tol``) and
hmmlearn's ``monitor_`` (``iter``, ``history``, ``converged``), whether EM stops at ``n_iter`` or converges.
Tolerances are those of the EM-trajectory tests of ``test_hmm_conformance.py``."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import hmm as S
from tests.conftest import require_data, require_module
from tests.hmm.test_hmm_conformance import CASES, IDS, RTOL_EM, _case, _compact, _emission_attrs

H = require_module("hmmlearn.hmm")


def _fit_both(h, s, X, lengths):
    h.fit(X, lengths)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.fit(X, lengths)
    return [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def _assert_same_loop(h, s, X, lengths, names):
    assert s.monitor_.iter == h.monitor_.iter
    assert len(s.monitor_.history) == len(h.monitor_.history) == h.monitor_.iter
    np.testing.assert_allclose(s.monitor_.history, list(h.monitor_.history), rtol=RTOL_EM)
    assert s.monitor_.converged is h.monitor_.converged is True  # hmmlearn's rule: n_iter ran or tol met
    for name in ["startprob_", "transmat_"] + names:
        mine = getattr(s, name)
        np.testing.assert_allclose(mine, _compact(getattr(h, name), mine), rtol=RTOL_EM, atol=1e-12,
                                   err_msg=name)
    # the fitted parameters are those after the last M-step: log_likelihood_ is their score
    np.testing.assert_allclose(s.log_likelihood_, h.score(X, lengths), rtol=RTOL_EM)
    np.testing.assert_allclose(s.score(X, lengths), h.score(X, lengths), rtol=RTOL_EM)


@pytest.mark.parametrize("kind, ct", CASES, ids=IDS)
def test_n_iter_reached_same_parameters_and_monitor(kind, ct):
    h, s, X, lengths = _case(kind, ct or "diag", seed=6, n_iter=5, tol=1e-12)
    caught = _fit_both(h, s, X, lengths)
    assert h.monitor_.iter == 5
    _assert_same_loop(h, s, X, lengths, _emission_attrs(kind))
    # EM stopped by n_iter: not converged, and said so
    assert not s.converged_ and len(caught) == 1


@pytest.mark.parametrize("kind, ct", CASES, ids=IDS)
def test_converged_same_parameters_and_monitor(kind, ct):
    h, s, X, lengths = _case(kind, ct or "diag", seed=6, n_iter=1000, tol=1e-3)
    caught = _fit_both(h, s, X, lengths)
    assert 2 <= h.monitor_.iter < 1000  # hmmlearn converged (its last gain below tol)
    _assert_same_loop(h, s, X, lengths, _emission_attrs(kind))
    assert s.converged_ and not caught


@pytest.mark.parametrize("n_iter", [5, 200])
def test_old_faithful_waiting_as_hmmlearn(n_iter):
    path = require_data("old_faithful")
    x = np.genfromtxt(path / "faithful.csv", delimiter=",", skip_header=1, usecols=2)[:, None]
    h = H.GaussianHMM(2, random_state=0, n_iter=n_iter)
    s = S.GaussianHMM(2, random_state=0, n_iter=n_iter)
    _fit_both(h, s, x, None)
    _assert_same_loop(h, s, x, None, ["means_", "_covars_"])
    assert s.converged_ is (h.monitor_.iter < n_iter)
    if n_iter == 200:  # the values of the report (issue 41)
        assert h.monitor_.iter < n_iter
        np.testing.assert_allclose(np.sort(s.means_.ravel())[0], np.sort(h.means_.ravel())[0], rtol=1e-10)
        assert round(s.score(x), 5) == round(h.score(x), 5) == -997.22053


def test_custom_monitor_runs_the_loop():
    # hmmlearn's way to change the stopping rule: a subclass of its monitor set in monitor_ before fit
    from hmmlearn.base import ConvergenceMonitor

    class NeverConverged(ConvergenceMonitor):
        @property
        def converged(self):
            return self.iter == self.n_iter

    h, s, X, lengths = _case("gaussian", "diag", seed=6, n_iter=7, tol=1e-1)
    for m in (h, s):
        m.monitor_ = NeverConverged(m.monitor_.tol, m.monitor_.n_iter, m.monitor_.verbose)
    _fit_both(h, s, X, lengths)
    assert type(s.monitor_) is NeverConverged and s.monitor_.iter == h.monitor_.iter == 7
    _assert_same_loop(h, s, X, lengths, _emission_attrs("gaussian"))
