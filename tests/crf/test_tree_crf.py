"""TreeCRF: gradient checks, brute-force oracle agreement, forests, estimator contract, bad trees."""
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import TreeCRF
from structlearn.crf.tree import check_parents, parents_from_ids
from structlearn.crf.objectives import TreeCLL
from structlearn.crf.features import AttributeVocabulary, build_state_features
from structlearn.crf._tree_potentials import TreeBatch, TreeFeatureModel
from tests.oracles.tree import tree_oracle

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

LABELS = ("A", "B", "C")


def random_parents(rng, T, shape="random"):
    """Parent indices of a random tree of T nodes ("random", "deep" = chain, "star"), nodes shuffled."""
    if shape == "deep":
        base = [-1] + list(range(T - 1))
    elif shape == "star":
        base = [-1] + [0] * (T - 1)
    else:
        base = [-1] + [int(rng.integers(0, i)) for i in range(1, T)]
    perm = rng.permutation(T)  # old node i becomes node perm[i]
    out = [0] * T
    for i, p in enumerate(base):
        out[perm[i]] = -1 if p < 0 else int(perm[p])
    return out


def toy_trees(n=30, seed=0, max_nodes=6, shapes=("random", "deep", "star")):
    """Trees whose node label depends on a word attribute and on the parent's label."""
    rng = np.random.default_rng(seed)
    X, y, P, E = [], [], [], []
    for b in range(n):
        T = int(rng.integers(1, max_nodes + 1))
        par = random_parents(rng, T, shapes[b % len(shapes)])
        lab = [None] * T
        order = [r for r in range(T) if par[r] < 0]
        while order:  # labels top-down
            n_ = order.pop()
            p = par[n_]
            lab[n_] = int(rng.integers(0, 3)) if p < 0 or rng.random() < 0.3 else (lab[p] + 1) % 3
            order.extend(c for c in range(T) if par[c] == n_)
        X.append([{"w": f"w{lab[t]}{int(rng.integers(0, 2))}" if rng.random() < 0.8 else "unk",
                   "bias": 1.0, "num": float(rng.normal())} for t in range(T)])
        y.append([LABELS[k] for k in lab])
        P.append(par)
        E.append([f"rel{int(rng.integers(0, 2))}" for _ in range(T)])
    return X, y, P, E


def _batch(X, P, E=None, vocab=None, evocab=None, grow=True):
    vocab = vocab if vocab is not None else AttributeVocabulary()
    nodes = vocab.encode(X, grow=grow)
    local = np.concatenate([np.asarray(p, np.int64) for p in P])
    edges = None
    if E is not None:
        evocab = evocab if evocab is not None else AttributeVocabulary()
        items = [[() if p < 0 else (e,) for e, p in zip(es, ps)] for es, ps in zip(E, P)]
        edges = evocab.encode(items, grow=grow)
    return TreeBatch(nodes, local, edges), vocab, evocab


def _objective(X, y, P, E=None, c2=0.5, c1=0.0, partial=False, forbidden=None, forbidden_root=None):
    batch, vocab, evocab = _batch(X, P, E)
    index = {c: i for i, c in enumerate(LABELS)}
    yy = np.array([index[l] for s in y for l in s])
    K = len(LABELS)
    attr_ptr, feat_label = build_state_features(batch.nodes, yy, len(vocab), K)
    eptr = epair = None
    if E is not None:
        pair = np.where(batch.gparent >= 0, yy * K + yy[np.maximum(batch.gparent, 0)], 0)
        eptr, epair = build_state_features(batch.edges, pair, len(evocab), K * K, all_possible_states=True)
    model = TreeFeatureModel(attr_ptr, feat_label, K, np.ones((K, K), bool), eptr, epair, forbidden,
                             forbidden_root)
    allowed = None
    if partial:
        allowed = np.random.default_rng(1).random((batch.n_items, K)) < 0.5
        allowed[np.arange(batch.n_items), yy] = True
    return model, TreeCLL(model, batch, yy, c2=c2, c1=c1, allowed=allowed), batch, yy


def _random_w(model, seed=0, scale=0.7):
    w = np.random.default_rng(seed).normal(scale=scale, size=model.n_params) * model.free_mask()
    w[w == 0] = 0.0
    return w


# ---------------------------------------------------------------------------------------------------
# objective: finite differences and brute force
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("edges, c2, c1, partial", [(False, 0.5, 0.0, False), (True, 0.5, 0.0, False),
                                                    (True, 0.0, 0.3, False), (False, 0.3, 0.0, True),
                                                    (True, 0.2, 0.1, True)])
def test_gradient_matches_finite_differences(edges, c2, c1, partial):
    X, y, P, E = toy_trees(12)
    forb = np.zeros((3, 3), bool)
    forb[2, 2] = True  # C under C never happens in the data... make sure it does not: drop such trees
    keep = [b for b in range(len(X))
            if not any(y[b][t] == "C" and P[b][t] >= 0 and y[b][P[b][t]] == "C" for t in range(len(X[b])))]
    X, y, P, E = ([s[b] for b in keep] for s in (X, y, P, E))
    model, obj, _, _ = _objective(X, y, P, E if edges else None, c2=c2, c1=c1, partial=partial,
                                  forbidden=forb)
    w = _random_w(model)
    g = np.empty_like(w)
    obj(w, g)
    assert np.isfinite(g).all()
    h = 1e-6
    free = np.flatnonzero(model.free_mask())
    num = np.empty(free.size)
    for q, i in enumerate(free):
        e = np.zeros_like(w)
        e[i] = h
        num[q] = (obj(w + e) - obj(w - e)) / (2 * h)
    np.testing.assert_allclose(g[free], num, rtol=1e-5, atol=1e-6)
    assert not g[~model.free_mask()].any()


def _oracle_potentials(crf, items, parents, edge_attrs=None):
    """unary (T, K), edge (T, K, K), root (K,) computed in plain Python from the public weight dicts."""
    cls = crf.classes_
    K = len(cls)
    state, edge, eattr, root = (crf.state_features_, crf.edge_features_, crf.edge_attribute_features_,
                                crf.root_features_)
    T = len(items)
    unary = np.zeros((T, K))
    for t, item in enumerate(items):
        for a, v in item.items():
            name, val = (f"{a}:{v}", 1.0) if isinstance(v, str) else (a, float(v))
            for k, c in enumerate(cls):
                unary[t, k] += val * state.get((name, c), 0.0)
    e = np.zeros((T, K, K))
    for t in range(T):
        for i, a in enumerate(cls):
            for j, b in enumerate(cls):
                e[t, i, j] = edge.get((a, b), 0.0)
                if edge_attrs is not None and parents[t] >= 0:
                    e[t, i, j] += eattr.get((edge_attrs[t], a, b), 0.0)
    return unary, e, np.array([root[c] for c in cls])


@pytest.fixture(scope="module")
def fitted():
    X, y, P, E = toy_trees(40, seed=3)
    crf = TreeCRF(c2=0.1, max_iterations=40, forbidden_edges=[("C", "C"), ("B", "<root>")],
                  all_possible_edges=True)
    keep = [b for b in range(len(X))
            if not any(y[b][t] == "C" and P[b][t] >= 0 and y[b][P[b][t]] == "C" for t in range(len(X[b])))
            and y[b][P[b].index(-1)] != "B"]
    X, y, P, E = ([s[b] for b in keep] for s in (X, y, P, E))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(X, y, parents=P, edge_attributes=E)
    crf.coef_ = _random_w(crf.model_, seed=5, scale=1.0)  # random weights: no ties, no trained structure
    return crf, X, y, P, E


def test_outputs_agree_with_brute_force(fitted):
    crf, X, y, P, E = fitted
    cls = crf.classes_
    sub = slice(0, 12)
    kw = dict(parents=P[sub], edge_attributes=E[sub])
    pred = crf.predict(X[sub], **kw)
    node, edge = crf.predict_marginals(X[sub], output="array", edges=True, **kw)
    kb = crf.kbest(X[sub], k=4, **kw)
    proba = crf.predict_proba_sequence(X[sub], **kw)
    seqp = crf.sequence_probability(X[sub], y[sub], **kw)
    for b in range(12):
        u, e, r = _oracle_potentials(crf, X[b], P[b], E[b])
        o = tree_oracle(u, e, P[b], r)
        assert np.isfinite(o["log_z"])
        best = o["ranked"][0][1]
        assert pred[b] == [cls[k] for k in best]
        np.testing.assert_allclose(node[b], o["unary"], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(edge[b], o["edge"], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(proba[b], np.exp(o["max"] - o["log_z"]), rtol=1e-10)
        ranked = o["ranked"][:4]
        assert [lab for lab, _ in kb[b]] == [[cls[k] for k in yy] for _, yy in ranked]
        np.testing.assert_allclose([p for _, p in kb[b]], [np.exp(s - o["log_z"]) for s, _ in ranked],
                                   rtol=1e-10)
        gold = tuple(cls.index(l) for l in y[b])
        np.testing.assert_allclose(seqp[b], o["probs"][gold], rtol=1e-10, atol=1e-300)
        # forbidden pairs (C under C, B at the root) get probability 0 and never NaN
        assert not np.isnan(edge[b]).any()
        assert np.all(edge[b][:, 2, 2] == 0.0)
        root = P[b].index(-1)
        assert node[b][root, cls.index("B")] == 0.0


def test_objective_equals_brute_force_likelihood():
    X, y, P, E = toy_trees(15, seed=2)
    model, obj, batch, yy = _objective(X, y, P, E, c2=0.0)
    w = _random_w(model, seed=1)
    tree = model.structure(w, batch)
    total = 0.0
    for b in range(len(X)):
        sl = slice(batch.offsets[b], batch.offsets[b + 1])
        o = tree_oracle(tree.unary[sl], tree.edge[sl], P[b], tree.root_score)
        total -= np.log(o["probs"][tuple(yy[sl])])
    np.testing.assert_allclose(obj(w), total, rtol=1e-10)


@given(seed=st.integers(0, 10_000), n=st.integers(1, 4), edges=st.booleans(),
       shape=st.sampled_from(["random", "deep", "star"]), forbid=st.booleans())
def test_likelihood_and_marginals_match_brute_force_on_random_trees(seed, n, edges, shape, forbid):
    X, y, P, E = toy_trees(n, seed=seed, max_nodes=5, shapes=(shape,))
    forb = None
    if forbid:  # forbid one pair the data does not use: -inf edge potentials, never NaN
        index = {c: i for i, c in enumerate(LABELS)}
        used = {(index[y[b][t]], index[y[b][P[b][t]]]) for b in range(n) for t in range(len(X[b]))
                if P[b][t] >= 0}
        free = [(i, j) for i in range(3) for j in range(3) if (i, j) not in used]
        if free:
            forb = np.zeros((3, 3), bool)
            forb[free[seed % len(free)]] = True
    model, obj, batch, yy = _objective(X, y, P, E if edges else None, c2=0.0, forbidden=forb)
    w = _random_w(model, seed=seed, scale=1.5)
    tree = model.structure(w, batch)
    m = tree.marginals(edge="full")
    total = 0.0
    for b in range(n):
        sl = slice(batch.offsets[b], batch.offsets[b + 1])
        edge = tree.edge[sl] if tree.edge.ndim == 3 else tree.edge
        o = tree_oracle(tree.unary[sl], edge, P[b], tree.root_score)
        total -= np.log(o["probs"][tuple(yy[sl])])
        np.testing.assert_allclose(m.unary[sl], o["unary"], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(m.edge[sl], o["edge"], rtol=1e-10, atol=1e-13)
    assert not np.isnan(m.edge).any()
    np.testing.assert_allclose(obj(w), total, rtol=1e-10)


def test_constrained_prediction_is_best_consistent_labeling(fitted):
    crf, X, y, P, E = fitted
    cls = crf.classes_
    cons = [{0: "A"}, {-1: ["A", "C"]}, None, {0: "C", 1: "A"} if len(X[3]) > 1 else {0: "C"}]
    pred = crf.predict(X[:4], cons, parents=P[:4], edge_attributes=E[:4])
    for b in range(4):
        u, e, r = _oracle_potentials(crf, X[b], P[b], E[b])
        o = tree_oracle(u, e, P[b], r)
        T = len(X[b])
        ok = [(s, lab) for s, lab in o["ranked"]
              if all(cls[lab[t % T]] in ([v] if isinstance(v, str) else v)
                     for t, v in (cons[b] or {}).items())]
        assert pred[b] == [cls[k] for k in ok[0][1]]
    # a mask with no allowed label at a node: a clear error, not NaN
    mask = np.ones((sum(map(len, X[:2])), 3), bool)
    mask[0] = False
    with pytest.raises(ValueError, match="no labeling"):
        crf.predict(X[:2], mask, parents=P[:2], edge_attributes=E[:2])
    # probability of the constrained structure's marginals still sums to one per node
    m = crf.predict_marginals(X[:4], parents=P[:4], edge_attributes=E[:4], constraints=cons,
                              output="array")
    for a in m:
        np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-12)


def test_node_order_does_not_matter(fitted):
    crf, X, y, P, E = fitted
    rng = np.random.default_rng(0)
    for b in range(6):
        T = len(X[b])
        perm = rng.permutation(T)  # new node q is old node perm[q]
        inv = np.argsort(perm)
        Xp = [X[b][i] for i in perm]
        Ep = [E[b][i] for i in perm]
        Pp = [-1 if P[b][i] < 0 else int(inv[P[b][i]]) for i in perm]
        a = crf.predict_marginals([X[b]], parents=[P[b]], edge_attributes=[E[b]], output="array")[0]
        c = crf.predict_marginals([Xp], parents=[Pp], edge_attributes=[Ep], output="array")[0]
        np.testing.assert_allclose(c, a[perm], rtol=1e-10, atol=1e-14)
        assert crf.predict([Xp], parents=[Pp], edge_attributes=[Ep])[0] == \
            [crf.predict([X[b]], parents=[P[b]], edge_attributes=[E[b]])[0][i] for i in perm]


def test_forest_equals_independent_trees_and_brute_force(fitted):
    crf, X, y, P, E = fitted
    forest = clone(crf).set_params(allow_forest=True)
    for attr in ("classes_", "_label_index", "attributes_", "edge_attributes_", "_vocab", "_evocab",
                 "model_", "coef_"):
        setattr(forest, attr, getattr(crf, attr))
    # forest f = trees 2f, 2f+1 concatenated (second tree's nodes first, to mix the order)
    Xf, Pf, Ef = [], [], []
    for f in range(3):
        a, b = 2 * f, 2 * f + 1
        Xf.append(X[b] + X[a])
        Ef.append(E[b] + E[a])
        Pf.append(P[b] + [p + len(X[b]) if p >= 0 else -1 for p in P[a]])
    with pytest.raises(ValueError, match="allow_forest"):
        crf.predict(Xf, parents=Pf, edge_attributes=Ef)
    pred = forest.predict(Xf, parents=Pf, edge_attributes=Ef)
    single = crf.predict(X[:6], parents=P[:6], edge_attributes=E[:6])
    node = forest.predict_marginals(Xf, parents=Pf, edge_attributes=Ef, output="array")
    kb = forest.kbest(Xf, k=5, parents=Pf, edge_attributes=Ef)
    proba = forest.predict_proba_sequence(Xf, parents=Pf, edge_attributes=Ef)
    cls = crf.classes_
    for f in range(3):
        assert pred[f] == single[2 * f + 1] + single[2 * f]
        u, e, r = _oracle_potentials(crf, Xf[f], Pf[f], Ef[f])
        o = tree_oracle(u, e, Pf[f], r)
        np.testing.assert_allclose(node[f], o["unary"], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(proba[f], np.exp(o["max"] - o["log_z"]), rtol=1e-10)
        ranked = o["ranked"][:5]
        np.testing.assert_allclose([p for _, p in kb[f]], [np.exp(s - o["log_z"]) for s, _ in ranked],
                                   rtol=1e-10)
        assert kb[f][0][0] == [cls[k] for k in ranked[0][1]]
    # training on forests works and equals training on the separate trees
    yf = [y[2 * f + 1] + y[2 * f] for f in range(3)]
    a = TreeCRF(c2=0.1, max_iterations=15, allow_forest=True).fit(Xf, yf, parents=Pf)
    b = TreeCRF(c2=0.1, max_iterations=15).fit([X[i] for i in (1, 0, 3, 2, 5, 4)],
                                               [y[i] for i in (1, 0, 3, 2, 5, 4)],
                                               parents=[P[i] for i in (1, 0, 3, 2, 5, 4)])
    np.testing.assert_allclose(a.training_log_[-1]["loss"], b.training_log_[-1]["loss"], rtol=1e-9)


def test_infeasible_and_extreme_potentials_never_nan():
    # every pair but (A under A) is forbidden: trees of several nodes can only be labelled all-A
    X, _, P, _ = toy_trees(10, seed=4, shapes=("deep", "star"))
    X = X + [[{"w": "w1"}], [{"w": "w2"}]]
    P = P + [[-1], [-1]]
    y = [["A"] * len(s) for s in X[:-2]] + [["B"], ["C"]]
    forb = [(a, b) for a in LABELS for b in LABELS if (a, b) != ("A", "A")]
    b0 = next(b for b in range(10) if len(X[b]) > 1)
    bad = [list(s) for s in y]
    bad[b0][P[b0].index(-1)] = "B"
    with pytest.raises(ValueError, match="forbidden"):
        TreeCRF(forbidden_edges=forb).fit(X, bad, parents=P)
    crf = TreeCRF(c2=1.0, max_iterations=20, forbidden_edges=forb).fit(X, y, parents=P)
    m = crf.predict_marginals(X, parents=P, output="array")
    for a, s in zip(m, X):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-12)
        if len(s) > 1:
            assert np.all(a[:, crf.classes_.index("A")] == 1.0)
    assert all(set(p) == {"A"} for p, s in zip(crf.predict(X, parents=P), X) if len(s) > 1)
    # huge weights: still finite probabilities, no NaN
    crf.coef_ = crf.coef_ * 1e6
    proba = crf.predict_proba_sequence(X, parents=P)
    assert np.isfinite(proba).all() and (proba <= 1 + 1e-12).all()
    for a in crf.predict_marginals(X, parents=P, output="array"):
        assert not np.isnan(a).any()


def test_deep_tree_no_recursion_limit():
    T = 3000
    X = [[{"w": f"w{t % 3}"} for t in range(T)]]
    y = [[LABELS[t % 3] for t in range(T)]]
    P = [[-1] + list(range(T - 1))]
    crf = TreeCRF(c2=0.1, max_iterations=30).fit(X, y, parents=P)
    assert crf.score(X, y, parents=P) > 0.99
    np.testing.assert_allclose(crf.predict_marginals(X, parents=P, output="array")[0].sum(1), 1.0,
                               rtol=1e-10)


# ---------------------------------------------------------------------------------------------------
# estimator
# ---------------------------------------------------------------------------------------------------
def test_fit_predict_and_outputs():
    X, y, P, E = toy_trees(60)
    crf = TreeCRF(c2=0.1, max_iterations=100).fit(X, y, parents=P, edge_attributes=E)
    assert crf.score(X, y, parents=P, edge_attributes=E) > 0.9
    assert set(crf.classes_) == set(LABELS)
    pred = crf.predict(X, parents=P, edge_attributes=E)
    assert [len(p) for p in pred] == [len(s) for s in X]
    marg = crf.predict_marginals(X, parents=P, edge_attributes=E)
    np.testing.assert_allclose([sum(d.values()) for s in marg for d in s], 1.0, rtol=1e-10)
    node, edge = crf.predict_marginals(X[:3], parents=P[:3], edge_attributes=E[:3], edges=True)
    for b in range(3):
        for t, d in enumerate(edge[b]):
            if P[b][t] < 0:
                assert d == {}
            else:
                np.testing.assert_allclose(sum(d.values()), 1.0, rtol=1e-10)
                np.testing.assert_allclose(sum(v for (c, _), v in d.items() if c == "A"), node[b][t]["A"],
                                           rtol=1e-10)
    kb = crf.kbest(X[:5], k=3, parents=P[:5], edge_attributes=E[:5])
    proba = crf.predict_proba_sequence(X[:5], parents=P[:5], edge_attributes=E[:5])
    for b in range(5):
        assert kb[b][0][0] == pred[b]
        np.testing.assert_allclose(kb[b][0][1], proba[b], rtol=1e-10)
    assert crf.n_iter_ >= 1 and crf.training_log_ and isinstance(crf.converged_, bool)
    assert all(len(k) == 3 for k in crf.edge_attribute_features_)
    assert set(crf.root_features_) == set(LABELS)
    assert crf.size_ > 0
    with pytest.raises(ValueError, match="edge_attributes"):
        crf.predict(X, parents=P)


def test_dev_set_logging_and_partial_labels():
    X, y, P, _ = toy_trees(30)
    crf = TreeCRF(c2=0.1, max_iterations=10).fit(X[:20], y[:20], X[20:], y[20:], parents=P[:20],
                                                  parents_dev=P[20:])
    assert "dev_accuracy" in crf.training_log_[-1]
    # partial labels that pin every node = supervised training
    N = sum(map(len, X[:20]))
    cls = []
    for s in y[:20]:
        for l in s:
            if l not in cls:
                cls.append(l)
    allowed = np.zeros((N, len(cls)), bool)
    allowed[np.arange(N), [cls.index(l) for s in y[:20] for l in s]] = True
    a = TreeCRF(c2=0.1, max_iterations=10).fit(X[:20], y[:20], parents=P[:20], allowed=allowed)
    b = TreeCRF(c2=0.1, max_iterations=10).fit(X[:20], y[:20], parents=P[:20])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("alg", ["ap", "pa", "arow", "l2sgd"])
def test_online_algorithms_learn(alg):
    X, y, P, E = toy_trees(60)
    crf = TreeCRF(algorithm=alg, max_iterations=8, random_state=0, calibration_samples=30)
    crf.fit(X, y, parents=P, edge_attributes=E)
    assert crf.score(X, y, parents=P, edge_attributes=E) > 0.85
    assert len(crf.training_log_) == crf.n_iter_


def test_estimator_contract_clone_pickle_save_load(tmp_path):
    X, y, P, E = toy_trees(40)
    crf = TreeCRF(c2=0.2, max_iterations=30, forbidden_edges=[("C", "C")])
    assert clone(crf).get_params() == crf.get_params()
    crf.set_params(c2=0.3)
    assert crf.c2 == 0.3
    with pytest.raises(NotFittedError):
        crf.predict(X, parents=P)
    X_copy = [[dict(d) for d in s] for s in X]
    P_copy = [list(p) for p in P]
    keep = [b for b in range(len(X))
            if not any(y[b][t] == "C" and P[b][t] >= 0 and y[b][P[b][t]] == "C" for t in range(len(X[b])))]
    X, y, P, E = ([s[b] for b in keep] for s in (X, y, P, E))
    X_copy = [X_copy[b] for b in keep]
    P_copy = [P_copy[b] for b in keep]
    crf.fit(X, y, parents=P, edge_attributes=E)
    assert X == X_copy and P == P_copy  # inputs not mutated
    pred = crf.predict(X, parents=P, edge_attributes=E)
    marg = crf.predict_marginals(X, parents=P, edge_attributes=E, output="array")
    assert pickle.loads(pickle.dumps(crf)).predict(X, parents=P, edge_attributes=E) == pred
    path = tmp_path / "tree.npz"
    crf.save(path)
    loaded = TreeCRF.load(path)
    assert loaded.predict(X, parents=P, edge_attributes=E) == pred
    for a, b in zip(loaded.predict_marginals(X, parents=P, edge_attributes=E, output="array"), marg):
        np.testing.assert_array_equal(a, b)
    assert loaded.get_params() == crf.get_params()
    assert loaded.edge_features_ == crf.edge_features_
    assert loaded.edge_features_[("C", "C")] == -np.inf
    assert clone(crf).fit(X, y, parents=P, edge_attributes=E).predict(X, parents=P,
                                                                      edge_attributes=E) == pred
    from structlearn import LinearChainCRF
    with pytest.raises(ValueError, match="tree-crf"):
        LinearChainCRF.load(path)


# ---------------------------------------------------------------------------------------------------
# bad trees and bad input
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("parents, match", [
    ([[1, 0, 0]], "no root"),
    ([[-1, 2, 1]], r"cycle through node \d \(parent chain"),
    ([[-1, 0, 3]], "out of range"),
    ([[-1, 0, -2]], "out of range"),
    ([[-1, 1, 0]], "node itself"),
    ([[-1, -1, 0]], "2 roots .*allow_forest=True"),
    ([[-1, None, 0]], r"None \(missing parent\)"),
    ([[-1, 0]], "3 nodes"),
    ([[-1, 0.0, 1.0]], "integer"),
    (None, "required"),
    ([[-1, 0, 0], [-1]], "2 entries but X has 1 trees"),
    ("abc", "list"),
])
def test_bad_trees_give_clear_errors(parents, match):
    X = [[{"a": 1.0}, {"b": 1.0}, {"a": 1.0}]]
    with pytest.raises(ValueError, match=match):
        TreeCRF().fit(X, [["A", "B", "A"]], parents=parents)


def test_bad_trees_at_prediction_and_helpers():
    X, y, P, _ = toy_trees(10)
    crf = TreeCRF(max_iterations=5).fit(X, y, parents=P)
    bad = [list(p) for p in P]
    b = next(i for i, p in enumerate(P) if len(p) >= 3)
    r = bad[b].index(-1)
    c = next(t for t in range(len(bad[b])) if t != r)
    bad[b][r] = c
    bad[b][c] = r
    with pytest.raises(ValueError, match=rf"`parents\[{b}\]`"):
        crf.predict(X, parents=bad)
    with pytest.raises(ValueError, match="cycle"):
        check_parents([[-1, 2, 3, 1]], np.array([4]))
    local, top = check_parents([[-1, 0, -1, 2]], np.array([4]), allow_forest=True)
    assert local.tolist() == [-1, 0, -1, 2] and top.tolist() == [0, 0, 2, 2]
    # node ids -> indices (CRFSuite-0.13 files), missing parents and duplicate ids
    assert [p.tolist() for p in parents_from_ids([[10, 11, 12]], [[11, "_", 11]])] == [[1, -1, 1]]
    with pytest.raises(ValueError, match="missing parent"):
        parents_from_ids([[0, 1]], [["_", 7]])
    with pytest.raises(ValueError, match="twice"):
        parents_from_ids([[0, 0]], [["_", 0]])
    with pytest.raises(ValueError, match="one entry per node"):
        TreeCRF(max_iterations=5).fit(X, y, parents=P, edge_attributes=[["x"]] * len(X))
    with pytest.raises(ValueError, match="forbidden_edges"):
        TreeCRF(forbidden_edges=[("A", "Q")]).fit(X, y, parents=P)
    with pytest.raises(ValueError, match="<root>"):
        TreeCRF(forbidden_edges=[("<root>", "A")]).fit(X, y, parents=P)
    with pytest.raises(ValueError, match="labels"):
        TreeCRF().fit(X, [s[:-1] for s in y], parents=P)
    with pytest.raises(ValueError, match="empty"):
        TreeCRF().fit([[]], [[]], parents=[[]])
    # empty trees are fine at prediction
    assert crf.predict([[], X[0]], parents=[[], P[0]])[0] == []
    np.testing.assert_allclose(crf.predict_proba_sequence([[]], parents=[[]]), [1.0])


def test_crfsuite013_tree_file_round_trip(tmp_path):
    from tests.conftest import require_data
    from structlearn.io import read_crfsuite_tree

    path = require_data("crfsuite013_format") / "test_tree_2.input"
    X, y, nodes, parents = read_crfsuite_tree(path)
    P = parents_from_ids(nodes, parents)
    assert all(sum(p < 0 for p in ps) == 1 for ps in P)
    crf = TreeCRF(c2=0.1, max_iterations=50).fit(X, y, parents=P)
    assert crf.score(X, y, parents=P) >= 0.9
    crf.save(tmp_path / "m.npz")
    assert TreeCRF.load(tmp_path / "m.npz").predict(X, parents=P) == crf.predict(X, parents=P)
