"""Kernels after a fit: in forked and spawned pool workers (the GNU OpenMP fork hang is gone: Numba's
TBB layer is chosen by ``import structlearn``, see ``structlearn._threading``) and from 8 threads sharing
one fitted model (bitwise-equal predictions)."""
import multiprocessing as mp
import warnings
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest

import structlearn
from structlearn import GaussianHMM, HiddenSemiMarkovModel
from tests.conftest import skip_unless_ci


def _data():
    rng = np.random.RandomState(0)
    X = np.concatenate([rng.normal(s, 0.4, 40) for s in (0, 1, 0, 1, 0)] * 4)[:, None]
    return X, [200] * 4


@pytest.fixture(scope="module")
def fitted():
    X, L = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hsmm = HiddenSemiMarkovModel(2, duration="poisson", max_duration=60, n_iter=5, random_state=0).fit(X, L)
        hmm = GaussianHMM(2, n_iter=5, random_state=0).fit(X, L)
    return hsmm, hmm, X, L


def _predict(args):
    model, X, L = args
    return model.predict(X, L), model.predict_proba(X, L)


def test_threading_layer_is_fork_safe(fitted):
    assert structlearn._threading.CHOSEN in (None, "tbb", "workqueue")
    assert numba.threading_layer() != "omp" or structlearn._threading.CHOSEN is None  # omp: the user's choice


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pool_after_fit(fitted, method):
    hsmm, hmm, X, L = fitted
    want = [_predict((m, X, L)) for m in (hsmm, hmm)]
    with mp.get_context(method).Pool(2) as pool:
        got = pool.map_async(_predict, [(hsmm, X, L), (hmm, X, L)]).get(timeout=120)  # hung forever before
    for (s0, p0), (s1, p1) in zip(want, got):
        np.testing.assert_array_equal(s0, s1)
        np.testing.assert_array_equal(p0, p1)


def test_eight_threads_share_one_model(fitted):
    if numba.threading_layer() != "tbb":
        skip_unless_ci(f"Numba's threading layer is {numba.threading_layer()!r}, not 'tbb' (pip install tbb): "
                       f"parallel kernels cannot be launched from several threads at once")
    hsmm, hmm, X, L = fitted
    for model in (hsmm, hmm):
        want = _predict((model, X, L))
        with ThreadPoolExecutor(8) as ex:
            got = list(ex.map(_predict, [(model, X, L)] * 16))
        for s, p in got:
            assert np.array_equal(s, want[0]) and np.array_equal(p, want[1])  # bitwise
