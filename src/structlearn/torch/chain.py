"""Differentiable linear chains over padded batches (the torch face of
:class:`structlearn.engine.structures.LinearChain`)."""
import numpy as np
import torch

from ..engine.structures import LinearChain as _EngineChain
from . import _scan
from ._base import Marginals, StructureMixin
from ._batch import check_backend, check_float_tensor, resolve_lengths, safe_dot, to_like


class _EngineLogZ(torch.autograd.Function):
    """log Z (B,) by the Numba engine; the backward is the engine's explicit forward–backward
    marginals (computed in the forward pass when a gradient is needed: one kernel call)."""

    @staticmethod
    def forward(ctx, unary, transition, start, end, chain):
        need_t = ctx.needs_input_grad[1]
        if any(ctx.needs_input_grad[:4]):
            edge = "none" if not need_t else ("full" if transition.dim() == 4 else "sum")
            m = chain._call("marginals", edge=edge)
            ctx.marg = (m.unary, m.edge)
        log_z = chain._call("log_partition")
        ctx.chain = chain
        ctx.dims = transition.dim()
        return torch.from_numpy(log_z).to(device=unary.device, dtype=unary.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        pk, (um, em) = ctx.chain._pk, ctx.marg
        like = ctx.chain.unary
        g = g.detach().to(device="cpu", dtype=torch.float64).numpy()
        seq = np.repeat(np.arange(pk.B), pk.lengths)
        gu = gt = gs = ge = None
        if ctx.needs_input_grad[0]:
            gu = pk.unpack(um * g[seq, None], like)
        if ctx.needs_input_grad[2]:
            gs = to_like((um[pk.first_rows] * g[pk.nonempty, None]).sum(0), like)
        if ctx.needs_input_grad[3]:
            ge = to_like((um[pk.last_rows] * g[pk.nonempty, None]).sum(0), like)
        if ctx.needs_input_grad[1]:
            if ctx.dims == 4:
                gt = pk.unpack(em * g[seq, None, None], like)
            elif ctx.dims == 3:
                gt = to_like(em * g[:, None, None], like)
            else:
                gt = to_like(np.tensordot(g, em, axes=1), like)
        return gu, gt, gs, ge, None


class LinearChain(StructureMixin):
    r"""Distribution over label sequences of a first-order chain, for a padded batch.

    The score of labels :math:`y_{0:L}` of sequence b (length L) is

    .. math:: s(y) = start[y_0] + \sum_{t<L} unary[b, t, y_t] + \sum_{t<L-1} transition[t, y_t, y_{t+1}]
              + end[y_{L-1}]

    and :math:`p(y) = \exp(s(y) - \log Z)` (Lafferty, McCallum & Pereira 2001, eq. (1)). Same model and
    conventions as :class:`structlearn.engine.structures.LinearChain` ("from, to" transitions), padded.

    Parameters
    ----------
    unary : Tensor, float32 or float64, shape (B, T, K)
        Log-potentials (emission scores) of label k at position t; padding positions are ignored.
        -inf forbids a label.
    transition : Tensor, shape (K, K), (B, K, K) or (B, T, K, K)
        Log-potentials "from, to": ``transition[..., i, j]`` scores label i followed by j. (B, K, K):
        one matrix per sequence; (B, T, K, K): row t scores the step from t to t+1 (the last row of
        each sequence is ignored). -inf forbids a transition.
    lengths : Tensor or sequence of int, shape (B,), optional
        Sequence lengths (0 ≤ lengths ≤ T); default T for every sequence.
    mask : Tensor of bool, shape (B, T), optional
        Prefix mask instead of ``lengths``; a mask with a hole raises ``ValueError``.
    start, end : Tensor, shape (K,), optional
        Log-potentials of the first / last label; default 0.
    backend : {"auto", "numba", "torch"}
        ``"numba"``: the NumPy engine's Numba kernels (float64 inside, explicit forward–backward for
        the gradient; CPU, tensors on another device are copied); ``"torch"``: the torch recursions
        of :mod:`structlearn.torch._scan` (any device, differentiable to any order); ``"auto"``:
        numba on CPU, torch elsewhere. Operations that need second derivatives (gradients of
        ``entropy`` or of ``marginals``) use the torch recursions whatever the backend.
    scan : {"auto", "sequential", "parallel"}
        Forward pass of the torch backend: the O(T)-depth loop or the O(log T)-depth parallel scan
        (log-semiring matrix products, work O(T·K³)). ``"auto"``: parallel on CUDA, sequential
        elsewhere.

    Raises
    ------
    ValueError
        Shapes that disagree, NaN or +inf potentials, bad lengths, a mask with a hole.

    Notes
    -----
    Cost: ``log_partition`` and ``marginals`` time O(B·T·K²), memory O(B·T·K) (edge marginals
    O(B·T·K²)); ``kbest(k)`` O(B·T·K²·k log(Kk)). ``argmax`` on the torch backend is the
    back-pointer Viterbi on the tensor's device; ``kbest`` and ``sample`` always run on the engine
    (CPU) and return tensors on the input's device. Empty sequences (length 0) have log Z = 0.
    Infeasible sequences (every labeling -inf) have log Z = -inf and make ``argmax``, ``kbest`` and
    ``sample`` raise ``ValueError``.
    """

    def __init__(self, unary, transition, *, lengths=None, mask=None, start=None, end=None,
                 backend="auto", scan="auto"):
        unary = check_float_tensor(unary, "unary", ndim=3)
        B, T, K = unary.shape
        transition = check_float_tensor(transition, "transition", ndim=(2, 3, 4))
        want = {2: (K, K), 3: (B, K, K), 4: (B, T, K, K)}[transition.dim()]
        if tuple(transition.shape) != want:
            raise ValueError(f"`transition` must have shape (K, K) = ({K}, {K}), (B, K, K) = ({B}, {K}, "
                             f"{K}) or (B, T, K, K) = ({B}, {T}, {K}, {K}); got {tuple(transition.shape)}")
        self.unary, self.transition = unary, transition.to(unary.dtype)
        self.start = self._vector(start, "start", K, unary)
        self.end = self._vector(end, "end", K, unary)
        self.lengths = resolve_lengths(lengths, mask, B, T, unary.device)
        self.backend = check_backend(backend, unary.device)
        if scan not in ("auto", "sequential", "parallel"):
            raise ValueError(f"`scan` must be 'auto', 'sequential' or 'parallel'; got {scan!r}")
        self.scan = ("parallel" if unary.device.type == "cuda" else "sequential") if scan == "auto" else scan
        self.n_labels = K
        self._pk_cache = None
        self._eng = None

    # -- plumbing -----------------------------------------------------------------------------------
    def _potentials(self):
        return self.unary, self.transition, self.start, self.end


    def _engine(self):
        """The NumPy engine's LinearChain over the packed (detached, float64) potentials."""
        if self._eng is None:
            pk = self._pk
            tr = self.transition.detach().to(device="cpu", dtype=torch.float64)
            if tr.dim() == 3:
                tr = np.ascontiguousarray(np.repeat(tr.numpy(), pk.lengths, axis=0))
            elif tr.dim() == 4:
                tr = pk.pack(self.transition)
            else:
                tr = tr.numpy()
            self._eng = _EngineChain(pk.pack(self.unary), tr, lengths=pk.lengths,
                                     start=self._np(self.start), end=self._np(self.end))
        return self._eng

    def _trans4(self, transition):
        if transition.dim() == 2:
            return transition[None, None]
        if transition.dim() == 3:
            return transition[:, None]
        return transition

    def _torch_log_partition(self, unary, transition, start, end):
        unary = torch.where(self.mask[:, :, None], unary, torch.zeros_like(unary))
        fwd = _scan.forward_scan if self.scan == "parallel" else _scan.forward_sequential
        return fwd(unary, self._trans4(transition), start, end, self.lengths)

    # -- log semiring -------------------------------------------------------------------------------
    def log_partition(self):
        """Log partition function log Z of every sequence.

        Returns
        -------
        Tensor, shape (B,), dtype of ``unary``
            Differentiable (its gradient is the marginals). -inf for an infeasible sequence, 0 for an
            empty one. Time O(B·T·K²).
        """
        if self.backend == "numba":
            return _EngineLogZ.apply(*self._potentials(), self)
        return self._torch_log_partition(*self._potentials())

    def marginals(self, edge="full"):
        """Posterior marginals, the gradient of log Z with respect to the potentials.

        Parameters
        ----------
        edge : {"full", "sum", "none"}
            ``"full"``: edge marginals (B, T, K, K), row t = P(y_t = i, y_{t+1} = j), 0 from the last
            position of each sequence on; ``"sum"``: their sum over each sequence (B, K, K)
            (expected transition counts); ``"none"``: ``edge`` is None.

        Returns
        -------
        Marginals
            ``unary`` (B, T, K) P(y_t = k) (0 at padding), linear space, and ``edge`` as above.
            With gradients enabled and potentials that require grad they are differentiable
            (computed by autograd of log Z with ``create_graph=True`` on the torch recursions);
            otherwise the numba backend gives the engine's explicit forward–backward.
        """
        if edge not in ("full", "sum", "none"):
            raise ValueError(f"`edge` must be one of ['full', 'none', 'sum']; got {edge!r}")
        if self.backend == "numba" and not self._needs_graph():
            return self._engine_marginals(edge)
        return self._autograd_marginals(edge)

    def _autograd_marginals(self, edge):
        B, T, K = self.unary.shape
        create = self._needs_graph()
        with torch.enable_grad():
            u, tr, st, en = (p if create and p.requires_grad else p.detach().requires_grad_()
                             for p in self._potentials())
            if edge == "full":
                tr_in = self._trans4(tr).expand(B, T, K, K)
            elif edge == "sum":
                tr_in = tr if tr.dim() == 4 else self._trans4(tr).expand(B, 1, K, K)[:, 0]
            else:
                tr_in = tr
            log_z = self._torch_log_partition(u, tr_in, st, en)
            grads = torch.autograd.grad(log_z.sum(), [u, tr_in], create_graph=create, allow_unused=True)
        gu, ge = (torch.zeros_like(x) if g is None else g for g, x in zip(grads, (u, tr_in)))
        if edge == "sum" and ge.dim() == 4:
            ge = ge.sum(1)
        return Marginals(gu, None if edge == "none" else ge)

    def entropy(self):
        """Entropy of p(y) per sequence, H = log Z - E[s(y)] (nats), shape (B,).

        Computed from the marginals (Rush 2020, "Torch-Struct", entropy by marginals), skipping
        zero-probability terms so -inf potentials never give NaN; differentiable (the gradient uses
        second derivatives of log Z through the torch recursions). -inf for an infeasible sequence,
        0 for an empty one. Time O(B·T·K²).
        """
        if self.backend == "numba" and not self._needs_graph():
            return torch.from_numpy(self._call("entropy")).to(self.unary)
        B, T, K = self.unary.shape
        tv = self.transition.dim() == 4
        m = self._autograd_marginals("full" if tv else "sum")
        log_z = self._torch_log_partition(*self._potentials())
        expected = safe_dot(m.unary, self.unary, (1, 2))
        expected = expected + safe_dot(m.edge, self._trans4(self.transition).expand(B, T, K, K) if tv
                                       else self._trans4(self.transition).expand(B, 1, K, K)[:, 0],
                                       (1, 2, 3) if tv else (1, 2))
        first, last = self._ends_marginals(m.unary)
        expected = expected + safe_dot(first, self.start[None], 1) + safe_dot(last, self.end[None], 1)
        h = log_z - expected
        return torch.where(log_z == float("-inf"), log_z, h)

    # -- max semiring -------------------------------------------------------------------------------
    def _viterbi(self):
        """Torch back-pointer Viterbi: (best (B,), labels (B, T))."""
        with torch.no_grad():
            u = torch.where(self.mask[:, :, None], self.unary, torch.zeros_like(self.unary))
            return _scan.viterbi(u, self._trans4(self.transition), self.start, self.end, self.lengths)

    def max(self):
        """Score of the best labeling of every sequence, shape (B,) (-inf if infeasible; no gradient)."""
        if self.backend == "numba":
            return torch.from_numpy(self._call("max")).to(self.unary)
        return self._viterbi()[0]

    def argmax(self):
        """Best labeling (Viterbi, max-product), int64 tensor (B, T), -1 at padding.

        Raises ``ValueError`` if a sequence is infeasible. Time O(B·T·K²).
        """
        if self.backend == "numba":
            return self._pk.unpack(self._call("argmax"), self.unary, fill=-1, dtype=torch.int64)
        best, y = self._viterbi()
        self._raise_if_infeasible(best, "argmax")
        return y

    # -- scores -------------------------------------------------------------------------------------
    def score(self, y):
        """Log-score s(y) of labelings ``y`` (B, T) (int, padding ignored), shape (B,); differentiable."""
        B, T, K = self.unary.shape
        y, on, s = self._unary_score(y)
        if T == 0:
            return s
        if T > 1:
            step = on[:, 1:]
            tr = self.transition
            if tr.dim() == 2:
                ts = tr[y[:, :-1], y[:, 1:]]
            else:
                t4 = self._trans4(tr).expand(B, T, K, K)[:, :-1]
                flat = (y[:, :-1] * K + y[:, 1:])
                ts = t4.reshape(B, T - 1, K * K).gather(2, flat[:, :, None])[:, :, 0]
            s = s + torch.where(step, ts, torch.zeros_like(ts)).sum(1)
        nonempty = self.lengths > 0
        last = (self.lengths - 1).clamp(min=0)
        ends = self.start[y[:, 0]] + self.end[y.gather(1, last[:, None])[:, 0]]
        return s + torch.where(nonempty, ends, torch.zeros_like(ends))

