"""The tag path's kernels compiled ahead of time, by the package's own build, into an extension module.

``structlearn tag`` (and :class:`structlearn.io.chain_tagger.ChainTagger`) needs two kernels: the state
potentials of a packed batch and Viterbi decoding. Through Numba's JIT they cost a new process 0.3-0.6 s
to import Numba, about 0.7 s to initialise its CPU target and load the cached machine code, and 10-50 s
with an empty cache. :func:`build` compiles the *same* kernel code (:func:`structlearn.engine.kernels.features.
add_item_potentials` per item, :func:`structlearn.engine.kernels.chain.viterbi_seq` per sequence, through
``_viterbi_block``) with ``numba.pycc`` into ``structlearn/engine/kernels/_tag_aot*.so``, which imports neither
Numba nor LLVM at run time (NumPy only) and loads in under a millisecond. ``setup.py`` calls it when the
package is built or installed (``pip install -e .`` included); a failed build leaves the module out and
the tag path uses the JIT kernels.

The compiled module carries the digest of the sources it was compiled from (:data:`SOURCES`);
:func:`load` refuses it when the installed sources differ (an editable checkout whose kernels changed
since the last install), so it can never decode with stale code.

Both kernels run serially: a tag process decodes a few hundred sentences, far below the size where the
JIT kernels start threads. Sequence by sequence, item by item, they execute the JIT kernels' code with
the same floating-point operations in the same order, so the labels are those of ``LinearChainCRF.
predict``, bit for bit (tested).
"""
import os
import zlib

__all__ = ["SOURCES", "source_digest", "load", "build"]

#: the extension module's name inside :mod:`structlearn.engine.kernels`
MODULE_NAME = "_tag_aot"

#: the source files (relative to the package root) whose code the compiled module contains; :func:`build`
#: checks that compiling imported no other module of structlearn
SOURCES = ("engine/kernels/aot.py", "engine/kernels/_common.py", "engine/kernels/chain.py",
           "engine/kernels/chain_scaled.py", "engine/kernels/chain_steps.py", "engine/kernels/features.py",
           "engine/semirings.py")

#: modules that importing the kernels loads but whose code no kernel contains (thread settings, Numba's
#: cache locator, the compile notice)
_NO_KERNEL_CODE = ("_threading.py", "_kernel_cache.py", "_compile_notice.py")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def source_digest():
    """A 63-bit digest (int: CRC-32 and Adler-32 of the :data:`SOURCES` files as installed; OSError when one
    is missing). It detects changed sources, not tampering; zlib is loaded anyway (model files are zip
    archives), hashlib's OpenSSL would cost 5 ms."""
    crc, adler = 0, 1
    for rel in SOURCES:
        with open(os.path.join(_ROOT, rel), "rb") as fh:
            data = rel.encode() + b"\0" + fh.read() + b"\0"
        crc, adler = zlib.crc32(data, crc), zlib.adler32(data, adler)
    return ((crc << 31) ^ adler) & (2 ** 63 - 1)


def load():
    """The compiled module (functions ``state_potentials`` and ``viterbi``), or None when it was not built
    or was built from other sources than the installed ones."""
    try:
        from . import _tag_aot as module
    except Exception:  # not built; or built against a NumPy whose ABI this one lacks
        return None
    try:
        if module.source_digest() != source_digest():
            return None
    except (AttributeError, OSError):
        return None
    return module


def build(output_dir, output_file=None):
    """Compile the tag kernels into an extension module in ``output_dir`` (build time; needs Numba, NumPy
    and a C compiler).

    Parameters
    ----------
    output_dir : str
        Where the module is written (``structlearn/engine/kernels`` of the build or of an editable checkout).
    output_file : str, optional
        The file name (default: ``_tag_aot`` with this interpreter's extension suffix).

    Returns
    -------
    str
        The path of the module written.

    Raises
    ------
    RuntimeError
        Compiling imported a module of structlearn that :data:`SOURCES` does not list (the digest
        would not cover its code).
    """
    import sys

    import numpy as np
    from numba.pycc import CC

    from . import chain
    from . import features

    digest = source_digest()
    used = {os.path.relpath(m.__file__, _ROOT).replace(os.sep, "/") for name, m in list(sys.modules.items())
            if name.startswith("structlearn.") and getattr(m, "__file__", None)}
    extra = sorted(p for p in used if not p.endswith("__init__.py") and p not in _NO_KERNEL_CODE
                   and p not in SOURCES)
    if extra:
        raise RuntimeError(f"the tag kernels use {extra}, which structlearn.engine.kernels.aot.SOURCES does not list")

    add_item_potentials = features.add_item_potentials
    viterbi_block = chain._viterbi_block

    def state_potentials(w, item_ptr, item_attr, item_val, attr_ptr, feat_label, K):
        # structlearn.engine.kernels.features.state_potentials, one item after another
        N = item_ptr.shape[0] - 1
        out = np.zeros((N, K))
        for n in range(N):
            add_item_potentials(w, 1.0, n, item_ptr, item_attr, item_val, attr_ptr, feat_label, out[n])
        return out

    def viterbi(unary, trans, start, end, offsets, labels, best):
        # structlearn.engine.kernels.chain.chain_viterbi, one sequence after another; labels (N,) must hold -1
        bp = np.empty(unary.shape, dtype=np.int32)
        viterbi_block(unary, trans, start, end, offsets, 0, offsets.shape[0] - 1, bp, labels, best)

    def _digest():
        return digest

    cc = CC(MODULE_NAME)
    cc.output_dir = output_dir
    if output_file:
        cc.output_file = output_file
    cc.verbose = False
    cc.export("state_potentials", "f8[:, ::1](f8[::1], i8[::1], i8[::1], f8[::1], i8[::1], i8[::1], i8)")(
        state_potentials)
    cc.export("viterbi", "void(f8[:, ::1], f8[:, :, ::1], f8[::1], f8[::1], i8[::1], i8[::1], f8[::1])")(viterbi)
    cc.export("source_digest", "i8()")(_digest)
    cc.compile()
    return os.path.join(output_dir, cc.output_file)
