"""Higher-order semi-Markov CRF (``HigherOrderCRF(segments=True)``) on CoNLL-2002 Spanish NER: dense tuple
super-labels vs sparse pattern-prefix super-labels (Nguyen, Ye, Lee & Chieu 2011), order 3, 9 BIO labels.

Token labels are the 9 BIO tags; segments are their runs (a B- run, then the I- run of the entity). Both
forms are one model with ``state_order=1`` (state features on the segment label): the dense form expands to
tuples of the last 3 segment labels (K + K(K-1) + K(K-1)² = 657 super-labels), the sparse one to the
prefixes of the segment-label patterns seen in training (about 80), both on the engine's
:class:`~structlearn.engine.structures.SemiMarkov` (time O(N·(D·S + S²)) per pass, S super-labels). The script
prints, per form: S, patterns, state features, seconds of one objective evaluation at the same weights
(zero, then the sparse fit's), seconds per L-BFGS iteration (mean over iterations 2.., line-search
evaluations included), and entity P/R/F1 (conlleval) on the first ``--test`` testa sentences; then the
ratio dense / sparse and the objectives' relative difference (the same model: it must be ~1e-15). Sparse
with ``state_order=2`` (state features on segment-label bigrams, e.g. "a word in an I-PER run after a
B-PER one") is a third row. Usage::

    python benchmarks/bench_higher_order_segments.py [--quick] [--sentences 300] [--iterations 10]
                                                     [--test 500] [--modes dense,sparse,sparse2]

``--quick``: 150 sentences, 2 iterations, 200 test sentences (the dense rows take most of it).

Measured 2026-12-03 on a shared 2-core machine (load average 2.5–4.5 from other jobs, so ±30 %), default
Numba threads; s/eval@w: one objective + gradient evaluation at the fitted weights::

    300 sentences (8 541 tokens), 10 iterations, F1 on the first 500 testa sentences
    form      S  patterns  features  s/eval@w  s/iter   F1
    dense   657       178    91 905    25.97   26.38   51.07
    sparse   77       178    91 905     0.97    1.03   51.07
    sparse2  77       178   206 455     0.69    0.95    0.80   (state_order 2: not converged at 10 it.)
    ratio dense/sparse: s/iteration 25.6x, s/evaluation 26.8x; objective at the same weights: relative
    difference 0.0; coefficients max |diff| 1.3e-13; the same test predictions

    --quick (150 sentences): s/iteration dense 19.0, sparse 0.37 (51x)

    2 000 sentences (60 010 tokens), 50 iterations (--modes sparse,sparse2); dense not run (~185 s per
    iteration by the ratio above)
    sparse   92       220   368 769     6.36    7.26   67.69   (P 68.08, R 67.31)
    sparse2  92       220   848 114     6.38    9.65   48.81   (not converged: its loss falls more slowly
                                                               from the same start, 10 it. on 300 sent.:
                                                               4 897 vs 1 513; 30 it.: 1 659 vs 350)

The remaining sparse time is the engine's semi-Markov forward–backward and transition marginals
(O(N·(D·S + S²)) with D = 65, the longest O run; ~75 % of an evaluation), not the adapter.
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from structlearn import HigherOrderCRF
from structlearn.datasets import get_data_path, load_conll2002
from structlearn.io.conll import featurize
from structlearn.io.templates import get_template
from structlearn.crf.objectives import SegmentCLL
from structlearn.metrics.sequence import conlleval

ORDER = 3


def fit(X, y, mode, state_order, iterations, c2):
    est = HigherOrderCRF(order=ORDER, segments=True, patterns=mode, state_order=state_order,
                         max_iterations=iterations, c2=c2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        est.fit(X, y)
        total = time.perf_counter() - t0
    log = est.training_log_
    secs = [e["seconds"] for e in log]
    evals = [e.get("line_search_evals", 1) for e in log]
    tail = slice(1, None) if len(log) > 1 else slice(None)
    return est, float(np.mean(secs[tail])), float(np.mean(evals[tail])), total


def objective(est, X, y):
    """The training objective (SegmentCLL) of the estimator's model on (X, y), and its encoded batch."""
    packed = est._vocab.encode(X, None)
    yy = est._encode_labels(y, packed, grow=False)
    return SegmentCLL(est.model_, packed, yy, c2=est.c2)


def timed_eval(obj, w):
    g = np.empty_like(w)
    t0 = time.perf_counter()
    v = obj(w, g)
    return v, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="150 sentences, 2 iterations, 200 test sentences")
    ap.add_argument("--sentences", type=int, default=300, help="first n training sentences (0: all)")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--test", type=int, default=500, help="first n testa sentences for P/R/F1 (0: all)")
    ap.add_argument("--modes", default="dense,sparse,sparse2",
                    help="dense, sparse (state_order 1), sparse2 (state_order 2)")
    ap.add_argument("--c2", type=float, default=1.0)
    ap.add_argument("--data-home", default=None)
    args = ap.parse_args()
    if args.quick:
        args.sentences, args.iterations, args.test = 150, 2, 200
    home = args.data_home or get_data_path("conll2002").parent
    data = load_conll2002("esp", data_home=home, download_if_missing=False)
    train = data.train[:args.sentences] if args.sentences else data.train
    test = data.testa[:args.test] if args.test else data.testa
    tpl = get_template("ner-nochunk")
    X, y = featurize(train, tpl)
    Xte, yte = featurize(test, tpl)
    K = len({lab for s in y for lab in s})
    print(f"CoNLL-2002 esp, segments=True, order {ORDER}: {len(train)} training sentences "
          f"({sum(map(len, y))} tokens), K = {K} labels, {args.iterations} L-BFGS iterations; "
          f"test: first {len(test)} testa sentences")
    print(f"{'form':>8} {'S':>5} {'patterns':>8} {'features':>9} {'s/eval@0':>9} {'s/eval@w':>9} "
          f"{'s/iter':>8} {'evals/it':>8} {'fit s':>7} {'P':>6} {'R':>6} {'F1':>6}")
    rows = {}
    for name in args.modes.split(","):
        mode, so = {"dense": ("dense", 1), "sparse": ("sparse", 1), "sparse2": ("sparse", 2)}[name]
        est, per_it, evals, total = fit(X, y, mode, so, args.iterations, args.c2)
        obj = objective(est, X, y)
        _, t_zero = timed_eval(obj, np.zeros(est.model_.n_params))
        _, t_w = timed_eval(obj, est.coef_)
        r = conlleval(yte, est.predict(Xte)).overall
        m = est.model_
        print(f"{name:>8} {m.n_states:>5} {m.patterns.n_patterns:>8} {m.n_state:>9} {t_zero:>9.3f} "
              f"{t_w:>9.3f} {per_it:>8.3f} {evals:>8.1f} {total:>7.1f} {100 * r.precision:>6.2f} "
              f"{100 * r.recall:>6.2f} {100 * r.f1:>6.2f}", flush=True)
        rows[name] = (est, obj, per_it, t_w)
    if "dense" in rows and "sparse" in rows:
        (ed, od, itd, td), (es, os_, its, ts) = rows["dense"], rows["sparse"]
        vd, _ = timed_eval(od, es.coef_)
        vs, _ = timed_eval(os_, es.coef_)
        same_pred = ed.predict(Xte) == es.predict(Xte)
        print(f"ratio dense/sparse: s/iteration {itd / its:.1f}x, s/evaluation {td / ts:.1f}x; objective at "
              f"the sparse fit's weights: relative difference {abs(vd - vs) / abs(vs):.1e}; "
              f"coef max |diff| {np.max(np.abs(ed.coef_ - es.coef_)):.1e}; same test predictions: {same_pred}")


if __name__ == "__main__":
    main()
