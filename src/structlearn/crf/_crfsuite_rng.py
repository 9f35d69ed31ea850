"""CRFsuite's shuffling, reproduced: the C library's ``rand()`` (glibc's additive-feedback generator, ``TYPE_3``)
and ``dataset_shuffle`` of CRFsuite's ``dataset.c``.

CRFsuite's online trainers (``l2sgd``, ``ap``, ``pa``, ``arow``) visit the training instances in an order
that ``dataset_shuffle`` draws from ``rand()``; CRFsuite never calls ``srand``, so a fresh process draws
from glibc's default seed 1 and every later shuffle continues that one stream. :class:`CRFsuiteShuffle`
replays that stream, so a trainer with ``shuffle="crfsuite"`` visits the instances in CRFsuite's order.

Reference: glibc ``stdlib/random_r.c`` (``__srandom_r`` and ``__random_r`` for ``TYPE_3``: degree 31,
separation 3, 310 discarded outputs); CRFsuite 0.12 ``lib/crf/src/dataset.c``.
"""
import numpy as np

__all__ = ["GlibcRand", "CRFsuiteShuffle"]

_DEG, _SEP, _DISCARD = 31, 3, 310
_MASK32 = 0xFFFFFFFF


class GlibcRand:
    """glibc's ``rand()`` after ``srand(seed)`` (``seed`` 1 is the state of a process that never seeded).

    Parameters
    ----------
    seed : int, default 1
        The ``srand`` seed (0 is read as 1, as glibc does).
    """

    def __init__(self, seed=1):
        seed = int(seed) & _MASK32 or 1
        r = [0] * _DEG
        r[0] = seed
        for i in range(1, _DEG):
            # 16807 * r[i-1] % (2**31 - 1) by Schrage's method, on signed 32-bit words, as glibc computes it
            word = r[i - 1] - (1 << 32) if r[i - 1] & 0x80000000 else r[i - 1]
            hi, lo = divmod(word, 127773) if word >= 0 else (-((-word) // 127773), -((-word) % 127773))
            word = 16807 * lo - 2836 * hi
            if word < 0:
                word += 2147483647
            r[i] = word & _MASK32
        self._r = r
        self._f = _SEP
        self._b = 0
        for _ in range(_DISCARD):
            self._next()

    def _next(self):
        r = self._r
        r[self._f] = (r[self._f] + r[self._b]) & _MASK32
        out = r[self._f] >> 1
        self._f = (self._f + 1) % _DEG
        self._b = (self._b + 1) % _DEG
        return out

    def rand(self):
        """The next ``rand()`` value, an int in [0, 2**31 - 1]."""
        return self._next()


class CRFsuiteShuffle:
    """The instance order of CRFsuite's trainers: a permutation kept between calls and shuffled in place by
    ``dataset_shuffle`` (for i = 0 … n−1: swap perm[i] with perm[rand() % n]), from one ``rand()`` stream.

    Parameters
    ----------
    n : int
        Number of training instances (≥ 1).
    seed : int, default 1
        The ``srand`` seed of the stream; 1 is a fresh process's (CRFsuite never seeds).

    Notes
    -----
    Cost: O(n) Python-level draws per shuffle (about 0.3 µs each).
    """

    def __init__(self, n, seed=1):
        n = int(n)
        if n < 1:
            raise ValueError(f"n: expected a number of instances >= 1, got {n}")
        self.n = n
        self.perm = np.arange(n, dtype=np.int64)
        self.rng = GlibcRand(seed)

    def shuffle(self):
        """Shuffle the kept permutation in place as ``dataset_shuffle`` does; returns a copy of it (int64)."""
        perm, n, rand = self.perm, self.n, self.rng.rand
        for i in range(n):
            j = rand() % n
            perm[i], perm[j] = perm[j], perm[i]
        return perm.copy()
