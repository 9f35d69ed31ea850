"""HHMM inference time vs sequence length: linear-time (flattened chain on the engine) vs the O(T³)
inside–outside algorithm of Fine, Singer & Tishby (1998) (seed 003, Fig. 3).

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
"""
import argparse
import time

import numba
import numpy as np

from structlearn import HierarchicalHMM
from structlearn.emissions import Categorical
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--branch", type=int, default=2)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--lengths", default="50,100,200,400,800,1600")
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
