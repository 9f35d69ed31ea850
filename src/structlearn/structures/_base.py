"""Pieces shared by the exact structures (chain, semi-Markov, tree)."""
from collections import namedtuple

import numpy as np
from sklearn.utils import check_random_state

from ..utils.validation import check_allowed_mask, check_lengths

#: Unary and pairwise marginals. ``unary``: (N, K) probabilities P(y_n = k). ``edge``: (N, K, K) where
#: row n is the pairwise marginal of token/node n with its successor (chain: n+1; tree: its parent);
#: rows without such a partner are 0. For a chain, ``edge_marginals="sum"`` gives (B, K, K) sums over
#: each sequence instead.
Marginals = namedtuple("Marginals", ["unary", "edge"])

#: The k best labelings, best first. ``labels``: (k, N) int64 — row r holds the r-th best labeling of
#: every sequence of the batch (-1 for a sequence with fewer than r + 1 feasible labelings); ``scores``:
#: (B, k) float64 log-scores (-inf padding).
KBest = namedtuple("KBest", ["labels", "scores"])


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
        bad = np.flatnonzero(log_z == -np.inf)
        if bad.size:
            b = int(bad[0])
            raise ValueError(
                f"cannot compute {what}: sequence {b} (rows {self.offsets[b]}:{self.offsets[b + 1]}) has "
                f"no labeling with non-zero potential (log_partition is -inf); "
                f"{bad.size} infeasible sequence(s) in the batch")

    def _masked_unary(self, unary, allowed):
        mask = check_allowed_mask(allowed, unary.shape)
        out = unary.copy()
        out[~mask] = -np.inf
        return out

    @staticmethod
    def _uniforms(random_state, shape):
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
