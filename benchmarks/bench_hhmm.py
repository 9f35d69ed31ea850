"""HHMM inference time vs sequence length: linear-time (flattened chain on the engine) vs the O(T³)
inside–outside algorithm of Fine, Singer & Tishby (1998) (Murphy & Paskin 2001, Fig. 3).

Times log-likelihood + posterior marginals for T in {50, 100, 200, 400, 800, 1600}; inside–outside is
stopped once a run exceeds ``--budget`` seconds (default 60). Prints the times and the slope of
log(time) vs log(T) fitted by least squares (expected ≈ 1 and ≈ 3).

Both run on one thread (a single sequence; the engine parallelises over sequences only). Times are the
best of 7 runs (linear-time) / one run (inside–outside).

Run:  .venv/bin/python benchmarks/bench_hhmm.py [--depth 3] [--branch 2] [--budget 60]

Result on the shared 2-core dev machine (load ≈ 8), depth 3, branching 2 (8 configurations, 14 instances)::

         T   linear (s)   inside-outside (s)  |Δ log L|
        50       0.0004                0.223   4.26e-14
       100       0.0004                1.234   2.27e-13
       200       0.0005                4.551   5.68e-14
       400       0.0007               36.876   2.27e-12
       800       0.0012              164.260   1.11e-11
      1600       0.0019                  (stopped: > 60 s at T = 800)
    slopes: linear-time 0.49 (all T; fixed overhead dominates below T ≈ 400), 0.70 (largest 3 T);
            inside-outside 2.39 (all run T), 2.59 (largest 3 run T)

Then dense (O(T·S²), LinearChain) vs sparse (O(T·(E + S)), kernels/chain_sparse.py) flattened-chain
kernels, E-step (expected counts) and Viterbi parse of one sequence, T = 1000, depth 3 (both kernels run
the scaled linear-space recursion here, in the same order of operations: counts agree exactly).
``--only-sparse`` runs just this table. Same machine::

    left-to-right sub-models (child i -> i, i + 1 or end)
    branch      S        E    E/S²  dense E-step  sparse E-step speed-up  dense Viterbi  sparse Viterbi
         4     64      304   0.074        0.0052         0.0057      0.9         0.0072          0.0028
         5    125      625   0.040        0.0163         0.0112      1.5         0.0268          0.0040
         6    216     1116   0.024        0.0442         0.0206      2.1         0.0781          0.0059
         8    512     2752   0.010        0.2904         0.0521      5.6         0.6198          0.0137
    fully connected sub-models (E = S²): the sparse E-step is 1.5-7x slower (indirect indexing instead
    of contiguous vectorised rows), Viterbi about equal.

``inference="auto"`` therefore picks the sparse kernels only when S > 100 and E/S² < 0.1.
"""
import argparse
import time

import numba
import numpy as np

from structlearn import HierarchicalHMM
from structlearn.models.emissions import Categorical
from structlearn.models.hhmm import Hierarchy


def balanced_model(depth, branch, n_symbols, seed=0):
    rng = np.random.RandomState(seed)
    start, trans, end = [], [], []
    ctx = ()
    for d in range(depth):
        shape = ctx + (branch,)
        start.append(rng.dirichlet(np.ones(branch), size=ctx or None) if ctx else rng.dirichlet(
            np.ones(branch)))
        rows = rng.dirichlet(np.ones(branch + 1), size=shape)
        rows[..., branch] = np.maximum(rows[..., branch], 0.2)
        rows /= rows.sum(axis=-1, keepdims=True)
        trans.append(rows[..., :branch])
        end.append(rows[..., branch])
        ctx = shape
    h = Hierarchy.from_arrays(start, trans, end)
    em = Categorical(rng.dirichlet(np.ones(n_symbols), size=len(h.production_names)))
    return HierarchicalHMM(h, em)


def left_to_right_model(depth, branch, n_symbols, seed=0):
    """Balanced hierarchy whose sub-models are left-to-right (child i -> i or i + 1 or the end state,
    every call enters child 0): the sparse topology of speech / activity HHMMs. The flattened
    chain has E = O(depth·S) legal transitions instead of S²."""
    rng = np.random.RandomState(seed)
    start, trans, end = [], [], []
    ctx = ()
    K = branch
    for d in range(depth):
        s = np.zeros(ctx + (K,))
        s[..., 0] = 1.0
        a = np.zeros(ctx + (K, K))
        e = np.zeros(ctx + (K,))
        stay = rng.uniform(0.3, 0.7, size=ctx + (K,))
        for i in range(K):
            a[..., i, i] = stay[..., i]
            if i + 1 < K:
                a[..., i, i + 1] = 0.7 * (1.0 - stay[..., i])
                e[..., i] = 0.3 * (1.0 - stay[..., i])
            else:
                e[..., i] = 1.0 - stay[..., i]
        start.append(s)
        trans.append(a)
        end.append(e)
        ctx = ctx + (K,)
    h = Hierarchy.from_arrays(start, trans, end)
    em = Categorical(rng.dirichlet(np.ones(n_symbols), size=len(h.production_names)))
    return HierarchicalHMM(h, em)


def timed(fn, repeat=1):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def slope(Ts, times):
    Ts, times = np.asarray(Ts, float), np.asarray(times, float)
    if len(Ts) < 2:
        return float("nan")
    return float(np.polyfit(np.log(Ts), np.log(times), 1)[0])


def sparse_vs_dense(depth, branches, T, repeat=3, make=None):
    """Dense (S²) vs sparse (CSR, O(E)) kernels on larger balanced hierarchies: E-step (expected counts)
    and Viterbi parse of one sequence of length T."""
    kind = "left-to-right" if make is None else "fully connected"
    print(f"\ndense vs sparse flattened chain, {kind} sub-models, depth {depth}, T = {T} (one thread, best "
          f"of {repeat}):")
    print(f"{'branch':>6} {'S':>6} {'E':>8} {'E/S²':>7} {'dense E-step':>13} {'sparse E-step':>14} "
          f"{'speed-up':>8} {'dense Viterbi':>14} {'sparse Viterbi':>15} {'max |Δ counts|':>15}")
    rng = np.random.RandomState(2)
    for b in branches:
        model = (make or left_to_right_model)(depth, b, 4)
        model._build()
        h = model.hierarchy_
        X = rng.randint(4, size=(T, 1)).astype(float)
        res = {}
        for inf in ("dense", "sparse"):
            model.set_params(inference=inf)
            model.expected_counts(X[:5])  # compile / warm up
            model.decode(X[:5])
            t_e = timed(lambda: res.setdefault(inf, model.expected_counts(X)), repeat=repeat)
            t_v = timed(lambda: model.decode(X), repeat=repeat)
            res[inf + "_t"] = (t_e, t_v)
        S, E = h.n_configs, len(h._pair_keys)
        diff = np.max(np.abs(res["dense"][0] - res["sparse"][0]))
        (de, dv), (se, sv) = res["dense_t"], res["sparse_t"]
        print(f"{b:>6} {S:>6} {E:>8} {E / S ** 2:>7.3f} {de:>13.4f} {se:>14.4f} {de / se:>8.1f} "
              f"{dv:>14.4f} {sv:>15.4f} {diff:>15.2e}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--branch", type=int, default=2)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--lengths", default="50,100,200,400,800,1600")
    ap.add_argument("--sparse-branches", default="2,3,4,5,6",
                    help="branching factors of the dense-vs-sparse comparison (depth --sparse-depth)")
    ap.add_argument("--sparse-depth", type=int, default=3)
    ap.add_argument("--sparse-T", type=int, default=1000)
    ap.add_argument("--only-sparse", action="store_true", help="run only the dense-vs-sparse table")
    args = ap.parse_args()
    if args.only_sparse:
        numba.set_num_threads(1)
        sparse_vs_dense(args.sparse_depth, [int(x) for x in args.sparse_branches.split(",")],
                        args.sparse_T)
        sparse_vs_dense(args.sparse_depth, [int(x) for x in args.sparse_branches.split(",")],
                        args.sparse_T, make=balanced_model)
        return
    Ts = [int(x) for x in args.lengths.split(",")]
    numba.set_num_threads(1)  # one sequence: nothing to parallelise; avoids thread wake-up noise
    model = balanced_model(args.depth, args.branch, 4)
    model._build()
    h = model.hierarchy_
    print(f"HHMM depth {h.depth}, branching {args.branch}: {h.n_submodels} sub-models, {h.n_configs} "
          f"stack configurations, {len(h._a_from)} transition atoms, {len(h.instance_paths)} instances")
    rng = np.random.RandomState(1)
    model.posteriors(rng.randint(4, size=(10, 1)).astype(float))  # compile / warm up
    lin, io = [], []
    io_on = True
    print(f"{'T':>6} {'linear (s)':>12} {'inside-outside (s)':>20} {'|Δ log L|':>10}")
    for T in Ts:
        X = rng.randint(4, size=(T, 1)).astype(float)
        out = {}
        t_lin = timed(lambda: out.setdefault("p", model.posteriors(X)), repeat=7)
        lin.append(t_lin)
        t_io, diff = float("nan"), float("nan")
        if io_on:
            t0 = time.perf_counter()
            lz = model.inside_outside(X)[0][0]
            t_io = time.perf_counter() - t0
            io.append(t_io)
            diff = abs(lz - out["p"].log_likelihood[0])
            if t_io > args.budget:
                io_on = False
        print(f"{T:>6} {t_lin:>12.4f} {t_io:>20.3f} {diff:>10.2e}", flush=True)
    print(f"fitted slope of log time vs log T: linear-time {slope(Ts, lin):.2f} (all T), "
          f"{slope(Ts[-3:], lin[-3:]):.2f} (largest 3 T); inside-outside {slope(Ts[:len(io)], io):.2f} "
          f"(all run T), {slope(Ts[:len(io)][-3:], io[-3:]):.2f} (largest 3 run T)")
    sparse_vs_dense(args.sparse_depth, [int(x) for x in args.sparse_branches.split(",")], args.sparse_T)
    sparse_vs_dense(args.sparse_depth, [int(x) for x in args.sparse_branches.split(",")], args.sparse_T,
                    make=balanced_model)


if __name__ == "__main__":
    main()
