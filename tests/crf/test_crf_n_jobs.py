"""``n_jobs`` of the CRF estimators: L-BFGS over blocks of sequences held by worker processes equals the
one-process fit (same iterations, weights to rounding), and every objective's ``split`` adds up to it."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import HigherOrderCRF, LinearChainCRF, SemiMarkovCRF, TreeCRF
from structlearn.learning.shards import ProcessShards, objective_statistics, reduce_statistics
from tests.crf.test_higher_order import toy_data
from tests.crf.test_semicrf import random_problem
from tests.crf.test_tree_crf import toy_trees


def _chain_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(1, 9))
        labs = [str(v) for v in rng.integers(0, 3, T)]
        X.append([{"w": f"w{lab}{int(rng.integers(2))}", "n": float(rng.normal())} for lab in labs])
        y.append(labs)
    return X, y


def _pair(make, fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = fit(make(None))
        b = fit(make(2))
    return a, b


def _same(a, b, rtol=1e-8):
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=rtol, atol=1e-10)
    np.testing.assert_allclose([e["loss"] for e in b.training_log_], [e["loss"] for e in a.training_log_],
                               rtol=1e-10)


@pytest.mark.parametrize("kw", [{"c2": 0.5}, {"c1": 0.2, "c2": 0.1}, {"all_possible_transitions": True}])
def test_chain_n_jobs_equals_one_process(kw):
    X, y = _chain_data()
    a, b = _pair(lambda j: LinearChainCRF(max_iterations=30, n_jobs=j, **kw), lambda e: e.fit(X, y))
    _same(a, b)


def test_chain_n_jobs_partial_labels():
    X, y = _chain_data(seed=1)
    n = sum(map(len, y))
    rng = np.random.default_rng(2)
    fit0 = LinearChainCRF(max_iterations=1).fit(X, y)
    K = len(fit0.classes_)
    allowed = np.zeros((n, K), bool)
    gold = np.array([list(fit0.classes_).index(v) for s in y for v in s])
    allowed[np.arange(n), gold] = True
    allowed[rng.random(n) < 0.3] = True
    a, b = _pair(lambda j: LinearChainCRF(max_iterations=20, n_jobs=j),
                 lambda e: e.fit(X, y, allowed=allowed))
    _same(a, b)


def test_semi_markov_tree_and_higher_order_n_jobs():
    X, y = random_problem(3, n_seq=12)
    _same(*_pair(lambda j: SemiMarkovCRF(max_iterations=15, c2=0.1, n_jobs=j), lambda e: e.fit(X, y)))
    X, y, P, _ = toy_trees(n=20)
    _same(*_pair(lambda j: TreeCRF(max_iterations=15, n_jobs=j), lambda e: e.fit(X, y, parents=P)))
    X, y = toy_data(n=20)
    for segments in (False, True):
        _same(*_pair(lambda j: HigherOrderCRF(order=2, segments=segments, max_iterations=10, n_jobs=j),
                     lambda e: e.fit(X, y)))


def test_split_blocks_add_up_to_the_data_term():
    X, y = _chain_data(n=17, seed=4)
    est = LinearChainCRF(max_iterations=1)
    captured = {}
    original = type(est)._train

    def spy(self, model, objective, *args, **kw):
        captured["objective"] = objective
        return original(self, model, objective, *args, **kw)

    type(est)._train = spy
    try:
        est.fit(X, y)
    finally:
        type(est)._train = original
    obj = captured["objective"]
    w = np.random.default_rng(0).normal(size=est.coef_.shape[0]) * 0.1
    parts = obj.split(5)
    assert len(parts) == 5 and sum(len(p.packed.lengths) for p in parts) == 17
    total = reduce_statistics([objective_statistics(w, p) for p in parts])
    g = np.zeros_like(w)
    value = obj(w, g)
    # the penalised full objective minus its penalty (the mask zeroes non-parameters in both)
    np.testing.assert_allclose(total.value + obj.c2 * w @ w, value, rtol=1e-12)
    np.testing.assert_allclose((total.stats["gradient"] + 2 * obj.c2 * w) * obj.mask, g, rtol=1e-10,
                               atol=1e-12)
    with ProcessShards(parts[:2]) as workers:
        both = workers(w)
    np.testing.assert_array_equal(both.stats["gradient"],
                                  reduce_statistics([objective_statistics(w, p) for p in parts[:2]])
                                  .stats["gradient"])


@pytest.mark.parametrize("bad", [0, 1.5, "2", True])
def test_bad_n_jobs(bad):
    X, y = _chain_data(n=5)
    with pytest.raises(ValueError, match="n_jobs"):
        LinearChainCRF(max_iterations=1, n_jobs=bad).fit(X, y)


@pytest.mark.parametrize("inference", ["exact", "bp"])
def test_graph_crf_n_jobs_equals_one_process(inference):
    from structlearn.graph.graph_crf import GraphCRF
    from structlearn.engine.structures.graphs import grid_graph
    rng = np.random.default_rng(0)
    X, y = [], []
    for b in range(6):
        lab = (rng.random(9) < 0.5).astype(np.int64)
        X.append((np.eye(2)[lab] + rng.normal(scale=0.8, size=(9, 2)), grid_graph(3, 3)))
        lab = lab.copy()
        lab[rng.random(9) < 0.3] = -1  # partial labels
        y.append(lab)
    weights = rng.uniform(0.5, 2.0, size=6)
    a, b = _pair(lambda j: GraphCRF(inference=inference, max_iterations=15, n_jobs=j),
                 lambda e: e.fit(X, y, sample_weight=weights))
    _same(a, b, rtol=1e-7)
