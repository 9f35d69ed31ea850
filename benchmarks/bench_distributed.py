"""Distributed EM (structlearn.distributed.fit) of a T = 10⁶ HSMM on 1 and 2 dask workers against plain ``fit``.

Prints, per configuration, the wall time per EM iteration (median over the iterations after the first,
which loads the kernels in the workers), the parallel efficiency t(1 worker) / (2 · t(2 workers)), the
overhead of the distributed path with one worker against plain ``fit`` in one process with one Numba
thread, and the bytes that travel per iteration (parameters to every worker + one statistics object per
shard, pickled sizes). Every worker runs one thread with ``NUMBA_NUM_THREADS=1`` so that workers, not
threads, are what scales.

    .venv/bin/python benchmarks/bench_distributed.py                 # T = 10⁶, 8 shards, 4 iterations
    .venv/bin/python benchmarks/bench_distributed.py --quick         # T = 10⁵, 4 shards, 2 iterations

Quoted in docs/scaling.md.
"""
import argparse
import json
import os
import time
import warnings

import numpy as np


def make_data(T, n_shards, K, seed=0):
    """n_shards sequences of T / n_shards rows from a K-state HSMM with Poisson durations (mean 30)."""
    rng = np.random.RandomState(seed)
    n = T // n_shards
    seqs = []
    for _ in range(n_shards):
        parts, total, s = [], 0, 0
        while total < n:
            d = 1 + rng.poisson(29)
            parts.append(rng.normal(float(s), 0.5, d))
            total += d
            s = (s + 1 + rng.randint(K - 1)) % K
        seqs.append(np.concatenate(parts)[:n])
    return seqs


def model(K, D, n_iter):
    from structlearn import HiddenSemiMarkovModel
    return HiddenSemiMarkovModel(K, duration="nonparametric", max_duration=D, n_iter=n_iter, tol=0.0,
                                 init="quantile", random_state=0)


def time_plain(seqs, K, D, n_iter):
    """Seconds per iteration of plain fit (one process, one Numba thread): (t(n_iter) - t(0)) / n_iter."""
    import numba
    numba.set_num_threads(1)
    X, L = np.concatenate(seqs)[:, None], [len(s) for s in seqs]
    model(K, D, 1).fit(X[:5000], [5000])  # load the kernels
    out = {}
    for k in (0, n_iter):
        t = time.perf_counter()
        m = model(K, D, k).fit(X, L)
        out[k] = time.perf_counter() - t
    return (out[n_iter] - out[0]) / n_iter, m


def time_distributed(seqs, K, D, n_iter, n_workers):
    import dask.bag as db
    from distributed import Client, LocalCluster

    from structlearn import distributed as sd
    from structlearn.learning.shards import make_shard

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, memory_limit="4GiB",
                           dashboard_address=None, env={"NUMBA_NUM_THREADS": "1"})
    client = Client(cluster)
    try:
        X, L = np.concatenate(seqs)[:, None], [len(s) for s in seqs]
        stamps = []
        m = sd.fit(model(K, D, n_iter), db.from_sequence(seqs, npartitions=len(seqs)), client,
                   init=(X, L), callback=lambda it: stamps.append(time.perf_counter()))
        stamps.append(time.perf_counter())
        per_iter = np.diff(stamps)  # n_iter + 1 E-steps (the last scores the final parameters)
        s0 = seqs[0]
        p_bytes, s_bytes = sd.shard_bytes(m, make_shard(s0[:, None], [len(s0)]))
        return float(np.median(per_iter[1:])), m, p_bytes, s_bytes, per_iter.tolist()
    finally:
        client.close()
        cluster.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=float, default=1e6)
    ap.add_argument("--n-shards", type=int, default=8)
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--D", type=int, default=60)
    ap.add_argument("--n-iter", type=int, default=4)
    ap.add_argument("--json", help="also write the numbers to this file")
    ap.add_argument("--quick", action="store_true", help="T = 10⁵, 4 shards, 2 iterations (a smoke run)")
    a = ap.parse_args()
    if a.quick:
        a.T, a.n_shards, a.n_iter = 1e5, 4, 2
    warnings.simplefilter("ignore")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    seqs = make_data(int(a.T), a.n_shards, a.K)
    T = sum(len(s) for s in seqs)
    plain, ref = time_plain(seqs, a.K, a.D, a.n_iter)
    res = {"T": T, "K": a.K, "D": a.D, "n_shards": a.n_shards, "n_iter": a.n_iter, "plain_s_per_iter": plain}
    for w in (1, 2):
        t, m, pb, sb, raw = time_distributed(seqs, a.K, a.D, a.n_iter, w)
        res[f"w{w}_s_per_iter"] = t
        res[f"w{w}_raw"] = raw
        res[f"w{w}_max_rel_diff_loglik"] = float(np.max(np.abs(np.subtract(m.monitor_.history, ref.monitor_.history))
                                                        / np.abs(ref.monitor_.history)))
        res[f"w{w}_bytes_per_iter"] = w * pb + a.n_shards * sb
        res["param_bytes"], res["stat_bytes_per_shard"] = pb, sb
    res["efficiency_2_workers"] = res["w1_s_per_iter"] / (2 * res["w2_s_per_iter"])
    res["overhead_1_worker"] = res["w1_s_per_iter"] / plain - 1
    print(f"HSMM T={T} K={a.K} D={a.D}, {a.n_shards} shards, {a.n_iter} iterations (1 thread per process)")
    print(f"  plain fit            {plain:8.3f} s / iteration")
    print(f"  distributed 1 worker {res['w1_s_per_iter']:8.3f} s / iteration  (overhead {100 * res['overhead_1_worker']:+.1f} %)")
    print(f"  distributed 2 workers{res['w2_s_per_iter']:8.3f} s / iteration  (efficiency {100 * res['efficiency_2_workers']:.0f} %)")
    print(f"  per iteration: parameters {res['param_bytes']} B to each worker, statistics {res['stat_bytes_per_shard']} B "
          f"per shard; total {res['w2_bytes_per_iter']} B with 2 workers")
    print(f"  max relative difference of the log-likelihoods from plain fit: "
          f"{max(res['w1_max_rel_diff_loglik'], res['w2_max_rel_diff_loglik']):.2e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
