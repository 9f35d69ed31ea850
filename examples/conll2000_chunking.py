"""CoNLL-2000 chunking with a LinearChainCRF and the CRFsuite chunking template, with figures.

Data: ``conll2000`` (:func:`structlearn.datasets.load_conll2000`; ``$STRUCTLEARN_DATA``, ``../shared/data``
or ``--data-home``): WSJ sections 15–18 (8,936 sentences) for training, section 20 (2,012) for testing,
IOB2 chunk tags. Attributes: CRFsuite's ``chunking.py`` template (words and POS tags in a window of
±2, their bigrams and a POS trigram; :func:`structlearn.io.templates.get_template`). Training:
L-BFGS, c2 = 1 (CRFsuite's defaults); the accuracy on the first ``--dev`` test sentences is logged at
every iteration. Printed: iterations, training time and conlleval's chunk precision / recall / F1 and
token accuracy on the test set.

Run::

    .venv/bin/python examples/conll2000_chunking.py [--c1 0] [--c2 1] [--max-iterations N] [--dev 500]
                                                    [--data-home DIR] [--quick] [--figures DIR]

Result (all training sentences, no iteration cap): chunk F1 about 0.936, as python-crfsuite on the same
attributes (``tests/data/test_crf_conll2000.py``).

``--quick``: the first 1,000 training sentences and at most 50 L-BFGS iterations (well under a
minute). ``--figures DIR``: also save PNGs made with :mod:`structlearn.plotting` into DIR (created if
missing; nothing is written without the flag): ``conll2000_weights.png`` (the largest and most
negative state-feature weights of the main chunk tags, as eli5's table), ``conll2000_training.png``
(the objective per L-BFGS iteration, the dev accuracy dashed) and ``conll2000_transitions.png`` (the
transition weights between chunk tags).
"""
import argparse
import time
import warnings

from sklearn.exceptions import ConvergenceWarning

from structlearn import LinearChainCRF
from structlearn.datasets import load_conll2000
from structlearn.io.conll import featurize
from structlearn.io.templates import get_template
from structlearn.metrics import conlleval

#: the chunk tags shown in the weight table (the most frequent types)
SHOWN = ["B-NP", "I-NP", "B-VP", "I-VP", "B-PP", "B-ADJP", "B-ADVP", "O"]


def save_figures(crf, n_train, directory):
    """The structlearn.plotting figures (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    shown = [t for t in SHOWN if t in crf.classes_]
    figs = {"weights": plotting.plot_crf_weights(crf, top=12, negative=4, labels=shown,
                                                 title=f"LinearChainCRF on CoNLL-2000 ({n_train} sentences): "
                                                       f"largest state-feature weights per tag"),
            "training": plotting.plot_training(crf, title="L-BFGS: objective per iteration"),
            "transitions": plotting.plot_transitions(crf, fmt=".1f", title="transition weights")}
    for name, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, 'conll2000_' + name)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--c1", type=float, default=0.0)
    ap.add_argument("--c2", type=float, default=1.0)
    ap.add_argument("--max-iterations", type=int, default=None)
    ap.add_argument("--dev", type=int, default=500, help="test sentences whose accuracy is logged")
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--quick", action="store_true", help="1,000 training sentences, <= 50 iterations")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    args = ap.parse_args(argv)
    data = load_conll2000(data_home=args.data_home, download_if_missing=False)
    train = data.train[:1000] if args.quick else data.train
    max_iterations = args.max_iterations or (50 if args.quick else None)
    tpl = get_template("chunking")
    Xtr, ytr = featurize(train, tpl)
    Xte, yte = featurize(data.test, tpl)
    crf = LinearChainCRF(c1=args.c1, c2=args.c2, max_iterations=max_iterations)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(Xtr, ytr, Xte[:args.dev], yte[:args.dev])
    print(f"CoNLL-2000: {len(train)} training sentences, {len(crf.attributes_)} attributes, "
          f"{len(crf.classes_)} tags; {crf.n_iter_} L-BFGS iterations (converged={crf.converged_}), "
          f"{time.perf_counter() - t0:.1f} s")
    res = conlleval(yte, crf.predict(Xte))
    print(f"test ({len(Xte)} sentences): chunk P {res.precision:.4f} R {res.recall:.4f} F1 {res.f1:.4f}, "
          f"token accuracy {res.accuracy:.4f}")
    if args.figures:
        save_figures(crf, len(train), args.figures)
    return {"f1": res.f1, "accuracy": res.accuracy, "n_iter": crf.n_iter_}


if __name__ == "__main__":
    main()
