"""Tree CRFs on real trees: training seconds per L-BFGS iteration (SST train, UD English-ATIS train) and
inference throughput (nodes/s) of structlearn.TreeCRF vs structlearn.LinearChainCRF on the same tokens.

Workloads (data from ../shared/data, found through ``structlearn.datasets.get_data_path``):

- ``sst``: 8,544 training / 2,210 test constituency trees (318,582 / 82,600 nodes, K = 5); node items
  from ``structlearn.io.ptb.span_items`` (bag of span words, first/last word, length bucket, leaf), edge
  attributes from ``edge_items`` (child position, sibling's first word / short sibling's words). The
  "chain on the same tokens" reads the same nodes, in pre-order, as one sequence per tree.
- ``atis``: 4,274 training / 586 test sentences (48,655 / 6,580 words, K = 13 UPOS); token items from
  ``structlearn.io.conllu.UPOS_TEMPLATE``; the tree is the gold dependency tree, with or without DEPREL
  as edge attribute (the per-edge potentials cost O(N·K²) memory and time; without them the tree uses the
  engine's shared-edge fast path).

Training: ``--iterations`` L-BFGS iterations (default 10); seconds per iteration = training time (after
featurisation) / iterations. Inference: MAP (``predict``) and node marginals (``predict_marginals``) on
the test set, best of ``--repeat`` runs, nodes per second, end to end (with the Python encoding of the
items) and engine only (potentials from the weights, then MAP / marginals). With ``--accuracy`` the models are also
trained to convergence on the full training sets and test accuracies are printed, with the per-node
logistic-regression baseline on SST (slow: several minutes).

    python benchmarks/bench_tree.py [--iterations 10] [--repeat 3] [--threads N] [--accuracy]

Measured (2 shared cores, 2 Numba threads, idle machine; 2026-11-30):

    workload           model           nodes  it  s/iter    MAP e2e   marg e2e  MAP engine marg engine
    atis               tree CRF        48655  10   0.161    248,374    221,406   2,989,456   1,078,066
    atis               linear chain    48655  10   0.105    265,842    267,070   3,815,386   2,475,676
    atis +edge attrs   tree CRF        48655  10   0.297    170,237    132,250   1,477,828     397,557
    atis +edge attrs   linear chain    48655  10   0.090    272,938    265,567   3,780,936   2,454,836
    sst +edge attrs    tree CRF       318582  10   0.416    282,117    254,588   4,266,622   1,736,214
    sst +edge attrs    linear chain   318582  10   0.172    497,582    491,962  13,075,233   6,679,565

    --accuracy (to convergence, c2 = 1):
    ATIS UPOS test: tree CRF 0.9895 (135 it, 22 s); with DEPREL edge attributes 0.9922 (132 it, 37 s);
                    linear chain 0.9886 (134 it, 11 s)
    SST test:       tree CRF all-node 0.7936, root 0.4190 (699 it, 310 s);
                    per-node logistic regression (same node attributes) all-node 0.7900, root 0.4023
"""
import argparse
import pathlib
import sys
import time
import warnings

import numba
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import best_of  # noqa: E402


def sst(split):
    from structlearn.datasets import get_data_path
    from structlearn.io import read_ptb
    from structlearn.io.ptb import edge_items, span_items

    trees = read_ptb(get_data_path("sst") / f"{split}.txt.gz")
    return ([span_items(t) for t in trees], [t.labels for t in trees], [t.parents for t in trees],
            [edge_items(t) for t in trees])


def atis(split):
    from structlearn.datasets import get_data_path
    from structlearn.io import apply_template, compile_template, read_conllu
    from structlearn.io.conllu import UPOS_TEMPLATE, conllu_columns

    sents = read_conllu(get_data_path("ud_english_atis") / f"en_atis-ud-{split}.conllu.gz")
    tpl = compile_template(UPOS_TEMPLATE)
    return ([apply_template(conllu_columns(s), tpl) for s in sents], [s.upos for s in sents],
            [s.parents for s in sents], [s.deprel for s in sents])


def preorder(P):
    """Node order root first (depth-first) of every tree: the chain's reading of the same nodes."""
    out = []
    for par in P:
        kids = [[] for _ in par]
        root = -1
        for n, p in enumerate(par):
            if p < 0:
                root = n
            else:
                kids[p].append(n)
        order, stack = [], [root]
        while stack:
            n = stack.pop()
            order.append(n)
            stack.extend(reversed(kids[n]))
        out.append(order)
    return out


def bench(name, train, test, iterations, repeat, use_edges, accuracy):
    from structlearn import LinearChainCRF, TreeCRF

    Xtr, ytr, Ptr, Etr = train
    Xte, yte, Pte, Ete = test
    n_train, n_test = sum(map(len, Xtr)), sum(map(len, Xte))
    order_tr, order_te = preorder(Ptr), preorder(Pte)
    Xtr_c = [[x[i] for i in o] for x, o in zip(Xtr, order_tr)]
    ytr_c = [[y[i] for i in o] for y, o in zip(ytr, order_tr)]
    Xte_c = [[x[i] for i in o] for x, o in zip(Xte, order_te)]
    ekw_tr = dict(edge_attributes=Etr) if use_edges else {}
    ekw_te = dict(edge_attributes=Ete) if use_edges else {}
    label = f"{name}{' +edge attrs' if use_edges else ''}"
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = TreeCRF(c2=1.0, max_iterations=iterations).fit(Xtr, ytr, parents=Ptr, **ekw_tr)
        chain = LinearChainCRF(c2=1.0, max_iterations=iterations).fit(Xtr_c, ytr_c)
    for what, model, kw, X in (("tree CRF", tree, dict(parents=Pte, **ekw_te), Xte),
                               ("linear chain", chain, {}, Xte_c)):
        train_s = model.training_seconds_ - model.featurize_seconds_
        t_map = best_of(lambda: model.predict(X, **kw), repeat)[0]
        t_marg = best_of(lambda: model.predict_marginals(X, output="array", **kw), repeat)[0]
        # engine only: items already encoded; potentials from the weights + decode / marginals
        if what == "tree CRF":
            batch = model._encode(X, kw["parents"], kw.get("edge_attributes"), False, model._vocab,
                                  model._evocab)[4]
        else:
            batch = model._vocab.encode(X)
        t_emap = best_of(lambda: model.model_.structure(model.coef_, batch).argmax(), repeat)[0]
        t_emarg = best_of(lambda: model.model_.structure(model.coef_, batch).marginals(edge="none"),
                          repeat)[0]
        rows.append((label, what, n_train, model.n_iter_, train_s / max(model.n_iter_, 1),
                     n_test / t_map, n_test / t_marg, n_test / t_emap, n_test / t_emarg))
    for r in rows:
        print(f"{r[0]:<18} {r[1]:<13} {r[2]:>7} {r[3]:>3} {r[4]:>7.3f} {r[5]:>10,.0f} {r[6]:>10,.0f} "
              f"{r[7]:>11,.0f} {r[8]:>11,.0f}", flush=True)
    if accuracy:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = TreeCRF(c2=1.0, all_possible_states=name == "sst").fit(Xtr, ytr, parents=Ptr, **ekw_tr)
        t_tree = time.perf_counter() - t0
        gold = np.concatenate(yte)
        roots = np.concatenate([np.asarray(p) < 0 for p in Pte])
        pred = np.concatenate(tree.predict(Xte, parents=Pte, **ekw_te))
        print(f"  accuracy {label}: tree CRF all-node {np.mean(pred == gold):.4f} root "
              f"{np.mean(pred[roots] == gold[roots]):.4f} ({tree.n_iter_} it, {t_tree:.0f} s)", flush=True)
        if name == "sst":
            baseline_lr(Xtr, ytr, Xte, gold, roots)
        elif not use_edges:
            t0 = time.perf_counter()
            chain = LinearChainCRF(c2=1.0).fit([list(x) for x in Xtr], ytr)
            t_chain = time.perf_counter() - t0
            cp = np.concatenate(chain.predict(Xte))
            print(f"  accuracy {name}: linear chain {np.mean(cp == gold):.4f} ({chain.n_iter_} it, "
                  f"{t_chain:.0f} s)", flush=True)


def baseline_lr(Xtr, ytr, Xte, gold, roots):
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    from structlearn.crf.features import AttributeVocabulary

    vocab = AttributeVocabulary()
    a, b = vocab.encode(Xtr, grow=True), vocab.encode(Xte)

    def csr(p):
        return sp.csr_matrix((p.item_val, p.item_attr, p.item_ptr), shape=(p.n_items, len(vocab)))

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr = LogisticRegression(C=0.5, max_iter=2000).fit(csr(a), np.concatenate(ytr))
    pred = lr.predict(csr(b))
    print(f"  accuracy sst: per-node logistic regression all-node {np.mean(pred == gold):.4f} root "
          f"{np.mean(pred[roots] == gold[roots]):.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    ap.add_argument("--accuracy", action="store_true", help="also train to convergence (slow)")
    ap.add_argument("--only", choices=["sst", "atis"], default=None)
    args = ap.parse_args()
    if args.threads:
        numba.set_num_threads(args.threads)
    print(f"numba threads: {numba.get_num_threads()}")
    print("nodes/s on the test set: end to end (predict / predict_marginals, with item encoding) and engine\n"
          "only (potentials from the weights + MAP / node marginals on already encoded items)")
    print(f"{'workload':<18} {'model':<13} {'nodes':>7} {'it':>3} {'s/iter':>7} {'MAP e2e':>10} "
          f"{'marg e2e':>10} {'MAP engine':>11} {'marg engine':>11}")
    if args.only in (None, "atis"):
        train, test = atis("train"), atis("test")
        bench("atis", train, test, args.iterations, args.repeat, False, args.accuracy)
        bench("atis", train, test, args.iterations, args.repeat, True, args.accuracy)
    if args.only in (None, "sst"):
        train, test = sst("train"), sst("test")
        bench("sst", train, test, args.iterations, args.repeat, True, args.accuracy)


if __name__ == "__main__":
    main()
