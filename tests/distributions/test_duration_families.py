"""The duration families of issue 14: discrete Coxian, discretised Gaussian, convex-monotone, exponential
family, and the shift of the parametric families — pmfs, weighted MLE against scipy.optimize, parameter
recovery, EM in the HSMM, save/load."""
import warnings

import numpy as np
import pytest
from scipy import optimize, stats

from structlearn import HiddenSemiMarkovModel
from structlearn import durations as facade
from structlearn.distributions import durations as du

D = 30


def coxian():
    return du.Coxian(3, stay=[[0.5, 0.7, 0.8], [0.2, 0.9, 0.5]], proceed=[[0.8, 0.6], [0.5, 0.5]])


NEW = {
    "coxian": coxian,
    "discrete_gaussian": lambda: du.DiscreteGaussian(mu=[6.0, 12.0], sigma=[2.0, 3.0]),
    "convex_monotone": lambda: du.ConvexMonotone(weights=np.r_[[np.eye(D)[9]], [np.full(D, 1.0 / D)]]),
    "exponential_family": lambda: du.ExponentialFamily(("log_d", "d"), eta=[[2.0, -0.5], [1.0, -0.2]]),
    "shifted_poisson": lambda: du.Poisson(lam=[3.0, 6.0], shift=[2, 5]),
    "shifted_gamma": lambda: du.Gamma(shape=[2.0, 4.0], scale=[1.5, 2.0], shift=[3, 0]),
    "shifted_geometric": lambda: du.Geometric(p=[0.3, 0.15], shift=[2, 4]),
}


def q_value(lp, counts, left):
    """Q = Σ n_d log p(d) - F log μ per state, from a (D, K) log-pmf (computed here, independently)."""
    d = np.arange(1, lp.shape[0] + 1)
    out = []
    for k in range(lp.shape[1]):
        nz = counts[:, k] > 0
        out.append(counts[nz, k] @ lp[nz, k] - left[k] * np.log(d @ np.exp(lp[:, k])))
    return np.array(out)


def histogram(samples, n, K):
    return np.stack([np.bincount(samples[k * n:(k + 1) * n] - 1, minlength=D) for k in range(K)], 1).astype(float)


# -- pmfs -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NEW)
def test_pmf_is_a_distribution_on_1_to_D(name):
    dist = NEW[name]()
    for Dm in (1, 7, D):
        lp = dist.log_pmf(Dm)
        assert lp.shape == (Dm, 2) and lp.dtype == np.float64
        np.testing.assert_allclose(np.exp(lp).sum(0), 1.0, rtol=1e-12)


def test_coxian_pmf_is_the_phase_type_matrix_power():
    dist = coxian()
    lp = dist.log_pmf(D)
    d = np.arange(1, D + 1)
    for k in range(2):
        s, c = dist.stay[k], dist.proceed[k]
        a = np.r_[(1 - s[:-1]) * c, 0.0]
        e = 1 - s - a
        T = np.diag(s) + np.diag(a[:-1], 1)
        f = np.array([np.linalg.matrix_power(T, t - 1)[0] @ e for t in d])
        np.testing.assert_allclose(np.exp(lp[:, k]), f / f.sum(), rtol=1e-10)
        N = np.linalg.inv(np.eye(3) - T)
        np.testing.assert_allclose(dist.untruncated_mean()[k], N[0].sum(), rtol=1e-12)


def test_discrete_gaussian_and_shift_match_scipy():
    d = np.arange(1, D + 1)[:, None]
    dist = du.DiscreteGaussian(mu=[6.0, 12.0], sigma=[2.0, 3.0])
    ref = stats.norm.cdf(d + 0.5, [6.0, 12.0], [2.0, 3.0]) - stats.norm.cdf(d - 0.5, [6.0, 12.0], [2.0, 3.0])
    np.testing.assert_allclose(dist.pmf(D), ref / ref.sum(0), rtol=1e-10, atol=1e-15)
    ref = stats.poisson.pmf(d - 1 - np.array([2, 5]), [3.0, 6.0])
    np.testing.assert_allclose(NEW["shifted_poisson"]().pmf(D), ref / ref.sum(0), rtol=1e-10, atol=1e-300)


def test_convex_monotone_pmf_is_convex_and_non_increasing():
    rng = np.random.default_rng(0)
    dist = du.ConvexMonotone(weights=rng.dirichlet(np.ones(D), size=3))
    p = dist.pmf(D).T
    p = np.c_[p, np.zeros(3)]  # p(D + 1) = 0
    assert np.all(np.diff(p, axis=1) <= 1e-15)
    assert np.all(np.diff(p, 2, axis=1) >= -1e-15)
    np.testing.assert_allclose(du.triangular_basis(D).sum(0), 1.0, rtol=1e-12)


def test_exponential_family_contains_poisson_and_geometric():
    d = np.arange(1, D + 1)[:, None]
    ef = du.ExponentialFamily(("d",), base="poisson", eta=[[np.log(4.0)]])
    ref = stats.poisson.pmf(d - 1, 4.0)
    np.testing.assert_allclose(ef.pmf(D), ref / ref.sum(0), rtol=1e-10)
    ef = du.ExponentialFamily("d", eta=[[np.log(0.7)]])
    np.testing.assert_allclose(ef.pmf(D), du.Geometric(p=[0.3]).pmf(D), rtol=1e-10)


# -- weighted MLE --------------------------------------------------------------------------------
def random_counts(seed, Dm=14):
    rng = np.random.default_rng(seed)
    d = np.arange(1, Dm + 1)[:, None]
    shape = stats.gamma.pdf(d - 0.5, [3.0, 5.0], scale=[1.2, 1.0])
    return 40 * shape * rng.uniform(0.5, 1.5, size=(Dm, 2)) + 0.05


@pytest.mark.parametrize("with_left", [False, True])
@pytest.mark.parametrize("name", ["discrete_gaussian", "exponential_family", "coxian"])
def test_fit_matches_direct_optimisation_of_q(name, with_left):
    """The M-step reaches the maximum of Q found by scipy.optimize (Nelder–Mead on the same objective,
    unconstrained coordinates, started at the fit and at another point)."""
    counts = random_counts(1)
    Dm = counts.shape[0]
    left = np.array([1.5, 0.7]) if with_left else np.zeros(2)
    if name == "discrete_gaussian":
        dist = du.DiscreteGaussian().fit(counts, left)

        def build(x):
            return du.DiscreteGaussian(mu=[x[0]], sigma=[np.exp(x[1])])
        x_fit = [np.r_[dist.mu[k], np.log(dist.sigma[k])] for k in range(2)]
    elif name == "exponential_family":
        dist = du.ExponentialFamily(("log_d", "d")).fit(counts, left)

        def build(x):
            return du.ExponentialFamily(("log_d", "d"), eta=[x])
        x_fit = list(dist.eta)
    else:
        dist = du.Coxian(2, n_inner=400)
        for _ in range(3):
            dist.fit(counts, left)

        def build(x):
            s = 1 / (1 + np.exp(-x))
            return du.Coxian(2, stay=[s[:2]], proceed=[s[2:]])
        x_fit = [np.log(np.r_[dist.stay[k], dist.proceed[k]]) - np.log1p(-np.r_[dist.stay[k], dist.proceed[k]])
                 for k in range(2)]
    q_fit = q_value(dist.log_pmf(Dm), counts, left)
    for k in range(2):
        def neg(x):
            try:
                return -q_value(build(x).log_pmf(Dm), counts[:, [k]], left[[k]])[0]
            except ValueError:
                return np.inf
        x0 = np.clip(x_fit[k], -20, 20)
        best = min(optimize.minimize(neg, x, method="Nelder-Mead",
                                     options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 4000}).fun
                   for x in (x0, x0 + 0.3))
        assert -best <= q_fit[k] + 1e-6 * abs(q_fit[k])


@pytest.mark.parametrize("with_left", [False, True])
def test_convex_monotone_fit_matches_constrained_optimisation_over_p(with_left):
    """Independent check in other coordinates: maximise Q over p itself with the linear constraints
    (non-increasing, convex, p(D + 1) = 0, Σ p = 1) by SLSQP."""
    rng = np.random.default_rng(2)
    Dm = 10
    counts = rng.gamma(2.0, 2.0, size=(Dm, 1)) * np.linspace(2, 0.5, Dm)[:, None]
    left = np.array([2.0]) if with_left else np.zeros(1)
    dist = du.ConvexMonotone().fit(counts, left)
    q_fit = q_value(dist.log_pmf(Dm), counts, left)[0]
    d = np.arange(1, Dm + 1)

    def neg(p):
        if np.any(p <= 0):
            return 1e10
        return -(counts[:, 0] @ np.log(p) - left[0] * np.log(d @ p))

    cons = [{"type": "eq", "fun": lambda p: p.sum() - 1},
            {"type": "ineq", "fun": lambda p: -np.diff(np.r_[p, 0.0])},
            {"type": "ineq", "fun": lambda p: np.diff(np.r_[p, 0.0], 2)}]
    res = optimize.minimize(neg, np.exp(dist.log_pmf(Dm)[:, 0]) * 0.5 + 0.5 * du.triangular_basis(Dm)[:, -1],
                            method="SLSQP", constraints=cons, bounds=[(1e-12, 1)] * Dm,
                            options={"ftol": 1e-14, "maxiter": 1000})
    assert -res.fun <= q_fit + 1e-7 * abs(q_fit)
    if not with_left:  # concave problem: the same maximum
        np.testing.assert_allclose(q_fit, -res.fun, rtol=1e-6)


@pytest.mark.parametrize("name", ["coxian", "discrete_gaussian", "convex_monotone", "exponential_family"])
def test_fit_never_decreases_q(name):
    counts = random_counts(4)
    left = np.array([1.0, 0.3])
    dist = NEW[name]() if name != "convex_monotone" else du.ConvexMonotone(
        weights=np.full((2, counts.shape[0]), 1.0 / counts.shape[0]))
    dist.initialize(2, counts.shape[0], np.array([4.0, 6.0]))
    q = q_value(dist.log_pmf(counts.shape[0]), counts, left)
    for _ in range(4):
        dist.fit(counts, left)
        q_new = q_value(dist.log_pmf(counts.shape[0]), counts, left)
        assert np.all(q_new >= q - 1e-9 * np.abs(q))
        q = q_new


# -- recovery -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NEW)
def test_parameter_recovery_at_1e5(name):
    true = NEW[name]()
    n = 50000
    s = true.sample(np.repeat([0, 1], n), D, random_state=1)
    assert s.dtype == np.int64 and s.min() >= 1 and s.max() <= D
    counts = histogram(s, n, 2)
    est = type(true)(**{k: v for k, v in true._config().items() if k != "estimate_shift"})
    if hasattr(est, "estimate_shift"):
        est.estimate_shift = True
    for _ in range(40 if name == "coxian" else 1):
        est.fit(counts)
    np.testing.assert_allclose(est.mean(D), true.mean(D), rtol=0.05)
    np.testing.assert_allclose(est.mean(D), true.mean(D), rtol=0.01)  # measured: <= 0.3 %
    assert np.abs(est.pmf(D) - true.pmf(D)).max() < 0.01
    if name.startswith("shifted"):
        np.testing.assert_array_equal(est.shift, true.shift)


def test_estimated_shift_is_the_maximum_likelihood_shift():
    true = du.NegativeBinomial(n=[3.0], p=[0.4], shift=[4])
    counts = histogram(true.sample(np.zeros(20000, dtype=int), D, random_state=3), 20000, 1)
    est = du.NegativeBinomial(estimate_shift=True).fit(counts)
    assert est.shift[0] == 4
    qs = []
    for s in range(int(np.flatnonzero(counts[:, 0])[0]) + 1):
        qs.append(q_value(du.NegativeBinomial(shift=[s]).fit(counts).log_pmf(D), counts, [0.0])[0])
    assert int(np.argmax(qs)) == 4
    assert est.n_parameters(D) == 3 and du.NegativeBinomial(n=[3.0], p=[0.4]).n_parameters(D) == 2


# -- the HSMM -------------------------------------------------------------------------------------
HSMM_FAMILIES = {
    "coxian": lambda: du.Coxian(n_phases=2, n_inner=5),
    "discrete_gaussian": du.DiscreteGaussian,
    "convex_monotone": du.ConvexMonotone,
    "exponential_family": lambda: du.ExponentialFamily(("log_d", "d")),
    "poisson_shift": lambda: du.Poisson(estimate_shift=True),
    "geometric_shift": lambda: du.Geometric(estimate_shift=True),
}


def simulate(seed, T=160):
    rng = np.random.default_rng(seed)
    true = HiddenSemiMarkovModel(2, duration=du.Poisson(lam=[6.0, 9.0]), max_duration=25, init_params="")
    true.startprob_ = np.array([0.5, 0.5])
    true.transmat_ = np.array([[0.0, 1.0], [1.0, 0.0]])
    true.duration_ = du.Poisson(lam=[6.0, 9.0])
    from structlearn.distributions.emissions import Gaussian
    true.emission_ = Gaussian(means=[0.0, 1.5 + rng.uniform()], variances=[1.0, 1.0])
    true.max_duration_ = 25
    true.n_features_in_ = 1
    X, _, _ = true.sample(T, random_state=seed)
    return X


@pytest.mark.parametrize("name", HSMM_FAMILIES)
@pytest.mark.parametrize("seed,censoring", [(0, "right"), (1, "both"), (2, "none")])
def test_em_is_monotone_with_the_new_families(name, seed, censoring):
    X = simulate(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = HiddenSemiMarkovModel(2, duration=HSMM_FAMILIES[name](), max_duration=25, censoring=censoring,
                                  n_iter=6, tol=0, random_state=seed).fit(X)
    h = np.asarray(m.monitor_.history)
    assert np.all(np.isfinite(h))
    assert np.all(np.diff(h) >= -1e-7 * np.abs(h[1:]))
    assert type(m.duration_).__name__ == type(HSMM_FAMILIES[name]()).__name__


@pytest.mark.parametrize("name", HSMM_FAMILIES)
def test_save_load_round_trip(name, tmp_path):
    X = simulate(5, T=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = HiddenSemiMarkovModel(2, duration=HSMM_FAMILIES[name](), max_duration=25, n_iter=3,
                                  random_state=0).fit(X)
    m.save(tmp_path / "m.npz")
    b = HiddenSemiMarkovModel.load(tmp_path / "m.npz")
    assert type(b.duration_) is type(m.duration_)
    assert b.duration_._config() == m.duration_._config()
    np.testing.assert_array_equal(b.duration_.log_pmf(25), m.duration_.log_pmf(25))
    np.testing.assert_allclose(b.score(X), m.score(X), rtol=1e-12)


def test_names_facade_and_old_files():
    assert isinstance(du.make_duration("coxian"), du.Coxian)
    assert isinstance(du.make_duration("ConvexMonotone"), du.ConvexMonotone)
    assert isinstance(du.make_duration("discrete_gaussian"), du.DiscreteGaussian)
    assert facade.Coxian is du.Coxian and facade.ExponentialFamily is du.ExponentialFamily
    # a model file written before the shift existed has no "shift" array
    p = du.Poisson().set_state({"lam": np.array([2.0, 3.0])})
    np.testing.assert_array_equal(p.log_pmf(10), du.Poisson(lam=[2.0, 3.0]).log_pmf(10))


def test_user_family_with_two_functions():
    class Zeta(du.ExponentialFamily):
        def sufficient_statistics(self, d):
            return np.log(d)[:, None]

        def log_base_measure(self, d):
            return np.zeros_like(d)

    true = Zeta(eta=[[-1.5]])
    d = np.arange(1, D + 1)
    np.testing.assert_allclose(true.pmf(D)[:, 0], d ** -1.5 / (d ** -1.5).sum(), rtol=1e-12)
    counts = histogram(true.sample(np.zeros(40000, dtype=int), D, random_state=0), 40000, 1)
    np.testing.assert_allclose(Zeta().fit(counts).eta[0, 0], -1.5, atol=0.03)
    X = simulate(0, T=80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = HiddenSemiMarkovModel(2, duration=Zeta(), max_duration=20, n_iter=2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="custom duration"):
        m.save("/dev/null")


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="stay"):
        du.Coxian(2, stay=[[0.5, 1.0]], proceed=[[0.5]])
    with pytest.raises(ValueError, match="proceed"):
        du.Coxian(2, stay=[[0.5, 0.5]], proceed=[[0.5, 0.5]])
    with pytest.raises(ValueError, match="n_phases"):
        du.Coxian(0)
    with pytest.raises(ValueError, match="shift"):
        du.Poisson(lam=[1.0], shift=[1.5])
    with pytest.raises(ValueError, match="shift"):
        du.Gamma(shape=[1.0], scale=[1.0], shift=[-1])
    with pytest.raises(ValueError, match="statistics"):
        du.ExponentialFamily(("cube",))
    with pytest.raises(ValueError, match="base"):
        du.ExponentialFamily(base="x")
    with pytest.raises(ValueError, match="eta"):
        du.ExponentialFamily(("d", "log_d"), eta=[[1.0]])
    with pytest.raises(ValueError, match="weights"):
        du.ConvexMonotone(weights=[[0.5, 0.2]])
    with pytest.raises(ValueError, match="sigma"):
        du.DiscreteGaussian(mu=[1.0], sigma=[0.0])


def test_a_shifted_geometric_never_takes_the_hmm_shortcut():
    from structlearn.distributions.emissions import Gaussian
    for dur, chain in ((du.Geometric(p=[0.2, 0.3]), True), (du.Geometric(p=[0.2, 0.3], shift=[0, 2]), False),
                       (du.Geometric(p=[0.2, 0.3], estimate_shift=True), False)):
        m = HiddenSemiMarkovModel(2, duration=dur, max_duration=500, init_params="")
        m.startprob_, m.transmat_ = np.array([0.5, 0.5]), np.array([[0.0, 1.0], [1.0, 0.0]])
        m.duration_, m.emission_ = dur, Gaussian(means=[0.0, 3.0], variances=[1.0, 1.0])
        m.max_duration_, m.n_features_in_ = 500, 1
        assert (m._hmm_equivalent() is not None) == chain
    # the shifted law is p (1 - p)^(d - s - 1) on d > s
    lp = du.Geometric(p=[0.25], shift=[3]).log_pmf(200)[:, 0]
    d = np.arange(1, 201)
    ref = np.where(d > 3, np.log(0.25) + (d - 4) * np.log(0.75), -np.inf)
    np.testing.assert_allclose(lp, ref, rtol=1e-10)
