"""AdaBoostMRF through the per-shard interface: the statistics of shards of graphs add up to those of the
whole batch (exactly where they are placed by position, within rounding where they are summed), the
parallel bound merged from shards equals a brute-force enumeration, and ``fit`` with ``n_jobs=2`` (two
worker processes holding one block of graphs each) equals ``n_jobs=None``."""
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from structlearn import AdaBoostMRF
from structlearn.graph._adaboost_shards import (ShardedHolderBound, ShardedLearner, boost_summary_statistics,
                                                     learner_statistics, per_graph_statistics, shard_runner)
from structlearn.graph.adaboost_mrf import ParallelHolderBound, two_level_chain_trees
from structlearn.learning.shards import reduce_statistics
from structlearn.engine.structures.graphs import check_graph_labels, check_graphs, grid_graph
from tests.graph.test_adaboost_mrf import dcrf


def _shards(est, X, Y, K, cuts):
    """The BoostShards of the graph ranges cut at ``cuts`` (as ``fit`` builds them for its blocks)."""
    trees, _, _ = est._begin_fit()
    B = len(X)
    bounds = list(zip([0] + cuts, cuts + [B]))
    out = []
    for j, (a, b) in enumerate(bounds):
        batch = check_graphs(X[a:b])
        out.append(est._boost_shard(X[a:b], batch, check_graph_labels(Y[a:b], batch, K), K, trees, a, B, j,
                                    len(bounds)))
    return out


def _in_process(shards):
    """``run`` summing over several shards in this process (no worker processes)."""
    return lambda function, params: reduce_statistics([function(params, s) for s in shards])


def _grids(n, seed):
    rng = np.random.default_rng(seed)
    X = [(rng.normal(size=(6, 2)), grid_graph(2, 3), rng.normal(size=(7, 1))) for _ in range(n)]
    Y = [np.where(rng.random(6) < 0.3, -1, rng.integers(0, 2, 6)) for _ in range(n)]
    return X, Y


@pytest.mark.parametrize("parallel", [False, True])
def test_shard_statistics_add_up_to_the_whole_batch(parallel):
    X, Y = dcrf(np.random.default_rng(0), 7, T=3)
    est = AdaBoostMRF(trees=two_level_chain_trees(), parallel=parallel, c2=0.3)
    whole, parts = _shards(est, X, Y, 3, []), _shards(est, X, Y, 3, [2, 5])
    one, three = _in_process(whole), _in_process(parts)
    s1, s3 = one(boost_summary_statistics, None).stats, three(boost_summary_statistics, None).stats
    for k in s1:
        np.testing.assert_array_equal(s1[k], s3[k])
    w = np.random.default_rng(1).normal(scale=0.4, size=5 * 3 + 3 * 9)
    D = np.random.default_rng(2).uniform(0.2, 2.0, len(X))
    for t in range(2):
        # per-graph values are placed by position: the shards give exactly the whole batch's vector
        np.testing.assert_array_equal(three(per_graph_statistics, (t, w)).stats["per_graph"],
                                      one(per_graph_statistics, (t, w)).stats["per_graph"])
        a, b = ShardedLearner(one, t, D, 0.3).value_and_grad(w), ShardedLearner(three, t, D, 0.3).value_and_grad(w)
        np.testing.assert_allclose(b[0], a[0], rtol=1e-12)
        np.testing.assert_allclose(b[1], a[1], rtol=1e-11, atol=1e-13)
    # the learner's objective is the weighted data term plus c2‖w‖², as GraphCLL with c2 computes it
    obj = whole[0].objectives[1]
    obj.sample_weight, obj.c2 = D, 0.3
    ref = obj.value_and_grad(w)
    obj.c2 = 0.0
    got = ShardedLearner(one, 1, D, 0.3).value_and_grad(w)
    assert got[0] == ref[0] and np.array_equal(got[1], ref[1])


def test_parallel_bound_from_shards_against_brute_force():
    from tests.oracles.adaboost_mrf import tree_log_likelihoods

    X, Y = dcrf(np.random.default_rng(3), 5, T=3)     # 6 nodes, 3 labels: 729 labelings per graph
    beta, c2, B = 0.4, 0.2, len(X)
    est = AdaBoostMRF(trees=two_level_chain_trees(), parallel=True)
    shards = _shards(est, X, Y, 3, [1, 3])
    w = np.random.default_rng(4).normal(scale=0.5, size=5 * 3 + 3 * 9)
    value, grad = ShardedHolderBound(_in_process(shards), beta, c2, B).value_and_grad(w)
    # oracle: α = 1/2 per tree; an edge's potential inside a tree is θ_e / ρ_e (ρ = 1/2 on a chain edge
    # that lies in one tree, 1 on a vertical edge, which both trees hold)
    W_node, W_edge = w[:15].reshape(5, 3), w[15:].reshape(3, 3, 3)
    H = np.zeros(B)
    for tree in two_level_chain_trees():
        idx = [tree(x) for x in X]
        rho = np.zeros(len(X[0][1]))
        for t2 in two_level_chain_trees():
            rho[t2(X[0])] += 0.5
        scaled = [(x[0], x[1], x[2] / rho[:, None]) for x in X]
        H += 0.5 * tree_log_likelihoods(scaled, Y, idx, W_node, W_edge)
    expect = B / beta * (logsumexp(-beta * H) - np.log(B)) + c2 * w @ w
    np.testing.assert_allclose(value, expect, rtol=1e-10)
    # and the one-shard bound is bitwise ParallelHolderBound on the whole batch
    whole = _shards(est, X, Y, 3, [])
    a = ShardedHolderBound(_in_process(whole), beta, c2, B).value_and_grad(w)
    b = ParallelHolderBound(whole[0].objectives, beta, c2).value_and_grad(w)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    np.testing.assert_allclose(grad, b[1], rtol=1e-10, atol=1e-12)


def _same_fit(a, b, X, tol=1e-8):
    assert a.n_rounds_ == b.n_rounds_ and a.converged_ == b.converged_ and a.beta_ == b.beta_
    assert a.learner_trees_.tolist() == b.learner_trees_.tolist()
    assert a.learner_features_.tolist() == b.learner_features_.tolist()
    assert [r["accepted"] for r in a.rounds_] == [r["accepted"] for r in b.rounds_]
    for name in ("alphas_", "learner_coefs_", "coef_", "bound_", "objective_"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=tol, atol=tol, err_msg=name)
    for p, q in zip(a.predict_marginals(X), b.predict_marginals(X)):
        np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-8)


# measured: coefficients within 1.7e-14 of n_jobs=None, α within 2.4e-15, log bounds within 4.3e-14,
# the same rounds, trees and feature subsets in every case
@pytest.mark.parametrize("data, kwargs", [
    ("dcrf", dict(trees=two_level_chain_trees(), n_rounds=3, cg_iterations=2, tol=0.0)),
    ("dcrf", dict(trees=two_level_chain_trees(), selection="cyclic", feature_subsets=2, n_rounds=3,
                  cg_iterations=2, random_state=1, tol=0.0)),
    ("dcrf", dict(trees=two_level_chain_trees(), criterion="bound+l2", warm_start="ensemble", n_rounds=2,
                  cg_iterations=2)),
    ("dcrf", dict(trees=two_level_chain_trees(), parallel=True, max_iterations=5)),
    ("grid", dict(trees="random", n_trees=2, n_rounds=2, cg_iterations=2, random_state=2)),
    ("grid", dict(trees="max_weight", n_trees=2, parallel=True, max_iterations=4, random_state=2)),
], ids=["greedy", "cyclic-feature-subsets", "bound+l2", "parallel", "random-trees", "max-weight-parallel"])
def test_n_jobs_equals_one_process(data, kwargs):
    X, Y = dcrf(np.random.default_rng(6), 8, T=4) if data == "dcrf" else _grids(8, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)     # max_weight: edges in no tree (both fits warn)
        one = AdaBoostMRF(**kwargs).fit(X, Y)
        two = AdaBoostMRF(n_jobs=2, **kwargs).fit(X, Y)
    _same_fit(two, one, X)


def test_shard_runner_in_processes_equals_in_process():
    X, Y = _grids(6, 9)
    shards = _shards(AdaBoostMRF(trees="random", n_trees=2, random_state=0), X, Y, 2, [3])
    w = np.random.default_rng(0).normal(scale=0.3, size=2 * 2 + 1 * 4)
    D = np.linspace(0.5, 1.5, 6)
    expect = _in_process(shards)(learner_statistics, (1, w, D))
    with shard_runner(shards) as run:
        got = run(learner_statistics, (1, w, D))
        per = run(per_graph_statistics, (0, w)).stats["per_graph"]
    assert got.value == expect.value and np.array_equal(got.stats["gradient"], expect.stats["gradient"])
    np.testing.assert_array_equal(per, _in_process(shards)(per_graph_statistics, (0, w)).stats["per_graph"])


@pytest.mark.parametrize("n_jobs", [0, 1.5, "2", True])
def test_bad_n_jobs(n_jobs):
    X, Y = _grids(2, 0)
    with pytest.raises(ValueError, match="`n_jobs` must be None or a non-zero integer"):
        AdaBoostMRF(n_jobs=n_jobs).fit(X, Y)


def test_n_jobs_is_a_parameter():
    est = AdaBoostMRF(n_jobs=-1)
    assert est.get_params()["n_jobs"] == -1 and clone(est).n_jobs == -1
    assert AdaBoostMRF().n_jobs is None
