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
are cached on disk (a function passed as a value would be recompiled in every process). The helpers
below are ``inline="always"``: a kernel written with them runs as fast as a hand-specialised one.
"""
import math

import numpy as np
from numba import njit

LOG = 0
MAX = 1

SEMIRINGS = {"log": LOG, "max": MAX}

NEG_INF = -np.inf


@njit(cache=True, inline="always")
def logaddexp(a, b):
    """log(exp(a) + exp(b)), exact at ±inf (never NaN for -inf inputs)."""
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True, inline="always")
def plus(semiring, a, b):
    """Semiring addition ⊕: logaddexp for LOG, max for MAX."""
    if semiring == MAX:
        return a if a >= b else b
    return logaddexp(a, b)


@njit(cache=True)
def logsumexp_1d(x):
    """log Σ exp(x) over a 1-d array; -inf for an empty or all -inf array."""
    m = -np.inf
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
    if m == -np.inf or m == np.inf:
        return m
    s = 0.0
    for i in range(x.shape[0]):
        s += math.exp(x[i] - m)
    return m + math.log(s)


def semiring_code(semiring):
    """Map ``"log"``/``"max"`` (or a code) to the integer code; ValueError otherwise."""
    if isinstance(semiring, (int, np.integer)) and int(semiring) in (LOG, MAX):
        return int(semiring)
    try:
        return SEMIRINGS[semiring]
    except (KeyError, TypeError):
        raise ValueError(f"semiring must be one of {sorted(SEMIRINGS)}; got {semiring!r}") from None
