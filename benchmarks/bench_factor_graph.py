"""FactorGraph timing: loopy BP and TRW on a 30x30 Potts grid with 5 labels (once compiled).

Run: .venv/bin/python benchmarks/bench_factor_graph.py
"""
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from structlearn.structures import FactorGraph


def grid(side, K, coupling=1.0, seed=0):
    rng = np.random.default_rng(seed)
    idx = np.arange(side * side).reshape(side, side)
    edges = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                            np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1)])
    return FactorGraph(rng.normal(size=(side * side, K)), edges, coupling * np.eye(K))


def main():
    warnings.simplefilter("ignore", ConvergenceWarning)
    grid(4, 5).infer("bp")                            # load / compile the kernels
    grid(4, 5).infer("trw")
    for method, options, semiring in [("bp", "bp", "log"), ("bp", "residual", "log"),
                                      ("bp", "bp_parallel", "log"), ("trw", "trw", "log"),
                                      ("bp", "trw", "max"), ("trw", "bp_parallel", "max")]:
        g = grid(30, 5)                               # fresh graph: TRW includes computing ρ
        t = time.perf_counter()
        r = g.infer(method, options=options, semiring=semiring)
        dt = time.perf_counter() - t
        print(f"{method:4s} {options:12s} {semiring:4s} {dt:7.3f} s  converged={bool(r.converged[0])} "
              f"n_iter={int(r.n_iter[0])} log_z={r.log_z[0]:.4f}")


if __name__ == "__main__":
    main()
