"""``AdaBoostMRF``: boosted spanning-tree CRFs (Markov random forests) for loopy graphs, partial labels.

Tran, Phung & Venkatesh, "Learning Structured Outputs from Partial Labels using Forest Ensemble",
arXiv:1407.6432 (2014), §4 and Figure 8 (cited below as Tran et al. (2014)).
"""
import time
import warnings

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ..learning.graph_objective import GraphCLL, graph_potentials
from ..learning.optimizers import minimize_cg
from ..structures.factor_graph import BPOptions
from ..structures.graphs import check_graph_labels, check_graphs, two_level_trees
from .graph_crf import GraphCRF, GraphEstimatorMixin, check_choice, check_int, check_number

__all__ = ["AdaBoostMRF", "ParallelHolderBound", "two_level_chain_trees", "top_chain_tree", "bottom_chain_tree"]


def top_chain_tree(x):
    """Edge indices of the top chain + vertical edges of a 2-level DCRF sample (a spanning tree).

    ``x = (node_features (2T, D), edges (3T − 2, 2)[, ...])`` with edges in the order of
    :func:`~structlearn.structures.graphs.two_level_edges`; T = n_nodes // 2. The first tree of
    :func:`~structlearn.structures.graphs.two_level_trees`.
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

    .. math:: L_H = \sum_i \prod_l P_{\tau_l}(v_i | o_i; w_l)^{-\beta \alpha_l}
              = \sum_i \exp\big(-\beta \sum_l \alpha_l \log P_{\tau_l}(v_i | o_i; w_l)\big).

    Round l: data weights :math:`D_i \propto \exp(-\beta H_{l-1}(v_i, o_i))`; every candidate tree is fitted
    to the D-reweighted incomplete likelihood (+ c2‖w‖²) by ``cg_iterations`` conjugate-gradient steps,
    starting from the current LogOP weights w (Tran et al. (2014), §7: "initialise the parameters for each weak
    learner to the previously learned values"; only the parameters the tree depends on move, the others
    are carried). The tree and :math:`\alpha_l \in [0, 1]` are those minimising the regularised bound

    .. math:: J = \frac{B}{\beta}\Big(\log L_H - \log B\Big) + c_2 \|(1-\alpha_l) w + \alpha_l w_l\|^2,

    whose gradient in w_l is the learner's own objective (so a learner's CG steps reduce J; the plain
    bound L_H would reward ever larger weights); earlier α are rescaled by :math:`1 - \alpha_l`.
    Boosting stops when J improves by less than ``tol`` (relative) — for ``selection="cyclic"``, over a
    whole cycle of the candidates — or after ``n_rounds``.

    The strong model is the logarithmic opinion pool :math:`P(x | o) \propto \prod_l P_{\tau_l}(x |
    o; w_l)^{\alpha_l}` on the whole graph (Tran et al. (2014), eqs. (24)–(27)): unary potentials
    :math:`\sum_l \alpha_l \theta_n(w_l)`, pairwise :math:`\sum_{l: e \in \tau_l} \alpha_l
    \theta_e(w_l)`. ``coef_`` = :math:`\sum_l \alpha_l w_l|_{\tau_l}` (each w_l restricted to the
    parameters its tree uses, Tran et al. (2014): "the parts of w_l which correspond to cliques outside the trees
    [are] zero") gives exactly that model when a tree's edges are told apart by their edge features
    (e.g. one-hot edge types of a 2-level DCRF); with edge features shared by tree and non-tree edges
    (grids) ``to_graph_crf()`` is its shared-parameter approximation, and ``predict`` uses the exact
    LogOP potentials.

    On a 2-level DCRF with the two chain trees the stronger tree (higher likelihood of the visible
    labels) tends to win every round with α = 1, so the LogOP is that tree's CRF trained stage-wise on
    the reweighted likelihood and lacks the other chain; ``parallel=True`` trains both trees with
    shared parameters and was within 2 F1 points of exact maximum likelihood in
    ``examples/dcrf_activities.py`` (see its table).

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
        L2 coefficient of every weak learner's reweighted likelihood.
    beta : float, optional
        β ∈ (0, 1] of the loss (Tran et al. (2014), eq. (17)); default 1 / (mean number of observed nodes per
        graph), which keeps the data weights from collapsing onto one graph.
    tol : float
        Stop when J improves by less than ``tol`` relative to its value.
    selection : {"greedy", "cyclic"}
        ``"greedy"`` (Tran et al. (2014), Figure 8): every round fits every candidate and keeps the best.
        ``"cyclic"``: round l fits only candidate l mod L (L times cheaper per round); a candidate that
        does not reduce J is skipped.
    feature_subsets : None, int or list of int arrays
        Feature-subset weak learners (Tran et al. (2014), §7, last paragraph): the candidates are every (tree,
        subset) pair, and a learner moves only the node weights of its subset's node-feature columns (and
        its tree's edge weights), the rest carried from the ensemble, so each round also selects
        features. None (default): one subset, all features. An int n: n random subsets of ⌈D/2⌉ columns
        (``random_state``). Sequential algorithm only.
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
        log L_H after every accepted round (Tran et al. (2014), eq. (22)); for ``parallel=True`` the objective J(w)
        of :class:`ParallelHolderBound` after every CG iteration.
    objective_ : list of float
        J after every accepted round (non-increasing); for ``parallel=True`` equal to ``bound_``.
    n_rounds_ : int
    converged_ : bool
        True when boosting stopped because the bound stopped improving (False: ``n_rounds`` reached;
        warns).
    training_seconds_ : float

    Raises
    ------
    ValueError
        As :class:`GraphCRF`; a candidate tree with a cycle; edge indices outside a graph's edges;
        unknown parameter values.

    Notes
    -----
    Cost per round: for every candidate tree ``cg_iterations`` (+ line search) upward–downward passes
    over the training forests, O(N·K²) each, plus O(N·D·K + E·F·K²) for potentials and gradients.
    Inference is exact and always converges (unlike loopy BP / TRW learning). The bound uses the tree
    likelihoods of the partial labels, log P_τ(v | o) = log Z_τ(v, o) − log Z_τ(o).
    """

    def __init__(self, n_labels=None, trees=None, n_trees=4, n_rounds=20, cg_iterations=5, c2=1.0,
                 beta=None, tol=1e-4, selection="greedy", feature_subsets=None, parallel=False, max_iterations=50,
                 predict_method="logop_map", inference="bp", inference_options=None, random_state=None,
                 verbose=False):
        self._store_params(locals())

    # ------------------------------------------------------------------------------------------------
    def _check_params(self):
        for name in ("n_trees", "n_rounds", "cg_iterations", "max_iterations"):
            check_int(name, getattr(self, name))
        check_number("c2", self.c2)
        check_number("tol", self.tol)
        check_number("beta", self.beta, upper=1.0, none_ok=True)
        check_choice("selection", self.selection, ("greedy", "cyclic"))
        check_choice("predict_method", self.predict_method, ("logop_map", "ensemble"))
        check_choice("inference", self.inference, ("bp", "trw", "exact"))
        check_int("n_labels", self.n_labels, none_ok=True)
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
        trees = self._check_params()
        t0 = time.perf_counter()
        rs = check_random_state(self.random_state)
        self._tree_seed = int(rs.randint(2**31 - 1))
        batch = check_graphs(X)
        K = int(self.n_labels) if self.n_labels is not None else self._infer_n_labels(y)
        yy = check_graph_labels(y, batch, K)
        masks = self._tree_masks(X, batch, trees, self._tree_seed)
        scale = self._edge_scale(masks, np.arange(len(masks)), np.full(len(masks), 1.0 / len(masks)))
        objs = [GraphCLL(_tree_batch(batch, m, scale), yy, K, method="exact", c2=float(self.c2))
                for m in masks]
        B = batch.n_graphs
        n_obs = np.bincount(batch.node_graph()[yy >= 0], minlength=B)
        beta = self.beta if self.beta is not None else 1.0 / max(1.0, float(n_obs.mean()))
        self.beta_ = float(beta)
        n_params = objs[0].n_params
        self.bound_, self.objective_ = [], []
        subsets = self._feature_subsets(batch.n_node_features, rs)
        self.feature_subsets_ = subsets
        if self.parallel:
            uncovered = int(np.sum(~np.any(masks, axis=0))) if masks and batch.edges.shape[0] else 0
            if uncovered:
                warnings.warn(f"{uncovered} of {batch.edges.shape[0]} edges lie in no candidate tree: they are "
                              f"not trained, the LogOP leaves them out, and `coef_` / `to_graph_crf()` (the "
                              f"CRF of w on the whole graph) differ from it there; add trees that cover them",
                              UserWarning)
            w, self.converged_ = self._fit_parallel(objs, beta, n_params, B)
            self.alphas_ = np.full(len(objs), 1.0 / len(objs))
            self.learner_coefs_ = np.tile(w, (len(objs), 1))
            self.learner_trees_ = np.arange(len(objs))
            self.learner_features_ = np.zeros(len(objs), dtype=np.int64)
        else:
            D = batch.n_node_features
            frees = [_free_parameters(batch, m, K) for m in masks]
            cands = [(t, f) for t in range(len(objs)) for f in range(len(subsets))]
            # a learner moves its feature subset's node weights (all of them by default) and its tree's
            # edge blocks; everything else is carried from the current ensemble
            moves = [frees[t] if subsets[f] is None else
                     np.concatenate([(subsets[f][:, None] * K + np.arange(K)).ravel(), frees[t][frees[t] >= D * K]])
                     for t, f in cands]
            self._fit_sequential(objs, cands, moves, beta, n_params, B)
            w = np.zeros(n_params)
            for a, c, w_l in zip(self.alphas_, self.learner_trees_, self.learner_coefs_):
                w[frees[c]] += a * w_l[frees[c]]
        self._set_coef(w, batch.n_node_features, batch.n_edge_features, K)
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
            return [np.sort(rs.choice(D, size=size, replace=False)).astype(np.int64) for _ in range(fs)]
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

    def _fit_sequential(self, objs, cands, moves, beta, n_params, B):
        H = np.zeros(B)                      # Σ_j α_j log P_τj(v_i | o_i)
        alphas, coefs, chosen = [], [], []
        w_ens = np.zeros(n_params)           # Σ_j α_j w_j so far (carried weights included): the warm start
        value_prev = np.inf
        self.converged_ = False
        L = len(cands)
        cyclic = self.selection == "cyclic"
        stale = 0
        for r in range(self.n_rounds):
            D = np.exp(np.log(B) + (-beta * H) - logsumexp(-beta * H))    # mean 1
            best = None

            def objective(a, ll, w_c):
                # J = (B/β)·(log L_H − log B) + c2‖w‖² of the ensemble with the candidate at weight a
                lh = logsumexp(-beta * ((1 - a) * H + a * ll))
                w = (1 - a) * w_ens + a * w_c
                return float(B / beta * (lh - np.log(B)) + self.c2 * (w @ w))

            for c in ([r % L] if cyclic else range(L)):
                obj, free = objs[cands[c][0]], moves[c]
                obj.sample_weight = D
                w_c = w_ens.copy()
                w_c[free] = minimize_cg(_Restricted(obj, w_ens, free), w_ens[free], self.cg_iterations)[0]
                ll = -obj.per_graph(w_c)                                    # log P_τ(v_i | o_i)
                if not alphas:
                    alpha = 1.0
                else:
                    def f(a, ll=ll, w_c=w_c):
                        return objective(a, ll, w_c)
                    res = minimize_scalar(f, bounds=(0.0, 1.0), method="bounded",
                                          options={"xatol": 1e-6})
                    alpha = min((0.0, float(res.x), 1.0), key=f)
                value = objective(alpha, ll, w_c)
                bound = float(logsumexp(-beta * ((1 - alpha) * H + alpha * ll)))
                if best is None or value < best[0]:
                    best = (value, c, alpha, w_c, ll, bound)
            value, c, alpha, w_c, ll, bound = best
            if self.verbose:
                print(f"round {r + 1:3d}  tree {c}  alpha {alpha:.4f}  log L_H {bound:.6g}  J {value:.6g}")
            if alphas and (alpha <= 0.0 or value >= value_prev - self.tol * max(1.0, abs(value_prev))):
                stale += 1
                if not cyclic or stale >= L:
                    self.converged_ = True
                    break
                continue
            stale = 0
            alphas = [a * (1.0 - alpha) for a in alphas] + [alpha]
            coefs.append(w_c)
            chosen.append(c)
            H = (1.0 - alpha) * H + alpha * ll
            w_ens = (1.0 - alpha) * w_ens + alpha * w_c
            self.bound_.append(bound)
            self.objective_.append(value)
            value_prev = value
        keep = [j for j, a in enumerate(alphas) if a > 0]     # learners whose weight fell to 0 are dropped
        self.alphas_ = np.array([alphas[j] for j in keep])
        self.learner_coefs_ = np.array([coefs[j] for j in keep])
        self.learner_trees_ = np.array([cands[chosen[j]][0] for j in keep], dtype=np.int64)
        self.learner_features_ = np.array([cands[chosen[j]][1] for j in keep], dtype=np.int64)

    def _fit_parallel(self, objs, beta, n_params, B):
        objective = ParallelHolderBound(objs, beta, float(self.c2))
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


def _tree_batch(batch, mask, scale):
    """The graphs with only the edges ``mask``, each edge's features multiplied by ``scale[e]``."""
    sub = batch.with_edges(mask)
    s = scale[np.asarray(mask, dtype=bool)]
    if np.all(s == 1.0):
        return sub
    return type(sub)(sub.node_features, sub.edges, sub.edge_features * s[:, None], sub.lengths,
                     sub.edge_lengths)


class _Restricted:
    """``objective`` as a function of the entries ``free`` of w, the others held at ``base``."""

    def __init__(self, objective, base, free):
        self.objective, self.base, self.free = objective, base, free

    def value_and_grad(self, z):
        w = self.base.copy()
        w[self.free] = z
        value, grad = self.objective.value_and_grad(w)
        return value, grad[self.free]


def _free_parameters(batch, mask, K):
    """Indices of the parameters a tree CRF on the edges ``mask`` depends on: every node parameter and
    the K×K block of every edge feature that is non-zero on some tree edge."""
    D, F = batch.n_node_features, batch.n_edge_features
    used = np.any(batch.edge_features[mask] != 0, axis=0) if F else np.zeros(0, bool)
    edge = np.flatnonzero(np.repeat(used, K * K)) + D * K
    return np.concatenate([np.arange(D * K), edge]).astype(np.int64)


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
        L, B, beta = len(self.objs), self.B, self.beta
        H = np.zeros(B)
        G = np.zeros((B, self.n_params))
        for obj in self.objs:
            per, grads = _per_graph_grad(obj, w)
            H -= per / L                    # H_i = Σ_l α_l log P_τl(v_i | o_i; w)
            G += grads / L                  # ∇(−H_i)
        lse = logsumexp(-beta * H)
        value = B / beta * (lse - np.log(B)) + self.c2 * float(w @ w)
        soft = np.exp(-beta * H - lse)
        grad = B * (soft @ G) + 2 * self.c2 * w
        return float(value), grad


def _per_graph_grad(obj, w):
    """Per-graph −log P(v_i | o_i) (B,) and its gradient (B, n_params) under a GraphCLL (no L2)."""
    G = np.zeros((obj.batch.n_graphs, obj.n_params))
    _, _, per = obj._evaluate(np.asarray(w, dtype=np.float64), need_grad=False, per_graph_grad=G)
    return per, G
