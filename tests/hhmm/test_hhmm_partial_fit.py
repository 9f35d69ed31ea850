"""HierarchicalHMM.partial_fit: stepwise EM over chunks of a stream (the HMMs' and HSMMs' behaviour)."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import HierarchicalHMM
from structlearn.distributions.emissions import Categorical, Gaussian
from tests.hhmm.test_hhmm import random_model


def _stream(seed=3, n=40):
    truth, _ = random_model(seed, 3, 2, "all", gaussian=True)
    truth._build()
    smp = truth.sample(n, max_length=200, random_state=2)
    return truth, smp


def _chunks(smp, n_chunks):
    off = np.concatenate([[0], np.cumsum(smp.lengths)])
    for idx in np.array_split(np.arange(len(smp.lengths)), n_chunks):
        yield smp.X[off[idx[0]]:off[idx[-1] + 1]], smp.lengths[idx]


def test_one_call_on_all_data_with_kappa_one_is_one_em_step():
    truth, smp = _stream()
    spec, root = truth.hierarchy_.to_dict(), truth.hierarchy_.submodel_names[0]
    online = HierarchicalHMM(spec, Gaussian(), root=root, init_params="ste", random_state=0).partial_fit(smp.X, smp.lengths,
                                                                                      kappa=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        batch = HierarchicalHMM(spec, Gaussian(), root=root, init_params="ste", random_state=0, n_iter=1,
                                tol=-np.inf).fit(smp.X, smp.lengths)
    np.testing.assert_allclose(online.hierarchy_.theta(), batch.hierarchy_.theta(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(online.emission_.means, batch.emission_.means, rtol=1e-8)
    np.testing.assert_allclose(online.emission_.variances, batch.emission_.variances, rtol=1e-8)
    np.testing.assert_allclose(online.chunk_log_likelihood_, batch.monitor_history_[0], rtol=1e-12)
    assert online.n_chunks_seen_ == 1


def test_chunks_approach_the_batch_optimum_and_keep_structural_zeros():
    truth, smp = _stream(n=60)
    spec, root = truth.hierarchy_.to_dict(), truth.hierarchy_.submodel_names[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        batch = HierarchicalHMM(spec, Gaussian(), root=root, init_params="ste", random_state=0, n_iter=50).fit(smp.X,
                                                                                           smp.lengths)
    online = HierarchicalHMM(spec, Gaussian(), root=root, init_params="ste", random_state=0)
    for _ in range(10):
        for X, lengths in _chunks(smp, 6):
            online.partial_fit(X, lengths)
    assert online.n_chunks_seen_ == 60
    ll_online, ll_batch = online.score(smp.X, smp.lengths), batch.score(smp.X, smp.lengths)
    start = HierarchicalHMM(spec, Gaussian(), root=root, init_params="ste", random_state=0).partial_fit(smp.X[:0 + 200], [200])
    assert ll_online > start.score(smp.X, smp.lengths)
    # measured: batch EM (50 iterations) -991.8, 10 passes of 6 chunks -1020.2 (0.07 nats per observation
    # below; stepwise EM's averaging moves slowly on this plateau, as batch EM does for its first ~40
    # iterations)
    assert (ll_batch - ll_online) / smp.X.shape[0] < 0.1
    assert np.all(online.hierarchy_.theta()[truth.hierarchy_.theta() == 0] == 0)


def test_fit_restarts_the_running_statistics_and_bad_input():
    truth, smp = _stream(n=10)
    spec, root = truth.hierarchy_.to_dict(), truth.hierarchy_.submodel_names[0]
    m = HierarchicalHMM(spec, Gaussian(), root=root, init_params="ste", random_state=0)
    m.partial_fit(smp.X, smp.lengths).partial_fit(smp.X, smp.lengths)
    assert m.n_chunks_seen_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.set_params(n_iter=2).fit(smp.X, smp.lengths)
    m.partial_fit(smp.X, smp.lengths)
    assert m.n_chunks_seen_ == 1
    with pytest.raises(ValueError, match="kappa"):
        m.partial_fit(smp.X, smp.lengths, kappa=0.4)
    with pytest.raises(ValueError, match="features"):
        m.partial_fit(np.zeros((5, 2)), [5])


def test_categorical_alphabet_from_the_first_chunk():
    from tests.hhmm.test_hhmm import FIG1, fig1_model
    truth = fig1_model()
    smp = truth.sample(6, random_state=0)
    m = HierarchicalHMM(FIG1, "categorical", init_params="ste", random_state=1)
    m.partial_fit(smp.X, smp.lengths).partial_fit(smp.X, smp.lengths)
    assert np.isfinite(m.chunk_log_likelihood_) and m.n_chunks_seen_ == 2
    assert m.emission_.n_features == int(smp.X.max()) + 1
