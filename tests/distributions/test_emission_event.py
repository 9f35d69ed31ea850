"""Event-sequence observations (issue 14; Yu 2010 §4.2 "event sequence model"): the log-density by hand,
the weighted MLE in closed form, the tick grid, recovery and use inside the HSMM (fit, save / load)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from structlearn import HiddenSemiMarkovModel
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em
from structlearn.distributions.emissions.event import NO_EVENT, EventSequence, events_to_grid
from tests.oracles import event_sequence as oracle
from tests.oracles import hsmm as hsmm_oracle

RTOL = 1e-10
RATE = np.array([0.6, 0.05])
PROBS = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])


def _x(values):
    return np.asarray(values, dtype=np.float64)[:, None]


# -- log-density ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("informative", [True, False])
def test_log_density_by_hand(informative):
    X = _x([0, -1, 2, np.nan, -1, 1])
    e = EventSequence(rate=RATE, probs=PROBS, informative_gaps=informative)
    got = e.log_density(e.check_X(X))
    want = np.array(oracle.log_density(X[:, 0].tolist(), RATE.tolist(), PROBS.tolist(), informative))
    np.testing.assert_allclose(got, want, rtol=RTOL)
    # by hand, state 0: mark 0 = log .6 + log .7, gap = log .4
    if informative:
        assert got[0, 0] == pytest.approx(np.log(0.6) + np.log(0.7), rel=RTOL)
        assert got[1, 0] == pytest.approx(np.log(0.4), rel=RTOL)
    else:
        assert got[1].tolist() == [0.0, 0.0]
    assert got[3].tolist() == [0.0, 0.0]


def test_zero_probability_mark_is_minus_inf():
    e = EventSequence(rate=[0.5], probs=[[1.0, 0.0]])
    assert e.log_density(_x([1]))[0, 0] == -np.inf


def test_gap_lengths_carry_the_rate():
    """A gap of g empty ticks scores g·log(1 - λ_j): the inter-event times inform the state."""
    e = EventSequence(rate=RATE, probs=PROBS)
    X = _x([0] + [-1] * 7 + [0])
    total = e.log_density(X).sum(axis=0)
    want = 2 * (np.log(RATE) + np.log(PROBS[:, 0])) + 7 * np.log1p(-RATE)
    np.testing.assert_allclose(total, want, rtol=RTOL)


# -- weighted MLE --------------------------------------------------------------------------------------
def test_weighted_mle_closed_form():
    rng = np.random.default_rng(0)
    x = rng.choice([-1, -1, -1, 0, 1, 2, np.nan], size=60)
    x[:3] = [0, 1, 2]
    w = rng.random((60, 2))
    e = EventSequence(n_marks=3).fit(_x(x), w)
    rate, probs = oracle.weighted_mle(x.tolist(), w.tolist(), 3)
    np.testing.assert_allclose(e.rate, rate, rtol=RTOL)
    np.testing.assert_allclose(e.probs, probs, rtol=RTOL)


def test_weighted_mle_is_a_maximum():
    rng = np.random.default_rng(1)
    x = rng.choice([-1, -1, 0, 1, 2], size=80).astype(float)
    w = rng.random((80, 2))
    X = _x(x)
    e = EventSequence(n_marks=3).fit(X, w)
    best = float((w * e.log_density(X)).sum())
    for _ in range(20):
        r = np.clip(e.rate + rng.normal(0, 0.05, 2), 1e-3, 1 - 1e-3)
        p = np.abs(e.probs + rng.normal(0, 0.05, e.probs.shape))
        other = EventSequence(rate=r, probs=p / p.sum(axis=1, keepdims=True))
        assert float((w * other.log_density(X)).sum()) <= best + 1e-12


def test_fit_keeps_states_without_weight_and_clips_rate():
    e = EventSequence(rate=[0.3, 0.4], probs=[[0.5, 0.5], [0.5, 0.5]], min_rate=1e-3)
    X = _x([-1, -1, -1])
    e.fit(X, np.c_[np.ones(3), np.zeros(3)])
    assert e.rate[0] == pytest.approx(1e-3)  # no event: clipped, not zero
    assert e.rate[1] == 0.4  # no weight: kept
    np.testing.assert_array_equal(e.probs, [[0.5, 0.5], [0.5, 0.5]])  # no event weight: marks kept


@given(st.integers(0, 10 ** 6), st.integers(1, 3), st.integers(1, 4), st.booleans())
def test_property_fit_matches_oracle_and_density_normalises(seed, K, V, informative):
    rng = np.random.default_rng(seed)
    T = 15
    x = rng.integers(-1, V, size=T).astype(float)
    x[0] = rng.integers(0, V)
    w = rng.random((T, K)) + 0.01
    e = EventSequence(n_marks=V, informative_gaps=informative).fit(_x(x), w)
    rate, probs = oracle.weighted_mle(x.tolist(), w.tolist(), V)
    np.testing.assert_allclose(e.rate, np.clip(rate, 1e-10, 1 - 1e-10), rtol=RTOL)
    np.testing.assert_allclose(e.probs, probs, rtol=RTOL)
    if informative:  # Σ over the V + 1 outcomes of a tick is one
        ld = e.log_density(_x(np.arange(-1, V)))
        np.testing.assert_allclose(np.exp(ld).sum(axis=0), 1.0, rtol=RTOL)


# -- the tick grid -------------------------------------------------------------------------------------
def test_events_to_grid_numbers_and_oracle():
    t = np.array([13.0, 0.5, 47.0, 21.0])
    m = np.array([1, 0, 2, 1])
    X = events_to_grid(t, m, 10.0, start=0.0, end=59.0)
    assert X.shape == (6, 1)
    want = np.full(6, float(NO_EVENT))
    for tick, mark in oracle.grid(t, m, 10.0, 0.0).items():
        want[tick] = mark
    np.testing.assert_array_equal(X[:, 0], want)


def test_events_to_grid_datetimes():
    t = np.array(["2011-11-28 10:00:00", "2011-11-28 10:00:25", "2011-11-28 10:01:00"], dtype="datetime64[s]")
    X = events_to_grid(t, [4, 2, 3], np.timedelta64(10, "s"))
    np.testing.assert_array_equal(X[:, 0], [4, -1, 2, -1, -1, -1, 3])
    np.testing.assert_array_equal(events_to_grid(t, [4, 2, 3], 10)[:, 0], X[:, 0])


def test_events_to_grid_collisions():
    t, m = [0.0, 1.0, 2.0, 15.0], [0, 1, 2, 3]
    with pytest.raises(ValueError, match="share a tick"):
        events_to_grid(t, m, 10.0)
    assert events_to_grid(t, m, 10.0, on_collision="first")[:, 0].tolist() == [0.0, 3.0]
    assert events_to_grid(t, m, 10.0, on_collision="last")[:, 0].tolist() == [2.0, 3.0]


@pytest.mark.parametrize("kwargs, match", [
    ({"timestamps": [0.0, 1.0], "marks": [0]}, "same length"),
    ({"timestamps": [0.0], "marks": [-1]}, "marks"),
    ({"timestamps": [0.0], "marks": [0.5]}, "marks"),
    ({"timestamps": [0.0], "marks": [0], "resolution": 0.0}, "resolution"),
    ({"timestamps": [5.0], "marks": [0], "start": 6.0, "end": 9.0}, "outside the grid"),
    ({"timestamps": [5.0], "marks": [0], "on_collision": "drop"}, "on_collision"),
    ({"timestamps": [], "marks": []}, "no events"),
])
def test_events_to_grid_errors(kwargs, match):
    kwargs.setdefault("resolution", 1.0)
    with pytest.raises(ValueError, match=match):
        events_to_grid(**kwargs)


# -- checks --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("X, match", [
    (np.zeros((3, 2)), "one column"),
    (_x([0, -2]), "whole numbers >= -1"),
    (_x([0, 0.5]), "whole numbers >= -1"),
    (_x([0, 3]), "outside 0..2"),
])
def test_check_X_errors(X, match):
    with pytest.raises(ValueError, match=match):
        EventSequence(rate=RATE, probs=PROBS).check_X(X)


@pytest.mark.parametrize("kwargs, match", [
    ({"rate": [1.5, 0.1], "probs": PROBS}, "rate"),
    ({"rate": [0.5], "probs": PROBS}, "K = 1"),
    ({"rate": RATE, "probs": [[0.5, 0.6], [0.5, 0.5]]}, "sum to 1"),
    ({"rate": RATE, "probs": PROBS, "n_marks": 4}, "n_marks=4"),
    ({"n_marks": 0}, "n_marks"),
    ({"informative_gaps": "yes"}, "informative_gaps"),
    ({"min_rate": 0.7}, "min_rate"),
])
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EventSequence(**kwargs)


def test_sample_frequencies():
    e = EventSequence(rate=RATE, probs=PROBS)
    x = e.sample(np.zeros(20000, dtype=np.int64), random_state=0)[:, 0]
    ev = x >= 0
    assert ev.mean() == pytest.approx(RATE[0], abs=0.015)
    np.testing.assert_allclose(np.bincount(x[ev].astype(int), minlength=3) / ev.sum(), PROBS[0], atol=0.02)
    assert set(np.unique(x)) <= {-1.0, 0.0, 1.0, 2.0}


def test_state_round_trip_and_parameter_count():
    e = EventSequence(rate=RATE, probs=PROBS, informative_gaps=False, min_rate=1e-4)
    arrays, config = e.get_state()
    back = EventSequence(**config).set_state(arrays)
    np.testing.assert_array_equal(back.rate, RATE)
    assert back.informative_gaps is False and back.n_marks == 3
    assert e.n_parameters() == 2 * 2 and EventSequence(rate=RATE, probs=PROBS).n_parameters() == 2 * 2 + 2


# -- inside the HSMM -----------------------------------------------------------------------------------
def _true_model():
    m = HiddenSemiMarkovModel(2, duration=du.Poisson(lam=[6.0, 12.0]), emission=EventSequence(RATE, PROBS),
                              max_duration=30, init_params="", params="stde")
    m.startprob_ = np.array([0.5, 0.5])
    m.transmat_ = np.array([[0.0, 1.0], [1.0, 0.0]])
    m.duration_ = du.Poisson(lam=[6.0, 12.0])
    m.emission_ = EventSequence(RATE, PROBS)
    m.max_duration_ = 30
    m.n_features_in_ = 1
    return m


@pytest.mark.parametrize("censoring", ["none", "right", "both"])
def test_hsmm_log_likelihood_matches_brute_force(censoring):
    m = _true_model()
    m.censoring = censoring
    m.duration_ = du.NonParametric(np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]]))
    m.max_duration_ = 3
    X = _x([0, -1, -1, 2, -1, 1])
    log_b = m.emission_.log_density(X)
    want = hsmm_oracle.posteriors(m.startprob_, m.transmat_, m.duration_.pmf(3), log_b, censoring)
    assert m.score(X) == pytest.approx(want["loglik"], rel=RTOL)
    np.testing.assert_allclose(m.predict_proba(X), want["gamma"], rtol=1e-9, atol=1e-12)


def test_hsmm_recovers_event_rates_and_marks():
    X, states, _ = _true_model().sample(4000, random_state=3)
    model = HiddenSemiMarkovModel(2, duration="poisson", emission=EventSequence(n_marks=3), max_duration=30,
                                  n_iter=60, tol=1e-6, random_state=0).fit(X)
    h = np.asarray(model.monitor_.history)
    assert np.all(np.diff(h) >= -1e-7 * np.abs(h[1:]))  # EM monotone
    order = np.argsort(-model.emission_.rate)
    np.testing.assert_allclose(model.emission_.rate[order], RATE, atol=0.03)
    # the marks against their maximum-likelihood estimate with the true states (state 1 has ~120 events)
    known = EventSequence(n_marks=3).fit(X, np.eye(2)[states])
    np.testing.assert_allclose(model.emission_.probs[order], known.probs, atol=0.06)
    np.testing.assert_allclose(np.sort(model.duration_.lam), [6.0, 12.0], rtol=0.15)
    acc = np.mean(model.predict(X) == order[states]) if order[0] == 0 else np.mean(
        model.predict(X) == 1 - states)
    assert max(acc, 1 - acc) > 0.9


def test_hsmm_save_load(tmp_path, monkeypatch):
    # model files name families of structlearn.distributions.emissions; until EventSequence is exported there,
    # register it for this test (no effect once it is)
    monkeypatch.setattr(em, "EventSequence", EventSequence, raising=False)
    X, _, _ = _true_model().sample(600, random_state=1)
    emission = EventSequence(n_marks=3, informative_gaps=False)
    model = HiddenSemiMarkovModel(2, duration="poisson", emission=emission, max_duration=30, n_iter=5,
                                  tol=1.0, random_state=0).fit(X)
    model.save(tmp_path / "m.npz")
    back = HiddenSemiMarkovModel.load(tmp_path / "m.npz")
    assert isinstance(back.emission_, EventSequence) and back.emission_.informative_gaps is False
    np.testing.assert_array_equal(back.emission_.rate, model.emission_.rate)
    assert back.score(X) == pytest.approx(model.score(X), rel=1e-12)
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
