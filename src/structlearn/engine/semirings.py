"""Semirings of the exact-inference engine.

A dynamic program over chains, segments or trees is written once; its meaning is fixed by the semiring
it runs in (Goodman 1999; Rush 2020, "Torch-Struct"):

========  =========  ==============  ============================
code      ⊕          ⊗               the DP computes
========  =========  ==============  ============================
``LOG``   logaddexp  ``+``           log partition function log Z
``MAX``   max        ``+``           best score (Viterbi)
========  =========  ==============  ============================

Semirings are integer codes, not objects, so that Numba kernels specialise on them at compile time and
are cached on disk (a function passed as a value would be recompiled in every process): a kernel
branches on ``semiring == MAX`` and runs as fast as a hand-specialised one. :func:`reduce_pair` is the
semiring's inner product of two rows, ``inline="always"``.
"""
import math

import numpy as np
from numba import njit

LOG = 0
MAX = 1

SEMIRINGS = {"log": LOG, "max": MAX}


@njit(cache=True, inline="always")
def reduce_pair(semiring, v, row, K):
    """(⊕_j v[j] ⊗ row[j], arg max_j) over j < K in the LOG or MAX semiring, exact in log space (the
    value is -inf, the arg max 0, when every term is -inf)."""
    m = -np.inf
    arg = 0
    for j in range(K):
        x = v[j] + row[j]
        if x > m:
            m = x
            arg = j
    if semiring == MAX or m == -np.inf:
        return m, arg
    s = 0.0
    for j in range(K):
        s += math.exp(v[j] + row[j] - m)
    return m + math.log(s), arg


def semiring_code(semiring):
    """Map ``"log"``/``"max"`` (or a code) to the integer code; ValueError otherwise."""
    if isinstance(semiring, (int, np.integer)) and int(semiring) in (LOG, MAX):
        return int(semiring)
    try:
        return SEMIRINGS[semiring]
    except (KeyError, TypeError):
        raise ValueError(f"semiring must be one of {sorted(SEMIRINGS)}; got {semiring!r}") from None
