r"""The per-shard interface of :class:`~structlearn.graph.adaboost_mrf.AdaBoostMRF`'s training.

Every quantity AdaBoost.MRF trains on is a sum over graphs (Tran, Phung & Venkatesh, "Learning Structured
Outputs from Partial Labels using Forest Ensemble", arXiv:1407.6432 (2014), cited as Tran et al. (2014)):
the re-weighted incomplete log-likelihood of a weak learner, the per-graph tree likelihoods
:math:`\log P_\tau(v_i | o_i)` that the data weights, condition (29) and the Hölder bound are made of, and
the Hölder bound of the parallel variant. So the graphs are cut into shards of whole graphs
(:class:`BoostShard`: per candidate tree, the unpenalised :class:`~structlearn.graph.objective.
GraphCLL` of that tree's CRF on the shard), module-level statistics functions ``f(params, shard) ->``
:class:`~structlearn.learning.shards.ShardStatistics` evaluate them per shard, and their sum — in this
process, in worker processes (``n_jobs``, :func:`shard_runner`) or on dask workers
(:mod:`structlearn.distributed`) — drives the boosting loop, which runs where ``fit`` runs:

* :func:`boost_summary_statistics`: what the loop needs before round 1 (observed nodes, the edge
  features each candidate tree uses, edges in no tree);
* :func:`learner_statistics`: value and gradient of the weighted data term of one tree (one CG evaluation);
* :func:`per_graph_statistics`: :math:`-\log P_\tau(v_i | o_i; w)` of every graph, at the graph's place in a
  (B,) vector (zeros elsewhere, so the sum over shards is the whole vector, exactly);
* :func:`holder_statistics`: the log-sum and softmax-weighted gradient of the parallel variant's bound on
  the shard, in the shard's own slot of an (S,) / (S, n_params) array; :func:`combine_holder_slots`
  merges the slots in log space (with one shard, bitwise the single-process value).

The per-graph vectors and data weights (B float64 each) stay on the client; a shard receives the
weights with every evaluation (8·B bytes) and sends back n_params (learner), B (per graph) or
S·(n_params + 1) (parallel) float64.
"""
from contextlib import contextmanager

import numpy as np
from scipy.special import logsumexp

from ..learning.shards import ProcessShards, ShardStatistics, map_shards

__all__ = ["BoostShard", "apply_statistics", "boost_summary_statistics", "learner_statistics",
           "per_graph_statistics", "holder_statistics", "holder_parts", "holder_value", "combine_holder_slots",
           "ShardedLearner", "ShardedHolderBound", "shard_runner", "free_parameters", "tree_batch",
           "pattern_counts", "MAX_COVER_TREES"]


MAX_COVER_TREES = 16     # the pattern counts of the summary have 2^L entries


def pattern_counts(masks):
    """Per pattern p (bit t set: the edge lies in candidate tree t), the number of edges with it: (2^L,)
    float64 for L = len(masks) ≤ :data:`MAX_COVER_TREES`, else (1,) zeros (no bookkeeping)."""
    L = len(masks)
    if L > MAX_COVER_TREES or L == 0:
        return np.zeros(1)
    code = np.zeros(np.asarray(masks[0]).shape[0], dtype=np.int64)
    for t, m in enumerate(masks):
        code |= np.asarray(m, dtype=np.int64) << t
    return np.bincount(code, minlength=2 ** L).astype(np.float64)


class BoostShard:
    """One shard of AdaBoost.MRF's training graphs: per candidate tree the data term of its CRF.

    Parameters
    ----------
    objectives : list of GraphCLL
        One per candidate tree (exact inference, ``c2=0``), on the shard's graphs with only that tree's
        edges (edge features scaled as inside the tree).
    batch : GraphBatch
        The shard's graphs (all edges), for the summary.
    masks : list of ndarray of bool, shape (E_shard,)
        The candidate trees' edges in ``batch``.
    labels : ndarray of int64, shape (N_shard,)
        Packed partial labels (-1 hidden).
    start : int
        Index of the shard's first graph among all B graphs.
    n_total : int
        B, the number of graphs of all shards.
    index, n_shards : int
        The shard's position and the number of shards S (the slots of :func:`holder_statistics`).
    """

    def __init__(self, objectives, batch, masks, labels, start, n_total, index, n_shards):
        self.objectives = objectives
        self.start, self.n_total = int(start), int(n_total)
        self.index, self.n_shards = int(index), int(n_shards)
        self.n_graphs = int(batch.n_graphs)
        ef = batch.edge_features
        self.summary = {
            "n_observed": np.array([float(np.count_nonzero(labels >= 0))]),
            "used_features": np.array([np.count_nonzero(ef[m] != 0, axis=0) for m in masks], dtype=np.float64)
            .reshape(len(masks), ef.shape[1]),
            "uncovered": np.array([float(np.sum(~np.any(masks, axis=0)))]),
            "n_edges": np.array([float(ef.shape[0])]),
            "tree_patterns": pattern_counts(masks),
        }

    def __sizeof__(self):
        """Bytes of the objectives' arrays (what dask weighs when it places an evaluation)."""
        return object.__sizeof__(self) + sum(o.__sizeof__() for o in self.objectives)

    def rows(self):
        """The slice of the shard's graphs among all B graphs."""
        return slice(self.start, self.start + self.n_graphs)


def apply_statistics(params, shard):
    """``function(p, shard)`` for ``params = (function, p)``: one per-shard function for
    :class:`~structlearn.learning.shards.ProcessShards`, which holds the shards and is told per call which
    statistics to compute."""
    function, p = params
    return function(p, shard)


def boost_summary_statistics(params, shard):
    """The shard's summary (``params`` unused): ``n_observed`` (1,) observed nodes, ``used_features``
    (L, F) per candidate tree and edge feature the number of tree edges where it is non-zero,
    ``uncovered`` (1,) edges in no tree, ``n_edges`` (1,), ``tree_patterns`` (2^L,) edges per set of
    candidate trees containing them (:func:`pattern_counts`); all additive (counts
    as float64)."""
    return ShardStatistics({k: v.copy() for k, v in shard.summary.items()}, 0.0, shard.n_graphs)


def learner_statistics(params, shard):
    """Value and gradient of the weighted data term of tree ``t``'s CRF on the shard,
    Σ_i D(i) (log Z_τ(o_i) − log Z_τ(v_i, o_i)) (Tran et al. (2014), Figure 8, step 2, without the
    penalty).

    ``params = (t, w, weights)``: candidate index, weights (n_params,) float64, data weights D (B,) of all
    graphs (the shard takes its rows). Returns ``ShardStatistics({"gradient": (n_params,)}, value)``.
    Cost: one free and one clamped upward–downward pass over the shard's trees, O(N·K²), plus
    O(N·D·K + E·F·K²).
    """
    t, w, weights = params
    objective = shard.objectives[t]
    objective.sample_weight = weights[shard.rows()]
    value, grad = objective.value_and_grad(w)
    return ShardStatistics({"gradient": grad}, float(value), shard.n_graphs)


def per_graph_statistics(params, shard):
    """``−log P_τt(v_i | o_i; w)`` of the shard's graphs (``params = (t, w)``), unweighted, at their places
    in ``stats["per_graph"]`` (B,) float64 (0 elsewhere and where nothing is observed); ``value`` is their
    sum. Cost: the passes of :func:`learner_statistics` without the gradient."""
    t, w = params
    per = shard.objectives[t].per_graph(w)
    out = np.zeros(shard.n_total)
    out[shard.rows()] = per
    return ShardStatistics({"per_graph": out}, float(per.sum()), shard.n_graphs)


def _per_graph_grad(obj, w):
    """Per-graph −log P(v_i | o_i) (B,) and its gradient (B, n_params) under a GraphCLL (no L2)."""
    G = np.zeros((obj.batch.n_graphs, obj.n_params))
    _, _, per = obj._evaluate(np.asarray(w, dtype=np.float64), need_grad=False, per_graph_grad=G)
    return per, G


def holder_parts(objectives, w, beta):
    r"""The parallel bound's parts on one set of graphs, with α_l = 1/L over the L trees ``objectives``:
    :math:`H_i = \sum_l \alpha_l \log P_{\tau_l}(v_i | o_i; w)`, returns
    ``(log Σ_i exp(−β H_i), Σ_i softmax_i(−β H) ∇(−H_i))`` (float, (n_params,)).
    Cost: per tree one clamped and one free pass plus a (D·K + F·K²) product per graph; memory
    O(B·n_params)."""
    L, B = len(objectives), objectives[0].batch.n_graphs
    H = np.zeros(B)
    G = np.zeros((B, objectives[0].n_params))
    for obj in objectives:
        per, grads = _per_graph_grad(obj, w)
        H -= per / L                    # H_i = Σ_l α_l log P_τl(v_i | o_i; w)
        G += grads / L                  # ∇(−H_i)
    lse = logsumexp(-beta * H)
    soft = np.exp(-beta * H - lse)
    return lse, soft @ G


def holder_value(lse, g, w, B, beta, c2):
    """``(J(w), ∇J(w))`` of :class:`~structlearn.graph.adaboost_mrf.ParallelHolderBound` from the parts
    of :func:`holder_parts` over all B graphs."""
    value = B / beta * (lse - np.log(B)) + c2 * float(w @ w)
    grad = B * g + 2 * c2 * w
    return float(value), grad


def holder_statistics(params, shard):
    """The parallel variant's parts (:func:`holder_parts`) on the shard, ``params = (w, beta)``, in the
    shard's slot: ``stats["log_sum"]`` (S,), ``stats["gradient"]`` (S, n_params), zeros in the other
    shards' slots (additive; :func:`combine_holder_slots` merges them)."""
    w, beta = params
    lse, g = holder_parts(shard.objectives, w, beta)
    log_sum = np.zeros(shard.n_shards)
    log_sum[shard.index] = lse
    grad = np.zeros((shard.n_shards, g.shape[0]))
    grad[shard.index] = g
    return ShardStatistics({"log_sum": log_sum, "gradient": grad}, 0.0, shard.n_graphs)


def combine_holder_slots(log_sum, grad):
    """The parts of all graphs from the shards' slots (S,), (S, n_params): ``lse = logsumexp(log_sum)``,
    ``g = Σ_s exp(log_sum[s] − lse) grad[s]``; with one shard exactly its own parts."""
    if log_sum.shape[0] == 1:
        return log_sum[0], grad[0]
    lse = logsumexp(log_sum)
    return lse, np.exp(log_sum - lse) @ grad


class ShardedLearner:
    """A weak learner's objective over the shards: Σ_i D(i) (log Z_τ(o_i) − log Z_τ(v_i, o_i)) + c2‖w‖²
    of tree ``t`` (the penalty added once, as :class:`GraphCLL` adds it), for :func:`minimize_cg`.

    ``run(function, params)`` is the sum over the shards (:func:`shard_runner`, or dask's shard map)."""

    def __init__(self, run, t, weights, c2):
        self.run, self.t, self.weights, self.c2 = run, t, weights, float(c2)

    def value_and_grad(self, w):
        total = self.run(learner_statistics, (self.t, w, self.weights))
        value, grad = total.value, total.stats["gradient"]
        if self.c2 > 0:
            value += self.c2 * float(w @ w)
            grad = grad + 2.0 * self.c2 * w
        return value, grad


class ShardedHolderBound:
    """:class:`~structlearn.graph.adaboost_mrf.ParallelHolderBound` over the shards (``run`` as in
    :class:`ShardedLearner`); B is the number of graphs of all shards."""

    def __init__(self, run, beta, c2, B):
        self.run, self.beta, self.c2, self.B = run, float(beta), float(c2), int(B)

    def value_and_grad(self, w):
        w = np.asarray(w, dtype=np.float64)
        total = self.run(holder_statistics, (w, self.beta)).stats
        lse, g = combine_holder_slots(total["log_sum"], total["gradient"])
        return holder_value(lse, g, w, self.B, self.beta, self.c2)


@contextmanager
def shard_runner(shards):
    """``run(function, params)``: the sum over the local ``shards`` of ``function(params, shard)`` — in this
    process for one shard (:func:`~structlearn.learning.shards.map_shards`), else in one worker process per
    shard that holds it for the whole fit (:class:`~structlearn.learning.shards.ProcessShards`; each call
    sends ``(function, params)``). The workers exit with the context."""
    if len(shards) == 1:
        yield lambda function, params: map_shards(function, params, shards)
        return
    with ProcessShards(shards, apply_statistics) as workers:
        yield lambda function, params: workers((function, params))


def free_parameters(used, D, K):
    """Indices (int64) of the parameters a tree CRF depends on: every node parameter (D·K) and the K×K block
    of every edge feature ``used`` ((F,) bool: non-zero on some tree edge of some graph)."""
    edge = np.flatnonzero(np.repeat(used, K * K)) + D * K
    return np.concatenate([np.arange(D * K), edge]).astype(np.int64)


def tree_batch(batch, mask, scale):
    """The graphs with only the edges ``mask``, each edge's features multiplied by ``scale[e]``."""
    sub = batch.with_edges(mask)
    s = scale[np.asarray(mask, dtype=bool)]
    if np.all(s == 1.0):
        return sub
    return type(sub)(sub.node_features, sub.edges, sub.edge_features * s[:, None], sub.lengths,
                     sub.edge_lengths)


class Restricted:
    """``objective`` as a function of the entries ``free`` of w, the others held at ``base``."""

    def __init__(self, objective, base, free):
        self.objective, self.base, self.free = objective, base, free

    def value_and_grad(self, z):
        w = self.base.copy()
        w[self.free] = z
        value, grad = self.objective.value_and_grad(w)
        return value, grad[self.free]
