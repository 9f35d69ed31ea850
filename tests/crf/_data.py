"""Random toy data shared by the CRF tests."""
import numpy as np


def abc_sequences(n, seed, item):
    """``n`` sequences of 1 to 4 items, each labelled A, B or C at random and described by
    ``item(rng, label)``; all drawn from ``np.random.default_rng(seed)``. Returns (X, y)."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(1, 5))
        xs, ys = [], []
        for _ in range(T):
            lab = "ABC"[int(rng.integers(0, 3))]
            xs.append(item(rng, lab))
            ys.append(lab)
        X.append(xs)
        y.append(ys)
    return X, y
