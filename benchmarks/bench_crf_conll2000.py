"""CoNLL-2000 chunking: structlearn.LinearChainCRF vs python-crfsuite, side by side in one run.

Same input for both: the CRFsuite chunking template (words and POS in a ±2 window, bigrams, POS
trigrams, BOS/EOS) applied by ``structlearn.io.conll.featurize``; L2 c2 = 1, c1 = 0, L-BFGS with
CRFsuite's defaults (m = 6, epsilon = 1e-5, period = 10, delta = 1e-5). End-to-end time = featurise +
train + tag for each side. Prints iterations, seconds per iteration, wall times, the ratio, token
accuracy and conlleval chunk F1.

    python benchmarks/bench_crf_conll2000.py [--max-iterations N] [--data-home DIR]

Needs the ``bench`` extra (python-crfsuite).

Measured 2026-12-01 on a quiet 2-core machine: structlearn 161 iterations, 0.171 s/it, total 29.3 s, chunk
F1 0.9362; python-crfsuite 166 iterations, 0.450 s/it, total 76.3 s, F1 0.9361; end-to-end ratio 0.384.

Measured 2026-12-03 on an idle machine (load average ~1): structlearn 161 iterations, 0.206 s/it, total
35.5 s, chunk F1 0.9361; python-crfsuite 166 iterations, 0.725 s/it, total 122.6 s, F1 0.9361; end-to-end
ratio 0.290 (training 0.275, tagging 0.952). At load 4.4 the same script gave 0.564: our two Numba threads
lose more to other jobs than CRFsuite's one.

Both measured when ``LinearChainCRF`` had start/end weights by default (its model has been CRFsuite's,
``start_end_features=False``, since); not measured again since.
"""
import argparse
import os
import tempfile
import time

import numpy as np

from structlearn.datasets import load_conll2000
from structlearn.crf.linear_chain import LinearChainCRF
from structlearn.io.conll import featurize
from structlearn.io.templates import get_template
from structlearn.metrics.sequence import conlleval, token_accuracy


def run_structlearn(data, template, max_iterations):
    t0 = time.perf_counter()
    Xtr, ytr = featurize(data.train, template)
    Xte, yte = featurize(data.test, template)
    t_feat = time.perf_counter() - t0
    crf = LinearChainCRF(c1=0.0, c2=1.0, max_iterations=max_iterations)
    t1 = time.perf_counter()
    crf.fit(Xtr, ytr)
    t_train = time.perf_counter() - t1
    t2 = time.perf_counter()
    pred = crf.predict(Xte)
    t_tag = time.perf_counter() - t2
    return dict(name="structlearn", iterations=crf.n_iter_, featurise=t_feat, train=t_train, tag=t_tag,
                total=time.perf_counter() - t0, pred=pred, gold=yte,
                loss=crf.training_log_[-1]["loss"], features=crf.size_)


def run_crfsuite(data, template, max_iterations):
    import pycrfsuite

    t0 = time.perf_counter()
    Xtr, ytr = featurize(data.train, template)
    Xte, yte = featurize(data.test, template)
    t_feat = time.perf_counter() - t0
    t1 = time.perf_counter()
    trainer = pycrfsuite.Trainer(algorithm="lbfgs", verbose=False)
    for x, y in zip(Xtr, ytr):
        trainer.append(x, y)
    params = {"c1": 0.0, "c2": 1.0}
    if max_iterations:
        params["max_iterations"] = max_iterations
    trainer.set_params(params)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.crfsuite")
        trainer.train(path)
        t_train = time.perf_counter() - t1
        info = trainer.logparser.last_iteration
        t2 = time.perf_counter()
        tagger = pycrfsuite.Tagger()
        tagger.open(path)
        pred = [tagger.tag(x) for x in Xte]
        t_tag = time.perf_counter() - t2
    return dict(name="python-crfsuite", iterations=info["num"], featurise=t_feat, train=t_train,
                tag=t_tag, total=time.perf_counter() - t0, pred=pred, gold=yte, loss=info["loss"],
                features=info.get("active_features", float("nan")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-iterations", type=int, default=None)
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--only", choices=["structlearn", "crfsuite"], default=None)
    args = ap.parse_args(argv)
    data = load_conll2000(data_home=args.data_home, download_if_missing=False)
    template = get_template("chunking")
    runners = [("structlearn", run_structlearn), ("crfsuite", run_crfsuite)]
    results = []
    for key, fn in runners:
        if args.only and args.only != key:
            continue
        r = fn(data, template, args.max_iterations)
        r["accuracy"] = token_accuracy(r["gold"], r["pred"])
        r["f1"] = conlleval(r["gold"], r["pred"]).f1
        results.append(r)
        print(f"{r['name']:>16}: {r['iterations']:4d} iterations, {r['train'] / r['iterations']:.3f} s/it, "
              f"featurise {r['featurise']:.1f} s, train {r['train']:.1f} s, tag {r['tag']:.2f} s, "
              f"total {r['total']:.1f} s | final loss {r['loss']:.2f} | accuracy {r['accuracy']:.4f}, "
              f"chunk F1 {r['f1']:.4f}", flush=True)
    if len(results) == 2:
        a, b = results
        print(f"ratio structlearn / python-crfsuite: end-to-end {a['total'] / b['total']:.3f}, "
              f"training {a['train'] / b['train']:.3f}, per iteration "
              f"{(a['train'] / a['iterations']) / (b['train'] / b['iterations']):.3f}, tagging "
              f"{a['tag'] / b['tag']:.3f}; chunk F1 difference {a['f1'] - b['f1']:+.4f}")


if __name__ == "__main__":
    main()
