"""structlearn.hmm beyond hmmlearn: brute-force oracle agreement, missing observations, stationary start,
fixed topologies, n_jobs, the generic HiddenMarkovModel, model files, bad input and the estimator contract.
(Agreement with hmmlearn itself is tests/hmm/test_hmm_conformance.py.)"""
import warnings

import numpy as np
import pytest
from scipy import special, stats
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import hmm as S
from structlearn.distributions.emissions import Categorical, MultivariateGaussian, Poisson
from tests.oracles.chain import chain_oracle

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _gaussian_model(K=3, F=2, seed=0, ct="diag", **kw):
    rng = np.random.RandomState(seed)
    m = S.GaussianHMM(K, covariance_type=ct, init_params="", **kw)
    m.startprob_ = rng.dirichlet(np.ones(K) * 3)
    m.transmat_ = rng.dirichlet(np.ones(K) * 3, size=K)
    m.means_ = rng.normal(scale=2.0, size=(K, F))
    m.covars_ = {"diag": rng.uniform(0.5, 2.0, (K, F)), "spherical": rng.uniform(0.5, 2.0, K),
                 "full": np.array([np.eye(F) + 0.3 for _ in range(K)]), "tied": np.eye(F) * 1.5}[ct]
    return m


def _categorical_model(K=2, V=3, seed=0, **kw):
    rng = np.random.RandomState(seed)
    m = S.CategoricalHMM(K, n_features=V, init_params="", **kw)
    m.startprob_ = rng.dirichlet(np.ones(K) * 3)
    m.transmat_ = rng.dirichlet(np.ones(K) * 3, size=K)
    m.emissionprob_ = rng.dirichlet(np.ones(V) * 2, size=K)
    return m


# ------------------------------------------------------------------------------------------------------
# brute force: every state path of a tiny sequence
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ct", ["spherical", "diag", "full", "tied"])
def test_tiny_gaussian_hmm_matches_enumeration(ct):
    m = _gaussian_model(ct=ct, seed=1)
    X = np.random.RandomState(2).normal(size=(5, 2))
    unary = np.column_stack([stats.multivariate_normal(m.means_[k], m.covars_[k]).logpdf(X) for k in range(3)])
    ref = chain_oracle(unary, np.log(m.transmat_), np.log(m.startprob_), np.zeros(3))
    np.testing.assert_allclose(m.score(X), ref["log_z"], rtol=1e-12)
    np.testing.assert_allclose(m.predict_proba(X), ref["unary"], rtol=1e-10, atol=1e-14)
    log_prob, states = m.decode(X)
    np.testing.assert_allclose(log_prob, ref["max"], rtol=1e-12)
    np.testing.assert_array_equal(states, ref["ranked"][0][1])


# ------------------------------------------------------------------------------------------------------
# missing observations
# ------------------------------------------------------------------------------------------------------
def test_missing_row_is_marginalised_over_the_symbols():
    m = _categorical_model(V=3)
    X = np.array([[0], [2], [np.nan], [1], [1], [np.nan], [0]], dtype=float)
    filled = []
    for a in range(3):
        for b in range(3):
            Y = X.copy()
            Y[2, 0], Y[5, 0] = a, b
            filled.append(m.score(Y))
    np.testing.assert_allclose(m.score(X), special.logsumexp(filled), rtol=1e-12)
    assert m.score(np.full((4, 1), np.nan)) == pytest.approx(0.0, abs=1e-12)  # unary 0: probability 1


def test_missing_rows_carry_no_emission_weight_in_em():
    m = _gaussian_model(covars_prior=0.0, n_iter=1)
    rng = np.random.RandomState(3)
    X = rng.normal(size=(60, 2))
    X[[5, 17, 18, 40]] = np.nan
    gamma = m.predict_proba(X)
    obs = ~np.isnan(X).any(axis=1)
    m.fit(X)
    g = gamma[obs]
    want = (g.T @ X[obs]) / g.sum(axis=0)[:, None]
    np.testing.assert_allclose(m.means_, want, rtol=1e-10)
    with pytest.raises(ValueError, match="row 3 of X is partly missing"):
        Y = X.copy()
        Y[3, 0] = np.nan
        m.score(Y)


def test_generic_model_marginalises_single_missing_features():
    base = _gaussian_model(covars_prior=0.0)
    em = MultivariateGaussian("diag", means=base.means_, covars=base._covars_)
    g = S.HiddenMarkovModel(3, emission=em, init_params="")
    g.startprob_, g.transmat_ = base.startprob_, base.transmat_
    X = np.random.RandomState(4).normal(size=(30, 2))
    np.testing.assert_allclose(g.score(X), base.score(X), rtol=1e-12)
    X[3, 1] = np.nan  # a diagonal Gaussian integrates the missing feature out
    sub = MultivariateGaussian("diag", means=base.means_[:, :1], covars=base._covars_[:, :1])
    assert np.isfinite(g.score(X))
    np.testing.assert_allclose(g.emission_.log_density(X)[3], sub.log_density(X[3:4, :1])[0], rtol=1e-12)


# ------------------------------------------------------------------------------------------------------
# stationary start, topologies, n_jobs
# ------------------------------------------------------------------------------------------------------
def test_stationary_start_follows_transmat_and_em_is_monotone():
    rng = np.random.RandomState(5)
    X = np.r_[rng.normal(0, 1, (80, 1)), rng.normal(4, 1, (80, 1)), rng.normal(0, 1, (80, 1))]
    m = S.GaussianHMM(2, startprob="stationary", random_state=0, n_iter=30, tol=1e-8).fit(X, [120, 120])
    pi = m.startprob_
    np.testing.assert_allclose(pi @ m.transmat_, pi, atol=1e-12)
    np.testing.assert_allclose(pi, m.get_stationary_distribution(), atol=1e-12)
    assert np.all(np.diff(m.monitor_.history) > -1e-6 * abs(m.monitor_.history[-1]))
    free = S.GaussianHMM(2, random_state=0, n_iter=30, tol=1e-8).fit(X, [120, 120])
    assert m.aic(X, [120, 120]) - free.aic(X, [120, 120]) == pytest.approx(
        -2 * (m.score(X, [120, 120]) - free.score(X, [120, 120])) - 2, rel=1e-9)


def test_left_right_topology_kept_by_generic_model():
    rng = np.random.RandomState(6)
    X = np.r_[rng.normal(0, 0.5, (30, 1)), rng.normal(3, 0.5, (30, 1)), rng.normal(6, 0.5, (30, 1))]
    m = S.HiddenMarkovModel(3, emission="gaussian", init_params="e", random_state=0, n_iter=20)
    m.startprob_ = np.array([1.0, 0.0, 0.0])
    m.transmat_ = np.array([[0.9, 0.1, 0.0], [0.0, 0.9, 0.1], [0.0, 0.0, 1.0]])
    m.fit(X)
    assert np.all(m.transmat_[np.tril_indices(3, -1)] == 0) and m.transmat_[0, 2] == 0
    assert m.startprob_.tolist() == [1.0, 0.0, 0.0]
    assert np.all(np.diff(m.predict(X)) >= 0)


def test_n_jobs_blocks_give_the_same_fit():
    rng = np.random.RandomState(7)
    lengths = [30, 45, 25, 50, 40]
    X = np.concatenate([np.r_[rng.normal(0, 1, (n // 2, 2)), rng.normal(3, 1, (n - n // 2, 2))] for n in lengths])
    one = S.GaussianHMM(2, random_state=0, n_iter=6, tol=-np.inf).fit(X, lengths)
    import joblib
    with joblib.parallel_backend("threading"):
        many = S.GaussianHMM(2, random_state=0, n_iter=6, tol=-np.inf, n_jobs=3).fit(X, lengths)
    np.testing.assert_allclose(many.monitor_.history, one.monitor_.history, rtol=1e-12)
    np.testing.assert_allclose(many.means_, one.means_, rtol=1e-10)
    procs = S.GaussianHMM(2, random_state=0, n_iter=1, tol=-np.inf, n_jobs=2).fit(X, lengths)  # loky
    np.testing.assert_allclose(procs.monitor_.history, one.monitor_.history[:1], rtol=1e-12)
    # the log-likelihood after its one M-step is the second entry of the longer fit's history
    np.testing.assert_allclose(procs.log_likelihood_, one.monitor_.history[1], rtol=1e-12)


# ------------------------------------------------------------------------------------------------------
# the generic model
# ------------------------------------------------------------------------------------------------------
class TwoStreams:
    """A multi-stream emission: column 0 categorical, column 1 Poisson, independent given the state."""

    def __init__(self):
        self.cat, self.poi = Categorical(n_features=3), Poisson()

    @property
    def n_states(self):
        return self.cat.n_states

    def log_density(self, X):
        return self.cat.log_density(X[:, :1]) + self.poi.log_density(X[:, 1:])

    def fit(self, X, weights):
        self.cat.fit(X[:, :1], weights)
        self.poi.fit(X[:, 1:], weights)
        return self

    def initialize(self, X, n_states, labels, random_state=None):
        self.cat.initialize(X[:, :1], n_states, labels, random_state)
        self.poi.initialize(X[:, 1:], n_states, labels, random_state)
        return self

    def sample(self, states, random_state=None):
        return np.column_stack([self.cat.sample(states, random_state), self.poi.sample(states, random_state)])

    def n_parameters(self):
        return self.cat.n_parameters() + self.poi.n_parameters()


def test_generic_model_with_a_custom_multistream_emission():
    rng = np.random.RandomState(8)
    z = np.repeat([0, 1, 0, 1], 40)
    X = np.column_stack([np.where(z == 0, rng.randint(0, 2, z.size), 2), rng.poisson(np.where(z == 0, 1, 8))])
    m = S.HiddenMarkovModel(2, emission=TwoStreams(), random_state=0, n_iter=50).fit(X)
    assert np.all(np.diff(m.monitor_.history) > -1e-8)
    pred = m.predict(X)
    assert max(np.mean(pred == z), np.mean(pred != z)) > 0.95
    Xs, Zs = m.sample(25, random_state=1)
    assert Xs.shape == (25, 2) and Zs.shape == (25,)
    with pytest.raises(ValueError, match="custom emission object"):
        m.save("/tmp/never-written.npz")


@pytest.mark.parametrize("spec", ["gaussian", "poisson", Categorical(n_features=4), MultivariateGaussian("full")])
def test_generic_model_fits_library_families(spec):
    rng = np.random.RandomState(9)
    if spec == "gaussian" or isinstance(spec, MultivariateGaussian):
        X = np.r_[rng.normal(0, 1, (50, 2)), rng.normal(4, 1, (50, 2))][:, :1 if spec == "gaussian" else 2]
    elif spec == "poisson":
        X = np.r_[rng.poisson(1, (50, 1)), rng.poisson(9, (50, 1))]
    else:
        X = np.r_[rng.randint(0, 2, (50, 1)), rng.randint(2, 4, (50, 1))]
    m = S.HiddenMarkovModel(2, emission=spec, random_state=0).fit(X)
    h = m.monitor_.history
    assert np.all(np.diff(h) > -1e-8 * abs(h[-1])) and m.converged_
    assert np.mean(m.predict(X)[:50] != m.predict(X)[50:]) > 0.9


# ------------------------------------------------------------------------------------------------------
# model files
# ------------------------------------------------------------------------------------------------------
def _fitted_models():
    rng = np.random.RandomState(10)
    Xg = np.r_[rng.normal(0, 1, (40, 2)), rng.normal(3, 1, (40, 2))]
    Xc = rng.randint(0, 3, (80, 1))
    Xp = rng.poisson(3, (80, 2))
    Xm = rng.multinomial(5, [0.2, 0.3, 0.5], size=80)
    return [(S.GaussianHMM(2, covariance_type="full", means_prior=0.5, means_weight=np.ones((2, 1)),
                           random_state=0).fit(Xg), Xg),
            (S.GaussianHMM(2, covariance_type="spherical", random_state=0).fit(Xg), Xg),
            (S.GMMHMM(2, n_mix=2, covariance_type="tied", random_state=0).fit(Xg), Xg),
            (S.CategoricalHMM(2, random_state=0, emissionprob_prior=1.5).fit(Xc), Xc),
            (S.MultinomialHMM(2, random_state=0).fit(Xm), Xm),
            (S.PoissonHMM(2, random_state=0, startprob="stationary").fit(Xp), Xp),
            (S.HiddenMarkovModel(2, emission=MultivariateGaussian("diag"), random_state=0).fit(Xg), Xg)]


def test_save_load_round_trip_every_class(tmp_path):
    from structlearn.io.modelfile import MODEL_FORMATS, load_estimator, read_header

    for i, (model, X) in enumerate(_fitted_models()):
        path = tmp_path / f"m{i}.npz"
        model.save(path)
        fmt = read_header(path)["format"]
        assert MODEL_FORMATS[fmt].endswith(":" + type(model).__name__)
        back = load_estimator(path)
        assert type(back) is type(model)
        assert back.score(X) == pytest.approx(model.score(X), rel=1e-14)
        np.testing.assert_array_equal(back.predict(X), model.predict(X))
        assert back.monitor_.history == list(model.monitor_.history)
        assert set(back.get_params()) == set(model.get_params())
        back.save(tmp_path / f"again{i}.npz")
        np.testing.assert_allclose(type(model).load(tmp_path / f"again{i}.npz").score(X), model.score(X))


# ------------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------------
def test_bad_parameters_name_the_attribute():
    X = np.zeros((10, 2))
    m = _gaussian_model()
    m.transmat_ = np.full((3, 3), 0.3)
    with pytest.raises(ValueError, match=r"`transmat_` rows must sum to 1; row 0 sums to 0\.9"):
        m.score(X)
    m = _gaussian_model()
    m.startprob_ = np.array([0.5, 0.2, 0.2])
    with pytest.raises(ValueError, match="`startprob_` must be non-negative and sum to 1"):
        m.score(X)
    m = _gaussian_model()
    m.covars_ = -np.ones((3, 2))
    with pytest.raises(ValueError, match=r"`covars_` must be positive \('diag' variances\); got -1"):
        m.score(X)
    m = _gaussian_model(ct="full")
    m.covars_ = np.array([[[1.0, 2.0], [2.0, 1.0]]] * 3)
    with pytest.raises(ValueError, match="`covars_`: the covariance of state 0 is not positive definite"):
        m.score(X)
    m = _gaussian_model()
    m.means_ = np.zeros((2, 2))
    with pytest.raises(ValueError, match="emission parameters are for 2 states but n_components=3"):
        m.score(X)


def test_bad_data_and_lengths():
    m = _categorical_model(V=3)
    with pytest.raises(ValueError, match=r"symbol 3 at row 1 is outside the alphabet 0\.\.2 \(n_features=3\)"):
        m.score([[0], [3]])
    with pytest.raises(ValueError, match="categorical symbols must be non-negative whole numbers"):
        m.score([[0], [1.5]])
    with pytest.raises(ValueError, match="`lengths` sums to 5 but the observations `X` have 4 rows"):
        m.score([[0], [1], [2], [0]], lengths=[2, 3])
    with pytest.raises(ValueError, match="`lengths` must hold whole numbers .*got <U21 values"):
        m.score([[0], [1], [2], [0]], lengths=("", 0))  # what dask-ml passes for a missing y
    with pytest.raises(ValueError, match=r"fewer observed rows \(2\) than components \(n_components=3\)"):
        S.GaussianHMM(3).fit(np.array([[0.0], [1.0], [np.nan]]))
    with pytest.raises(ValueError, match="`X` has 3 columns but the model has 2 features"):
        _gaussian_model().score(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="`covariance_type` must be one of"):
        S.GaussianHMM(2, covariance_type="banded").fit(np.zeros((5, 1)))
    with pytest.raises(ValueError, match="`params` must be a string of letters from 'stmc'"):
        S.GaussianHMM(2, params="stmcw").fit(np.zeros((5, 1)))
    with pytest.raises(ValueError, match="row 1 of X sums to 4 but n_trials=5"):
        S.MultinomialHMM(2, n_trials=5).fit([[2, 3], [2, 2]])


def test_multinomial_per_row_n_trials():
    X = np.array([[2, 3], [1, 1], [0, 4], [3, 0]])
    m = S.MultinomialHMM(2, n_trials=[5, 2, 4, 3], random_state=0, n_iter=3).fit(X)
    assert np.isfinite(m.score(X))
    np.testing.assert_allclose(m.score(X), S.MultinomialHMM(2, random_state=0, n_iter=3).fit(X).score(X))
    with pytest.raises(ValueError, match="row 2 of X sums to 4 but n_trials=3 for that row"):
        S.MultinomialHMM(2, n_trials=[5, 2, 3, 3]).fit(X)
    with pytest.raises(ValueError, match="`n_trials` has 3 entries .* but X has 4 rows"):
        S.MultinomialHMM(2, n_trials=[5, 2, 4]).fit(X)
    with pytest.raises(ValueError, match="`n_trials` must be None, a non-negative integer or a 1-d array"):
        S.MultinomialHMM(2, n_trials=[[5, 2, 4, 3]]).fit(X)
    with pytest.raises(ValueError, match="one integer `n_trials` \\(it is per row\\)"):
        m.sample(3)
    assert S.MultinomialHMM(2, n_trials=7, random_state=0, n_iter=1).fit(
        np.array([[3, 4], [7, 0], [2, 5]])).sample(4)[0].sum(axis=1).tolist() == [7] * 4


def test_impossible_data_scores_minus_inf_and_decode_names_the_sequence():
    m = _categorical_model(V=3)
    m.emissionprob_ = np.array([[0.5, 0.5, 0.0], [0.3, 0.7, 0.0]])  # symbol 2 cannot be emitted
    X = np.array([[0], [1], [0], [2], [1]], dtype=float)
    assert m.score(X, [2, 3]) == -np.inf
    assert np.isfinite(m.score(X[:2]))
    with pytest.raises(ValueError, match=r"cannot compute the Viterbi path: sequence 1 \(rows 2:5\)"):
        m.decode(X, [2, 3])
    with pytest.raises(ValueError, match=r"cannot compute the MAP states: sequence 1"):
        m.decode(X, [2, 3], algorithm="map")
    m.params = "st"
    with pytest.raises(ValueError, match=r"sequence 1 \(rows 2:5\) has zero likelihood"):
        m.fit(X, [2, 3])


# ------------------------------------------------------------------------------------------------------
# estimator contract
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [S.GaussianHMM, S.GMMHMM, S.CategoricalHMM, S.MultinomialHMM, S.PoissonHMM,
                                 S.HiddenMarkovModel])
def test_estimator_contract(cls):
    est = cls(2, random_state=0)
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        est.score(np.zeros((3, 1)))
    assert not hasattr(est, "startprob_") and not hasattr(est, "n_features_in_")


def test_fit_does_not_change_arguments_or_inputs_and_is_reproducible():
    rng = np.random.RandomState(11)
    X = rng.randint(0, 4, (60, 1))
    X0 = X.copy()
    a = S.CategoricalHMM(2, random_state=3)
    params = a.get_params()
    a.fit(X, [30, 30])
    assert a.get_params() == params and a.n_features is None and a.n_features_ == 4
    np.testing.assert_array_equal(X, X0)
    b = S.CategoricalHMM(2, random_state=3).fit(X, [30, 30])
    np.testing.assert_array_equal(a.emissionprob_, b.emissionprob_)
    assert a.fit(X) is a


def test_verbose_prints_hmmlearn_progress(capsys):
    X = np.r_[np.zeros(20), np.ones(20)][:, None] + np.random.RandomState(0).normal(0, 0.1, (40, 1))
    S.GaussianHMM(2, random_state=0, n_iter=3, verbose=True).fit(X)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) >= 2 and lines[0].split()[0] == "1" and lines[0].split()[-1] == "+nan"


def test_partial_init_keeps_set_parameters():
    X = np.random.RandomState(12).normal(size=(50, 2))
    m = _gaussian_model(K=2, n_iter=0)
    means = m.means_.copy()
    m.init_params = "c"
    m.fit(X)
    np.testing.assert_array_equal(m.means_, means)
    np.testing.assert_allclose(m._covars_, np.tile(np.var(X, axis=0, ddof=1) + 1e-3, (2, 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        S.GaussianHMM(2, n_iter=0).fit(X)  # n_iter=0: only the initial parameters, no warning


def test_geometric_hsmm_is_this_hmm():
    """The HSMM with (untruncated) geometric durations p_j and transitions A (zero diagonal) is the HMM with
    a_jj = 1 − p_j, a_ij = p_i A_ij (Yu 2010 §4.4): same likelihood, posteriors and Viterbi path."""
    from structlearn import HiddenSemiMarkovModel
    from structlearn.distributions import durations
    from structlearn.distributions import emissions

    rng = np.random.RandomState(13)
    K = 3
    A = rng.dirichlet(np.ones(K - 1), size=K)
    A = np.array([np.insert(A[i], i, 0.0) for i in range(K)])
    p = np.array([0.1, 0.3, 0.05])
    start = rng.dirichlet(np.ones(K))
    means, variances = np.array([0.0, 2.0, 4.0]), np.array([1.0, 0.5, 2.0])
    X = rng.normal(size=(80, 1)) * 2 + 2
    hsmm = HiddenSemiMarkovModel(K, duration=durations.Geometric(p=p), init_params="")
    hsmm.startprob_, hsmm.transmat_ = start, A
    hsmm.duration_, hsmm.emission_ = durations.Geometric(p=p), emissions.Gaussian(means, variances)
    hsmm.max_duration_, hsmm.n_features_in_ = X.shape[0], 1
    hmm = S.HiddenMarkovModel(K, emission=emissions.Gaussian(means, variances), init_params="")
    hmm.startprob_, hmm.transmat_ = start, np.diag(1 - p) + p[:, None] * A
    np.testing.assert_allclose(hmm.score(X, [30, 50]), hsmm.score(X, [30, 50]), rtol=1e-12)
    np.testing.assert_allclose(hmm.predict_proba(X, [30, 50]), hsmm.predict_proba(X, [30, 50]), atol=1e-12)
    np.testing.assert_array_equal(hmm.predict(X, [30, 50]), hsmm.predict(X, [30, 50]))


def test_hmmlearn_families_serve_the_hsmm():
    """The families of structlearn.distributions.emissions.hmm follow the emission protocol, so the HSMM takes
    them too."""
    from structlearn import HiddenSemiMarkovModel
    from structlearn.distributions.emissions.hmm import GaussianHMMEmission

    rng = np.random.RandomState(14)
    X = np.concatenate([rng.normal(m, 0.5, (25, 2)) for m in (0, 3, 0, 3)])
    m = HiddenSemiMarkovModel(2, duration="poisson", emission=GaussianHMMEmission("full"), max_duration=40,
                              random_state=0, n_iter=20).fit(X)
    assert np.all(np.diff(m.monitor_.history) > -1e-6)
    assert isinstance(m.emission_, GaussianHMMEmission) and m.emission_.covars.shape == (2, 2, 2)
