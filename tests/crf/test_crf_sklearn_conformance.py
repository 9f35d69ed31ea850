"""scikit-learn conformance of the CRF estimators: ``parametrize_with_checks`` with a documented list of
the checks that structured input makes meaningless, and clone / GridSearchCV / Pipeline on real use."""
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from structlearn import HigherOrderCRF, LinearChainCRF, SemiMarkovCRF, TreeCRF

# scikit-learn's generic checks feed 2-D numeric arrays (one row = one sample) and 1-D label vectors. A
# CRF's sample is a *sequence* (or tree) of items, each a dict attribute -> value: a 2-D array is a list
# of sequences whose items are floats, which the estimators refuse with a ValueError naming the item.
# Every check below fails for that reason alone (or, for the last five, because it expects the
# message scikit-learn's own validation of 2-D arrays gives); the remaining checks (parameters, clone,
# get/set_params, no state set in __init__, not-fitted errors, tags, ...) run and pass.
_ARRAY_INPUT = "structured input: X is a list of sequences of dict items, not a 2-D numeric array"
EXPECTED_FAILED_CHECKS = {name: _ARRAY_INPUT for name in (
    "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input",
    "check_n_features_in_after_fitting", "check_positive_only_tag_during_fit", "check_estimators_dtypes",
    "check_dtype_object", "check_pipeline_consistency", "check_estimators_pickle",
    "check_f_contiguous_array_estimator", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_dict_unchanged", "check_fit_idempotent",
    "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d")}
EXPECTED_FAILED_CHECKS.update({
    "check_complex_data": _ARRAY_INPUT + " (the message names the item, not complex numbers)",
    "check_estimators_empty_data_messages": _ARRAY_INPUT + " (the message names the empty item)",
    "check_estimators_nan_inf": _ARRAY_INPUT + " (NaN values are refused, but as bad items)",
    "check_fit2d_1sample": _ARRAY_INPUT + " (one sequence is valid training data)",
    "check_fit2d_1feature": _ARRAY_INPUT + " (one attribute is valid training data)",
})


@parametrize_with_checks(
    [LinearChainCRF(max_iterations=5), HigherOrderCRF(max_iterations=5), SemiMarkovCRF(max_iterations=5),
     TreeCRF(max_iterations=5)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(2, 6))
        labs = ["AB"[int(rng.integers(0, 2))] for _ in range(T)]
        X.append([{"w": lab.lower() + str(int(rng.integers(0, 2))), "bias": 1.0} for lab in labs])
        y.append(labs)
    return X, y


def test_clone_keeps_parameters_and_drops_fit():
    crf = LinearChainCRF(c2=0.3, start_end_features=False, model_filename=None).fit(*_data())
    twin = clone(crf)
    assert twin.get_params() == crf.get_params()
    assert not hasattr(twin, "coef_") and twin.classes_ is None


def test_grid_search_over_c2():
    X, y = _data()
    search = GridSearchCV(LinearChainCRF(max_iterations=20, epsilon=1e-3),
                          {"c2": [0.01, 1.0], "start_end_features": [True, False]}, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, y)
    assert set(search.best_params_) == {"c2", "start_end_features"}
    assert search.best_estimator_.score(X, y) == search.best_estimator_.score(X, y) > 0.9


class _Lowercase(BaseEstimator, TransformerMixin):
    """Lower-cases the string values of every item (a stateless featurisation step)."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return [[{k: v.lower() if isinstance(v, str) else v for k, v in item.items()} for item in s]
                for s in X]


def test_pipeline_with_a_featuriser():
    X, y = _data()
    upper = [[{k: v.upper() if isinstance(v, str) else v for k, v in item.items()} for item in s] for s in X]
    pipe = Pipeline([("lower", _Lowercase()), ("crf", LinearChainCRF(c2=0.1))]).fit(upper, y)
    direct = LinearChainCRF(c2=0.1).fit(X, y)
    assert pipe.predict(upper) == direct.predict(X)
    assert pipe.score(upper, y) == direct.score(X, y)
    assert clone(pipe).get_params()["crf__c2"] == 0.1
