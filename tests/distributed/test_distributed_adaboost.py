"""structlearn.distributed.fit of AdaBoostMRF (boosting over persisted dask shards of graphs) on a real
distributed.LocalCluster (2 worker processes started here): equal to ``fit`` on the concatenated graphs —
the sequential algorithm (greedy and cyclic, given and generated trees, feature-subset learners) and the
parallel variant, with the same rounds and the same selected trees; a worker killed mid-fit leaves the
result unchanged; bad bags are refused with clear errors."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import AdaBoostMRF
from structlearn.graph.adaboost_mrf import two_level_chain_trees
from structlearn.engine.structures.graphs import grid_graph
from tests.conftest import require_module
from tests.distributed.conftest import worker_killer
from tests.graph.test_adaboost_mrf import dcrf_edges

dask_bag = require_module("dask.bag")
distributed = require_module("distributed")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes


def _dcrf(n=9, T=4, K=3, seed=0):
    """Tiny 2-level DCRFs (top chain copied by the bottom chain, one-hot edge types), half the labels hidden."""
    rng = np.random.default_rng(seed)
    E, ef = dcrf_edges(T)
    X, Y = [], []
    for _ in range(n):
        top = np.repeat(rng.integers(K, size=2), [T // 2, T - T // 2])
        bot = np.where(rng.random(T) < 0.8, top, rng.integers(0, K, T))
        y = np.concatenate([top, bot])
        X.append((np.eye(K)[y] + rng.normal(scale=1.0, size=(2 * T, K)), E, ef))
        y = y.copy()
        y[rng.random(2 * T) < 0.5] = -1
        Y.append(y)
    return X, Y


def _grids(n=8, seed=1):
    """Small grids of three sizes (generated trees are drawn per graph), a third of the labels hidden."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for i in range(n):
        r, c = [(2, 3), (3, 3), (2, 4)][i % 3]
        y = (np.arange(r * c) % c >= c // 2).astype(int)
        E = grid_graph(r, c)
        X.append((np.eye(2)[y] + rng.normal(scale=0.8, size=(r * c, 2)), E, np.ones((len(E), 1))))
        y = y.copy()
        y[rng.random(r * c) < 0.3] = -1
        Y.append(y)
    return X, Y


def _fit_both(est, X, Y, client, npartitions=3, **kw):
    bag = dask_bag.from_sequence(list(zip(X, Y)), npartitions=npartitions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(X, Y)
        got = sd.fit(clone(est), bag, client, **kw)
    return ref, got


def _same(ref, got, X, tol=1e-8):
    assert got.n_rounds_ == ref.n_rounds_ and got.converged_ == ref.converged_
    assert got.learner_trees_.tolist() == ref.learner_trees_.tolist()
    assert got.learner_features_.tolist() == ref.learner_features_.tolist()
    assert [r["accepted"] for r in got.rounds_] == [r["accepted"] for r in ref.rounds_]
    assert got.beta_ == pytest.approx(ref.beta_, rel=1e-15)
    np.testing.assert_allclose(got.alphas_, ref.alphas_, rtol=tol, atol=tol)
    np.testing.assert_allclose(got.learner_coefs_, ref.learner_coefs_, rtol=tol, atol=tol)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=tol, atol=tol)
    np.testing.assert_allclose(got.bound_, ref.bound_, rtol=tol, atol=tol)
    np.testing.assert_allclose(got.objective_, ref.objective_, rtol=tol, atol=tol)
    for a, b in zip(got.predict(X), ref.predict(X)):
        np.testing.assert_array_equal(a, b)


# measured (3 partitions, split_every=2, 2 workers), the same rounds and trees in every case: coefficients
# within 4.9e-15 of fit's, α within 1.0e-15, log bounds within 1.1e-14 (parallel; generated trees 1.3e-15)
@pytest.mark.parametrize("kwargs", [
    dict(trees=two_level_chain_trees(), n_rounds=3, cg_iterations=2, tol=0.0),
    dict(trees=two_level_chain_trees(), selection="cyclic", n_rounds=3, cg_iterations=2, feature_subsets=2,
         random_state=0, tol=0.0),
    dict(trees=two_level_chain_trees(), parallel=True, max_iterations=6),
], ids=["greedy", "cyclic-feature-subsets", "parallel"])
def test_distributed_equals_fit_on_dcrfs(client, kwargs):
    X, Y = _dcrf()
    ref, got = _fit_both(AdaBoostMRF(**kwargs), X, Y, client, split_every=2)
    _same(ref, got, X)


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
def test_distributed_equals_fit_with_generated_trees(client, parallel):
    X, Y = _grids()
    est = AdaBoostMRF(trees="random", n_trees=2, n_rounds=2, cg_iterations=2, max_iterations=4,
                      parallel=parallel, random_state=3)
    ref, got = _fit_both(est, X, Y, client)
    _same(ref, got, X)


def test_worker_killed_mid_fit_leaves_the_result_unchanged(client):
    X, Y = _dcrf(seed=4)
    kill_one, killed = worker_killer(client, 4)

    est = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=2, cg_iterations=2, tol=0.0)
    ref, got = _fit_both(est, X, Y, client, npartitions=4, callback=kill_one)
    assert killed
    _same(ref, got, X)
    client.wait_for_workers(2, timeout=60)


def test_bad_data(client):
    X, Y = _dcrf(n=4)
    with pytest.raises(ValueError, match="`data` must be a dask bag of \\(graph, labels\\) pairs"):
        sd.fit(AdaBoostMRF(), list(zip(X, Y)), client)
    with pytest.raises(ValueError, match="takes no sample weights"):
        sd.fit(AdaBoostMRF(), dask_bag.from_sequence([(x, y, 1.0) for x, y in zip(X, Y)], npartitions=2), client)
    with pytest.raises(ValueError, match="same numbers of node and edge features"):
        bad = X[:2] + [(x[0][:, :2], x[1], x[2]) for x in X[2:]]
        sd.fit(AdaBoostMRF(), dask_bag.from_sequence(list(zip(bad, Y)), npartitions=2), client)
    with pytest.raises(ValueError, match="holds no observed label"):
        sd.fit(AdaBoostMRF(), dask_bag.from_sequence([(x, -np.ones(len(x[0]), int)) for x in X], npartitions=2),
               client)
    with pytest.raises(ValueError, match="not a spanning tree"):        # raised on a worker, re-raised here
        sd.fit(AdaBoostMRF(trees=[np.arange(len(X[0][1]))]), dask_bag.from_sequence(list(zip(X, Y)), npartitions=2),
               client)
