"""Differentiable semi-Markov segmentations over padded batches (the torch face of
:class:`structlearn.engine.structures.SemiMarkov`)."""
import numpy as np
import torch

from ..engine.structures import SemiMarkov as _EngineSemiMarkov
from ._base import Marginals, StructureMixin
from ._batch import (check_backend, check_float_tensor, check_positive_int, logsumexp, numpy_seed, resolve_lengths,
                     safe_dot, to_like)


class _EngineLogZ(torch.autograd.Function):
    """log Z (B,) by the Numba engine; backward from its explicit marginals (token, transition,
    duration and segment marginals, computed in the forward pass when a gradient is needed)."""

    @staticmethod
    def forward(ctx, unary, duration, transition, start, end, segment, sm):
        need = ctx.needs_input_grad
        ctx.sm, ctx.marg = sm, {}
        if need[0] or need[2] or need[3] or need[4]:
            m = sm._call("marginals", edge="sum" if need[2] else "none")
            ctx.marg["token"], ctx.marg["edge"] = m.unary, m.edge
        if need[1]:
            dm = sm._call("duration_marginals")
            ctx.marg["duration"] = dm.middle + dm.first + dm.last + dm.single
        if need[5]:
            ctx.marg["segment"] = sm._call("segment_marginals")
        log_z = sm._call("log_partition")
        return torch.from_numpy(log_z).to(device=unary.device, dtype=unary.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        sm, mg = ctx.sm, ctx.marg
        pk, like = sm._pk, sm.unary
        g = g.detach().to(device="cpu", dtype=torch.float64).numpy()
        seq = np.repeat(np.arange(pk.B), pk.lengths)
        need = ctx.needs_input_grad

        def t(x):
            return to_like(x, like)

        out = [None] * 7
        if need[0]:
            out[0] = pk.unpack(mg["token"] * g[seq, None], like)
        if need[1]:
            out[1] = t(np.tensordot(g, mg["duration"], axes=1))
        if need[2]:
            out[2] = t(np.tensordot(g, mg["edge"], axes=1))
        if need[3]:
            out[3] = t((mg["token"][pk.first_rows] * g[pk.nonempty, None]).sum(0))
        if need[4]:
            out[4] = t((mg["token"][pk.last_rows] * g[pk.nonempty, None]).sum(0))
        if need[5]:
            out[5] = pk.unpack(mg["segment"] * g[seq, None, None], like)
        return tuple(out)


class SemiMarkov(StructureMixin):
    r"""Distribution over segmentations of every sequence into labelled segments (semi-Markov CRF),
    for a padded batch.

    A segmentation of a sequence of length L is a list of segments :math:`(s_i, e_i, k_i)` tiling
    [0, L) with durations :math:`d_i = e_i - s_i + 1 \le D`, scored

    .. math:: s(y) = start[k_1] + \sum_i \Big(\sum_{u=s_i}^{e_i} unary[u, k_i] + duration[d_i - 1, k_i]
              + segment[e_i, d_i - 1, k_i]\Big) + \sum_{i<m} transition[k_i, k_{i+1}] + end[k_m]

    (Sarawagi & Cohen 2004, "Semi-Markov conditional random fields", eqs. 3–5); the model of
    :class:`structlearn.engine.structures.SemiMarkov` (one duration table), padded.

    Parameters
    ----------
    unary : Tensor, float32 or float64, shape (B, T, K)
        Log-potential of label k at position t (padding ignored). -inf forbids a label.
    duration : Tensor, shape (D, K)
        Log-potential of a k-segment of length d at row d-1; D is the longest segment.
    transition : Tensor, shape (K, K)
        "From, to" log-potentials between consecutive segments.
    lengths, mask
        As for :class:`~structlearn.torch.LinearChain`.
    start, end : Tensor, shape (K,), optional
        Log-potentials of the first / last segment's label; default 0.
    segment : Tensor, shape (B, T, D, K), optional
        Extra log-potential of the k-segment of duration d+1 ending at t (``segment[b, t, d, k]``).
    allow_same_label : bool, default True
        If False, consecutive segments never share a label.
    backend : {"auto", "numba", "torch"}
        As for :class:`~structlearn.torch.LinearChain`; the torch recursion is the two-stage
        forward over segment ends (depth O(T)).

    Notes
    -----
    Time O(B·T·(D·K + K²)) for ``log_partition`` / ``marginals``; ``segment_marginals`` memory
    O(B·T·D·K). ``argmax``, ``kbest`` and ``sample`` run on the engine (CPU) whatever the backend.
    Token labels do not determine a segmentation when ``allow_same_label=True``: decoding returns
    token labels and, through the ``*_segments`` methods, segment lists.
    """

    def __init__(self, unary, duration, transition, *, lengths=None, mask=None, start=None, end=None,
                 segment=None, allow_same_label=True, backend="auto"):
        unary = check_float_tensor(unary, "unary", ndim=3)
        B, T, K = unary.shape
        duration = check_float_tensor(duration, "duration", ndim=2)
        if duration.shape[1] != K or duration.shape[0] < 1:
            raise ValueError(f"`duration` must have shape (D, K) with D >= 1 and K = {K}; got "
                             f"{tuple(duration.shape)}")
        D = duration.shape[0]
        self.unary = unary
        self.duration = duration.to(unary.dtype)
        self.transition = check_float_tensor(transition, "transition", shape=(K, K)).to(unary.dtype)
        self.start = self._vector(start, "start", K, unary)
        self.end = self._vector(end, "end", K, unary)
        self.segment = (None if segment is None else
                        check_float_tensor(segment, "segment", shape=(B, T, D, K)).to(unary.dtype))
        self.allow_same_label = bool(allow_same_label)
        self.lengths = resolve_lengths(lengths, mask, B, T, unary.device)
        self.backend = check_backend(backend, unary.device)
        self.n_labels, self.max_duration = K, D
        self._pk_cache = None
        self._eng = None

    # -- plumbing -----------------------------------------------------------------------------------
    def _potentials(self):
        return self.unary, self.duration, self.transition, self.start, self.end, self.segment


    def _engine(self):
        if self._eng is None:
            pk = self._pk
            seg = None if self.segment is None else pk.pack(self.segment)
            self._eng = _EngineSemiMarkov(pk.pack(self.unary), self._np(self.duration),
                                          self._np(self.transition), lengths=pk.lengths,
                                          start=self._np(self.start), end=self._np(self.end), segment=seg,
                                          allow_same_label=self.allow_same_label)
        return self._eng

    def _torch_log_partition(self, unary, duration, transition, start, end, segment):
        """Two-stage forward over segment ends (Sarawagi & Cohen 2004, eq. 3)::

            α*[0, k] = start[k];  α*[s, k] = ⊕_j α[s-1, j] + transition[s-1, j, k]
            α[e, k]  = ⊕_{d ≤ min(D, e+1)} α*[e-d+1, k] + w(e-d+1, e, k)

        with w accumulated along d (no cumulative-sum differences). ``transition`` is (K, K) or
        (B, T, K, K) (row s-1: the boundary before s).
        """
        B, T, K = unary.shape
        D = duration.shape[0]
        if T == 0:
            return unary.new_zeros(B)
        neg = float("-inf")
        unary = torch.where(self.mask[:, :, None], unary, torch.zeros_like(unary))
        if not self.allow_same_label:
            diag = torch.eye(K, dtype=torch.bool, device=unary.device)
            transition = torch.where(diag, torch.full_like(transition, neg), transition)
        cols, acc = [], unary
        pad = unary.new_full((B, 1, K), neg)
        for d in range(D):
            if d:
                acc = torch.cat([pad, acc[:, :-1]], dim=1) + unary
            cols.append(acc + duration[d])
        W = torch.stack(cols, dim=2)                                       # (B, T, D, K)
        if segment is not None:
            W = W + torch.where(self.mask[:, :, None, None], segment, torch.zeros_like(segment))
        astar = [start.expand(B, K)]
        alphas = []
        for e in range(T):
            dm = min(D, e + 1)
            A = torch.stack([astar[e - d] for d in range(dm)], dim=1)      # (B, dm, K): α*[e-d]
            a = logsumexp(A + W[:, e, :dm], dim=1)
            alphas.append(a)
            if e + 1 < T:
                tr = transition if transition.dim() == 2 else transition[:, e]
                astar.append(logsumexp(a[:, :, None] + tr, dim=1))
        alpha = torch.stack(alphas, dim=1)
        last = (self.lengths - 1).clamp(min=0)
        a_last = alpha.gather(1, last[:, None, None].expand(B, 1, K))[:, 0]
        log_z = logsumexp(a_last + end, dim=-1)
        return torch.where(self.lengths > 0, log_z, torch.zeros_like(log_z))

    # -- log semiring -------------------------------------------------------------------------------
    def log_partition(self):
        """Log partition function (B,), differentiable; -inf if infeasible, 0 if empty.
        Time O(B·T·(D·K + K²))."""
        if self.backend == "numba":
            return _EngineLogZ.apply(*self._potentials(), self)
        return self._torch_log_partition(*self._potentials())

    def _autograd(self, edge, want_segment):
        """Marginals by autograd of the torch recursion: (log Z, token (B,T,K), edge, segment)."""
        B, T, K = self.unary.shape
        D = self.max_duration
        create = self._needs_graph()
        with torch.enable_grad():
            ps = [None if p is None else (p if create and p.requires_grad else p.detach().requires_grad_())
                  for p in self._potentials()]
            u, dur, tr, st, en, seg = ps
            tr_in = tr[None, None].expand(B, T, K, K) if edge == "full" else tr
            seg_in = seg
            if want_segment:
                z = u.new_zeros((B, T, D, K)).requires_grad_()
                seg_in = z if seg is None else seg + z
            log_z = self._torch_log_partition(u, dur, tr_in, st, en, seg_in)
            inputs = [u, tr_in] + ([seg_in] if want_segment else [])
            grads = torch.autograd.grad(log_z.sum(), inputs, create_graph=create, allow_unused=True)
        if not create:
            log_z = log_z.detach()
        grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]
        return log_z, grads[0], grads[1], (grads[2] if want_segment else None)

    def marginals(self, edge="full"):
        """Token and transition marginals (gradient of log Z w.r.t. ``unary`` and the per-boundary
        transitions).

        Parameters
        ----------
        edge : {"full", "sum", "none"}
            ``"full"``: (B, T, K, K), row t = P(a segment boundary between t and t+1 with label i
            before and j after); ``"sum"``: (B, K, K) per-sequence sums; ``"none"``: None.

        Returns
        -------
        Marginals
            ``unary`` (B, T, K): P(position t lies in a k-segment), and ``edge``.
        """
        if edge not in ("full", "sum", "none"):
            raise ValueError(f"`edge` must be one of ['full', 'none', 'sum']; got {edge!r}")
        if self.backend == "numba" and not self._needs_graph():
            return self._engine_marginals(edge)
        if edge == "sum":
            _, gu, ge, _ = self._autograd("full", False)
            return Marginals(gu, ge.sum(1))
        _, gu, ge, _ = self._autograd("full" if edge == "full" else "none", False)
        return Marginals(gu, ge if edge == "full" else None)

    def segment_marginals(self):
        """P(the segmentation holds the k-segment of duration d+1 ending at t), (B, T, D, K), linear
        space (0 where the segment would start before 0). Memory O(B·T·D·K)."""
        if self.backend == "numba" and not self._needs_graph():
            return self._pk.unpack(self._call("segment_marginals"), self.unary)
        return self._autograd("none", True)[3]

    def entropy(self):
        """Entropy over segmentations, H = log Z - E[s(y)] (nats), shape (B,); differentiable
        (second derivatives through the torch recursion). -inf if infeasible, 0 if empty."""
        if self.backend == "numba" and not self._needs_graph():
            return torch.from_numpy(self._call("entropy")).to(self.unary)
        B, T, K = self.unary.shape
        log_z, mu, me, ms = self._autograd("full", True)
        tr = self.transition
        if not self.allow_same_label:
            tr = torch.where(torch.eye(K, dtype=torch.bool, device=tr.device), torch.zeros_like(tr), tr)
        ex = safe_dot(mu, self.unary, (1, 2)) + safe_dot(me, tr[None, None].expand(B, T, K, K), (1, 2, 3))
        ex = ex + safe_dot(ms, self.duration[None, None].expand_as(ms), (1, 2, 3))
        if self.segment is not None:
            ex = ex + safe_dot(ms, self.segment, (1, 2, 3))
        first, last = self._ends_marginals(mu)
        ex = ex + safe_dot(first, self.start[None], 1) + safe_dot(last, self.end[None], 1)
        return torch.where(log_z == float("-inf"), log_z, (log_z - ex).clamp(min=0))

    # -- decoding (engine) --------------------------------------------------------------------------
    def max(self):
        """Score of the best segmentation (B,) (-inf if infeasible; no gradient)."""
        return torch.from_numpy(self._call("max")).to(self.unary)

    def argmax(self):
        """Token labels of the best segmentation (semi-Markov Viterbi), int64 (B, T), -1 at padding.
        Raises ``ValueError`` if a sequence is infeasible."""
        return self._pk.unpack(self._call("argmax"), self.unary, fill=-1, dtype=torch.int64)

    def argmax_segments(self):
        """Best segmentation of every sequence: list of B int64 arrays (n_seg, 3) of (start, end,
        label), end inclusive."""
        return self._call("argmax_segments")

    def kbest_segments(self, k):
        """The k best segmentations as lists of (score, (n_seg, 3) segments) per sequence."""
        return self._call("kbest_segments", k)

    def sample_segments(self, n, generator=None):
        """``n`` exact samples as segment lists: ``out[b][i]`` (n_seg, 3) for sample i of sequence b."""
        return self._call("sample_segments", check_positive_int(n, "n"), random_state=numpy_seed(generator))

    # -- scores -------------------------------------------------------------------------------------
    def score(self, segments):
        """Log-score s(y) of one segmentation per sequence, shape (B,); differentiable.

        Parameters
        ----------
        segments : list of B array-likes of int, shape (n_seg, 3)
            Rows (start, end, label), end inclusive, tiling [0, lengths[b]) in order. A segment longer
            than D, or equal consecutive labels with ``allow_same_label=False``, scores -inf.
        """
        B, T, K = self.unary.shape
        lengths = self.lengths.cpu().tolist()
        if not isinstance(segments, (list, tuple)) or len(segments) != B:
            raise ValueError(f"`segments` must be a list of B = {B} arrays of shape (n_seg, 3) (start, end, "
                             f"label)")
        tok = np.zeros((B, T), dtype=np.int64)
        rows = []          # (b, e, d, k)
        pairs = []         # (b, k_prev, k_next)
        ends = []          # (b, k_first, k_last)
        for b, seg in enumerate(segments):
            arr = np.asarray(seg.cpu() if isinstance(seg, torch.Tensor) else seg, dtype=np.int64).reshape(-1, 3)
            n = lengths[b]
            if n == 0:
                if arr.shape[0]:
                    raise ValueError(f"`segments[{b}]` must be empty: sequence {b} has length 0")
                continue
            s, e, lab = arr[:, 0], arr[:, 1], arr[:, 2]
            if not (arr.shape[0] and s[0] == 0 and e[-1] == n - 1 and np.all(e >= s)
                    and np.all(s[1:] == e[:-1] + 1)):
                raise ValueError(f"`segments[{b}]` must tile [0, {n}) in order (first start 0, each start = "
                                 f"previous end + 1, last end {n - 1}); got {arr.tolist()}")
            if lab.min() < 0 or lab.max() >= K:
                raise ValueError(f"`segments[{b}]` labels must lie in [0, {K}); got {lab.tolist()}")
            tok[b, :n] = np.repeat(lab, e - s + 1)
            rows.extend((b, int(ee), int(ee - ss), int(k)) for ss, ee, k in arr)
            pairs.extend((b, int(i), int(j)) for i, j in zip(lab[:-1], lab[1:]))
            ends.append((b, int(lab[0]), int(lab[-1])))
        dev, dt = self.unary.device, self.unary.dtype
        y = torch.from_numpy(tok).to(dev)
        total = (self.unary.gather(2, y[:, :, None])[:, :, 0] * self.mask.to(dt)).sum(1)
        if rows:
            r = torch.tensor(rows, dtype=torch.int64, device=dev)
            long_ = r[:, 2] >= self.max_duration
            d = r[:, 2].clamp(max=self.max_duration - 1)
            val = self.duration[d, r[:, 3]]
            if self.segment is not None:
                val = val + self.segment[r[:, 0], r[:, 1], d, r[:, 3]]
            val = torch.where(long_, torch.full_like(val, float("-inf")), val)
            total = total.index_add(0, r[:, 0], val)
        if pairs:
            p = torch.tensor(pairs, dtype=torch.int64, device=dev)
            val = self.transition[p[:, 1], p[:, 2]]
            if not self.allow_same_label:
                val = torch.where(p[:, 1] == p[:, 2], torch.full_like(val, float("-inf")), val)
            total = total.index_add(0, p[:, 0], val)
        if ends:
            q = torch.tensor(ends, dtype=torch.int64, device=dev)
            total = total.index_add(0, q[:, 0], self.start[q[:, 1]] + self.end[q[:, 2]])
        return total
