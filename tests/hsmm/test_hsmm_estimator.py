"""HiddenSemiMarkovModel as an estimator: EM, restarts, frozen parameters, contract, model files, errors."""
import copy
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import HiddenSemiMarkovModel
from structlearn.hsmm.explicit_duration import EmptyStateWarning
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em


def true_model(duration=None, emission=None, censoring="right", D=60):
    m = HiddenSemiMarkovModel(3, duration="poisson", emission="gaussian", max_duration=D,
                              censoring=censoring, init_params="")
    m.startprob_ = np.array([0.5, 0.3, 0.2])
    m.transmat_ = np.array([[0.0, 0.7, 0.3], [0.4, 0.0, 0.6], [0.5, 0.5, 0.0]])
    m.duration_ = duration or du.Poisson(lam=[6.0, 14.0, 24.0])
    m.emission_ = emission or em.Gaussian(means=[0.0, 3.0, 6.0], variances=[1.0, 1.0, 1.0])
    m.max_duration_ = D
    m.n_features_in_ = 1
    return m


def simulate(model, lengths, seed):
    rng = np.random.RandomState(seed)
    Xs, Ss = [], []
    for T in lengths:
        X, S, _ = model.sample(T, random_state=rng)
        Xs.append(X)
        Ss.append(S)
    return np.concatenate(Xs), np.concatenate(Ss)


# -- EM ------------------------------------------------------------------------------------------------
def _random_em_problem(seed):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 4))
    fam = ["nonparametric", "poisson", "geometric", "negative_binomial", "gamma", "lognormal"][seed % 6]
    emi = ["gaussian", "poisson", "categorical"][seed % 3]
    cens = ["none", "right", "both"][(seed // 3) % 3]
    T = int(rng.integers(15, 40))
    lengths = [T, int(rng.integers(5, 20))]
    N = sum(lengths)
    if emi == "gaussian":
        X = rng.normal(size=(N, 1)) + 2 * (np.arange(N) // 7 % 2)[:, None]
    elif emi == "poisson":
        X = rng.poisson(3 + 5 * (np.arange(N) // 6 % 2), size=N)[:, None].astype(float)
    else:
        X = rng.integers(4, size=(N, 1)).astype(float)
    D = int(rng.integers(3, 12))
    return HiddenSemiMarkovModel(K, duration=fam, emission=emi, max_duration=D, censoring=cens,
                                 n_iter=8, tol=0.0, random_state=seed, init="random"), X, lengths


def _check_monotone(seed):
    model, X, lengths = _random_em_problem(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        try:
            model.fit(X, lengths)
        except ValueError as exc:  # a random start may make a short sequence impossible ("none")
            assert "zero likelihood" in str(exc)
            return
    h = np.array(model.monitor_.history)
    assert np.all(np.diff(h) >= -1e-7 * (1 + np.abs(h[:-1]))), (seed, np.diff(h).min())


@pytest.mark.parametrize("seed", range(18))
def test_em_is_monotone(seed):
    _check_monotone(seed)


@pytest.mark.slow
def test_em_is_monotone_on_100_random_problems():
    for seed in range(100, 200):
        _check_monotone(seed)


_GAMMA = du.Gamma(shape=[3.0, 6.0, 9.0], scale=[2.0, 2.0, 3.0])


@pytest.mark.parametrize("family,true", [
    ("poisson", du.Poisson(lam=[6.0, 14.0, 24.0])),
    ("negative_binomial", du.NegativeBinomial(n=[4.0, 8.0, 12.0], p=[0.4, 0.4, 0.35])),
    pytest.param("gamma", _GAMMA, marks=pytest.mark.slow),
    pytest.param("lognormal", du.LogNormal(mu=[1.5, 2.5, 3.0], sigma=[0.4, 0.3, 0.3]),
                 marks=pytest.mark.slow),
    pytest.param("nonparametric", du.NonParametric(_GAMMA.pmf(60).T), marks=pytest.mark.slow),
])
def test_parameters_recovered_on_simulated_data(family, true):
    """Duration means within 5 % (issue acceptance), emissions and transitions close."""
    gen = true_model(duration=true)
    lengths = [10000, 10000]
    X, S = simulate(gen, lengths, seed=0)
    fit = HiddenSemiMarkovModel(3, duration=family, emission="gaussian", max_duration=60,
                                random_state=0, n_iter=200, tol=1e-6).fit(X, lengths)
    order = np.argsort(fit.emission_.means)
    np.testing.assert_allclose(fit.emission_.means[order], [0, 3, 6], atol=0.05)
    np.testing.assert_allclose(fit.duration_.mean(60)[order], true.mean(60), rtol=0.05)
    np.testing.assert_allclose(fit.transmat_[np.ix_(order, order)], gen.transmat_, atol=0.05)
    assert fit.converged_
    rank = np.argsort(order)
    assert (rank[fit.predict(X, lengths)] == S).mean() > 0.95


def test_n_init_keeps_the_best_restart():
    gen = true_model()
    X, _ = simulate(gen, [400], seed=1)
    a = HiddenSemiMarkovModel(3, duration="poisson", max_duration=60, random_state=3, n_iter=30,
                              init="random")
    b = clone(a).set_params(n_init=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a.fit(X)
        b.fit(X)
    assert b.log_likelihood_ >= a.log_likelihood_ - 1e-9
    np.testing.assert_allclose(b.score(X), b.log_likelihood_, rtol=1e-10)


@pytest.mark.parametrize("init", ["kmeans", "quantile", "random"])
def test_init_methods_and_reproducibility(init):
    X, _ = simulate(true_model(), [300], seed=2)
    kw = dict(duration="gamma", max_duration=50, random_state=7, n_iter=5, init=init, n_init=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = HiddenSemiMarkovModel(3, **kw).fit(X)
        b = HiddenSemiMarkovModel(3, **kw).fit(X)
    np.testing.assert_array_equal(a.monitor_.history, b.monitor_.history)
    np.testing.assert_array_equal(a.transmat_, b.transmat_)


def test_params_freeze_and_init_params():
    gen = true_model()
    X, _ = simulate(gen, [300], seed=3)
    m = HiddenSemiMarkovModel(3, duration=du.Poisson(lam=[6.0, 14.0, 24.0]),
                              emission=em.Gaussian(means=[0.0, 3.0, 6.0], variances=[1.0, 1.0, 1.0]),
                              max_duration=60, params="e", init_params="", n_iter=5)
    m.startprob_ = gen.startprob_.copy()
    m.transmat_ = gen.transmat_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X)
    np.testing.assert_array_equal(m.transmat_, gen.transmat_)
    np.testing.assert_array_equal(m.startprob_, gen.startprob_)
    np.testing.assert_array_equal(m.duration_.lam, [6.0, 14.0, 24.0])
    assert not np.array_equal(m.emission_.means, [0.0, 3.0, 6.0])
    assert m.n_parameters() == 6  # only emissions are estimated
    with pytest.raises(ValueError, match="startprob_"):
        HiddenSemiMarkovModel(3, init_params="tde", max_duration=5).fit(X)
    with pytest.raises(ValueError, match="no parameters"):
        HiddenSemiMarkovModel(3, init_params="st", max_duration=5).fit(X)


def test_state_without_posterior_mass_keeps_its_parameters():
    gen = true_model(emission=em.Gaussian(means=[0.0, 3.0, 1e6], variances=[1.0, 1.0, 1.0]))
    X = np.random.default_rng(0).normal(size=(100, 1))
    m = HiddenSemiMarkovModel(3, duration=du.Poisson(lam=[6.0, 14.0, 24.0]),
                              emission=em.Gaussian(means=[0.0, 3.0, 1e6], variances=[1.0, 1.0, 1.0]),
                              max_duration=60, init_params="", n_iter=3)
    m.startprob_, m.transmat_ = gen.startprob_.copy(), gen.transmat_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(EmptyStateWarning, match=r"^state 2 received no posterior mass"):
            m.fit(X)
    assert m.emission_.means[2] == 1e6 and m.emission_.variances[2] == 1.0
    assert m.duration_.lam[2] == 24.0
    np.testing.assert_array_equal(m.transmat_[2], gen.transmat_[2])
    for v in (m.startprob_, m.transmat_, m.emission_.means, m.duration_.lam):
        assert np.all(np.isfinite(v))


def test_em_from_given_parameters_runs_with_fewer_rows_than_states():
    """Issue 13 item 8: with every parameter given (init_params=""), EM needs no initialisation from the
    data, so 2 rows for 3 states are enough."""
    gen = true_model()
    m = HiddenSemiMarkovModel(3, duration=copy.deepcopy(gen.duration_), emission=copy.deepcopy(gen.emission_),
                              max_duration=40, init_params="", params="st", n_iter=5)
    m.startprob_, m.transmat_ = gen.startprob_.copy(), gen.transmat_.copy()
    X = np.array([[0.1], [0.2]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X)
    h = np.array(m.monitor_.history)
    np.testing.assert_allclose(h[0], gen.score(X), rtol=1e-12)
    assert np.all(np.isfinite(h)) and np.all(np.diff(h) >= -1e-10)


def test_convergence_warning_and_monitor(capsys):
    X, _ = simulate(true_model(), [200], seed=4)
    m = HiddenSemiMarkovModel(3, duration="poisson", max_duration=40, n_iter=2, tol=0.0,
                              random_state=0, verbose=True)
    with pytest.warns(ConvergenceWarning, match="n_iter=2"):
        m.fit(X)
    assert not m.converged_ and len(m.monitor_.history) == 2 == m.monitor_.iter  # one per M-step
    assert "HSMM EM" in capsys.readouterr().err
    m2 = HiddenSemiMarkovModel(3, duration="poisson", max_duration=40, n_iter=500, tol=1e-3,
                               random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m2.fit(X)
    assert m2.converged_ and m2.monitor_.history[-1] - m2.monitor_.history[-2] < 1e-3


@pytest.mark.parametrize("emission", ["multivariate_gaussian", "diag_gaussian",
                                      em.GaussianMixture(2, "full")])
def test_multivariate_emissions_fit(emission):
    rng = np.random.default_rng(5)
    gen = true_model()
    _, S = simulate(gen, [400], seed=5)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    X = centers[S] + rng.normal(size=(400, 2))
    X[10] = np.nan
    m = HiddenSemiMarkovModel(3, duration="nonparametric", emission=emission, max_duration=40,
                              random_state=0, n_iter=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X)
    h = np.array(m.monitor_.history)
    assert np.all(np.diff(h) > -1e-7 * np.abs(h[1:]))
    assert np.isfinite(m.score(X))


# -- model selection ------------------------------------------------------------------------------------
def test_aic_bic_and_parameter_count():
    X, _ = simulate(true_model(), [300], seed=6)
    m = HiddenSemiMarkovModel(3, duration="gamma", max_duration=50, random_state=0, n_iter=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X)
    p = 2 + 3 * 1 + 2 * 3 + 2 * 3  # start, transitions, gamma durations, gaussian emissions
    assert m.n_parameters() == p
    ll = m.score(X)
    np.testing.assert_allclose(m.aic(X), -2 * ll + 2 * p)
    np.testing.assert_allclose(m.bic(X), -2 * ll + p * np.log(300))
    np2 = HiddenSemiMarkovModel(2, duration="nonparametric", max_duration=10, n_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        np2.fit(X)
    assert np2.n_parameters() == 1 + 0 + 2 * 9 + 4


# -- scikit-learn contract ----------------------------------------------------------------------------
def test_sklearn_contract():
    m = HiddenSemiMarkovModel(2, duration="poisson", max_duration=30, random_state=0, n_iter=5)
    params = m.get_params()
    assert params["n_states"] == 2 and params["duration"] == "poisson"
    c = clone(m)
    assert c.get_params() == params
    with pytest.raises(NotFittedError):
        m.score(np.zeros((5, 1)))
    for meth in ("predict_proba", "filter", "predict_next", "posterior_durations", "confidence"):
        with pytest.raises(NotFittedError):
            getattr(m, meth)(np.zeros((5, 1)))
    X, _ = simulate(true_model(), [100], seed=7)
    X0 = X.copy()
    obj = du.Poisson(lam=[3.0, 4.0])
    m2 = HiddenSemiMarkovModel(2, duration=obj, max_duration=30, random_state=0, n_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert m2.fit(X) is m2
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(obj.lam, [3.0, 4.0])  # the passed object is not modified
    assert m2.duration_ is not obj
    m2.set_params(n_iter=7)
    assert m2.n_iter == 7
    assert clone(m2).get_params()["duration"] is not obj


def test_one_dimensional_X_and_ragged_batches():
    X, _ = simulate(true_model(), [50, 30, 1], seed=8)
    m = HiddenSemiMarkovModel(2, duration="geometric", max_duration=40, random_state=0, n_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X[:, 0], [50, 30, 1])
    np.testing.assert_allclose(m.score(X, [50, 30, 1]),
                               m.score(X[:50]) + m.score(X[50:80]) + m.score(X[80:]), rtol=1e-10)
    assert m.predict(X, [50, 30, 1]).shape == (81,)
    assert m.score(X[:0], [0]) == 0.0


# -- model files -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("emission", ["gaussian", em.MultivariateGaussian("diag"), "gmm"])
def test_save_load_round_trip(tmp_path, emission):
    rng = np.random.default_rng(9)
    F = 1 if emission == "gaussian" else 2
    X = rng.normal(size=(120, F)) + (np.arange(120) // 15 % 2)[:, None] * 3
    m = HiddenSemiMarkovModel(2, duration="negative_binomial", emission=emission, max_duration=30,
                              censoring="both", random_state=0, n_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X)
    path = tmp_path / "hsmm.npz"
    m.save(path)
    r = HiddenSemiMarkovModel.load(path)
    assert r.get_params()["censoring"] == "both"
    np.testing.assert_allclose(r.score(X), m.score(X), rtol=1e-12)
    np.testing.assert_array_equal(r.predict(X), m.predict(X))
    np.testing.assert_allclose(r.predict_proba(X), m.predict_proba(X), rtol=1e-12, atol=1e-15)
    assert r.monitor_.history == m.monitor_.history


def test_save_refuses_custom_objects_and_load_refuses_other_files(tmp_path):
    class MyPoisson(du.Poisson):
        pass

    X = np.random.default_rng(0).poisson(3, size=(60, 1)).astype(float)
    m = HiddenSemiMarkovModel(2, duration=MyPoisson(), emission="poisson", max_duration=20, n_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X)
    with pytest.raises(ValueError, match="custom duration"):
        m.save(tmp_path / "x.npz")
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="not a structlearn model"):
        HiddenSemiMarkovModel.load(tmp_path / "other.npz")


# -- bad input ---------------------------------------------------------------------------------------------
def test_bad_hyper_parameters():
    X = np.zeros((10, 1))
    for kw, msg in [(dict(n_states=0), "n_states"), (dict(censoring="left"), "censoring"),
                    (dict(max_duration=0), "max_duration"), (dict(n_init=0), "n_init"),
                    (dict(tol=-1.0), "tol"), (dict(init="pca"), "init"),
                    (dict(params="x"), "params"), (dict(duration="weibull"), "duration"),
                    (dict(emission="laplace"), "emission")]:
        with pytest.raises(ValueError, match=msg):
            HiddenSemiMarkovModel(**kw).fit(X)


def test_bad_data():
    m = true_model()
    with pytest.raises(ValueError, match="`lengths` sums to 9 but the observations `X` have 10 rows"):
        m.score(np.zeros((10, 1)), [4, 5])
    with pytest.raises(ValueError, match="2-d"):
        m.score(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="univariate"):
        m.score(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="fewer observed rows"):
        HiddenSemiMarkovModel(3, max_duration=3).fit(np.array([[1.0], [2.0], [np.nan]]))
    cat = HiddenSemiMarkovModel(2, emission="categorical", max_duration=4, n_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cat.fit(np.array([[0], [1], [2], [1], [0], [2]]))
    with pytest.raises(ValueError, match="alphabet"):
        cat.score(np.array([[3.0]]))
    cat2 = HiddenSemiMarkovModel(2, emission=em.Categorical(n_features=5), max_duration=4, n_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cat2.fit(np.array([[0], [1], [2], [1], [0], [2]]))
    assert cat2.score(np.array([[4.0]])) == -np.inf  # in the alphabet, unseen: MLE probability 0
    assert np.isfinite(cat2.score(np.array([[2.0]])))


def test_bad_probabilities():
    m = true_model()
    X = np.zeros((5, 1))
    m.transmat_ = np.array([[0.0, 0.5, 0.4], [0.4, 0.0, 0.6], [0.5, 0.5, 0.0]])
    with pytest.raises(ValueError, match=r"transmat_` rows must sum to 1 \(or be all zero: an absorbing "
                                         r"final state\); row 0 sums to 0.9"):
        m.score(X)
    m.transmat_ = np.array([[0.2, 0.5, 0.3], [0.4, 0.0, 0.6], [0.5, 0.5, 0.0]])
    with pytest.raises(ValueError, match="zero diagonal"):
        m.score(X)
    m = true_model()
    m.startprob_ = np.array([0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="startprob_` must be non-negative and sum to 1"):
        m.score(X)
    with pytest.raises(ValueError, match="negative|\\[0"):
        true_model(duration=du.Poisson(lam=[-1.0, 1.0, 1.0]))


def test_impossible_sequence_under_censoring_none():
    m = HiddenSemiMarkovModel(2, duration=du.NonParametric([[0, 0, 1.0], [0, 0, 1.0]]),
                              max_duration=3, censoring="none", init_params="se")
    m.transmat_ = np.array([[0.0, 1.0], [1.0, 0.0]])
    X = np.random.default_rng(0).normal(size=(7, 1))
    with pytest.raises(ValueError, match="zero likelihood.*censoring='none'"):
        m.fit(X)
    m.set_params(censoring="right").fit(X[:6])
    m.set_params(censoring="none")
    assert m.score(X) == -np.inf
    with pytest.raises(ValueError, match="sequence 0"):
        m.decode(X)
    with pytest.raises(ValueError, match="algorithm"):
        m.decode(X[:6], algorithm="beam")
    with pytest.raises(ValueError, match="segments"):
        m.segment_posterior(X[:6], np.array([[0, 9, 0]]))


def test_restarts_start_frozen_initial_values_from_the_call_of_fit():
    """With init_params="" every restart starts from the same given values, so n_init = 2 gives the
    same fit as n_init = 1 (and the given objects are not modified)."""
    gen = true_model()
    X, _ = simulate(gen, [300], seed=10)

    def make(n_init):
        m = HiddenSemiMarkovModel(3, duration=du.Poisson(lam=[5.0, 10.0, 20.0]),
                                  emission=em.Gaussian(means=[0.5, 2.5, 5.0], variances=[1.0, 1.0, 1.0]),
                                  max_duration=60, init_params="", n_iter=6, n_init=n_init)
        m.startprob_ = gen.startprob_.copy()
        m.transmat_ = gen.transmat_.copy()
        return m

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = make(1).fit(X)
        b = make(2).fit(X)
    np.testing.assert_allclose(a.monitor_.history, b.monitor_.history, rtol=1e-12)
    np.testing.assert_array_equal(b.duration.lam, [5.0, 10.0, 20.0])
