"""Negative incomplete conditional log-likelihood of CRFs on general graphs (partial labels).

A graph sample is ``x = (node_features, edges, edge_features)`` and the CRF has node weights
``W_node`` (D, K) and edge weights ``W_edge`` (F, K, K)::

    unary[n]       = node_features[n] @ W_node                      (K,)
    pairwise[e]    = Σ_f edge_features[e, f] · W_edge[f]             (K, K)
    table[h]       = Σ_g factor_features[h, g] · W_r[g]              (K,)*r, h a factor of arity r

(higher-order factors of any arity r ≥ 1 when the samples carry them, one W_r (G, K^r) per arity r in
the batch; a graph without factors of some arity contributes nothing to that W_r).

With the visible labels v and hidden labels h of graph i (Tran, Phung & Venkatesh, "Learning
Structured Outputs from Partial Labels using Forest Ensemble", arXiv:1407.6432 (2014), eqs. (4)–(6))::

    L(w)  = Σ_i weight_i · (log Z(o_i) − log Z(v_i, o_i)) + c2 ‖w‖²
    ∇L(w) = Σ_i weight_i · (E_{p(x|o_i)}[F] − E_{p(h|v_i,o_i)}[F]) + 2 c2 w

where ``Z(v, o)`` sums over the hidden labels only (the graph with observed nodes clamped). Both
expectations are node and edge (pseudo-)marginals of :class:`~structlearn.engine.structures.FactorGraph`
(``"exact"``: junction tree / tree engine; ``"bp"``: loopy BP, Bethe log Z; ``"trw"``: tree-reweighted
BP, upper bound on log Z). With higher-order factors the free graph is the
:class:`~structlearn.engine.structures.graph_factors.FactorLayout` of the batch (nodes, edges as arity-2
factors, the factors) and the clamped one its :meth:`~structlearn.engine.structures.FactorGraph.constrain` to
the observed labels; the gradient of W_r is Σ_h features[h] ⊗ (free − clamped) factor beliefs of h.
Batches without higher-order factors keep the pairwise path (observed nodes folded into their hidden
neighbours). For ``"bp"``/``"trw"`` the gradient is that of the approximate objective at a
message fixed point (the marginals are the derivatives of the Bethe / TRW free energy). The graphs are
validated and packed by :func:`~structlearn.engine.structures.graphs.check_graphs`.
"""
import dataclasses
import warnings

import numpy as np

from ..engine.structures.factor_graph import BPOptions, FactorGraph
from ..engine.structures.graphs import GraphBatch, check_graph_labels, check_graphs
from ..learning.shards import ShardStatistics

__all__ = ["GraphCLL", "graph_potentials", "factor_potentials", "factor_weight_slices",
           "graph_objective_statistics"]

METHODS = ("exact", "bp", "trw")


def graph_potentials(w, batch, n_labels):
    """Unary (N, K) and pairwise (E, K, K) log-potentials of the flat weights ``w`` on ``batch``.

    ``w = concat(W_node.ravel(), W_edge.ravel()[, factor weights])`` with W_node (D, K) and W_edge
    (F, K, K) (the factor weights, :func:`factor_weight_slices`, are ignored here).
    Time O(N·D·K + E·F·K²).
    """
    D, F, K = batch.n_node_features, batch.n_edge_features, n_labels
    wn = w[:D * K].reshape(D, K)
    we = w[D * K:D * K + F * K * K].reshape(F, K * K)
    unary = batch.node_features @ wn
    pairwise = (batch.edge_features @ we).reshape(-1, K, K)
    return unary, pairwise


def factor_weight_slices(D, F, K, G, arities):
    """Where the factor weights W_r (G, K^r) of every arity r lie in the flat weights: dict r -> slice,
    after the D·K node and F·K² edge weights, arities in increasing order. Total length
    D·K + F·K² + Σ_r G·K^r is the ``stop`` of the last slice (or D·K + F·K² without arities)."""
    out, pos = {}, D * K + F * K * K
    for r in sorted(int(a) for a in arities):
        out[r] = slice(pos, pos + G * K ** r)
        pos += G * K ** r
    return out


def n_graph_params(D, F, K, G=0, arities=()):
    """D·K + F·K² + Σ_r G·K^r."""
    return D * K + F * K * K + sum(G * K ** int(r) for r in arities)


def factor_potentials(w, batch, n_labels, arities, layout):
    """Log-potential tables of the higher-order factors of ``batch``: dict r -> (H_r, K^r), C order over
    the scope, ``tables[r][h] = Σ_g factor_features[h, g] · W_r[g]`` for the arity-r factors in batch
    order (``layout.factor_rows[r]``). Time O(Σ_r H_r·G·K^r)."""
    K, G = n_labels, batch.n_factor_features
    sl = factor_weight_slices(batch.n_node_features, batch.n_edge_features, K, G, arities)
    return {r: batch.factor_features[rows] @ w[sl[r]].reshape(G, K ** r)
            for r, rows in layout.factor_rows.items()}


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
        ``(node_features (n, D), edges (m, 2)[, edge_features (m, F)])`` per graph, or with factors
        ``(node_features, edges, edge_features, factors, factor_features (H, G))`` (see
        :func:`~structlearn.engine.structures.graphs.check_graphs`).
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
    factor_arities : sequence of int, optional
        Arities that have factor weights W_r (default: those of the batch; a superset when the batch is
        one shard of a larger training set).
    n_factor_features : int, optional
        G (default: the batch's).

    Notes
    -----
    Objective (Tran et al. (2014), eqs. (4)–(6)), per graph i with visible labels v_i:
    :math:`L(w) = \sum_i \omega_i (\log Z(o_i) - \log Z(v_i, o_i)) + c_2 \|w\|^2`; all labels observed gives
    the supervised CLL, none observed contributes exactly 0 (such graphs are left out of the batch).
    Graphs are packed into one :class:`FactorGraph` per evaluation (plus its clamped copy). Cost per
    evaluation: two inference runs on the batch (bp/trw: O(n_iter·(E·K² + Σ deg²·K)); exact: O(N·K²) on
    forests, the junction-tree size otherwise) and O(N·D·K + E·F·K²) for potentials and gradient; with
    higher-order factors, O(n_iter·Σ_h r_h·K^{r_h}) more per message-passing run and
    O(Σ_h G·K^{r_h}) for their tables and gradient.

    Raises
    ------
    ValueError
        Unknown method, bad n_labels / c2 / sample_weight, malformed graphs or labels, factor arities
        of the batch missing from ``factor_arities``, a G that differs from ``n_factor_features``.

    Attributes
    ----------
    n_params : int
        D·K + F·K² + Σ_r G·K^r, layout :func:`factor_weight_slices`.
    factor_arities : tuple of int
    n_factor_features : int
        G (0 without factors).
    n_evals : int
    inference_converged : list of bool
        Per evaluation: whether message passing converged on every graph (always True for exact).
    """

    def __init__(self, X, y, n_labels, *, method="exact", options=None, c2=1.0, sample_weight=None,
                 warm_start=True, max_table_size=2**24, factor_arities=None, n_factor_features=None):
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {list(METHODS)}; got {method!r}")
        if not (isinstance(n_labels, (int, np.integer)) and n_labels >= 1):
            raise ValueError(f"`n_labels` must be a positive integer; got {n_labels!r}")
        if not (np.isfinite(c2) and c2 >= 0):
            raise ValueError(f"`c2` must be a non-negative number; got {c2!r}")
        self.batch = X if isinstance(X, GraphBatch) else check_graphs(X, allow_factors=True)
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
        self._check_factor_shape(factor_arities, n_factor_features)
        self.n_params = n_graph_params(b.n_node_features, b.n_edge_features, K, self.n_factor_features,
                                       self.factor_arities)
        obs = self.y >= 0
        n_obs = np.bincount(b.node_graph()[obs], minlength=b.n_graphs)
        self.active = np.flatnonzero(n_obs > 0)
        self.n_observed = n_obs
        sub = b.subset(self.active)
        self._sub = sub
        ysub = self.y[b.node_index(self.active)]
        self._ysub = ysub
        self._layout = sub.factor_layout(K) if sub.has_factors else None
        if self._layout is None:
            self._prepare_conditioning(sub, ysub)
        else:
            # clamping = the observed label alone allowed at every observed node (FactorGraph.constrain)
            self._allowed = np.ones((ysub.shape[0], K), dtype=bool)
            o = np.flatnonzero(ysub >= 0)
            self._allowed[o] = False
            self._allowed[o, ysub[o]] = True
            self._gid, self._egid = sub.node_graph(), sub.edge_graph()
        self._msgs = [None, None]
        self._rho = [None, None]
        self.n_evals = 0
        self.inference_converged = []
        self.last_per_graph = None

    def _check_factor_shape(self, arities, G):
        """The factor weight shapes: arities (those of the batch unless given, then a superset) and G."""
        b = self.batch
        have = b.factor_arities
        if arities is None:
            arities = have
        arities = tuple(sorted({int(r) for r in arities}))
        if any(r < 1 for r in arities):
            raise ValueError(f"`factor_arities` must be positive integers; got {arities}")
        missing = sorted(set(have) - set(arities))
        if missing:
            raise ValueError(f"the graphs have factors of arity {missing} but `factor_arities` = {arities} "
                             f"gives them no weights")
        if G is None:
            G = b.n_factor_features
        elif b.has_factors and b.n_factor_features != G:
            raise ValueError(f"the graphs have {b.n_factor_features} factor features but "
                             f"`n_factor_features` = {G}")
        if arities and not G:
            raise ValueError(f"factors of arities {arities} need `n_factor_features` ≥ 1; got {G}")
        self.factor_arities, self.n_factor_features = arities, int(G) if arities else 0

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
                self._rho[slot] = (_edge_appearance(graph) if self._layout is None
                                   else self._layout.trw_weights(options))
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

    def _pairwise_pass(self, w):
        """Free and clamped inference of a batch without higher-order factors (the folded clamped graph):
        (log Z (B,), log Z(v, o) (B,), converged, gradient blocks)."""
        sub, K = self._sub, self.n_labels
        unary, pairwise = graph_potentials(w, sub, K)
        g = sub.factor_graph(unary, pairwise)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            full = self._infer(g, 0)
            c_logz, c_unary, c_edge, c_conv = self._clamped(unary, pairwise)
        D, F = sub.n_node_features, sub.n_edge_features
        blocks = [(sub.node_features, full.unary - c_unary, self._gid, slice(0, D * K)),
                  (sub.edge_features, (full.edge - c_edge).reshape(-1, K * K), self._egid,
                   slice(D * K, D * K + F * K * K))]
        return full.log_z, c_logz, bool(full.converged.all() and c_conv), blocks

    def _factor_pass(self, w):
        """Free and clamped (:meth:`FactorGraph.constrain`) inference on the factor graph of nodes, edges
        and higher-order factors: (log Z, log Z(v, o), converged, gradient blocks)."""
        sub, K, lay = self._sub, self.n_labels, self._layout
        unary, pairwise = graph_potentials(w, sub, K)
        g = lay.graph(unary, pairwise, factor_potentials(w, sub, K, self.factor_arities, lay))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            full = self._infer(g, 0)
            clamped = self._infer(g.constrain(self._allowed), 1)
        D, F = sub.n_node_features, sub.n_edge_features
        blocks = [(sub.node_features, full.unary - clamped.unary, self._gid, slice(0, D * K)),
                  (sub.edge_features, lay.edge_beliefs(full) - lay.edge_beliefs(clamped), self._egid,
                   slice(D * K, D * K + F * K * K))]
        sl = factor_weight_slices(D, F, K, self.n_factor_features, self.factor_arities)
        fgid = sub.factor_graph_index()
        for r, rows in lay.factor_rows.items():
            blocks.append((sub.factor_features[rows], lay.factor_beliefs(full, r) - lay.factor_beliefs(clamped, r),
                           fgid[rows], sl[r]))
        conv = bool(full.converged.all() and clamped.converged.all())
        return full.log_z, clamped.log_z, conv, blocks

    def _evaluate(self, w, need_grad=True, per_graph_grad=None):
        self.n_evals += 1
        B = self.batch.n_graphs
        per = np.zeros(B)
        grad = np.zeros(self.n_params)
        if self.active.size == 0:
            self.inference_converged.append(True)
            return 0.0, grad, per
        run = self._pairwise_pass if self._layout is None else self._factor_pass
        full_logz, c_logz, conv, blocks = run(w)
        self.inference_converged.append(conv)
        diff = full_logz - c_logz
        per[self.active] = diff
        self.last_per_graph = per
        wt = self._sample_weight[self.active]
        keep = wt > 0
        value = float(np.sum(wt[keep] * diff[keep]))
        if not np.isfinite(value):
            j = int(np.flatnonzero(~np.isfinite(diff))[0])
            raise ValueError(f"the objective is not finite at graph {int(self.active[j])} (log Z = "
                             f"{full_logz[j]:.6g}, clamped log Z = {c_logz[j]:.6g}); the weights are too "
                             f"large (raise c2)")
        if need_grad:
            for feat, dmu, gid, sl in blocks:
                grad[sl] = (feat.T @ (dmu * wt[gid][:, None])).ravel()
        if per_graph_grad is not None:
            # unweighted gradient of every graph's term, (B, n_params): one small product per graph
            n_act = self.active.size
            for feat, dmu, gid, sl in blocks:
                off = np.searchsorted(gid, np.arange(n_act + 1))
                for j, b in enumerate(self.active):
                    per_graph_grad[b, sl] = (feat[off[j]:off[j + 1]].T @ dmu[off[j]:off[j + 1]]).ravel()
        return value, grad, per

    def value_and_grad(self, w):
        """Return ``(L(w), ∇L(w))`` for flat weights ``w`` of shape (n_params,)."""
        w = np.asarray(w, dtype=np.float64)
        if w.shape != (self.n_params,):
            raise ValueError(f"`w` must have shape ({self.n_params},) = D·K + F·K² + Σ_r G·K^r; got "
                             f"{w.shape}")
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
