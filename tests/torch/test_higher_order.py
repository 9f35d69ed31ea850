"""structlearn.torch.HigherOrderChain against brute-force enumeration of every labeling."""
import numpy as np
import pytest
import torch

from tests.oracles._common import labelings, logsumexp

from structlearn.torch import HigherOrderChain

from tests.torch._helpers import close, leaves, randn


def brute(u, tr, t2, st, en, n):
    items = []
    for y in labelings(n, u.shape[1]):
        s = st[y[0]] + en[y[-1]] + sum(u[t, y[t]] for t in range(n))
        s += sum(tr[y[t - 1], y[t]] for t in range(1, n)) + sum(t2[y[t - 2], y[t - 1], y[t]] for t in range(2, n))
        items.append((y, s))
    return items


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_log_partition_argmax_marginals_equal_enumeration(backend):
    rng = np.random.default_rng(0)
    B, T, K = 3, 5, 3
    u, tr, t2, st, en = randn(rng, B, T, K), randn(rng, K, K), randn(rng, K, K, K), randn(rng, K), randn(rng, K)
    L = torch.tensor([5, 3, 1])
    h = HigherOrderChain(u, tr, t2, lengths=L, start=st, end=en, backend=backend)
    lz, y, m = h.log_partition(), h.argmax(), h.marginals()
    ent = h.entropy()
    for b in range(B):
        n = int(L[b])
        items = brute(u[b].numpy(), tr.numpy(), t2.numpy(), st.numpy(), en.numpy(), n)
        z = logsumexp([s for _, s in items])
        close(lz[b], z)
        best = max(items, key=lambda it: it[1])[0]
        assert y[b, :n].tolist() == list(best)
        p = np.array([np.exp(s - z) for _, s in items])
        mu = np.zeros((n, K))
        for (lab, _), pr in zip(items, p):
            mu[np.arange(n), list(lab)] += pr
        close(m.unary[b, :n], mu)
        close(ent[b], -(p * np.log(p)).sum())
        if n > 1:
            pair = np.zeros((K, K))
            for (lab, _), pr in zip(items, p):
                pair[lab[0], lab[1]] += pr
            close(m.edge[b, 0], pair)
    close(h.log_prob(y), h.score(y) - lz)
    assert h.kbest(2).labels[0].tolist() == y.tolist()


def test_gradcheck():
    rng = np.random.default_rng(1)
    args = leaves(randn(rng, 2, 3, 2), randn(rng, 2, 2), randn(rng, 2, 2, 2))
    L = torch.tensor([3, 2])
    assert torch.autograd.gradcheck(lambda a, b, c: HigherOrderChain(a, b, c, lengths=L).log_partition(), args)
