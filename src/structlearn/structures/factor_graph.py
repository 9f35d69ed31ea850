"""Pairwise factor graphs (Markov random fields) with loopy BP, tree-reweighted BP and exact inference."""
import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..kernels import messages as _k
from ..semirings import LOG, MAX, semiring_code
from ..utils.validation import check_lengths, check_log_potentials
from ._base import Marginals, StructureBase

METHODS = ("bp", "trw", "exact")


@dataclass(frozen=True)
class BPOptions:
    """Options of the message-passing engine (libDAI style: one small record, named presets).

    Parameters
    ----------
    max_iter : int
        Largest number of iterations (one iteration updates every directed message once).
    tol : float
        Converged when an iteration changes no message by ``tol`` or more (max |Δm| in linear space,
        messages normalised to sum 1).
    damping : float in [0, 1)
        Geometric damping, ``log m ← (1 − damping) log m_new + damping log m_old``.
    schedule : {"sequential", "parallel", "residual"}
        ``"sequential"``: messages u → v in edge order, then v → u in reverse edge order, each using the
        newest messages; ``"parallel"`` (flooding): all messages from the previous iteration's;
        ``"residual"``: residual BP (Elidan, McGraw & Koller 2006), always the message whose update
        changes it most, O(log E) bookkeeping per update; ``max_iter`` counts 2E updates.
    rho : None, "uniform" or array-like of float, shape (E,)
        TRW edge appearance probabilities in (0, 1]; ``None``/``"uniform"``: those of the uniform
        distribution over spanning trees (effective resistances). Ignored by ``method="bp"`` (ρ ≡ 1).
    warn : bool
        Emit a ``ConvergenceWarning`` when a graph does not converge.

    Presets (``BPOptions.preset(name, **changes)``): ``"bp"`` sequential, no damping;
    ``"bp_parallel"`` flooding with damping 0.5; ``"trw"`` sequential with damping 0.3;
    ``"residual"`` residual BP; ``"fast"`` tol 1e-6, max_iter 50.
    """

    max_iter: int = 500
    tol: float = 1e-10
    damping: float = 0.0
    schedule: str = "sequential"
    rho: object = None
    warn: bool = True

    @classmethod
    def preset(cls, name, **changes):
        """Named preset with fields replaced by ``changes``; ValueError for an unknown name."""
        if name not in PRESETS:
            raise ValueError(f"unknown BPOptions preset {name!r}; expected one of {sorted(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **changes)

    @classmethod
    def resolve(cls, method, options, name="options"):
        """The options learning uses for ``method`` from None / a preset name / a dict of fields / a
        BPOptions; None for ``"exact"``.

        None gives ``preset(method, tol=1e-5, max_iter=200, warn=False)``; a name or a dict of fields
        gives that preset (the dict: ``method``'s preset with the fields replaced) with ``warn=False``
        unless the dict sets it. ``name`` is the argument named in error messages (``inference_options``
        for the estimators).
        """
        if options is not None and not isinstance(options, (str, dict, BPOptions)):
            raise ValueError(f"`{name}` must be None, a preset name, a dict of BPOptions fields or a "
                             f"BPOptions; got {type(options).__name__}")
        if method == "exact":
            return None
        if options is None:
            return cls.preset(method, tol=1e-5, max_iter=200, warn=False)
        if isinstance(options, str):
            return cls.preset(options, warn=False)
        if isinstance(options, dict):
            fields = [f.name for f in dataclasses.fields(BPOptions)]
            unknown = sorted(str(k) for k in options if k not in fields)
            if unknown:
                raise ValueError(f"`{name}` has unknown BPOptions field(s) {unknown}; known: {fields}")
            return cls.preset(method, **{"warn": False, **options})
        return options

    def _checked(self):
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"`max_iter` must be a positive integer; got {self.max_iter!r}")
        if not (np.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"`tol` must be a non-negative number; got {self.tol!r}")
        if not (0.0 <= self.damping < 1.0):
            raise ValueError(f"`damping` must lie in [0, 1); got {self.damping!r}")
        if self.schedule not in _k.SCHEDULES:
            raise ValueError(f"`schedule` must be one of {sorted(_k.SCHEDULES)}; got {self.schedule!r}")
        return self


PRESETS = {
    "bp": BPOptions(),
    "bp_parallel": BPOptions(schedule="parallel", damping=0.5),
    "trw": BPOptions(damping=0.3),
    "residual": BPOptions(schedule="residual"),
    "fast": BPOptions(tol=1e-6, max_iter=50),
}


@dataclass
class GraphInference:
    """Result of :meth:`FactorGraph.infer`.

    Attributes
    ----------
    log_z : ndarray of float64, shape (B,)
        Sum-product: exact log Z (``"exact"``), the Bethe estimate (``"bp"``) or the TRW upper bound
        (``"trw"``, at convergence). Max-product: the score of ``labels`` (the exact maximum for
        ``"exact"``; a lower bound on it otherwise). -inf when infeasible.
    unary : ndarray of float64, shape (N, K)
        Node (pseudo-)marginals P(x_n = k), linear space, 0 on padded labels (max-product: normalised
        max-marginals). All 0 for a graph whose ``log_z`` is -inf.
    edge : ndarray of float64, shape (E, K, K)
        Edge (pseudo-)marginals, ``edge[e, i, j]`` = P(x_u = i, x_v = j) for ``edges[e] = (u, v)``.
    labels : ndarray of int64, shape (N,) or None
        Max-product decoding (argmax of every node's max-marginal); None for sum-product.
    converged : ndarray of bool, shape (B,)
    n_iter : ndarray of int64, shape (B,)
    max_residual : ndarray of float64, shape (B,)
        Largest message change of the last iteration (0 for exact inference).
    messages : ndarray of float64, shape (2E, K) or None
        Final log-messages (``2e``: u → v, ``2e + 1``: v → u); pass them as ``init`` to warm-start.
    method : str
    """

    log_z: np.ndarray
    unary: np.ndarray
    edge: np.ndarray
    labels: object
    converged: np.ndarray
    n_iter: np.ndarray
    max_residual: np.ndarray
    messages: object
    method: str

    @property
    def marginals(self):
        """``Marginals(unary, edge)``."""
        return Marginals(self.unary, self.edge)


class FactorGraph(StructureBase):
    r"""Distribution over joint labelings of pairwise Markov random fields (a packed batch of graphs).

    The score of a labeling :math:`x` of one graph :math:`G = (V, E)` is

    .. math:: s(x) = \sum_{n \in V} unary[n, x_n] + \sum_{e = (u, v) \in E} pairwise[e, x_u, x_v]

    and :math:`p(x) = \exp(s(x) - \log Z)` (a conditional MRF / CRF on a general graph; Tran, Phung &
    Venkatesh, "Learning Structured Outputs from Partial Labels using Forest Ensemble", arXiv:1407.6432
    (2014), §2).

    Parameters
    ----------
    unary : array-like of float64, shape (N, K), or list of N 1-d arrays
        Node log-potentials; N = sum(lengths). The list form lets node n have its own number of labels
        ``len(unary[n])`` (packed with -inf padding to K = the largest). -inf forbids a label.
    edges : array-like of int, shape (E, 2)
        Edge ends as node indices *local to their graph* (0 ≤ u, v < lengths[b]); E = sum(edge_lengths).
        Self loops are refused; parallel edges are allowed (their potentials add).
    pairwise : array-like of float64, shape (K, K) or (E, K, K), or list of E 2-d arrays
        Edge log-potentials ``pairwise[e, i, j]`` for ``x_u = i, x_v = j`` where ``edges[e] = (u, v)``;
        (K, K) is shared by every edge; list entries have shape (k_u, k_v). -inf forbids a pair.
    lengths : array-like of int, shape (B,), optional
        Number of nodes of every graph; default one graph.
    edge_lengths : array-like of int, shape (B,), optional
        Number of edges of every graph (edges of graph b follow those of graph b − 1); required when
        ``lengths`` has more than one entry.
    n_labels : array-like of int, shape (N,), optional
        Number of labels of every node for the array form of ``unary`` (labels ≥ n_labels[n] are
        padding); default K for every node.

    Raises
    ------
    ValueError
        Shapes that disagree, NaN/+inf potentials, edge ends out of range or equal (self loop),
        lengths that do not sum to N / E.

    Notes
    -----
    Back ends (:meth:`infer`):

    - ``"bp"``: loopy belief propagation (Pearl 1988; Yedidia, Freeman & Weiss 2005) in the log
      domain, sum- or max-product; exact on trees and forests. log Z is the negative Bethe free energy.
    - ``"trw"``: tree-reweighted BP (Wainwright, Jaakkola & Willsky 2005) — the same kernel with edge
      appearance probabilities ρ; log Z is an upper bound on the true one at a fixed point. ρ ≡ 1 is BP.
    - ``"exact"``: graphs that are forests go through :class:`structlearn.structures.Tree` (time
      O(N·K²)); other graphs through a junction tree built from a greedy min-fill elimination order
      (time and memory O(Σ_cliques Π_{v ∈ C} K_v)), refused with ValueError beyond ``max_table_size``.

    Message passing costs time O(n_iter · (E·K² + Σ_n deg(n)²·K)) and memory O(E·K²) (edge beliefs).
    Partial labels: ``constrain(allowed)`` gives the graph restricted to allowed labels, so the
    incomplete log-likelihood is ``constrain(allowed).log_partition() - log_partition()``.

    Examples
    --------
    A triangle of binary variables that must all differ has no labeling:

    >>> import numpy as np
    >>> neq = np.where(np.eye(2, dtype=bool), -np.inf, 0.0)
    >>> g = FactorGraph(np.zeros((3, 2)), [[0, 1], [1, 2], [0, 2]], neq)
    >>> float(g.log_partition(method="exact")[0])
    -inf
    """

    def __init__(self, unary, edges, pairwise, *, lengths=None, edge_lengths=None, n_labels=None):
        unary, nlab = _pack_unary(unary, n_labels)
        N, K = unary.shape
        self._init_batch(N, K, lengths)
        E, eu, ev = _check_edges(edges)
        if edge_lengths is None:
            if self.batch_size > 1:
                raise ValueError(f"`edge_lengths` (edges per graph) is required when `lengths` holds "
                                 f"{self.batch_size} graphs")
            edge_lengths = [E] * self.batch_size
        self.edge_lengths, self.edge_offsets = check_lengths(edge_lengths, E, name="edge_lengths",
                                                             rows_name="`edges`")
        self._edge_graph = gid = np.repeat(np.arange(self.batch_size), self.edge_lengths)
        check_edge_ends(eu, ev, self.lengths[gid], graph=gid, hint="; put a node's own potential in `unary`")
        self.edges = np.stack([eu, ev], axis=1) if E else np.zeros((0, 2), dtype=np.int64)
        self._eu = np.ascontiguousarray(eu + self.offsets[:-1][gid])
        self._ev = np.ascontiguousarray(ev + self.offsets[:-1][gid])
        self.unary = unary
        self.n_states = nlab
        self._pair, self.shared_pairwise = _pack_pairwise(pairwise, E, K)
        # CSR of incoming messages: 2e arrives at ev[e], 2e + 1 at eu[e]
        dest = np.empty(2 * E, dtype=np.int64)
        dest[0::2], dest[1::2] = self._ev, self._eu
        order = np.argsort(dest, kind="stable")
        self._in_msg = np.ascontiguousarray(order.astype(np.int64))
        self._in_ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(dest, minlength=N), out=self._in_ptr[1:])
        self._cache = {}

    # -- parameters ---------------------------------------------------------------------------------
    @property
    def pairwise(self):
        """Edge log-potentials, (K, K) if shared else (E, K, K)."""
        return self._pair[0] if self.shared_pairwise else self._pair

    @property
    def n_edges(self):
        return int(self._eu.shape[0])

    def _graph_of_node(self):
        return np.repeat(np.arange(self.batch_size), self.lengths)

    @property
    def is_forest(self):
        """Whether every graph is a forest (no cycle, no parallel edges), shape (B,) bool."""
        if "forest" not in self._cache:
            n_comp, labels = self._components()
            comp_per_graph = np.zeros(self.batch_size, dtype=np.int64)
            first = np.unique(labels, return_index=True)[1]
            np.add.at(comp_per_graph, self._graph_of_node()[first], 1)
            self._cache["forest"] = self.edge_lengths == self.lengths - comp_per_graph
        return self._cache["forest"].copy()

    def _components(self):
        if "comp" not in self._cache:
            from scipy.sparse import coo_matrix
            from scipy.sparse.csgraph import connected_components

            N = self.n_rows
            A = coo_matrix((np.ones(self.n_edges), (self._eu, self._ev)), shape=(N, N))
            self._cache["comp"] = connected_components(A, directed=False)
        return self._cache["comp"]

    def edge_appearance(self):
        """Edge appearance probabilities of the uniform distribution over spanning trees, shape (E,).

        ρ_e = P(e ∈ T) for T uniform over the spanning trees (forests) of e's connected component,
        which is the effective resistance between e's ends with unit resistors (Kirchhoff; Lyons & Peres,
        "Probability on Trees and Networks", §4.2): ρ_e = (1_u − 1_v)ᵀ L⁺ (1_u − 1_v), computed per
        component from the Laplacian as L⁺ = (L + J/n)⁻¹ − J/n. Bridges get 1; Σ_e ρ_e = n − 1 per
        component. Time O(Σ_components n³), memory O(max n²).
        """
        if "rho" not in self._cache:
            _, labels = self._components()
            rho = np.ones(self.n_edges)
            ecomp = labels[self._eu] if self.n_edges else np.zeros(0, dtype=np.int64)
            order = np.argsort(ecomp, kind="stable")
            bounds = np.flatnonzero(np.diff(ecomp[order])) + 1
            for idx in np.split(order, bounds) if self.n_edges else []:
                nodes, inv = np.unique(np.concatenate([self._eu[idx], self._ev[idx]]), return_inverse=True)
                n = nodes.shape[0]
                u, v = inv[:idx.size], inv[idx.size:]
                L = np.zeros((n, n))
                np.add.at(L, (u, v), -1.0)
                np.add.at(L, (v, u), -1.0)
                L[np.diag_indices(n)] = -L.sum(axis=1)
                P = np.linalg.inv(L + 1.0 / n) - 1.0 / n
                r = P[u, u] + P[v, v] - 2.0 * P[u, v]
                rho[idx] = np.clip(r, 1e-12, 1.0)
            self._cache["rho"] = rho
        return self._cache["rho"].copy()

    # -- inference ----------------------------------------------------------------------------------
    def infer(self, method="bp", *, semiring="log", options=None, init=None, max_table_size=2**24,
              **changes):
        """Run one inference back end.

        Parameters
        ----------
        method : {"bp", "trw", "exact"}
        semiring : {"log", "max"}
            Sum-product (log Z, marginals) or max-product (MAP).
        options : BPOptions or str, optional
            Message-passing options or a preset name; default ``BPOptions.preset(method)`` for
            ``"bp"``/``"trw"``. Keyword ``changes`` replace single fields (``damping=0.5``).
        init : ndarray of float64, shape (2E, K), optional
            Initial log-messages (e.g. ``messages`` of an earlier result); default uniform.
        max_table_size : int
            Largest clique table (entries) the junction tree may build for ``"exact"``.

        Returns
        -------
        GraphInference

        Raises
        ------
        ValueError
            Unknown method/semiring/options; ``"exact"`` on a graph whose junction tree needs a table
            larger than ``max_table_size``.

        Warns
        -----
        ConvergenceWarning
            When message passing stops at ``max_iter`` on some graph (``converged`` is False there).
        """
        sr = semiring_code(semiring)
        if method == "exact":
            if options is not None or changes or init is not None:
                raise ValueError("`options`, `init` and option changes apply to 'bp' and 'trw', not "
                                 "'exact'")
            return self._exact(sr, max_table_size)
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {list(METHODS)}; got {method!r}")
        if options is None:
            options = BPOptions.preset(method)
        elif isinstance(options, str):
            options = BPOptions.preset(options)
        elif not isinstance(options, BPOptions):
            raise ValueError(f"`options` must be a BPOptions or a preset name; got {type(options).__name__}")
        if changes:
            bad = set(changes) - {f.name for f in dataclasses.fields(BPOptions)}
            if bad:
                raise ValueError(f"unknown option(s) {sorted(bad)}; BPOptions fields are "
                                 f"{[f.name for f in dataclasses.fields(BPOptions)]}")
            options = dataclasses.replace(options, **changes)
        options._checked()
        rho = self._rho(method, options.rho)
        return self._message_passing(method, sr, options, rho, init)

    def _rho(self, method, rho):
        E = self.n_edges
        if method == "bp":
            return np.ones(E)
        if rho is None or (isinstance(rho, str) and rho == "uniform"):
            return self.edge_appearance()
        if isinstance(rho, str):
            raise ValueError(f"`rho` must be None, 'uniform' or an array of shape ({E},); got {rho!r}")
        rho = np.asarray(rho, dtype=np.float64)
        if rho.shape != (E,):
            raise ValueError(f"`rho` must have shape ({E},) (one probability per edge); got {rho.shape}")
        if E and not (np.all(rho > 0) and np.all(rho <= 1)):
            raise ValueError(f"`rho` must lie in (0, 1]; got values in [{rho.min()}, {rho.max()}]")
        return np.ascontiguousarray(rho)

    def _message_passing(self, method, sr, opt, rho, init):
        E, K = self.n_edges, self.n_labels
        if init is None:
            msg = np.zeros((2 * E, K))
            ks = np.empty(2 * E, dtype=np.int64)
            ks[0::2], ks[1::2] = self.n_states[self._ev], self.n_states[self._eu]
            msg[np.arange(K)[None, :] >= ks[:, None]] = -np.inf
        else:
            msg = check_log_potentials(init, "init", (2 * E, K)).copy()
        args = (self.unary, self.n_states, self.offsets, self.edge_offsets, self._eu, self._ev,
                self._pair, rho, self._in_ptr, self._in_msg)
        conv, n_iter, res = _k.message_passing(*args, msg, sr, _k.SCHEDULES[opt.schedule],
                                               float(opt.damping), int(opt.max_iter), float(opt.tol))
        if opt.warn and not conv.all():
            bad = np.flatnonzero(~conv)
            warnings.warn(
                f"{'loopy BP' if method == 'bp' else 'TRW-BP'} did not converge on {bad.size} of "
                f"{conv.size} graph(s) (first: graph {int(bad[0])}) within max_iter={opt.max_iter}: "
                f"largest residual {res[bad].max():.3g} >= tol={opt.tol:g}; raise max_iter, add damping "
                f"or use schedule='sequential'", ConvergenceWarning, stacklevel=3)
        log_bn, log_be, log_z = _k.beliefs(*args, msg)
        with np.errstate(under="ignore"):
            unary, edge = np.exp(log_bn), np.exp(log_be)
        labels = None
        if sr == MAX:
            labels = np.argmax(log_bn, axis=1).astype(np.int64)
            dead = log_z == -np.inf
            log_z = self.score(labels)
            log_z[dead] = -np.inf
        self._zero_infeasible(log_z, unary, edge)
        return GraphInference(log_z, unary, edge, labels, conv, n_iter, res, msg, method)

    def log_partition(self, method="bp", **kwargs):
        """log Z of every graph (exact, Bethe estimate or TRW bound), shape (B,); see :meth:`infer`."""
        return self.infer(method, **kwargs).log_z

    def marginals(self, method="bp", **kwargs):
        """``Marginals(unary (N, K), edge (E, K, K))`` (pseudo-marginals for bp/trw); see :meth:`infer`."""
        return self.infer(method, **kwargs).marginals

    def argmax(self, method="bp", **kwargs):
        """MAP labeling (N,) int64 by max-product (exact for ``"exact"`` and on trees with unique MAP).

        Raises ValueError for ``"exact"`` when a graph has no feasible labeling.
        """
        return self.infer(method, semiring="max", **kwargs).labels

    def max(self, method="exact", **kwargs):
        """Score of the max-product labeling of every graph, shape (B,) (exact for ``"exact"``)."""
        return self.infer(method, semiring="max", **kwargs).log_z

    def score(self, labels):
        """Log-score s(x) of the packed labeling ``labels`` (N,) per graph, shape (B,); -inf if forbidden."""
        labels = np.asarray(labels)
        if labels.shape != (self.n_rows,) or (labels.size and not np.issubdtype(labels.dtype, np.integer)):
            raise ValueError(f"`labels` must be an int array of shape ({self.n_rows},); got "
                             f"{labels.dtype} {labels.shape}")
        labels = labels.astype(np.int64)
        bad = np.flatnonzero((labels < 0) | (labels >= self.n_states))
        if bad.size:
            n = int(bad[0])
            raise ValueError(f"`labels`[{n}] = {int(labels[n])} is out of range: node {n} has "
                             f"{int(self.n_states[n])} labels")
        out = np.zeros(self.batch_size)
        np.add.at(out, self._graph_of_node(), self.unary[np.arange(self.n_rows), labels])
        if self.n_edges:
            pe = np.zeros(self.n_edges, dtype=np.int64) if self.shared_pairwise else np.arange(self.n_edges)
            np.add.at(out, self._edge_graph, self._pair[pe, labels[self._eu], labels[self._ev]])
        return out

    def constrain(self, allowed):
        """A new graph restricted to labelings allowed by the boolean mask ``allowed`` (N, K).

        Partial labels: allow only the observed label at observed nodes, every label elsewhere.
        """
        out = FactorGraph.__new__(FactorGraph)
        out.__dict__.update(self.__dict__)
        out.unary = self._masked_unary(self.unary, allowed)
        out._cache = {k: v for k, v in self._cache.items() if k in ("comp", "forest", "rho")}
        return out

    # -- exact --------------------------------------------------------------------------------------
    def _exact(self, sr, max_table_size):
        B, N, K, E = self.batch_size, self.n_rows, self.n_labels, self.n_edges
        log_z = np.zeros(B)
        unary = np.zeros((N, K))
        edge = np.zeros((E, K, K))
        labels = np.zeros(N, dtype=np.int64) if sr == MAX else None
        forest = self.is_forest
        if forest.any():
            self._exact_forest(forest, sr, log_z, unary, edge, labels)
        pe_all = np.zeros(E, dtype=np.int64) if self.shared_pairwise else np.arange(E)
        for b in np.flatnonzero(~forest):
            n0, n1 = self.offsets[b], self.offsets[b + 1]
            e0, e1 = self.edge_offsets[b], self.edge_offsets[b + 1]
            res = _junction_tree(self.unary[n0:n1], self.n_states[n0:n1], self._eu[e0:e1] - n0,
                                 self._ev[e0:e1] - n0, self._pair[pe_all[e0:e1]], sr, max_table_size, b)
            log_z[b] = res[0]
            if sr == LOG:
                unary[n0:n1], edge[e0:e1] = res[1], res[2]
            else:
                labels[n0:n1] = res[1]
        self._zero_infeasible(log_z, unary, edge)
        if sr == MAX:
            bad = np.flatnonzero(log_z == -np.inf)
            if bad.size:
                b = int(bad[0])
                raise ValueError(f"cannot compute argmax: graph {b} (nodes {self.offsets[b]}:"
                                 f"{self.offsets[b + 1]}) has no labeling with non-zero potential")
        return GraphInference(log_z, unary, edge, labels, np.ones(B, dtype=bool), np.zeros(B, dtype=np.int64),
                              np.zeros(B), None, "exact")

    def _zero_infeasible(self, log_z, unary, edge):
        """Marginals of graphs without a feasible labeling (log Z = -inf) are 0 everywhere."""
        dead = log_z == -np.inf
        if dead.any():
            unary[dead[self._graph_of_node()]] = 0.0
            edge[dead[self._edge_graph]] = 0.0

    def _exact_forest(self, forest, sr, log_z, unary, edge, labels):
        """Forests through the Tree engine: one Tree per connected component, rooted at its first node."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import breadth_first_order

        from .tree import Tree

        N, K = self.n_rows, self.n_labels
        gnode = self._graph_of_node()
        sel_nodes = np.flatnonzero(forest[gnode])
        if sel_nodes.size == 0:
            return
        sel_edges = np.flatnonzero(forest[self._edge_graph])
        _, comp = self._components()
        # root each component at its first node: BFS from a virtual super-root joined to every root
        first = np.unique(comp[sel_nodes], return_index=True)[1]
        roots = sel_nodes[first]
        eu, ev = self._eu[sel_edges], self._ev[sel_edges]
        S = N
        rows = np.concatenate([eu, ev, np.full(roots.size, S)])
        cols = np.concatenate([ev, eu, roots])
        A = coo_matrix((np.ones(rows.size), (rows, cols)), shape=(N + 1, N + 1)).tocsr()
        _, pred = breadth_first_order(A, S, directed=True, return_predecessors=True)
        parent = pred[sel_nodes]
        parent = np.where(parent == S, -1, parent)
        # edge id of every (child, parent) pair
        key = np.minimum(eu, ev) * N + np.maximum(eu, ev)
        korder = np.argsort(key)
        child = sel_nodes[parent >= 0]
        par = parent[parent >= 0]
        ce = sel_edges[korder[np.searchsorted(key[korder], np.minimum(child, par) * N +
                                              np.maximum(child, par))]]
        flip = self._eu[ce] != child                      # edge stored (parent, child): transpose
        # pack nodes component by component
        perm = sel_nodes[np.argsort(comp[sel_nodes], kind="stable")]
        lengths = np.bincount(np.unique(comp[sel_nodes], return_inverse=True)[1])
        pos = np.empty(N, dtype=np.int64)
        pos[perm] = np.arange(perm.size)
        comp_start = np.repeat(np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        tparent = np.full(perm.size, -1, dtype=np.int64)
        tparent[pos[child]] = pos[par] - comp_start[pos[child]]
        pe = np.zeros(ce.size, dtype=np.int64) if self.shared_pairwise else ce
        tedge = np.zeros((perm.size, K, K))
        pm = self._pair[pe]
        tedge[pos[child]] = np.where(flip[:, None, None], pm.transpose(0, 2, 1), pm)
        tree = Tree(self.unary[perm], tedge, tparent, lengths=lengths)
        comp_graph = gnode[perm[np.cumsum(lengths) - lengths]]
        if sr == MAX:
            best = tree.max()
            np.add.at(log_z, comp_graph, best)
            if np.isfinite(best).all():
                labels[perm] = tree.argmax()
            return
        np.add.at(log_z, comp_graph, tree.log_partition())
        m = tree.marginals()
        unary[perm] = m.unary
        em = m.edge[pos[child]]
        edge[ce] = np.where(flip[:, None, None], em.transpose(0, 2, 1), em)


def check_edge_ends(eu, ev, size, *, name="`edges`", graph=None, hint=""):
    """Raise ValueError for the first edge with an end outside ``0..size−1``, then the first self loop.

    Parameters
    ----------
    eu, ev : ndarray of int64, shape (E,)
        Edge ends, local to their graph.
    size : int or ndarray of int64, shape (E,)
        Node count of the graph of every edge.
    name : str
        How the edges are named in the message (``name[e] = (u, v) ...``).
    graph : ndarray of int64, shape (E,), optional
        Graph index of every edge, named in the message.
    hint : str
        Appended to the self-loop message.
    """
    bad = np.flatnonzero((eu < 0) | (eu >= size) | (ev < 0) | (ev >= size))
    if bad.size:
        e = int(bad[0])
        n = int(np.broadcast_to(size, eu.shape)[e])
        where = "the graph" if graph is None else f"graph {int(graph[e])}"
        raise ValueError(f"{name}[{e}] = ({int(eu[e])}, {int(ev[e])}) is out of range: {where} has {n} "
                         f"nodes (local indices 0..{n - 1})")
    bad = np.flatnonzero(eu == ev)
    if bad.size:
        e = int(bad[0])
        raise ValueError(f"{name}[{e}] = ({int(eu[e])}, {int(ev[e])}) is a self loop{hint}")


def _pack_unary(unary, n_labels):
    if isinstance(unary, (list, tuple)) and len(unary) and np.ndim(unary[0]) == 1 and \
            len({len(u) for u in unary}) > 1:
        if n_labels is not None:
            raise ValueError("`n_labels` is taken from the list form of `unary`; do not pass both")
        rows = [check_log_potentials(u, f"unary[{n}]", (None,)) for n, u in enumerate(unary)]
        nlab = np.array([r.shape[0] for r in rows], dtype=np.int64)
        K = int(nlab.max())
        out = np.full((len(rows), K), -np.inf)
        for n, r in enumerate(rows):
            out[n, :r.shape[0]] = r
        return out, nlab
    arr = check_log_potentials(unary, "unary", ndim=2)
    N, K = arr.shape
    if n_labels is None:
        nlab = np.full(N, K, dtype=np.int64)
    else:
        nlab = np.asarray(n_labels)
        if nlab.shape != (N,) or (nlab.size and not np.issubdtype(nlab.dtype, np.integer)):
            raise ValueError(f"`n_labels` must be an int array of shape ({N},); got {nlab.dtype} {nlab.shape}")
        nlab = nlab.astype(np.int64)
        if nlab.size and (nlab.min() < 1 or nlab.max() > K):
            raise ValueError(f"`n_labels` must lie in [1, {K}] (K = unary.shape[1]); got values in "
                             f"[{nlab.min()}, {nlab.max()}]")
        arr = arr.copy()
        arr[np.arange(K)[None, :] >= nlab[:, None]] = -np.inf
    if K == 0:
        raise ValueError("`unary` must have at least one label (K ≥ 1); got shape " + str(arr.shape))
    return arr, nlab


def _check_edges(edges):
    arr = np.asarray(edges)
    if arr.size == 0:
        return 0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"`edges` must have shape (E, 2) (one (u, v) pair per edge); got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`edges` must hold integer node indices; got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    return arr.shape[0], np.ascontiguousarray(arr[:, 0]), np.ascontiguousarray(arr[:, 1])


def _pack_pairwise(pairwise, E, K):
    if isinstance(pairwise, (list, tuple)) and len(pairwise) and np.ndim(pairwise[0]) == 2:
        if len(pairwise) != E:
            raise ValueError(f"`pairwise` as a list must have one (k_u, k_v) array per edge ({E}); got "
                             f"{len(pairwise)}")
        out = np.full((E, K, K), -np.inf)
        for e, p in enumerate(pairwise):
            p = check_log_potentials(p, f"pairwise[{e}]", ndim=2)
            if p.shape[0] > K or p.shape[1] > K:
                raise ValueError(f"`pairwise[{e}]` has shape {p.shape}, larger than (K, K) = ({K}, {K})")
            out[e, :p.shape[0], :p.shape[1]] = p
        return out, False
    arr = check_log_potentials(pairwise, "pairwise", ndim=(2, 3))
    if arr.ndim == 2:
        if arr.shape != (K, K):
            raise ValueError(f"`pairwise` must have shape (K, K) = ({K}, {K}) or (E, K, K) = ({E}, {K}, "
                             f"{K}); got {arr.shape}")
        return np.ascontiguousarray(arr[None]), True
    if arr.shape != (E, K, K):
        raise ValueError(f"`pairwise` must have shape (K, K) = ({K}, {K}) or (E, K, K) = ({E}, {K}, {K}); "
                         f"got {arr.shape}")
    return arr, False


# -- junction tree (plain NumPy, log domain) --------------------------------------------------------
def _reduce(table, axes, sr):
    """⊕ over ``axes`` (logsumexp or max), -inf safe."""
    if not axes:
        return table
    axes = tuple(axes)
    m = table.max(axis=axes, keepdims=True)
    if sr == MAX:
        return np.squeeze(m, axis=axes)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", under="ignore"):
        out = np.log(np.exp(table - m).sum(axis=axes, keepdims=True)) + m
    return np.squeeze(out, axis=axes)


def _expand(table, vars_, target, card):
    """Broadcast a table over sorted ``vars_`` to the sorted superset ``target``."""
    s = set(vars_)
    return table.reshape([card[v] if v in s else 1 for v in target])


def _marg(table, vars_, keep, sr):
    return _reduce(table, [i for i, v in enumerate(vars_) if v not in keep], sr)


def _junction_tree(unary, nlab, eu, ev, pair, sr, max_table_size, b):
    """Exact inference on one graph by a junction tree from a greedy min-fill elimination order.

    Returns (log_z, node marginals (n, K), edge marginals (E, K, K)) for LOG and (max, labels) for MAX.
    Elimination of v creates the clique C_v = {v} ∪ N(v); its separator C_v \\ {v} lies in the clique
    of the earliest-eliminated separator variable, its parent (Koller & Friedman 2009, §10.4.1).
    """
    n, K = unary.shape
    card = [int(k) for k in nlab]
    adj = [set() for _ in range(n)]
    for u, v in zip(eu.tolist(), ev.tolist()):
        adj[u].add(v)
        adj[v].add(u)
    alive = set(range(n))
    pos = {}
    cliques = []
    while alive:
        best, best_key = None, None
        for v in alive:
            nb = adj[v]
            fill = sum(1 for a in nb for c in nb if a < c and c not in adj[a])
            w = 1
            for a in nb:
                w *= card[a]
            key = (fill, w * card[v], v)
            if best_key is None or key < best_key:
                best, best_key = v, key
        size = best_key[1]
        if size > max_table_size:
            raise ValueError(
                f"exact inference on graph {b} needs a clique table of {size} entries ({len(adj[best]) + 1} "
                f"variables, treewidth ≥ {len(adj[best])} under a min-fill order) > max_table_size="
                f"{max_table_size}; use method='bp' or 'trw', or raise max_table_size")
        nb = adj[best]
        for a in nb:
            adj[a] |= nb - {a}
            adj[a].discard(best)
        pos[best] = len(cliques)
        cliques.append((best, tuple(sorted(nb | {best}))))
        alive.discard(best)
    m = len(cliques)
    parent = [-1] * m
    children = [[] for _ in range(m)]
    for i, (v, C) in enumerate(cliques):
        sep = [a for a in C if a != v]
        if sep:
            parent[i] = min(pos[a] for a in sep)
            children[parent[i]].append(i)
    psi = [np.zeros([card[a] for a in C]) for _, C in cliques]
    for v in range(n):
        i = pos[v]
        psi[i] = psi[i] + _expand(unary[v, :card[v]], (v,), cliques[i][1], card)
    e_clique, e_vars = [], []
    for e, (u, v) in enumerate(zip(eu.tolist(), ev.tolist())):
        i = min(pos[u], pos[v])
        t = pair[e, :card[u], :card[v]]
        vs = (u, v)
        if u > v:
            t, vs = t.T, (v, u)
        psi[i] = psi[i] + _expand(t, vs, cliques[i][1], card)
        e_clique.append(i)
        e_vars.append(vs)
    sep_of = [tuple(a for a in C if a != v) for v, C in cliques]
    up = [None] * m
    inc = [None] * m
    for i in range(m):
        C = cliques[i][1]
        t = psi[i]
        for c in children[i]:
            t = t + _expand(up[c], sep_of[c], C, card)
        inc[i] = t
        up[i] = _marg(t, C, sep_of[i], sr)
    total = float(sum(up[i] for i in range(m) if parent[i] < 0)) if m else 0.0
    if sr == MAX:
        labels = np.zeros(n, dtype=np.int64)
        if total == -np.inf:
            return total, labels
        for i in reversed(range(m)):
            v, C = cliques[i]
            idx = tuple(slice(None) if a == v else labels[a] for a in C)
            labels[v] = int(np.argmax(inc[i][idx]))
        return total, labels
    node = np.zeros((n, K))
    edge = np.zeros((eu.shape[0], K, K))
    if total == -np.inf:
        return total, node, edge
    down = [np.zeros(())] * m
    belief = [None] * m
    for i in reversed(range(m)):
        C = cliques[i][1]
        base = psi[i] + _expand(down[i], sep_of[i], C, card)
        belief[i] = inc[i] + _expand(down[i], sep_of[i], C, card)
        for c in children[i]:
            t = base
            for c2 in children[i]:
                if c2 != c:
                    t = t + _expand(up[c2], sep_of[c2], C, card)
            down[c] = _marg(t, C, sep_of[c], sr)
    with np.errstate(under="ignore"):
        for v in range(n):
            i = pos[v]
            C = cliques[i][1]
            z = _reduce(belief[i], list(range(len(C))), LOG)
            node[v, :card[v]] = np.exp(_marg(belief[i], C, (v,), LOG) - z)
        for e, (i, vs) in enumerate(zip(e_clique, e_vars)):
            C = cliques[i][1]
            z = _reduce(belief[i], list(range(len(C))), LOG)
            t = np.exp(_marg(belief[i], C, vs, LOG) - z)
            if vs[0] != eu[e]:
                t = t.T
            edge[e, :t.shape[0], :t.shape[1]] = t
    return total, node, edge
