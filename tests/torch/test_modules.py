"""The CRF layer runs pytorch-crf's documented example unchanged and matches pytorch-crf's numbers;
SemiMarkovCRF and TreeCRF agree with their functional structures."""
import warnings

import numpy as np
import pytest
import torch

from tests.conftest import require_module

from structlearn.engine.structures import LinearChain as EngineChain
from structlearn.torch import CRF, SemiMarkovCRF, TreeCRF, bio_constraints

from tests.torch._helpers import close, pack


@pytest.fixture(scope="module")
def torchcrf():
    return require_module("torchcrf")


def pair(torchcrf, K, batch_first=False, dtype=torch.float32, **kw):
    ours = CRF(K, batch_first=batch_first, **kw).to(dtype)
    ref = torchcrf.CRF(K, batch_first=batch_first).to(dtype)
    ref.load_state_dict(ours.state_dict(), strict=False)
    return ours, ref


def test_pytorch_crf_documented_example_runs_unchanged(torchcrf):
    results = {}
    for name, CRFClass in (("ours", CRF), ("pytorch-crf", torchcrf.CRF)):
        torch.manual_seed(0)
        # --- pytorch-crf's README example, verbatim apart from the class ---
        num_tags = 5  # number of tags is 5
        model = CRFClass(num_tags)
        seq_length = 3  # maximum sequence length in a batch
        batch_size = 2  # number of samples in the batch
        emissions = torch.randn(seq_length, batch_size, num_tags)
        tags = torch.tensor([[0, 1], [2, 4], [3, 1]], dtype=torch.long)  # (seq_length, batch_size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # pytorch-crf: uint8 masks in torch.where
            llh = model(emissions, tags)
            mask = torch.tensor([[1, 1], [1, 1], [1, 0]], dtype=torch.uint8)
            llh_masked = model(emissions, tags, mask=mask)
            decoded = model.decode(emissions)
            decoded_masked = model.decode(emissions, mask=mask)
        assert llh.grad_fn is not None
        assert tuple(model.start_transitions.shape) == (5,) and tuple(model.transitions.shape) == (5, 5)
        assert tuple(model.end_transitions.shape) == (5,)
        results[name] = (float(llh.detach()), float(llh_masked.detach()), decoded, decoded_masked)
    ours, ref = results["ours"], results["pytorch-crf"]
    np.testing.assert_allclose(ours[:2], ref[:2], rtol=1e-5)
    assert ours[2:] == ref[2:]
    assert repr(CRF(5)) == repr(torchcrf.CRF(5)) == "CRF(num_tags=5)"


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "token_mean"])
def test_matches_pytorch_crf_values_and_gradients_in_float64(torchcrf, batch_first, reduction):
    K, T, B = 6, 9, 5
    torch.manual_seed(1)
    ours, ref = pair(torchcrf, K, batch_first, torch.float64)
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_()
    ref.load_state_dict(ours.state_dict(), strict=False)
    lengths = torch.tensor([9, 4, 1, 7, 9])
    mask = torch.arange(T)[None] < lengths[:, None]
    em = torch.randn(B, T, K, dtype=torch.float64)
    tags = torch.randint(0, K, (B, T))
    if not batch_first:
        em, tags, mask = em.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)
    e1, e2 = em.clone().requires_grad_(), em.clone().requires_grad_()
    a, b = ours(e1, tags, mask=mask, reduction=reduction), ref(e2, tags, mask=mask, reduction=reduction)
    close(a, b.detach().numpy())
    a.sum().backward()
    b.sum().backward()
    close(e1.grad, e2.grad.numpy())
    for name in ("start_transitions", "end_transitions", "transitions"):
        close(getattr(ours, name).grad, getattr(ref, name).grad.numpy())
    assert ours.decode(em, mask=mask) == ref.decode(em, mask=mask)


def test_marginals_kbest_and_the_engine(torchcrf):
    K = 4
    ours = CRF(K, batch_first=True).double()
    em = torch.randn(3, 6, K, dtype=torch.float64)
    mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] + [0] * 5], dtype=torch.bool)
    L = mask.sum(1)
    m = ours.marginals(em, mask)
    eng = EngineChain(pack(em, L), ours.transitions.detach().numpy(), lengths=L.numpy(),
                      start=ours.start_transitions.detach().numpy(), end=ours.end_transitions.detach().numpy())
    close(pack(m, L), eng.marginals().unary)
    kb = ours.kbest(em, 3, mask)
    assert [best[0][1] for best in kb] == ours.decode(em, mask)
    assert len(kb[2]) == 3 and all(kb[b][0][0] >= kb[b][1][0] >= kb[b][2][0] for b in range(3))


def test_bio_constraints_hold_in_decoding_and_training():
    tags = ["O", "B-NP", "I-NP", "B-VP", "I-VP"]
    c = bio_constraints(tags)
    assert not bool(c.transitions[0, 2]) and bool(c.transitions[1, 2]) and not bool(c.transitions[3, 2])
    assert not bool(c.start[2]) and bool(c.start[1])
    crf = CRF(5, batch_first=True, constraints=c)
    with torch.no_grad():
        crf.transitions.fill_(0.0)
    torch.manual_seed(0)
    em = torch.randn(8, 12, 5) * 3
    for seq in crf.decode(em):
        assert seq[0] not in (2, 4)
        for a, b in zip(seq, seq[1:]):
            assert bool(c.transitions[a, b]), (a, b)
    bad = torch.zeros(8, 12, dtype=torch.long)
    bad[:, 0] = 2                                    # I-NP first: impossible under BIO
    assert bool((crf(em, bad, reduction="none") == float("-inf")).all())
    ok = torch.ones(8, 12, dtype=torch.long)
    llh = crf(em, ok)
    llh.backward()
    assert bool(torch.isfinite(crf.transitions.grad).all())
    e = bio_constraints(["O", "B-X", "I-X", "E-X", "S-X"], scheme="BIOES")
    assert bool(e.end[3]) and not bool(e.end[1]) and not bool(e.transitions[1, 1]) and bool(e.transitions[1, 3])
    with pytest.raises(ValueError, match="not O"):
        bio_constraints(["O", "NP"])


def test_crf_input_errors():
    crf = CRF(3)
    with pytest.raises(ValueError, match="invalid number of tags"):
        CRF(0)
    with pytest.raises(ValueError, match="dimension of 3"):
        crf(torch.randn(4, 3), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="invalid reduction"):
        crf(torch.randn(4, 2, 3), torch.zeros(4, 2, dtype=torch.long), reduction="max")
    holed = torch.tensor([[1, 1], [0, 1], [1, 1]], dtype=torch.bool)
    with pytest.raises(ValueError, match="prefix mask"):
        crf(torch.randn(3, 2, 3), torch.zeros(3, 2, dtype=torch.long), mask=holed)


def test_crf_accepts_empty_sequences_where_pytorch_crf_refuses():
    crf = CRF(3, batch_first=True)
    em = torch.randn(2, 4, 3)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    llh = crf(em, torch.zeros(2, 4, dtype=torch.long), mask=mask, reduction="none")
    assert float(llh[1].detach()) == 0.0 and float(llh[0].detach()) < 0
    assert crf.decode(em, mask=mask)[1] == []


def test_semimarkov_crf_layer():
    torch.manual_seed(0)
    layer = SemiMarkovCRF(3, max_segment_length=3).double()
    em = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2], dtype=torch.bool)
    segs = [[(0, 1, 0), (2, 2, 1), (3, 5, 2)], [(0, 3, 1)]]
    llh = layer(em, segs, mask=mask, reduction="none")
    sm = layer.structure(em, mask)
    close(llh, (sm.score(segs) - sm.log_partition()).detach().numpy())
    assert float(llh[1].detach()) == float("-inf")            # a segment of 4 > max_segment_length
    layer(em, [segs[0], [(0, 1, 1), (2, 3, 0)]], mask=mask).backward()
    assert em.grad is not None and layer.durations.grad is not None
    dec = layer.decode(em, mask)
    assert dec[1][-1][1] == 3 and all(e - s + 1 <= 3 for s, e, _ in dec[0])
    close(layer.marginals(em, mask).sum(-1)[0], np.ones(6))


def test_tree_crf_layer():
    torch.manual_seed(0)
    layer = TreeCRF(3).double()
    em = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    parents = torch.tensor([[-1, 0, 0, 1], [1, -1, 1, 0]])
    tags = torch.tensor([[0, 1, 2, 0], [1, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    llh = layer(em, tags, parents, mask=mask, reduction="none")
    tree = layer.structure(em, parents, mask)
    close(llh, (tree.score(tags) - tree.log_partition()).detach().numpy())
    assert bool((llh <= 0).all())
    llh.sum().backward()
    assert layer.edge_transitions.grad is not None
    dec = layer.decode(em, parents, mask)
    assert [len(d) for d in dec] == [4, 3]
    close(layer.marginals(em, parents, mask).sum(-1)[1, :3], np.ones(3))
