"""Tree against the brute-force oracle, known answers, validation, stability and the NumPy twin."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats

from structlearn.engine.kernels import _reference_tree as ref
from structlearn.engine.structures import LinearChain, Tree
from tests.oracles.tree import tree_oracle
from tests.strategies import lengths_list, log_potentials

RTOL = 1e-10


def random_parents(rng, T, shape="random"):
    """Local parent indices of a random rooted tree on T nodes, nodes in a random order."""
    perm = rng.permutation(T)
    par = np.full(T, -1, dtype=np.int64)
    for t in range(1, T):
        if shape == "chain":
            p = t - 1
        elif shape == "star":
            p = 0
        else:
            p = int(rng.integers(0, t))
        par[perm[t]] = perm[p]
    return par


@st.composite
def tree_batch(draw, max_k=3, max_len=6, p_neg_inf=0.1, shared=None):
    K = draw(st.integers(1, max_k))
    lengths = draw(lengths_list(max_len=max_len))
    N = sum(lengths)
    shared_edge = draw(st.booleans()) if shared is None else shared
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    shape = draw(st.sampled_from(["random", "random", "chain", "star"]))
    parent = np.concatenate([random_parents(rng, T, shape) for T in lengths] or [np.zeros(0, int)])
    unary = draw(log_potentials((N, K), p_neg_inf=p_neg_inf))
    edge = draw(log_potentials((K, K) if shared_edge else (N, K, K), p_neg_inf=p_neg_inf))
    root_score = draw(st.one_of(st.none(), log_potentials((K,), p_neg_inf=p_neg_inf / 2)))
    return unary, edge, parent.astype(np.int64), root_score, np.array(lengths)


def _per_tree(unary, edge, parent, lengths):
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    for b in range(len(lengths)):
        sl = slice(off[b], off[b + 1])
        yield b, sl, unary[sl], (edge if edge.ndim == 2 else edge[sl]), parent[sl]


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12)


def _check_tree(u, e, p, rs, b, sl, log_z, mx, marg):
    """Tree ``b`` (nodes ``sl``) of a batch against the oracle: log Z, max, unary and edge marginals."""
    o = tree_oracle(u, e, p, rs)
    _close(log_z[b], o["log_z"])
    _close(mx[b], o["max"])
    _close(marg.unary[sl], o["unary"])
    _close(marg.edge[sl], o["edge"])
    return o


def _no_nan(*arrays):
    for a in arrays:
        assert not np.isnan(a).any()


@given(tree_batch())
def test_oracle_log_z_max_marginals_entropy(inst):
    unary, edge, parent, rs, lengths = inst
    tr = Tree(unary, edge, parent, lengths=lengths, root_score=rs)
    log_z, mx, ent = tr.log_partition(), tr.max(), tr.entropy()
    marg = tr.marginals()
    msum = tr.marginals(edge="sum")
    _no_nan(log_z, mx, ent, marg.unary, marg.edge, msum.edge)
    for b, sl, u, e, p in _per_tree(unary, edge, parent, lengths):
        if lengths[b] == 0:
            assert log_z[b] == 0.0 and mx[b] == 0.0 and ent[b] == 0.0
            continue
        o = _check_tree(u, e, p, rs, b, sl, log_z, mx, marg)
        _close(msum.edge[b], o["edge"].sum(axis=0))
        if o["log_z"] != -math.inf:
            _close(ent[b], o["entropy"])
        else:
            assert ent[b] == -np.inf


@given(tree_batch(), st.integers(1, 8))
def test_oracle_argmax_kbest_score(inst, k):
    unary, edge, parent, rs, lengths = inst
    tr = Tree(unary, edge, parent, lengths=lengths, root_score=rs)
    log_z = tr.log_partition()
    if np.any(log_z == -np.inf):
        b = int(np.flatnonzero(log_z == -np.inf)[0])
        for call in (tr.argmax, lambda: tr.kbest(k), lambda: tr.sample(2)):
            with pytest.raises(ValueError, match=f"sequence {b}"):
                call()
        return
    y = tr.argmax()
    _close(tr.score(y), tr.max())
    kb = tr.kbest(k)
    assert kb.labels.shape == (k, unary.shape[0]) and kb.scores.shape == (len(lengths), k)
    for b, sl, u, e, p in _per_tree(unary, edge, parent, lengths):
        if lengths[b] == 0:
            np.testing.assert_array_equal(kb.scores[b], [0.0] + [-np.inf] * (k - 1))
            continue
        o = tree_oracle(u, e, p, rs)
        want = [sc for sc, _ in o["ranked"][:k]]
        _close(kb.scores[b][: len(want)], want)
        assert np.all(kb.scores[b][len(want):] == -np.inf)
        assert np.all(kb.labels[len(want):, sl] == -1)
        score_of = {yy: ss for ss, yy in o["ranked"]}
        for r in range(len(want)):  # each returned labeling is feasible and has the returned score
            _close(score_of[tuple(kb.labels[r, sl])], kb.scores[b, r])
        assert len({tuple(kb.labels[r, sl]) for r in range(len(want))}) == len(want)
        _close(score_of[tuple(y[sl])], o["max"])


@given(tree_batch(p_neg_inf=0.0))
def test_score_matches_oracle_on_random_labels(inst):
    unary, edge, parent, rs, lengths = inst
    K = unary.shape[1]
    y = np.random.default_rng(0).integers(0, K, size=unary.shape[0])
    tr = Tree(unary, edge, parent, lengths=lengths, root_score=rs)
    got = tr.score(y)
    for b, sl, u, e, p in _per_tree(unary, edge, parent, lengths):
        if lengths[b] == 0:
            assert got[b] == 0.0
            continue
        o = tree_oracle(u, e, p, rs)
        _close(got[b], o["log_z"] + math.log(o["probs"][tuple(y[sl])]))


def test_score_is_minus_inf_for_a_forbidden_labeling():
    edge = np.zeros((2, 2))
    edge[0, 0] = -np.inf
    tr = Tree(np.zeros((2, 2)), edge, [1, -1])
    np.testing.assert_array_equal(tr.score([0, 0]), [-np.inf])
    np.testing.assert_array_equal(tr.score([0, 1]), [0.0])


@given(tree_batch())
def test_constrained_matches_oracle(inst):
    unary, edge, parent, rs, lengths = inst
    allowed = np.random.default_rng(1).random(unary.shape) < 0.7
    tr = Tree(unary, edge, parent, lengths=lengths, root_score=rs).constrain(allowed)
    masked = np.where(allowed, unary, -np.inf)
    log_z, marg, mx = tr.log_partition(), tr.marginals(), tr.max()
    _no_nan(log_z, marg.unary, marg.edge)
    for b, sl, u, e, p in _per_tree(masked, edge, parent, lengths):
        if lengths[b] == 0:
            continue
        _check_tree(u, e, p, rs, b, sl, log_z, mx, marg)
    if np.all(log_z > -np.inf):
        kb = tr.kbest(3)
        assert np.all(allowed[np.flatnonzero(kb.labels[0] >= 0), kb.labels[0][kb.labels[0] >= 0]])


@given(tree_batch())
def test_packed_batch_equals_one_by_one(inst):
    unary, edge, parent, rs, lengths = inst
    tr = Tree(unary, edge, parent, lengths=lengths, root_score=rs)
    lz, m, mx = tr.log_partition(), tr.marginals(), tr.max()
    for b, sl, u, e, p in _per_tree(unary, edge, parent, lengths):
        one = Tree(u, e, p, root_score=rs)
        _close(one.log_partition()[0], lz[b])
        _close(one.max()[0], mx[b])
        _close(one.marginals().unary, m.unary[sl])
        _close(one.marginals().edge, m.edge[sl])


@given(tree_batch(max_k=4, max_len=9, p_neg_inf=0.2))
def test_reference_twin_agrees(inst):
    unary, edge, parent, rs, lengths = inst
    tr = Tree(unary, edge, parent, lengths=lengths, root_score=rs)
    rs0 = np.zeros(unary.shape[1]) if rs is None else rs
    r_lz, r_mx, r_um, r_em = ref.tree_reference(unary, edge, parent, rs0, tr.offsets)
    _close(tr.log_partition(), r_lz)
    _close(tr.max(), r_mx)
    m = tr.marginals()
    _close(m.unary, r_um)
    _close(m.edge, r_em)


@given(tree_batch(p_neg_inf=0.5))
def test_many_minus_inf_never_nan(inst):
    unary, edge, parent, rs, lengths = inst
    tr = Tree(unary, edge, parent, lengths=lengths, root_score=rs)
    m = tr.marginals()
    _no_nan(tr.log_partition(), tr.max(), tr.entropy(), m.unary, m.edge)
    ok = tr.log_partition() > -np.inf
    seq = np.repeat(np.arange(len(lengths)), lengths)
    np.testing.assert_allclose(m.unary.sum(1), ok[seq].astype(float), rtol=1e-10)


def test_star_with_forbidden_labels_matches_oracle():
    # a hub with many children, where some children forbid labels the hub could take: the outside
    # score of each child must come from its siblings' messages, with no -inf - -inf
    rng = np.random.default_rng(5)
    T, K = 7, 2
    unary = rng.normal(size=(T, K))
    unary[2, :] = [-np.inf, 0.0]
    unary[5, 1] = -np.inf
    edge = rng.normal(size=(T, K, K))
    edge[3, 0, :] = -np.inf           # child 3 can only be labelled 1
    edge[4, :, 1] = -np.inf           # child 4 forbids hub label 1
    parent = np.array([-1, 0, 0, 0, 0, 0, 0])
    tr = Tree(unary, edge, parent)
    o = tree_oracle(unary, edge, parent)
    _close(tr.log_partition()[0], o["log_z"])
    m = tr.marginals()
    _close(m.unary, o["unary"])
    _close(m.edge, o["edge"])
    assert m.unary[0, 1] == 0.0
    _close(tr.entropy()[0], o["entropy"])


def test_sample_distribution_chi_square():
    rng = np.random.default_rng(3)
    K, T = 3, 4
    unary = rng.normal(size=(T, K))
    edge = rng.normal(size=(T, K, K))
    edge[1, 0, 2] = -np.inf
    parent = np.array([2, 2, -1, 1])
    rs = rng.normal(size=K)
    tr = Tree(unary, edge, parent, root_score=rs)
    n = 30000
    samples = tr.sample(n, random_state=7)
    o = tree_oracle(unary, edge, parent, rs)
    keys = [y for y, p in o["probs"].items() if p > 0]
    index = {y: i for i, y in enumerate(keys)}
    counts = np.zeros(len(keys))
    for row in samples:
        counts[index[tuple(row)]] += 1  # KeyError would mean a forbidden labeling was sampled
    expected = np.array([o["probs"][y] for y in keys]) * n
    assert stats.chisquare(counts, expected).pvalue > 1e-3
    np.testing.assert_array_equal(samples, tr.sample(n, random_state=7))


def test_sample_packed_batch_shapes_and_support():
    rng = np.random.default_rng(4)
    lengths = [3, 0, 1, 4]
    parent = np.concatenate([random_parents(rng, T) for T in lengths])
    unary = rng.normal(size=(8, 2))
    unary[0, 0] = -np.inf
    tr = Tree(unary, np.zeros((2, 2)), parent, lengths=lengths)
    s = tr.sample(50, random_state=0)
    assert s.shape == (50, 8) and np.all(s[:, 0] == 1) and np.all((s >= 0) & (s < 2))


def test_known_answer_two_nodes_all_different():
    edge = np.zeros((2, 3, 3))
    edge[0][np.eye(3, dtype=bool)] = -np.inf
    tr = Tree(np.zeros((2, 3)), edge, [1, -1])   # node 0 is the child of node 1
    assert tr.parent.tolist() == [1, -1]
    _close(tr.log_partition()[0], math.log(6))
    m = tr.marginals()
    _close(m.unary, np.full((2, 3), 1 / 3))
    want = np.where(np.eye(3, dtype=bool), 0.0, 1 / 6)
    _close(m.edge[0], want)
    assert np.all(m.edge[1] == 0)
    _close(tr.entropy()[0], math.log(6))
    kb = tr.kbest(8)
    np.testing.assert_array_equal(kb.scores[0], [0.0] * 6 + [-np.inf] * 2)
    assert {tuple(r) for r in kb.labels[:6]} == {(i, j) for i in range(3) for j in range(3) if i != j}
    # the same with a shared (K, K) edge
    _close(Tree(np.zeros((2, 3)), edge[0], [1, -1]).log_partition()[0], math.log(6))


@pytest.mark.parametrize("root_last", [True, False])
def test_tree_equal_to_chain_matches_linear_chain(root_last):
    rng = np.random.default_rng(11)
    lengths = [5, 1, 0, 7]
    N, K = sum(lengths), 3
    unary = rng.normal(size=(N, K)) * 2
    trans = rng.normal(size=(K, K))
    trans[0, 2] = -np.inf
    start, end = rng.normal(size=K), rng.normal(size=K)
    chain = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    parent, tu = [], unary.copy()
    o = 0
    for T in lengths:
        if T == 0:
            continue
        if root_last:   # parent of t is t + 1: edge[t, y_t, y_t+1] = trans[y_t, y_t+1]
            parent += list(range(1, T)) + [-1]
            tu[o] += start
            rs = end
        else:           # parent of t is t - 1: edge[t, y_t, y_t-1] = trans[y_t-1, y_t]
            parent += [-1] + list(range(0, T - 1))
            tu[o + T - 1] += end
            rs = start
        o += T
    edge = trans if root_last else trans.T
    tr = Tree(tu, edge, parent, lengths=lengths, root_score=rs)
    _close(tr.log_partition(), chain.log_partition())
    _close(tr.max(), chain.max())
    _close(tr.marginals().unary, chain.marginals().unary)
    np.testing.assert_array_equal(tr.argmax(), chain.argmax())
    _close(tr.entropy(), chain.entropy())
    _close(tr.kbest(6).scores, chain.kbest(6).scores)
    ce, te = chain.marginals().edge, tr.marginals().edge
    offs = np.concatenate([[0], np.cumsum(lengths)])
    for b, T in enumerate(lengths):
        for t in range(T - 1):
            r = offs[b] + t
            _close(te[r] if root_last else te[r + 1].T, ce[r])


def test_empty_and_length_one():
    tr = Tree(np.array([[0.5, -1.0]]), np.zeros((2, 2)), [-1], lengths=[0, 1, 0])
    _close(tr.log_partition(), [0.0, np.logaddexp(0.5, -1.0), 0.0])
    np.testing.assert_array_equal(tr.argmax(), [0])
    _close(tr.max(), [0.0, 0.5, 0.0])
    kb = tr.kbest(3)
    np.testing.assert_array_equal(kb.scores, [[0.0, -np.inf, -np.inf], [0.5, -1.0, -np.inf],
                                              [0.0, -np.inf, -np.inf]])
    np.testing.assert_array_equal(kb.labels, [[0], [1], [-1]])
    assert tr.sample(2).shape == (2, 1)
    _close(tr.score([1]), [0.0, -1.0, 0.0])
    m = tr.marginals()
    _close(m.unary[0], np.exp([0.5, -1.0] - np.logaddexp(0.5, -1.0)))
    assert np.all(m.edge == 0)
    e = Tree(np.zeros((0, 2)), np.zeros((2, 2)), np.zeros(0, dtype=int), lengths=[0])
    assert e.log_partition()[0] == 0.0 and e.argmax().shape == (0,)
    assert e.marginals().unary.shape == (0, 2) and e.entropy()[0] == 0.0
    assert e.sample(3).shape == (3, 0) and e.kbest(2).scores.tolist() == [[0.0, -np.inf]]
    e2 = Tree(np.zeros((0, 2)), np.zeros((0, 2, 2)), [], lengths=[])
    assert e2.log_partition().shape == (0,)


def test_infeasible_tree_raises_naming_the_sequence():
    unary = np.zeros((5, 2))
    edge = np.zeros((2, 2))
    edge[0, 1] = edge[1, 0] = -np.inf       # child and parent must agree
    unary[3] = [0.0, -np.inf]               # node 3 must be 0 ...
    unary[4] = [-np.inf, 0.0]               # ... and its parent node 4 must be 1
    tr = Tree(unary, edge, [-1, 0, 1, 1, -1], lengths=[3, 2])
    lz = tr.log_partition()
    assert np.isfinite(lz[0]) and lz[1] == -np.inf and tr.max()[1] == -np.inf
    for call in (tr.argmax, lambda: tr.kbest(2), lambda: tr.sample(3)):
        with pytest.raises(ValueError, match="sequence 1"):
            call()
    m = tr.marginals()
    _no_nan(m.unary, m.edge)
    assert np.all(m.unary[3:] == 0) and np.all(m.edge[3:] == 0)
    _close(m.unary[:3].sum(1), 1.0)
    assert tr.entropy()[1] == -np.inf and np.isfinite(tr.entropy()[0])


@pytest.mark.parametrize("parent, lengths, match", [
    ([1, 2, 0], None, r"sequence 0 \(rows 0:3\) has no root"),
    ([-1, 2, 3, 1], None, r"sequence 0 .* cycle through node [123]"),
    ([-1, 0, 0, -1, 2, 1], [3, 3], r"sequence 1 .* cycle through node [12]"),
    ([-1, 0, -1], None, r"sequence 0 has 2 roots \(nodes 0, 2\)"),
    ([-1, 0, 3], None, r"sequence 0, node 2 \(row 2\) is 3, out of range"),
    ([-1, 0, -1, 0, -2], [2, 3], r"sequence 1, node 2 \(row 4\) is -2, out of range"),
    ([-1, 0, -1, 3, 0], [2, 3], r"sequence 1, node 1 \(row 3\) is 3, out of range"),
    ([-1, 1, 0], None, r"sequence 0, node 1 \(row 1\) is the node itself"),
    ([-1, 0], None, r"shape \(3,\)"),
    ([-1.0, 0.0, 0.0], None, "integer"),
])
def test_invalid_parent(parent, lengths, match):
    N = len(parent) if lengths is None else sum(lengths)
    if match.startswith("shape"):
        N = 3
    with pytest.raises(ValueError, match=match):
        Tree(np.zeros((N, 2)), np.zeros((2, 2)), np.asarray(parent), lengths=lengths)


@pytest.mark.parametrize("bad, match", [
    (dict(unary=np.zeros((3, 2)), edge=np.zeros((3, 3))), "edge"),
    (dict(unary=np.zeros((3, 2)), edge=np.zeros((2, 2, 2))), "edge"),
    (dict(unary=np.zeros((3, 2)), edge=np.zeros((2, 2)), lengths=[1, 1]), "sums to 2"),
    (dict(unary=np.full((3, 2), np.nan), edge=np.zeros((2, 2))), "NaN"),
    (dict(unary=np.zeros((3, 2)), edge=np.full((2, 2), np.inf)), r"\+inf"),
    (dict(unary=np.zeros((3, 2)), edge=np.zeros((2, 2)), root_score=np.zeros(3)), "root_score"),
    (dict(unary=np.zeros(3), edge=np.zeros((2, 2))), "unary"),
])
def test_bad_input(bad, match):
    args = dict(bad)
    with pytest.raises(ValueError, match=match):
        Tree(args.pop("unary"), args.pop("edge"), np.array([-1, 0, 0]), **args)


def test_bad_method_arguments():
    tr = Tree(np.zeros((3, 2)), np.zeros((2, 2)), [-1, 0, 0])
    with pytest.raises(ValueError, match="k"):
        tr.kbest(0)
    with pytest.raises(ValueError, match="labels"):
        tr.score([0, 1])
    with pytest.raises(ValueError, match="allowed"):
        tr.constrain(np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="edge"):
        tr.marginals(edge="bogus")
    with pytest.raises(ValueError, match="n"):
        tr.sample(0)


def test_order_and_roots():
    tr = Tree(np.zeros((6, 2)), np.zeros((2, 2)), [2, 2, -1, 1, -1, 0], lengths=[4, 2])
    np.testing.assert_array_equal(tr.roots, [2, 4])
    order = tr.order
    assert order[0] == 2 and order[4] == 4
    pos = np.empty(6, int)
    pos[order] = np.arange(6)
    gpar = np.array([2, 2, -1, 1, -1, 4])
    assert all(pos[gpar[n]] < pos[n] for n in range(6) if gpar[n] >= 0)


@pytest.mark.parametrize("node_order", ["root_last", "shuffled"])
def test_stability_deep_chain_shaped_tree(node_order):
    rng = np.random.default_rng(0)
    T, K = 100_000, 5
    unary = rng.uniform(-50, 50, size=(T, K))
    trans = rng.uniform(-50, 50, size=(K, K))
    trans[1, 3] = -np.inf
    # chain y_0 - y_1 - ... with y_t the child of y_t+1; optionally relabel the nodes at random
    par = np.append(np.arange(1, T), -1)
    perm = np.arange(T) if node_order == "root_last" else rng.permutation(T)
    inv = np.empty(T, int)
    inv[perm] = np.arange(T)   # node t of the chain sits at row inv[t]
    parent = np.full(T, -1)
    parent[inv[:-1]] = inv[par[:-1]]
    tr = Tree(unary[perm], trans, parent)
    lz = tr.log_partition()
    assert np.isfinite(lz).all()
    chain = LinearChain(unary, trans)
    _close(lz, chain.log_partition())
    _close(tr.max(), chain.max())
    m = tr.marginals(edge="sum")
    assert np.isfinite(m.unary).all()
    np.testing.assert_allclose(m.unary.sum(1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(m.edge.sum(), T - 1, rtol=1e-9)
    np.testing.assert_array_equal(tr.argmax(), chain.argmax()[perm])


def test_kbest_larger_tree_consistent():
    rng = np.random.default_rng(2)
    lengths = [1000, 300]
    K, k = 10, 10
    parent = np.concatenate([random_parents(rng, T) for T in lengths])
    unary = rng.normal(size=(sum(lengths), K))
    edge = rng.normal(size=(sum(lengths), K, K))
    tr = Tree(unary, edge, parent, lengths=lengths)
    kb = tr.kbest(k)
    assert np.all(np.diff(kb.scores, axis=1) <= 0)
    _close(kb.scores[:, 0], tr.max())
    offs = tr.offsets
    for r in range(k):  # every labeling has its score and all are distinct
        _close(tr.score(kb.labels[r]), kb.scores[:, r])
    for b in range(2):
        assert len({kb.labels[r, offs[b]:offs[b + 1]].tobytes() for r in range(k)}) == k


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("seed", [8, 9, 10])
def test_large_scale_potentials_match_reference(shared, seed):
    # linear-space sums that underflow must fall back to exact log-space arithmetic
    rng = np.random.default_rng(seed)
    lengths = [9, 6]
    K = 3
    parent = np.concatenate([random_parents(rng, T) for T in lengths])
    unary = rng.uniform(-800, 800, size=(15, K))
    edge = rng.uniform(-900, 900, size=(K, K) if shared else (15, K, K))
    edge[edge < -700] = -np.inf
    tr = Tree(unary, edge, parent, lengths=lengths)
    r_lz, r_mx, r_um, r_em = ref.tree_reference(unary, edge, parent, np.zeros(K), tr.offsets)
    _close(tr.log_partition(), r_lz)
    _close(tr.max(), r_mx)
    m = tr.marginals()
    np.testing.assert_allclose(m.unary, r_um, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.edge, r_em, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shared", [False, True])
def test_extreme_scales_match_oracle(shared):
    # shifted linear-space sums that underflow (1e-350) must be recomputed exactly in log space
    unary = np.array([[0.0, -800.0], [0.0, 0.0], [-900.0, 0.0], [0.0, -750.0]])
    trans = np.array([[-800.0, 0.0], [0.0, -1000.0]])
    edge = trans if shared else np.broadcast_to(trans, (4, 2, 2)).copy()
    parent = np.array([1, -1, 1, 2])
    tr = Tree(unary, edge, parent)
    o = tree_oracle(unary, edge, parent)
    _close(tr.log_partition()[0], o["log_z"])
    m = tr.marginals()
    np.testing.assert_allclose(m.unary, o["unary"], rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(m.edge, o["edge"], rtol=1e-10, atol=1e-300)
    _close(tr.entropy()[0], o["entropy"])
