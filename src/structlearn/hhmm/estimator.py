"""The hierarchical HMM estimator: exact linear-time inference, EM and supervised estimation.

The automaton and its flattening are :mod:`structlearn.hhmm.model` (the DBN view
:mod:`structlearn.hhmm.dbn`); inference runs on :class:`~structlearn.engine.structures.LinearChain` or
:class:`~structlearn.engine.structures.SparseChain` (flattened chain), or on the DBN itself
(:class:`structlearn.hhmm.jtree.DBNInference`: chain of slice junction trees;
:class:`structlearn.hhmm.forward_filter.FactoredFrontier`: the approximate factored frontier); EM is
:func:`structlearn.learning.em.run_em`.
"""
import warnings
from collections import namedtuple

import numpy as np
from scipy import sparse
from ..learning.training import EstimatorBase
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ..learning.shards import Shard, map_shards, data_blocks, document_blocks
from ..distributions import emissions as _emi
from ..distributions.base import families_from_file, family_to_file
from .model import FlatHMM, Hierarchy, log_sum_exp
from .dbn import HHMMDBN
from .forward_filter import FactoredFrontier
from .jtree import DBNInference
from ..engine.structures._base import Marginals
from ..engine.structures.chain import LinearChain
from ..engine.structures.sparse_chain import SparseChain
from ..utils.validation import check_lengths
from ..learning.restarts import check_n_jobs
from ._em import HHMMLearningMixin
from ..learning.posterior_check import check_posteriors

__all__ = ["HierarchicalHMM", "HHMMPosteriors", "HHMMDecoded", "HHMMFiltered", "HHMMSample"]

_FORMAT = "hierarchical-hmm"
_FORMAT_VERSION = 1
_INFERENCE = ("auto", "dense", "sparse", "flat", "jtree", "factored-frontier")


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))

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


@document_blocks
class HierarchicalHMM(HHMMLearningMixin, EstimatorBase):
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
        ``"diag_gaussian"``, ``"gmm"`` or an object of :mod:`structlearn.distributions.emissions` (its rows are the
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
    inference : {"auto", "flat", "dense", "sparse", "jtree", "factored-frontier"}, default "auto"
        ``"jtree"``: exact inference on the DBN of Murphy & Paskin 2001 §4–5 without flattening —
        forward–backward through the chain of junction trees of the 1.5-slice DBN (interface: the Q
        nodes of all levels; greedy min-weight elimination), time about O(T·D·Q^{1.5D}) and memory
        O(T·Q^D) for Q values per level instead of the flattened O(T·Q^{2D}); same numbers as the
        flattened chain to rounding error (log-likelihood, posteriors, EM counts, Viterbi; tested at
        rtol 1e-10). ``"factored-frontier"``: the approximate left-to-right scheme of Murphy & Weiss
        2001 (belief state as a product of per-level marginals; forward, backward and max-product
        sweeps, :class:`~structlearn.hhmm.forward_filter.FactoredFrontier`), time O(T·(Q^D·D² + Q^{D+1}))
        per sweep: every method works and gives an approximation (exact for depth 1) — log-likelihood,
        filtering, smoothed posteriors, EM on the approximate expected counts, and a Viterbi parse
        whose ``log_prob`` is the parse's exact log-probability (its measured error: ``docs/hhmm.md``,
        "Factored frontier: its error"). ``"flat"`` is ``"auto"``. The rest choose the kernel of the
        flattened chain:
        ``"dense"`` — the engine's :class:`LinearChain` on the (S, S)
        transition matrix, time O(T·S²) per sequence; ``"sparse"`` — the CSR kernels of
        :mod:`structlearn.engine.kernels.chain_sparse`, time O(T·(E + S)) with E the number of legal
        configuration-to-configuration transitions (memory O(T·E) for :meth:`posteriors`, never
        O(S²)); ``"auto"``: sparse when S > 100 and E / S² < 0.1 (where ``benchmarks/bench_hhmm.py``
        measures it faster: the dense kernel's scaled linear-space recursion wins on small or dense
        patterns). Results are identical to rounding error (tested at rtol 1e-10).

    transitions : {"full", "mixed-memory"}, default "full"
        Parameterisation of the horizontal CPDs EM fits (Murphy & Paskin 2001 §4.2): ``"full"``, one
        row per sub-model and child (structural zeros kept); ``"mixed-memory"``, for learning when the
        automaton's structure is unknown: below the root, the next-child distribution of level d is a
        mixture w_0 M_0[i, ·] + Σ_l w_l M_l[q_l, ·] of small matrices indexed by the finished child i
        and by each ancestor q_l, (d + 1)·K·(K + 1) + d parameters instead of K^{d-1}·K·(K + 1)
        (:class:`~structlearn.hhmm.parsimonious.MixedMemoryTransitions`; generalised EM: the
        M-step runs inner EM iterations from the current mixture). Needs unshared sub-models with the
        same number of children per level.
    n_jobs : int, optional
        Run the E-step of ``fit`` over ``n_jobs`` blocks of whole sequences in joblib worker processes
        (-1: all cores; :func:`structlearn.learning.shards.map_shards`); default one block in this
        process.
        {blocks}

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
    transitions between them); the inside–outside reference is O(T³·K·U). ``inference="jtree"``: time
    O(T·Σ_C |C|) with cliques of (D + 1)·Q^{D+1} entries (Q = values per level, D = depth) and memory
    O(T·Q^D) for every method (Murphy & Paskin 2001 §5); it also skips building the flattened chain's
    transition atoms, which is what makes the flat path infeasible from depth 7 with 3 children per
    sub-model (``benchmarks/bench_hhmm.py --part depth``).
    """

    def __init__(self, hierarchy=None, emission="categorical", *, root=None, finish="all", n_iter=100,
                 tol=1e-6, params="ste", init_params="", random_state=None, verbose=False,
                 inference="auto", transitions="full", n_jobs=None):
        self._store_params(locals())

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, start, trans, end, emission="categorical", **kwargs):
        """Model of a balanced hierarchy given per-level context-indexed tables (see
        :meth:`Hierarchy.from_arrays`)."""
        return cls(Hierarchy.from_arrays(start, trans, end), emission, **kwargs)

    # structural parameters: changing one (set_params) drops the built automaton and emission
    _STRUCTURE = ("hierarchy", "emission", "root", "finish")

    def set_params(self, **params):
        """Set parameters (scikit-learn); a new ``hierarchy``, ``emission``, ``root`` or ``finish``
        drops the built model, so the next call rebuilds it from the parameters."""
        super().set_params(**params)
        if any(k in self._STRUCTURE for k in params):
            self.__dict__.pop("hierarchy_", None)
        return self

    def _build(self, refit=False):
        """Build ``hierarchy_`` and ``emission_`` from the parameters: always when ``refit`` (``fit``
        starts from the parameters, never from a previous fit), else only when not built yet."""
        if not refit and getattr(self, "hierarchy_", None) is not None:
            return
        if self.finish not in ("all", "none"):
            raise ValueError(f"`finish` must be 'all' or 'none'; got {self.finish!r}")
        if self.inference not in _INFERENCE:
            raise ValueError(f"`inference` must be one of {list(_INFERENCE)}; got {self.inference!r}")
        if self.transitions not in ("full", "mixed-memory"):
            raise ValueError(f"`transitions` must be 'full' or 'mixed-memory'; got {self.transitions!r}")
        if self.hierarchy is None:
            raise ValueError("`hierarchy` is required (a nested dict or a Hierarchy)")
        h = Hierarchy.from_dict(self.hierarchy, self.root)
        if self.finish == "all":
            h.check_root_finishes()
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

    def _data(self, X, lengths, refit=False):
        self._build(refit)
        X = _emi.check_observations(self.emission_, X)
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="`X`")
        return X, lengths, offsets

    def uses_sparse(self):
        """True when inference runs on the sparse (CSR) chain kernels (see ``inference``)."""
        self._build()
        if self.inference not in ("auto", "flat"):
            return self.inference == "sparse"
        h = self.hierarchy_
        S, E = h.n_configs, len(h._pair_keys)
        return S > 100 and E < 0.1 * S * S

    def _dbn_inference(self):
        """The DBN engine when ``inference`` is "jtree" (:class:`DBNInference`) or "factored-frontier"
        (:class:`FactoredFrontier`); None: the flattened chain."""
        if self.inference not in ("jtree", "factored-frontier"):
            return None
        self._require_emission()
        key = (self.inference, self.finish, self.hierarchy_.theta().tobytes())
        cached = self.__dict__.get("_dbn_cache")
        if cached is None or cached[0] != key or cached[1].h is not self.hierarchy_:
            engine = DBNInference if self.inference == "jtree" else FactoredFrontier
            cached = self.__dict__["_dbn_cache"] = (key, engine(self.hierarchy_, self.finish))
        return cached[1]

    def _chain(self, X, lengths, mode="sum"):
        """The flattened chain and (log_start, log pair values (E,), log_end, log atoms (A,))."""
        self._require_emission()
        h = self.hierarchy_
        unary = self.emission_.log_density(X)[:, h._cfg_prod]
        if self.uses_sparse():
            ls, csr, le, la = h.flat_sparse(self.finish, mode)
            return SparseChain(unary, csr, ls, le, lengths), (ls, csr[2], le, la)
        ls, lt, le, la = h.flat(self.finish)
        if mode == "max":
            lt = np.full_like(lt, -np.inf)
            np.maximum.at(lt, (h._a_from, h._a_to), la)
        chain = LinearChain(unary, lt, lengths=lengths, start=ls, end=le)
        return chain, (ls, lt[h._pair_from, h._pair_to], le, la)

    def _pair_marginals(self, chain, edge):
        """Token marginals (N, S) and edge marginals on the E pairs ((N, E) for "full", (E,) for "total")."""
        mg = chain.marginals(edge=edge)
        if isinstance(chain, SparseChain):
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
        """The DBN (representation (b), Murphy & Paskin 2001 §4) with CPDs derived from the automaton; see
        :class:`HHMMDBN`."""
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
        X, lengths, offsets = self._data(X, lengths)
        dbn = self._dbn_inference()
        if dbn is not None:
            return dbn.log_likelihood(self.emission_.log_density(X), offsets)
        chain, _ = self._chain(X, lengths)
        return chain.log_partition()

    def score(self, X, lengths=None):
        """Total log-likelihood of all sequences (float)."""
        return float(self.log_likelihood(X, lengths).sum())

    def posteriors(self, X, lengths=None):
        """Posterior marginals of every level's state Q^d_t and finished flag F^d_t; see :data:`HHMMPosteriors`.

        Time O(N·S² + N·A) and memory O(N·S²) (A = number of transition atoms). ``gamma``'s rows sum to
        one within 1e-9, else (or for a sequence with zero likelihood, as :meth:`decode`) ``ValueError``
        naming the sequence.
        """
        X, lengths, offsets = self._data(X, lengths)
        post = self._posteriors(X, lengths, offsets)
        check_posteriors(post.config, offsets, post.log_likelihood)
        return post

    def _posteriors(self, X, lengths, offsets):
        h = self.hierarchy_
        h = self.hierarchy_
        U, D, N = len(h.instance_paths), h.depth, X.shape[0]
        dbn = self._dbn_inference()
        if dbn is not None:
            log_z, gamma, finished, inst_fin = dbn.posteriors(self.emission_.log_density(X), offsets)
            inst_act = np.asarray(h._anc.T.dot(gamma.T).T) if N else np.zeros((0, U))
            return HHMMPosteriors(log_z, gamma, h.levels(inst_act), finished, inst_act, inst_fin)
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
            inst_fin[lasts], cut_post[lasts] = h.final_finish(gamma[lasts], self.finish)
        inst_act = np.asarray(h._anc.T.dot(gamma.T).T) if N else np.zeros((0, U))
        state = h.levels(inst_act)
        finished = np.cumsum(cut_post, axis=1)[:, :D].T.copy()
        return HHMMPosteriors(log_z, gamma, state, finished, inst_act, inst_fin)

    def expected_counts(self, X, lengths=None):
        """E-step: expected parameter counts (flat, :meth:`Hierarchy.theta` layout), emission weights
        (N, P) and the total log-likelihood. Tied parameters are pooled. Time O(N·S²)."""
        X, lengths, offsets = self._data(X, lengths)
        return self._e_step(X, lengths, offsets)

    def _e_step(self, X, lengths, offsets):
        h = self.hierarchy_
        dbn = self._dbn_inference()
        if dbn is not None:
            counts, weights, ll = dbn.expected_counts(self.emission_.log_density(X), offsets)
        else:
            chain, (ls, lp, le, la) = self._chain(X, lengths)
            mg = self._pair_marginals(chain, "total")
            ll = chain.log_partition()
        if np.any(ll == -np.inf):
            b = int(np.flatnonzero(ll == -np.inf)[0])
            raise ValueError(f"sequence {b} has probability 0 under the model (log-likelihood -inf); "
                             f"check the topology, the emissions or `finish`")
        if dbn is not None:
            return counts, weights, float(ll.sum())
        # the share of each atom in its flattened pair's marginal; a pair of probability 0 (a parameter
        # EM set to 0) gets no count (exp(-inf - -inf) would be NaN)
        lp_pair = lp[h._atom_pair]
        with np.errstate(invalid="ignore"):
            ratio = np.where(lp_pair == -np.inf, 0.0, np.exp(la - lp_pair))
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

        Time O(N·S²) (the engine's max-product chain with per-pair best atoms). With
        ``inference="factored-frontier"`` the parse is approximate (a legal one, never better than the
        exact parse) and ``log_prob`` is its exact log-probability.

        Raises
        ------
        ValueError
            If a sequence has probability 0.
        """
        X, lengths, offsets = self._data(X, lengths)
        h = self.hierarchy_
        dbn = self._dbn_inference()
        if dbn is not None:
            best, cfg, cut = dbn.decode(self.emission_.log_density(X), offsets)
            states, finished = h.stack_arrays(cfg, cut)
            segments = [h.segments(states[o:o + T], cut[o:o + T]) for o, T in zip(offsets[:-1], lengths)]
            return HHMMDecoded(best, states, finished, segments)
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
        states, finished = h.stack_arrays(cfg, cut)
        segments = [h.segments(states[o:o + T], cut[o:o + T]) for o, T in zip(offsets[:-1], lengths)]
        return HHMMDecoded(best, states, finished, segments)

    def filter(self, X, lengths=None):
        """Online filtering P(Q^d_t | o_1:t); see :data:`HHMMFiltered`. Time O(N·S²)."""
        X, lengths, offsets = self._data(X, lengths)
        h = self.hierarchy_
        dbn = self._dbn_inference()
        if dbn is not None:
            post, ll = dbn.filter(self.emission_.log_density(X), offsets)
        else:
            chain, _ = self._chain(X, lengths)
            alpha = chain.forward()
            ll = log_sum_exp(alpha, axis=1) if alpha.shape[0] else np.zeros(0)
            with np.errstate(invalid="ignore"):
                post = np.exp(alpha - ll[:, None])
            post[~np.isfinite(ll)] = 0.0
        act = np.asarray(h._anc.T.dot(post.T).T) if post.shape[0] else np.zeros((0, len(h.instance_paths)))
        state = h.levels(act)
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
            path = h.descend(-1, 0, rng)
            seq_c, seq_cut = [], []
            while True:
                s = h._cfg_index[path]
                seq_c.append(s)
                if len(seq_c) >= max_length:
                    warnings.warn(f"a sampled string reached max_length={max_length} and was cut",
                                  ConvergenceWarning)
                    seq_cut.append(-1)
                    break
                path, d = h.step(s, rng)
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
        states, finished = h.stack_arrays(cfg, cut)
        return HHMMSample(np.asarray(X), np.array(lengths, dtype=np.int64), states, finished)

    # -- learning ----------------------------------------------------------------------------------
    def fit(self, X, lengths=None):
        """EM (Baum–Welch on the family marginals) over several sequences; returns self.

        Vertical, horizontal, end and emission expected counts; tied parameters pooled; structural zeros
        kept. Every iteration never decreases the log-likelihood (exact E-step, exact M-step); with
        ``inference="factored-frontier"`` the E-step's counts and the monitored log-likelihood are the
        factored frontier's approximations, so this guarantee does not hold.
        ``ConvergenceWarning`` and ``converged_ = False`` when ``n_iter`` is reached first.
        The loop is hmmlearn's (:func:`structlearn.learning.em.run_em`): the M-step of the iteration
        on which the gain falls below ``tol`` is applied too, so the parameters are those after the last
        M-step; ``monitor_history_`` holds the log-likelihood before each M-step, ``n_iter_`` their
        number and ``log_likelihood_`` that of the returned parameters (one more E-step).
        """
        check_n_jobs(self.n_jobs)
        X, lengths, offsets = self._data(X, lengths, refit=True)
        shards = data_blocks(Shard(X, lengths, offsets))
        return self._fit_sharded(lambda f, p: map_shards(f, p, shards, self.n_jobs), (X, lengths, None),
                                 int(lengths.max()) if lengths.size else 0, X.shape[1], X)

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
        X, lengths, offsets = self._data(X, lengths, refit=True)
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
                    raise ValueError(f"labelled move at row {t} from stack {'/'.join(h.config_paths[s])} "
                                     f"to {'/'.join(h.config_paths[s2])} at level {d} has probability 0 "
                                     f"in the hierarchy's topology")
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
        from ..engine.kernels._reference_hhmm import hhmm_inside_outside

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
                A[:, idx[h.names_of(path)]] = v
            for path, v in fin.items():
                F[:, idx[h.names_of(path)]] = v
            out.append((lz, A, F))
        return out

    # -- persistence -------------------------------------------------------------------------------
    def save(self, path):
        """Write the model to ``path`` (versioned ``.npz`` + JSON header; no pickle)."""
        from ..utils.modelfile import save_model

        self._build()
        self._require_emission()
        ename, earr, ecfg = family_to_file(self.emission_, _emi, "emission")
        h = self.hierarchy_
        arrays = {"theta": h.theta(), **earr}
        params = {"finish": self.finish, "inference": self.inference, "transitions": self.transitions,
                  "n_iter": int(self.n_iter),
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
        from ..utils.modelfile import ModelFileError, load_model

        header, arrays = load_model(path, expected_format=_FORMAT, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        emission = families_from_file(meta, arrays, {"emission": (_emi, _emi.EmissionDistribution)})["emission"]
        if emission is None:
            raise ModelFileError(f"{path!r}: unknown emission family {meta.get('emission_family')!r}")
        names, kids = meta["submodels"], meta["children"]
        theta = np.asarray(arrays["theta"], dtype=np.float64)
        spec, b = {}, 0
        for n, c in zip(names, kids):
            K = len(c)
            spec[n] = {"children": c, "start": theta[b:b + K], "trans": theta[b + K:b + K + K * K]
                       .reshape(K, K), "end": theta[b + K + K * K:b + 2 * K + K * K]}
            b += 2 * K + K * K
        model = cls(spec, emission, root=names[0], **header["params"])
        model._build()
        return model
