"""structlearn.distributed.fit on a real distributed.LocalCluster (2 worker processes started here): the
distributed fits of the HSMM and the HMM equal their single-process fits, with bags and delayed shards,
and a worker killed in the middle of a fit leaves the result unchanged."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import GaussianHMM, GeneralHSMM, HiddenSemiMarkovModel
from tests.conftest import require_module
from tests.distributed.conftest import worker_killer

dask_bag = require_module("dask.bag")
dask = require_module("dask")
distributed = require_module("distributed")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes: about 60 s for the module


def _data(n_seq=6, seed=0):
    rng = np.random.RandomState(seed)
    seqs = []
    for _ in range(n_seq):
        states = np.arange(10) % 2
        seqs.append(np.concatenate([rng.normal(s, 0.4, rng.randint(5, 30)) for s in states]))
    return seqs, np.concatenate(seqs)[:, None], np.array([len(s) for s in seqs])


def _same_fit(ref, got, rtol, atol=1e-12):
    assert len(got.monitor_.history) == len(ref.monitor_.history)  # the same iterations
    np.testing.assert_allclose(got.monitor_.history, ref.monitor_.history, rtol=rtol, atol=0)
    np.testing.assert_allclose(got.startprob_, ref.startprob_, rtol=rtol, atol=atol)
    np.testing.assert_allclose(got.transmat_, ref.transmat_, rtol=rtol, atol=atol)
    np.testing.assert_allclose(got.emission_.means, ref.emission_.means, rtol=rtol, atol=atol)
    assert got.converged_ == ref.converged_


def _fit_both(est, data, client, X, L, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, L)
        got = sd.fit(clone(est), data, client, init=(X, L), **kw)
    return ref, got


# nonparametric durations: closed-form M-step, the fits agree to rounding; Poisson durations: the
# M-step is a Newton solve on finite differences (_newton_maximize, converged to ~1e-8 relative), and
# sums in another order move it that much: measured 3e-8 relative on the pmf (1.6e-9 absolute) and
# 4e-8 on a state mean near 0 (0.0088, 3.8e-10 absolute; the data's scale is O(1))
@pytest.mark.parametrize("duration, rtol, pmf_atol", [("nonparametric", 1e-10, 1e-12), ("poisson", 1e-7, 1e-8)])
def test_hsmm_distributed_equals_fit(client, duration, rtol, pmf_atol):
    seqs, X, L = _data()
    est = HiddenSemiMarkovModel(2, duration=duration, max_duration=30, n_iter=6, random_state=0)
    ref, got = _fit_both(est, dask_bag.from_sequence(seqs, npartitions=3), client, X, L, split_every=2)
    _same_fit(ref, got, rtol, atol=max(1e-12, pmf_atol))
    np.testing.assert_allclose(got.duration_.pmf(30), ref.duration_.pmf(30), rtol=0, atol=pmf_atol)


def test_hmm_distributed_equals_fit_from_delayed_shards(client):
    seqs, X, L = _data(seed=1)
    parts = [dask.delayed(lambda a, b: (np.concatenate(seqs[a:b]), [len(s) for s in seqs[a:b]]))(a, a + 2)
             for a in (0, 2, 4)]
    ref, got = _fit_both(GaussianHMM(2, n_iter=8, random_state=0), parts, client, X, L)
    _same_fit(ref, got, 1e-10)
    np.testing.assert_allclose(got.covars_, ref.covars_, rtol=1e-10)


def test_general_hsmm_distributed_equals_fit(client):
    seqs, X, L = _data(n_seq=4, seed=2)
    ref, got = _fit_both(GeneralHSMM(2, max_duration=6, n_iter=4, random_state=0),
                         dask_bag.from_sequence(seqs, npartitions=2), client, X, L)
    _same_fit(ref, got, 1e-10)


def test_worker_killed_mid_fit_leaves_the_result_unchanged(client):
    seqs, X, L = _data(seed=3)
    est = HiddenSemiMarkovModel(2, duration="nonparametric", max_duration=30, n_iter=6, random_state=0)
    kill_one, killed = worker_killer(client, 2)

    bag = dask_bag.from_sequence(seqs, npartitions=4)
    ref, got = _fit_both(est, bag, client, X, L, callback=kill_one)
    assert killed
    _same_fit(ref, got, 1e-10)
    assert killed[0] not in client.scheduler_info()["workers"]  # it held 2 of the 4 shards (round-robin)
    client.wait_for_workers(2, timeout=60)


def test_bad_arguments(client):
    seqs, X, L = _data(n_seq=2)
    bag = dask_bag.from_sequence(seqs, npartitions=2)
    with pytest.raises(ValueError, match="`estimator` must be one of structlearn's EM estimators"):
        sd.fit(object(), bag, client)  # (the LinearChainCRF's errors: test_distributed_crf.py)
    with pytest.raises(ValueError, match="`data` must be a dask bag"):
        sd.fit(GaussianHMM(2), X, client)
    with pytest.raises(ValueError, match="`split_every` must be an integer >= 2"):
        sd.fit(GaussianHMM(2), bag, client, split_every=1)
    with pytest.raises(ValueError, match="`init` must be 'first'"):
        sd.fit(GaussianHMM(2), bag, client, init="all")


def test_hsmm_partial_labels_distributed_equal_fit(client):
    seqs, X, L = _data(seed=5)
    rng = np.random.RandomState(0)
    labels = np.where(rng.rand(X.shape[0]) < 0.2, (X[:, 0] > 0.5).astype(np.int64), -1)
    off = np.concatenate([[0], np.cumsum(L)])
    parts = [dask.delayed(lambda a, b: (X[off[a]:off[b]], L[a:b], labels[off[a]:off[b]]))(a, a + 2)
             for a in (0, 2, 4)]
    for est in (HiddenSemiMarkovModel(2, duration="nonparametric", max_duration=30, n_iter=5, random_state=0),
                GeneralHSMM(2, max_duration=6, n_iter=3, random_state=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = clone(est).fit(X, L, labels)
            got = sd.fit(clone(est), parts, client, init=(X, L, labels))
        _same_fit(ref, got, 1e-10)
    with pytest.raises(ValueError, match="takes no labels"):
        sd.fit(GaussianHMM(2, n_iter=2), parts, client, init=(X, L))
