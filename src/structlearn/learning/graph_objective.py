"""Negative incomplete conditional log-likelihood of CRFs on general graphs (partial labels).

A graph sample is ``x = (node_features, edges, edge_features)`` and the CRF has node weights
``W_node`` (D, K) and edge weights ``W_edge`` (F, K, K)::

    unary[n]       = node_features[n] @ W_node                      (K,)
    pairwise[e]    = Σ_f edge_features[e, f] · W_edge[f]             (K, K)

With the visible labels v and hidden labels h of graph i (Tran, Phung & Venkatesh, "Learning
Structured Outputs from Partial Labels using Forest Ensemble", arXiv:1407.6432 (2014), eqs. (4)–(6))::

    L(w)  = Σ_i weight_i · (log Z(o_i) − log Z(v_i, o_i)) + c2 ‖w‖²
    ∇L(w) = Σ_i weight_i · (E_{p(x|o_i)}[F] − E_{p(h|v_i,o_i)}[F]) + 2 c2 w

where ``Z(v, o)`` sums over the hidden labels only (the graph with observed nodes clamped). Both
expectations are node and edge (pseudo-)marginals of :class:`~structlearn.structures.FactorGraph`
(``"exact"``: junction tree / tree engine; ``"bp"``: loopy BP, Bethe log Z; ``"trw"``: tree-reweighted
BP, upper bound on log Z). For ``"bp"``/``"trw"`` the gradient is that of the approximate objective at a
message fixed point (the marginals are the derivatives of the Bethe / TRW free energy). The graphs are
validated and packed by :func:`~structlearn.structures.graphs.check_graphs`.
"""
import dataclasses
import warnings

import numpy as np

from ..structures.factor_graph import BPOptions, FactorGraph
from ..structures.graphs import GraphBatch, check_graph_labels, check_graphs
from .shards import ShardStatistics

__all__ = ["GraphCLL", "graph_potentials", "graph_objective_statistics"]

METHODS = ("exact", "bp", "trw")


def graph_potentials(w, batch, n_labels):
    """Unary (N, K) and pairwise (E, K, K) log-potentials of the flat weights ``w`` on ``batch``.

    ``w = concat(W_node.ravel(), W_edge.ravel())`` with W_node (D, K) and W_edge (F, K, K).
    Time O(N·D·K + E·F·K²).
    """
    D, F, K = batch.n_node_features, batch.n_edge_features, n_labels
    wn = w[:D * K].reshape(D, K)
    we = w[D * K:].reshape(F, K * K)
    unary = batch.node_features @ wn
    pairwise = (batch.edge_features @ we).reshape(-1, K, K)
    return unary, pairwise


def _edge_appearance(graph):
    """TRW edge appearance probabilities of a packed FactorGraph, computed once per distinct graph.

    Graphs with the same node count and edge list (e.g. many grids of one size) share ρ; time
    O(Σ_distinct components n³).
    """
    rho = np.ones(graph.n_edges)
    seen = {}
    for b in range(graph.batch_size):
        e0, e1 = graph.edge_offsets[b], graph.edge_offsets[b + 1]
        if e1 == e0:
            continue
        edges = graph.edges[e0:e1]
        key = (int(graph.lengths[b]), edges.tobytes())
        if key not in seen:
            n = int(graph.lengths[b])
            seen[key] = FactorGraph(np.zeros((n, 1)), edges, np.zeros((1, 1))).edge_appearance()
        rho[e0:e1] = seen[key]
    return rho


class GraphCLL:
    r"""Negative incomplete log-likelihood of a graph CRF with partial labels, value and gradient.

    Parameters
    ----------
    X : list of graph samples or GraphBatch
        ``(node_features (n, D), edges (m, 2)[, edge_features (m, F)])`` per graph.
    y : list of int arrays, shape (n,) each, or packed int array (N,) when X is a GraphBatch
        Labels 0..K-1, -1 for a hidden node.
    n_labels : int
        K.
    method : {"exact", "bp", "trw"}
        Inference back end (:meth:`FactorGraph.infer`).
    options : BPOptions, preset name or dict, optional
        Message-passing options; default ``tol=1e-5, max_iter=200`` (sequential schedule).
    c2 : float
        L2 coefficient (CRFsuite scaling c2‖w‖²).
    sample_weight : array-like of float, shape (B,), optional
        Weight of every graph's term (AdaBoost.MRF's reweighted likelihood); settable attribute.
    warm_start : bool
        Start message passing from the messages of the previous evaluation (bp/trw). Fast, but makes the
        approximate objective depend (within ``tol``) on the evaluation history.
    max_table_size : int
        Junction-tree budget of ``"exact"``.

    Notes
    -----
    Objective (Tran et al. (2014), eqs. (4)–(6)), per graph i with visible labels v_i:
    :math:`L(w) = \sum_i \omega_i (\log Z(o_i) - \log Z(v_i, o_i)) + c_2 \|w\|^2`; all labels observed gives
    the supervised CLL, none observed contributes exactly 0 (such graphs are left out of the batch).
    Graphs are packed into one :class:`FactorGraph` per evaluation (plus its clamped copy). Cost per
    evaluation: two inference runs on the batch (bp/trw: O(n_iter·(E·K² + Σ deg²·K)); exact: O(N·K²) on
    forests, the junction-tree size otherwise) and O(N·D·K + E·F·K²) for potentials and gradient.

    Attributes
    ----------
    n_params : int
        D·K + F·K².
    n_evals : int
    inference_converged : list of bool
        Per evaluation: whether message passing converged on every graph (always True for exact).
    """

    def __init__(self, X, y, n_labels, *, method="exact", options=None, c2=1.0, sample_weight=None,
                 warm_start=True, max_table_size=2**24):
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {list(METHODS)}; got {method!r}")
        if not (isinstance(n_labels, (int, np.integer)) and n_labels >= 1):
            raise ValueError(f"`n_labels` must be a positive integer; got {n_labels!r}")
        if not (np.isfinite(c2) and c2 >= 0):
            raise ValueError(f"`c2` must be a non-negative number; got {c2!r}")
        self.batch = X if isinstance(X, GraphBatch) else check_graphs(X)
        self.n_labels = K = int(n_labels)
        self.y = np.asarray(y, dtype=np.int64) if isinstance(X, GraphBatch) else \
            check_graph_labels(y, self.batch, K)
        self.method = method
        self.options = BPOptions.resolve(method, options)
        if self.options is not None:
            self.options._checked()
        self.c2 = float(c2)
        self.warm_start = warm_start
        self.max_table_size = max_table_size
        self.sample_weight = sample_weight
        b = self.batch
        self.n_params = b.n_node_features * K + b.n_edge_features * K * K
        obs = self.y >= 0
        n_obs = np.bincount(b.node_graph()[obs], minlength=b.n_graphs)
        self.active = np.flatnonzero(n_obs > 0)
        self.n_observed = n_obs
        sub = b.subset(self.active)
        self._sub = sub
        ysub = self.y[b.node_index(self.active)]
        self._ysub = ysub
        self._prepare_conditioning(sub, ysub)
        self._msgs = [None, None]
        self._rho = [None, None]
        self.n_evals = 0
        self.inference_converged = []
        self.last_per_graph = None

    def _prepare_conditioning(self, sub, ysub):
        """Index arrays of the conditioned graph: hidden nodes and the edges between them.

        Clamping the observed nodes of a pairwise model gives the model of the hidden nodes alone,
        with every edge to an observed node folded into its hidden end's unary potential, and the
        potentials among observed nodes a constant (exact for every back end; for BP the messages
        out of a clamped node are constant, so BP on the clamped graph is BP on this one).
        """
        obs = ysub >= 0
        self._obs = obs
        gid, egid = sub.node_graph(), sub.edge_graph()
        gu, gv = sub.global_edges()
        self._gu, self._gv = gu, gv
        hid = np.flatnonzero(~obs)
        self._hid = hid
        # local index of each hidden node in its graph's reduced node list
        hlen = np.bincount(gid[hid], minlength=sub.n_graphs).astype(np.int64)
        hoff = np.concatenate([[0], np.cumsum(hlen)])
        local = np.full(obs.shape[0], -1, dtype=np.int64)
        local[hid] = np.arange(hid.size) - hoff[gid[hid]]
        ou, ov = obs[gu], obs[gv]
        self._e_hh = np.flatnonzero(~ou & ~ov)
        self._e_oh = np.flatnonzero(ou & ~ov)        # u observed, v hidden
        self._e_ho = np.flatnonzero(~ou & ov)        # u hidden, v observed
        self._e_oo = np.flatnonzero(ou & ov)
        # reduced batch: graphs with at least one hidden node
        self._rgraphs = np.flatnonzero(hlen > 0)
        hh_len = np.bincount(egid[self._e_hh], minlength=sub.n_graphs).astype(np.int64)
        self._r_lengths = hlen[self._rgraphs]
        self._r_edge_lengths = hh_len[self._rgraphs]
        self._r_edges = np.stack([local[gu[self._e_hh]], local[gv[self._e_hh]]], axis=1).reshape(-1, 2)
        self._gid, self._egid = gid, egid

    def __sizeof__(self):
        """Bytes of the arrays held (the packed graphs, labels and index arrays): what dask's scheduler
        weighs when it decides where an evaluation on this shard runs."""
        def arrays(obj):
            return sum(v.nbytes for v in vars(obj).values() if isinstance(v, np.ndarray))

        return object.__sizeof__(self) + arrays(self) + arrays(self.batch) + arrays(self._sub)

    @property
    def sample_weight(self):
        return self._sample_weight

    @sample_weight.setter
    def sample_weight(self, value):
        B = self.batch.n_graphs
        if value is None:
            self._sample_weight = np.ones(B)
            return
        sw = np.asarray(value, dtype=np.float64)
        if sw.shape != (B,) or not np.all(np.isfinite(sw)) or np.any(sw < 0):
            raise ValueError(f"`sample_weight` must be {B} finite non-negative numbers (one per graph); got "
                             f"shape {sw.shape}")
        self._sample_weight = sw

    def _infer(self, graph, slot):
        if self.method == "exact":
            return graph.infer("exact", max_table_size=self.max_table_size)
        options = self.options
        if self.method == "trw" and options.rho is None:
            # ρ depends on the graph only: computed once per graph structure, reused every evaluation
            if self._rho[slot] is None:
                self._rho[slot] = _edge_appearance(graph)
            options = dataclasses.replace(options, rho=self._rho[slot])
        init = self._msgs[slot] if self.warm_start else None
        res = graph.infer(self.method, options=options, init=init)
        if self.warm_start:
            self._msgs[slot] = res.messages
        return res

    def _clamped(self, unary, pairwise):
        """log Z(v, o) per active graph and the clamped node (N, K) and edge (E, K, K) marginals."""
        sub, y, obs = self._sub, self._ysub, self._obs
        gu, gv = self._gu, self._gv
        B = sub.n_graphs
        log_z = np.zeros(B)
        oi = np.flatnonzero(obs)
        np.add.at(log_z, self._gid[oi], unary[oi, y[oi]])
        e = self._e_oo
        np.add.at(log_z, self._egid[e], pairwise[e, y[gu[e]], y[gv[e]]])
        node = np.zeros_like(unary)
        node[oi, y[oi]] = 1.0
        edge = np.zeros_like(pairwise)
        edge[e, y[gu[e]], y[gv[e]]] = 1.0
        converged = True
        if self._hid.size:
            ru = unary[self._hid].copy()
            pos = np.full(obs.shape[0], -1, dtype=np.int64)
            pos[self._hid] = np.arange(self._hid.size)
            e = self._e_oh
            np.add.at(ru, pos[gv[e]], pairwise[e, y[gu[e]], :])
            e = self._e_ho
            np.add.at(ru, pos[gu[e]], pairwise[e, :, y[gv[e]]])
            rg = FactorGraph(ru, self._r_edges, pairwise[self._e_hh], lengths=self._r_lengths,
                             edge_lengths=self._r_edge_lengths)
            res = self._infer(rg, 1)
            converged = bool(res.converged.all())
            log_z[self._rgraphs] += res.log_z
            node[self._hid] = res.unary
            edge[self._e_hh] = res.edge
            e = self._e_oh
            edge[e, y[gu[e]], :] = res.unary[pos[gv[e]]]
            e = self._e_ho
            edge[e, :, y[gv[e]]] = res.unary[pos[gu[e]]]
        return log_z, node, edge, converged

    def per_graph(self, w):
        """−log P(v_i | o_i) = log Z(o_i) − log Z(v_i, o_i) of every graph, shape (B,).

        0 where nothing is observed; unweighted, without the L2 term.
        """
        return self._evaluate(np.asarray(w, dtype=np.float64), need_grad=False)[2]

    def _evaluate(self, w, need_grad=True, per_graph_grad=None):
        self.n_evals += 1
        sub, K = self._sub, self.n_labels
        B = self.batch.n_graphs
        per = np.zeros(B)
        grad = np.zeros(self.n_params)
        if self.active.size == 0:
            self.inference_converged.append(True)
            return 0.0, grad, per
        unary, pairwise = graph_potentials(w, sub, K)
        g = sub.factor_graph(unary, pairwise)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            full = self._infer(g, 0)
            c_logz, c_unary, c_edge, c_conv = self._clamped(unary, pairwise)
        self.inference_converged.append(bool(full.converged.all() and c_conv))
        diff = full.log_z - c_logz
        per[self.active] = diff
        self.last_per_graph = per
        wt = self._sample_weight[self.active]
        keep = wt > 0
        value = float(np.sum(wt[keep] * diff[keep]))
        if not np.isfinite(value):
            bad = int(self.active[np.flatnonzero(~np.isfinite(diff))[0]])
            raise ValueError(f"the objective is not finite at graph {bad} (log Z = {full.log_z[bad]:.6g}, "
                             f"clamped log Z = {c_logz[bad]:.6g}); the weights are too large "
                             f"(raise c2)")
        if need_grad:
            D = sub.n_node_features
            wn, we = wt[self._gid], wt[self._egid]
            dmu = (full.unary - c_unary) * wn[:, None]
            dpair = (full.edge - c_edge).reshape(-1, K * K) * we[:, None]
            grad[:D * K] = (sub.node_features.T @ dmu).ravel()
            grad[D * K:] = (sub.edge_features.T @ dpair).ravel()
        if per_graph_grad is not None:
            # unweighted gradient of every graph's term, (B, n_params): one small product per graph
            D = sub.n_node_features
            dmu = full.unary - c_unary
            dpair = (full.edge - c_edge).reshape(-1, K * K)
            no, eo = sub.offsets, sub.edge_offsets
            for j, b in enumerate(self.active):
                per_graph_grad[b, :D * K] = (sub.node_features[no[j]:no[j + 1]].T @ dmu[no[j]:no[j + 1]]).ravel()
                per_graph_grad[b, D * K:] = (sub.edge_features[eo[j]:eo[j + 1]].T @ dpair[eo[j]:eo[j + 1]]).ravel()
        return value, grad, per

    def value_and_grad(self, w):
        """Return ``(L(w), ∇L(w))`` for flat weights ``w`` of shape (n_params,)."""
        w = np.asarray(w, dtype=np.float64)
        if w.shape != (self.n_params,):
            raise ValueError(f"`w` must have shape ({self.n_params},) = D·K + F·K²; got {w.shape}")
        value, grad, _ = self._evaluate(w)
        if self.c2 > 0:
            value += self.c2 * float(w @ w)
            grad = grad + 2.0 * self.c2 * w
        return value, grad

    def __call__(self, w, g=None):
        """Optimiser interface of :mod:`structlearn.learning.optimizers`: value, gradient written into g."""
        value, grad = self.value_and_grad(w)
        if g is not None:
            g[...] = grad
        return value


def graph_objective_statistics(w, objective):
    """Statistics of one shard of graphs at weights ``w`` (the per-shard function of
    :mod:`structlearn.learning.shards` for graph CRFs): ``objective`` is the shard's data term, a
    :class:`GraphCLL` built with ``c2=0`` (Σ_i ω_i (log Z(o_i) − log Z(v_i, o_i)) over its graphs).

    Returns a :class:`~structlearn.learning.shards.ShardStatistics`: ``stats["gradient"]`` (n_params,),
    ``stats["unconverged"]`` (1,) 1.0 when message passing did not converge on every graph of the
    shard, ``value`` the data term; additive across shards (the penalty c2‖w‖² is added once to the
    total by :class:`~structlearn.learning.shards.ShardedObjective`). Cost: two inference runs on the
    shard (clamped and free). With ``warm_start`` (bp/trw) the shard keeps its messages for the next
    evaluation, in the process that holds it.
    """
    w = np.asarray(w, dtype=np.float64)
    g = np.zeros_like(w)
    value = objective(w, g)
    unconverged = 0.0 if objective.inference_converged[-1] else 1.0
    return ShardStatistics({"gradient": g, "unconverged": np.array([unconverged])}, float(value),
                           int(objective.batch.n_graphs))
