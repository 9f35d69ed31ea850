"""Features users of the peers expect: forecasting a new stream (empty prefix), several sampled sequences
in one call, one-hot categorical rows, an absorbing geometric duration, the HHMM's warning for a state EM
gives no posterior mass."""
import numpy as np
import pytest

from structlearn import GeneralHSMM, HiddenSemiMarkovModel, ResidentialTimeHMM, VariableTransitionHMM
from structlearn.models import durations as du
from structlearn.models import emissions as em
from tests.estimators.test_general_hsmm import general_params, random_model


def _hsmm(censoring="right"):
    m = HiddenSemiMarkovModel(2, max_duration=4, censoring=censoring, init_params="")
    m.startprob_ = np.array([0.3, 0.7])
    m.transmat_ = np.array([[0.0, 1.0], [1.0, 0.0]])
    m.duration_ = du.NonParametric(probs=np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]]))
    m.emission_ = em.Gaussian(means=np.array([0.0, 2.0]), variances=np.ones(2))
    m.max_duration_, m.n_features_in_ = 4, 1
    return m


def _check_empty_prefix(m, first):
    pred = m.predict_next(np.zeros((0, 1)), [0])
    np.testing.assert_allclose(pred.start, first[None], rtol=1e-12)
    np.testing.assert_allclose(pred.state, first[None], rtol=1e-12)
    assert m.predict_next(np.zeros((0, 1))).start.shape == (1, first.shape[0])
    # in a batch, the empty sequence's row sits between its neighbours' rows
    X = np.random.default_rng(3).normal(0, 2, (5, 1))
    both = m.predict_next(X, [3, 0, 2])
    a, b = m.predict_next(X[:3]), m.predict_next(X[3:])
    for key in ("start", "state"):
        want = np.vstack([getattr(a, key), first[None], getattr(b, key)])
        np.testing.assert_allclose(getattr(both, key), want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("censoring", ["none", "right", "both"])
def test_predict_next_from_an_empty_prefix_is_the_start_distribution(censoring):
    m = _hsmm(censoring)
    _check_empty_prefix(m, m.startprob_)


@pytest.mark.parametrize("cls", [GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM])
def test_general_predict_next_from_an_empty_prefix_is_the_first_state_law(cls):
    m = random_model(cls, 2, 3, "right", np.random.default_rng(5))
    pi, _ = general_params(m)  # π (M, D) in linear space: P(S_1 = j) = Σ_d π_(j,d)
    _check_empty_prefix(m, pi.sum(axis=1))
