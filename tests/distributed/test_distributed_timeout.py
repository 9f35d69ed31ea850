"""structlearn.distributed.fit(timeout=...): with every worker lost, dask keeps the tasks waiting for a worker
without an error; the fit raises TimeoutError naming the outstanding shards instead of waiting forever.
The cluster here is a scheduler in this process with one (thread) worker, retired before the fit."""
import time
import warnings

import numpy as np
import pytest

from structlearn import GaussianHMM, LinearChainCRF
from tests.conftest import require_module

dask_bag = require_module("dask.bag")
distributed = require_module("distributed")
sd = require_module("structlearn.distributed")


@pytest.fixture
def client_without_workers(small_client):
    client = small_client
    client.retire_workers(close_workers=True)
    deadline = time.monotonic() + 10
    while client.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not client.scheduler_info()["workers"]
    return client


@pytest.mark.parametrize("estimator, seqs", [
    (GaussianHMM(2, n_iter=2), [np.arange(6.0) + i for i in range(3)]),
    (LinearChainCRF(max_iterations=2), [([["a"], ["b"]], ["A", "B"])] * 3),
])
def test_fit_with_every_worker_lost_raises_timeout(client_without_workers, estimator, seqs):
    bag = dask_bag.from_sequence(seqs, npartitions=3)
    with pytest.raises(TimeoutError, match=r"3 of 3 shards still outstanding after waiting timeout=0\.5 s; "
                                           r"the scheduler has 0 worker\(s\): workers may be lost"):
        sd.fit(estimator, bag, client_without_workers, timeout=0.5)  # (without the timeout: forever)


def test_fit_within_timeout_equals_fit(small_client):
    """A timeout that the rounds stay under changes nothing (every wait of the EM goes through it)."""
    seqs = [np.r_[np.zeros(4), np.ones(4)] + 0.1 * i for i in range(3)]
    X, L = np.concatenate(seqs)[:, None], [8, 8, 8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ConvergenceWarning of the short fits, the same in both
        ref = GaussianHMM(2, n_iter=3, random_state=0).fit(X, L)
        got = sd.fit(GaussianHMM(2, n_iter=3, random_state=0), dask_bag.from_sequence(seqs, npartitions=3),
                     small_client, init=(X, L), timeout=60)
    np.testing.assert_allclose(got.monitor_.history, ref.monitor_.history, rtol=1e-10)
    np.testing.assert_allclose(got.means_, ref.means_, rtol=1e-10)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), True, "10"])
def test_timeout_must_be_positive_seconds_or_none(bad):
    with pytest.raises(ValueError, match=r"`timeout` must be None \(wait forever\) or a number of seconds > 0; "
                                         rf"got {bad!r}"):
        sd.fit(GaussianHMM(2), [], None, timeout=bad)
