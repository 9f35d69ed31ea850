"""The package's build step beyond pyproject.toml: kernels compiled at install, so no first call waits.

1. ``structlearn.engine.kernels._tag_aot`` is compiled by :func:`structlearn.engine.kernels.aot.build` (``numba.pycc``)
   from the same kernel code Numba's JIT runs, so that ``structlearn tag`` never imports Numba.
2. ``structlearn compile`` (:mod:`structlearn.cli.compile`) then runs a tiny fit of every estimator family
   on the package being built (the wheel's copy in ``build/lib``, or the checkout of an editable install),
   so that Numba's on-disk cache of every kernel signature the estimators use lies in the package's
   ``__pycache__`` folders and is installed with it (Numba keys it on the source's content, its own version
   and the CPU). About 2 minutes on 2 cores; ``STRUCTLEARN_SKIP_COMPILE=1`` skips it.

Both are optional: if one fails (no C compiler, a dependency missing from the build environment), the build
warns and goes on, and the kernels compile on demand (saying so once).
"""
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_HERE = os.path.dirname(os.path.abspath(__file__))
_TAG_KERNELS = "structlearn.engine.kernels._tag_aot"


class BuildKernels(build_ext):
    def build_extension(self, ext):
        if ext.name != _TAG_KERNELS:
            return super().build_extension(ext)
        target = self.get_ext_fullpath(ext.name)
        sys.path.insert(0, os.path.join(_HERE, "src"))
        try:
            from structlearn.engine.kernels import aot

            os.makedirs(os.path.dirname(target), exist_ok=True)
            aot.build(os.path.dirname(target), os.path.basename(target))
        except Exception as exc:  # optional: the JIT kernels serve the tag path instead
            print(f"warning: structlearn: the tag kernels were not compiled ahead of time ({exc!r}); "
                  "`structlearn tag` will use Numba's JIT", file=sys.stderr)
            self.extensions = [e for e in self.extensions if e.name != _TAG_KERNELS]
        finally:
            sys.path.remove(os.path.join(_HERE, "src"))

    def run(self):
        super().run()
        if os.environ.get("STRUCTLEARN_SKIP_COMPILE", "").strip() not in ("", "0"):
            return
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            self.get_ext_fullpath(_TAG_KERNELS)))))
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        env.pop("NUMBA_CACHE_DIR", None)  # the cache goes into the package being built
        paths = [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        print("structlearn: compiling every estimator's Numba kernels into the package (structlearn compile)",
              file=sys.stderr, flush=True)
        try:
            rc = subprocess.run([sys.executable, "-m", "structlearn.cli.compile"], env=env,
                                cwd=package_root).returncode
        except OSError as exc:
            rc = repr(exc)
        if rc != 0:
            print(f"warning: structlearn: the kernels were not compiled at install ({rc}); they compile on first "
                  "use instead (run `structlearn compile` after installing)", file=sys.stderr)


setup(ext_modules=[Extension(_TAG_KERNELS, sources=[])], cmdclass={"build_ext": BuildKernels})
