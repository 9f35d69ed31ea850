"""``partial_fit`` (stepwise EM) of the general HSMM family: GeneralHSMM, ResidentialTimeHMM,
VariableTransitionHMM (``estimators/_shard_online.py``)."""
import copy
import warnings

import numpy as np
import pytest

import structlearn as sl

CLASSES = [sl.GeneralHSMM, sl.ResidentialTimeHMM, sl.VariableTransitionHMM]


def _chunks(seed, n=10):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        parts = [rng.normal(0.0 if i % 2 == 0 else 4.0, 1.0, rng.integers(3, 9)) for i in range(12)]
        out.append(np.concatenate(parts)[:, None])
    return out


def _params(m):
    return [np.asarray(m.startprob_), np.asarray(m.transmat_), np.asarray(m.emission_.means),
            np.asarray(m.emission_.variances)]


@pytest.mark.parametrize("cls", CLASSES)
def test_one_step_on_a_fitted_model_is_one_em_iteration(cls):
    """A chunk's average after one update is its own statistics, so partial_fit on a model fitted with k
    iterations gives the parameters of fit with k + 1 iterations on that chunk."""
    X = np.concatenate(_chunks(0, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cls(n_states=2, max_duration=8, n_iter=3, tol=0.0, random_state=0).fit(X)
        b = cls(n_states=2, max_duration=8, n_iter=4, tol=0.0, random_state=0).fit(X)
    ll_before = a.score(X)
    a.partial_fit(X)
    assert a.n_chunks_seen_ == 1
    assert a.chunk_log_likelihood_ == pytest.approx(ll_before, rel=1e-10)
    for p, q in zip(_params(a), _params(b)):
        np.testing.assert_allclose(p, q, rtol=1e-8, atol=1e-12)


# after 3 passes over 10 chunks of ~70 rows: (max |Δ mean|, log-likelihood per row below batch EM's). The
# general model (an (M, D, M, D) transition table) forgets its first, badly estimated chunks slowest.
TOLERANCE = {sl.GeneralHSMM: (0.4, 0.15), sl.ResidentialTimeHMM: (0.15, 0.05),
             sl.VariableTransitionHMM: (0.05, 0.01)}


@pytest.mark.parametrize("cls", CLASSES)
def test_stream_approaches_batch_em(cls):
    chunks = _chunks(1)
    X, lengths = np.concatenate(chunks), [len(c) for c in chunks]
    m = cls(n_states=2, max_duration=8, random_state=1)
    per_pass = []
    for _ in range(3):
        for c in chunks:
            m.partial_fit(c)
        per_pass.append(m.score(X, lengths))
    assert m.n_chunks_seen_ == 3 * len(chunks)
    assert per_pass[0] < per_pass[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = cls(n_states=2, max_duration=8, random_state=1).fit(X, lengths)
    d_mean, d_ll = TOLERANCE[cls]
    np.testing.assert_allclose(np.sort(m.emission_.means.ravel()), np.sort(b.emission_.means.ravel()), atol=d_mean)
    assert m.score(X, lengths) > b.score(X, lengths) - d_ll * X.shape[0]


def test_labels_pin_the_states():
    chunks = _chunks(2, 4)
    m = sl.GeneralHSMM(n_states=2, max_duration=8, random_state=0)
    for c in chunks:
        labels = np.where(c[:, 0] > 2.0, 1, 0)
        labels[::3] = -1
        m.partial_fit(c, labels=labels)
    means = np.ravel(m.emission_.means)
    assert means[0] < 1.0 < 3.0 < means[1]


def test_fit_restarts_the_running_statistics():
    chunks = _chunks(3, 3)
    m = sl.GeneralHSMM(n_states=2, max_duration=8, random_state=0)
    m.partial_fit(chunks[0]).partial_fit(chunks[1])
    assert m.n_chunks_seen_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(chunks[2])
    m.partial_fit(chunks[0])
    assert m.n_chunks_seen_ == 1


@pytest.mark.parametrize("bad, match", [({"kappa": 0.5}, "kappa"), ({"kappa": True}, "kappa"),
                                        ({"X": np.zeros((10, 2))}, "features")])
def test_errors_leave_the_estimator_unchanged(bad, match):
    m = sl.GeneralHSMM(n_states=2, max_duration=8, random_state=0).partial_fit(_chunks(4, 1)[0])
    before = copy.deepcopy(m.__dict__)
    kwargs = {"X": _chunks(5, 1)[0], **bad}
    with pytest.raises(ValueError, match=match):
        m.partial_fit(kwargs.pop("X"), **kwargs)
    assert m.n_chunks_seen_ == before["n_chunks_seen_"]
    for p, q in zip(_params(m), [before["startprob_"], before["transmat_"], before["emission_"].means,
                                 before["emission_"].variances]):
        np.testing.assert_array_equal(p, q)


def test_first_chunk_error_leaves_no_fitted_attribute():
    m = sl.GeneralHSMM(n_states=2, max_duration=8, emission="gmm", random_state=0)
    with pytest.raises(ValueError, match="sufficient statistics"):
        m.partial_fit(_chunks(6, 1)[0])
    assert not [k for k in vars(m) if k.endswith("_")]


# -- SwitchingHSMM shares the mixin ---------------------------------------------------------------------
_SWITCHING = ("regime_startprob_", "startprob_", "regime_transmat_", "transmat_")


def test_switching_one_step_is_one_em_iteration():
    chunks = _chunks(7, 6)
    X, lengths = np.concatenate(chunks), [len(c) for c in chunks]
    kw = dict(n_regimes=2, n_states=2, max_duration=10, tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = sl.SwitchingHSMM(n_iter=3, **kw).fit(X, lengths)
        b = sl.SwitchingHSMM(n_iter=4, **kw).fit(X, lengths)
    a.partial_fit(X, lengths)
    for name in _SWITCHING:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-8, atol=1e-12)


def test_switching_stream_with_labels():
    chunks = _chunks(8)
    X, lengths = np.concatenate(chunks), [len(c) for c in chunks]
    m = sl.SwitchingHSMM(n_regimes=2, n_states=2, max_duration=10, random_state=0)
    for _ in range(3):
        for c in chunks:
            labels = np.where(c[:, 0] > 2.0, 1, 0)
            labels[1::2] = -1
            m.partial_fit(c, labels=labels)
    assert m.n_chunks_seen_ == 3 * len(chunks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = sl.SwitchingHSMM(n_regimes=2, n_states=2, max_duration=10, random_state=0).fit(X, lengths)
    assert m.score(X, lengths) > b.score(X, lengths) - 0.05 * X.shape[0]
