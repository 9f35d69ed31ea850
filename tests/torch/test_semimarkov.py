"""structlearn.torch.SemiMarkov equals the NumPy engine (structlearn.engine.structures.SemiMarkov)."""
import numpy as np
import pytest
import torch

from structlearn.engine.structures import SemiMarkov as EngineSemiMarkov
from structlearn.torch import SemiMarkov

from tests.torch._helpers import check_marginals, close, leaves, pack, ragged, randn


def problem(seed, B=4, T=7, K=3, D=3, with_segment=True, allow_same_label=True):
    rng = np.random.default_rng(seed)
    L = ragged(rng, B, T)
    u, du, tr = randn(rng, B, T, K), randn(rng, D, K), randn(rng, K, K)
    st, en = randn(rng, K), randn(rng, K)
    seg = randn(rng, B, T, D, K) if with_segment else None
    eng = EngineSemiMarkov(pack(u, L), du.numpy(), tr.numpy(), lengths=L.numpy(), start=st.numpy(),
                           end=en.numpy(), segment=None if seg is None else pack(seg, L),
                           allow_same_label=allow_same_label)
    return (u, du, tr, st, en, seg), L, eng


def build(p, L, backend, allow_same_label=True):
    u, du, tr, st, en, seg = p
    return SemiMarkov(u, du, tr, lengths=L, start=st, end=en, segment=seg,
                      allow_same_label=allow_same_label, backend=backend)


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("allow_same_label", [True, False])
@pytest.mark.parametrize("with_segment", [True, False])
def test_every_operation_equals_the_engine(backend, allow_same_label, with_segment):
    for seed in range(2):
        p, L, eng = problem(seed, with_segment=with_segment, allow_same_label=allow_same_label)
        c = build(p, L, backend, allow_same_label)
        check_marginals(c, eng, L)
        close(pack(c.segment_marginals(), L), eng.segment_marginals())
        close(c.entropy(), eng.entropy())
        assert np.array_equal(pack(c.argmax(), L), eng.argmax())
        segs = eng.argmax_segments()
        assert all(np.array_equal(a, b) for a, b in zip(c.argmax_segments(), segs))
        close(c.max(), eng.max())
        close(c.score(segs), eng.score(segs))
        close(c.log_prob(segs), eng.score(segs) - eng.log_partition())
        kb, ekb = c.kbest(3), eng.kbest(3)
        close(kb.scores, ekb.scores.T)
        assert np.array_equal(np.stack([pack(kb.labels[r], L) for r in range(3)]), ekb.labels)
        assert np.array_equal(np.stack([pack(s, L) for s in c.sample(3, generator=5)]),
                              eng.sample(3, random_state=5))


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_gradients_are_the_marginals_and_gradcheck(backend):
    p, L, eng = problem(3)
    u, du, tr, st, en, seg = leaves(*p)
    lz = build((u, du, tr, st, en, seg), L, backend).log_partition()
    gu, gd, gt, gseg = torch.autograd.grad(lz.sum(), [u, du, tr, seg])
    close(pack(gu, L), eng.marginals().unary)
    close(gt, eng.marginals(edge="total").edge)
    dm = eng.duration_marginals()
    close(gd, sum(dm).sum(0))
    close(pack(gseg, L), eng.segment_marginals())
    small, L2, _ = problem(4, B=2, T=4, K=2, D=2)
    args = leaves(*small)
    for what in ("log_partition", "entropy"):
        assert torch.autograd.gradcheck(lambda *a: getattr(build(a, L2, backend), what)(), args)


def test_score_refuses_bad_segments_and_scores_long_ones_minus_inf():
    p, L, _ = problem(5, B=1, T=5, D=2)
    c = build(p, torch.tensor([5]), "numba")
    with pytest.raises(ValueError, match="must tile"):
        c.score([[(0, 1, 0), (3, 4, 1)]])
    with pytest.raises(ValueError, match="labels must lie"):
        c.score([[(0, 4, 7)]])
    assert float(c.score([[(0, 2, 0), (3, 4, 1)]])) == float("-inf")     # duration 3 > D = 2


def test_batched_equals_one_by_one():
    p, L, _ = problem(6, B=5, T=8)
    u, du, tr, st, en, seg = p
    c = build(p, L, "numba")
    lz = c.log_partition()
    for b in range(5):
        n = int(L[b])
        one = SemiMarkov(u[b:b + 1, :n], du, tr, start=st, end=en, segment=seg[b:b + 1, :n])
        close(lz[b:b + 1], one.log_partition())
