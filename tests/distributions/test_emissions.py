"""Emission families of the HSMM: log-densities, missing data, weighted MLE, sampling, validation."""
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from structlearn.distributions import emissions as em


def weighted_loglik(dist, X, w):
    return float((w * dist.log_density(X)).sum())


# -- log densities ------------------------------------------------------------------------------------
def test_categorical_log_density_and_missing():
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]])
    dist = em.Categorical(p)
    X = np.array([[0], [2], [np.nan], [1]])
    X = dist.check_X(X)
    ld = dist.log_density(X)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(ld[[0, 1, 3]], np.log(p[:, [0, 2, 1]].T))
    np.testing.assert_array_equal(ld[2], [0.0, 0.0])
    assert ld[1, 1] == -np.inf


def test_poisson_log_density_marginalises_missing_features():
    lam = np.array([[2.0, 5.0], [0.5, 9.0]])
    dist = em.Poisson(lam)
    X = np.array([[1, 4], [np.nan, 7], [np.nan, np.nan], [0, 0]], dtype=float)
    ld = dist.log_density(dist.check_X(X))
    for n in range(4):
        for k in range(2):
            want = sum(stats.poisson.logpmf(X[n, f], lam[k, f]) for f in range(2)
                       if not np.isnan(X[n, f]))
            np.testing.assert_allclose(ld[n, k], want, rtol=1e-12)
    # a zero rate gives probability one to zero counts, zero to others
    z = em.Poisson([[0.0]])
    np.testing.assert_array_equal(z.log_density(np.array([[0.0], [1.0]]))[:, 0], [0.0, -np.inf])


def test_gaussian_log_densities():
    rng = np.random.default_rng(0)
    g = em.Gaussian(means=[0.0, 2.0], variances=[1.0, 0.25])
    x = rng.normal(size=(6, 1))
    x[2] = np.nan
    ld = g.log_density(g.check_X(x))
    for k, (m, v) in enumerate([(0, 1), (2, 0.25)]):
        ok = ~np.isnan(x[:, 0])
        np.testing.assert_allclose(ld[ok, k], stats.norm.logpdf(x[ok, 0], m, np.sqrt(v)), rtol=1e-12)
        assert ld[2, k] == 0.0
    means = rng.normal(size=(2, 3))
    A = rng.normal(size=(2, 3, 3))
    cov = A @ A.transpose(0, 2, 1) + np.eye(3)
    full = em.MultivariateGaussian("full", means, cov)
    X = rng.normal(size=(5, 3))
    X[4] = np.nan
    ld = full.log_density(full.check_X(X))
    for k in range(2):
        np.testing.assert_allclose(ld[:4, k], stats.multivariate_normal.logpdf(X[:4], means[k], cov[k]),
                                   rtol=1e-10)
    np.testing.assert_array_equal(ld[4], [0.0, 0.0])
    X[0, 1] = np.nan
    with pytest.raises(ValueError, match="partly missing"):
        full.log_density(X)
    var = rng.uniform(0.5, 2, size=(2, 3))
    diag = em.MultivariateGaussian("diag", means, var)
    ld = diag.log_density(X)
    want = sum(stats.norm.logpdf(X[0, f], means[1, f], np.sqrt(var[1, f])) for f in (0, 2))
    np.testing.assert_allclose(ld[0, 1], want, rtol=1e-12)


def test_gmm_log_density():
    rng = np.random.default_rng(1)
    w = np.array([[0.3, 0.7], [0.5, 0.5]])
    means = rng.normal(size=(2, 2, 2))
    var = rng.uniform(0.5, 1.5, size=(2, 2, 2))
    g = em.GaussianMixture(2, "diag", w, means, var)
    X = rng.normal(size=(4, 2))
    X[3] = np.nan
    ld = g.log_density(X)
    for k in range(2):
        comp = [np.log(w[k, m]) + stats.multivariate_normal.logpdf(X[:3], means[k, m], np.diag(var[k, m]))
                for m in range(2)]
        np.testing.assert_allclose(ld[:3, k], logsumexp(comp, axis=0), rtol=1e-10)
    np.testing.assert_allclose(ld[3], 0.0, atol=1e-15)


# -- weighted MLE ------------------------------------------------------------------------------------
def test_weighted_mle_closed_forms():
    rng = np.random.default_rng(2)
    N = 50
    w = rng.random((N, 2))
    x = rng.normal(2, 1.5, size=(N, 1))
    g = em.Gaussian(min_covar=1e-6).fit(x, w)
    for k in range(2):
        m = w[:, k] @ x[:, 0] / w[:, k].sum()
        np.testing.assert_allclose(g.means[k], m)
        np.testing.assert_allclose(g.variances[k], w[:, k] @ (x[:, 0] - m) ** 2 / w[:, k].sum())
    c = rng.poisson(4, size=(N, 2)).astype(float)
    c[3, 1] = np.nan
    p = em.Poisson().fit(c, w)
    ok = ~np.isnan(c[:, 1])
    np.testing.assert_allclose(p.lam[1, 1], w[ok, 1] @ c[ok, 1] / w[ok, 1].sum())
    s = rng.integers(3, size=(N, 1)).astype(float)
    cat = em.Categorical(n_features=4).fit(s, w)
    for v in range(4):
        np.testing.assert_allclose(cat.probs[0, v], w[s[:, 0] == v, 0].sum() / w[:, 0].sum())
    X = rng.normal(size=(N, 3))
    full = em.MultivariateGaussian("full", min_covar=1e-9).fit(X, w)
    m = w[:, 0] @ X / w[:, 0].sum()
    cov = ((X - m).T * w[:, 0]) @ (X - m) / w[:, 0].sum()
    np.testing.assert_allclose(full.means[0], m)
    np.testing.assert_allclose(full.covars[0], cov, rtol=1e-10)


@pytest.mark.parametrize("make", [
    lambda: em.Gaussian(means=[0.0, 1.0], variances=[1.0, 2.0]),
    lambda: em.MultivariateGaussian("diag", np.zeros((2, 2)), np.ones((2, 2))),
    lambda: em.MultivariateGaussian("full", np.zeros((2, 2)), np.tile(np.eye(2), (2, 1, 1))),
    lambda: em.Poisson([[1.0, 1.0], [3.0, 3.0]]),
    lambda: em.GaussianMixture(2, "diag", np.full((2, 2), 0.5), np.zeros((2, 2, 2)) + [[[0], [1]]],
                               np.ones((2, 2, 2))),
    lambda: em.GaussianMixture(2, "full", np.full((2, 2), 0.5), np.zeros((2, 2, 2)) + [[[0], [1]]],
                               np.tile(np.eye(2), (2, 2, 1, 1))),
])
def test_fit_never_decreases_the_weighted_likelihood_and_keeps_massless_states(make):
    rng = np.random.default_rng(3)
    dist = make()
    F = 1 if isinstance(dist, em.Gaussian) else 2
    X = rng.normal(1.0, 2.0, size=(80, F))
    if isinstance(dist, em.Poisson):
        X = rng.poisson(3, size=(80, F)).astype(float)
    w = np.zeros((80, 2))
    w[:, 0] = rng.random(80)
    before = weighted_loglik(dist, X, w)
    state1 = [np.copy(getattr(dist, n)[1]) for n in dist._param_names]
    for _ in range(5):
        dist.fit(X, w)
        after = weighted_loglik(dist, X, w)
        assert after >= before - 1e-9 * abs(before)
        before = after
    for n, v in zip(dist._param_names, state1):
        np.testing.assert_array_equal(getattr(dist, n)[1], v)


def test_variance_floor():
    x = np.ones((10, 1))
    g = em.Gaussian(min_covar=0.01).fit(x, np.ones((10, 1)))
    assert g.variances[0] == 0.01
    X = np.c_[np.arange(10.0), np.arange(10.0)]
    mv = em.MultivariateGaussian("full", min_covar=0.05).fit(X, np.ones((10, 1)))
    assert np.linalg.eigvalsh(mv.covars[0]).min() >= 0.05 - 1e-12


# -- sampling -------------------------------------------------------------------------------------------
def test_sampling_moments():
    rng = np.random.RandomState(0)
    n = 20000
    states = np.repeat([0, 1], n)
    g = em.MultivariateGaussian("full", [[0.0, 0.0], [3.0, -1.0]],
                                [np.eye(2), [[2.0, 0.5], [0.5, 1.0]]])
    s = g.sample(states, rng)
    np.testing.assert_allclose(s[n:].mean(0), [3, -1], atol=0.05)
    np.testing.assert_allclose(np.cov(s[n:].T), [[2, 0.5], [0.5, 1]], atol=0.08)
    p = em.Poisson([[2.0], [7.0]]).sample(states, rng)
    np.testing.assert_allclose([p[:n].mean(), p[n:].mean()], [2, 7], atol=0.1)
    c = em.Categorical([[0.1, 0.9], [0.7, 0.3]]).sample(states, rng)
    np.testing.assert_allclose([c[:n].mean(), c[n:].mean()], [0.9, 0.3], atol=0.02)
    gm = em.GaussianMixture(2, "diag", [[0.5, 0.5], [1.0, 0.0]], [[[-2.0], [2.0]], [[5.0], [0.0]]],
                            [[[1.0], [1.0]], [[1.0], [1.0]]]).sample(states[::20], rng)
    assert gm.shape == (2 * n // 20, 1)
    np.testing.assert_allclose(gm[n // 20:].mean(), 5.0, atol=0.15)


def test_initialize_from_labels():
    rng = np.random.default_rng(4)
    X = np.r_[rng.normal(0, 1, (50, 1)), rng.normal(10, 1, (50, 1))]
    labels = np.r_[np.zeros(50, int), np.ones(50, int)]
    g = em.Gaussian().initialize(X, 2, labels, 0)
    np.testing.assert_allclose(g.means, [X[:50].mean(), X[50:].mean()])
    gm = em.GaussianMixture(3).initialize(X, 2, labels, 0)
    assert gm.means.shape == (2, 3, 1)
    cat = em.Categorical().initialize(np.array([[0.0], [4.0]]), 2, np.array([0, 1]), 0)
    assert cat.n_features == 5 and cat.probs.shape == (2, 5)


# -- validation -----------------------------------------------------------------------------------------
def test_bad_inputs_raise():
    cat = em.Categorical([[0.5, 0.5]])
    with pytest.raises(ValueError, match="alphabet"):
        cat.check_X(np.array([[2.0]]))
    with pytest.raises(ValueError, match="whole numbers"):
        cat.check_X(np.array([[0.5]]))
    with pytest.raises(ValueError, match="sum to 1"):
        em.Categorical([[0.5, 0.2]])
    with pytest.raises(ValueError, match="n_features"):
        em.Categorical([[0.5, 0.5]], n_features=3)
    assert em.Categorical(n_features=5).check_X(np.array([[4.0]])).shape == (1, 1)
    with pytest.raises(ValueError, match="non-negative"):
        em.Poisson([[-1.0]])
    with pytest.raises(ValueError, match="whole numbers"):
        em.Poisson().check_X(np.array([[1.5]]))
    with pytest.raises(ValueError, match="positive"):
        em.Gaussian([0.0], [0.0])
    with pytest.raises(ValueError, match="univariate"):
        em.Gaussian().check_X(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="positive definite"):
        em.MultivariateGaussian("full", [[0.0, 0.0]], [[[1.0, 2.0], [2.0, 1.0]]])
    with pytest.raises(ValueError, match="covariance_type"):
        em.MultivariateGaussian("spherical")
    with pytest.raises(ValueError, match="infinite"):
        em.Gaussian().check_X(np.array([[np.inf]]))
    with pytest.raises(ValueError, match="2-d"):
        em.Gaussian().check_X(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="emission"):
        em.make_emission("laplace")
    with pytest.raises(ValueError, match="protocol"):
        em.make_emission(object())
