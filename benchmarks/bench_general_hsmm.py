"""Benchmark: the general HSMM family — E-step and EM iteration against the arithmetic bound (issue 13).

For the explicit-duration (``HiddenSemiMarkovModel``), general (``GeneralHSMM``), residential-time and
variable-transition models on one simulated Gaussian sequence (T, M, D below), measured in one run:

* ``E-step`` — log-likelihood and every expected count EM needs (best of ``--repeat``);
* ``EM it`` — one EM iteration (E-step + M-step) through ``fit(n_iter=1)`` minus the final scoring;
* ``bound`` — a plain Numba loop doing the multiply-adds each recursion must do once: T·M·D for the
  explicit-duration model's window (plus T·M² transitions), T·(M·D)² for the super-label recursion
  the general, RT and VT models run on (Yu 2010: O(M²D²T) for the general model).

The columns ``× bound`` (E-step / bound) and ``EM/E`` (EM iteration / E-step) are the issue's goals (≤ 3 and
≤ 1.5). Usage::

    python benchmarks/bench_general_hsmm.py [--T 2000] [--M 3] [--D 20] [--repeat 3]
"""
import argparse
import time
import warnings

import numpy as np
from numba import njit

from structlearn import GeneralHSMM, HiddenSemiMarkovModel, ResidentialTimeHMM, VariableTransitionHMM
from structlearn.learning import general_hsmm_em as gem
from structlearn.learning import hsmm_em


@njit(cache=True)
def _bound(x, a, T):
    """T passes of y = x · a (K×K multiply-adds), the transition stage's arithmetic."""
    K = a.shape[0]
    y = np.zeros(K)
    s = 0.0
    for t in range(T):
        for i in range(K):
            xi = x[i]
            for j in range(K):
                y[j] += xi * a[i, j]
        s += y[0]
        x[0] = y[1] * 1e-300
    return s


def bound_seconds(K, T, repeat):
    x = np.random.default_rng(0).random(K)
    a = np.random.default_rng(1).random((K, K))
    _bound(x, a, 2)
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        _bound(x, a, T)
        best = min(best, time.perf_counter() - t0)
    return best


def best_of(fn, repeat):
    fn()
    out = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=2000)
    ap.add_argument("--M", type=int, default=3)
    ap.add_argument("--D", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    T, M, D = args.T, args.M, args.D
    rng = np.random.default_rng(0)
    X = (np.repeat(rng.integers(0, M, T // 10 + 1), 10)[:T] * 3.0 + rng.normal(size=T))[:, None]
    lengths = np.array([T])
    offsets = np.array([0, T])
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ed = HiddenSemiMarkovModel(M, max_duration=D, n_iter=1, random_state=0).fit(X)
        rows.append(("explicit duration", ed,
                     lambda: hsmm_em.m_step(ed._potentials(), X, lengths, offsets,
                                            hsmm_em.e_step(ed._potentials(), X, lengths, offsets)[0],
                                            "stde"),
                     lambda: hsmm_em.e_step(ed._potentials(), X, lengths, offsets)[0].marginals(edge="total"),
                     M * D + M * M))
        for cls in (GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM):
            m = cls(M, max_duration=D, n_iter=1, random_state=0).fit(X)

            def e(m=m):
                return gem.e_step(m._potentials(), X, lengths, offsets)

            def em_it(m=m):
                counts, _ = gem.e_step(m._potentials(), X, lengths, offsets)
                m._m_step_all(counts, X)

            rows.append((cls.__name__, m, em_it, e, (M * D) ** 2))
    print(f"T={T} M={M} D={D}, best of {args.repeat}; seconds")
    print(f"{'model':24s} {'E-step':>9s} {'EM it':>9s} {'bound':>9s} {'x bound':>8s} {'EM/E':>6s}")
    for name, _, em_it, e, work in rows:
        te = best_of(e, args.repeat)
        ti = best_of(em_it, args.repeat)
        K = int(round(np.sqrt(work)))
        tb = bound_seconds(K, T, args.repeat)
        print(f"{name:24s} {te:9.4f} {ti:9.4f} {tb:9.4f} {te / tb:8.2f} {ti / te:6.2f}", flush=True)


if __name__ == "__main__":
    main()
