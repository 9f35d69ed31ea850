"""Training objectives: value and gradient of the negative conditional log-likelihood (CLL).

For a CRF with weights w and training pairs (x_b, y_b) (Lafferty et al. 2001, eq. (1);
the gradient is observed minus expected feature counts, Sutton & McCallum 2012, "An introduction to
conditional random fields", §5.1)::

    L(w)  = Σ_b [log Z(x_b) - s(x_b, y_b)] + c2 ‖w‖²
    ∇L(w) = Σ_b (E_{p(y|x_b)}[f(x_b, y)] - f(x_b, y_b)) + 2 c2 w

The expectations are the engine's marginals. With partial labels (a boolean mask of allowed labels per
token), s(x, y) is replaced by log Z(x | allowed) and the empirical counts by the constrained
marginals: the same dynamic program run twice. L1 (c1 ‖w‖₁) is left to the optimiser (OWL-QN).

:class:`ChainCLL` (linear chains), :class:`TreeCLL` (trees), :class:`HigherOrderCLL` (label patterns),
:class:`SemiMarkovCLL` (semi-Markov CRFs) and :class:`SegmentCLL` (label patterns over segments) share
all of this and differ only in how the structure's marginals become expected feature counts (two small
hooks), or in a fused kernel that returns log Z and the expectations in one pass.
"""
import numpy as np

from ..learning.optimizers import penalise

__all__ = ["ChainCLL", "TreeCLL", "HigherOrderCLL", "SemiMarkovCLL", "SegmentCLL", "penalise"]


#: tokens of a block of a CRF objective (about) and the most blocks (:meth:`_CLL.blocks`); each block is
#: one fused pass with its own threads, so blocks are large
CRF_BLOCK_ROWS, CRF_MAX_BLOCKS = 65536, 16


class _CLL:
    """Negative CLL of a packed training batch; subclasses supply ``_expected`` and ``_gradient``.

    Parameters
    ----------
    model : feature model
        Needs ``structure(w, batch)``, ``free_mask()`` and ``feature_counts(batch, y)``.
    packed : packed batch of the model (N items in B sequences or trees)
    y : ndarray of int64, shape (N,)
        Gold labels; ignored where ``allowed`` is given.
    c2 : float
        L2 coefficient (CRFsuite scaling: c2·‖w‖²).
    c1 : float
        L1 coefficient: adds c1·‖w‖₁ to the value and c1·sign(w) to the gradient (a subgradient;
        exact wherever no weight is 0). Optimisers that handle L1 themselves (OWL-QN) get ``c1=0``
        here and the coefficient separately.
    allowed : ndarray of bool, shape (N, K), optional
        Partial labels: the set of labels allowed at each token.
    """

    _unit = "sequence"
    _pair = "transition"
    _hint = "forbidden_transitions"

    def __init__(self, model, packed, y, c2=0.0, allowed=None, c1=0.0):
        self.model = model
        self.packed = packed
        self.y = np.asarray(y, dtype=np.int64)
        self.c2 = float(c2)
        self.c1 = float(c1)
        self.allowed = allowed
        self.mask = model.free_mask()
        self.n_evals = 0
        if allowed is None:
            self.empirical = model.feature_counts(packed, self.y)

    def __sizeof__(self):
        """Bytes of the arrays held (the packed batch, labels, empirical counts): what dask's scheduler
        weighs when it decides where an evaluation on this shard runs (structlearn.distributed)."""
        def arrays(obj):
            names = getattr(obj, "__slots__", None) or getattr(obj, "__dict__", {})
            return sum(v.nbytes for v in (getattr(obj, n, None) for n in names) if isinstance(v, np.ndarray))

        return object.__sizeof__(self) + arrays(self) + arrays(self.packed)

    def _block_labels(self, b0, b1):
        """The gold labels of sequences b0..b1-1 (rows of ``y``; per token by default)."""
        off = self.packed.offsets
        return self.y[off[b0]:off[b1]]

    def block(self, b0, b1):
        """The unpenalised objective (c2 = c1 = 0) of the contiguous sequences b0..b1-1: a shard whose
        value and gradient add up, over a partition of the sequences, to this objective's data term.
        The batch is sliced by its ``slice(b0, b1)`` (views of its arrays)."""
        part = object.__new__(type(self))
        part.__dict__.update(self.__dict__)
        off = self.packed.offsets
        r0, r1 = int(off[b0]), int(off[b1])
        part.packed = self.packed.slice(b0, b1)
        part.y = self._block_labels(b0, b1)
        part.allowed = None if self.allowed is None else self.allowed[r0:r1]
        part.c2 = part.c1 = 0.0
        part.n_evals = 0
        if self.allowed is None:
            part.empirical = self.model.feature_counts(part.packed, part.y)
        part._init_block()
        return part

    def _init_block(self):
        """Recompute what a subclass derives from the batch in its constructor (after :meth:`block`)."""

    def blocks(self):
        """The unpenalised objectives of the blocks of :func:`~structlearn.learning.shards.block_cuts`
        (about ``CRF_BLOCK_ROWS`` tokens each, at most ``CRF_MAX_BLOCKS``): fixed by the sequence lengths,
        so that the fit is bitwise the same for every ``n_jobs`` and thread count (their values and
        gradients are added in the fixed tree of :func:`~structlearn.learning.shards.tree_statistics`)."""
        from ..learning.shards import block_cuts
        cuts = block_cuts(self.packed.offsets, CRF_BLOCK_ROWS, CRF_MAX_BLOCKS)
        return [self.block(a, b) for a, b in zip(cuts[:-1], cuts[1:])]

    def split(self, n_shards):
        """The unpenalised objectives of at most ``n_shards`` contiguous blocks of sequences with about
        equal numbers of tokens (see :meth:`block`)."""
        off = self.packed.offsets
        B = off.shape[0] - 1
        n = max(1, min(int(n_shards), B))
        N = int(off[-1])
        cuts = sorted(set([0, B] + [int(np.searchsorted(off, N * i / n)) for i in range(1, n)]))
        return [self.block(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]

    def _fused(self, w):
        """(log Z (B,), gold scores (B,), expected counts (n_params,)) in one pass, or None when the
        model has no fused kernel (then ``_expected`` runs on the structure)."""
        return None

    def _expected(self, structure):
        """(tuple of expected statistics, log Z (B,)) under ``structure``."""
        raise NotImplementedError

    def _gradient(self, stats):
        """Gradient vector (n_params,) of the statistics returned by ``_expected``."""
        raise NotImplementedError

    def __call__(self, w, g=None):
        """Return L(w); write ∇L(w) into ``g`` if given (shape (n_params,))."""
        self.n_evals += 1
        fused = self._fused(w)
        if fused is not None:
            log_z, gold, expected = fused
            value = float(np.sum(log_z) - np.sum(gold))
            if g is not None:
                g[...] = expected - self.empirical
        else:
            structure = self.model.structure(w, self.packed)
            stats, log_z = self._expected(structure)
            if self.allowed is None:
                gold = structure.score(self.y)
                value = float(np.sum(log_z) - np.sum(gold))
                if g is not None:
                    g[...] = self._gradient(stats) - self.empirical
            else:
                cstats, clog_z = self._expected(structure.constrain(self.allowed))
                value = float(np.sum(log_z) - np.sum(clog_z))
                if g is not None:
                    g[...] = self._gradient(tuple(None if a is None else a - b
                                                  for a, b in zip(stats, cstats)))
        if not np.isfinite(value):
            bad = int(np.flatnonzero(~np.isfinite(log_z - (gold if self.allowed is None else clog_z)))[0])
            raise ValueError(f"training {self._unit} {bad} has zero probability under the model (its "
                             f"labels use a forbidden {self._pair} or label); check `{self._hint}`")
        return self._penalised(w, value, g)

    def _penalised(self, w, value, g):
        return penalise(w, value, g, self.c2, self.c1, self.mask)


class ChainCLL(_CLL):
    """Negative CLL of a packed training batch under a :class:`~structlearn.crf._potentials.ChainFeatureModel`.

    Parameters as :class:`_CLL`; ``packed`` is a :class:`~structlearn.crf.features.Packed` batch of
    N tokens in B sequences.

    Notes
    -----
    One call costs one forward–backward over the batch, O(N·K²), plus O(nnz · labels per attribute) for
    potentials and gradient; both run in parallel over sequences / attributes.
    """

    def __init__(self, model, packed, y, c2=0.0, allowed=None, c1=0.0):
        self.packed = packed
        self._init_block()
        super().__init__(model, packed, y, c2=c2, allowed=allowed, c1=c1)

    def _init_block(self):
        off = self.packed.offsets
        nz = np.flatnonzero(self.packed.lengths > 0)
        self._first = off[nz]
        self._last = off[nz + 1] - 1

    def _fused(self, w):
        if self.allowed is not None or not hasattr(self.model, "expected_counts") or \
                getattr(self.model, "n_trans_attr", 0):
            return None
        return self.model.expected_counts(w, self.packed, self.y)

    def _expected(self, chain):
        if getattr(self.model, "n_trans_attr", 0):  # transition attributes need the per-step pairs
            m = chain.marginals(edge="full")
            um = m.unary
            return (um, m.edge.sum(axis=0), um[self._first].sum(axis=0), um[self._last].sum(axis=0),
                    m.edge), chain.log_partition()
        m = chain.marginals(edge="total")
        um = m.unary
        return (um, m.edge, um[self._first].sum(axis=0), um[self._last].sum(axis=0)), \
            chain.log_partition()

    def _gradient(self, stats):
        return self.model.gradient(*stats, self.packed) if len(stats) == 4 else \
            self.model.gradient(*stats[:4], self.packed, stats[4])


class TreeCLL(_CLL):
    """Negative CLL of a batch of trees under a :class:`~structlearn.crf._tree_potentials.TreeFeatureModel`.

    Parameters as :class:`_CLL`; ``packed`` is a :class:`~structlearn.crf._tree_potentials.TreeBatch`
    (N nodes in B trees). Partial labels constrain nodes.

    Notes
    -----
    One call costs one upward–downward pass over the trees (belief propagation, Pearl 1988
    §"Tree-structured CRFs"), O(N·K²), plus O(nnz · labels per attribute) for potentials and gradient;
    with edge-attribute features also O(N·K²) memory for the per-edge marginals.
    """

    _unit = "tree"
    _pair = "edge (child, parent label pair)"
    _hint = "forbidden_edges"

    def _expected(self, tree):
        return self.model.expectations(tree, self.packed)

    def _gradient(self, stats):
        return self.model.gradient(stats, self.packed)


class HigherOrderCLL(ChainCLL):
    """Negative CLL of a packed batch under a
    :class:`~structlearn.crf._higher_order_potentials.HigherOrderFeatureModel`: the objective of
    :class:`ChainCLL` with label-pattern features.

    One call costs one forward–backward of the chosen algorithm (dense or sparse) over the batch.
    """

    def _expected(self, chain):
        log_z, lab, tok, tot = chain.pattern_marginals()
        return (tok, tot, lab[self._first].sum(axis=0), lab[self._last].sum(axis=0)), log_z


class SemiMarkovCLL(_CLL):
    """Negative CLL of a :class:`~structlearn.crf._semi_markov_potentials.SegmentBatch` under a
    :class:`~structlearn.crf._semi_markov_potentials.SemiMarkovFeatureModel`.

    Parameters as :class:`_CLL`, with ``y`` the batch's gold segments (``batch.segments``, (S, 3)
    int64). One call costs one semi-Markov forward–backward over the batch, O(N·(D·K + K²)) (O(N·D·K)
    more with segment features), in chunks of sequences.
    """

    _unit = "sequence"
    _pair = "segment, duration or transition"
    _hint = "max_segment_length"

    def _expected(self, structure):
        return structure.expectations()

    def _block_labels(self, b0, b1):
        so = self.packed.seg_offsets
        return self.y[so[b0]:so[b1]]

    def __call__(self, w, g=None):
        """Return L(w); write ∇L(w) into ``g`` if given. Fully labelled batches use the fused kernel
        (:meth:`~structlearn.crf._semi_markov_potentials.SemiMarkovFeatureModel.expectations`); the gold score is
        ⟨w, f(x, y)⟩."""
        if self.allowed is not None:
            return super().__call__(w, g)
        self.n_evals += 1
        stats, log_z = self.model.expectations(w, self.packed)
        if not np.all(np.isfinite(log_z)):
            bad = int(np.flatnonzero(~np.isfinite(log_z))[0])
            raise ValueError(f"training {self._unit} {bad} has zero probability under the model (no "
                             f"segmentation is possible); check `{self._hint}`")
        value = float(np.sum(log_z) - w @ self.empirical)
        if g is not None:
            g[...] = self._gradient(stats) - self.empirical
        return self._penalised(w, value, g)

    def _gradient(self, stats):
        return self.model.gradient(stats, self.packed)


class SegmentCLL(_CLL):
    """Negative CLL (+ c2‖w‖², + c1‖w‖₁ as a subgradient) of a
    :class:`~structlearn.crf._segment_patterns.SegmentPatternModel`; the objective of :class:`ChainCLL`
    with segments."""

    def __init__(self, model, packed, y, c2=0.0, c1=0.0):
        super().__init__(model, packed, y, c2=c2, c1=c1)
        self._init_block()

    def _init_block(self):
        self.gold = self.model.gold(self.y, self.packed.offsets)

    def __call__(self, w, g=None):
        self.n_evals += 1
        ch = self.model.structure(w, self.packed)
        log_z, expected = ch.expected(self.packed)
        gold = ch.sm.score(self.gold)
        value = float(np.sum(log_z) - np.sum(gold))
        if not np.isfinite(value):
            raise ValueError("a training sequence has zero probability under the model")
        if g is not None:
            g[...] = expected - self.empirical
        return self._penalised(w, value, g)
