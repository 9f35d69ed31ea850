"""The segmental (polynomial trajectory) observation model of issue 14: segment log-likelihoods against a
direct computation, the weighted least-squares M-step, recovery and EM in GeneralHSMM."""
import warnings

import numpy as np
import pytest
from scipy import stats

from structlearn import GeneralHSMM
from structlearn.distributions.emissions.segment_regression import PolynomialSegments

TRUE = dict(coef=[[0.0, 0.5, -0.02], [5.0, -0.3, 0.0]], variances=[0.25, 0.5])


def test_log_segment_is_the_sum_of_gaussian_log_densities():
    m = PolynomialSegments(2, **TRUE)
    m.check(2, 6)
    x = np.random.default_rng(0).normal(size=(9, 1))
    x[4, 0] = np.nan
    ls = m.log_segment(x)
    assert ls.shape == (9, 6, 2)
    for e in range(9):
        for d in range(1, min(6, e + 1) + 1):
            seg = x[e - d + 1:e + 1, 0]
            u = np.arange(d)
            for j in range(2):
                mean = np.vander(u, 3, increasing=True) @ np.asarray(TRUE["coef"][j])
                ref = np.nansum(stats.norm.logpdf(seg, mean, np.sqrt(TRUE["variances"][j])))
                np.testing.assert_allclose(ls[e, d - 1, j], ref, rtol=1e-12)


def test_fit_is_weighted_least_squares_over_the_segment_posteriors():
    rng = np.random.default_rng(1)
    N, M, D = 25, 2, 4
    x = rng.normal(size=(N, 1))
    eta = rng.random((N, M, D))
    m = PolynomialSegments(1).fit(x, [N], eta)
    for j in range(M):
        rows, ys, ws = [], [], []
        for e in range(N):
            for d in range(1, min(D, e + 1) + 1):
                for u in range(d):
                    rows.append([1.0, u])
                    ys.append(x[e - d + 1 + u, 0])
                    ws.append(eta[e, j, d - 1])
        R, y, w = np.array(rows), np.array(ys), np.array(ws)
        beta = np.linalg.lstsq(R * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        np.testing.assert_allclose(m.coef[j], beta, rtol=1e-10)
        np.testing.assert_allclose(m.variances[j], w @ (y - R @ beta) ** 2 / w.sum(), rtol=1e-10)


def test_recovery_from_known_segments():
    rng = np.random.default_rng(2)
    true = PolynomialSegments(2, **TRUE)
    xs, ends = [], []
    n = 0
    for i in range(4000):
        j, d = i % 2, int(rng.integers(5, 15))
        xs.append(true.sample(j, d, rng))
        n += d
        ends.append((n - 1, j, d))
    X = np.vstack(xs)
    eta = np.zeros((X.shape[0], 2, 15))
    for e, j, d in ends:
        eta[e, j, d - 1] = 1.0
    est = PolynomialSegments(2).fit(X, [X.shape[0]], eta)
    np.testing.assert_allclose(est.coef, TRUE["coef"], atol=0.01)
    np.testing.assert_allclose(est.variances, TRUE["variances"], rtol=0.05)


@pytest.mark.parametrize("seed", [0, 1])
def test_em_is_monotone_in_the_general_hsmm(seed):
    rng = np.random.default_rng(seed)
    true = PolynomialSegments(1, coef=[[0.0, 0.5], [5.0, -0.3]], variances=[0.25, 0.25])
    X = np.vstack([true.sample(i % 2, int(rng.integers(4, 10)), rng) for i in range(14)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = GeneralHSMM(2, max_duration=10, censoring="none", segment_emission=PolynomialSegments(1), n_iter=8,
                        tol=0, random_state=seed).fit(X)
    h = np.asarray(m.monitor_.history)
    assert np.all(np.isfinite(h)) and np.all(np.diff(h) >= -1e-8 * np.abs(h[1:]))
    assert m.emission_.n_parameters() == 6


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="degree"):
        PolynomialSegments(-1)
    with pytest.raises(ValueError, match="coef"):
        PolynomialSegments(1, coef=[[0.0]], variances=[1.0])
    with pytest.raises(ValueError, match="variances"):
        PolynomialSegments(0, coef=[[0.0]], variances=[0.0])
    with pytest.raises(ValueError, match="no parameters"):
        PolynomialSegments(1).check(2, 5)


def test_general_hsmm_with_polynomial_segments_round_trips_through_a_model_file(tmp_path):
    from structlearn.io import load_estimator
    rng = np.random.default_rng(3)
    true = PolynomialSegments(1, coef=[[0.0, 0.5], [5.0, -0.3]], variances=[0.25, 0.25])
    X = np.vstack([true.sample(i % 2, int(rng.integers(4, 10)), rng) for i in range(10)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = GeneralHSMM(2, max_duration=10, censoring="none", segment_emission=PolynomialSegments(1), n_iter=3,
                        random_state=0).fit(X)
    path = tmp_path / "poly.npz"
    m.save(path)
    back = load_estimator(path)
    assert isinstance(back.emission_, PolynomialSegments) and back.emission_ is not m.emission_
    np.testing.assert_array_equal(back.emission_.coef, m.emission_.coef)
    np.testing.assert_array_equal(back.emission_.variances, m.emission_.variances)
    assert back.score(X) == m.score(X)
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
