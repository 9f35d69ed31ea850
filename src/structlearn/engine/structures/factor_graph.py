"""Discrete factor graphs (Markov random fields with factors of any arity): exact inference by a junction
tree, loopy BP, tree-reweighted BP and mean field over one message-passing engine.

Layout of this package part: :mod:`.factor_graph_options` (``BPOptions``, ``GraphInference``),
:mod:`.factor_graph_pack` (validation and packing), :mod:`.factor_graph_trees` (forests, sweep order,
TRW weights), :mod:`.factor_graph_exact` (junction tree); kernels in :mod:`structlearn.engine.kernels.messages`
(message passing), :mod:`structlearn.engine.kernels.beliefs`,
:mod:`structlearn.engine.kernels.mean_field` and :mod:`structlearn.engine.kernels.elimination`.
"""
import dataclasses
import warnings

import numpy as np

from ..kernels import beliefs as _b
from ..kernels import mean_field as _mf
from ..kernels import messages as _k
from ..semirings import LOG, MAX, semiring_code
from ...utils.validation import check_lengths, check_log_potentials
from . import factor_graph_smf as _smf
from . import factor_graph_trees as _trees
from ._base import StructureBase
from .factor_graph_exact import JunctionTree, run_junction_tree, shared_plan
from .factor_graph_options import METHODS, PRESETS, BPOptions, GraphInference
from .factor_graph_pack import _check_edges, _pack_pairwise, _pack_unary, check_edge_ends, pack_factors

__all__ = ["FactorGraph", "BPOptions", "GraphInference", "JunctionTree", "PRESETS", "check_edge_ends"]


class FactorGraph(StructureBase):
    r"""Distribution over joint labelings of discrete factor graphs (a packed batch of graphs).

    The score of a labeling :math:`x` of one graph with variable potentials :math:`θ_n` and factors
    :math:`θ_I` over scopes :math:`I` (any arity, variables of mixed cardinality) is

    .. math:: s(x) = \sum_n θ_n(x_n) + \sum_I θ_I(x_I)

    and :math:`p(x) = \exp(s(x) - \log Z)` (Kschischang, Frey & Loeliger 2001; a CRF on a general graph:
    Tran, Phung & Venkatesh, arXiv:1407.6432 (2014), §2). Two constructors:

    - ``FactorGraph(unary, edges, pairwise)``: pairwise MRFs, ``θ_n = unary[n]`` and one factor per edge
      ``θ_e(x_u, x_v) = pairwise[e, x_u, x_v]``; results carry ``edge`` marginals (E, K, K).
    - :meth:`FactorGraph.from_factors` ``(cardinalities, factors, tables)``: factors of any arity.

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
        Number of edges of every graph; required when ``lengths`` has more than one entry.
    n_labels : array-like of int, shape (N,), optional
        Number of labels of every node for the array form of ``unary``; default K for every node.

    Raises
    ------
    ValueError
        Shapes that disagree, NaN/+inf potentials, edge ends out of range or equal (self loop),
        lengths that do not sum to N / E.

    Notes
    -----
    Methods (:meth:`infer`), each giving log Z, (max-)marginals and (max-product) a MAP in one call:

    - ``"exact"``: forests by one leaves-to-root-to-leaves sweep of the engine; other graphs by a
      junction tree from a min-fill / min-weight elimination order (:meth:`junction_tree` reports
      treewidth and table sizes), time and memory O(Σ_cliques Π_{v ∈ C} K_v), refused with a
      ValueError naming the largest clique beyond ``max_table_size`` / ``memory_limit``.
    - ``"bp"``: loopy belief propagation, sum- or max-product, log domain; exact on forests; log Z is the
      negative Bethe free energy.
    - ``"trw"``: tree-reweighted BP (Wainwright, Jaakkola & Willsky 2005), the same kernel with factor
      weights ρ; log Z is an upper bound at a fixed point (``bound="upper"``).
    - ``"mf"``: naive mean field, or structured mean field over given clusters (``clusters=``, e.g. the
      rows of a grid); log Z is its evidence lower bound (``bound="lower"``).

    Message passing costs time O(n_iter · Σ_f arity(f) · (|table_f| + Σ_{v ∈ f} deg(v) K)) and memory
    O(P · K). ``constrain(allowed)`` restricts labels (partial labels, evidence).

    Examples
    --------
    A triangle of binary variables that must all differ has no labeling:

    >>> import numpy as np
    >>> neq = np.where(np.eye(2, dtype=bool), -np.inf, 0.0)
    >>> g = FactorGraph(np.zeros((3, 2)), [[0, 1], [1, 2], [0, 2]], neq)
    >>> float(g.log_partition(method="exact")[0])
    -inf

    A factor of arity 3 over variables with 2, 3 and 2 labels:

    >>> t = np.log(np.arange(1.0, 13.0)).reshape(2, 3, 2)
    >>> g = FactorGraph.from_factors([2, 3, 2], [(0, 1, 2)], [t])
    >>> round(float(np.exp(g.log_partition("exact")[0])), 6)
    78.0
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
        # one factor per edge over (u, v), strides (K, 1) into the padded (K, K) tables
        fvar = np.empty(2 * E, dtype=np.int64)
        fvar[0::2], fvar[1::2] = self._eu, self._ev
        fstride = np.tile(np.array([K, 1], dtype=np.int64), E)
        toff = (np.zeros(E, dtype=np.int64) if self.shared_pairwise else np.arange(E, dtype=np.int64) * K * K)
        self._set_factors(fvar, np.arange(0, 2 * E + 1, 2, dtype=np.int64), fstride,
                          np.ascontiguousarray(self._pair.ravel()), toff, self.edge_lengths, None)

    @classmethod
    def from_factors(cls, cardinalities, factors, tables, *, lengths=None, factor_lengths=None):
        """A factor graph of factors of any arity.

        Parameters
        ----------
        cardinalities : array-like of int, shape (N,)
            Number of labels of every variable (≥ 1); N = sum(lengths).
        factors : sequence of F sequences of int
            Scope of every factor: distinct variable indices local to its graph; the factors of graph b
            follow those of graph b − 1.
        tables : sequence of F array-likes of float64
            Log-potentials, ``tables[f]`` of shape ``[cardinalities[v] for v in factors[f]]``: axis j
            is the j-th variable of the scope (NumPy C order: the last variable changes fastest in the
            flattened table). -inf forbids a configuration.
        lengths : array-like of int, shape (B,), optional
            Variables per graph; default one graph.
        factor_lengths : array-like of int, shape (B,), optional
            Factors per graph; required for more than one graph.

        Raises
        ------
        ValueError
            Non-positive cardinalities, scopes out of range or with repeated variables, tables of the
            wrong shape, NaN/+inf entries, lengths that do not sum to N / F.
        """
        card = np.asarray(cardinalities)
        if card.ndim != 1 or card.size == 0 or not np.issubdtype(card.dtype, np.integer) or card.min() < 1:
            raise ValueError(f"`cardinalities` must be a non-empty 1-d array of integers ≥ 1; got "
                             f"{card.dtype} {card.shape}" + (f" with minimum {card.min()}" if card.size else ""))
        card = card.astype(np.int64)
        N, K = card.size, int(card.max())
        self = cls.__new__(cls)
        self._init_batch(N, K, lengths)
        F = len(factors)
        if factor_lengths is None:
            if self.batch_size > 1:
                raise ValueError(f"`factor_lengths` (factors per graph) is required when `lengths` holds "
                                 f"{self.batch_size} graphs")
            factor_lengths = [F]
        flen, _ = check_lengths(factor_lengths, F, name="factor_lengths", rows_name="`factors`")
        fgraph = np.repeat(np.arange(self.batch_size), flen)
        scopes, fvar, fptr, fstride, tab, toff = pack_factors(card, factors, tables, self.offsets, fgraph)
        self.unary = np.where(np.arange(K)[None, :] < card[:, None], 0.0, -np.inf)
        self.n_states = card
        self.edges = None
        self._set_factors(fvar, fptr, fstride, tab, toff, flen, scopes)
        return self

    def _set_factors(self, fvar, fptr, fstride, tab, toff, flen, scopes):
        self._fvar, self._fptr, self._fstride, self._tab, self._toff = fvar, fptr, fstride, tab, toff
        self.factor_lengths = flen.astype(np.int64)
        self.factor_offsets = np.concatenate([[0], np.cumsum(flen)]).astype(np.int64)
        F = fptr.shape[0] - 1
        self._fac_graph = np.repeat(np.arange(self.batch_size), flen)
        self._slot_fac = np.repeat(np.arange(F), np.diff(fptr)).astype(np.int64)
        order = np.argsort(fvar, kind="stable")
        self._vslot = np.ascontiguousarray(order.astype(np.int64))
        self._vptr = np.zeros(self.n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(fvar, minlength=self.n_rows), out=self._vptr[1:])
        sizes = np.multiply.reduceat(self.n_states[fvar], fptr[:-1]) if F else np.zeros(0, np.int64)
        self._boff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._scopes = scopes
        self._cache = {}

    # -- structure ----------------------------------------------------------------------------------
    def __repr__(self):
        """One line whatever the size of the batch: counts, cardinalities (``{cardinality: number of
        variables}`` for up to four distinct values, else their range) and the largest factor arity.

        Cost: time O(N log N + F) (np.unique over the N cardinalities)."""
        card = np.asarray(self.n_states, dtype=np.int64)
        values, counts = np.unique(card, return_counts=True)
        if values.size == 1:
            cards = str(int(values[0]))
        elif values.size <= 4:
            cards = "{" + ", ".join(f"{int(v)}: {int(c)}" for v, c in zip(values, counts)) + "}"
        else:
            cards = f"{int(values[0])}..{int(values[-1])}"
        arity = int(np.diff(self._fptr).max()) if self.n_factors else 0
        return (f"FactorGraph(batch_size={self.batch_size}, n_variables={self.n_rows}, n_factors={self.n_factors}, "
                f"cardinalities={cards}, max_factor_arity={arity}, pairwise={self.is_pairwise})")

    @property
    def is_pairwise(self):
        """Whether the graph was built from ``edges`` (results carry ``edge`` marginals)."""
        return self.edges is not None

    @property
    def pairwise(self):
        """Edge log-potentials, (K, K) if shared else (E, K, K) (pairwise graphs)."""
        return self._pair[0] if self.shared_pairwise else self._pair

    @property
    def n_edges(self):
        return int(self._eu.shape[0]) if self.is_pairwise else 0

    @property
    def n_factors(self):
        return int(self._fptr.shape[0] - 1)

    @property
    def scopes(self):
        """Scope of every factor (tuples of local variable indices)."""
        if self._scopes is None:
            self._scopes = [tuple(e) for e in self.edges.tolist()]
        return self._scopes

    def table(self, f):
        """Log-potential table of factor f, shape its scope's cardinalities."""
        p = slice(self._fptr[f], self._fptr[f + 1])
        shape = tuple(int(c) for c in self.n_states[self._fvar[p]])
        return np.lib.stride_tricks.as_strided(self._tab[self._toff[f]:], shape,
                                               tuple(8 * int(s) for s in self._fstride[p])).copy()

    def _graph_of_node(self):
        return np.repeat(np.arange(self.batch_size), self.lengths)

    @property
    def is_forest(self):
        """Whether every graph's factor graph is a forest (no cycle, no two factors on the same pair of
        variables), shape (B,) bool."""
        if "forest" not in self._cache:
            self._cache["forest"] = _trees.forest_flags(self.n_rows, self.n_factors, self._fvar, self._slot_fac,
                                                        self._graph_of_node(), self._fac_graph, self.batch_size)
        return self._cache["forest"].copy()

    def edge_appearance(self):
        """Edge (factor) appearance probabilities of the uniform distribution over spanning trees, shape
        (E,) for pairwise graphs, (F,) otherwise (factors of arity 1: 1); see
        :func:`~structlearn.engine.structures.factor_graph_trees.edge_appearance`.

        Raises ValueError when a factor has arity above 2 (use ``rho="sample"``).
        """
        if "rho" not in self._cache:
            ar = np.diff(self._fptr)
            if ar.size and ar.max() > 2:
                raise ValueError(f"uniform spanning-tree weights need factors of arity ≤ 2; factor "
                                 f"{int(np.argmax(ar))} has arity {int(ar.max())}; use rho='sample'")
            rho = np.ones(self.n_factors)
            two = np.flatnonzero(ar == 2)
            p = self._fptr[two]
            rho[two] = _trees.edge_appearance(self._fvar[p], self._fvar[p + 1], self.n_rows)
            self._cache["rho"] = rho
        return self._cache["rho"].copy()

    def sampled_appearance(self, n_trees=100, random_state=0):
        """Factor appearance frequencies in ``n_trees`` random maximal hyperforests, shape (F,); see
        :func:`~structlearn.engine.structures.factor_graph_trees.sampled_appearance`. Every graph is sampled on
        its own (with a fresh generator when ``random_state`` is an int or None), so a batch gives the
        weights of its graphs one by one."""
        rho = np.ones(self.n_factors)
        from sklearn.utils import check_random_state  # lazily: importing structures never imports sklearn

        fixed = random_state is None or isinstance(random_state, (int, np.integer))
        rng = check_random_state(random_state)
        for b in range(self.batch_size):
            f0, f1 = self.factor_offsets[b], self.factor_offsets[b + 1]
            p0, p1 = self._fptr[f0], self._fptr[f1]
            rho[f0:f1] = _trees.sampled_appearance(int(self.lengths[b]), self._fvar[p0:p1] - self.offsets[b],
                                                   self._fptr[f0:f1 + 1] - p0, int(n_trees),
                                                   check_random_state(random_state) if fixed else rng)
        return rho

    def junction_tree(self, graph=0, order="auto"):
        """The compiled :class:`JunctionTree` of graph ``graph`` (treewidth, cliques, table sizes).

        ``order``: ``"auto"``, ``"min-fill"``, ``"min-weight"``, ``"natural"`` or a permutation of the
        graph's variables (see :func:`~structlearn.engine.structures.factor_graph_exact.plan_junction_tree`).
        Shared by the graphs of the same structure in this process
        (:func:`~structlearn.engine.structures.factor_graph_exact.shared_plan`): read it, never modify it.
        """
        key = ("jt", int(graph), order if isinstance(order, str) else tuple(np.asarray(order).tolist()))
        if key not in self._cache:
            n0, n1 = self.offsets[graph], self.offsets[graph + 1]
            f0, f1 = self.factor_offsets[graph], self.factor_offsets[graph + 1]
            self._cache[key] = shared_plan(self.n_states[n0:n1], self.scopes[f0:f1], order, self.n_labels)
        return self._cache[key]

    def _sweep(self):
        if "sweep" not in self._cache:
            self._cache["sweep"] = _trees.sweep_order(self.n_rows, self.n_factors, self._fvar, self._slot_fac,
                                                      self._fac_graph)
        return self._cache["sweep"]

    def _engine(self):
        return (self.unary, self.n_states, self._fptr, self._fvar, self._fstride, self._tab, self._toff,
                self._vptr, self._vslot, self._slot_fac)

    # -- inference ----------------------------------------------------------------------------------
    def infer(self, method="bp", *, semiring="log", options=None, init=None, max_table_size=2**24,
              memory_limit=2**31, order="auto", clusters=None, **changes):
        """Run one inference method: log Z (or the MAP score), (max-)marginals and (max) a MAP labeling.

        Parameters
        ----------
        method : {"bp", "trw", "mf", "exact"}
        semiring : {"log", "max"}
            Sum-product (log Z, marginals) or max-product (max-marginals, MAP). ``"mf"`` is sum only.
        options : BPOptions or str, optional
            Options or a preset name; default ``BPOptions.preset(method)``. Keyword ``changes`` replace
            single fields (``damping=0.5``).
        init : ndarray of float64, optional
            Initial log-messages (P, K) (``messages`` of an earlier result; pairwise graphs (2E, K));
            mean field: initial q (N, K). Default uniform (mean field: q ∝ exp(unary + arity-1
            factors)).
        max_table_size : int
            Largest clique table (entries) the junction tree may build for ``"exact"``.
        memory_limit : int
            Bytes the junction tree may keep (Σ of its clique tables for a calibration).
        order : {"auto", "min-fill", "min-weight", "natural"} or array-like of int
            Elimination order of the junction tree (``"exact"`` on graphs with cycles); ``"auto"``: the
            cheapest (Σ of clique tables) of min-fill, min-weight and the variables' own order.
        clusters : list of lists of int, optional
            ``"mf"`` only: structured mean field over these clusters of (packed) variables — q factorises
            over the clusters and is exact within each (chains or trees of a grid, say; variables not
            listed are singletons); see :mod:`~structlearn.engine.structures.factor_graph_smf`. Default: naive
            mean field.

        Returns
        -------
        GraphInference

        Raises
        ------
        ValueError
            Unknown method/semiring/options; ``"exact"`` over the table or memory limit (naming the
            largest clique); ``"exact"`` max-product on a graph without a feasible labeling; ``"mf"``
            with ``semiring="max"``.

        Warns
        -----
        ConvergenceWarning
            When message passing or mean field stops at ``max_iter`` on some graph.
        """
        sr = semiring_code(semiring)
        if clusters is not None and method != "mf":
            raise ValueError(f"`clusters` (structured mean field) applies to method='mf'; got {method!r}")
        if method == "exact":
            if options is not None or changes or init is not None:
                raise ValueError("`options`, `init` and option changes apply to 'bp', 'trw' and 'mf', not "
                                 "'exact'")
            return self._exact(sr, max_table_size, memory_limit, order, True)
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
        if method == "mf":
            if sr == MAX:
                raise ValueError("`semiring`='max' is not available for method='mf' (mean field is a "
                                 "sum-product approximation; its `labels` decode q); use 'bp', 'trw' or 'exact'")
            if clusters is not None:
                return self._structured_mean_field(options, init, clusters)
            return self._mean_field(options, init)
        return self._message_passing(method, sr, options, self._rho(method, options), init)

    def _rho(self, method, opt):
        F = self.n_factors
        rho = opt.rho
        if method == "bp":
            return np.ones(F)
        if rho is None:
            ar = np.diff(self._fptr)
            rho = "uniform" if (ar.size == 0 or ar.max() <= 2) else "sample"
        if isinstance(rho, str):
            if rho == "uniform":
                return self.edge_appearance()
            if rho == "sample":
                return self.sampled_appearance(opt.n_trees, opt.random_state)
            raise ValueError(f"`rho` must be None, 'uniform', 'sample' or an array of shape ({F},); got {rho!r}")
        rho = np.asarray(rho, dtype=np.float64)
        what = "edge" if self.is_pairwise else "factor"
        if rho.shape != (F,):
            raise ValueError(f"`rho` must have shape ({F},) (one probability per {what}); got {rho.shape}")
        if F and not (np.all(rho > 0) and np.all(rho <= 1)):
            raise ValueError(f"`rho` must lie in (0, 1]; got values in [{rho.min()}, {rho.max()}]")
        return np.ascontiguousarray(rho)

    def _init_messages(self, init):
        P, K = self._fvar.shape[0], self.n_labels
        if init is None:
            msg = np.zeros((P, K))
            msg[np.arange(K)[None, :] >= self.n_states[self._fvar][:, None]] = -np.inf
            return msg
        msg = check_log_potentials(init, "init", (P, K))
        return np.ascontiguousarray(msg[self._swap()] if self.is_pairwise else msg.copy())

    def _swap(self):
        """Pairwise graphs: slot 2e (factor → u) is documented as message v → u = ``2e + 1``."""
        return np.arange(self._fvar.shape[0]) ^ 1

    def _run_engine(self, sr, rho, msg, schedule, damping, max_iter, tol):
        if sr == MAX:
            etab, eok = np.zeros(1), np.zeros(self.n_factors, dtype=bool)
        else:
            etab, eok = _k.linear_tables(self.n_states, self._fptr, self._fvar, self._fstride, self._tab,
                                         self._toff, self._boff, rho)
        run = _k.message_passing if self.batch_size > 1 else _k.message_passing_serial
        return run(*self._engine(), rho, self.factor_offsets, self._sweep(), msg, sr, schedule, float(damping),
                   int(max_iter), float(tol), etab, self._boff, eok)

    def _finish(self, sr, rho, msg):
        """Beliefs (and for MAX the decoding and its score) from final messages."""
        run = _b.beliefs if self.batch_size > 1 else _b.beliefs_serial
        log_bv, log_bf, log_z = run(*self._engine(), rho, self.offsets, self.factor_offsets, self._boff, msg, sr)
        with np.errstate(under="ignore"):
            unary, fb = np.exp(log_bv), np.exp(log_bf)
        labels = None
        if sr == MAX:
            dead = np.zeros(self.batch_size, dtype=bool)
            np.logical_or.at(dead, self._graph_of_node(), np.all(log_bv == -np.inf, axis=1))
            if self.n_factors:
                fdead = np.maximum.reduceat(log_bf, self._boff[:-1]) == -np.inf if log_bf.size else []
                np.logical_or.at(dead, self._fac_graph, fdead)
            labels = _b.decode(self.n_states, self._fptr, self._fvar, self._vptr, self._vslot, self._slot_fac,
                               self._boff, self.offsets, log_bv, log_bf)
            log_z = self.score(labels)
            log_z[dead] = -np.inf
        return log_z, unary, fb, labels

    def _message_passing(self, method, sr, opt, rho, init):
        msg = self._init_messages(init)
        conv, n_iter, res = self._run_engine(sr, rho, msg, _k.SCHEDULES[opt.schedule], opt.damping,
                                             opt.max_iter, opt.tol)
        if opt.warn and not conv.all():
            from sklearn.exceptions import ConvergenceWarning  # lazily: structures never import sklearn

            bad = np.flatnonzero(~conv)
            warnings.warn(
                f"{'loopy BP' if method == 'bp' else 'TRW-BP'} did not converge on {bad.size} of "
                f"{conv.size} graph(s) (first: graph {int(bad[0])}) within max_iter={opt.max_iter}: "
                f"largest residual {res[bad].max():.3g} >= tol={opt.tol:g}; raise max_iter, add damping "
                f"or use schedule='sequential'", ConvergenceWarning, stacklevel=3)
        log_z, unary, fb, labels = self._finish(sr, rho, msg)
        out_msg = msg[self._swap()] if self.is_pairwise else msg
        bound = "upper" if method == "trw" and sr == LOG else "none"
        return self._result(log_z, unary, fb, labels, conv, n_iter, res, out_msg, method, bound, sr)

    def _result(self, log_z, unary, fb, labels, conv, n_iter, res, msg, method, bound, sr):
        dead = log_z == -np.inf
        if dead.any():
            unary[dead[self._graph_of_node()]] = 0.0
            fb[np.repeat(dead[self._fac_graph], np.diff(self._boff))] = 0.0
        shapes = [tuple(int(c) for c in self.n_states[self._fvar[self._fptr[f]:self._fptr[f + 1]]])
                  for f in range(self.n_factors)] if not self.is_pairwise else None
        edge = self._edge_from_flat(fb) if self.is_pairwise else None
        r = GraphInference(log_z, unary, edge, labels, conv, n_iter, res, msg, method, fb, self._boff, shapes,
                           bound, "max" if sr == MAX else "log")
        if self.is_pairwise:
            k = self.n_states
            r.factor_shapes = list(zip(k[self._eu].tolist(), k[self._ev].tolist()))
        return r

    def _edge_from_flat(self, fb):
        E, K = self.n_edges, self.n_labels
        if np.all(self.n_states == K):
            return fb.reshape(E, K, K)
        if "edge_index" not in self._cache:
            kv = self.n_states[self._ev]
            e = np.repeat(np.arange(E), np.diff(self._boff))
            r = np.arange(fb.size) - self._boff[e]
            self._cache["edge_index"] = (e * K + r // kv[e]) * K + r % kv[e]
        out = np.zeros(E * K * K)
        out[self._cache["edge_index"]] = fb
        return out.reshape(E, K, K)

    # -- exact --------------------------------------------------------------------------------------
    def _exact(self, sr, max_table_size, memory_limit, order, calibrate):
        B, N, K = self.batch_size, self.n_rows, self.n_labels
        forest = self.is_forest
        rho = np.ones(self.n_factors)
        if forest.any():
            # one sweep leaves → roots → leaves is exact on a forest
            msg = self._init_messages(None)
            self._run_engine(sr, rho, msg, _k.SEQUENTIAL, 0.0, 1, 0.0)
            log_z, unary, fb, labels = self._finish(sr, rho, msg)
        else:
            log_z, unary, fb = np.zeros(B), np.zeros((N, K)), np.zeros(self._boff[-1])
            labels = np.zeros(N, dtype=np.int64) if sr == MAX else None
        for b in np.flatnonzero(~forest):
            plan = self.junction_tree(b, order)
            store = calibrate or sr == MAX
            plan.check(max_table_size, memory_limit, store, graph=int(b))
            n0, n1 = self.offsets[b], self.offsets[b + 1]
            f0, f1 = self.factor_offsets[b], self.factor_offsets[b + 1]
            scopes = self.scopes[f0:f1]
            tables = [self.table(f) for f in range(f0, f1)]
            lz, vm, fm, lab = run_junction_tree(plan, self.n_states[n0:n1], self.unary[n0:n1], scopes, tables, sr,
                                                store)
            log_z[b] = lz
            if store:
                unary[n0:n1] = vm
                if f1 > f0:
                    fb[self._boff[f0]:self._boff[f1]] = np.concatenate([t.ravel() for t in fm])
            if sr == MAX and lab is not None:
                labels[n0:n1] = lab
        if sr == MAX:
            bad = np.flatnonzero(log_z == -np.inf)
            if bad.size:
                b = int(bad[0])
                raise ValueError(f"cannot compute argmax: graph {b} (nodes {self.offsets[b]}:"
                                 f"{self.offsets[b + 1]}) has no labeling with non-zero potential")
        return self._result(log_z, unary, fb, labels, np.ones(B, dtype=bool), np.zeros(B, dtype=np.int64),
                            np.zeros(B), None, "exact", "exact", sr)

    # -- mean field ---------------------------------------------------------------------------------
    def _initial_q(self, init):
        """Mean field's starting q (N, K): ``init`` validated, or q ∝ exp(variable potentials + arity-1
        factors)."""
        N, K = self.n_rows, self.n_labels
        if init is not None:
            q = np.array(init, dtype=np.float64)
            if q.shape != (N, K) or not np.all(np.isfinite(q)) or q.min() < 0:
                raise ValueError(f"`init` for mean field must be non-negative finite q of shape ({N}, {K}); got "
                                 f"{q.shape}")
            return q
        logit = self.unary.copy()
        for f in np.flatnonzero(np.diff(self._fptr) == 1):
            v = self._fvar[self._fptr[f]]
            logit[v, :self.n_states[v]] += self.table(f)
        with np.errstate(under="ignore", invalid="ignore"):
            m = logit.max(axis=1, keepdims=True)
            q = np.exp(logit - np.where(np.isfinite(m), m, 0.0))
        q /= np.maximum(q.sum(axis=1, keepdims=True), 1e-300)
        return q

    def _mean_field(self, opt, init):
        q = np.ascontiguousarray(self._initial_q(init))
        run = _mf.mean_field if self.batch_size > 1 else _mf.mean_field_serial
        conv, n_iter, res, elbo = run(*self._engine(), self.offsets, self.factor_offsets, q, int(opt.max_iter),
                                      float(opt.tol))
        if opt.warn and not conv.all():
            from sklearn.exceptions import ConvergenceWarning  # lazily: structures never import sklearn

            bad = np.flatnonzero(~conv)
            warnings.warn(f"mean field did not converge on {bad.size} of {conv.size} graph(s) (first: graph "
                          f"{int(bad[0])}) within max_iter={opt.max_iter}: largest change {res[bad].max():.3g} "
                          f">= tol={opt.tol:g}", ConvergenceWarning, stacklevel=3)
        fb = np.empty(self._boff[-1])
        for f in range(self.n_factors):
            t = np.ones(())
            for v in self._fvar[self._fptr[f]:self._fptr[f + 1]]:
                t = np.multiply.outer(t, q[v, :self.n_states[v]])
            fb[self._boff[f]:self._boff[f + 1]] = t.ravel()
        labels = np.argmax(q, axis=1).astype(np.int64)
        return self._result(elbo, q.copy(), fb, labels, conv, n_iter, res, q, "mf", "lower", LOG)

    def _structured_mean_field(self, opt, init, clusters):
        elbo, q, fb, conv, n_iter, res = _smf.structured_mean_field(self, clusters, opt, init)
        if opt.warn and not conv.all():
            from sklearn.exceptions import ConvergenceWarning  # lazily: structures never import sklearn

            bad = np.flatnonzero(~conv)
            warnings.warn(f"structured mean field did not converge on {bad.size} of {conv.size} graph(s) "
                          f"(first: graph {int(bad[0])}) within max_iter={opt.max_iter}: largest change "
                          f"{res[bad].max():.3g} >= tol={opt.tol:g}", ConvergenceWarning, stacklevel=3)
        labels = np.argmax(q, axis=1).astype(np.int64)
        return self._result(elbo, q.copy(), fb, labels, conv, n_iter, res, q, "mf", "lower", LOG)

    # -- queries ------------------------------------------------------------------------------------
    def log_partition(self, method="bp", **kwargs):
        """log Z of every graph (exact, Bethe estimate, TRW upper bound or mean-field lower bound), shape
        (B,); see :meth:`infer`. ``"exact"`` runs the junction tree's upward pass only."""
        if method == "exact" and kwargs.get("semiring", "log") == "log":
            kw = {k: kwargs.pop(k) for k in ("max_table_size", "memory_limit", "order") if k in kwargs}
            kwargs.pop("semiring", None)
            if kwargs:
                raise ValueError(f"unknown argument(s) {sorted(kwargs)} for method='exact'")
            return self._exact(LOG, kw.get("max_table_size", 2**24), kw.get("memory_limit", 2**31),
                               kw.get("order", "auto"), False).log_z
        return self.infer(method, **kwargs).log_z

    def marginals(self, method="bp", **kwargs):
        """``Marginals(unary (N, K), edge (E, K, K))`` (pseudo-marginals for bp/trw/mf); see :meth:`infer`."""
        return self.infer(method, **kwargs).marginals

    def argmax(self, method="bp", **kwargs):
        """MAP labeling (N,) int64 by max-product (exact for ``"exact"``; on forests for every method).

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
        if self.n_factors:
            idx = self._toff + np.add.reduceat(labels[self._fvar] * self._fstride, self._fptr[:-1])
            np.add.at(out, self._fac_graph, self._tab[idx])
        return out

    def constrain(self, allowed):
        """A new graph restricted to labelings allowed by the boolean mask ``allowed`` (N, K).

        Partial labels and evidence: allow only the observed label at observed nodes, every label
        elsewhere.
        """
        out = FactorGraph.__new__(FactorGraph)
        out.__dict__.update(self.__dict__)
        out.unary = self._masked_unary(self.unary, allowed)
        out._cache = dict(self._cache)          # structure only: trees, weights, junction trees
        return out
