"""GraphCRF and its objective GraphCLL: brute-force oracle, finite differences, estimator contract."""
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import GraphCRF
from structlearn.engine.structures.graphs import grid_graph, two_level_chain
from structlearn.graph.objective import GraphCLL
from tests.oracles.graph_crf import graph_crf_nll, graph_map

RTOL = 1e-10
TIGHT = dict(tol=1e-13, max_iter=20000)
seeds = st.integers(0, 2**31 - 1)


def random_edges(rng, n, extra):
    """A random spanning tree on n nodes plus ``extra`` distinct chords."""
    perm = rng.permutation(n)
    edges = [(perm[i], perm[rng.integers(0, i)]) for i in range(1, n)]
    have = {frozenset(e) for e in edges}
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if frozenset((u, v)) not in have]
    for i in rng.permutation(len(pairs))[:extra]:
        edges.append(pairs[i])
    return np.array(edges, dtype=np.int64).reshape(-1, 2)


def random_problem(rng, B, n_range, K, D=2, F=2, extra=2, p_hidden=0.5, scale=0.7):
    X, Y = [], []
    for _ in range(B):
        n = int(rng.integers(*n_range))
        edges = random_edges(rng, n, min(extra, n * (n - 1) // 2 - (n - 1)))
        X.append((rng.normal(size=(n, D)), edges, rng.normal(size=(len(edges), F))))
        y = rng.integers(0, K, n)
        y[rng.random(n) < p_hidden] = -1
        Y.append(y)
    w = rng.normal(scale=scale, size=D * K + F * K * K)
    return X, Y, w


def split_w(w, D, F, K):
    return w[:D * K].reshape(D, K), w[D * K:].reshape(F, K, K)


def fd_gradient(obj, w, eps=1e-6):
    out = np.empty_like(w)
    for j in range(w.size):
        d = np.zeros_like(w)
        d[j] = eps
        out[j] = (obj.value_and_grad(w + d)[0] - obj.value_and_grad(w - d)[0]) / (2 * eps)
    return out


# -- objective against brute force ------------------------------------------------------------------
@settings(max_examples=15, deadline=None)
@given(seeds, st.integers(2, 3), st.sampled_from([0.0, 0.5, 1.0]))
def test_exact_objective_matches_brute_force(seed, K, p_hidden):
    rng = np.random.default_rng(seed)
    X, Y, w = random_problem(rng, 3, (2, 6), K, p_hidden=p_hidden)
    sw = rng.uniform(0.5, 2.0, size=3)
    obj = GraphCLL(X, Y, K, method="exact", c2=0.0, sample_weight=sw)
    expected = graph_crf_nll(X, Y, *split_w(w, 2, 2, K), weights=sw)
    np.testing.assert_allclose(obj.value_and_grad(w)[0], expected, rtol=RTOL, atol=1e-10)


def test_all_observed_is_supervised_cll_and_none_observed_is_zero():
    rng = np.random.default_rng(1)
    X, Y, w = random_problem(rng, 3, (3, 7), 3, p_hidden=0.0)
    Wn, We = split_w(w, 2, 2, 3)
    # supervised CLL: log Z - s(y)
    expected = 0.0
    for (nf, edges, ef), y in zip(X, Y):
        u, p = nf @ Wn, np.einsum("ef,fij->eij", ef, We)
        s = u[np.arange(len(y)), y].sum() + p[np.arange(len(edges)), y[edges[:, 0]], y[edges[:, 1]]].sum()
        expected += float(np.log(np.sum(np.exp(_all_scores(u, edges, p))))) - s
    for method in ("exact", "bp", "trw"):
        obj = GraphCLL(X, Y, 3, method=method, c2=0.0)
        if method == "exact":
            np.testing.assert_allclose(obj.value_and_grad(w)[0], expected, rtol=RTOL)
        hidden = [np.full(len(y), -1) for y in Y]
        v, g = GraphCLL(X, hidden, 3, method=method, c2=0.0).value_and_grad(w)
        assert v == 0.0 and not g.any()


def _all_scores(u, edges, p):
    import itertools
    n, K = u.shape
    out = []
    for x in itertools.product(range(K), repeat=n):
        x = np.array(x)
        out.append(u[np.arange(n), x].sum() + p[np.arange(len(edges)), x[edges[:, 0]], x[edges[:, 1]]].sum())
    return np.array(out)


def test_l2_and_weights():
    rng = np.random.default_rng(2)
    X, Y, w = random_problem(rng, 2, (3, 5), 2)
    a = GraphCLL(X, Y, 2, c2=0.0).value_and_grad(w)
    b = GraphCLL(X, Y, 2, c2=0.7).value_and_grad(w)
    np.testing.assert_allclose(b[0], a[0] + 0.7 * w @ w, rtol=RTOL)
    np.testing.assert_allclose(b[1], a[1] + 1.4 * w, rtol=RTOL, atol=1e-12)
    c = GraphCLL(X, Y, 2, c2=0.0, sample_weight=[2.0, 0.0])
    d = GraphCLL(X[:1], Y[:1], 2, c2=0.0)
    np.testing.assert_allclose(c.value_and_grad(w)[0], 2 * d.value_and_grad(w)[0], rtol=RTOL)


# -- finite differences for every back end ----------------------------------------------------------
@pytest.mark.parametrize("method", ["exact", "bp", "trw"])
@pytest.mark.parametrize("loopy", [False, True])
def test_gradient_finite_differences(method, loopy):
    rng = np.random.default_rng(3 + loopy)
    X, Y, w = random_problem(rng, 3, (3, 7), 3, extra=3 if loopy else 0, scale=0.4)
    options = None if method == "exact" else TIGHT
    obj = GraphCLL(X, Y, 3, method=method, options=options, c2=0.3, warm_start=False)
    v, g = obj.value_and_grad(w)
    assert all(obj.inference_converged)
    np.testing.assert_allclose(g, fd_gradient(obj, w), rtol=1e-5, atol=1e-6)
    if not loopy:  # BP and TRW are exact on trees (ρ = 1 on a tree)
        exact = GraphCLL(X, Y, 3, method="exact", c2=0.3).value_and_grad(w)
        np.testing.assert_allclose(v, exact[0], rtol=1e-9)
        np.testing.assert_allclose(g, exact[1], rtol=1e-7, atol=1e-9)


def test_trw_loopy_clamped_and_full_are_upper_bounds_of_log_z():
    rng = np.random.default_rng(5)
    X, _, w = random_problem(rng, 2, (4, 7), 2, extra=3)
    hidden_all = [np.full(x[0].shape[0], -1) for x in X]
    hidden_all[0][0] = 0   # one observed node: value = TRW log Z − TRW log Z(clamped)
    exact = GraphCLL(X, hidden_all, 2, method="exact", c2=0.0)
    trw = GraphCLL(X, hidden_all, 2, method="trw", c2=0.0, options=TIGHT)
    assert np.isfinite(trw.value_and_grad(w)[0]) and np.isfinite(exact.value_and_grad(w)[0])


# -- estimator --------------------------------------------------------------------------------------
def blobs(rng, B, h=6, w=6, K=3, noise=1.0, p_hidden=0.5):
    X, Y = [], []
    for _ in range(B):
        c = rng.integers(0, K, (2, 2))
        y = np.kron(c, np.ones((h // 2, w // 2), dtype=int)).ravel()
        f = np.eye(K)[y] + rng.normal(scale=noise, size=(h * w, K))
        X.append((np.hstack([f, np.ones((h * w, 1))]), grid_graph(h, w)))
        yy = y.copy()
        yy[rng.random(h * w) < p_hidden] = -1
        Y.append(yy)
    return X, Y


@pytest.mark.parametrize("inference,optimizer", [("bp", "lbfgs"), ("trw", "lbfgs"), ("bp", "cg")])
def test_fit_predict_beats_unary_only(inference, optimizer):
    rng = np.random.default_rng(0)
    X, Y = blobs(rng, 10)
    Xt, Yt = blobs(rng, 10, p_hidden=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = GraphCRF(inference=inference, optimizer=optimizer, max_iterations=30).fit(X, Y)
        unary = GraphCRF(inference="exact", max_iterations=30).fit(
            [(x[0], np.zeros((0, 2), int)) for x in X], Y)
        acc = crf.score(Xt, Yt)
        acc0 = unary.score([(x[0], np.zeros((0, 2), int)) for x in Xt], Yt)
    assert acc > acc0 + 0.03
    assert crf.coef_node_.shape == (4, 3) and crf.coef_edge_.shape == (1, 3, 3)
    assert crf.coef_edge_[0].trace() > crf.coef_edge_[0].sum() - crf.coef_edge_[0].trace()
    m = crf.predict_marginals(Xt)
    assert len(m) == 10 and m[0].shape == (36, 3)
    np.testing.assert_allclose(m[0].sum(axis=1), 1.0, rtol=1e-9)


def test_exact_predict_is_brute_force_map_and_marginals_sum_to_one():
    rng = np.random.default_rng(7)
    X, Y, _ = random_problem(rng, 4, (3, 7), 3, extra=2)
    crf = GraphCRF(inference="exact", max_iterations=20, c2=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(X, Y)
    for x, p in zip(X, crf.predict(X)):
        np.testing.assert_array_equal(p, graph_map(*x, crf.coef_node_, crf.coef_edge_))
    assert crf.n_iter_ >= 1 and isinstance(crf.converged_, bool) and crf.training_log_


def test_exact_fit_reaches_optimum_and_matches_cg():
    rng = np.random.default_rng(8)
    X, Y, _ = random_problem(rng, 5, (3, 6), 2, extra=1)
    a = GraphCRF(inference="exact", max_iterations=200).fit(X, Y)
    b = GraphCRF(inference="exact", optimizer="cg", max_iterations=200).fit(X, Y)
    assert a.converged_
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-3)
    g = GraphCLL(X, Y, 2, c2=1.0).value_and_grad(a.coef_)[1]
    assert np.linalg.norm(g) < 1e-3


def test_edge_features_optional_and_two_level_chain():
    E = two_level_chain(4)
    assert E.tolist() == [[0, 1], [1, 2], [2, 3], [4, 5], [5, 6], [6, 7], [0, 4], [1, 5], [2, 6], [3, 7]]
    assert grid_graph(2, 3).tolist() == [[0, 1], [1, 2], [3, 4], [4, 5], [0, 3], [1, 4], [2, 5]]
    rng = np.random.default_rng(9)
    X = [(rng.normal(size=(8, 2)), E) for _ in range(3)]
    Y = [rng.integers(0, 2, 8) for _ in range(3)]
    crf = GraphCRF(max_iterations=10).fit(X, Y)
    assert crf.coef_edge_.shape == (1, 2, 2)
    X3 = [(x[0], x[1], np.ones((len(E), 1))) for x in X]
    crf3 = GraphCRF(max_iterations=10).fit(X3, Y)
    np.testing.assert_allclose(crf.coef_, crf3.coef_, rtol=1e-12)


def test_contract_clone_pickle_not_fitted():
    rng = np.random.default_rng(10)
    X, Y = blobs(rng, 3, h=4, w=4)
    crf = GraphCRF(inference="trw", max_iterations=5, c2=0.5)
    with pytest.raises(NotFittedError):
        crf.predict(X)
    assert clone(crf).get_params() == crf.get_params()
    X_copy = [tuple(np.array(a) for a in x) for x in X]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(X, Y)
    for a, b in zip(X, X_copy):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    back = pickle.loads(pickle.dumps(crf))
    for p, q in zip(crf.predict(X), back.predict(X)):
        np.testing.assert_array_equal(p, q)
    assert not hasattr(clone(crf), "coef_")


def test_save_load_round_trip_and_bad_files(tmp_path):
    from structlearn import LinearChainCRF
    from structlearn.engine.structures import BPOptions
    from structlearn.io.modelfile import ModelFileError

    rng = np.random.default_rng(11)
    X, Y = blobs(rng, 3, h=4, w=4)
    crf = GraphCRF(inference="bp", max_iterations=5, c2=0.5, inference_options=BPOptions(damping=0.2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(X, Y)
    path = crf.save(tmp_path / "g.npz", metadata={"grid": "4x4"})
    back = GraphCRF.load(path)
    assert back.metadata_ == {"grid": "4x4"} and back.inference_options["damping"] == 0.2
    np.testing.assert_array_equal(back.coef_edge_, crf.coef_edge_)
    np.testing.assert_array_equal(back.classes_, crf.classes_)
    for p, q in zip(crf.predict_marginals(X), back.predict_marginals(X)):
        np.testing.assert_allclose(p, q, rtol=1e-12)
    with pytest.raises(ValueError, match="graph-crf"):
        LinearChainCRF.load(path)
    (tmp_path / "t.npz").write_bytes(path.read_bytes()[:100])
    with pytest.raises(ModelFileError):
        GraphCRF.load(tmp_path / "t.npz")
    with pytest.raises(NotFittedError):
        GraphCRF().save(tmp_path / "x.npz")


def test_save_numpy_scalar_params_metadata_kept_and_bad_paths(tmp_path):
    rng = np.random.default_rng(12)
    X, Y = blobs(rng, 2, h=4, w=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = GraphCRF(max_iterations=np.int64(3), c2=np.float32(0.5)).fit(X, Y)
    path = crf.save(tmp_path / "g.npz", metadata={"a": 1})
    back = GraphCRF.load(path)
    assert back.max_iterations == 3 and back.metadata_ == {"a": 1}
    back.save(tmp_path / "again.npz")                      # metadata kept on re-save
    assert GraphCRF.load(tmp_path / "again.npz").metadata_ == {"a": 1}
    with pytest.raises(ValueError, match="metadata"):
        crf.save(tmp_path / "m.npz", metadata=[1, 2])
    with pytest.raises(FileNotFoundError, match="no_such_folder"):
        crf.save(tmp_path / "no_such_folder" / "m.npz")
    with pytest.raises(ValueError, match="`y`"):
        GraphCRF().fit(X, None)


def test_cg_without_progress_says_so():
    # fully observed, features ×1e3: scipy's CG line search fails at the first step (precision loss)
    rng = np.random.default_rng(0)
    Xh, Y = [], []
    for _ in range(2):
        y = rng.integers(0, 2, 9)
        Xh.append((1e3 * (np.eye(2)[y] + rng.normal(scale=0.5, size=(9, 2))), grid_graph(3, 3)))
        Y.append(y)
    with pytest.warns(ConvergenceWarning, match="no progress"):
        GraphCRF(optimizer="cg", max_iterations=5).fit(Xh, Y)


def test_convergence_warning_when_optimizer_stops_early():
    rng = np.random.default_rng(11)
    X, Y = blobs(rng, 3, h=4, w=4)
    with pytest.warns(ConvergenceWarning, match="max_iterations"):
        crf = GraphCRF(inference="bp", max_iterations=1).fit(X, Y)
    assert crf.converged_ is False


def test_convergence_warning_when_message_passing_does_not_converge():
    rng = np.random.default_rng(12)
    X, Y = blobs(rng, 3, h=4, w=4)
    with pytest.warns(ConvergenceWarning, match="message passing"):
        crf = GraphCRF(inference="bp", max_iterations=3,
                       inference_options=dict(max_iter=1, tol=0.0)).fit(X, Y)
    assert crf.inference_converged_ is False


def test_strong_potentials_never_nan():
    rng = np.random.default_rng(13)
    X, Y = blobs(rng, 2, h=4, w=4, noise=0.01, p_hidden=0.3)
    K = 3
    for method in ("exact", "bp", "trw"):
        obj = GraphCLL(X, Y, K, method=method, c2=0.0)
        w = np.concatenate([300.0 * np.vstack([np.eye(K), np.zeros((1, K))]).ravel(),
                            200.0 * np.eye(K).ravel()])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            v, g = obj.value_and_grad(w)
        assert np.isfinite(v) and np.all(np.isfinite(g))


@pytest.mark.parametrize("bad,match", [
    (lambda X, Y: ([(X[0][0][:, :1], X[0][1])] + X[1:], Y), "columns"),
    (lambda X, Y: ([(X[0][0], X[0][1] + 100)] + X[1:], Y), "out of range"),
    (lambda X, Y: ([(X[0][0], X[0][1].astype(float))] + X[1:], Y), "integer"),
    (lambda X, Y: ([(np.full_like(X[0][0], np.nan), X[0][1])] + X[1:], Y), "NaN"),
    (lambda X, Y: ([(X[0][0], X[0][1], np.ones((3, 1)))] + X[1:], Y), "edge_features"),
    (lambda X, Y: ([(X[0][0], np.array([[0, 0]]))] + X[1:], Y), "self loop"),
    (lambda X, Y: (X, [Y[0] + 5] + Y[1:]), "out of range"),
    (lambda X, Y: (X, [Y[0][:-1]] + Y[1:]), "shape"),
    (lambda X, Y: (X, Y[:1]), "label arrays"),
    (lambda X, Y: ([], []), "empty"),
    (lambda X, Y: (X[0], Y), "single sample"),
])
def test_bad_inputs(bad, match):
    rng = np.random.default_rng(14)
    X, Y = blobs(rng, 2, h=4, w=4)
    Xb, Yb = bad(X, Y)
    with pytest.raises(ValueError, match=match):
        GraphCRF(n_labels=3, max_iterations=2).fit(Xb, Yb)


@pytest.mark.parametrize("param,value", [("inference", "mf"), ("optimizer", "sgd"), ("c2", -1.0),
                                         ("max_iterations", 0), ("n_labels", 0),
                                         ("inference_options", 3)])
def test_bad_params(param, value):
    rng = np.random.default_rng(15)
    X, Y = blobs(rng, 1, h=4, w=4)
    with pytest.raises(ValueError, match=param if param != "inference_options" else "options"):
        GraphCRF(**{param: value}).fit(X, Y)


def test_exact_refuses_large_treewidth():
    rng = np.random.default_rng(16)
    X, Y = blobs(rng, 1, h=4, w=4)
    obj = GraphCLL(X, Y, 3, method="exact", max_table_size=50)
    with pytest.raises(ValueError, match="max_table_size"):
        obj.value_and_grad(np.zeros(obj.n_params))


@pytest.mark.parametrize("inference", ["exact", "bp"])
def test_callback_snapshots_equal_fits_with_smaller_budgets(inference):
    rng = np.random.default_rng(3)
    X, Y = blobs(rng, 6)
    seen = {}

    def record(entry):
        assert isinstance(entry["estimator"], GraphCRF) and entry["iteration"] >= 1
        seen[len(seen) + 1] = entry["estimator"]
        return False

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full = GraphCRF(inference=inference, max_iterations=12).fit(X, Y, callback=record)
        assert sorted(seen) == list(range(1, full.n_iter_ + 1))
        assert all("estimator" not in e for e in full.training_log_)
        np.testing.assert_array_equal(seen[full.n_iter_].coef_, full.coef_)
        for budget in (1, 3, 7):
            short = GraphCRF(inference=inference, max_iterations=budget).fit(X, Y)
            np.testing.assert_array_equal(seen[budget].coef_, short.coef_)
            np.testing.assert_array_equal(seen[budget].predict(X)[0], short.predict(X)[0])
        stopped = GraphCRF(inference=inference, max_iterations=12).fit(X, Y, callback=lambda e: True)
    assert stopped.n_iter_ == 1
    with pytest.raises(ValueError, match="callback: expected a callable with optimizer='lbfgs'"):
        GraphCRF(optimizer="cg").fit(X, Y, callback=record)
