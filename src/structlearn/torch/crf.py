"""``CRF``: a linear-chain CRF layer with pytorch-crf's interface (``torchcrf.CRF``), plus marginals,
k-best decoding, constraints and the engine's speed on CPU."""
from typing import List, Optional, Tuple

import torch
from torch import nn

from . import _scan
from ._batch import _compiling, check_positive_int, reduce_log_likelihood
from .chain import LinearChain
from .constraints import Constraints, apply_constraints, check_constraints


def _data_checks() -> bool:
    """Whether data-dependent checks may run: eagerly and in TorchScript, not while tracing, compiling
    or exporting (a check there would need the data)."""
    if torch.jit.is_scripting():
        return True
    return not (torch.jit.is_tracing() or _compiling())


def _check_torch_data(em: torch.Tensor, m: torch.Tensor, y: torch.Tensor, mask: Optional[torch.Tensor],
                      K: int) -> None:
    """The eager checks of the engine path, for the pure-torch path: finite-or--inf emissions, a 0/1
    prefix mask, tags in [0, K) where the mask is on."""
    if bool(torch.isnan(em).any()) or bool((em == float("inf")).any()):
        raise ValueError("`emissions` holds NaN or +inf; log-potentials must be finite or -inf")
    if mask is not None and mask.dtype != torch.bool and bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError("`mask` must hold only 0 and 1 (or be boolean)")
    T = m.size(1)
    lengths = m.sum(1)
    prefix = torch.arange(T, device=m.device).unsqueeze(0) < lengths.unsqueeze(1)
    bad = prefix != m
    if bool(bad.any()):
        where = bad.nonzero()[0]
        b, t = int(where[0]), int(where[1])
        raise ValueError("`mask` must be a prefix mask (True for the first lengths[b] positions of each row, "
                         f"then False); row {b} has a hole at position {t}. Reorder (left-align) the sequence")
    if y.numel() > 0:
        out = m & ((y < 0) | (y >= K))
        if bool(out.any()):
            where = out.nonzero()[0]
            b, t = int(where[0]), int(where[1])
            raise ValueError(f"`tags` must hold labels in [0, {K}) at unpadded positions; got {int(y[b, t])} "
                             f"at ({b}, {t})")


def _check_feasible(score: torch.Tensor, m: torch.Tensor) -> None:
    bad = (score == float("-inf")) & m[:, 0]
    if bool(bad.any()):
        raise ValueError(f"cannot compute argmax: sequence {int(bad.nonzero()[0, 0])} has no labeling with "
                         "non-zero potential (log_partition is -inf)")


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
        Eager calls: ``"auto"``, the Numba engine on CPU tensors and the pure-torch path elsewhere;
        ``"numba"``, the engine always (other devices' tensors are copied); ``"torch"``, the pure-torch
        path always. Scripted, traced, compiled and exported calls always take the pure-torch path.

    Attributes
    ----------
    start_transitions, end_transitions : Parameter, shape (K,)
        Scores of the first / last tag.
    transitions : Parameter, shape (K, K)
        ``transitions[i, j]``: score of tag i followed by tag j ("from, to", as pytorch-crf).

    Notes
    -----
    Costs are those of :class:`~structlearn.torch.LinearChain`: O(B·T·K²) per call.

    Two paths give the same numbers. The *engine* path (eager, CPU) runs the Numba kernels with their
    explicit forward–backward as the gradient. The *pure-torch* path (:mod:`structlearn.torch._scan`:
    the forward recursion under autograd, back-pointer Viterbi, forward–backward marginals; one Python
    loop over time) runs on any device and under ``torch.jit.script`` (``torch.jit.save`` / ``load``
    included), ``torch.jit.trace``, ``torch.compile`` and ``torch.export``. :meth:`forward`,
    :meth:`decode`, :meth:`viterbi` and :meth:`marginals` choose between them on each call.
    ``torch.compile`` and ``torch.export`` unroll the loop over time (one graph per sequence length) and
    skip the data checks (mask holes, tag ranges, infeasible sequences). :meth:`kbest` and
    :meth:`structure` stay eager only.
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
    # TorchScript compiles properties too; this one builds a namedtuple (not scriptable)
    __jit_unused_properties__ = ["constraints"]

    @property
    def constraints(self):
        """The :data:`~structlearn.torch.Constraints` in force, or None."""
        if self.allowed_transitions is None:
            return None
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

    def _check_emissions(self, emissions: torch.Tensor) -> None:
        if not isinstance(emissions, torch.Tensor) or emissions.dim() != 3:
            got = emissions.dim() if isinstance(emissions, torch.Tensor) else type(emissions).__name__
            raise ValueError(f"emissions must have dimension of 3, got {got}")
        if emissions.size(2) != self.num_tags:
            raise ValueError(f"expected last dimension of emissions is {self.num_tags}, got {emissions.size(2)}")

    # -- which path ---------------------------------------------------------------------------------
    def _pure_torch(self, emissions: torch.Tensor) -> bool:
        """Whether this call takes the pure-torch path: always under ``torch.jit.script``,
        ``torch.jit.trace``, ``torch.compile`` and ``torch.export`` (the engine cannot be traced), with
        ``backend="torch"``, and on non-CPU tensors unless ``backend="numba"``."""
        if torch.jit.is_scripting():
            return True
        if torch.jit.is_tracing() or _compiling():
            return True
        if self.backend == "torch":
            return True
        return self.backend == "auto" and emissions.device.type != "cpu"

    def _torch_inputs(self, emissions: torch.Tensor, mask: Optional[torch.Tensor],
                      tags: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Checked batch-first (emissions, boolean prefix mask, tags or an empty tensor) for the
        pure-torch path (data-dependent checks are skipped while tracing or compiling)."""
        self._check_emissions(emissions)
        n0, n1 = emissions.size(0), emissions.size(1)
        if tags is not None and (tags.dim() != 2 or tags.size(0) != n0 or tags.size(1) != n1):
            raise ValueError("the first two dimensions of emissions and tags must match, got "
                             f"({n0}, {n1}) and {tags.shape}")
        if mask is None:
            m = torch.ones((n0, n1), dtype=torch.bool, device=emissions.device)
        else:
            if mask.dim() != 2 or mask.size(0) != n0 or mask.size(1) != n1:
                raise ValueError("the first two dimensions of emissions and mask must match, got "
                                 f"({n0}, {n1}) and {mask.shape}")
            if mask.is_floating_point() or mask.is_complex():
                raise ValueError(f"`mask` must be boolean (or 0/1 integers); got dtype {mask.dtype}")
            m = mask.to(device=emissions.device) != 0
        em = emissions
        y = torch.empty(0, dtype=torch.int64, device=emissions.device)
        if tags is not None:
            y = tags.to(device=emissions.device, dtype=torch.int64)
        if not self.batch_first:
            em, m = em.transpose(0, 1), m.transpose(0, 1)
            if tags is not None:
                y = y.transpose(0, 1)
        if _data_checks():
            _check_torch_data(em, m, y, mask, self.num_tags)
        return em, m, y

    def _torch_potentials(self, dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(transitions, start, end) with the constraints applied (-inf), in ``dtype``."""
        trans, start, end = self.transitions, self.start_transitions, self.end_transitions
        allowed, first, last = self.allowed_transitions, self.allowed_start, self.allowed_end
        if allowed is not None:
            trans = torch.where(allowed.to(trans.device), trans, torch.full_like(trans, float("-inf")))
        if first is not None:
            start = torch.where(first.to(start.device), start, torch.full_like(start, float("-inf")))
        if last is not None:
            end = torch.where(last.to(end.device), end, torch.full_like(end, float("-inf")))
        return trans.to(dtype), start.to(dtype), end.to(dtype)

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
        if reduction not in ["none", "sum", "mean", "token_mean"]:
            raise ValueError(f"invalid reduction: {reduction}")
        if not self._pure_torch(emissions):
            return self._engine_forward(emissions, tags, mask, reduction)
        em, m, y = self._torch_inputs(emissions, mask, tags)
        trans, start, end = self._torch_potentials(em.dtype)
        llh = (_scan.crf_score(em, y, m, trans, start, end)
               - _scan.crf_log_partition(em, m, trans, start, end))
        return reduce_log_likelihood(llh, m.sum(1), reduction)

    @torch.jit.unused
    def _engine_forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: Optional[torch.Tensor],
                        reduction: str) -> torch.Tensor:
        self._check_emissions(emissions)
        if tuple(tags.shape) != tuple(emissions.shape[:2]):
            raise ValueError("the first two dimensions of emissions and tags must match, got "
                             f"{tuple(emissions.shape[:2])} and {tuple(tags.shape)}")
        chain = self.structure(emissions, mask)
        return reduce_log_likelihood(chain.log_prob(self._bf(tags)), chain.lengths, reduction)

    @torch.jit.export
    def decode(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> List[List[int]]:
        """Best tag sequence of every sequence (Viterbi), as a list of ``batch`` lists of ints.

        The same lists from a scripted layer (``torch.jit.script``, as pytorch-crf's master); under
        ``torch.compile`` the list is built after the graph (a graph break); ``torch.export`` needs
        tensors: export :meth:`viterbi` instead.
        """
        if not self._pure_torch(emissions):
            return self._engine_decode(emissions, mask)
        score, y, m = self._torch_viterbi(emissions, mask)
        rows: List[List[int]] = y.cpu().tolist()
        lengths: List[int] = m.sum(1).cpu().tolist()
        out: List[List[int]] = []
        for b in range(len(rows)):
            out.append(rows[b][:lengths[b]])
        return out

    @torch.jit.unused
    def _engine_decode(self, emissions: torch.Tensor, mask: Optional[torch.Tensor]) -> List[List[int]]:
        with torch.no_grad():
            chain = self.structure(emissions, mask)
            y = chain.argmax().cpu()
            lengths = chain.lengths.cpu().tolist()
        return [y[b, :n].tolist() for b, n in enumerate(lengths)]

    @torch.jit.export
    def viterbi(self, emissions: torch.Tensor,
                mask: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Best tag sequences as tensors (what :meth:`decode` lists): the best scores, shape (batch,),
        and the tags, int64, shape of the mask ((seq, batch), or (batch, seq) if ``batch_first``), -1
        at padding. Tensors only, so it exports with ``torch.export`` and compiles without a graph
        break. No gradient. Raises ``ValueError`` if a sequence is infeasible (not while compiling).
        """
        if not self._pure_torch(emissions):
            return self._engine_viterbi(emissions, mask)
        score, y, _ = self._torch_viterbi(emissions, mask)
        return score, (y if self.batch_first else y.transpose(0, 1))

    def _torch_viterbi(self, emissions: torch.Tensor,
                       mask: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Pure-torch Viterbi: best scores (B,), tags (B, T) with -1 at padding, and the mask (B, T)."""
        em, m, _ = self._torch_inputs(emissions, mask, None)
        trans, start, end = self._torch_potentials(em.dtype)
        with torch.no_grad():
            score, y = _scan.crf_viterbi(em, m, trans, start, end)
        if _data_checks():
            _check_feasible(score, m)
        return score, y, m

    @torch.jit.unused
    def _engine_viterbi(self, emissions: torch.Tensor,
                        mask: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            chain = self.structure(emissions, mask)
            y = chain.argmax()
            score = chain.max()
        return score, self._bf(y)

    # -- more ---------------------------------------------------------------------------------------
    @torch.jit.export
    def marginals(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Posterior tag marginals P(y_t = k | emissions), shape of ``emissions`` (0 at padding)."""
        if not self._pure_torch(emissions):
            return self._engine_marginals(emissions, mask)
        em, m, _ = self._torch_inputs(emissions, mask, None)
        trans, start, end = self._torch_potentials(em.dtype)
        out = _scan.crf_marginals(em, m, trans, start, end)
        return out if self.batch_first else out.transpose(0, 1)

    @torch.jit.unused
    def _engine_marginals(self, emissions: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return self._bf(self.structure(emissions, mask).marginals(edge="none").unary)

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
