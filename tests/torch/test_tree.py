"""structlearn.torch.Tree equals the NumPy engine (structlearn.engine.structures.Tree)."""
import numpy as np
import pytest
import torch

from structlearn.engine.structures import Tree as EngineTree
from structlearn.torch import Tree

from tests.torch._helpers import check_marginals, close, leaves, pack, ragged, randn


def random_parents(rng, L, T):
    par = np.zeros((len(L), T), dtype=np.int64)
    for b, n in enumerate(L):
        order = rng.permutation(int(n))
        for i, node in enumerate(order):
            par[b, node] = -1 if i == 0 else order[rng.integers(i)]
    return torch.from_numpy(par)


def problem(seed, B=5, T=8, K=3, per_node=False):
    rng = np.random.default_rng(seed)
    L = ragged(rng, B, T)
    par = random_parents(rng, L.numpy(), T)
    u, rs = randn(rng, B, T, K), randn(rng, K)
    edge = randn(rng, B, T, K, K) if per_node else randn(rng, K, K)
    eng = EngineTree(pack(u, L), pack(edge, L) if per_node else edge.numpy(), pack(par, L),
                     lengths=L.numpy(), root_score=rs.numpy())
    return u, edge, par, rs, L, eng


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("per_node", [False, True])
def test_every_operation_equals_the_engine(backend, per_node):
    for seed in range(3):
        u, edge, par, rs, L, eng = problem(seed, per_node=per_node)
        c = Tree(u, edge, par, lengths=L, root_score=rs, backend=backend)
        check_marginals(c, eng, L)
        close(c.entropy(), eng.entropy())
        y = c.argmax()
        assert np.array_equal(pack(y, L), eng.argmax())
        close(c.max(), eng.max())
        close(c.log_prob(y), eng.score(pack(y, L)) - eng.log_partition())
        kb, ekb = c.kbest(2), eng.kbest(2)
        close(kb.scores, ekb.scores.T)
        assert np.array_equal(np.stack([pack(s, L) for s in c.sample(2, generator=3)]),
                              eng.sample(2, random_state=3))


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_gradients_are_the_marginals_and_gradcheck(backend):
    u, edge, par, rs, L, eng = problem(4)
    u, edge, rs = leaves(u, edge, rs)
    gu, ge, gr = torch.autograd.grad(Tree(u, edge, par, lengths=L, root_score=rs,
                                          backend=backend).log_partition().sum(), [u, edge, rs])
    m = eng.marginals(edge="sum")
    close(pack(gu, L), m.unary)
    close(ge, m.edge.sum(0))
    roots = eng.roots[eng.roots >= 0]
    close(gr, m.unary[roots].sum(0))
    u, edge, par, rs, L, _ = problem(5, B=2, T=4, K=2)
    args = leaves(u, edge, rs)
    for what in ("log_partition", "entropy"):
        assert torch.autograd.gradcheck(
            lambda a, e, r: getattr(Tree(a, e, par, lengths=L, root_score=r, backend=backend), what)(), args)


def test_bad_parents_raise_naming_the_tree():
    u = torch.zeros(2, 3, 2, dtype=torch.float64)
    e = torch.zeros(2, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="sequence 1.*cycle|sequence 1.*root"):
        Tree(u, e, torch.tensor([[-1, 0, 0], [1, 2, 0]]))
    with pytest.raises(ValueError, match="2 roots"):
        Tree(u, e, torch.tensor([[-1, -1, 0], [-1, 0, 0]]))


def test_deep_tree_is_exact():
    rng = np.random.default_rng(0)
    T = 300
    par = torch.arange(-1, T - 1)[None]            # a path: height 299
    u, e = randn(rng, 1, T, 3), randn(rng, 3, 3)
    eng = EngineTree(u[0].numpy(), e.numpy(), par[0].numpy())
    close(Tree(u, e, par, backend="torch").log_partition(), eng.log_partition(), rtol=1e-12)
