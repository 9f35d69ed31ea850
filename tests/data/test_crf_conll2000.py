"""Real data: CoNLL-2000 chunking with the CRFsuite chunking template (slow; runs in CI)."""
import numpy as np
import pytest

from structlearn import LinearChainCRF
from structlearn.datasets import load_conll2000
from structlearn.io.conll import featurize
from structlearn.io.templates import get_template
from structlearn.metrics.sequence import conlleval
from tests.conftest import require_data
from tests.crf._crfsuite import crfsuite_train


@pytest.fixture(scope="module")
def conll2000():
    path = require_data("conll2000")
    data = load_conll2000(data_home=path.parent, download_if_missing=False)
    tpl = get_template("chunking")
    return featurize(data.train, tpl), featurize(data.test, tpl)


@pytest.mark.slow
def test_lbfgs_matches_crfsuite_f1(conll2000):
    (Xtr, ytr), (Xte, yte) = conll2000
    crf = LinearChainCRF(c1=0.0, c2=1.0).fit(Xtr, ytr)
    f1 = conlleval(yte, crf.predict(Xte)).f1
    # python-crfsuite on the same attributes: 166 iterations, chunk F1 0.9361
    assert f1 >= 0.936, f1
    assert crf.converged_


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("algorithm", ["ap", "pa", "arow", "l2sgd"])
def test_online_algorithms_as_crfsuite(conll2000, tmp_path, algorithm):
    # 10 epochs of each online trainer on the whole of CoNLL-2000, python-crfsuite beside it (CRFsuite's
    # order, fresh rand() stream): the same tags (ap/pa/arow: equal weights, so every sequence; l2sgd: weights
    # equal to rounding). Measured, both sides alike, every test sequence the same: chunk F1 ap 0.9343, pa 0.9351,
    # arow 0.9171, l2sgd 0.9337.
    (Xtr, ytr), (Xte, yte) = conll2000
    crf = LinearChainCRF(algorithm=algorithm, max_iterations=10).fit(Xtr, ytr)
    pred = crf.predict(Xte)
    _, theirs, epochs = crfsuite_train(tmp_path, algorithm, {"max_iterations": 10}, Xtr, ytr, Xte)
    same = np.mean([list(a) == list(b) for a, b in zip(pred, theirs)])
    assert epochs == crf.n_iter_ == 10
    assert same == 1.0 if algorithm != "l2sgd" else same >= 0.999, (algorithm, same)
    f1 = conlleval(yte, pred).f1
    assert f1 == conlleval(yte, theirs).f1 or algorithm == "l2sgd"
    assert f1 >= 0.915, (algorithm, f1)
