"""partial_fit of structlearn.hmm: online (stepwise) EM on a stream reaches the batch-EM parameters; its
M-step is batch EM's (one step on one chunk with fresh statistics is one batch EM step).

Measured (one pass, κ = 0.7, the seeds below) against batch EM on the same chunks from the same initial
parameters: Gaussian (K = 2, F = 2, 120 chunks of 250 rows) means 0.0068, variances 1.9 %, transitions
0.0039; categorical (K = 2, V = 4, 100 chunks of 300 rows) emission probabilities 0.014, transitions
0.023 (batch EM itself is 0.013 from the true transitions)."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import hmm as S
from structlearn.distributions.emissions import Poisson

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _stream(model, n_chunks, T, seed):
    X, _ = model.sample(n_chunks * T, random_state=seed)
    return X, [T] * n_chunks


def _set(m, **params):
    for k, v in params.items():
        setattr(m, k, np.array(v, dtype=np.float64))
    return m


TRUE_G = dict(startprob_=[0.5, 0.5], transmat_=[[0.92, 0.08], [0.15, 0.85]], means_=[[-2.0, 0.0], [2.0, 1.0]],
              covars_=[[1.0, 0.5], [0.7, 1.5]])
INIT_G = dict(startprob_=[0.5, 0.5], transmat_=[[0.7, 0.3], [0.3, 0.7]], means_=[[-1.0, 0.5], [1.0, 0.5]],
              covars_=[[2.0, 2.0], [2.0, 2.0]])


def test_gaussian_stream_reaches_batch_em():
    # one pass over 120 chunks of 250 rows (κ = 0.7) against batch EM on the same chunks, from the
    # same initial parameters: means within 0.015, variances within 3 %, transitions within 0.008
    truth = _set(S.GaussianHMM(2, covariance_type="diag", init_params=""), **TRUE_G)
    X, lengths = _stream(truth, 120, 250, seed=1)
    batch = _set(S.GaussianHMM(2, covariance_type="diag", init_params="", n_iter=200, tol=1e-8), **INIT_G)
    batch.fit(X, lengths)
    online = _set(S.GaussianHMM(2, covariance_type="diag", init_params=""), **INIT_G)
    o = 0
    for T in lengths:
        online.partial_fit(X[o:o + T])
        o += T
    assert online.n_chunks_seen_ == 120 and np.isfinite(online.chunk_log_likelihood_)
    np.testing.assert_allclose(online.means_, batch.means_, atol=0.015)
    np.testing.assert_allclose(online._covars_, batch._covars_, rtol=0.03)
    np.testing.assert_allclose(online.transmat_, batch.transmat_, atol=0.008)
    assert online.score(X, lengths) > batch.score(X, lengths) - 1e-3 * abs(batch.score(X, lengths))


def test_categorical_stream_reaches_batch_em():
    truth = _set(S.CategoricalHMM(2, n_features=4, init_params=""), startprob_=[0.6, 0.4],
                 transmat_=[[0.9, 0.1], [0.2, 0.8]], emissionprob_=[[0.6, 0.2, 0.1, 0.1], [0.1, 0.1, 0.3, 0.5]])
    X, lengths = _stream(truth, 100, 300, seed=2)
    init = dict(startprob_=[0.5, 0.5], transmat_=[[0.8, 0.2], [0.3, 0.7]],
                emissionprob_=[[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]])
    batch = _set(S.CategoricalHMM(2, n_features=4, init_params="", n_iter=300, tol=1e-8), **init)
    batch.fit(X, lengths)
    online = _set(S.CategoricalHMM(2, n_features=4, init_params=""), **init)
    for b in range(100):
        online.partial_fit(X[300 * b:300 * (b + 1)])
    np.testing.assert_allclose(online.emissionprob_, batch.emissionprob_, atol=0.02)
    np.testing.assert_allclose(online.transmat_, batch.transmat_, atol=0.03)


def test_one_step_on_one_chunk_is_one_batch_em_step():
    truth = _set(S.GaussianHMM(2, covariance_type="full", init_params=""), startprob_=[0.3, 0.7],
                 transmat_=TRUE_G["transmat_"], means_=TRUE_G["means_"],
                 covars_=[np.eye(2), [[1.0, 0.3], [0.3, 0.5]]])
    X, _ = truth.sample(200, random_state=3)
    start = dict(startprob_=[0.4, 0.6], transmat_=[[0.7, 0.3], [0.3, 0.7]], means_=[[-1.0, 0.0], [1.0, 1.0]],
                 covars_=[np.eye(2) * 2, np.eye(2) * 2])
    one = _set(S.GaussianHMM(2, covariance_type="full", init_params="", n_iter=1), **start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one.fit(X)
    step = _set(S.GaussianHMM(2, covariance_type="full", init_params=""), **start).partial_fit(X, kappa=1.0)
    for name in ("startprob_", "transmat_", "means_", "covars_"):
        np.testing.assert_allclose(getattr(step, name), getattr(one, name), rtol=1e-12)


def test_first_call_initialises_and_fixed_zeros_stay():
    truth = _set(S.PoissonHMM(3, init_params=""), startprob_=[1.0, 0.0, 0.0],
                 transmat_=[[0.9, 0.1, 0.0], [0.0, 0.9, 0.1], [0.0, 0.0, 1.0]], lambdas_=[[1.0], [5.0], [12.0]])
    X, _ = truth.sample(600, random_state=4)
    m = S.PoissonHMM(3, init_params="l", random_state=0)
    m.startprob_ = truth.startprob_.copy()
    m.transmat_ = np.array([[0.8, 0.2, 0.0], [0.0, 0.8, 0.2], [0.0, 0.0, 1.0]])
    for b in range(6):
        m.partial_fit(X[100 * b:100 * (b + 1)])
    assert m.n_chunks_seen_ == 6
    assert np.all(m.transmat_[np.tril_indices(3, -1)] == 0) and m.transmat_[0, 2] == 0
    assert np.all(m.startprob_[1:] == 0)
    fresh = S.PoissonHMM(3, random_state=0).partial_fit(X[:100])  # unfitted: initialised from the chunk
    assert fresh.n_chunks_seen_ == 1 and fresh.lambdas_.shape == (3, 1)
    # a fit between two calls starts the running statistics afresh
    fresh.fit(X[:200])
    assert fresh.partial_fit(X[200:300]).n_chunks_seen_ == 1


def test_generic_model_and_errors():
    rng = np.random.default_rng(5)
    X = np.concatenate([rng.poisson(2, (150, 1)), rng.poisson(9, (150, 1))]).astype(float)
    m = S.HiddenMarkovModel(2, emission="poisson", random_state=0)
    for b in range(3):
        m.partial_fit(X[100 * b:100 * (b + 1)])
    assert isinstance(m.emission_, Poisson) and np.isfinite(m.score(X))
    with pytest.raises(ValueError, match="`kappa` must be a number in"):
        S.PoissonHMM(2).partial_fit(X, kappa=0.5)
    with pytest.raises(ValueError, match="no sufficient statistics for GMMHMMEmission"):
        S.GMMHMM(2, n_mix=2, random_state=0).partial_fit(np.random.default_rng(0).normal(size=(50, 1)))
    with pytest.raises(ValueError, match="fewer observed rows"):
        S.PoissonHMM(3).partial_fit(X[:2])
