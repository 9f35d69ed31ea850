"""The CRF layer's pure-torch path: ``torch.jit.script`` (and save / load), ``torch.compile`` and
``torch.export`` give eager's log-likelihoods, decoded paths and marginals (masks of varied lengths,
both layouts, constraints); eager calls on the pure-torch path agree with the engine path; GPU variants
run when CUDA is available (skipped otherwise, as tests/torch/test_chain.py's CUDA test)."""
import io
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from structlearn.torch import CRF, bio_constraints

from tests.torch._helpers import close

K = 5
LABELS = ["O", "B-A", "I-A", "B-B", "I-B"]
# eager computes in float64 inside (the engine); float32 runs compare at the tolerance of test_modules
TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-5, atol=1e-5)}
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")

# torch 2.13 deprecates torch.jit.script / save / load / trace (and inductor calls script_method)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.[a-z_]+` is deprecated")


def layer(constrained, batch_first, dtype, seed=0):
    torch.manual_seed(seed)
    crf = CRF(K, batch_first=batch_first, constraints=bio_constraints(LABELS) if constrained else None)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    return crf.to(dtype)


def batch(T, lengths, batch_first, dtype, constrained, seed=1):
    """Emissions, feasible gold tags (O / B-A / I-A runs when constrained) and a prefix mask of the
    given lengths, in the layer's layout."""
    g = torch.Generator().manual_seed(seed)
    B = len(lengths)
    em = torch.randn(B, T, K, generator=g, dtype=torch.float64).to(dtype)
    tags = torch.randint(0, K, (B, T), generator=g)
    if constrained:
        tags = torch.tensor([[(0, 1, 2)[t % 3] for t in range(T)]] * B)
    mask = torch.arange(T)[None] < torch.tensor(lengths)[:, None]
    if not batch_first:
        em, tags, mask = em.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)
    return em.contiguous(), tags.contiguous(), mask.contiguous()


def agree(crf, run, em, tags, mask, dtype):
    """``run(name, *args)`` (a scripted / compiled / exported twin of the layer's method ``name``)
    gives eager's log-likelihood, decoded paths (and their tensor form) and marginals."""
    tol = TOL[dtype]
    for reduction in ("none", "sum", "token_mean"):
        close(run("forward", em, tags, mask, reduction), crf(em, tags, mask, reduction).detach().numpy(), **tol)
    assert run("decode", em, mask) == crf.decode(em, mask)
    score, y = run("viterbi", em, mask)
    ref_score, ref_y = crf.viterbi(em, mask)
    assert torch.equal(y, ref_y)
    close(score, ref_score.numpy(), **tol)
    close(run("marginals", em, mask), crf.marginals(em, mask).detach().numpy(), **tol)


CASES = [(bf, c, dt) for bf in (False, True) for c in (False, True) for dt in (torch.float64, torch.float32)]
IDS = [f"{'bf' if bf else 'sf'}-{'bio' if c else 'free'}-{str(dt)[6:]}" for bf, c, dt in CASES]


@pytest.mark.parametrize("batch_first,constrained,dtype", CASES, ids=IDS)
def test_scripted_layer_matches_eager_and_survives_save_and_load(batch_first, constrained, dtype):
    crf = layer(constrained, batch_first, dtype)
    scripted = torch.jit.script(crf)
    buf = io.BytesIO()
    torch.jit.save(scripted, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    for T, lengths in ((1, [1, 1]), (7, [7, 3, 1, 5]), (12, [12, 12, 4])):
        em, tags, mask = batch(T, lengths, batch_first, dtype, constrained)
        for mod in (scripted, loaded):
            agree(crf, lambda name, *a: getattr(mod, name)(*a), em, tags, mask, dtype)
        assert scripted.decode(em) == crf.decode(em)                       # no mask
        close(scripted(em, tags), crf(em, tags).detach().numpy(), **TOL[dtype])


def test_scripted_gradients_match_eager():
    crf = layer(True, True, torch.float64)
    scripted = torch.jit.script(crf)
    em, tags, mask = batch(9, [9, 6, 2, 8], True, torch.float64, True)
    grads = []
    for mod in (crf, scripted):
        crf.zero_grad()
        e = em.clone().requires_grad_()
        for _ in range(3 if mod is scripted else 1):     # the profiling executor optimises after a few calls
            e.grad = None
            crf.zero_grad()
            mod(e, tags, mask, "mean").backward()
        grads.append([e.grad.clone()] + [p.grad.clone() for p in crf.parameters()])
    for a, b in zip(*grads):
        close(b, a.numpy())


def test_scripted_layer_raises_eagers_errors():
    crf = torch.jit.script(CRF(3, batch_first=True))
    em, tags = torch.randn(2, 4, 3), torch.zeros(2, 4, dtype=torch.long)
    holed = torch.tensor([[1, 1, 1, 1], [1, 0, 1, 0]], dtype=torch.bool)
    with pytest.raises(Exception, match="prefix mask"):
        crf(em, tags, holed)
    with pytest.raises(Exception, match="invalid reduction"):
        crf(em, tags, None, "max")
    with pytest.raises(Exception, match="expected last dimension"):
        crf(torch.randn(2, 4, 5), tags)
    with pytest.raises(Exception, match=r"labels in \[0, 3\)"):
        crf(em, tags + 3)


def test_empty_sequences_on_the_pure_torch_path():
    crf = layer(False, True, torch.float64)
    scripted = torch.jit.script(crf)
    em, tags, mask = batch(4, [4, 0, 2], True, torch.float64, False)
    llh = scripted(em, tags, mask, "none")
    assert float(llh[1].detach()) == 0.0
    close(llh, crf(em, tags, mask, "none").detach().numpy())
    assert scripted.decode(em, mask) == crf.decode(em, mask) and scripted.decode(em, mask)[1] == []
    score, y = scripted.viterbi(em, mask)
    assert torch.equal(y, crf.viterbi(em, mask)[1]) and bool((y[1] == -1).all()) and float(score[1]) == 0.0
    assert float(scripted.marginals(em, mask)[1].detach().abs().sum()) == 0.0


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_traced_forward_matches_eager():
    crf = layer(True, False, torch.float64)
    em, tags, mask = batch(7, [7, 3, 5], False, torch.float64, True)
    traced = torch.jit.trace(crf, (em, tags, mask))
    for lengths in ([7, 3, 5], [1, 7, 2]):                      # other masks through the same trace
        em, tags, mask = batch(7, lengths, False, torch.float64, True, seed=lengths[1])
        close(traced(em, tags, mask), crf(em, tags, mask).detach().numpy())


@pytest.mark.parametrize("backend", ["aot_eager"])
@pytest.mark.parametrize("batch_first,constrained", [(False, False), (True, True)])
def test_compiled_layer_matches_eager(backend, batch_first, constrained):
    dtype = torch.float64
    crf = layer(constrained, batch_first, dtype)
    torch._dynamo.reset()
    fns = {name: torch.compile(getattr(crf, name), backend=backend, dynamic=False)
           for name in ("forward", "decode", "viterbi", "marginals")}
    for T, lengths in ((6, [6, 2, 4]), (6, [1, 6, 6])):          # the same graph, other masks
        em, tags, mask = batch(T, lengths, batch_first, dtype, constrained)
        agree(crf, lambda name, *a: fns[name](*a), em, tags, mask, dtype)


@pytest.mark.slow
def test_compiled_layer_with_the_default_backend():
    """``torch.compile``'s default backend (inductor, C++ on CPU): forward + backward and decode (10-50 s
    of C++ compilation on 2 busy cores; the other compile tests use "aot_eager", which checks the same
    graphs in seconds)."""
    crf = layer(True, True, torch.float32)
    torch._dynamo.reset()
    compiled = torch.compile(crf)
    em, tags, mask = batch(5, [5, 3], True, torch.float32, True)
    e = em.clone().requires_grad_()
    llh = compiled(e, tags, mask)
    llh.backward()
    e2 = em.clone().requires_grad_()
    ref = crf(e2, tags, mask)
    ref.backward()
    close(llh, ref.detach().numpy(), **TOL[torch.float32])
    close(e.grad, e2.grad.numpy(), **TOL[torch.float32])
    assert torch.compile(crf.decode)(em, mask) == crf.decode(em, mask)


class _Method(nn.Module):
    """``forward`` = one method of a CRF layer (torch.export exports ``forward``)."""

    def __init__(self, crf, name):
        super().__init__()
        self.crf, self.name = crf, name

    def forward(self, *args):
        return getattr(self.crf, self.name)(*args)


@pytest.mark.parametrize("batch_first,constrained,dtype", [CASES[0], CASES[3], CASES[6]],
                         ids=[IDS[0], IDS[3], IDS[6]])
def test_exported_layer_matches_eager(batch_first, constrained, dtype):
    crf = layer(constrained, batch_first, dtype)
    T = 6
    em, tags, mask = batch(T, [6, 3, 1], batch_first, dtype, constrained)
    progs = {}
    for reduction in ("none", "sum", "token_mean"):
        progs[("forward", reduction)] = torch.export.export(crf, (em, tags, mask, reduction)).module()
    for name in ("viterbi", "marginals"):
        progs[name] = torch.export.export(_Method(crf, name), (em, mask)).module()

    def run(name, *a):
        if name == "forward":
            return progs[("forward", a[3])](*a)
        if name == "decode":                   # lists are not tensors: decode = viterbi's rows, cut
            y = progs["viterbi"](*a)[1]
            y = y if batch_first else y.t()
            return [row[row >= 0].tolist() for row in y]
        return progs[name](*a)

    for lengths in ([6, 3, 1], [2, 6, 5], [6, 6, 6]):     # other masks through the same programs
        em, tags, mask = batch(T, lengths, batch_first, dtype, constrained, seed=sum(lengths))
        agree(crf, run, em, tags, mask, dtype)


def test_eager_pure_torch_backend_matches_the_engine():
    """backend="torch" (the path CUDA and tracing take) against the default engine path, eagerly."""
    for batch_first, constrained in ((False, True), (True, False)):
        crf = layer(constrained, batch_first, torch.float64)
        pure = layer(constrained, batch_first, torch.float64)
        pure.backend = "torch"
        em, tags, mask = batch(8, [8, 5, 1, 3], batch_first, torch.float64, constrained)
        agree(crf, lambda name, *a: getattr(pure, name)(*a), em, tags, mask, torch.float64)


def test_all_forbidden_columns_keep_gradients_finite():
    """A tag no transition may enter (its column of the allowed matrix all False) gives -inf columns
    in the recursion; the gradient stays finite (torch.logsumexp alone would give NaN)."""
    allowed = torch.ones(K, K, dtype=torch.bool)
    allowed[:, 4] = False
    crf = CRF(K, batch_first=True, constraints=allowed).double()
    scripted = torch.jit.script(crf)
    em, tags, mask = batch(6, [6, 4], True, torch.float64, False)
    tags = tags % 4
    for mod in (crf, scripted):
        e = em.clone().requires_grad_()
        mod(e, tags, mask).backward()
        assert bool(torch.isfinite(e.grad).all())
    bad = tags.clone()
    bad[0, 3] = 4
    assert float(scripted(em, bad, mask, "none")[0].detach()) == float("-inf")
    close(scripted(em, tags, mask, "none"), crf(em, tags, mask, "none").detach().numpy())


# -- GPU (skipped without CUDA, as test_chain.py::test_cuda_matches_the_engine) -------------------------
@requires_cuda
@pytest.mark.parametrize("batch_first,constrained", [(False, True), (True, False)])
def test_cuda_layer_matches_cpu_eager(batch_first, constrained):
    d = torch.device("cuda")
    crf = layer(constrained, batch_first, torch.float64)
    gpu = layer(constrained, batch_first, torch.float64).to(d)
    em, tags, mask = batch(11, [11, 4, 1, 9], batch_first, torch.float64, constrained)

    def run(name, *a):
        out = getattr(gpu, name)(*(x.to(d) if isinstance(x, torch.Tensor) else x for x in a))
        if isinstance(out, tuple):
            return tuple(x.cpu() for x in out)
        return out.cpu() if isinstance(out, torch.Tensor) else out

    agree(crf, run, em, tags, mask, torch.float64)


@requires_cuda
def test_cuda_scripted_and_compiled_layer_match_cpu_eager():
    d = torch.device("cuda")
    crf = layer(True, True, torch.float64)
    gpu = layer(True, True, torch.float64).to(d)
    scripted = torch.jit.script(gpu)
    em, tags, mask = batch(9, [9, 2, 6], True, torch.float64, True)

    def via(mod):
        def run(name, *a):
            out = getattr(mod, name)(*(x.to(d) if isinstance(x, torch.Tensor) else x for x in a))
            if isinstance(out, tuple):
                return tuple(x.cpu() for x in out)
            return out.cpu() if isinstance(out, torch.Tensor) else out
        return run

    agree(crf, via(scripted), em, tags, mask, torch.float64)
    torch._dynamo.reset()
    compiled = torch.compile(gpu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compiled(em.to(d), tags.to(d), mask.to(d), "none").cpu()
    close(got, crf(em, tags, mask, "none").detach().numpy())
    np.testing.assert_array_equal(torch.compile(gpu.viterbi)(em.to(d), mask.to(d))[1].cpu().numpy(),
                                  crf.viterbi(em, mask)[1].numpy())
