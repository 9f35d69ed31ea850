"""AdaBoostMRF: Hölder bound per round, trees, parallel variant, LogOP, estimator contract."""
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import AdaBoostMRF, GraphCRF
from structlearn.graph.adaboost_mrf import (ParallelHolderBound, _is_forest, _spanning_forest,
                                                 bottom_chain_tree, holder_alpha_step, top_chain_tree,
                                                 two_level_chain_trees)
from structlearn.graph.objective import GraphCLL
from structlearn.engine.structures.graphs import check_graph_labels, check_graphs, grid_graph, two_level_chain


def dcrf_edges(T):
    """The edges of a 2-level DCRF of length T (:func:`two_level_chain`) and their one-hot types: top
    chain, bottom chain, top-bottom links."""
    E = two_level_chain(T)
    ef = np.zeros((len(E), 3))
    ef[:T - 1, 0] = 1
    ef[T - 1:2 * T - 2, 1] = 1
    ef[2 * T - 2:, 2] = 1
    return E, ef


def _noisy_graph(rng, y, T, K, noise, p_hidden):
    """Node features of a 2-level DCRF labelled ``y`` (one-hot labels plus Gaussian noise, the level as
    one-hot) and its labels with a fraction ``p_hidden`` hidden (-1)."""
    f = np.hstack([np.eye(K)[y] + rng.normal(scale=noise, size=(2 * T, K)),
                   np.repeat([[1.0, 0.0], [0.0, 1.0]], T, axis=0)])
    yy = y.copy()
    yy[rng.random(2 * T) < p_hidden] = -1
    return f, yy


def dcrf(rng, B, T=8, K=3, noise=1.2, p_hidden=0.5):
    """Toy 2-level DCRF: a sticky top chain, a bottom chain that copies the top label; one-hot edge types."""
    E, ef = dcrf_edges(T)
    X, Y = [], []
    for _ in range(B):
        top = np.zeros(T, dtype=int)
        top[0] = rng.integers(K)
        for t in range(1, T):
            top[t] = top[t - 1] if rng.random() < 0.85 else rng.integers(K)
        bot = np.where(rng.random(T) < 0.8, top, rng.integers(0, K, T))
        y = np.concatenate([top, bot])
        f, yy = _noisy_graph(rng, y, T, K, noise, p_hidden)
        X.append((f, E, ef))
        Y.append(yy)
    return X, Y


def test_chain_trees_are_spanning_trees():
    T = 5
    x = (np.zeros((2 * T, 1)), two_level_chain(T))
    E = two_level_chain(T)
    for tree in two_level_chain_trees():
        idx = tree(x)
        assert idx.size == 2 * T - 1
        batch = check_graphs([x])
        mask = np.zeros(len(E), bool)
        mask[idx] = True
        assert _is_forest(batch, mask)
    assert set(top_chain_tree(x)) | set(bottom_chain_tree(x)) == set(range(len(E)))


def test_random_spanning_forest_spans_each_graph():
    rng = np.random.default_rng(0)
    X = [(np.zeros((12, 1)), grid_graph(3, 4)), (np.zeros((5, 1)), np.array([[0, 1], [1, 2], [2, 0], [3, 4]]))]
    batch = check_graphs(X)
    for _ in range(5):
        mask = _spanning_forest(batch, 1.0 + rng.random(batch.edges.shape[0]))
        assert _is_forest(batch, mask)
        assert mask.sum() == 11 + 3     # n − components per graph


def test_bound_decreases_alphas_sum_to_one_and_logop_weights():
    rng = np.random.default_rng(1)
    X, Y = dcrf(rng, 12)
    ada = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=6, cg_iterations=3, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada.fit(X, Y)
    J = np.array(ada.objective_)
    assert J.size == len(ada.bound_) == ada.n_rounds_ >= 2
    # non-increasing outside cover rounds (there α is pushed up to lift the least-covered clique)
    cover = np.array([r["cover_round"] for r in ada.rounds_ if r["accepted"]])
    assert np.all((np.diff(J) <= 1e-9 * np.abs(J[:-1]))[~cover[1:]])
    np.testing.assert_allclose(ada.alphas_.sum(), 1.0, rtol=1e-12)
    assert np.all(ada.alphas_ >= 0)
    # coef_ = Σ_l α_l w_l restricted to the parameters of tree τ_l (edge type 0 = top chain,
    # 1 = bottom chain, 2 = vertical; node parameters D·K = 15 come first)
    K, DK = 3, 15
    expect = np.zeros_like(ada.coef_)
    for a, c, w in zip(ada.alphas_, ada.learner_trees_, ada.learner_coefs_):
        used = [0, 2] if c == 0 else [1, 2]
        keep = np.r_[np.arange(DK), np.concatenate([DK + t * K * K + np.arange(K * K) for t in used])]
        expect[keep] += a * w[keep]
    np.testing.assert_allclose(ada.coef_, expect, rtol=1e-12, atol=1e-15)
    assert ada.coef_edge_.shape == (3, 3, 3) and ada.coef_node_.shape == (5, 3)
    objs = GraphCLL(X, Y, 3, method="exact")
    assert np.isfinite(objs.value_and_grad(ada.coef_)[0])


def test_logop_potentials_are_alpha_weighted_tree_potentials():
    rng = np.random.default_rng(5)
    X, Y = dcrf(rng, 8, T=4)
    ada = AdaBoostMRF(trees=two_level_chain_trees(), selection="cyclic", n_rounds=4, cg_iterations=2, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada.fit(X, Y)
    # hand-made LogOP of the first graph: Σ_l α_l (unary, tree-edge pairwise) of w_l
    x = X[0]
    unary = sum(a * x[0] @ w[:15].reshape(5, 3) for a, w in zip(ada.alphas_, ada.learner_coefs_))
    pair = np.zeros((len(x[1]), 3, 3))
    for a, c, w in zip(ada.alphas_, ada.learner_trees_, ada.learner_coefs_):
        idx = two_level_chain_trees()[c](x)
        pair[idx] += a * (x[2][idx] @ w[15:].reshape(3, 9)).reshape(-1, 3, 3)
    # brute-force MAP over 3^8 labelings
    from itertools import product
    best, arg = -np.inf, None
    for lab in product(range(3), repeat=8):
        lab = np.array(lab)
        s = unary[np.arange(8), lab].sum() + pair[np.arange(len(pair)), lab[x[1][:, 0]], lab[x[1][:, 1]]].sum()
        if s > best:
            best, arg = s, lab
    ada.set_params(inference="exact")
    np.testing.assert_array_equal(ada.predict([x])[0], arg)
    # with one-hot edge types, the GraphCRF of coef_ is that same model
    np.testing.assert_array_equal(ada.to_graph_crf().predict([x])[0], arg)
    assert set(ada.learner_trees_.tolist()) <= {0, 1}


def test_first_round_bound_is_tree_likelihood():
    rng = np.random.default_rng(2)
    X, Y = dcrf(rng, 6)
    ada = AdaBoostMRF(trees=[top_chain_tree], n_rounds=1, cg_iterations=4, beta=0.5)
    with pytest.warns(ConvergenceWarning, match="n_rounds"):
        ada.fit(X, Y)
    batch = check_graphs(X)
    yy = check_graph_labels(Y, batch, 3)
    mask = np.zeros(batch.edges.shape[0], bool)
    for b in range(len(X)):
        mask[batch.edge_offsets[b] + top_chain_tree(X[b])] = True
    nll = GraphCLL(batch.with_edges(mask), yy, 3, method="exact").per_graph(ada.learner_coefs_[0])
    from scipy.special import logsumexp
    np.testing.assert_allclose(ada.bound_[0], logsumexp(0.5 * nll), rtol=1e-10)
    np.testing.assert_allclose(ada.alphas_, [1.0])


def test_fits_two_level_chain_comparably_to_exact_ml():
    # On this toy the top chain is the stronger tree on every graph and wins every round (the bottom tree
    # fails condition (29)), so the LogOP has no bottom-chain potential; measured (B = 15, 4 rounds,
    # β = 1): exact ML 0.685, LogOP 0.7425, ensemble 0.6925, unary only 0.5375. Asserted with margins.
    rng = np.random.default_rng(3)
    X, Y = dcrf(rng, 15)
    Xt, Yt = dcrf(rng, 25, p_hidden=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        exact = GraphCRF(inference="exact", max_iterations=40).fit(X, Y)
        ada = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=4, cg_iterations=4, inference="exact").fit(X, Y)
        ens = clone(ada).set_params(predict_method="ensemble")
        for name in ("coef_", "coef_node_", "coef_edge_", "classes_", "alphas_", "learner_coefs_",
                     "learner_trees_", "n_node_features_in_", "n_edge_features_in_", "_tree_seed",
                     "bound_", "n_rounds_", "converged_"):
            setattr(ens, name, getattr(ada, name))
        unary = GraphCRF(max_iterations=40).fit([(x[0], np.zeros((0, 2), int)) for x in X], Y)
    a_exact, a_ada, a_ens = exact.score(Xt, Yt), ada.score(Xt, Yt), ens.score(Xt, Yt)
    a_unary = unary.score([(x[0], np.zeros((0, 2), int)) for x in Xt], Yt)
    print(a_exact, a_ada, a_ens, a_unary)
    assert a_ada > a_exact - 0.07 and a_ens > a_exact - 0.05
    assert a_ada > a_unary
    m = ada.predict_marginals(Xt)
    np.testing.assert_allclose(m[0].sum(axis=1), 1.0, rtol=1e-9)
    crf = ada.to_graph_crf()
    for p, q in zip(crf.predict(Xt), ada.predict(Xt)):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("trees", ["random", "max_weight"])
def test_generated_trees_and_parallel_variant(trees):
    rng = np.random.default_rng(4)
    X, Y = dcrf(rng, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=trees, n_trees=2, n_rounds=3, cg_iterations=2, random_state=0).fit(X, Y)
        par = AdaBoostMRF(trees=trees, n_trees=2, parallel=True, max_iterations=5, random_state=0).fit(X, Y)
    assert np.all(np.diff(ada.bound_) <= 1e-12)
    assert np.all(np.diff(par.bound_) <= 1e-9)
    np.testing.assert_allclose(par.alphas_, [0.5, 0.5])
    np.testing.assert_allclose(par.coef_, par.learner_coefs_[0])
    again = AdaBoostMRF(trees=trees, n_trees=2, n_rounds=3, cg_iterations=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        again.fit(X, Y)
    np.testing.assert_array_equal(ada.coef_, again.coef_)
    assert len(ada.predict(X)) == 8


def test_parallel_bound_gradient_finite_differences():
    rng = np.random.default_rng(5)
    X, Y = dcrf(rng, 4, T=4)
    batch = check_graphs(X)
    yy = check_graph_labels(Y, batch, 3)
    objs = []
    for tree in two_level_chain_trees():
        mask = np.zeros(batch.edges.shape[0], bool)
        for b in range(len(X)):
            mask[batch.edge_offsets[b] + tree(X[b])] = True
        objs.append(GraphCLL(batch.with_edges(mask), yy, 3, method="exact"))
    J = ParallelHolderBound(objs, beta=0.3, c2=0.2)
    w = rng.normal(scale=0.5, size=objs[0].n_params)
    v, g = J.value_and_grad(w)
    fd = np.array([(J.value_and_grad(w + e)[0] - J.value_and_grad(w - e)[0]) / 2e-6
                   for e in 1e-6 * np.eye(w.size)])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


def test_contract_clone_pickle_not_fitted():
    rng = np.random.default_rng(6)
    X, Y = dcrf(rng, 5)
    ada = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=2, cg_iterations=2)
    with pytest.raises(NotFittedError):
        ada.predict(X)
    assert clone(ada).get_params()["n_rounds"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada.fit(X, Y)
    back = pickle.loads(pickle.dumps(ada))
    for p, q in zip(ada.predict(X), back.predict(X)):
        np.testing.assert_array_equal(p, q)


def test_parallel_logop_is_the_crf_of_w():
    # ρ-reparametrised trees: top/bottom chain edges lie in one of the two trees (ρ = 1/2), vertical
    # edges in both (ρ = 1); the LogOP of the two tree CRFs is the GraphCRF with coef_ = w
    rng = np.random.default_rng(6)
    X, Y = dcrf(rng, 6, T=5)
    ada = AdaBoostMRF(trees=two_level_chain_trees(), parallel=True, max_iterations=6, inference="exact")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada.fit(X, Y)
    np.testing.assert_allclose(ada.coef_, ada.learner_coefs_[0], rtol=1e-12)
    for p, q in zip(ada.predict_marginals(X), ada.to_graph_crf().predict_marginals(X)):
        np.testing.assert_allclose(p, q, rtol=1e-10, atol=1e-13)
    # inside the top tree the top-chain potential is doubled: ensemble marginals use those trees
    x = X[0]
    T = 5
    w = ada.coef_
    unary = x[0] @ w[:15].reshape(5, 3)
    pair = (x[2] @ w[15:].reshape(3, 9)).reshape(-1, 3, 3)
    from itertools import product

    def tree_marginals(idx, factor):
        m = np.zeros((2 * T, 3))
        labs = np.array(list(product(range(3), repeat=2 * T)))
        s = unary[np.arange(2 * T), labs].sum(axis=1)
        for e, f in zip(idx, factor):
            s = s + f * pair[e][labs[:, x[1][e, 0]], labs[:, x[1][e, 1]]]
        p = np.exp(s - s.max())
        p /= p.sum()
        for n in range(2 * T):
            m[n] = np.bincount(labs[:, n], weights=p, minlength=3)
        return m

    top, bot = top_chain_tree(x), bottom_chain_tree(x)
    f_top = np.where(top < 2 * T - 2, 2.0, 1.0)
    f_bot = np.where(bot < 2 * T - 2, 2.0, 1.0)
    expect = 0.5 * tree_marginals(top, f_top) + 0.5 * tree_marginals(bot, f_bot)
    ens = clone(ada).set_params(predict_method="ensemble")
    for name in ("coef_", "coef_node_", "coef_edge_", "classes_", "alphas_", "learner_coefs_",
                 "learner_trees_", "n_node_features_in_", "n_edge_features_in_", "_tree_seed", "n_rounds_",
                 "converged_", "bound_"):
        setattr(ens, name, getattr(ada, name))
    np.testing.assert_allclose(ens.predict_marginals([x])[0], expect, rtol=1e-9)


@pytest.mark.parametrize("kwargs,match", [
    (dict(trees=[np.array([0, 1, 2, 3])]), "out of range"),
    (dict(trees=[np.arange(7)]), "cycle"),
    (dict(trees="best"), "trees"),
    (dict(trees=[]), "trees"),
    (dict(n_rounds=0), "n_rounds"),
    (dict(beta=2.0), "beta"),
    (dict(predict_method="vote"), "predict_method"),
    (dict(inference="mf"), "inference"),
    (dict(selection="best"), "selection"),
    (dict(criterion="likelihood"), "criterion"),
    (dict(warm_start="zero"), "warm_start"),
    (dict(max_alpha=1.0), "max_alpha"),
    (dict(max_alpha=0.0), "max_alpha"),
    (dict(max_alpha=0.3, cover_floor=0.4), "cover_floor"),
    (dict(feature_subsets=[[0, 5]]), "feature_subsets"),
    (dict(feature_subsets=[]), "feature_subsets"),
    (dict(feature_subsets=0), "feature_subsets"),
    (dict(feature_subsets=2, parallel=True), "feature_subsets"),
    (dict(c2="a"), "c2"),
    (dict(tol=None), "tol"),
    (dict(beta="x"), "beta"),
    (dict(n_trees=True), "n_trees"),
    (dict(trees=[0, 1, 2]), "1-D array"),
    (dict(inference="bp", inference_options={"foo": 1}), "inference_options"),
])
def test_bad_params(kwargs, match):
    X = [(np.zeros((3, 1)), np.array([[0, 1], [1, 2], [2, 0]]))] * 2
    X = [X[0], (np.zeros((4, 1)), np.array([[0, 1], [1, 2], [2, 0], [2, 3], [0, 3], [1, 3], [0, 2]]))]
    Y = [np.array([0, 1, -1]), np.array([1, -1, 0, 1])]
    if kwargs.get("trees") is not None and isinstance(kwargs["trees"], list) and kwargs["trees"] and \
            np.size(kwargs["trees"][0]) == 7:
        X = [X[1], X[1]]
        Y = [Y[1], Y[1]]
    with pytest.raises(ValueError, match=match):
        AdaBoostMRF(**kwargs).fit(X, Y)


def test_generated_trees_do_not_depend_on_the_batch():
    rng = np.random.default_rng(7)
    X = [(rng.normal(size=(9, 2)), grid_graph(3, 3)) for _ in range(3)]
    Y = [rng.integers(0, 2, 9) for _ in range(3)]
    for trees in ("random", "max_weight"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            ada = AdaBoostMRF(trees=trees, n_trees=2, n_rounds=2, cg_iterations=2, random_state=0,
                              inference="exact").fit(X, Y)
        together = ada.predict_marginals(X)
        for b in range(3):
            np.testing.assert_allclose(ada.predict_marginals([X[b]])[0], together[b], rtol=1e-12)


def test_parallel_warns_about_edges_in_no_tree_and_zero_weight_learners_are_dropped():
    rng = np.random.default_rng(8)
    X = [(rng.normal(size=(9, 2)), grid_graph(3, 3)) for _ in range(3)]
    Y = [rng.integers(0, 2, 9) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(UserWarning, match="no candidate tree"):
            AdaBoostMRF(n_trees=1, parallel=True, max_iterations=2, random_state=0).fit(X, Y)
        ada = AdaBoostMRF(n_trees=1, n_rounds=4, cg_iterations=2, tol=0.0, random_state=0).fit(X, Y)
    assert np.all(ada.alphas_ > 0) and len(ada.alphas_) == len(ada.learner_coefs_) == len(ada.learner_trees_)
    np.testing.assert_allclose(ada.alphas_.sum(), 1.0, rtol=1e-12)


def test_feature_subset_learners_move_only_their_features():
    rng = np.random.default_rng(9)
    X, Y = dcrf(rng, 8, T=4)                      # D = 5 node features: 3 noisy one-hot + 2 level flags
    subsets = [np.array([0, 1, 2]), np.array([3, 4])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=two_level_chain_trees(), feature_subsets=subsets, n_rounds=3, cg_iterations=3,
                          tol=0.0).fit(X, Y)
    assert len(ada.feature_subsets_) == 2 and ada.learner_features_.shape == ada.learner_trees_.shape
    # one round: the learner starts from zero weights, so outside its subset the node weights stay 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one = AdaBoostMRF(trees=two_level_chain_trees(), feature_subsets=subsets, n_rounds=1,
                          cg_iterations=3).fit(X, Y)
    w0 = one.learner_coefs_[0][:15].reshape(5, 3)
    mine = subsets[one.learner_features_[0]]
    assert np.all(w0[np.setdiff1d(np.arange(5), mine)] == 0) and np.any(w0[mine] != 0)
    np.testing.assert_allclose(ada.alphas_.sum(), 1.0, rtol=1e-12)
    assert np.all(np.diff(ada.objective_) <= 1e-9 * np.abs(np.array(ada.objective_[:-1])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rand = AdaBoostMRF(trees=two_level_chain_trees(), feature_subsets=3, n_rounds=2, cg_iterations=2,
                           random_state=0).fit(X, Y)
    assert len(rand.feature_subsets_) == 3 and all(len(f) == 3 for f in rand.feature_subsets_)
    assert len(rand.predict(X)) == len(X)


# ------------------------------------------------------------------------------------------------
# Sequential AdaBoost.MRF as Tran et al. (2014), Figure 8: forests, condition (29), the α step
# ------------------------------------------------------------------------------------------------
def complementary_dcrf(rng, B, T=5, K=3, noise=1.2, p_hidden=0.3):
    """2-level DCRF toy whose graphs alternate: a sticky top chain over a noisy bottom one, then the
    reverse, so that the top-chain tree fits half the graphs best and the bottom-chain tree the rest."""
    E, ef = dcrf_edges(T)
    X, Y = [], []
    for b in range(B):
        a = np.zeros(T, dtype=int)
        a[0] = rng.integers(K)
        for t in range(1, T):
            a[t] = a[t - 1] if rng.random() < 0.9 else rng.integers(K)
        other = rng.integers(0, K, T)
        y = np.concatenate([a, other] if b % 2 == 0 else [other, a])
        f, yy = _noisy_graph(rng, y, T, K, noise, p_hidden)
        X.append((f, E, ef))
        Y.append(yy)
    return X, Y


def striped_grids(rng, B, r=4, c=4, noise=1.0, p_hidden=0.3):
    """Binary grids with constant rows (even graphs) or constant columns (odd graphs), one shared edge
    feature; and two comb spanning trees: every horizontal edge + the first column, every vertical
    edge + the first row."""
    E = grid_graph(r, c)
    horizontal = np.flatnonzero(np.abs(E[:, 0] - E[:, 1]) == 1)
    vertical = np.flatnonzero(np.abs(E[:, 0] - E[:, 1]) != 1)
    first_col = vertical[np.isin(E[vertical].min(axis=1) % c, [0])]
    first_row = horizontal[E[horizontal].min(axis=1) < c]
    trees = [np.sort(np.r_[horizontal, first_col]), np.sort(np.r_[vertical, first_row])]
    X, Y = [], []
    for b in range(B):
        lab = rng.integers(0, 2, r if b % 2 == 0 else c)
        y = (np.repeat(lab, c) if b % 2 == 0 else np.tile(lab, r)).astype(int)
        f = np.eye(2)[y] + rng.normal(scale=noise, size=(r * c, 2))
        yy = y.copy()
        yy[rng.random(r * c) < p_hidden] = -1
        X.append((f, E, np.ones((len(E), 1))))
        Y.append(yy)
    return X, Y, trees


def _check_rounds(ada, floor):
    """Figure 8's bookkeeping as built: Σα = 1, every kept α in (0, 1) (none wiped), the weights of every round
    the (1 − α) scaling of the previous ones plus α (exactly); outside cover rounds (29) > 0, L_H lower, the
    selected learner the smallest L_H among the candidates meeting (29), and the cover kept at the floor once
    reached; the stop reason of the last round."""
    np.testing.assert_allclose(ada.alphas_.sum(), 1.0, rtol=1e-12)
    assert np.all((ada.alphas_ > 0) & (ada.alphas_ < 1)) or ada.alphas_.tolist() == [1.0]
    accepted = [r for r in ada.rounds_ if r["accepted"]]
    assert [r["log_bound"] for r in accepted] == ada.bound_
    assert accepted[0]["weights"] == [1.0]
    for prev, r in zip(accepted, accepted[1:]):
        assert r["weights"] == [w * (1.0 - r["alpha"]) for w in prev["weights"]] + [r["alpha"]]
        assert 0 < r["alpha"] <= ada.max_alpha
        if r["cover_round"]:
            assert r["min_cover"] >= prev["min_cover"]
            continue
        assert r["condition_29"] > 0 and r["log_bound"] < r["log_bound_before"] == prev["log_bound"]
        ok = [c["log_bound"] for c in r["candidates"] if c["condition_29"] > 0 and c["alpha"] > 0]
        assert r["log_bound"] == min(ok)
        if prev["min_cover"] >= floor:
            assert r["min_cover"] >= floor * (1 - 1e-12)
    assert ada.alphas_.tolist() == accepted[-1]["weights"]
    if ada.converged_:
        last = ada.rounds_[-1]
        assert not last["accepted"] and not last["cover_round"]


def test_sequential_forms_a_forest_on_a_dcrf():
    rng = np.random.default_rng(11)
    X, Y = complementary_dcrf(rng, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=6, cg_iterations=2, tol=0.0,
                          inference="exact").fit(X, Y)
    _check_rounds(ada, 0.4)
    n_observed = np.mean([np.count_nonzero(np.asarray(y) >= 0) for y in Y])
    assert ada.beta_ == 1.0 / n_observed                       # the default β: flat data weights
    assert set(ada.learner_trees_.tolist()) == {0, 1}          # both chains in the forest
    assert len(ada.alphas_) >= 2
    assert any(r["accepted"] and r["alpha"] < 1 for r in ada.rounds_[1:])
    chosen = [r["tree"] for r in ada.rounds_ if r["accepted"]]
    assert len(set(chosen)) == 2


def test_sequential_forms_a_forest_on_a_grid():
    # which comb wins depends on the draw (each learner also fits the other half of the graphs through its
    # first row / column); with this draw both combs enter the forest
    rng = np.random.default_rng(13)
    X, Y, trees = striped_grids(rng, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=trees, n_rounds=6, cg_iterations=2, tol=0.0, inference="exact").fit(X, Y)
    _check_rounds(ada, 0.4)
    assert set(ada.learner_trees_.tolist()) == {0, 1} and len(ada.alphas_) >= 2
    # the LogOP: unary Σ α_l θ_n(w_l), every edge in some tree, w = Σ α_l w_l (one shared edge feature)
    np.testing.assert_allclose(ada.coef_, ada.alphas_ @ ada.learner_coefs_, rtol=1e-12, atol=1e-15)


def test_bound_and_condition_29_against_brute_force():
    from tests.oracles.adaboost_mrf import holder_log_bound, tree_log_likelihoods

    rng = np.random.default_rng(13)
    X, Y = complementary_dcrf(rng, 6, T=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=3, cg_iterations=2, tol=0.0, beta=0.7,
                          inference="exact").fit(X, Y)
    K, D, F = 3, 5, 3
    tree_edges = [[t(x) for x in X] for t in two_level_chain_trees()]
    learners = [(a, tree_edges[c], w[:D * K].reshape(D, K), w[D * K:].reshape(F, K, K))
                for a, c, w in zip(ada.alphas_, ada.learner_trees_, ada.learner_coefs_)]
    np.testing.assert_allclose(ada.bound_[-1], holder_log_bound(X, Y, learners, 0.7), rtol=1e-10)
    # round 1 by hand (h_1 by enumeration), then round 2's candidates against log L_H(0) = log Σ exp(−β h_1)
    one = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=1, cg_iterations=2, beta=0.7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one.fit(X, Y)
    w1 = one.learner_coefs_[0]
    h1 = tree_log_likelihoods(X, Y, tree_edges[one.learner_trees_[0]], w1[:D * K].reshape(D, K),
                              w1[D * K:].reshape(F, K, K))
    np.testing.assert_allclose(one.bound_[0], holder_log_bound(X, Y, [(1.0, tree_edges[one.learner_trees_[0]],
                               w1[:D * K].reshape(D, K), w1[D * K:].reshape(F, K, K))], 0.7), rtol=1e-10)
    assert ada.rounds_[0]["tree"] == one.learner_trees_[0]
    for cand in ada.rounds_[1]["candidates"]:
        # the candidate's own h is not stored; (29) and the α step are consistent with the bound:
        # log L_H(α) ≤ log L_H(0) = log Σ exp(−β h_1) with equality only when (29) fails
        lh0 = np.log(np.exp(-0.7 * h1).sum())
        if cand["condition_29"] > 0:
            assert cand["alpha"] > 0 and cand["log_bound"] < lh0
        else:
            assert cand["alpha"] == 0 and np.isclose(cand["log_bound"], lh0, rtol=1e-12)


def test_alpha_step_against_grid_search():
    from tests.oracles.adaboost_mrf import alpha_grid_search

    rng = np.random.default_rng(14)
    for trial in range(30):
        B = int(rng.integers(2, 9))
        beta = float(rng.uniform(0.05, 1.0))
        H = -rng.uniform(1, 20, B)
        h = H + rng.normal(scale=rng.uniform(0.1, 5), size=B) + rng.normal()
        alpha, lb, cond = holder_alpha_step(H, h, beta)
        g_alpha, g_lb = alpha_grid_search(H, h, beta)
        assert lb <= g_lb + 1e-12                          # at least as low as the best grid point
        np.testing.assert_allclose(lb, g_lb, rtol=1e-9, atol=1e-10)
        assert abs(alpha - g_alpha) <= 2e-4 or np.isclose(lb, g_lb, rtol=1e-12)
        # condition (29) = Σ D(i)(h_i − H_i), D ∝ exp(−β H): minus the slope of log L_H at 0, over β
        Dw = np.exp(-beta * H - np.log(np.exp(-beta * H).sum()))
        np.testing.assert_allclose(cond, Dw @ (h - H), rtol=1e-12)
        eps = 1e-6
        lh = [np.log(np.exp(-beta * ((1 - a) * H + a * h)).sum()) for a in (0.0, eps)]
        np.testing.assert_allclose(-(lh[1] - lh[0]) / eps / beta, cond, rtol=1e-4, atol=1e-6)
        assert (alpha > 0) == (cond > 0)


def test_alpha_below_one_when_the_bound_says_so():
    # the new learner is much better on graph 0 and worse on graph 1: the minimiser is interior
    H = np.array([-10.0, -2.0])
    h = np.array([-2.0, -9.0])
    alpha, lb, cond = holder_alpha_step(H, h, 1.0)
    assert cond > 0 and 0 < alpha < 1
    lh = lambda a: np.log(np.exp(-((1 - a) * H + a * h)).sum())  # noqa: E731
    assert lb < min(lh(0.0), lh(1.0))
    np.testing.assert_allclose(alpha, (8 + np.log(8 / 7)) / 15, rtol=1e-10)   # root of 8 e^(10−8α) = 7 e^(2+7α)
    # better everywhere: α = 1; worse everywhere: (29) fails, α = 0 and the bound is unchanged
    assert holder_alpha_step(H, H + 1, 1.0)[0] == 1.0
    a0, lb0, c0 = holder_alpha_step(H, H - 1, 1.0)
    assert a0 == 0.0 and c0 < 0 and np.isclose(lb0, lh(0.0))
    # on [lower, upper]: the ends when the minimiser lies outside, the same root when inside
    assert holder_alpha_step(H, H + 1, 1.0, 0.0, 0.5)[0] == 0.5
    a_lo, lb_lo, _ = holder_alpha_step(H, H - 1, 1.0, 0.25, 0.5)       # the bound rises: α at `lower`
    assert a_lo == 0.25
    np.testing.assert_allclose(lb_lo, np.log(np.exp(-(H - 0.25)).sum()), rtol=1e-12)
    np.testing.assert_allclose(holder_alpha_step(H, h, 1.0, 0.1, 0.9)[0], alpha, rtol=1e-10)
    assert holder_alpha_step(H, h, 1.0, 0.0, 0.3)[0] == 0.3
    with pytest.raises(ValueError, match="lower"):
        holder_alpha_step(H, h, 1.0, 0.6, 0.5)


def test_random_feature_subsets_are_drawn_without_repetition():
    rng = np.random.default_rng(15)
    X, Y = dcrf(rng, 4, T=3)            # D = 5 node features: subsets of 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=two_level_chain_trees(), feature_subsets=10, n_rounds=1, cg_iterations=1,
                          random_state=0).fit(X, Y)
    subs = ada.feature_subsets_
    assert len(subs) == 10 and len({tuple(s) for s in subs}) == 10       # all C(5, 3) = 10, none twice
    assert all(len(set(s.tolist())) == len(s) == 3 for s in subs)          # no column twice in a subset
    with pytest.raises(ValueError, match="distinct subsets"):
        AdaBoostMRF(trees=two_level_chain_trees(), feature_subsets=11).fit(X, Y)


@pytest.mark.parametrize("warm_start", ["learner", "ensemble", "fresh"])
def test_bound_plus_l2_criterion_and_warm_starts(warm_start):
    # criterion="bound+l2" (an earlier behaviour): J non-increasing outside cover rounds, α ∈ [0, max_alpha],
    # Σα = 1; L_H is still logged
    rng = np.random.default_rng(16)
    X, Y = dcrf(rng, 8, T=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=4, cg_iterations=2, tol=0.0, beta=0.1,
                          criterion="bound+l2", warm_start=warm_start).fit(X, Y)
        bound = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=4, cg_iterations=2, tol=0.0,
                            warm_start=warm_start).fit(X, Y)
    J = np.array(ada.objective_)
    cover = np.array([r["cover_round"] for r in ada.rounds_ if r["accepted"]])
    assert np.all((np.diff(J) <= 1e-9 * np.abs(J[:-1]))[~cover[1:]]) and len(ada.bound_) == len(J)
    np.testing.assert_allclose(ada.alphas_.sum(), 1.0, rtol=1e-12)
    _check_rounds(bound, 0.4)
    assert bound.objective_ == bound.bound_


def _covered(ada, X):
    """Packed edge masks: the union of the kept learners' trees, and of all candidate trees."""
    batch = check_graphs(X)
    masks = ada._tree_masks(X, batch, "random" if ada.trees is None else ada.trees, ada._tree_seed)
    kept = np.zeros(batch.edges.shape[0], bool)
    for c in set(ada.learner_trees_.tolist()):
        kept |= masks[c]
    return kept, np.any(masks, axis=0)


@pytest.mark.parametrize("case", ["dcrf", "grid"])
def test_sequential_forest_covers_every_clique(case):
    # no single candidate tree covers these graphs: the forest keeps ≥ 2 distinct trees with α > 0,
    # covers every edge some candidate holds (nodes are in every spanning forest), and every such edge
    # keeps the cover floor
    rng = np.random.default_rng(21)
    if case == "dcrf":
        X, Y = dcrf(rng, 10, T=5)
        kw, floor = dict(trees=two_level_chain_trees()), 0.4
    else:
        X = [(rng.normal(size=(9, 2)), grid_graph(3, 3)) for _ in range(6)]
        Y = [rng.integers(0, 2, 9) for _ in range(6)]
        kw, floor = dict(n_trees=3, random_state=0), 0.8 / 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(n_rounds=8, cg_iterations=2, **kw).fit(X, Y)
    _check_rounds(ada, floor)
    kept, coverable = _covered(ada, X)
    assert len(set(ada.learner_trees_.tolist())) >= 2 and np.all(ada.alphas_ > 0)
    assert np.array_equal(kept, coverable)
    assert ada.rounds_[-1]["min_cover"] >= floor * (1 - 1e-12)
    # the weights per tree are the sums of the kept learners' α
    omega = np.bincount(ada.learner_trees_, weights=ada.alphas_, minlength=len(ada.rounds_[-1]["tree_weights"]))
    np.testing.assert_allclose(omega, ada.rounds_[-1]["tree_weights"], rtol=1e-12)
    if case == "dcrf":
        assert ada.rounds_[1]["cover_round"] and ada.rounds_[1]["tree"] != ada.rounds_[0]["tree"]


def test_no_round_wipes_the_earlier_learners():
    # α ≤ max_alpha < 1 in every round after the first: every accepted learner is kept with α > 0
    rng = np.random.default_rng(22)
    X, Y = dcrf(rng, 8, T=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ada = AdaBoostMRF(trees=two_level_chain_trees(), n_rounds=6, cg_iterations=3, tol=0.0, max_alpha=0.3,
                          cover_floor=0.1).fit(X, Y)
    _check_rounds(ada, 0.1)
    assert all(r["alpha"] <= 0.3 for r in ada.rounds_[1:])
    assert len(ada.alphas_) == sum(r["accepted"] for r in ada.rounds_)


def test_sequential_with_more_trees_than_the_cover_tracks():
    rng = np.random.default_rng(23)
    X = [(rng.normal(size=(9, 2)), grid_graph(3, 3)) for _ in range(2)]
    Y = [rng.integers(0, 2, 9) for _ in range(2)]
    with pytest.raises(ValueError, match="at most 16"):
        AdaBoostMRF(n_trees=17, n_rounds=1, random_state=0).fit(X, Y)

