"""A 1 000-label tagging task: structlearn.LinearChainCRF vs python-crfsuite, side by side in one run.

Huge label sets are where a linear-chain CRF costs O(L²) per token (CRFsuite's forward-backward and its
transition gradient). The task: dependency *supertags* of UD English EWT — each word's label is its
(XPOS, DEPREL, direction of the head, distance to the head clipped at 5), 1 263–1 292 labels per split —
predicted from the words (``structlearn.io.conllu.UPOS_TEMPLATE``: a ±2 word window, affixes, shapes).
Trained on the first ``--sentences`` sentences of the dev split and tested on the test split (EWT's train
split is not in ``shared/data``). Both sides run the same number of L-BFGS iterations (``--iterations``;
L2 c2 = 1, c1 = 0, CRFsuite's L-BFGS defaults otherwise), since neither converges in a benchmark's time
at this size; end-to-end = featurise + train + tag. Prints seconds per iteration, wall times, the ratios,
and token accuracy (labels outside the training labels count as errors on both sides).

    python benchmarks/bench_crf_many_labels.py [--sentences N] [--iterations K] [--only structlearn|crfsuite]

Needs the ``bench`` extra (python-crfsuite).

Measured 2026-12-03 on a shared 2-core machine (load average 3.2–4.0 from other jobs; structlearn with its
default 2 Numba threads, python-crfsuite single-threaded), ``--sentences 1000 --test-sentences 500
--iterations 3`` (998 labels, 14 063 training words): structlearn 17.4 s per iteration, total 55.6 s,
accuracy 0.1819; python-crfsuite 69.6 s per iteration, total 217.3 s, accuracy 0.1773 (after 3 iterations
neither is a usable tagger; the point is the cost per pass); ratio end-to-end **0.256**, per iteration 0.250,
tagging 0.373. With 200 sentences (615 labels) the ratio was 0.51 on the same loaded machine: at fewer
labels the per-token feature work, which both sides do alike, weighs more.
"""
import argparse
import gzip
import os
import tempfile
import time

from structlearn.datasets import get_data_path
from structlearn.crf.linear_chain import LinearChainCRF
from structlearn.io.conll import featurize
from structlearn.io.conllu import UPOS_TEMPLATE, conllu_columns, read_conllu
from structlearn.metrics.sequence import token_accuracy


def supertag(sentence):
    """(XPOS, DEPREL, head direction L/R/root, min(|head - i|, 5)) of every word, as one string."""
    out = []
    for i, (xpos, deprel, head) in enumerate(zip(sentence.xpos, sentence.deprel, sentence.head), start=1):
        d = "root" if head == 0 else ("L" if head < i else "R")
        out.append(f"{xpos}|{deprel}|{d}{min(abs(head - i), 5) if head else ''}")
    return out


def load(split, limit=None):
    path = os.path.join(get_data_path("ud_english_ewt"), f"en_ewt-ud-{split}.conllu.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        sentences = read_conllu(f)
    sentences = [s for s in sentences if all(h is not None for h in s.head)]
    return sentences[:limit] if limit else sentences


def features(sentences):
    X, _ = featurize([conllu_columns(s) for s in sentences], UPOS_TEMPLATE)
    return X, [supertag(s) for s in sentences]


def run_structlearn(train, test, iterations):
    t0 = time.perf_counter()
    Xtr, ytr = features(train)
    Xte, yte = features(test)
    t_feat = time.perf_counter() - t0
    crf = LinearChainCRF(c1=0.0, c2=1.0, max_iterations=iterations)
    t1 = time.perf_counter()
    crf.fit(Xtr, ytr)
    t_train = time.perf_counter() - t1
    t2 = time.perf_counter()
    pred = crf.predict(Xte)
    t_tag = time.perf_counter() - t2
    return dict(name="structlearn", iterations=crf.n_iter_, featurise=t_feat, train=t_train, tag=t_tag,
                total=time.perf_counter() - t0, pred=pred, gold=yte, labels=len(crf.classes_),
                loss=crf.training_log_[-1]["loss"])


def run_crfsuite(train, test, iterations):
    import pycrfsuite

    t0 = time.perf_counter()
    Xtr, ytr = features(train)
    Xte, yte = features(test)
    t_feat = time.perf_counter() - t0
    t1 = time.perf_counter()
    trainer = pycrfsuite.Trainer(algorithm="lbfgs", verbose=False)
    for x, y in zip(Xtr, ytr):
        trainer.append(x, y)
    trainer.set_params({"c1": 0.0, "c2": 1.0, "max_iterations": iterations})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.crfsuite")
        trainer.train(path)
        t_train = time.perf_counter() - t1
        info = trainer.logparser.last_iteration
        t2 = time.perf_counter()
        tagger = pycrfsuite.Tagger()
        tagger.open(path)
        pred = [tagger.tag(x) for x in Xte]
        labels = len(tagger.labels())
        t_tag = time.perf_counter() - t2
    return dict(name="python-crfsuite", iterations=info["num"], featurise=t_feat, train=t_train, tag=t_tag,
                total=time.perf_counter() - t0, pred=pred, gold=yte, labels=labels, loss=info["loss"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=2000, help="training sentences (dev split; default all)")
    ap.add_argument("--test-sentences", type=int, default=None, help="test sentences (default all)")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--only", choices=["structlearn", "crfsuite"], default=None)
    args = ap.parse_args(argv)
    train, test = load("dev", args.sentences), load("test", args.test_sentences)
    print(f"training: {len(train)} sentences, {sum(len(s) for s in train)} words; test: {len(test)} "
          f"sentences, {sum(len(s) for s in test)} words", flush=True)
    results = []
    for key, fn in (("structlearn", run_structlearn), ("crfsuite", run_crfsuite)):
        if args.only and args.only != key:
            continue
        r = fn(train, test, args.iterations)
        r["accuracy"] = token_accuracy(r["gold"], r["pred"])
        results.append(r)
        print(f"{r['name']:>16}: {r['labels']} labels, {r['iterations']} iterations, "
              f"{r['train'] / r['iterations']:.3f} s/it, featurise {r['featurise']:.1f} s, train "
              f"{r['train']:.1f} s, tag {r['tag']:.2f} s, total {r['total']:.1f} s | loss {r['loss']:.2f} | "
              f"accuracy {r['accuracy']:.4f}", flush=True)
    if len(results) == 2:
        a, b = results
        print(f"ratio structlearn / python-crfsuite ({a['labels']} labels): end-to-end "
              f"{a['total'] / b['total']:.3f}, training {a['train'] / b['train']:.3f}, per iteration "
              f"{(a['train'] / a['iterations']) / (b['train'] / b['iterations']):.3f}, tagging "
              f"{a['tag'] / b['tag']:.3f}; accuracy difference {a['accuracy'] - b['accuracy']:+.4f}")


if __name__ == "__main__":
    main()
