"""Seed 003 (Murphy & Paskin), Figure 1: the 3-level HHMM of the regular expression

    a (x y)+ b  |  c (x y)+ d

with the sub-model for "x y" shared by both branches. Sample 500 strings from the true model, learn an
HHMM of the same topology by EM from a random initialisation, and compare held-out log-likelihoods.

Run:  .venv/bin/python examples/hhmm_figure1.py
"""
import re
import time

import numpy as np

from structlearn import HierarchicalHMM
from structlearn.models.emissions import Categorical

SYMBOLS = "abcdxy"
FIG1 = {
    "root": {"children": ["S0", "S1"], "start": [0.5, 0.5], "trans": [[0, 0], [0, 0]], "end": [1, 1]},
    "S0": {"children": ["a", "XY", "b"], "start": [1, 0, 0],
           "trans": [[0, 1, 0], [0, 0, 1], [0, 0, 0]], "end": [0, 0, 1]},
    "S1": {"children": ["c", "XY", "d"], "start": [1, 0, 0],
           "trans": [[0, 1, 0], [0, 0, 1], [0, 0, 0]], "end": [0, 0, 1]},
    "XY": {"children": ["x", "y"], "start": [1, 0], "trans": [[0, 1], [0.6, 0]], "end": [0, 0.4]},
}
# production states in depth-first order: a, x, y, b, c, d; slightly noisy symbols
EMIT = 0.9 * np.eye(6)[[0, 4, 5, 1, 2, 3]] + 0.1 / 6


def strings(X, lengths):
    out, o = [], 0
    for T in lengths:
        out.append("".join(SYMBOLS[int(v)] for v in X[o:o + T, 0]))
        o += T
    return out


def main(n_train=500, n_test=500, n_restarts=5, seed=0):
    truth = HierarchicalHMM(FIG1, Categorical(EMIT))
    print(truth.describe())
    train = truth.sample(n_train, random_state=seed)
    test = truth.sample(n_test, random_state=seed + 1)
    clean = HierarchicalHMM(FIG1, Categorical(np.eye(6)[[0, 4, 5, 1, 2, 3]])).sample(5, random_state=9)
    print("noise-free samples:", strings(clean.X, clean.lengths),
          all(re.fullmatch(r"a(xy)+b|c(xy)+d", s) for s in strings(clean.X, clean.lengths)))
    print(f"train: {n_train} strings, {train.lengths.sum()} symbols; test: {n_test} strings")
    t0 = time.perf_counter()
    best = None
    for r in range(n_restarts):
        m = HierarchicalHMM(FIG1, Categorical(n_features=6), init_params="ste", n_iter=300, tol=1e-6,
                            random_state=seed + 100 + r)
        m.fit(train.X, train.lengths)
        print(f"  restart {r}: train log-likelihood {m.log_likelihood_:.2f} after {m.n_iter_} EM "
              f"iterations (converged={m.converged_})")
        if best is None or m.log_likelihood_ > best.log_likelihood_:
            best = m
    fit_s = time.perf_counter() - t0
    ll_true = truth.score(test.X, test.lengths)
    ll_fit = best.score(test.X, test.lengths)
    rel = abs(ll_fit - ll_true) / abs(ll_true)
    print(f"EM time {fit_s:.1f} s for {n_restarts} restarts")
    print(f"held-out log-likelihood: true model {ll_true:.2f}, learned {ll_fit:.2f} "
          f"(relative difference {100 * rel:.3f} %; target < 1 %)")
    print(best.describe())
    return ll_true, ll_fit, rel


if __name__ == "__main__":
    main()
