"""Whether a kernel's compiled code is already in Numba's on-disk cache (``cache=True`` kernels), so that a
command can tell the user before a first run spends a minute or two compiling."""
import os

__all__ = ["is_cached"]


def is_cached(kernel):
    """Whether Numba's cache (``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the kernel's source) holds an
    index for ``kernel``, a ``numba.njit(cache=True)`` dispatcher.

    Returns
    -------
    bool or None
        False before the kernel's first compilation in this environment; True once one was saved (the index
        of a changed source is rebuilt on the next call, so True can still mean a recompilation); None when
        the dispatcher has no disk cache or Numba's cache layout is not the one this reads (a private
        attribute of ``numba.core.caching``). Cost: one ``stat``.
    """
    try:
        path = kernel._cache._cache_file._index_path
    except AttributeError:
        return None
    return os.path.exists(path)
