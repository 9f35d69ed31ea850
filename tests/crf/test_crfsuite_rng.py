"""CRFsuite's shuffling stream: glibc's ``rand()`` reproduced, checked against the C library itself."""
import ctypes
import ctypes.util
import sys

import numpy as np
import pytest

from structlearn.crf._crfsuite_rng import CRFsuiteShuffle, GlibcRand

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's rand() is Linux's")


@pytest.fixture(scope="module")
def libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


@pytest.mark.parametrize("seed", [1, 0, 7, 123456789, 2**31 + 5, 2**32 - 1])
def test_glibc_rand_stream(libc, seed):
    libc.srand(ctypes.c_uint(seed))
    expected = [libc.rand() for _ in range(3000)]
    g = GlibcRand(seed)
    assert [g.rand() for _ in range(3000)] == expected


def test_dataset_shuffle_is_crfsuites(libc):
    # dataset_shuffle: for i in 0..n-1, swap perm[i] and perm[rand() % n]; the permutation is kept between epochs
    libc.srand(ctypes.c_uint(1))
    n = 37
    perm = list(range(n))
    epochs = []
    for _ in range(3):
        for i in range(n):
            j = libc.rand() % n
            perm[i], perm[j] = perm[j], perm[i]
        epochs.append(list(perm))
    shuffle = CRFsuiteShuffle(n)
    for want in epochs:
        got = shuffle.shuffle()
        assert got.dtype == np.int64 and got.tolist() == want


def test_shuffle_rejects_empty():
    with pytest.raises(ValueError, match="n: expected"):
        CRFsuiteShuffle(0)
