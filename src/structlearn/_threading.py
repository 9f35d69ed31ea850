"""Numba's threading layer, chosen when structlearn is imported, so kernels are fork- and thread-safe.

Numba's default layer on Linux is GNU OpenMP when TBB cannot be loaded, and GNU OpenMP is not fork-safe:
once a parallel kernel has run, a child made by ``fork()`` (a default ``multiprocessing.Pool``, joblib's
``multiprocessing`` backend, ``concurrent.futures.ProcessPoolExecutor``) aborts with "fork() called from
a process already using GNU OpenMP, this is unsafe" and the pool waits for it forever. TBB is both fork-
and thread-safe (Numba's "safe" layer), but the ``tbb`` wheel puts ``libtbb.so.12`` in the environment's
``lib/``, where the dynamic loader does not look, so Numba reports it missing.

:func:`configure` (run when Numba is imported in a process that imported structlearn: :func:`install`,
called by ``import structlearn``, runs it at once when Numba is loaded already, and otherwise when the
import of Numba finishes, so that ``import structlearn`` itself stays free of Numba's 0.3-0.6 s import and
``structlearn tag`` with the ahead-of-time compiled kernels never loads it) therefore

1. keeps a layer the user chose (``NUMBA_THREADING_LAYER`` in the environment, or
   ``numba.config.THREADING_LAYER`` set to anything but ``"default"`` before importing structlearn),
   only loading TBB for the layers that may use it (so a child process that inherits the variable —
   joblib's loky workers, dask workers, spawn — finds TBB as its parent did);
2. otherwise loads ``libtbb.so.12`` from ``sys.prefix/lib`` (or another prefix) by its full path, so the
   later import of Numba's TBB pool finds it already loaded, and selects ``"tbb"``;
3. without TBB selects ``"workqueue"``: fork-safe (its pool is recreated in the child), but not safe
   for parallel kernels launched from several threads at once (Numba aborts); the estimators' ``n_jobs``
   (processes) are the safe form of parallelism then.

It costs a ``dlopen`` (about 2 ms) and the import of Numba (which every kernel needs anyway); the layer is
set in ``numba.config`` of this process, never in the environment, so child processes that do not import
structlearn keep Numba's own default. Threads: ``NUMBA_NUM_THREADS`` (default:
all cores) or ``numba.set_num_threads``; processes: ``n_jobs`` of the estimators (joblib).
"""
import ctypes
import os
import sys

__all__ = ["configure", "install", "CHOSEN"]

CHOSEN = None  # the layer configure() selected ("tbb" / "workqueue"), or None when the user chose one


def _load_tbb():
    """Load ``libtbb.so.12`` from the environment's ``lib/`` (True when it is loaded)."""
    if not sys.platform.startswith("linux"):
        return False
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(sys.executable)))):
        path = os.path.join(prefix, "lib", "libtbb.so.12")
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                return False
    try:  # on the loader's path already (a system TBB)
        ctypes.CDLL("libtbb.so.12", mode=ctypes.RTLD_GLOBAL)
        return True
    except OSError:
        return False


def configure():
    """Select Numba's threading layer unless the user chose one; returns the layer selected or None."""
    global CHOSEN
    requested = os.environ.get("NUMBA_THREADING_LAYER", "").strip().lower()
    if requested:
        # the user's choice, or ours inherited by a child process (joblib's loky workers, dask workers,
        # spawn): a layer that may resolve to TBB needs the library loaded in this process too
        if requested in ("tbb", "safe", "threadsafe", "forksafe", "default"):
            _load_tbb()
        return None
    from numba import config  # every kernel needs Numba; its pool starts at the first parallel launch

    if getattr(config, "THREADING_LAYER", "default") != "default":
        return None
    layer = "tbb" if _load_tbb() else "workqueue"
    # set in this process only: an environment variable would reach child processes that import Numba
    # without structlearn (and so without TBB loaded), where Numba then finds no threading layer at all
    config.THREADING_LAYER = layer
    CHOSEN = layer
    return layer


def _after_numba_import():
    """What runs once Numba is imported, before any kernel is decorated: :func:`configure`, the cache
    locator of the engine's kernels (:mod:`structlearn._kernel_cache`) and the compile notice's listener
    (:mod:`structlearn._compile_notice`), the two structlearn modules this imports."""
    configure()
    from . import _compile_notice, _kernel_cache

    _kernel_cache.install()
    _compile_notice.install()


class _AfterNumbaImport:
    """A finder that handles only ``numba``: it finds Numba's own spec with the other finders and wraps
    its loader so that :func:`configure` runs right after ``numba/__init__.py`` has executed (before any
    kernel can be compiled or its thread pool started), then steps out of ``sys.meta_path``. (A plain class: ``importlib.abc`` costs 30 ms to import.)"""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "numba":
            return None
        import importlib.util

        _remove_hook()
        spec = importlib.util.find_spec("numba")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            _after_numba_import()

        spec.loader.exec_module = exec_module  # this spec's own loader instance
        return spec


def _remove_hook():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterNumbaImport)]


def install():
    """Run :func:`configure` now if Numba is imported, else as soon as it is (an import hook)."""
    if "numba" in sys.modules:
        _after_numba_import()
    elif not any(isinstance(f, _AfterNumbaImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterNumbaImport())


#: rows (tokens) per block of a parallel reduction, and the default most blocks (each block has its own
#: buffer, e.g. a CRF's (F,) gradient, so their number is kept small)
REDUCTION_ROWS, REDUCTION_MAX_BLOCKS = 16384, 4


def reduction_blocks(n_rows, max_blocks=REDUCTION_MAX_BLOCKS, rows_per_block=REDUCTION_ROWS):
    """How many blocks a parallel reduction over ``n_rows`` rows (tokens, or the rows of a batch of
    sequences) is cut into: about ``rows_per_block`` rows each, at least 1, at most ``max_blocks``.

    It depends on the data only — never on Numba's thread count, the process or the machine — and the
    kernels add their blocks' partial sums in block order, so a result is bitwise the same for any
    number of threads (threads only decide which thread computes which block)."""
    return int(max(1, min(int(max_blocks), int(n_rows) // int(rows_per_block))))
