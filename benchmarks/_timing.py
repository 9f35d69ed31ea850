"""The timing helper the benchmark scripts share (import it after putting this folder on ``sys.path``,
which each script does, so it works both when run as a script and when loaded by file path)."""
import time


def best_of(fn, repeat=3):
    """Best wall time of ``repeat`` calls of ``fn``.

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    repeat : int, default 3
        How many times to call it.

    Returns
    -------
    seconds : float
        The shortest wall time (``time.perf_counter``) of one call; ``inf`` if ``repeat < 1``.
    out : object
        What the last call returned (None if ``repeat < 1``).
    """
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
