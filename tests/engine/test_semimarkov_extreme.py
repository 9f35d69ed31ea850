"""SemiMarkov posteriors at extreme unary magnitudes: a constant added to every label of a token changes no
posterior, however large (1e8 … 3e13), and one label far below the others (an outlier in a Gaussian's tail,
log-density ~ -1e16) leaves rows that sum to one. The linear-space passes lost eps·|unary| in their block
prefix sums and gave rows summing to 1.2, 0.002 or NaN."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.engine.structures import SemiMarkov


def _instance(seed, K, D, lengths):
    rng = np.random.default_rng(seed)
    N = int(sum(lengths))
    # multiples of 2^-8, so that adding a multiple of 2^20 (below 2^45) is exact in float64
    base = np.round(rng.uniform(-3, 3, size=(N, K)) * 256) / 256
    dur = rng.uniform(-2, 0, size=(D, K))
    trans = rng.uniform(-2, 0, size=(K, K))
    return base, dur, trans, rng


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), K=st.integers(2, 3), D=st.integers(1, 4),
       lengths=st.lists(st.integers(1, 7), min_size=1, max_size=3), scale=st.sampled_from([1e8, 1e11, 3e13]),
       same_label=st.booleans())
def test_a_per_token_constant_of_any_size_changes_no_posterior(seed, K, D, lengths, scale, same_label):
    base, dur, trans, rng = _instance(seed, K, D, lengths)
    step = 2.0 ** 20
    shift = np.round(rng.uniform(-1, 1, size=(base.shape[0], 1)) * scale / step) * step
    kw = dict(lengths=lengths, allow_same_label=same_label)
    ref = SemiMarkov(base, dur, trans, **kw)
    if not np.all(np.isfinite(ref.log_partition())):
        return  # allow_same_label=False with K = 2 and D = 1 has no segmentation of some lengths
    big = SemiMarkov(base + shift, dur, trans, **kw)
    np.testing.assert_allclose(big.marginals().unary, ref.marginals().unary, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(big.marginals().edge, ref.marginals().edge, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(big.segment_marginals(), ref.segment_marginals(), rtol=1e-9, atol=1e-12)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), K=st.integers(2, 3), D=st.integers(2, 4),
       T=st.integers(3, 12), depth=st.sampled_from([-4e15, -4e17, -4e19, -4e23]),
       offset=st.sampled_from([0.0, -1e10, -4e19]))
def test_one_label_far_below_the_others_leaves_rows_that_sum_to_one(seed, K, D, T, depth, offset):
    base, dur, trans, rng = _instance(seed, K, D, [T])
    u = base + offset
    row = int(rng.integers(T))
    u[row, int(rng.integers(K))] += depth
    sm = SemiMarkov(u, dur, trans, lengths=[T], allow_same_label=False)
    if not np.isfinite(sm.log_partition()[0]):
        return
    token = sm.marginals().unary
    assert np.all(np.isfinite(token))
    np.testing.assert_allclose(token.sum(axis=1), 1.0, rtol=0, atol=1e-9)
