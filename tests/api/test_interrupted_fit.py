"""An interrupted fit (Ctrl-C: SIGINT, or any error of the objective / an E-step) raises to the caller and is
never reported as converged: L-BFGS (pylbfgs drops an exception of the objective and turns one of its
progress callback into a SystemError), the online CRF trainers, the graph CRF, AdaBoostMRF and the EM loops
of the HMM, HSMM and HHMM families; a Ctrl-C that a Numba kernel wrapped in a SystemError is raised as a
KeyboardInterrupt (fit and partial_fit); an interrupted save keeps the earlier model file. The interrupt is
raised deterministically at a chosen call, not by a timed kill."""
import os
import signal
import warnings

import numpy as np
import pytest

from structlearn import LinearChainCRF
from structlearn.learning.em import ConvergenceMonitor
from structlearn.learning.optimizers import lbfgs
from structlearn.learning.shards import ShardedObjective
from tests.crf.test_crf import toy_data


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


def _raising_at(call, f, raiser):
    """``f`` that calls ``raiser()`` first at its ``call``-th call (counting from 1)."""
    n = [0]

    def wrapped(*args, **kwargs):
        n[0] += 1
        if n[0] == call:
            raiser()
        return f(*args, **kwargs)
    return wrapped


@pytest.fixture
def sigint():
    """A function raising SIGINT in this process, with Python's default handler (KeyboardInterrupt)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield lambda *args: signal.raise_signal(signal.SIGINT)
    signal.signal(signal.SIGINT, previous)


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


def _fitted_crf(**params):
    X, y = toy_data(12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crf = LinearChainCRF(max_iterations=20, **params).fit(X, y)
    assert hasattr(crf, "coef_")
    return crf, X, y


def test_crf_lbfgs_fit_interrupted_by_sigint_raises(monkeypatch, sigint):
    crf, X, y = _fitted_crf()
    crf.converged_ = True   # as an earlier fit that converged
    monkeypatch.setattr(ShardedObjective, "__call__", _raising_at(3, ShardedObjective.__call__, sigint))
    with pytest.raises(KeyboardInterrupt):
        crf.fit(X, y)
    assert crf.converged_ is False and not hasattr(crf, "coef_")


def test_crf_lbfgs_callback_interrupt_raises():
    crf, X, y = _fitted_crf()
    with pytest.raises(KeyboardInterrupt):
        crf.fit(X, y, callback=_failing_at(2, KeyboardInterrupt, f=lambda entry: False))
    assert crf.converged_ is False and not hasattr(crf, "coef_")


@pytest.mark.parametrize("algorithm", ["l2sgd", "ap", "pa", "arow"])
def test_online_crf_trainers_interrupted_raise(algorithm):
    crf, X, y = _fitted_crf(algorithm=algorithm)
    crf.converged_ = True
    with pytest.raises(KeyboardInterrupt):
        crf.fit(X, y, callback=_failing_at(2, KeyboardInterrupt, f=lambda entry: False))
    assert crf.converged_ is False and not hasattr(crf, "coef_")


def _hmm():
    from structlearn import GaussianHMM
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (60, 1)), rng.normal(5, 1, (60, 1))])
    return GaussianHMM(2, random_state=0, n_iter=50, tol=1e-2), X


def _hsmm():
    from structlearn.hsmm.explicit_duration import HiddenSemiMarkovModel
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(m, 1, (20, 1)) for m in (0, 5, 0, 5, 0, 5)])
    return HiddenSemiMarkovModel(2, duration="poisson", max_duration=30, random_state=0, n_iter=50,
                                 tol=1e-2), X


def _hhmm():
    from structlearn import HierarchicalHMM
    from structlearn.datasets.toy import hhmm_figure1
    from structlearn.distributions.emissions import Categorical

    truth = HierarchicalHMM(hhmm_figure1(), Categorical(np.eye(6)[[0, 4, 5, 1, 2, 3]]))
    truth._build()
    smp = truth.sample(4, max_length=30, random_state=0)
    m = HierarchicalHMM(hhmm_figure1(), Categorical(n_features=6), init_params="ste", n_iter=50, tol=1e-2,
                        random_state=0)
    return m, (smp.X, smp.lengths)


def _multichannel():
    from structlearn.hsmm.multichannel import MultiChannelHSMM
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(m, 1, (15, 2)) for m in (0, 5, 0, 5)])
    return MultiChannelHSMM(2, duration="poisson", max_duration=8, n_iter=50, tol=1e-2, random_state=0), X


@pytest.mark.parametrize("make", [_hmm, _hsmm, _hhmm, _multichannel])
def test_em_interrupted_raises_and_is_not_converged(make, monkeypatch, sigint):
    est, data = make()
    args = data if isinstance(data, tuple) else (data,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(*args)
    est.converged_ = True   # as an earlier fit that converged
    monkeypatch.setattr(ConvergenceMonitor, "report", _raising_at(2, ConvergenceMonitor.report, sigint))
    with pytest.raises(KeyboardInterrupt):
        est.fit(*args)
    assert est.converged_ is False


def _graph_problem():
    from tests.graph.test_graph_crf import random_problem
    X, Y, _ = random_problem(np.random.default_rng(8), 5, (3, 6), 2, extra=1)
    return X, Y


@pytest.mark.parametrize("optimizer", ["lbfgs", "cg"])
def test_graph_crf_fit_interrupted_raises(optimizer, monkeypatch, sigint):
    from structlearn import GraphCRF
    X, Y = _graph_problem()
    crf = GraphCRF(inference="exact", optimizer=optimizer, max_iterations=200).fit(X, Y)
    assert crf.converged_
    monkeypatch.setattr(ShardedObjective, "__call__", _raising_at(3, ShardedObjective.__call__, sigint))
    with pytest.raises(KeyboardInterrupt):
        crf.fit(X, Y)
    assert crf.converged_ is False and not hasattr(crf, "coef_")


@pytest.mark.parametrize("parallel", [False, True])
def test_adaboost_mrf_fit_interrupted_raises(parallel, monkeypatch, sigint):
    from structlearn import AdaBoostMRF
    from structlearn.graph import _adaboost_sequential, adaboost_mrf
    from tests.graph.test_adaboost_mrf import dcrf
    X, Y = dcrf(np.random.default_rng(1), 4, T=4)
    ada = AdaBoostMRF(n_rounds=3, cg_iterations=3, tol=0.0, parallel=parallel, max_iterations=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ada.fit(X, Y)
    ada.converged_ = True   # as an earlier fit that converged
    # the parallel variant's CG runs in adaboost_mrf, the sequential learners' in _adaboost_sequential
    module = adaboost_mrf if parallel else _adaboost_sequential
    monkeypatch.setattr(module, "minimize_cg", _raising_at(1, module.minimize_cg, sigint))
    with pytest.raises(KeyboardInterrupt):
        ada.fit(X, Y)
    assert ada.converged_ is False and not hasattr(ada, "coef_")


def test_model_filename_is_not_written_by_an_interrupted_fit(tmp_path, monkeypatch, sigint):
    X, y = toy_data(12)
    path = tmp_path / "crf.model"
    path.write_bytes(b"an earlier model")
    monkeypatch.setattr(ShardedObjective, "__call__", _raising_at(3, ShardedObjective.__call__, sigint))
    crf = LinearChainCRF(max_iterations=20, model_filename=str(path))
    with pytest.raises(KeyboardInterrupt):
        crf.fit(X, y)
    assert path.read_bytes() == b"an earlier model"


class _WriteInterrupted:
    """A binary file whose ``write`` writes half of its bytes, then raises KeyboardInterrupt (Ctrl-C)."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, data):
        self.fh.write(bytes(data)[:len(data) // 2])
        raise KeyboardInterrupt

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


@pytest.mark.parametrize("fmt", ["crfsuite", "structlearn"])
def test_save_interrupted_keeps_the_earlier_file_and_leaves_no_temporary(tmp_path, monkeypatch, fmt):
    import builtins

    crf, _, _ = _fitted_crf(start_end_features=False)   # a model CRFsuite's format can hold
    path = tmp_path / "crf.model"
    path.write_bytes(b"an earlier model")
    real_open = builtins.open

    def interrupting_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        return _WriteInterrupted(fh) if "w" in mode and str(file).startswith(str(tmp_path)) else fh

    real_fdopen = os.fdopen

    def interrupting_fdopen(fd, mode="r", *args, **kwargs):  # the temporary file of tempfile.mkstemp
        fh = real_fdopen(fd, mode, *args, **kwargs)
        return _WriteInterrupted(fh) if "w" in mode else fh

    monkeypatch.setattr(builtins, "open", interrupting_open)
    monkeypatch.setattr(os, "fdopen", interrupting_fdopen)
    with pytest.raises(KeyboardInterrupt):
        crf.save(path, format=fmt)
    monkeypatch.undo()
    assert path.read_bytes() == b"an earlier model"
    assert [p.name for p in tmp_path.iterdir()] == ["crf.model"]


def _numba_wrapped_interrupt(*args, **kwargs):
    """What Ctrl-C during a Numba kernel's call back into Python looks like: a SystemError caused by it."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        raise SystemError("CPUDispatcher(<function chain_cll>) returned a result with an exception set") from exc


def test_crf_fit_interrupt_wrapped_in_a_system_error_raises_keyboard_interrupt(monkeypatch):
    crf, X, y = _fitted_crf()
    monkeypatch.setattr(ShardedObjective, "__call__",
                        _raising_at(3, ShardedObjective.__call__, _numba_wrapped_interrupt))
    with pytest.raises(KeyboardInterrupt) as info:
        crf.fit(X, y)
    assert isinstance(info.value.__cause__, SystemError)   # the original kept for the traceback
    assert crf.converged_ is False and not hasattr(crf, "coef_")


def test_em_interrupt_wrapped_in_a_system_error_raises_keyboard_interrupt(monkeypatch):
    est, X = _hmm()
    monkeypatch.setattr(ConvergenceMonitor, "report",
                        _raising_at(2, ConvergenceMonitor.report, _numba_wrapped_interrupt))
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    assert est.converged_ is False


def test_a_system_error_without_an_interrupt_stays_a_system_error(monkeypatch):
    crf, X, y = _fitted_crf()

    def fail():
        raise SystemError("an internal error")

    monkeypatch.setattr(ShardedObjective, "__call__", _raising_at(3, ShardedObjective.__call__, fail))
    with pytest.raises(SystemError, match="an internal error"):
        crf.fit(X, y)
    assert crf.converged_ is False


def test_crf_partial_fit_interrupt_wrapped_in_a_system_error_raises_and_rolls_back(monkeypatch):
    from structlearn.crf import _online as _crf_online
    X, y = toy_data(12)
    crf = LinearChainCRF(algorithm="ap").partial_fit(X, y)
    coef = crf.coef_.copy()
    monkeypatch.setattr(_crf_online, "stream_epoch", lambda *args: _numba_wrapped_interrupt())
    with pytest.raises(KeyboardInterrupt):
        crf.partial_fit(X, y)
    np.testing.assert_array_equal(crf.coef_, coef)


def test_multichannel_partial_fit_interrupt_wrapped_in_a_system_error_raises_and_rolls_back(monkeypatch):
    est, X = _multichannel()
    est.partial_fit(X)
    before = {n: v for n, v in vars(est).items() if n.endswith("_")}
    monkeypatch.setattr(type(est), "_shard_function",
                        lambda self, posteriors=True: (lambda params, shard: _numba_wrapped_interrupt(), None))
    with pytest.raises(KeyboardInterrupt):
        est.partial_fit(X)
    assert {n: v for n, v in vars(est).items() if n.endswith("_")}.keys() == before.keys()
    assert est.n_chunks_seen_ == 1



def _state(est):
    """The fitted parameters and running statistics of an online estimator, as bytes (equality)."""
    import pickle
    return pickle.dumps({k: v for k, v in sorted(vars(est).items()) if k.endswith("_") or k.startswith("_online")})


@pytest.mark.parametrize("make, target, at", [(_hmm, "_m_step_chain", 1), (_hsmm, "_check_params", 2),
                                              (_hhmm, "_m_step", 1)])
def test_em_partial_fit_interrupted_leaves_the_model_as_it_was(make, target, at, monkeypatch):
    """Ctrl-C after the running statistics took the chunk but before the parameters did: the estimator
    is left as it was before the call (no half-advanced statistics), and the next call is the one an
    uninterrupted stream would have made."""
    import copy
    est, data = make()
    args = data if isinstance(data, tuple) else (data,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.partial_fit(*args)
        twin = copy.deepcopy(est)
        before = _state(est)
        original = getattr(type(est), target)
        calls = []

        def interrupted(self, *a, **kw):  # the at-th call of the method, after the statistics were taken
            calls.append(1)
            if len(calls) == at:
                raise KeyboardInterrupt
            return original(self, *a, **kw)

        monkeypatch.setattr(type(est), target, interrupted)
        with pytest.raises(KeyboardInterrupt):
            est.partial_fit(*args)
        monkeypatch.setattr(type(est), target, original)
        assert len(calls) == at and _state(est) == before
        assert _state(est.partial_fit(*args)) == _state(twin.partial_fit(*args))
