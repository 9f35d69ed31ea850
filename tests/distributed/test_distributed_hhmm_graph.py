"""structlearn.distributed.fit of the HierarchicalHMM (EM over the flattened chain, the junction trees or
the factored frontier) and of the GraphCRF (L-BFGS / CG over shards of graphs) on a real
distributed.LocalCluster (2 worker processes started here): equal to the single-process fits, with the
same iterations; a worker killed in the middle of a fit leaves the result unchanged; the HHMM's E-step
over joblib processes (``n_jobs``) equals the one-block E-step."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import GraphCRF, HierarchicalHMM
from structlearn.datasets.toy import hhmm_figure1
from structlearn.distributions.emissions import Categorical
from structlearn.engine.structures.graphs import grid_graph
from tests.conftest import require_module
from tests.distributed.conftest import worker_killer

dask_bag = require_module("dask.bag")
distributed = require_module("distributed")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes

FIG1 = hhmm_figure1()  # Murphy & Paskin (2001), Figure 1


def _hhmm_data(n_seq=24, seed=1):
    """Sequences of symbols 0..5 (one bag element = one sequence, shape (T,)) drawn from FIG1."""
    gen = HierarchicalHMM(FIG1, Categorical(np.eye(6)[[0, 4, 5, 1, 2, 3]]))
    s = gen.sample(n_seq, random_state=seed)
    offsets = np.concatenate([[0], np.cumsum(s.lengths)])
    seqs = [s.X[a:b, 0] for a, b in zip(offsets[:-1], offsets[1:])]
    return seqs, s.X, s.lengths


def _same_hhmm(ref, got, rtol=1e-10, atol=1e-10):
    assert got.n_iter_ == ref.n_iter_  # the same iterations
    np.testing.assert_allclose(got.monitor_history_, ref.monitor_history_, rtol=rtol, atol=0)
    np.testing.assert_allclose(got.hierarchy_.theta(), ref.hierarchy_.theta(), rtol=0, atol=atol)
    np.testing.assert_allclose(got.emission_.probs, ref.emission_.probs, rtol=0, atol=atol)
    assert got.converged_ == ref.converged_


def _fit_both_hhmm(est, data, client, X, L, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, L)
        got = sd.fit(clone(est), data, client, **kw)
    return ref, got


# measured (3 shards, split_every=2): the log-likelihood histories agree to 2.2e-16 relative, θ exactly,
# the emission probabilities to 2.4e-34 absolute (flat, jtree, factored frontier), the same 8 iterations;
# the asserted 1e-10 leaves room for other BLAS / thread counts
@pytest.mark.parametrize("inference", ["flat", "jtree", "factored-frontier"])
def test_hhmm_distributed_equals_fit(client, inference):
    seqs, X, L = _hhmm_data()
    est = HierarchicalHMM(FIG1, "categorical", init_params="ste", random_state=0, n_iter=8, inference=inference)
    bag = dask_bag.from_sequence(seqs, npartitions=3)
    ref, got = _fit_both_hhmm(est, bag, client, X, L, init=(X, L), split_every=2)
    _same_hhmm(ref, got)


def test_hhmm_gaussian_distributed_equals_fit(client):
    seqs, X, L = _hhmm_data(seed=2)
    rng = np.random.RandomState(0)
    seqs = [s + rng.normal(0, 0.3, s.shape) for s in seqs]   # the emission M-step from Σγ, Σγx, Σγx²
    X = np.concatenate(seqs)[:, None]
    est = HierarchicalHMM(FIG1, "gaussian", init_params="ste", random_state=0, n_iter=6)
    ref, got = _fit_both_hhmm(est, dask_bag.from_sequence(seqs, npartitions=3), client, X, L, init=(X, L))
    assert got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.monitor_history_, ref.monitor_history_, rtol=1e-10, atol=0)
    np.testing.assert_allclose(got.hierarchy_.theta(), ref.hierarchy_.theta(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.emission_.means, ref.emission_.means, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.emission_.variances, ref.emission_.variances, rtol=1e-10, atol=1e-12)


def test_hhmm_alphabet_is_counted_on_the_workers(client):
    seqs, X, L = _hhmm_data()
    top = int(X.max())
    first = [s for s in seqs if s.max() < top][:4]   # the first shard never shows the largest symbol
    rest = [s for s in seqs if not any(s is f for f in first)]
    bag = dask_bag.from_sequence(first + rest, npartitions=3)
    est = HierarchicalHMM(FIG1, "categorical", init_params="ste", random_state=0, n_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = sd.fit(est, bag, client)   # init="first": initialised from the first shard only
    assert got.emission_.n_features == top + 1 == clone(est).fit(X, L).emission_.n_features
    # given emission parameters, no initialisation from data: equal to fit whatever the init data
    given = HierarchicalHMM(FIG1, Categorical(np.full((6, 6), 1 / 6)), init_params="st", random_state=3,
                            n_iter=6)
    ref, got = _fit_both_hhmm(given, bag, client, X, L)
    _same_hhmm(ref, got)


def test_hhmm_worker_killed_mid_fit_leaves_the_result_unchanged(client):
    seqs, X, L = _hhmm_data(seed=4)
    est = HierarchicalHMM(FIG1, "categorical", init_params="ste", random_state=0, n_iter=6)
    kill_one, killed = worker_killer(client, 2)

    bag = dask_bag.from_sequence(seqs, npartitions=4)
    ref, got = _fit_both_hhmm(est, bag, client, X, L, init=(X, L), callback=kill_one)
    assert killed
    _same_hhmm(ref, got)
    assert killed[0] not in client.scheduler_info()["workers"]
    client.wait_for_workers(2, timeout=60)


def test_hhmm_n_jobs_equals_one_block():
    seqs, X, L = _hhmm_data()
    est = HierarchicalHMM(FIG1, "categorical", init_params="ste", random_state=0, n_iter=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(X, L)
        got = clone(est).set_params(n_jobs=2).fit(X, L)
    _same_hhmm(ref, got, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="`n_jobs` must be None or a non-zero integer"):
        clone(est).set_params(n_jobs=0).fit(X, L)


def test_hhmm_gaussian_mixture_emissions_refused(client):
    seqs, X, L = _hhmm_data(n_seq=4)
    bag = dask_bag.from_sequence(seqs, npartitions=2)
    with pytest.raises(ValueError, match="no sufficient statistics"):
        sd.fit(HierarchicalHMM(FIG1, "gmm", init_params="ste"), bag, client)


# -- GraphCRF -----------------------------------------------------------------------------------------
def _graph_data(n=16, seed=0, weights=False):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for i in range(n):
        r, c = [(2, 3), (3, 3), (2, 4)][i % 3]
        y = rng.integers(0, 3, r * c)
        feats = np.eye(3)[y] + rng.normal(scale=0.8, size=(r * c, 3))
        edges = grid_graph(r, c)
        X.append((feats, edges, rng.normal(size=(len(edges), 2))))
        y = y.copy()
        y[rng.random(r * c) < 0.3] = -1     # partial labels
        Y.append(y)
    sw = rng.uniform(0.5, 2.0, n) if weights else None
    return X, Y, sw


def _fit_both_graph(est, X, Y, sw, client, npartitions=3, **kw):
    elements = list(zip(X, Y)) if sw is None else list(zip(X, Y, sw))
    bag = dask_bag.from_sequence(elements, npartitions=npartitions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(X, Y, sample_weight=sw)
        got = sd.fit(clone(est), bag, client, **kw)
    return ref, got


def _same_graph(ref, got, tol):
    assert got.n_iter_ == ref.n_iter_ and got.converged_ == ref.converged_  # the same iterations
    assert got.classes_.tolist() == ref.classes_.tolist()
    np.testing.assert_allclose([e["loss"] for e in got.training_log_], [e["loss"] for e in ref.training_log_],
                               rtol=tol, atol=0)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=tol)
    assert got.inference_converged_ == ref.inference_converged_


# measured (3 shards, split_every=2), the same iterations in every case: exact inference with L-BFGS,
# weights within 1.4e-14 of fit's (6.9e-15 with sample weights), losses within 7e-16 relative; CG 2.2e-11
# (weights); loopy BP with the warm-started messages kept where each shard lives: 4.4e-16 (message passing
# runs per graph, so a shard's graphs see the schedule they see in the whole batch)
@pytest.mark.parametrize("inference, optimizer, weights, tol", [
    ("exact", "lbfgs", False, 1e-8), ("exact", "lbfgs", True, 1e-8), ("exact", "cg", False, 1e-8),
    ("bp", "lbfgs", False, 1e-8)])
def test_graph_crf_distributed_equals_fit(client, inference, optimizer, weights, tol):
    X, Y, sw = _graph_data(weights=weights)
    est = GraphCRF(inference=inference, optimizer=optimizer, c2=0.1, max_iterations=40)
    ref, got = _fit_both_graph(est, X, Y, sw, client, split_every=2)
    _same_graph(ref, got, tol)


def test_graph_crf_label_count_is_merged_over_partitions(client):
    X, Y, _ = _graph_data(n=6)
    Y = [np.minimum(y, 1) for y in Y[:5]] + [Y[5]]   # only the last graph (last partition) shows label 2
    assert max(y.max() for y in Y[:5]) == 1 and Y[5].max() == 2
    ref, got = _fit_both_graph(GraphCRF(max_iterations=15), X, Y, None, client)
    assert len(got.classes_) == 3
    _same_graph(ref, got, 1e-8)


def test_graph_crf_worker_killed_mid_fit_leaves_the_result_unchanged(client):
    X, Y, _ = _graph_data(seed=5)
    kill_one, killed = worker_killer(client, 3)

    ref, got = _fit_both_graph(GraphCRF(c2=0.1, max_iterations=30), X, Y, None, client, npartitions=4,
                               callback=kill_one)
    assert killed
    _same_graph(ref, got, 1e-8)
    client.wait_for_workers(2, timeout=60)


def test_graph_crf_bad_data(client):
    X, Y, _ = _graph_data(n=4)
    with pytest.raises(ValueError, match="`data` must be a dask bag of \\(graph, labels\\)"):
        sd.fit(GraphCRF(), list(zip(X, Y)), client)
    with pytest.raises(ValueError, match="every element of the bag must be a pair \\(graph, labels\\)"):
        sd.fit(GraphCRF(), dask_bag.from_sequence(X, npartitions=2), client)
    with pytest.raises(ValueError, match="same numbers of node and edge features"):
        bad = X[:2] + [(x[0][:, :2], x[1], x[2]) for x in X[2:]]  # D = 2 in the 2nd partition
        sd.fit(GraphCRF(), dask_bag.from_sequence(list(zip(bad, Y)), npartitions=2), client)
    with pytest.raises(ValueError, match="holds no observed label"):
        sd.fit(GraphCRF(), dask_bag.from_sequence([(x, -np.ones(len(x[0]), int)) for x in X], npartitions=2),
               client)
