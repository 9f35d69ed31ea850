"""LinearChain against the brute-force oracle, known answers, stability and the NumPy twin."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats

from structlearn.engine.kernels import _reference_chain as ref
from structlearn.engine.structures import LinearChain
from tests.oracles.chain import chain_oracle
from tests.strategies import lengths_list, log_potentials

RTOL = 1e-10


@st.composite
def chain_batch(draw, max_k=3, max_len=5, tv=None, p_neg_inf=0.1):
    K = draw(st.integers(1, max_k))
    lengths = draw(lengths_list(max_len=max_len))
    N = sum(lengths)
    time_varying = draw(st.booleans()) if tv is None else tv
    unary = draw(log_potentials((N, K), p_neg_inf=p_neg_inf))
    trans = draw(log_potentials((N, K, K) if time_varying else (K, K), p_neg_inf=p_neg_inf))
    start = draw(log_potentials((K,), p_neg_inf=p_neg_inf / 2))
    end = draw(log_potentials((K,), p_neg_inf=p_neg_inf / 2))
    return unary, trans, start, end, np.array(lengths)


def _per_seq(unary, trans, lengths):
    off = np.concatenate([[0], np.cumsum(lengths)])
    for b in range(len(lengths)):
        sl = slice(off[b], off[b + 1])
        yield b, sl, unary[sl], (trans if trans.ndim == 2 else trans[sl])


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12)


@given(chain_batch())
def test_oracle_log_z_max_marginals_entropy(inst):
    unary, trans, start, end, lengths = inst
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    log_z, mx, ent = c.log_partition(), c.max(), c.entropy()
    marg = c.marginals()
    msum = c.marginals(edge="sum")
    for b, sl, u, tr in _per_seq(unary, trans, lengths):
        o = chain_oracle(u, tr, start, end)
        _close(log_z[b], o["log_z"])
        _close(mx[b], o["max"] if lengths[b] else 0.0)
        _close(marg.unary[sl], o["unary"])
        _close(marg.edge[sl], o["edge"])
        _close(msum.edge[b], o["edge"].sum(axis=0))
        if o["log_z"] != -math.inf:
            _close(ent[b], o["entropy"])
        else:
            assert ent[b] == -np.inf
    assert not np.isnan(marg.unary).any() and not np.isnan(marg.edge).any()


@given(chain_batch(), st.integers(1, 6))
def test_oracle_argmax_kbest_score(inst, k):
    unary, trans, start, end, lengths = inst
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    log_z = c.log_partition()
    if np.any(log_z == -np.inf):
        with pytest.raises(ValueError, match="sequence"):
            c.argmax()
        with pytest.raises(ValueError, match="sequence"):
            c.kbest(k)
        return
    y = c.argmax()
    s = c.score(y)
    _close(s, c.max())
    kb = c.kbest(k)
    assert kb.labels.shape == (k, unary.shape[0]) and kb.scores.shape == (len(lengths), k)
    for b, sl, u, tr in _per_seq(unary, trans, lengths):
        o = chain_oracle(u, tr, start, end)
        want = [sc for sc, _ in o["ranked"][:k]]
        got = kb.scores[b][: len(want)]
        _close(got, want)
        assert np.all(kb.scores[b][len(want):] == -np.inf)
        for r in range(len(want)):  # each returned labeling has the returned score
            lab = tuple(kb.labels[r, sl])
            sc = dict((yy, ss) for ss, yy in o["ranked"])[lab] if lengths[b] else 0.0
            _close(sc, kb.scores[b, r])
        # all labelings distinct
        labs = {tuple(kb.labels[r, sl]) for r in range(len(want))}
        assert len(labs) == len(want) or lengths[b] == 0


@given(chain_batch(p_neg_inf=0.0))
def test_score_matches_oracle_on_random_labels(inst):
    unary, trans, start, end, lengths = inst
    K = unary.shape[1]
    rng = np.random.default_rng(0)
    y = rng.integers(0, K, size=unary.shape[0])
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    got = c.score(y)
    for b, sl, u, tr in _per_seq(unary, trans, lengths):
        o = chain_oracle(u, tr, start, end)
        want = o["log_z"] + math.log(o["probs"][tuple(y[sl])]) if lengths[b] else 0.0
        _close(got[b], want)


@given(chain_batch())
def test_constrained_matches_oracle(inst):
    unary, trans, start, end, lengths = inst
    rng = np.random.default_rng(1)
    allowed = rng.random(unary.shape) < 0.7
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end).constrain(allowed)
    masked = np.where(allowed, unary, -np.inf)
    for b, sl, u, tr in _per_seq(masked, trans, lengths):
        o = chain_oracle(u, tr, start, end)
        _close(c.log_partition()[b], o["log_z"])
        _close(c.marginals().unary[sl], o["unary"])


@given(chain_batch())
def test_packed_batch_equals_one_by_one(inst):
    unary, trans, start, end, lengths = inst
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    lz, m = c.log_partition(), c.marginals()
    for b, sl, u, tr in _per_seq(unary, trans, lengths):
        one = LinearChain(u, tr, start=start, end=end)
        _close(one.log_partition()[0], lz[b])
        _close(one.marginals().unary, m.unary[sl])


@given(chain_batch(p_neg_inf=0.15))
def test_reference_twin_agrees(inst):
    unary, trans, start, end, lengths = inst
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    off = c.offsets
    r_lz, r_um = ref.log_partition_and_marginals(unary, trans, start, end, off)
    _close(c.log_partition(), r_lz)
    _close(c.marginals().unary, r_um)
    _close(c.max(), ref.viterbi_score(unary, trans, start, end, off))


def test_sample_distribution_chi_square():
    rng = np.random.default_rng(3)
    K, T = 3, 3
    unary = rng.normal(size=(T, K))
    trans = rng.normal(size=(K, K))
    trans[0, 1] = -np.inf
    start, end = rng.normal(size=K), rng.normal(size=K)
    c = LinearChain(unary, trans, start=start, end=end)
    n = 20000
    samples = c.sample(n, random_state=7)
    o = chain_oracle(unary, trans, start, end)
    keys = [y for y, p in o["probs"].items() if p > 0]
    index = {y: i for i, y in enumerate(keys)}
    counts = np.zeros(len(keys))
    for row in samples:
        counts[index[tuple(row)]] += 1  # KeyError would mean a forbidden labeling was sampled
    expected = np.array([o["probs"][y] for y in keys]) * n
    assert stats.chisquare(counts, expected).pvalue > 1e-3
    np.testing.assert_array_equal(samples, c.sample(n, random_state=7))


def test_known_answer_hmm():
    start = np.log([0.6, 0.4])
    A = np.log([[0.7, 0.3], [0.4, 0.6]])
    E = np.log([[0.1, 0.4, 0.5], [0.6, 0.3, 0.1]])
    c = LinearChain(E[:, [0, 1, 2]].T, A, start=start)
    np.testing.assert_array_equal(c.argmax(), [1, 0, 0])
    assert abs(math.exp(c.max()[0]) - 0.01344) < 1e-12
    np.testing.assert_allclose(c.marginals().unary[0], [0.2317030, 0.7682970], atol=1e-7)
    np.testing.assert_allclose(c.log_partition()[0], -3.3928721, atol=1e-7)


def test_known_answer_forbidden_transition():
    unary = np.eye(3)
    trans = np.zeros((3, 3))
    trans[0, 2] = -np.inf
    trans[1, 1] = -np.inf
    c = LinearChain(unary, trans)
    np.testing.assert_array_equal(c.argmax(), [0, 1, 2])
    allowed = np.ones((3, 3), bool)
    allowed[0] = [False, True, False]
    allowed[1] = [False, True, False]
    cc = c.constrain(allowed)
    assert cc.log_partition()[0] == -np.inf
    with pytest.raises(ValueError, match="sequence 0"):
        cc.argmax()
    with pytest.raises(ValueError, match="sequence 0"):
        cc.sample(2)
    m = cc.marginals()
    assert not np.isnan(m.unary).any() and np.all(m.unary == 0)


def test_empty_and_length_one():
    c = LinearChain(np.array([[0.5, -1.0]]), np.zeros((2, 2)), lengths=[0, 1, 0])
    np.testing.assert_allclose(c.log_partition(), [0.0, np.logaddexp(0.5, -1.0), 0.0])
    np.testing.assert_array_equal(c.argmax(), [0])
    kb = c.kbest(3)
    np.testing.assert_allclose(kb.scores[1], [0.5, -1.0, -np.inf])
    np.testing.assert_allclose(kb.scores[0], [0.0, -np.inf, -np.inf])
    assert c.sample(2).shape == (2, 1)
    e = LinearChain(np.zeros((0, 2)), np.zeros((2, 2)), lengths=[0])
    assert e.log_partition()[0] == 0.0 and e.argmax().shape == (0,)


def test_stability_long_chain_large_potentials():
    rng = np.random.default_rng(0)
    T, K = 1_000_000, 10
    unary = rng.uniform(-100, 100, size=(T, K))
    trans = rng.uniform(-100, 100, size=(K, K))
    c = LinearChain(unary, trans)
    lz = c.log_partition()
    assert np.isfinite(lz).all()
    assert lz[0] >= c.max()[0] - 1e-6 * abs(c.max()[0])
    m = c.marginals(edge="sum")
    assert np.isfinite(m.unary).all()
    np.testing.assert_allclose(m.unary.sum(1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(m.edge.sum(), T - 1, rtol=1e-9)


def test_extreme_scales_match_reference():
    # columns whose linear-space sums underflow must fall back to exact log-space arithmetic
    unary = np.array([[0.0, -800.0], [0.0, 0.0], [-900.0, 0.0]])
    trans = np.array([[-800.0, 0.0], [0.0, -1000.0]])
    c = LinearChain(unary, trans)
    off = c.offsets
    r_lz, r_um = ref.log_partition_and_marginals(unary, trans, np.zeros(2), np.zeros(2), off)
    _close(c.log_partition(), r_lz)
    _close(c.marginals().unary, r_um)


@pytest.mark.parametrize("bad, match", [
    (dict(unary=np.zeros((3, 2)), transition=np.zeros((3, 3))), "transition"),
    (dict(unary=np.zeros((3, 2)), transition=np.zeros((2, 2)), lengths=[1, 1]), "sums to 2"),
    (dict(unary=np.full((3, 2), np.nan), transition=np.zeros((2, 2))), "NaN"),
    (dict(unary=np.zeros((3, 2)), transition=np.full((2, 2), np.inf)), r"\+inf"),
    (dict(unary=np.zeros((3, 2)), transition=np.zeros((2, 2)), start=np.zeros(3)), "start"),
    (dict(unary=np.zeros(3), transition=np.zeros((2, 2))), "unary"),
    (dict(unary=np.zeros((3, 2)), transition=np.zeros((2, 2)), lengths=[4, -1]), "non-negative"),
])
def test_bad_input(bad, match):
    args = dict(bad)
    with pytest.raises(ValueError, match=match):
        LinearChain(args.pop("unary"), args.pop("transition"), **args)


def test_bad_method_arguments():
    c = LinearChain(np.zeros((3, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="k"):
        c.kbest(0)
    with pytest.raises(ValueError, match="labels"):
        c.score([0, 1, 2])
    with pytest.raises(ValueError, match="allowed"):
        c.constrain(np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="edge"):
        c.marginals(edge="bogus")


@given(chain_batch())
def test_forward_backward_recover_log_z(inst):
    unary, trans, start, end, lengths = inst
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    a, be, lz = c.forward(), c.backward(), c.log_partition()
    off = c.offsets
    for b in range(len(lengths)):
        for r in range(off[b], off[b + 1]):
            v = a[r] + be[r]
            m = v.max()
            got = -np.inf if m == -np.inf else m + np.log(np.exp(v - m).sum())
            _close(got, lz[b])


@given(chain_batch())
def test_edge_total_equals_sum_of_sums(inst):
    unary, trans, start, end, lengths = inst
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    _close(c.marginals(edge="total").edge, c.marginals(edge="sum").edge.sum(axis=0))


@st.composite
def spread_batch(draw):
    """Small batches whose potentials spread far beyond linear space on some tokens (entries -600 or
    -2000 next to O(1) ones), with -inf entries and transitions near the linear-space limit: the
    scaled recursion must switch those tokens to log space and back."""
    K = draw(st.integers(1, 3))
    lengths = draw(lengths_list(max_len=5))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    N = sum(lengths)

    def pot(shape, p_big=0.25, p_inf=0.1):
        x = rng.uniform(-3, 3, size=shape)
        big = rng.random(shape) < p_big
        x[big] = rng.choice([-600.0, -2000.0, 500.0], size=int(big.sum()))
        x[rng.random(shape) < p_inf] = -np.inf
        return x
    trans = rng.uniform(-3, 3, size=(K, K))
    trans[rng.random((K, K)) < 0.2] = -200.0  # still >= LIN_MIN after the shift
    trans[rng.random((K, K)) < 0.15] = -np.inf
    return pot((N, K)), trans, pot((K,), p_inf=0.05), pot((K,), p_inf=0.05), np.array(lengths)


@given(spread_batch())
def test_oracle_with_spread_potentials(inst):
    unary, trans, start, end, lengths = inst
    c = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    log_z, marg = c.log_partition(), c.marginals()
    total = c.marginals(edge="total").edge
    for b, sl, u, tr in _per_seq(unary, trans, lengths):
        o = chain_oracle(u, tr, start, end)
        _close(log_z[b], o["log_z"])
        _close(marg.unary[sl], o["unary"])
        _close(marg.edge[sl], o["edge"])
    _close(total, marg.edge.sum(axis=0))
    assert not np.isnan(marg.unary).any() and not np.isnan(marg.edge).any()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scaled_recursion_equals_log_space_on_long_spread_chains(seed):
    # stationary chains run the scaled recursion (log space only on the tokens that need it); the same
    # chain with its transition repeated per row runs the log-space one: they must agree to rounding,
    # with tokens thousands of nats apart, -inf potentials and a left-right (fixed-zero) topology
    rng = np.random.default_rng(seed)
    K, lengths = 5, [700, 1, 300, 2000]
    N = sum(lengths)
    unary = rng.normal(0, 4, size=(N, K))
    rows = rng.random(N) < 0.05
    unary[rows, rng.integers(0, K, rows.sum())] -= rng.choice([400.0, 1500.0, 5000.0], size=rows.sum())
    unary[rng.random((N, K)) < 0.05] = -np.inf
    unary[np.arange(N), rng.integers(0, K, N)] = rng.normal(0, 1, N)  # every token keeps a label
    trans = np.log(rng.dirichlet(np.ones(K), size=K))
    trans[np.tril_indices(K, -2)] = -np.inf  # at most one step back
    trans[0, K - 1] = trans[0, K - 1] - 150.0  # a weight of ~1e-66
    start = np.log(rng.dirichlet(np.ones(K)))
    start[1] = -800.0
    end = np.zeros(K)
    end[2] = -np.inf
    scaled = LinearChain(unary, trans, lengths=lengths, start=start, end=end)
    logsp = LinearChain(unary, np.broadcast_to(trans, (N, K, K)), lengths=lengths, start=start, end=end)
    assert scaled.stationary and not logsp.stationary
    _close(scaled.log_partition(), logsp.log_partition())
    for edge in ("full", "sum", "total"):
        a, b = scaled.marginals(edge=edge), logsp.marginals(edge=edge)
        _close(a.unary, b.unary)
        _close(a.edge, b.edge)
    np.testing.assert_allclose(scaled.marginals().unary.sum(axis=1), 1.0, rtol=1e-12)
    off = scaled.offsets
    r_lz, r_um = ref.log_partition_and_marginals(unary, trans, start, end, off)
    _close(scaled.log_partition(), r_lz)
    _close(scaled.marginals(edge="none").unary, r_um)
