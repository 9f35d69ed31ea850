r"""Hierarchical hidden Markov models (HHMM): the automaton and its flattening into chain potentials.

Model (Fine, Singer & Tishby 1998, "The hierarchical hidden Markov model", Machine Learning 32; Murphy &
Paskin 2001, "Linear-time inference in hierarchical HMMs", NIPS). An HHMM is an automaton whose
*abstract* states call sub-models (sub-HHMMs) and whose *production* states emit one observation. Every
sub-model m has children c_1..c_K with

- a vertical (initial) distribution π_m(i) — the child entered when m is called,
- horizontal transitions a_m(i, j) and end probabilities e_m(i) with Σ_j a_m(i, j) + e_m(i) = 1 —
  after child i has finished, m moves to child j or enters its end state and returns control to the
  caller.

The root sub-model is called once; the observation string is everything emitted until the root finishes.
A sub-model called from several parents is *shared* (tied): one set of parameters, several contexts.

**Representations** (Murphy & Paskin 2001 §2–§5), all available from the estimator
:class:`structlearn.hhmm.estimator.HierarchicalHMM`:

(a) the automaton (this module's :class:`Hierarchy`, built from nested dicts or from arrays);
(b) the DBN of Murphy & Paskin 2001 §4 with nodes Q^d_t, F^d_t (:meth:`HierarchicalHMM.to_dbn`,
    :class:`structlearn.hhmm.dbn.HHMMDBN`);
(c) the flattened HMM over the S legal stack configurations (root-to-production paths), Murphy & Paskin 2001 §2:
    a step from configuration s (path p_1..p_k) to s' is a sum of *atoms*, one per level d* at which
    the horizontal move happens:

    .. math:: P(s \to s') = \sum_{d^*} \Big[\prod_{l > d^*} e_{m_l}(p_l)\Big] a_{m_{d^*}}(p_{d^*}, p'_{d^*})
              \Big[\prod_{l > d^*} π_{m'_l}(p'_l)\Big]

    (levels below d* finish, level d* moves, the new branch is entered vertically); start(s) =
    Π_l π_{m_l}(p_l) and, when every sub-model must have finished at T (``finish="all"``, the clamped
    F nodes of seed Fig. 2), end(s) = Π_l e_{m_l}(p_l).

**Architecture.** Exact inference runs on the flattened potentials, either on the engine's
:class:`~structlearn.engine.structures.LinearChain` (time O(T·S²) per sequence — linear in T) or, for large
sparse hierarchies, on :class:`~structlearn.engine.structures.SparseChain` (the CSR kernels of
:mod:`structlearn.engine.kernels.chain_sparse`, time O(T·(E + S)), E = number of legal
configuration-to-configuration transitions; see ``inference``). The atoms give everything the DBN view
needs: posterior of the finished flags F^d_t (the atom posterior ξ_t(s, s')·atom/P(s→s')), the
family expected counts for EM (vertical, horizontal, end; tied parameters pooled automatically because
an atom names the *sub-model* parameters it uses), and Viterbi over (Q, F) jointly (max over atoms). The
O(T³) inside–outside algorithm of Fine et al. lives in :mod:`structlearn.engine.kernels._reference_hhmm` as the
reference implementation.
"""
import itertools
from collections import namedtuple

import numpy as np
from scipy import sparse

__all__ = ["Hierarchy", "FlatHMM", "log_sum_exp"]

_ATOL = 1e-8

#: Flattened HMM (representation (c)): ``log_start`` (S,), ``log_trans`` (S, S) dense "from, to",
#: ``log_end`` (S,) (0 when ``finish="none"``), ``transitions`` scipy CSR (S, S) linear-space
#: transition probabilities, ``config_paths`` list of S node-name tuples, ``production`` (S,) int64
#: production index of every configuration.
FlatHMM = namedtuple("FlatHMM", ["log_start", "log_trans", "log_end", "transitions", "config_paths",
                                 "production"])


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


def log_sum_exp(a, axis=None):
    """log Σ exp(a) over ``axis`` (all of ``a`` when None), exact when every entry is -inf."""
    a = np.asarray(a, dtype=np.float64)
    m = np.max(a, axis=axis, keepdims=True) if a.size else np.array(-np.inf)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())[()]


# ======================================================================================================
# the automaton
# ======================================================================================================
class Hierarchy:
    """A validated hierarchical automaton and its flattened bookkeeping (instances, configurations, atoms).

    Build it with :meth:`from_dict` or :meth:`from_arrays`;
    :class:`~structlearn.hhmm.estimator.HierarchicalHMM` does so for you.

    Attributes
    ----------
    submodel_names : list of str, length M (index 0 is the root)
    children : list of M lists of node names
    start, trans, end : lists of M arrays (K_m,), (K_m, K_m), (K_m,) float64 (linear space)
    production_names : list of str, length P — the row order of the emission parameters
    node_names : list of str, length V = M - 1 + P (abstract nodes, i.e. non-root sub-models, then
        production states)
    depth : int D, the largest number of levels on a root-to-production path
    instance_paths : list of U tuples of node names — every node in every context (root excluded)
    config_paths : list of S tuples — the instances that end in a production state
    """

    _KEYS = {"children", "start", "trans", "end", "production"}

    def __init__(self, submodel_names, children, start, trans, end, production_names):
        self.submodel_names = list(submodel_names)
        self.children = [list(c) for c in children]
        self.start = [np.asarray(s, dtype=np.float64) for s in start]
        self.trans = [np.asarray(a, dtype=np.float64) for a in trans]
        self.end = [np.asarray(e, dtype=np.float64) for e in end]
        self.production_names = list(production_names)
        self._compile()

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec, root=None):
        """Automaton from a nested dict ``{name: {"children": [...], "start": ..., "trans": ..., "end": ...}}``.

        Every key is an abstract state (= the sub-model it calls). A child name that is a key is an
        abstract child (listing the same abstract name under several parents shares that sub-model,
        parameters tied); any other child name is a production state (a name used under several parents
        is one production state with one, tied, emission distribution). An entry
        ``{"production": True}`` declares a production state explicitly (it must have no children).
        ``start`` (K,) defaults to uniform; ``trans`` (K, K) and ``end`` (K,) default to uniform over
        the K children and the end state (or the one not given is completed so rows sum to one).

        Parameters
        ----------
        spec : dict
        root : str, optional
            The root sub-model; default the only abstract state that is nobody's child.

        Raises
        ------
        ValueError
            A production state with children, an abstract state without children, unknown keys,
            duplicated children, a cycle in the call graph, several or no root candidates, sub-models
            unreachable from the root, distributions that are not stochastic, or a (non-root) sub-model
            that can never finish.
        """
        if isinstance(spec, Hierarchy):
            return spec.copy()
        if not isinstance(spec, dict) or not spec:
            raise ValueError(f"`hierarchy` must be a non-empty dict {{name: {{'children': [...], ...}}}}; "
                             f"got {type(spec).__name__}")
        declared_prod = set()
        abstract = {}
        for name, entry in spec.items():
            if not isinstance(name, str):
                raise ValueError(f"state names must be str; got {name!r}")
            if not isinstance(entry, dict):
                raise ValueError(f"hierarchy entry {name!r} must be a dict; got {type(entry).__name__}")
            bad = set(entry) - cls._KEYS
            if bad:
                raise ValueError(f"hierarchy entry {name!r} has unknown keys {sorted(bad)}; allowed: "
                                 f"{sorted(cls._KEYS)}")
            kids = list(entry.get("children", []) or [])
            if entry.get("production", False):
                if kids:
                    raise ValueError(f"production state {name!r} has children {kids}; a production "
                                     f"state emits one observation and cannot call a sub-model "
                                     f"(drop 'production' to make it abstract)")
                declared_prod.add(name)
                continue
            if not kids:
                raise ValueError(f"abstract state {name!r} has no children; give it a non-empty "
                                 f"'children' list or declare it {{'production': True}}")
            if len(set(kids)) != len(kids):
                dup = sorted({k for k in kids if kids.count(k) > 1})
                raise ValueError(f"abstract state {name!r} lists children {dup} more than once")
            for k in kids:
                if not isinstance(k, str):
                    raise ValueError(f"children of {name!r} must be names (str); got {k!r}")
            abstract[name] = kids
        # call graph: cycles
        color = {}

        def visit(n, stack):
            color[n] = 1
            for k in abstract[n]:
                if k in abstract:
                    if color.get(k) == 1:
                        cyc = stack[stack.index(k):] + [k] if k in stack else [n, k]
                        raise ValueError("cycle in the call graph: " + " -> ".join(cyc) + "; an HHMM "
                                         "needs a depth-limited stack (no recursion)")
                    if color.get(k) is None:
                        visit(k, stack + [k])
            color[n] = 2

        for n in abstract:
            if color.get(n) is None:
                visit(n, [n])
        called = {k for kids in abstract.values() for k in kids}
        if root is None:
            cands = [n for n in abstract if n not in called]
            if len(cands) != 1:
                raise ValueError(f"cannot tell the root: abstract states that nobody calls: {cands}; "
                                 f"pass `root=`")
            root = cands[0]
        elif root not in abstract:
            raise ValueError(f"`root` {root!r} is not an abstract state of the hierarchy "
                             f"({sorted(abstract)})")
        elif root in called:
            raise ValueError(f"`root` {root!r} is called by another state; the root cannot be a child")
        # order sub-models and production states by depth-first first appearance from the root
        order, prods, seen = [], [], set()

        def walk(n):
            order.append(n)
            seen.add(n)
            for k in abstract[n]:
                if k in abstract:
                    if k not in seen:
                        walk(k)
                elif k not in prods:
                    prods.append(k)

        walk(root)
        unreachable = [n for n in abstract if n not in seen]
        if unreachable:
            raise ValueError(f"abstract states {unreachable} are not reachable from the root {root!r}")
        start, trans, end = [], [], []
        for n in order:
            s, a, e = _entry_params(n, spec[n], len(abstract[n]), check_finish=n != root)
            start.append(s)
            trans.append(a)
            end.append(e)
        return cls(order, [abstract[n] for n in order], start, trans, end, prods)

    @classmethod
    def from_arrays(cls, start, trans, end, names=None):
        """Automaton of a balanced tree hierarchy from per-level tables indexed by the full context.

        Level d (0-based) has K_d children under every parent; its parameters are indexed by the
        context (the child indices at levels 0..d-1), as the DBN CPDs of Murphy & Paskin 2001 §4:
        ``start[d]`` (K_0, …, K_{d-1}, K_d), ``trans[d]`` (K_0, …, K_{d-1}, K_d, K_d), ``end[d]``
        (K_0, …, K_{d-1}, K_d). Productions are the leaves (Π K_d of them). Names: ``"root"``, then
        ``names(context)`` or dotted indices (``"q0.2"``).

        Raises
        ------
        ValueError
            Inconsistent shapes, or the checks of :meth:`from_dict`.
        """
        if not (len(start) == len(trans) == len(end)) or not start:
            raise ValueError(f"`start`, `trans`, `end` must be lists with one array per level (same "
                             f"length >= 1); got {len(start)}, {len(trans)}, {len(end)}")
        D = len(start)
        Ks = []
        for d in range(D):
            s = np.asarray(start[d], dtype=np.float64)
            if s.ndim != d + 1:
                raise ValueError(f"`start[{d}]` must have {d + 1} axes (context then children); got "
                                 f"shape {s.shape}")
            Ks.append(s.shape[-1])
            if s.shape[:-1] != tuple(Ks[:-1]):
                raise ValueError(f"`start[{d}]` must have shape {tuple(Ks)}; got {s.shape}")
            if np.shape(trans[d]) != tuple(Ks) + (Ks[-1],):
                raise ValueError(f"`trans[{d}]` must have shape {tuple(Ks) + (Ks[-1],)}; got "
                                 f"{np.shape(trans[d])}")
            if np.shape(end[d]) != tuple(Ks):
                raise ValueError(f"`end[{d}]` must have shape {tuple(Ks)}; got {np.shape(end[d])}")
        name = names or (lambda ctx: "q" + ".".join(str(c) for c in ctx))
        spec = {}
        for d in range(D):
            for ctx in itertools.product(*[range(k) for k in Ks[:d]]):
                key = "root" if d == 0 else name(ctx)
                spec[key] = {"children": [name(ctx + (j,)) for j in range(Ks[d])],
                             "start": np.asarray(start[d], dtype=np.float64)[ctx],
                             "trans": np.asarray(trans[d], dtype=np.float64)[ctx],
                             "end": np.asarray(end[d], dtype=np.float64)[ctx]}
        return cls.from_dict(spec, root="root")

    def to_dict(self):
        """The nested-dict form (lists; JSON-able)."""
        return {n: {"children": list(c), "start": s.tolist(), "trans": a.tolist(), "end": e.tolist()}
                for n, c, s, a, e in zip(self.submodel_names, self.children, self.start, self.trans,
                                         self.end)}

    def copy(self):
        return Hierarchy(self.submodel_names, self.children, [s.copy() for s in self.start],
                         [a.copy() for a in self.trans], [e.copy() for e in self.end],
                         self.production_names)

    # -- derived structures ------------------------------------------------------------------------
    def _compile(self):
        M = len(self.submodel_names)
        self.n_submodels = M
        self._sub_index = {n: i for i, n in enumerate(self.submodel_names)}
        self._prod_index = {n: i for i, n in enumerate(self.production_names)}
        self.node_names = self.submodel_names[1:] + self.production_names
        self._node_index = {n: i for i, n in enumerate(self.node_names)}
        # parameter layout: per sub-model [start (K), trans (K*K), end (K)]
        self._base = np.zeros(M + 1, dtype=np.int64)
        for m in range(M):
            K = len(self.children[m])
            self._base[m + 1] = self._base[m] + K + K * K + K
        # instances by depth-first expansion from the root
        paths, inst_parent, inst_sub, inst_pos, inst_level = [], [], [], [], []
        kids_of = {}  # (parent instance or -1) -> {child node: instance}

        def expand(parent, m, prefix):
            kids_of[parent] = {}
            for i, c in enumerate(self.children[m]):
                u = len(paths)
                paths.append(prefix + (c,))
                inst_parent.append(parent)
                inst_sub.append(m)
                inst_pos.append(i)
                inst_level.append(len(prefix) + 1)
                kids_of[parent][c] = u
                if c in self._sub_index:
                    expand(u, self._sub_index[c], prefix + (c,))

        expand(-1, 0, ())
        self.instance_paths = paths
        self._inst_parent = np.array(inst_parent, dtype=np.int64)
        self._inst_sub = np.array(inst_sub, dtype=np.int64)
        self._inst_pos = np.array(inst_pos, dtype=np.int64)
        self._inst_level = np.array(inst_level, dtype=np.int64)
        self._inst_node = np.array([self._node_index[p[-1]] for p in paths], dtype=np.int64)
        self._kids_of = kids_of
        U = len(paths)
        cfg_inst = [u for u in range(U) if paths[u][-1] in self._prod_index]
        self._cfg_inst = np.array(cfg_inst, dtype=np.int64)
        self.config_paths = [paths[u] for u in cfg_inst]
        self._cfg_index = {p: s for s, p in enumerate(self.config_paths)}
        S = len(cfg_inst)
        self.n_configs = S
        self._cfg_prod = np.array([self._prod_index[paths[u][-1]] for u in cfg_inst], dtype=np.int64)
        self.depth = int(max(len(p) for p in self.config_paths))
        # chain of instances of every configuration (level 1 .. k)
        chains = []
        for u in cfg_inst:
            ch = [u]
            while self._inst_parent[ch[-1]] >= 0:
                ch.append(int(self._inst_parent[ch[-1]]))
            chains.append(ch[::-1])
        self._cfg_chain = chains
        self._cfg_depth = np.array([len(c) for c in chains], dtype=np.int64)
        # configurations below every instance
        below = [[] for _ in range(U)]
        for s, ch in enumerate(chains):
            for u in ch:
                below[u].append(s)
        self._below = below
        # incidence: configuration -> instances on its path
        rows = [s for s, ch in enumerate(chains) for _ in ch]
        cols = [u for ch in chains for u in ch]
        self._anc = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(S, U))

        p_start, p_end = self._p_start, self._p_end

        P = int(self._base[-1])
        self.n_params = P
        # start / end of configurations: the start (end) parameter of every instance on the path
        ones = np.ones(len(rows))
        self._m_start = sparse.csr_matrix((ones, (rows, [p_start(u) for u in cols])), shape=(S, P))
        self._m_end = sparse.csr_matrix((ones, (rows, [p_end(u) for u in cols])), shape=(S, P))

    #: attributes built on first use by :meth:`_compile_atoms` (the flattened chain's atoms: O(S·Σ_d K^d)
    #: Python work, skipped by the DBN inference of deep hierarchies)
    _ATOM_ATTRS = frozenset({"_a_from", "_a_to", "_a_level", "_m_atom", "_fin", "_atom_index",
                             "_pair_keys", "_pair_from", "_pair_to", "_atom_pair", "_pair_indptr"})

    def __getattr__(self, name):
        if name in Hierarchy._ATOM_ATTRS and "_cfg_chain" in self.__dict__:
            self._compile_atoms()
            return self.__dict__[name]
        raise AttributeError(name)

    def _p_start(self, u):
        return self._base[self._inst_sub[u]] + self._inst_pos[u]

    def _p_end(self, u):
        m = self._inst_sub[u]
        K = len(self.children[m])
        return self._base[m] + K + K * K + self._inst_pos[u]

    def _compile_atoms(self):
        """The flattened chain's transition atoms (from s, to s', level d*) on the topology."""
        p_start, p_end = self._p_start, self._p_end

        def p_trans(m, i, j):
            K = len(self.children[m])
            return self._base[m] + K + i * K + j

        chains, below, kids_of = self._cfg_chain, self._below, self._kids_of
        S, U, P = self.n_configs, len(self.instance_paths), self.n_params
        # atoms (from s, to s', level d*) restricted to the topology (non-zero parameters)
        theta = self.theta()
        a_from, a_to, a_lev = [], [], []
        ar, ac = [], []      # atom -> parameter
        fr, fc = [], []      # atom -> instances that finish
        for s, ch in enumerate(chains):
            k = len(ch)
            for d in range(k, 0, -1):  # d*: the level that moves horizontally (1-based)
                u = ch[d - 1]
                m = int(self._inst_sub[u])
                i = int(self._inst_pos[u])
                parent = int(self._inst_parent[u])
                ends = [p_end(ch[l]) for l in range(d, k)]
                if any(theta[p] == 0 for p in ends):
                    break  # a lower level can never end from here, so no higher level moves either
                for j, cname in enumerate(self.children[m]):
                    pt = p_trans(m, i, j)
                    if theta[pt] == 0:
                        continue
                    w = kids_of[parent][cname]
                    for s2 in below[w]:
                        ch2 = chains[s2]
                        starts = [p_start(ch2[l]) for l in range(d, len(ch2))]
                        if any(theta[p] == 0 for p in starts):
                            continue
                        a = len(a_from)
                        a_from.append(s)
                        a_to.append(s2)
                        a_lev.append(d)
                        for p in ends + [pt] + starts:
                            ar.append(a)
                            ac.append(p)
                        for l in range(d - 1, k):  # spans ending: the moving node and those below
                            fr.append(a)
                            fc.append(ch[l])
        nA = len(a_from)
        self._a_from = np.array(a_from, dtype=np.int64)
        self._a_to = np.array(a_to, dtype=np.int64)
        self._a_level = np.array(a_lev, dtype=np.int64)
        self._m_atom = sparse.csr_matrix((np.ones(len(ar)), (ar, ac)), shape=(nA, P))
        self._m_atom.sum_duplicates()
        self._fin = sparse.csr_matrix((np.ones(len(fr)), (fr, fc)), shape=(nA, U))
        self._atom_index = {(f, t, d): a for a, (f, t, d) in enumerate(zip(a_from, a_to, a_lev))}
        # the E distinct (from, to) pairs with at least one atom, in CSR order: the sparsity pattern
        # of the flattened transition matrix; _atom_pair maps every atom to its pair
        keys, inv = np.unique(self._a_from * S + self._a_to, return_inverse=True)
        self._pair_keys = keys.astype(np.int64)
        self._pair_from = (keys // S).astype(np.int64)
        self._pair_to = (keys % S).astype(np.int64)
        self._atom_pair = inv.astype(np.int64).ravel()
        self._pair_indptr = np.concatenate([[0], np.cumsum(np.bincount(self._pair_from, minlength=S))]
                                           ).astype(np.int64)

    def names_of(self, positions):
        """Node names of a path given as child positions from the root."""
        out, m = [], 0
        for i in positions:
            c = self.children[m][i]
            out.append(c)
            m = self._sub_index.get(c, -1)
        return tuple(out)

    def check_root_finishes(self):
        """``ValueError`` unless the root can finish (needed for complete strings, ``finish="all"``)."""
        reach = _reachable(self.start[0], self.trans[0])
        if not any(self.end[0][i] > 0 for i in reach):
            raise ValueError(f"the root {self.submodel_names[0]!r} can never finish (no reachable child "
                             f"has a positive 'end' probability), so no string is complete under "
                             f"finish='all'; give it end probabilities or use finish='none'")

    # -- parameters --------------------------------------------------------------------------------
    def theta(self):
        """All parameters as one flat linear-space vector (per sub-model: start, trans, end)."""
        return np.concatenate([np.concatenate([s, a.ravel(), e])
                               for s, a, e in zip(self.start, self.trans, self.end)])

    def set_theta(self, theta):
        for m in range(self.n_submodels):
            K = len(self.children[m])
            b = self._base[m]
            self.start[m] = theta[b:b + K].copy()
            self.trans[m] = theta[b + K:b + K + K * K].reshape(K, K).copy()
            self.end[m] = theta[b + K + K * K:b + 2 * K + K * K].copy()

    def topology(self):
        """Boolean mask of the structurally non-zero parameters (same layout as :meth:`theta`)."""
        return self.theta() > 0

    def normalize_counts(self, counts, keep):
        """M-step: parameters ∝ expected counts per distribution; rows without counts keep ``keep``."""
        out = keep.copy()
        for m in range(self.n_submodels):
            K = len(self.children[m])
            b = self._base[m]
            c = counts[b:b + K]
            if c.sum() > 0:
                out[b:b + K] = c / c.sum()
            rows = np.concatenate([counts[b + K:b + K + K * K].reshape(K, K),
                                   counts[b + K + K * K:b + 2 * K + K * K, None]], axis=1)
            for i in range(K):
                tot = rows[i].sum()
                if tot > 0:
                    out[b + K + i * K:b + K + (i + 1) * K] = rows[i, :K] / tot
                    out[b + K + K * K + i] = rows[i, K] / tot
        return out

    def n_free_parameters(self):
        """Number of free automaton parameters on the topology (stochastic constraints removed)."""
        n = 0
        for s, a, e in zip(self.start, self.trans, self.end):
            n += max(int((s > 0).sum()) - 1, 0)
            n += int(sum(max(int((a[i] > 0).sum() + (e[i] > 0)) - 1, 0) for i in range(len(e))))
        return n

    # -- flattened potentials ----------------------------------------------------------------------
    def log_atoms(self):
        return _sparse_log_dot(self._m_atom, _log(self.theta()))

    def flat(self, finish="all"):
        """Flattened log-potentials: log_start (S,), log_trans (S, S), log_end (S,), log_atoms (A,)."""
        lt = _log(self.theta())
        la = _sparse_log_dot(self._m_atom, lt)
        S = self.n_configs
        log_trans = np.full((S, S), -np.inf)
        np.logaddexp.at(log_trans, (self._a_from, self._a_to), la)
        log_start = _sparse_log_dot(self._m_start, lt)
        log_end = _sparse_log_dot(self._m_end, lt) if finish == "all" else np.zeros(S)
        return log_start, log_trans, log_end, la

    def flat_sparse(self, finish="all", mode="sum"):
        """Flattened log-potentials with CSR transitions: log_start (S,), (indptr (S + 1,), indices (E,),
        log_values (E,)), log_end (S,), log_atoms (A,). A pair's value is the log-sum (``mode="sum"``)
        or the max (``mode="max"``) of its atoms. Memory O(S + E + A), never O(S²)."""
        lt = _log(self.theta())
        la = _sparse_log_dot(self._m_atom, lt)
        lv = np.full(len(self._pair_keys), -np.inf)
        (np.maximum if mode == "max" else np.logaddexp).at(lv, self._atom_pair, la)
        log_start = _sparse_log_dot(self._m_start, lt)
        log_end = _sparse_log_dot(self._m_end, lt) if finish == "all" else np.zeros(self.n_configs)
        return log_start, (self._pair_indptr, self._pair_to, lv), log_end, la

    # -- paths, stacks and draws ------------------------------------------------------------------
    def final_finish(self, gamma_last, finish):
        """P(instance finishes at the last observation) and P(cut level d*) (D + 1,), rows: the posteriors
        (., S) of the last tokens."""
        U, D, S = len(self.instance_paths), self.depth, self.n_configs
        cut = np.zeros((gamma_last.shape[0], D + 1))
        if finish == "all":
            cut[:, 0] = gamma_last.sum(axis=1)
            return np.asarray(self._anc.T.dot(gamma_last.T).T), cut
        # free end: levels below l all end with Π e, level l moves with 1 - e (d* = l), or the root ends
        W = np.zeros((S, U))
        C = np.zeros((S, D + 1))
        for s, ch in enumerate(self._cfg_chain):
            acc = 1.0
            for lev in range(len(ch), 0, -1):
                u = ch[lev - 1]
                e = self.end[self._inst_sub[u]][self._inst_pos[u]]
                W[s, u] = acc          # P(d* <= lev): every level below lev ends
                C[s, lev] = acc * (1.0 - e)
                acc *= e
            C[s, 0] = acc
        return gamma_last @ W, gamma_last @ C

    def levels(self, inst_act):
        """(D, N, V) per-level node probabilities from per-instance ones (N, U)."""
        D, N, V = self.depth, inst_act.shape[0], len(self.node_names)
        state = np.zeros((D, N, V))
        for u in range(len(self.instance_paths)):
            state[self._inst_level[u] - 1, :, self._inst_node[u]] += inst_act[:, u]
        return state

    def stack_arrays(self, cfg, cut):
        """(N, D) node ids and finished flags from configurations and cut levels (-1: unknown at end)."""
        N, D = cfg.shape[0], self.depth
        states = np.full((N, D), -1, dtype=np.int64)
        for s in range(self.n_configs):
            rows = np.flatnonzero(cfg == s)
            for l, u in enumerate(self._cfg_chain[s]):
                states[rows, l] = self._inst_node[u]
        lev = np.arange(1, D + 1)[None, :]
        depth = self._cfg_depth[cfg][:, None] if N else np.zeros((0, 1), dtype=np.int64)
        finished = (lev > cut[:, None]) & (cut[:, None] >= 0) | (lev > depth)
        return states, finished

    def segments(self, states, cut):
        """Per level, the (start, stop, node name) segments of one sequence's (T, D) node ids."""
        T, D = states.shape
        out = []
        for l in range(D):
            segs = []
            begin = None
            for t in range(T):
                if states[t, l] < 0:
                    if begin is not None:
                        segs.append((begin, t, self.node_names[states[begin, l]]))
                        begin = None
                    continue
                if begin is None:
                    begin = t
                boundary = t == T - 1 or cut[t] <= l + 1 or states[t + 1, l] < 0
                if boundary:
                    segs.append((begin, t + 1, self.node_names[states[t, l]]))
                    begin = None
            out.append(segs)
        return out

    def descend(self, parent, m, rng):
        """A random vertical entry from sub-model m under instance ``parent`` (-1: the root): a path."""
        path = self.instance_paths[parent] if parent >= 0 else ()
        while True:
            i = rng.choice(len(self.children[m]), p=self.start[m] / self.start[m].sum())
            c = self.children[m][i]
            path = path + (c,)
            if c not in self._sub_index:
                return path
            m = self._sub_index[c]

    def step(self, s, rng):
        """One move after emitting at configuration s: (new path or None when the root ends, level d*)."""
        ch = self._cfg_chain[s]
        for d in range(len(ch), 0, -1):
            u = ch[d - 1]
            m, i = self._inst_sub[u], self._inst_pos[u]
            K = len(self.children[m])
            p = np.append(self.trans[m][i], self.end[m][i])
            j = rng.choice(K + 1, p=p / p.sum())
            if j < K:
                c = self.children[m][j]
                parent = int(self._inst_parent[u])
                prefix = self.instance_paths[parent] if parent >= 0 else ()
                if c in self._sub_index:
                    w = self._kids_of[parent][c]
                    return self.descend(w, self._sub_index[c], rng), d
                return prefix + (c,), d
        return None, 0

    def describe(self, node_label=None):
        """Multi-line text drawing of the automaton (shared sub-models are expanded once)."""
        lines = []
        shown = set()

        def fmt(v):
            return f"{v:.3g}"

        def show(m, indent):
            name = self.submodel_names[m]
            kids = self.children[m]
            if m in shown:
                lines.append(" " * indent + f"(sub-model {name!r} shared; shown above)")
                return
            shown.add(m)
            for i, c in enumerate(kids):
                kind = "abstract" if c in self._sub_index else "production"
                moves = ", ".join(f"{kids[j]}:{fmt(self.trans[m][i, j])}" for j in range(len(kids))
                                  if self.trans[m][i, j] > 0)
                extra = ""
                if node_label is not None and c in self._prod_index:
                    extra = f" emits {node_label(self._prod_index[c])}"
                lines.append(" " * indent + f"- {c} [{kind}{extra}] start={fmt(self.start[m][i])} "
                             f"-> {{{moves}}} end={fmt(self.end[m][i])}")
                if c in self._sub_index:
                    show(self._sub_index[c], indent + 4)

        lines.append(f"HHMM: depth {self.depth}, {self.n_submodels} sub-models, "
                     f"{len(self.production_names)} production states, {self.n_configs} stack "
                     f"configurations, {len(self._a_from)} flattened transition atoms")
        lines.append(f"root {self.submodel_names[0]!r}:")
        show(0, 2)
        return "\n".join(lines)


def _sparse_log_dot(M, logv):
    """Σ_p M[a, p]·logv[p] over stored entries only (so 0·(-inf) never appears)."""
    M = M.tocsr()
    vals = M.data * logv[M.indices]
    out = np.add.reduceat(vals, M.indptr[:-1]) if vals.size else np.zeros(M.shape[0])
    out = np.asarray(out, dtype=np.float64)
    out[np.diff(M.indptr) == 0] = 0.0
    return out


def _entry_params(name, entry, K, check_finish=True):
    def arr(key, shape):
        if key not in entry or entry[key] is None:
            return None
        try:
            a = np.array(entry[key], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"'{key}' of {name!r} must be numeric; got {entry[key]!r}") from None
        if a.shape != shape:
            raise ValueError(f"'{key}' of {name!r} must have shape {shape} ({K} children); got {a.shape}")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"'{key}' of {name!r} must be finite and non-negative; got {a.tolist()}")
        return a

    s = arr("start", (K,))
    a = arr("trans", (K, K))
    e = arr("end", (K,))
    if s is None:
        s = np.full(K, 1.0 / K)
    if a is None and e is None:
        a = np.full((K, K), 1.0 / (K + 1))
        e = np.full(K, 1.0 / (K + 1))
    elif a is None:
        a = np.repeat(((1.0 - e) / K)[:, None], K, axis=1)
    elif e is None:
        e = 1.0 - a.sum(axis=1)
        e[np.abs(e) < _ATOL] = 0.0
    if not np.isclose(s.sum(), 1.0, atol=_ATOL):
        raise ValueError(f"'start' of {name!r} must sum to 1; got {s.sum():.6g}")
    rows = a.sum(axis=1) + e
    if np.any(e < 0) or np.any(e > 1) or not np.allclose(rows, 1.0, atol=_ATOL):
        i = int(np.argmax(np.abs(rows - 1)))
        raise ValueError(f"'trans' rows plus 'end' of {name!r} must sum to 1 (horizontal moves + "
                         f"ending); row {i} ({a[i].sum():.6g} + end {e[i]:.6g}) sums to {rows[i]:.6g}")
    # can the sub-model ever finish? children reachable from the initial distribution
    reach = _reachable(s, a)
    if check_finish and not any(e[i] > 0 for i in reach):
        raise ValueError(f"sub-model {name!r} can never finish: none of its children reachable from "
                         f"its initial distribution ({sorted(reach)}) has a positive 'end' probability")
    return s / s.sum(), a, e


def _reachable(start, trans):
    """The children reachable from the initial distribution ``start`` through ``trans`` (set of int)."""
    reach = set(np.flatnonzero(start > 0).tolist())
    todo = list(reach)
    while todo:
        i = todo.pop()
        for j in np.flatnonzero(trans[i] > 0):
            if int(j) not in reach:
                reach.add(int(j))
                todo.append(int(j))
    return reach
