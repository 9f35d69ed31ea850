"""The emission families of issue 14: Bernoulli, multinomial counts, von Mises, multi-stream products with
missing values per stream — densities against scipy.stats, weighted MLE against scipy.optimize, recovery,
EM in the HSMM, save/load."""
import warnings

import numpy as np
import pytest
from scipy import optimize, stats

from structlearn import HiddenSemiMarkovModel
from structlearn import emissions as facade
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em


def weights(N, K, seed):
    return np.random.default_rng(seed).dirichlet(np.ones(K), size=N)


# -- densities ------------------------------------------------------------------------------------
def test_bernoulli_density_and_missing_entries():
    p = np.array([[0.2, 0.7, 0.5], [0.9, 0.1, 0.3]])
    X = np.array([[1, 0, 1], [0, np.nan, 1], [np.nan] * 3])
    ld = em.Bernoulli(p).log_density(X)
    for k in range(2):
        np.testing.assert_allclose(ld[0, k], stats.bernoulli.logpmf([1, 0, 1], p[k]).sum(), rtol=1e-12)
        np.testing.assert_allclose(ld[1, k], stats.bernoulli.logpmf([0, 1], p[k, [0, 2]]).sum(), rtol=1e-12)
    assert np.all(ld[2] == 0.0)
    assert em.Bernoulli([[0.0, 1.0]]).log_density(np.array([[1.0, 1.0]]))[0, 0] == -np.inf


def test_multinomial_density_matches_scipy():
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    X = np.array([[1, 2, 0], [0, 0, 4], [3, 1, 1], [np.nan] * 3])
    ld = em.Multinomial(p).log_density(X)
    for t in range(3):
        for k in range(2):
            np.testing.assert_allclose(ld[t, k], stats.multinomial.logpmf(X[t], X[t].sum(), p[k]), rtol=1e-12)
    assert np.all(ld[3] == 0.0)
    with pytest.raises(ValueError, match="partly missing"):
        em.Multinomial(p).check_X(np.array([[1, np.nan, 0]]))


def test_von_mises_density_matches_scipy():
    mu, kappa = np.array([0.5, -2.0, 3.0]), np.array([2.0, 0.0, 700.0])
    x = np.array([[0.1], [3.0], [np.nan], [-3.1]])
    ld = em.VonMises(mu, kappa).log_density(x)
    for k in range(3):
        np.testing.assert_allclose(ld[[0, 1, 3], k], stats.vonmises.logpdf(x[[0, 1, 3], 0], kappa[k], loc=mu[k]),
                                   rtol=1e-10)
    assert np.all(ld[2] == 0.0)


def test_multistream_is_the_product_and_a_missing_stream_contributes_log_one():
    g = em.Gaussian(means=[0.0, 2.0], variances=[1.0, 0.5])
    v = em.VonMises(mu=[0.0, 1.0], kappa=[1.0, 4.0])
    b = em.Bernoulli([[0.2, 0.8], [0.6, 0.4]])
    ms = em.MultiStream([g, v, b], columns=[[0], [1], [2, 3]])
    X = np.array([[0.3, 0.2, 1, 0], [np.nan, 0.5, 0, 1], [1.0, np.nan, np.nan, np.nan]])
    ld = ms.log_density(ms.check_X(X))
    ref = g.log_density(X[:, [0]]) + v.log_density(X[:, [1]]) + b.log_density(X[:, 2:])
    np.testing.assert_allclose(ld, ref, rtol=1e-12)
    np.testing.assert_allclose(ld[1], v.log_density(X[[1], 1:2])[0] + b.log_density(X[[1], 2:])[0], rtol=1e-12)
    np.testing.assert_allclose(ld[2], g.log_density(X[[2], :1])[0], rtol=1e-12)
    assert ms.n_parameters() == 4 + 4 + 4


# -- weighted MLE --------------------------------------------------------------------------------
def test_bernoulli_and_multinomial_fit_are_the_weighted_mle():
    rng = np.random.default_rng(0)
    N = 60
    w = weights(N, 2, 1)
    X = (rng.random((N, 3)) < 0.4).astype(float)
    X[::7, 1] = np.nan
    fam = em.Bernoulli().fit(X, w)
    for k in range(2):
        for f in range(3):
            o = ~np.isnan(X[:, f])

            def neg(p):
                return -(w[o, k] @ stats.bernoulli.logpmf(X[o, f], p[0]))
            res = optimize.minimize_scalar(lambda p: neg([p]), bounds=(1e-9, 1 - 1e-9), method="bounded",
                                           options={"xatol": 1e-12})
            np.testing.assert_allclose(fam.probs[k, f], res.x, atol=1e-7)
    Xc = rng.multinomial(6, [0.2, 0.5, 0.3], N).astype(float)
    fam = em.Multinomial().fit(Xc, w)
    for k in range(2):
        def negm(z):
            p = np.exp(z - np.logaddexp.reduce(z))
            return -(w[:, k] @ stats.multinomial.logpmf(Xc, 6, p))
        res = optimize.minimize(negm, np.zeros(3), method="BFGS", options={"gtol": 1e-9})
        np.testing.assert_allclose(fam.probs[k], np.exp(res.x - np.logaddexp.reduce(res.x)), atol=1e-5)


def test_von_mises_fit_is_the_weighted_mle():
    rng = np.random.default_rng(3)
    N = 80
    w = weights(N, 2, 4)
    x = rng.vonmises(1.0, 3.0, (N, 1))
    fam = em.VonMises().fit(x, w)
    for k in range(2):
        def neg(z):
            return -(w[:, k] @ stats.vonmises.logpdf(x[:, 0], np.exp(z[1]), loc=z[0]))
        res = optimize.minimize(neg, [0.0, 0.0], method="Nelder-Mead",
                                options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 4000})
        np.testing.assert_allclose(fam.mu[k], res.x[0], atol=1e-5)
        np.testing.assert_allclose(fam.kappa[k], np.exp(res.x[1]), rtol=1e-5)
        assert -neg([fam.mu[k], np.log(fam.kappa[k])]) >= -res.fun - 1e-9


def test_multistream_fit_is_the_streams_fits():
    rng = np.random.default_rng(5)
    N = 50
    w = weights(N, 2, 6)
    X = np.c_[rng.normal(size=N), rng.vonmises(0.0, 2.0, N)]
    X[:10, 1] = np.nan
    ms = em.MultiStream([em.Gaussian(), em.VonMises()]).fit(X, w)
    g = em.Gaussian().fit(X[:, [0]], w)
    v = em.VonMises().fit(X[:, [1]], w)
    np.testing.assert_allclose(ms.streams[0].means, g.means)
    np.testing.assert_allclose(ms.streams[1].kappa, v.kappa)


# -- recovery -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bernoulli", "multinomial", "von_mises", "multistream"])
def test_sampling_and_recovery_at_1e5(name):
    n = 50000
    states = np.repeat([0, 1], n)
    if name == "bernoulli":
        true = em.Bernoulli([[0.2, 0.7], [0.6, 0.05]])
    elif name == "multinomial":
        true = em.Multinomial([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]], n_trials=4)
    elif name == "von_mises":
        true = em.VonMises([0.5, -2.5], [2.0, 8.0])
    else:
        true = em.MultiStream([em.Gaussian(means=[0.0, 3.0], variances=[1.0, 2.0]),
                               em.VonMises([1.0, 2.0], [3.0, 1.0])])
    X = true.sample(states, random_state=0)
    w = np.eye(2)[states]
    est = em.make_emission(true)
    est.fit(X, w)
    if name == "von_mises":
        np.testing.assert_allclose(est.mu, true.mu, atol=0.02)
        np.testing.assert_allclose(est.kappa, true.kappa, rtol=0.05)
    elif name == "multistream":
        np.testing.assert_allclose(est.streams[0].means, true.streams[0].means, atol=0.03)
        np.testing.assert_allclose(est.streams[1].kappa, true.streams[1].kappa, rtol=0.05)
    else:
        np.testing.assert_allclose(est.probs, true.probs, atol=0.01)
        np.testing.assert_allclose((X[:n].mean(0)), (true.probs[0] * (4 if name == "multinomial" else 1)),
                                   rtol=0.05)


# -- the HSMM -------------------------------------------------------------------------------------
def hsmm_data(name, seed, T=150):
    rng = np.random.default_rng(seed)
    z = np.repeat(rng.integers(0, 2, 12), rng.integers(5, 20, 12))[:T]
    T = z.shape[0]
    if name == "bernoulli":
        X = (rng.random((T, 3)) < np.where(z[:, None] == 0, 0.2, 0.7)).astype(float)
        X[rng.random((T, 3)) < 0.1] = np.nan
        return em.Bernoulli(), X
    if name == "multinomial":
        return em.Multinomial(), np.array([rng.multinomial(5, [0.6, 0.3, 0.1] if s == 0 else [0.1, 0.3, 0.6])
                                           for s in z], dtype=float)
    if name == "von_mises":
        return em.VonMises(), rng.vonmises(np.where(z == 0, 0.0, 2.5), 3.0)[:, None]
    X = np.c_[rng.normal(2.0 * z, 1.0), rng.vonmises(np.where(z == 0, 0.0, 2.5), 2.0)]
    X[rng.random(T) < 0.2, 0] = np.nan  # the Gaussian stream drops out
    X[rng.random(T) < 0.2, 1] = np.nan
    return em.MultiStream(["gaussian", "von_mises"]), X


FAMS = ["bernoulli", "multinomial", "von_mises", "multistream"]


@pytest.mark.parametrize("name", FAMS)
@pytest.mark.parametrize("seed", [0, 1])
def test_em_is_monotone_with_the_new_emissions(name, seed):
    emission, X = hsmm_data(name, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = HiddenSemiMarkovModel(2, duration="poisson", emission=emission, max_duration=30, n_iter=8, tol=0,
                                  random_state=seed).fit(X)
    h = np.asarray(m.monitor_.history)
    assert np.all(np.isfinite(h)) and np.all(np.diff(h) >= -1e-8 * np.abs(h[1:]))


@pytest.mark.parametrize("name", FAMS)
def test_save_load_round_trip(name, tmp_path):
    emission, X = hsmm_data(name, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = HiddenSemiMarkovModel(2, duration=du.Coxian(2), emission=emission, max_duration=30, n_iter=3,
                                  random_state=0).fit(X)
    m.save(tmp_path / "m.npz")
    b = HiddenSemiMarkovModel.load(tmp_path / "m.npz")
    assert type(b.emission_) is type(m.emission_)
    np.testing.assert_array_equal(b.emission_.log_density(X), m.emission_.log_density(X))
    np.testing.assert_allclose(b.score(X), m.score(X), rtol=1e-12)


def test_names_facade_and_errors():
    assert isinstance(em.make_emission("bernoulli"), em.Bernoulli)
    assert isinstance(em.make_emission("von_mises"), em.VonMises)
    assert facade.MultiStream is em.MultiStream and facade.Multinomial is em.Multinomial
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        em.Bernoulli().check_X(np.array([[0.5]]))
    with pytest.raises(ValueError, match="probs"):
        em.Bernoulli([[1.5]])
    with pytest.raises(ValueError, match="kappa"):
        em.VonMises([0.0], [-1.0])
    with pytest.raises(ValueError, match="one column"):
        em.VonMises().check_X(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="n_trials"):
        em.Multinomial(n_trials=0)
    with pytest.raises(ValueError, match="columns"):
        em.MultiStream([em.Gaussian(), em.Gaussian()], columns=[[0], [0]])
    with pytest.raises(ValueError, match="streams"):
        em.MultiStream([])
    with pytest.raises(ValueError, match="stream family"):
        em.MultiStream([{"family": "os.system"}])
