"""Duration families of the HSMM: pmfs, truncation, moments, sampling, weighted MLE, censoring."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from structlearn.distributions import durations as du

D = 25

FAMILIES = {
    "poisson": (du.Poisson, dict(lam=[3.0, 9.0]),
                lambda p, d: stats.poisson.pmf(d - 1, p["lam"])),
    "geometric": (du.Geometric, dict(p=[0.3, 0.08]),
                  lambda p, d: stats.geom.pmf(d, p["p"])),
    "negative_binomial": (du.NegativeBinomial, dict(n=[2.0, 6.0], p=[0.3, 0.5]),
                          lambda p, d: stats.nbinom.pmf(d - 1, p["n"], p["p"])),
    "gamma": (du.Gamma, dict(shape=[2.0, 6.0], scale=[2.0, 1.5]),
              lambda p, d: stats.gamma.cdf(d, p["shape"], scale=p["scale"])
              - stats.gamma.cdf(d - 1, p["shape"], scale=p["scale"])),
    "lognormal": (du.LogNormal, dict(mu=[1.0, 2.2], sigma=[0.5, 0.3]),
                  lambda p, d: stats.lognorm.cdf(d, p["sigma"], scale=np.exp(p["mu"]))
                  - stats.lognorm.cdf(d - 1, p["sigma"], scale=np.exp(p["mu"]))),
}


def reference_pmf(name):
    cls, params, f = FAMILIES[name]
    d = np.arange(1, D + 1)[:, None]
    p = f({k: np.asarray(v)[None, :] for k, v in params.items()}, d)
    return p / p.sum(0, keepdims=True)


@pytest.mark.parametrize("name", FAMILIES)
def test_log_pmf_is_the_truncated_renormalised_family(name):
    cls, params, _ = FAMILIES[name]
    dist = cls(**params)
    lp = dist.log_pmf(D)
    assert lp.shape == (D, 2) and lp.dtype == np.float64
    np.testing.assert_allclose(np.exp(lp), reference_pmf(name), rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(np.exp(lp).sum(0), 1.0, rtol=1e-12)
    ref = reference_pmf(name)
    d = np.arange(1, D + 1)
    np.testing.assert_allclose(dist.mean(D), d @ ref, rtol=1e-9)
    np.testing.assert_allclose(dist.var(D), (d ** 2) @ ref - (d @ ref) ** 2, rtol=1e-8)


def test_nonparametric_truncation_and_padding():
    p = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    dist = du.NonParametric(p)
    np.testing.assert_allclose(np.exp(dist.log_pmf(2)), np.array([[1 / 3, 0.5], [2 / 3, 0.5]]))
    lp = dist.log_pmf(6)
    assert lp.shape == (6, 2) and np.all(lp[4:] == -np.inf)
    np.testing.assert_allclose(dist.mean(4), [3.0, 2.5])
    with pytest.raises(ValueError, match="no mass"):
        du.NonParametric([[0.0, 1.0]]).log_pmf(1)


@pytest.mark.parametrize("name", list(FAMILIES) + ["nonparametric"])
def test_sampling_frequencies(name):
    dist = (du.NonParametric(reference_pmf("gamma").T) if name == "nonparametric"
            else FAMILIES[name][0](**FAMILIES[name][1]))
    n = 20000
    s = dist.sample(np.repeat([0, 1], n), D, random_state=0)
    assert s.dtype == np.int64 and s.min() >= 1 and s.max() <= D
    p = dist.pmf(D)
    for k in range(2):
        freq = np.bincount(s[k * n:(k + 1) * n] - 1, minlength=D) / n
        assert np.abs(freq - p[:, k]).max() < 0.015
    np.testing.assert_array_equal(s, dist.sample(np.repeat([0, 1], n), D, random_state=0))


@pytest.mark.parametrize("name", list(FAMILIES) + ["nonparametric"])
def test_fit_recovers_parameters(name):
    if name == "nonparametric":
        true = du.NonParametric(reference_pmf("gamma").T)
        est = du.NonParametric()
    else:
        cls, params, _ = FAMILIES[name]
        true, est = cls(**params), cls()
    n = 40000
    s = true.sample(np.repeat([0, 1], n), D, random_state=1)
    counts = np.stack([np.bincount(s[k * n:(k + 1) * n] - 1, minlength=D) for k in range(2)], 1)
    est.fit(counts.astype(float))
    np.testing.assert_allclose(est.mean(D), true.mean(D), rtol=0.02)
    np.testing.assert_allclose(est.pmf(D), true.pmf(D), atol=0.01)


def q_value(dist, counts, left):
    lp = dist.log_pmf(counts.shape[0])
    d = np.arange(1, counts.shape[0] + 1)
    out = []
    for k in range(counts.shape[1]):
        nz = counts[:, k] > 0
        q = counts[nz, k] @ lp[nz, k]
        q -= left[k] * np.log(d @ np.exp(lp[:, k]))
        out.append(q)
    return np.array(out)


@pytest.mark.parametrize("name", list(FAMILIES) + ["nonparametric"])
@pytest.mark.parametrize("with_left", [False, True])
def test_fit_is_a_local_maximum_of_q(name, with_left):
    """The M-step maximises Q = Σ n_d log p(d) - F log μ: random perturbations never do better."""
    rng = np.random.default_rng(3)
    Dm = 12
    d = np.arange(1, Dm + 1)[:, None]
    shape = stats.gamma.pdf(d - 0.5, [3.0, 5.0], scale=[1.2, 1.0])  # unimodal: interior optimum
    counts = 40 * shape * rng.uniform(0.5, 1.5, size=(Dm, 2)) * (rng.random((Dm, 2)) < 0.85)
    counts[0] += 0.1
    left = np.array([1.5, 0.7]) if with_left else np.zeros(2)
    if name == "nonparametric":
        dist = du.NonParametric().fit(counts, left)
        q = q_value(dist, counts, left)
        for _ in range(50):
            p = dist.probs * np.exp(0.05 * rng.standard_normal(dist.probs.shape))
            other = du.NonParametric(p / p.sum(1, keepdims=True))
            assert np.all(q_value(other, counts, left) <= q + 1e-9)
        return
    cls = FAMILIES[name][0]
    dist = cls().fit(counts, left)
    q = q_value(dist, counts, left)
    for _ in range(30):
        vals = {}
        for n_ in cls._param_names:
            v = getattr(dist, n_) * np.exp(0.02 * rng.standard_normal(2))
            if n_ == "p":
                v = np.clip(v, 1e-6, 1.0)
            if n_ == "mu":
                v = getattr(dist, n_) + 0.02 * rng.standard_normal(2)
            vals[n_] = v
        assert np.all(q_value(cls(**vals), counts, left) <= q + 1e-7 * np.abs(q))


def test_fit_keeps_state_without_mass():
    dist = du.Poisson(lam=[2.0, 5.0])
    counts = np.zeros((40, 2))  # D = 40: truncation negligible, closed form λ = mean(d - 1)
    counts[3, 0] = 4.0
    dist.fit(counts)
    assert dist.lam[1] == 5.0 and abs(dist.lam[0] - 3.0) < 1e-9
    npd = du.NonParametric(np.full((2, 40), 1 / 40))
    npd.fit(counts)
    np.testing.assert_allclose(npd.probs[1], 1 / 40)
    assert npd.probs[0, 3] == 1.0


# -- censoring ------------------------------------------------------------------------------------
def test_duration_tables():
    dist = FAMILIES["gamma"][0](**FAMILIES["gamma"][1])
    lp = dist.log_pmf(D)
    p = np.exp(lp)
    S = np.cumsum(p[::-1], 0)[::-1]
    mu = np.arange(1, D + 1) @ p
    t = du.duration_tables(lp, "none")
    for k in ("first", "middle", "last", "single"):
        np.testing.assert_allclose(t[k], lp)
    t = du.duration_tables(lp, "right")
    np.testing.assert_allclose(np.exp(t["last"]), S, rtol=1e-12)
    np.testing.assert_allclose(np.exp(t["single"]), S, rtol=1e-12)
    np.testing.assert_allclose(t["first"], lp)
    t = du.duration_tables(lp, "both")
    np.testing.assert_allclose(np.exp(t["first"]), S / mu, rtol=1e-12)
    np.testing.assert_allclose(np.exp(t["first"]).sum(0), 1.0, rtol=1e-12)  # residual law is a pmf
    R = np.cumsum((S / mu)[::-1], 0)[::-1]
    np.testing.assert_allclose(np.exp(t["single"]), R, rtol=1e-12)
    np.testing.assert_allclose(np.exp(t["single"][0]), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="censoring"):
        du.duration_tables(lp, "left")


def observed_loglik(dist, tables_counts, censoring, Dm):
    """Σ over tables of counts × log table value (the observed-data duration likelihood)."""
    t = du.duration_tables(dist.log_pmf(Dm), censoring)
    tot = 0.0
    for k, c in tables_counts.items():
        nz = c > 0
        tot += float(c[nz] @ t[k][nz])
    return tot


@pytest.mark.parametrize("censoring", ["right", "both"])
@pytest.mark.parametrize("name", list(FAMILIES) + ["nonparametric"])
@given(seed=st.integers(0, 2**31 - 1))
@settings(max_examples=8)
def test_completion_step_increases_the_observed_likelihood(censoring, name, seed):
    """complete_counts + fit is an EM step: the censored observed-data likelihood never decreases."""
    rng = np.random.default_rng(seed)
    Dm = 10
    tc = {k: rng.gamma(1.0, 1.0, (Dm, 2)) * (rng.random((Dm, 2)) < 0.5)
          for k in ("first", "middle", "last", "single")}
    if name == "nonparametric":
        dist = du.NonParametric(rng.dirichlet(np.ones(Dm), size=2))
    else:
        cls = FAMILIES[name][0]
        dist = cls().initialize(2, Dm, rng.uniform(1.5, 6, 2))
    before = observed_loglik(dist, tc, censoring, Dm)
    for _ in range(3):
        counts, left = du.complete_counts(tc, dist.log_pmf(Dm), censoring)
        if censoring == "right":
            assert np.all(left == 0)
        np.testing.assert_allclose(counts.sum(0), sum(v.sum(0) for v in tc.values()), rtol=1e-10)
        dist.fit(counts, left)
        after = observed_loglik(dist, tc, censoring, Dm)
        assert after >= before - 1e-8 * abs(before)
        before = after


def test_nonparametric_right_censoring_em_converges_to_kaplan_meier_like_optimum():
    """Repeated completion steps reach the censored MLE: perturbing it cannot increase the
    observed likelihood."""
    rng = np.random.default_rng(0)
    Dm = 6
    tc = {"middle": rng.integers(0, 5, (Dm, 1)).astype(float) + 0.5,
          "last": rng.integers(0, 3, (Dm, 1)).astype(float)}
    dist = du.NonParametric(np.full((1, Dm), 1 / Dm))
    for _ in range(2000):
        dist.fit(*du.complete_counts(tc, dist.log_pmf(Dm), "right"))
    best = observed_loglik(dist, tc, "right", Dm)
    for _ in range(50):
        p = dist.probs * np.exp(0.05 * rng.standard_normal(dist.probs.shape))
        assert observed_loglik(du.NonParametric(p / p.sum()), tc, "right", Dm) <= best + 1e-7


# -- validation -----------------------------------------------------------------------------------
def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="sum to 1"):
        du.NonParametric([[0.5, 0.2]])
    with pytest.raises(ValueError, match="non-negative"):
        du.NonParametric([[1.5, -0.5]])
    with pytest.raises(ValueError, match="lam"):
        du.Poisson(lam=[-1.0])
    with pytest.raises(ValueError, match="`p`"):
        du.Geometric(p=[1.5])  # p = 0 is allowed: an absorbing state (tests/api/test_peer_features.py)
    with pytest.raises(ValueError, match="`n`"):
        du.NegativeBinomial(n=[-2.0], p=[0.5])
    with pytest.raises(ValueError, match="same length"):
        du.Gamma(shape=[1.0, 2.0], scale=[1.0])
    with pytest.raises(ValueError, match="max_duration"):
        du.Poisson(lam=[1.0]).log_pmf(0)
    with pytest.raises(ValueError, match="duration"):
        du.make_duration("weibull")
    with pytest.raises(ValueError, match="protocol"):
        du.make_duration(object())
    with pytest.raises(ValueError, match="not set"):
        du.Gamma().log_pmf(5)


def test_make_duration_copies():
    d = du.Poisson(lam=[2.0])
    c = du.make_duration(d)
    c.lam[0] = 7.0
    assert d.lam[0] == 2.0
    assert isinstance(du.make_duration("nbinom"), du.NegativeBinomial)
