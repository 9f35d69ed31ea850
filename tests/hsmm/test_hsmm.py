"""HSMM inference outputs against brute-force enumeration (tests/oracles/hsmm.py) in every censoring mode."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn import HiddenSemiMarkovModel
from structlearn.distributions.durations import NonParametric
from structlearn.distributions.emissions import Categorical
from tests.oracles import hsmm as oracle

MODES = ["none", "right", "both"]
RTOL = 1e-10
ATOL = 1e-12


def random_problem(seed, K=None, D=None, T=None, V=3, zero_dur=True, missing=True):
    rng = np.random.default_rng(seed)
    K = K or int(rng.integers(1, 4))
    D = D or int(rng.integers(1, 5))
    T = T if T is not None else int(rng.integers(1, 7))
    pi = rng.dirichlet(np.ones(K))
    A = rng.random((K, K)) + 0.05
    np.fill_diagonal(A, 0.0)
    A = A / A.sum(1, keepdims=True) if K > 1 else np.zeros((1, 1))
    pmf = rng.dirichlet(np.ones(D), size=K).T  # (D, K)
    if zero_dur and D > 1 and rng.random() < 0.3:
        pmf[rng.integers(D), rng.integers(K)] = 0.0
        pmf /= pmf.sum(0, keepdims=True)
    probs = rng.dirichlet(np.ones(V), size=K)
    x = rng.integers(V, size=T).astype(np.float64)
    if missing and T > 1 and rng.random() < 0.3:
        x[rng.integers(T)] = np.nan
    return pi, A, pmf, probs, x


def build(pi, A, pmf, probs, censoring):
    K = pi.shape[0]
    D = pmf.shape[0]
    m = HiddenSemiMarkovModel(K, duration=NonParametric(pmf.T), emission=Categorical(probs),
                              max_duration=D, censoring=censoring, init_params="")
    m.startprob_ = pi
    m.transmat_ = A
    m.duration_ = NonParametric(pmf.T)
    m.emission_ = Categorical(probs)
    m.max_duration_ = D
    m.n_features_in_ = 1
    return m


def log_b(probs, x):
    out = np.zeros((x.shape[0], probs.shape[0]))
    ok = ~np.isnan(x)
    with np.errstate(divide="ignore"):
        out[ok] = np.log(probs[:, x[ok].astype(int)]).T
    return out


seeds = st.integers(0, 2**31 - 1)


@pytest.mark.parametrize("mode", MODES)
@given(seed=seeds)
@settings(max_examples=25)
def test_likelihood_and_posteriors_match_enumeration(mode, seed):
    pi, A, pmf, probs, x = random_problem(seed)
    m = build(pi, A, pmf, probs, mode)
    X = x[:, None]
    ref = oracle.posteriors(pi, A, pmf, log_b(probs, x), mode)
    ll = m.score(X)
    if ref["loglik"] == -math.inf:
        assert ll == -np.inf
        with pytest.raises(ValueError, match="sequence 0"):
            m.decode(X)
        return
    np.testing.assert_allclose(ll, ref["loglik"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ll, oracle.expanded_hmm_loglik(pi, A, pmf, log_b(probs, x), mode),
                               rtol=RTOL, atol=1e-10)
    logp, gamma = m.score_samples(X)
    np.testing.assert_allclose(gamma, ref["gamma"], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(m.predict_proba(X), ref["gamma"], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(m.posterior_transitions(X), ref["xi"], rtol=1e-9, atol=1e-10)
    eta = m.posterior_durations(X)
    np.testing.assert_allclose(eta, ref["eta"], rtol=1e-9, atol=1e-10)
    # Viterbi: the best segmentation's weight (ties: same score)
    vlp, states, segs = m.decode(X, return_segments=True)
    np.testing.assert_allclose(vlp, ref["viterbi"][1], rtol=RTOL, atol=1e-10)
    best = [w for s, w in ref["items"] if [tuple(r) for r in segs[0].tolist()] == s]
    assert len(best) == 1 and math.isclose(math.log(best[0]), ref["viterbi"][1], rel_tol=1e-9,
                                           abs_tol=1e-10)
    np.testing.assert_array_equal(states, np.repeat(segs[0][:, 2], segs[0][:, 1] - segs[0][:, 0] + 1))
    # MAP per time and eq. (10)
    _, mp = m.decode(X, algorithm="map")
    np.testing.assert_allclose(ref["gamma"][np.arange(len(x)), mp], ref["gamma"].max(1), rtol=1e-9)
    se = m.map_segment_ends(X)
    flat = ref["eta"].reshape(len(x), -1)
    np.testing.assert_allclose(se.probs, flat.max(1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ref["eta"][np.arange(len(x)), se.durations - 1, se.states], se.probs,
                               rtol=1e-9, atol=1e-12)
    tot = flat.sum(1)
    conf = np.where(tot > 0, flat.max(1) / np.where(tot > 0, tot, 1), 0.0)
    np.testing.assert_allclose(m.confidence(X), conf, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("mode", MODES)
@given(seed=seeds)
@settings(max_examples=25)
def test_filter_and_prediction_match_enumeration(mode, seed):
    pi, A, pmf, probs, x = random_problem(seed)
    m = build(pi, A, pmf, probs, mode)
    X = x[:, None]
    ref = oracle.prefix_filter(pi, A, pmf, log_b(probs, x), mode)
    f = m.filter(X)
    np.testing.assert_allclose(f.log_likelihood, ref["loglik"], rtol=RTOL, atol=1e-10)
    np.testing.assert_allclose(f.state, ref["state"], rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(f.end, ref["end"], rtol=1e-9, atol=1e-11)
    p = m.predict_next(X)
    np.testing.assert_allclose(p.start, ref["start_next"], rtol=1e-9, atol=1e-11)
    # P(S_{t+1} = j | o_1:t) is the filter at t+1 with o_{t+1} missing (K = 1 has no transitions:
    # its process may stop, so the two differ by the normalisation)
    for t in range(len(x) if pi.shape[0] > 1 else 0):
        xm = np.r_[x[:t + 1], np.nan]
        ref_m = oracle.prefix_filter(pi, A, pmf, log_b(probs, xm), mode)
        np.testing.assert_allclose(p.state[t], ref_m["state"][t + 1], rtol=1e-9, atol=1e-11)
    # right-censored filtering at the last step equals the smoothed likelihood
    if mode in ("right", "both") and np.isfinite(f.log_likelihood[-1]):
        np.testing.assert_allclose(f.log_likelihood[-1], m.score(X), rtol=RTOL)


@pytest.mark.parametrize("mode", MODES)
@given(seed=seeds, data=st.data())
@settings(max_examples=25)
def test_segment_posterior_matches_enumeration(mode, seed, data):
    pi, A, pmf, probs, x = random_problem(seed, T=int(np.random.default_rng(seed).integers(2, 7)))
    m = build(pi, A, pmf, probs, mode)
    X = x[:, None]
    ref = oracle.posteriors(pi, A, pmf, log_b(probs, x), mode)
    if ref["loglik"] == -math.inf:
        return
    T, K = len(x), pi.shape[0]
    a = data.draw(st.integers(0, T - 1))
    b = data.draw(st.integers(a, T - 1))
    cuts = sorted(set(data.draw(st.lists(st.integers(a + 1, b), max_size=2)))) if b > a else []
    bounds = [a] + cuts + [b + 1]
    labels = [data.draw(st.integers(0, K - 1)) for _ in range(len(bounds) - 1)]
    segs = np.array([[bounds[i], bounds[i + 1] - 1, labels[i]] for i in range(len(labels))])
    exact_start = data.draw(st.booleans())
    exact_end = data.draw(st.booleans())
    L = math.exp(ref["loglik"])
    want = 0.0
    for path, w in ref["items"]:
        lab = np.empty(T, dtype=int)
        for s, e, k in path:
            lab[s:e + 1] = k
        ok = all(np.all(lab[s:e + 1] == k) for s, e, k in segs)
        # internal boundaries are implied by distinct consecutive labels; check exact ends
        if ok and exact_start and a > 0:
            ok = lab[a - 1] != labels[0]
        if ok and exact_end and b < T - 1:
            ok = lab[b + 1] != labels[-1]
        if ok and any(labels[i] == labels[i + 1] for i in range(len(labels) - 1)):
            ok = False
        if ok:
            want += w
    got = m.segment_posterior(X, segs, exact_start=exact_start, exact_end=exact_end)
    np.testing.assert_allclose(got, want / L, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_expected_counts_match_enumeration(mode):
    pi, A, pmf, probs, x = random_problem(3, K=3, D=3, T=6, missing=False)
    m = build(pi, A, pmf, probs, mode)
    X = x[:, None]
    ref = oracle.posteriors(pi, A, pmf, log_b(probs, x), mode)
    ec = m.expected_counts(X)
    g, xi, eta = ref["gamma"], ref["xi"], ref["eta"]
    np.testing.assert_allclose(ec["occupancy"][0], g.sum(0), rtol=1e-9)
    np.testing.assert_allclose(ec["first_state"][0], g[0], rtol=1e-9)
    n_seg = eta.sum(axis=(0, 1))
    starts, ends_in = oracle.commence_terminate(pi, A, pmf, log_b(probs, x), mode)
    np.testing.assert_allclose(ec["n_starts"][0], starts, rtol=1e-9)
    np.testing.assert_allclose(ec["n_ends"][0], ends_in, rtol=1e-9)
    if mode == "none":
        np.testing.assert_allclose(ec["n_ends"][0], n_seg, rtol=1e-9)
    d = np.arange(1, eta.shape[1] + 1)
    np.testing.assert_allclose(ec["mean_duration"][0], np.einsum("tdk,d->k", eta, d) / n_seg,
                               rtol=1e-9)
    ends = xi.sum(2)
    np.testing.assert_allclose(ec["ends_before"][-1], ends[:-1].sum(0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ec["starts_by"][-1], n_seg, rtol=1e-9)
    for v in range(probs.shape[1]):
        np.testing.assert_allclose(ec["symbol_counts"][0, :, v], g[x == v].sum(0), rtol=1e-9,
                                   atol=1e-12)
    np.testing.assert_allclose(ec["mean_observation"][0, :, 0], (g * x[:, None]).sum(0) / g.sum(0),
                               rtol=1e-9)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed,K,D,T", [(0, 1, 3, 1), (1, 2, 3, 2), (2, 2, 4, 5), (4, 3, 2, 4), (5, 1, 4, 3)])
def test_commencements_and_terminations_under_censoring(mode, seed, K, D, T):
    """Expectation (f) of Yu 2010 §2.2.2 against enumeration of the censored segments' hidden parts."""
    pi, A, pmf, probs, x = random_problem(seed, K=K, D=D, T=T, missing=False, zero_dur=False)
    m = build(pi, A, pmf, probs, mode)
    starts, ends = oracle.commence_terminate(pi, A, pmf, log_b(probs, x), mode)
    ec = m.expected_counts(x[:, None])
    np.testing.assert_allclose(ec["n_starts"][0], starts, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ec["n_ends"][0], ends, rtol=RTOL, atol=ATOL)


def test_right_censored_single_segment_terminates_with_its_hazard():
    """Issue 13 item 2: K=1, D=3, uniform durations, T=1, right censoring: n_ends = p(1)/S(1) = 1/3."""
    m = build(np.ones(1), np.zeros((1, 1)), np.full((3, 1), 1 / 3), np.full((1, 2), 0.5), "right")
    ec = m.expected_counts(np.zeros((1, 1)))
    np.testing.assert_allclose(ec["n_ends"][0], [1 / 3], rtol=1e-14)
    np.testing.assert_allclose(ec["n_starts"][0], [1.0], rtol=1e-14)


@pytest.mark.parametrize("mode", MODES)
def test_batch_equals_one_by_one(mode):
    rng = np.random.default_rng(5)
    pi, A, pmf, probs, _ = random_problem(11, K=3, D=4, T=1, zero_dur=False)
    m = build(pi, A, pmf, probs, mode)
    lengths = [5, 0, 1, 7, 3]
    X = rng.integers(3, size=(sum(lengths), 1)).astype(float)
    per = m.score_per_sequence(X, lengths)
    g = m.predict_proba(X, lengths)
    f = m.filter(X, lengths)
    o = 0
    for b, T in enumerate(lengths):
        if T == 0:
            assert per[b] == 0.0
            continue
        Xi = X[o:o + T]
        np.testing.assert_allclose(per[b], m.score(Xi), rtol=RTOL)
        np.testing.assert_allclose(g[o:o + T], m.predict_proba(Xi), rtol=1e-10, atol=1e-13)
        fi = m.filter(Xi)
        np.testing.assert_allclose(f.state[o:o + T], fi.state, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(f.log_likelihood[o:o + T], fi.log_likelihood, rtol=1e-10)
        o += T
    np.testing.assert_allclose(m.score(X, lengths), per.sum(), rtol=RTOL)


@pytest.mark.parametrize("mode", ["right", "both"])
def test_generative_modes_normalise(mode):
    """With no observations (all missing) the right/both-censored likelihood is 1 for any length."""
    pi, A, pmf, probs, _ = random_problem(2, K=3, D=4, T=1)
    m = build(pi, A, pmf, probs, mode)
    for T in (1, 3, 9):
        np.testing.assert_allclose(m.score(np.full((T, 1), np.nan)), 0.0, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_samples_follow_the_generative_process(mode):
    """Empirical state marginals of ``sample`` vs the exact prior P(S_t = j) (oracle filter on
    all-missing observations, which is the generative right-censored process)."""
    pi, A, pmf, probs, _ = random_problem(8, K=3, D=3, T=1, zero_dur=False)
    m = build(pi, A, pmf, probs, mode)
    T, n = 5, 3000
    rng = np.random.RandomState(0)
    counts = np.zeros((T, 3))
    for _ in range(n):
        X, states, segs = m.sample(T, random_state=rng)
        counts[np.arange(T), states] += 1
        assert X.shape == (T, 1) and segs[0, 0] == 0 and segs[-1, 1] == T - 1
    ref = oracle.prefix_filter(pi, A, pmf, np.zeros((T, 3)), mode)["state"]
    np.testing.assert_allclose(counts / n, ref, atol=0.035)


def test_sample_is_reproducible():
    pi, A, pmf, probs, _ = random_problem(1, K=2, D=3, T=1)
    m = build(pi, A, pmf, probs, "right")
    a = m.sample(20, random_state=3)
    b = m.sample(20, random_state=3)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_infeasible_sequence_under_censoring_none():
    """Durations only 2 and censoring='none': odd lengths are impossible."""
    pmf = np.array([[0.0, 0.0], [1.0, 1.0]])
    probs = np.full((2, 2), 0.5)
    m = build(np.array([0.5, 0.5]), np.array([[0, 1.0], [1.0, 0]]), pmf, probs, "none")
    X = np.zeros((3, 1))
    assert m.score(X) == -np.inf
    with pytest.raises(ValueError, match="sequence 0"):
        m.decode(X)
    assert np.isfinite(m.score(np.zeros((4, 1))))
    m2 = build(np.array([0.5, 0.5]), np.array([[0, 1.0], [1.0, 0]]), pmf, probs, "right")
    assert np.isfinite(m2.score(X))


def test_hmm_special_case_geometric_durations():
    """Geometric durations + right censoring = an HMM with A_ii = 1 - p_i (scaled forward)."""
    from structlearn.distributions.durations import Geometric
    from structlearn.distributions.emissions import Poisson
    rng = np.random.default_rng(0)
    K, T = 3, 40
    p = np.array([0.2, 0.1, 0.4])
    A = rng.random((K, K))
    np.fill_diagonal(A, 0)
    A /= A.sum(1, keepdims=True)
    lam = np.array([[2.0], [6.0], [12.0]])
    pi = rng.dirichlet(np.ones(K))
    m = HiddenSemiMarkovModel(K, duration="geometric", emission="poisson", max_duration=2000,
                              init_params="")
    m.startprob_, m.transmat_ = pi, A
    m.duration_, m.emission_ = Geometric(p), Poisson(lam)
    m.max_duration_, m.n_features_in_ = 2000, 1
    X = rng.poisson(5, size=(T, 1)).astype(float)
    H = np.diag(1 - p) + p[:, None] * A
    lb = m.emission_.log_density(X)
    alpha = pi * np.exp(lb[0])
    ll = 0.0
    for t in range(1, T):
        c = alpha.sum()
        ll += math.log(c)
        alpha = (alpha / c) @ H * np.exp(lb[t])
    ll += math.log(alpha.sum())
    np.testing.assert_allclose(m.score(X), ll, rtol=1e-9)
    np.testing.assert_allclose(m.predict_proba(X).sum(1), 1.0, rtol=1e-10)


@pytest.mark.parametrize("mode", MODES)
def test_geometric_chain_fast_path_equals_the_semi_markov_path(mode):
    """Geometric durations with negligible truncation run on the equivalent first-order chain;
    every routed output must equal the semi-Markov computation."""
    from structlearn.distributions.durations import Geometric
    from structlearn.distributions.emissions import Poisson
    rng = np.random.default_rng(4)
    K, D = 3, 400
    m = HiddenSemiMarkovModel(K, duration="geometric", emission="poisson", max_duration=D,
                              censoring=mode, init_params="")
    A = rng.random((K, K))
    np.fill_diagonal(A, 0)
    m.startprob_, m.transmat_ = rng.dirichlet(np.ones(K)), A / A.sum(1, keepdims=True)
    m.duration_, m.emission_ = Geometric([0.3, 0.2, 0.5]), Poisson([[1.0], [4.0], [9.0]])
    m.max_duration_, m.n_features_in_ = D, 1
    X = rng.poisson(4, size=(60, 1)).astype(float)
    lengths = [25, 1, 34]
    assert m._hmm_equivalent() is not None
    fast = (m.score_per_sequence(X, lengths), m.predict_proba(X, lengths),
            m.posterior_transitions(X, lengths), m.decode(X, lengths, return_segments=True))
    m._no_chain = True
    slow = (m.score_per_sequence(X, lengths), m.predict_proba(X, lengths),
            m.posterior_transitions(X, lengths), m.decode(X, lengths, return_segments=True))
    for a, b in zip(fast[:3], slow[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast[3][0], slow[3][0], rtol=1e-10)
    np.testing.assert_array_equal(fast[3][1], slow[3][1])
    for a, b in zip(fast[3][2], slow[3][2]):
        np.testing.assert_array_equal(a, b)
    m.duration_ = Geometric([0.3, 0.01, 0.5])  # 0.99^400 = 0.018: truncation visible, no chain
    m._no_chain = False
    assert m._hmm_equivalent() is None
