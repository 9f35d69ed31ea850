"""Trees: one label per node of a rooted tree, over a packed ragged batch of trees."""
import numpy as np

from ..kernels import tree as _k
from ..semirings import LOG
from ...utils.validation import check_labels, check_log_potentials
from ._base import LabelingStructure, Marginals, check_pairwise


class Tree(LabelingStructure):
    r"""Distribution over labelings of the nodes of rooted trees (tree-structured CRF posterior).

    The score of labels :math:`y` of one tree with root :math:`r` is

    .. math:: s(y) = root\_score[y_r] + \sum_n unary[n, y_n] + \sum_{c \ne r} edge[c, y_c, y_{parent(c)}]

    and :math:`p(y) = \exp(s(y) - \log Z)` (tree CRFs, Cohn & Blunsom 2005; belief
    propagation, Pearl 1982).

    Parameters
    ----------
    unary : array-like of float64, shape (N, K)
        Log-potentials of label k at node n; N = sum(lengths). -inf forbids a label.
    edge : array-like of float64, shape (K, K) or (N, K, K)
        Log-potentials of an edge: ``edge[c, i, j]`` scores child c labelled i under its parent labelled
        j ("child, parent"). The (K, K) form is shared by every edge. The root's row is ignored. -inf
        forbids a pair of labels.
    parent : array-like of int, shape (N,)
        Index of each node's parent *within its own tree* (local index, 0 ≤ parent < length), -1 for the
        root. Nodes may come in any order.
    lengths : array-like of int, shape (B,), optional
        Number of nodes of each of the B trees packed in ``unary``; default one tree of N nodes.
    root_score : array-like of float64, shape (K,), optional
        Extra log-potential of the root's label; default 0.

    Raises
    ------
    ValueError
        Shapes that disagree, NaN or +inf potentials, lengths that do not sum to N, or parent pointers
        that are not a tree: out of range (< -1 or ≥ the tree's length), a node that is its own parent,
        no root, two roots, or a cycle. The message names the tree (sequence) and the node.

    Notes
    -----
    The constructor computes once, in O(N), children lists and a breadth-first order of every tree
    (no recursion: trees of any depth work). All methods run Numba kernels in parallel over trees,
    with one upward (leaves → root) and one downward pass (Pearl 1988; Cohn & Blunsom 2005 §3) in the LOG
    or MAX semiring. Cost per call: time O(N·K²), memory O(N·K) (edge marginals O(N·K²));
    ``kbest(k)`` O(N·K²·k log(Kk)). Outside scores are built from sibling prefix/suffix sums, never by
    dividing out a message, so -inf potentials never give NaN. Infeasible trees (every labeling has
    potential -inf) get ``log_partition`` -inf, zero marginals, and make ``argmax``/``kbest``/``sample``
    raise ``ValueError`` naming the sequence.

    Examples
    --------
    Two nodes (node 0 is the child of node 1), three labels that must differ: six labelings.

    >>> import numpy as np
    >>> edge = np.where(np.eye(3, dtype=bool), -np.inf, 0.0)
    >>> tree = Tree(np.zeros((2, 3)), edge, [1, -1])
    >>> bool(np.isclose(tree.log_partition()[0], np.log(6)))
    True
    >>> tree.marginals().edge[0].round(4).tolist()[0]
    [0.0, 0.1667, 0.1667]
    """

    def __init__(self, unary, edge, parent, *, lengths=None, root_score=None):
        unary = check_log_potentials(unary, "unary", ndim=2)
        N, K = unary.shape
        self._init_batch(N, K, lengths)
        edge, self.shared_edge = check_pairwise(edge, "edge", N, K)
        self.unary = unary
        self._edge = np.ascontiguousarray(edge)
        self.root_score = (np.zeros(K) if root_score is None
                           else check_log_potentials(root_score, "root_score", (K,)))
        self.parent, self._gpar = validate_parents(parent, self.lengths, self.offsets)
        pre, cptr, cidx, reached = _k.tree_topology(self._gpar, self.offsets)
        cyc = np.flatnonzero(reached < self.lengths)
        if cyc.size:
            b = int(cyc[0])
            raise ValueError(_cycle_message(b, self.parent, self.offsets, pre, int(reached[b])))
        self._pre, self._cptr, self._cidx = pre, cptr, cidx
        self._cache = {}

    # -- parameters ---------------------------------------------------------------------------------
    @property
    def edge(self):
        """Edge log-potentials, (K, K) if shared else (N, K, K)."""
        return self._edge[0] if self.shared_edge else self._edge

    @property
    def order(self):
        """Packed breadth-first order of the nodes (global row indices), shape (N,).

        ``order[offsets[b]]`` is the root of tree b and every parent precedes its children, so
        ``order[::-1]`` lists children before parents.
        """
        return self._pre.copy()

    @property
    def roots(self):
        """Global row of the root of every tree, shape (B,) int64 (-1 for an empty tree)."""
        out = np.full(self.batch_size, -1, dtype=np.int64)
        ok = self.lengths > 0
        out[ok] = self._pre[self.offsets[:-1][ok]]
        return out

    def _topo(self):
        return self._pre, self._cptr, self._cidx, self.offsets

    def _upward(self, semiring):
        key = ("up", semiring)
        if key not in self._cache:
            self._cache[key] = _k.tree_upward(self.unary, self._edge, self.root_score, *self._topo(),
                                              semiring)
        return self._cache[key]

    # -- log semiring -------------------------------------------------------------------------------
    def log_partition(self):
        """Log partition function log Z of every tree.

        Returns
        -------
        log_z : ndarray of float64, shape (B,)
            -inf for an infeasible tree, 0.0 for an empty one. Time O(N·K²), memory O(N·K).
        """
        return self._upward(LOG)[3].copy()

    def _marginals(self, edge_mode):
        ins, msg, _, log_z = self._upward(LOG)
        return _k.tree_marginals(self.unary, self._edge, self.root_score, self._gpar, self._pre,
                                 self._cptr, self._cidx, self.offsets, ins, msg, log_z, edge_mode)

    def marginals(self, edge="full"):
        """Posterior marginals (the gradient of log Z with respect to the potentials).

        Parameters
        ----------
        edge : {"full", "sum", "none"}
            ``"full"``: edge marginals (N, K, K), row c = P(y_c = i, y_parent(c) = j), 0 for roots;
            ``"sum"``: their per-tree sums (B, K, K) (expected label-pair counts, memory O(B·K²));
            ``"none"``: ``edge`` is None.

        Returns
        -------
        Marginals
            ``unary`` (N, K) P(y_n = k), linear space; ``edge`` as above. Rows of infeasible trees
            are 0. Time O(N·K²).
        """
        modes = {"none": 0, "full": 1, "sum": 2}
        if edge not in modes:
            raise ValueError(f"`edge` must be one of {sorted(modes)}; got {edge!r}")
        um, em, _ = self._marginals(modes[edge])
        return Marginals(um, None if edge == "none" else em)

    def entropy(self):
        """Entropy of p(y) per tree, H = log Z - E[s(y)] (nats), shape (B,); -inf if infeasible.

        Computed from the marginals, skipping zero-probability terms (Rush 2020, "Torch-Struct",
        §entropy). Time O(N·K²).
        """
        log_z = self.log_partition()
        _, _, expected = self._marginals(0)
        return np.where(log_z == -np.inf, -np.inf, log_z - expected)

    def _sampler(self):
        """Upward sum-product, then downward sampling root first (see
        :meth:`LabelingStructure.sample`)."""
        ins, _, _, log_z = self._upward(LOG)
        return log_z, lambda u: _k.tree_sample(ins, log_z, self._edge, self.root_score, self._gpar,
                                               self._pre, self.offsets, u)

    # -- max semiring -------------------------------------------------------------------------------
    def _viterbi(self):
        if "viterbi" not in self._cache:
            self._cache["viterbi"] = _k.tree_viterbi(self.unary, self._edge, self.root_score,
                                                     self._gpar, *self._topo())
        return self._cache["viterbi"]

    def _kbest(self, k):
        """Exact k-best max-product: time O(N·K²·k log(Kk)), memory O(T·K·k) per tree."""
        return _k.tree_kbest(self.unary, self._edge, self.root_score, *self._topo(), k)

    # -- other --------------------------------------------------------------------------------------
    def score(self, labels):
        """Log-score s(y) of the packed labeling ``labels`` (N,), shape (B,); -inf if forbidden."""
        labels = check_labels(labels, self.n_rows, self.n_labels)
        return _k.tree_score(self.unary, self._edge, self.root_score, self._gpar, self.offsets, labels)


def validate_parents(parent, lengths, offsets, *, name="parent", per_tree=False, allow_forest=False,
                     forest_hint=""):
    """Validate the local parent indices of a packed batch of trees (cycles are not looked for).

    Parameters
    ----------
    parent : array-like of int, shape (N,)
        Index of each node's parent within its own tree, -1 for a root.
    lengths, offsets : ndarray of int64, shapes (B,) and (B + 1,)
        Nodes per tree and where each tree's rows start.
    name : str
        Argument name in messages.
    per_tree : bool
        Messages name node t of tree b as ``name[b][t]`` (the indices came as one list per tree), not
        as ``name`` of sequence b, node t (row n).
    allow_forest : bool
        Accept several roots per tree.
    forest_hint : str
        Appended to the message about several roots.

    Returns
    -------
    local : ndarray of int64, shape (N,)
    gpar : ndarray of int64, shape (N,)
        Global row of every node's parent, -1 for a root.

    Raises
    ------
    ValueError
        Wrong shape, non-integer entries, an index out of range, a node that is its own parent, a tree
        without a root, or several roots (unless ``allow_forest``).
    """
    arr = np.asarray(parent)
    N = int(offsets[-1])
    if arr.shape != (N,):
        raise ValueError(f"`{name}` must have shape ({N},) (one parent index per node); got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`{name}` must hold integer node indices (-1 for the root); got dtype "
                         f"{arr.dtype}")
    local = arr.astype(np.int64)
    seq = np.repeat(np.arange(lengths.shape[0]), lengths)
    pos = np.arange(N, dtype=np.int64) - offsets[:-1][seq]
    size = lengths[seq]

    def node(n):
        b, t = int(seq[n]), int(pos[n])
        return f"`{name}[{b}][{t}]`" if per_tree else f"`{name}` of sequence {b}, node {t} (row {n})"

    def tree(b):
        return f"`{name}[{b}]`" if per_tree else f"`{name}` of sequence {b}"

    bad = np.flatnonzero((local < -1) | (local >= size))
    if bad.size:
        n = int(bad[0])
        raise ValueError(f"{node(n)} is {int(local[n])}, out of range: expected -1 (the root) or a node "
                         f"index in [0, {int(size[n])}) of the same tree")
    bad = np.flatnonzero(local == pos)
    if bad.size:
        n = int(bad[0])
        raise ValueError(f"{node(n)} is the node itself; a node's parent must be another node of its tree "
                         f"(or -1 for the root)")
    n_roots = np.bincount(seq[local == -1], minlength=lengths.shape[0])
    bad = np.flatnonzero((n_roots == 0) & (lengths > 0))
    if bad.size:
        b = int(bad[0])
        rows = "" if per_tree else f" (rows {offsets[b]}:{offsets[b + 1]})"
        raise ValueError(f"{tree(b)}{rows} has no root (every node has a parent, so the parent pointers "
                         f"contain a cycle); exactly one node must have parent -1")
    bad = np.flatnonzero(n_roots > 1)
    if bad.size and not allow_forest:
        b = int(bad[0])
        r = np.flatnonzero((seq == b) & (local == -1))
        raise ValueError(f"{tree(b)} has {int(n_roots[b])} roots (nodes "
                         f"{', '.join(str(int(pos[x])) for x in r[:5])}): a tree has exactly one node with "
                         f"parent -1{forest_hint}")
    gpar = np.where(local >= 0, local + offsets[:-1][seq], -1).astype(np.int64)
    return local, np.ascontiguousarray(gpar)


def _cycle_message(b, local, offsets, pre, n_reached):
    """Message for tree b whose parent pointers contain a cycle (found by following pointers)."""
    o, T = int(offsets[b]), int(offsets[b + 1] - offsets[b])
    par = local[o:o + T]
    # a node unreachable from the root: its ancestors eventually loop; walking T steps lands on the loop
    seen = np.zeros(T, dtype=bool)
    seen[pre[o:o + n_reached] - o] = True
    n = int(np.flatnonzero(~seen)[0])
    for _ in range(T):
        n = int(par[n])
    cyc = [n]
    m = int(par[n])
    while m != n and len(cyc) < 6:
        cyc.append(m)
        m = int(par[m])
    path = " -> ".join(map(str, cyc)) + (" -> ..." if m != n else f" -> {n}")
    return (f"`parent` of sequence {b} (rows {o}:{o + T}) contains a cycle through node {n} "
            f"(parent chain {path}); parent pointers must form a tree")
