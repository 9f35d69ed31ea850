"""``CRF``: a linear-chain CRF layer with pytorch-crf's interface (``torchcrf.CRF``), plus marginals,
k-best decoding, constraints and the engine's speed on CPU."""
from typing import List, Optional

import torch
from torch import nn

from ._batch import REDUCTIONS, check_positive_int, reduce_log_likelihood
from .chain import LinearChain
from .constraints import apply_constraints, check_constraints


class CRF(nn.Module):
    """Conditional random field layer (Lafferty, McCallum & Pereira 2001) over emission scores.

    A drop-in for pytorch-crf's ``torchcrf.CRF``: same constructor, attributes, initialisation and
    ``forward`` / ``decode`` (same numbers); in addition :meth:`marginals`, :meth:`kbest`,
    :meth:`structure`, hard ``constraints``, and masks with empty sequences (log-likelihood 0, decoded
    as ``[]``; pytorch-crf refuses a mask whose first time step is off). A mask with a hole raises
    ``ValueError`` (pytorch-crf silently scores such a sequence wrongly).

    Parameters
    ----------
    num_tags : int
        Number of tags K.
    batch_first : bool, default False
        Inputs are (batch, seq, ...) if True, (seq, batch, ...) otherwise (pytorch-crf's default).
    constraints : None, Constraints or Tensor of bool, shape (K, K)
        Allowed transitions (and first / last tags), e.g. ``bio_constraints(tag_names)``; forbidden
        ones score -inf in training and decoding. Stored as buffers (they follow ``.to(device)``).
    backend : {"auto", "numba", "torch"}
        See :class:`structlearn.torch.LinearChain`.

    Attributes
    ----------
    start_transitions, end_transitions : Parameter, shape (K,)
        Scores of the first / last tag.
    transitions : Parameter, shape (K, K)
        ``transitions[i, j]``: score of tag i followed by tag j ("from, to", as pytorch-crf).

    Notes
    -----
    Costs are those of :class:`~structlearn.torch.LinearChain`: O(B·T·K²) per call.
    """

    def __init__(self, num_tags: int, batch_first: bool = False, constraints=None, backend: str = "auto"):
        if not isinstance(num_tags, int) or num_tags <= 0:
            raise ValueError(f"invalid number of tags: {num_tags}")
        super().__init__()
        self.num_tags = num_tags
        self.batch_first = batch_first
        self.backend = backend
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        c = check_constraints(constraints, num_tags)
        for name, x in zip(("allowed_transitions", "allowed_start", "allowed_end"),
                           (None, None, None) if c is None else c):
            self.register_buffer(name, x)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the transition parameters uniformly in [-0.1, 0.1] (as pytorch-crf)."""
        nn.init.uniform_(self.start_transitions, -0.1, 0.1)
        nn.init.uniform_(self.end_transitions, -0.1, 0.1)
        nn.init.uniform_(self.transitions, -0.1, 0.1)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(num_tags={self.num_tags})"

    # -- helpers ------------------------------------------------------------------------------------
    @property
    def constraints(self):
        """The :data:`~structlearn.torch.Constraints` in force, or None."""
        if self.allowed_transitions is None:
            return None
        from .constraints import Constraints
        return Constraints(self.allowed_transitions, self.allowed_start, self.allowed_end)

    def _bf(self, x):
        return x if x is None or self.batch_first else x.transpose(0, 1)

    def structure(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> LinearChain:
        """The :class:`~structlearn.torch.LinearChain` of these emissions (batch-first), with the
        layer's transitions and constraints."""
        self._check_emissions(emissions)
        if mask is not None and tuple(mask.shape) != tuple(emissions.shape[:2]):
            raise ValueError("the first two dimensions of emissions and mask must match, got "
                             f"{tuple(emissions.shape[:2])} and {tuple(mask.shape)}")
        trans, start, end = apply_constraints(self.constraints, self.transitions, self.start_transitions,
                                              self.end_transitions)
        em = self._bf(emissions)
        dt = em.dtype
        return LinearChain(em, trans.to(dt), mask=self._bf(mask), start=start.to(dt), end=end.to(dt),
                           backend=self.backend)

    def _check_emissions(self, emissions):
        if not isinstance(emissions, torch.Tensor) or emissions.dim() != 3:
            got = emissions.dim() if isinstance(emissions, torch.Tensor) else type(emissions).__name__
            raise ValueError(f"emissions must have dimension of 3, got {got}")
        if emissions.size(2) != self.num_tags:
            raise ValueError(f"expected last dimension of emissions is {self.num_tags}, got {emissions.size(2)}")

    # -- pytorch-crf's interface --------------------------------------------------------------------
    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: Optional[torch.Tensor] = None,
                reduction: str = "sum") -> torch.Tensor:
        """Conditional log-likelihood log p(tags | emissions).

        Parameters
        ----------
        emissions : Tensor, shape (seq, batch, K) or (batch, seq, K) if ``batch_first``
        tags : LongTensor, shape (seq, batch) or (batch, seq)
        mask : Tensor of bool or uint8, same shape as ``tags``, optional
            Prefix mask (a mask with a hole raises ``ValueError``); default all on.
        reduction : {"none", "sum", "mean", "token_mean"}
            ``"none"``: (batch,); ``"sum"`` / ``"mean"`` over sequences; ``"token_mean"``: the sum
            divided by the number of unmasked tokens.

        Returns
        -------
        Tensor
            Log-likelihood (≤ 0), shape (batch,) for ``"none"``, () otherwise; differentiable.
        """
        if reduction not in REDUCTIONS:
            raise ValueError(f"invalid reduction: {reduction}")
        self._check_emissions(emissions)
        if tuple(tags.shape) != tuple(emissions.shape[:2]):
            raise ValueError("the first two dimensions of emissions and tags must match, got "
                             f"{tuple(emissions.shape[:2])} and {tuple(tags.shape)}")
        chain = self.structure(emissions, mask)
        return reduce_log_likelihood(chain.log_prob(self._bf(tags)), chain.lengths, reduction)

    def decode(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> List[List[int]]:
        """Best tag sequence of every sequence (Viterbi), as a list of ``batch`` lists of ints."""
        with torch.no_grad():
            chain = self.structure(emissions, mask)
            y = chain.argmax().cpu()
            lengths = chain.lengths.cpu().tolist()
        return [y[b, :n].tolist() for b, n in enumerate(lengths)]

    # -- more ---------------------------------------------------------------------------------------
    def marginals(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Posterior tag marginals P(y_t = k | emissions), shape of ``emissions`` (0 at padding)."""
        m = self.structure(emissions, mask).marginals(edge="none").unary
        return self._bf(m)

    def kbest(self, emissions: torch.Tensor, k: int, mask: Optional[torch.Tensor] = None):
        """The k best tag sequences of every sequence, best first.

        Returns
        -------
        list of length batch of lists of (float, list of int)
            Up to k pairs (log-score, tags) per sequence (fewer if fewer are feasible).
        """
        k = check_positive_int(k, "k")
        with torch.no_grad():
            chain = self.structure(emissions, mask)
            res = chain.kbest(k)
            lab, sc = res.labels.cpu(), res.scores.cpu()
            lengths = chain.lengths.cpu().tolist()
        out = []
        for b, n in enumerate(lengths):
            out.append([(float(sc[r, b]), lab[r, b, :n].tolist()) for r in range(k)
                        if sc[r, b] > float("-inf")])
        return out
