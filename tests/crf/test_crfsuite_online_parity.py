"""ap, pa and arow against CRFsuite itself (python-crfsuite) on a CoNLL-2000 subset: the same attributes and
parameters, CRFsuite's instance order (``shuffle="crfsuite"``, glibc ``rand()`` from seed 1 on both sides),
and the same arithmetic in the same order, so the weights are equal to the last bit and so are the tagged
sequences.

CRFsuite draws its order from the process's ``rand()`` stream and never seeds it: each CRFsuite run below
is preceded by ``srand(1)`` so that it starts where a fresh process starts.
"""

import numpy as np
import pytest

from structlearn import LinearChainCRF
from tests.crf._crfsuite import crfsuite_train as _crfsuite
from tests.crf._crfsuite import libc as _libc
from tests.crf._data import conll2000_subset

N_TRAIN, N_TEST, EPOCHS = 150, 60, 8


@pytest.fixture(scope="module")
def conll():
    return conll2000_subset(N_TRAIN, N_TEST)


def _assert_same_weights(ours, theirs):
    # CRFsuite's file keeps only the non-zero weights; a feature missing there has weight 0
    for ours_w, theirs_w in ((ours.state_features_, theirs.state_features_),
                             (ours.transition_features_, theirs.transition_features_)):
        assert set(theirs_w) <= set(ours_w)
        assert ours_w == {k: theirs_w.get(k, 0.0) for k in ours_w}


CASES = [
    ("ap", {}, {}),
    ("pa", {"type": 0}, {"pa_type": 0}),
    ("pa", {"type": 1}, {"pa_type": 1}),
    ("pa", {"type": 2, "c": 0.5}, {"pa_type": 2, "c": 0.5}),
    ("pa", {"type": 1, "error_sensitive": 0, "averaging": 0}, {"error_sensitive": False, "averaging": False}),
    ("arow", {}, {}),
    ("arow", {"variance": 0.5, "gamma": 2.0}, {"variance": 0.5, "gamma": 2.0}),
]


@pytest.mark.parametrize("algorithm, theirs_params, ours_params", CASES,
                         ids=[f"{a}-{'-'.join(f'{k}{v}' for k, v in p.items()) or 'default'}" for a, p, _ in CASES])
def test_weights_and_tags_equal_crfsuite(tmp_path, conll, algorithm, theirs_params, ours_params):
    # the same arithmetic in the same order (CRFsuite's update order, sums along the paths, averaging
    # w - (1/c)·ws): exact equality, no tolerance
    Xtr, ytr, Xte = conll
    theirs, theirs_tags, theirs_epochs = _crfsuite(tmp_path, algorithm, {"max_iterations": EPOCHS, **theirs_params},
                                                   Xtr, ytr, Xte)
    ours = LinearChainCRF(algorithm=algorithm, max_iterations=EPOCHS, **ours_params).fit(Xtr, ytr)
    assert ours.classes_ == theirs.classes_
    assert ours.n_iter_ == theirs_epochs
    _assert_same_weights(ours, theirs)
    assert ours.predict(Xte) == theirs_tags


@pytest.mark.parametrize("algorithm, theirs_params, ours_params",
                         [("ap", {"epsilon": 0.02}, {"epsilon": 0.02}),
                          ("pa", {"epsilon": 0.3}, {"epsilon": 0.3}),
                          ("arow", {"epsilon": 0.3}, {"epsilon": 0.3})])
def test_stopping_test_is_crfsuites(tmp_path, conll, algorithm, theirs_params, ours_params):
    # ap: Σ (token errors / length) / sequences < epsilon; pa: mean cost < epsilon; arow: mean cost <= epsilon
    Xtr, ytr, Xte = conll
    theirs, theirs_tags, theirs_epochs = _crfsuite(tmp_path, algorithm, {"max_iterations": 50, **theirs_params},
                                                   Xtr, ytr, Xte)
    ours = LinearChainCRF(algorithm=algorithm, max_iterations=50, **ours_params).fit(Xtr, ytr)
    assert theirs_epochs < 50
    assert ours.n_iter_ == theirs_epochs and ours.converged_
    _assert_same_weights(ours, theirs)


def test_numpy_shuffle_trains_and_differs(conll):
    Xtr, ytr, _ = conll
    crfsuite_order = LinearChainCRF(algorithm="pa", max_iterations=2, random_state=0).fit(Xtr, ytr)
    numpy_order = LinearChainCRF(algorithm="pa", max_iterations=2, random_state=0, shuffle="numpy").fit(Xtr, ytr)
    again = LinearChainCRF(algorithm="pa", max_iterations=2, random_state=0, shuffle="numpy").fit(Xtr, ytr)
    assert numpy_order.n_iter_ == 2 and np.all(np.isfinite(numpy_order.coef_))
    np.testing.assert_array_equal(numpy_order.coef_, again.coef_)
    assert not np.array_equal(numpy_order.coef_, crfsuite_order.coef_)


def test_random_state_seeds_the_crfsuite_order(conll):
    # None is the seed 1 of a process that never called srand; an int is the seed itself
    Xtr, ytr, _ = conll
    fit = [LinearChainCRF(algorithm="ap", max_iterations=2, random_state=rs).fit(Xtr, ytr).coef_
           for rs in (None, 1, 2)]
    np.testing.assert_array_equal(fit[0], fit[1])
    assert not np.array_equal(fit[0], fit[2])


def test_bad_shuffle_is_an_error_naming_it():
    with pytest.raises(ValueError, match="shuffle"):
        LinearChainCRF(algorithm="ap", shuffle="bogus").fit([[{"a": 1.0}]], [["A"]])
