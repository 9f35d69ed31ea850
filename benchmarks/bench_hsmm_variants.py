"""The HSMM variants of issue 14 against their arithmetic bound, and the multi-channel approximation's time
and error against exact inference as the number of channels grows.

**E-step table** (``--section estep``): on one simulated sequence of T observations (default 10⁵), the
E-step of every model (log-likelihood and the expected counts its M-step reads) and, measured alongside in
this process, a plain Numba loop ``y[j] += x[i] · a[i, j]`` over an (I, J) matrix T times — the
multiply-adds the model's recursion needs once per token (see ``benchmarks/bench_hsmm.py``):

* explicit-duration HSMM (the reference; M = 5 states, D = 100): (I, J) = (M, D);
* ``SwitchingHSMM`` (R = 2 regimes × M = 3 states: K = 6 product states, D = 100): (K, D) — the HSMM's
  forward–backward on the product states;
* HSMM with ``EventSequence`` observations (marked events on a tick grid, 5 states, D = 100): (M, D);
* ``MultiChannelHSMM(inference="factored")`` (C = 2 channels × M = 3 states, D = 30): (C·M, D) per sweep,
  times the sweeps the factored messages took (reported);
* ``AdaptiveFactorHSMM`` (3 states, D = 60): its online filter over T_adaptive rows (default 10⁴; a
  per-row filter in Python), against the same streaming filter with the factors frozen (walk variances 0):
  the ``× bound`` column is adaptive / frozen here.

``× bound`` = E-step / bound (issue 13's yardstick: ≤ 3 is good).

**Multi-channel table** (``--section multichannel``): ``benchmarks/multichannel_hsmm_factored.py`` — for
C = 1..4 channels (``--quick``: 1..3) of M = 3 states, D = 5, T = 200, exact (the product of the channels'
(state, remaining duration) chains) and factored inference: seconds, sweeps, posterior error (mean L1 per
(t, channel), largest), Viterbi agreement and |Δ log L|.

Run::

    .venv/bin/python benchmarks/bench_hsmm_variants.py [--quick] [--T 100000] [--T-adaptive 10000]
                                                       [--section all|estep|multichannel] [--repeat 3]
"""
import argparse
import os
import pathlib
import sys
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _timing import best_of  # noqa: E402


def _hsmm_estep(model, X):
    from structlearn.hsmm import _em as hsmm_em
    L, O = np.array([X.shape[0]]), np.array([0, X.shape[0]])
    sm, _ = hsmm_em.e_step(model._potentials(), X, L, O)
    sm.marginals(edge="total")
    sm.duration_marginals()


def explicit_duration(T, rng):
    from structlearn import HiddenSemiMarkovModel
    from structlearn.distributions import durations as du
    from structlearn.distributions import emissions as em
    M, D = 5, 100
    m = HiddenSemiMarkovModel(M, duration=du.Poisson(lam=np.linspace(10, 40, M)),
                              emission=em.Gaussian(np.arange(M) * 1.0, np.ones(M)), max_duration=D,
                              init_params="")
    m.startprob_ = np.full(M, 1.0 / M)
    A = rng.dirichlet(np.ones(M), size=M)
    np.fill_diagonal(A, 0)
    m.transmat_ = A / A.sum(1, keepdims=True)
    m.duration_, m.emission_ = m.duration, m.emission
    m.max_duration_, m.n_features_in_ = D, 1
    X = m.sample(T, random_state=0)[0]
    return "explicit-duration HSMM (M=5, D=100)", (M, D), lambda: _hsmm_estep(m, X), None


def switching(T, rng):
    from structlearn import SwitchingHSMM
    R, M, D = 2, 3, 100
    truth = SwitchingHSMM(R, M, duration="poisson", max_duration=D, init_params="", random_state=0)
    truth.regime_startprob_ = np.full(R, 1.0 / R)
    truth.regime_transmat_ = np.array([[0.9, 0.1], [0.2, 0.8]])
    truth.startprob_ = rng.dirichlet(np.ones(M), size=R)
    A = rng.dirichlet(np.ones(M), size=(R, M))
    A[:, np.arange(M), np.arange(M)] = 0
    truth.transmat_ = A / A.sum(-1, keepdims=True)
    from structlearn.distributions import durations as du
    from structlearn.distributions import emissions as em
    truth.duration_ = du.Poisson(lam=rng.uniform(5, 40, R * M))
    truth.emission_ = em.Gaussian(np.arange(M) * 1.5, np.ones(M))
    truth.max_duration_, truth.n_features_in_ = D, 1
    X = np.asarray(truth.sample(T, random_state=0)[0])
    return "SwitchingHSMM (R=2 x M=3, D=100)", (R * M, D), lambda: _hsmm_estep(truth, X), None


def event_sequence(T, rng):
    from structlearn import HiddenSemiMarkovModel
    from structlearn.distributions import durations as du
    from structlearn.distributions.emissions.event import EventSequence
    M, D, V = 5, 100, 8
    emission = EventSequence(rate=np.linspace(0.05, 0.5, M), probs=rng.dirichlet(np.ones(V), size=M))
    m = HiddenSemiMarkovModel(M, duration=du.Poisson(lam=np.linspace(10, 40, M)), emission=emission,
                              max_duration=D, init_params="")
    m.startprob_ = np.full(M, 1.0 / M)
    A = rng.dirichlet(np.ones(M), size=M)
    np.fill_diagonal(A, 0)
    m.transmat_ = A / A.sum(1, keepdims=True)
    m.duration_, m.emission_ = m.duration, emission
    m.max_duration_, m.n_features_in_ = D, 1
    X = m.sample(T, random_state=0)[0]
    return "HSMM + EventSequence (M=5, D=100)", (M, D), lambda: _hsmm_estep(m, X), None


def multichannel(T, rng):
    import multichannel_hsmm_factored as mc
    C, M, D = 2, 3, 30
    m = mc.random_model(C, M, D, rng)
    m.set_params(inference="factored")
    X, _ = m.sample(T, random_state=0)
    L, O = np.array([T]), np.array([0, T])
    sweeps = []

    def run():
        out = m._infer(X, L, O, statistics=True)
        sweeps.append(out["factored"].n_sweeps)

    return "MultiChannelHSMM factored (C=2 x M=3, D=30)", (C * M, D), run, sweeps


def adaptive(T, rng):
    from structlearn import AdaptiveFactorHSMM, HiddenSemiMarkovModel
    from structlearn.distributions import durations as du
    from structlearn.distributions import emissions as em
    M, D = 3, 60
    base = HiddenSemiMarkovModel(M, duration=du.Poisson(lam=np.array([10.0, 20.0, 30.0])),
                                 emission=em.Gaussian(np.arange(M) * 2.0, np.ones(M)), max_duration=D,
                                 init_params="")
    base.startprob_ = np.full(M, 1.0 / M)
    base.transmat_ = np.array([[0, .5, .5], [.5, 0, .5], [.5, .5, 0]])
    base.duration_, base.emission_ = base.duration, base.emission
    base.max_duration_, base.n_features_in_ = D, 1
    X = base.sample(T, random_state=0)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = AdaptiveFactorHSMM(M, duration="poisson", max_duration=D, n_iter=3, random_state=0).fit(X[:3000])
    saved = (est.duration_walk_var_, est.emission_walk_var_)

    def run_adaptive():
        est.duration_walk_var_, est.emission_walk_var_ = saved
        est.filter(X)

    def run_frozen():
        est.duration_walk_var_, est.emission_walk_var_ = 0.0, 0.0
        est.filter(X)
        est.duration_walk_var_, est.emission_walk_var_ = saved

    return "AdaptiveFactorHSMM filter (M=3, D=60)", None, run_adaptive, run_frozen


def estep_table(T, T_adaptive, repeat):
    from bench_hsmm import _bound_kernel
    bound = _bound_kernel()
    rng = np.random.default_rng(0)
    rows = []
    for make, t_row in ((explicit_duration, T), (switching, T), (event_sequence, T), (multichannel, T),
                        (adaptive, T_adaptive)):
        name, shape, run, extra = make(t_row, rng)
        run()  # compile
        t_model, _ = best_of(run, repeat)
        if shape is None:   # the adaptive filter: against the frozen filter
            run_ref = extra
            run_ref()
            t_ref, _ = best_of(run_ref, repeat)
            rows.append((name, t_row, "-", t_model, t_ref, t_model / t_ref, "frozen factors"))
        else:
            a = np.random.default_rng(1).random(shape)
            x = np.random.default_rng(0).random(shape[0])
            bound(x, a, 2)
            passes = 1.0
            note = ""
            if isinstance(extra, list) and extra:   # factored multi-channel: sweeps of messages
                passes = float(np.mean(extra))
                note = f"{passes:.1f} sweeps"
            t_b, _ = best_of(lambda: bound(x, a, int(t_row * passes)), repeat)
            rows.append((name, t_row, shape[0] * shape[1], t_model, t_b, t_model / t_b, note))
        print(f"  measured {name}", flush=True)
    print(f"\nE-step against the arithmetic bound (best of {repeat}; "
          f"NUMBA_NUM_THREADS={os.environ.get('NUMBA_NUM_THREADS', 'default')})")
    print(f"{'model':<46} {'T':>7} {'madd/tok':>9} {'E-step s':>9} {'bound s':>9} {'x bound':>8}  note")
    for name, t_row, work, te, tb, ratio, note in rows:
        print(f"{name:<46} {t_row:>7} {work!s:>9} {te:9.4f} {tb:9.4f} {ratio:8.2f}  {note}")
    ratios = [r[5] for r in rows if r[2] != "-"]
    print(f"geometric mean x bound (E-steps): {float(np.exp(np.mean(np.log(ratios)))):.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="T = 10⁴, T_adaptive = 2000, C up to 3")
    ap.add_argument("--T", type=int, default=100_000)
    ap.add_argument("--T-adaptive", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--section", choices=("all", "estep", "multichannel"), default="all")
    args = ap.parse_args(argv)
    T, Ta, repeat = (10_000, 2_000, 1) if args.quick else (args.T, args.T_adaptive, args.repeat)
    if args.section in ("all", "estep"):
        estep_table(T, Ta, repeat)
    if args.section in ("all", "multichannel"):
        import multichannel_hsmm_factored as mc
        print("\nMulti-channel HSMM: factored against exact inference")
        mc.main(["--quick"] if args.quick else [])


if __name__ == "__main__":
    main()
