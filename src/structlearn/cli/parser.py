"""The argparse parser of the ``structlearn`` command: one sub-parser per subcommand."""
import argparse

from .common import PROG, STRUCTURE_NAMES, CLIError

__all__ = ["build_parser", "FORMATS", "ALGORITHMS"]

FORMATS = ("crfsuite", "conll")
ALGORITHMS = ("lbfgs", "l2sgd", "ap", "pa", "arow")
#: crfsuite's long algorithm names (``-a averaged-perceptron``) -> ours
ALGORITHM_ALIASES = {"averaged-perceptron": "ap", "passive-aggressive": "pa"}


def _algorithm(text):
    name = ALGORITHM_ALIASES.get(text.strip(), text.strip())
    if name not in ALGORITHMS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(ALGORITHMS)} (or crfsuite's "
                                         f"{', '.join(ALGORITHM_ALIASES)}); got {text!r}")
    return name


def _segment_length(text):
    t = text.strip()
    if t in ("global", "per-label"):
        return t
    try:
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, 'global' or 'per-label'; got "
                                         f"{text!r}") from None


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        sub = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        hint = f" (see '{PROG} {sub} --help')" if sub else f" (see '{PROG} --help')"
        raise CLIError(message + hint)


def build_parser():
    """The argparse parser of the ``structlearn`` command."""
    from .. import __version__

    p = _ArgumentParser(prog=PROG, description="Linear-chain CRFs that train and tag like CRFsuite.",
                        epilog=f"Run '{PROG} COMMAND --help' for the options of a command.")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)

    def input_options(q):
        q.add_argument("--format", choices=FORMATS, default=None,
                       help="input format: CRFsuite attribute file (label<TAB>attr[:value]...; default) or "
                            "CoNLL columns featurised with --template")
        q.add_argument("--template", metavar="T", default=None,
                       help="feature template for --format conll: chunking, ner, ner-nochunk or a JSON "
                            "template file (default: chunking)")
        q.add_argument("--columns", metavar="C1,C2,...", default=None,
                       help="names of the CoNLL columns, overriding the template's fields (e.g. w,pos,y)")

    # learn
    q = sub.add_parser("learn", help="train a model (like 'crfsuite learn')",
                       description="Train a linear-chain CRF on one or more files and store it in MODEL.")
    q.add_argument("train", nargs="*", metavar="TRAIN", help="training file(s) ('-' for stdin)")
    q.add_argument("-m", "--model", default=None,
                   help="file to store the model in (required except with -x; checked before training)")
    q.add_argument("--structure", choices=STRUCTURE_NAMES, default="chain",
                   help="chain: linear-chain CRF (default); tree: tree-structured CRF on CRFSuite-0.13 "
                        "tree files (label<TAB>node<TAB>parent|_<TAB>attr[:value]...); semi-markov: "
                        "semi-Markov CRF labelling whole segments (BIO tags or runs of equal labels); "
                        "higher-order: CRF over label n-grams up to --order (-m names the model file, so "
                        "the model kind is chosen here)")
    q.add_argument("--type", default=None, metavar="TYPE",
                   help="CRFSuite 0.13's name for --structure: 1d (chain), semim (semi-markov), tree. As in "
                        "CRFSuite 0.13, with semim '-p feature.max_seg_len=N' picks the model by the sign of N "
                        "only: N < 0 (the default, -1) the semi-Markov CRF, whose longest segment of each label "
                        "is that label's longest training run; N >= 0 a linear-chain CRF (one token per "
                        "segment) - N itself limits nothing. '-p feature.max_order=D' is the order of the "
                        "transitions: over segment labels (semi-Markov; D >= 2 trains HigherOrderCRF with "
                        "segments=True) or over token labels (linear chain)")
    q.add_argument("--max-segment-length", type=_segment_length, default=None, metavar="L",
                   help="semi-markov: longest segment. 'per-label' (the default, CRFSuite 0.13's rule): "
                        "each label's longest training run; 'global': the longest training segment of any "
                        "label, for every label (slower); an integer L: L for "
                        "every label, refused when a training segment is longer (its gold segmentation would "
                        "be impossible). CRFSuite 0.13's -p feature.max_seg_len is not this option: see --type")
    q.add_argument("--allow-same-label", action="store_true",
                   help="semi-markov: let consecutive segments share a label (chunking, word segmentation)")
    q.add_argument("--segment-features", default="first,last", metavar="F1,F2",
                   help="semi-markov: segment features among first,last,span,caps ('' for none; default "
                        "first,last: the attributes of a segment's first and last token)")
    q.add_argument("--order", type=int, default=None, metavar="D",
                   help="higher-order: order of the label n-grams (default 2)")
    q.add_argument("-a", "--algorithm", type=_algorithm, default="lbfgs", metavar="NAME",
                   help="training algorithm: lbfgs (default), l2sgd, ap (averaged-perceptron), "
                        "pa (passive-aggressive), arow")
    q.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="estimator parameter, e.g. c2=1, max_iterations=100, min_freq=2, epsilon=1e-5 "
                        "(repeatable; CRFsuite names such as feature.minfreq are accepted; "
                        "'-p help' lists them)")
    input_options(q)
    q.add_argument("-e", "--dev", "--holdout", metavar="DEV|M", default=None,
                   help="held-out data: a file, or (as crfsuite -e M) the number M of a group (the M-th "
                        "TRAIN file, or with -g N the M-th of N groups) left out of training; its accuracy "
                        "is logged every iteration and evaluated at the end")
    q.add_argument("-g", "--split", type=int, default=None, metavar="N",
                   help="split the instances into N groups (instance i in group i mod N + 1) for -e M "
                        "and -x, as crfsuite")
    q.add_argument("-x", "--cross-validate", action="store_true",
                   help="cross-validation over the groups (TRAIN files or -g N): train on all groups but "
                        "one and evaluate on it, for each group (as crfsuite); with -m, a model trained on "
                        "every group is stored afterwards")
    q.add_argument("-l", "--log-to-file", action="store_true",
                   help="write the training log to a file instead of standard output, in crfsuite's "
                        "layout, named as crfsuite names it: BASE_ALGORITHM_PARAM... (BASE from -L, "
                        "default log.crfsuite; e.g. log.crfsuite_lbfgs_c2=1)")
    q.add_argument("-L", "--logbase", default="log.crfsuite", metavar="BASE",
                   help="base name of the log file of -l (crfsuite's -L; default log.crfsuite)")
    q.add_argument("--log-file", default=None, metavar="FILE",
                   help="write the training log to FILE instead of standard output")
    q.add_argument("--crfsuite-log", action="store_true",
                   help="per-iteration log in crfsuite's layout (***** Iteration #k *****, Loss, "
                        "Feature norm, Error norm, ..., and with held-out data crfsuite's evaluation "
                        "table every iteration); implied by -l")
    q.add_argument("--forbid", action="append", default=[], metavar="SPEC",
                   help="forbidden transitions: BIO (I-X only after B-X/I-X) or FROM->TO "
                        "(<start>/<end> allowed; repeatable)")
    g = q.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="no per-iteration log")
    g.add_argument("-v", "--verbose", action="store_true",
                   help="also list all parameters and show a progress bar")

    # tag
    q = sub.add_parser("tag", help="tag sequences with a model (like 'crfsuite tag')",
                       description="Tag the sequences of INPUT; print one label per line and a blank line "
                                   "after each sequence.")
    q.add_argument("input", metavar="INPUT", help="file to tag ('-' for stdin)")
    q.add_argument("-m", "--model", required=True,
                   help="model file written by 'structlearn learn', or a CRFsuite model file (crfsuite "
                        "learn, python-crfsuite, sklearn-crfsuite)")
    q.add_argument("-i", "--marginal", action="store_true",
                   help="write label:marginal probability of the predicted label")
    q.add_argument("-p", "--probability", action="store_true",
                   help="write '@probability<TAB>p' (probability of the predicted sequence) before each "
                        "sequence")
    q.add_argument("-k", "--kbest", type=int, default=None, metavar="K",
                   help="write the K most probable labelings of each sequence")
    q.add_argument("-r", "--reference", action="store_true",
                   help="write the gold label of the input before the predicted one (gold<TAB>pred)")
    q.add_argument("-t", "--test", action="store_true",
                   help="evaluate against the gold labels of the input (per-label P/R/F1, accuracy, "
                        "conlleval chunk F1)")
    q.add_argument("-q", "--quiet", action="store_true", help="do not write the labels (use with -t)")
    input_options(q)

    # eval
    q = sub.add_parser("eval", help="score predicted labels against gold labels",
                       description="Per-label precision/recall/F1, accuracy and conlleval chunk scores of "
                                   "PRED against GOLD (files of labels, one per line, blank line between "
                                   "sequences; CRFsuite or CoNLL files), or of the last two columns of a "
                                   "conlleval-style file given with --conll.")
    q.add_argument("files", nargs="*", metavar="GOLD PRED")
    q.add_argument("--conll", metavar="FILE", default=None,
                   help="one file holding gold and predicted labels as columns (conlleval input)")
    q.add_argument("--format", choices=FORMATS, default="crfsuite",
                   help="how GOLD and PRED hold labels: first TAB field (crfsuite, default) or a "
                        "whitespace column (conll, see --label-column)")
    q.add_argument("--label-column", type=int, default=-1, metavar="I",
                   help="label column of GOLD/PRED with --format conll (default -1, the last)")
    q.add_argument("--gold-column", type=int, default=-2, metavar="I",
                   help="gold column with --conll (default -2)")
    q.add_argument("--pred-column", type=int, default=-1, metavar="I",
                   help="predicted column with --conll (default -1)")

    # dump
    q = sub.add_parser("dump", help="print a model in readable form (like 'crfsuite dump')",
                       description="Print labels, the transition weights and the state features of "
                                   "largest |weight|.")
    q.add_argument("model", metavar="MODEL")
    q.add_argument("-n", "--top", type=int, default=50, metavar="N",
                   help="number of state features to print, by decreasing |weight| (0: all; default 50)")
    q.add_argument("--crfsuite", action="store_true",
                   help="print the model in the layout of 'crfsuite dump' (linear-chain models)")

    # info
    q = sub.add_parser("info", help="print a model's header: format, parameters, sizes, training summary")
    q.add_argument("model", metavar="MODEL")

    # demo
    q = sub.add_parser("demo", help="the main job: train and evaluate a chunker on CoNLL-2000",
                       description="Train a linear-chain CRF (L-BFGS, c2=1, chunking template) on the "
                                   "CoNLL-2000 training set, tag the test set and print chunk F1, token "
                                   "accuracy and wall times.")
    q.add_argument("--data-home", metavar="DIR", default=None,
                   help="folder holding conll2000/ (default: $STRUCTLEARN_DATA, then ../shared/data)")
    q.add_argument("--max-iterations", type=int, default=None, metavar="N",
                   help="stop L-BFGS after N iterations (default: until convergence)")
    q.add_argument("--download", action="store_true",
                   help="download CoNLL-2000 from its official site when it is not found")
    q.add_argument("-a", "--algorithm", type=_algorithm, default="lbfgs", metavar="NAME",
                   help="training algorithm: lbfgs (default), l2sgd, ap (averaged-perceptron), "
                        "pa (passive-aggressive), arow")
    q.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="estimator parameter (as for learn)")
    g = q.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="no per-iteration log")
    g.add_argument("-v", "--verbose", action="store_true", help="also print the per-type conlleval report")

    # compile
    from .compile import build_parser as _compile_parser

    q = sub.add_parser("compile", help="compile every estimator's Numba kernels into the package's cache "
                                       "(done by pip install; rerun on another CPU or Numba version)",
                       description="Run a tiny fit of every estimator family so that Numba compiles their "
                                   "kernels into the installed package's on-disk cache (the package's build "
                                   "does this; see docs/performance.md).")
    _compile_parser(q)
    return p
