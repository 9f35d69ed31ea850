"""structlearn.hmm against hmmlearn: the same scripts on both, on random data and on the real data sets.

At the same parameters: the same log-likelihood (rtol 1e-10), posteriors and Viterbi path; from the same
initial parameters (``init_params=""``, parameters copied into both): the same EM trajectory (rtol 1e-8),
with and without hmmlearn's priors; from the same integer ``random_state``: the same initialisation.

EM runs hmmlearn's loop: the same ``monitor_`` (``iter``, ``history``, ``converged``) and the parameters
after the last M-step (``test_hmm_em_loop_parity.py`` checks it for every class, converged or not).
Known differences (documented in docs/guides/hmmlearn.md): GMMHMM's AIC/BIC count
K(M - 1) mixture weights (hmmlearn 0.3: M - 1); hmmlearn's ``covars_`` of a fitted spherical model
with F > 1 has the wrong shape (so its samples differ).
"""
import logging

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import hmm as S
from tests.conftest import require_data, require_module

H = require_module("hmmlearn.hmm")
logging.getLogger("hmmlearn").setLevel(logging.ERROR)  # MultinomialHMM's construction notice

RTOL_LL = 1e-10
RTOL_EM = 1e-8
COV_TYPES = ["spherical", "diag", "full", "tied"]


# ------------------------------------------------------------------------------------------------------
# parameters and data
# ------------------------------------------------------------------------------------------------------
def _stochastic(rng, *shape):
    p = rng.uniform(0.2, 1.0, shape)
    return p / p.sum(axis=-1, keepdims=True)


def _spd(rng, F, scale=1.0):
    A = rng.normal(size=(F, F))
    return scale * (A @ A.T / F + np.eye(F))


def _gauss_covars(rng, ct, K, F):
    return {"spherical": rng.uniform(0.5, 2.0, K), "diag": rng.uniform(0.5, 2.0, (K, F)),
            "full": np.array([_spd(rng, F) for _ in range(K)]), "tied": _spd(rng, F)}[ct]


def _gmm_covars(rng, ct, K, M, F):
    return {"spherical": rng.uniform(0.5, 2.0, (K, M)), "diag": rng.uniform(0.5, 2.0, (K, M, F)),
            "full": np.array([[_spd(rng, F) for _ in range(M)] for _ in range(K)]),
            "tied": np.array([_spd(rng, F) for _ in range(K)])}[ct]


def _case(kind, ct="diag", K=3, seed=0, N=(40, 70, 50), priors=None, n_iter=8, tol=-np.inf):
    """(hmmlearn model, structlearn model, X, lengths) with the same random parameters set in both
    (``n_iter`` and ``tol`` given at construction: hmmlearn's monitor keeps those of its constructor)."""
    rng = np.random.RandomState(seed)
    priors = priors or {}
    F = 2
    params = {"startprob_": _stochastic(rng, K), "transmat_": _stochastic(rng, K, K)}
    kw = dict(n_components=K, init_params="", n_iter=n_iter, tol=tol, **priors)
    if kind == "gaussian":
        params.update(means_=rng.normal(scale=2.0, size=(K, F)), covars_=_gauss_covars(rng, ct, K, F))
        h, s = H.GaussianHMM(covariance_type=ct, **kw), S.GaussianHMM(covariance_type=ct, **kw)
    elif kind == "gmm":
        M = 2
        params.update(weights_=_stochastic(rng, K, M), means_=rng.normal(scale=2.0, size=(K, M, F)),
                      covars_=_gmm_covars(rng, ct, K, M, F))
        h, s = H.GMMHMM(n_mix=M, covariance_type=ct, **kw), S.GMMHMM(n_mix=M, covariance_type=ct, **kw)
    elif kind == "categorical":
        V = 5
        params["emissionprob_"] = _stochastic(rng, K, V)
        h, s = H.CategoricalHMM(n_features=V, **kw), S.CategoricalHMM(n_features=V, **kw)
    elif kind == "multinomial":
        params["emissionprob_"] = _stochastic(rng, K, 4)
        h, s = H.MultinomialHMM(n_trials=6, **kw), S.MultinomialHMM(n_trials=6, **kw)
    elif kind == "poisson":
        params["lambdas_"] = rng.uniform(1.0, 8.0, (K, 3))
        h, s = H.PoissonHMM(**kw), S.PoissonHMM(**kw)
    else:  # pragma: no cover
        raise ValueError(kind)
    for name, value in params.items():
        setattr(h, name, value.copy())
        setattr(s, name, value.copy())
    X, _ = h.sample(int(sum(N)), random_state=seed + 1)
    if kind == "gaussian":  # a little noise off the model, so the fit has something to do
        X = X + rng.normal(scale=0.3, size=X.shape)
    return h, s, X, list(N)


CASES = ([("gaussian", ct) for ct in COV_TYPES] + [("gmm", ct) for ct in COV_TYPES]
         + [("categorical", None), ("multinomial", None), ("poisson", None)])
IDS = [f"{k}-{c}" if c else k for k, c in CASES]


def _emission_attrs(kind):
    return {"gaussian": ["means_", "_covars_"], "gmm": ["weights_", "means_", "covars_"],
            "categorical": ["emissionprob_"], "multinomial": ["emissionprob_"], "poisson": ["lambdas_"]}[kind]


def _compact(value, like):
    """hmmlearn stores a fitted spherical covariance tiled to (K, F); structlearn keeps (K,)."""
    value = np.asarray(value)
    return value[:, 0] if value.ndim == 2 and np.ndim(like) == 1 else value


def _path_log_prob(h, X, lengths, z):
    """log P(X, z) under hmmlearn's model (its own emission densities), summed over sequences."""
    logb = h._compute_log_likelihood(X)
    total, o = 0.0, 0
    with np.errstate(divide="ignore"):
        ls, lt = np.log(h.startprob_), np.log(h.transmat_)
    for T in lengths:
        zz = z[o:o + T]
        total += ls[zz[0]] + lt[zz[:-1], zz[1:]].sum() + logb[np.arange(o, o + T), zz].sum()
        o += T
    return total


def _assert_same_viterbi_path(h, X, lengths, mine, theirs, exact):
    """The same path; with discrete emissions exact ties (paths of equal score, e.g. a repeated symbol
    with swapped states) are broken by rounding, so there the two paths must score the same."""
    if exact or np.array_equal(mine, theirs):
        np.testing.assert_array_equal(mine, theirs)
        return
    np.testing.assert_allclose(_path_log_prob(h, X, lengths, mine), _path_log_prob(h, X, lengths, theirs),
                               rtol=1e-12)


# ------------------------------------------------------------------------------------------------------
# same parameters: likelihood, posteriors, Viterbi
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, ct", CASES, ids=IDS)
def test_same_parameters_same_likelihood_posteriors_and_viterbi(kind, ct):
    h, s, X, lengths = _case(kind, ct or "diag")
    np.testing.assert_allclose(s.score(X, lengths), h.score(X, lengths), rtol=RTOL_LL)
    lp_h, post_h = h.score_samples(X, lengths)
    lp_s, post_s = s.score_samples(X, lengths)
    np.testing.assert_allclose(lp_s, lp_h, rtol=RTOL_LL)
    np.testing.assert_allclose(post_s, post_h, rtol=1e-8, atol=1e-12)
    vh, zh = h.decode(X, lengths, algorithm="viterbi")
    vs, zs = s.decode(X, lengths, algorithm="viterbi")
    np.testing.assert_allclose(vs, vh, rtol=RTOL_LL)
    _assert_same_viterbi_path(h, X, lengths, zs, zh, exact=kind not in ("categorical", "multinomial",
                                                                        "poisson"))
    mh, mzh = h.decode(X, lengths, algorithm="map")
    ms, mzs = s.decode(X, lengths, algorithm="map")
    np.testing.assert_allclose(ms, mh, rtol=1e-10)
    np.testing.assert_array_equal(mzs, mzh)
    np.testing.assert_allclose(s.get_stationary_distribution(), h.get_stationary_distribution(), rtol=1e-10)
    if kind != "gmm":
        np.testing.assert_allclose(s.aic(X, lengths), h.aic(X, lengths), rtol=RTOL_LL)
        np.testing.assert_allclose(s.bic(X, lengths), h.bic(X, lengths), rtol=RTOL_LL)


# ------------------------------------------------------------------------------------------------------
# same initial parameters: EM trajectory
# ------------------------------------------------------------------------------------------------------
def _assert_same_trajectory(h, s, X, lengths, kind):
    h.fit(X, lengths)
    with pytest.warns(ConvergenceWarning):  # tol=-inf: every iteration runs
        s.fit(X, lengths)
    hist_h = np.array(h.monitor_.history)
    hist_s = np.array(s.monitor_.history)
    assert hist_s.shape == hist_h.shape and s.monitor_.iter == h.monitor_.iter
    np.testing.assert_allclose(hist_s, hist_h, rtol=RTOL_EM)
    np.testing.assert_allclose(s.log_likelihood_, h.score(X, lengths), rtol=RTOL_EM)
    for name in ["startprob_", "transmat_"] + _emission_attrs(kind):
        mine = getattr(s, name)
        np.testing.assert_allclose(mine, _compact(getattr(h, name), mine), rtol=RTOL_EM, atol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize("kind, ct", CASES, ids=IDS)
def test_same_initial_parameters_same_em_trajectory(kind, ct):
    h, s, X, lengths = _case(kind, ct or "diag", seed=1)
    _assert_same_trajectory(h, s, X, lengths, kind)


def _priors(kind, ct, K=3, F=2, seed=5):
    rng = np.random.RandomState(seed)
    base = {"startprob_prior": rng.uniform(1.0, 3.0, K), "transmat_prior": rng.uniform(1.0, 3.0, (K, K))}
    if kind == "gaussian":
        cp = {"spherical": 0.3, "diag": rng.uniform(0.1, 0.5, (K, F)), "full": 0.2 * np.eye(F),
              "tied": 0.2 * np.eye(F)}[ct]
        # (hmmlearn's full/tied update takes a scalar means_weight only)
        mw = rng.uniform(0.5, 2.0, (K, 1)) if ct in ("spherical", "diag") else 1.3
        base.update(means_prior=rng.normal(size=(K, F)), means_weight=mw,
                    covars_prior=cp, covars_weight=3.0 if ct in ("full", "tied") else 2.0)
    elif kind == "gmm":
        base.update(weights_prior=2.0, means_prior=0.5, means_weight=1.5, covars_prior=0.3,
                    covars_weight={"full": 1.0, "tied": 1.0, "diag": 0.4, "spherical": 0.4}[ct])
    elif kind == "categorical":
        base["emissionprob_prior"] = rng.uniform(1.0, 2.0, (K, 5))
    elif kind == "poisson":
        base.update(lambdas_prior=2.0, lambdas_weight=0.5)
    return base


@pytest.mark.parametrize("kind, ct", [c for c in CASES if c[0] != "multinomial"],
                         ids=[i for i in IDS if i != "multinomial"])
def test_map_estimation_with_priors_same_em_trajectory(kind, ct):
    h, s, X, lengths = _case(kind, ct or "diag", seed=2, priors=_priors(kind, ct))
    _assert_same_trajectory(h, s, X, lengths, kind)


def test_fixed_zero_topology_same_trajectory_and_kept():
    h, s, X, lengths = _case("gaussian", "diag", seed=3)
    left_right = np.triu(_stochastic(np.random.RandomState(0), 3, 3))
    left_right /= left_right.sum(axis=1, keepdims=True)
    for m in (h, s):
        m.transmat_ = left_right.copy()
        m.startprob_ = np.array([1.0, 0.0, 0.0])
        m.transmat_prior = 2.0  # a prior that would revive the zeros without the guard
    _assert_same_trajectory(h, s, X, lengths, "gaussian")
    assert np.all(s.transmat_[np.tril_indices(3, -1)] == 0) and np.all(s.startprob_[1:] == 0)


# ------------------------------------------------------------------------------------------------------
# same random_state: same initialisation and fit; same samples
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, X_kind", [("GaussianHMM", "full"), ("GaussianHMM", "spherical"),
                                         ("CategoricalHMM", None), ("PoissonHMM", None)])
def test_same_random_state_same_fit(cls, X_kind):
    rng = np.random.RandomState(4)
    if cls == "GaussianHMM":
        X = np.r_[rng.randn(40, 2), rng.randn(50, 2) + 3, rng.randn(40, 2) - 2]
        kw = {"covariance_type": X_kind}
        names = ["means_", "_covars_"]
    elif cls == "CategoricalHMM":
        X = rng.randint(0, 4, size=(130, 1))
        kw, names = {}, ["emissionprob_"]
    else:
        X = rng.poisson(4, size=(130, 2))
        kw, names = {}, ["lambdas_"]
    lengths = [60, 70]
    h = getattr(H, cls)(3, random_state=7, n_iter=5, tol=-np.inf, **kw).fit(X, lengths)
    s = getattr(S, cls)(3, random_state=7, n_iter=5, tol=-np.inf, **kw)
    with pytest.warns(ConvergenceWarning):  # tol=-inf never converges
        s.fit(X, lengths)
    for name in ["startprob_", "transmat_"] + names:
        mine = getattr(s, name)
        np.testing.assert_allclose(mine, _compact(getattr(h, name), mine), rtol=RTOL_EM, atol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize("kind, ct", [("gaussian", "full"), ("gaussian", "diag"), ("gmm", "full"),
                                      ("categorical", None), ("poisson", None), ("multinomial", None)])
def test_same_samples(kind, ct):
    h, s, _, _ = _case(kind, ct or "diag")
    for kw in ({"random_state": 11}, {"random_state": 12, "currstate": 2}):
        Xh, Zh = h.sample(30, **kw)
        Xs, Zs = s.sample(30, **kw)
        np.testing.assert_array_equal(Zs, Zh)
        np.testing.assert_allclose(Xs, Xh, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------------
# real data
# ------------------------------------------------------------------------------------------------------
def _faithful(column):
    path = require_data("old_faithful")
    col = {"eruptions": 1, "waiting": 2}[column]
    return np.genfromtxt(path / "faithful.csv", delimiter=",", skip_header=1, usecols=col)[:, None]


@pytest.mark.slow
def test_one_state_old_faithful_scores_the_gaussian_mle():
    x = _faithful("eruptions")
    model = S.GaussianHMM(1).fit(x)
    assert round(model.score(x), 3) == -421.417
    np.testing.assert_allclose(model.score(x), H.GaussianHMM(1).fit(x).score(x), rtol=RTOL_LL)
    exact = S.GaussianHMM(1, covars_prior=0.0).fit(x)  # no regulariser: exactly the MLE
    n = x.shape[0]
    np.testing.assert_allclose(exact.score(x), -n / 2 * (np.log(2 * np.pi * x.var()) + 1), rtol=1e-12)


def _real(name):
    if name == "old_faithful":
        path = require_data("old_faithful")
        X = np.genfromtxt(path / "faithful.csv", delimiter=",", skip_header=1, usecols=(1, 2))
        return X, [X.shape[0]]
    if name == "earthquakes":
        X = np.loadtxt(require_data("earthquakes") / "earthquakes.data", delimiter=",")[:, None]
        return X, [X.shape[0]]
    X = np.loadtxt(require_data("fetal_lamb") / "fetal.lamb.data")[:, None]
    return X, [X.shape[0]]


@pytest.mark.slow
@pytest.mark.parametrize("name, cls, kw", [
    ("old_faithful", "GaussianHMM", {"covariance_type": "full"}),
    ("old_faithful", "GaussianHMM", {"covariance_type": "diag"}),
    ("old_faithful", "GMMHMM", {"covariance_type": "diag", "n_mix": 2}),
    ("earthquakes", "PoissonHMM", {}),
    ("fetal_lamb", "PoissonHMM", {}),
])
def test_real_data_same_fit_as_hmmlearn(name, cls, kw):
    X, lengths = _real(name)
    h = getattr(H, cls)(2, random_state=0, n_iter=25, tol=-np.inf, **kw).fit(X, lengths)
    s = getattr(S, cls)(2, random_state=0, n_iter=25, tol=-np.inf, **kw)
    with pytest.warns(ConvergenceWarning):
        s.fit(X, lengths)
    np.testing.assert_allclose(s.monitor_.history, h.monitor_.history, rtol=RTOL_EM)
    np.testing.assert_allclose(s.score(X, lengths), h.score(X, lengths), rtol=RTOL_EM)
    np.testing.assert_array_equal(s.predict(X, lengths), h.predict(X, lengths))
    # and at hmmlearn's fitted parameters the two agree to rounding
    for name_ in ["startprob_", "transmat_"] + {"GaussianHMM": ["means_", "_covars_"], "GMMHMM":
                                                ["weights_", "means_", "covars_"], "PoissonHMM": ["lambdas_"]}[cls]:
        setattr(s, name_, getattr(h, name_))
    np.testing.assert_allclose(s.score(X, lengths), h.score(X, lengths), rtol=RTOL_LL)
    np.testing.assert_array_equal(s.decode(X, lengths)[1], h.decode(X, lengths)[1])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_multinomial_per_row_n_trials_as_hmmlearn():
    # hmmlearn's MultinomialHMM takes one number of trials per row; the same log-likelihood and EM
    rng = np.random.RandomState(0)
    n = rng.randint(1, 8, 60)
    X = np.array([rng.multinomial(k, [0.2, 0.3, 0.5]) for k in n])
    params = {"startprob_": np.array([0.6, 0.4]), "transmat_": np.array([[0.7, 0.3], [0.2, 0.8]]),
              "emissionprob_": np.array([[0.1, 0.3, 0.6], [0.5, 0.3, 0.2]])}
    kw = dict(n_components=2, init_params="", n_iter=5, tol=-np.inf)
    h, s = H.MultinomialHMM(n_trials=n, **kw), S.MultinomialHMM(n_trials=n, **kw)
    for name, value in params.items():
        setattr(h, name, value.copy())
        setattr(s, name, value.copy())
    np.testing.assert_allclose(s.score(X), h.score(X), rtol=RTOL_LL)
    h.fit(X)
    s.fit(X)
    np.testing.assert_allclose(s.emissionprob_, h.emissionprob_, rtol=RTOL_EM)
    np.testing.assert_allclose(s.transmat_, h.transmat_, rtol=RTOL_EM)
    assert s.get_params()["n_trials"] is n  # the argument is kept as given
