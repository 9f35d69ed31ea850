"""GeneralHSMM, VariableTransitionHMM, ResidentialTimeHMM: against the brute-force oracle in every censoring
mode, special cases equal to the general model, EM, filtering, model files and errors."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn import GeneralHSMM, HiddenSemiMarkovModel, ResidentialTimeHMM, VariableTransitionHMM
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em
from structlearn.hsmm import _general_potentials as g
from structlearn.engine.structures import SemiMarkov
from tests.oracles.general_hsmm import general_posterior

RTOL = 1e-10
CENSORING = ("none", "right", "both")


def _dirichlet(rng, shape, axes):
    x = rng.gamma(1.0, size=shape) + 1e-3
    return x / x.sum(axis=axes, keepdims=True)


def random_model(cls, M, D, censoring, rng):
    m = cls(n_states=M, max_duration=D, censoring=censoring, init_params="")
    m.max_duration_ = D
    m.n_features_in_ = 1
    m.emission_ = em.Gaussian(means=rng.normal(0, 2, M), variances=rng.uniform(0.5, 2, M))
    if cls is GeneralHSMM:
        m.startprob_ = _dirichlet(rng, (M, D), None)
        tm = rng.gamma(1.0, size=(M, D, M, D)) + 1e-3
        tm[np.arange(M), :, np.arange(M), :] = 0.0
        m.transmat_ = tm / tm.sum(axis=(2, 3), keepdims=True)
    elif cls is ResidentialTimeHMM:
        m.startprob_ = _dirichlet(rng, (M, D), None)
        tm = rng.gamma(1.0, size=(M, M, D)) + 1e-3
        tm[np.arange(M), np.arange(M), :] = 0.0
        m.transmat_ = tm / tm.sum(axis=(1, 2), keepdims=True)
    else:
        m.startprob_ = _dirichlet(rng, (M,), None)
        tm = _dirichlet(rng, (D, M, M), 2)
        tm[-1, np.arange(M), np.arange(M)] = 0.0
        m.transmat_ = tm / tm.sum(axis=2, keepdims=True)
    return m


def general_params(m):
    """The model's (π (M, D), a (M, D, M, D)) in linear space."""
    ls, la = m._general()
    la = la.copy()
    M = ls.shape[0]
    la[np.arange(M), :, np.arange(M), :] = -np.inf
    return np.exp(ls), np.exp(la)


def cases():
    for cls in (GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM):
        for cens in cls._censoring_modes:
            yield cls, cens


@pytest.mark.parametrize("cls,censoring", list(cases()))
@pytest.mark.parametrize("seed", [0, 1])
def test_every_output_matches_brute_force(cls, censoring, seed):
    rng = np.random.default_rng(seed)
    M, D = 2, 3
    m = random_model(cls, M, D, censoring, rng)
    lengths = [4, 1, 5]
    X = rng.normal(0, 2, (sum(lengths), 1))
    pi, A = general_params(m)
    log_b = m.emission_.log_density(X)
    gamma = m.predict_proba(X, lengths)
    eta = m.posterior_durations(X, lengths)
    counts = m.expected_counts(X, lengths)
    ll = m.score_per_sequence(X, lengths)
    logp, states = m.decode(X, lengths)
    first = np.zeros((M, D))
    trans = np.zeros((M, D, M, D))
    o, best = 0, 0.0
    for b, T in enumerate(lengths):
        ref = general_posterior(pi, A, log_b[o:o + T], censoring)
        np.testing.assert_allclose(ll[b], ref["log_z"], rtol=RTOL)
        np.testing.assert_allclose(gamma[o:o + T], ref["gamma"], rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(eta[o:o + T], ref["eta"], rtol=RTOL, atol=1e-12)
        np.testing.assert_array_equal(states[o:o + T], ref["viterbi"][1])
        first += ref["first"]
        trans += ref["trans"]
        best += ref["viterbi"][0]
        o += T
    np.testing.assert_allclose(counts["first"], first, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(counts["trans"], trans, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(logp, best, rtol=RTOL)
    xi = m.posterior_transitions(X, lengths)
    np.testing.assert_allclose(xi.sum(axis=0), trans, rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("cls,censoring", list(cases()))
def test_filtered_and_predicted_match_brute_force_on_prefixes(cls, censoring):
    rng = np.random.default_rng(3)
    M, D = 2, 3
    m = random_model(cls, M, D, censoring, rng)
    X = rng.normal(0, 2, (5, 1))
    pi, A = general_params(m)
    log_b = m.emission_.log_density(X)
    f = m.filter(X)
    for t in range(5):
        # P[S_[t-d+1:t] = j | o_1:t] ∝ α_t(j, d): the prefix's paths whose last segment ends at t
        ref = general_posterior(pi, A, log_b[:t + 1], "none")
        np.testing.assert_allclose(f.ended[t], ref["eta"][t], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(f.log_likelihood[t], ref["log_z"], rtol=RTOL)
        nxt = np.einsum("id,idje->je", ref["eta"][t], A)
        np.testing.assert_allclose(f.next[t], nxt, rtol=1e-9, atol=1e-12)


def explicit_duration_model(rng, M, D, censoring, emission):
    """A HiddenSemiMarkovModel set by hand from ``rng``: random start and transition probabilities,
    nonparametric durations, then the emission ``emission(rng)``; one feature, max_duration D."""
    ed = HiddenSemiMarkovModel(M, duration="nonparametric", max_duration=D, censoring=censoring,
                               init_params="")
    ed.startprob_ = _dirichlet(rng, (M,), None)
    tm = rng.uniform(0.1, 1, (M, M))
    np.fill_diagonal(tm, 0)
    ed.transmat_ = tm / tm.sum(1, keepdims=True)
    ed.duration_ = du.NonParametric(probs=_dirichlet(rng, (M, D), 1))
    ed.emission_ = emission(rng)
    ed.max_duration_, ed.n_features_in_ = D, 1
    return ed


@pytest.mark.parametrize("censoring", CENSORING)
def test_explicit_duration_equals_hidden_semi_markov_model(censoring):
    rng = np.random.default_rng(5)
    M, D = 3, 4
    ed = explicit_duration_model(rng, M, D, censoring,
                                 lambda rng: em.Gaussian(means=[0.0, 2.0, 4.0], variances=[1.0, 1.0, 1.0]))
    gen = GeneralHSMM(M, max_duration=D, censoring=censoring, init_params="")
    ls, la = g.explicit_duration(ed.startprob_, ed.transmat_, ed.duration_.log_pmf(D), censoring)
    gen.startprob_, gen.transmat_ = np.exp(ls), np.exp(la)
    gen.emission_, gen.max_duration_, gen.n_features_in_ = ed.emission_, D, 1
    X = rng.normal(2, 2, (23, 1))
    lengths = [9, 2, 12]
    np.testing.assert_allclose(gen.score_per_sequence(X, lengths), ed.score_per_sequence(X, lengths),
                               rtol=RTOL)
    np.testing.assert_allclose(gen.predict_proba(X, lengths), ed.predict_proba(X, lengths), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("cls,censoring", [(ResidentialTimeHMM, c) for c in CENSORING] +
                         [(VariableTransitionHMM, c) for c in ("none", "right")])
def test_special_cases_equal_the_general_model_with_tied_parameters(cls, censoring):
    rng = np.random.default_rng(7)
    m = random_model(cls, 3, 4, censoring, rng)
    gen = GeneralHSMM(3, max_duration=4, censoring=censoring, init_params="")
    pi, A = general_params(m)
    A[np.arange(3), :, np.arange(3), :] = 0.0
    gen.startprob_, gen.transmat_ = pi, A
    gen.emission_, gen.max_duration_, gen.n_features_in_ = m.emission_, 4, 1
    X = rng.normal(0, 2, (30, 1))
    np.testing.assert_allclose(m.score_per_sequence(X, [10, 20]), gen.score_per_sequence(X, [10, 20]),
                               rtol=RTOL)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), which=st.sampled_from(list(cases())))
def test_em_never_decreases_the_likelihood(seed, which):
    cls, censoring = which
    rng = np.random.default_rng(seed)
    M = int(rng.integers(2, 4))
    D = int(rng.integers(2, 6))
    lengths = list(rng.integers(3, 15, size=int(rng.integers(1, 4))))
    X = rng.normal(0, 2, (sum(lengths), 1))
    m = cls(n_states=M, max_duration=D, censoring=censoring, n_iter=8, tol=0.0, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X, lengths)
    h = np.array(m.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8 * np.abs(h[:-1])), h


@pytest.mark.parametrize("cls", [GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM])
def test_em_recovers_well_separated_states(cls):
    rng = np.random.default_rng(11)
    truth = random_model(cls, 2, 6, "right", rng)
    truth.emission_ = em.Gaussian(means=[0.0, 6.0], variances=[1.0, 1.0])
    Xs, Ss = [], []
    srng = np.random.RandomState(11)
    for _ in range(8):
        X, S, _ = truth.sample(60, random_state=srng)
        Xs.append(X)
        Ss.append(S)
    X, S = np.concatenate(Xs), np.concatenate(Ss)
    m = cls(n_states=2, max_duration=6, n_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X, [60] * 8)
    acc = max(np.mean(m.predict(X, [60] * 8) == S), np.mean(m.predict(X, [60] * 8) == 1 - S))
    assert acc > 0.97
    assert m.score(X, [60] * 8) >= truth.score(X, [60] * 8) - 1e-6


@pytest.mark.parametrize("cls", [GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM])
def test_save_load_round_trip(cls, tmp_path):
    rng = np.random.default_rng(2)
    m = random_model(cls, 2, 3, "right", rng)
    X = rng.normal(0, 2, (12, 1))
    path = tmp_path / "model.npz"
    m.save(path)
    back = cls.load(path)
    np.testing.assert_allclose(back.score(X), m.score(X), rtol=RTOL)
    from structlearn.io.modelfile import load_estimator
    assert type(load_estimator(path)) is cls
    assert back.get_params() == {**m.get_params(), "random_state": None}


def test_semimarkov_edge_modes_agree():
    rng = np.random.default_rng(0)
    K, D = 3, 4
    sm = SemiMarkov(rng.normal(size=(12, K)), rng.normal(size=(D, K)), rng.normal(size=(K, K)),
                    lengths=[5, 0, 7])
    full = sm.marginals().edge
    per = sm.marginals(edge="sum").edge
    np.testing.assert_allclose(per, [full[:5].sum(0), np.zeros((K, K)), full[5:].sum(0)], rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(sm.marginals(edge="total").edge, full.sum(0), rtol=1e-12)
    assert sm.marginals(edge="none").edge is None
    with pytest.raises(ValueError, match="`edge` must be one of"):
        sm.marginals(edge="rows")


def test_bad_parameters_and_hyper_parameters_are_named():
    rng = np.random.default_rng(0)
    m = random_model(GeneralHSMM, 2, 3, "right", rng)
    X = rng.normal(size=(6, 1))
    m.transmat_ = m.transmat_[:, :2]
    with pytest.raises(ValueError, match="`transmat_` must have shape"):
        m.score(X)
    m = random_model(ResidentialTimeHMM, 2, 3, "right", rng)
    m.transmat_[0, 0, 0] = 0.5
    with pytest.raises(ValueError, match="next state equals the one left"):
        m.score(X)
    with pytest.raises(ValueError, match="`censoring` must be one of"):
        VariableTransitionHMM(2, max_duration=3, censoring="both").fit(X)
    with pytest.raises(ValueError, match="`n_states` must be >= 2"):
        VariableTransitionHMM(1, max_duration=3).fit(X)
    with pytest.raises(ValueError, match="`max_duration` must be an integer >= 1"):
        GeneralHSMM(2, max_duration=0).fit(X)
    m = random_model(VariableTransitionHMM, 2, 3, "right", rng)
    m.transmat_[-1] = [[0.5, 0.5], [0.5, 0.5]]
    with pytest.raises(ValueError, match="must have a zero diagonal"):
        m.score(X)


def test_sample_and_information_criteria():
    rng = np.random.default_rng(4)
    for cls in (GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM):
        m = random_model(cls, 2, 3, "right", rng)
        X, S, segs = m.sample(40, random_state=0)
        assert X.shape == (40, 1) and S.shape == (40,) and segs[-1, 1] == 39
        assert np.all(segs[1:, 0] == segs[:-1, 1] + 1)
        assert np.all(segs[1:, 2] != segs[:-1, 2])
        assert m.bic(X) > m.aic(X) - 1e9
        _, states, rows = m.decode(X, return_segments=True)
        assert rows[0].shape[1] == 4
        np.testing.assert_array_equal(np.repeat(rows[0][:, 2], rows[0][:, 1] - rows[0][:, 0] + 1),
                                      states)
