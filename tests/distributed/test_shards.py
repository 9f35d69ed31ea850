"""The per-shard interface (structlearn.learning.shards) and ``n_jobs`` of the EM estimators: shard statistics
are additive (the sum over any cut of the data equals the statistics of the whole), and ``fit`` over
joblib worker processes equals ``fit`` in one process."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import GaussianHMM, GeneralHSMM, HiddenSemiMarkovModel, VariableTransitionHMM
from structlearn.learning.shards import (ShardStatistics, make_shard, map_shards, reduce_statistics,
                                         split_shards, statistics_nbytes)


def _data(seed=0, n_seq=5):
    rng = np.random.RandomState(seed)
    seqs = [np.concatenate([rng.normal(s % 2, 0.4, rng.randint(4, 20)) for s in range(8)]) for _ in range(n_seq)]
    return np.concatenate(seqs)[:, None], np.array([len(s) for s in seqs])


def _fitted(est, X, L):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return clone(est).fit(X, L)


def _flat(stats):
    if isinstance(stats, dict):
        return {f"{k}.{k2}" if k2 else k: v for k, s in stats.items() for k2, v in _flat(s).items()}
    return {"": stats}


ESTIMATORS = [HiddenSemiMarkovModel(2, duration="poisson", max_duration=20, n_iter=3, random_state=0),
              GaussianHMM(2, n_iter=3, random_state=0),
              GeneralHSMM(2, max_duration=5, n_iter=2, random_state=0),
              VariableTransitionHMM(2, max_duration=5, n_iter=2, random_state=0)]


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("posteriors", [True, False])
def test_statistics_are_additive_over_shards(est, posteriors):
    X, L = _data()
    m = _fitted(est, X, L)
    whole = m._shard_from_data(X, L)
    function, params = m._shard_function(posteriors=posteriors)
    one = function(params, whole)
    parts = split_shards(whole, 3)
    assert len(parts) == 3 and sum(p.n_rows for p in parts) == whole.n_rows
    total = map_shards(function, params, parts)
    assert total.n_sequences == one.n_sequences == len(L)
    np.testing.assert_allclose(total.value, one.value, rtol=1e-12)
    a, b = _flat(total.stats), _flat(one.stats)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=1e-10, err_msg=k)
    assert (total.posteriors is None) == (not posteriors)
    if posteriors:
        pa, pb = total.posteriors, one.posteriors
        for k in (pa if isinstance(pa, dict) else [None]):
            np.testing.assert_allclose(pa[k] if k else pa, pb[k] if k else pb, rtol=1e-10, atol=1e-12)
    assert statistics_nbytes(one) > 0


@pytest.mark.parametrize("est", ESTIMATORS[:3], ids=lambda e: type(e).__name__)
def test_n_jobs_equals_one_process(est):
    X, L = _data(seed=1, n_seq=6)
    ref = _fitted(est, X, L)
    got = _fitted(est.set_params(n_jobs=2), X, L)
    # the blocks and the order of their sum are fixed by the data: bitwise the same
    assert np.array_equal(got.monitor_.history, ref.monitor_.history)
    assert np.array_equal(got.transmat_, ref.transmat_)


def test_reduce_and_validation():
    a = ShardStatistics({"x": np.ones(2), "e": {"w": np.ones(1)}}, -1.0, 1, np.zeros((2, 2)))
    b = ShardStatistics({"x": np.ones(2), "e": {"w": np.ones(1)}}, -2.0, 2, np.ones((3, 2)))
    t = reduce_statistics([a, b])
    assert t.value == -3.0 and t.n_sequences == 3 and t.posteriors.shape == (5, 2)
    np.testing.assert_array_equal(t.stats["e"]["w"], [2.0])
    with pytest.raises(ValueError, match="at least one"):
        reduce_statistics([])
    with pytest.raises(ValueError, match="differ in their keys"):
        reduce_statistics([a, ShardStatistics({"y": np.ones(2)}, 0.0)])
    with pytest.raises(ValueError, match="`n_jobs` must be None or a non-zero integer"):
        HiddenSemiMarkovModel(n_jobs=0).fit(np.zeros((5, 1)))
    s = make_shard(np.zeros((7, 1)), [3, 4])
    assert s.offsets.tolist() == [0, 3, 7] and split_shards(s, 1) == [s]
