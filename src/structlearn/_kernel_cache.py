"""Where Numba keeps structlearn's compiled kernels, and when they are stale: one digest of the whole engine.

Numba's own cache locators key a kernel's cached machine code on its *own* source file. A kernel inlines
helpers from other files (``engine/semirings.py``, ``engine/kernels/_common.py``, the ``chain_steps`` overloads, …), so
after a change of a helper its callers kept the old code until their cache was cleared by hand — and a
cache that ships inside the package (``structlearn compile``, run by the build) must never carry such stale
code. :class:`EngineCacheLocator` therefore stamps every kernel's cache with :func:`engine_digest`, the
SHA-256 of every source file of the engine (``engine/kernels/*.py`` and ``engine/semirings.py``): any change to any of
them makes every cached kernel stale, and a kernel loaded from the cache was compiled from exactly the
sources installed. The code is kept where Numba keeps it, in the ``__pycache__`` folder beside the kernel's
source (inside the installed package: the build fills it), or under ``NUMBA_CACHE_DIR`` when that is set.
Where neither can be written (a read-only installation without ``NUMBA_CACHE_DIR``), Numba's own locators
take over (its user-wide cache).

:func:`install` registers the locator with Numba (first in ``CacheImpl._locator_classes``); it runs when
Numba is imported in a process that imported structlearn (:mod:`structlearn._threading`'s import hook),
before any kernel module is executed, since a dispatcher chooses its locator when it is decorated.
"""
import hashlib
import os

__all__ = ["engine_digest", "install", "ENGINE_SOURCES"]

_ROOT = os.path.dirname(os.path.abspath(__file__))

#: the engine's sources (relative to the package): every file whose code a kernel may compile in
ENGINE_SOURCES = ("engine/semirings.py", "engine/kernels")

_digest = None


def _engine_files():
    files = []
    for rel in ENGINE_SOURCES:
        path = os.path.join(_ROOT, rel)
        if os.path.isdir(path):
            files.extend(os.path.join(rel, name) for name in sorted(os.listdir(path)) if name.endswith(".py"))
        else:
            files.append(rel)
    return files


def engine_digest():
    """SHA-256 (bytes) of the engine's sources: every ``.py`` file of ``engine/kernels/`` and ``engine/semirings.py``,
    with their relative paths. Computed once per process (about 1 ms)."""
    global _digest
    if _digest is None:
        h = hashlib.sha256()
        for rel in _engine_files():
            with open(os.path.join(_ROOT, rel), "rb") as fh:
                h.update(rel.encode() + b"\0" + fh.read() + b"\0")
        _digest = h.digest()
    return _digest


def _inside_engine(py_file):
    try:
        rel = os.path.relpath(os.path.abspath(py_file), _ROOT)
    except ValueError:  # another drive (Windows)
        return False
    kernels = os.path.join("engine", "kernels") + os.sep
    return rel == os.path.join("engine", "semirings.py") or (rel.startswith(kernels)
                                                             and os.sep not in rel[len(kernels):])


def _make_locator_class():
    from numba.core import caching, config

    class EngineCacheLocator(caching._CacheLocator):
        """Numba cache locator of structlearn's kernels: ``__pycache__`` beside the source (or
        ``NUMBA_CACHE_DIR``), stamped with :func:`engine_digest`."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            if config.CACHE_DIR:
                self._cache_path = os.path.join(config.CACHE_DIR, self.get_suitable_cache_subpath(py_file))
            else:
                self._cache_path = os.path.join(os.path.dirname(py_file), "__pycache__")

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            return engine_digest()

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            if not _inside_engine(py_file):
                return None
            self = cls(py_func, py_file)
            try:
                self.ensure_cache_path()
            except OSError:  # not writable: Numba's own locators (its user-wide cache)
                return None
            return self

    return EngineCacheLocator


_installed = False


def install():
    """Put :class:`EngineCacheLocator` first among Numba's cache locators (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
    impl._locator_classes.insert(0, _make_locator_class())
