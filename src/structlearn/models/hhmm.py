r"""Hierarchical hidden Markov models (HHMM) with linear-time inference over the flattened chain.

Model (Fine, Singer & Tishby 1998, "The hierarchical hidden Markov model", Machine Learning 32; Murphy &
Paskin 2001, "Linear-time inference in hierarchical HMMs", NIPS, seed 003). An HHMM is an automaton whose
*abstract* states call sub-models (sub-HHMMs) and whose *production* states emit one observation. Every
sub-model m has children c_1..c_K with

- a vertical (initial) distribution π_m(i) — the child entered when m is called,
- horizontal transitions a_m(i, j) and end probabilities e_m(i) with Σ_j a_m(i, j) + e_m(i) = 1 —
  after child i has finished, m moves to child j or enters its end state and returns control to the
  caller.

The root sub-model is called once; the observation string is everything emitted until the root finishes.
A sub-model called from several parents is *shared* (tied): one set of parameters, several contexts.

**Representations** (seed §2–§5), all available from :class:`HierarchicalHMM`:

(a) the automaton (this module's :class:`Hierarchy`, built from nested dicts or from arrays);
(b) the DBN of seed §4 with nodes Q^d_t, F^d_t (:meth:`HierarchicalHMM.to_dbn`, :class:`HHMMDBN`);
(c) the flattened HMM over the S legal stack configurations (root-to-production paths), seed §2:
    a step from configuration s (path p_1..p_k) to s' is a sum of *atoms*, one per level d* at which
    the horizontal move happens:

    .. math:: P(s \to s') = \sum_{d^*} \Big[\prod_{l > d^*} e_{m_l}(p_l)\Big] a_{m_{d^*}}(p_{d^*}, p'_{d^*})
              \Big[\prod_{l > d^*} π_{m'_l}(p'_l)\Big]

    (levels below d* finish, level d* moves, the new branch is entered vertically); start(s) =
    Π_l π_{m_l}(p_l) and, when every sub-model must have finished at T (``finish="all"``, the clamped
    F nodes of seed Fig. 2), end(s) = Π_l e_{m_l}(p_l).

**Architecture.** Exact inference runs on the flattened potentials, either on the engine's
:class:`~structlearn.structures.LinearChain` (time O(T·S²) per sequence — linear in T) or, for large
sparse hierarchies, on the CSR kernels of :mod:`structlearn.kernels.chain_sparse` (time O(T·(E + S)),
E = number of legal configuration-to-configuration transitions; see ``inference``). The atoms give everything the DBN
view needs: posterior of the finished flags F^d_t (the atom posterior ξ_t(s, s')·atom/P(s→s')), the
family expected counts for EM (vertical, horizontal, end; tied parameters pooled automatically because
an atom names the *sub-model* parameters it uses), and Viterbi over (Q, F) jointly (max over atoms). The
O(T³) inside–outside algorithm of Fine et al. lives in :mod:`structlearn.kernels._reference_hhmm` as the
reference implementation.
"""
import itertools
import warnings
from collections import namedtuple

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from numba import get_num_threads

from . import emissions as _emi
from ..kernels import chain_sparse as _ks
from ..semirings import LOG
from ..structures._base import Marginals
from ..structures.chain import LinearChain, _segmented_cumsum
from ..utils.validation import check_lengths

__all__ = ["HierarchicalHMM", "Hierarchy", "HHMMDBN", "HHMMPosteriors", "HHMMDecoded", "HHMMFiltered",
           "HHMMSample", "FlatHMM"]

_FORMAT = "hierarchical-hmm"
_FORMAT_VERSION = 1
_ATOL = 1e-8

#: Posterior marginals. ``log_likelihood`` (B,); ``config`` (N, S) P(stack configuration s at t);
#: ``state`` (D, N, V) P(Q^d_t = node v) (level d = 1..D at index d-1, nodes in ``node_names``; a row
#: sums to P(the stack is at least d deep)); ``finished`` (D, N) P(F^d_t = 1) — level d's sub-model ends
#: after t (levels below a production state count as finished); ``instance_active`` /
#: ``instance_finish`` (N, U) the same per node *in context* (the U paths of ``instance_paths``).
HHMMPosteriors = namedtuple("HHMMPosteriors", ["log_likelihood", "config", "state", "finished",
                                               "instance_active", "instance_finish"])

#: Viterbi parse (max over Q and F jointly). ``log_prob`` (B,) log P(best parse, X); ``states`` (N, D)
#: int64 node ids per level (-1 below a production state); ``finished`` (N, D) bool F^d_t; ``segments``
#: list over sequences of lists over levels of (start, stop, node_name), stop exclusive, positions
#: relative to the sequence.
HHMMDecoded = namedtuple("HHMMDecoded", ["log_prob", "states", "finished", "segments"])

#: Filtering (online): ``config`` (N, S) P(s_t | o_1:t); ``state`` (D, N, V) P(Q^d_t = v | o_1:t);
#: ``log_likelihood`` (N,) log P(o_1:t) (the root not yet finished).
HHMMFiltered = namedtuple("HHMMFiltered", ["config", "state", "log_likelihood"])

#: Draws from the automaton: ``X`` (N, F), ``lengths`` (B,), ``states`` (N, D) node ids, ``finished``
#: (N, D) bool.
HHMMSample = namedtuple("HHMMSample", ["X", "lengths", "states", "finished"])

#: Flattened HMM (representation (c)): ``log_start`` (S,), ``log_trans`` (S, S) dense "from, to",
#: ``log_end`` (S,) (0 when ``finish="none"``), ``transitions`` scipy CSR (S, S) linear-space
#: transition probabilities, ``config_paths`` list of S node-name tuples, ``production`` (S,) int64
#: production index of every configuration.
FlatHMM = namedtuple("FlatHMM", ["log_start", "log_trans", "log_end", "transitions", "config_paths",
                                 "production"])


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


def _lse(a, axis=None):
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

    Build it with :meth:`from_dict` or :meth:`from_arrays`; :class:`HierarchicalHMM` does so for you.

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
        context (the child indices at levels 0..d-1), as the DBN CPDs of seed §4:
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

        def p_start(u):
            return self._base[self._inst_sub[u]] + self._inst_pos[u]

        def p_end(u):
            m = self._inst_sub[u]
            K = len(self.children[m])
            return self._base[m] + K + K * K + self._inst_pos[u]

        def p_trans(m, i, j):
            K = len(self.children[m])
            return self._base[m] + K + i * K + j

        P = int(self._base[-1])
        self.n_params = P
        # start / end of configurations
        r, c = [], []
        for s, ch in enumerate(chains):
            for u in ch:
                r.append(s)
                c.append(p_start(u))
        self._m_start = sparse.csr_matrix((np.ones(len(r)), (r, c)), shape=(S, P))
        r, c = [], []
        for s, ch in enumerate(chains):
            for u in ch:
                r.append(s)
                c.append(p_end(u))
        self._m_end = sparse.csr_matrix((np.ones(len(r)), (r, c)), shape=(S, P))
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
    reach = set(np.flatnonzero(s > 0).tolist())
    todo = list(reach)
    while todo:
        i = todo.pop()
        for j in np.flatnonzero(a[i] > 0):
            if j not in reach:
                reach.add(int(j))
                todo.append(int(j))
    if check_finish and not any(e[i] > 0 for i in reach):
        raise ValueError(f"sub-model {name!r} can never finish: none of its children reachable from "
                         f"its initial distribution ({sorted(reach)}) has a positive 'end' probability")
    return s / s.sum(), a, e


# ======================================================================================================
# the DBN (representation (b))
# ======================================================================================================
class HHMMDBN:
    r"""The HHMM as a dynamic Bayesian network (seed §4, Fig. 2).

    Per level d = 1..D: Q^d_t takes the index of a child within the sub-model selected by the context
    Q^{1:d-1}_t (or the value ``None`` below a production state; such padded levels always have
    F^d_t = 1), F^d_t ∈ {0, 1}. CPDs are tables keyed by the context tuple:

    - ``start[d][ctx]`` (K,): P(Q^d_t = j | F^d_{t-1} = 1 or t = 1, ctx) — the vertical distribution π;
    - ``trans[d][ctx]`` (K, K): Ã(i, j) = P(Q^d_t = j | Q^d_{t-1} = i, F^{d+1}_{t-1} = 1,
      F^d_{t-1} = 0, ctx) — the *rescaled* automaton transitions Ã(i, j) = a(i, j) / (1 - e(i))
      (seed §4.1: the DBN never enters the end state; a row with e(i) = 1 is never used and is set to 0);
      Q^d_t = Q^d_{t-1} when F^{d+1}_{t-1} = 0;
    - ``end[d][ctx]`` (K,): P(F^d_t = 1 | Q^d_t = i, F^{d+1}_t = 1, ctx) = e(i); F^d_t = 0 when
      F^{d+1}_t = 0 (F^{D+1} ≡ 1);
    - the root (level 1 parent) is called once: F^1_t = 1 with t < T has probability 0 of continuing.
      ``clamp_final`` (``finish="all"``) clamps all F_T = 1.

    :meth:`log_likelihood` runs a generic forward pass over the joint slice (Q_t, F_t) using only these
    CPDs (time O(T·J²), J = number of joint slice values) — an independent check of the flattened HMM.
    """

    def __init__(self, depth, start, trans, end, production, clamp_final):
        self.depth = depth
        self.start, self.trans, self.end = start, trans, end
        self.production = production  # full context tuple -> production index
        self.clamp_final = clamp_final

    def joint_states(self):
        """All slice values (Q tuple padded with None, F tuple) with non-zero probability."""
        out = []
        for q in self.production:
            k = len(q)
            qq = q + (None,) * (self.depth - k)
            for cut in range(k + 1):  # F^d = 1 for d > cut
                out.append((qq, tuple(int(d > cut) for d in range(1, self.depth + 1))))
        return out

    def _log_q_given(self, q, prev_q, prev_f):
        """log P(Q_t = q | Q_{t-1}, F_{t-1}) (prev_q None: first slice) as a product over levels."""
        lp = 0.0
        D = self.depth
        for d in range(1, D + 1):
            ctx = tuple(q[:d - 1])
            if q[d - 1] is None:
                continue  # padded level: deterministic given the context
            if prev_q is None:
                p = self.start[d][ctx][q[d - 1]]
            else:
                f_self = prev_f[d - 1]
                f_below = prev_f[d] if d < D else 1
                if d == 1 and f_self == 1:
                    return -np.inf  # the root has finished: nothing is emitted after
                if f_self == 1:
                    p = self.start[d][ctx][q[d - 1]]
                elif tuple(prev_q[:d]) != tuple(q[:d - 1]) + (prev_q[d - 1],) or prev_q[d - 1] is None:
                    return -np.inf  # an unfinished level keeps its context
                elif f_below == 1:
                    p = self.trans[d][ctx][prev_q[d - 1], q[d - 1]]
                else:
                    p = 1.0 if prev_q[d - 1] == q[d - 1] else 0.0
            if p <= 0:
                return -np.inf
            lp += np.log(p)
        return lp

    def _log_f_given(self, q, f):
        lp = 0.0
        D = self.depth
        for d in range(D, 0, -1):
            below = f[d] if d < D else 1
            if q[d - 1] is None:
                if f[d - 1] != 1:
                    return -np.inf
                continue
            e = self.end[d][tuple(q[:d - 1])][q[d - 1]] if below == 1 else 0.0
            p = e if f[d - 1] == 1 else 1.0 - e
            if p <= 0:
                return -np.inf
            lp += np.log(p)
        return lp

    def log_likelihood(self, log_emission):
        """log P(o_1:T) from the CPDs alone. ``log_emission`` (T, P): log b_p(o_t) per production."""
        J = self.joint_states()
        T = log_emission.shape[0]
        if T == 0:
            return 0.0
        prod = np.array([self.production[tuple(x for x in q if x is not None)] for q, _ in J])
        lf = np.array([self._log_f_given(q, f) for q, f in J])
        l0 = np.array([self._log_q_given(q, None, None) for q, _ in J]) + lf
        tr = np.array([[self._log_q_given(q, pq, pf) for q, _ in J] for pq, pf in J]) + lf[None, :]
        alpha = l0 + log_emission[0, prod]
        for t in range(1, T):
            alpha = _lse(alpha[:, None] + tr, axis=0) + log_emission[t, prod]
        if self.clamp_final:
            final = np.array([0.0 if all(f) else -np.inf for _, f in J])
            alpha = alpha + final
        return float(_lse(alpha))


# ======================================================================================================
# the model
# ======================================================================================================
class HierarchicalHMM(BaseEstimator):
    r"""Hierarchical HMM with exact linear-time inference, EM and supervised estimation.

    Parameters
    ----------
    hierarchy : dict or Hierarchy
        The automaton: ``{name: {"children": [...], "start": (K,), "trans": (K, K), "end": (K,)}}`` (see
        :meth:`Hierarchy.from_dict`; a child that is a key is an abstract state — shared when listed
        under several parents — any other child name a production state). Zero parameters fix the
        topology: EM never makes them positive.
    emission : str or emission object, default "categorical"
        ``"categorical"``, ``"gaussian"``, ``"poisson"``, ``"multivariate_gaussian"``,
        ``"diag_gaussian"``, ``"gmm"`` or an object of :mod:`structlearn.emissions` (its rows are the
        production states in ``production_names_`` order). Emission parameters are tied per
        production state (a production state under several parents emits with one distribution).
    root : str, optional
        Root sub-model (default: the one abstract state nobody calls).
    finish : {"all", "none"}, default "all"
        ``"all"``: every sequence is a complete string — all sub-models, the root included, have
        finished at its last observation (the F_T = 1 clamp of seed Fig. 2; Fine et al.'s likelihood).
        ``"none"``: a sequence is a prefix of the process (nothing finished before the end is required;
        the root must not have finished before T).
    n_iter, tol : int, float
        EM iterations and convergence threshold on the log-likelihood gain (total over sequences).
    params, init_params : str
        Letters of parameters EM updates / ``fit`` initialises at random on the topology: ``s`` vertical
        (initial) distributions, ``t`` horizontal transitions and end probabilities, ``e`` emissions.
        Default ``init_params=""``: EM starts from the given parameters.
    random_state : None, int or RandomState
    verbose : bool
    inference : {"auto", "dense", "sparse"}, default "auto"
        Kernel for the flattened chain: ``"dense"`` — the engine's :class:`LinearChain` on the (S, S)
        transition matrix, time O(T·S²) per sequence; ``"sparse"`` — the CSR kernels of
        :mod:`structlearn.kernels.chain_sparse`, time O(T·(E + S)) with E the number of legal
        configuration-to-configuration transitions (memory O(T·E) for :meth:`posteriors`, never
        O(S²)); ``"auto"``: sparse when S > 100 and E / S² < 0.1 (where ``benchmarks/bench_hhmm.py``
        measures it faster: the dense kernel's scaled linear-space recursion wins on small or dense
        patterns). Results are identical to rounding error (tested at rtol 1e-10).

    Attributes
    ----------
    hierarchy_ : Hierarchy
    emission_ : emission object (P production states)
    node_names_, production_names_, config_paths_ : lists
    log_likelihood_ : float, monitor_history_ : list, converged_ : bool, n_iter_ : int (after ``fit``)

    Notes
    -----
    Inference cost per sequence of length T: time O(T·S²) (dense) or O(T·(E + S)) (sparse) and memory
    O(T·S) for log-likelihood, filtering, Viterbi and configuration posteriors; memory O(T·S²) (dense)
    or O(T·E) (sparse) for the
    per-step finished-flag posteriors (S = number of stack configurations, E = number of legal
    transitions between them); the inside–outside reference is O(T³·K·U).
    """

    def __init__(self, hierarchy=None, emission="categorical", *, root=None, finish="all", n_iter=100,
                 tol=1e-6, params="ste", init_params="", random_state=None, verbose=False,
                 inference="auto"):
        self.hierarchy = hierarchy
        self.emission = emission
        self.root = root
        self.finish = finish
        self.n_iter = n_iter
        self.tol = tol
        self.params = params
        self.init_params = init_params
        self.random_state = random_state
        self.verbose = verbose
        self.inference = inference

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, start, trans, end, emission="categorical", **kwargs):
        """Model of a balanced hierarchy given per-level context-indexed tables (see
        :meth:`Hierarchy.from_arrays`)."""
        return cls(Hierarchy.from_arrays(start, trans, end), emission, **kwargs)

    def _build(self):
        if getattr(self, "hierarchy_", None) is not None:
            return
        if self.finish not in ("all", "none"):
            raise ValueError(f"`finish` must be 'all' or 'none'; got {self.finish!r}")
        if self.inference not in ("auto", "dense", "sparse"):
            raise ValueError(f"`inference` must be 'auto', 'dense' or 'sparse'; got {self.inference!r}")
        if self.hierarchy is None:
            raise ValueError("`hierarchy` is required (a nested dict or a Hierarchy)")
        h = Hierarchy.from_dict(self.hierarchy, self.root)
        if self.finish == "all":
            _check_root_finishes(h)
        self.hierarchy_ = h
        self.emission_ = _emi.make_emission(self.emission)
        self.node_names_ = list(h.node_names)
        self.production_names_ = list(h.production_names)
        self.config_paths_ = list(h.config_paths)

    def _require_emission(self):
        e = self.emission_
        P = len(self.hierarchy_.production_names)
        if getattr(e, "n_states", None) is None:
            raise ValueError("emission parameters are not set: pass an emission object with parameters "
                             "or call fit()")
        if getattr(e, "n_states", P) not in (None, P):
            raise ValueError(f"the emission has {e.n_states} states but the hierarchy has {P} production "
                             f"states {self.hierarchy_.production_names}")

    def _data(self, X, lengths):
        self._build()
        X = _emi.check_observations(self.emission_, X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="`X`")
        return X, lengths, offsets

    def uses_sparse(self):
        """True when inference runs on the sparse (CSR) chain kernels (see ``inference``)."""
        self._build()
        if self.inference != "auto":
            return self.inference == "sparse"
        h = self.hierarchy_
        S, E = h.n_configs, len(h._pair_keys)
        return S > 100 and E < 0.1 * S * S

    def _chain(self, X, lengths, mode="sum"):
        """The flattened chain and (log_start, log pair values (E,), log_end, log atoms (A,))."""
        self._require_emission()
        h = self.hierarchy_
        unary = self.emission_.log_density(X)[:, h._cfg_prod]
        if self.uses_sparse():
            ls, csr, le, la = h.flat_sparse(self.finish, mode)
            return _SparseChain(unary, csr, ls, le, lengths), (ls, csr[2], le, la)
        ls, lt, le, la = h.flat(self.finish)
        if mode == "max":
            lt = np.full_like(lt, -np.inf)
            np.maximum.at(lt, (h._a_from, h._a_to), la)
        chain = LinearChain(unary, lt, lengths=lengths, start=ls, end=le)
        return chain, (ls, lt[h._pair_from, h._pair_to], le, la)

    def _pair_marginals(self, chain, edge):
        """Token marginals (N, S) and edge marginals on the E pairs ((N, E) for "full", (E,) for "total")."""
        mg = chain.marginals(edge=edge)
        if isinstance(chain, _SparseChain):
            return mg
        h = self.hierarchy_
        return Marginals(mg.unary, mg.edge[..., h._pair_from, h._pair_to])

    # -- representations ---------------------------------------------------------------------------
    def flatten(self):
        """The flattened HMM over stack configurations (representation (c)); see :data:`FlatHMM`."""
        self._build()
        h = self.hierarchy_
        ls, lt, le, la = h.flat(self.finish)
        tr = sparse.csr_matrix((np.exp(la), (h._a_from, h._a_to)), shape=(h.n_configs, h.n_configs))
        return FlatHMM(ls, lt, le, tr, list(h.config_paths), h._cfg_prod.copy())

    def to_dbn(self):
        """The DBN (representation (b), seed §4) with CPDs derived from the automaton; see :class:`HHMMDBN`."""
        self._build()
        h = self.hierarchy_
        D = h.depth
        start = {d: {} for d in range(1, D + 1)}
        trans = {d: {} for d in range(1, D + 1)}
        end = {d: {} for d in range(1, D + 1)}
        production = {}

        def walk(m, ctx):
            d = len(ctx) + 1
            s, a, e = h.start[m], h.trans[m], h.end[m]
            start[d][ctx] = s.copy()
            with np.errstate(invalid="ignore", divide="ignore"):
                at = np.where((1 - e)[:, None] > 0, a / (1 - e)[:, None], 0.0)
            trans[d][ctx] = at
            end[d][ctx] = e.copy()
            for i, c in enumerate(h.children[m]):
                if c in h._sub_index:
                    walk(h._sub_index[c], ctx + (i,))
                else:
                    production[ctx + (i,)] = h._prod_index[c]

        walk(0, ())
        return HHMMDBN(D, start, trans, end, production, self.finish == "all")

    def describe(self):
        """Text drawing of the automaton (print it)."""
        self._build()
        label = None
        e = self.emission_
        if isinstance(e, _emi.Categorical) and e.probs is not None:
            def label(p):
                return "{" + ", ".join(f"{v}:{e.probs[p, v]:.2f}" for v in np.argsort(-e.probs[p])[:3]
                                       if e.probs[p, v] > 0.005) + "}"
        return self.hierarchy_.describe(label)

    # -- inference ---------------------------------------------------------------------------------
    def log_likelihood(self, X, lengths=None):
        """log P(X_b) of every sequence, shape (B,) (``finish="all"``: the string is complete).

        Time O(N·S²) via the engine's LinearChain forward pass. -inf for an impossible sequence.
        """
        X, lengths, _ = self._data(X, lengths)
        chain, _ = self._chain(X, lengths)
        return chain.log_partition()

    def score(self, X, lengths=None):
        """Total log-likelihood of all sequences (float)."""
        return float(self.log_likelihood(X, lengths).sum())

    def posteriors(self, X, lengths=None):
        """Posterior marginals of every level's state Q^d_t and finished flag F^d_t; see :data:`HHMMPosteriors`.

        Time O(N·S² + N·A) and memory O(N·S²) (A = number of transition atoms).
        """
        X, lengths, offsets = self._data(X, lengths)
        h = self.hierarchy_
        chain, (ls, lp, le, la) = self._chain(X, lengths)
        mg = self._pair_marginals(chain, "full")
        log_z = chain.log_partition()
        gamma = mg.unary
        N = X.shape[0]
        with np.errstate(invalid="ignore"):
            ratio = np.exp(la - lp[h._atom_pair])
        atom_post = mg.edge[:, h._atom_pair] * ratio[None, :]
        U, D = len(h.instance_paths), h.depth
        inst_fin = np.asarray(h._fin.T.dot(atom_post.T).T) if N else np.zeros((0, U))
        onehot = np.zeros((len(h._a_level), D + 1))
        onehot[np.arange(len(h._a_level)), h._a_level] = 1.0
        cut_post = atom_post @ onehot  # P(d*_t = d), d = 0..D
        lasts = offsets[1:][lengths > 0] - 1
        if lasts.size:
            inst_fin[lasts], cut_post[lasts] = self._final_finish(gamma[lasts])
        inst_act = np.asarray(h._anc.T.dot(gamma.T).T) if N else np.zeros((0, U))
        state = self._levels(inst_act)
        finished = np.cumsum(cut_post, axis=1)[:, :D].T.copy()
        return HHMMPosteriors(log_z, gamma, state, finished, inst_act, inst_fin)

    def _final_finish(self, gamma_last):
        """P(instance finishes at the last observation) (rows: last tokens)."""
        h = self.hierarchy_
        U, D, S = len(h.instance_paths), h.depth, h.n_configs
        cut = np.zeros((gamma_last.shape[0], D + 1))
        if self.finish == "all":
            cut[:, 0] = gamma_last.sum(axis=1)
            return np.asarray(h._anc.T.dot(gamma_last.T).T), cut
        # free end: levels below l all end with Π e, level l moves with 1 - e (d* = l), or the root ends
        W = np.zeros((S, U))
        C = np.zeros((S, D + 1))
        for s, ch in enumerate(h._cfg_chain):
            acc = 1.0
            for lev in range(len(ch), 0, -1):
                u = ch[lev - 1]
                e = h.end[h._inst_sub[u]][h._inst_pos[u]]
                W[s, u] = acc          # P(d* <= lev): every level below lev ends
                C[s, lev] = acc * (1.0 - e)
                acc *= e
            C[s, 0] = acc
        return gamma_last @ W, gamma_last @ C

    def _levels(self, inst_act):
        h = self.hierarchy_
        D, N, V = h.depth, inst_act.shape[0], len(h.node_names)
        state = np.zeros((D, N, V))
        for u in range(len(h.instance_paths)):
            state[h._inst_level[u] - 1, :, h._inst_node[u]] += inst_act[:, u]
        return state

    def expected_counts(self, X, lengths=None):
        """E-step: expected parameter counts (flat, :meth:`Hierarchy.theta` layout), emission weights
        (N, P) and the total log-likelihood. Tied parameters are pooled. Time O(N·S²)."""
        X, lengths, offsets = self._data(X, lengths)
        return self._e_step(X, lengths, offsets)

    def _e_step(self, X, lengths, offsets):
        h = self.hierarchy_
        chain, (ls, lp, le, la) = self._chain(X, lengths)
        mg = self._pair_marginals(chain, "total")
        ll = chain.log_partition()
        if np.any(ll == -np.inf):
            b = int(np.flatnonzero(ll == -np.inf)[0])
            raise ValueError(f"sequence {b} has probability 0 under the model (log-likelihood -inf); "
                             f"check the topology, the emissions or `finish`")
        with np.errstate(invalid="ignore"):
            ratio = np.exp(la - lp[h._atom_pair])
        atom_counts = mg.edge[h._atom_pair] * ratio
        gamma = mg.unary
        ok = lengths > 0
        g_first = gamma[offsets[:-1][ok]].sum(axis=0)
        counts = h._m_atom.T.dot(atom_counts) + h._m_start.T.dot(g_first)
        if self.finish == "all":
            counts = counts + h._m_end.T.dot(gamma[offsets[1:][ok] - 1].sum(axis=0))
        P = len(h.production_names)
        onehot = sparse.csr_matrix((np.ones(h.n_configs), (np.arange(h.n_configs), h._cfg_prod)),
                                   shape=(h.n_configs, P))
        weights = np.asarray(onehot.T.dot(gamma.T).T) if gamma.shape[0] else np.zeros((0, P))
        return np.asarray(counts).ravel(), weights, float(ll.sum())

    def decode(self, X, lengths=None):
        """Viterbi parse: the most probable stack sequence with its finished flags (max over the DBN's Q
        and F jointly), reported as nested segments per level; see :data:`HHMMDecoded`.

        Time O(N·S²) (the engine's max-product chain with per-pair best atoms).

        Raises
        ------
        ValueError
            If a sequence has probability 0.
        """
        X, lengths, offsets = self._data(X, lengths)
        h = self.hierarchy_
        chain, (ls, lp, le, la) = self._chain(X, lengths, mode="max")
        best = chain.max()
        cfg = chain.argmax()
        S = h.n_configs
        best_atom = np.full(len(h._pair_keys), -1, dtype=np.int64)
        order = np.argsort(la, kind="stable")
        best_atom[h._atom_pair[order]] = order  # the last write (largest) wins
        N = X.shape[0]
        cut = np.zeros(N, dtype=np.int64)
        for b in range(len(lengths)):
            o, T = offsets[b], lengths[b]
            if T > 1:
                pair = np.searchsorted(h._pair_keys, cfg[o:o + T - 1] * S + cfg[o + 1:o + T])
                cut[o:o + T - 1] = h._a_level[best_atom[pair]]
            if T > 0:
                cut[o + T - 1] = 0 if self.finish == "all" else -1
        states, finished = self._stack_arrays(cfg, cut)
        segments = [self._segments(states[o:o + T], cut[o:o + T]) for o, T in zip(offsets[:-1], lengths)]
        return HHMMDecoded(best, states, finished, segments)

    def _stack_arrays(self, cfg, cut):
        """(N, D) node ids and finished flags from configurations and cut levels (-1: unknown at end)."""
        h = self.hierarchy_
        N, D = cfg.shape[0], h.depth
        states = np.full((N, D), -1, dtype=np.int64)
        for s in range(h.n_configs):
            rows = np.flatnonzero(cfg == s)
            for l, u in enumerate(h._cfg_chain[s]):
                states[rows, l] = h._inst_node[u]
        lev = np.arange(1, D + 1)[None, :]
        depth = h._cfg_depth[cfg][:, None] if N else np.zeros((0, 1), dtype=np.int64)
        finished = (lev > cut[:, None]) & (cut[:, None] >= 0) | (lev > depth)
        return states, finished

    def _segments(self, states, cut):
        h = self.hierarchy_
        T, D = states.shape
        out = []
        for l in range(D):
            segs = []
            begin = None
            for t in range(T):
                if states[t, l] < 0:
                    if begin is not None:
                        segs.append((begin, t, h.node_names[states[begin, l]]))
                        begin = None
                    continue
                if begin is None:
                    begin = t
                boundary = t == T - 1 or cut[t] <= l + 1 or states[t + 1, l] < 0
                if boundary:
                    segs.append((begin, t + 1, h.node_names[states[t, l]]))
                    begin = None
            out.append(segs)
        return out

    def filter(self, X, lengths=None):
        """Online filtering P(Q^d_t | o_1:t); see :data:`HHMMFiltered`. Time O(N·S²)."""
        X, lengths, offsets = self._data(X, lengths)
        h = self.hierarchy_
        chain, _ = self._chain(X, lengths)
        alpha = chain.forward()
        ll = _lse(alpha, axis=1) if alpha.shape[0] else np.zeros(0)
        with np.errstate(invalid="ignore"):
            post = np.exp(alpha - ll[:, None])
        post[~np.isfinite(ll)] = 0.0
        act = np.asarray(h._anc.T.dot(post.T).T) if post.shape[0] else np.zeros((0, len(h.instance_paths)))
        state = self._levels(act)
        return HHMMFiltered(post, state, ll)

    def sample(self, n_sequences=1, max_length=10_000, random_state=None):
        """Draw complete strings from the automaton (each ends when the root finishes).

        Parameters
        ----------
        n_sequences : int
        max_length : int
            A string still running after ``max_length`` steps is cut there (``ConvergenceWarning``).
        random_state : None, int or RandomState

        Returns
        -------
        HHMMSample
        """
        self._build()
        self._require_emission()
        h = self.hierarchy_
        rng = check_random_state(random_state)
        cfgs, cuts, lengths = [], [], []
        for _ in range(int(n_sequences)):
            path = self._descend(-1, 0, rng)
            seq_c, seq_cut = [], []
            while True:
                s = h._cfg_index[path]
                seq_c.append(s)
                if len(seq_c) >= max_length:
                    warnings.warn(f"a sampled string reached max_length={max_length} and was cut",
                                  ConvergenceWarning)
                    seq_cut.append(-1)
                    break
                path, d = self._step(s, rng)
                seq_cut.append(d)
                if path is None:
                    break
            if self.finish == "none":
                seq_cut[-1] = -1
            cfgs.extend(seq_c)
            cuts.extend(seq_cut)
            lengths.append(len(seq_c))
        cfg = np.array(cfgs, dtype=np.int64)
        cut = np.array(cuts, dtype=np.int64)
        X = self.emission_.sample(h._cfg_prod[cfg], rng) if cfg.size else np.zeros((0, 1))
        states, finished = self._stack_arrays(cfg, cut)
        return HHMMSample(np.asarray(X), np.array(lengths, dtype=np.int64), states, finished)

    def _descend(self, parent, m, rng):
        h = self.hierarchy_
        path = h.instance_paths[parent] if parent >= 0 else ()
        while True:
            i = rng.choice(len(h.children[m]), p=h.start[m] / h.start[m].sum())
            c = h.children[m][i]
            path = path + (c,)
            if c not in h._sub_index:
                return path
            m = h._sub_index[c]

    def _step(self, s, rng):
        """One move after emitting at configuration s: (new path or None when the root ends, level d*)."""
        h = self.hierarchy_
        ch = h._cfg_chain[s]
        for d in range(len(ch), 0, -1):
            u = ch[d - 1]
            m, i = h._inst_sub[u], h._inst_pos[u]
            K = len(h.children[m])
            p = np.append(h.trans[m][i], h.end[m][i])
            j = rng.choice(K + 1, p=p / p.sum())
            if j < K:
                c = h.children[m][j]
                parent = int(h._inst_parent[u])
                prefix = h.instance_paths[parent] if parent >= 0 else ()
                if c in h._sub_index:
                    w = h._kids_of[parent][c]
                    return self._descend(w, h._sub_index[c], rng), d
                return prefix + (c,), d
        return None, 0

    # -- learning ----------------------------------------------------------------------------------
    def fit(self, X, lengths=None):
        """EM (Baum–Welch on the family marginals) over several sequences; returns self.

        Vertical, horizontal, end and emission expected counts; tied parameters pooled; structural zeros
        kept. Every iteration never decreases the log-likelihood (exact E-step, exact M-step).
        ``ConvergenceWarning`` and ``converged_ = False`` when ``n_iter`` is reached first.
        """
        X, lengths, offsets = self._data(X, lengths)
        h = self.hierarchy_
        rng = check_random_state(self.random_state)
        if self.init_params:
            self._random_init(X, rng)
        self._require_emission()
        topo = h.theta() > 0
        history = []
        self.converged_ = False
        for it in range(int(self.n_iter)):
            counts, weights, ll = self._e_step(X, lengths, offsets)
            history.append(ll)
            if self.verbose:
                print(f"EM iteration {it}: log-likelihood {ll:.6f}")
            if len(history) >= 2 and history[-1] - history[-2] < self.tol:
                self.converged_ = True
                break
            self._m_step(X, counts, weights, topo)
        else:
            counts, weights, ll = self._e_step(X, lengths, offsets)
            history.append(ll)
            self.converged_ = len(history) >= 2 and history[-1] - history[-2] < self.tol
            if not self.converged_:
                warnings.warn(f"EM did not converge in {self.n_iter} iterations (last gain "
                              f"{history[-1] - history[-2]:.3g} >= tol {self.tol})", ConvergenceWarning)
        self.monitor_history_ = history
        self.log_likelihood_ = history[-1]
        self.n_iter_ = len(history) - 1
        return self

    def _m_step(self, X, counts, weights, topo):
        h = self.hierarchy_
        theta = h.theta()
        new = h.normalize_counts(counts * topo, theta)
        keep = np.ones_like(theta, dtype=bool)
        for m in range(h.n_submodels):
            K = len(h.children[m])
            b = h._base[m]
            if "s" not in self.params:
                keep[b:b + K] = False
            if "t" not in self.params:
                keep[b + K:b + 2 * K + K * K] = False
        h.set_theta(np.where(keep, new, theta))
        if "e" in self.params:
            self.emission_.fit(X, weights)

    def _random_init(self, X, rng):
        h = self.hierarchy_
        theta = h.theta()
        topo = theta > 0
        if "s" in self.init_params or "t" in self.init_params:
            new = np.where(topo, rng.gamma(5.0, size=theta.shape), 0.0)
            new = h.normalize_counts(new, theta)
            keep = np.zeros_like(topo)
            for m in range(h.n_submodels):
                K = len(h.children[m])
                b = h._base[m]
                keep[b:b + K] = "s" in self.init_params
                keep[b + K:b + 2 * K + K * K] = "t" in self.init_params
            h.set_theta(np.where(keep, new, theta))
        if "e" in self.init_params:
            P = len(h.production_names)
            if not hasattr(self.emission_, "initialize"):
                raise ValueError("the emission object has no `initialize`; set its parameters and drop "
                                 "'e' from `init_params`")
            self.emission_.initialize(X, P, rng.randint(P, size=X.shape[0]), rng)

    def fit_supervised(self, X, states, lengths=None, finished=None):
        """Maximum-likelihood estimation from fully labelled nested segments; returns self.

        Parameters
        ----------
        X : array-like, shape (N, F)
        states : array-like of int, shape (N, D)
            Node id (index into ``node_names_``) of every level at every token, -1 below a production
            state (as returned by :meth:`decode` / :meth:`sample`). Node names (str) are accepted too.
        lengths : array-like of int, shape (B,), optional
        finished : array-like of bool, shape (N, D), optional
            F^d_t flags. Without them a segment at level d ends where the node at level d or above
            changes; a repeated identical stack is read as a horizontal self-move at the bottom level.

        Raises
        ------
        ValueError
            A stack that is not a configuration of the hierarchy, or a labelled move of probability 0 in
            the topology.
        """
        X, lengths, offsets = self._data(X, lengths)
        h = self.hierarchy_
        cfg = self._configs_from_states(states, X.shape[0])
        fin = None if finished is None else np.asarray(finished, dtype=bool)
        if fin is not None and fin.shape != (X.shape[0], h.depth):
            raise ValueError(f"`finished` must have shape (N, D) = ({X.shape[0]}, {h.depth}); got "
                             f"{fin.shape}")
        counts = np.zeros(h.n_params)
        start_c = np.zeros(h.n_configs)
        end_c = np.zeros(h.n_configs)
        atom_c = np.zeros(len(h._a_from))
        for b in range(len(lengths)):
            o, T = offsets[b], lengths[b]
            if T == 0:
                continue
            start_c[cfg[o]] += 1
            if self.finish == "all":
                end_c[cfg[o + T - 1]] += 1
            for t in range(o, o + T - 1):
                s, s2 = cfg[t], cfg[t + 1]
                if fin is not None:
                    row = fin[t]
                    d = int(np.argmax(row)) if row.any() else h.depth
                else:
                    p1, p2 = h.config_paths[s], h.config_paths[s2]
                    diff = [l for l in range(min(len(p1), len(p2))) if p1[l] != p2[l]]
                    d = diff[0] + 1 if diff else len(p1)
                a = h._atom_index.get((s, s2, d))
                if a is None:
                    raise ValueError(f"labelled move at row {t} from stack {p_str(h.config_paths[s])} to "
                                     f"{p_str(h.config_paths[s2])} at level {d} has probability 0 in the "
                                     f"hierarchy's topology")
                atom_c[a] += 1
        counts = h._m_atom.T.dot(atom_c) + h._m_start.T.dot(start_c) + h._m_end.T.dot(end_c)
        h.set_theta(h.normalize_counts(np.asarray(counts).ravel(), h.theta()))
        P = len(h.production_names)
        w = np.zeros((X.shape[0], P))
        w[np.arange(X.shape[0]), h._cfg_prod[cfg]] = 1.0
        if getattr(self.emission_, "n_states", None) is None and hasattr(self.emission_, "initialize"):
            self.emission_.initialize(X, P, h._cfg_prod[cfg], check_random_state(self.random_state))
        self.emission_.fit(X, w)
        return self

    def _configs_from_states(self, states, N):
        h = self.hierarchy_
        st = np.asarray(states)
        if st.ndim != 2 or st.shape[0] != N:
            raise ValueError(f"`states` must have shape (N, D) = ({N}, {h.depth}); got {st.shape}")
        cfg = np.empty(N, dtype=np.int64)
        for t in range(N):
            if st.dtype.kind in "US":
                path = tuple(str(x) for x in st[t] if str(x) not in ("", "-1"))
            else:
                path = tuple(h.node_names[int(x)] for x in st[t] if int(x) >= 0)
            s = h._cfg_index.get(path)
            if s is None:
                raise ValueError(f"`states` row {t} {path} is not a root-to-production path of the "
                                 f"hierarchy")
            cfg[t] = s
        return cfg

    # -- the cubic reference -----------------------------------------------------------------------
    def inside_outside(self, X, lengths=None):
        """Fine, Singer & Tishby (1998) inside–outside (reference, O(T³)); ``finish="all"`` only.

        Returns a list over sequences of (log_likelihood, instance_active (T, U), instance_finish
        (T, U)) in ``hierarchy_.instance_paths`` order.
        """
        from ..kernels._reference_hhmm import hhmm_inside_outside

        if self.finish != "all":
            raise ValueError("inside_outside supports finish='all' only (complete strings)")
        X, lengths, offsets = self._data(X, lengths)
        self._require_emission()
        h = self.hierarchy_
        logb = self.emission_.log_density(X)
        subs = []
        for m in range(h.n_submodels):
            kids = [("m", h._sub_index[c]) if c in h._sub_index else ("p", h._prod_index[c])
                    for c in h.children[m]]
            subs.append((kids, _log(h.start[m]), _log(h.trans[m]), _log(h.end[m])))
        out = []
        for o, T in zip(offsets[:-1], lengths):
            lz, act, fin = hhmm_inside_outside(subs, logb[o:o + T])
            idx = {p: u for u, p in enumerate(h.instance_paths)}
            A = np.zeros((T, len(idx)))
            F = np.zeros((T, len(idx)))
            for path, v in act.items():
                A[:, idx[_names_of(h, path)]] = v
            for path, v in fin.items():
                F[:, idx[_names_of(h, path)]] = v
            out.append((lz, A, F))
        return out

    # -- persistence -------------------------------------------------------------------------------
    def save(self, path):
        """Write the model to ``path`` (versioned ``.npz`` + JSON header; no pickle)."""
        from ..io.modelfile import save_model

        self._build()
        self._require_emission()
        e = self.emission_
        ename = type(e).__name__
        if getattr(_emi, ename, None) is not type(e):
            raise ValueError(f"cannot save a custom emission of type {type(e).__qualname__}")
        earr, ecfg = e.get_state()
        h = self.hierarchy_
        arrays = {"theta": h.theta()}
        arrays.update({f"emission.{k}": v for k, v in earr.items()})
        params = {"finish": self.finish, "inference": self.inference, "n_iter": int(self.n_iter),
                  "tol": float(self.tol),
                  "params": self.params, "init_params": self.init_params,
                  "random_state": int(self.random_state) if isinstance(self.random_state,
                                                                        (int, np.integer)) else None}
        meta = {"submodels": h.submodel_names, "children": h.children, "emission_family": ename,
                "emission_config": ecfg}
        save_model(path, format_name=_FORMAT, version=_FORMAT_VERSION,
                   estimator="structlearn.HierarchicalHMM", params=params, metadata=meta, arrays=arrays)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; runs no code from the file."""
        from ..io.modelfile import ModelFileError, load_model

        header, arrays = load_model(path, expected_format=_FORMAT, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        ecls = getattr(_emi, str(meta.get("emission_family")), None)
        if not (isinstance(ecls, type) and issubclass(ecls, _emi.EmissionDistribution)):
            raise ModelFileError(f"{path!r}: unknown emission family {meta.get('emission_family')!r}")
        names, kids = meta["submodels"], meta["children"]
        theta = np.asarray(arrays["theta"], dtype=np.float64)
        spec, b = {}, 0
        for n, c in zip(names, kids):
            K = len(c)
            spec[n] = {"children": c, "start": theta[b:b + K], "trans": theta[b + K:b + K + K * K]
                       .reshape(K, K), "end": theta[b + K + K * K:b + 2 * K + K * K]}
            b += 2 * K + K * K
        emission = ecls(**meta.get("emission_config", {}))
        emission.set_state({k[len("emission."):]: v for k, v in arrays.items()
                             if k.startswith("emission.")})
        model = cls(spec, emission, root=names[0], **header["params"])
        model._build()
        return model


class _SparseChain:
    """The flattened chain on the CSR kernels (:mod:`structlearn.kernels.chain_sparse`): the subset of
    :class:`LinearChain`'s methods the HHMM uses, with edge marginals on the E stored pairs."""

    def __init__(self, unary, csr, start, end, lengths):
        self.unary = np.ascontiguousarray(unary, dtype=np.float64)
        self.indptr, self.indices, self.logv = csr
        self.start, self.end = start, end
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._args = (self.unary, self.indptr, self.indices, self.logv)
        self._cache = {}

    def _fwd(self):
        if "fwd" not in self._cache:
            self._cache["fwd"] = _ks.sparse_chain_forward(*self._args, self.start, self.end, self.offsets,
                                                          LOG)
        return self._cache["fwd"]

    def log_partition(self):
        return self._fwd()[2].copy()

    def forward(self):
        ahat, inc, _ = self._fwd()
        return ahat + _segmented_cumsum(inc, self.offsets)[:, None]

    def marginals(self, edge="full"):
        mode = {"none": 0, "full": 1, "total": 3}[edge]
        lz, um, em = _ks.sparse_chain_marginals(*self._args, self.start, self.end, self.offsets, mode,
                                                get_num_threads())
        return Marginals(um, em[0] if edge == "total" else (None if edge == "none" else em))

    def _viterbi(self):
        if "vit" not in self._cache:
            self._cache["vit"] = _ks.sparse_chain_viterbi(*self._args, self.start, self.end, self.offsets)
        return self._cache["vit"]

    def max(self):
        return self._viterbi()[0].copy()

    def argmax(self):
        best, labels = self._viterbi()
        bad = np.flatnonzero(best == -np.inf)
        if bad.size:
            b = int(bad[0])
            raise ValueError(f"cannot compute argmax: sequence {b} (rows {self.offsets[b]}:"
                             f"{self.offsets[b + 1]}) has no labeling with non-zero potential "
                             f"(log_partition is -inf)")
        return labels.copy()


def _names_of(h, positions):
    """Node names of a path given as child positions from the root."""
    out, m = [], 0
    for i in positions:
        c = h.children[m][i]
        out.append(c)
        m = h._sub_index.get(c, -1)
    return tuple(out)


def p_str(path):
    return "/".join(path)


def _check_root_finishes(h):
    s, a, e = h.start[0], h.trans[0], h.end[0]
    reach = set(np.flatnonzero(s > 0).tolist())
    todo = list(reach)
    while todo:
        i = todo.pop()
        for j in np.flatnonzero(a[i] > 0):
            if int(j) not in reach:
                reach.add(int(j))
                todo.append(int(j))
    if not any(e[i] > 0 for i in reach):
        raise ValueError(f"the root {h.submodel_names[0]!r} can never finish (no reachable child has a "
                         f"positive 'end' probability), so no string is complete under finish='all'; "
                         f"give it end probabilities or use finish='none'")
