"""Real data: CoNLL-2000 chunking with the CRFsuite chunking template (slow; runs in CI)."""
import pytest

from structlearn import LinearChainCRF
from structlearn.datasets import load_conll2000
from structlearn.io.conll import featurize
from structlearn.io.templates import get_template
from structlearn.metrics.sequence import conlleval
from tests.conftest import require_data


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
@pytest.mark.parametrize("algorithm, epochs", [("ap", 10), ("pa", 10), ("arow", 10), ("l2sgd", 10)])
def test_online_algorithms_reach_092(conll2000, algorithm, epochs):
    (Xtr, ytr), (Xte, yte) = conll2000
    crf = LinearChainCRF(algorithm=algorithm, max_iterations=epochs, random_state=0).fit(Xtr, ytr)
    f1 = conlleval(yte, crf.predict(Xte)).f1
    assert f1 >= 0.92, (algorithm, f1)
