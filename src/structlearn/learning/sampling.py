"""Several sampled sequences in one call: the ``n_sequences`` argument of every HMM and HSMM ``sample``."""
import numpy as np

__all__ = ["sample_sequences"]


def sample_sequences(draw, n_sequences, n_row_outputs):
    """Draw one sequence (``n_sequences=None``) or ``n_sequences`` of them, packed as ``(X, lengths)``.

    Parameters
    ----------
    draw : callable
        ``draw()`` → tuple: one sequence, its first ``n_row_outputs`` items arrays with one entry per row
        (observations, states, …), the others per-sequence objects (segments, …). Successive calls
        continue the same random stream, so sequence 0 is the draw of ``n_sequences=None``.
    n_sequences : None or int >= 1
        None: ``draw()`` as it is (the single-sequence return of ``sample``). An int: that many
        sequences, their row items concatenated along axis 0 (sequence b at rows
        ``offsets[b]:offsets[b + 1]``), every other item a list with one entry per sequence, and
        ``lengths`` (n_sequences,) int64 appended as the last item.
    n_row_outputs : int
        How many leading items of ``draw()`` have one entry per row.

    Returns
    -------
    tuple

    Raises
    ------
    ValueError
        ``n_sequences`` neither None nor a positive integer.
    """
    if n_sequences is None:
        return draw()
    if isinstance(n_sequences, bool) or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1:
        raise ValueError(f"`n_sequences` must be None (one sequence, returned without `lengths`) or a "
                         f"positive integer; got {n_sequences!r}")
    draws = [draw() for _ in range(int(n_sequences))]
    lengths = np.array([len(d[0]) for d in draws], dtype=np.int64)
    out = [np.concatenate([d[i] for d in draws], axis=0) for i in range(n_row_outputs)]
    out += [[d[i] for d in draws] for i in range(n_row_outputs, len(draws[0]))]
    return (*out, lengths)
