"""``LinearChainCRF.partial_fit``: streaming epochs of the online trainers (l2sgd, ap, pa, arow).

What is pinned: a first call is one epoch of ``fit`` (bitwise), k calls on the same data k epochs; over
4–8 shards and 10 passes the trainers reach the batch trainer's held-out accuracy (within 0.01) and
l2sgd the L-BFGS optimum of the objective (within 3%); the vocabulary, labels and features grow with
the stream and the weights follow them; errors; clone, save/load, predict between calls.
"""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import LinearChainCRF
from structlearn.crf.online_trainers import StreamState
from structlearn.crf._potentials import ChainFeatureModel
from structlearn.crf.features import AttributeVocabulary, build_state_features, grow_state_features
from tests.conftest import require_module

ONLINE = ("l2sgd", "ap", "pa", "arow")


def hmm_data(n, seed, K=4, V=32, noise=0.2):
    """Sequences of a sticky 4-state HMM: word from the state's 8-word block, a uniform word with
    probability ``noise``; attributes the word and the word mod 3."""
    rng = np.random.default_rng(seed)
    A = np.full((K, K), 0.1 / (K - 1))
    np.fill_diagonal(A, 0.9)
    A = 0.3 * np.roll(A, 1, axis=1) + 0.7 * A
    A /= A.sum(1, keepdims=True)
    X, y = [], []
    for _ in range(n):
        T, k = int(rng.integers(4, 15)), int(rng.integers(K))
        xs, ys = [], []
        for _ in range(T):
            w = int(rng.integers(V)) if rng.random() < noise else k * (V // K) + int(rng.integers(V // K))
            xs.append({"w": str(w), "wm3": str(w % 3)})
            ys.append(f"L{k}")
            k = int(rng.choice(K, p=A[k]))
        X.append(xs)
        y.append(ys)
    return X, y


def small_data(n=60, seed=0, labels="ABC"):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(2, 8))
        labs = [labels[int(rng.integers(len(labels)))] for _ in range(T)]
        X.append([{"w": lab.lower() + str(int(rng.integers(8))), "n": float(rng.normal())} for lab in labs])
        y.append(labs)
    return X, y


def objective(crf, X, y):
    """CRFsuite's objective -Σ log p(y|x) + c2‖w‖² of the fitted weights."""
    return float(-np.sum(np.log(crf.sequence_probability(X, y))) + crf.c2 * crf.coef_ @ crf.coef_)


def feature_pairs(crf):
    """Every state feature (attribute, label) of the model, zero weights included."""
    m = crf.model_
    attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
    return {(crf.attributes_[a], crf.classes_[k]) for a, k in zip(attrs, m.feat_label)}


# ------------------------------------------------------------------------------------------------------
# one epoch = fit's epoch
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ONLINE)
@pytest.mark.parametrize("start_end_features", [True, False])
def test_first_call_is_one_epoch_of_fit(algorithm, start_end_features):
    # the same features (min_freq counted on the batch), the same draws of random_state (l2sgd: the
    # calibration sample, then the epoch's order; fit with shuffle="numpy", the stream's order), the same
    # kernel: bitwise equal
    X, y = small_data()
    kw = dict(algorithm=algorithm, random_state=3, start_end_features=start_end_features, min_freq=2,
              shuffle="numpy")
    batch = LinearChainCRF(max_iterations=1, **kw).fit(X, y)
    stream = LinearChainCRF(**kw).partial_fit(X, y)
    np.testing.assert_array_equal(stream.coef_, batch.coef_)
    assert stream.classes_ == batch.classes_ and stream.attributes_ == batch.attributes_
    assert stream.state_features_ == batch.state_features_
    assert stream.training_log_[0]["loss"] == batch.training_log_[0]["loss"]
    assert stream.n_iter_ == 1 and stream.training_log_[0]["n_sequences"] == len(X)


@pytest.mark.parametrize("algorithm", ONLINE)
def test_k_calls_on_the_same_data_are_k_epochs_of_fit(algorithm):
    # the stream's generator continues across calls as fit's across epochs; l2sgd needs the λ of fit,
    # 2·c2 / len(X) (by default n counts every sequence passed, so λ would halve on the second pass)
    X, y = small_data(seed=1)
    batch = LinearChainCRF(algorithm=algorithm, max_iterations=3, period=100, random_state=5,
                           shuffle="numpy").fit(X, y)
    stream = LinearChainCRF(algorithm=algorithm, random_state=5, shuffle="numpy")
    for _ in range(3):
        stream.partial_fit(X, y, n_sequences=len(X))
    np.testing.assert_array_equal(stream.coef_, batch.coef_)
    assert stream.n_iter_ == 3


def test_l2sgd_lambda_counts_the_sequences_seen():
    X, y = small_data(n=40)
    crf = LinearChainCRF(algorithm="l2sgd", c2=0.5, random_state=0)
    crf.partial_fit(X[:10], y[:10]).partial_fit(X[10:40], y[10:40])
    assert [e["lambda"] for e in crf.training_log_] == [2 * 0.5 / 10, 2 * 0.5 / 40]
    assert crf.training_log_[0]["eta0"] == crf.training_log_[1]["eta0"]  # calibrated once
    crf.partial_fit(X[:10], y[:10], n_sequences=40)
    assert crf.training_log_[-1]["lambda"] == 2 * 0.5 / 40


# ------------------------------------------------------------------------------------------------------
# convergence over shards
# ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hmm_task():
    X, y = hmm_data(600, 0)
    Xt, yt = hmm_data(400, 1)
    # the numbers below were measured with start/end weights (then the default), so kept here
    optimum = LinearChainCRF(c2=1.0, start_end_features=True).fit(X, y)   # L-BFGS: the batch optimum
    return X, y, Xt, yt, objective(optimum, X, y)


# arow is not in this test: since it runs CRFsuite's variance update 1/Σ += d²/γ, its held-out accuracy on this
# task swings with the number of epochs and the instance order alone by far more than the 0.01 asserted below
# (measured, random_state 0: fit with 10 / 20 / 40 epochs .8398 / .8216 / .7480 in numpy's order, .8034 / .8092
# / .8269 in CRFsuite's; 10 / 20 / 40 passes over 4 shards .7916 / .8340 / .8384, over 8 shards .8191 / .8280 /
# .7883), so "a stream reaches the batch trainer's accuracy" is no property of arow here. Its stream is checked
# exactly instead: one call = one epoch of fit, k calls = k epochs (the tests above, bitwise).
@pytest.mark.parametrize("algorithm", [a for a in ONLINE if a != "arow"])
@pytest.mark.parametrize("n_shards", [4, 8])
def test_shards_reach_the_batch_trainer(hmm_task, algorithm, n_shards):
    # measured (token accuracy on 400 held-out sequences, fit with its default epochs vs 10 passes over
    # 4 / 8 shards): l2sgd .8707 vs .8685 / .8682; ap .8696 vs .8685 / .8693; pa .8690 vs .8682 / .8726;
    # arow .8018 vs .8197 / .8252; l2sgd objective +1.93% / +1.65% above the L-BFGS optimum (fit's
    # l2sgd: +0.02%). One pass with the default λ (a true stream): +6.4% / +8.9%, accuracy .856 / .851
    X, y, Xt, yt, best = hmm_task
    kw = dict(algorithm=algorithm, c2=1.0, random_state=0, start_end_features=True)
    batch = LinearChainCRF(**kw).fit(X, y)
    stream = LinearChainCRF(**kw)
    shards = np.array_split(np.arange(len(X)), n_shards)
    for _ in range(10):
        for shard in shards:
            stream.partial_fit([X[i] for i in shard], [y[i] for i in shard], n_sequences=len(X))
    assert stream.n_iter_ == 10 * n_shards
    assert stream.score(Xt, yt) >= batch.score(Xt, yt) - 0.01
    if algorithm == "l2sgd":
        assert objective(stream, X, y) <= 1.03 * best


# ------------------------------------------------------------------------------------------------------
# growth
# ------------------------------------------------------------------------------------------------------
def test_labels_attributes_and_features_grow():
    X1 = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]]
    y1 = [["A", "B"], ["B", "A"]]
    X2 = [[{"w": "c"}, {"w": "a"}, {"v": "new"}]]
    y2 = [["C", "A", "C"]]
    crf = LinearChainCRF(algorithm="arow", random_state=0)
    crf.partial_fit(X1, y1)
    assert crf.classes_ == ["A", "B"] and crf.attributes_ == ["w:a", "w:b"]
    assert crf.model_.n_labels == 2
    before = dict(crf.state_features_)
    crf.partial_fit(X2, y2)
    assert crf.classes_ == ["A", "B", "C"]
    assert crf.attributes_ == ["w:a", "w:b", "w:c", "v:new"]
    assert feature_pairs(crf) == {("w:a", "A"), ("w:b", "B"), ("w:c", "C"), ("v:new", "C")}
    assert crf.model_.trans_features[2, 0] and crf.model_.trans_features[0, 2]   # C->A, A->C
    # AROW's update on X2 touches only features of X2's items: w:b/B moved to its new place unchanged
    assert crf.state_features_[("w:b", "B")] == before[("w:b", "B")]
    for _ in range(5):
        crf.partial_fit(X1 + X2, y1 + y2)
    assert crf.predict(X2) == y2 and crf.predict(X1) == y1


def test_weights_follow_the_grown_layout():
    # index_in + StreamState.remap: every old parameter keeps its value at its new place
    v1 = AttributeVocabulary()
    p1 = v1.encode([[{"w": "a"}, {"w": "b"}]], grow=True)
    y1 = np.array([0, 1])
    ptr, lab = build_state_features(p1, y1, 2, 2)
    m1 = ChainFeatureModel(ptr, lab, 2, np.ones((2, 2), bool))
    p2 = v1.encode([[{"w": "c"}, {"w": "a"}]], grow=True)
    y2 = np.array([2, 1])
    ptr2, lab2, _ = grow_state_features(p2, y2, 3, 3, features=(ptr, lab))
    m2 = ChainFeatureModel(ptr2, lab2, 3, np.ones((3, 3), bool))
    w1 = np.arange(1.0, m1.n_params + 1)
    st = StreamState("arow", m1.n_params, np.random.RandomState(0), variance=2.0)
    st.w[:] = w1
    st.u[:] = -w1
    st.sigma[:] = 0.5
    st.remap(m1.index_in(m2), m2.n_params, variance=2.0)
    s1, t1, b1, e1 = m1.split(w1)
    s2, t2, b2, e2 = m2.split(st.w)
    pairs2 = {(a, k): s2[f] for a in range(3) for f, k in zip(range(ptr2[a], ptr2[a + 1]), lab2[ptr2[a]:ptr2[a + 1]])}
    assert pairs2 == {(0, 0): s1[0], (1, 1): s1[1], (0, 1): 0.0, (2, 2): 0.0}
    np.testing.assert_array_equal(t2[:2, :2], t1)
    assert not t2[2].any() and not t2[:, 2].any()
    np.testing.assert_array_equal(b2, [*b1, 0.0])
    np.testing.assert_array_equal(e2, [*e1, 0.0])
    np.testing.assert_array_equal(m2.split(-st.u)[1][:2, :2], t1)
    assert np.sum(st.sigma == 0.5) == m1.n_params and np.sum(st.sigma == 2.0) == m2.n_params - m1.n_params


def test_first_batch_features_equal_build_state_features():
    X, y = small_data(n=30, seed=4)
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    yy = np.array([ord(c) - 65 for s in y for c in s])
    for freq in ("count", "value"):
        for mf in (0.0, 2.0):
            ref = build_state_features(packed, yy, len(vocab), 3, mf, frequency=freq)
            got = grow_state_features(packed, yy, len(vocab), 3, mf, frequency=freq)
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])


def test_min_freq_counts_over_the_stream():
    crf = LinearChainCRF(algorithm="ap", min_freq=2, random_state=0)
    crf.partial_fit([[{"w": "x"}, {"w": "y"}]], [["A", "B"]])
    assert feature_pairs(crf) == set()
    crf.partial_fit([[{"w": "x"}, {"w": "z"}]], [["A", "B"]])
    assert feature_pairs(crf) == {("w:x", "A")}     # seen twice now; w:y and w:z once each
    assert len(crf._stream.pending[0]) == 2
    crf.partial_fit([[{"w": "y"}]], [["B"]])
    assert feature_pairs(crf) == {("w:x", "A"), ("w:y", "B")}


def test_all_possible_states_and_transitions_grow():
    crf = LinearChainCRF(algorithm="pa", all_possible_states=True, all_possible_transitions=True,
                         random_state=0)
    crf.partial_fit([[{"w": "x"}]], [["A"]])
    crf.partial_fit([[{"w": "y"}, {"w": "x"}]], [["B", "B"]])
    assert feature_pairs(crf) == {(a, k) for a in ("w:x", "w:y") for k in "AB"}
    assert crf.model_.trans_features.all() and crf.model_.trans_features.shape == (2, 2)


def test_bio_constraints_follow_new_labels():
    crf = LinearChainCRF(algorithm="ap", forbidden_transitions="BIO", random_state=0)
    crf.partial_fit([[{"w": "the"}, {"w": "x"}]], [["O", "B-NP"]])
    crf.partial_fit([[{"w": "a"}, {"w": "b"}]], [["B-NP", "I-NP"]])
    assert crf.transition_features_[("O", "I-NP")] == -np.inf
    assert crf.boundary_features_[("<start>", "I-NP")] == -np.inf
    with pytest.raises(ValueError, match="forbids"):
        crf.partial_fit([[{"w": "a"}, {"w": "b"}]], [["O", "I-NP"]])


def test_forbidden_pairs_apply_once_their_label_appears():
    crf = LinearChainCRF(algorithm="ap", forbidden_transitions=[("A", "C")], random_state=0)
    crf.partial_fit([[{"w": "a"}]], [["A"]])
    crf.partial_fit([[{"w": "c"}]], [["C"]])
    assert crf.transition_features_[("A", "C")] == -np.inf


def test_fixed_classes():
    X, y = small_data(n=20, labels="AB")
    crf = LinearChainCRF(algorithm="ap", random_state=0).partial_fit(X, y, classes=["C", "B", "A"])
    assert crf.classes_ == ["C", "B", "A"] and crf.model_.n_labels == 3
    crf.partial_fit(X, y, classes=["A", "B", "C"])   # the same set again (dask-ml passes it every call)
    crf.partial_fit(X, y)
    coef, classes, attributes = crf.coef_, list(crf.classes_), list(crf.attributes_)
    with pytest.raises(ValueError, match=r"label 'D' is not in the `classes` fixed"):
        crf.partial_fit([[{"w": "brand-new"}]], [["D"]])
    assert crf.coef_ is coef and crf.classes_ == classes and crf.attributes_ == attributes
    assert len(crf._vocab) == len(crf.model_.attr_ptr) - 1


# ------------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------------
def test_lbfgs_refuses_to_stream():
    X, y = small_data(n=5)
    with pytest.raises(ValueError, match=r"algorithm='lbfgs'.*use fit.*l2sgd"):
        LinearChainCRF().partial_fit(X, y)
    with pytest.raises(ValueError, match=r"'l2sgd', 'ap', 'pa', 'arow'"):
        LinearChainCRF(algorithm="lbfgs").partial_fit(X, y)


@pytest.mark.parametrize("classes, match", [
    ("AB", "must be a list of labels"), ([], "is empty"), (["A", "A", "B"], "lists the label 'A' twice"),
    (["A\tB"], "tab or newline")])
def test_bad_classes(classes, match):
    X, y = small_data(n=5, labels="AB")
    with pytest.raises(ValueError, match=match):
        LinearChainCRF(algorithm="ap").partial_fit(X, y, classes=classes)


def test_classes_only_on_the_first_call():
    X, y = small_data(n=5, labels="AB")
    crf = LinearChainCRF(algorithm="ap").partial_fit(X, y)
    with pytest.raises(ValueError, match="only fix the labels on the first partial_fit call"):
        crf.partial_fit(X, y, classes=["A", "B"])
    crf = LinearChainCRF(algorithm="ap").partial_fit(X, y, classes=["A", "B"])
    with pytest.raises(ValueError, match="same set"):
        crf.partial_fit(X, y, classes=["A", "B", "C"])


def test_errors_leave_the_estimator_unchanged():
    X, y = small_data(n=10, labels="AB")
    crf = LinearChainCRF(algorithm="pa", random_state=0).partial_fit(X, y)
    coef, classes, attributes, model = crf.coef_, list(crf.classes_), list(crf.attributes_), crf.model_
    with pytest.raises(ValueError, match="labels"):
        crf.partial_fit([[{"w": "new"}, {"w": "b0"}]], [["Z"]])   # 2 items, 1 label; Z and w:new new
    with pytest.raises(ValueError, match="empty"):
        crf.partial_fit([[]], [[]])
    with pytest.raises(ValueError, match="n_sequences"):
        crf.partial_fit(X, y, n_sequences=0)
    assert crf.coef_ is coef and crf.model_ is model
    assert crf.classes_ == classes and crf.attributes_ == attributes and len(crf._vocab) == len(attributes)
    crf.partial_fit(X, y)                                   # the stream goes on
    assert crf.n_iter_ == 2


def test_transition_attributes_stay_lbfgs_only():
    X, y = small_data(n=5)
    with pytest.raises(ValueError, match="transition_attributes"):
        LinearChainCRF(algorithm="ap", transition_attributes=["w:a0"]).partial_fit(X, y)


# ------------------------------------------------------------------------------------------------------
# fit, clone, model files, inspection
# ------------------------------------------------------------------------------------------------------
def test_fit_after_partial_fit_starts_afresh():
    X, y = small_data(seed=2)
    fresh = LinearChainCRF(algorithm="ap", max_iterations=4, random_state=1).fit(X, y)
    crf = LinearChainCRF(algorithm="ap", max_iterations=4, random_state=1)
    crf.partial_fit([[{"w": "zz"}]], [["Q"]]).fit(X, y)
    np.testing.assert_array_equal(crf.coef_, fresh.coef_)
    assert crf.classes_ == fresh.classes_ and len(crf.training_log_) == 4


@pytest.mark.parametrize("algorithm", ONLINE)
def test_partial_fit_after_fit_continues_from_the_fitted_weights(algorithm):
    X, y = small_data(seed=3)
    X2 = [[{"w": "new"}, {"w": "a1"}]]
    y2 = [["D", "A"]]
    crf = LinearChainCRF(algorithm=algorithm, max_iterations=20, random_state=0).fit(X, y)
    fitted, fitted_score = dict(crf.state_features_), crf.score(X, y)
    crf.partial_fit(X2, y2, n_sequences=len(X) + 1)
    assert crf.classes_[-1] == "D" and crf.n_iter_ == 1 and len(crf.training_log_) == 1
    if algorithm != "arow":  # arow's variances restart at `variance`: its first step is a large one
        assert crf.score(X, y) >= fitted_score - 0.05
    now = crf.state_features_
    if algorithm == "l2sgd":   # every weight decays (λ = 2·c2 / 61) and X2's features take a step
        assert np.corrcoef([now.get(k, 0.0) for k in fitted], list(fitted.values()))[0, 1] > 0.99
    else:                      # one short sequence: the weights it does not touch are where fit left them
        assert sum(now.get(k) == v for k, v in fitted.items()) >= 0.8 * len(fitted)


def test_predict_between_calls_and_crfsuite_attributes():
    X, y = small_data(n=40)
    crf = LinearChainCRF(algorithm="arow", random_state=0)
    assert crf.classes_ is None and crf.state_features_ is None
    for lo in range(0, 40, 10):
        crf.partial_fit(X[lo:lo + 10], y[lo:lo + 10])
        assert len(crf.predict(X[:3])) == 3
        # CRFsuite's count: the attributes with a non-zero state weight (the stream has seen more)
        assert crf.num_attributes_ == len({a for a, _ in crf.state_features_}) <= len(crf.attributes_)
        assert set(k[1] for k in crf.state_features_) <= set(crf.classes_)
        assert crf.size_ > 0 and crf.tagger_.labels() == [str(c) for c in crf.classes_]
        assert np.allclose([sum(d.values()) for d in crf.predict_marginals(X[:1])[0]], 1.0)


def test_clone_drops_the_stream():
    X, y = small_data(n=10)
    crf = LinearChainCRF(algorithm="pa", c=0.5, random_state=0).partial_fit(X, y)
    twin = clone(crf)
    assert twin.get_params() == crf.get_params() and not hasattr(twin, "coef_")
    assert not hasattr(twin, "_stream")
    np.testing.assert_array_equal(twin.partial_fit(X, y).coef_,
                                  LinearChainCRF(algorithm="pa", c=0.5, random_state=0).partial_fit(X, y).coef_)


@pytest.mark.parametrize("fmt", ["structlearn", "crfsuite"])
def test_save_load_after_partial_fit(tmp_path, fmt):
    X, y = small_data(n=30)
    crf = LinearChainCRF(algorithm="l2sgd", start_end_features=fmt == "structlearn", random_state=0)
    crf.partial_fit(X[:15], y[:15]).partial_fit(X[15:], y[15:])
    path = tmp_path / "m.model"
    crf.save(path, format=fmt)
    back = LinearChainCRF.load(path)
    assert back.predict(X) == crf.predict(X)
    np.testing.assert_allclose(back.predict_marginals(X, output="array")[0],
                               crf.predict_marginals(X, output="array")[0], rtol=1e-12)
    # a loaded model continues the stream from its weights (the trainer's state restarts)
    back.set_params(algorithm="l2sgd", random_state=0)
    back.partial_fit(X[:15] + [[{"w": "brand-new"}]], y[:15] + [["N"]], n_sequences=31)
    assert back.classes_[-1] == "N" and back.attributes_[-1] == "w:brand-new"
    assert back.score(X, y) >= crf.score(X, y) - 0.05


def test_dask_ml_incremental():
    # dask-ml's Incremental calls partial_fit once per block (classes forwarded to every call); its
    # predict assumes 2-D arrays, so prediction goes through estimator_
    dask = require_module("dask")
    da = require_module("dask.array")
    Incremental = require_module("dask_ml.wrappers").Incremental

    X, y = small_data(n=40, labels="AB")

    def objects(seqs):
        out = np.empty(len(seqs), object)
        out[:] = [list(s) for s in seqs]
        return out

    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Incremental shuffles the blocks, at random unless seeded; seed it (the 24 block orders score
        # 0.785 to 0.984 here, so the bound below holds for every order)
        inc = Incremental(LinearChainCRF(algorithm="ap", random_state=0), random_state=0)
        inc.fit(da.from_array(objects(X), chunks=10), da.from_array(objects(y), chunks=10),
                classes=["A", "B"])
    est = inc.estimator_
    assert est.n_iter_ == 4 and est.classes_ == ["A", "B"]
    assert est.score(X, y) > 0.75


@pytest.mark.parametrize("algorithm", ONLINE)
def test_pickle_keeps_the_stream(algorithm):
    # the stream's state (weights, trainer state, generator, pending counts) travels with the estimator
    import pickle

    X, y = small_data(n=40)
    crf = LinearChainCRF(algorithm=algorithm, min_freq=2, random_state=0).partial_fit(X[:20], y[:20])
    twin = pickle.loads(pickle.dumps(crf))
    crf.partial_fit(X[20:], y[20:])
    twin.partial_fit(X[20:], y[20:])
    np.testing.assert_array_equal(twin.coef_, crf.coef_)
