"""GeneralHSMM with segment emissions b_(j,d)(o_{t+1:t+d}) (issue 13 item 1): a categorical segment table and
a user callable, against enumeration of (state, duration) paths."""
import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import GeneralHSMM
from structlearn.distributions import emissions as em
from structlearn.hsmm.segment_emissions import CategoricalSegments
from tests.hsmm.test_general_hsmm import _dirichlet, general_params
from tests.oracles.general_hsmm import paths

V, M, D = 2, 2, 3


def table_model(rng):
    m = GeneralHSMM(M, max_duration=D, censoring="none", init_params="",
                    segment_emission=CategoricalSegments(V))
    m.startprob_ = _dirichlet(rng, (M, D), None)
    tm = rng.gamma(1.0, size=(M, D, M, D)) + 1e-3
    tm[np.arange(M), :, np.arange(M), :] = 0.0
    m.transmat_ = tm / tm.sum(axis=(2, 3), keepdims=True)
    m.emission_ = CategoricalSegments(V, probs=[_dirichlet(rng, (M, V ** d), 1) for d in range(1, D + 1)])
    m.max_duration_, m.n_features_in_ = D, 1
    return m


def brute_force_log_z(m, x):
    pi, A = general_params(m)
    total = 0.0
    for p in paths(x.size, M, D, "none"):
        first = p[0]
        w = pi[first[2], first[3] - 1]
        for a, b in zip(p[:-1], p[1:]):
            w *= A[a[2], a[3] - 1, b[2], b[3] - 1]
        for st, en, j, d in p:
            code = 0
            for u in range(st, en + 1):
                code = code * V + int(x[u])
            w *= m.emission_.probs[d - 1][j, code]
        total += w
    return math.log(total)


def test_categorical_segment_table_matches_enumeration():
    rng = np.random.default_rng(0)
    m = table_model(rng)
    x = rng.integers(0, V, 6).astype(float)
    np.testing.assert_allclose(m.score(x[:, None]), brute_force_log_z(m, x), rtol=1e-10)
    lengths = [6, 4]
    x2 = np.r_[x, rng.integers(0, V, 4)]
    per = m.score_per_sequence(x2[:, None], lengths)
    np.testing.assert_allclose(per[1], brute_force_log_z(m, x2[6:]), rtol=1e-10)


def test_segment_table_em_is_monotone_and_learns_the_patterns():
    rng = np.random.default_rng(1)
    gen = table_model(rng)
    # state 0 emits runs of 0s, state 1 alternating 1,0,1: very different segment laws
    for d in range(1, D + 1):
        p = np.full((M, V ** d), 1e-3)
        p[0, 0] = 1.0
        alt = int("".join("10"[(u % 2)] for u in range(d)), 2)
        p[1, alt] = 1.0
        gen.emission_.probs[d - 1] = p / p.sum(1, keepdims=True)
    X = np.concatenate([gen.sample(60, random_state=s)[0] for s in range(20)])
    lengths = [60] * 20
    m = GeneralHSMM(M, max_duration=D, censoring="none", segment_emission=CategoricalSegments(V), n_iter=60,
                    tol=1e-8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, lengths)
    h = np.array(m.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8)
    assert m.log_likelihood_ > gen.score(X, lengths) - 60  # near the generating model
    assert m.n_parameters() == (M * D - 1) + M * D * ((M - 1) * D - 1) + M * sum(V ** d - 1 for d in (1, 2, 3))


def test_callable_segment_emission_equals_per_state_emissions():
    rng = np.random.default_rng(2)
    means = np.array([0.0, 2.0])
    gauss = em.Gaussian(means=means, variances=[1.0, 1.0])

    def log_segment(X_seq):
        lb = gauss.log_density(X_seq)  # (T, M)
        T = X_seq.shape[0]
        c = np.vstack([np.zeros((1, M)), np.cumsum(lb, axis=0)])
        out = np.zeros((T, D, M))
        for d in range(1, D + 1):
            e = np.arange(d - 1, T)
            out[e, d - 1] = c[e + 1] - c[e + 1 - d]
        return out

    per_state = GeneralHSMM(M, max_duration=D, censoring="none", init_params="")
    per_state.startprob_ = _dirichlet(rng, (M, D), None)
    tm = rng.gamma(1.0, size=(M, D, M, D)) + 1e-3
    tm[np.arange(M), :, np.arange(M), :] = 0.0
    per_state.transmat_ = tm / tm.sum(axis=(2, 3), keepdims=True)
    per_state.emission_, per_state.max_duration_, per_state.n_features_in_ = gauss, D, 1
    seg = GeneralHSMM(M, max_duration=D, censoring="none", init_params="", segment_emission=log_segment)
    seg.startprob_, seg.transmat_ = per_state.startprob_, per_state.transmat_
    seg.emission_ = seg._make_emission()
    seg.max_duration_, seg.n_features_in_ = D, 1
    X = rng.normal(1, 1.5, (17, 1))
    lengths = [9, 8]
    np.testing.assert_allclose(seg.score_per_sequence(X, lengths), per_state.score_per_sequence(X, lengths),
                               rtol=1e-10)
    np.testing.assert_allclose(seg.predict_proba(X, lengths), per_state.predict_proba(X, lengths), rtol=1e-9,
                               atol=1e-12)
    assert seg.decode(X, lengths)[1].tolist() == per_state.decode(X, lengths)[1].tolist()
    with pytest.raises(ValueError, match="needs per-state emissions"):
        seg.predict_next(X, lengths)
    with pytest.raises(ValueError, match="only CategoricalSegments"):
        seg.save("/nonexistent/never-written.npz")


def test_segment_emission_files_and_errors(tmp_path):
    rng = np.random.default_rng(3)
    m = table_model(rng)
    x = rng.integers(0, V, (8, 1)).astype(float)
    m.save(tmp_path / "seg.npz")
    m2 = GeneralHSMM.load(tmp_path / "seg.npz")
    np.testing.assert_allclose(m2.score(x), m.score(x), rtol=1e-14)
    with pytest.raises(ValueError, match="symbols 0..1"):
        m.score(np.array([[0.0], [2.0]]))
    with pytest.raises(ValueError, match="censoring='none'"):
        GeneralHSMM(M, max_duration=D, segment_emission=CategoricalSegments(V)).fit(x)
    with pytest.raises(ValueError, match="V\\^D = 2\\^30"):
        GeneralHSMM(M, max_duration=30, censoring="none", segment_emission=CategoricalSegments(V)).fit(
            np.zeros((40, 1)))
    with pytest.raises(ValueError, match="callable"):
        GeneralHSMM(M, max_duration=D, censoring="none", segment_emission=3).fit(x)
