"""HigherOrderCRF(segments=True): p(y | x) of the fitted estimator equals the formula of its docstring,
scored by brute force over every segmentation from the named features alone
(``tests/oracles/segment_ngram_formula.py``), in both inference forms and for state n-grams."""
import itertools
import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import HigherOrderCRF
from tests.oracles.segment_ngram_formula import Formula, runs

RTOL = 1e-10


def _data(seed, n=8, T=(3, 6), labels="ABC"):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        t = int(rng.integers(T[0], T[1] + 1))
        X.append([{f"w{rng.integers(4)}": 1.0, "bias": 1.0, f"v{rng.integers(2)}": float(rng.uniform(0.5, 2))}
                  for _ in range(t)])
        y.append([labels[int(i)] for i in rng.integers(len(labels), size=t)])
    return X, y


def _fit(order, mode, state_order, seed=0):
    X, y = _data(seed)
    crf = HigherOrderCRF(order=order, segments=True, patterns=mode, state_order=state_order, c2=0.1,
                         max_iterations=15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(X, y)
    return crf, X, y


def _formula(crf):
    return Formula(crf.classes_, crf.state_features_, crf.transition_features_, crf.duration_features_,
                   crf.max_lengths_)


@pytest.mark.parametrize("order,mode,state_order", [(1, "dense", 1), (2, "dense", 1), (2, "sparse", 1),
                                                    (2, "sparse", 2), (3, "sparse", 2), (3, "sparse", 3)])
def test_probability_is_the_formula(order, mode, state_order):
    crf, X, y = _fit(order, mode, state_order)
    cls = list(crf.classes_)
    formula = _formula(crf)
    assert any(len(z) >= 3 for z in crf.transition_features_) == (order >= 2)
    assert max(len(z) for _, z in crf.state_features_) == state_order
    Xt, _ = _data(99, n=3, T=(2, 5))
    for x in Xt + X[:2]:
        # every labelling of x whose runs respect the lengths: p(y | x) against the formula
        ys = [list(lab) for lab in itertools.product(cls, repeat=len(x))
              if all(b - a + 1 <= crf.max_lengths_[k] for a, b, k in runs(lab))]
        got = np.log(crf.sequence_probability([x] * len(ys), ys))
        log_z = formula.log_partition(x)
        want = np.array([formula.log_probability(x, lab, log_z) for lab in ys])
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-12)
        assert math.isclose(math.fsum(np.exp(want)), 1.0, rel_tol=1e-10)


def test_training_objective_is_the_formula():
    # the fitted weights' regularised conditional log-likelihood, written from the formula
    crf, X, y = _fit(2, "sparse", 2, seed=3)
    formula = _formula(crf)
    ll = math.fsum(formula.log_probability(x, lab) for x, lab in zip(X, y))
    got = np.log(crf.sequence_probability(X, y)).sum()
    assert math.isclose(got, ll, rel_tol=RTOL)


def test_segment_attributes_need_segments():
    crf = HigherOrderCRF(order=2, c2=0.1, max_iterations=3)
    X, y = _data(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(X, y)
    with pytest.raises(AttributeError, match="segments=True"):
        crf.duration_features_
    with pytest.raises(AttributeError, match="segments=True"):
        crf.max_lengths_
