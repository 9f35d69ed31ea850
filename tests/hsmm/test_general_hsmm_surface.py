"""The HiddenSemiMarkovModel surface of the general family (predict_next, expected counts (a)–(g), confidence,
map_segment_ends, segment_posterior, constrained decoding) against enumeration of (state, duration) paths
(tests/oracles/general_hsmm.py) and against the explicit-duration model."""
import math
import warnings

import numpy as np
import pytest

from structlearn import GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM
from structlearn.distributions import emissions as em
from structlearn.hsmm import _general_potentials as g
from tests.hsmm.test_general_hsmm import _dirichlet, cases, explicit_duration_model, general_params, random_model
from tests.oracles.general_hsmm import path_score, paths

RTOL = 1e-10


def _small_case(cls, censoring, seed):
    """M = 2 states, D = 3, a random model of ``cls`` and 5 observations, all from ``seed``."""
    rng = np.random.default_rng(seed)
    M, D = 2, 3
    m = random_model(cls, M, D, censoring, rng)
    return M, D, m, rng.normal(0, 2, (5, 1))


def weighted_paths(m, X):
    pi, A = general_params(m)
    log_b = m.emission_.log_density(X)
    T = X.shape[0]
    out = []
    for p in paths(T, m.n_states, m.max_duration_, m.censoring):
        s = path_score(p, pi, A, log_b)
        if s > -math.inf:
            out.append((p, math.exp(s)))
    return out, pi, A


@pytest.mark.parametrize("cls,censoring", list(cases()))
def test_predict_next_matches_enumeration_of_prefixes(cls, censoring):
    M, D, m, X = _small_case(cls, censoring, 11)
    pred = m.predict_next(X)
    pi, A = general_params(m)
    log_b = m.emission_.log_density(X)
    for t in range(5):
        start = np.zeros(M)
        state = np.zeros(M)
        tot = 0.0
        for p in paths(t + 1, M, D, "right"):  # the generative prefix: the last segment may go on
            s = path_score(p, pi, A, log_b[:t + 1])
            if s == -math.inf:
                continue
            w = math.exp(s)
            tot += w
            st, en, j, d = p[-1]
            if st + d - 1 > t:
                state[j] += w
            else:
                nxt = w * A[j, d - 1].sum(axis=1)
                start += nxt
                state += nxt
        np.testing.assert_allclose(pred.start[t], start / tot, rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(pred.state[t], state / tot, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("cls,censoring", list(cases()))
def test_commencements_terminations_and_segment_queries_match_enumeration(cls, censoring):
    M, D, m, X = _small_case(cls, censoring, 12)
    items, pi, A = weighted_paths(m, X)
    L = sum(w for _, w in items)
    starts = np.zeros(M)
    ends = np.zeros(M)
    eta = np.zeros((5, M, D))
    for p, w in items:
        for i, (st, en, j, d) in enumerate(p):
            if not (i == 0 and censoring == "both"):
                starts[j] += w / L
            if en - st + 1 == d:
                ends[j] += w / L
            eta[en, j, d - 1] += w / L
    ec = m.expected_counts(X)
    np.testing.assert_allclose(ec["n_starts"][0], starts, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(ec["n_ends"][0], ends, rtol=RTOL, atol=1e-13)
    conf = m.confidence(X)
    np.testing.assert_allclose(conf, eta.max(axis=(1, 2)) / eta.sum(axis=(1, 2)), rtol=1e-9)
    mse = m.map_segment_ends(X)
    flat = eta.reshape(5, -1).argmax(1)
    np.testing.assert_array_equal(mse.states, flat // D)
    np.testing.assert_array_equal(mse.durations, flat % D + 1)
    # a subpath: state 1 on rows 1..2 exactly, then state 0 from row 3 (exact start, open end)
    seg = np.array([[1, 2, 1], [3, 3, 0]])
    want = 0.0
    for p, w in items:
        lab = np.concatenate([[j] * (en - st + 1) for st, en, j, _ in p])
        if lab[1] == 1 and lab[2] == 1 and lab[3] == 0 and lab[0] != 1:
            want += w / L
    got = m.segment_posterior(X, seg, exact_end=False)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("cls,censoring", list(cases()))
@pytest.mark.parametrize("algorithm", ["viterbi", "map"])
def test_constrained_decoding_matches_enumeration(cls, censoring, algorithm):
    M, D, m, X = _small_case(cls, censoring, 13)
    allowed = np.ones((5, M), dtype=bool)
    allowed[2] = [False, True]
    items, _, _ = weighted_paths(m, X)
    keep = []
    for p, w in items:
        lab = np.concatenate([[j] * (en - st + 1) for st, en, j, _ in p])
        if allowed[np.arange(5), lab].all():
            keep.append((lab, w))
    lp, states = m.decode(X, algorithm=algorithm, constraints=allowed)
    assert states[2] == 1
    if algorithm == "viterbi":
        lab, w = max(keep, key=lambda it: it[1])
        np.testing.assert_allclose(lp, math.log(w), rtol=RTOL)
        np.testing.assert_array_equal(states, lab)
    else:
        gam = np.zeros((5, M))
        for lab, w in keep:
            gam[np.arange(5), lab] += w
        gam /= gam.sum(1, keepdims=True)
        np.testing.assert_array_equal(states, gam.argmax(1))
    with pytest.raises(ValueError, match="under `constraints`"):
        m.decode(X, algorithm=algorithm, constraints=np.zeros((5, M), dtype=bool))


@pytest.mark.parametrize("censoring", ["none", "right"])
def test_expected_counts_and_prediction_equal_the_explicit_duration_model(censoring):
    rng = np.random.default_rng(5)
    M, D = 3, 4
    ed = explicit_duration_model(rng, M, D, censoring,
                                 lambda rng: em.Categorical(probs=_dirichlet(rng, (M, 3), 1)))
    gen = GeneralHSMM(M, max_duration=D, censoring=censoring, init_params="")
    ls, la = g.explicit_duration(ed.startprob_, ed.transmat_, ed.duration_.log_pmf(D), censoring)
    gen.startprob_, gen.transmat_ = np.exp(ls), np.exp(la)
    gen.emission_, gen.max_duration_, gen.n_features_in_ = ed.emission_, D, 1
    X = rng.integers(0, 3, (23, 1)).astype(float)
    lengths = [9, 2, 12]
    a, b = ed.expected_counts(X, lengths), gen.expected_counts(X, lengths)
    for key in ("ends_before", "starts_by", "occupancy", "symbol_counts", "mean_observation", "first_state",
                "n_starts", "n_ends", "mean_duration"):
        np.testing.assert_allclose(b[key], a[key], rtol=1e-9, atol=1e-12, err_msg=key)
    pa, pb = ed.predict_next(X, lengths), gen.predict_next(X, lengths)
    np.testing.assert_allclose(pb.start, pa.start, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pb.state, pa.state, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", [GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM])
def test_em_is_monotone_on_100_random_problems_per_model(cls):
    """Issue 13 checks: EM never decreases the likelihood, 100 random problems per model (every censoring
    mode the model has, random M, D, lengths, emissions and restarts)."""
    for seed in range(100):
        rng = np.random.default_rng(seed)
        censoring = cls._censoring_modes[seed % len(cls._censoring_modes)]
        M = int(rng.integers(2, 4))
        D = int(rng.integers(1, 5)) + (cls is VariableTransitionHMM)
        lengths = list(rng.integers(2, 12, size=int(rng.integers(1, 4))))
        X = rng.normal(0, 2, (sum(lengths), 1))
        m = cls(n_states=M, max_duration=D, censoring=censoring, n_iter=6, tol=0.0, random_state=seed,
                init=("kmeans", "quantile", "random")[seed % 3])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                m.fit(X, lengths)
            except ValueError as exc:  # censoring "none": a length the durations cannot reach
                assert "zero likelihood" in str(exc), exc
                continue
        h = np.array(m.monitor_.history)
        assert np.all(np.diff(h) >= -1e-8 * (1 + np.abs(h[:-1]))), (seed, h)
