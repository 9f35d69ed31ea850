"""The adaptive-factor HSMM (issue 14; Yu 2010 §4 "adaptive factor HSMM"): the stretched duration law and
the local-level likelihood against oracles, factors frozen = the plain HSMM filter (and its brute-force
prefix filter), tracking a drift, errors, save / load."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from structlearn import HiddenSemiMarkovModel
from structlearn.hsmm.adaptive import AdaptiveFactorHSMM
from structlearn.hsmm import _adaptive_em as learn
from structlearn.hsmm import _adaptive_factor as af
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em
from structlearn.distributions.emissions.event import EventSequence
from tests.oracles import adaptive_factor as oracle
from tests.oracles import hsmm as hsmm_oracle

RTOL = 1e-10


# -- pieces against oracles ----------------------------------------------------------------------------
@given(st.integers(0, 10 ** 6), st.integers(1, 12), st.floats(0.3, 3.0))
def test_stretched_pmf_matches_oracle(seed, D, kappa):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(D), size=2).T  # (D, K)
    got = np.exp(af.stretched_log_pmf(np.log(p), kappa))
    for k in range(2):
        np.testing.assert_allclose(got[:, k], oracle.stretched_pmf(p[:, k].tolist(), kappa), rtol=1e-9,
                                   atol=1e-15)


def test_stretch_one_is_identity_and_scales_the_mean():
    lp = du.Poisson(lam=[10.0, 20.0]).log_pmf(120)
    np.testing.assert_array_equal(af.stretched_log_pmf(lp, 1.0), lp)
    d = np.arange(1, 121)
    mean = d @ np.exp(lp)
    for kappa in (0.7, 1.5):
        np.testing.assert_allclose(d @ np.exp(af.stretched_log_pmf(lp, kappa)), kappa * mean, rtol=0.06)


@given(st.integers(0, 10 ** 6), st.floats(0.0, 0.5))
def test_walk_log_likelihood_matches_dense_gaussian(seed, q):
    rng = np.random.default_rng(seed)
    meas = []
    for n in (5, 3):
        z = rng.normal(0, 0.5, n)
        z[rng.random(n) < 0.3] = np.nan
        meas.append((z, rng.uniform(0.05, 0.5, n)))
    want = oracle.local_level_loglik([m[0].tolist() for m in meas], [m[1].tolist() for m in meas], q)
    assert learn.walk_log_likelihood(meas, q) == pytest.approx(want, rel=RTOL, abs=1e-12)


def test_factor_walk_hard_updates_are_the_kalman_filter():
    walk = af.FactorWalk(0.1)
    m, P = 0.0, 0.1
    for z, r in [(0.3, 0.2), (0.5, 0.1), (np.nan, 0.1), (0.2, 0.3)]:
        walk.soft_update(z, r, 1.0)
        if np.isfinite(z):
            g = P / (P + r)
            m, P = m + g * (z - m), (1 - g) * P
        P += 0.1
        assert walk.mean == pytest.approx(m, rel=RTOL) and walk.var == pytest.approx(P, rel=RTOL)


def test_walk_variance_estimate():
    rng = np.random.default_rng(0)
    meas_walk, meas_flat = [], []
    for _ in range(20):
        x = np.cumsum(rng.normal(0, np.sqrt(0.02), 40))
        meas_walk.append((x + rng.normal(0, 0.1, 40), np.full(40, 0.01)))
        meas_flat.append((rng.normal(0, 0.1, 40), np.full(40, 0.01)))
    assert 0.01 < learn.estimate_walk_variance(meas_walk) < 0.04
    assert learn.estimate_walk_variance(meas_flat) < 1e-3
    assert learn.estimate_walk_variance([(np.full(3, np.nan), np.ones(3))]) == 0.0


@pytest.mark.parametrize("family", ["gaussian", "diag", "full", "poisson", "event"])
def test_emission_evidence_recovers_a_known_scale(family):
    rng = np.random.default_rng(1)
    n, eta = 4000, 1.7
    if family == "gaussian":
        e = em.Gaussian(means=[2.0, 5.0], variances=[0.5, 1.0])
        X = rng.normal(5.0 * eta, 1.0, n)[:, None]
    elif family in ("diag", "full"):
        cov = np.array([[1.0, 0.3], [0.3, 0.5]])
        e = em.MultivariateGaussian(family, means=[[1.0, 2.0], [3.0, 1.0]],
                                    covars=[[1.0, 0.5], [1.0, 0.5]] if family == "diag" else [cov, cov])
        true_cov = np.diag([1.0, 0.5]) if family == "diag" else cov
        X = rng.multivariate_normal(np.array([3.0, 1.0]) * eta, true_cov, n)
    elif family == "poisson":
        e = em.Poisson(lam=[[1.0, 2.0], [4.0, 3.0]])
        X = rng.poisson(np.array([4.0, 3.0]) * eta, (n, 2)).astype(float)
    else:
        e = EventSequence(rate=[0.05, 0.2], probs=[[1.0], [1.0]])
        X = np.where(rng.random(n) < 0.2 * eta, 0.0, -1.0)[:, None]
    w = np.c_[np.zeros(n), np.ones(n)]
    a, b = af.emission_evidence(e, X, w)
    z, r = af.log_factor_measurement(e, a.sum(), b.sum())
    assert abs(z - np.log(eta)) < 4 * np.sqrt(r) and r < 0.01


def test_scaled_emission_and_unsupported_family():
    e = em.Poisson(lam=[[1.0], [2.0]])
    np.testing.assert_array_equal(af.scaled_emission(e, 2.0).lam, [[2.0], [4.0]])
    np.testing.assert_array_equal(e.lam, [[1.0], [2.0]])  # the base law is untouched
    ev = af.scaled_emission(EventSequence(rate=[0.6, 0.1], probs=[[1.0], [1.0]]), 2.0)
    np.testing.assert_allclose(ev.rate, [1 - 1e-10, 0.2])
    with pytest.raises(ValueError, match="factors='duration'"):
        af.scaled_emission(em.Categorical(probs=[[0.5, 0.5]]), 2.0)
    with pytest.raises(ValueError, match="informative_gaps=False"):
        af.check_scalable_emission(EventSequence(rate=[0.5], probs=[[1.0]], informative_gaps=False))


# -- frozen factors = the plain HSMM -------------------------------------------------------------------
def _plain(censoring, K=2, D=8, seed=0):
    rng = np.random.default_rng(seed)
    m = HiddenSemiMarkovModel(K, duration="poisson", max_duration=D, censoring=censoring)
    m.startprob_ = rng.dirichlet(np.ones(K))
    A = rng.dirichlet(np.ones(K - 1), size=K)
    m.transmat_ = np.array([np.insert(A[i], i, 0.0) for i in range(K)])
    m.duration_ = du.Poisson(lam=rng.uniform(1.0, 5.0, K))
    m.emission_ = em.Gaussian(means=rng.uniform(1.0, 4.0, K), variances=rng.uniform(0.3, 1.0, K))
    m.max_duration_, m.n_features_in_ = D, 1
    return m


def _adaptive_from(plain, dq=0.0, eq=0.0):
    model = AdaptiveFactorHSMM(plain.n_states, max_duration=plain.max_duration_, censoring=plain.censoring,
                               duration_walk_var=dq, emission_walk_var=eq)
    model.hsmm_, model.max_duration_, model.n_features_in_ = plain, plain.max_duration_, 1
    model.duration_walk_var_, model.emission_walk_var_ = dq, eq
    return model


@pytest.mark.parametrize("censoring", ["none", "right", "both"])
def test_walk_variance_zero_is_the_plain_filter(censoring):
    plain = _plain(censoring, K=3, D=12, seed=2)
    X = plain.sample(150, random_state=0)[0]
    ref = plain.filter(X)
    out = _adaptive_from(plain).filter(X)
    np.testing.assert_allclose(out.state, ref.state, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(out.end, ref.end, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(out.log_likelihood, ref.log_likelihood, rtol=RTOL)
    assert np.all(out.duration_factor == 1.0) and np.all(out.emission_factor == 1.0)


def test_walk_variance_zero_matches_brute_force_prefix_filter():
    plain = _plain("right", K=2, D=3, seed=4)
    X = plain.sample(7, random_state=1)[0]
    want = hsmm_oracle.prefix_filter(plain.startprob_, plain.transmat_, plain.duration_.pmf(3),
                                     plain.emission_.log_density(X), "right")
    out = _adaptive_from(plain).filter(X)
    np.testing.assert_allclose(out.state, want["state"], rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(out.log_likelihood, want["loglik"], rtol=RTOL)


@pytest.mark.parametrize("censoring", ["none", "right", "both"])
def test_factors_move_only_with_positive_variance(censoring):
    plain = _plain(censoring, seed=3)
    X = plain.sample(200, random_state=2)[0]
    out = _adaptive_from(plain, 0.05, 0.05).filter(X)
    assert np.ptp(np.log(out.emission_factor)) > 0 and np.ptp(np.log(out.duration_factor)) > 0
    np.testing.assert_allclose(out.state.sum(axis=1), 1.0, rtol=1e-12)


# -- tracking a drift ----------------------------------------------------------------------------------
def _drifting(n_seg, rng, phase):
    """Alternating states (means 1, 3; durations 1 + Poisson(9 / 15)) with log η_n, log κ_n slow sines."""
    u = np.arange(n_seg) + phase
    log_eta, log_kappa = 0.4 * np.sin(2 * np.pi * u / 70), 0.4 * np.cos(2 * np.pi * u / 90)
    X, eta, kappa = [], [], []
    for n in range(n_seg):
        j = n % 2
        d = max(1, int(round(np.exp(log_kappa[n]) * (1 + rng.poisson((9, 15)[j])))))
        X.append(rng.normal((1.0, 3.0)[j] * np.exp(log_eta[n]), 0.3, d))
        eta += [np.exp(log_eta[n])] * d
        kappa += [np.exp(log_kappa[n])] * d
    return np.concatenate(X)[:, None], np.array(eta), np.array(kappa)


def test_tracks_a_drifting_level_and_duration_scale():
    rng = np.random.default_rng(0)
    Xtr, _, _ = _drifting(120, rng, 0)
    Xte, eta, kappa = _drifting(100, rng, 25)
    model = AdaptiveFactorHSMM(2, duration="poisson", max_duration=60, random_state=0).fit(Xtr)
    assert model.duration_walk_var_ > 0 and model.emission_walk_var_ > 0
    out = model.filter(Xte)
    assert np.corrcoef(np.log(out.emission_factor), np.log(eta))[0, 1] > 0.9
    assert np.corrcoef(np.log(out.duration_factor), np.log(kappa))[0, 1] > 0.4
    # one-step predictive log-likelihood: higher than the plain HSMM's
    adaptive = np.diff(np.r_[0.0, out.log_likelihood])
    plain = np.diff(np.r_[0.0, model.hsmm_.filter(Xte).log_likelihood])
    assert adaptive.sum() > plain.sum() + 0.1 * Xte.shape[0]
    assert model.score(Xte) == pytest.approx(out.log_likelihood[-1], rel=RTOL)


def test_no_drift_estimates_small_walk_variances():
    rng = np.random.default_rng(5)
    plain = _plain("right", seed=5)
    plain.emission_ = em.Gaussian(means=[1.0, 4.0], variances=[0.2, 0.2])
    X = plain.sample(3000, random_state=rng.integers(1 << 30))[0]
    model = AdaptiveFactorHSMM(2, duration="poisson", max_duration=8, random_state=0).fit(X)
    assert model.emission_walk_var_ < 1e-3 and model.duration_walk_var_ < 0.05


# -- the estimator surface -----------------------------------------------------------------------------
def _fitted():
    rng = np.random.default_rng(0)
    X, _, _ = _drifting(30, rng, 0)
    return AdaptiveFactorHSMM(2, duration="poisson", max_duration=40, random_state=0).fit(X), X


def test_predict_score_lengths_and_clone():
    model, X = _fitted()
    lengths = [100, X.shape[0] - 100]
    out = model.filter(X, lengths)
    first = model.filter(X[:100])
    np.testing.assert_allclose(out.state[:100], first.state, rtol=RTOL)
    assert out.emission_factor[100] == model.filter(X[100:]).emission_factor[0]  # factors restart
    np.testing.assert_array_equal(model.predict(X, lengths), np.argmax(out.state, axis=1))
    np.testing.assert_allclose(model.score_per_sequence(X, lengths), out.log_likelihood[[99, X.shape[0] - 1]])
    c = clone(model)
    assert c.get_params() == model.get_params() and not hasattr(c, "hsmm_")


def test_online_filter_steps_equal_filter():
    model, X = _fitted()
    filt = model.online_filter()
    out = model.filter(X[:50])
    for t in range(50):
        step, kappa, eta = filt.update(X[t])
        np.testing.assert_allclose(step.state, out.state[t], rtol=RTOL)
        assert kappa == out.duration_factor[t] and eta == out.emission_factor[t]


def test_save_load_round_trip(tmp_path):
    model, X = _fitted()
    model.save(tmp_path / "a.npz")
    back = AdaptiveFactorHSMM.load(tmp_path / "a.npz")
    assert back.get_params() == model.get_params()
    assert back.duration_walk_var_ == model.duration_walk_var_
    a, b = model.filter(X), back.filter(X)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="adaptive-factor-hsmm"):
        HiddenSemiMarkovModel.load(tmp_path / "a.npz")


@pytest.mark.parametrize("kwargs, match", [
    ({"factors": "all"}, "`factors`"),
    ({"duration_walk_var": -1.0}, "duration_walk_var"),
    ({"emission_walk_var": np.inf}, "emission_walk_var"),
    ({"factored": "yes"}, "factored"),
    ({"emission": "categorical"}, "factors='duration'"),
])
def test_errors(kwargs, match):
    X = np.r_[np.zeros(20), np.ones(20)][:, None]
    with pytest.raises(ValueError, match=match):
        AdaptiveFactorHSMM(2, max_duration=30, **kwargs).fit(X)


def test_not_fitted_and_wrong_features():
    with pytest.raises(NotFittedError):
        AdaptiveFactorHSMM().filter(np.zeros((5, 1)))
    model, _ = _fitted()
    with pytest.raises(ValueError, match="features"):
        model.filter(np.zeros((5, 2)))


def test_duration_only_with_categorical_emissions():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.integers(0, 2, 12) if n % 2 else rng.integers(2, 4, 8) for n in range(20)])
    model = AdaptiveFactorHSMM(2, duration="poisson", emission="categorical", factors="duration",
                               max_duration=30, random_state=0).fit(X[:, None].astype(float))
    assert model.emission_walk_var_ == 0.0
    out = model.filter(X[:, None].astype(float))
    assert np.all(out.emission_factor == 1.0)


def test_event_sequences_with_a_drifting_rate():
    """Event-sequence observations (Yu 2010 §4.2): the emission factor scales the event rates."""
    rng = np.random.default_rng(3)

    def stream(n_seg, phase):
        X, eta = [], []
        for n in range(n_seg):
            j, e = n % 2, np.exp(0.5 * np.sin(2 * np.pi * (n + phase) / 60))
            d = 1 + rng.poisson((20, 30)[j])
            ev = rng.random(d) < (0.1, 0.4)[j] * e
            X.append(np.where(ev, rng.choice(2, d, p=((0.9, 0.1), (0.1, 0.9))[j]), -1))
            eta += [e] * d
        return np.concatenate(X).astype(float)[:, None], np.array(eta)

    Xtr, _ = stream(120, 0)
    Xte, eta = stream(60, 20)
    # per-tick initial labels would start EM from durations of a tick or two: start from 15 ticks
    model = AdaptiveFactorHSMM(2, duration=du.Poisson(lam=[15.0, 15.0]), emission=EventSequence(n_marks=2),
                               factors="emission", max_duration=80, init_params="ste", tol=1e-2,
                               random_state=0).fit(Xtr)
    out = model.filter(Xte)
    assert model.emission_walk_var_ > 0 and model.duration_walk_var_ == 0.0
    assert np.corrcoef(np.log(out.emission_factor), np.log(eta))[0, 1] > 0.7
    assert out.log_likelihood[-1] > model.hsmm_.score(Xte)


def test_sample_walks_the_factors_and_frozen_factors_sample_the_plain_hsmm():
    plain = _plain("right", K=2, D=8, seed=4)
    frozen = _adaptive_from(plain)
    X, states, kappa, eta = frozen.sample(400, random_state=0)
    assert X.shape == (400, 1) and states.shape == (400,) and np.all(kappa == 1.0) and np.all(eta == 1.0)
    Xp, sp, _ = plain.sample(400, random_state=0)
    assert set(np.unique(states)) <= set(range(2))
    # the walk moves the factors segment by segment and the data follow them
    moving = _adaptive_from(plain, dq=0.05, eq=0.05)
    X2, s2, k2, e2 = moving.sample(3000, random_state=1)
    assert X2.shape == (3000, 1) and k2.std() > 0 and e2.std() > 0
    assert np.all(np.diff(k2)[np.diff(s2) == 0] == 0)        # constant within a segment
    with pytest.raises(ValueError, match="n_samples"):
        moving.sample(0)
