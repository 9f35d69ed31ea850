"""CRFsuite's binary model files (``lCRF``): read what python-crfsuite writes, write what it reads —
identical predictions and marginals, byte-identical round trips."""
import numpy as np
import pytest

from structlearn import LinearChainCRF
from structlearn.crf.crfsuite_model import (hashlittle, read_crfsuite_model_bytes,
                                              write_crfsuite_model_bytes)
from tests.cli._cli import blocks, run
from tests.conftest import require_module


def _data(n=25, seed=0):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(1, 8))
        labs = [["B-NP", "I-NP", "O", "B-VP"][int(rng.integers(0, 4))] for _ in range(T)]
        X.append([{"w": "abcdefgh"[int(rng.integers(0, 8))] * int(rng.integers(1, 15)), "bias": 1.0,
                   "x": float(np.round(rng.normal(), 3)), "pre": {"p": lab[:1]}} for lab in labs])
        y.append(labs)
    return X, y


def _pycrfsuite_model(tmp_path, X, y):
    pycrfsuite = require_module("pycrfsuite")
    trainer = pycrfsuite.Trainer(verbose=False)
    for xs, ys in zip(X, y):
        trainer.append(xs, ys)
    trainer.set_params({"c1": 0.05, "c2": 0.1, "max_iterations": 60})
    path = str(tmp_path / "py.crfsuite")
    trainer.train(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    return path, tagger


def _same_outputs(est, tagger, X):
    marg = est.predict_marginals(X, output="array")
    for xs, m in zip(X, marg):
        tagger.set(xs)
        pred = tagger.tag()
        assert est.predict_single(xs) == pred
        assert est.sequence_probability([xs], [pred])[0] == pytest.approx(tagger.probability(pred),
                                                                          rel=1e-9)
        theirs = np.array([[tagger.marginal(str(c), t) for c in est.classes_] for t in range(len(xs))])
        np.testing.assert_allclose(m, theirs, rtol=1e-9, atol=1e-12)


def test_hashlittle_known_answers():
    """lookup3's published test values (Bob Jenkins' driver)."""
    assert hashlittle(b"") == 0xDEADBEEF
    assert hashlittle(b"Four score and seven years ago") == 0x17770551
    assert hashlittle(b"Four score and seven years ago", 1) == 0xCD628161


def test_read_python_crfsuite_model(tmp_path):
    X, y = _data()
    path, tagger = _pycrfsuite_model(tmp_path, X, y)
    est = LinearChainCRF.load(path)
    assert not est.model_.start_end
    assert est.state_features_ == pytest.approx(tagger.info().state_features, abs=1e-6)  # %f text
    assert est.transition_features_ == pytest.approx(tagger.info().transitions, abs=1e-6)
    _same_outputs(est, tagger, X)
    # reading and writing again gives the same bytes
    data = open(path, "rb").read()
    assert write_crfsuite_model_bytes(read_crfsuite_model_bytes(data)) == data
    est.save(tmp_path / "again.crfsuite", format="crfsuite")
    assert LinearChainCRF.load(tmp_path / "again.crfsuite").predict(X) == est.predict(X)


@pytest.mark.parametrize("algorithm", ["lbfgs", "ap"])
def test_written_model_opens_in_python_crfsuite(tmp_path, algorithm):
    pycrfsuite = require_module("pycrfsuite")
    X, y = _data(seed=1)
    y = [[{"B-NP": 0, "I-NP": 1, "O": 2, "B-VP": 3}[lab] for lab in s] for s in y]  # int labels
    est = LinearChainCRF(algorithm, c1=0.05 if algorithm == "lbfgs" else 0.0, c2=0.1,
                         start_end_features=False, max_iterations=30, epsilon=1e-2).fit(X, y)
    path = str(tmp_path / "ours.crfsuite")
    est.save(path, format="crfsuite")
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    assert sorted(tagger.labels()) == sorted(map(str, est.classes_))
    back = LinearChainCRF.load(path)
    _same_outputs(back, tagger, X)
    assert [list(map(str, p)) for p in est.predict(X)] == back.predict(X)
    assert tagger.info().header["size"] == str(est.size_)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_models_crfsuite_cannot_hold_are_refused(tmp_path):
    X, y = _data()
    with pytest.raises(ValueError, match="start/end weights"):
        LinearChainCRF(max_iterations=5, start_end_features=True).fit(X, y).save(tmp_path / "a", format="crfsuite")
    LinearChainCRF(max_iterations=5).fit(X, y).save(tmp_path / "a", format="crfsuite")   # the default can
    with pytest.raises(ValueError, match="forbidden"):
        LinearChainCRF(forbidden_transitions="BIO",
                       max_iterations=5).fit(X, y).save(tmp_path / "a", format="crfsuite")
    with pytest.raises(ValueError, match="format"):
        LinearChainCRF(max_iterations=5).fit(X, y).save(tmp_path / "a", format="crf")
    (tmp_path / "bad.crfsuite").write_bytes(b"lCRF" + b"\0" * 10)
    with pytest.raises(ValueError, match="bad.crfsuite"):
        LinearChainCRF.load(tmp_path / "bad.crfsuite")


def test_cli_tags_with_a_crfsuite_model(tmp_path, capsys):
    X, y = _data()
    path, tagger = _pycrfsuite_model(tmp_path, X, y)
    data = tmp_path / "test.txt"
    from structlearn.io import write_crfsuite

    write_crfsuite(X, y, str(data))
    rc, out, err = run(capsys, "tag", "-p", "-i", "-m", path, data)
    assert rc == 0, err
    for xs, block in zip(X, blocks(out)):
        tagger.set(xs)
        pred = tagger.tag()
        assert block[0] == f"@probability\t{tagger.probability(pred):.6f}"
        assert [line.rsplit(":", 1)[0] for line in block[1:]] == pred
        for t, line in enumerate(block[1:]):
            assert float(line.rsplit(":", 1)[1]) == pytest.approx(tagger.marginal(pred[t], t), abs=1e-6)


def test_io_functions(tmp_path):
    from structlearn.io.crfsuite_model import read_crfsuite_model, write_crfsuite_model

    X, y = _data()
    est = LinearChainCRF(c2=0.1, start_end_features=False).fit(X, y)
    write_crfsuite_model(est, tmp_path / "m.crfsuite")
    back = read_crfsuite_model(tmp_path / "m.crfsuite")
    assert back.predict(X) == est.predict(X)
    np.testing.assert_allclose(np.concatenate(back.predict_marginals(X, output="array")),
                               np.concatenate(est.predict_marginals(X, output="array")), rtol=1e-12)
    est.save(tmp_path / "m.npz")
    with pytest.raises(ValueError, match="lCRF"):
        read_crfsuite_model(tmp_path / "m.npz")
