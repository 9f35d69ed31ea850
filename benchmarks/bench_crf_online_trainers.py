"""CRFsuite's online trainers (l2sgd, ap, pa, arow): structlearn.LinearChainCRF vs python-crfsuite, side by
side in one run.

Same input for both: the first ``--train-sentences`` / ``--test-sentences`` sentences of CoNLL-2000 under
the CRFsuite chunking template (``structlearn.io.conll.featurize``), each trainer with CRFsuite's default
parameters and ``--max-iterations`` epochs. CRFsuite draws its instance order from the process's
``rand()`` stream without seeding it; ``srand(1)`` is called before each of its runs, so it starts where a
fresh process starts, and structlearn reproduces that order (``shuffle="crfsuite"``, the default).

Per trainer it prints: the share of test sequences tagged identically by both models, the largest
|weight difference| over all features (CRFsuite's model file read back exactly, a missing feature being 0),
the epochs of each side, and the warm training time of each side — best and median of ``--repeat`` runs,
the two sides interleaved; structlearn's time is ``fit`` (from the attribute dicts to the model, its
kernels already compiled by a warm-up fit), CRFsuite's is ``Trainer.append`` of every sequence plus
``train`` — and the ratio of the best times (structlearn / python-crfsuite; < 1: structlearn faster).

    python benchmarks/bench_crf_online_trainers.py [--train-sentences 1000] [--test-sentences 500]
        [--max-iterations 50] [--repeat 3] [--algorithms l2sgd,ap,pa,arow] [--data-home DIR]

Needs the ``bench`` extra (python-crfsuite) and glibc (for ``srand``).

Measured 2026-12-08 on the 2-core machine, otherwise idle, the defaults (1000 / 500 sentences, 50 epochs,
3 runs): every trainer 100 % identical test sequences; max |weight difference| 0 for ap, pa and arow (equal
to the last bit), 1.36e-12 for l2sgd; training structlearn / python-crfsuite best (median): l2sgd 5.23
(6.15) / 6.44 (6.58) s, ratio 0.811; ap 1.66 (1.94) / 2.67 (2.75) s, 0.624; pa 2.10 (2.25) / 2.37 (2.61) s,
0.886; arow 1.42 (1.62) / 2.27 (2.36) s, 0.626; geometric mean ratio 0.728.
"""
import argparse
import ctypes
import ctypes.util
import os
import statistics
import tempfile
import time

import numpy as np

from structlearn.crf.linear_chain import LinearChainCRF
from structlearn.datasets import load_conll2000
from structlearn.io.conll import featurize
from structlearn.io.templates import get_template


def crfsuite_fit(algorithm, Xtr, ytr, max_iterations, path):
    """python-crfsuite: append + train into ``path``; returns (seconds, epochs)."""
    import pycrfsuite

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    t0 = time.perf_counter()
    trainer = pycrfsuite.Trainer(algorithm=algorithm, verbose=False)
    for x, y in zip(Xtr, ytr):
        trainer.append(x, y)
    trainer.set_params({"max_iterations": max_iterations})
    libc.srand(1)
    trainer.train(path)
    return time.perf_counter() - t0, len(trainer.logparser.iterations)


def ours_fit(algorithm, Xtr, ytr, max_iterations):
    """structlearn: ``fit``; returns (seconds, estimator)."""
    t0 = time.perf_counter()
    crf = LinearChainCRF(algorithm=algorithm, max_iterations=max_iterations).fit(Xtr, ytr)
    return time.perf_counter() - t0, crf


def max_weight_difference(ours, theirs):
    """max |w_ours - w_crfsuite| over the state and transition features of either model."""
    out = 0.0
    for a, b in ((ours.state_features_, theirs.state_features_),
                 (ours.transition_features_, theirs.transition_features_)):
        for k in set(a) | set(b):
            out = max(out, abs(a.get(k, 0.0) - b.get(k, 0.0)))
    return out


def compare(algorithm, Xtr, ytr, Xte, max_iterations, repeat):
    import pycrfsuite

    ours_fit(algorithm, Xtr[:20], ytr[:20], 1)  # warm-up: load / compile the kernels once
    t_ours, t_theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{algorithm}.crfsuite")
        for _ in range(repeat):
            t, theirs_epochs = crfsuite_fit(algorithm, Xtr, ytr, max_iterations, path)
            t_theirs.append(t)
            t, ours = ours_fit(algorithm, Xtr, ytr, max_iterations)
            t_ours.append(t)
        tagger = pycrfsuite.Tagger()
        tagger.open(path)
        theirs_tags = [tagger.tag(x) for x in Xte]
        theirs = LinearChainCRF.load(path)
    ours_tags = ours.predict(Xte)
    same = float(np.mean([a == b for a, b in zip(ours_tags, theirs_tags)])) if Xte else 1.0
    return dict(algorithm=algorithm, same=same, dw=max_weight_difference(ours, theirs),
                epochs=(ours.n_iter_, theirs_epochs), ours=t_ours, theirs=t_theirs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-sentences", type=int, default=1000)
    ap.add_argument("--test-sentences", type=int, default=500)
    ap.add_argument("--max-iterations", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--algorithms", default="l2sgd,ap,pa,arow")
    ap.add_argument("--data-home", default=None)
    args = ap.parse_args(argv)
    try:
        import pycrfsuite  # noqa: F401
    except ImportError:
        print("python-crfsuite is not installed (pip install -e '.[bench]'); nothing to compare")
        return
    data = load_conll2000(data_home=args.data_home, download_if_missing=False)
    template = get_template("chunking")
    Xtr, ytr = featurize(data.train[:args.train_sentences], template)
    Xte, _ = featurize(data.test[:args.test_sentences], template)
    print(f"CoNLL-2000: {len(Xtr)} training / {len(Xte)} test sentences, {args.max_iterations} epochs, "
          f"best / median of {args.repeat} warm runs (interleaved)")
    ratios = []
    for algorithm in args.algorithms.split(","):
        r = compare(algorithm, Xtr, ytr, Xte, args.max_iterations, args.repeat)
        ratio = min(r["ours"]) / min(r["theirs"])
        ratios.append(ratio)
        print(f"{algorithm:>6}: identical test sequences {100 * r['same']:6.2f} %, max |weight difference| "
              f"{r['dw']:.3g}, epochs {r['epochs'][0]} / {r['epochs'][1]}; train structlearn "
              f"{min(r['ours']):.2f} s (median {statistics.median(r['ours']):.2f}), python-crfsuite "
              f"{min(r['theirs']):.2f} s (median {statistics.median(r['theirs']):.2f}); ratio {ratio:.3f}",
              flush=True)
    if ratios:
        print(f"geometric mean ratio structlearn / python-crfsuite (training): "
              f"{float(np.exp(np.mean(np.log(ratios)))):.3f}")


if __name__ == "__main__":
    main()
