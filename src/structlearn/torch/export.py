"""Viterbi decoding as a plain ``nn.Module`` for TorchScript, ``torch.compile`` and ONNX export."""
from typing import Tuple

import torch
from torch import nn

from . import _scan
from .constraints import apply_constraints


class ViterbiDecoder(nn.Module):
    """Max-product decoding of a linear-chain CRF with frozen transitions, written with tensor ops
    only (no NumPy, no engine, no data-dependent Python branches), so it scripts with
    ``torch.jit.script``, compiles with ``torch.compile`` and exports to ONNX.

    Parameters
    ----------
    transitions : Tensor, shape (K, K)
        "From, to" scores (forbidden: -inf).
    start, end : Tensor, shape (K,)

    Notes
    -----
    ``forward(emissions (B, T, K), lengths (B,) int64)`` returns the best scores (B,) and labels
    (B, T) int64 (-1 at padding); time O(B·T·K²), depth O(T) (back-pointer Viterbi of
    :func:`structlearn.torch._scan.viterbi`).

    Export (checked with torch 2.13, onnx 1.23, onnxruntime 1.32): ``torch.onnx.export(
    torch.jit.script(decoder), (emissions, lengths), path, dynamo=False, input_names=["emissions",
    "lengths"], dynamic_axes={"emissions": {0: "B", 1: "T"}, "lengths": {0: "B"}})`` writes an ONNX
    ``Loop`` graph that decodes any B and T exactly as :meth:`CRF.decode`; the default dynamo exporter
    unrolls the loop over T and so fixes the shapes it was traced with. ``torch.compile(decoder)``
    works too (one graph per T).
    """

    def __init__(self, transitions, start, end):
        super().__init__()
        self.register_buffer("trans4", transitions.detach()[None, None].clone())
        self.register_buffer("start", start.detach().clone())
        self.register_buffer("end", end.detach().clone())

    @classmethod
    def from_crf(cls, crf):
        """The decoder of a :class:`~structlearn.torch.CRF` layer (its constraints applied)."""
        t, s, e = apply_constraints(crf.constraints, crf.transitions, crf.start_transitions,
                                    crf.end_transitions)
        return cls(t, s, e)

    def forward(self, emissions: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        on = torch.arange(emissions.shape[1], device=emissions.device)[None, :] < lengths[:, None]
        u = torch.where(on[:, :, None], emissions, torch.zeros_like(emissions))
        return _scan.viterbi(u, self.trans4.to(u.dtype), self.start.to(u.dtype), self.end.to(u.dtype), lengths)
