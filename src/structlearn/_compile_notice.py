"""One notice per process when Numba compiles one of structlearn's kernels instead of loading it from its cache.

The package's build compiles every kernel signature the estimators use into Numba's on-disk cache
(``structlearn compile``, run by ``setup.py``; see ``docs/performance.md``), so that a first call in a new
environment loads machine code instead of compiling for tens of seconds. What was not compiled then — a new
input dtype, a user's own duration or emission family, a package moved to a machine with another CPU or
another Numba — still compiles on demand. :func:`install` registers a listener for Numba's
``"numba:compile"`` event, which Numba broadcasts only on a cache miss (a load from the cache sends none),
and the first compilation of a structlearn kernel in a process issues one :class:`CompilationWarning`
naming the kernel, so that a long first call never looks like a hang. Later compilations in the same
process are counted (:func:`compilations`) but say nothing.

Silence it with ``warnings.filterwarnings("ignore", category=structlearn.CompilationWarning)``.
"""
import threading
import warnings

__all__ = ["CompilationWarning", "install", "compilations", "MESSAGE"]

#: the notice's text; ``{kernel}`` is the first kernel compiled
MESSAGE = ("structlearn: Numba is compiling kernels for this call (first: {kernel}), which the install did not "
           "compile (a new dtype, your own duration or emission family, or another CPU or Numba version than "
           "the install's): seconds to a minute, once; cached for later runs. `structlearn compile` compiles "
           "every estimator's kernels into the installed package.")


class CompilationWarning(UserWarning):
    """Numba is compiling a structlearn kernel now (a cache miss): the call waits for it, once."""


_lock = threading.Lock()
_compiled = []          # "module.function" of each structlearn kernel compiled in this process, in order
_installed = False


def compilations():
    """The structlearn kernels compiled (not loaded from the cache) in this process so far, in order:
    a list of ``"module.qualname"`` strings (nested compilations of callees included)."""
    with _lock:
        return list(_compiled)


def _kernel_name(event):
    disp = (event.data or {}).get("dispatcher")
    func = getattr(disp, "py_func", None)
    module = getattr(func, "__module__", "") or ""
    if not module.startswith("structlearn."):
        return None
    return f"{module}.{getattr(func, '__qualname__', getattr(func, '__name__', '?'))}"


_INTERNAL = ("numba", "llvmlite", "structlearn", "importlib", "contextlib", "lbfgs")


def _caller_level():
    """The ``stacklevel`` of the first frame outside Numba and structlearn (the user's call), so that the
    warning names the line that triggered the compilation."""
    import sys

    frame, level = sys._getframe(2), 2   # frames above on_start, the caller of warnings.warn (level 1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "") or ""
        if module.split(".")[0] not in _INTERNAL:
            return level
        frame, level = frame.f_back, level + 1
    return 2


def _make_listener():
    from numba.core import event

    class _Notice(event.Listener):
        def on_start(self, ev):
            name = _kernel_name(ev)
            if name is None:
                return
            with _lock:
                first = not _compiled
                _compiled.append(name)
            if first:
                message = MESSAGE.format(kernel=name.removeprefix("structlearn."))
                try:
                    warnings.warn(message, CompilationWarning, stacklevel=_caller_level())
                except CompilationWarning:  # warnings turned into errors (-W error): say it, do not fail
                    import sys           # the compilation, which would leave the kernel unusable

                    print(f"CompilationWarning: {message}", file=sys.stderr, flush=True)

        def on_end(self, ev):
            pass

    return _Notice()


def install():
    """Register the listener with Numba's event system (once per process; Numba must be importable)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    from numba.core import event

    event.register("numba:compile", _make_listener())


def _reset():
    """Forget the compilations seen so far, so that the next one warns again (tests: one notice per family)."""
    with _lock:
        _compiled.clear()
