"""``AdaBoostMRF``: boosted spanning-tree CRFs (Markov random forests) for loopy graphs, partial labels.

Tran, Phung & Venkatesh, "Learning Structured Outputs from Partial Labels using Forest Ensemble",
arXiv:1407.6432 (2014), §4 and Figure 8 (cited below as Tran et al. (2014)).
"""
import math
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from .objective import GraphCLL, graph_potentials
from ..learning.optimizers import minimize_cg
from ..engine.structures.factor_graph import BPOptions
from ..engine.structures.graphs import check_graph_labels, check_graphs, two_level_trees
from ._adaboost_sequential import fit_sequential, holder_alpha_step
from ._adaboost_shards import (BoostShard, ShardedHolderBound, boost_summary_statistics, free_parameters,
                               holder_parts, holder_value, shard_runner,
                               tree_batch)
from ..learning.training import training
from ..learning.restarts import check_n_jobs, n_blocks
from .graph_crf import GraphCRF, GraphEstimatorMixin, check_choice, check_int, check_number

__all__ = ["AdaBoostMRF", "ParallelHolderBound", "holder_alpha_step", "two_level_chain_trees", "top_chain_tree",
           "bottom_chain_tree"]


def top_chain_tree(x):
    """Edge indices of the top chain + vertical edges of a 2-level DCRF sample (a spanning tree).

    ``x = (node_features (2T, D), edges (3T − 2, 2)[, ...])`` with edges in the order of
    :func:`~structlearn.engine.structures.graphs.two_level_edges`; T = n_nodes // 2. The first tree of
    :func:`~structlearn.engine.structures.graphs.two_level_trees`.
    """
    return two_level_trees(np.asarray(x[0]).shape[0] // 2)[0]


def bottom_chain_tree(x):
    """Edge indices of the bottom chain + vertical edges of a 2-level DCRF sample (see :func:`top_chain_tree`)."""
    return two_level_trees(np.asarray(x[0]).shape[0] // 2)[1]


def two_level_chain_trees():
    """The two spanning trees of Tran et al. (2014), Figure 4, for 2-level DCRFs, as ``trees`` of
    :class:`AdaBoostMRF`: ``[top_chain_tree, bottom_chain_tree]``."""
    return [top_chain_tree, bottom_chain_tree]


def _edge_lookup(batch):
    """Global node ends, and a function mapping global (u, v) pairs to packed edge ids."""
    gu, gv = batch.global_edges()
    N = int(batch.offsets[-1])
    key = np.minimum(gu, gv) * N + np.maximum(gu, gv)
    order = np.argsort(key, kind="stable")

    def ids(u, v):
        k = np.minimum(u, v) * N + np.maximum(u, v)
        return order[np.searchsorted(key[order], k)]

    return gu, gv, N, ids


def _spanning_forest(batch, weights):
    """Boolean mask (E,) of a minimum-weight spanning forest of the packed batch (weights > 0)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    gu, gv, N, ids = _edge_lookup(batch)
    mask = np.zeros(gu.shape[0], dtype=bool)
    if gu.size == 0:
        return mask
    # parallel edges: keep the lightest (coo sums duplicates, so reduce first)
    key = np.minimum(gu, gv) * N + np.maximum(gu, gv)
    order = np.lexsort((weights, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    keep = order[first]
    A = coo_matrix((weights[keep], (np.minimum(gu, gv)[keep], np.maximum(gu, gv)[keep])), shape=(N, N))
    T = minimum_spanning_tree(A.tocsr()).tocoo()
    lookup = dict(zip(key[keep].tolist(), keep.tolist()))
    for a, b in zip(T.row.tolist(), T.col.tolist()):
        mask[lookup[min(a, b) * N + max(a, b)]] = True
    return mask


def _is_forest(batch, mask):
    """Whether the edges ``mask`` (E,) of every graph of the batch form a forest (no cycle, no parallel edges)."""
    return bool(batch.with_edges(mask).is_forest().all())


class AdaBoostMRF(GraphEstimatorMixin):
    r"""AdaBoost.MRF: boosting spanning-tree CRFs under a Hölder bound, combined as a LogOP (Tran et al. (2014)).

    Weak learners are tree-structured CRFs :math:`h_l = \log P_{\tau_l}(v | o; w_l)` on spanning trees
    (forests) :math:`\tau_l` of the graph, with exact and always-convergent inference. The strong learner
    :math:`H = \sum_l \alpha_l h_l` (:math:`\sum_l \alpha_l = 1`) minimises the Hölder upper bound of the
    incomplete exponential loss (Tran et al. (2014), eqs. (17)–(23))

    .. math:: L_H = \sum_i \frac{\prod_l [\sum_v P_{\tau_l}(v | o_i)^\beta]^{\alpha_l}}
              {\prod_l P_{\tau_l}(v_i | o_i; w_l)^{\beta \alpha_l}}
              \;\to\; \sum_i \exp\big(-\beta\, H(v_i, o_i)\big),

    the right-hand side being the bound at β = 1 (the numerator is 1 since :math:`\sum_v P_\tau(v|o) = 1`)
    and, as in Tran et al. (2014), eq. (22), the loss used for every β (``bound_`` holds its log).

    Sequential algorithm (Tran et al. (2014), Figure 8, built as below; :mod:`._adaboost_sequential`), round l:

    1. data weights :math:`D_l(i) \propto \exp(-\beta H_{l-1}(v_i, o_i))`, the per-instance term of L_H;
    2. every admissible candidate (tree, feature subset; see 4) is a weak learner fitted to the re-weighted
       incomplete log-likelihood :math:`\sum_i D_l(i) \log P_\tau(v_i | o_i)` (− c2‖w‖²) by ``cg_iterations``
       conjugate-gradient steps from the parameters it was last trained to (``warm_start="learner"``;
       the current LogOP weights the first time), Tran et al. (2014), §7: "initialise the parameters
       for each weak learner to the previously learned values" — only the parameters its tree and
       feature subset use move, the others are carried;
    3. condition (29) :math:`\sum_i D_l(i)\,[h_l(i) - H_{l-1}(i)] > 0` (:math:`\sum_i D_l(i) = 1`): the
       slope of :math:`\log L_H((1-\alpha) H_{l-1} + \alpha h_l)` at α = 0 is negative; α is the minimiser
       of that convex 1-D function on the candidate's interval :math:`[\alpha^-, \alpha^+] \subset [0, 1)`
       (:func:`holder_alpha_step`);
    4. the superimposition (eq. (23): :math:`\alpha'_j = \alpha_j (1-\alpha_l)`, Σα = 1, and the Hölder
       step (20)–(21) assumes :math:`\alpha_j > 0` for every kept learner): α is at most ``max_alpha`` < 1, so
       no round wipes the earlier learners, and with the cover :math:`\rho_e = \sum_{l: e \in \tau_l}
       \alpha_l` of every clique e that some candidate holds (nodes lie in every spanning forest, so
       :math:`\rho_n = 1`), the forest keeps :math:`\min_e \rho_e \ge` ``cover_floor`` once reached:

       * *cover round* (:math:`\min_e \rho_e <` floor, from round 2 until the forest covers every such clique
         at the floor): only the trees holding a least-covered clique are fitted, with
         :math:`\alpha^- = (f - \rho_{min}) / (1 - \rho_{min})` (lifts it to the floor f); the one meeting
         (29) with the smallest L_H is taken, else the smallest L_H (``forced`` in ``rounds_``: the bound
         rises that round);
       * otherwise every tree whose learner can take weight without pushing a clique outside it below the
         floor, :math:`\alpha^+ = \min(\text{max\_alpha}, 1 - f / \min_{e \notin \tau} \rho_e) > 0`,
         :math:`\alpha^- = 0`; among those meeting (29) the smallest L_H is selected (L_H alone);
    5. earlier α are rescaled by :math:`1 - \alpha_l` and the learner joins with :math:`\alpha_l`.

    Why α reached 1 before (α ∈ [0, 1], no cover bookkeeping): a learner warm-started from the previous
    learner of its tree and trained further fits nearly every instance better than the ensemble it joins,
    :math:`h_l(i) > H_{l-1}(i)`, so the slope of log L_H at α = 1 is still negative and α = 1 wiped every
    earlier learner; L_H depends on the per-instance likelihoods alone and does not see which cliques
    the forest models, so the tree refitted last kept winning and the forest was one tree. Fitting each
    round's learner afresh (``warm_start="fresh"``: from 0 on the re-weighted data) removes that head
    start but leaves learners of only ``cg_iterations`` CG steps; it is offered, not the default (not
    measured on the activities). The paper is silent on how α < 1 is kept and on the balance of the
    trees: ``max_alpha``, the floor and the cover rounds are this class's choices (see their parameters).

    Boosting stops, outside cover rounds, when no admissible candidate meets (29) or L_H falls by less
    than ``tol`` (relative), or after ``n_rounds``; with ``selection="cyclic"`` or ``warm_start="learner"``
    (a rejected learner trains on next round) only after as many rejected rounds in a row as there are
    candidates. ``rounds_`` records every round (selected tree, α, L_H, the value of (29),
    the cover, the learners' weights, every candidate's numbers).

    The strong model is the logarithmic opinion pool :math:`P(x | o) \propto \prod_l P_{\tau_l}(x |
    o; w_l)^{\alpha_l}` on the whole graph (Tran et al. (2014), eqs. (24)–(27)): unary potentials
    :math:`\sum_l \alpha_l \theta_n(w_l)`, pairwise :math:`\sum_{l: e \in \tau_l} \alpha_l
    \theta_e(w_l)`. ``coef_`` = :math:`\sum_l \alpha_l w_l|_{\tau_l}` (each w_l restricted to the
    parameters its tree uses, Tran et al. (2014): "the parts of w_l which correspond to cliques outside the trees
    [are] zero") gives exactly that model when a tree's edges are told apart by their edge features
    (e.g. one-hot edge types of a 2-level DCRF); with edge features shared by tree and non-tree edges
    (grids) ``to_graph_crf()`` is its shared-parameter approximation, and ``predict`` uses the exact
    LogOP potentials.

    On the 2-level DCRFs of ``examples/dcrf_activities.py`` the top-chain tree has the smaller L_H almost
    every round; the floor keeps the bottom-chain tree's learners at a cover of at least 0.4 (L = 2) so the
    bottom chain's edges stay modelled. ``parallel=True`` trains every tree with shared parameters instead
    (no selection).

    Parameters
    ----------
    n_labels : int, optional
        K; default 1 + the largest label in ``fit``.
    trees : None, "random", "max_weight" or list
        The pool of candidate spanning trees. A list holds, per candidate, an int array of edge indices
        (the same for every graph) or a callable ``f(x) -> edge indices`` of sample x (e.g.
        :func:`two_level_chain_trees`). ``"random"`` (default for None): ``n_trees`` random spanning
        forests (minimum spanning forests under i.i.d. uniform edge weights, drawn per graph from
        ``random_state`` and the candidate number alone: a graph gets the same trees in any batch).
        ``"max_weight"``:
        ``n_trees`` maximum-weight spanning forests with edge weight −‖node_features[u] −
        node_features[v]‖ (ends that look alike first), perturbed by noise for every candidate after
        the first.
    n_trees : int
        Number of generated candidates for ``"random"`` / ``"max_weight"``.
    n_rounds : int
        Largest number of boosting rounds.
    cg_iterations : int
        Conjugate-gradient iterations per candidate per round (Tran et al. (2014) used two).
    c2 : float
        L2 coefficient of every weak learner's reweighted likelihood (its fit only: trees and α are
        selected by L_H alone).
    beta : float, optional
        β ∈ (0, 1] of the loss (Tran et al. (2014), eq. (17)), "for numerical stability". Default:
        1 / (mean number of observed nodes per graph), for both algorithms. At β = 1 the data weights D_l
        single out the few graphs the ensemble fits worst, and the sequential learners fitted to them are
        individually weaker (simulated activities, 50 % hidden: bottom-level F1 of the bottom-chain learner
        alone 0.876 at β = 1 against 0.908 at the default). The value used is ``beta_``.
    tol : float
        Stop when log L_H falls by less than ``tol`` relative to its value.
    selection : {"greedy", "cyclic"}
        ``"greedy"`` (Tran et al. (2014), Figure 8): every round fits every candidate and keeps the best.
        ``"cyclic"``: round l fits only candidate l mod L (L times cheaper per round); a candidate that
        fails (29) or does not lower L_H is skipped.
    feature_subsets : None, int or list of int arrays
        Feature-subset weak learners (Tran et al. (2014), §7, last paragraph): the candidates are every (tree,
        subset) pair, and a learner moves only the node weights of its subset's node-feature columns (and
        its tree's edge weights), the rest carried from the ensemble, so each round also selects
        features. None (default): one subset, all features. An int n: n distinct random subsets of ⌈D/2⌉
        columns each, drawn without repetition (``random_state``). Sequential algorithm only.
    warm_start : {"learner", "ensemble", "fresh"}
        Where a candidate's CG steps start: ``"learner"`` (default) the parameters that candidate was last
        trained to (the LogOP weights at its first fit); ``"ensemble"`` the current LogOP weights every
        round; ``"fresh"`` zeros every round (the learner fitted afresh on the re-weighted data).
    criterion : {"bound", "bound+l2"}
        What selects the tree and α: ``"bound"`` (default, Figure 8) L_H alone, among the candidates
        meeting (29). ``"bound+l2"`` (an earlier behaviour of this class): J = (B/β)(log L_H − log B) +
        c2‖(1−α) w + α w_l‖², α minimising J on the same interval, no (29) gate.
    max_alpha : float
        Largest α of a round, in (0, 1) (default 0.5: a new learner never outweighs the ensemble it
        joins); every kept learner keeps α_j > 0, as the Hölder step of the bound assumes.
    cover_floor : float, optional
        The smallest cover ρ_e the forest keeps for every clique some candidate tree holds, in
        (0, max_alpha]. Default: min(max_alpha, 0.8 / L) for L candidate trees, 80 % of the cover 1/L a
        clique lying in one tree gets in the uniform forest (0.4 for the two chain trees). Sequential
        algorithm only; at most 16 candidate trees (the cover is tracked per set of trees holding an edge).
    parallel : bool
        The parallel variant (Tran et al. (2014), §7, eqs. (33)–(34)): every candidate tree with fixed α_l = 1/L and
        *shared* parameters w, fitted by minimising J(w) = (B/β)·log((1/B)·L_H(w)) + c2‖w‖² with
        ``max_iterations`` CG steps; no tree selection. Inside tree τ_l an edge's potential is θ_e(w)/ρ_e,
        ρ_e = Σ_{l: e ∈ τ_l} α_l (the reparametrisation of tree-reweighted BP), so that the LogOP
        Π_l P_τl^α_l is exactly the CRF with weights w on the whole graph (when every edge lies in some
        tree): ``coef_`` = w, and L_H bounds that model's exponential loss.
    max_iterations : int
        CG iterations of the parallel variant.
    predict_method : {"logop_map", "ensemble"}
        ``"logop_map"``: MAP of the LogOP model w on the whole graph (``inference``); ``"ensemble"``:
        argmax of the α-weighted tree marginals Σ_l α_l P_{τ_l}(x_n | o) (trees of the test graphs
        from the same rule; generated trees are drawn anew for the test graphs).
    inference : {"bp", "trw", "exact"}
        Inference on the whole graph for ``"logop_map"`` and :meth:`predict_marginals`.
    inference_options : BPOptions, preset name or dict, optional
    random_state : int, RandomState or None
    verbose : bool
    n_jobs : int or None, default None
        Worker processes on this machine: the graphs are cut into ``n_jobs`` blocks (-1: as many as cores)
        of about equal numbers of nodes, each held by one worker process for the whole fit, with its
        candidate trees' CRFs (:class:`structlearn.learning.shards.ProcessShards`); every evaluation of a
        weak learner's objective, of the per-graph tree likelihoods and of the parallel bound sends the
        weights (and the data weights, B float64) and adds the blocks' statistics
        (:mod:`structlearn.graph._adaboost_shards`). Equal to ``n_jobs=None`` up to rounding.

    Attributes
    ----------
    coef_node_ : ndarray (D, K), coef_edge_ : ndarray (F, K, K), coef_ : ndarray (D·K + F·K²,)
        w = Σ_l α_l w_l|τ_l (see above).
    alphas_ : ndarray of float64, shape (L,)
        Final weights (sum 1) of the L learners kept; a learner whose weight fell to 0 in later rounds
        is dropped.
    learner_coefs_ : ndarray of float64, shape (L, D·K + F·K²)
        w_l of every selected weak learner.
    feature_subsets_ : list of (int64 arrays or None)
        The node-feature subsets in use (None = all features).
    learner_features_ : ndarray of int64, shape (L,)
        Index into ``feature_subsets_`` of every kept learner.
    learner_trees_ : ndarray of int64, shape (L,)
        Candidate index of every selected weak learner.
    bound_ : list of float
        log L_H after every accepted round (Tran et al. (2014), eq. (22); non-increasing outside cover
        rounds); for
        ``parallel=True`` the objective J(w) of :class:`ParallelHolderBound` after every CG iteration.
    objective_ : list of float
        The criterion after every accepted round: ``bound_`` for ``criterion="bound"``, J for
        ``"bound+l2"`` (non-increasing outside cover rounds).
    rounds_ : list of dict
        Sequential algorithm: one dict per round, accepted or not: ``round``, ``tree`` and ``features``
        (candidate indices of the selected learner; -1 when no candidate could enter), ``alpha``,
        ``log_bound`` (log L_H with it), ``log_bound_before``, ``condition_29`` (Σ_i D(i)[h(i) − H(i)], nats,
        Σ D = 1; +inf in round 1), ``accepted``, ``cover_round``, ``forced`` (accepted in a cover round
        though (29) failed), ``min_cover`` (min_e ρ_e after the round), ``weights`` (α of every learner so
        far, in order, after the round), ``tree_weights`` (Σ α per candidate tree), and ``candidates`` (tree,
        features, α, log L_H, (29) of every candidate fitted that round). Empty for ``parallel=True``.
    n_rounds_ : int
    beta_ : float
        The β used.
    converged_ : bool
        True when boosting stopped because no candidate met (29) (or none could take weight within the
        cover floor) or the bound stopped improving (False: ``n_rounds`` reached; warns).
    training_seconds_ : float

    Raises
    ------
    ValueError
        As :class:`GraphCRF`; a candidate tree with a cycle; edge indices outside a graph's edges;
        unknown parameter values.

    Notes
    -----
    Cost per round: for every candidate tree ``cg_iterations`` (+ line search) upward–downward passes
    over the training forests, O(N·K²) each, plus O(N·D·K + E·F·K²) for potentials and gradients, and
    O(B) per step of the 1-D α search; memory O(candidates × (D·K + F·K²)) for the warm starts.
    Inference is exact and always converges (unlike loopy BP / TRW learning). The bound uses the tree
    likelihoods of the partial labels, log P_τ(v | o) = log Z_τ(v, o) − log Z_τ(o).

    Training goes through the per-shard interface (:mod:`structlearn.learning.shards`): the graphs are
    shards of whole graphs, each keeping its candidate trees' CRFs, and every sum over graphs (a weak
    learner's value and gradient, the per-graph tree likelihoods, the parallel bound) is a map over the
    shards and a sum; the boosting loop runs on the per-graph vectors (B float64). So
    :func:`structlearn.distributed.fit` trains it on dask shards of ``(graph, labels)`` pairs with the
    result of ``fit``.
    """

    def __init__(self, n_labels=None, trees=None, n_trees=4, n_rounds=20, cg_iterations=5, c2=1.0,
                 beta=None, tol=1e-4, selection="greedy", feature_subsets=None, warm_start="learner",
                 criterion="bound", max_alpha=0.5, cover_floor=None, parallel=False, max_iterations=50,
                 predict_method="logop_map", inference="bp", inference_options=None, random_state=None,
                 verbose=False, n_jobs=None):
        self._store_params(locals())

    # ------------------------------------------------------------------------------------------------
    def _check_params(self):
        for name in ("n_trees", "n_rounds", "cg_iterations", "max_iterations"):
            check_int(name, getattr(self, name))
        check_number("c2", self.c2)
        check_number("tol", self.tol)
        check_number("beta", self.beta, upper=1.0, none_ok=True)
        check_choice("selection", self.selection, ("greedy", "cyclic"))
        check_choice("warm_start", self.warm_start, ("learner", "ensemble", "fresh"))
        check_number("max_alpha", self.max_alpha, upper=1.0)
        if not self.max_alpha < 1.0:
            raise ValueError(f"`max_alpha` must be a number in (0, 1) (α = 1 would wipe every earlier learner); "
                             f"got {self.max_alpha!r}")
        check_number("cover_floor", self.cover_floor, upper=self.max_alpha, none_ok=True)
        check_choice("criterion", self.criterion, ("bound", "bound+l2"))
        check_choice("predict_method", self.predict_method, ("logop_map", "ensemble"))
        check_choice("inference", self.inference, ("bp", "trw", "exact"))
        check_int("n_labels", self.n_labels, none_ok=True)
        check_n_jobs(getattr(self, "n_jobs", None))
        trees = "random" if self.trees is None else self.trees
        if isinstance(trees, str):
            if trees not in ("random", "max_weight"):
                raise ValueError(f"`trees` must be None, 'random', 'max_weight' or a list of edge-index arrays "
                                 f"/ callables; got {trees!r}")
        elif not isinstance(trees, (list, tuple)) or len(trees) == 0:
            raise ValueError(f"`trees` must be None, 'random', 'max_weight' or a non-empty list; got "
                             f"{type(trees).__name__}")
        BPOptions.resolve(self.inference, self.inference_options, "inference_options")
        return trees

    def _tree_masks(self, X, batch, trees, seed):
        """One boolean mask over the packed edges (E,) per candidate tree."""
        masks = []
        if isinstance(trees, str):
            # drawn per graph from (seed, candidate) alone, so a graph's trees do not depend on the
            # other graphs of the batch or on its position in it
            gu, gv, _, _ = _edge_lookup(batch)
            nf = batch.node_features
            eo = batch.edge_offsets
            for c in range(self.n_trees):
                wts = np.empty(batch.edges.shape[0])
                for b in range(batch.n_graphs):
                    sl = slice(eo[b], eo[b + 1])
                    noise = np.random.default_rng([seed, c]).random(eo[b + 1] - eo[b])
                    if trees == "random":
                        wts[sl] = 1.0 + noise
                    else:  # minimum spanning forest of distances = maximum-weight forest of similarities
                        d = np.linalg.norm(nf[gu[sl]] - nf[gv[sl]], axis=1)
                        scale = d.std() if d.size and d.std() > 0 else 1.0
                        wts[sl] = 1.0 + d / scale + (0.0 if c == 0 else 0.5 * noise)
                masks.append(_spanning_forest(batch, wts))
            return masks
        for c, spec in enumerate(trees):
            mask = np.zeros(batch.edges.shape[0], dtype=bool)
            if not callable(spec) and np.ndim(spec) != 1:
                raise ValueError(f"`trees`[{c}] must be a 1-D array of edge indices or a callable; got "
                                 f"{type(spec).__name__} with {np.ndim(spec)} dimensions")
            for b in range(batch.n_graphs):
                idx = spec(X[b]) if callable(spec) else spec
                idx = np.asarray(idx)
                if idx.ndim != 1:
                    raise ValueError(f"`trees`[{c}] must give a 1-D array of edge indices; got shape "
                                     f"{idx.shape} for graph {b}")
                if idx.size and not np.issubdtype(idx.dtype, np.integer):
                    raise ValueError(f"`trees`[{c}] must give integer edge indices; got dtype {idx.dtype}")
                idx = idx.astype(np.int64).ravel()
                m = int(batch.edge_lengths[b])
                if idx.size and (idx.min() < 0 or idx.max() >= m):
                    raise ValueError(f"`trees`[{c}] has edge index {int(idx.max() if idx.max() >= m else idx.min())} "
                                     f"out of range for graph {b}, which has {m} edges")
                mask[batch.edge_offsets[b] + idx] = True
            if not _is_forest(batch, mask):
                raise ValueError(f"`trees`[{c}] is not a spanning tree/forest: its edges form a cycle on some "
                                 f"graph")
            masks.append(mask)
        return masks

    # ------------------------------------------------------------------------------------------------
    def fit(self, X, y):
        """Boost spanning-tree CRFs on graphs ``X`` with partial labels ``y`` (-1 = hidden).

        Parameters
        ----------
        X : list of B graph samples ``(node_features (n, D), edges (m, 2)[, edge_features (m, F)])``
        y : list of B int arrays (n,)

        Returns
        -------
        self
        """
        trees, t0, rs = self._begin_fit()
        batch = check_graphs(X)
        K = int(self.n_labels) if self.n_labels is not None else self._infer_n_labels(y)
        yy = check_graph_labels(y, batch, K)
        B = batch.n_graphs
        blocks = GraphCRF._blocks(batch, n_blocks(getattr(self, "n_jobs", None)))
        if len(blocks) == 1:
            shards = [self._boost_shard(X, batch, yy, K, trees, 0, B, 0, 1)]
        else:
            rows = batch.offsets
            shards = [self._boost_shard([X[i] for i in range(a, b)], batch.subset(np.arange(a, b)),
                                        yy[rows[a]:rows[b]], K, trees, a, B, j, len(blocks))
                      for j, (a, b) in enumerate(blocks)]
        with shard_runner(shards) as run:
            return self._fit_shards(run, B, batch.n_node_features, batch.n_edge_features, K, rs, t0)

    def _begin_fit(self):
        """Checked parameters, start time, the random state and the seed of the generated trees
        (``_tree_seed``), in the order ``fit`` draws them: (trees, t0, rs)."""
        trees = self._check_params()
        t0 = time.perf_counter()
        rs = check_random_state(self.random_state)
        self._tree_seed = int(rs.randint(2**31 - 1))
        return trees, t0, rs

    def _boost_shard(self, X, batch, labels, K, trees, start, n_total, index, n_shards):
        """The :class:`~._adaboost_shards.BoostShard` of the graphs ``X`` (packed ``batch``, packed
        ``labels``), graphs ``start``.. of ``n_total``, shard ``index`` of ``n_shards``: per candidate tree
        the unpenalised exact CLL of its CRF (edges scaled by 1/ρ_e for the parallel variant). The
        generated trees of a graph depend on the graph and ``_tree_seed`` alone, so a shard gets the trees
        the whole batch would."""
        masks = self._tree_masks(X, batch, trees, self._tree_seed)
        scale = self._edge_scale(masks, np.arange(len(masks)), np.full(len(masks), 1.0 / len(masks)))
        objs = [GraphCLL(tree_batch(batch, m, scale), labels, K, method="exact", c2=0.0) for m in masks]
        return BoostShard(objs, batch, masks, labels, start, n_total, index, n_shards)

    def _fit_shards(self, run, B, D, F, K, rs, t0):
        """Boosting (or the parallel variant's CG) on the sum over shards: ``run(function, params)`` is the
        sum of ``function(params, shard)`` over the :class:`~._adaboost_shards.BoostShard` s of the B graphs
        (:func:`~._adaboost_shards.shard_runner` in ``fit``, persisted dask shards in
        :func:`structlearn.distributed.fit`); ``rs`` the random state after ``_begin_fit``. Returns self.
        Interrupted (or failed), it leaves no ``coef_`` and ``converged_ = False``, and raises again."""
        with training(self, drop=("coef_",)):
            return self._boost(run, B, D, F, K, rs, t0)

    def _boost(self, run, B, D, F, K, rs, t0):
        """The body of :meth:`_fit_shards`."""
        summary = run(boost_summary_statistics, None).stats
        beta = self.beta if self.beta is not None else 1.0 / max(1.0, float(summary["n_observed"][0] / B))
        self.beta_ = float(beta)
        n_params = D * K + F * K * K
        self.bound_, self.objective_, self.rounds_ = [], [], []
        subsets = self._feature_subsets(D, rs)
        self.feature_subsets_ = subsets
        L = summary["used_features"].shape[0]
        if self.parallel:
            uncovered, n_edges = int(summary["uncovered"][0]), int(summary["n_edges"][0])
            if uncovered:
                warnings.warn(f"{uncovered} of {n_edges} edges lie in no candidate tree: they are "
                              f"not trained, the LogOP leaves them out, and `coef_` / `to_graph_crf()` (the "
                              f"CRF of w on the whole graph) differ from it there; add trees that cover them",
                              UserWarning)
            w, self.converged_ = self._fit_parallel(run, beta, n_params, B)
            self.alphas_ = np.full(L, 1.0 / L)
            self.learner_coefs_ = np.tile(w, (L, 1))
            self.learner_trees_ = np.arange(L)
            self.learner_features_ = np.zeros(L, dtype=np.int64)
        else:
            frees = [free_parameters(summary["used_features"][t] > 0, D, K) for t in range(L)]
            cands = [(t, f) for t in range(L) for f in range(len(subsets))]
            # a learner moves its feature subset's node weights (all of them by default) and its tree's
            # edge blocks; everything else is carried from the current ensemble
            moves = [frees[t] if subsets[f] is None else
                     np.concatenate([(subsets[f][:, None] * K + np.arange(K)).ravel(), frees[t][frees[t] >= D * K]])
                     for t, f in cands]
            fit_sequential(self, run, cands, moves, beta, n_params, B, summary["tree_patterns"])
            w = np.zeros(n_params)
            for a, c, w_l in zip(self.alphas_, self.learner_trees_, self.learner_coefs_):
                w[frees[c]] += a * w_l[frees[c]]
        self._set_coef(w, D, F, K)
        self.n_rounds_ = len(self.bound_)
        self.training_seconds_ = time.perf_counter() - t0
        if not self.converged_:
            what = "CG" if self.parallel else "boosting"
            limit = "max_iterations" if self.parallel else "n_rounds"
            warnings.warn(f"{what} stopped at `{limit}` while the bound was still improving; increase "
                          f"`{limit}`", ConvergenceWarning)
        return self

    def _feature_subsets(self, D, rs):
        """Node-feature column subsets of the weak learners: [None] (all features) by default."""
        fs = self.feature_subsets
        if fs is None:
            return [None]
        if self.parallel:
            raise ValueError("`feature_subsets` applies to the sequential algorithm; got it with parallel=True")
        if isinstance(fs, (int, np.integer)) and not isinstance(fs, bool):
            if fs < 1:
                raise ValueError(f"`feature_subsets` as a count must be >= 1; got {fs}")
            size = max(1, int(np.ceil(D / 2)))
            if fs > math.comb(D, size):
                raise ValueError(f"`feature_subsets` asks for {fs} distinct subsets of {size} of the {D} node "
                                 f"features; there are only {math.comb(D, size)}")
            out, seen = [], set()
            while len(out) < fs:        # columns without repetition, and no subset drawn twice
                sub = np.sort(rs.choice(D, size=size, replace=False)).astype(np.int64)
                if tuple(sub) not in seen:
                    seen.add(tuple(sub))
                    out.append(sub)
            return out
        if not isinstance(fs, (list, tuple)) or len(fs) == 0:
            raise ValueError(f"`feature_subsets` must be None, a positive int or a non-empty list of node-feature "
                             f"index arrays; got {type(fs).__name__}")
        out = []
        for j, sub in enumerate(fs):
            a = np.asarray(sub)
            if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer) or a.min() < 0 \
                    or a.max() >= D or np.unique(a).size != a.size:
                raise ValueError(f"`feature_subsets`[{j}] must be distinct node-feature indices in [0, {D}); "
                                 f"got {sub!r}")
            out.append(np.sort(a).astype(np.int64))
        return out

    def _fit_parallel(self, run, beta, n_params, B):
        objective = ShardedHolderBound(run, beta, float(self.c2), B)
        w, n_iter, converged, log = minimize_cg(objective, np.zeros(n_params), self.max_iterations)
        for entry in log:
            self.bound_.append(float(entry["loss"]))
        return w, bool(converged)

    # ------------------------------------------------------------------------------------------------
    def to_graph_crf(self):
        """A fitted :class:`GraphCRF` with the LogOP's weights ``coef_`` (see the class notes)."""
        self._check_fitted()
        crf = GraphCRF(n_labels=len(self.classes_), inference=self.inference,
                       inference_options=self.inference_options)
        for name in ("coef_", "coef_node_", "coef_edge_", "classes_", "n_node_features_in_",
                     "n_edge_features_in_"):
            setattr(crf, name, getattr(self, name))
        crf.n_iter_, crf.converged_, crf.inference_converged_ = self.n_rounds_, self.converged_, True
        crf.training_log_ = [{"iteration": i + 1, "loss": b} for i, b in enumerate(self.bound_)]
        return crf

    def _learner_potentials(self, X):
        """The packed batch of ``X`` and, per kept learner, (α_l, tree edge mask (E,), unary (N, K),
        pairwise (E, K, K)) of w_l, the pairwise ones as inside tree τ_l (× 1/ρ_e for the parallel
        variant, see :meth:`_edge_scale`)."""
        batch = self._check_batch(X)
        trees = "random" if self.trees is None else self.trees
        masks = self._tree_masks(X, batch, trees, self._tree_seed)
        scale = self._edge_scale(masks, self.learner_trees_, self.alphas_)
        K = len(self.classes_)
        out = []
        for a, c, w in zip(self.alphas_, self.learner_trees_, self.learner_coefs_):
            u, p = graph_potentials(w, batch, K)
            out.append((a, masks[c], u, scale[:, None, None] * p))
        return batch, out

    def _edge_scale(self, masks, trees, alphas):
        """Per packed edge, the factor of its potential inside a tree: 1 (sequential), or 1/ρ_e with
        ρ_e = Σ_{l: e ∈ τ_l} α_l (parallel; 0 for an edge in no tree)."""
        scale = np.ones(masks[0].shape[0]) if masks else np.ones(0)
        if not self.parallel:
            return scale
        rho = np.zeros_like(scale)
        for a, c in zip(alphas, trees):
            rho[masks[c]] += a
        return np.divide(1.0, rho, out=np.zeros_like(rho), where=rho > 0)

    def _logop_graph(self, X):
        """FactorGraph of the LogOP Π_l P_τl^α_l on the whole graphs: unary Σ_l α_l θ_n(w_l), pairwise
        Σ_{l: e ∈ τ_l} α_l θ_e(w_l) (Tran et al. (2014), eqs. (24)–(27))."""
        batch, learners = self._learner_potentials(X)
        K = len(self.classes_)
        unary = np.zeros((batch.node_features.shape[0], K))
        pairwise = np.zeros((batch.edges.shape[0], K, K))
        for a, mask, u, p in learners:
            unary += a * u
            pairwise[mask] += a * p[mask]
        return batch, batch.factor_graph(unary, pairwise)

    def _ensemble_marginals(self, X):
        """Σ_l α_l × exact node marginals of tree CRF l, shape (N, K)."""
        batch, learners = self._learner_potentials(X)
        out = np.zeros((batch.node_features.shape[0], len(self.classes_)))
        for a, mask, u, p in learners:
            tree = batch.with_edges(mask)
            out += a * tree.factor_graph(u, p[mask]).infer("exact", semiring="log").unary
        return batch, out

    def predict(self, X):
        """Labels of every graph: list of B int64 arrays (n,) (``predict_method``).

        ``"logop_map"``: MAP of the LogOP by ``inference`` (exact max-product, or loopy max-product
        decoding each node's max-marginal; warns ConvergenceWarning when it does not converge).
        ``"ensemble"``: argmax of the α-weighted exact tree marginals.
        """
        self._check_fitted()
        if self.predict_method == "ensemble":
            batch, m = self._ensemble_marginals(X)
            return batch.split(np.argmax(m, axis=1).astype(np.int64))
        batch, graph = self._logop_graph(X)
        return batch.split(self.to_graph_crf()._infer(graph, "max").labels)

    def predict_marginals(self, X):
        """Node marginals (list of B (n, K) float64 arrays, rows sum to 1): of the LogOP model
        (``"logop_map"``, by ``inference``) or the α-weighted tree marginals (``"ensemble"``)."""
        self._check_fitted()
        if self.predict_method == "ensemble":
            batch, m = self._ensemble_marginals(X)
            return batch.split(m)
        batch, graph = self._logop_graph(X)
        return batch.split(self.to_graph_crf()._infer(graph, "log").unary)


class ParallelHolderBound:
    r"""Objective of parallel AdaBoost.MRF: the Hölder bound with fixed α_l = 1/L and shared weights w.

    .. math:: J(w) = \frac{B}{\beta} \log\Big(\frac{1}{B} \sum_i \exp\big(-\beta \sum_l \alpha_l
              \log P_{\tau_l}(v_i | o_i; w)\big)\Big) + c_2 \|w\|^2

    a monotone transform of log L_H (Tran et al. (2014), §7, eqs. (33)–(34)) scaled so that as β → 0 it becomes the
    sum over graphs of the α-averaged tree negative log-likelihoods (the scale of :class:`GraphCLL`).
    Gradient: B·Σ_i softmax_i(−β H) ∇(−H_i) + 2 c2 w. Cost per call: one clamped and one free upward–
    downward pass per tree, plus a (D·K + F·K²) product per graph.

    Parameters
    ----------
    objs : list of GraphCLL
        One exact objective per tree (same graphs, labels and parameter layout).
    beta : float
    c2 : float
    """

    def __init__(self, objs, beta, c2):
        self.objs = objs
        self.beta = float(beta)
        self.c2 = float(c2)
        self.B = objs[0].batch.n_graphs
        self.n_params = objs[0].n_params

    def value_and_grad(self, w):
        w = np.asarray(w, dtype=np.float64)
        lse, g = holder_parts(self.objs, w, self.beta)
        return holder_value(lse, g, w, self.B, self.beta, self.c2)

