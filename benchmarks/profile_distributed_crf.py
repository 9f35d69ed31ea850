"""Where the time of one L-BFGS evaluation goes: plain ``fit`` against ``structlearn.distributed.fit`` of the
CoNLL-2000 linear-chain CRF (the configuration of ``bench_distributed.py --model crf``).

Plain fit: wall and CPU time (``time.process_time``) of every evaluation of the objective. Distributed
fit: the map of every evaluation is replaced by an instrumented copy of
:func:`structlearn.distributed._common.shard_map` that records, per evaluation, the client's submit
time, the wait for the workers' results, the client-side reduction, the client process's CPU time
during the map, and — measured inside the worker task and returned with the statistics — the worker's
wall and CPU time over its shards, each shard's time, the worker-side reduction, its minor page faults
and system time, and the worker process's total CPU time (``psutil``: compute plus dask's own threads).
Every process runs one Numba thread. CPU times are what to compare on a loaded machine; wall times
show what the load does.

``--ab`` runs the distributed fit twice per round on the same cluster, with and without the per-shard
model copy of :meth:`structlearn.crf._potentials.ChainFeatureModel.shard_copy` (toggled in the workers), to measure the
shared-cache cost back to back.

    .venv/bin/python benchmarks/profile_distributed_crf.py                      # 8 936 sentences, 8 shards
    .venv/bin/python benchmarks/profile_distributed_crf.py --sentences 2000 --shards 4
    .venv/bin/python benchmarks/profile_distributed_crf.py --ab --rounds 2 --verbose

Quoted in docs/scaling.md.
"""
import argparse
import os
import time
import warnings

import numpy as np

import bench_distributed as bd

EVALS = []


def timed_sum_shards(function, params, *shards):
    """Worker side: :func:`structlearn.distributed._common.sum_shards` with its timings in the result."""
    import resource

    from structlearn.distributed._common import keep_heap
    from structlearn.learning.shards import ShardStatistics, reduce_statistics

    t0, c0, r0 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    keep_heap()
    per, outs = [], []
    for s in shards:
        a = time.perf_counter()
        outs.append(function(params, s))
        per.append(time.perf_counter() - a)
    a = time.perf_counter()
    total = reduce_statistics(outs)
    red = time.perf_counter() - a
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    info = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "per": per, "reduce": red,
            "minflt": r1.ru_minflt - r0.ru_minflt, "sys": r1.ru_stime - r0.ru_stime, "pid": os.getpid()}
    return ShardStatistics(dict(total.stats, _info=info), total.value, total.n_sequences)


INLINE = [False]


def timed_shard_map(client, shards, where, split_every, callback=None):
    """Client side: :func:`structlearn.distributed._common.shard_map` (one task per worker), timed."""
    import psutil

    from structlearn.distributed._common import identity
    from structlearn.learning.shards import ShardStatistics, reduce_statistics

    groups = {}
    for i, s in enumerate(shards):
        groups.setdefault(tuple(where(i).get("workers", ())), (i, []))[1].append(s)
    procs = [psutil.Process(pid) for pid in client.run(os.getpid).values()]

    def map_statistics(function, params):
        w0 = [sum(p.cpu_times()[:2]) for p in procs]
        c0, t0 = time.process_time(), time.perf_counter()
        p = params if INLINE[0] else client.submit(identity, params, pure=False)
        stats = [client.submit(timed_sum_shards, function, p, *members, pure=False, **where(first))
                 for first, members in groups.values()]
        t1 = time.perf_counter()
        parts = [f.result() for f in stats]
        t2 = time.perf_counter()
        total = reduce_statistics([ShardStatistics({"gradient": r.stats["gradient"]}, r.value, r.n_sequences)
                                   for r in parts])
        t3 = time.perf_counter()
        EVALS.append({"map": t3 - t0, "submit": t1 - t0, "wait": t2 - t1, "reduce": t3 - t2,
                      "client_cpu": time.process_time() - c0,
                      "worker_proc_cpu": sum(sum(p.cpu_times()[:2]) - a for p, a in zip(procs, w0)),
                      "workers": [r.stats["_info"] for r in parts]})
        return total

    return map_statistics


def _toggle(on):
    from structlearn.crf._potentials import ChainFeatureModel as model
    if not hasattr(model, "_shard_copy_real"):
        model._shard_copy_real = model.shard_copy
    model.shard_copy = model._shard_copy_real if on else (lambda self: self)
    return on


def _median(values):
    return float(np.median(values)) if len(values) else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=None, help="first n training sentences (default all)")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--iter", type=int, default=6, help="L-BFGS iterations")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--ab", action="store_true", help="with and without the per-shard model copy")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--inline", action="store_true",
                    help="also run with w inside the worker's task instead of a task of its own")
    ap.add_argument("--verbose", action="store_true", help="one line per evaluation")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import dask.bag as db
    import numba
    from distributed import Client, LocalCluster

    import structlearn.distributed._crf_shared as shared
    from structlearn import distributed as sd
    from structlearn.learning import shards as sh

    numba.set_num_threads(1)
    X, y = bd.crf_data(a.sentences)
    bd.crf_model(1).fit(X[:50], y[:50])  # load the kernels
    plain, call = [], sh.ShardedObjective.__call__

    def timed_call(self, w, g=None):
        t, c = time.perf_counter(), time.process_time()
        out = call(self, w, g)
        plain.append((time.perf_counter() - t, time.process_time() - c))
        return out

    sh.ShardedObjective.__call__ = timed_call
    try:
        ref = bd.crf_model(a.iter).fit(X, y)
    finally:
        sh.ShardedObjective.__call__ = call
    print(f"CoNLL-2000 CRF, {len(X)} sentences, {a.shards} shards, {a.workers} worker(s), {a.iter} iterations; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"plain fit:   evaluations {len(plain)}, per evaluation wall {_median([p[0] for p in plain[1:]]):.3f} s "
          f"CPU {_median([p[1] for p in plain[1:]]):.3f} s; per iteration "
          f"{_median([e['seconds'] for e in ref.training_log_[1:]]):.3f} s", flush=True)
    shared.shard_map = timed_shard_map
    cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, memory_limit="4GiB",
                           dashboard_address=None, env={"NUMBA_NUM_THREADS": "1"})
    client = Client(cluster)
    try:
        variants = ["without copy", "with copy"] if a.ab else ["w as a task", "w inline"] if a.inline else ["as is"]
        for variant in variants * a.rounds:
            if a.ab:
                client.run(_toggle, variant == "with copy")
            INLINE[0] = variant == "w inline"
            EVALS.clear()
            m = sd.fit(bd.crf_model(a.iter), db.from_sequence(list(zip(X, y)), npartitions=a.shards), client)
            ev = EVALS[1:]
            print(f"distributed ({variant}): evaluations {len(EVALS)}, same iterations {m.n_iter_ == ref.n_iter_}, "
                  f"max |w - w(fit)| {np.max(np.abs(m.coef_ - ref.coef_)):.1e}; load {os.getloadavg()[0]:.1f}")
            print(f"  per evaluation (median): map wall {_median([e['map'] for e in ev]):.3f} s = submit "
                  f"{_median([e['submit'] for e in ev]):.3f} + wait {_median([e['wait'] for e in ev]):.3f} + "
                  f"client reduce {_median([e['reduce'] for e in ev]):.3f}; worker task wall "
                  f"{_median([max(i['wall'] for i in e['workers']) for e in ev]):.3f} CPU "
                  f"{_median([sum(i['cpu'] for i in e['workers']) for e in ev]):.3f} (worker reduce "
                  f"{_median([max(i['reduce'] for i in e['workers']) for e in ev]):.3f}); worker processes' CPU "
                  f"{_median([e['worker_proc_cpu'] for e in ev]):.3f}; client CPU "
                  f"{_median([e['client_cpu'] for e in ev]):.3f}; per iteration "
                  f"{_median([e['seconds'] for e in m.training_log_[1:]]):.3f} s", flush=True)
            if a.verbose:
                for k, e in enumerate(EVALS):
                    i = e["workers"][0]
                    print(f"    eval {k}: map {e['map']:.3f} wait {e['wait']:.3f} | worker {i['wall']:.3f} wall "
                          f"{i['cpu']:.3f} CPU, shards {np.round(i['per'], 3).tolist()}, faults {i['minflt']}, "
                          f"sys {i['sys']:.3f}")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
