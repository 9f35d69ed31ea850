"""Out-of-core streaming with dask-ml's ``Incremental``: online EM of an HMM and an HSMM on a series that is
never held in memory at once.

The stream is a dask array whose blocks are drawn lazily, each from the same 3-state semi-Markov source
(Gaussian levels 0, 3, 6; Poisson durations with means 8, 15, 25), so a block exists only while a task
uses it. ``dask_ml.wrappers.Incremental`` walks the blocks and calls ``partial_fit(X_block, lengths_block)``
on each (its ``y`` is a dask array of the blocks' sequence lengths, one chunk per block) — online
(stepwise) EM of :class:`structlearn.hmm.GaussianHMM` and :class:`structlearn.HiddenSemiMarkovModel`
(Cappé & Moulines 2009; Yu 2010 §2.3.3), one block one sequence. The script prints the learnt levels,
the HSMM's mean durations and the held-out log-likelihood per row against batch EM on one block (what
fits in memory). On this stream the HSMM's online EM finds the source (levels 0.01, 3.00, 6.01, mean
durations 7.8, 14.8, 25.2 after 60 blocks of 600 rows) while the HMM's stays at a worse optimum from its
first block's start (levels 1.8, 2.3, 6.0): the duration law is what carries the segments.

Run::

    .venv/bin/python examples/dask_incremental.py [--quick] [--blocks N] [--block-rows R] [--figures DIR]

Needs ``dask[array]`` and ``dask-ml`` (``pip install -e '.[dask]' dask-ml``). ``--quick``: 12 blocks of 600
rows (a few seconds); default 200 blocks of 5 000 rows (10⁶ rows). ``--figures DIR``: the HSMM's fitted
duration pmfs (``dask_incremental_durations.png``, :func:`structlearn.plotting.plot_durations`).
"""
import argparse
import time
import warnings

import numpy as np

from structlearn import HiddenSemiMarkovModel
from structlearn.hmm import GaussianHMM

LEVELS = np.array([0.0, 3.0, 6.0])
MEAN_DURATIONS = np.array([8.0, 15.0, 25.0])
TRANSMAT = np.array([[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
D = 60


def draw_block(seed, rows):
    """One block of the stream: a run of segments of the source, cut to ``rows`` rows (float64 (rows, 1))."""
    rng = np.random.default_rng(seed)
    out, state, n = [], int(rng.integers(0, 3)), 0
    while n < rows:
        d = min(D, 1 + rng.poisson(MEAN_DURATIONS[state] - 1))
        out.append(rng.normal(LEVELS[state], 1.0, d))
        n += d
        state = int(rng.choice(3, p=TRANSMAT[state]))
    return np.concatenate(out)[:rows, None]


def stream(n_blocks, rows, seed=0):
    """The stream as a dask array X (n_blocks·rows, 1), each block drawn when a task needs it, and the
    ``lengths`` of every block's sequences as a dask array with one chunk per block (here one sequence a
    block): ``Incremental`` hands block i of both to ``partial_fit(X_i, lengths_i)``."""
    import dask
    import dask.array as da

    blocks = [da.from_delayed(dask.delayed(draw_block)(seed + b, rows), shape=(rows, 1), dtype=np.float64)
              for b in range(n_blocks)]
    X = da.concatenate(blocks, axis=0).rechunk((rows, 1))
    lengths = da.from_array(np.full(n_blocks, rows, dtype=np.int64), chunks=1)
    return X, lengths


def models():
    # random_state=2: from seeds 0 and 1 EM of the HMM (hmmlearn's too, from the same start) stalls with two
    # or three levels merged on these blocks
    return {"HMM": GaussianHMM(3, n_iter=100, random_state=2),
            "HSMM": HiddenSemiMarkovModel(3, duration="poisson", max_duration=D, random_state=0)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="12 blocks of 600 rows")
    ap.add_argument("--blocks", type=int, default=None)
    ap.add_argument("--block-rows", type=int, default=None)
    ap.add_argument("--figures", default=None, metavar="DIR", help="save the duration figure in DIR")
    args = ap.parse_args(argv)
    from dask_ml.wrappers import Incremental

    n_blocks = args.blocks or (12 if args.quick else 200)
    rows = args.block_rows or (600 if args.quick else 5000)
    X, lengths = stream(n_blocks, rows)
    held_out = np.concatenate([draw_block(10_000 + b, rows) for b in range(3)])
    print(f"stream: {n_blocks} blocks x {rows} rows = {n_blocks * rows} rows (never materialised); "
          f"held-out: {held_out.shape[0]} rows")
    results = {}
    for name, est in models().items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # ConvergenceWarning of the one-block batch fit
            inc = Incremental(est, shuffle_blocks=False).fit(X, lengths)
            online = inc.estimator_
            batch = models()[name].fit(draw_block(0, rows))
        seconds = time.perf_counter() - t0
        levels = np.asarray(online.means_ if name == "HMM" else online.emission_.means).reshape(3, -1)[:, 0]
        order = np.argsort(levels)
        means = levels[order]
        row = {"levels": means, "online": online.score(held_out) / held_out.shape[0],
               "batch one block": batch.score(held_out) / held_out.shape[0], "seconds": seconds,
               "chunks": online.n_chunks_seen_, "model": online}
        if name == "HSMM":
            row["durations"] = online.duration_.mean(D)[order]
        results[name] = row
    print(f"{'model':6} {'levels (source 0, 3, 6)':28} {'mean durations (8, 15, 25)':28} "
          f"{'held-out log L / row: online':30} {'batch on one block':18} {'s':>6}")
    for name, r in results.items():
        dur = " ".join(f"{v:6.2f}" for v in r["durations"]) if "durations" in r else "—"
        print(f"{name:6} {' '.join(f'{v:6.3f}' for v in r['levels']):28} {dur:28} {r['online']:30.4f} "
              f"{r['batch one block']:18.4f} {r['seconds']:6.1f}")
    if args.figures:
        from structlearn.plotting import plot_durations, save_figure

        hsmm = results["HSMM"]["model"]
        save_figure(plot_durations(hsmm, X=held_out), args.figures, "dask_incremental_durations")
    return results


if __name__ == "__main__":
    main()
