"""``start_end_features=False``: CRFsuite's own model, checked against an enumeration of it
(tests/oracles/crfsuite_model.py) and against python-crfsuite."""
import numpy as np
import pytest

from structlearn import LinearChainCRF
from structlearn.crf.objectives import ChainCLL
from tests.conftest import require_module
from tests.crf._data import abc_sequences
from tests.oracles import crfsuite_model as oracle

ISSUE_X = [[{"a": 1.0}, {"b": 1.0}]]
ISSUE_Y = [["x", "y"]]


def small_data(n=6, seed=0):
    def item(rng, lab):
        out = {f"w={lab}{int(rng.integers(0, 2))}": 1.0, "bias": 1.0}
        if rng.random() < 0.5:
            out["num"] = float(np.round(rng.normal(), 3))
        return out

    return abc_sequences(n, seed, item)


def our_weights(crf, names):
    """The fitted weights of ``crf`` in the order of the oracle's feature ``names``."""
    sf, tf = crf.state_features_, crf.transition_features_
    return np.array([sf.get((n[1], n[2]), 0.0) if n[0] == "state" else tf.get((n[1], n[2]), 0.0)
                     for n in names])


def our_objective(crf, names, w_oracle, X, y, c2):
    """Our training objective at the oracle's weight vector ``w_oracle`` (mapped by feature name)."""
    m = crf.model_
    packed = crf._vocab.encode(X)
    yy = crf._encode_labels(y, packed, grow=False)
    w = np.zeros(m.n_params)
    ws, wt, _, _ = m.split(w)
    attrs = np.repeat(np.arange(len(m.attr_ptr) - 1), np.diff(m.attr_ptr))
    value = dict(zip(names, w_oracle))
    for f, (a, k) in enumerate(zip(attrs, m.feat_label)):
        ws[f] = value.get(("state", crf.attributes_[a], crf.classes_[k]), 0.0)
    for i, a in enumerate(crf.classes_):
        for j, b in enumerate(crf.classes_):
            wt[i, j] = value.get(("trans", a, b), 0.0)
    return ChainCLL(m, packed, yy, c2=c2)(w)


@pytest.mark.parametrize("data", ["issue", "small"])
def test_objective_and_weights_equal_crfsuite_model(data):
    X, y = (ISSUE_X, ISSUE_Y) if data == "issue" else small_data()
    c2 = 1.0 if data == "issue" else 0.3
    names = oracle.features(X, y)
    labels = sorted({lab for s in y for lab in s})
    crf = LinearChainCRF(c2=c2, start_end_features=False, epsilon=1e-10, delta=1e-12).fit(X, y)
    assert crf.num_features_ == len(names)
    assert not any(k[0] == "<start>" or k[1] == "<end>" for k in crf.transition_features_)
    rng = np.random.default_rng(1)
    for _ in range(3):  # the objective at arbitrary weights
        w = rng.normal(size=len(names))
        assert our_objective(crf, names, w, X, y, c2) == pytest.approx(
            oracle.objective(names, w, X, y, labels, c2)[0], rel=1e-10)
    w_star = oracle.fit(names, X, y, labels, c2)
    np.testing.assert_allclose(our_weights(crf, names), w_star, atol=1e-6)
    # predictions and marginals of the fitted model are the model's
    for xs in X:
        mo, _ = oracle.marginals(names, w_star, xs, labels)
        got = crf.predict_marginals([xs], output="array")[0]
        order = [crf.classes_.index(lab) for lab in labels]
        np.testing.assert_allclose(got[:, order], mo, atol=1e-6)


def test_issue_example_value():
    """The issue's instance: 3 parameters, and the loss at the optimum is CRFsuite's model's."""
    names = oracle.features(ISSUE_X, ISSUE_Y)
    assert len(names) == 3
    w_star = oracle.fit(names, ISSUE_X, ISSUE_Y, ["x", "y"], 1.0)
    crf = LinearChainCRF(c2=1.0, start_end_features=False).fit(ISSUE_X, ISSUE_Y)
    loss = crf.training_log_[-1]["loss"]
    assert loss == pytest.approx(oracle.objective(names, w_star, ISSUE_X, ISSUE_Y, ["x", "y"], 1.0)[0],
                                 rel=1e-6)
    # with start/end weights (opt-in) the model is a different one; the default is CRFsuite's
    assert LinearChainCRF(c2=1.0, start_end_features=True).fit(ISSUE_X, ISSUE_Y).num_features_ == 7
    assert LinearChainCRF(c2=1.0).fit(ISSUE_X, ISSUE_Y).num_features_ == 3


def test_start_end_off_round_trips(tmp_path):
    X, y = small_data()
    crf = LinearChainCRF(start_end_features=False).fit(X, y)
    crf.save(tmp_path / "m.npz")
    back = LinearChainCRF.load(tmp_path / "m.npz")
    assert not back.model_.start_end
    assert back.predict(X) == crf.predict(X)


@pytest.mark.parametrize("recorded", [True, None])
def test_files_from_before_the_default_changed_keep_start_end(tmp_path, recorded):
    """A file saved with the old default (True recorded) or before the parameter existed (not recorded)
    loads with the start/end weights it was trained with, not today's default."""
    import json

    from structlearn.utils.modelfile import HEADER_KEY, load_model

    X, y = small_data()
    crf = LinearChainCRF(start_end_features=True).fit(X, y)
    crf.save(tmp_path / "m.npz")
    header, arrays = load_model(tmp_path / "m.npz")
    assert header["params"]["start_end_features"] is True
    if recorded is None:
        del header["params"]["start_end_features"]
    with open(tmp_path / "old.npz", "wb") as fh:
        np.savez_compressed(fh, **arrays, **{HEADER_KEY: np.frombuffer(json.dumps(header).encode(), np.uint8)})
    back = LinearChainCRF.load(tmp_path / "old.npz")
    assert back.start_end_features is True and back.model_.start_end
    assert back.predict(X) == crf.predict(X)
    np.testing.assert_array_equal(back.coef_, crf.coef_)
    assert LinearChainCRF.load(tmp_path / "m.npz").get_params() == crf.get_params()


@pytest.mark.parametrize("algorithm", ["ap", "l2sgd"])
def test_online_trainers_keep_boundaries_zero(algorithm):
    X, y = small_data()
    crf = LinearChainCRF(algorithm=algorithm, start_end_features=False, max_iterations=5,
                         random_state=0).fit(X, y)
    _, _, st, en = crf.model_.split(crf.coef_)
    assert not st.any() and not en.any()


def _pycrfsuite_fit(X, y, c2, tmp_path):
    pycrfsuite = require_module("pycrfsuite")
    trainer = pycrfsuite.Trainer(verbose=False)
    for xs, ys in zip(X, y):
        trainer.append(pycrfsuite.ItemSequence(xs), ys)
    trainer.set_params({"c1": 0.0, "c2": c2, "epsilon": 1e-10, "delta": 1e-12, "max_iterations": 1000})
    path = str(tmp_path / "m.crfsuite")
    trainer.train(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    return trainer, tagger


@pytest.mark.parametrize("data", ["issue", "small"])
def test_against_python_crfsuite(data, tmp_path):
    X, y = (ISSUE_X, ISSUE_Y) if data == "issue" else small_data()
    c2 = 1.0 if data == "issue" else 0.3
    trainer, tagger = _pycrfsuite_fit(X, y, c2, tmp_path)
    info = tagger.info()
    crf = LinearChainCRF(c2=c2, start_end_features=False, epsilon=1e-10, delta=1e-12).fit(X, y)
    theirs = {**{k: v for k, v in info.state_features.items()}, **info.transitions}
    ours = {**crf.state_features_, **crf.transition_features_}
    common = set(theirs) | {k for k, v in ours.items() if abs(v) > 1e-9}
    for k in common:
        assert ours.get(k, 0.0) == pytest.approx(theirs.get(k, 0.0), abs=1e-4), k
    loss = trainer.logparser.last_iteration["loss"]
    assert crf.training_log_[-1]["loss"] == pytest.approx(loss, rel=1e-5)
    for xs in X:
        tagger.set(xs)
        pred = tagger.tag()
        assert crf.predict_single(xs) == pred
        marg = crf.predict_marginals_single(xs)
        for t, lab in enumerate(pred):
            assert marg[t][lab] == pytest.approx(tagger.marginal(lab, t), abs=1e-4)


# ------------------------------------------------------------------------------------------ trees
def small_trees(n=5, seed=2):
    rng = np.random.default_rng(seed)
    X, y, parents = [], [], []
    for _ in range(n):
        T = int(rng.integers(1, 6))
        par = [-1] + [int(rng.integers(0, t)) for t in range(1, T)]
        labs = ["PQR"[int(rng.integers(0, 3))] for _ in range(T)]
        X.append([{f"w={lab}{int(rng.integers(0, 2))}": 1.0, "bias": 1.0} for lab in labs])
        y.append(labs)
        parents.append(par)
    return X, y, parents


def test_tree_objective_and_weights_equal_crfsuite013_model():
    from structlearn import TreeCRF

    X, y, parents = small_trees()
    c2 = 0.2
    names = oracle.features(X, y, parents)
    labels = sorted({lab for s in y for lab in s})
    crf = TreeCRF(c2=c2, root_features=False, epsilon=1e-10, delta=1e-12).fit(X, y, parents=parents)
    assert crf.num_features_ == len(names) and crf.root_features_ == {}
    w_star = oracle.fit(names, X, y, labels, c2, parents)
    sf, ef = crf.state_features_, crf.edge_features_
    ours = np.array([sf.get((n[1], n[2]), 0.0) if n[0] == "state" else ef.get((n[1], n[2]), 0.0)
                     for n in names])
    np.testing.assert_allclose(ours, w_star, atol=1e-6)
    assert crf.training_log_[-1]["loss"] == pytest.approx(
        oracle.objective(names, w_star, X, y, labels, c2, parents)[0], rel=1e-9)
    got = crf.sequence_probability(X, y, parents=parents)
    want = [oracle.sequence_probability(names, w_star, xs, ys, labels, [par])
            for xs, ys, par in zip(X, y, parents)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # with root weights (the default) it is a different model
    assert TreeCRF(c2=c2).fit(X, y, parents=parents).num_features_ == len(names) + len(labels)
