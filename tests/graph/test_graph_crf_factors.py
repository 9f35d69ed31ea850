"""GraphCRF / GraphCLL with features on factors of any arity: brute force, finite differences, learning a
planted 3-variable factor, bp/trw, input errors, save/load."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.graph.graph_crf import GraphCRF
from structlearn.graph.objective import GraphCLL, factor_weight_slices
from structlearn.engine.structures.graphs import check_graphs, grid_graph
from tests.conftest import require_module
from tests.graph.test_graph_crf import fd_gradient, random_edges
from tests.oracles.graph_factor_crf_oracle import (log_partition, map_labeling, negative_log_likelihood,
                                                   node_marginals)

RTOL = 1e-10
TIGHT = dict(tol=1e-13, max_iter=20000)
seeds = st.integers(0, 2**31 - 1)


def random_problem(rng, B, n_range, K, arities=(1, 2, 3, 4), D=2, F=2, G=2, extra=1, p_hidden=0.5,
                   scale=0.5, n_factors=3, with_factors=None):
    """B random graphs with random factors of the given arities, partial labels and weights."""
    X, Y = [], []
    for b in range(B):
        n = int(rng.integers(*n_range))
        edges = random_edges(rng, n, min(extra, n * (n - 1) // 2 - (n - 1)))
        sample = [rng.normal(size=(n, D)), edges, rng.normal(size=(len(edges), F))]
        if with_factors is None or with_factors[b]:
            ars = [r for r in arities if r <= n]
            scopes = [tuple(rng.permutation(n)[:int(rng.choice(ars))].tolist()) for _ in range(n_factors)]
            sample += [scopes, rng.normal(size=(len(scopes), G))]
        X.append(tuple(sample))
        y = rng.integers(0, K, n)
        y[rng.random(n) < p_hidden] = -1
        Y.append(y)
    return X, Y


def weights(rng, obj, D, F, K, scale=0.5):
    """Random flat weights of ``obj`` and the oracle's (W_node, W_edge, {r: W_r})."""
    w = rng.normal(scale=scale, size=obj.n_params)
    G = obj.n_factor_features
    sl = factor_weight_slices(D, F, K, G, obj.factor_arities)
    Wf = {r: w[s].reshape((G,) + (K,) * r) for r, s in sl.items()}
    return w, (w[:D * K].reshape(D, K), w[D * K:D * K + F * K * K].reshape(F, K, K), Wf)


def full5(X):
    """Every sample as a 5-tuple for the oracle (no factors: an empty list)."""
    return [x if len(x) == 5 else (x[0], x[1], x[2], [], np.zeros((0, 1))) for x in X]


# -- objective against brute force ------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(seeds, st.integers(2, 3), st.sampled_from([0.0, 0.5, 1.0]))
def test_exact_objective_matches_brute_force(seed, K, p_hidden):
    rng = np.random.default_rng(seed)
    X, Y = random_problem(rng, 3, (2, 6), K, p_hidden=p_hidden, with_factors=[True, True, bool(seed % 2)])
    sw = rng.uniform(0.5, 2.0, size=3)
    obj = GraphCLL(X, Y, K, method="exact", c2=0.0, sample_weight=sw)
    w, W = weights(rng, obj, 2, 2, K)
    expected = negative_log_likelihood(full5(X), Y, *W, weights=sw)
    np.testing.assert_allclose(obj.value_and_grad(w)[0], expected, rtol=RTOL, atol=1e-10)


def test_log_z_and_marginals_match_brute_force_with_arities_1_to_4():
    rng = np.random.default_rng(0)
    K = 3
    X, Y = random_problem(rng, 2, (4, 6), K, n_factors=4)
    X[0] = X[0][:3] + ([(0,), (1, 2), (0, 2, 3), (3, 1, 0, 2)], rng.normal(size=(4, 2)))
    obj = GraphCLL(X, Y, K, c2=0.0)
    assert obj.factor_arities == (1, 2, 3, 4) and obj.n_params == 2 * 3 + 2 * 9 + 2 * (3 + 9 + 27 + 81)
    w, W = weights(rng, obj, 2, 2, K)
    per = obj.per_graph(w)
    for i, x in enumerate(X):
        ref = log_partition(x, *W) - log_partition(x, *W, labels=Y[i])
        np.testing.assert_allclose(per[i], ref, rtol=RTOL)
    crf = GraphCRF(n_labels=K).fit(X, Y)
    crf._set_coef(w, 2, 2, K, 2, obj.factor_arities)
    for i, (m, lab) in enumerate(zip(crf.predict_marginals(X), crf.predict(X))):
        np.testing.assert_allclose(m, node_marginals(X[i], *W, K), rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(lab, map_labeling(X[i], *W))


def test_factors_with_zero_features_equal_the_pairwise_objective():
    """The factor path (FactorLayout + constrain) against the pairwise path (folded clamping)."""
    rng = np.random.default_rng(1)
    X, Y = random_problem(rng, 4, (3, 7), 3, extra=3, with_factors=[False] * 4)
    Xf = [x + ([(0, 1, 2), (1,)], np.zeros((2, 2))) for x in X]
    pw, fac = GraphCLL(X, Y, 3, c2=0.0), GraphCLL(Xf, Y, 3, c2=0.0)
    w = rng.normal(size=fac.n_params)
    v0, g0 = pw.value_and_grad(w[:pw.n_params])
    v1, g1 = fac.value_and_grad(w)
    np.testing.assert_allclose(v1, v0, rtol=RTOL)
    np.testing.assert_allclose(g1[:pw.n_params], g0, rtol=1e-9, atol=1e-12)


def test_dict_samples_equal_tuples_and_absent_arities_contribute_zero():
    rng = np.random.default_rng(2)
    X, Y = random_problem(rng, 3, (3, 6), 2, arities=(3,), with_factors=[True, False, True])
    D = [dict(zip(("node_features", "edges", "edge_features", "factors", "factor_features"), x)) for x in X]
    a, b = GraphCLL(X, Y, 2, c2=0.0), GraphCLL(D, Y, 2, c2=0.0)
    w = rng.normal(size=a.n_params)
    assert a.value_and_grad(w)[0] == b.value_and_grad(w)[0]
    # declaring an arity no graph has: its weights get zero gradient, the rest is unchanged
    c = GraphCLL(X, Y, 2, c2=0.0, factor_arities=(2, 3))
    wc = np.concatenate([w[:2 * 2 + 2 * 4], rng.normal(size=2 * 4), w[2 * 2 + 2 * 4:]])
    vc, gc = c.value_and_grad(wc)
    va, ga = a.value_and_grad(w)
    np.testing.assert_allclose(vc, va, rtol=RTOL)
    assert not gc[12:20].any()


# -- gradients ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["exact", "bp", "trw"])
def test_gradient_finite_differences(method):
    rng = np.random.default_rng(3)
    X, Y = random_problem(rng, 3, (3, 6), 2, extra=2, arities=(1, 3, 4))
    options = None if method == "exact" else TIGHT
    obj = GraphCLL(X, Y, 2, method=method, options=options, c2=0.3, warm_start=False)
    w = rng.normal(scale=0.4, size=obj.n_params)
    v, g = obj.value_and_grad(w)
    assert np.isfinite(v) and all(obj.inference_converged)
    tol = dict(rtol=1e-6, atol=1e-7) if method == "exact" else dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g, fd_gradient(obj, w), **tol)


def test_bp_is_exact_on_a_hypertree_and_trw_bounds_log_z():
    rng = np.random.default_rng(4)
    n = 6
    x = (rng.normal(size=(n, 2)), np.zeros((0, 2), dtype=np.int64), None, [(0, 1, 2), (2, 3, 4), (4, 5)],
         rng.normal(size=(3, 2)))
    y = [np.array([0, -1, 1, -1, -1, 1])]
    ex = GraphCLL([x], y, 2, c2=0.0)
    bp = GraphCLL([x], y, 2, method="bp", options=TIGHT, c2=0.0)
    w = rng.normal(size=ex.n_params)
    np.testing.assert_allclose(bp.value_and_grad(w)[0], ex.value_and_grad(w)[0], rtol=1e-9)
    np.testing.assert_allclose(bp.value_and_grad(w)[1], ex.value_and_grad(w)[1], rtol=1e-7, atol=1e-9)
    # loopy: TRW's log Z (all hidden but one node, whose clamped term is another bound) is finite
    loopy = (rng.normal(size=(5, 2)), grid_graph(1, 5), None, [(0, 1, 2), (1, 2, 3, 4), (0, 4, 2)],
             rng.normal(size=(3, 2)))
    for method in ("bp", "trw"):
        obj = GraphCLL([loopy], [np.array([1, -1, -1, 0, -1])], 2, method=method, options=TIGHT, c2=0.0)
        assert np.isfinite(obj.value_and_grad(rng.normal(size=obj.n_params))[0])


# -- learning a planted higher-order factor ---------------------------------------------------------
def parity_triples(rng, B, T=4, noise=1.0):
    """B graphs of T triples of binary nodes with y_a ⊕ y_b ⊕ y_c = 0, node features (2y − 1 + noise, 1):
    the pairwise samples have the edges a–b, b–c (whose marginals are uniform under the parity), the
    factor samples the factor (a, b, c) alone (constant feature; a forest: tree engine)."""
    X, Xp, Y = [], [], []
    even = np.array([[0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]])
    for _ in range(B):
        y = even[rng.integers(0, 4, T)].ravel()
        nf = np.stack([2.0 * y - 1 + rng.normal(scale=noise, size=y.size), np.ones(y.size)], axis=1)
        edges = np.array([[3 * t + i, 3 * t + i + 1] for t in range(T) for i in range(2)])
        Xp.append((nf, edges))
        X.append((nf, np.zeros((0, 2), dtype=np.int64), None, [(3 * t, 3 * t + 1, 3 * t + 2) for t in range(T)],
                  None))
        Y.append(y)
    return X, Xp, Y


def test_fit_learns_a_planted_parity_factor_pairwise_features_cannot_see():
    rng = np.random.default_rng(5)
    X, Xp, Y = parity_triples(rng, 40)
    Xt, Xpt, Yt = parity_triples(rng, 100)
    Yh = [np.where(rng.random(y.size) < 0.3, -1, y) for y in Y]     # partial labels
    crf = GraphCRF(c2=0.01, max_iterations=200).fit(X, Yh)
    pw = GraphCRF(c2=0.01, max_iterations=200).fit(Xp, Yh)
    assert crf.factor_arities_ == (3,) and crf.factor_coef_[3].shape == (1, 2, 2, 2)
    # the 3-way interaction (Walsh coefficient of x_a x_b x_c, invariant to terms of fewer variables)
    sign = 1 - 2 * (np.indices((2, 2, 2)).sum(axis=0) % 2)
    assert float(np.mean(sign * crf.factor_coef_[3][0])) > 1.5
    acc, acc_pw = crf.score(Xt, Yt), pw.score(Xpt, Yt)
    assert acc > acc_pw + 0.03, (acc, acc_pw)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_n_jobs_blocks_equal_one_process():
    rng = np.random.default_rng(6)
    X, _, Y = parity_triples(rng, 6, T=2)
    X[1] = X[1][:3] + ([(0, 1), (2, 3, 4, 5)], None)         # other arities in one block only
    a = GraphCRF(max_iterations=15).fit(X, Y)
    b = GraphCRF(max_iterations=15, n_jobs=2).fit(X, Y)
    assert a.factor_arities_ == b.factor_arities_ == (2, 3, 4)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-6, atol=1e-8)


def test_bp_and_trw_fit_and_predict_with_factors():
    rng = np.random.default_rng(7)
    X, _, Y = parity_triples(rng, 8, T=3)
    X = [(x[0], np.concatenate([x[1], [[0, 2], [2, 5]]]),) + x[2:] for x in X]   # loops
    for inference in ("bp", "trw"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            crf = GraphCRF(inference=inference, max_iterations=20).fit(X, Y)
        assert all(p.shape == (9,) for p in crf.predict(X))
        m = crf.predict_marginals(X)
        np.testing.assert_allclose(np.concatenate(m).sum(axis=1), 1.0, rtol=1e-9)


# -- errors ------------------------------------------------------------------------------------------
def one(n=4):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 2)), grid_graph(1, n)


@pytest.mark.parametrize("factors, features, match", [
    ([(0, 4)], None, r"factors\[0\] = \(0, 4\) is out of range: the graph has 4 nodes"),
    ([(0, -1, 2)], None, r"out of range"),
    ([(1, 2, 1)], None, r"factors\[0\] = \(1, 2, 1\) repeats a node"),
    ([()], None, r"factors\[0\] must be a non-empty tuple of integer node indices"),
    ([(0.5, 1)], None, r"non-empty tuple of integer"),
    ([(0, 1)], np.ones((2, 3)), r"factor_features must have shape \(n_factors, G\) = \(1, G\); got \(2, 3\)"),
    ([(0, 1)], np.array([[np.nan]]), r"factor_features contain NaN"),
    (None, np.ones((1, 1)), r"has factor_features but no factors"),
])
def test_bad_factors_are_refused_with_clear_messages(factors, features, match):
    nf, edges = one()
    with pytest.raises(ValueError, match=match):
        GraphCRF().fit([(nf, edges, None, factors, features)], [np.zeros(4, dtype=int)])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_mismatched_g_unseen_arity_and_refusals():
    nf, edges = one()
    y = [np.zeros(4, dtype=int), np.ones(4, dtype=int)]
    with pytest.raises(ValueError, match=r"`X`\[1\] has 3 factor features; expected G = 2"):
        GraphCRF().fit([(nf, edges, None, [(0, 1, 2)], np.ones((1, 2))),
                        (nf, edges, None, [(1, 2, 3)], np.ones((1, 3)))], y)
    crf = GraphCRF(max_iterations=5).fit([(nf, edges, None, [(0, 1, 2)], np.ones((1, 2)))] * 2, y)
    with pytest.raises(ValueError, match=r"factors of arity \[2\] but the model has factor weights for "
                                         r"arities \[3\] only"):
        crf.predict([(nf, edges, None, [(0, 1)], np.ones((1, 2)))])
    with pytest.raises(ValueError, match=r"has 1 factor features; expected G = 2"):
        crf.predict([(nf, edges, None, [(0, 1, 3)], None)])
    with pytest.raises(ValueError, match=r"may have only"):
        crf.predict([{"node_features": nf, "edges": edges, "factor": [(0, 1, 2)]}])
    pw = GraphCRF(max_iterations=5).fit([(nf, edges)] * 2, y)
    with pytest.raises(ValueError, match=r"arity \[3\] but the model has factor weights for arities \[\]"):
        pw.predict([(nf, edges, None, [(0, 1, 2)], None)])
    with pytest.raises(ValueError, match=r"carries higher-order factors; this estimator takes"):
        check_graphs([(nf, edges, None, [(0, 1, 2)], None)])
    with pytest.raises(ValueError, match=r"factor_arities"):
        GraphCLL([(nf, edges, None, [(0, 1, 2)], None)], y[:1], 2, factor_arities=(2,))


# -- model files -------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(8)
    X, Y = random_problem(rng, 4, (3, 6), 3, arities=(1, 3), p_hidden=0.3)
    crf = GraphCRF(max_iterations=10).fit(X, Y)
    crf.save(tmp_path / "m.npz")
    back = GraphCRF.load(tmp_path / "m.npz")
    assert back.factor_arities_ == crf.factor_arities_ and back.n_factor_features_in_ == 2
    for r in crf.factor_arities_:
        np.testing.assert_array_equal(back.factor_coef_[r], crf.factor_coef_[r])
    for a, b in zip(back.predict_marginals(X), crf.predict_marginals(X)):
        np.testing.assert_array_equal(a, b)


# -- structlearn.distributed ------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_distributed_fit_with_factors_equals_fit():
    distributed = require_module("distributed")
    dask_bag = require_module("dask.bag")
    from structlearn import distributed as sd

    rng = np.random.default_rng(9)
    X, _, Y = parity_triples(rng, 6, T=2)
    X[4] = X[4][:3] + ([(0, 1), (2, 3, 4, 5)], None)     # arities 2 and 4 in the last partition only
    ref = GraphCRF(max_iterations=10).fit(X, Y)
    # in-process workers share this test process's memory: a memory limit would count every earlier test's
    # allocations and pause the workers (the fit would wait for ever), so there is none
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, memory_limit=0,
                                       dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            got = sd.fit(GraphCRF(max_iterations=10), dask_bag.from_sequence(list(zip(X, Y)), npartitions=3),
                         client)
    finally:
        cluster.close()
    assert got.factor_arities_ == ref.factor_arities_ == (2, 3, 4) and got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=1e-8)
