"""The BiLSTM-CRF example (--quick), the benchmark's agreement check, and the exportable decoder."""
import numpy as np
import pytest
import torch

from tests.conftest import require_data, require_module, script_module

from structlearn.torch import CRF, ViterbiDecoder, bio_constraints


@pytest.mark.filterwarnings("ignore:.*does not define `arg_constraints`")
def test_benchmark_contenders_agree_on_a_tiny_case():
    require_module("torchcrf")
    require_module("torch_struct")
    bench = script_module("benchmarks/bench_torch.py", "bench_torch")
    assert bench.check_equivalence() == bench.CONTENDERS
    r = bench.worker("structlearn", 2, 5, 3, "cpu", 1, 1)
    assert set(r) == {"fb", "vit", "peak_mb"} and r["fb"] > 0


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_viterbi_decoder_scripts_and_matches_decode():
    torch.manual_seed(0)
    crf = CRF(5, batch_first=True, constraints=bio_constraints(["O", "B-A", "I-A", "B-B", "I-B"]))
    dec = ViterbiDecoder.from_crf(crf)
    scripted = torch.jit.script(dec)
    for T in (1, 6, 13):
        em = torch.randn(3, T, 5)
        L = torch.tensor([T, max(1, T // 2), 1])
        mask = torch.arange(T)[None] < L[:, None]
        ref = crf.decode(em, mask=mask)
        for d in (dec, scripted):
            score, y = d(em, L)
            assert [y[b, :int(L[b])].tolist() for b in range(3)] == ref
            assert bool((y[~mask] == -1).all())
            np.testing.assert_allclose(score.numpy(), crf.structure(em, mask).max().numpy(), rtol=1e-5)


@pytest.mark.slow
def test_bilstm_crf_example_quick():
    require_data("conll2000")
    require_module("torchcrf")
    mod = script_module("examples/torch_bilstm_crf.py", "torch_bilstm_crf")
    res = {r["layer"]: r for r in mod.main(["--quick", "--threads", "1", "--layers", "structlearn,pytorch-crf"])}
    assert set(res) == {"structlearn", "pytorch-crf"}
    assert res["structlearn"]["f1"] > 0.3
    # same initialisation and data order: the two layers train the same model up to float rounding
    assert abs(res["structlearn"]["f1"] - res["pytorch-crf"]["f1"]) < 0.03


def test_torch_backend_traces_into_one_graph():
    """torch.compile sees the torch backend's log Z as a single graph (validation that would need a
    device sync is skipped while compiling)."""
    from structlearn.torch import LinearChain
    u = torch.randn(3, 6, 4, requires_grad=True)
    tr = torch.randn(4, 4, requires_grad=True)
    L = torch.tensor([6, 3, 1])

    def f(u, tr):
        return LinearChain(u, tr, lengths=L, backend="torch").log_partition().sum()

    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(u, tr)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
