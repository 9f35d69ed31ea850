"""Supervised and semi-supervised HSMM estimation (issue 13 item 4): ``fit(X, lengths, labels=...)``."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import GeneralHSMM, HiddenSemiMarkovModel, ResidentialTimeHMM
from tests.hsmm.test_hsmm_estimator import simulate, true_model


def _runs(states, lengths):
    """(state, duration, sequence, is_first) of every run of the labelled sequences."""
    out, o = [], 0
    for b, T in enumerate(lengths):
        lab = states[o:o + T]
        st = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        en = np.r_[st[1:], T]
        for i, (s, e) in enumerate(zip(st, en)):
            out.append((int(lab[s]), int(e - s), b, i == 0))
        o += T
    return out


@pytest.fixture(scope="module")
def labelled():
    gen = true_model(censoring="none")
    lengths = [150, 200, 120, 180]
    X, S = simulate(gen, lengths, seed=3)
    return X, S, np.array(lengths)


def test_fully_labelled_fit_is_the_closed_form_mle(labelled):
    X, S, lengths = labelled
    D = 60
    m = HiddenSemiMarkovModel(3, duration="nonparametric", max_duration=D, censoring="none", n_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, lengths, labels=S)
    runs = _runs(S, lengths)
    first = np.bincount([k for k, _, _, f in runs if f], minlength=3)
    np.testing.assert_allclose(m.startprob_, first / first.sum(), rtol=1e-10)
    trans = np.zeros((3, 3))
    for (a, _, b1, _), (c, _, b2, f) in zip(runs[:-1], runs[1:]):
        if not f:
            trans[a, c] += 1
    np.testing.assert_allclose(m.transmat_, trans / trans.sum(1, keepdims=True), rtol=1e-10)
    hist = np.zeros((D, 3))
    for k, d, _, _ in runs:
        hist[d - 1, k] += 1
    np.testing.assert_allclose(m.duration_.pmf(D), hist / hist.sum(0), rtol=1e-10, atol=1e-300)
    for k in range(3):
        x = X[S == k, 0]
        np.testing.assert_allclose(m.emission_.means[k], x.mean(), rtol=1e-10)
        np.testing.assert_allclose(m.emission_.variances[k], x.var(), rtol=1e-8)
    # the E-step is deterministic: the log-likelihood of (o, s) is reached after one M-step
    h = m.monitor_.history
    assert m.converged_ and len(h) <= 3 and abs(h[-1] - h[1]) < 1e-9


def test_general_hsmm_fully_labelled_counts(labelled):
    X, S, lengths = labelled
    D = 60
    m = GeneralHSMM(3, max_duration=D, censoring="none", n_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, lengths, labels=S)
    runs = _runs(S, lengths)
    first = np.zeros((3, D))
    for k, d, _, f in runs:
        if f:
            first[k, d - 1] += 1
    np.testing.assert_allclose(m.startprob_, first / first.sum(), rtol=1e-10, atol=1e-300)
    trans = np.zeros((3, D, 3, D))
    for (a, da, _, _), (c, dc, _, f) in zip(runs[:-1], runs[1:]):
        if not f:
            trans[a, da - 1, c, dc - 1] += 1
    rows = trans.sum(axis=(2, 3))
    seen = rows > 0
    np.testing.assert_allclose(m.transmat_[seen], trans[seen] / rows[seen][:, None, None], rtol=1e-10,
                               atol=1e-300)


def test_partial_labels_constrain_em_and_the_likelihood(labelled):
    X, S, lengths = labelled
    rng = np.random.default_rng(0)
    labels = np.full(S.shape, -1)
    idx = rng.choice(S.size, size=40, replace=False)
    labels[idx] = S[idx]
    kw = dict(duration="poisson", max_duration=60, censoring="none", n_iter=200, tol=1e-8, random_state=0)
    free = HiddenSemiMarkovModel(3, **kw).fit(X, lengths)
    semi = HiddenSemiMarkovModel(3, **kw).fit(X, lengths, labels=labels)
    h = np.array(semi.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8)  # EM on the constrained likelihood is monotone
    # the constrained likelihood is log P(o, s ∈ labels) <= log P(o) of the same parameters
    assert semi.log_likelihood_ <= semi.score(X, lengths) + 1e-9
    # the labels fix the state numbering: state k is the one labelled k
    np.testing.assert_allclose(np.sort(semi.emission_.means), semi.emission_.means, atol=0.5)
    acc = np.mean(semi.predict(X, lengths) == S)
    assert acc > 0.95
    assert np.isfinite(free.log_likelihood_)


def test_labels_are_validated(labelled):
    X, S, lengths = labelled
    m = HiddenSemiMarkovModel(3, max_duration=60, n_iter=1)
    with pytest.raises(ValueError, match=r"`labels` must have shape \(650,\)"):
        m.fit(X, lengths, labels=S[:10])
    with pytest.raises(ValueError, match=r"`labels` must lie in \[-1, 3\).*got 3 at row 0"):
        m.fit(X, lengths, labels=np.r_[3, S[1:]])
    with pytest.raises(ValueError, match="integer"):
        m.fit(X, lengths, labels=S.astype(float))
    # a labelled run longer than D has no segmentation: the sequence is named
    bad = np.zeros_like(S)
    with pytest.raises(ValueError, match="sequence 0"):
        HiddenSemiMarkovModel(3, max_duration=10, censoring="none", n_iter=1).fit(X, lengths, labels=bad)
    with pytest.raises(ValueError, match=r"`labels` must have shape"):
        ResidentialTimeHMM(3, max_duration=5, n_iter=1).fit(X, lengths, labels=S[:3])
