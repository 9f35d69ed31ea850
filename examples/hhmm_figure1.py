"""Seed 003 (Murphy & Paskin), Figure 1: the 3-level HHMM of the regular expression

    a (x y)+ b  |  c (x y)+ d

with the sub-model for "x y" shared by both branches. Sample 500 strings from the true model, learn an
HHMM of the same topology by EM from a random initialisation, and compare held-out log-likelihoods.

Run::

    .venv/bin/python examples/hhmm_figure1.py [--n-train 500] [--n-test 500] [--restarts 5] [--seed 0]
                                              [--quick] [--figures DIR]

``--quick``: 200 training strings and 2 restarts. ``--figures DIR`` also saves PNGs made with
:mod:`structlearn.plotting` into DIR (created if missing; nothing is written without the flag):
``hhmm_figure1_hierarchy.png`` (the Viterbi parse of a held-out string by the learned model, one row
per level, the symbols on the x axis), ``hhmm_figure1_truth.png`` (the true nested segments of the
same string) and ``hhmm_figure1_training.png`` (EM log-likelihood per iteration of every restart).
"""
import argparse
import re
import time

import numpy as np

from structlearn import HierarchicalHMM
from structlearn.datasets.toy import hhmm_figure1
from structlearn.distributions.emissions import Categorical

SYMBOLS = "abcdxy"
FIG1 = hhmm_figure1()  # Murphy & Paskin (2001), Figure 1
# production states in depth-first order: a, x, y, b, c, d; slightly noisy symbols
EMIT = 0.9 * np.eye(6)[[0, 4, 5, 1, 2, 3]] + 0.1 / 6


def strings(X, lengths):
    out, o = [], 0
    for T in lengths:
        out.append("".join(SYMBOLS[int(v)] for v in X[o:o + T, 0]))
        o += T
    return out


def save_figures(best, fits, test, directory):
    """The structlearn.plotting figures (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    b = int(np.argmax(test.lengths[:20]))  # the longest of the first 20 held-out strings
    o = int(np.sum(test.lengths[:b]))
    X = test.X[o:o + test.lengths[b]]
    symbols = strings(X, [X.shape[0]])[0]
    names = best.node_names_
    depth = test.states.shape[1]
    truth = [[] for _ in range(depth)]
    for lvl in range(depth):  # a level's node ends when the level below has finished (F^{d+1}_t = 1)
        ids = test.states[o:o + X.shape[0], lvl]
        below = (test.finished[o:o + X.shape[0], lvl + 1] if lvl + 1 < depth
                 else np.ones(X.shape[0], dtype=bool))
        start = 0
        for t in range(X.shape[0]):
            if t == X.shape[0] - 1 or below[t] or ids[t + 1] != ids[t]:
                if ids[t] >= 0:
                    truth[lvl].append((start, t + 1, names[ids[t]]))
                start = t + 1
    level_names = ["branch (S0 / S1)", "a, XY, b / c, XY, d", "x, y"]
    figs = {"hierarchy": plotting.plot_hierarchy(best, X, symbols=list(symbols), level_names=level_names,
                                                 title="Viterbi parse of a held-out string (learned HHMM)"),
            "truth": plotting.plot_hierarchy(truth, symbols=list(symbols), level_names=level_names,
                                             title="true nested segments of the same string"),
            "training": plotting.plot_training({f"restart {r}": m for r, m in enumerate(fits)},
                                               title="EM log-likelihood per iteration")}
    for name, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, 'hhmm_figure1_' + name)}")


def main(n_train=500, n_test=500, n_restarts=5, seed=0, figures=None):
    truth = HierarchicalHMM(FIG1, Categorical(EMIT))
    print(truth.describe())
    train = truth.sample(n_train, random_state=seed)
    test = truth.sample(n_test, random_state=seed + 1)
    clean = HierarchicalHMM(FIG1, Categorical(np.eye(6)[[0, 4, 5, 1, 2, 3]])).sample(5, random_state=9)
    print("noise-free samples:", strings(clean.X, clean.lengths),
          all(re.fullmatch(r"a(xy)+b|c(xy)+d", s) for s in strings(clean.X, clean.lengths)))
    print(f"train: {n_train} strings, {train.lengths.sum()} symbols; test: {n_test} strings")
    t0 = time.perf_counter()
    best, fits = None, []
    for r in range(n_restarts):
        m = HierarchicalHMM(FIG1, Categorical(n_features=6), init_params="ste", n_iter=300, tol=1e-6,
                            random_state=seed + 100 + r)
        m.fit(train.X, train.lengths)
        fits.append(m)
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
    if figures:
        save_figures(best, fits, test, figures)
    return ll_true, ll_fit, rel


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-train", type=int, default=500)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="200 training strings, 2 restarts")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    args = ap.parse_args()
    main(200 if args.quick else args.n_train, args.n_test, 2 if args.quick else args.restarts, args.seed,
         args.figures)
