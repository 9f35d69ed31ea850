"""Pieces shared by the exact structures (chain, semi-Markov, tree)."""
from collections import namedtuple

import numpy as np

from ...utils.validation import check_allowed_mask, check_lengths, check_log_potentials

#: Unary and pairwise marginals. ``unary``: (N, K) probabilities P(y_n = k). ``edge``: (N, K, K) where
#: row n is the pairwise marginal of token/node n with its successor (chain: n+1; tree: its parent);
#: rows without such a partner are 0. For a chain, ``edge_marginals="sum"`` gives (B, K, K) sums over
#: each sequence instead.
Marginals = namedtuple("Marginals", ["unary", "edge"])

#: The k best labelings, best first. ``labels``: (k, N) int64 — row r holds the r-th best labeling of
#: every sequence of the batch (-1 for a sequence with fewer than r + 1 feasible labelings); ``scores``:
#: (B, k) float64 log-scores (-inf padding).
KBest = namedtuple("KBest", ["labels", "scores"])



def check_pairwise(potentials, name, N, K):
    """Validated pairwise log-potentials ``name``: shared (K, K) or per row (N, K, K). Returns them as
    (1, K, K) or (N, K, K) float64 and whether they were shared; ``ValueError`` naming the argument."""
    potentials = check_log_potentials(potentials, name, ndim=(2, 3))
    shared = potentials.ndim == 2
    if potentials.shape[-2:] != (K, K) or not shared and potentials.shape[0] != N:
        raise ValueError(f"`{name}` must have shape (K, K) = ({K}, {K}) or (N, K, K) = "
                         f"({N}, {K}, {K}); got {potentials.shape}")
    return (potentials[None] if shared else potentials), shared

class StructureBase:
    """Common state of a packed ragged batch: ``lengths`` (B,), ``offsets`` (B + 1,), ``n_labels`` K."""

    def _init_batch(self, n_rows, n_labels, lengths):
        self.lengths, self.offsets = check_lengths(lengths, n_rows, rows_name="`unary`")
        self.n_labels = int(n_labels)
        self.n_rows = int(n_rows)

    @property
    def batch_size(self):
        """Number of sequences B."""
        return self.lengths.shape[0]

    def _raise_if_infeasible(self, log_z, what):
        """ValueError naming the first sequence whose score ``log_z`` (log Z, or the best score) is +inf
        or NaN (finite potentials whose sums overflow float64), else the first that is -inf (no
        labeling)."""
        over = np.flatnonzero(~(log_z < np.inf))
        if over.size:
            self._raise_overflow(int(over[0]), log_z[over[0]], what)
        bad = np.flatnonzero(log_z == -np.inf)
        if bad.size:
            b = int(bad[0])
            raise ValueError(
                f"cannot compute {what}: sequence {b} (rows {self.offsets[b]}:{self.offsets[b + 1]}) has "
                f"no labeling with non-zero potential (log_partition is -inf); "
                f"{bad.size} infeasible sequence(s) in the batch")

    def _raise_overflow(self, b, value, what):
        raise ValueError(f"cannot compute {what}: sequence {b} (rows {self.offsets[b]}:{self.offsets[b + 1]}): "
                         f"its scores overflow float64 (got {value}): the potentials are too large")

    def _masked_unary(self, unary, allowed):
        mask = check_allowed_mask(allowed, unary.shape)
        out = unary.copy()
        out[~mask] = -np.inf
        return out

    @staticmethod
    def _uniforms(random_state, shape):
        from sklearn.utils import check_random_state  # lazily: tagging never imports scikit-learn

        rng = check_random_state(random_state)
        return rng.random_sample(shape)

    @staticmethod
    def _check_k(k):
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"`k` must be a positive integer; got {k!r}")
        return int(k)

    @staticmethod
    def _check_n(n):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise ValueError(f"`n` must be a positive integer number of samples; got {n!r}")
        return int(n)


class LabelingStructure(StructureBase):
    """Decoding, sampling and constraints shared by the exact structures with one label per row
    (:class:`~structlearn.engine.structures.LinearChain`, :class:`~structlearn.engine.structures.Tree`).

    Subclasses provide ``unary`` (N, K), a ``_cache`` dict, ``_viterbi()`` -> (best (B,), labels (N,)),
    ``_kbest(k)`` -> (scores (B, k), labels (k, N)) and ``_sampler()`` -> (log_z (B,), draw) where
    ``draw(u)`` maps uniforms (n, N) to n exact samples (n, N).
    """

    def max(self):
        """Score of the best labeling of every sequence (tree), shape (B,) (-inf if infeasible)."""
        return self._viterbi()[0].copy()

    def argmax(self):
        """Best labeling (max-product), int64 array of shape (N,).

        Raises
        ------
        ValueError
            If a sequence (tree) is infeasible.
        """
        best, labels = self._viterbi()
        self._raise_if_infeasible(best, "argmax")
        return labels.copy()

    def kbest(self, k):
        """The k best labelings, best first (exact k-best max-product).

        Returns
        -------
        KBest
            ``labels`` (k, N) int64 (-1 where a sequence (tree) has fewer feasible labelings),
            ``scores`` (B, k).

        Raises
        ------
        ValueError
            If a sequence (tree) is infeasible or ``k`` is not a positive integer.
        """
        k = self._check_k(k)
        self._raise_if_infeasible(self.max(), "kbest")
        scores, labels = self._kbest(k)
        return KBest(labels, scores)

    def sample(self, n, random_state=None):
        """Exact samples from p(y).

        Parameters
        ----------
        n : int
            Number of samples.
        random_state : None, int or numpy.random.RandomState

        Returns
        -------
        labels : ndarray of int64, shape (n, N)

        Raises
        ------
        ValueError
            If a sequence (tree) is infeasible.
        """
        n = self._check_n(n)
        log_z, draw = self._sampler()
        self._raise_if_infeasible(log_z, "sample")
        return draw(self._uniforms(random_state, (n, self.n_rows)))

    def constrain(self, allowed):
        """A new structure restricted to labelings allowed by the boolean mask ``allowed`` (N, K).

        Forced decoding sets one allowed label per row; partial labels allow several. The
        partial-label loss is ``log_partition() - constrain(allowed).log_partition()``.
        """
        cls = type(self)
        out = cls.__new__(cls)
        out.__dict__.update(self.__dict__)
        out.unary = self._masked_unary(self.unary, allowed)
        out._cache = {}
        return out
