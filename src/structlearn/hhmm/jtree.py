r"""HHMM inference on its DBN without flattening: the chain of slice junction trees (Murphy & Paskin
2001 §5); the approximate factored frontier is :mod:`structlearn.hhmm.forward_filter`.

The DBN (:func:`structlearn.hhmm.dbn.dense_dbn`) has per slice the nodes Q^1..Q^D (level states,
context-indexed) and F^1..F^D (finished flags). The forward interface is Q_{t+1} (seed §5: "in the
case of an HHMM, the interface is all the Q nodes"), so one *1.5-slice* junction tree holds slice t's
Q and F nodes and slice t+1's Q nodes, with the factors

- A(Q_t): α_t (the message from the previous tree) + log p(o_t | Q_t);
- P(F^d_t | Q^{1:d}_t, F^{d+1}_t) and P(Q^d_{t+1} | Q^{1:d-1}_{t+1}, Q^d_t, F^d_t, F^{d+1}_t), d = 1..D;
- B(Q_{t+1}): β_{t+1} (backward pass).

The clique tree comes from a greedy elimination of slice t's 2D nodes (min weight, ties by min fill:
Kjærulff 1990's one-step look-ahead; the seed's choice), keeping the interface Q_{t+1} as the root
clique. Inference is forward–backward over the chain of these trees (:mod:`structlearn.engine.kernels.hhmm_jtree`):
a forward collect per slice gives α_{t+1}, a backward collect + distribute gives every clique's
posterior and so the smoothed family marginals EM needs. Time O(T·Σ_C |C|), about O(T·D·Q^{1.5D}) for
Q values per level (seed §5), against O(T·Q^{2D}) for the flattened chain; memory O(T·Q^D + Σ_C |C|).

The last slice uses the same tree with the transition factors replaced by the final clamp of the F
nodes (``finish="all"``: every F_T = 1) and β_{T+1} = -log nQ (the constant the now factor-free Q_{T+1}
sums to).
"""
import functools
import itertools
from collections import namedtuple

import numpy as np

from ..engine.kernels import hhmm_jtree as _k
from ..engine.semirings import LOG, MAX
from .dbn import dense_dbn

__all__ = ["SliceJunctionTree", "DBNInference", "slice_tree"]

#: Smoothing result of one batch: ``log_z`` (B,), ``gamma`` (N, nQ) P(Q_t = stack value),
#: ``fam_f`` (N, ΣF) per-token P(Q^{1:d}_t, F^d_t, F^{d+1}_t) (uniform F-table layout, levels
#: concatenated; None unless asked), ``acc_q`` / ``acc_f`` summed family marginals of the transition and
#: finish CPDs over the counted slices.
Smoothed = namedtuple("Smoothed", ["log_z", "gamma", "fam_f", "acc_q", "acc_f"])


def _grid_index(scope_dims, sub_axes, sub_dims, fixed=()):
    """Flat index into a table of dims ``sub_dims`` for every entry of a clique table of dims
    ``scope_dims``: sub axis k is clique axis ``sub_axes[k]``, or ``(axis, lookup)`` (the value
    ``lookup[value on that clique axis]``), or None (the constant ``fixed[k]``)."""
    idx = np.zeros(tuple(scope_dims), dtype=np.int64)
    stride = 1
    for k in range(len(sub_dims) - 1, -1, -1):
        ax = sub_axes[k]
        if ax is None:
            idx += fixed[k] * stride
        else:
            look = None
            if isinstance(ax, tuple):
                ax, look = ax
            shape = [1] * len(scope_dims)
            shape[ax] = scope_dims[ax]
            vals = np.arange(scope_dims[ax]) if look is None else np.asarray(look, dtype=np.int64)
            idx += (vals * stride).reshape(shape)
        stride *= sub_dims[k]
    return idx.ravel()


class SliceJunctionTree:
    """The clique tree of the 1.5-slice HHMM DBN for level dimensions ``dims`` (a structure only: the
    potentials are filled per parameter set by :meth:`potentials`).

    ``f_nodes="cut"`` (default): the D binary F nodes of slice t enter as one node C_t, the cut level
    (F^d_t = 1 exactly for d > C_t; D + 1 values — the only joint values of F_t with non-zero
    probability, since F^d = 1 needs F^{d+1} = 1). Variables q_d = d - 1, C = D, q'_d = D + d. The
    greedy order then eliminates Q^1_t, Q^2_t, … top-down with cliques {Q^{d:D}_t, C_t, Q'^{1:d}} of
    (D + 1)·Q^{D+1} entries: time O(T·D²·Q^{D+1}). ``f_nodes="binary"``: the seed's DBN literally, one
    binary node per F^d (variables q_d = d - 1, f_d = D + d - 1, q'_d = 2D + d - 1); its greedy cliques
    carry the 2^D joint F values (about Q^{1.5D}·2^D, seed §5).

    Attributes: ``cliques`` (list of variable tuples, the root last), ``parent`` (the root: -1), ``cA``
    (the clique holding Q_t), ``cR`` (the root, exactly Q_{t+1}), ``assign`` (factor name -> clique), flat
    arrays for the kernels, ``max_clique`` and ``total_size`` (Σ_C |C|, entries).
    """

    def __init__(self, dims, f_nodes="cut"):
        dims = tuple(int(n) for n in dims)
        D = len(dims)
        self.dims = dims
        self.D = D
        self.f_nodes = f_nodes
        cut = f_nodes == "cut"
        q = list(range(D))
        if cut:
            f = [D]
            qn = list(range(D + 1, 2 * D + 1))
            card = list(dims) + [D + 1] + list(dims)
        else:
            f = list(range(D, 2 * D))
            qn = list(range(2 * D, 3 * D))
            card = list(dims) + [2] * D + list(dims)
        self.card = card
        self.q, self.f, self.qn = q, f, qn
        scopes = {"A": tuple(q), "B": tuple(qn)}
        if cut:
            scopes["Fall"] = tuple(q + f)
        for d in range(D):
            if cut:
                scopes[("Q", d)] = tuple(qn[:d] + [q[d], f[0], qn[d]])
            else:
                below = [f[d + 1]] if d < D - 1 else []
                scopes[("F", d)] = tuple(q[:d + 1] + [f[d]] + below)
                scopes[("Q", d)] = tuple(qn[:d] + [q[d], f[d]] + below + [qn[d]])
        self.scopes = scopes
        n = len(card)
        adj = [set() for _ in range(n)]
        for sc in scopes.values():
            for a, b in itertools.combinations(sc, 2):
                adj[a].add(b)
                adj[b].add(a)
        # greedy elimination of slice t's nodes (Q_t, F_t); Q_{t+1} stays (the root clique)
        alive = set(range(n))
        todo = set(q + f)
        order, cl = [], []
        while todo:
            def key(v):
                nb = adj[v] & alive
                w = card[v] * int(np.prod([card[u] for u in nb]))
                fill = sum(1 for a, b in itertools.combinations(sorted(nb), 2) if b not in adj[a])
                return (w, fill, v)

            v = min(todo, key=key)
            nb = adj[v] & alive
            for a, b in itertools.combinations(nb, 2):
                adj[a].add(b)
                adj[b].add(a)
            order.append(v)
            cl.append(frozenset(nb | {v}))
            alive.discard(v)
            todo.discard(v)
        pos = {v: i for i, v in enumerate(order)}
        R = len(cl)
        cliques = cl + [frozenset(qn)]
        parent = []
        for i, v in enumerate(order):
            sep = cl[i] - {v}
            later = [pos[u] for u in sep if u in pos]
            parent.append(min(later) if later else R)
        parent.append(-1)
        # merge a clique into its parent when it is a subset of it
        rep = list(range(R + 1))

        def find(i):
            while rep[i] != i:
                i = rep[i]
            return i

        for i in range(R):
            if cliques[i] <= cliques[parent[i]]:
                rep[i] = parent[i]
        keep = [i for i in range(R + 1) if find(i) == i]
        new = {i: k for k, i in enumerate(keep)}
        self.cliques = [tuple(sorted(cliques[i])) for i in keep]
        self.parent = [new[find(parent[i])] if parent[i] >= 0 else -1 for i in keep]
        C = len(self.cliques)
        self.cR = C - 1
        self.assign = {}
        for name, sc in scopes.items():
            if name == "B":
                self.assign[name] = self.cR
                continue
            first = min(pos[u] for u in sc if u in pos)
            c = new[find(first)]
            assert set(sc) <= set(self.cliques[c])
            self.assign[name] = c
        self.cA = self.assign["A"]
        self.clique_dims = [tuple(card[v] for v in c) for c in self.cliques]
        sizes = [int(np.prod(cd)) for cd in self.clique_dims]
        self.clq_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.max_clique = max(sizes)
        self.total_size = int(self.clq_off[-1])
        # directed edges: 2k = child -> parent, 2k + 1 = parent -> child
        src, dst, msg_sizes, maps = [], [], [], []
        for c in range(C - 1):
            p = self.parent[c]
            sep = tuple(sorted(set(self.cliques[c]) & set(self.cliques[p])))
            sd = tuple(card[v] for v in sep)
            for a, b in ((c, p), (p, c)):
                src.append(a)
                dst.append(b)
                msg_sizes.append(int(np.prod(sd)))
                maps.append(self._map(a, sep, sd))
        nde = len(src)
        self.src = np.array(src, dtype=np.int64)
        self.dst = np.array(dst, dtype=np.int64)
        self.rev = np.array([de ^ 1 for de in range(nde)], dtype=np.int64)
        self.msg_off = np.concatenate([[0], np.cumsum(msg_sizes)]).astype(np.int64)
        self.in_ptr = np.zeros(C + 1, dtype=np.int64)
        ins = [[de for de in range(nde) if dst[de] == c] for c in range(C)]
        self.in_ptr[1:] = np.cumsum([len(x) for x in ins])
        self.in_list = np.array([de for x in ins for de in x], dtype=np.int64)
        extra = {"A": self._map(self.cA, tuple(q), dims), "B": self._map(self.cR, tuple(qn), dims)}
        cuts = np.arange(D + 1)
        for d in range(D):
            # families in the uniform layouts of dense_dbn: F (q_1..q_d, f_d, f_{d+1}),
            # Q (q'_1..q'_{d-1}, q_d, f_d, f_{d+1}, q'_d); f_{D+1} is the constant 1
            fdims = dims[:d + 1] + (2, 2)
            qdims = dims[:d] + (dims[d], 2, 2, dims[d])
            if cut:
                fd = (f[0], (cuts < d + 1).astype(np.int64))
                fb = (f[0], (cuts < d + 2).astype(np.int64))
                extra[("F", d)] = self._map(self.assign["Fall"], tuple(q[:d + 1]) + (fd, fb), fdims)
                extra[("Q", d)] = self._map(self.assign[("Q", d)], tuple(qn[:d]) + (q[d], fd, fb, qn[d]),
                                            qdims)
                continue
            fb = f[d + 1] if d < D - 1 else None
            extra[("F", d)] = self._map(self.assign[("F", d)], tuple(q[:d + 1]) + (f[d], fb), fdims,
                                        fixed=(0,) * (d + 2) + (1,))
            extra[("Q", d)] = self._map(self.assign[("Q", d)], tuple(qn[:d]) + (q[d], f[d], fb, qn[d]),
                                        qdims, fixed=(0,) * (d + 2) + (1, 0))
        self.extra_names = list(extra)
        allmaps = maps + [extra[k] for k in self.extra_names]
        self.map_off = np.concatenate([[0], np.cumsum([len(m) for m in allmaps])]).astype(np.int64)
        self.maps = np.concatenate(allmaps).astype(np.int64)
        self._extra_off = {k: int(self.map_off[nde + i]) for i, k in enumerate(self.extra_names)}
        self.mapA = extra["A"]
        self.mapB = extra["B"]
        self.up = self._schedule(self.cR)
        self.to_a = self._schedule(self.cA)
        self.from_a = self.rev[self.to_a[::-1]].copy()

    def family_clique(self, name):
        """The clique whose belief gives the family marginal ``name`` (("F" | "Q", d))."""
        if self.f_nodes == "cut" and name[0] == "F":
            return self.assign["Fall"]
        return self.assign[name]

    def _map(self, c, sub_vars, sub_dims, fixed=None):
        scope = self.cliques[c]
        axes = [None if v is None else (scope.index(v[0]), v[1]) if isinstance(v, tuple) else
                scope.index(v) for v in sub_vars]
        return _grid_index(self.clique_dims[c], axes, sub_dims, fixed or (0,) * len(sub_vars))

    def _schedule(self, root):
        """Directed edges of a collect towards ``root`` (post-order: every edge after those into its
        source)."""
        C = len(self.cliques)
        nbrs = [[] for _ in range(C)]
        for de in range(len(self.src)):
            nbrs[self.dst[de]].append(de)  # de enters dst
        out = []

        def visit(c, via):
            for de in nbrs[c]:
                if self.src[de] != via:
                    visit(self.src[de], c)
                    out.append(de)

        visit(root, -1)
        return np.array(out, dtype=np.int64)

    def potentials(self, fcpd, qcpd_mid, qcpd_last, fscore, with_f_last=True):
        """Clique log-potentials (mid slices, last slice) from the uniform CPD tables of
        :func:`~structlearn.hhmm.dbn.dense_dbn` (``fscore`` (D + 1, nQ): the summed F CPDs of
        every cut level, used by ``f_nodes="cut"``)."""
        D = self.D
        cut = self.f_nodes == "cut"
        cuts = np.arange(D + 1)
        out = []
        for qcpd, last in ((qcpd_mid, False), (qcpd_last, True)):
            psi = np.zeros(self.total_size)
            for name, c in self.assign.items():
                if name in ("A", "B"):
                    continue
                if name == "Fall" or name[0] == "F":
                    if last and not with_f_last:
                        continue
                    if name == "Fall":
                        tab = fscore.T.reshape(tuple(self.dims) + (D + 1,))
                    else:
                        d = name[1]
                        tab = fcpd[d] if d < D - 1 else fcpd[d][..., 1]
                else:
                    d = name[1]
                    if cut:
                        tab = qcpd[d][..., (cuts < d + 1).astype(int), (cuts < d + 2).astype(int), :]
                    else:
                        tab = qcpd[d] if d < D - 1 else qcpd[d][..., 1, :]
                sc = self.scopes[name]
                idx = self._map(c, sc, tuple(self.card[v] for v in sc))
                o = self.clq_off[c]
                psi[o:o + len(idx)] += tab.ravel()[idx]
            out.append(psi)
        return out

    def kernel_args(self):
        return (self.clq_off, self.msg_off, self.maps, self.map_off, self.src, self.rev, self.in_ptr,
                self.in_list)


@functools.lru_cache(maxsize=16)
def slice_tree(dims, f_nodes="cut"):
    """The (cached) :class:`SliceJunctionTree` of level dimensions ``dims`` (tuple)."""
    return SliceJunctionTree(dims, f_nodes)


def _last_qcpd(qcpd, clamp_all):
    out = []
    for q in qcpd:
        z = np.zeros_like(q)
        if clamp_all:
            z[..., 0, :, :] = -np.inf
        out.append(z)
    return out


def _cut_scores(dbn, D):
    """(D + 1, nQ): Σ_d log P(F^d | Q, F^{d+1}) for the F pattern of every cut level c (F^d = [d > c])."""
    nQ = int(np.prod(dbn.dims))
    out = np.zeros((D + 1, nQ))
    for c in range(D + 1):
        tot = np.zeros(tuple(dbn.dims))
        for d in range(D):
            fd, fb = int(d + 1 > c), int(d + 2 > c)
            tot = tot + dbn.fcpd[d][..., fd, fb][(Ellipsis,) + (None,) * (D - d - 1)]
        out[c] = tot.ravel()
    return out


class DBNInference:
    """Exact (junction tree) inference of one hierarchy (the factored frontier is the subclass
    :class:`structlearn.hhmm.forward_filter.FactoredFrontier`).

    Parameters
    ----------
    h : Hierarchy
    finish : {"all", "none"}

    All methods take ``log_b`` (N, P) log emission densities per production state and ragged
    ``offsets`` (B + 1,); results are in the estimator's layouts (configurations S, instances U).
    """

    def __init__(self, h, finish, f_nodes="cut"):
        self.h = h
        self.finish = finish
        self.dbn = dbn = dense_dbn(h)
        self.D = D = h.depth
        self.f_nodes = f_nodes
        self.fscore = _cut_scores(dbn, D)
        self.nQ = int(np.prod(dbn.dims))
        self.q_flat = np.concatenate([q.ravel() for q in dbn.qcpd])
        self.q_off = np.concatenate([[0], np.cumsum([q.size for q in dbn.qcpd])]).astype(np.int64)
        self.f_off = np.concatenate([[0], np.cumsum([f.size for f in dbn.fcpd])]).astype(np.int64)

    def __getattr__(self, name):
        # the slice tree and its potentials are built on first use (the factored frontier subclass,
        # models.hhmm_ff, needs neither)
        if name in ("tree", "psi_mid", "psi_last", "psi_last_max") and "dbn" in self.__dict__:
            dbn = self.dbn
            self.tree = slice_tree(tuple(int(n) for n in dbn.dims), self.f_nodes)
            clamp = self.finish == "all"
            qlast = _last_qcpd(dbn.qcpd, clamp)
            self.psi_mid, self.psi_last = self.tree.potentials(dbn.fcpd, dbn.qcpd, qlast, self.fscore)
            self.psi_last_max = self.psi_last if clamp else self.tree.potentials(
                dbn.fcpd, dbn.qcpd, qlast, self.fscore, with_f_last=False)[1]
            return self.__dict__[name]
        raise AttributeError(name)

    def _em(self, log_b):
        sp = self.dbn.stack_prod
        out = np.full((log_b.shape[0], self.nQ), -np.inf)
        ok = sp >= 0
        out[:, ok] = log_b[:, sp[ok]]
        return out

    def _forward(self, em, semiring):
        t = self.tree
        last = self.psi_last if semiring == LOG else self.psi_last_max
        b_last = np.full(self.nQ, -np.log(self.nQ) if semiring == LOG else 0.0)
        return _k.jtree_forward(self.psi_mid, last, *t.kernel_args(), t.up, t.cA, t.mapA, t.cR, t.mapB,
                                em, self.dbn.log_prior, b_last, semiring)

    def _log_norms(self, em):
        """Per-step log normalisers (T,) of the forward pass over one sequence's ``em`` (T, nQ)."""
        return self._forward(em, LOG)[1]

    def log_likelihood(self, log_b, offsets):
        em = self._em(log_b)
        return np.array([self._log_norms(em[a:b]).sum() if b > a else 0.0
                         for a, b in zip(offsets[:-1], offsets[1:])])

    def _filter_one(self, em):
        """(running log P(o_1:t) (T,), stack posteriors (T, nQ)) of one non-empty sequence's ``em``."""
        alpha, lc = self._forward(em, LOG)
        run = np.concatenate([[0.0], np.cumsum(lc[:-1])])
        j = alpha + em
        m = np.max(j, axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.log(np.exp(j - m).sum(axis=1))
            ll = run + s + m[:, 0]
            p = np.exp(j - (s[:, None] + m))
        p[~np.isfinite(ll)] = 0.0
        return ll, p

    def filter(self, log_b, offsets):
        """(config posteriors (N, S) P(s_t | o_1:t), running log P(o_1:t) (N,))."""
        em = self._em(log_b)
        post = np.zeros((em.shape[0], self.h.n_configs))
        ll = np.zeros(em.shape[0])
        for a, b in zip(offsets[:-1], offsets[1:]):
            if b == a:
                continue
            ll[a:b], p = self._filter_one(em[a:b])
            post[a:b] = p[:, self.dbn.cfg_stack]
        return post, ll

    def smooth(self, log_b, offsets, store_f=False):
        """Forward–backward over the chain of slice trees; see :data:`Smoothed`."""
        t = self.tree
        D = self.D
        em = self._em(log_b)
        N = em.shape[0]
        names = [("Q", d) for d in range(D)] + [("F", d) for d in range(D)]
        out_clq = np.array([t.family_clique(k) for k in names], dtype=np.int64)
        out_map = np.array([t._extra_off[k] for k in names], dtype=np.int64)
        sizes = [self.dbn.qcpd[d].size for d in range(D)] + [self.dbn.fcpd[d].size for d in range(D)]
        out_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # slices counted: transition families t < T (the last slice's are the clamp, not CPDs); finish
        # families all t under finish="all", t < T under "none" (when stored, the last slice is computed
        # for the posteriors and taken out of the counts below)
        f_to = 0 if self.finish == "all" or store_f else -1
        t_to = np.array([-1] * D + [f_to] * D, dtype=np.int64)
        t_from = np.zeros(2 * D, dtype=np.int64)
        store = np.array([False] * D + [bool(store_f)] * D)
        nq = int(out_off[D])
        store_off = np.maximum(out_off[:-1] - nq, 0).astype(np.int64)
        gamma = np.zeros((N, self.nQ))
        fam_f = np.zeros((N, int(out_off[-1]) - nq)) if store_f else None
        acc = np.zeros(int(out_off[-1]))
        log_z = np.zeros(len(offsets) - 1)
        b_last = np.full(self.nQ, -np.log(self.nQ))
        for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
            if b == a:
                continue
            e = em[a:b]
            alpha, lc = self._forward(e, LOG)
            log_z[i] = lc.sum()
            if not np.isfinite(log_z[i]):
                continue
            g, ac, per_t = _k.jtree_backward(self.psi_mid, self.psi_last, *t.kernel_args(), t.to_a,
                                             t.from_a, t.cA, t.mapA, t.cR, t.mapB, e, alpha, b_last,
                                             out_clq, out_map, out_off, t_from, t_to, store,
                                             store_off)
            if store_f and self.finish == "none":
                # the counted F families exclude the unconstrained last slice
                ac[nq:] -= per_t[-1]
            gamma[a:b] = g
            acc += ac
            if store_f:
                fam_f[a:b] = per_t
        return Smoothed(log_z, gamma, fam_f, acc[:nq], acc[nq:])

    # -- estimator-level outputs ----------------------------------------------------------------------
    def posteriors(self, log_b, offsets):
        """(log_z (B,), config (N, S), finished (D, N), instance_finish (N, U))."""
        h, dbn, D = self.h, self.dbn, self.D
        sm = self.smooth(log_b, offsets, store_f=True)
        N = sm.gamma.shape[0]
        finished = np.zeros((D, N))
        U = len(h.instance_paths)
        inst_fin = np.zeros((N, U))
        lev = h._inst_level
        for d in range(D):
            tab = sm.fam_f[:, self.f_off[d]:self.f_off[d + 1]].reshape(
                (N, int(np.prod(dbn.dims[:d + 1])), 2, 2))
            finished[d] = tab[:, :, 1, :].sum(axis=(1, 2))
            sel = np.flatnonzero(lev == d + 1)
            inst_fin[:, sel] = tab[:, :, :, 1][:, dbn.inst_grid[sel]].sum(axis=2)
        return sm.log_z, sm.gamma[:, dbn.cfg_stack], finished, inst_fin

    def expected_counts(self, log_b, offsets):
        """(θ-layout counts (n_params,), per-production emission weights (N, P), log_z (B,))."""
        h, dbn, D = self.h, self.dbn, self.D
        sm = self.smooth(log_b, offsets)
        if np.any(~np.isfinite(sm.log_z)):
            return None, None, sm.log_z
        counts = np.zeros(h.n_params)
        dims = dbn.dims
        firsts = offsets[:-1][np.diff(offsets) > 0]
        g1 = sm.gamma[firsts].sum(axis=0).reshape(tuple(dims))
        qo = np.concatenate([[0], np.cumsum([q.size for q in dbn.qcpd])])
        for d in range(D):
            n = dims[d]
            G = sm.acc_q[qo[d]:qo[d + 1]].reshape((-1, n, 2, 2, n))
            H = sm.acc_f[self.f_off[d]:self.f_off[d + 1]].reshape((-1, n, 2, 2))
            first = g1.sum(axis=tuple(range(d + 1, D))).reshape((-1, n))
            start_c = G[:, :, 1, 1, :].sum(axis=1) + first
            trans_c = G[:, :, 0, 1, :]
            end_c = H[:, :, 1, 1]
            for ctx, m in enumerate(dbn.ctx_sub[d]):
                if m < 0:
                    continue
                K = len(h.children[m])
                bs = h._base[m]
                counts[bs:bs + K] += start_c[ctx, :K]
                counts[bs + K:bs + K + K * K] += trans_c[ctx, :K, :K].ravel()
                counts[bs + K + K * K:bs + 2 * K + K * K] += end_c[ctx, :K]
        P = len(h.production_names)
        weights = np.zeros((sm.gamma.shape[0], P))
        sp = dbn.stack_prod
        ok = np.flatnonzero(sp >= 0)
        np.add.at(weights.T, sp[ok], sm.gamma[:, ok].T)
        return counts, weights, sm.log_z

    def _decode_start(self, log_b, offsets):
        """What decode starts from: the emissions (N, nQ), zeros for the configurations and cut levels
        (N,) and the best log-probs (B,), and the final scores (the top level finishes under
        ``finish="all"``, no finish is scored under ``"none"``)."""
        em = self._em(log_b)
        N = em.shape[0]
        final = np.full_like(self.fscore, -np.inf)
        if self.finish == "all":
            final[0] = self.fscore[0]
        else:
            final[self.D] = 0.0
        return em, np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64), np.zeros(len(offsets) - 1), final

    def decode(self, log_b, offsets):
        """(best log-prob (B,), configuration (N,), cut level (N,): the level d* whose sub-model moves
        after t; 0 at the last token under ``finish="all"``, -1 under ``"none"``)."""
        em, cfg, cut, best, final = self._decode_start(log_b, offsets)
        dims = np.asarray(self.dbn.dims, dtype=np.int64)
        for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
            if b == a:
                continue
            alpha, lc = self._forward(em[a:b], MAX)
            best[i] = lc.sum()
            if not np.isfinite(best[i]):
                raise ValueError(f"sequence {i} has probability 0 under the model; cannot decode it")
            q, c = _k.viterbi_traceback(alpha, em[a:b], self.fscore, final, dims, self.q_flat,
                                        self.q_off)
            cfg[a:b] = self.dbn.stack_cfg[q]
            cut[a:b] = c
            cut[b - 1] = 0 if self.finish == "all" else -1
        return best, cfg, cut
