"""``l2sgd`` reproduces CRFsuite's trainer (python-crfsuite, the C library itself) on a CoNLL-2000 subset: the
calibrated rate η0, every epoch's objective, the number of epochs and the stopping test, the weights and the
tagged sequences.

Both sides see the same attributes (the chunking template) and CRFsuite's instance orders: CRFsuite never seeds
``rand()``, so each CRFsuite run here follows ``srand(1)`` — the stream of a fresh process, which
``shuffle="crfsuite"`` replays (``random_state=None``). The weights agree to rounding: the two
implementations add the same terms in different orders (log-space vs scaled forward–backward, one fused
gradient pass vs observed then expected counts), errors of order 1e-16 relative per operation that stay
absolute, bounded by the weights' scale (on 1 000 sentences, 50 epochs: max |Δw| = 2.5e-13 · max |w|).
"""
import ctypes
import ctypes.util
import re
import sys

import numpy as np
import pytest

from structlearn import LinearChainCRF
from structlearn.crf import online_trainers
from structlearn.crf.crfsuite_model import read_crfsuite_model_bytes
from tests.conftest import require_module
from tests.crf._data import conll2000_subset

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CRFsuite's rand() is glibc's")

N_TRAIN, N_TEST = 150, 100


@pytest.fixture(scope="module")
def conll():
    return conll2000_subset(N_TRAIN, N_TEST)


def crfsuite_l2sgd(tmp_path, X, y, params):
    """CRFsuite's l2sgd on (X, y) from a fresh rand() stream: (CRFsuiteModel, log text, tagger)."""
    pycrfsuite = require_module("pycrfsuite")
    trainer = pycrfsuite.Trainer(algorithm="l2sgd", verbose=False)
    for xs, ys in zip(X, y):
        trainer.append(xs, ys)
    trainer.set_params(params)
    path = str(tmp_path / "crfsuite.model")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.srand(ctypes.c_uint(1))
    trainer.train(path)
    with open(path, "rb") as fh:
        model = read_crfsuite_model_bytes(fh.read())
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    return model, "".join(trainer.logparser.log), tagger


def weight_pairs(model, crf):
    """(CRFsuite's weights, ours) over CRFsuite's features, and our non-zero features CRFsuite lacks."""
    ours_state, ours_trans = crf.state_features_, crf.transition_features_
    ref, got = [], []
    for a, k, w in model.state:
        ref.append(w)
        got.append(ours_state.get((model.attributes[int(a)], model.labels[int(k)]), 0.0))
    for i, j, w in model.trans:
        ref.append(w)
        got.append(ours_trans.get((model.labels[int(i)], model.labels[int(j)]), 0.0))
    theirs = {(model.attributes[int(a)], model.labels[int(k)]) for a, k, _ in model.state}
    theirs |= {(model.labels[int(i)], model.labels[int(j)]) for i, j, _ in model.trans}
    extra = (set(ours_state) | set(ours_trans)) - theirs
    return np.array(ref), np.array(got), extra


@pytest.mark.parametrize("params", [
    {"c2": 1.0, "max_iterations": 12},                               # stops at the iteration limit
    {"c2": 0.5, "period": 3, "delta": 1e-3, "max_iterations": 200},  # stops on the improvement test
], ids=["max_iterations", "stopping_test"])
def test_l2sgd_is_crfsuites(tmp_path, conll, params):
    Xtr, ytr, Xte = conll
    model, log, tagger = crfsuite_l2sgd(tmp_path, Xtr, ytr, params)
    crf = LinearChainCRF(algorithm="l2sgd", **params).fit(Xtr, ytr)

    # the calibrated rate (CRFsuite logs it with %f)
    eta = re.search(r"Best learning rate \(eta\): ([0-9.]+)", log).group(1)
    assert f"{crf.training_log_[0]['eta0']:f}" == eta
    # the epochs run, and why they ended
    epochs = re.findall(r"\*\*\*\*\* Epoch #(\d+) \*\*\*\*\*", log)
    assert crf.n_iter_ == len(epochs)
    stopped = "SGD terminated with the stopping criteria" in log
    assert crf.converged_ == stopped
    assert stopped == (params["max_iterations"] == 200)
    # every epoch's objective, as CRFsuite logs it (%f)
    logged = [float(x) for x in re.findall(r"^Loss: ([0-9.]+)$", log, flags=re.M)][:len(epochs)]
    assert [f"{e['loss']:f}" for e in crf.training_log_] == [f"{x:f}" for x in logged]
    # the weights (those of the best epoch, as CRFsuite keeps): equal up to the order of the additions
    ref, got, extra = weight_pairs(model, crf)
    assert not extra
    scale = np.max(np.abs(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * scale)
    # and so the tagged test sequences
    assert crf.predict(Xte) == [tagger.tag(x) for x in Xte]


def test_shuffle_numpy(conll):
    Xtr, ytr, _ = conll
    X, y = Xtr[:60], ytr[:60]
    kw = dict(algorithm="l2sgd", max_iterations=4, random_state=0)
    crfsuite_order = LinearChainCRF(**kw).fit(X, y).coef_
    a = LinearChainCRF(**kw, shuffle="numpy").fit(X, y)
    b = LinearChainCRF(**kw, shuffle="numpy").fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)   # numpy's orders, drawn from random_state
    assert not np.array_equal(a.coef_, crfsuite_order)
    assert a.n_iter_ == 4 and np.all(np.isfinite(a.coef_)) and a.score(X, y) > 0.9


def test_bad_shuffle_raises(conll):
    Xtr, ytr, _ = conll
    with pytest.raises(ValueError, match="shuffle"):
        LinearChainCRF(algorithm="l2sgd", max_iterations=2, shuffle="python").fit(Xtr[:10], ytr[:10])
    with pytest.raises(ValueError, match=r"shuffle: expected one of \('crfsuite', 'numpy'\), got 'python'"):
        online_trainers.check_shuffle("python")


@pytest.mark.parametrize("random_state, seed", [(None, 1), (7, 7)])
def test_crfsuite_seed(random_state, seed):
    assert online_trainers.crfsuite_seed(random_state) == seed
    rs = np.random.RandomState(3)
    assert online_trainers.crfsuite_seed(rs) == np.random.RandomState(3).randint(2**31)
