"""The package's build step beyond pyproject.toml: the tag path's kernels compiled ahead of time.

``structlearn.kernels._tag_aot`` is compiled by :func:`structlearn.kernels.aot.build` (``numba.pycc``) from
the same kernel code Numba's JIT runs, so that ``structlearn tag`` never imports Numba. It is optional: if
it cannot be compiled (no C compiler, an unsupported platform), the build warns, leaves it out, and the tag
path uses the JIT kernels.
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_HERE = os.path.dirname(os.path.abspath(__file__))
_TAG_KERNELS = "structlearn.kernels._tag_aot"


class BuildTagKernels(build_ext):
    def build_extension(self, ext):
        if ext.name != _TAG_KERNELS:
            return super().build_extension(ext)
        target = self.get_ext_fullpath(ext.name)
        sys.path.insert(0, os.path.join(_HERE, "src"))
        try:
            from structlearn.kernels import aot

            os.makedirs(os.path.dirname(target), exist_ok=True)
            aot.build(os.path.dirname(target), os.path.basename(target))
        except Exception as exc:  # optional: the JIT kernels serve the tag path instead
            print(f"warning: structlearn: the tag kernels were not compiled ahead of time ({exc!r}); "
                  "`structlearn tag` will use Numba's JIT", file=sys.stderr)
            self.extensions = [e for e in self.extensions if e.name != _TAG_KERNELS]
        finally:
            sys.path.remove(os.path.join(_HERE, "src"))


setup(ext_modules=[Extension(_TAG_KERNELS, sources=[])], cmdclass={"build_ext": BuildTagKernels})
