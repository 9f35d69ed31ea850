"""The last guard of every posterior an estimator returns: each row sums to one, or the call raises.

An impossible sequence (log-likelihood -inf) has no posterior; a score that overflowed (NaN or +inf) gives
none either; and rows that do not sum to one within :data:`SUM_TOLERANCE` are a numerical failure. Each
raises a ``ValueError`` naming the sequence and its rows, as the decoders do, instead of returning
zeros or garbage.
"""
import numpy as np

from ..utils.validation import first_row

__all__ = ["SUM_TOLERANCE", "check_posteriors"]

#: Largest |row sum - 1| a returned posterior may have.
SUM_TOLERANCE = 1e-9


def _which(noun, offsets, b, first):
    """'sequence 3 (rows 7:12)': the batch index and the rows of sequence b of ``offsets``."""
    rows = f"rows {int(offsets[b])}:{int(offsets[b + 1])}"
    return f"{noun} {first + b} ({rows if first == 0 else f'{rows} of the part starting at {noun} {first}'})"


def check_posteriors(posteriors, offsets, log_z=None, what="the posteriors", noun="sequence", first=0):
    """``posteriors`` (N, ...) unchanged, or a ValueError naming the first bad sequence.

    Parameters
    ----------
    posteriors : ndarray, shape (N, ...)
        Row n (all axes but the first) is a distribution over the labels of row n.
    offsets : ndarray of int, shape (B + 1,)
        Sequence b owns rows ``offsets[b]:offsets[b + 1]``.
    log_z : ndarray of float, shape (B,), optional
        Log-likelihood (log partition) of every sequence; -inf (impossible) and NaN / +inf (overflow)
        raise.
    what, noun : str
        What was asked for and what a sequence is called, for the message.
    first : int, default 0
        The batch index of the first sequence (when ``offsets`` cover a part of the batch).
    """
    offsets = np.asarray(offsets)
    if log_z is not None:
        log_z = np.asarray(log_z, dtype=np.float64)
        for b in np.flatnonzero(~np.isfinite(log_z)):
            b = int(b)
            if log_z[b] == -np.inf:
                raise ValueError(f"cannot compute {what}: {_which(noun, offsets, b, first)} has zero likelihood "
                                 f"under the model (log-likelihood -inf; expected finite): no state path "
                                 f"explains it (the decoders raise for it too)")
            raise ValueError(f"cannot compute {what}: {_which(noun, offsets, b, first)} has log-likelihood "
                             f"{float(log_z[b])} (expected finite): its scores overflow float64")
    post = np.asarray(posteriors)
    if post.shape[0] == 0:
        return posteriors
    sums = post.reshape(post.shape[0], -1).sum(axis=1)
    bad = np.flatnonzero(~(np.abs(sums - 1.0) <= SUM_TOLERANCE))
    if bad.size:
        n, b = first_row(offsets, bad)
        raise ValueError(f"cannot compute {what}: {_which(noun, offsets, b, first)} lost its numerical precision: "
                         f"row {n} sums to {float(sums[n])!r} (expected 1 within {SUM_TOLERANCE:g}; {bad.size} "
                         f"such row(s)); its inputs are too extreme for float64")
    return posteriors
