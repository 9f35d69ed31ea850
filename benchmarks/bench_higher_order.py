"""Higher-order CRF on CoNLL-2002 Spanish NER: seconds per L-BFGS iteration, dense vs sparse, orders 1…4.

Same model in both columns (label patterns seen in training; state features conditioned on label
unigrams and bigrams, ``state_order=min(d, 2)``); only the inference differs: ``dense`` expands to a
first-order chain over K**d label tuples (O(N·K**(2d)) per pass), ``sparse`` runs Cuong et al. (2014)
over the pattern prefixes (O(N·|P|·K)). A dense run whose estimated cost is too large for this machine
(K**d > 729 states, or N·K**(2d) > 3e10 per pass) is skipped and its estimate printed instead. Usage::

    python benchmarks/bench_higher_order.py [--quick] [--sentences N] [--orders 1,2,3,4]
                                            [--iterations 5] [--modes dense,sparse] [--state-order S]
    python benchmarks/bench_higher_order.py --accuracy --sentences 3000 --iterations 50 --orders 1,2,3

``--quick``: the first 500 training sentences, 3 iterations. Seconds per iteration are the mean over
iterations 2.. (the first includes Numba compilation on a cold cache) and include the line search's
extra objective evaluations (``evals/it``, their mean over the same iterations). ``--accuracy`` also
reports CoNLL entity P/R/F1 (conlleval) on ``testb``.

Measured 2026-12-03 on an idle machine (nothing else running; 2 Numba threads, the default), ``--orders 3
--modes sparse --iterations 4``: order 3 on the full training set 4.35 s per iteration (1.7 evaluations
per iteration), against 30 s when the issue was filed — the ≤ 10 s goal of issue 21.

Measured 2026-12-03 (sparse; one Numba thread, ``NUMBA_NUM_THREADS=1``, on a shared 2-core machine with
load average 3–4 from other jobs, so ±30 %), after the fused objective kernel
(:func:`structlearn.engine.kernels.higher_order_cll.pattern_cll`: state-pattern potentials with dense rows,
forward–backward and gradient scatter per sequence, no (N, Zs) arrays), edge classes (C exponentials
per token instead of E) and failure links (only the non-default edges are computed: 549 of 1 674 at
order 3); 2 objective evaluations per iteration::

    full train set, s/iteration          order 1   order 2   order 3   order 4
    after                                   4.78      9.64     14.30     26.83
    quick (500 sentences)                   0.14      0.35      0.47      0.60

    same inputs, back to back (before = the code of 2026-12-01; after = this code without the last
    change, the carriers' gather, worth ~10 % more), order 3, s/iteration:
    full set (8 323 sentences)    before 49.22   after 15.23   (3.2x; the same objective values)
    first 2 000 sentences         before  7.78   after  2.67   (2.9x)
    quick (500 sentences)         before  1.73   after  0.56   (3.1x)

Objective and gradient of one evaluation at the same weights equal before / after to 1e-14 relative
(500 and 2 000 sentences, order 3). Order 1 stays at ~2.4 s per evaluation: this template has 170
attribute occurrences per token (45 M in all), and their potentials and gradient scatter dominate.

Measured (2026-12-01, before the changes above; one Numba thread on a shared 2-core machine, so ±30 %;
K = 9 BIO labels)::

    full train set (8 323 sentences, 264 715 tokens), 3 iterations, s/iteration
    order  patterns  prefixes  state features   dense    sparse
    1          53        10       1 017 279      3.53     4.33
    2         185        54       2 173 821     13.92    16.98
    3         521       186       2 173 821   skipped    30.15   (dense: 729 states, 1.4e11 per pass)
    4        1261       521       2 173 821   skipped    60.77   (dense: 6 561 states, 1.1e13 per pass)

    --quick (500 sentences, 15 273 tokens), s/iteration
    order   dense   sparse
    1       0.41     0.40
    2       1.01     1.11
    3      23.30     1.17
    4     skipped    2.10

Entity F1 on testb (``--accuracy --iterations 50 --modes sparse``; 50 L-BFGS iterations, not
converged; c2 = 1; one thread)::

    training set          order 1   order 2   order 3
    full (8 323 sent.)     71.38     72.42     73.50     (s/iteration 2.75, 8.57, 15.44)
    first 3 000 sent.      69.23     70.42     70.57

    segments=True (runs of entity types; BIO -> types -> BIO, so adjacent same-type entities merge),
    first 3 000 sentences, 50 iterations:  order 1  65.39,  order 2  66.85   (not run by this script)

Before the changes above, at order 1–2 (≤ 81 tuple states) both were dominated by the bigram-conditioned
state features and the dense adapter's optimised first-order kernel was slightly faster (the dense
mode still runs the unfused path); from order 3 the dense cost grows as
K**(2d) and the sparse one as the number of pattern prefixes (×2–3 per order here).
"""
import argparse
import time
import warnings

import numba
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from structlearn import HigherOrderCRF
from structlearn.datasets import load_conll2002
from structlearn.io.conll import featurize
from structlearn.io.templates import get_template
from structlearn.metrics.sequence import conlleval

DENSE_MAX_STATES = 729
DENSE_MAX_WORK = 3e10


def dense_feasible(K, d, n_tokens):
    S = K ** d
    return S <= DENSE_MAX_STATES and n_tokens * S * S <= DENSE_MAX_WORK, n_tokens * S * S


def run(X, y, d, mode, iterations, state_order, c2):
    est = HigherOrderCRF(order=d, patterns=mode, max_iterations=iterations, state_order=state_order,
                         c2=c2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        est.fit(X, y)
        total = time.perf_counter() - t0
    secs = [e["seconds"] for e in est.training_log_]
    per_it = float(np.mean(secs[1:])) if len(secs) > 1 else float(secs[0])
    evals = [e.get("line_search_evals", 1) for e in est.training_log_]
    evals = float(np.mean(evals[1:])) if len(evals) > 1 else float(evals[0])
    return est, per_it, total, evals


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first 500 sentences, 3 iterations")
    ap.add_argument("--sentences", type=int, default=0, help="first n training sentences (0: all)")
    ap.add_argument("--orders", default="1,2,3,4")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--modes", default="dense,sparse")
    ap.add_argument("--state-order", type=int, default=None)
    ap.add_argument("--c2", type=float, default=1.0)
    ap.add_argument("--accuracy", action="store_true", help="also entity F1 on testb")
    ap.add_argument("--data-home", default=None)
    args = ap.parse_args()
    if args.quick:
        args.sentences, args.iterations = 500, 3
    data = load_conll2002("esp", data_home=args.data_home, download_if_missing=False)
    train = data.train[:args.sentences] if args.sentences else data.train
    tpl = get_template("ner-nochunk")
    t0 = time.perf_counter()
    X, y = featurize(train, tpl)
    n_tok = sum(len(s) for s in train)
    K = len({lab for s in y for lab in s})
    print(f"CoNLL-2002 esp: {len(train)} sentences, {n_tok} tokens, K = {K} labels; featurise "
          f"{time.perf_counter() - t0:.1f} s; numba threads {numba.get_num_threads()}; "
          f"{args.iterations} L-BFGS iterations")
    if args.accuracy:
        Xte, yte = featurize(data.testb, tpl)
    print(f"{'order':>5} {'mode':>6} {'patterns':>8} {'prefixes':>8} {'features':>9} {'s/iter':>8} "
          f"{'evals/it':>8} {'fit s':>7}" + (f" {'P':>6} {'R':>6} {'F1':>6}" if args.accuracy else ""))
    for d in [int(v) for v in args.orders.split(",")]:
        for mode in args.modes.split(","):
            if mode == "dense":
                ok, work = dense_feasible(K, d, n_tok)
                if not ok:
                    print(f"{d:>5} {mode:>6}  skipped: {K}**{d} = {K ** d} tuple states, "
                          f"N·K**(2d) = {work:.2g} per pass")
                    continue
            est, per_it, total, evals = run(X, y, d, mode, args.iterations, args.state_order, args.c2)
            pt = est.model_.patterns
            line = (f"{d:>5} {mode:>6} {pt.n_patterns:>8} {len(pt.sparse()['prefixes']):>8} "
                    f"{est.model_.n_state:>9} {per_it:>8.3f} {evals:>8.1f} {total:>7.1f}")
            if args.accuracy:
                r = conlleval(yte, est.predict(Xte)).overall
                line += f" {100 * r.precision:>6.2f} {100 * r.recall:>6.2f} {100 * r.f1:>6.2f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
