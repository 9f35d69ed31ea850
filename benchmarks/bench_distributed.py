"""Distributed fits (structlearn.distributed.fit) on 1 and 2 dask workers against plain ``fit``: EM of a
T = 10⁶ HSMM, and L-BFGS of the CoNLL-2000 linear-chain CRF (``--model crf``; both by default).

Prints, per configuration, the wall time per EM iteration (median over the iterations after the first,
which loads the kernels in the workers), the parallel efficiency t(1 worker) / (2 · t(2 workers)), the
overhead of the distributed path with one worker against plain ``fit`` in one process with one Numba
thread, and the bytes that travel per iteration (parameters to every worker + one statistics object per
shard, pickled sizes). Every worker runs one thread with ``NUMBA_NUM_THREADS=1`` so that workers, not
threads, are what scales.

    .venv/bin/python benchmarks/bench_distributed.py                 # T = 10⁶, 8 shards, 4 iterations
    .venv/bin/python benchmarks/bench_distributed.py --quick         # T = 10⁵, 4 shards, 2 iterations
    .venv/bin/python benchmarks/bench_distributed.py --model crf     # CoNLL-2000, 8 shards, 12 iterations

The CRF rows: the chunking template's features of CoNLL-2000's 8 936 training sentences in 8 shards
(``--quick``: 2 000 sentences, 4 shards), c2 = 1, a fixed number of L-BFGS iterations; time per iteration is
the median of the training log's ``seconds`` after the first iteration, the bytes are w to every worker
and one gradient per shard per evaluation of the objective.

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


def crf_data(n_sentences=None):
    from structlearn.datasets import load_conll2000
    from structlearn.io.conll import featurize

    X, y = featurize(load_conll2000().train, "chunking")
    return (X, y) if n_sentences is None else (X[:n_sentences], y[:n_sentences])


def crf_model(n_iter):
    from structlearn import LinearChainCRF
    return LinearChainCRF(c2=1.0, max_iterations=n_iter, epsilon=0.0, delta=0.0)


def _per_iteration(est):
    return float(np.median([e["seconds"] for e in est.training_log_[1:]]))


def crf_rows(n_sentences, n_shards, n_iter):
    """Plain fit and distributed fits on 1 and 2 workers of the CoNLL-2000 CRF; the numbers as a dict."""
    import dask.bag as db
    import numba
    from distributed import Client, LocalCluster

    from structlearn import distributed as sd

    numba.set_num_threads(1)
    X, y = crf_data(n_sentences)
    crf_model(1).fit(X[:50], y[:50])  # load the kernels
    ref = crf_model(n_iter).fit(X, y)
    res = {"sentences": len(X), "n_shards": n_shards, "n_iter": n_iter, "n_params": int(ref.coef_.size),
           "plain_s_per_iter": _per_iteration(ref)}
    for w in (1, 2):
        cluster = LocalCluster(n_workers=w, threads_per_worker=1, processes=True, memory_limit="4GiB",
                               dashboard_address=None, env={"NUMBA_NUM_THREADS": "1"})
        client = Client(cluster)
        try:
            m = sd.fit(crf_model(n_iter), db.from_sequence(list(zip(X, y)), npartitions=n_shards), client)
        finally:
            client.close()
            cluster.close()
        res[f"w{w}_s_per_iter"] = _per_iteration(m)
        res[f"w{w}_max_abs_diff_coef"] = float(np.max(np.abs(m.coef_ - ref.coef_)))
        res[f"w{w}_same_iterations"] = m.n_iter_ == ref.n_iter_
    res["bytes_per_evaluation_2_workers"] = int((2 + n_shards) * 8 * ref.coef_.size)
    res["efficiency_2_workers"] = res["w1_s_per_iter"] / (2 * res["w2_s_per_iter"])
    res["overhead_1_worker"] = res["w1_s_per_iter"] / res["plain_s_per_iter"] - 1
    print(f"CRF CoNLL-2000 {len(X)} sentences, {res['n_params']} weights, {n_shards} shards, {n_iter} L-BFGS "
          f"iterations (1 thread per process)")
    print(f"  plain fit            {res['plain_s_per_iter']:8.3f} s / iteration")
    print(f"  distributed 1 worker {res['w1_s_per_iter']:8.3f} s / iteration  (overhead "
          f"{100 * res['overhead_1_worker']:+.1f} %)")
    print(f"  distributed 2 workers{res['w2_s_per_iter']:8.3f} s / iteration  (efficiency "
          f"{100 * res['efficiency_2_workers']:.0f} %)")
    print(f"  per evaluation: w to each worker and one gradient per shard, "
          f"{res['bytes_per_evaluation_2_workers']} B with 2 workers")
    print(f"  largest |w - w(plain fit)|: {max(res['w1_max_abs_diff_coef'], res['w2_max_abs_diff_coef']):.2e}; "
          f"same iterations: {res['w1_same_iterations'] and res['w2_same_iterations']}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("hsmm", "crf", "both"), default="both")
    ap.add_argument("--T", type=float, default=1e6)
    ap.add_argument("--n-shards", type=int, default=8)
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--D", type=int, default=60)
    ap.add_argument("--n-iter", type=int, default=4)
    ap.add_argument("--json", help="also write the numbers to this file")
    ap.add_argument("--quick", action="store_true", help="T = 10⁵, 4 shards, 2 iterations (a smoke run)")
    a = ap.parse_args()
    crf_args = (2000, 4, 4) if a.quick else (None, 8, 12)
    if a.quick:
        a.T, a.n_shards, a.n_iter = 1e5, 4, 2
    warnings.simplefilter("ignore")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    res = {}
    if a.model in ("crf", "both"):
        res["crf"] = crf_rows(*crf_args)
    if a.model in ("hsmm", "both"):
        res["hsmm"] = hsmm_rows(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


def hsmm_rows(a):
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
    return res


if __name__ == "__main__":
    main()
