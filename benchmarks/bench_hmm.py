"""Benchmark: structlearn.hmm against hmmlearn, side by side in one process (issue 15).

Workloads: (sequences × length, K) in {1 × 10⁵ with K = 5, 1 × 10⁵ with K = 50, 1000 × 100 with K = 5}
× emissions {Gaussian diag (F = 3), Gaussian full (F = 3), categorical (V = 10)}; data drawn from the
model itself (so the parameters are those of the timed models, the same in both libraries). Measured
(best of ``--repeat`` runs, alternating the contenders):

* ``E-step``   — what one EM iteration needs from the data: log-likelihood, posteriors γ and expected
  transition counts Σ_t ξ_t (hmmlearn ``_do_estep``, which also accumulates the emission statistics;
  structlearn ``_e_step``, whose emission statistics are computed in the M-step);
* ``Viterbi``  — ``decode(X, lengths)``;
* ``EM iter``  — one E-step plus one M-step (hmmlearn ``_do_estep`` + ``_do_mstep``; structlearn
  the sharded E-step of ``fit`` + ``_apply_statistics``), from the same parameters.

hmmlearn runs with ``implementation="log"`` (its default) and ``"scaling"``; the ratio columns are
hmmlearn seconds / structlearn seconds (> 1: structlearn faster) against each. Before timing, the
script checks that both libraries give the same log-likelihood and Viterbi score (printed: the largest
relative difference).

Run::

    .venv/bin/python benchmarks/bench_hmm.py [--repeat 5] [--threads N] [--only "K=5"] [--quick] [--markdown]

``--threads`` sets NUMBA_NUM_THREADS (structlearn's kernels parallelise over sequences; hmmlearn is
single-threaded C++); ``--blas-threads`` (default 1) the BLAS threads of both libraries (threaded
OpenBLAS on the skinny (N, F) @ (F, K) products of the emission densities and M-steps is up to 50×
slower than one thread on a busy machine); ``--quick`` divides the lengths by 100 (a smoke run);
``--markdown`` prints the header and summary as paragraphs and the result table as a GitHub Markdown
table (no per-row progress lines), for the documentation's performance page.
"""
import argparse
import logging
import os
import sys
import time


def _setup_threads(argv):
    """Thread counts must be set before numpy / numba are imported."""
    env = {"--threads": ["NUMBA_NUM_THREADS"], "--blas-threads": ["OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"]}
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    for i, a in enumerate(argv):
        key, _, val = a.partition("=")
        if key in env:
            val = val or (argv[i + 1] if i + 1 < len(argv) else "")
            for name in env[key]:
                os.environ[name] = val


WORKLOADS = [("1 x 100000, K=5", 1, 100_000, 5), ("1 x 100000, K=50", 1, 100_000, 50),
             ("1000 x 100, K=5", 1000, 100, 5)]
EMISSIONS = ["gaussian-diag", "gaussian-full", "categorical"]
F, V = 3, 10


def make_params(kind, K, seed=0):
    """Random parameters {attribute: array} of a K-state model with emissions ``kind``."""
    import numpy as np
    rng = np.random.default_rng(seed)
    trans = rng.dirichlet(np.ones(K), size=K) + 4.0 * np.eye(K)
    p = {"startprob_": rng.dirichlet(np.ones(K)), "transmat_": trans / trans.sum(axis=1, keepdims=True)}
    if kind.startswith("gaussian"):
        p["means_"] = rng.normal(scale=3.0, size=(K, F))
        if kind == "gaussian-diag":
            p["covars_"] = rng.uniform(0.5, 2.0, (K, F))
        else:
            A = rng.normal(size=(K, F, F))
            p["covars_"] = A @ np.transpose(A, (0, 2, 1)) / F + np.eye(F)
    else:
        p["emissionprob_"] = rng.dirichlet(np.ones(V), size=K)
    return p


def make_data(kind, params, n_seq, T, seed=1):
    """Observations (n_seq·T, F or 1) drawn from the model, and the lengths."""
    import numpy as np
    rng = np.random.default_rng(seed)
    K = params["startprob_"].shape[0]
    cdf = np.cumsum(params["transmat_"], axis=1)
    N = n_seq * T
    z = np.empty(N, dtype=np.int64)
    u = rng.random(N)
    for b in range(n_seq):
        o = b * T
        z[o] = np.searchsorted(np.cumsum(params["startprob_"]), u[o])
        for t in range(o + 1, o + T):
            z[t] = min(np.searchsorted(cdf[z[t - 1]], u[t]), K - 1)
    if kind == "categorical":
        ecdf = np.cumsum(params["emissionprob_"], axis=1)
        x = (rng.random(N)[:, None] > ecdf[z]).sum(axis=1)
        return np.minimum(x, V - 1)[:, None], [T] * n_seq
    eps = rng.standard_normal((N, F))
    if kind == "gaussian-diag":
        X = params["means_"][z] + np.sqrt(params["covars_"][z]) * eps
    else:
        L = np.linalg.cholesky(params["covars_"])
        X = params["means_"][z] + np.einsum("nij,nj->ni", L[z], eps)
    return X, [T] * n_seq


def make_models(kind, params):
    """(structlearn model, hmmlearn-log model, hmmlearn-scaling model) with the same parameters."""
    from hmmlearn import hmm as H

    from structlearn import hmm as S
    K = params["startprob_"].shape[0]
    models = []
    for lib, impl in ((S, "log"), (H, "log"), (H, "scaling")):
        if kind.startswith("gaussian"):
            m = lib.GaussianHMM(K, covariance_type=kind.split("-")[1], init_params="", implementation=impl)
        else:
            m = lib.CategoricalHMM(K, n_features=V, init_params="", implementation=impl)
        for name, value in params.items():
            setattr(m, name, value.copy())
        models.append(m)
    return models


def operations(model, X, lengths, ours):
    """{operation: callable() -> float}: the timed operations of one model."""
    import numpy as np
    if ours:
        from structlearn.utils.validation import check_lengths
        lens, offsets = check_lengths(lengths, X.shape[0])
        Xc = model._check_X(X)

        def estep():
            return model._e_step(Xc, lens, offsets)[1]

        from structlearn.learning.restarts import n_blocks
        from structlearn.learning.shards import Shard, map_shards, split_shards
        shards = split_shards(Shard(Xc, lens, offsets), n_blocks(model.n_jobs))

        def em_iter():  # one iteration of fit's EM: sharded E-step, then the M-step of its statistics
            total = map_shards(*model._shard_function(), shards, model.n_jobs)
            model._apply_statistics(total, Xc)
            return total.value
    else:
        from sklearn.utils import check_array
        Xc = check_array(X)
        lens = np.asarray(lengths)

        def estep():
            return model._do_estep(Xc, lens)[1]

        def em_iter():
            stats, ll = model._do_estep(Xc, lens)
            model._do_mstep(stats)
            return ll

    def viterbi():
        return model.decode(X, lengths)[0]

    return {"E-step": estep, "Viterbi": viterbi, "EM iter": em_iter}


def best_time(fn, repeat, budget=20.0):
    """Best wall time of ``repeat`` calls (fewer when one call exceeds ``budget`` / repeat seconds)."""
    best = float("inf")
    value = None
    spent = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        spent += dt
        if spent > budget:
            break
    return best, value


def run(repeat=5, only=None, quick=False, out=sys.stdout):
    import numpy as np
    logging.getLogger("hmmlearn").setLevel(logging.ERROR)
    rows = []
    for label, n_seq, T, K in WORKLOADS:
        if quick:
            T = max(10, T // 100) if n_seq == 1 else max(10, T // 10)
            n_seq = max(1, n_seq // 10) if n_seq > 1 else 1
            label = f"{n_seq} x {T}, K={K} (quick)"
        for kind in EMISSIONS:
            name = f"{label:<22} {kind}"
            if only and only not in name:
                continue
            params = make_params(kind, K)
            X, lengths = make_data(kind, params, n_seq, T)
            small = (X[: 5 * min(T, 50)], [min(T, 50)] * 5) if n_seq > 1 else (X[:200], [200])
            ours, hlog, hscal = make_models(kind, params)
            # the same numbers first (and warm-up: Numba caches, BLAS)
            for m in (ours, hlog, hscal):
                m.score(*small)
            ll = [m.score(X, lengths) for m in (ours, hlog, hscal)]
            vit = [m.decode(X, lengths)[0] for m in (ours, hlog)]
            d_ll = max(abs(ll[1] - ll[0]), abs(ll[2] - ll[0])) / abs(ll[0])
            d_vit = abs(vit[1] - vit[0]) / abs(vit[0])
            ops = [operations(m, X, lengths, i == 0) for i, m in enumerate((ours, hlog, hscal))]
            for op in ("E-step", "Viterbi", "EM iter"):
                if op == "EM iter":  # each from the same parameters
                    for m in (ours, hlog, hscal):
                        for pname, value in params.items():
                            setattr(m, pname, value.copy())
                t = []
                for i, o in enumerate(ops):
                    if op == "Viterbi" and i == 2:
                        t.append(t[1])  # hmmlearn's Viterbi has one implementation
                        continue
                    if op == "EM iter":
                        m = (ours, hlog, hscal)[i]

                        def fn(o=o, m=m):
                            for pname, value in params.items():
                                setattr(m, pname, value.copy())
                            return o[op]()
                    else:
                        fn = o[op]
                    t.append(best_time(fn, repeat)[0])
                rows.append((name, op, t[0], t[1], t[2], d_ll, d_vit))
                print(f"{name:<38} {op:<8} structlearn {t[0]:9.4f}s  hmmlearn-log {t[1]:9.4f}s "
                      f"({t[1] / t[0]:6.2f}x)  hmmlearn-scaling {t[2]:9.4f}s ({t[2] / t[0]:6.2f}x)  "
                      f"|dlogL|/|logL| {d_ll:.1e}  |dViterbi| {d_vit:.1e}", file=out, flush=True)
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description="structlearn.hmm vs hmmlearn (issue 15)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="NUMBA_NUM_THREADS (set before import)")
    ap.add_argument("--blas-threads", type=int, default=1, help="OPENBLAS/MKL threads (default 1)")
    ap.add_argument("--only", default=None, help="run the rows whose name contains this text")
    ap.add_argument("--quick", action="store_true", help="lengths / 100: a smoke run")
    ap.add_argument("--markdown", action="store_true", help="the result table as a GitHub Markdown table")
    args = ap.parse_args(argv)
    import numba
    import numpy as np
    import hmmlearn
    print(f"structlearn.hmm vs hmmlearn {hmmlearn.__version__}; numpy {np.__version__}; Numba threads "
          f"{numba.get_num_threads()}; BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS')}; best of "
          f"{args.repeat}; ratio = hmmlearn s / structlearn s")
    if args.markdown:
        import io
        print()
        rows = run(args.repeat, args.only, args.quick, out=io.StringIO())
        print("| workload | op | structlearn s | hmmlearn-log | ratio | hmmlearn-scal | ratio |")
        print("|:--|:--|--:|--:|--:|--:|--:|")
        for name, op, a, b, c, _, _ in rows:
            print(f"| {' '.join(name.split())} | {op} | {a:.4f} | {b:.4f} | {b / a:.2f} | {c:.4f} | {c / a:.2f} |")
    else:
        rows = run(args.repeat, args.only, args.quick)
        print(f"\n{'workload':<38} {'op':<8} {'structlearn s':>13} {'hmmlearn-log':>13} {'ratio':>7} "
              f"{'hmmlearn-scal':>13} {'ratio':>7}")
        for name, op, a, b, c, _, _ in rows:
            print(f"{name:<38} {op:<8} {a:13.4f} {b:13.4f} {b / a:7.2f} {c:13.4f} {c / a:7.2f}")
    if rows:
        r_log = np.array([b / a for _, _, a, b, _, _, _ in rows])
        r_sc = np.array([c / a for _, _, a, _, c, _, _ in rows])
        bar = "\\|" if args.markdown else "|"
        print(f"\ngeometric mean ratio: {np.exp(np.log(r_log).mean()):.2f}x vs log, "
              f"{np.exp(np.log(r_sc).mean()):.2f}x vs scaling; min {r_log.min():.2f}x / {r_sc.min():.2f}x; "
              f"largest {bar}dlogL{bar}/{bar}logL{bar} {max(r[5] for r in rows):.1e}")


if __name__ == "__main__":
    _setup_threads(sys.argv[1:])
    main()
