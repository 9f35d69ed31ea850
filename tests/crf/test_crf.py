"""LinearChainCRF: gradient checks, estimator contract, decoding options and bad input."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import LinearChainCRF
from structlearn.crf.objectives import ChainCLL
from structlearn.crf.features import AttributeVocabulary, build_state_features
from structlearn.crf._potentials import ChainFeatureModel
from tests.oracles.chain import chain_oracle


def toy_data(n=30, seed=0, labels=("A", "B", "C")):
    """Sequences whose label depends on a word attribute and on the previous label."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(1, 7))
        xs, ys = [], []
        prev = 0
        for t in range(T):
            lab = int(rng.integers(0, len(labels))) if rng.random() < 0.3 else (prev + 1) % len(labels)
            xs.append({"w": f"w{lab}{int(rng.integers(0, 2))}", "bias": 1.0, "num": float(rng.normal())})
            ys.append(labels[lab])
            prev = lab
        X.append(xs)
        y.append(ys)
    return X, y


def _objective(X, y, c2=0.5, c1=0.0, partial=False, forbidden=None):
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    classes = sorted({l for s in y for l in s})
    index = {c: i for i, c in enumerate(classes)}
    yy = np.array([index[l] for s in y for l in s])
    K = len(classes)
    attr_ptr, feat_label = build_state_features(packed, yy, len(vocab), K)
    model = ChainFeatureModel(attr_ptr, feat_label, K, np.ones((K, K), bool), forbidden)
    allowed = None
    if partial:
        rng = np.random.default_rng(1)
        allowed = rng.random((packed.n_items, K)) < 0.5
        allowed[np.arange(packed.n_items), yy] = True
    return model, ChainCLL(model, packed, yy, c2=c2, c1=c1, allowed=allowed), packed, yy


@pytest.mark.parametrize("c2, c1, partial", [(0.5, 0.0, False), (0.0, 0.3, False), (0.2, 0.1, False),
                                             (0.3, 0.0, True)])
def test_gradient_matches_finite_differences(c2, c1, partial):
    X, y = toy_data(12)
    model, obj, _, _ = _objective(X, y, c2=c2, c1=c1, partial=partial)
    rng = np.random.default_rng(0)
    w = rng.normal(scale=0.5, size=model.n_params) * model.free_mask()
    w[w == 0] = 0.0
    g = np.empty_like(w)
    obj(w, g)
    h = 1e-6
    idx = np.flatnonzero(model.free_mask())
    idx = rng.choice(idx, size=min(40, idx.size), replace=False)
    for i in idx:
        e = np.zeros_like(w)
        e[i] = h
        fd = (obj(w + e) - obj(w - e)) / (2 * h)
        np.testing.assert_allclose(g[i], fd, rtol=1e-6, atol=1e-6)


def test_objective_equals_brute_force_likelihood():
    X, y = toy_data(5, seed=3)
    model, obj, packed, yy = _objective(X, y, c2=0.0)
    w = np.random.default_rng(2).normal(size=model.n_params) * model.free_mask()
    chain = model.structure(w, packed)
    total = 0.0
    for b in range(len(packed.lengths)):
        sl = slice(packed.offsets[b], packed.offsets[b + 1])
        tr = chain.transition
        o = chain_oracle(chain.unary[sl], tr, chain.start, chain.end)
        total -= np.log(o["probs"][tuple(yy[sl])])
    np.testing.assert_allclose(obj(w), total, rtol=1e-10)


def test_partial_labels_all_observed_equals_supervised():
    X, y = toy_data(10, seed=4)
    model, obj, packed, yy = _objective(X, y, c2=0.1)
    allowed = np.zeros((packed.n_items, model.n_labels), bool)
    allowed[np.arange(packed.n_items), yy] = True
    part = ChainCLL(model, packed, yy, c2=0.1, allowed=allowed)
    w = np.random.default_rng(0).normal(size=model.n_params) * model.free_mask()
    g1, g2 = np.empty_like(w), np.empty_like(w)
    np.testing.assert_allclose(obj(w, g1), part(w, g2), rtol=1e-10)
    np.testing.assert_allclose(g1, g2, rtol=1e-8, atol=1e-10)
    none = ChainCLL(model, packed, yy, c2=0.0, allowed=np.ones_like(allowed))
    assert abs(none(w)) < 1e-9


def test_fit_predict_and_outputs():
    X, y = toy_data(60)
    crf = LinearChainCRF(c2=0.1, max_iterations=100).fit(X, y)
    assert crf.score(X, y) > 0.9
    assert crf.classes_ == ["A", "B", "C"] or set(crf.classes_) == {"A", "B", "C"}
    pred = crf.predict(X)
    assert [len(p) for p in pred] == [len(s) for s in X]
    marg = crf.predict_marginals(X)
    np.testing.assert_allclose([sum(d.values()) for s in marg for d in s], 1.0, rtol=1e-10)
    arr = crf.predict_marginals(X, output="array")
    assert arr[0].shape == (len(X[0]), 3)
    # Viterbi path = first k-best, probability consistent
    kb = crf.kbest(X[:5], k=3)
    proba = crf.predict_proba_sequence(X[:5])
    for b in range(5):
        assert kb[b][0][0] == pred[b]
        np.testing.assert_allclose(kb[b][0][1], proba[b], rtol=1e-10)
        assert all(kb[b][i][1] >= kb[b][i + 1][1] for i in range(len(kb[b]) - 1))
    np.testing.assert_allclose(crf.sequence_probability(X[:5], pred[:5]), proba, rtol=1e-10)
    assert crf.predict_single(X[0]) == pred[0]
    assert crf.n_iter_ >= 1 and isinstance(crf.converged_, bool) and crf.training_log_
    assert {"loss", "gradient_norm", "active_features", "seconds"} <= set(crf.training_log_[0])
    assert all(isinstance(k, tuple) for k in crf.state_features_)
    assert crf.boundary_features_ == {}   # CRFsuite's model by default: no start/end weights
    bounded = LinearChainCRF(c2=0.1, max_iterations=100, start_end_features=True).fit(X, y)
    assert ("<start>", "A") in bounded.boundary_features_ and ("A", "<end>") in bounded.boundary_features_
    assert all(a in crf.classes_ and b in crf.classes_ for a, b in crf.transition_features_)
    assert all(w != 0 for w in {**crf.state_features_, **crf.transition_features_}.values())


def test_constrained_decoding():
    X, y = toy_data(40)
    crf = LinearChainCRF(c2=0.1).fit(X, y)
    seq = X[0] if len(X[0]) > 1 else X[1]
    free = crf.predict([seq])[0]
    forced = "A" if free[0] != "A" else "B"
    out = crf.predict([seq], constraints=[{0: forced}])[0]
    assert out[0] == forced
    out = crf.predict([seq], constraints=[{-1: ["B", "C"]}])[0]
    assert out[-1] in ("B", "C")
    with pytest.raises(ValueError, match="unknown label"):
        crf.predict([seq], constraints=[{0: "Z"}])
    with pytest.raises(ValueError, match="outside"):
        crf.predict([seq], constraints=[{99: "A"}])


def test_bio_forbidden_transitions():
    X = [[{"w": "a"}, {"w": "b"}, {"w": "c"}]] * 5 + [[{"w": "b"}, {"w": "b"}]] * 5
    y = [["B-X", "I-X", "O"]] * 5 + [["O", "B-X"]] * 5
    crf = LinearChainCRF(forbidden_transitions="BIO").fit(X, y)
    tf = crf.transition_features_
    assert tf[("O", "I-X")] == -np.inf and crf.boundary_features_[("<start>", "I-X")] == -np.inf
    for seq in crf.predict([[{"w": "b"}, {"w": "b"}, {"w": "b"}], [{"w": "zzz"}]]):
        for a, b in zip(["O"] + seq, seq):
            assert not (b == "I-X" and a == "O")
        assert seq[0] != "I-X"
    crf2 = LinearChainCRF(forbidden_transitions=[("O", "I-X")]).fit(X, y)
    assert crf2.transition_features_[("O", "I-X")] == -np.inf
    with pytest.raises(ValueError, match="zero probability"):
        LinearChainCRF(forbidden_transitions=[("B-X", "I-X")]).fit(X, y)


@pytest.mark.parametrize("alg", ["ap", "pa", "arow", "l2sgd"])
def test_online_algorithms_learn(alg):
    X, y = toy_data(80)
    crf = LinearChainCRF(algorithm=alg, max_iterations=15, random_state=0).fit(X, y)
    assert crf.score(X, y) > 0.85
    again = LinearChainCRF(algorithm=alg, max_iterations=15, random_state=0).fit(X, y)
    np.testing.assert_array_equal(crf.coef_, again.coef_)


def test_l1_gives_sparse_model():
    X, y = toy_data(60)
    dense = LinearChainCRF(c1=0.0, c2=0.01).fit(X, y)
    sparse = LinearChainCRF(c1=2.0, c2=0.0).fit(X, y)
    assert np.count_nonzero(sparse.coef_) < np.count_nonzero(dense.coef_)


def test_input_formats_equivalent():
    X, y = toy_data(30)
    Xl = [[[f"w:{d['w']}", "bias"] for d in s] for s in X]
    Xd = [[{"w": d["w"], "bias": 1.0} for d in s] for s in X]
    a = LinearChainCRF(c2=0.1).fit(Xl, y)
    b = LinearChainCRF(c2=0.1).fit(Xd, y)
    assert a.predict(Xl) == b.predict(Xd) and a.attributes_ == b.attributes_
    np.testing.assert_allclose(a.training_log_[-1]["loss"], b.training_log_[-1]["loss"], rtol=1e-10)
    # nested dicts / lists follow python-crfsuite's naming
    nested = [[{"tok": {"w": d["w"]}, "tags": ["x", "y"]} for d in s] for s in X]
    c = LinearChainCRF(c2=0.1).fit(nested, y)
    assert "tok:w:" + X[0][0]["w"] in c.attributes_ and "tags:x" in c.attributes_
    # sparse matrix + lengths
    lengths = [len(s) for s in X]
    M = sp.random(sum(lengths), 5, density=0.5, random_state=0, format="csr")
    d = LinearChainCRF(c2=0.1).fit(M, y, lengths=lengths)
    assert sum(len(p) for p in d.predict(M, lengths=lengths)) == sum(lengths)


def test_estimator_contract_clone_pickle_save_load(tmp_path):
    X, y = toy_data(40)
    crf = LinearChainCRF(c2=0.2, max_iterations=30)
    assert clone(crf).get_params() == crf.get_params()
    crf.set_params(c2=0.3)
    assert crf.c2 == 0.3
    with pytest.raises(NotFittedError):
        crf.predict(X)
    X_copy = [[dict(d) for d in s] for s in X]
    crf.fit(X, y)
    assert X == X_copy  # inputs not mutated
    pred = crf.predict(X)
    marg = crf.predict_marginals(X, output="array")
    assert pickle.loads(pickle.dumps(crf)).predict(X) == pred
    path = tmp_path / "model.npz"
    crf.save(path)
    loaded = LinearChainCRF.load(path)
    assert loaded.predict(X) == pred
    for a, b in zip(loaded.predict_marginals(X, output="array"), marg):
        np.testing.assert_array_equal(a, b)
    assert loaded.get_params() == crf.get_params()
    assert clone(crf).fit(X, y).predict(X) == pred


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_model_file_errors(tmp_path):
    X, y = toy_data(10)
    crf = LinearChainCRF(max_iterations=5).fit(X, y)
    path = tmp_path / "m.npz"
    crf.save(path)
    data = path.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        LinearChainCRF.load(tmp_path / "trunc.npz")
    with pytest.raises(FileNotFoundError):
        LinearChainCRF.load(tmp_path / "missing.npz")
    from structlearn.io.modelfile import load_model, save_model
    header, arrays = load_model(path)
    save_model(tmp_path / "new.npz", format_name=header["format"], version=99,
               estimator=header["estimator"], params=header["params"], metadata=header["metadata"],
               arrays=arrays)
    with pytest.raises(ValueError, match="newer"):
        LinearChainCRF.load(tmp_path / "new.npz")
    # weights that are not all finite are refused
    arrays = dict(arrays, coef=np.full_like(arrays["coef"], np.nan))
    save_model(tmp_path / "nan.npz", format_name=header["format"], version=1, estimator=header["estimator"],
               params=header["params"], metadata=header["metadata"], arrays=arrays)
    with pytest.raises(ValueError, match="inconsistent"):
        LinearChainCRF.load(tmp_path / "nan.npz")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_model_file_keeps_params(tmp_path):
    X, y = toy_data(10)
    seen = {(a, b) for s in y for a, b in zip(s[:-1], s[1:])}
    unseen = next((a, b) for a in "ABC" for b in "ABC" if (a, b) not in seen)
    crf = LinearChainCRF(max_iterations=np.int64(5), random_state=42,
                         forbidden_transitions=[unseen]).fit(X, y)
    back = LinearChainCRF.load(crf.save(tmp_path / "m.npz"))
    assert back.get_params() == dict(crf.get_params(), max_iterations=5)
    assert back.predict(X) == crf.predict(X)


@pytest.mark.parametrize("X, y, match", [
    ([], [], "empty"),
    ([[]], [[]], "empty"),
    ([[{"a": 1.0}, {"a": 1.0}]], [["A"]], "1 labels"),
    ([[{"a": float("nan")}]], [["A"]], "finite"),
    ([[{"a": float("inf")}]], [["A"]], "finite"),
    ([[{"a": 1.0}]], [["A\tB"]], "tab"),
    ("abc", [["A"]], "list of sequences"),
    ([[{"a": 1.0}]], None, "label sequences"),
    ([[{"a": object()}]], [["A"]], "unsupported"),
    (["abc"], [["A", "B", "C"]], "sequence"),
])
def test_bad_training_input(X, y, match):
    with pytest.raises(ValueError, match=match):
        LinearChainCRF().fit(X, y)


def test_bad_parameters():
    X, y = toy_data(5)
    for kw, match in [({"algorithm": "sgd"}, "algorithm"), ({"c2": -1.0}, "c2"),
                      ({"max_iterations": 0}, "max_iterations"), ({"c1": 1.0, "algorithm": "ap"}, "c1"),
                      ({"forbidden_transitions": "XYZ"}, "forbidden_transitions"),
                      ({"forbidden_transitions": [("A", "Q")]}, "Q")]:
        with pytest.raises(ValueError, match=match):
            LinearChainCRF(**kw).fit(X, y)


def test_unseen_label_at_evaluation_and_edge_cases():
    X, y = toy_data(20)
    crf = LinearChainCRF(max_iterations=20).fit(X, y)
    with pytest.raises(ValueError, match="not seen in training"):
        crf.score(X[:1], [["Q"] * len(X[0])])
    # empty sequences tag to [], unknown attributes are ignored, length-1 works
    assert crf.predict([[], [{"never": 1.0}], []]) == [[], [crf.predict([[{"never": 1.0}]])[0][0]], []]
    assert crf.predict_marginals([[]]) == [[]]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_many_labels_and_unicode():
    labels = [f"L{i}é" for i in range(1000)]
    X = [[{"w": f"ß{i}"}] for i in range(1000)]
    y = [[labels[i]] for i in range(1000)]
    crf = LinearChainCRF(max_iterations=3).fit(X, y)
    assert len(crf.classes_) == 1000
    assert crf.predict([[{"w": "ß7"}]])[0][0] == labels[7]


def test_sklearn_crfsuite_style_code_runs():
    # what a sklearn-crfsuite user writes, apart from the import
    X_train, y_train = toy_data(40)
    crf = LinearChainCRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100,
                         all_possible_transitions=True)
    crf.fit(X_train, y_train)
    labels = list(crf.classes_)
    y_pred = crf.predict(X_train)
    from structlearn import metrics  # sklearn-crfsuite: from sklearn_crfsuite import metrics
    assert metrics.flat_f1_score(y_train, y_pred, average="weighted", labels=labels) > 0.8
    sorted_labels = sorted(labels, key=lambda name: (name[1:], name[0]))
    assert "avg" in metrics.flat_classification_report(y_train, y_pred, labels=sorted_labels, digits=3)
    assert 0 <= metrics.sequence_accuracy_score(y_train, y_pred) <= 1
    assert isinstance(crf.predict_marginals_single(X_train[0])[0], dict)


@pytest.mark.parametrize("dense_min_labels", [0, 1, 2, 10 ** 9])
@pytest.mark.parametrize("scale", [0.5, 400.0])
def test_fused_objective_equals_structure_path(dense_min_labels, scale):
    """The fused training pass (potentials → forward–backward → counts in one kernel, dense rows for
    attributes with many labels) gives the value and gradient of the structure-level computation,
    with forbidden transitions, empty and length-1 sequences, and potentials large enough to force
    the log-space fallback."""
    X, y = toy_data(25, seed=7)
    X = X + [[], [{"w": "w00", "bias": 1.0}]]
    y = y + [[], ["B"]]
    forbidden = np.zeros((3, 3), bool)
    forbidden[2, 2] = True
    y = [[l if not (i > 0 and l == "C" and s[i - 1] == "C") else "A" for i, l in enumerate(s)]
         for s in y]
    model, obj, packed, yy = _objective(X, y, c2=0.3, forbidden=forbidden)
    model.dense_min_labels = dense_min_labels
    rng = np.random.default_rng(5)
    w = rng.normal(scale=scale, size=model.n_params) * model.free_mask()
    g_fused, g_plain = np.empty_like(w), np.empty_like(w)
    v_fused = obj(w, g_fused)
    assert obj._fused(w) is not None
    obj._fused = lambda w: None
    v_plain = obj(w, g_plain)
    np.testing.assert_allclose(v_fused, v_plain, rtol=1e-10)
    np.testing.assert_allclose(g_fused, g_plain, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(g_plain).max()))


def test_fused_objective_infeasible_sequence_is_a_clear_error():
    X, y = toy_data(6, seed=2)
    model, obj, packed, yy = _objective(X, y, c2=0.0)
    w = np.zeros(model.n_params)
    model.forbidden_start[yy[packed.offsets[0]]] = True
    with pytest.raises(ValueError, match="zero probability"):
        obj(w)


# ------------------------------------------------------------------------------------------ issue 19
def test_labels_keep_their_type(tmp_path):
    X, y = toy_data(20)
    yi = [[{"A": 0, "B": 1, "C": 2}[lab] for lab in s] for s in y]
    yn = [np.array(s, dtype=np.int64) for s in yi]
    for labels in (yi, yn):
        crf = LinearChainCRF(c2=0.1, max_iterations=30, epsilon=1e-2).fit(X, labels)
        assert sorted(crf.classes_) == [0, 1, 2] and all(type(c) is int for c in crf.classes_)
        pred = crf.predict(X)
        assert all(type(lab) is int for s in pred for lab in s)
        assert crf.score(X, labels) > 0.5
        assert set(crf.predict_marginals(X[:1])[0][0]) == {0, 1, 2}
        crf.save(tmp_path / "m.npz")
        assert LinearChainCRF.load(tmp_path / "m.npz").predict(X) == pred
    from sklearn.metrics import accuracy_score

    flat = [lab for s in crf.predict(X) for lab in s]
    assert 0 <= accuracy_score([lab for s in yi for lab in s], flat) <= 1  # no mixed-type error


def test_numpy_scalar_and_bytes_attribute_values():
    X, y = toy_data(20)
    Xp = [[{"w": d["w"], "bias": True, "num": d["num"]} for d in s] for s in X]
    Xn = [[{"w": np.str_(d["w"]), "bias": np.bool_(True), "num": np.float64(d["num"])} for d in s] for s in X]
    Xb = [[{"w": d["w"].encode(), "bias": np.int64(1), "num": d["num"]} for d in s] for s in X]
    a = LinearChainCRF(c2=0.1).fit(Xp, y)
    for other in (Xn, Xb):
        b = LinearChainCRF(c2=0.1).fit(other, y)
        assert b.attributes_ == a.attributes_
        np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-10)
        assert a.predict(other) == a.predict(Xp)
    Xf = [[{"w": d["w"], "bias": 1.0, "num": np.float32(d["num"])} for d in s] for s in X]
    assert LinearChainCRF(c2=0.1).fit(Xf, y).predict(Xf) == a.predict(Xp)
    with pytest.raises(ValueError, match="UTF-8"):
        LinearChainCRF().fit([[{"w": b"\xff"}]], [["A"]])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sparse_matrix_needs_lengths():
    X = sp.random(6, 4, density=0.5, format="csr", random_state=0)
    with pytest.raises(ValueError, match="lengths"):
        LinearChainCRF().fit(X, [["A"] * 6])
    crf = LinearChainCRF(max_iterations=5).fit(X, [["A", "B", "A"], ["B", "A", "B"]], lengths=[3, 3])
    with pytest.raises(ValueError, match="lengths"):
        crf.predict(X)


def test_convergence_warning_points_at_the_caller_once():
    X, y = toy_data(10)
    with pytest.warns(ConvergenceWarning) as record:
        LinearChainCRF(max_iterations=1).fit(X, y)
    conv = [w for w in record if issubclass(w.category, ConvergenceWarning)]
    assert len(conv) == 1 and conv[0].filename == __file__


def test_impossible_constraints_name_constraint_and_position():
    X = [[{"w": "a"}, {"w": "b"}, {"w": "c"}]] * 5 + [[{"w": "b"}, {"w": "b"}]] * 5
    y = [["B-X", "I-X", "O"]] * 5 + [["O", "B-X"]] * 5
    crf = LinearChainCRF(forbidden_transitions="BIO").fit(X, y)
    with pytest.raises(ValueError, match=r"`constraints\[1\]` at position 2 \('I-X'\).*positions \[1\]"):
        crf.predict([X[0], X[0]], constraints=[None, {1: "O", 2: "I-X"}])
    with pytest.raises(ValueError, match=r"`constraints\[0\]` at position 0 \('I-X'\)"):
        crf.predict([X[0]], constraints=[{0: "I-X"}])
    assert crf.predict([X[0]], constraints=[{1: "B-X", 2: "I-X"}])[0][1:] == ["B-X", "I-X"]


def test_model_files_of_the_old_attribute_spelling_still_read_dict_input(tmp_path):
    """Files written before python-crfsuite's "name:value" spelling named {"w": "the"} "w=the": loaded,
    they answer dict input (and the literal "w=the" list input) with the features they were trained on."""
    import json

    from structlearn.utils.modelfile import HEADER_KEY

    words = [["the", "dog", "runs"], ["a", "cat", "sleeps"], ["the", "cat", "runs"]]
    tags = [["D", "N", "V"], ["D", "N", "V"], ["D", "N", "V"]]
    old_style = [[[f"w={w}"] for w in s] for s in words]  # what the old encoder made of {"w": w}
    crf = LinearChainCRF(c2=0.1, max_iterations=50).fit(old_style, tags)
    path = tmp_path / "old.model"
    crf.save(path)
    with np.load(path) as z:  # strip the spelling marker: a file of the old layout
        members = {k: z[k] for k in z.files}
    header = json.loads(bytes(members[HEADER_KEY]).decode("utf-8"))
    del header["metadata"]["attribute_spelling"]
    members[HEADER_KEY] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **members)
    old = LinearChainCRF.load(path)
    as_dicts = [[{"w": w} for w in s] for s in words]
    assert old.predict(as_dicts) == crf.predict(old_style) == old.predict(old_style)
    pm_new = old.predict_marginals(as_dicts)
    pm_old = crf.predict_marginals(old_style)
    for a, b in zip(pm_new, pm_old):
        for da, db in zip(a, b):
            assert da.keys() == db.keys()
            np.testing.assert_allclose([da[k] for k in da], [db[k] for k in da], rtol=1e-12)
    fresh = LinearChainCRF.load(crf.save(tmp_path / "new.model"))  # today's files: no aliases
    assert fresh.predict(old_style) == crf.predict(old_style)
