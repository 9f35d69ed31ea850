"""Sparse-transition chain kernels (CSR) against the dense LinearChain on random sparse patterns."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.engine.kernels import chain_sparse as ks
from structlearn.engine.semirings import LOG, MAX
from structlearn.engine.structures import LinearChain
from tests.strategies import lengths_list


def _instance(seed, K, lengths, density, scale=3.0, p_neg_inf=0.1):
    """Random unary/start/end with -inf entries and a random CSR pattern whose stored values include -inf."""
    rng = np.random.default_rng(seed)
    N = int(sum(lengths))
    unary = rng.uniform(-scale, scale, size=(N, K))
    unary[rng.random((N, K)) < p_neg_inf] = -np.inf
    start = rng.uniform(-scale, scale, size=K)
    end = rng.uniform(-scale, scale, size=K)
    start[rng.random(K) < p_neg_inf] = -np.inf
    end[rng.random(K) < p_neg_inf] = -np.inf
    mask = rng.random((K, K)) < density
    vals = rng.uniform(-scale, scale, size=(K, K))
    vals[rng.random((K, K)) < p_neg_inf] = -np.inf  # stored -inf entries
    dense = np.where(mask, vals, -np.inf)
    indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(mask)[1].astype(np.int64)
    logv = vals[mask]
    # shuffle the order of entries within each row (the kernels must not rely on sorted columns)
    for i in range(K):
        p = rng.permutation(np.arange(indptr[i], indptr[i + 1]))
        indices[indptr[i]:indptr[i + 1]] = indices[p]
        logv[indptr[i]:indptr[i + 1]] = logv[p]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return unary, dense, (indptr, indices, logv), start, end, offsets, mask


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert np.array_equal(np.isneginf(a), np.isneginf(b))
    np.testing.assert_allclose(np.where(np.isfinite(a), a, 0), np.where(np.isfinite(b), b, 0),
                               rtol=1e-10, atol=1e-12)


@settings(max_examples=40)
@given(seed=st.integers(0, 2 ** 31 - 1), K=st.integers(1, 7), lengths=lengths_list(max_batch=4, max_len=6),
       density=st.sampled_from([0.15, 0.4, 1.0]))
def test_sparse_equals_dense(seed, K, lengths, density):
    unary, dense, csr, start, end, offsets, mask = _instance(seed, K, lengths, density)
    lc = LinearChain(unary, dense, lengths=lengths, start=start, end=end)
    indptr, indices, logv = csr
    # log Z and forward scores
    ahat, inc, lz = ks.sparse_chain_forward(unary, indptr, indices, logv, start, end, offsets, LOG)
    _close(lz, lc.log_partition())
    # token and edge marginals (full, per sequence, total)
    full = lc.marginals("full")
    rows, cols = np.nonzero(mask)
    for mode in (0, 1, 2, 3):
        lz2, um, em = ks.sparse_chain_marginals(unary, indptr, indices, logv, start, end, offsets, mode, 2)
        _close(lz2, lc.log_partition())
        np.testing.assert_allclose(um, full.unary, rtol=1e-10, atol=1e-13)
        pos = np.repeat(np.arange(K), np.diff(indptr))  # source of every CSR entry
        if mode == 1:
            np.testing.assert_allclose(em, full.edge[:, pos, indices], rtol=1e-10, atol=1e-13)
        elif mode == 2:
            np.testing.assert_allclose(em, lc.marginals("sum").edge[:, pos, indices], rtol=1e-10,
                                       atol=1e-13)
        elif mode == 3:
            np.testing.assert_allclose(em[0], lc.marginals("total").edge[pos, indices], rtol=1e-10,
                                       atol=1e-13)
    # the dense edge marginals vanish outside the pattern
    if full.edge.size:
        assert np.all(full.edge[:, ~mask] == 0)
    # backward scores
    bhat, incb = ks.sparse_chain_backward(unary, indptr, indices, logv, end, offsets)
    beta = lc.backward()
    for a, b in zip(offsets[:-1], offsets[1:]):
        if b > a:
            cum = np.cumsum(incb[a:b][::-1])[::-1]
            with np.errstate(invalid="ignore"):
                got = bhat[a:b] + cum[:, None]
            got[np.isnan(got)] = -np.inf
            _close(got, beta[a:b])
    # Viterbi
    best, labels = ks.sparse_chain_viterbi(unary, indptr, indices, logv, start, end, offsets)
    _close(best, lc.max())
    ahat_m, inc_m, best_m = ks.sparse_chain_forward(unary, indptr, indices, logv, start, end, offsets, MAX)
    _close(best_m, lc.max())
    assert np.all((labels >= 0) == np.repeat(np.isfinite(best), np.diff(offsets)))
    scores = lc.score(np.maximum(labels, 0))  # the decoded labeling scores the best score
    feasible = np.isfinite(best)
    np.testing.assert_allclose(scores[feasible], best[feasible], rtol=1e-10)


@settings(max_examples=10)
@given(seed=st.integers(0, 2 ** 31 - 1), scale=st.sampled_from([50.0, 400.0]))
def test_large_potentials_and_long_chain(seed, scale):
    """Potentials far outside the linear range and T = 300 take the exact log-space fallback."""
    unary, dense, csr, start, end, offsets, mask = _instance(seed, 6, [300, 1], 0.4, scale=scale,
                                                             p_neg_inf=0.05)
    lc = LinearChain(unary, dense, lengths=[300, 1], start=start, end=end)
    indptr, indices, logv = csr
    lz, um, em = ks.sparse_chain_marginals(unary, indptr, indices, logv, start, end, offsets, 3, 1)
    _close(lz, lc.log_partition())
    np.testing.assert_allclose(um, lc.marginals("none").unary, rtol=1e-9, atol=1e-12)
    pos = np.repeat(np.arange(6), np.diff(indptr))
    np.testing.assert_allclose(em[0], lc.marginals("total").edge[pos, indices], rtol=1e-9, atol=1e-11)
    assert not np.isnan(um).any() and not np.isnan(em).any()


def test_empty_batch_pattern_and_lengths():
    K = 3
    indptr = np.zeros(K + 1, dtype=np.int64)
    indices = np.zeros(0, dtype=np.int64)
    logv = np.zeros(0)
    unary = np.zeros((2, K))
    offsets = np.array([0, 0, 1, 2], dtype=np.int64)  # lengths 0, 1, 1: no step needs a transition
    lz, um, em = ks.sparse_chain_marginals(unary, indptr, indices, logv, np.zeros(K), np.zeros(K), offsets,
                                           1, 1)
    np.testing.assert_allclose(lz, [0.0, np.log(3), np.log(3)])
    assert em.shape == (2, 0)
    # a length-2 sequence with no stored transition is infeasible: -inf, zero marginals, no NaN
    lz, um, em = ks.sparse_chain_marginals(np.zeros((2, K)), indptr, indices, logv, np.zeros(K),
                                           np.zeros(K), np.array([0, 2], dtype=np.int64), 3, 1)
    assert lz[0] == -np.inf and np.all(um == 0) and not np.isnan(um).any()
    best, labels = ks.sparse_chain_viterbi(np.zeros((2, K)), indptr, indices, logv, np.zeros(K),
                                           np.zeros(K), np.array([0, 2], dtype=np.int64))
    assert best[0] == -np.inf and np.all(labels == -1)


def test_structure_edge_modes_match_linear_chain():
    """SparseChain.marginals takes LinearChain's edge modes ("sum": per sequence) and names a bad one."""
    import pytest

    from structlearn.engine.structures import SparseChain
    lengths = [4, 3, 5]
    unary, dense, csr, start, end, offsets, mask = _instance(3, 5, lengths, 0.5)
    sc = SparseChain(unary, csr, start, end, np.array(lengths))
    lc = LinearChain(unary, dense, lengths=lengths, start=start, end=end)
    indptr, indices, _ = csr
    rows = np.repeat(np.arange(5), np.diff(indptr))
    per_seq = lc.marginals("sum").edge[:, rows, indices]
    _close(sc.marginals("sum").edge, per_seq)
    _close(sc.marginals("total").edge, per_seq.sum(axis=0))
    with pytest.raises(ValueError, match="`edge` must be one of"):
        sc.marginals("per-sequence")
