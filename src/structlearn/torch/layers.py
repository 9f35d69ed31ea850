"""``SemiMarkovCRF`` and ``TreeCRF``: CRF layers over segmentations and trees (batch-first)."""
from typing import List, Optional

import torch
from torch import nn

from ._batch import REDUCTIONS, reduce_log_likelihood
from .semimarkov import SemiMarkov
from .tree import Tree


def _check_emissions(emissions, K):
    if not isinstance(emissions, torch.Tensor) or emissions.dim() != 3:
        got = tuple(emissions.shape) if isinstance(emissions, torch.Tensor) else type(emissions).__name__
        raise ValueError(f"`emissions` must be a (batch, seq, {K}) tensor; got {got}")
    if emissions.size(2) != K:
        raise ValueError(f"expected last dimension of emissions is {K}, got {emissions.size(2)}")


class SemiMarkovCRF(nn.Module):
    """Semi-Markov CRF layer (Sarawagi & Cohen 2004): labelled segments of at most
    ``max_segment_length`` tokens scored by the sum of their tokens' emissions, a duration score per
    (length, label), and transitions between consecutive segments.

    Parameters
    ----------
    num_tags : int
        Segment labels K.
    max_segment_length : int
        Longest segment D.
    allow_same_label : bool, default True
        If False consecutive segments have different labels (then runs of equal tags are segments).
    backend : {"auto", "numba", "torch"}
        See :class:`structlearn.torch.SemiMarkov`.

    Attributes
    ----------
    start_transitions, end_transitions : Parameter, (K,)
    transitions : Parameter, (K, K), "from, to" between consecutive segments
    durations : Parameter, (D, K), row d-1 scores a segment of length d

    Notes
    -----
    Inputs are batch-first: emissions (batch, seq, K), an optional prefix ``mask`` (batch, seq).
    Segments are given per sequence as (start, end, label) rows, end inclusive. Time
    O(B·T·(D·K + K²)) per call.
    """

    def __init__(self, num_tags: int, max_segment_length: int, allow_same_label: bool = True,
                 backend: str = "auto"):
        for name, v in (("num_tags", num_tags), ("max_segment_length", max_segment_length)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}")
        super().__init__()
        self.num_tags, self.max_segment_length = num_tags, max_segment_length
        self.allow_same_label, self.backend = allow_same_label, backend
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.durations = nn.Parameter(torch.empty(max_segment_length, num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in [-0.1, 0.1], as :class:`~structlearn.torch.CRF`."""
        for p in (self.start_transitions, self.end_transitions, self.transitions, self.durations):
            nn.init.uniform_(p, -0.1, 0.1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_tags={self.num_tags}, max_segment_length={self.max_segment_length})"

    def structure(self, emissions, mask=None, segment=None) -> SemiMarkov:
        """The :class:`~structlearn.torch.SemiMarkov` of these emissions (optionally with extra
        per-segment scores ``segment`` (batch, seq, D, K))."""
        _check_emissions(emissions, self.num_tags)
        dt = emissions.dtype
        return SemiMarkov(emissions, self.durations.to(dt), self.transitions.to(dt), mask=mask,
                          start=self.start_transitions.to(dt), end=self.end_transitions.to(dt),
                          segment=segment, allow_same_label=self.allow_same_label, backend=self.backend)

    def forward(self, emissions: torch.Tensor, segments, mask: Optional[torch.Tensor] = None,
                reduction: str = "sum") -> torch.Tensor:
        """Log-likelihood of the gold segmentations.

        Parameters
        ----------
        emissions : Tensor (batch, seq, K)
        segments : list of batch array-likes (n_seg, 3)
            (start, end, label) rows, end inclusive, tiling each sequence.
        mask : Tensor of bool (batch, seq), optional
        reduction : {"none", "sum", "mean", "token_mean"}
        """
        if reduction not in REDUCTIONS:
            raise ValueError(f"invalid reduction: {reduction}")
        sm = self.structure(emissions, mask)
        return reduce_log_likelihood(sm.log_prob(segments), sm.lengths, reduction)

    def decode(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> List[List[tuple]]:
        """Best segmentation of every sequence: lists of (start, end, label) tuples (end inclusive)."""
        with torch.no_grad():
            segs = self.structure(emissions, mask).argmax_segments()
        return [[tuple(int(v) for v in row) for row in s] for s in segs]

    def marginals(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """P(token t lies in a k-segment), (batch, seq, K)."""
        return self.structure(emissions, mask).marginals(edge="none").unary


class TreeCRF(nn.Module):
    """Tree CRF layer: one label per node of rooted trees given as parent arrays, scored by node
    emissions, a (child label, parent label) edge score and a root score (Cohn & Blunsom 2005).

    Parameters
    ----------
    num_tags : int
    backend : {"auto", "numba", "torch"}
        See :class:`structlearn.torch.Tree`.

    Attributes
    ----------
    edge_transitions : Parameter, (K, K)
        ``edge_transitions[i, j]`` scores a child labelled i under a parent labelled j.
    root_transitions : Parameter, (K,)

    Notes
    -----
    Inputs are batch-first: emissions (batch, nodes, K), ``parents`` (batch, nodes) local parent
    indices (-1 for the root), optional prefix ``mask``. Time O(B·T·K²) per call.
    """

    def __init__(self, num_tags: int, backend: str = "auto"):
        if not isinstance(num_tags, int) or isinstance(num_tags, bool) or num_tags <= 0:
            raise ValueError(f"`num_tags` must be a positive integer; got {num_tags!r}")
        super().__init__()
        self.num_tags, self.backend = num_tags, backend
        self.edge_transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.root_transitions = nn.Parameter(torch.empty(num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.uniform_(self.edge_transitions, -0.1, 0.1)
        nn.init.uniform_(self.root_transitions, -0.1, 0.1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_tags={self.num_tags})"

    def structure(self, emissions, parents, mask=None) -> Tree:
        """The :class:`~structlearn.torch.Tree` of these emissions and parent arrays."""
        _check_emissions(emissions, self.num_tags)
        dt = emissions.dtype
        return Tree(emissions, self.edge_transitions.to(dt), parents, mask=mask,
                    root_score=self.root_transitions.to(dt), backend=self.backend)

    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, parents: torch.Tensor,
                mask: Optional[torch.Tensor] = None, reduction: str = "sum") -> torch.Tensor:
        """Log-likelihood log p(tags | emissions, tree), reduced as :meth:`CRF.forward`."""
        if reduction not in REDUCTIONS:
            raise ValueError(f"invalid reduction: {reduction}")
        tree = self.structure(emissions, parents, mask)
        return reduce_log_likelihood(tree.log_prob(tags), tree.lengths, reduction)

    def decode(self, emissions: torch.Tensor, parents: torch.Tensor,
               mask: Optional[torch.Tensor] = None) -> List[List[int]]:
        """Best labeling of every tree (max-product), a list of label lists."""
        with torch.no_grad():
            tree = self.structure(emissions, parents, mask)
            y = tree.argmax().cpu()
            lengths = tree.lengths.cpu().tolist()
        return [y[b, :n].tolist() for b, n in enumerate(lengths)]

    def marginals(self, emissions: torch.Tensor, parents: torch.Tensor,
                  mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Node marginals P(y_n = k), (batch, nodes, K)."""
        return self.structure(emissions, parents, mask).marginals(edge="none").unary
