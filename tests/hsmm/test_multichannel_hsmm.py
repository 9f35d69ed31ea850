"""MultiChannelHSMM: exact inference against the brute-force oracle, reductions to the plain HSMM (C = 1,
θ = I), the factored approximation, EM, recovery, model files and errors."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn.hsmm.explicit_duration import HiddenSemiMarkovModel
from structlearn.hsmm.multichannel import MultiChannelHSMM
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em
from tests.oracles.multichannel_hsmm_oracle import oracle

RTOL = 1e-10


def random_model(rng, M=(2, 2), D=(3, 3), censoring="right", theta=None, **kw):
    """A MultiChannelHSMM with random parameters, one Gaussian column per channel."""
    C = len(M)
    m = MultiChannelHSMM(n_states=list(M), max_duration=list(D), censoring=censoring, init_params="",
                         n_iter=0, **kw)
    m.startprob_ = [rng.dirichlet(np.ones(Mc)) for Mc in M]
    m.coupling_ = rng.dirichlet(np.ones(C), size=C) if theta is None else np.asarray(theta, dtype=float)
    m.transmat_ = []
    for c in range(C):
        row = []
        for k in range(C):
            A = rng.dirichlet(np.ones(M[c]), size=M[k])
            if k == c:
                np.fill_diagonal(A, 0.0)
                A /= A.sum(axis=1, keepdims=True)
            row.append(A)
        m.transmat_.append(row)
    m.duration_ = [du.NonParametric(rng.dirichlet(np.ones(Dc), size=Mc)) for Mc, Dc in zip(M, D)]
    m.emission_ = [em.Gaussian(means=rng.normal(size=Mc), variances=rng.uniform(0.5, 2.0, Mc)) for Mc in M]
    m.channels_ = [np.array([c]) for c in range(C)]
    m.max_duration_ = list(D)
    m.n_features_in_ = C
    return m


def oracle_of(m, X):
    C = len(m.startprob_)
    logem = [m.emission_[c].log_density(X[:, [c]]) for c in range(C)]
    pmfs = [np.exp(m.duration_[c].log_pmf(m.max_duration_[c])) for c in range(C)]
    return oracle(m.startprob_, m.coupling_, m.transmat_, pmfs, logem, m.censoring)


def check_against_oracle(m, Xs):
    """Two sequences packed in one call, each checked against the oracle: log L, posteriors, Viterbi."""
    X = np.concatenate(Xs)
    lengths = [len(x) for x in Xs]
    ll = m.score_per_sequence(X, lengths)
    post = m.predict_proba(X, lengths)
    off = np.r_[0, np.cumsum(lengths)]
    best_total = 0.0
    states = m.predict(X, lengths)
    for b, x in enumerate(Xs):
        log_z, p, best, best_score = oracle_of(m, x)
        np.testing.assert_allclose(ll[b], log_z, rtol=RTOL)
        for c in range(len(p)):
            np.testing.assert_allclose(post[c][off[b]:off[b + 1]], p[c], rtol=RTOL, atol=1e-12)
        np.testing.assert_array_equal(states[off[b]:off[b + 1]], best)
        best_total += best_score
    np.testing.assert_allclose(m.decode(X, lengths)[0], best_total, rtol=RTOL)


# -- exact inference against enumeration -------------------------------------------------------------
@pytest.mark.parametrize("censoring, T", [("right", 4), ("none", 5)])
def test_exact_matches_oracle(censoring, T):
    rng = np.random.default_rng(1)
    m = random_model(rng, censoring=censoring)
    check_against_oracle(m, [rng.normal(size=(T, 2)), rng.normal(size=(T - 1, 2))])


def test_exact_matches_oracle_unequal_channels_and_three_channels():
    rng = np.random.default_rng(2)
    check_against_oracle(random_model(rng, M=(2, 3), D=(3, 2)), [rng.normal(size=(4, 2))])
    check_against_oracle(random_model(rng, M=(2, 2, 2), D=(2, 2, 2)), [rng.normal(size=(3, 3))])


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), censoring=st.sampled_from(["right", "none"]))
def test_exact_matches_oracle_random_instances(seed, censoring):
    rng = np.random.default_rng(seed)
    m = random_model(rng, M=(2, 2), D=(2, 3), censoring=censoring)
    check_against_oracle(m, [rng.normal(size=(4, 2)) * 2])


# -- reductions to the plain HSMM -----------------------------------------------------------------------
def hsmm_of(m, c):
    h = HiddenSemiMarkovModel(len(m.startprob_[c]), duration="nonparametric", max_duration=m.max_duration_[c],
                              censoring=m.censoring, init_params="", n_iter=0)
    h.startprob_ = m.startprob_[c].copy()
    h.transmat_ = m.transmat_[c][c].copy()
    h.duration_ = du.NonParametric(m.duration_[c].probs.copy())
    h.emission_ = em.Gaussian(means=m.emission_[c].means.copy(), variances=m.emission_[c].variances.copy())
    h.max_duration_ = m.max_duration_[c]
    h.n_features_in_ = 1
    return h


@pytest.mark.parametrize("inference", ["exact", "factored"])
@pytest.mark.parametrize("censoring", ["right", "none"])
def test_single_channel_equals_hsmm(inference, censoring):
    rng = np.random.default_rng(3)
    m = random_model(rng, M=(3,), D=(4,), censoring=censoring, inference=inference)
    h = hsmm_of(m, 0)
    X = rng.normal(size=(30, 1)) * 1.5
    lengths = [18, 12]
    np.testing.assert_allclose(m.score_per_sequence(X, lengths), h.score_per_sequence(X, lengths), rtol=RTOL)
    np.testing.assert_allclose(m.predict_proba(X, lengths)[0], h.predict_proba(X, lengths), rtol=RTOL,
                               atol=1e-12)
    # one EM step from the same parameters
    m.set_params(n_iter=1, params="stde")
    h.set_params(n_iter=1, params="stde")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, lengths)
        h.fit(X, lengths)
    np.testing.assert_allclose(m.startprob_[0], h.startprob_, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(m.transmat_[0][0], h.transmat_, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(m.duration_[0].probs, h.duration_.probs, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(m.emission_[0].means, h.emission_.means, rtol=RTOL)
    np.testing.assert_allclose(m.emission_[0].variances, h.emission_.variances, rtol=RTOL)
    np.testing.assert_allclose(m.log_likelihood_, h.log_likelihood_, rtol=RTOL)


@pytest.mark.parametrize("inference", ["exact", "factored"])
def test_identity_coupling_equals_independent_hsmms(inference):
    rng = np.random.default_rng(4)
    m = random_model(rng, M=(2, 3), D=(3, 4), theta=np.eye(2), inference=inference)
    X = rng.normal(size=(25, 2))
    lengths = [15, 10]
    hs = [hsmm_of(m, c) for c in range(2)]
    expected = sum(h.score_per_sequence(X[:, [c]], lengths) for c, h in enumerate(hs))
    np.testing.assert_allclose(m.score_per_sequence(X, lengths), expected, rtol=RTOL)
    post = m.predict_proba(X, lengths)
    for c, h in enumerate(hs):
        np.testing.assert_allclose(post[c], h.predict_proba(X[:, [c]], lengths), rtol=RTOL, atol=1e-12)


def test_factored_is_close_to_exact_under_coupling():
    rng = np.random.default_rng(5)
    m = random_model(rng, M=(2, 2), D=(3, 3))
    X = rng.normal(size=(40, 2)) * 2
    exact = m.predict_proba(X)
    f = clone(m).set_params(inference="factored")
    for name in ("startprob_", "coupling_", "transmat_", "duration_", "emission_", "channels_",
                 "max_duration_", "n_features_in_"):
        setattr(f, name, getattr(m, name))
    approx = f.predict_proba(X)
    err = max(np.abs(a - b).max() for a, b in zip(exact, approx))
    assert err < 0.5
    assert abs(f.score(X) - m.score(X)) < 0.05 * abs(m.score(X))


# -- EM -------------------------------------------------------------------------------------------------
def coupled_truth():
    m = MultiChannelHSMM(n_states=2, max_duration=8, init_params="", n_iter=0)
    m.startprob_ = [np.array([0.5, 0.5]), np.array([0.5, 0.5])]
    m.coupling_ = np.array([[0.3, 0.7], [0.2, 0.8]])
    m.transmat_ = [[np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[0.9, 0.1], [0.1, 0.9]])],
                   [np.array([[0.2, 0.8], [0.8, 0.2]]), np.array([[0.0, 1.0], [1.0, 0.0]])]]
    m.duration_ = [du.Poisson(lam=[3.0, 6.0]), du.Poisson(lam=[5.0, 2.0])]
    m.emission_ = [em.Gaussian(means=[0.0, 3.0], variances=[1.0, 1.0]),
                   em.Gaussian(means=[0.0, 3.0], variances=[1.0, 1.0])]
    m.channels_ = [np.array([0]), np.array([1])]
    m.max_duration_ = [8, 8]
    m.n_features_in_ = 2
    return m


def simulate(m, n_seq, T, seed):
    rng = np.random.RandomState(seed)
    out = [m.sample(T, rng) for _ in range(n_seq)]
    return np.concatenate([x for x, _ in out]), np.concatenate([s for _, s in out]), [T] * n_seq


def implied_coupling(m, c):
    """P(m'_c | m_0, m_1) (M_0, M_1, M_c), the identifiable summary of θ and A."""
    M = [len(p) for p in m.startprob_]
    q = np.zeros((M[0], M[1], M[c]))
    for a in range(M[0]):
        for b in range(M[1]):
            q[a, b] = sum(m.coupling_[c, k] * m.transmat_[c][k][(a, b)[k]] for k in range(2))
    return q


def test_em_is_monotone_and_recovers_parameters():
    truth = coupled_truth()
    X, S, lengths = simulate(truth, 10, 100, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = MultiChannelHSMM(2, duration="poisson", max_duration=8, n_iter=40, random_state=0).fit(X, lengths)
    hist = np.asarray(m.monitor_.history)
    assert np.all(np.diff(hist) >= -1e-8 * np.abs(hist[1:]))
    assert m.log_likelihood_ >= truth.score(X, lengths) - 1.0
    assert (m.predict(X, lengths) == S).mean() > 0.95
    for c in range(2):
        np.testing.assert_allclose(m.emission_[c].means, truth.emission_[c].means, atol=0.3)
        # re-entries of the same state (through the other channel's component) split runs into several
        # segments, so mean durations converge slowly (30 sequences x 150: within 3 %)
        np.testing.assert_allclose(m.duration_[c].mean(8), truth.duration_[c].mean(8), rtol=0.3)
        # the mixed-memory conditional over the joint states (θ and A alone are weakly identifiable)
        assert np.abs(implied_coupling(m, c) - implied_coupling(truth, c)).max() < 0.25


def test_factored_em_runs_and_improves():
    truth = coupled_truth()
    X, S, lengths = simulate(truth, 4, 80, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = MultiChannelHSMM(2, duration="poisson", max_duration=8, n_iter=15, inference="factored",
                             random_state=0).fit(X, lengths)
    assert m.monitor_.history[-1] > m.monitor_.history[0]
    assert (m.predict(X, lengths) == S).mean() > 0.9
    with warnings.catch_warnings():  # reproducible with random_state
        warnings.simplefilter("ignore", ConvergenceWarning)
        again = clone(m).fit(X, lengths)
    np.testing.assert_array_equal(again.monitor_.history, m.monitor_.history)


def test_supervised_hidden_channel():
    """A hidden channel (no columns) with known labels, coupled to two observed channels."""
    truth = coupled_truth()
    X, S, lengths = simulate(truth, 3, 60, 2)
    labels = np.c_[S[:, 0], np.full(len(S), -1), np.full(len(S), -1)]
    Xh = np.c_[np.zeros(len(X)), X]  # column 0 unused, the sensors in 1 and 2
    m = MultiChannelHSMM(2, channels=[[], [1], [2]], duration="poisson", max_duration=6, n_iter=5,
                         inference="factored", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(Xh, lengths, labels=labels)
    assert m.emission_[0] is None and m.predict(Xh, lengths).shape == (len(X), 3)
    assert [p.shape for p in m.predict_proba(Xh, lengths)] == [(len(X), 2)] * 3


# -- estimator surface ----------------------------------------------------------------------------------
def test_sample_save_load_and_contract(tmp_path):
    truth = coupled_truth()
    X, states = truth.sample(50, random_state=3)
    assert X.shape == (50, 2) and states.shape == (50, 2)
    np.testing.assert_array_equal(truth.sample(50, random_state=3)[0], X)
    path = tmp_path / "mc.npz"
    truth.save(path)
    back = MultiChannelHSMM.load(path)
    np.testing.assert_allclose(back.score(X), truth.score(X), rtol=1e-12)
    np.testing.assert_array_equal(back.predict(X), truth.predict(X))
    np.testing.assert_allclose(back.coupling_, truth.coupling_)
    est = MultiChannelHSMM(3, channels=[[0], [1]], random_state=0)
    assert clone(est).get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        est.predict(X)


def test_errors():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="column 1 is in channel 0 and in channel 1"):
        MultiChannelHSMM(channels=[[0, 1], [1]], max_duration=3).fit(X)
    with pytest.raises(ValueError, match="names column 5"):
        MultiChannelHSMM(channels=[[0], [5]], max_duration=3).fit(X)
    with pytest.raises(ValueError, match="`channels` must be a non-empty list"):
        MultiChannelHSMM(channels=[], max_duration=3).fit(X)
    with pytest.raises(ValueError, match=r"= 3·20 × 3·20 = 3600 joint states.*inference='factored'"):
        MultiChannelHSMM(3, max_duration=20, max_exact_states=1000).fit(X)
    with pytest.raises(ValueError, match="`inference` must be one of"):
        MultiChannelHSMM(inference="mean-field").fit(X)
    with pytest.raises(ValueError, match="`censoring` must be one of"):
        MultiChannelHSMM(censoring="both").fit(X)
    with pytest.raises(ValueError, match="`n_states` must be integers >= 2"):
        MultiChannelHSMM(n_states=[2, 1], max_duration=3).fit(X)
    with pytest.raises(ValueError, match=r"`labels` must be an int array of shape \(N, C\) = \(20, 2\)"):
        MultiChannelHSMM(max_duration=3).fit(X, labels=np.zeros(20, dtype=int))
    m = coupled_truth()
    with pytest.raises(ValueError, match="X has 3 columns but the model was fitted with 2"):
        m.score(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="`algorithm` must be"):
        m.decode(X, algorithm="beam")
