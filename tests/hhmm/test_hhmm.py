"""Hierarchical HMM: oracle agreement (brute force over parses), inside–outside (O(T³)) vs linear-time,
DBN vs flattened HMM, validation, EM, supervised estimation, save/load."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from structlearn import HierarchicalHMM
from structlearn.datasets.toy import hhmm_figure1
from structlearn.distributions.emissions import Categorical, Gaussian
from structlearn.hhmm.model import Hierarchy
from tests.oracles import hhmm as oracle

FIG1 = hhmm_figure1()  # Murphy & Paskin (2001), Figure 1
SYMBOLS = "abcdxy"


def fig1_model():
    # production order: a, x, y, b, c, d
    return HierarchicalHMM(FIG1, Categorical(np.eye(6)[[0, 4, 5, 1, 2, 3]]))


def random_spec(rng, depth, max_k, share=True, root_end=True):
    """A random automaton of the given depth with sparse parameters, mixed-depth production states and
    (optionally) shared sub-models and shared production states."""
    spec = {}
    pool = {}
    prods = []
    counter = [0]

    def probs(k, zero_p):
        p = rng.dirichlet(np.ones(k))
        z = rng.random_sample(k) < zero_p
        if z.all():
            z[rng.randint(k)] = False
        p[z] = 0
        return p / p.sum()

    def make(level):
        counter[0] += 1
        name = f"m{counter[0]}"
        K = rng.randint(1, max_k + 1)
        kids = []
        for _ in range(K):
            if level < depth and rng.random_sample() < 0.6:
                if share and pool.get(level) and rng.random_sample() < 0.4:
                    c = pool[level][rng.randint(len(pool[level]))]
                    if c in kids:
                        c = make(level + 1)
                else:
                    c = make(level + 1)
            else:
                if share and prods and rng.random_sample() < 0.2:
                    c = prods[rng.randint(len(prods))]
                    if c in kids:
                        counter[0] += 1
                        c = f"p{counter[0]}"
                        prods.append(c)
                else:
                    counter[0] += 1
                    c = f"p{counter[0]}"
                    prods.append(c)
            kids.append(c)
        rows = np.array([probs(K + 1, 0.3) for _ in range(K)])
        rows[:, K] = np.maximum(rows[:, K], 0.2)  # every child may end (so every level can finish)
        rows /= rows.sum(axis=1, keepdims=True)
        spec[name] = {"children": kids, "start": probs(K, 0.3), "trans": rows[:, :K], "end": rows[:, K]}
        pool.setdefault(level, []).append(name)
        return name

    root = make(1)
    if not root_end:
        spec[root]["end"] = np.zeros(len(spec[root]["children"]))
        spec[root]["trans"] = np.array([probs(len(spec[root]["children"]), 0.0)
                                        for _ in spec[root]["children"]])
    return spec, root


def random_model(seed, depth=3, max_k=2, finish="all", gaussian=False, share=True):
    rng = np.random.RandomState(seed)
    spec, root = random_spec(rng, depth, max_k, share=share, root_end=finish == "all")
    h = Hierarchy.from_dict(spec, root)
    P = len(h.production_names)
    if gaussian:
        em = Gaussian(rng.normal(size=P) * 2, rng.uniform(0.5, 2, size=P))
    else:
        em = Categorical(rng.dirichlet(np.ones(3), size=P))
    return HierarchicalHMM(spec, em, root=root, finish=finish), rng


def observations(model, rng, T):
    if isinstance(model.emission_, Gaussian):
        return rng.normal(size=(T, 1))
    return rng.randint(3, size=(T, 1)).astype(float)


def oracle_args(model, X):
    h = model.hierarchy_
    logb = model.emission_.log_density(X)
    return h.to_dict(), h.submodel_names[0], (lambda t, n: logb[t, h._prod_index[n]])


# ------------------------------------------------------------------------------------------------------
# oracle agreement
# ------------------------------------------------------------------------------------------------------
@settings(max_examples=25)
@given(seed=st.integers(0, 10 ** 6), depth=st.sampled_from([2, 3]), T=st.integers(1, 4),
       finish=st.sampled_from(["all", "none"]))
def test_brute_force_oracle(seed, depth, T, finish):
    model, rng = random_model(seed, depth, 3 if depth == 2 else 2, finish)
    model._build()
    X = observations(model, rng, T)
    sub, root, le = oracle_args(model, X)
    lz, act, fin, flags = oracle.marginals(sub, root, le, T, finish, depth=model.hierarchy_.depth)
    ll = model.log_likelihood(X)
    np.testing.assert_allclose(ll[0], lz, rtol=1e-10)
    post = model.posteriors(X)
    h = model.hierarchy_
    for u, path in enumerate(h.instance_paths):
        np.testing.assert_allclose(post.instance_active[:, u], act.get(path, [0.0] * T), rtol=1e-10,
                                   atol=1e-12)
        np.testing.assert_allclose(post.instance_finish[:, u], fin.get(path, [0.0] * T), rtol=1e-10,
                                   atol=1e-12)
    for d in range(h.depth):
        np.testing.assert_allclose(post.finished[d], flags[d], rtol=1e-10, atol=1e-12)
    # level-state marginals are sums of instance marginals with the node at that level
    for d in range(h.depth):
        np.testing.assert_allclose(post.state[d].sum(axis=1),
                                   post.instance_active[:, h._inst_level == d + 1].sum(axis=1))
    if finish == "all" and np.isfinite(lz):
        paths, levels, lp = oracle.viterbi(sub, root, le, T)
        dec = model.decode(X)
        np.testing.assert_allclose(dec.log_prob[0], lp, rtol=1e-10)
        got = [tuple(h.node_names[i] for i in row if i >= 0) for row in dec.states]
        # ties are possible in principle; compare the score of the decoded parse instead of the paths
        score = _parse_logprob(sub, root, le, got, dec.finished)
        np.testing.assert_allclose(score, lp, rtol=1e-10)


def _parse_logprob(sub, root, le, paths, finished):
    """Log-probability of a parse given as paths + finished flags, by the oracle's move semantics."""
    T = len(paths)
    lp = 0.0
    for path, l in oracle._descend(sub, root, ()):
        if path == paths[0]:
            lp = l
    for t in range(T):
        lp += le(t, paths[t][-1])
        d = int(np.argmax(finished[t])) if finished[t].any() else finished.shape[1]
        want = None if t == T - 1 else paths[t + 1]
        for nxt, lev, lm in oracle._moves(sub, root, paths[t]):
            if nxt == want and (lev == d or (want is None and lev == 0)):
                lp += lm
                break
        else:
            return -math.inf
    return lp


@settings(max_examples=12)
@given(seed=st.integers(0, 10 ** 6), T=st.integers(1, 9), gaussian=st.booleans())
def test_inside_outside_matches_linear_time(seed, T, gaussian):
    model, rng = random_model(seed, 3, 3, "all", gaussian=gaussian)
    check_posteriors_match_inside_outside(model, rng, T, rtol=1e-10)


def check_posteriors_match_inside_outside(model, rng, T, rtol):
    """``model.posteriors`` of T random observations equal the cubic-time inside–outside (log-likelihood,
    instance activity and finish probabilities); an impossible sequence has log-likelihood -inf in both."""
    model._build()
    X = observations(model, rng, T)
    lz, act, fin = model.inside_outside(X)[0]
    post = model.posteriors(X)
    if not np.isfinite(lz):
        assert post.log_likelihood[0] == -np.inf
        return
    np.testing.assert_allclose(post.log_likelihood[0], lz, rtol=rtol)
    np.testing.assert_allclose(post.instance_active, act, rtol=rtol, atol=1e-13)
    np.testing.assert_allclose(post.instance_finish, fin, rtol=rtol, atol=1e-13)


def test_inside_outside_figure1_shared_submodel():
    model = fig1_model()
    smp = model.sample(3, random_state=1)
    lz = [r[0] for r in model.inside_outside(smp.X, smp.lengths)]
    np.testing.assert_allclose(lz, model.log_likelihood(smp.X, smp.lengths), rtol=1e-10)


@settings(max_examples=12)
@given(seed=st.integers(0, 10 ** 6), T=st.integers(0, 6), finish=st.sampled_from(["all", "none"]))
def test_dbn_agrees_with_flattened(seed, T, finish):
    model, rng = random_model(seed, 3, 2, finish)
    model._build()
    X = observations(model, rng, T)
    dbn = model.to_dbn()
    ll = dbn.log_likelihood(model.emission_.log_density(X))
    np.testing.assert_allclose(ll, model.log_likelihood(X)[0], rtol=1e-10)
    # DBN transition matrices are the automaton's rescaled by 1 - end (Murphy & Paskin 2001 §4.1)
    h = model.hierarchy_
    for d, tab in dbn.trans.items():
        for ctx, At in tab.items():
            e = dbn.end[d][ctx]
            ok = e < 1
            assert np.allclose(At[ok].sum(axis=1), 1.0)


def test_flattened_transitions_are_stochastic():
    model = fig1_model()
    flat = model.flatten()
    rows = np.asarray(flat.transitions.sum(axis=1)).ravel() + np.exp(
        np.array([model.hierarchy_._m_end[s].dot(np.log(np.maximum(model.hierarchy_.theta(), 1e-300)))
                  [0] for s in range(len(flat.config_paths))]))
    np.testing.assert_allclose(rows, 1.0)
    assert flat.transitions.nnz <= len(flat.config_paths) ** 2
    assert len(flat.config_paths) == 8  # "x y" duplicated per context


# ------------------------------------------------------------------------------------------------------
# batches, edge lengths, filtering, decoding, sampling
# ------------------------------------------------------------------------------------------------------
def test_batch_equals_one_by_one_and_empty():
    model, rng = random_model(7, 3, 2, "none", gaussian=True)
    model._build()
    lengths = [0, 1, 5, 3]
    X = observations(model, rng, sum(lengths))
    ll = model.log_likelihood(X, lengths)
    assert ll[0] == 0.0
    o = np.cumsum([0] + lengths)
    for b in range(1, 4):
        np.testing.assert_allclose(ll[b], model.log_likelihood(X[o[b]:o[b + 1]])[0], rtol=1e-12)
    post = model.posteriors(X, lengths)
    assert post.config.shape == (9, model.hierarchy_.n_configs)
    np.testing.assert_allclose(post.config.sum(axis=1), 1.0)


def test_filter_last_row_equals_smoothing_and_running_likelihood():
    model, rng = random_model(11, 3, 2, "none")
    model._build()
    X = observations(model, rng, 6)
    f = model.filter(X)
    p = model.posteriors(X)
    np.testing.assert_allclose(f.config[-1], p.config[-1], rtol=1e-10)
    for t in range(1, 7):
        np.testing.assert_allclose(f.log_likelihood[t - 1], model.log_likelihood(X[:t])[0], rtol=1e-10)


def test_figure1_sample_decode_segments():
    model = fig1_model()
    smp = model.sample(20, random_state=0)
    strings = []
    o = 0
    for T in smp.lengths:
        s = "".join(SYMBOLS[int(v)] for v in smp.X[o:o + T, 0])
        strings.append(s)
        o += T
    import re
    assert all(re.fullmatch(r"a(xy)+b|c(xy)+d", s) for s in strings)
    dec = model.decode(smp.X, smp.lengths)
    np.testing.assert_array_equal(dec.states, smp.states)
    np.testing.assert_array_equal(dec.finished, smp.finished)
    segs = dec.segments[0]
    assert len(segs) == 3 and segs[0][0][0] == 0 and segs[0][0][1] == smp.lengths[0]
    assert [s[2] for s in segs[1]][1] == "XY"
    assert all(s[2] in "xy" for s in segs[2])


# ------------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, match", [
    ({"r": {"children": ["a", "p"]}, "p": {"production": True, "children": ["z"]}},
     "production state 'p' has children"),
    ({"r": {"children": ["a", "A"]}, "A": {"children": []}}, "abstract state 'A' has no children"),
    ({"r": {"children": ["A"]}, "A": {"children": ["B"]}, "B": {"children": ["A", "x"]}},
     "cycle in the call graph"),
    ({"r": {"children": ["A"]}, "A": {"children": ["x", "y"], "trans": [[0, 1], [1, 0]],
                                      "end": [0, 0]}}, "'A' can never finish"),
    ({"r": {"children": ["A"]}, "A": {"children": ["x", "y"], "start": [1, 0],
                                      "trans": [[1, 0], [0, 0]], "end": [0, 1]}}, "'A' can never finish"),
    ({"r": {"children": ["x"], "start": [0.5]}}, "'start' of 'r' must sum to 1"),
    ({"r": {"children": ["x", "y"], "trans": [[0.5, 0.5], [0, 0]], "end": [0.5, 1]}}, "must sum to 1"),
    ({"r": {"children": ["x", "x"]}}, "more than once"),
    ({"r": {"children": ["x"], "bogus": 1}}, "unknown keys"),
    ({"r": {"children": ["x"]}, "s": {"children": ["y"]}}, "cannot tell the root"),
])
def test_bad_hierarchies(spec, match):
    with pytest.raises(ValueError, match=match):
        Hierarchy.from_dict(spec)


def test_root_must_finish_under_finish_all():
    spec = {"r": {"children": ["x"], "trans": [[1.0]], "end": [0.0]}}
    m = HierarchicalHMM(spec, Categorical([[1.0]]))
    with pytest.raises(ValueError, match="root 'r' can never finish"):
        m.log_likelihood([[0.0]])
    m = HierarchicalHMM(spec, Categorical([[1.0]]), finish="none")
    np.testing.assert_allclose(m.log_likelihood([[0.0], [0.0]]), [0.0])


def test_emission_size_mismatch():
    m = HierarchicalHMM(FIG1, Categorical(np.full((3, 2), 0.5)))
    with pytest.raises(ValueError, match="3 states but the hierarchy has 6 production"):
        m.log_likelihood([[0.0]])


def test_from_arrays_matches_dict():
    rng = np.random.RandomState(0)
    K0, K1 = 2, 3
    s0 = rng.dirichlet(np.ones(K0))
    r0 = rng.dirichlet(np.ones(K0 + 1), size=K0)
    s1 = rng.dirichlet(np.ones(K1), size=K0)
    r1 = rng.dirichlet(np.ones(K1 + 1), size=(K0,) + (K1,))
    m = HierarchicalHMM.from_arrays([s0, s1], [r0[:, :K0], r1[..., :K1]], [r0[:, K0], r1[..., K1]],
                                    Categorical(rng.dirichlet(np.ones(4), size=K0 * K1)))
    m._build()
    assert m.hierarchy_.depth == 2 and m.hierarchy_.n_configs == 6
    X = rng.randint(4, size=(4, 1)).astype(float)
    sub, root, le = oracle_args(m, X)
    np.testing.assert_allclose(m.log_likelihood(X)[0], oracle.log_likelihood(sub, root, le, 4),
                               rtol=1e-10)
    assert "root" in m.describe()


# ------------------------------------------------------------------------------------------------------
# learning and persistence
# ------------------------------------------------------------------------------------------------------
def test_em_monotone_multiple_sequences():
    truth, rng = random_model(3, 3, 2, "all", gaussian=True)
    truth._build()
    smp = truth.sample(15, max_length=200, random_state=2)
    spec = truth.hierarchy_.to_dict()
    m = HierarchicalHMM(spec, Gaussian(), root=truth.hierarchy_.submodel_names[0], init_params="ste",
                        n_iter=15, tol=-np.inf, random_state=0)
    with pytest.warns(Warning):
        m.fit(smp.X, smp.lengths)
    h = np.array(m.monitor_history_)
    assert np.all(np.diff(h) >= -1e-8 * np.abs(h[1:])), h
    # structural zeros are kept
    assert np.all(m.hierarchy_.theta()[truth.hierarchy_.theta() == 0] == 0)


def test_supervised_estimation_recovers_counts():
    truth = fig1_model()
    smp = truth.sample(400, random_state=3)
    m = HierarchicalHMM(FIG1, Categorical(n_features=6))
    m.fit_supervised(smp.X, smp.states, smp.lengths, finished=smp.finished)
    np.testing.assert_allclose(m.hierarchy_.theta(), truth.hierarchy_.theta(), atol=0.06)
    assert m.hierarchy_.trans[m.hierarchy_._sub_index["XY"]][1, 0] == pytest.approx(0.6, abs=0.06)
    # without finished flags the segmentation is read off the states (no self-restarts here)
    m2 = HierarchicalHMM(FIG1, Categorical(n_features=6))
    m2.fit_supervised(smp.X, smp.states, smp.lengths)
    np.testing.assert_allclose(m2.hierarchy_.theta(), m.hierarchy_.theta())
    with pytest.raises(ValueError, match="not a root-to-production path"):
        m2.fit_supervised(smp.X[:1], [[0, 0, 0]])


def test_save_load_round_trip(tmp_path):
    model, rng = random_model(5, 3, 2, "all", gaussian=True)
    model._build()
    X = observations(model, rng, 7)
    p = tmp_path / "h.npz"
    model.save(p)
    back = HierarchicalHMM.load(p)
    np.testing.assert_allclose(back.log_likelihood(X), model.log_likelihood(X), rtol=1e-14)
    assert back.hierarchy_.instance_paths == model.hierarchy_.instance_paths


@pytest.mark.slow
def test_figure1_experiment_heldout_within_one_percent():
    from tests.conftest import script_module

    mod = script_module("examples/hhmm_figure1.py")
    ll_true, ll_fit, rel = mod.main(n_train=500, n_test=300, n_restarts=2)
    assert rel < 0.01


def test_refit_rebuilds_from_the_parameters():
    """Contract: ``fit`` starts from the parameters, never from a previous fit. Fitting twice equals
    fitting once from scratch, and ``set_params(hierarchy=...)`` then ``fit`` uses the new hierarchy."""
    smp = fig1_model().sample(30, random_state=1)
    X = smp.X.astype(int)

    def fresh(spec=FIG1):
        return HierarchicalHMM(spec, "categorical", init_params="ste", n_iter=4, random_state=0)

    def fit(model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return model.fit(X, smp.lengths)

    once = fit(fresh())
    twice = fit(fit(fresh()))
    np.testing.assert_array_equal(twice.hierarchy_.theta(), once.hierarchy_.theta())
    np.testing.assert_array_equal(twice.emission_.probs, once.emission_.probs)
    assert twice.monitor_history_ == once.monitor_history_
    # a new hierarchy (S0 may also go from a straight to b) is used by the next fit
    spec = {k: dict(v) for k, v in FIG1.items()}
    spec["S0"] = dict(FIG1["S0"], trans=[[0, 0.5, 0.5], [0, 0, 1], [0, 0, 0]])
    fit(twice.set_params(hierarchy=spec))
    new = fit(fresh(spec))
    np.testing.assert_array_equal(twice.hierarchy_.theta(), new.hierarchy_.theta())
    assert twice.monitor_history_ == new.monitor_history_
    assert len(twice.hierarchy_._a_from) == len(new.hierarchy_._a_from) > len(once.hierarchy_._a_from)
    # changing the structure drops the built model for inference without fit too
    m = fig1_model()
    m._build()
    m.set_params(hierarchy=spec)
    assert m.flatten().transitions.nnz == fresh(spec).flatten().transitions.nnz > \
        fig1_model().flatten().transitions.nnz


@pytest.mark.parametrize("inference", ["flat", "sparse", "jtree"])
def test_expected_counts_of_a_parameter_that_became_zero_are_zero_not_nan(inference):
    """A transition of probability 0 in the flattened chain gets count 0 (its share of the pair's
    marginal was exp(-inf - -inf) = NaN, and NaN counts reached the M-step and the empty-state warning)."""
    smp = fig1_model().sample(30, random_state=1)
    X = smp.X.astype(int)
    spec = {k: dict(v) for k, v in FIG1.items()}
    spec["S0"] = dict(FIG1["S0"], trans=[[0, 0.5, 0.5], [0, 0, 1], [0, 0, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = HierarchicalHMM(spec, "categorical", init_params="ste", n_iter=6, random_state=0,
                            inference=inference).fit(X, smp.lengths)
    Xv, L, off = m._data(X, smp.lengths)[:3]
    counts = m._e_step(Xv, L, off)[0]
    assert np.isfinite(counts).all() and (counts >= 0).all()


def em_histories(inferences):
    """``monitor_history_`` of 5 EM iterations on 20 sequences sampled from Figure 1's model, one per
    ``inference`` of ``inferences`` (each fit warns: EM stops before converging)."""
    smp = fig1_model().sample(20, random_state=3)
    fits = []
    for inference in inferences:
        m = HierarchicalHMM(fig1_model().hierarchy, "categorical", init_params="ste", n_iter=5,
                            random_state=0, inference=inference)
        with pytest.warns(Warning):
            m.fit(smp.X.astype(int), smp.lengths)
        fits.append(m.monitor_history_)
    return fits
