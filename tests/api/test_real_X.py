"""Every estimator with continuous emissions refuses complex X and strings of numbers, as hmmlearn does
(scikit-learn's ``check_array(dtype="numeric")``), instead of dropping the imaginary parts with NumPy's
warning or parsing the strings; the error names `X`, asks for real numbers and says what arrived."""
import warnings

import numpy as np
import pytest

import structlearn as sl
from structlearn import hmm
from structlearn.datasets.toy import hhmm_figure1

ESTIMATORS = {
    "GaussianHMM": lambda: hmm.GaussianHMM(2, n_iter=2),
    "GMMHMM": lambda: hmm.GMMHMM(2, n_mix=2, n_iter=2),
    "PoissonHMM": lambda: hmm.PoissonHMM(2, n_iter=2),
    "HiddenMarkovModel": lambda: hmm.HiddenMarkovModel(2, emission="gaussian", n_iter=2),
    "HiddenSemiMarkovModel": lambda: sl.HiddenSemiMarkovModel(2, emission="gaussian", max_duration=4, n_iter=2),
    "GeneralHSMM": lambda: sl.GeneralHSMM(2, max_duration=4, n_iter=2),
    "ResidentialTimeHMM": lambda: sl.ResidentialTimeHMM(2, max_duration=4, n_iter=2),
    "VariableTransitionHMM": lambda: sl.VariableTransitionHMM(2, max_duration=4, n_iter=2),
    "SwitchingHSMM": lambda: sl.SwitchingHSMM(n_regimes=2, n_states=2, max_duration=4, n_iter=2),
    "MultiChannelHSMM": lambda: sl.MultiChannelHSMM(2, max_duration=4, n_iter=2),
    "AdaptiveFactorHSMM": lambda: sl.AdaptiveFactorHSMM(2, max_duration=4, n_iter=2),
    "HierarchicalHMM": lambda: sl.HierarchicalHMM(hhmm_figure1(), "gaussian", init_params="ste", n_iter=2),
}

# counts (so that PoissonHMM takes the real version); one column
_VALUES = [0.0, 1.0, 2.0, 3.0, 1.0, 0.0, 2.0, 4.0, 3.0, 1.0, 2.0, 0.0]
BAD_X = {
    "complex": (np.array(_VALUES, dtype=complex)[:, None] + 0.5j, "complex"),
    "complex without imaginary part": (np.array(_VALUES, dtype=complex)[:, None], "complex"),
    "strings of numbers": ([[str(v)] for v in _VALUES], "strings"),
    "bytes of numbers": (np.array([[str(v).encode()] for v in _VALUES]), "bytes"),
    "object array of strings": (np.array([[str(v)] for v in _VALUES], dtype=object), "str"),
}


@pytest.mark.parametrize("bad", list(BAD_X))
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_fit_refuses_complex_and_string_X(name, bad):
    X, what = BAD_X[bad]
    est = ESTIMATORS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)  # no silent cast on the way
        with pytest.raises(ValueError, match=rf"`X` must hold real numbers; got .*{what}"):
            est.fit(X, [6, 6])


def test_real_check_keeps_numbers():
    """Real dtypes, bools and object arrays of numbers (None: NaN, a missing value) still convert."""
    from structlearn.utils.validation import as_real_float64
    for X, want in [(np.arange(3, dtype=np.int8), [0, 1, 2]), ([True, False], [1, 0]),
                    (np.array([1, 2.5, None], dtype=object), [1, 2.5, np.nan])]:
        np.testing.assert_array_equal(as_real_float64(X), np.array(want, dtype=np.float64))
    with pytest.raises(ValueError, match=r"`X` must hold real numbers; got dtype datetime64"):
        as_real_float64(np.array(["2024-01-01"], dtype="datetime64[D]"))
