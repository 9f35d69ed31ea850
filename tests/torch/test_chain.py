"""structlearn.torch.LinearChain equals the NumPy engine (structlearn.engine.structures.LinearChain) on random
ragged batches, on both backends and both forward passes; gradients are the marginals."""
import numpy as np
import pytest
import torch

from structlearn.engine.structures import LinearChain as EngineChain
from structlearn.torch import LinearChain

from tests.torch._helpers import check_marginals, close, leaves, pack, ragged, randn

CONFIGS = [("numba", "auto"), ("torch", "sequential"), ("torch", "parallel")]


def problem(seed, B=5, T=7, K=4, kind="stationary", scale=1.0):
    rng = np.random.default_rng(seed)
    L = ragged(rng, B, T)
    u = randn(rng, B, T, K, scale=scale)
    tr = {"stationary": lambda: randn(rng, K, K), "per_sequence": lambda: randn(rng, B, K, K),
          "time_varying": lambda: randn(rng, B, T, K, K)}[kind]()
    st, en = randn(rng, K), randn(rng, K)
    if kind == "stationary":
        etr = tr.numpy()
    elif kind == "per_sequence":
        etr = np.repeat(tr.numpy(), L.numpy(), axis=0)
    else:
        etr = pack(tr, L)
    eng = EngineChain(pack(u, L), etr, lengths=L.numpy(), start=st.numpy(), end=en.numpy())
    return u, tr, st, en, L, eng


@pytest.mark.parametrize("backend,scan", CONFIGS)
@pytest.mark.parametrize("kind", ["stationary", "per_sequence", "time_varying"])
def test_every_operation_equals_the_engine(backend, scan, kind):
    for seed in range(3):
        u, tr, st, en, L, eng = problem(seed, kind=kind, scale=2.0)
        c = LinearChain(u, tr, lengths=L, start=st, end=en, backend=backend, scan=scan)
        check_marginals(c, eng, L)
        close(c.entropy(), eng.entropy())
        y = c.argmax()
        assert torch.equal(torch.from_numpy(pack(y, L)), torch.from_numpy(eng.argmax()))
        assert bool((y[c.mask.logical_not()] == -1).all())
        close(c.max(), eng.max())
        close(c.score(y), eng.score(pack(y, L)))
        close(c.log_prob(y), eng.score(pack(y, L)) - eng.log_partition())
        kb, ekb = c.kbest(3), eng.kbest(3)
        assert np.array_equal(np.stack([pack(kb.labels[r], L) for r in range(3)]), ekb.labels)
        close(kb.scores, ekb.scores.T)
        s = c.sample(4, generator=11)
        assert np.array_equal(np.stack([pack(s[i], L) for i in range(4)]), eng.sample(4, random_state=11))


@pytest.mark.parametrize("backend,scan", CONFIGS)
def test_gradients_are_the_marginals(backend, scan):
    u, tr, st, en, L, eng = problem(3, kind="stationary")
    u, tr, st, en = leaves(u, tr, st, en)
    log_z = LinearChain(u, tr, lengths=L, start=st, end=en, backend=backend, scan=scan).log_partition()
    gu, gt, gs, ge = torch.autograd.grad(log_z.sum(), [u, tr, st, en])
    m = eng.marginals(edge="total")
    close(pack(gu, L), m.unary)
    assert float(gu[~(torch.arange(7)[None] < L[:, None])].abs().max()) == 0.0  # padding gets no gradient
    close(gt, m.edge)
    first = eng.offsets[:-1][eng.lengths > 0]
    last = eng.offsets[1:][eng.lengths > 0] - 1
    close(gs, m.unary[first].sum(0))
    close(ge, m.unary[last].sum(0))
    # weighted sums of log Z: the gradient scales per sequence
    w = torch.arange(1.0, 6.0, dtype=torch.float64)
    (gu2,) = torch.autograd.grad((w * LinearChain(u, tr, lengths=L, start=st, end=en, backend=backend,
                                                  scan=scan).log_partition()).sum(), [u])
    close(gu2, gu * w[:, None, None])


@pytest.mark.parametrize("backend,scan", CONFIGS)
@pytest.mark.parametrize("kind", ["stationary", "time_varying"])
def test_gradcheck(backend, scan, kind):
    K = 3 if kind == "stationary" else 2
    u, tr, st, en, L, _ = problem(4, B=3, T=4, K=K, kind=kind)
    L = torch.tensor([4, 2, 0])
    args = leaves(u, tr, st, en)

    def f(*a):
        return LinearChain(a[0], a[1], lengths=L, start=a[2], end=a[3], backend=backend, scan=scan)

    assert torch.autograd.gradcheck(lambda *a: f(*a).log_partition(), args)
    assert torch.autograd.gradcheck(lambda *a: f(*a).entropy(), args)
    y = torch.tensor([[0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    assert torch.autograd.gradcheck(lambda *a: f(*a).log_prob(y), args)


def test_marginals_are_differentiable_and_match_the_second_derivative():
    u, tr, st, en, L, _ = problem(5, B=2, T=4, K=3)
    u, tr = leaves(u, tr)
    for backend in ("numba", "torch"):
        m = LinearChain(u, tr, lengths=L, start=st, end=en, backend=backend).marginals(edge="none")
        assert m.unary.requires_grad
        assert torch.autograd.gradcheck(
            lambda a: LinearChain(a, tr, lengths=L, start=st, end=en, backend=backend).marginals("none").unary,
            [u])


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_batched_equals_one_by_one(backend):
    u, tr, st, en, L, _ = problem(6, B=6, T=9, K=3)
    c = LinearChain(u, tr, lengths=L, start=st, end=en, backend=backend)
    lz, y, m = c.log_partition(), c.argmax(), c.marginals().unary
    for b in range(6):
        n = int(L[b])
        one = LinearChain(u[b:b + 1, :n], tr, start=st, end=en, backend=backend)
        close(lz[b:b + 1], one.log_partition())
        close(m[b, :n], one.marginals().unary[0])
        assert torch.equal(y[b, :n], one.argmax()[0])


def test_mask_equals_lengths_and_holes_raise():
    u, tr, st, en, L, _ = problem(7)
    mask = torch.arange(7)[None] < L[:, None]
    close(LinearChain(u, tr, mask=mask, start=st, end=en).log_partition(),
          LinearChain(u, tr, lengths=L, start=st, end=en).log_partition())
    close(LinearChain(u, tr, mask=mask.to(torch.uint8)).log_partition(),
          LinearChain(u, tr, lengths=L).log_partition())
    holed = mask.clone()
    holed[0, 1] = False
    holed[0, 2:] = True
    with pytest.raises(ValueError, match="prefix mask.*row 0 has a hole"):
        LinearChain(u, tr, mask=holed)
    with pytest.raises(ValueError, match="not both"):
        LinearChain(u, tr, mask=mask, lengths=L)
    with pytest.raises(ValueError, match="lengths"):
        LinearChain(u, tr, lengths=torch.tensor([1, 2, 3, 4, 8]))


def test_bad_inputs_name_the_argument():
    u, tr, *_ = problem(8)
    with pytest.raises(ValueError, match="`transition` must have shape"):
        LinearChain(u, tr[:2])
    with pytest.raises(ValueError, match="`unary` holds NaN"):
        LinearChain(torch.full_like(u, float("nan")), tr)
    with pytest.raises(ValueError, match="`backend`"):
        LinearChain(u, tr, backend="cuda")
    with pytest.raises(ValueError, match="`y` must hold labels in"):
        LinearChain(u, tr).score(torch.full(u.shape[:2], 9))
    with pytest.raises(ValueError, match="`k` must be a positive integer"):
        LinearChain(u, tr).kbest(0)


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_allowed_masks_and_forbidden_transitions_equal_the_engine(backend):
    u, tr, st, en, L, eng = problem(9, K=4)
    rng = np.random.default_rng(0)
    allowed = torch.from_numpy(rng.random(u.shape) < 0.7)
    allowed[..., :2] = True                     # two labels everywhere: never infeasible
    forbid = torch.eye(4, dtype=torch.bool)
    tr_f = torch.where(forbid, torch.tensor(float("-inf"), dtype=torch.float64), tr)
    c = LinearChain(u, tr_f, lengths=L, start=st, end=en, backend=backend).constrain(allowed)
    e = EngineChain(pack(u, L), tr_f.numpy(), lengths=L.numpy(), start=st.numpy(),
                    end=en.numpy()).constrain(pack(allowed, L))
    close(c.log_partition(), e.log_partition())
    close(pack(c.marginals().unary, L), e.marginals().unary)
    y = c.argmax()
    assert np.array_equal(pack(y, L), e.argmax())
    yy = y[:, 1:].clamp(min=0), y[:, :-1].clamp(min=0)
    assert not bool((c.mask[:, 1:] & (yy[0] == yy[1])).any())          # no forbidden self-transition
    assert bool(allowed.gather(2, y.clamp(min=0)[..., None])[..., 0][c.mask].all())
    # partial-label loss: log Z - log Z(constrained) >= 0 and finite
    u_, = leaves(u)
    full = LinearChain(u_, tr_f, lengths=L, start=st, end=en, backend=backend)
    loss = (full.log_partition() - full.constrain(allowed).log_partition()).sum()
    loss.backward()
    assert float(loss.detach()) >= 0 and bool(torch.isfinite(u_.grad).all())


@pytest.mark.parametrize("backend,scan", CONFIGS)
def test_infeasible_and_empty_sequences(backend, scan):
    K = 3
    u = torch.zeros(3, 4, K, dtype=torch.float64)
    u[1, 2] = float("-inf")                       # sequence 1 has no labeling
    L = torch.tensor([4, 4, 0])
    tr = torch.zeros(K, K, dtype=torch.float64, requires_grad=True)
    c = LinearChain(u, tr, lengths=L, backend=backend, scan=scan)
    lz = c.log_partition()
    close(lz, [4 * np.log(3), -np.inf, 0.0])
    lz[[0, 2]].sum().backward()
    assert bool(torch.isfinite(tr.grad).all())
    with pytest.raises(ValueError, match="sequence 1"):
        c.argmax()
    with pytest.raises(ValueError, match="sequence 1"):
        c.sample(1)


def test_float32_matches_float64():
    u, tr, st, en, L, eng = problem(10, B=4, T=30, K=5, scale=3.0)
    for backend, scan in CONFIGS:
        c = LinearChain(u.float(), tr.float(), lengths=L, start=st.float(), end=en.float(), backend=backend,
                        scan=scan)
        lz = c.log_partition()
        assert lz.dtype == torch.float32
        close(lz.double(), eng.log_partition(), rtol=1e-5, atol=1e-4)
        close(pack(c.marginals().unary.double(), L), eng.marginals().unary, rtol=1e-4, atol=1e-5)
        y = torch.randint(0, 5, u.shape[:2])
        assert bool((c.log_prob(y) <= 0).all())


def test_long_sequence_and_large_potentials_stay_finite():
    rng = np.random.default_rng(1)
    u = randn(rng, 2, 2000, 3, scale=50.0)
    tr = randn(rng, 3, 3, scale=50.0)
    eng = EngineChain(u.reshape(-1, 3).numpy(), tr.numpy(), lengths=[2000, 2000])
    for backend, scan in CONFIGS:
        c = LinearChain(u, tr, backend=backend, scan=scan)
        close(c.log_partition(), eng.log_partition(), rtol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
def test_cuda_matches_the_engine():
    u, tr, st, en, L, eng = problem(12, B=8, T=33, K=5, kind="time_varying")
    d = torch.device("cuda")
    for scan in ("sequential", "parallel"):
        c = LinearChain(u.to(d), tr.to(d), lengths=L.to(d), start=st.to(d), end=en.to(d), scan=scan)
        assert c.backend == "torch"
        close(c.log_partition().cpu(), eng.log_partition())
        close(pack(c.marginals().unary.cpu(), L), eng.marginals().unary)
        close(c.entropy().cpu(), eng.entropy())
        assert np.array_equal(pack(c.argmax().cpu(), L), eng.argmax())
        assert c.kbest(2).labels.device.type == "cuda"
