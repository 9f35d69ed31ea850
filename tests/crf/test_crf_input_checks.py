"""LinearChainCRF.fit says what is wrong with its input instead of training on it silently: labels that
are None, attribute values too large for L-BFGS to train on, and a line search that fails at once."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import LinearChainCRF


def _separable(scale, n_seq=20, seed=0):
    """Items whose indicator attribute gives the label away, plus a numeric attribute 'num' of magnitude
    up to ``scale``."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_seq):
        labels = ["A" if rng.random() < 0.6 else "B" for _ in range(5)]
        X.append([{"w=" + lab: 1.0, "num": scale * rng.random()} for lab in labels])
        y.append(labels)
    return X, y


def test_none_label_is_refused_naming_sequence_and_position():
    X = [[{"a": 1.0}, {"b": 1.0}], [{"a": 1.0}, {"b": 1.0}]]
    y = [["A", "B"], ["A", None]]  # str(None) made it a class 'None' of its own
    with pytest.raises(ValueError, match=r"`y\[1\]\[1\]` \(sequence 1, position 1\) is None"):
        LinearChainCRF(max_iterations=5).fit(X, y)


def test_badly_scaled_attribute_value_warns_with_attribute_and_value():
    X, y = _separable(1e6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iterations=5 keeps the test short
        with pytest.warns(UserWarning, match=r"attribute 'num' has the value 9\d{5}.*sequence \d+, item \d.*"
                                             r"above 10000.*[Ss]tandardise.*log"):
            LinearChainCRF(max_iterations=5).fit(X, y)


def test_values_of_moderate_scale_train_without_a_scale_warning():
    X, y = _separable(1e4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all: neither scale nor convergence
        est = LinearChainCRF().fit(X, y)
    assert est.converged_
    assert all(p == g for p, g in zip(est.predict(X), y))


def test_line_search_failure_is_not_reported_as_an_iteration_limit():
    # at 1e10 the first line search fails: the warning said "increase `max_iterations`"
    X, y = _separable(1e10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = LinearChainCRF().fit(X, y)
    assert not est.converged_
    conv = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(conv) == 1
    assert "line-search" in conv[0] and "max_iterations" not in conv[0]
    assert "standardise" in conv[0]
    assert any("attribute 'num'" in str(w.message) for w in caught)
