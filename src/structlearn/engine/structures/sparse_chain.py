"""A linear chain with sparse (CSR) transitions, e.g. the flattened chain of a hierarchical HMM."""
import numpy as np
from numba import get_num_threads

from ..kernels import chain_sparse as _ks
from ..semirings import LOG
from ._base import Marginals
from .chain import _segmented_cumsum

__all__ = ["SparseChain"]


class SparseChain:
    """A first-order chain whose transitions are a sparse (CSR) pattern: the subset of
    :class:`~structlearn.engine.structures.LinearChain`'s inference on the kernels of
    :mod:`structlearn.engine.kernels.chain_sparse`, time O(N·(E + S)) for E stored transitions among S labels.

    Parameters
    ----------
    unary : array-like of float64, shape (N, S)
        Log-potentials of the packed batch.
    csr : (indptr (S + 1,), indices (E,), log_values (E,))
        The stored transitions "from, to" with their log-potentials.
    start, end : ndarray of float64, shape (S,)
        Log-potentials of the first / last label of every sequence.
    lengths : ndarray of int64, shape (B,)

    Notes
    -----
    ``marginals(edge)`` returns edge marginals on the E stored pairs: (N, E) for ``"full"``, (E,)
    summed over the batch for ``"total"``.
    """

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
                                                          LOG, get_num_threads())
        return self._cache["fwd"]

    def log_partition(self):
        return self._fwd()[2].copy()

    def forward(self):
        ahat, inc, _ = self._fwd()
        return ahat + _segmented_cumsum(inc, self.offsets)[:, None]

    def marginals(self, edge="full"):
        """Token marginals (N, K) and edge marginals at the stored transitions: ``edge`` "full"
        (N, E), row t = P(y_t, y_t+1) (rows at sequence ends 0), "sum" (B, E) per sequence, "total"
        (E,) over the batch, or "none"; as :meth:`LinearChain.marginals`. Raises ValueError for
        another ``edge``."""
        modes = {"none": 0, "full": 1, "sum": 2, "total": 3}
        if edge not in modes:
            raise ValueError(f"`edge` must be one of {sorted(modes)}; got {edge!r}")
        lz, um, em = _ks.sparse_chain_marginals(*self._args, self.start, self.end, self.offsets,
                                                modes[edge], get_num_threads())
        return Marginals(um, em[0] if edge == "total" else (None if edge == "none" else em))

    def _viterbi(self):
        if "vit" not in self._cache:
            self._cache["vit"] = _ks.sparse_chain_viterbi(*self._args, self.start, self.end, self.offsets,
                                                          get_num_threads())
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
