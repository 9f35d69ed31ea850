"""SwitchingHSMM (Duong et al. 2005; Yu 2010 §4): brute-force oracle agreement, the R = 1 reduction to the
explicit-duration HSMM, EM monotonicity, parameter recovery, model files and input errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from structlearn.hsmm.explicit_duration import HiddenSemiMarkovModel
from structlearn.hsmm.switching import SwitchingHSMM
from structlearn.hsmm import _em as hsmm_em
from structlearn.learning.shards import make_shard
from structlearn.distributions.durations import NonParametric, Poisson
from structlearn.distributions.emissions import Gaussian
from structlearn.hsmm._switching_potentials import product_parameters, switching_m_step

from tests.oracles import switching_hsmm_oracle as oracle

RTOL = 1e-10


def _rows(rng, n, k, zero_diag=False):
    p = rng.uniform(0.2, 1.0, (n, k))
    if zero_diag:
        p[np.arange(n), np.arange(n)] = 0.0
    return p / p.sum(axis=1, keepdims=True)


def random_model(seed, R=2, M=2, D=3, censoring="right", tie_durations=False, tie_emissions=True):
    """A fitted-looking SwitchingHSMM with random parameters (no fit) and its linear-space arrays."""
    rng = np.random.RandomState(seed)
    rho = _rows(rng, 1, R)[0]
    B = _rows(rng, R, R)
    if M == 1:
        B[np.arange(R), np.arange(R)] = 0.0
        B /= B.sum(axis=1, keepdims=True)
    pi = _rows(rng, R, M)
    A = np.stack([_rows(rng, M, M, zero_diag=True) if M > 1 else np.zeros((1, 1)) for _ in range(R)])
    n_dur = M if tie_durations else R * M
    n_emi = M if tie_emissions else R * M
    probs = _rows(rng, n_dur, D)
    means, variances = rng.normal(0, 1.5, n_emi), rng.uniform(0.5, 2.0, n_emi)
    model = SwitchingHSMM(R, M, duration=NonParametric(), emission=Gaussian(), max_duration=D,
                          censoring=censoring, tie_durations=tie_durations, tie_emissions=tie_emissions)
    model.regime_startprob_, model.regime_transmat_, model.startprob_, model.transmat_ = rho, B, pi, A
    model.duration_ = NonParametric(probs=probs)
    model.emission_ = Gaussian(means=means, variances=variances)
    model.max_duration_ = D
    model.n_features_in_ = 1
    pmf = np.broadcast_to(probs.reshape(-1, M, D), (R, M, D)).copy()
    return model, (rho, B, pi, A, pmf, means.reshape(-1, M), variances.reshape(-1, M))


def log_b(X, means, variances, R):
    """(T, R, M) Gaussian log-densities written out (independent of the package's emission code)."""
    x = X[:, 0][:, None, None]
    mu = np.broadcast_to(means, (R, means.shape[1]))[None]
    var = np.broadcast_to(variances, (R, variances.shape[1]))[None]
    return -0.5 * (np.log(2 * np.pi * var) + (x - mu) ** 2 / var)


def check_against_oracle(seed, T, censoring, tie_durations, tie_emissions, R=2, M=2, D=3):
    model, (rho, B, pi, A, pmf, mu, var) = random_model(seed, R, M, D, censoring, tie_durations, tie_emissions)
    X = np.random.RandomState(seed + 1).normal(0, 1.5, (T, 1))
    ref = oracle.posteriors(rho, B, pi, A, pmf, log_b(X, mu, var, R), censoring)
    assert model.score(X) == pytest.approx(ref["loglik"], rel=RTOL)
    ll, post = model.score_samples(X)
    np.testing.assert_allclose(post, ref["joint"].sum(axis=1), rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(model.predict_regime_proba(X), ref["joint"].sum(axis=2), rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(model.predict_joint_proba(X), ref["joint"], rtol=RTOL, atol=1e-12)
    logp, states, regimes = model.decode(X, return_regimes=True)
    assert logp == pytest.approx(ref["viterbi_logp"], rel=RTOL)
    # the decoded path (its runs are its segments: no (r, m) follows itself) scores the oracle's maximum
    # (exact ties between paths happen, e.g. tied durations with swapped segment lengths)
    k = regimes * M + states
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:] - 1, T - 1]
    segs = [(int(s), int(e), int(regimes[s]), int(states[s])) for s, e in zip(starts, ends)]
    w = oracle.weight(segs, rho, B, pi, A, pmf, log_b(X, mu, var, R), censoring)
    assert np.log(w) == pytest.approx(ref["viterbi_logp"], rel=RTOL)
    # the E-step's product counts, mapped back: start and transition posteriors
    shard = make_shard(X, np.array([T]))
    stats = hsmm_em.shard_statistics((model._potentials(), "st", False), shard).stats
    np.testing.assert_allclose(stats["start"].reshape(R, M), ref["start"], rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(stats["trans"].reshape(R, M, R, M), ref["trans"], rtol=RTOL, atol=1e-12)
    return model, X


@pytest.mark.parametrize("censoring", ["none", "right"])
@pytest.mark.parametrize("tie_durations,tie_emissions", [(False, True), (True, True), (False, False)])
def test_oracle_agreement(censoring, tie_durations, tie_emissions):
    check_against_oracle(3, 6, censoring, tie_durations, tie_emissions)


def test_oracle_agreement_three_regimes_one_state():
    """M = 1: a regime is a single state, B has a zero diagonal (an HSMM over regimes)."""
    check_against_oracle(5, 5, "right", False, True, R=3, M=1, D=3)


@settings(max_examples=15)
@given(seed=st.integers(0, 2**20), T=st.integers(1, 5), censoring=st.sampled_from(["none", "right"]),
       tie_durations=st.booleans())
def test_oracle_agreement_random(seed, T, censoring, tie_durations):
    check_against_oracle(seed, T, censoring, tie_durations, True)


def test_product_transitions_are_stochastic_with_zero_diagonal():
    model, (rho, B, pi, A, *_) = random_model(0, R=3, M=3)
    start, trans = product_parameters(rho, B, pi, A)
    assert start.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(trans.sum(axis=1), 1.0)
    assert np.all(np.diag(trans) == 0)
    # (r, m) -> (r', m'): B[r, r'] A_r[m, m'] within a regime, B[r, r'] pi_r'[m'] across
    assert trans[0 * 3 + 1, 0 * 3 + 2] == pytest.approx(B[0, 0] * A[0, 1, 2])
    assert trans[1 * 3 + 1, 2 * 3 + 0] == pytest.approx(B[1, 2] * pi[2, 0])


def test_m_step_maps_counts_back():
    rng = np.random.RandomState(1)
    R, M = 2, 3
    start = rng.uniform(size=R * M)
    xi = rng.uniform(size=(R * M, R * M))
    np.fill_diagonal(xi, 0.0)
    _, (rho, B, pi, A, *_) = random_model(0, R=R, M=M)
    rho2, B2, pi2, A2 = switching_m_step(start, xi, rho, B, pi, A, "st")
    c = xi.reshape(R, M, R, M)
    s = start.reshape(R, M)
    np.testing.assert_allclose(rho2, s.sum(1) / s.sum())
    np.testing.assert_allclose(B2[0, 1], c[0, :, 1, :].sum() / c[0].sum())
    np.testing.assert_allclose(A2[1, 0, 2], c[1, 0, 1, 2] / c[1, 0, 1, :].sum())
    into1 = s[1] + c[0, :, 1, :].sum(axis=0)
    np.testing.assert_allclose(pi2[1], into1 / into1.sum())


# ------------------------------------------------------------------------------------------------------
# R = 1 is the explicit-duration HSMM
# ------------------------------------------------------------------------------------------------------
def _two_level_data(seed=0, n=200):
    rng = np.random.RandomState(seed)
    states = np.repeat(rng.randint(0, 3, n // 5), 5)
    return rng.normal(np.array([0.0, 2.0, 4.0])[states], 0.7)[:, None], np.array([n // 2, n - n // 2])


def test_one_regime_equals_hsmm():
    model, _ = random_model(2, R=1, M=3, D=4)
    hsmm = HiddenSemiMarkovModel(3, duration=NonParametric(), emission=Gaussian(), max_duration=4)
    hsmm.startprob_, hsmm.transmat_ = model.startprob_[0], model.transmat_[0]
    hsmm.duration_, hsmm.emission_, hsmm.max_duration_ = model.duration_, model.emission_, 4
    hsmm.n_features_in_ = 1
    X, lengths = _two_level_data()
    np.testing.assert_allclose(model.score_per_sequence(X, lengths), hsmm.score_per_sequence(X, lengths),
                               rtol=RTOL)
    np.testing.assert_allclose(model.predict_proba(X, lengths), hsmm.predict_proba(X, lengths), rtol=RTOL,
                               atol=1e-13)
    assert model.decode(X, lengths)[0] == pytest.approx(hsmm.decode(X, lengths)[0], rel=RTOL)
    np.testing.assert_array_equal(model.predict(X, lengths), hsmm.predict(X, lengths))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("duration", ["poisson", "nonparametric"])
def test_one_regime_fit_equals_hsmm_fit(duration):
    X, lengths = _two_level_data(1)
    kw = dict(duration=duration, max_duration=12, n_iter=15, random_state=4)
    a = SwitchingHSMM(1, 3, **kw).fit(X, lengths)
    b = HiddenSemiMarkovModel(3, **kw).fit(X, lengths)
    np.testing.assert_allclose(a.monitor_.history, b.monitor_.history, rtol=RTOL)
    np.testing.assert_allclose(a.transmat_[0], b.transmat_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.startprob_[0], b.startprob_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.emission_.means, b.emission_.means, rtol=1e-9)
    np.testing.assert_allclose(a.duration_.log_pmf(12), b.duration_.log_pmf(12), rtol=1e-9, atol=1e-12)
    assert a.n_parameters() == b.n_parameters()


# ------------------------------------------------------------------------------------------------------
# EM
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed,tie_durations,tie_emissions", [(0, False, True), (1, True, True),
                                                               (2, False, False)])
def test_em_is_monotone(seed, tie_durations, tie_emissions):
    rng = np.random.RandomState(seed)
    X = rng.normal(np.repeat(rng.normal(0, 2, 30), rng.randint(1, 8, 30))[:, None], 1.0)
    model = SwitchingHSMM(2, 2, duration="nonparametric", max_duration=8, n_iter=25, tol=0.0,
                          tie_durations=tie_durations, tie_emissions=tie_emissions, random_state=seed)
    with pytest.warns(Warning):  # tol = 0: never converges
        model.fit(X, [X.shape[0] // 2, X.shape[0] - X.shape[0] // 2])
    h = np.array(model.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8 * np.abs(h[1:])), np.diff(h)
    # the fitted parameters are those after the last M-step: scored by log_likelihood_, not in the history
    ll = model.score(X, [X.shape[0] // 2, X.shape[0] - X.shape[0] // 2])
    assert ll == pytest.approx(model.log_likelihood_, rel=1e-10) and ll >= h[-1] - 1e-8 * abs(h[-1])


def _truth():
    """R = 2 routines over M = 2 tied Gaussian activities: short segments (means 3) in regime 0, long
    (12) in regime 1, regimes persisting over ~10 segments."""
    model = SwitchingHSMM(2, 2, duration=Poisson(), emission=Gaussian(), max_duration=30)
    model.regime_startprob_ = np.array([0.5, 0.5])
    model.regime_transmat_ = np.array([[0.9, 0.1], [0.1, 0.9]])
    model.startprob_ = np.array([[0.5, 0.5], [0.5, 0.5]])
    model.transmat_ = np.array([[[0, 1.0], [1.0, 0]], [[0, 1.0], [1.0, 0]]])
    model.duration_ = Poisson(lam=np.array([2.0, 3.0, 11.0, 12.0]))  # mean 1 + lam
    model.emission_ = Gaussian(means=np.array([0.0, 3.0]), variances=np.array([1.0, 1.0]))
    model.max_duration_, model.n_features_in_ = 30, 1
    return model


def test_parameter_recovery():
    truth = _truth()
    parts = [truth.sample(600, random_state=s) for s in range(5)]
    X = np.concatenate([p[0] for p in parts])
    lengths = [600] * 5
    model = SwitchingHSMM(2, 2, duration="poisson", max_duration=30, n_init=2, random_state=0,
                          n_iter=200).fit(X, lengths)
    np.testing.assert_allclose(np.sort(model.emission_.means), [0.0, 3.0], atol=0.05)
    # regimes are identified up to their order: regime 0 of the fit is the one with shorter segments
    mean_d = model.duration_.mean(30).reshape(2, 2)
    order = np.argsort(mean_d.mean(axis=1))
    st_order = np.argsort(model.emission_.means)
    got = mean_d[order][:, st_order]
    np.testing.assert_allclose(got, [[3.0, 4.0], [12.0, 13.0]], rtol=0.08)
    np.testing.assert_allclose(np.diag(model.regime_transmat_), 0.9, atol=0.06)
    assert model.score(X, lengths) >= truth.score(X, lengths) - 1.0


# ------------------------------------------------------------------------------------------------------
# estimator surface
# ------------------------------------------------------------------------------------------------------
def test_sample_and_surface():
    truth = _truth()
    X, states, regimes = truth.sample(200, random_state=0)
    assert X.shape == (200, 1) and states.shape == regimes.shape == (200,)
    assert set(np.unique(states)) <= {0, 1} and set(np.unique(regimes)) <= {0, 1}
    X2, s2, r2 = truth.sample(200, random_state=0)
    np.testing.assert_array_equal(X, X2)
    assert truth.predict_proba(X).shape == (200, 2)
    np.testing.assert_allclose(truth.predict_regime_proba(X).sum(axis=1), 1.0)
    assert truth.predict_regimes(X).shape == (200,)
    lp_map, s_map = truth.decode(X, algorithm="map")
    assert s_map.shape == (200,) and lp_map <= 0
    p = truth.n_parameters()
    assert p == 1 + 2 + 2 + 4 + 4  # rho, pi, B, (A fixed), lam (4), means + variances (4)
    assert truth.bic(X) == pytest.approx(-2 * truth.score(X) + p * np.log(200))
    assert truth.aic(X) == pytest.approx(-2 * truth.score(X) + 2 * p)
    assert clone(truth).get_params()["n_regimes"] == 2


def test_save_load_round_trip(tmp_path):
    X, lengths = _two_level_data(2)
    model = SwitchingHSMM(2, 2, duration="poisson", max_duration=10, n_iter=5, tie_emissions=False,
                          random_state=0)
    with pytest.warns(Warning):
        model.fit(X, lengths)
    path = tmp_path / "switching.npz"
    model.save(path)
    back = SwitchingHSMM.load(path)
    assert back.get_params() == model.get_params()
    for name in ("regime_startprob_", "regime_transmat_", "startprob_", "transmat_"):
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))
    assert back.score(X, lengths) == model.score(X, lengths)
    np.testing.assert_array_equal(back.predict(X, lengths), model.predict(X, lengths))
    assert back.monitor_.history == model.monitor_.history


def test_errors():
    X, lengths = _two_level_data()
    with pytest.raises(NotFittedError):
        SwitchingHSMM().score(X)
    with pytest.raises(ValueError, match="n_regimes"):
        SwitchingHSMM(n_regimes=0).fit(X)
    with pytest.raises(ValueError, match="tie_durations"):
        SwitchingHSMM(tie_durations="yes").fit(X)
    with pytest.raises(ValueError, match="params"):
        SwitchingHSMM(params="stdx").fit(X)
    with pytest.raises(ValueError, match="sums to 37 but|lengths"):
        SwitchingHSMM().fit(X, [5, 5])
    model = _truth()
    model.transmat_ = np.array([[[0.5, 0.5], [1.0, 0]], [[0, 1.0], [1.0, 0]]])
    with pytest.raises(ValueError, match="transmat_.*zero diagonal"):
        model.score(X)
    model = _truth()
    model.regime_transmat_ = np.array([[0.9, 0.2], [0.1, 0.9]])
    with pytest.raises(ValueError, match="regime_transmat_.* row 0 must sum to 1"):
        model.score(X)
    model = _truth()
    model.startprob_ = np.array([0.5, 0.5])
    with pytest.raises(ValueError, match=r"startprob_.*shape \(2, 2\)"):
        model.predict(X)
    with pytest.raises(ValueError, match="regime_transmat_.*zero diagonal"):
        m1, _ = random_model(0, R=2, M=1)
        m1.regime_transmat_ = np.full((2, 2), 0.5)
        m1.score(X)
    with pytest.raises(ValueError, match="init_params"):
        SwitchingHSMM(duration="poisson", init_params="ste", max_duration=5).fit(X)
    with pytest.raises(ValueError, match="n_samples"):
        _truth().sample(0)


# ------------------------------------------------------------------------------------------------------
# partial labels on the states (regimes hidden)
# ------------------------------------------------------------------------------------------------------
def _partial_labels(states, seed, frac=0.5):
    lab = np.asarray(states, dtype=np.int64).copy()
    lab[np.random.RandomState(seed).rand(lab.shape[0]) < frac] = -1
    return lab


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("duration,frac", [("poisson", 0.5), ("nonparametric", 0.5), ("nonparametric", 0.0)])
def test_one_regime_labelled_fit_equals_hsmm_labelled_fit(duration, frac):
    X, lengths = _two_level_data(1)
    states = np.repeat(np.random.RandomState(1).randint(0, 3, 40), 5)  # the states of _two_level_data(1)
    labels = _partial_labels(states, 3, frac)
    kw = dict(duration=duration, max_duration=30, n_iter=15, random_state=4)
    a = SwitchingHSMM(1, 3, **kw).fit(X, lengths, labels=labels)
    b = HiddenSemiMarkovModel(3, **kw).fit(X, lengths, labels=labels)
    np.testing.assert_allclose(a.monitor_.history, b.monitor_.history, rtol=RTOL)
    assert a.log_likelihood_ == pytest.approx(b.log_likelihood_, rel=RTOL)
    np.testing.assert_allclose(a.transmat_[0], b.transmat_, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(a.startprob_[0], b.startprob_, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(a.emission_.means, b.emission_.means, rtol=RTOL)
    np.testing.assert_allclose(a.emission_.variances, b.emission_.variances, rtol=RTOL)
    np.testing.assert_allclose(a.duration_.log_pmf(30), b.duration_.log_pmf(30), rtol=RTOL, atol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("seed,T", [(0, 5), (1, 6), (2, 4)])
def test_labelled_likelihood_matches_masked_oracle(seed, T):
    """One E-step with labels (no parameter updated) gives log P(o, s ∈ labels): the oracle's sum over
    the segmentations whose (regime, state) paths agree with the labels (disallowed pairs get log b = -inf)."""
    model, (rho, B, pi, A, pmf, mu, var) = random_model(seed, R=2, M=2, D=3)
    X = np.random.RandomState(seed + 1).normal(0, 1.5, (T, 1))
    labels = np.random.RandomState(seed + 2).randint(-1, 2, T)
    fixed = SwitchingHSMM(2, 2, duration=model.duration_, emission=model.emission_, max_duration=3,
                          params="", init_params="", n_iter=1)
    fixed.regime_startprob_, fixed.regime_transmat_ = rho, B
    fixed.startprob_, fixed.transmat_ = pi, A
    fixed.fit(X, labels=labels)
    lb = log_b(X, mu, var, 2)
    known = labels >= 0
    mask = np.zeros(lb.shape, dtype=bool)
    mask[known] = True
    mask[known, :, labels[known]] = False
    ref = oracle.posteriors(rho, B, pi, A, pmf, np.where(mask, -np.inf, lb), "right")
    assert fixed.monitor_.history[0] == pytest.approx(ref["loglik"], rel=RTOL)


def test_fully_labelled_states_regimes_inferred_and_em_monotone():
    truth = _truth()
    parts = [truth.sample(400, random_state=10 + s) for s in range(3)]
    X = np.concatenate([p[0] for p in parts])
    states = np.concatenate([p[1] for p in parts])
    regimes = np.concatenate([p[2] for p in parts])
    lengths = [400] * 3
    model = SwitchingHSMM(2, 2, duration="poisson", max_duration=30, n_iter=60, tol=0.0, random_state=0)
    with pytest.warns(Warning):  # tol = 0: never converges
        model.fit(X, lengths, labels=states)
    h = np.array(model.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8 * np.abs(h[1:])), np.diff(h)
    # the labels fix the states: the emissions are their closed-form estimates
    for m in range(2):
        assert model.emission_.means[m] == pytest.approx(X[states == m, 0].mean(), rel=1e-10)
    # the regimes (never labelled) are recovered up to their order: short vs long segments
    agree = np.mean(model.predict_regimes(X, lengths) == regimes)
    assert max(agree, 1 - agree) > 0.85
    mean_d = np.sort(model.duration_.mean(30).reshape(2, 2).mean(axis=1))
    np.testing.assert_allclose(mean_d, [3.5, 12.5], rtol=0.15)
    # the constrained likelihood of the fitted model: the labelled paths only
    lab_ll = model.to_structure(X, lengths).constrain(np.tile(np.eye(2, dtype=bool)[states], (1, 2)))
    assert float(lab_ll.log_partition().sum()) <= model.score(X, lengths)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_labelled_untied_emissions_fit():
    X, lengths = _two_level_data(2)
    states = np.repeat(np.random.RandomState(2).randint(0, 3, 40), 5)
    labels = _partial_labels(states, 0, 0.3)
    model = SwitchingHSMM(2, 3, duration="poisson", max_duration=10, n_iter=10, tol=0.0, tie_emissions=False,
                          random_state=0).fit(X, lengths, labels=labels)
    h = np.array(model.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8 * np.abs(h[1:]))
    assert model.emission_.means.shape == (6,)
    # a labelled row decodes (with the labels as constraints) to its label in some regime
    assert np.mean(model.predict(X, lengths)[labels >= 0] == labels[labels >= 0]) > 0.9


def test_label_errors():
    X, lengths = _two_level_data()
    model = SwitchingHSMM(2, 2, duration="poisson", max_duration=10, n_iter=2)
    with pytest.raises(ValueError, match=r"`labels` must have shape \(200,\)"):
        model.fit(X, lengths, labels=np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="`labels` must hold integer states"):
        model.fit(X, lengths, labels=np.zeros(200))
    with pytest.raises(ValueError, match=r"`labels` must lie in \[-1, 2\).*got 2 at row 0"):
        model.fit(X, lengths, labels=np.full(200, 2))  # a product index r·M + m is not a state
    with pytest.raises(ValueError, match=r"`labels` must lie in \[-1, 2\)"):
        model.fit(X, lengths, labels=np.full(200, -2))
    # one regime: a labelled run of 8 rows is one segment, longer than max_duration = 3 (with R = 2 the
    # run could be cut at regime switches, which may re-enter the same state)
    with pytest.raises(ValueError, match="sequence 0 .* zero likelihood"):
        SwitchingHSMM(1, 2, duration="poisson", max_duration=3, censoring="none", n_iter=2).fit(
            X[:8], labels=np.zeros(8, dtype=int))
