"""FactorGraph side by side with pgmpy: exact inference and loopy BP on grids and random 3-factor graphs.

Run: .venv/bin/python benchmarks/bench_factor_graph.py [--quick] [--pgmpy-max-entries N] [--markdown]

``--markdown`` prints the table as a GitHub Markdown table (for the documentation's performance page).

Rows: 4-connected grids side × side (10…30) with K = 2 and 5 labels (random Gaussian unary and pairwise
log-potentials, scale 0.5) and connected random graphs of factors of arity 3. Every structlearn time is
the best of 3 runs after the kernels are compiled; pgmpy is timed once, the faster of its classic
variable elimination (which gives log Z) and its default opt_einsum query (one normalised marginal).
The |log Z error| column is, on exact rows, structlearn's junction tree against pgmpy's exact answer and,
on BP rows, structlearn's Bethe estimate against its junction tree (itself checked against brute force
and variable elimination in the tests). Run it with NUMBA_NUM_THREADS=1 on a shared machine.

pgmpy has no loopy sum-product BP (``BeliefPropagation`` calibrates a junction tree, i.e. it is exact;
``BeliefPropagationWithMessagePassing`` refuses loops), so the BP rows compare structlearn's loopy BP with
pgmpy's exact variable elimination where pgmpy can finish, and print pgmpy's time as "—" elsewhere.
pgmpy is run only when its largest table (estimated from structlearn's junction tree) stays under
``--pgmpy-max-entries`` (default 2**16).
"""
import argparse
import pathlib
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import best_of  # noqa: E402
from structlearn.engine.structures import FactorGraph
from structlearn.engine.structures.graphs import grid_graph


def grid(side, K, seed=0, scale=0.5):
    rng = np.random.default_rng(seed)
    e = grid_graph(side, side)
    return FactorGraph(rng.normal(scale=scale, size=(side * side, K)), e,
                       rng.normal(scale=scale, size=(len(e), K, K)))


def random_triples(n, F, K, seed=0, scale=0.5):
    rng = np.random.default_rng(seed)
    # connected: every factor takes one variable already used and, while some are unused, two new ones
    # (pgmpy's variable elimination drops the constant of every component but the query's)
    perm = [int(v) for v in rng.permutation(n)]
    used, factors = perm[:1], []
    for _ in range(F):
        new = perm[len(used):len(used) + 2]
        scope = [used[int(rng.integers(len(used)))]] + new
        while len(scope) < 3:
            v = int(rng.integers(n))
            if v not in scope:
                scope.append(v)
        used += new
        factors.append(tuple(scope))
    factors += [(v,) for v in range(n)]
    tables = [rng.normal(scale=scale, size=[K] * len(s)) for s in factors]
    return FactorGraph.from_factors([K] * n, factors, tables)


def pgmpy_log_z(g):
    """log Z by pgmpy's variable elimination (in structlearn's elimination order: pgmpy's own MinFill builds
    a 2**32 table on a 10 × 10 grid) on the same factors (linear space), and the
    faster of that and pgmpy's default query (an opt_einsum contraction giving one normalised marginal)."""
    from pgmpy.factors.discrete import DiscreteFactor
    from pgmpy.inference import VariableElimination
    from pgmpy.models import DiscreteMarkovNetwork

    from structlearn.io.libdai import graph_factors

    card, scopes, tables = graph_factors(g)
    names = [f"x{v}" for v in range(len(card))]
    mn = DiscreteMarkovNetwork()
    mn.add_nodes_from(names)
    for s in scopes:
        if len(s) > 1:
            mn.add_edges_from([(names[a], names[b]) for i, a in enumerate(s) for b in s[i + 1:]])
    mn.add_factors(*[DiscreteFactor([names[v] for v in s], [int(card[v]) for v in s], np.exp(t).ravel())
                     for s, t in zip(scopes, tables)])
    t = time.perf_counter()
    ve = VariableElimination(mn)
    ve._initialize_structures()
    order = [names[v] for v in g.junction_tree().order.tolist() if v != 0]    # pgmpy's MinFill is worse
    phi = ve._variable_elimination([names[0]], "marginalize", elimination_order=order, joint=True,
                                   show_progress=False)
    t_ve = time.perf_counter() - t
    t = time.perf_counter()
    VariableElimination(mn).query([names[0]], show_progress=False)     # default: opt_einsum contraction
    t_einsum = time.perf_counter() - t
    return float(np.log(phi.values.sum())), min(t_ve, t_einsum)


MARKDOWN = [False]   # --markdown: rows as GitHub Markdown table rows


def row(name, ours_t, ours_err, pg_t, note=""):
    ratio = f"{pg_t / ours_t:9.1f}x" if pg_t is not None else "        —"
    pg = f"{pg_t:9.4f}" if pg_t is not None else "        —"
    err = f"{ours_err:10.2e}" if ours_err is not None else "         —"
    if MARKDOWN[0]:
        print(f"| {name} | {ours_t:.4f} | {pg.strip()} | {ratio.strip()} | {err.strip()} | {note} |")
        return
    print(f"{name:34s} {ours_t:9.4f} {pg:>9s} {ratio:>10s} {err:>10s}  {note}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="grids 10 and 30 only")
    ap.add_argument("--pgmpy-max-entries", type=int, default=2**16)
    ap.add_argument("--markdown", action="store_true", help="the table as a GitHub Markdown table")
    args = ap.parse_args()
    MARKDOWN[0] = args.markdown
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", FutureWarning)
    try:
        import pgmpy
        version = pgmpy.__version__
    except ImportError:
        version = None
    bar = "\\|" if args.markdown else "|"
    print(f"pgmpy {version or 'not installed'}; numbers: seconds (structlearn, pgmpy), pgmpy/structlearn, "
          f"{bar}log Z error{bar} of structlearn")
    grid(4, 2).infer("bp")                    # compile
    grid(4, 2).infer("exact")
    random_triples(8, 4, 2).infer("bp")
    sides = [10, 30] if args.quick else [10, 15, 20, 30]
    if args.markdown:
        print("\n| case | ours[s] | pgmpy[s] | ratio | \\|dlogZ\\| | note |\n|:--|--:|--:|--:|--:|:--|")
    else:
        print(f"{'case':34s} {'ours[s]':>9s} {'pgmpy[s]':>9s} {'ratio':>10s} {'|dlogZ|':>10s}")
    cases = [(f"grid {s}x{s} K={K}", grid(s, K)) for K in (2, 5) for s in sides]
    cases += [(f"3-factors n={n} F={F} K={K}", random_triples(n, F, K, seed=n)) for n, F, K in
              [(21, 14, 2), (31, 20, 2), (21, 14, 3), (101, 60, 2)]]
    for name, g in cases:
        jt = g.junction_tree()
        feasible = jt.table_sizes.max() <= 2**22 and jt.total_size <= 2**26
        exact_t = exact = None
        if feasible:
            exact_t, exact = best_of(lambda: g.log_partition("exact")[0], 1 if jt.total_size > 2**20 else 3)
        pg_t = pg = None
        if version and jt.table_sizes.max() <= args.pgmpy_max_entries:
            pg, pg_t = pgmpy_log_z(g)
        if exact_t is not None:
            row(f"{name} exact (tw {jt.treewidth})", exact_t, abs(exact - pg) if pg is not None else None, pg_t,
                "dlogZ against pgmpy's exact" if pg is not None else "the reference of the BP rows' dlogZ")
        elif args.markdown:
            print(f"| {name} exact | — | — | — | — | refused: treewidth {jt.treewidth}, largest clique "
                  f"{jt.table_sizes.max():.3g} entries |")
        else:
            print(f"{name + ' exact':34s} refused: treewidth {jt.treewidth}, largest clique "
                  f"{jt.table_sizes.max():.3g} entries")
        bp_t, res = best_of(lambda: g.infer("bp"))
        err = abs(res.log_z[0] - exact) if exact is not None else None
        row(f"{name} BP", bp_t, err, pg_t, f"n_iter={int(res.n_iter[0])} converged={bool(res.converged[0])}"
            + (" (pgmpy: exact VE)" if pg_t is not None else ""))
        for opts in ("bp_parallel", "residual"):
            t, r = best_of(lambda: g.infer("bp", options=opts))
            e = abs(r.log_z[0] - exact) if exact is not None else None
            row(f"{name} BP {opts}", t, e, None, f"n_iter={int(r.n_iter[0])} converged={bool(r.converged[0])}")


if __name__ == "__main__":
    main()
