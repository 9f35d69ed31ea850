"""sklearn-crfsuite's own test suite (its ``tests/test_crf.py`` and ``tests/conftest.py``), rewritten to run
against :class:`structlearn.LinearChainCRF` in place of ``sklearn_crfsuite.CRF``: the same fixture (with
its UTF-8 ``bytes`` attribute value), the same calls and the same expectations — 39 cases."""
import os
import pickle

import pytest
from sklearn.model_selection import cross_val_score

from structlearn import LinearChainCRF as CRF

ALGORITHMS = ["lbfgs", "l2sgd", "pa", "ap", "arow"]


@pytest.fixture()
def xseq():
    """Ten weather days: walking / shopping / cleaning with weights; one item has no attribute and one
    a bytes value (UTF-8 text)."""
    return [
        {"walk": 1, "shop": 0.5},
        {"walk": 1},
        {"walk": 1, "clean": 0.5},
        {"shop": 0.5, "clean": 0.5},
        {"walk": 0.5, "clean": 1},
        {"clean": 1, "shop": 0.1},
        {"walk": 1, "shop": 0.5},
        {},
        {"clean": 1},
        {"солнце": "не светит".encode("utf8"), "clean": 1},
    ]


@pytest.fixture()
def yseq():
    return ["sunny"] * 3 + ["rainy"] * 3 + ["sunny"] * 2 + ["rainy"] * 2


def _fit(algorithm, xseq, yseq, copies=1, **kw):
    return CRF(algorithm, **kw).fit([xseq] * copies, [yseq] * copies)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fits_its_training_sequence(xseq, yseq, algorithm):
    pred = _fit(algorithm, xseq, yseq).predict([xseq])
    if algorithm != "ap":  # sklearn-crfsuite skips the averaged perceptron here
        assert pred == [yseq]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("use_dev", [True, False])
def test_verbose_training_with_and_without_dev(xseq, yseq, algorithm, use_dev):
    dev = ([xseq], [yseq]) if use_dev else (None, None)
    crf = CRF(algorithm, verbose=True)
    crf.fit(X=[xseq, xseq], y=[yseq, yseq], X_dev=dev[0], y_dev=dev[1])
    if algorithm != "ap":
        assert crf.predict([xseq]) == [yseq]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_marginals_are_distributions_over_the_tagger_labels(xseq, yseq, algorithm):
    crf = _fit(algorithm, xseq, yseq)
    marginals = crf.predict_marginals([xseq])
    assert len(marginals) == 1 and len(marginals[0]) == len(yseq)
    labels = set(crf.tagger_.labels())
    for m in marginals[0]:
        assert isinstance(m, dict) and set(m) == labels
        assert abs(sum(m.values()) - 1.0) < 1e-6


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_predict_before_fit_raises(xseq, algorithm):
    with pytest.raises(Exception):
        CRF(algorithm).predict([xseq])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_score(xseq, yseq, algorithm):
    score = _fit(algorithm, xseq, yseq).score([xseq], [yseq])
    assert score == 1.0 if algorithm != "ap" else score > 0.8


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_pickle_round_trip(xseq, yseq, algorithm):
    crf = _fit(algorithm, xseq, yseq)
    back = pickle.loads(pickle.dumps(crf, protocol=pickle.HIGHEST_PROTOCOL))
    score = back.score([xseq], [yseq])
    assert score == 1.0 if algorithm != "ap" else score > 0.8
    assert back.algorithm == algorithm


def test_model_filename(xseq, yseq, tmp_path):
    path = os.path.join(str(tmp_path), "foo.crfsuite")
    assert not os.path.exists(path)
    crf = CRF(model_filename=path).fit([xseq], [yseq])
    assert os.path.exists(path)  # fit writes the model there
    assert CRF(model_filename=path).score([xseq], [yseq]) == 1.0  # and an unfitted CRF reads it
    back = pickle.loads(pickle.dumps(crf, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.score([xseq], [yseq]) == 1.0


def test_cross_validation(xseq, yseq):
    scores = cross_val_score(CRF(), [xseq] * 20, [yseq] * 20, n_jobs=2, cv=5)
    assert scores.mean() == 1.0


def test_dev_set_without_labels_is_an_error(xseq, yseq):
    with pytest.raises(ValueError):
        CRF().fit([xseq] * 20, [yseq] * 20, [xseq] * 20)


def test_attributes(xseq, yseq):
    crf = CRF()
    for name in ("tagger_", "size_", "classes_", "num_attributes_", "attributes_", "state_features_",
                 "transition_features_"):
        assert getattr(crf, name) is None, name
    crf.fit([xseq] * 20, [yseq] * 20)
    assert crf.tagger_ is not None
    assert crf.size_ > 1000
    assert set(crf.classes_) == {"sunny", "rainy"}
    assert crf.num_attributes_ > 0 and len(crf.attributes_) == crf.num_attributes_
    assert all(crf.attributes_) and "clean" in crf.attributes_
    sf = crf.state_features_
    assert sf and all(isinstance(w, float) for w in sf.values())
    assert all(a in crf.attributes_ and lab in crf.classes_ for a, lab in sf), sf
    tf = crf.transition_features_
    assert tf and all(isinstance(w, float) for w in tf.values())
    assert all(a in crf.classes_ and b in crf.classes_ for a, b in tf), tf
