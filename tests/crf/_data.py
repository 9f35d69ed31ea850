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


def conll2000_subset(n_train, n_test):
    """The first ``n_train`` training and ``n_test`` test sentences of CoNLL-2000, featurised by the chunking
    template: (X_train, y_train, X_test). Fails (skips outside CI) without the data set."""
    from structlearn.datasets import load_conll2000
    from structlearn.io.conll import featurize
    from structlearn.io.templates import get_template
    from tests.conftest import require_data

    data = load_conll2000(data_home=require_data("conll2000").parent, download_if_missing=False)
    template = get_template("chunking")
    Xtr, ytr = featurize(data.train[:n_train], template)
    Xte, _ = featurize(data.test[:n_test], template)
    return Xtr, ytr, Xte
