"""HSMM on real data (../shared/data): known answers and cross-checks with hmmlearn."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import HiddenSemiMarkovModel
from tests.conftest import require_data, require_module, script_module


def load_earthquakes():
    path = require_data("earthquakes")
    return np.loadtxt(path / "earthquakes.data", delimiter=",")[:, None]


def poisson_hmm_as_hsmm(K, n_init, seed=0):
    """Geometric durations + right censoring: the HSMM is exactly a Poisson HMM (Yu 2010 §4.6).
    D = 1000 >> T makes the truncation of the geometric law negligible (< 1e-30)."""
    return HiddenSemiMarkovModel(K, duration="geometric", emission="poisson", max_duration=1000,
                                 censoring="right", n_iter=3000, tol=1e-9, n_init=n_init,
                                 random_state=seed)


@pytest.mark.parametrize("K,neg_ll,lams", [
    (2, 341.8787, [15.42, 26.02]),
    pytest.param(3, 328.5275, [13.13, 19.71, 29.71], marks=pytest.mark.slow),
])
def test_earthquakes_poisson_hmm_known_answer(K, neg_ll, lams):
    """Zucchini & MacDonald (2009), §3.2/Table: −log L of the Poisson HMM with the initial
    distribution estimated freely (the best fit over restarts)."""
    X = load_earthquakes()
    m = poisson_hmm_as_hsmm(K, n_init=5).fit(X)
    assert m.converged_
    assert abs(-m.log_likelihood_ - neg_ll) < 1e-3
    assert abs(-m.score(X) - neg_ll) < 1e-3
    np.testing.assert_allclose(np.sort(m.emission_.lam.ravel()), lams, atol=0.01)
    h = np.array(m.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8)


@pytest.mark.slow
def test_fetal_lamb_matches_hmmlearn_and_hsmm_durations_improve():
    hmmlearn = require_module("hmmlearn.hmm")
    X = np.loadtxt(require_data("fetal_lamb") / "fetal.lamb.data")[:, None]
    best = -np.inf
    for s in range(10):
        h = hmmlearn.PoissonHMM(2, n_iter=3000, tol=1e-10, random_state=s).fit(X)
        best = max(best, h.score(X))
    m = poisson_hmm_as_hsmm(2, n_init=3).fit(X)
    assert m.log_likelihood_ >= best - 1e-4
    assert abs(m.log_likelihood_ - best) < 1e-3  # the same optimum (-177.483)
    nb = HiddenSemiMarkovModel(2, duration="negative_binomial", emission="poisson", max_duration=240,
                               n_iter=500, tol=1e-6, n_init=3, random_state=0).fit(X)
    assert nb.log_likelihood_ > m.log_likelihood_  # non-geometric durations fit better


def test_geometric_default_is_the_hmm_on_old_faithful():
    """Issue 13 item 5: with duration="geometric" and no max_duration the law is not truncated, so a
    one-state model is the i.i.d. Gaussian (before: off by exactly log N) and a two-state one is the HMM
    hmmlearn scores with the same parameters (self-transition 1 - p_j)."""
    hmm = require_module("hmmlearn.hmm")
    path = require_data("old_faithful")
    x = np.genfromtxt(path / "faithful.csv", delimiter=",", skip_header=1, usecols=2)
    X = x[:, None]
    one = HiddenSemiMarkovModel(1, duration="geometric", random_state=0).fit(X)
    iid = -0.5 * np.sum(np.log(2 * np.pi * x.var()) + (x - x.mean()) ** 2 / x.var())
    np.testing.assert_allclose(one.score(X), iid, rtol=1e-12)
    np.testing.assert_allclose(one.log_likelihood_, iid, rtol=1e-12)
    two = HiddenSemiMarkovModel(2, duration="geometric", n_iter=500, tol=1e-8, random_state=0).fit(X)
    p = two.duration_.p
    h = hmm.GaussianHMM(2, covariance_type="diag", init_params="", params="")
    h.startprob_ = two.startprob_
    h.transmat_ = np.diag(1 - p) + p[:, None] * two.transmat_
    h.means_ = two.emission_.means.reshape(2, 1)
    h.covars_ = two.emission_.variances.reshape(2, 1)
    np.testing.assert_allclose(two.score(X), h.score(X), rtol=1e-10)
    best = max(hmm.GaussianHMM(2, n_iter=1000, tol=1e-8, random_state=s).fit(X).score(X) for s in range(3))
    assert abs(two.log_likelihood_ - best) < 1e-3


@pytest.mark.parametrize("family", [
    "poisson", *(pytest.param(f, marks=pytest.mark.slow)
                 for f in ("nonparametric", "negative_binomial", "gamma"))])
def test_old_faithful_waiting_times(family):
    """2-state HSMM on the geyser waiting times (MASS::geyser, 299 rows): a short-wait and a
    long-wait regime (~55 and ~80 min) that mostly alternate (durations ~1–2 eruptions)."""
    path = require_data("old_faithful")
    X = np.genfromtxt(path / "geyser.csv", delimiter=",", skip_header=1, usecols=1)[:, None]
    m = HiddenSemiMarkovModel(2, duration=family, emission="gaussian", max_duration=20,
                              n_iter=300, tol=1e-6, n_init=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X)
    means = np.sort(m.emission_.means)
    assert 50 < means[0] < 60 and 75 < means[1] < 85
    short = int(np.argmin(m.emission_.means))
    assert m.duration_.mean(20)[short] < 2.0
    assert -1100 < m.log_likelihood_ < -1080
    segs = m.decode(X, return_segments=True)[2][0]
    assert segs.shape[0] > 100


@pytest.mark.slow
def test_old_faithful_example_script_writes_the_figure(tmp_path):
    require_module("matplotlib")
    require_data("old_faithful")
    mod = script_module("examples/old_faithful.py", "old_faithful_example")
    out = tmp_path / "fig.png"
    mod.main(["--quick", "--out", str(out)])
    assert out.exists() and out.stat().st_size > 10_000
