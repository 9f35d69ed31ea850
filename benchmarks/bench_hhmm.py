"""HHMM inference benchmarks (Murphy & Paskin 2001, Fig. 3 and §5).

1. ``--part length``: time vs sequence length T on the seed's Figure 1 model (``a (x y)+ b | c (x y)+ d``,
   shared ``XY``, 10 % symbol noise) for the O(T³) inside–outside algorithm (Fine et al. 1998), the
   flattened chain (``inference="flat"``) and the chain of slice junction trees (``"jtree"``):
   log-likelihood + posterior marginals of one sequence, fitted slopes of log time vs log T.
2. ``--part depth``: balanced hierarchies with Q = 3 children per sub-model and depth D = 2…7, one
   sequence of T = 200 symbols: build (hierarchy + potentials), log-likelihood and E-step (expected
   counts) time and peak resident memory of a fresh process for ``flat``, ``jtree`` (cut-level F node),
   ``jtree-binary`` (the seed's literal DBN, one binary node per F^d) and ``factored-frontier``
   (log-likelihood only), each run in its own process with a time and memory limit — the depth at which
   each becomes infeasible — and the factored frontier's log-likelihood error against the exact value.
3. ``--part sparse``: dense (O(T·S²)) vs sparse (O(T·(E + S))) flattened-chain kernels (E-step and
   Viterbi, T = 1000, depth 3); ``inference="auto"`` picks the sparse kernels when S > 100 and
   E/S² < 0.1 (where they win).
4. ``--part ff``: the factored frontier's error against exact inference (jtree) on random balanced
   models of depth 2–4: log-likelihood, smoothed per-level marginals P(Q^d_t), Viterbi agreement, and EM
   (same random start, same iterations) scored by the exact held-out log-likelihood.

Run:  .venv/bin/python benchmarks/bench_hhmm.py [--part length|depth|sparse|ff|all] [--budget 60]
      [--depths 2,3,4,5,6,7] [--limit-s 300] [--limit-gb 6] [--ff-seeds 3] [--ff-iter 30]

One thread (a single sequence: the engine parallelises over sequences only). The measured tables and
slopes are in docs/hhmm.md ("Inference on the DBN").
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numba
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import best_of  # noqa: E402
from structlearn import HierarchicalHMM
from structlearn.datasets.toy import hhmm_figure1
from structlearn.distributions.emissions import Categorical
from structlearn.hhmm.model import Hierarchy

FIG1 = hhmm_figure1()  # Murphy & Paskin (2001), Figure 1


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
            t_e = best_of(lambda: res.setdefault(inf, model.expected_counts(X)), repeat)[0]
            t_v = best_of(lambda: model.decode(X), repeat)[0]
            res[inf + "_t"] = (t_e, t_v)
        S, E = h.n_configs, len(h._pair_keys)
        diff = np.max(np.abs(res["dense"][0] - res["sparse"][0]))
        (de, dv), (se, sv) = res["dense_t"], res["sparse_t"]
        print(f"{b:>6} {S:>6} {E:>8} {E / S ** 2:>7.3f} {de:>13.4f} {se:>14.4f} {de / se:>8.1f} "
              f"{dv:>14.4f} {sv:>15.4f} {diff:>15.2e}", flush=True)


def figure1_model(inference):
    """Murphy & Paskin's Figure 1 automaton, symbols a b c d x y with 10 % noise."""
    probs = np.full((6, 6), 0.02)
    probs[np.arange(6), [0, 4, 5, 1, 2, 3]] = 0.9  # production order a, x, y, b, c, d
    return HierarchicalHMM(FIG1, Categorical(probs), inference=inference)


def time_vs_length(Ts, budget):
    rng = np.random.RandomState(1)
    models = {inf: figure1_model(inf) for inf in ("flat", "jtree")}
    for m in models.values():
        m.posteriors(rng.randint(6, size=(10, 1)))  # compile / warm up
    print("\nFigure 1 model (8 stack configurations, depth 3): log-likelihood + posteriors of one "
          "sequence (best of 5; inside-outside one run)")
    print(f"{'T':>6} {'inside-outside (s)':>19} {'flat (s)':>10} {'jtree (s)':>10} {'|Δ log L| io':>13} "
          f"{'|Δ log L| jtree':>16}")
    times = {"io": [], "flat": [], "jtree": []}
    io_on = True
    for T in Ts:
        X = rng.randint(6, size=(T, 1))
        out = {}
        for inf, m in models.items():
            times[inf].append(best_of(lambda: out.setdefault(inf, m.posteriors(X)), 5)[0])
        ll = out["flat"].log_likelihood[0]
        t_io, d_io = float("nan"), float("nan")
        if io_on:
            t0 = time.perf_counter()
            lz = models["flat"].inside_outside(X)[0][0]
            t_io = time.perf_counter() - t0
            times["io"].append(t_io)
            d_io = abs(lz - ll)
            io_on = t_io <= budget
        print(f"{T:>6} {t_io:>19.3f} {times['flat'][-1]:>10.4f} {times['jtree'][-1]:>10.4f} {d_io:>13.2e} "
              f"{abs(out['jtree'].log_likelihood[0] - ll):>16.2e}", flush=True)
    n_io = len(times["io"])
    print("fitted slopes of log time vs log T (all T / largest 3 T): "
          + "; ".join(f"{k} {slope(Ts[:len(v)], v):.2f} / {slope(Ts[:len(v)][-3:], v[-3:]):.2f}"
                      for k, v in (("inside-outside", times["io"]), ("flat", times["flat"]),
                                   ("jtree", times["jtree"]))) + f" (inside-outside run up to T = {Ts[n_io - 1]})")


def _worker(method, depth, Q, T):
    """One cell of the depth table, in a fresh process: prints a JSON line."""
    numba.set_num_threads(1)
    inference = "jtree" if method == "jtree-binary" else method
    rng = np.random.RandomState(3)
    X = rng.randint(4, size=(T, 1)).astype(float)
    out = {}
    # warm up (compilation of the cached kernels) on a tiny model
    small = balanced_model(2, 2, 4).set_params(inference=inference)
    small.log_likelihood(X[:6])
    small.expected_counts(X[:6])
    t0 = time.perf_counter()
    model = balanced_model(depth, Q, 4).set_params(inference=inference)
    model._build()
    if method == "jtree-binary":
        from structlearn.hhmm.jtree import DBNInference
        eng = DBNInference(model.hierarchy_, model.finish, f_nodes="binary")
        logb = model.emission_.log_density(X)
        off = np.array([0, T])
        ll_fn, es_fn = (lambda: eng.log_likelihood(logb, off)), (lambda: eng.expected_counts(logb, off))
        out["max_clique"] = eng.tree.max_clique
    else:
        ll_fn, es_fn = (lambda: model.log_likelihood(X)), (lambda: model.expected_counts(X))
        if method == "flat":
            model.hierarchy_._a_from  # the flattened chain's atoms
    if method == "jtree":
        from structlearn.hhmm.jtree import slice_tree
        out["max_clique"] = slice_tree(tuple([Q] * depth)).max_clique
    if method == "flat":
        out["max_clique"] = model.hierarchy_.n_configs ** 2
    if method == "factored-frontier":
        out["max_clique"] = Q ** depth  # the joint evidence table of a slice
    out["build_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    out["ll"] = float(np.sum(ll_fn()))
    out["ll_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    es_fn()
    out["estep_s"] = time.perf_counter() - t0
    print(json.dumps(out), flush=True)


def _run_cell(args, limit_s, limit_gb):
    """Run a worker with a wall-clock and a resident-memory limit; (result dict or None, status, peak MB)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    peak, status = 0.0, "ok"
    while True:
        pid, code, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            peak = max(peak, ru.ru_maxrss / 1024.0)
            break
        try:
            with open(f"/proc/{proc.pid}/status") as fh:
                rss = next(int(x.split()[1]) for x in fh if x.startswith("VmRSS")) / 1024.0
            peak = max(peak, rss)
        except (OSError, StopIteration):
            rss = 0.0
        if rss > limit_gb * 1024:
            status = f"> {limit_gb:g} GB"
        elif time.perf_counter() - t0 > limit_s:
            status = f"> {limit_s:g} s"
        if status != "ok":
            proc.kill()
            os.wait4(proc.pid, 0)
            return None, status, peak
        time.sleep(0.05)
    text = proc.stdout.read()
    if code != 0:
        return None, "error: " + proc.stderr.read().strip().splitlines()[-1][:60], peak
    return json.loads(text.strip().splitlines()[-1]), status, peak


def time_vs_depth(depths, Q, T, limit_s, limit_gb, methods=("flat", "jtree", "jtree-binary",
                                                             "factored-frontier")):
    print(f"\nbalanced hierarchies, Q = {Q} children per sub-model, one sequence of T = {T}; each cell a "
          f"fresh process limited to {limit_s:g} s and {limit_gb:g} GB resident; peak RSS includes "
          f"~0.2 GB of interpreter + Numba")
    print(f"{'D':>2} {'S':>6} {'method':>18} {'largest table':>14} {'build (s)':>10} {'log L (s)':>10} "
          f"{'E-step (s)':>11} {'peak RSS (MB)':>14} {'log L':>14}")
    dead = set()
    summary = []
    for D in depths:
        lls = {}
        for m in methods:
            if m in dead:
                print(f"{D:>2} {Q ** D:>6} {m:>18} {'(skipped: infeasible at a smaller depth)':>40}")
                continue
            res, status, peak = _run_cell([m, D, Q, T], limit_s, limit_gb)
            if res is None:
                dead.add(m)
                print(f"{D:>2} {Q ** D:>6} {m:>18} {'infeasible: ' + status:>40} {peak:>14.0f}", flush=True)
                summary.append((D, m, None))
                continue
            lls[m] = res["ll"]
            es = res.get("estep_s", float("nan"))
            print(f"{D:>2} {Q ** D:>6} {m:>18} {res['max_clique']:>14} {res['build_s']:>10.2f} "
                  f"{res['ll_s']:>10.3f} {es:>11.3f} {peak:>14.0f} {res['ll']:>14.4f}", flush=True)
        exact = lls.get("jtree", lls.get("flat"))
        if exact is not None and "factored-frontier" in lls:
            err = lls["factored-frontier"] - exact
            print(f"   factored-frontier log L error at D = {D}: {err:+.4f} nats ({err / abs(exact):+.3%})")
        if "flat" in lls and "jtree" in lls:
            print(f"   |Δ log L| flat vs jtree at D = {D}: {abs(lls['flat'] - lls['jtree']):.2e}")


def ff_error(cases, seeds, n_iter, n_train=20, n_test=20, max_length=150):
    """The factored frontier against exact inference (jtree) on random balanced models.

    For every (depth D, Q children per sub-model) and seed: ``balanced_model`` (6 symbols) samples
    ``n_train`` training and ``n_test`` held-out strings; on the training strings it reports the
    relative log-likelihood error, the smoothed per-level marginals P(Q^d_t) (max absolute error, and
    the total variation distance per level and token, averaged; also for the filtered ones), the
    fraction of tokens whose Viterbi stack (all levels) is the exact one's, and the exact
    log-probability of the two parses; then EM from the same random start (``init_params="ste"``,
    ``n_iter`` iterations) with each inference, scored by the exact held-out log-likelihood, and the
    seconds per EM iteration. Returns the rows (dicts)."""
    import warnings

    rows = []
    for D, Q in cases:
        for seed in range(seeds):
            true = balanced_model(D, Q, 6, seed=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tr = true.sample(n_train, max_length=max_length, random_state=100 + seed)
                te = true.sample(n_test, max_length=max_length, random_state=200 + seed)
            X, L = tr.X.astype(int), tr.lengths
            ex = HierarchicalHMM(true.hierarchy, true.emission, inference="jtree")
            ff = HierarchicalHMM(true.hierarchy, true.emission, inference="factored-frontier")
            ll_e, ll_f = ex.score(X, L), ff.score(X, L)
            pe, pf = ex.posteriors(X, L), ff.posteriors(X, L)
            de, df = ex.decode(X, L), ff.decode(X, L)
            err = np.abs(pe.state - pf.state)
            fe, fF = ex.filter(X, L), ff.filter(X, L)
            row = {"D": D, "Q": Q, "seed": seed, "N": int(X.shape[0]), "ll_rel": (ll_f - ll_e) / abs(ll_e),
                   "marg_max": float(err.max()), "marg_mean": float(err.sum(axis=2).mean() / 2),
                   "filt_mean": float(np.abs(fe.state - fF.state).sum(axis=2).mean() / 2),
                   "viterbi_tokens": float(np.all(de.states == df.states, axis=1).mean()),
                   "viterbi_lp": (float(de.log_prob.sum()), float(df.log_prob.sum()))}
            for inference in ("jtree", "factored-frontier"):
                m = HierarchicalHMM(true.hierarchy, "categorical", init_params="ste", n_iter=n_iter,
                                    tol=-np.inf, random_state=seed, inference=inference)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m.fit(X, L)
                row[f"em_s_{inference}"] = (time.perf_counter() - t0) / (m.n_iter_ + 1)
                m.set_params(inference="jtree")
                row[f"em_test_{inference}"] = m.score(te.X.astype(int), te.lengths) / te.X.shape[0]
            rows.append(row)
            print(f"D={D} Q={Q} seed={seed} N={row['N']}: log L error {row['ll_rel']:+.3%}; smoothed P(Q^d_t) "
                  f"max |err| {row['marg_max']:.3f}, mean TV {row['marg_mean']:.4f} (filtered: "
                  f"{row['filt_mean']:.4f}); Viterbi tokens equal "
                  f"{row['viterbi_tokens']:.3f} (log P {row['viterbi_lp'][1]:.1f} vs exact "
                  f"{row['viterbi_lp'][0]:.1f}); EM held-out log L per token: FF "
                  f"{row['em_test_factored-frontier']:.4f} vs exact {row['em_test_jtree']:.4f}; s/iteration "
                  f"FF {row['em_s_factored-frontier']:.4f}, jtree {row['em_s_jtree']:.4f}", flush=True)
    return rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="all", choices=["length", "depth", "sparse", "ff", "all"])
    ap.add_argument("--budget", type=float, default=60.0, help="stop inside-outside after a run this long")
    ap.add_argument("--lengths", default="50,100,200,400,800,1600")
    ap.add_argument("--depths", default="2,3,4,5,6,7")
    ap.add_argument("--Q", type=int, default=3)
    ap.add_argument("--T", type=int, default=200)
    ap.add_argument("--limit-s", type=float, default=300.0)
    ap.add_argument("--limit-gb", type=float, default=6.0)
    ap.add_argument("--methods", default="flat,jtree,jtree-binary,factored-frontier",
                    help="methods of the depth table")
    ap.add_argument("--sparse-branches", default="2,3,4,5,6",
                    help="branching factors of the dense-vs-sparse comparison (depth --sparse-depth)")
    ap.add_argument("--sparse-depth", type=int, default=3)
    ap.add_argument("--sparse-T", type=int, default=1000)
    ap.add_argument("--ff-cases", default="2x3,3x3,4x2,4x3", help="DxQ models of --part ff")
    ap.add_argument("--ff-seeds", type=int, default=3)
    ap.add_argument("--ff-iter", type=int, default=30)
    args = ap.parse_args()
    numba.set_num_threads(1)  # one sequence: nothing to parallelise; avoids thread wake-up noise
    if args.part in ("length", "all"):
        time_vs_length([int(x) for x in args.lengths.split(",")], args.budget)
    if args.part in ("depth", "all"):
        time_vs_depth([int(x) for x in args.depths.split(",")], args.Q, args.T, args.limit_s,
                      args.limit_gb, tuple(args.methods.split(",")))
    if args.part in ("sparse", "all"):
        branches = [int(x) for x in args.sparse_branches.split(",")]
        sparse_vs_dense(args.sparse_depth, branches, args.sparse_T)
        sparse_vs_dense(args.sparse_depth, branches, args.sparse_T, make=balanced_model)
    if args.part in ("ff", "all"):
        ff_error([tuple(int(v) for v in c.split("x")) for c in args.ff_cases.split(",")], args.ff_seeds,
                 args.ff_iter)


if __name__ == "__main__":
    main()
