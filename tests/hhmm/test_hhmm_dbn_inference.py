"""HHMM inference on the DBN (Murphy & Paskin 2001 §5): the chain of slice junction trees ("jtree") equals
brute-force enumeration, the flattened chain and the O(T³) inside–outside reference at rtol 1e-10
(likelihood, posteriors, EM counts, Viterbi, filtering); the factored frontier is exact where the
belief state factorises and approximate elsewhere (its smoothing, Viterbi and EM: test_hhmm_ff.py)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn import HierarchicalHMM
from structlearn.distributions.emissions import Categorical
from structlearn.hhmm.jtree import DBNInference, SliceJunctionTree
from tests.hhmm.test_hhmm import (_parse_logprob, check_posteriors_match_inside_outside, em_histories, fig1_model,
                                  observations, oracle_args, random_model)
from tests.oracles import hhmm as oracle

RTOL = 1e-10


def _jtree(model):
    return HierarchicalHMM(model.hierarchy, model.emission, root=model.root, finish=model.finish,
                           inference="jtree")


def balanced(depth, K, seed, finish="all"):
    """Balanced hierarchy, K children per sub-model at every level, dense random parameters."""
    rng = np.random.RandomState(seed)
    start, trans, end = [], [], []
    for d in range(depth):
        ctx = (K,) * d
        start.append(rng.dirichlet(np.ones(K), size=ctx))
        rows = rng.dirichlet(np.ones(K + 1), size=ctx + (K,))
        if d == 0 and finish == "none":
            rows[..., K] = 0.0
            rows /= rows.sum(axis=-1, keepdims=True)
        trans.append(rows[..., :K])
        end.append(rows[..., K])
    em = Categorical(rng.dirichlet(np.ones(4), size=K ** depth))
    return HierarchicalHMM.from_arrays(start, trans, end, em, finish=finish), rng


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10 ** 6), depth=st.sampled_from([2, 3]), T=st.integers(1, 4),
       finish=st.sampled_from(["all", "none"]))
def test_jtree_matches_brute_force(seed, depth, T, finish):
    flat, rng = random_model(seed, depth, 3 if depth == 2 else 2, finish)
    model = _jtree(flat)
    model._build()
    X = observations(model, rng, T)
    sub, root, le = oracle_args(model, X)
    lz, act, fin, flags = oracle.marginals(sub, root, le, T, finish, depth=model.hierarchy_.depth)
    np.testing.assert_allclose(model.log_likelihood(X)[0], lz, rtol=RTOL)
    post = model.posteriors(X)
    h = model.hierarchy_
    for u, path in enumerate(h.instance_paths):
        np.testing.assert_allclose(post.instance_active[:, u], act.get(path, [0.0] * T), rtol=RTOL,
                                   atol=1e-12)
        np.testing.assert_allclose(post.instance_finish[:, u], fin.get(path, [0.0] * T), rtol=RTOL,
                                   atol=1e-12)
    for d in range(h.depth):
        np.testing.assert_allclose(post.finished[d], flags[d], rtol=RTOL, atol=1e-12)
    if finish == "all" and np.isfinite(lz):
        paths, levels, lp = oracle.viterbi(sub, root, le, T)
        dec = model.decode(X)
        np.testing.assert_allclose(dec.log_prob[0], lp, rtol=RTOL)
        got = [tuple(h.node_names[i] for i in row if i >= 0) for row in dec.states]
        np.testing.assert_allclose(_parse_logprob(sub, root, le, got, dec.finished), lp, rtol=RTOL)


def _assert_same(flat, jt, X, lengths):
    np.testing.assert_allclose(jt.log_likelihood(X, lengths), flat.log_likelihood(X, lengths), rtol=RTOL)
    pf, pj = flat.posteriors(X, lengths), jt.posteriors(X, lengths)
    for name in pf._fields:
        np.testing.assert_allclose(getattr(pj, name), getattr(pf, name), rtol=RTOL, atol=1e-12,
                                   err_msg=name)
    cf, wf, lf = flat.expected_counts(X, lengths)
    cj, wj, lj = jt.expected_counts(X, lengths)
    np.testing.assert_allclose(cj, cf, rtol=RTOL, atol=1e-11)
    np.testing.assert_allclose(wj, wf, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(lj, lf, rtol=RTOL)
    df, dj = flat.decode(X, lengths), jt.decode(X, lengths)
    np.testing.assert_allclose(dj.log_prob, df.log_prob, rtol=RTOL)
    ff, fj = flat.filter(X, lengths), jt.filter(X, lengths)
    np.testing.assert_allclose(fj.config, ff.config, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(fj.log_likelihood, ff.log_likelihood, rtol=RTOL)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10 ** 6), depth=st.sampled_from([2, 3, 4]), finish=st.sampled_from(["all", "none"]),
       gaussian=st.booleans(), lengths=st.lists(st.integers(0, 6), min_size=1, max_size=3))
def test_jtree_equals_flat(seed, depth, finish, gaussian, lengths):
    flat, rng = random_model(seed, depth, 3 if depth < 4 else 2, finish, gaussian=gaussian)
    flat._build()
    jt = _jtree(flat)
    X = observations(flat, rng, sum(lengths))
    if not np.all(np.isfinite(flat.log_likelihood(X, lengths))):
        return  # an impossible sequence (EM and decode raise for it in both)
    _assert_same(flat, jt, X, lengths)


@pytest.mark.parametrize("depth, K, finish", [(4, 2, "all"), (3, 3, "none"), (5, 2, "all")])
def test_jtree_equals_flat_balanced_deep(depth, K, finish):
    flat, rng = balanced(depth, K, depth * 10 + K, finish)
    flat._build()
    smp = flat.sample(3, max_length=30, random_state=1) if finish == "all" else None
    if smp is None:
        X, lengths = rng.randint(4, size=(12, 1)).astype(float), [5, 7]
    else:
        X, lengths = smp.X, smp.lengths
    _assert_same(flat, _jtree(flat), X, lengths)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10 ** 6), T=st.integers(1, 8))
def test_jtree_matches_inside_outside(seed, T):
    flat, rng = random_model(seed, 3, 3, "all")
    model = _jtree(flat)
    check_posteriors_match_inside_outside(model, rng, T, rtol=RTOL)


def test_em_same_path_flat_and_jtree():
    fits = em_histories(("flat", "jtree"))
    np.testing.assert_allclose(fits[1], fits[0], rtol=RTOL)
    assert np.all(np.diff(fits[1]) >= -1e-9)


def test_factored_frontier_exact_for_one_level_and_approximate_deeper():
    # depth 1: the belief state is one variable, so the factored frontier is exact
    flat, rng = balanced(1, 3, 0, "all")
    ff = HierarchicalHMM(flat.hierarchy, flat.emission, inference="factored-frontier")
    smp = flat.sample(4, max_length=40, random_state=2)
    np.testing.assert_allclose(ff.log_likelihood(smp.X, smp.lengths),
                               flat.log_likelihood(smp.X, smp.lengths), rtol=RTOL)
    np.testing.assert_allclose(ff.filter(smp.X, smp.lengths).log_likelihood,
                               flat.filter(smp.X, smp.lengths).log_likelihood, rtol=RTOL)
    # depth 3: an approximation, finite, of the right magnitude
    flat, rng = balanced(3, 2, 1, "all")
    ff = HierarchicalHMM(flat.hierarchy, flat.emission, inference="factored-frontier")
    smp = flat.sample(4, max_length=40, random_state=2)
    exact = flat.log_likelihood(smp.X, smp.lengths)
    approx = ff.log_likelihood(smp.X, smp.lengths)
    assert np.all(np.isfinite(approx))
    assert np.all(np.abs(approx - exact) < 0.5 * np.abs(exact) + 1.0)
    # smoothing, Viterbi and EM with the factored frontier: tests/hhmm/test_hhmm_ff.py


@pytest.mark.parametrize("f_nodes", ["cut", "binary"])
def test_slice_tree_is_a_junction_tree(f_nodes):
    for dims in [(2, 3), (3, 3, 3), (2, 2, 2, 2, 2)]:
        t = SliceJunctionTree(dims, f_nodes)
        C = len(t.cliques)
        assert t.parent[t.cR] == -1 and set(t.cliques[t.cR]) == set(t.qn)
        for name, c in t.assign.items():
            assert set(t.scopes[name]) <= set(t.cliques[c])
        # running intersection: the cliques holding a variable form a connected subtree
        for v in range(len(t.card)):
            holders = {c for c in range(C) if v in t.cliques[c]}
            roots = [c for c in holders if t.parent[c] not in holders]
            assert len(roots) == 1, (dims, v)


def test_bad_inference_name():
    with pytest.raises(ValueError, match="inference"):
        HierarchicalHMM(fig1_model().hierarchy, fig1_model().emission, inference="bp").log_likelihood([[0.0]])


@pytest.mark.parametrize("seed, finish", [(3, "all"), (9, "none"), (6, "all")])
def test_binary_f_nodes_tree_equals_cut_tree(seed, finish):
    """The seed's literal DBN (one binary node per F^d) and the cut-level node give the same numbers."""
    flat, rng = random_model(seed, 3, 3, finish)
    flat._build()
    X = observations(flat, rng, 7)
    logb = flat.emission_.log_density(X)
    off = np.array([0, 3, 7])
    a = DBNInference(flat.hierarchy_, finish, f_nodes="cut")
    b = DBNInference(flat.hierarchy_, finish, f_nodes="binary")
    np.testing.assert_allclose(b.log_likelihood(logb, off), a.log_likelihood(logb, off), rtol=RTOL)
    for x, y in zip(b.posteriors(logb, off), a.posteriors(logb, off)):
        np.testing.assert_allclose(x, y, rtol=RTOL, atol=1e-12)
    for x, y in zip(b.expected_counts(logb, off), a.expected_counts(logb, off)):
        np.testing.assert_allclose(x, y, rtol=RTOL, atol=1e-12)
    assert b.tree.max_clique >= a.tree.max_clique
