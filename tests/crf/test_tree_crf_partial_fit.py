"""``TreeCRF.partial_fit``: streaming epochs of the online trainers (l2sgd, ap, pa, arow) on trees.

What is pinned: a first call is one epoch of ``fit`` (bitwise, with edge attributes, forests and both
root-feature models), k calls on the same data k epochs; over 4 shards and 8 passes the trainers reach
the batch trainer's held-out node accuracy (within 0.02, 240 trees); node attributes, edge attributes, labels and
the three kinds of features grow with the stream and the weights follow them (every old parameter at
its new place); ``min_freq`` counts over the stream; errors leave the estimator unchanged; fit / load /
clone / pickle and prediction between calls.
"""
import pickle

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import TreeCRF
from structlearn.crf._tree_online import tree_index_in
from structlearn.crf.online_trainers import StreamState

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

ONLINE = ("l2sgd", "ap", "pa", "arow")
LABELS = "ABC"


def trees(n, seed=0, max_nodes=6, noise=0.2):
    """Random trees whose node label is the parent's + 1 (mod 3) with probability 0.7 (else uniform);
    node attribute a word of the label (a uniform word with probability ``noise``) and a bias, edge
    attribute 'near'/'far' (relation to the parent, noisy correlate of the rule)."""
    rng = np.random.default_rng(seed)
    X, y, P, E = [], [], [], []
    for _ in range(n):
        T = int(rng.integers(1, max_nodes + 1))
        par = [-1] + [int(rng.integers(0, i)) for i in range(1, T)]
        lab, rel = [0] * T, ["root"] * T
        for t in range(T):
            follow = par[t] >= 0 and rng.random() < 0.7
            lab[t] = (lab[par[t]] + 1) % 3 if follow else int(rng.integers(3))
            if par[t] >= 0:
                rel[t] = "near" if follow == (rng.random() < 0.8) else "far"
        X.append([{"w": f"{LABELS[k] if rng.random() > noise else LABELS[int(rng.integers(3))]}"
                        f"{int(rng.integers(3))}", "bias": 1.0} for k in lab])
        y.append([LABELS[k] for k in lab])
        P.append(par)
        E.append(rel)
    return X, y, P, E


def named_weights(crf, w=None, model=None):
    """Every parameter of the model by name: ('s', attribute, label), ('e', child, parent),
    ('x', edge attribute, child, parent), ('r', label) -> weight (zero weights included)."""
    m = crf.model_ if model is None else model
    w = crf.coef_ if w is None else w
    cls, K = crf.classes_, m.n_labels
    s, e, x, r = m.split(w)
    out = {}
    attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
    for f, (a, k) in enumerate(zip(attrs, m.feat_label)):
        out[("s", crf.attributes_[a], cls[k])] = s[f]
    for i in range(K):
        for j in range(K):
            out[("e", cls[i], cls[j])] = e[i, j]
        out[("r", cls[i])] = r[i]
    eattrs = np.repeat(np.arange(len(m.edge_attr_ptr) - 1), np.diff(m.edge_attr_ptr))
    for f, (a, p) in enumerate(zip(eattrs, m.edge_feat_pair)):
        out[("x", crf.edge_attributes_[a], cls[p // K], cls[p % K])] = x[f]
    return out


# ------------------------------------------------------------------------------------------------------
# one epoch = fit's epoch
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ONLINE)
@pytest.mark.parametrize("root_features, edges", [(True, True), (False, False)])
def test_first_call_is_one_epoch_of_fit(algorithm, root_features, edges):
    # the same features (min_freq counted on the batch), the same draws of random_state (l2sgd: the
    # calibration sample, then the epoch's order), the same per-tree steps: bitwise equal
    X, y, P, E = trees(40, seed=1)
    E = E if edges else None
    kw = dict(algorithm=algorithm, random_state=3, root_features=root_features, min_freq=2,
              calibration_samples=20)
    batch = TreeCRF(max_iterations=1, **kw).fit(X, y, parents=P, edge_attributes=E)
    stream = TreeCRF(**kw).partial_fit(X, y, parents=P, edge_attributes=E)
    np.testing.assert_array_equal(stream.coef_, batch.coef_)
    assert stream.classes_ == batch.classes_ and stream.attributes_ == batch.attributes_
    assert stream.edge_attributes_ == batch.edge_attributes_
    assert named_weights(stream) == named_weights(batch)
    assert stream.training_log_[0]["loss"] == batch.training_log_[0]["loss"]
    assert stream.n_iter_ == 1 and stream.training_log_[0]["n_sequences"] == len(X)


@pytest.mark.parametrize("algorithm", ["l2sgd", "pa"])
def test_first_call_on_forests_is_one_epoch_of_fit(algorithm):
    # forests are split into one tree per root, as fit does; λ of l2sgd counts those trees
    X, y, P, _ = trees(30, seed=2)
    X = [X[i] + X[i + 1] for i in range(0, 30, 2)]
    y = [y[i] + y[i + 1] for i in range(0, 30, 2)]
    P = [P[i] + [p + len(P[i]) if p >= 0 else -1 for p in P[i + 1]] for i in range(0, 30, 2)]
    kw = dict(algorithm=algorithm, allow_forest=True, random_state=0, calibration_samples=10)
    batch = TreeCRF(max_iterations=1, **kw).fit(X, y, parents=P)
    stream = TreeCRF(**kw).partial_fit(X, y, parents=P)
    np.testing.assert_array_equal(stream.coef_, batch.coef_)
    assert stream.training_log_[0]["n_sequences"] == 30


@pytest.mark.parametrize("algorithm", ONLINE)
def test_k_calls_on_the_same_data_are_k_epochs_of_fit(algorithm):
    # the stream's generator continues across calls as fit's across epochs; l2sgd needs fit's λ,
    # 2·c2 / (number of trees), given as n_sequences
    X, y, P, E = trees(30, seed=4)
    kw = dict(algorithm=algorithm, random_state=5, epsilon=0.0, calibration_samples=15)
    batch = TreeCRF(max_iterations=3, period=100, **kw).fit(X, y, parents=P, edge_attributes=E)
    stream = TreeCRF(**kw)
    for _ in range(3):
        stream.partial_fit(X, y, parents=P, edge_attributes=E, n_sequences=len(X))
    np.testing.assert_array_equal(stream.coef_, batch.coef_)
    assert stream.n_iter_ == 3 and len(stream.training_log_) == 3


def test_l2sgd_lambda_counts_the_trees_seen():
    X, y, P, _ = trees(30)
    crf = TreeCRF(algorithm="l2sgd", c2=0.5, random_state=0, calibration_samples=10)
    crf.partial_fit(X[:10], y[:10], parents=P[:10]).partial_fit(X[10:], y[10:], parents=P[10:])
    assert [e["lambda"] for e in crf.training_log_] == [2 * 0.5 / 10, 2 * 0.5 / 30]
    assert crf.training_log_[0]["eta0"] == crf.training_log_[1]["eta0"]  # calibrated once
    crf.partial_fit(X[:10], y[:10], parents=P[:10], n_sequences=30)
    assert crf.training_log_[-1]["lambda"] == 2 * 0.5 / 30


# ------------------------------------------------------------------------------------------------------
# convergence over shards
# ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def task():
    return trees(240, seed=10), trees(200, seed=11)


@pytest.mark.parametrize("algorithm", ONLINE)
def test_shards_reach_the_batch_trainer(task, algorithm):
    # node accuracy on 200 held-out trees, fit with 8 epochs vs 8 passes over 4 shards (measured,
    # random_state 0 / 1 / 2: l2sgd .870/.897, .891/.901, .891/.902; ap .897/.901, .902/.897,
    # .894/.902; pa .902/.901, .908/.901, .896/.902; arow .799/.866, .861/.857, .860/.875 — AROW's
    # order sensitivity; on 120 trees its gap reached 0.07 either way)
    (X, y, P, E), (Xt, yt, Pt, Et) = task
    kw = dict(algorithm=algorithm, c2=1.0, random_state=0, calibration_samples=30)
    batch = TreeCRF(max_iterations=8, **kw).fit(X, y, parents=P, edge_attributes=E)
    stream = TreeCRF(**kw)
    shards = np.array_split(np.arange(len(X)), 4)
    for _ in range(8):
        for s in shards:
            stream.partial_fit([X[i] for i in s], [y[i] for i in s], parents=[P[i] for i in s],
                               edge_attributes=[E[i] for i in s], n_sequences=len(X))
    assert stream.n_iter_ == 32
    acc = stream.score(Xt, yt, parents=Pt, edge_attributes=Et)
    assert acc >= batch.score(Xt, yt, parents=Pt, edge_attributes=Et) - 0.02
    assert acc > 0.84


# ------------------------------------------------------------------------------------------------------
# growth
# ------------------------------------------------------------------------------------------------------
def test_labels_attributes_edge_attributes_and_features_grow():
    X1 = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]]
    y1 = [["A", "B"], ["B", "A"]]
    P1 = [[-1, 0], [-1, 0]]
    E1 = [["", "dep"], ["", "dep"]]
    X2 = [[{"w": "c"}, {"w": "a"}, {"v": "new"}]]
    y2 = [["C", "A", "C"]]
    P2 = [[-1, 0, 1]]
    E2 = [["", "mod", "dep"]]
    crf = TreeCRF(algorithm="arow", random_state=0)
    crf.partial_fit(X1, y1, parents=P1, edge_attributes=E1)
    assert crf.classes_ == ["A", "B"] and crf.attributes_ == ["w:a", "w:b"]
    assert crf.edge_attributes_ == ["dep"]
    before = named_weights(crf)
    crf.partial_fit(X2, y2, parents=P2, edge_attributes=E2)
    assert crf.classes_ == ["A", "B", "C"]
    assert crf.attributes_ == ["w:a", "w:b", "w:c", "v:new"] and crf.edge_attributes_ == ["dep", "mod"]
    now = named_weights(crf)
    assert {k for k in now if k[0] == "s"} == {("s", "w:a", "A"), ("s", "w:b", "B"), ("s", "w:c", "C"),
                                               ("s", "v:new", "C")}
    assert {k for k in now if k[0] == "x"} == {("x", "dep", "B", "A"), ("x", "dep", "A", "B"),
                                               ("x", "mod", "A", "C"), ("x", "dep", "C", "A")}
    assert crf.model_.edge_features[2, 0] and crf.model_.edge_features[0, 2]   # (C, A) and (A, C)
    # AROW's update on X2 touches only the features of X2's gold and predicted ([A, A, B]) labelings:
    # the others moved unchanged (test_weights_follow_the_grown_layout checks every parameter)
    for k in [("s", "w:b", "B"), ("x", "dep", "A", "B"), ("e", "A", "B")]:
        assert now[k] == before[k] != 0.0
    for _ in range(5):
        crf.partial_fit(X1 + X2, y1 + y2, parents=P1 + P2, edge_attributes=E1 + E2)
    assert crf.predict(X2, parents=P2, edge_attributes=E2) == y2
    assert crf.predict(X1, parents=P1, edge_attributes=E1) == y1


def test_weights_follow_the_grown_layout():
    # tree_index_in + StreamState.remap: every old parameter keeps its value at its new place
    X, y, P, E = trees(20, seed=6)
    crf = TreeCRF(algorithm="pa", random_state=0).partial_fit(
        X[:10], [[c for c in s] for s in y[:10]], parents=P[:10], edge_attributes=E[:10])
    old = (crf.model_, list(crf.classes_), list(crf.attributes_), list(crf.edge_attributes_))
    y2 = [[{"A": "D"}.get(c, c) for c in s] for s in y[10:]]             # a new label D
    X2 = [[{**it, "z": "new"} for it in s] for s in X[10:]]             # a new attribute
    E2 = [[r + "2" for r in s] for s in E[10:]]                          # new edge attributes
    crf.partial_fit(X2, y2, parents=P[10:], edge_attributes=E2)
    m1, m2 = old[0], crf.model_
    assert m2.n_labels == 4 and m2.n_params > m1.n_params
    w1 = np.arange(1.0, m1.n_params + 1)
    st = StreamState("arow", m1.n_params, np.random.RandomState(0), variance=2.0)
    st.w[:] = w1
    st.sigma[:] = 0.5
    st.remap(tree_index_in(m1, m2), m2.n_params, variance=2.0)

    class View:  # the old estimator's names around the old model
        classes_, attributes_, edge_attributes_ = old[1], old[2], old[3]

    class Now:
        classes_, attributes_, edge_attributes_ = crf.classes_, crf.attributes_, crf.edge_attributes_

    before = named_weights(View, w1, m1)
    after = named_weights(Now, st.w, m2)
    assert {k: after[k] for k in before} == before
    assert all(v == 0.0 for k, v in after.items() if k not in before)
    assert np.sum(st.sigma == 0.5) == m1.n_params and np.sum(st.sigma == 2.0) == m2.n_params - m1.n_params


def test_min_freq_counts_over_the_stream():
    crf = TreeCRF(algorithm="ap", min_freq=2, random_state=0)

    def features():
        return {k for k in named_weights(crf) if k[0] in "sx"}

    crf.partial_fit([[{"w": "x"}, {"w": "y"}]], [["A", "B"]], parents=[[-1, 0]], edge_attributes=[["", "r"]])
    assert features() == set()
    crf.partial_fit([[{"w": "x"}, {"w": "z"}, {"w": "u"}]], [["A", "B", "B"]], parents=[[-1, 0, 1]],
                    edge_attributes=[["", "r", "r"]])
    assert features() == {("s", "w:x", "A"), ("x", "r", "B", "A")}   # seen twice; (r, B under B) once
    crf.partial_fit([[{"w": "y"}, {"w": "q"}]], [["B", "C"]], parents=[[-1, 0]], edge_attributes=[["", "r"]])
    assert features() == {("s", "w:x", "A"), ("s", "w:y", "B"), ("x", "r", "B", "A")}
    # a third label: the pending count of (r, B under B) follows the renumbered pair index
    crf.partial_fit([[{"w": "k"}, {"w": "q"}, {"w": "m"}]], [["B", "C", "B"]], parents=[[-1, 0, 0]],
                    edge_attributes=[["", "r", "r"]])
    assert features() == {("s", "w:x", "A"), ("s", "w:y", "B"), ("s", "w:q", "C"), ("x", "r", "B", "A"),
                          ("x", "r", "C", "B"), ("x", "r", "B", "B")}


def test_all_possible_states_and_edges_grow():
    crf = TreeCRF(algorithm="pa", all_possible_states=True, all_possible_edges=True, random_state=0)
    crf.partial_fit([[{"w": "x"}]], [["A"]], parents=[[-1]])
    crf.partial_fit([[{"w": "y"}, {"w": "x"}]], [["B", "B"]], parents=[[-1, 0]])
    assert {k for k in named_weights(crf) if k[0] == "s"} == {("s", a, k) for a in ("w:x", "w:y") for k in "AB"}
    assert crf.model_.edge_features.all() and crf.model_.edge_features.shape == (2, 2)


def test_forbidden_edges_apply_once_their_label_appears():
    crf = TreeCRF(algorithm="ap", forbidden_edges=[("A", "C"), ("C", "<root>")], random_state=0)
    crf.partial_fit([[{"w": "a"}]], [["A"]], parents=[[-1]])
    crf.partial_fit([[{"w": "b"}, {"w": "c"}]], [["B", "C"]], parents=[[-1, 0]])
    assert crf.edge_features_[("A", "C")] == -np.inf and crf.root_features_["C"] == -np.inf
    with pytest.raises(ValueError, match="labelled 'A' under a parent labelled 'C'.*forbids"):
        crf.partial_fit([[{"w": "b"}, {"w": "c"}, {"w": "a"}]], [["B", "C", "A"]], parents=[[-1, 0, 1]])
    with pytest.raises(ValueError, match="label 'C' at its root.*forbids"):
        crf.partial_fit([[{"w": "c"}]], [["C"]], parents=[[-1]])


def test_fixed_classes():
    X, y, P, _ = trees(10)
    crf = TreeCRF(algorithm="ap", random_state=0).partial_fit(X, y, classes=["D", "C", "B", "A"], parents=P)
    assert crf.classes_ == ["D", "C", "B", "A"] and crf.model_.n_labels == 4
    crf.partial_fit(X, y, classes=["A", "B", "C", "D"], parents=P)    # the same set again
    crf.partial_fit(X, y, parents=P)
    coef, classes, attributes = crf.coef_, list(crf.classes_), list(crf.attributes_)
    with pytest.raises(ValueError, match=r"label 'E' is not in the `classes` fixed"):
        crf.partial_fit([[{"w": "brand-new"}]], [["E"]], parents=[[-1]])
    assert crf.coef_ is coef and crf.classes_ == classes and crf.attributes_ == attributes
    assert len(crf._vocab) == len(crf.model_.attr_ptr) - 1


# ------------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------------
def test_lbfgs_refuses_to_stream():
    X, y, P, _ = trees(3)
    with pytest.raises(ValueError, match=r"algorithm='lbfgs'.*use fit.*l2sgd"):
        TreeCRF().partial_fit(X, y, parents=P)


@pytest.mark.parametrize("classes, match", [
    ("AB", "must be a list of labels"), ([], "is empty"), (["A", "A", "B"], "lists the label 'A' twice")])
def test_bad_classes(classes, match):
    X, y, P, _ = trees(3)
    with pytest.raises(ValueError, match=match):
        TreeCRF(algorithm="ap").partial_fit(X, y, classes=classes, parents=P)


def test_classes_only_on_the_first_call():
    X, y, P, _ = trees(5)
    crf = TreeCRF(algorithm="ap").partial_fit(X, y, parents=P)
    with pytest.raises(ValueError, match="only fix the labels on the first partial_fit call"):
        crf.partial_fit(X, y, classes=list(crf.classes_), parents=P)


def test_errors_leave_the_estimator_unchanged():
    X, y, P, E = trees(10)
    crf = TreeCRF(algorithm="pa", random_state=0).partial_fit(X, y, parents=P, edge_attributes=E)
    state = (crf.coef_, crf.model_, list(crf.classes_), list(crf.attributes_), list(crf.edge_attributes_),
             crf._stream)
    new = [[{"w": "new"}, {"w": "A0"}]]
    bad = [
        (dict(X=new, y=[["Z"]], parents=[[-1, 0]], edge_attributes=[["", "x"]]), "labels"),
        (dict(X=new, y=[["Z", "A"]], parents=[[1, 0]], edge_attributes=[["", "x"]]), "no root"),
        (dict(X=new, y=[["Z", "A"]], parents=[[-1, 0]]), "pass `edge_attributes=`"),
        (dict(X=new, y=[["Z", "A"]], parents=[[-1, 0]], edge_attributes=[["x"]]), "one entry per node"),
        (dict(X=[[]], y=[[]], parents=[[]], edge_attributes=[[]]), "empty"),
        (dict(X=X, y=y, parents=P, edge_attributes=E, n_sequences=0), "n_sequences"),
    ]
    for kwargs, match in bad:
        with pytest.raises(ValueError, match=match):
            crf.partial_fit(**kwargs)
        assert crf.coef_ is state[0] and crf.model_ is state[1] and crf._stream is state[5]
        assert (crf.classes_, crf.attributes_, crf.edge_attributes_) == tuple(state[2:5])
        assert len(crf._vocab) == len(state[3]) and len(crf._evocab) == len(state[4])
    crf.partial_fit(X, y, parents=P, edge_attributes=E)   # the stream goes on
    assert crf.n_iter_ == 2


# ------------------------------------------------------------------------------------------------------
# fit, load, clone, pickle, prediction between calls
# ------------------------------------------------------------------------------------------------------
def test_fit_after_partial_fit_starts_afresh():
    X, y, P, E = trees(20, seed=2)
    kw = dict(algorithm="ap", max_iterations=3, epsilon=0.0, random_state=1)
    fresh = TreeCRF(**kw).fit(X, y, parents=P, edge_attributes=E)
    crf = TreeCRF(**kw)
    crf.partial_fit([[{"w": "zz"}]], [["Q"]], parents=[[-1]]).fit(X, y, parents=P, edge_attributes=E)
    np.testing.assert_array_equal(crf.coef_, fresh.coef_)
    assert crf.classes_ == fresh.classes_ and len(crf.training_log_) == 3


@pytest.mark.parametrize("algorithm", ["l2sgd", "ap"])
def test_partial_fit_after_fit_and_load_continues_from_the_fitted_weights(tmp_path, algorithm):
    X, y, P, E = trees(40, seed=3)
    crf = TreeCRF(algorithm=algorithm, max_iterations=5, random_state=0, calibration_samples=20)
    crf.fit(X, y, parents=P, edge_attributes=E)
    fitted, fitted_score = named_weights(crf), crf.score(X, y, parents=P, edge_attributes=E)
    path = tmp_path / "tree.npz"
    crf.save(path)
    X2, y2, P2, E2 = [[{"w": "new"}, {"w": "A1"}]], [["D", "A"]], [[-1, 0]], [["", "fresh"]]
    for est in (crf, TreeCRF.load(path)):
        est.partial_fit(X2, y2, parents=P2, edge_attributes=E2, n_sequences=41)
        assert est.classes_[-1] == "D" and est.edge_attributes_[-1] == "fresh"
        assert est.n_iter_ == 1 and len(est.training_log_) == 1
        assert est.score(X, y, parents=P, edge_attributes=E) >= fitted_score - 0.05
        now = named_weights(est)
        if algorithm == "l2sgd":   # every weight decays a little and X2's features take a step
            assert np.corrcoef([now[k] for k in fitted], list(fitted.values()))[0, 1] > 0.99
        else:                      # one small tree: the weights it does not touch stay where fit left them
            assert sum(now[k] == v for k, v in fitted.items()) >= 0.8 * len(fitted)
    np.testing.assert_array_equal(crf.coef_, est.coef_)  # the model file holds all partial_fit needs


def test_predict_between_calls_clone_and_pickle():
    X, y, P, E = trees(40)
    crf = TreeCRF(algorithm="arow", min_freq=2, random_state=0)
    for lo in range(0, 30, 10):
        crf.partial_fit(X[lo:lo + 10], y[lo:lo + 10], parents=P[lo:lo + 10], edge_attributes=E[lo:lo + 10])
        assert len(crf.predict(X[:3], parents=P[:3], edge_attributes=E[:3])) == 3
        marg = crf.predict_marginals(X[:1], parents=P[:1], edge_attributes=E[:1])[0]
        assert np.allclose([sum(d.values()) for d in marg], 1.0)
    twin = pickle.loads(pickle.dumps(crf))   # the stream (state, generator, pending counts) travels
    crf.partial_fit(X[30:], y[30:], parents=P[30:], edge_attributes=E[30:])
    twin.partial_fit(X[30:], y[30:], parents=P[30:], edge_attributes=E[30:])
    np.testing.assert_array_equal(twin.coef_, crf.coef_)
    fresh = clone(crf)
    assert fresh.get_params() == crf.get_params() and not hasattr(fresh, "_stream")
    np.testing.assert_array_equal(
        fresh.partial_fit(X[:10], y[:10], parents=P[:10], edge_attributes=E[:10]).coef_,
        TreeCRF(algorithm="arow", min_freq=2, random_state=0).partial_fit(
            X[:10], y[:10], parents=P[:10], edge_attributes=E[:10]).coef_)
