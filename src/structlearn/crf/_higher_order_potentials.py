"""Higher-order linear-chain CRF: label-pattern features -> a distribution over label sequences.

A model of order d scores label sequences with **label patterns** (label n-grams) ``z`` of length 1..d+1:
pattern z is active at position t when ``y[t-|z|+1 .. t] == z`` (entirely inside the sequence). Its
log-potential at t is

    θ_t(z) = w_pat[z] + Σ_{(a, v) in item t} v · w_state[a, z]        (the second sum only if |z| ≤ s)

where ``w_pat`` are the *transition* features (patterns of length 2..d+1, Cuong et al. 2014's "transition n-grams")
and ``w_state`` the state features conditioned on a label pattern (Cuong et al. 2014's ``<source, sentiment>``
example), limited to patterns of length ≤ s = ``state_order`` ≤ d. Plus ``start[y_0]`` and
``end[y_{T-1}]``. Order 1 with s = 1 is exactly the linear-chain CRF of :mod:`structlearn.crf._potentials`.

Pattern ids: the K unigrams first (id = label), then the other "state" patterns (length 2..s), so that
the first ``Zs`` ids are those with token-dependent potentials; then the rest. Two exact inference
algorithms, chosen by ``mode``:

- ``"dense"``: state expansion to d-tuples of labels (Cuong et al. 2014, JMLR 15, α[y_1..y_d]):
  a first-order :class:`~structlearn.engine.structures.LinearChain` over K**d states whose transition matrix is
  -inf except between overlapping tuples (s[1:] == s'[:-1]), which carry the (d+1)-gram weights. Tuples at
  the first d-1 positions are padded with label 0 (start potentials -inf elsewhere), and the out-of-range
  (d+1)-gram weight of those steps is subtracted from the unary. Time O(N·K**(2d)), memory O(N·K**d).
- ``"sparse"``: Cuong et al. (2014) forward–backward over pattern prefixes with the longest-suffix
  relation (:mod:`structlearn.engine.kernels.higher_order`). Time O(N·|P|·K) with |P| the number of pattern
  prefixes — only the patterns seen in training, so orders 3–5 stay tractable with 20+ labels.

:class:`~structlearn.crf._segment_patterns.SegmentPatternModel` is the same idea over *segment* labels
(a higher-order semi-Markov CRF) on the :class:`~structlearn.engine.structures.SemiMarkov` engine.
"""
import numpy as np
import scipy.sparse as sp

from .._threading import reduction_blocks
from ..engine.kernels import higher_order as _k
from ..engine.kernels.features import state_gradient_tokens, state_potentials
from ..engine.kernels.higher_order_cll import pattern_cll
from ..engine.structures import LinearChain
from ..engine.structures._base import KBest, Marginals
from ..utils.validation import check_allowed_mask, check_feature_index, check_labels, finite_abs_max
from ._layout import first_dim
from ._potentials import _chunk_bounds
from .features import dense_feature_rows

__all__ = ["LabelPatterns", "PatternChain", "HigherOrderFeatureModel", "build_pattern_state_features",
           "ngram_ids"]


# ---------------------------------------------------------------------------------------------------
# checks of arrays read from a model file (the kernels index with them unchecked)
# ---------------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------------
# pattern sets
# ---------------------------------------------------------------------------------------------------
def _positions(offsets):
    """Position of every token in its sequence, int64 (N,)."""
    N = int(offsets[-1])
    lengths = np.diff(offsets)
    return np.arange(N, dtype=np.int64) - np.repeat(offsets[:-1], lengths)


def _codes(y, pos, k, K):
    """Integer code Σ y[n-k+1+i]·K**(k-1-i) of the k-gram ending at every token, -1 where out of range."""
    N = y.shape[0]
    code = np.zeros(N, np.int64)
    ok = pos >= k - 1
    for i in range(k):
        sh = k - 1 - i  # token n - sh
        prev = np.zeros(N, np.int64)
        if sh < N:
            prev[sh:] = y[:N - sh]
        code = code * K + prev
    return np.where(ok, code, -1)


class LabelPatterns:
    """A set of label patterns of one order, with the sparse automaton and the dense maps.

    Parameters
    ----------
    patterns : list of tuple of int
        Every pattern once; the K unigrams must come first in label order, then the other patterns
        of length ≤ ``state_order``, then the rest (as :meth:`from_labels` builds them).
    n_labels : int
        K.
    order : int
        d ≥ 1 (patterns have length ≤ d + 1).
    state_order : int
        s, 1 ≤ s ≤ d: patterns of length ≤ s may have state features (ids < ``n_state_patterns``).
    """

    def __init__(self, patterns, n_labels, order, state_order):
        self.patterns = [tuple(int(v) for v in z) for z in patterns]
        self.n_labels = K = int(n_labels)
        self.order = int(order)
        self.state_order = int(state_order)
        self.index = {z: i for i, z in enumerate(self.patterns)}
        if len(self.index) != len(self.patterns):
            raise ValueError("`patterns` holds a pattern twice")
        if self.patterns[:K] != [(k,) for k in range(K)]:
            raise ValueError("`patterns` must start with the K unigrams in label order")
        lens = np.array([len(z) for z in self.patterns], np.int64)
        if lens.max() > self.order + 1 or lens.min() < 1:
            raise ValueError(f"patterns must have length 1..order+1 = {self.order + 1}")
        self.lengths = lens
        self.n_state_patterns = int(np.sum(lens <= self.state_order))
        if not np.all(lens[:self.n_state_patterns] <= self.state_order):
            raise ValueError("patterns of length ≤ state_order must come before the others")
        self._sparse = None
        self._dense = None

    @property
    def n_patterns(self):
        return len(self.patterns)

    @classmethod
    def from_labels(cls, y, offsets, n_labels, order, state_order, all_possible=False):
        """Patterns seen in the label sequences ``y`` (N,) (all K**n n-grams when ``all_possible``)."""
        K = int(n_labels)
        pos = _positions(offsets)
        by_len = {}
        for k in range(1, order + 2):
            if k == 1 or all_possible:
                codes = np.arange(K ** k, dtype=np.int64)
            else:
                c = _codes(y, pos, k, K)
                codes = np.unique(c[c >= 0])
            pats = []
            for c in codes.tolist():
                z = []
                for _ in range(k):
                    z.append(c % K)
                    c //= K
                pats.append(tuple(reversed(z)))
            by_len[k] = pats
        ordered = [z for k in range(1, state_order + 1) for z in by_len[k]] + \
            [z for k in range(state_order + 1, order + 2) for z in by_len[k]]
        return cls(ordered, K, order, state_order)

    def to_array(self):
        """(Z, d+1) int64 table, rows right-padded with -1 (for model files)."""
        out = np.full((self.n_patterns, self.order + 1), -1, np.int64)
        for i, z in enumerate(self.patterns):
            out[i, :len(z)] = z
        return out

    @classmethod
    def from_array(cls, table, n_labels, order, state_order):
        """The patterns of :meth:`to_array`'s table (ValueError naming ``patterns`` if malformed)."""
        table = np.asarray(table)
        used = table >= 0
        if table.ndim != 2 or table.size == 0 or table.min() < -1 or table.max() >= int(n_labels) \
                or np.any(used[:, 1:] & ~used[:, :-1]):
            raise ValueError(f"'patterns' must be a 2-D table of labels in [0, {int(n_labels)}) right-padded "
                             f"with -1; got shape {table.shape}")
        return cls([tuple(int(v) for v in row if v >= 0) for row in table], n_labels, order, state_order)

    # -- sparse automaton (Cuong et al. 2014) -------------------------------------------------------
    def sparse(self):
        """The automaton: dict with ``dst`` (E,), ``p_last`` (P,), ``es_ptr``/``es_pat`` (state patterns
        of every edge), ``incidence`` (E, Z) sparse 0/1 (all patterns of every edge), ``prefixes``, and
        the edge classes: ``cls`` (E,) class of every edge, ``cls_ptr``/``cls_pat`` the state patterns of
        every class, ``cls_label`` (C,) its label. Failure links: fail(p) is the longest proper suffix of
        p in P; edge (p, y) is *default* when it has the destination, class and patterns of
        (fail(p), y), so its mass can travel on that edge (recursively): ``nd`` the non-default edges out
        of non-empty states (on CoNLL-2002 order 3: 549 of 1 674 edges), ``nd_ptr``/``nd_src`` the states
        whose mass each of them carries, ``root_pos`` (E,) the position in ``nd`` of the edge that
        carries edge e's mass (-1 out of ε). The linear pass computes only the non-default edges.

        Edge e = p·K + y for forward state p (0 = ε) and label y. Edges with the same state patterns
        form a class (C ≤ Σ_{k ≤ s} K**k; C = Zs when s = 2 and every bigram is a pattern), so the
        token-dependent part of ψ[t, e] is a per-token value of its class: the kernels compute C
        potentials (and exponentials) per token instead of E.
        """
        if self._sparse is not None:
            return self._sparse
        K = self.n_labels
        prefixes = {(): 0}
        plist = [()]
        for z in [(k,) for k in range(K)] + [z[:i] for z in self.patterns for i in range(1, len(z))]:
            if z not in prefixes:
                prefixes[z] = len(plist)
                plist.append(z)
        P = len(plist)
        dst = np.empty(P * K, np.int64)
        es_ptr = [0]
        es_pat = []
        rows, cols = [], []
        Zs = self.n_state_patterns
        for p, pz in enumerate(plist):
            for y in range(K):
                s = pz + (y,)
                e = p * K + y
                q = -1
                for i in range(len(s)):  # longest suffix of s in P
                    q = prefixes.get(s[i:], -1)
                    if q >= 0:
                        break
                dst[e] = q
                for i in range(len(s)):  # all Z-suffixes of s
                    z = self.index.get(s[i:])
                    if z is not None:
                        rows.append(e)
                        cols.append(z)
                        if z < Zs:
                            es_pat.append(z)
                es_ptr.append(len(es_pat))
        p_last = np.array([z[-1] if z else -1 for z in plist], np.int64)
        inc = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(P * K, self.n_patterns))
        # edge classes: the distinct sets of state patterns of the edges (ψ's token-dependent part)
        classes = {}
        cls = np.empty(P * K, np.int64)
        cls_pat, cls_ptr, cls_label = [], [0], []
        for e in range(P * K):
            key = tuple(es_pat[es_ptr[e]:es_ptr[e + 1]])
            if key not in classes:
                classes[key] = len(cls_label)
                cls_pat.extend(key)
                cls_ptr.append(len(cls_pat))
                cls_label.append(e % K)
            cls[e] = classes[key]
        # failure links (Aho & Corasick 1975): fail(p) = longest proper suffix of p in P (|p| ≥ 2). Edge
        # (p, y) is *default* when it equals (fail(p), y) in destination, class and patterns: the forward
        # pass moves its mass there instead of computing it (Cuong et al.'s edges, fewer of them)
        edge_pats = [frozenset() for _ in range(P * K)]
        for r, c in zip(rows, cols):
            edge_pats[r] = edge_pats[r] | {c}
        root = np.full(P * K, -1, np.int64)  # the non-default edge reached through default edges
        for p in sorted(range(1, P), key=lambda i: len(plist[i])):  # fail(p) before p
            pz = plist[p]
            f = prefixes[next(pz[i:] for i in range(1, len(pz)) if pz[i:] in prefixes)] if len(pz) >= 2 else -1
            for y in range(K):
                e, g = p * K + y, f * K + y
                dflt = f >= 0 and dst[e] == dst[g] and cls[e] == cls[g] and edge_pats[e] == edge_pats[g]
                root[e] = root[g] if dflt else e
        nd = np.flatnonzero(root == np.arange(P * K))
        root_pos = np.full(P * K, -1, np.int64)
        root_pos[K:] = np.searchsorted(nd, root[K:])
        src = np.argsort(root_pos[K:], kind="stable") + K  # edges (p ≥ 1) grouped by carrier
        nd_ptr = np.concatenate([[0], np.cumsum(np.bincount(root_pos[K:], minlength=nd.size))])
        self._sparse = {"dst": dst, "p_last": p_last, "es_ptr": np.asarray(es_ptr, np.int64),
                        "es_pat": np.asarray(es_pat, np.int64), "incidence": inc, "prefixes": plist,
                        "cls": cls, "cls_ptr": np.asarray(cls_ptr, np.int64),
                        "cls_pat": np.asarray(cls_pat, np.int64), "cls_label": np.asarray(cls_label, np.int64),
                        "nd": nd.astype(np.int64), "nd_ptr": nd_ptr.astype(np.int64),
                        "nd_src": (src // K).astype(np.int64), "root_pos": root_pos}
        return self._sparse

    # -- dense expansion ----------------------------------------------------------------------------
    def dense(self):
        """Maps of the d-tuple expansion: ``suffix`` (d, K**d), ``tpat`` (K**d, K) (see
        :func:`~structlearn.engine.kernels.higher_order.dense_unary`)."""
        if self._dense is not None:
            return self._dense
        K, d = self.n_labels, self.order
        S = K ** d
        if S > 2 ** 24:
            raise ValueError(f"the dense expansion needs K**d = {K}**{d} = {S} states; use "
                             f"patterns='sparse'")
        tuples = np.zeros((S, d), np.int64)  # tuple of every state index (most significant first)
        r = np.arange(S, dtype=np.int64)
        for i in range(d - 1, -1, -1):
            tuples[:, i] = r % K
            r //= K
        suffix = np.full((d, S), -1, np.int64)
        tpat = np.full((S, K), -1, np.int64)
        idx = self.index
        for s in range(S):
            t = tuple(tuples[s].tolist())
            for k in range(1, d + 1):
                suffix[k - 1, s] = idx.get(t[d - k:], -1)
            for y in range(K):
                tpat[s, y] = idx.get(t + (y,), -1)
        self._dense = {"suffix": suffix, "tpat": tpat, "n_states": S}
        return self._dense

    def dense_transition(self, wpat):
        """(K**d, K**d) transition log-potentials: (d+1)-gram weights between overlapping tuples."""
        K = self.n_labels
        dn = self.dense()
        S = dn["n_states"]
        tr = np.full((S, S), -np.inf)
        src = np.repeat(np.arange(S), K)
        y = np.tile(np.arange(K), S)
        nxt = (src % (S // K)) * K + y
        z = dn["tpat"].ravel()
        tr[src, nxt] = np.where(z >= 0, wpat[np.maximum(z, 0)], 0.0)
        return tr


def ngram_ids(patterns, y, offsets, max_len):
    """Pattern ids (N, max_len) of the k-gram (k = 1..max_len) of ``y`` ending at every token; -1 where
    out of range or not a pattern."""
    K = patterns.n_labels
    pos = _positions(offsets)
    out = np.full((y.shape[0], max_len), -1, np.int64)
    for k in range(1, max_len + 1):
        c = _codes(y, pos, k, K)
        pk = [(i, z) for i, z in enumerate(patterns.patterns) if len(z) == k]
        if not pk:
            continue
        pc = np.array([sum(v * K ** (k - 1 - j) for j, v in enumerate(z)) for _, z in pk], np.int64)
        pid = np.array([i for i, _ in pk], np.int64)
        order = np.argsort(pc)
        pc, pid = pc[order], pid[order]
        j = np.clip(np.searchsorted(pc, c), 0, len(pc) - 1)
        out[:, k - 1] = np.where((c >= 0) & (pc[j] == c), pid[j], -1)
    return out


def build_pattern_state_features(packed, y, patterns, n_attributes, min_freq=0.0,
                                 all_possible_states=False):
    """State features (attribute, state pattern) as CRFsuite's (attribute, label) generalised.

    A feature (a, z) exists when attribute a occurs (non-zero) at a token where gold pattern z (|z| ≤
    ``state_order``) ends, at least ``min_freq`` times; with ``all_possible_states`` every attribute seen
    in training gets every state pattern. Returns ``attr_ptr`` (A + 1,), ``feat_pat`` (F,) grouped by
    attribute, patterns ascending (for order 1 the layout of
    :func:`~structlearn.crf.features.build_state_features`).
    """
    if all_possible_states:
        return state_feature_layout(packed, n_attributes, patterns.n_state_patterns, None)
    ids = ngram_ids(patterns, y, packed.offsets, patterns.state_order)
    return state_feature_layout(packed, n_attributes, patterns.n_state_patterns, ids, min_freq)


def state_feature_layout(packed, n_attributes, n_state_patterns, ids, min_freq=0.0):
    """(attr_ptr (A + 1,), feat_pat (F,)) int64 of the state features (a, z): a pair exists when attribute
    a occurs (non-zero) at a token whose ``ids`` row (N, s) holds state pattern z (-1: none) at least
    ``min_freq`` times; ``ids`` None: every state pattern for every attribute seen. Grouped by attribute,
    pattern ids ascending. Shared by the chain (:func:`build_pattern_state_features`) and segment
    (:func:`~structlearn.crf._segment_patterns_sparse.build_segment_state_features`) models. Time
    O(nnz · s + F log F)."""
    A, Zs = n_attributes, n_state_patterns
    if ids is None:
        seen = np.zeros(A, bool)
        seen[packed.item_attr[packed.item_val != 0]] = True
        attr_ptr = np.concatenate([[0], np.cumsum(np.where(seen, Zs, 0))]).astype(np.int64)
        return attr_ptr, np.tile(np.arange(Zs, dtype=np.int64), int(seen.sum()))
    rows = np.repeat(np.arange(packed.n_items, dtype=np.int64), np.diff(packed.item_ptr))
    nz = packed.item_val != 0
    r, a = rows[nz], packed.item_attr[nz]
    keys = []
    for k in range(ids.shape[1]):
        z = ids[r, k]
        ok = z >= 0
        keys.append(a[ok] * Zs + z[ok])
    keys, counts = np.unique(np.concatenate(keys), return_counts=True)
    keys = keys[counts >= min_freq]
    attr_ptr = np.concatenate([[0], np.cumsum(np.bincount(keys // Zs, minlength=A))]).astype(np.int64)
    return attr_ptr, (keys % Zs).astype(np.int64)


# ---------------------------------------------------------------------------------------------------
# the structure
# ---------------------------------------------------------------------------------------------------
class PatternChain:
    """Distribution over label sequences of a higher-order chain given pattern potentials.

    Parameters
    ----------
    phi : ndarray of float64, shape (N, Zs)
        Token-dependent log-potentials of the state patterns (ids < Zs) ending at each token.
    wpat : ndarray of float64, shape (Z,)
        Constant log-potential of every pattern.
    patterns : LabelPatterns
    lengths : ndarray of int64, shape (B,)
    start, end : ndarray of float64, shape (K,)
    mode : {"dense", "sparse"}
    allowed : ndarray of bool, shape (N, K), optional
        Labels allowed per token (others -inf).

    Notes
    -----
    ``log_partition``, ``marginals``, ``pattern_marginals``, ``argmax``, ``max`` and ``score`` follow
    :class:`~structlearn.engine.structures.LinearChain`. Costs: see the module docstring.
    """

    #: sparse mode: scaled linear-space pass (one exp per edge and token) with a per-sequence fallback to
    #: the log-space recursion when potentials are too spread (False: always log space)
    linear = True

    def __init__(self, phi, wpat, patterns, lengths, start, end, mode="sparse", allowed=None):
        self.phi = np.ascontiguousarray(phi, dtype=np.float64)
        self.wpat = np.ascontiguousarray(wpat, dtype=np.float64)
        self.patterns = patterns
        self.lengths = np.asarray(lengths, np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.start = np.asarray(start, np.float64)
        self.end = np.asarray(end, np.float64)
        if mode not in ("dense", "sparse"):
            raise ValueError(f"`mode` must be 'dense' or 'sparse'; got {mode!r}")
        self.mode = mode
        N, K = self.phi.shape[0], patterns.n_labels
        self.n_labels = K
        self.n_rows = N
        self.allowed = np.ones((N, K), bool) if allowed is None else check_allowed_mask(allowed, (N, K))
        self._cache = {}
        self._check_overflow()

    def _check_overflow(self):
        """Refuse potentials whose labeling scores can overflow float64 (the recursions would give inf or
        NaN, or a wrong finite log Z), naming the first such sequence: a bound on |score| is the largest
        finite |state score| of every token plus, per token, Σ|pattern weights| and the largest |start|
        and |end|. State scores that are +inf or NaN themselves are left to
        :func:`~structlearn.crf._decode.check_state_scores` (which names the position)."""
        with np.errstate(over="ignore", invalid="ignore"):
            per_token = (finite_abs_max(self.wpat[:, None], axis=1).sum() + finite_abs_max(self.start)
                         + finite_abs_max(self.end))
            c = np.concatenate([[0.0], np.cumsum(finite_abs_max(self.phi, axis=1))])
            bound = c[self.offsets[1:]] - c[self.offsets[:-1]] + self.lengths * per_token
        bad = np.flatnonzero(~(bound < np.inf))
        if bad.size:
            b = int(bad[0])
            raise ValueError(f"sequence {b}: its labeling scores overflow float64 (a bound on them is "
                             f"{bound[b]}; expected finite): the model's weights or the attribute values "
                             f"are too large")

    batch_size = first_dim("lengths")

    def constrain(self, allowed):
        """A new chain restricted to labelings allowed by the boolean mask ``allowed`` (N, K)."""
        mask = check_allowed_mask(allowed, (self.n_rows, self.n_labels)) & self.allowed
        return PatternChain(self.phi, self.wpat, self.patterns, self.lengths, self.start, self.end,
                            self.mode, mask)

    # -- dense adapter ------------------------------------------------------------------------------
    def expanded(self):
        """The first-order :class:`LinearChain` over K**d tuple states (dense mode's adapter)."""
        if "chain" not in self._cache:
            pt = self.patterns
            dn = pt.dense()
            K, S = self.n_labels, dn["n_states"]
            pos = _positions(self.offsets)
            unary = _k.dense_unary(self.phi, self.wpat, dn["suffix"], dn["tpat"], pos, self.allowed, K)
            start = np.full(S, -np.inf)
            start[:K] = self.start  # tuple (0, ..., 0, y) has index y
            end = np.tile(self.end, S // K)
            self._cache["chain"] = LinearChain(unary, pt.dense_transition(self.wpat), lengths=self.lengths,
                                               start=start, end=end)
        return self._cache["chain"]

    def _sparse_args(self):
        sa = self.patterns.sparse()
        econst = np.asarray(sa["incidence"] @ self.wpat, dtype=np.float64)
        return (self.phi, econst, sa["cls"], sa["cls_ptr"], sa["cls_pat"], sa["cls_label"], sa["dst"],
                sa["p_last"], sa["nd"], sa["nd_ptr"], sa["nd_src"], sa["root_pos"], self.start, self.end,
                self.allowed, self.offsets)

    # -- log semiring -------------------------------------------------------------------------------
    def pattern_marginals(self):
        """(log_z (B,), label marginals (N, K), state-pattern marginals (N, Zs), expected pattern counts
        over the batch (Z,)), all linear space except log_z."""
        if "pm" in self._cache:
            return self._cache["pm"]
        pt = self.patterns
        if self.mode == "sparse":
            sa = pt.sparse()
            log_z, lab, tok, etot = _k.pattern_marginals(*self._sparse_args(), reduction_blocks(self.offsets[-1], 64, 1024),
                                                         self.linear)
            tot = np.asarray(sa["incidence"].T @ etot)
        else:
            chain = self.expanded()
            dn = pt.dense()
            m = chain.marginals(edge="total")
            log_z = chain.log_partition()
            pos = _positions(self.offsets)
            tok, lab, tot = _k.dense_collect(m.unary, dn["suffix"], dn["tpat"], pos, self.n_labels,
                                             pt.n_state_patterns, pt.n_patterns)
            S, K = dn["n_states"], self.n_labels
            src = np.repeat(np.arange(S), K)
            nxt = (src % (S // K)) * K + np.tile(np.arange(K), S)
            z = dn["tpat"].ravel()
            ok = z >= 0
            tot += np.bincount(z[ok], weights=m.edge[src[ok], nxt[ok]], minlength=pt.n_patterns)
        self._cache["pm"] = (log_z, lab, tok, tot)
        return self._cache["pm"]

    def log_partition(self):
        """log Z per sequence (B,); -inf if infeasible, 0 for empty sequences."""
        if "pm" in self._cache:
            return self._cache["pm"][0].copy()
        if self.mode == "dense":
            return self.expanded().log_partition()
        return self.pattern_marginals()[0].copy()

    def marginals(self, edge="none"):
        """Label marginals P(y_t = k) as :class:`Marginals` (``unary`` (N, K); ``edge`` None)."""
        if edge not in ("none", "total", "full", "sum"):
            raise ValueError(f"`edge` must be one of 'none', 'full', 'sum', 'total'; got {edge!r}")
        return Marginals(self.pattern_marginals()[1], None)

    # -- max semiring -------------------------------------------------------------------------------
    def _viterbi(self):
        if "viterbi" not in self._cache:
            if self.mode == "sparse":
                self._cache["viterbi"] = _k.pattern_viterbi(*self._sparse_args())
            else:
                chain = self.expanded()
                best = chain.max()
                if np.all(best > -np.inf):
                    labels = chain.argmax() % self.n_labels
                else:
                    labels = np.full(self.n_rows, -1, np.int64)
                self._cache["viterbi"] = (best, labels)
        return self._cache["viterbi"]

    def max(self):
        """Best score per sequence (B,)."""
        return self._viterbi()[0].copy()

    def argmax(self):
        """Best labeling (N,) int64.

        Raises
        ------
        ValueError
            If a sequence has no labeling with non-zero potential.
        """
        best, labels = self._viterbi()
        bad = np.flatnonzero(best == -np.inf)
        if bad.size:
            raise ValueError(f"cannot compute argmax: sequence {int(bad[0])} has no labeling with non-zero "
                             f"potential (log_partition is -inf)")
        return labels.copy()

    def kbest(self, k):
        """The k best labelings, best first, by exact k-best Viterbi on the dense d-tuple expansion (in
        both modes: a labeling is one path of tuples, so the expanded k best are the k best labelings).

        Returns
        -------
        KBest
            ``labels`` (k, N) int64 (-1 where a sequence has fewer feasible labelings), ``scores``
            (B, k). Time O(N·K**(2d)·k log(K**d·k)).

        Raises
        ------
        ValueError
            If K**d is too large for the expansion, or a sequence is infeasible.
        """
        kb = self.expanded().kbest(k)
        labels = np.where(kb.labels >= 0, kb.labels % self.n_labels, -1)
        return KBest(labels, kb.scores)

    # -- other --------------------------------------------------------------------------------------
    def path(self, labels):
        """Automaton edges (N,) of labels (N,)."""
        return _k.pattern_path(labels, self.patterns.sparse()["dst"], self.n_labels, self.offsets)

    def score(self, labels):
        """Log-score s(y) of the packed labeling ``labels`` (N,), shape (B,); -inf if not allowed."""
        labels = check_labels(labels, self.n_rows, self.n_labels)
        sa = self.patterns.sparse()
        edges = self.path(labels)
        inc = sa["incidence"][edges]  # (N, Z) patterns ending at every token
        per_tok = np.asarray(inc @ self.wpat).ravel()
        Zs = self.patterns.n_state_patterns
        coo = inc[:, :Zs].tocoo()
        np.add.at(per_tok, coo.row, self.phi[coo.row, coo.col])
        per_tok[~self.allowed[np.arange(self.n_rows), labels]] = -np.inf
        seq = np.repeat(np.arange(self.batch_size), self.lengths)
        out = np.zeros(self.batch_size)
        np.add.at(out, seq, per_tok)
        nz = np.flatnonzero(self.lengths > 0)
        out[nz] += self.start[labels[self.offsets[nz]]] + self.end[labels[self.offsets[nz + 1] - 1]]
        return out


# ---------------------------------------------------------------------------------------------------
# the feature model
# ---------------------------------------------------------------------------------------------------
class HigherOrderFeatureModel:
    """Maps higher-order CRF weights to a :class:`PatternChain` and pattern marginals to the gradient.

    Parameter layout of ``w`` (float64, length ``n_params``)::

        w[:F]               state features (attribute, state pattern), grouped by attribute
        w[F:F+Z]            pattern ("transition n-gram") weights; unigrams are not parameters (stay 0)
        w[F+Z:F+Z+K]        start
        w[F+Z+K:F+Z+2K]     end

    Parameters
    ----------
    patterns : LabelPatterns
    attr_ptr : ndarray of int64, shape (A + 1,)
    feat_pat : ndarray of int64, shape (F,)
        State-pattern id (< Zs) of every state feature.
    mode : {"dense", "sparse"}
    """

    #: attributes with at least this many state features are read as dense rows by the fused kernel
    #: (None: max(4, Zs / 5))
    dense_min_patterns = None

    def __init__(self, patterns, attr_ptr, feat_pat, mode="sparse"):
        self.patterns = patterns
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=np.int64)
        self.feat_pat = np.ascontiguousarray(feat_pat, dtype=np.int64)
        self.mode = mode
        self.n_labels = patterns.n_labels
        self._cache = {}

    def check(self):
        """Check the index arrays (a model read from a file); returns ``self``. ValueError: ``attr_ptr``
        does not rise from 0 to F or a ``feat_pat`` outside [0, Zs)."""
        check_feature_index(self.attr_ptr, self.feat_pat, self.patterns.n_state_patterns, ids_name="feat_pat")
        return self

    n_state = first_dim("feat_pat")

    @property
    def n_params(self):
        return self.n_state + self.patterns.n_patterns + 2 * self.n_labels

    def split(self, w):
        """Views (state (F,), patterns (Z,), start (K,), end (K,)) into ``w``."""
        F, Z, K = self.n_state, self.patterns.n_patterns, self.n_labels
        return w[:F], w[F:F + Z], w[F + Z:F + Z + K], w[F + Z + K:F + Z + 2 * K]

    def free_mask(self):
        m = np.ones(self.n_params, bool)
        m[self.n_state:self.n_state + self.patterns.n_patterns] = self.patterns.lengths >= 2
        return m

    def pattern_potentials(self, w, packed):
        """Token state-pattern potentials phi (N, Zs). Time O(nnz · patterns per attribute)."""
        return state_potentials(w[:self.n_state], packed.item_ptr, packed.item_attr, packed.item_val,
                                self.attr_ptr, self.feat_pat, self.patterns.n_state_patterns)

    def structure(self, w, packed, allowed=None):
        """The :class:`PatternChain` of a packed batch under weights ``w``."""
        _, wp, st, en = self.split(w)
        wp = np.where(self.patterns.lengths >= 2, wp, 0.0)
        return PatternChain(self.pattern_potentials(w, packed), wp, self.patterns, packed.lengths, st, en,
                            self.mode, allowed)

    def gradient(self, tok, tot, start_m, end_m, packed):
        """Gradient (n_params,) from token state-pattern statistics (N, Zs), pattern totals (Z,) and
        first / last label totals (K,)."""
        g = np.empty(self.n_params)
        gs, gp, gst, gen = self.split(g)
        gs[...] = state_gradient_tokens(np.ascontiguousarray(tok), packed.item_ptr, packed.item_attr,
                                        packed.item_val, self.attr_ptr, self.feat_pat,
                                        reduction_blocks(tok.shape[0]))
        gp[...] = np.where(self.patterns.lengths >= 2, tot, 0.0)
        gst[...] = start_m
        gen[...] = end_m
        return g

    def expected_counts(self, w, packed, y, n_chunks=None):
        """log Z, gold scores and expected feature counts of a fully labelled batch in one pass.

        Sparse mode: the fused kernel :func:`structlearn.engine.kernels.higher_order_cll.pattern_cll` computes
        the state-pattern potentials per sequence, runs the sparse forward–backward and scatters the
        marginals into the feature counts (no (N, Zs) array). Dense mode: ``structure`` then its
        marginals. Same numbers as ``structure(w, packed)`` → ``pattern_marginals()`` / ``score(y)`` /
        :meth:`gradient` (up to rounding).

        Parameters
        ----------
        w : ndarray of float64, shape (n_params,)
        packed : Packed batch of N tokens in B sequences
        y : ndarray of int64, shape (N,)
            Gold labels.
        n_chunks : int, optional
            Blocks of sequences for the parallel loop (default twice Numba's threads).

        Returns
        -------
        log_z, gold : ndarray of float64, shape (B,)
            log Z (-inf: infeasible) and the gold log-score per sequence.
        expected : ndarray of float64, shape (n_params,)
            E_p[f(x, y)] summed over the batch.

        Notes
        -----
        Time O(nnz·Zs + N·|P|·K) (frequent attributes read a dense row of Zs weights), memory
        O(n_chunks·(F + A_d·Zs + E)) with A_d the attributes read as dense rows.
        """
        y = np.asarray(y, dtype=np.int64)
        if self.mode != "sparse":
            ch = self.structure(w, packed)
            log_z, lab, tok, tot = ch.pattern_marginals()
            off = packed.offsets
            nz = np.flatnonzero(packed.lengths > 0)
            return log_z, ch.score(y), self.gradient(tok, tot, lab[off[nz]].sum(axis=0),
                                                     lab[off[nz + 1] - 1].sum(axis=0), packed)
        pt = self.patterns
        sa = pt.sparse()
        _, wp, st, en = self.split(w)
        wp = np.where(pt.lengths >= 2, wp, 0.0)
        econst = np.asarray(sa["incidence"] @ wp, dtype=np.float64)
        f_idx, f_row, f_col, n_dense, dense_of = self._dense_rows()
        codes = self._cache.get("codes")
        if codes is None or codes[0] is not packed.item_attr:
            row = dense_of[packed.item_attr]
            code = np.where(row >= 0, row, -packed.item_attr - 1)
            big = packed.item_attr.size and max(-code.min(), code.max()) >= 2 ** 31
            codes = (packed.item_attr, code.astype(np.int64 if big else np.int32),
                     bool(np.all(packed.item_val == 1.0)))
            self._cache["codes"] = codes
        path = self._cache.get("path")
        if path is None or path[0] is not y or path[1] is not packed.offsets:
            path = (y, packed.offsets, _k.pattern_path(y, sa["dst"], pt.n_labels, packed.offsets))
            self._cache["path"] = path
        n_chunks = reduction_blocks(packed.offsets[-1]) if n_chunks is None else int(n_chunks)
        log_z, gold, gstate, etot, est, een = pattern_cll(
            np.ascontiguousarray(w[:self.n_state]), f_idx, f_row, f_col, n_dense, codes[1], codes[2],
            packed.item_ptr, packed.item_val, self.attr_ptr, self.feat_pat, pt.n_state_patterns, econst,
            sa["cls"], sa["cls_ptr"], sa["cls_pat"], sa["cls_label"], sa["dst"], sa["p_last"], sa["nd"],
            sa["nd_ptr"], sa["nd_src"], sa["root_pos"], np.ascontiguousarray(st), np.ascontiguousarray(en),
            packed.offsets, path[2], _chunk_bounds(packed.offsets, n_chunks), PatternChain.linear)
        g = np.empty(self.n_params)
        gs, gp, gst, gen = self.split(g)
        gs[...] = gstate
        gp[...] = np.where(pt.lengths >= 2, np.asarray(sa["incidence"].T @ etot), 0.0)
        gst[...] = est
        gen[...] = een
        return log_z, gold, g

    def _dense_rows(self):
        """State features read as rows of a dense (A_d, Zs) block by the fused kernel: the attributes
        with at least max(4, Zs / 5) features (on CoNLL-2002 with Zs = 53: 1.4 % of the attributes, 90 %
        of the occurrences), at most 4M entries. Returns (feature indices, their rows, their state
        patterns, A_d, dense row of every attribute or -1); cached."""
        cache = self._cache.get("dense")
        if cache is None:
            dense_of, f_idx, f_row, f_col, n_dense = dense_feature_rows(
                self.attr_ptr, self.feat_pat, self.patterns.n_state_patterns, self.dense_min_patterns)
            cache = (f_idx, f_row, f_col, n_dense, dense_of)
            self._cache["dense"] = cache
        return cache

    def shard_copy(self):
        """A shallow copy (the same arrays and dense rows, built here once) with its own per-batch cache
        (item codes and label paths of the last batch ``expected_counts`` saw): for the shards one process
        evaluates in turn (as :meth:`~structlearn.crf._potentials.ChainFeatureModel.shard_copy`)."""
        self._dense_rows()
        own = object.__new__(type(self))
        own.__dict__.update(self.__dict__)
        own._cache = {"dense": self._cache["dense"]}
        return own

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cache"] = {}
        return state

    def __setstate__(self, state):
        state.setdefault("_cache", {})
        self.__dict__.update(state)

    def feature_counts(self, packed, y):
        """Observed feature counts of labels ``y`` (N,)."""
        pt = self.patterns
        sa = pt.sparse()
        edges = _k.pattern_path(np.asarray(y, np.int64), sa["dst"], pt.n_labels, packed.offsets)
        inc = sa["incidence"][edges]
        tok = np.asarray(inc[:, :pt.n_state_patterns].todense())
        tot = np.asarray(inc.sum(axis=0)).ravel()
        K = pt.n_labels
        off = packed.offsets
        nz = np.flatnonzero(packed.lengths > 0)
        st = np.bincount(y[off[nz]], minlength=K).astype(np.float64)
        en = np.bincount(y[off[nz + 1] - 1], minlength=K).astype(np.float64)
        return self.gradient(tok, tot, st, en, packed)


# ---------------------------------------------------------------------------------------------------
# higher order over segment labels (dense expansion on the semi-Markov engine)
# ---------------------------------------------------------------------------------------------------
