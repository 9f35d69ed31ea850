"""The factored frontier on the HHMM DBN (``inference="factored-frontier"``): smoothing, Viterbi and EM.

Exact where its product-of-level-marginals belief state is exact (one level; a hierarchy whose levels
are independent a priori and whose emission reads the bottom level only); elsewhere an approximation
whose error is measured here against the junction tree and only checked for sanity (the numbers are in
docs/hhmm.md, "Factored frontier: its error", from ``benchmarks/bench_hhmm.py --part ff``)."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn import HierarchicalHMM
from structlearn.engine.kernels.hhmm_ff import path_log_prob
from structlearn.distributions.emissions import Categorical
from structlearn.hhmm.forward_filter import FactoredFrontier
from structlearn.hhmm.jtree import DBNInference
from tests.hhmm.test_hhmm import observations, random_model
from tests.hhmm.test_hhmm_dbn_inference import balanced

RTOL = 1e-10


def _with(model, inference, **kw):
    return HierarchicalHMM(model.hierarchy, model.emission, root=model.root, finish=model.finish,
                           inference=inference, **kw)


def factorised(depth, K, seed):
    """Levels independent a priori: every level's next child is drawn from one distribution whatever
    the previous child and the context, ends have one probability per level, and the emission reads
    the bottom level only. The filtered and smoothed beliefs are then products over levels."""
    rng = np.random.RandomState(seed)
    start, trans, end = [], [], []
    for d in range(depth):
        ctx = (K,) * d
        r = rng.dirichlet(np.ones(K))
        e = rng.uniform(0.2, 0.6) if d else 0.1
        start.append(np.broadcast_to(r, ctx + (K,)).copy())
        trans.append(np.broadcast_to((1 - e) * r, ctx + (K, K)).copy())
        end.append(np.full(ctx + (K,), e))
    em = Categorical(np.tile(rng.dirichlet(np.ones(4), size=K), (K ** (depth - 1), 1)))
    return HierarchicalHMM.from_arrays(start, trans, end, em)


def _sample(model, n, seed, max_length=40):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        smp = model.sample(n, max_length=max_length, random_state=seed)
    return smp.X, smp.lengths


def _assert_same(a, b, X, lengths, rtol=RTOL):
    np.testing.assert_allclose(b.log_likelihood(X, lengths), a.log_likelihood(X, lengths), rtol=rtol)
    pa, pb = a.posteriors(X, lengths), b.posteriors(X, lengths)
    for name in pa._fields:
        np.testing.assert_allclose(getattr(pb, name), getattr(pa, name), rtol=rtol, atol=1e-12,
                                   err_msg=name)
    for x, y in zip(a.expected_counts(X, lengths), b.expected_counts(X, lengths)):
        np.testing.assert_allclose(y, x, rtol=rtol, atol=1e-11)
    da, db = a.decode(X, lengths), b.decode(X, lengths)
    np.testing.assert_allclose(db.log_prob, da.log_prob, rtol=rtol)
    np.testing.assert_array_equal(db.states, da.states)
    np.testing.assert_array_equal(db.finished, da.finished)


@pytest.mark.parametrize("finish", ["all", "none"])
def test_exact_for_one_level(finish):
    flat, rng = balanced(1, 4, 7, finish)
    X, lengths = _sample(flat, 4, 1) if finish == "all" else (rng.randint(4, size=(15, 1)), [6, 9])
    _assert_same(_with(flat, "flat"), _with(flat, "factored-frontier"), X, lengths)


@pytest.mark.parametrize("depth, K", [(2, 2), (2, 3), (3, 2)])
def test_exact_when_the_levels_are_independent(depth, K):
    model = factorised(depth, K, depth * 10 + K)
    X, lengths = _sample(model, 4, 3)
    _assert_same(_with(model, "jtree"), _with(model, "factored-frontier"), X, lengths)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10 ** 6), depth=st.sampled_from([2, 3, 4]), finish=st.sampled_from(["all", "none"]),
       lengths=st.lists(st.integers(0, 7), min_size=1, max_size=3))
def test_sane_on_random_hierarchies(seed, depth, finish, lengths):
    """Shared sub-models, production states above the bottom level, ragged batches: probabilities in
    [0, 1] that sum to 1, EM counts of the right totals, a legal Viterbi parse never better than the
    exact one and scored exactly."""
    flat, rng = random_model(seed, depth, 3 if depth < 4 else 2, finish)
    flat._build()
    X = observations(flat, rng, sum(lengths))
    exact = _with(flat, "jtree")
    ll = exact.log_likelihood(X, lengths)
    if not np.all(np.isfinite(ll)):
        return
    ff = _with(flat, "factored-frontier")
    assert np.all(np.isfinite(ff.log_likelihood(X, lengths)))
    post = ff.posteriors(X, lengths)
    N = X.shape[0]
    np.testing.assert_allclose(post.config.sum(axis=1), np.ones(N), rtol=1e-12)
    assert np.all(post.config >= 0) and np.all(post.instance_finish <= 1 + 1e-12)
    np.testing.assert_allclose(post.state[0].sum(axis=1), np.ones(N), rtol=1e-12)
    assert np.all((post.finished >= -1e-15) & (post.finished <= 1 + 1e-12))
    counts, weights, _ = ff.expected_counts(X, lengths)
    assert np.all(counts >= -1e-12)
    np.testing.assert_allclose(weights.sum(axis=1), np.ones(N), rtol=1e-12)
    # one vertical entry per sequence at the root
    h = ff.hierarchy_
    K0 = len(h.children[0])
    np.testing.assert_allclose(counts[h._base[0]:h._base[0] + K0].sum(),
                               sum(1 for T in lengths if T > 0), rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a sequence decoded exactly (see FactoredFrontier)
        dec = ff.decode(X, lengths)
    best = exact.decode(X, lengths).log_prob
    assert np.all(np.isfinite(dec.log_prob)) and np.all(dec.log_prob <= best + 1e-9)


@pytest.mark.parametrize("finish", ["all", "none"])
def test_path_log_prob_scores_the_exact_viterbi_parse(finish):
    flat, rng = balanced(3, 2, 5, finish)
    flat._build()
    X = rng.randint(4, size=(9, 1)).astype(float) if finish == "none" else _sample(flat, 1, 4)[0]
    logb = flat.emission_.log_density(X)
    off = np.array([0, X.shape[0]])
    eng = DBNInference(flat.hierarchy_, finish)
    best, cfg, cut = eng.decode(logb, off)
    D = eng.D
    final = np.full_like(eng.fscore, -np.inf)
    final[0 if finish == "all" else D] = eng.fscore[0] if finish == "all" else 0.0
    cut = cut.copy()
    cut[-1] = 0 if finish == "all" else D
    dims = np.asarray(eng.dbn.dims, dtype=np.int64)
    s = path_log_prob(eng.dbn.cfg_stack[cfg], cut, eng._em(logb), eng.dbn.log_prior, eng.fscore, final,
                      dims, eng.q_flat, eng.q_off)
    np.testing.assert_allclose(s, best[0], rtol=RTOL)


def test_fit_predict_decode_with_the_factored_frontier():
    true, _ = balanced(3, 2, 11, "all")
    X, lengths = _sample(true, 15, 5, max_length=60)
    Xt, lt = _sample(true, 10, 6, max_length=60)
    fits = {}
    for inference in ("jtree", "factored-frontier"):
        m = HierarchicalHMM(true.hierarchy, "categorical", init_params="ste", n_iter=15, tol=-np.inf,
                            random_state=2, inference=inference)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert m.fit(X.astype(int), lengths) is m
        assert np.all(np.isfinite(m.monitor_history_)) and m.n_iter_ == 15
        dec = m.decode(Xt.astype(int), lt)
        assert dec.states.shape == (Xt.shape[0], 3) and np.all(np.isfinite(dec.log_prob))
        assert m.posteriors(Xt.astype(int), lt).config.shape[0] == Xt.shape[0]
        m.set_params(inference="jtree")
        fits[inference] = m.score(Xt.astype(int), lt) / Xt.shape[0]
    # the approximate E-step learns a model of the same quality to within a few percent per token
    # (measured: docs/hhmm.md); only a sane bound is asserted
    assert abs(fits["factored-frontier"] - fits["jtree"]) < 0.1 * abs(fits["jtree"])


def test_error_against_exact_is_bounded_and_reported(capsys):
    """The measured error on dense random hierarchies (printed, asserted only to be sane)."""
    for depth, K, seed in [(2, 3, 0), (3, 2, 1), (4, 2, 2)]:
        true, _ = balanced(depth, K, seed, "all")
        X, lengths = _sample(true, 6, seed, max_length=80)
        exact, ff = _with(true, "jtree"), _with(true, "factored-frontier")
        pe, pf = exact.posteriors(X, lengths), ff.posteriors(X, lengths)
        err = np.abs(pe.state - pf.state)
        tv = err.sum(axis=2).mean() / 2  # total variation per level and token, averaged
        de, df = exact.decode(X, lengths), ff.decode(X, lengths)
        agree = np.all(de.states == df.states, axis=1).mean()
        rel = (ff.score(X, lengths) - exact.score(X, lengths)) / abs(exact.score(X, lengths))
        with capsys.disabled():
            print(f"\nFF vs exact, depth {depth}, K {K}: log L {rel:+.3%}, smoothed P(Q^d_t) max |err| "
                  f"{err.max():.3f}, mean total variation {tv:.4f}, Viterbi tokens equal {agree:.3f}")
        assert abs(rel) < 0.1
        assert err.max() <= 1.0 + 1e-12 and tv < 0.5
        assert 0.0 <= agree <= 1.0 and np.all(df.log_prob <= de.log_prob + 1e-9)


def test_engine_is_chosen_by_inference():
    flat, _ = balanced(2, 2, 0, "all")
    m = _with(flat, "factored-frontier")
    m._build()
    assert type(m._dbn_inference()) is FactoredFrontier
    m.set_params(inference="jtree")
    assert type(m._dbn_inference()) is DBNInference
