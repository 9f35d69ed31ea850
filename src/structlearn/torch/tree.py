"""Differentiable tree-structured labelings over padded batches of trees (the torch face of
:class:`structlearn.engine.structures.Tree`)."""
import numpy as np
import torch

from ..engine.structures import Tree as _EngineTree
from ._base import Marginals, StructureMixin
from ._batch import check_backend, check_float_tensor, logsumexp, resolve_lengths, safe_dot, to_like


class _EngineLogZ(torch.autograd.Function):
    """log Z (B,) by the Numba engine's upward pass; backward from its explicit (inside–outside)
    marginals, computed in the forward pass when a gradient is needed."""

    @staticmethod
    def forward(ctx, unary, edge, root_score, tree):
        need = ctx.needs_input_grad
        ctx.tree = tree
        if need[0] or need[1] or need[2]:
            mode = "none" if not need[1] else ("full" if edge.dim() == 4 else "sum")
            m = tree._call("marginals", edge=mode)
            ctx.marg = (m.unary, m.edge)
        log_z = tree._call("log_partition")
        return torch.from_numpy(log_z).to(device=unary.device, dtype=unary.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        tree = ctx.tree
        pk, like, (um, em) = tree._pk, tree.unary, ctx.marg
        g = g.detach().to(device="cpu", dtype=torch.float64).numpy()
        seq = np.repeat(np.arange(pk.B), pk.lengths)
        need = ctx.needs_input_grad
        gu = ge = gr = None
        if need[0]:
            gu = pk.unpack(um * g[seq, None], like)
        if need[1]:
            if em.shape[0] == pk.B and tree.edge.dim() == 2:
                ge = to_like(np.tensordot(g, em, axes=1), like)
            else:
                ge = pk.unpack(em * g[seq, None, None], like)
        if need[2]:
            roots = tree._roots
            ok = roots >= 0
            gr = to_like((um[roots[ok]] * g[ok, None]).sum(0), like)
        return gu, ge, gr, None


class Tree(StructureMixin):
    r"""Distribution over labelings of the nodes of rooted trees (tree CRF), for a padded batch.

    .. math:: s(y) = root\_score[y_r] + \sum_n unary[n, y_n] + \sum_{c \ne r} edge[c, y_c, y_{parent(c)}]

    and :math:`p(y) = \exp(s(y) - \log Z)` (Cohn & Blunsom 2005; belief propagation, Pearl 1982): the
    model of :class:`structlearn.engine.structures.Tree`, padded.

    Parameters
    ----------
    unary : Tensor, float32 or float64, shape (B, T, K)
        Log-potential of label k at node t of tree b (T: the most nodes of a tree; padding ignored).
    edge : Tensor, shape (K, K) or (B, T, K, K)
        ``edge[..., i, j]`` scores a child labelled i under its parent labelled j ("child, parent");
        (B, T, K, K): one matrix per child node (roots' rows ignored).
    parent : Tensor of int, shape (B, T)
        Local index of each node's parent within its tree, -1 for the root (padding ignored).
    lengths, mask
        Number of nodes of every tree, as for :class:`~structlearn.torch.LinearChain`.
    root_score : Tensor, shape (K,), optional
        Extra log-potential of the root's label; default 0.
    backend : {"auto", "numba", "torch"}
        As for :class:`~structlearn.torch.LinearChain`; the torch recursion runs level by level
        (depth O(tree height), all nodes of one depth at once).

    Raises
    ------
    ValueError
        Bad shapes or potentials, or parent pointers that are not a tree (out of range, self-parent,
        no root, two roots, a cycle; the message names the tree and node).

    Notes
    -----
    Time O(B·T·K²) for ``log_partition`` and ``marginals``. ``argmax``, ``kbest`` and ``sample`` run on
    the engine (CPU) whatever the backend.
    """

    def __init__(self, unary, edge, parent, *, lengths=None, mask=None, root_score=None, backend="auto"):
        unary = check_float_tensor(unary, "unary", ndim=3)
        B, T, K = unary.shape
        edge = check_float_tensor(edge, "edge", ndim=(2, 4))
        if tuple(edge.shape) not in ((K, K), (B, T, K, K)):
            raise ValueError(f"`edge` must have shape (K, K) = ({K}, {K}) or (B, T, K, K) = ({B}, {T}, {K}, "
                             f"{K}); got {tuple(edge.shape)}")
        self.unary, self.edge = unary, edge.to(unary.dtype)
        self.root_score = self._vector(root_score, "root_score", K, unary)
        self.lengths = resolve_lengths(lengths, mask, B, T, unary.device)
        self.backend = check_backend(backend, unary.device)
        self.n_labels = K
        self._pk_cache = None
        self._eng = None
        if not isinstance(parent, torch.Tensor):
            parent = torch.as_tensor(np.asarray(parent))
        if tuple(parent.shape) != (B, T) or parent.is_floating_point() or parent.dtype == torch.bool:
            raise ValueError(f"`parent` must be an integer tensor of shape (B, T) = ({B}, {T}); got "
                             f"{parent.dtype} {tuple(parent.shape)}")
        self.parent = parent.to(device=unary.device, dtype=torch.int64)
        pk = self._pk
        local = pk.pack_labels(self.parent)
        # validates the parent pointers (messages name the tree and node) and gives the topology
        topo = _EngineTree(np.zeros((pk.n_rows, 1)), np.zeros((1, 1)), local, lengths=pk.lengths)
        self._local = local
        self._gpar = np.where(local >= 0, local + np.repeat(pk.offsets[:-1], pk.lengths), -1)
        self._roots = topo.roots

    # -- plumbing -----------------------------------------------------------------------------------
    def _potentials(self):
        return self.unary, self.edge, self.root_score


    def _engine(self):
        if self._eng is None:
            pk = self._pk
            edge = self._np(self.edge) if self.edge.dim() == 2 else pk.pack(self.edge)
            self._eng = _EngineTree(pk.pack(self.unary), edge, self._local, lengths=pk.lengths,
                                    root_score=self._np(self.root_score))
        return self._eng

    def _levels(self):
        """Packed rows by depth (list, roots first), and per level the position of each node's
        parent within the level above. Depths by pointer jumping: O(N log height)."""
        if getattr(self, "_lv", None) is None:
            gpar = self._gpar
            # invariant: depth[n] = edges from n to anc[n] (to the root once anc[n] = -1)
            depth = (gpar >= 0).astype(np.int64)
            anc = gpar.copy()
            while np.any(anc >= 0):
                on = anc >= 0
                a = np.maximum(anc, 0)
                depth = np.where(on, depth + depth[a], depth)
                anc = np.where(on, anc[a], -1)
            levels = [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1 if depth.size else 0)]
            pos = np.zeros(gpar.shape[0], dtype=np.int64)
            for lv in levels:
                pos[lv] = np.arange(lv.shape[0])
            dev = self.unary.device
            self._lv = ([torch.from_numpy(lv).to(dev) for lv in levels],
                        [None] + [torch.from_numpy(pos[gpar[lv]]).to(dev) for lv in levels[1:]],
                        levels)
        return self._lv

    def _torch_log_partition(self, unary, edge, root_score):
        """Upward pass, deepest level first::

            inside[n, i] = unary[n, i] + Σ_{c ∈ children(n)} msg[c, i]
            msg[c, j]    = ⊕_i edge[c, i, j] + inside[c, i];   log Z = ⊕_i inside[root, i] + root_score[i]
        """
        B, T, K = unary.shape
        pk = self._pk
        idx = torch.from_numpy(pk.flat_index).to(unary.device)
        u = unary.reshape(B * T, K)[idx]
        e = edge if edge.dim() == 2 else edge.reshape(B * T, K, K)[idx]
        lv, ppos, levels = self._levels()
        log_z = unary.new_zeros(B)
        if not lv:
            return log_z
        msg = None
        for d in range(len(lv) - 1, -1, -1):
            ins = u[lv[d]]
            if msg is not None:
                ins = ins + ins.new_zeros(ins.shape).index_add(0, ppos[d + 1], msg)
            if d:
                ed = e if e.dim() == 2 else e[lv[d]]
                msg = logsumexp(ins[:, :, None] + ed, dim=1)
        seq = torch.from_numpy(np.repeat(np.arange(pk.B), pk.lengths)[levels[0]]).to(unary.device)
        return log_z.index_add(0, seq, logsumexp(ins + root_score, dim=-1))

    # -- log semiring -------------------------------------------------------------------------------
    def log_partition(self):
        """Log partition function (B,), differentiable; -inf if infeasible, 0 if empty. Time O(B·T·K²)."""
        if self.backend == "numba":
            return _EngineLogZ.apply(*self._potentials(), self)
        return self._torch_log_partition(*self._potentials())

    def _autograd(self, edge):
        B, T, K = self.unary.shape
        create = self._needs_graph()
        with torch.enable_grad():
            u, ed, rs = (p if create and p.requires_grad else p.detach().requires_grad_()
                         for p in self._potentials())
            e_in = ed if ed.dim() == 4 or edge != "full" else ed[None, None].expand(B, T, K, K)
            log_z = self._torch_log_partition(u, e_in, rs)
            gu, ge = torch.autograd.grad(log_z.sum(), [u, e_in], create_graph=create, allow_unused=True)
        if not create:
            log_z = log_z.detach()
        ge = torch.zeros_like(e_in) if ge is None else ge
        return log_z, (torch.zeros_like(u) if gu is None else gu), ge

    def marginals(self, edge="full"):
        """Posterior marginals.

        Parameters
        ----------
        edge : {"full", "sum", "none"}
            ``"full"``: (B, T, K, K), row c = P(y_c = i, y_parent(c) = j) (0 for roots and padding);
            ``"sum"``: per-tree sums (B, K, K); ``"none"``: None.

        Returns
        -------
        Marginals
            ``unary`` (B, T, K) P(y_n = k), linear space; ``edge`` as above.
        """
        if edge not in ("full", "sum", "none"):
            raise ValueError(f"`edge` must be one of ['full', 'none', 'sum']; got {edge!r}")
        if self.backend == "numba" and not self._needs_graph():
            return self._engine_marginals(edge)
        _, gu, ge = self._autograd("full" if edge != "none" else "none")
        if edge == "sum":
            ge = ge.sum(1)
        return Marginals(gu, None if edge == "none" else ge)

    def entropy(self):
        """Entropy H = log Z - E[s(y)] per tree (nats), (B,); differentiable. -inf if infeasible."""
        if self.backend == "numba" and not self._needs_graph():
            return torch.from_numpy(self._call("entropy")).to(self.unary)
        B, T, K = self.unary.shape
        log_z, mu, me = self._autograd("full")
        ed = self.edge if self.edge.dim() == 4 else self.edge[None, None].expand(B, T, K, K)
        ex = safe_dot(mu, self.unary, (1, 2)) + safe_dot(me, ed, (1, 2, 3))
        root = torch.from_numpy(np.maximum(self._roots - self._pk.offsets[:-1], 0)).to(self.unary.device)
        mroot = mu.gather(1, root[:, None, None].expand(B, 1, K))[:, 0]
        ex = ex + safe_dot(mroot, self.root_score[None], 1)
        return torch.where(log_z == float("-inf"), log_z, log_z - ex)

    # -- decoding (engine) --------------------------------------------------------------------------
    def max(self):
        """Score of the best labeling of every tree (B,) (-inf if infeasible; no gradient)."""
        return torch.from_numpy(self._call("max")).to(self.unary)

    def argmax(self):
        """Best labeling (max-product), int64 (B, T), -1 at padding; ``ValueError`` if infeasible."""
        return self._pk.unpack(self._call("argmax"), self.unary, fill=-1, dtype=torch.int64)

    # -- scores -------------------------------------------------------------------------------------
    def score(self, y):
        """Log-score s(y) of labelings ``y`` (B, T), shape (B,); differentiable."""
        B, T, K = self.unary.shape
        y, on, s = self._unary_score(y)
        if T == 0:
            return s
        child = on & (self.parent >= 0)
        yp = y.gather(1, torch.where(child, self.parent, torch.zeros_like(self.parent)).clamp(max=T - 1))
        if self.edge.dim() == 2:
            es = self.edge[y, yp]
        else:
            es = self.edge.reshape(B, T, K * K).gather(2, (y * K + yp)[:, :, None])[:, :, 0]
        s = s + torch.where(child, es, torch.zeros_like(es)).sum(1)
        isroot = on & (self.parent < 0)
        rs = self.root_score[y]
        return s + torch.where(isroot, rs, torch.zeros_like(rs)).sum(1)
