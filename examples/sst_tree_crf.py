"""Stanford Sentiment Treebank: a TreeCRF over the binarised parse trees, with figures.

Data: ``sst`` (:func:`structlearn.datasets.get_data_path`; ``$STRUCTLEARN_DATA``, ``../shared/data`` or
``--data-home``): ``train.txt.gz`` (8,544 trees) and ``test.txt.gz`` (2,210), read with
:func:`structlearn.io.read_ptb`; every node of a tree (phrase) carries one of five sentiment labels
(0 very negative … 4 very positive). Node attributes (:func:`structlearn.io.ptb.span_items`): the bag of
words of the phrase, its first and last word, a length bucket and whether it is a leaf. Edge attributes
(:func:`structlearn.io.ptb.edge_items`): the child's position under its parent (left / right) and the
sibling's first word (and its words, if at most two). The TreeCRF adds (child label, parent label)
weights, plain and crossed with these edge attributes. Training: L-BFGS, c2 = 1, every (attribute,
label) pair a feature. Printed: iterations, training time, and on the test set the accuracy over all
nodes and over the roots (the sentence label).

Run::

    .venv/bin/python examples/sst_tree_crf.py [--c2 1] [--max-iterations N] [--n-train N] [--n-test N]
                                              [--data-home DIR] [--quick] [--figures DIR]

Result (first 1,500 training trees, to convergence, the full test set): all-node accuracy about 0.748,
root accuracy about 0.309 (``tests/data/test_tree_crf_data.py``; full-data numbers in
``benchmarks/bench_tree.py``).

``--quick``: the first 400 training and 400 test trees and at most 40 L-BFGS iterations (well under a
minute). ``--figures DIR``: also save PNGs made with :mod:`structlearn.plotting` into DIR (created if
missing; nothing is written without the flag): ``sst_training.png`` (the objective per L-BFGS
iteration), ``sst_edges.png`` (the parent → child label weights, ``edge_features_``) and
``sst_weights.png`` (the largest and most negative state-feature weights per sentiment label).
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from structlearn import TreeCRF
from structlearn.datasets import get_data_path
from structlearn.io import read_ptb
from structlearn.io.ptb import edge_items, span_items


def featurize(trees):
    """(node attributes, labels, parents, edge attributes), one entry per tree."""
    return ([span_items(t) for t in trees], [t.labels for t in trees], [t.parents for t in trees],
            [edge_items(t) for t in trees])


def edge_matrix(crf):
    """(K, K) weights W[parent, child] from ``edge_features_`` ((child, parent) -> weight), labels sorted;
    forbidden pairs (-inf) and pairs without a feature are 0."""
    names = sorted(str(c) for c in crf.classes_)   # 0 (very negative) … 4 (very positive)
    index = {c: i for i, c in enumerate(names)}
    W = np.zeros((len(names), len(names)))
    for (child, parent), w in crf.edge_features_.items():
        if str(child) in index and str(parent) in index and np.isfinite(w):
            W[index[str(parent)], index[str(child)]] = w
    return W, names


def save_figures(crf, n_train, directory):
    """The structlearn.plotting figures (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    W, names = edge_matrix(crf)
    ax = plotting.plot_transitions(W, state_names=names, fmt=".2f",
                                   title="TreeCRF edge weights, parent → child")
    ax.set_ylabel("parent label")
    ax.set_xlabel("child label")
    figs = {"training": plotting.plot_training(crf, title=f"L-BFGS on SST ({n_train} trees): objective "
                                                          "per iteration"),
            "edges": ax,
            "weights": plotting.plot_crf_weights(crf, top=10, negative=3, labels=names,
                                                 title="TreeCRF on SST: largest state-feature weights per "
                                                       "sentiment label")}
    for name, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, 'sst_' + name)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--c2", type=float, default=1.0)
    ap.add_argument("--max-iterations", type=int, default=None)
    ap.add_argument("--n-train", type=int, default=None, help="first N training trees (default all)")
    ap.add_argument("--n-test", type=int, default=None, help="first N test trees (default all)")
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--quick", action="store_true", help="400 training / 400 test trees, <= 40 iterations")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    args = ap.parse_args(argv)
    path = get_data_path("sst", data_home=args.data_home)
    if path is None:
        raise SystemExit("sst data not found: set $STRUCTLEARN_DATA or pass --data-home")
    n_train = args.n_train or (400 if args.quick else None)
    n_test = args.n_test or (400 if args.quick else None)
    max_iterations = args.max_iterations or (40 if args.quick else None)
    train = read_ptb(path / "train.txt.gz")[:n_train]
    test = read_ptb(path / "test.txt.gz")[:n_test]
    Xtr, ytr, Ptr, Etr = featurize(train)
    Xte, yte, Pte, Ete = featurize(test)
    crf = TreeCRF(c2=args.c2, all_possible_states=True, max_iterations=max_iterations)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(Xtr, ytr, parents=Ptr, edge_attributes=Etr)
    print(f"SST: {len(train)} training trees ({sum(len(y) for y in ytr)} nodes), {len(crf.attributes_)} "
          f"attributes, {len(crf.classes_)} labels; {crf.n_iter_} L-BFGS iterations "
          f"(converged={crf.converged_}), {time.perf_counter() - t0:.1f} s")
    pred = np.concatenate(crf.predict(Xte, parents=Pte, edge_attributes=Ete))
    gold = np.concatenate(yte)
    is_root = np.concatenate([np.asarray(p) < 0 for p in Pte])
    node_acc = float(np.mean(pred == gold))
    root_acc = float(np.mean(pred[is_root] == gold[is_root]))
    print(f"test ({len(test)} trees, {gold.shape[0]} nodes): node accuracy {node_acc:.4f}, "
          f"root accuracy {root_acc:.4f}")
    if args.figures:
        save_figures(crf, len(train), args.figures)
    return {"node_accuracy": node_acc, "root_accuracy": root_acc, "n_iter": crf.n_iter_}


if __name__ == "__main__":
    main()
