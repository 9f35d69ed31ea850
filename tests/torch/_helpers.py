"""Random padded batches and their packed twins for comparing structlearn.torch with the NumPy engine."""
import numpy as np
import torch

RTOL = 1e-10
ATOL = 1e-10
DT = torch.float64


def ragged(rng, B, T, min_len=0):
    """Random lengths in [min_len, T] with at least one of length T."""
    L = rng.integers(min_len, T + 1, size=B)
    L[rng.integers(B)] = T
    return torch.from_numpy(L.astype(np.int64))


def randn(rng, *shape, scale=1.0):
    return torch.from_numpy(rng.normal(size=shape) * scale)


def pack(x, lengths):
    """(B, T, ...) tensor -> (N, ...) float64/int64 ndarray of the rows inside the lengths."""
    x = x.detach()
    return np.concatenate([x[b, :int(n)].numpy() for b, n in enumerate(lengths)], axis=0)


def close(a, b, rtol=RTOL, atol=ATOL):
    a = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.testing.assert_allclose(a, np.asarray(b), rtol=rtol, atol=atol)


def leaves(*xs):
    return [x.detach().clone().requires_grad_() for x in xs]


def check_marginals(c, eng, L):
    """A structlearn.torch structure ``c`` and its engine twin ``eng`` (lengths ``L``) agree on log Z and on
    the unary, edge and summed-edge marginals."""
    close(c.log_partition(), eng.log_partition())
    m, em = c.marginals(), eng.marginals()
    close(pack(m.unary, L), em.unary)
    close(pack(m.edge, L), em.edge)
    close(c.marginals(edge="sum").edge, eng.marginals(edge="sum").edge)
