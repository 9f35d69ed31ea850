"""A covariance EM leaves singular is used as hmmlearn uses it (1e-7 on the diagonal), and said so."""
import numpy as np
import pytest
from scipy import linalg

from structlearn.distributions.emissions._gaussian_maths import SINGULAR_JITTER, gaussian_log_density


def test_singular_full_covariance_gets_hmmlearns_jitter_and_a_warning():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 2))
    means = np.array([[0.0, 0.0], [1.0, -1.0]])
    covars = np.array([np.eye(2), np.ones((2, 2))])           # the second has rank 1
    with pytest.warns(RuntimeWarning, match="covariance 1 is not positive definite"):
        got = gaussian_log_density(X, means, covars, "full")
    want = [_log_normal(X, means[0], covars[0]), _log_normal(X, means[1], covars[1] + SINGULAR_JITTER * np.eye(2))]
    np.testing.assert_allclose(got, np.column_stack(want), rtol=1e-10)


def _log_normal(X, mean, cov):
    """log N(x; mean, cov) by a Cholesky solve (cov + jitter has condition 2e7: an eigen-solver loses digits)."""
    L = linalg.cholesky(cov, lower=True)
    z = linalg.solve_triangular(L, (X - mean).T, lower=True)
    return -0.5 * (z ** 2).sum(0) - np.log(np.diag(L)).sum() - 0.5 * len(mean) * np.log(2 * np.pi)


def test_covariance_that_the_jitter_cannot_save_raises():
    covars = np.array([[[1.0, 0.0], [0.0, -1.0]]])
    with pytest.raises(ValueError, match="covariance 0 is not symmetric positive definite"):
        gaussian_log_density(np.zeros((1, 2)), np.zeros((1, 2)), covars, "full")
