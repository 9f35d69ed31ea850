"""structlearn.distributed.fit of SwitchingHSMM (with partial labels: (X, lengths, labels) shards) and
AdaptiveFactorHSMM (the base HSMM by the distributed EM, then the walk-variance measurements on the workers) on
a real distributed.LocalCluster of 2 worker processes: the results equal ``fit`` within 1e-8."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn.hsmm.adaptive import AdaptiveFactorHSMM
from structlearn.hsmm.switching import SwitchingHSMM
from tests.conftest import require_module
from tests.hsmm.test_switching_adaptive_shards import adaptive_data, same_switching, switching_data

dask_bag = require_module("dask.bag")
dask = require_module("dask")
distributed = require_module("distributed")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes


@pytest.mark.parametrize("tie", [True, False])
def test_switching_hsmm_with_labels_distributed_equals_fit(client, tie):
    X, L, labels = switching_data(seed=4, n_seq=6)
    off = np.r_[0, np.cumsum(L)]
    parts = [dask.delayed(lambda a, b: (X[off[a]:off[b]], L[a:b], labels[off[a]:off[b]]))(a, a + 2)
             for a in (0, 2, 4)]
    est = SwitchingHSMM(2, 2, duration="nonparametric", max_duration=12, n_iter=6, random_state=0,
                        tie_emissions=tie)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, L, labels)
        got = sd.fit(clone(est), parts, client, init=(X, L, labels), split_every=2)
    same_switching(ref, got, 1e-8)


def test_adaptive_hsmm_distributed_equals_fit(client):
    X, L = adaptive_data()
    off = np.r_[0, np.cumsum(L)]
    seqs = [X[off[b]:off[b + 1]] for b in range(len(L))]
    est = AdaptiveFactorHSMM(2, duration="nonparametric", max_duration=40, n_iter=6, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(X, L)
        got = sd.fit(clone(est), dask_bag.from_sequence(seqs, npartitions=3), client, init=(X, L))
    assert ref.duration_walk_var_ > 0 and ref.emission_walk_var_ > 0
    for name in ("duration_walk_var_", "emission_walk_var_"):
        assert getattr(got, name) == pytest.approx(getattr(ref, name), rel=1e-8, abs=1e-12)
    np.testing.assert_allclose(got.hsmm_.monitor_.history, ref.hsmm_.monitor_.history, rtol=1e-8)
    np.testing.assert_allclose(got.hsmm_.transmat_, ref.hsmm_.transmat_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(got.hsmm_.emission_.means, ref.hsmm_.emission_.means, rtol=1e-8)
    assert got.max_duration_ == ref.max_duration_ == 40
    np.testing.assert_allclose(got.filter(X, L).state, ref.filter(X, L).state, rtol=1e-7, atol=1e-10)
