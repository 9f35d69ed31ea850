"""One EM iteration against its E-step for the HMM, the explicit-duration HSMM and the hierarchical HMM
(issue 21, goal 3: the M-step and the bookkeeping must not dominate; goal ≤ 1.3).

Each model is fitted briefly on simulated data, then, on the same data, the script times (best of
``--repeat``) the E-step that ``fit`` runs — the map of the estimator's per-shard function
(:mod:`structlearn.learning.shards`) — and one whole EM iteration of ``fit`` (that E-step, then the
estimator's own M-step from the summed statistics), and prints their ratio:

* ``GaussianHMM``: K = 5 states, T rows (default 10⁵);
* ``HiddenSemiMarkovModel``: K = 5, nonparametric durations, D = 100, T rows;
* ``HierarchicalHMM``: a random depth-3 hierarchy with Gaussian emissions, sequences sampled from it up
  to about T / 10 rows (its E-step per row is the flattened chain's).

Run::

    .venv/bin/python benchmarks/bench_em_ratio.py [--T 100000] [--repeat 5]
"""
import argparse
import os
import pathlib
import sys
import warnings

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import best_of  # noqa: E402


def hmm_like(est, X):
    from structlearn.learning.shards import map_shards
    est.fit(X)
    shard = est._shard_from_data(X)

    def estep():
        return map_shards(*est._shard_function(), [shard])

    def em_iteration():
        est._apply_statistics(estep(), X)

    return estep, em_iteration


def hhmm(n_rows, seed=3):
    from structlearn import HierarchicalHMM
    from structlearn.learning.shards import Shard, map_shards
    from structlearn.distributions.emissions import Gaussian
    from tests.hhmm.test_hhmm import random_model
    truth, _ = random_model(seed, 3, 3, "all", gaussian=True)
    truth._build()
    n_seq = max(10, n_rows // 22)
    smp = truth.sample(n_seq, max_length=400, random_state=2)
    spec, root = truth.hierarchy_.to_dict(), truth.hierarchy_.submodel_names[0]
    m = HierarchicalHMM(spec, Gaussian(), root=root, init_params="ste", random_state=0, n_iter=2)
    m.fit(smp.X, smp.lengths)
    X, L, O = m._data(smp.X, smp.lengths)
    shard = Shard(X, L, O)
    topo = m.hierarchy_.theta() > 0

    def estep():
        return map_shards(*m._shard_function(posteriors=True), [shard])

    def em_iteration():
        tot = estep()
        m._m_step(X, tot.stats["counts"], tot.posteriors, topo, tot.stats.get("emission"))

    return X.shape[0], estep, em_iteration


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from structlearn import GaussianHMM, HiddenSemiMarkovModel
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(k % 5, 0.5, 200) for k in range(args.T // 200)])[:, None]
    rows = []
    for name, est in (("GaussianHMM (K=5)", GaussianHMM(5, n_iter=2, random_state=0)),
                      ("HiddenSemiMarkovModel (K=5, D=100)",
                       HiddenSemiMarkovModel(5, max_duration=100, n_iter=2, random_state=0))):
        e, it = hmm_like(est, X)
        rows.append((name, X.shape[0], best_of(e, args.repeat)[0], best_of(it, args.repeat)[0]))
    n, e, it = hhmm(args.T // 10)
    rows.append(("HierarchicalHMM (depth 3, Gaussian)", n, best_of(e, args.repeat)[0],
                 best_of(it, args.repeat)[0]))
    print(f"EM iteration against its E-step, best of {args.repeat} "
          f"(NUMBA_NUM_THREADS={os.environ.get('NUMBA_NUM_THREADS', 'default')})")
    print(f"{'model':<38} {'rows':>7} {'E-step s':>9} {'EM it s':>9} {'ratio':>6}")
    for name, n, te, ti in rows:
        print(f"{name:<38} {n:>7} {te:9.4f} {ti:9.4f} {ti / te:6.2f}")
    worst = max(ti / te for _, _, te, ti in rows)
    print(f"largest ratio EM iteration / E-step: {worst:.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
