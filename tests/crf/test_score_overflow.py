"""Weights whose sums overflow float64 (a crafted or corrupted model: finite potentials, infinite scores)
are refused with a ValueError naming the sequence, by every decoding and probability method of the CRFs,
instead of labels decoded from ties of +inf, NaN or inf probabilities, or marginals above 1."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import HigherOrderCRF, LinearChainCRF, SemiMarkovCRF, TreeCRF

X = [[{"w": "a", "v": 1.0}, {"w": "b", "v": 2.0}], [{"w": "b", "v": 1.0}, {"w": "a", "v": 0.5}, {"w": "a", "v": 0.1}],
     [{"w": "a", "v": 0.3}, {"w": "b", "v": 1.5}]]
Y = [["A", "B"], ["B", "A", "A"], ["A", "B"]]
PROBABILITIES = ("predict_marginals", "predict_proba_sequence", "kbest", "sequence_probability")


def _fit(est, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(*args, **kw)


def _call(est, name, x, y, **kw):
    if name == "kbest":
        return est.kbest(x, 2, **kw)
    if name == "sequence_probability":
        return est.sequence_probability(x, y, **kw)
    return getattr(est, name)(x, **kw)


def test_linear_chain_refuses_transition_sums_that_overflow():
    est = _fit(LinearChainCRF(max_iterations=3), X, Y)
    good = {name: _call(est, name, X, Y) for name in PROBABILITIES}
    coef = est.coef_.copy()
    est.model_.split(est.coef_)[1][...] = 1e308  # the 2-token sequences sum one, the 3-token one two
    with pytest.raises(ValueError, match=r"sequence 1 \(rows 2:5\): its scores overflow float64"):
        est.predict(X)
    for name in PROBABILITIES:
        with pytest.raises(ValueError, match="sequence 1: its labeling scores overflow float64"):
            _call(est, name, X, Y)
    est.coef_[:] = coef
    assert np.allclose(_call(est, "predict_proba_sequence", X, Y), good["predict_proba_sequence"])


@pytest.mark.parametrize("patterns", ["sparse", "dense"])
def test_higher_order_refuses_pattern_sums_that_overflow(patterns):
    est = _fit(HigherOrderCRF(order=2, max_iterations=3, patterns=patterns), X, Y)
    coef = est.coef_.copy()
    est.model_.split(est.coef_)[1][...] = 1e308
    for name in ("predict",) + PROBABILITIES:
        with pytest.raises(ValueError, match="sequence 0: its labeling scores overflow float64"):
            _call(est, name, X, Y)
    est.coef_[:] = coef
    assert len(est.predict(X)) == 3


def test_semimarkov_predict_refuses_scores_that_overflow():
    est = _fit(SemiMarkovCRF(max_iterations=3), X, Y)
    coef = est.coef_.copy()
    good = est.predict(X)
    est.model_.split(est.coef_)["dur"][0, 0] = 1e308  # two length-1 segments of 'A' sum to +inf
    for call in (est.predict, est.predict_segments):
        with pytest.raises(ValueError, match=r"sequence 1 \(rows 2:5\): its scores overflow float64"):
            call(X)
    # a huge state weight: finite potentials whose prefix sums overflow (inf - inf inside the recursion)
    # are named as an overflow, not as a sequence with no labeling
    est.coef_[:] = coef
    est.model_.split(est.coef_)["state"][0] = 1e308
    one = [[{"w": "a", "v": 1.0}, {"w": "b", "v": 1.0}, {"w": "a", "v": 1.0}]]
    with pytest.raises(ValueError, match=r"sequence 0 \(rows 0:3\): its scores overflow float64"):
        est.predict(one)
    est.coef_[:] = coef
    assert est.predict(X) == good


def test_tree_crf_refuses_edge_sums_that_overflow():
    x = [[{"w": "a"}, {"w": "b"}, {"w": "a"}], [{"w": "b"}, {"w": "a"}]]
    parents = [[-1, 0, 0], [-1, 0]]
    y = [["A", "B", "A"], ["B", "A"]]
    est = _fit(TreeCRF(max_iterations=3), x, y, parents=parents)
    coef = est.coef_.copy()
    est.model_.split(est.coef_)[1][...] = 1e308
    with pytest.raises(ValueError, match="its scores overflow float64"):
        est.predict(x, parents=parents)
    for name in PROBABILITIES:
        with pytest.raises(ValueError, match="tree 0: its labeling scores overflow float64"):
            _call(est, name, x, y, parents=parents)
    est.coef_[:] = coef
    assert len(est.predict(x, parents=parents)) == 2
