"""The ``structlearn`` command: train, apply, evaluate and inspect linear-chain CRFs like CRFsuite.

Subcommands (modelled on the ``crfsuite`` command of Okazaki's CRFsuite: ``learn``, ``tag``, ``dump``)::

    structlearn learn -m MODEL [-a ALG] [-p NAME=VALUE ...] [--format crfsuite|conll] [--template T]
                      [--columns w,pos,y] [-e DEV] [--forbid BIO] [-q|-v] TRAIN...
    structlearn tag   -m MODEL [-i] [-p] [-k K] [-r] [-t] [-q] [--format ...] [--template T] INPUT
    structlearn eval  GOLD PRED | --conll FILE
    structlearn dump  MODEL [-n TOP]
    structlearn info  MODEL
    structlearn demo  [--data-home DIR] [--max-iterations N] [--download] [-q|-v]

Input files are CRFsuite attribute files (``label<TAB>attr[:value]<TAB>…``, blank line between sequences;
see :mod:`structlearn.io.crfsuite`) or, with ``--format conll``, CoNLL column files turned into attributes by
a feature template (``--template chunking|ner|ner-nochunk`` or a JSON template file; see
:mod:`structlearn.io.templates`). ``-`` reads standard input.

How ``tag`` knows how to featurise CoNLL input
----------------------------------------------
``learn`` records the input format and the *full* template (not only its name, so later changes of a shipped
template cannot silently change a trained model's features) in the model file itself, under the header's
user metadata (``LinearChainCRF.save(path, metadata=...)``, read back as ``metadata_``) as the entry
``"featurizer"``: ``{"format": "conll", "template": "chunking", "spec": {...}, "columns": [...] | null}``.
No side-car file is written. ``tag`` uses it unless ``--format``/``--template``/``--columns`` are given on
its command line, which override it. When tagging CoNLL input that lacks the label column
(one column fewer than the template's fields), the label field is dropped automatically.

Output of ``tag`` (as ``crfsuite tag``): one label per line, a blank line after each sequence; ``-i`` writes
``label:marginal``; ``-p`` writes ``@probability<TAB>p`` before each sequence; ``-r`` writes
``gold<TAB>predicted``; ``-k K`` writes, for each sequence, K blocks ``@kbest<TAB>rank<TAB>p`` + labels + blank
line (the layout of CRF++'s ``-n``); ``-t`` prints the evaluation against the gold labels of the input
(per-label precision/recall/F1, item and sequence accuracy, conlleval chunk scores); ``-q`` suppresses the
labels.

Errors in files or arguments print one line ``structlearn: error: …`` on standard error and exit with
status 2; warnings (e.g. L-BFGS hitting ``max_iterations``) print ``structlearn: warning: …``.
"""
import argparse
import json
import os
import sys
import time
import warnings

__all__ = ["main", "build_parser", "CLIError"]

PROG = "structlearn"
FORMATS = ("crfsuite", "conll")
STRUCTURES = ("chain", "tree", "semi-markov", "higher-order")
ALGORITHMS = ("lbfgs", "l2sgd", "ap", "pa", "arow")

# CRFsuite's parameter names (``crfsuite learn -p NAME=VALUE``) accepted as aliases.
_ALIASES = {
    "feature.minfreq": "min_freq",
    "feature.possible_states": "all_possible_states",
    "feature.possible_transitions": "all_possible_transitions",
    "max_linesearches": "max_linesearch",
    "type": "pa_type",
}
# parameters set by their own options rather than by -p
_NOT_BY_P = {"algorithm": "-a/--algorithm", "verbose": "-v/--verbose"}
# the type of parameters whose default is None
_NONE_TYPES = {"max_iterations": int, "random_state": int, "forbidden_transitions": "forbid"}


class CLIError(Exception):
    """A user error (bad argument or input): printed as one line, exit status 2."""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        sub = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        hint = f" (see '{PROG} {sub} --help')" if sub else f" (see '{PROG} --help')"
        raise CLIError(message + hint)


# ---------------------------------------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------------------------------------
def build_parser():
    """The argparse parser of the ``structlearn`` command."""
    from .. import __version__

    p = _ArgumentParser(prog=PROG, description="Linear-chain CRFs that train and tag like CRFsuite.",
                        epilog=f"Run '{PROG} COMMAND --help' for the options of a command.")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)

    def input_options(q, with_label_note=True):
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
    q.add_argument("train", nargs="+", metavar="TRAIN", help="training file(s) ('-' for stdin)")
    q.add_argument("-m", "--model", required=True, help="file to store the model in")
    q.add_argument("--structure", choices=STRUCTURES, default="chain",
                   help="chain: linear-chain CRF (default); tree: tree-structured CRF on CRFSuite-0.13 "
                        "tree files (label<TAB>node<TAB>parent|_<TAB>attr[:value]...); semi-markov: "
                        "semi-Markov CRF labelling whole segments (BIO tags or runs of equal labels); "
                        "higher-order: CRF over label n-grams up to --order (-m names the model file, so "
                        "the model kind is chosen here)")
    q.add_argument("--max-segment-length", type=int, default=None, metavar="L",
                   help="semi-markov: longest segment (default: per label, the longest training segment)")
    q.add_argument("--allow-same-label", action="store_true",
                   help="semi-markov: let consecutive segments share a label (chunking, word segmentation)")
    q.add_argument("--segment-features", default="first,last", metavar="F1,F2",
                   help="semi-markov: segment features among first,last,span,caps ('' for none; default "
                        "first,last: the attributes of a segment's first and last token)")
    q.add_argument("--order", type=int, default=None, metavar="D",
                   help="higher-order: order of the label n-grams (default 2)")
    q.add_argument("-a", "--algorithm", choices=ALGORITHMS, default="lbfgs",
                   help="training algorithm (default lbfgs)")
    q.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="estimator parameter, e.g. c2=1, max_iterations=100, min_freq=2, epsilon=1e-5 "
                        "(repeatable; CRFsuite names such as feature.minfreq are accepted; "
                        "'-p help' lists them)")
    input_options(q)
    q.add_argument("-e", "--dev", metavar="DEV", default=None,
                   help="held-out file: its accuracy is logged every iteration and evaluated at the end")
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
    q.add_argument("-m", "--model", required=True, help="model file written by 'structlearn learn'")
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
    q.add_argument("-a", "--algorithm", choices=ALGORITHMS, default="lbfgs",
                   help="training algorithm (default lbfgs)")
    q.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="estimator parameter (as for learn)")
    g = q.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="no per-iteration log")
    g.add_argument("-v", "--verbose", action="store_true", help="also print the per-type conlleval report")
    return p


# ---------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------
class _Out:
    """Buffered writer to stdout (looked up at call time, so pytest's capsys sees it)."""

    def __init__(self):
        self.lines = []

    def __call__(self, line=""):
        self.lines.append(line)
        if len(self.lines) >= 4096:
            self.flush()

    def flush(self):
        if self.lines:
            sys.stdout.write("\n".join(self.lines) + "\n")
            self.lines = []
        sys.stdout.flush()


def _say(line=""):
    print(line, flush=True)


def _warn(message):
    print(f"{PROG}: warning: {message}", file=sys.stderr, flush=True)


def _source(path):
    return sys.stdin if path == "-" else path


def _estimator_params():
    from ..estimators.crf import LinearChainCRF

    return LinearChainCRF().get_params()


def _to_bool(name, text):
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise CLIError(f"parameter {name!r} expects a boolean (1/0, true/false, yes/no); got {text!r}")


def _to_int(name, text):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        v = None
    if v is not None and v.is_integer():
        return int(v)
    raise CLIError(f"parameter {name!r} expects an integer; got {text!r}")


def _to_float(name, text):
    try:
        return float(text)
    except ValueError:
        raise CLIError(f"parameter {name!r} expects a number; got {text!r}") from None


def _parse_forbid(specs):
    """``["BIO"]`` -> "BIO"; ``["O->I-NP", "<start>->I-NP"]`` -> list of pairs; ``[]`` -> None."""
    pairs = []
    bio = False
    for spec in specs:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            if part.upper() in ("BIO", "IOB2"):
                bio = True
            elif "->" in part:
                a, b = part.split("->", 1)
                pairs.append((a.strip(), b.strip()))
            else:
                raise CLIError(f"forbidden transition {part!r} must be 'BIO' or 'FROM->TO' (e.g. 'O->I-NP')")
    if bio and pairs:
        raise CLIError("--forbid: give either BIO or FROM->TO pairs, not both")
    return "BIO" if bio else (pairs or None)


def parse_params(items, defaults=None):
    """Turn ``["c2=0.5", "max_iterations=50"]`` into estimator keyword arguments with the right types.

    Types follow the parameter's default (bool, int, float, str); CRFsuite names (``feature.minfreq``,
    ``feature.possible_states``, ``calibration.eta``, ``type``, ``max_linesearches``) are accepted.

    Raises
    ------
    CLIError
        Malformed item, unknown name (the message lists the valid names), or a value of the wrong type.
    """
    defaults = _estimator_params() if defaults is None else defaults
    valid = sorted(n for n in defaults if n not in _NOT_BY_P)
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CLIError(f"-p expects NAME=VALUE; got {item!r}")
        key = _ALIASES.get(name, name.replace(".", "_").replace("-", "_"))
        if key in _NOT_BY_P:
            raise CLIError(f"set {key!r} with {_NOT_BY_P[key]}, not with -p")
        if key not in defaults:
            raise CLIError(f"unknown parameter {name!r}; valid names: {', '.join(valid)}")
        default = defaults[key]
        if isinstance(default, bool):
            value = _to_bool(name, text)
        elif isinstance(default, int):
            value = _to_int(name, text)
        elif isinstance(default, float):
            value = _to_float(name, text)
        elif isinstance(default, str):
            value = text
        else:
            kind = _NONE_TYPES.get(key)
            if text.strip().lower() in ("none", "null", ""):
                value = None
            elif kind is int:
                value = _to_int(name, text)
            elif kind == "forbid":
                value = _parse_forbid([text])
            else:
                value = text
        out[key] = value
    return out


def _load_template(spec):
    """A template name or a JSON file -> (name, template dict)."""
    from ..io.templates import TEMPLATES

    if spec in TEMPLATES:
        return spec, TEMPLATES[spec]
    if os.path.isfile(spec):
        try:
            with open(spec, encoding="utf-8") as fh:
                tpl = json.load(fh)
        except (OSError, ValueError) as exc:
            raise CLIError(f"cannot read template file {spec!r}: {exc}") from None
        if not isinstance(tpl, dict):
            raise CLIError(f"template file {spec!r} must hold a JSON object with 'fields' and 'features'")
        return spec, tpl
    raise CLIError(f"unknown template {spec!r}; use one of {sorted(TEMPLATES)} or a JSON template file")


def _json_template(tpl):
    """A template dict as plain JSON data (tuples -> lists)."""
    return json.loads(json.dumps(tpl))


class _Featurizer:
    """How input files become (X, y): the CRFsuite reader, or the CoNLL reader + a template."""

    def __init__(self, fmt="crfsuite", template_name=None, spec=None, columns=None):
        self.format = fmt
        self.template_name = template_name
        self.spec = spec
        self.columns = columns
        self._compiled = None
        if fmt == "conll":
            from ..io.conll import compile_template

            try:
                self._compiled = compile_template(spec, columns)
            except ValueError as exc:
                raise CLIError(f"template {template_name!r}: {exc}") from None

    @classmethod
    def from_args(cls, fmt, template, columns, stored=None):
        """Command-line options, falling back on the featurizer ``stored`` in a model file."""
        stored = stored or {}
        cols = None if columns is None else [c.strip() for c in columns.split(",") if c.strip()]
        if fmt is None:
            fmt = "conll" if template is not None else stored.get("format", "crfsuite")
        if fmt == "crfsuite":
            if template is not None or cols is not None:
                raise CLIError("--template/--columns apply to --format conll only")
            return cls("crfsuite")
        if template is not None:
            name, spec = _load_template(template)
        elif stored.get("format") == "conll" and stored.get("spec"):
            name, spec = stored.get("template"), stored["spec"]
            if cols is None and stored.get("columns"):
                cols = list(stored["columns"])
        elif stored:
            raise CLIError("the model was trained on CRFsuite attribute files and records no feature "
                           "template; give --template (chunking, ner, ner-nochunk or a JSON file) to tag "
                           "CoNLL input")
        else:
            name, spec = _load_template("chunking")
        return cls("conll", name, _json_template(spec), cols)

    def record(self):
        """JSON-able description stored in the model file."""
        if self.format == "crfsuite":
            return {"format": "crfsuite"}
        return {"format": "conll", "template": self.template_name, "spec": self.spec, "columns": self.columns}

    def describe(self):
        if self.format == "crfsuite":
            return "CRFsuite attribute files"
        cols = ",".join(self._compiled.fields)
        return f"CoNLL columns {cols}, template {self.template_name}"

    def read(self, path, need_labels=True):
        """(X, y, name) of one file; ``y`` is None when the input has no label column."""
        name = "<stdin>" if path == "-" else path
        try:
            if self.format == "crfsuite":
                from ..io.crfsuite import read_crfsuite

                X, y = read_crfsuite(_source(path))
                return X, y, name
            from ..io.conll import featurize, read_conll

            sents = read_conll(_source(path))
            tpl = self._compiled
            if sents and tpl.label_index is not None and len(sents[0][0]) == len(tpl.fields) - 1 \
                    and not need_labels:
                from ..io.conll import compile_template

                # tagging input without the label column: drop the label field
                tpl = compile_template(tpl, [f for f in tpl.fields if f != tpl.label])
            if sents and len(sents[0][0]) != len(tpl.fields):
                raise CLIError(f"{name}: the tokens have {len(sents[0][0])} columns but the template expects "
                               f"{len(tpl.fields)} ({','.join(tpl.fields)}); set the column names with "
                               f"--columns")
            X, y = featurize(sents, tpl)
            return X, y, name
        except UnicodeDecodeError as exc:
            raise CLIError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except IsADirectoryError:
            raise CLIError(f"{name}: is a folder, not a file") from None


def _read_many(featurizer, paths):
    X, y = [], []
    for p in paths:
        Xi, yi, name = featurizer.read(p)
        if yi is None:
            raise CLIError(f"{name}: the input has no label column; training needs labels")
        X.extend(Xi)
        y.extend(yi)
    return X, y


def _format_entry(entry):
    """One per-iteration log line (CRFsuite's quantities on one line)."""
    parts = [f"iter {entry.get('iteration', '?'):>4}"]
    if "loss" in entry:
        parts.append(f"loss {entry['loss']:.6f}")
    known = [("gradient_norm", "|g|", "{:.6g}"), ("weight_norm", "|w|", "{:.6g}"),
             ("active_features", "active", "{}"), ("line_search_evals", "ls", "{}"),
             ("step", "step", "{:.4g}"), ("dev_accuracy", "dev-acc", "{:.4f}")]
    for key, label, fmt in known:
        if key in entry:
            parts.append(f"{label} " + fmt.format(entry[key]))
    skip = {k for k, _, _ in known} | {"iteration", "loss", "seconds", "stop_reason"}
    for key, value in entry.items():
        if key not in skip and isinstance(value, (int, float)):
            parts.append(f"{key} {value:.6g}" if isinstance(value, float) else f"{key} {value}")
    if "seconds" in entry:
        parts.append(f"{entry['seconds']:.3f}s")
    return "  ".join(parts)


def _make_estimator(params):
    from ..estimators.crf import LinearChainCRF

    return LinearChainCRF(**params)


def _fit(est, X, y, X_dev=None, y_dev=None, printed=None, quiet=False, expect_max_iterations=False,
         callback=None):
    """Fit, turning warnings into one-line messages and printing log entries not yet shown.

    With ``expect_max_iterations`` (the user set ``max_iterations``), the ConvergenceWarning of reaching it
    is not repeated: the summary line already says "not converged".
    """
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y, X_dev, y_dev, callback=callback)
    for w in caught:
        if expect_max_iterations and issubclass(w.category, ConvergenceWarning):
            continue
        if issubclass(w.category, (ConvergenceWarning, UserWarning, RuntimeWarning)):
            _warn(str(w.message).splitlines()[0])
    if not quiet and printed is not None:
        for entry in list(est.training_log_)[printed[0]:]:
            _say(_format_entry(entry))
    return est


def _read_header(path):
    """Header (JSON dict) of a model file that :meth:`LinearChainCRF.load` has already accepted.

    Only the ``__header__`` member is read (the arrays are not decompressed a second time).
    """
    import numpy as np

    from ..io.modelfile import HEADER_KEY

    with np.load(path, allow_pickle=False) as npz:
        return json.loads(npz[HEADER_KEY].tobytes().decode("utf-8"))


def _load_estimator(path):
    from ..estimators.crf import LinearChainCRF

    if not os.path.exists(path):
        raise CLIError(f"model file not found: {path!r}")
    if os.path.isdir(path):
        raise CLIError(f"{path}: is a folder, not a model file")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] != b"PK":  # an .npz is a zip archive; anything else would reach numpy's pickle check
        raise CLIError(f"{path}: not a structlearn model file (expected an .npz archive written by "
                       f"'structlearn learn'); check the -m argument")
    try:
        fmt = _read_header(path).get("format")
    except Exception:  # noqa: BLE001 - unreadable headers are reported by load() below
        fmt = None
    if fmt == "tree-crf":
        from ..estimators.tree_crf import TreeCRF

        return TreeCRF.load(path)
    if fmt == "semi-markov-crf":
        from ..estimators.semicrf import SemiMarkovCRF

        return SemiMarkovCRF.load(path)
    if fmt and "higher-order" in str(fmt):
        return _higher_order_class().load(path)
    return LinearChainCRF.load(path)


def _looks_chunked(labels):
    """True when every label is O or PREFIX-TYPE with PREFIX in B, I, E, S (conlleval's tag shapes)."""
    seen = False
    for lab in labels:
        if lab == "O":
            continue
        prefix, sep, typ = lab.partition("-")
        if not sep or prefix not in ("B", "I", "E", "S") or not typ:
            return False
        seen = True
    return seen


def evaluation_report(y_true, y_pred):
    """Text of the evaluation printed by ``tag -t`` and ``eval`` (list of lines)."""
    from ..metrics import classification_report, conlleval

    lines = ["Performance by label (token level):", classification_report(y_true, y_pred, digits=4), ""]
    n_tok = sum(len(s) for s in y_true)
    n_ok = sum(a == b for t, p in zip(y_true, y_pred) for a, b in zip(t, p))
    n_seq = len(y_true)
    n_seq_ok = sum(list(t) == list(p) for t, p in zip(y_true, y_pred))
    acc = n_ok / n_tok if n_tok else 0.0
    lines.append(f"Item accuracy: {n_ok} / {n_tok} ({acc:.4f})")
    lines.append(f"Instance accuracy: {n_seq_ok} / {n_seq} ({n_seq_ok / n_seq if n_seq else 0.0:.4f})")
    labels = {lab for s in y_true for lab in s} | {lab for s in y_pred for lab in s}
    if _looks_chunked(labels):
        res = conlleval(y_true, y_pred)
        lines.append(f"Chunk F1 (conlleval): {res.f1:.4f} (precision {res.precision:.4f}, recall "
                     f"{res.recall:.4f})")
        lines.append("")
        lines.append(res.report())
    else:
        lines.append("Chunk scores: skipped (the labels are not B-/I-/E-/S-/O chunk tags)")
    return lines


def _check_aligned(y_true, y_pred, gold_name, pred_name):
    if len(y_true) != len(y_pred):
        raise CLIError(f"{gold_name} has {len(y_true)} sequences but {pred_name} has {len(y_pred)}")
    for b, (t, p) in enumerate(zip(y_true, y_pred)):
        if len(t) != len(p):
            raise CLIError(f"sequence {b + 1}: {gold_name} has {len(t)} labels but {pred_name} has {len(p)}")


def _human_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


# ---------------------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------------------
def _param_help(items, defaults):
    """Print the parameters settable with -p (with their defaults) when ``-p help`` was given."""
    if not any(item.strip().lower() == "help" for item in items):
        return False
    _say("Parameters for -p NAME=VALUE (default in parentheses; see help(structlearn.LinearChainCRF)):")
    for name in sorted(n for n in defaults if n not in _NOT_BY_P):
        _say(f"  {name} ({defaults[name]})")
    _say("CRFsuite names: " + ", ".join(f"{a} = {b}" for a, b in _ALIASES.items())
         + ", calibration.X = calibration_X")
    return True


class _TagSemiMarkov:
    """A fitted SemiMarkovCRF seen by ``tag`` as a token tagger; ``predict_marginals`` gives the marginals
    of the token tags: IOB2 B-X / I-X / O from the segment marginals, or the segment label (runs)."""

    def __init__(self, est):
        self.est = est

    def predict(self, X):
        return self.est.predict(X)

    def predict_proba_sequence(self, X):
        return self.est.predict_proba_sequence(X)

    def kbest(self, X, k):
        return self.est.kbest(X, k, output="labels")

    def predict_marginals(self, X):
        import numpy as np

        est = self.est
        bio = est.label_format_ != "runs"
        occ = est.predict_marginals(X)
        begins = [np.zeros_like(o) for o in occ]
        if bio:
            for b, segs in enumerate(est.predict_segment_marginals(X, threshold=0.0)):
                for s, _, lab, p in segs:
                    begins[b][s, est._label_index[lab]] += p
        out = []
        for o, st in zip(occ, begins):
            rows = []
            for t in range(o.shape[0]):
                d = {}
                for k, c in enumerate(est.classes_):
                    if not bio or c == est.outside:
                        d[c] = float(o[t, k])
                    else:
                        d["B-" + c] = float(st[t, k])
                        d["I-" + c] = float(max(o[t, k] - st[t, k], 0.0))
                rows.append(d)
            out.append(rows)
        return out


class _BoundTrees:
    """A fitted TreeCRF with the parents of the input bound, so ``tag`` treats it like a chain model."""

    def __init__(self, est, parents):
        self.est, self.parents = est, parents

    def predict(self, X):
        return self.est.predict(X, parents=self.parents)

    def predict_marginals(self, X):
        return self.est.predict_marginals(X, parents=self.parents)

    def predict_proba_sequence(self, X):
        return self.est.predict_proba_sequence(X, parents=self.parents)

    def kbest(self, X, k):
        return self.est.kbest(X, k, parents=self.parents)


def _read_trees(paths):
    """Items, labels and parent indices of CRFSuite-0.13 tree files."""
    from ..estimators.tree_crf import parents_from_ids
    from ..io.crfsuite import read_crfsuite_tree

    X, y, P = [], [], []
    for path in paths:
        name = "<stdin>" if path == "-" else path
        try:
            Xi, yi, nodes, parent_ids = read_crfsuite_tree(_source(path))
            Pi = parents_from_ids(nodes, parent_ids)
        except FileNotFoundError:
            raise CLIError(f"{name}: no such file") from None
        except ValueError as exc:
            raise CLIError(f"{name}: {exc}") from None
        X += Xi
        y += yi
        P += list(Pi)
    return X, y, P


def _learn_tree(args):
    from ..estimators.tree_crf import TreeCRF

    defaults = TreeCRF().get_params()
    params = {"algorithm": args.algorithm, **parse_params(args.param, defaults)}
    params["verbose"] = bool(args.verbose)
    X, y, P = _read_trees(args.train)
    if not args.quiet:
        _say(f"Reading: {len(X)} trees, {sum(len(s) for s in X)} nodes from {', '.join(args.train)}")
    est = TreeCRF(**params)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(X, y, parents=P)
    except ValueError as exc:
        raise CLIError(str(exc).splitlines()[0]) from None
    for w in caught:
        _warn(str(w.message).splitlines()[0])
    if not args.quiet:
        for entry in est.training_log_:
            _say(_format_entry(entry))
        _say(f"Training: {est.n_iter_} iterations, {'converged' if est.converged_ else 'not converged'}, "
             f"{time.perf_counter() - t0:.2f} s")
    est.save(args.model)
    if not args.quiet:
        _say(f"Saved the model to {args.model} ({_human_size(os.path.getsize(args.model))})")
    return 0


def _higher_order_class():
    """``structlearn.HigherOrderCRF``, or a CLIError saying it is not available yet."""
    try:
        from .. import HigherOrderCRF
    except (ImportError, AttributeError):
        HigherOrderCRF = None
    if HigherOrderCRF is None:
        raise CLIError("--structure higher-order is not yet available in this version of structlearn "
                       "(structlearn.HigherOrderCRF cannot be imported); use --structure chain or "
                       "semi-markov")
    return HigherOrderCRF


def _learn_semimarkov(args):
    from ..estimators.semicrf import SemiMarkovCRF

    if args.algorithm != "lbfgs":
        raise CLIError(f"--structure semi-markov trains with -a lbfgs only; got -a {args.algorithm}")
    if args.dev is not None or args.forbid:
        raise CLIError("-e/--dev and --forbid are not available with --structure semi-markov")
    if args.order is not None:
        raise CLIError("--order applies to --structure higher-order only")
    if args.max_segment_length is not None and args.max_segment_length < 1:
        raise CLIError(f"--max-segment-length expects a positive integer; got {args.max_segment_length}")
    defaults = SemiMarkovCRF().get_params()
    if _param_help(args.param, defaults):
        return 0
    params = parse_params(args.param, {k: v for k, v in defaults.items()
                                       if k not in ("segment_features", "max_segment_length")})
    params["verbose"] = bool(args.verbose)
    params["allow_same_label"] = bool(args.allow_same_label) or params.get("allow_same_label", False)
    params["max_segment_length"] = args.max_segment_length
    params["segment_features"] = tuple(f.strip() for f in args.segment_features.split(",") if f.strip())
    featurizer = _Featurizer.from_args(args.format, args.template, args.columns)
    t0 = time.perf_counter()
    X, y = _read_many(featurizer, args.train)
    if not args.quiet:
        _say(f"Reading: {len(X)} sequences, {sum(len(s) for s in X)} items from {', '.join(args.train)} "
             f"({featurizer.describe()}; {time.perf_counter() - t0:.2f} s)")
        _say("Parameters: " + " ".join(f"{k}={v}" for k, v in params.items() if k != "verbose"))
    est = SemiMarkovCRF(**params)

    def on_entry(entry):
        _say(_format_entry(entry))

    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(X, y, callback=None if args.quiet or args.verbose else on_entry)
    except ValueError as exc:
        raise CLIError(str(exc).splitlines()[0]) from None
    from sklearn.exceptions import ConvergenceWarning

    for w in caught:
        if params.get("max_iterations") is not None and issubclass(w.category, ConvergenceWarning):
            continue
        _warn(str(w.message).splitlines()[0])
    if not args.quiet:
        _say(f"Training: {est.n_iter_} iterations, {'converged' if est.converged_ else 'not converged'}, "
             f"{time.perf_counter() - t0:.2f} s")
        lens = ", ".join(f"{c} {n}" for c, n in list(est.max_lengths_.items())[:20])
        _say(f"Model: {len(est.classes_)} segment labels ({est.label_format_} format), longest segments: "
             f"{lens}; {est.coef_.size} parameters")
    est.save(args.model, metadata={"featurizer": featurizer.record()})
    if not args.quiet:
        _say(f"Saved the model to {args.model} ({_human_size(os.path.getsize(args.model))})")
    return 0


def cmd_learn(args):
    structure = getattr(args, "structure", "chain")
    if structure == "tree":
        return _learn_tree(args)
    if structure == "semi-markov":
        return _learn_semimarkov(args)
    for opt, name in ((getattr(args, "max_segment_length", None), "--max-segment-length"),
                      (getattr(args, "allow_same_label", False) or None, "--allow-same-label")):
        if opt is not None:
            raise CLIError(f"{name} applies to --structure semi-markov only")
    if getattr(args, "order", None) is not None and structure != "higher-order":
        raise CLIError("--order applies to --structure higher-order only")
    cls = None
    if structure == "higher-order":
        cls = _higher_order_class()
        if args.order is not None and args.order < 1:
            raise CLIError(f"--order expects a positive integer; got {args.order}")
        order = 2 if args.order is None else args.order
    defaults = _estimator_params() if cls is None else cls(order=order).get_params()
    if _param_help(args.param, defaults):
        return 0
    params = {"algorithm": args.algorithm, **parse_params(args.param, defaults)}
    if cls is not None:
        params["order"] = order
        for name, given, opt in (("algorithm", args.algorithm != "lbfgs", "-a"),
                                 ("forbidden_transitions", bool(args.forbid), "--forbid")):
            if name not in defaults:
                if given:
                    raise CLIError(f"{opt} is not available with --structure higher-order")
                params.pop(name, None)
    if args.forbid:
        params["forbidden_transitions"] = _parse_forbid(args.forbid)
    params["verbose"] = bool(args.verbose)
    featurizer = _Featurizer.from_args(args.format, args.template, args.columns)

    t0 = time.perf_counter()
    X, y = _read_many(featurizer, args.train)
    X_dev = y_dev = None
    if args.dev is not None:
        X_dev, y_dev, dev_name = featurizer.read(args.dev)
        if y_dev is None:
            raise CLIError(f"{dev_name}: the held-out input has no label column")
    t_read = time.perf_counter() - t0
    n_items = sum(len(s) for s in X)
    if not args.quiet:
        _say(f"Reading: {len(X)} sequences, {n_items} items from {', '.join(args.train)} "
             f"({featurizer.describe()}; {t_read:.2f} s)")
        if X_dev is not None:
            _say(f"Held-out: {len(X_dev)} sequences, {sum(len(s) for s in X_dev)} items from {args.dev}")
        shown = {k: v for k, v in params.items() if k != "verbose"}
        if args.verbose:
            shown = {**{k: v for k, v in defaults.items() if k != "verbose"}, **shown}
        _say("Parameters: " + " ".join(f"{k}={v}" for k, v in shown.items()))

    printed = [0]

    def on_entry(entry):
        printed[0] += 1
        _say(_format_entry(entry))

    est = _make_estimator(params) if cls is None else cls(**params)
    t0 = time.perf_counter()
    _fit(est, X, y, X_dev, y_dev, printed=None if args.verbose else printed, quiet=args.quiet,
         expect_max_iterations=params.get("max_iterations") is not None,
         callback=None if args.quiet or args.verbose else on_entry)
    seconds = time.perf_counter() - t0
    if not args.quiet:
        log = est.training_log_
        reason = log[-1].get("stop_reason") if log else None
        _say(f"Training: {est.n_iter_} iterations, {'converged' if est.converged_ else 'not converged'}"
             + (f" ({reason})" if reason else "") + f", {seconds:.2f} s")
        size = getattr(est, "size_", None)
        size = est.coef_.size if size is None and hasattr(est, "coef_") else size
        _say(f"Model: {len(est.classes_)} labels, {len(getattr(est, 'attributes_', ()))} attributes, "
             f"{size} features")
        if X_dev is not None:
            pred = est.predict(X_dev)
            for line in evaluation_report(y_dev, pred)[3:6]:
                if line:
                    _say("Held-out " + line[0].lower() + line[1:])
    est.save(args.model, metadata={"featurizer": featurizer.record()})
    if not args.quiet:
        _say(f"Saved the model to {args.model} ({_human_size(os.path.getsize(args.model))})")
    return 0


def cmd_tag(args):
    if args.kbest is not None and args.kbest < 1:
        raise CLIError(f"-k expects a positive number of labelings; got {args.kbest}")
    if args.kbest is not None and args.marginal:
        raise CLIError("-i (marginals of the best labeling) cannot be combined with -k")
    est = _load_estimator(args.model)
    need_gold = args.test or args.reference
    if type(est).__name__ == "TreeCRF":
        X, y, P = _read_trees([args.input])
        name = args.input
        est = _BoundTrees(est, P)
    else:
        stored = getattr(est, "metadata_", {}).get("featurizer")
        if type(est).__name__ == "SemiMarkovCRF":
            est = _TagSemiMarkov(est)
        featurizer = _Featurizer.from_args(args.format, args.template, args.columns, stored or {})
        X, y, name = featurizer.read(args.input, need_labels=need_gold)
    if need_gold:
        if y is None or any(lab == "" for s in y for lab in s):
            raise CLIError(f"{name}: -t/-r need the gold labels, but the input has "
                           + ("no label column" if y is None else "empty label fields"))
    out = _Out()
    pred = est.predict(X) if (not args.quiet or args.test) and args.kbest is None else None
    if not args.quiet:
        if args.kbest is not None:
            for b, results in enumerate(est.kbest(X, args.kbest)):
                for r, (labels, prob) in enumerate(results, 1):
                    out(f"@kbest\t{r}\t{prob:.6f}")
                    for t, lab in enumerate(labels):
                        out(f"{y[b][t]}\t{lab}" if args.reference else lab)
                    out()
        else:
            probs = est.predict_proba_sequence(X) if args.probability else None
            marg = est.predict_marginals(X) if args.marginal else None
            for b, labels in enumerate(pred):
                if probs is not None:
                    out(f"@probability\t{probs[b]:.6f}")
                for t, lab in enumerate(labels):
                    text = f"{lab}:{marg[b][t][lab]:.6f}" if marg is not None else lab
                    out(f"{y[b][t]}\t{text}" if args.reference else text)
                out()
    if args.test:
        if pred is None:
            pred = est.predict(X)
        for line in evaluation_report(y, pred):
            out(line)
    out.flush()
    return 0


def _labels_of(path, fmt, column):
    name = "<stdin>" if path == "-" else path
    try:
        if fmt == "crfsuite":
            from ..io.crfsuite import read_crfsuite

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # '@probability' lines of 'tag -p' output
                _, y = read_crfsuite(_source(path))
            return y
        from ..io.conll import read_conll

        try:
            return [[tok[0] for tok in s] for s in read_conll(_source(path), columns=[column])]
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise CLIError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def cmd_eval(args):
    if args.conll is not None:
        if args.files:
            raise CLIError("give either GOLD PRED or --conll FILE, not both")
        from ..io.conll import read_conll

        try:
            sents = read_conll(_source(args.conll), columns=[args.gold_column, args.pred_column])
        except UnicodeDecodeError as exc:
            raise CLIError(f"{args.conll}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        y_true = [[tok[0] for tok in s] for s in sents]
        y_pred = [[tok[1] for tok in s] for s in sents]
    else:
        if len(args.files) != 2:
            raise CLIError(f"eval needs GOLD and PRED files (or --conll FILE); got {len(args.files)} file(s)")
        gold, pred = args.files
        y_true = _labels_of(gold, args.format, args.label_column)
        y_pred = _labels_of(pred, args.format, args.label_column)
        _check_aligned(y_true, y_pred, gold, pred)
    if not any(y_true):
        raise CLIError("no labels to evaluate (the gold input is empty)")
    out = _Out()
    for line in evaluation_report(y_true, y_pred):
        out(line)
    out.flush()
    return 0


def _fmt_w(v):
    return "-inf" if v == float("-inf") else f"{v:.4f}"


def cmd_dump(args):
    est = _load_estimator(args.model)
    if not hasattr(est, "state_features_") and type(est).__name__ != "TreeCRF":
        raise CLIError(f"{args.model}: dump is not available for {type(est).__name__} models yet; use "
                       f"'{PROG} info'")
    header = _read_header(args.model)
    out = _Out()
    cls = list(est.classes_)
    out(f"MODEL: {args.model}")
    out(f"FORMAT: {header.get('format')} version {header.get('version')} "
        f"(structlearn {header.get('structlearn_version')})")
    out()
    out(f"LABELS ({len(cls)}):")
    for k, lab in enumerate(cls):
        out(f"  {k:>4}  {lab}")
    out()
    if type(est).__name__ == "TreeCRF":
        out("EDGES (child label <- parent label):")
        for (c, p), v in sorted(est.edge_features_.items(), key=lambda kv: str(kv[0])):
            out(f"  {_fmt_w(v):>10}  {c} <- {p}")
        out("ROOT:")
        for lab, v in est.root_features_.items():
            out(f"  {_fmt_w(v):>10}  {lab}")
        trans = None
    else:
        trans = est.transition_features_
        out("TRANSITIONS (row: from, column: to; '.': no feature, -inf: forbidden):")
    if trans is None:
        pass
    elif len(cls) <= 20:
        names = cls + ["<end>"]
        width = max(8, max(len(n) for n in names + ["<start>"]) + 1)
        out(" " * width + "".join(f"{n:>{width}}" for n in names))
        for a in ["<start>"] + cls:
            cells = []
            for b in names:
                if a == "<start>" and b == "<end>":
                    cells.append("")
                    continue
                v = trans.get((a, b))
                cells.append("." if v is None else _fmt_w(v))
            out(f"{a:<{width}}" + "".join(f"{c:>{width}}" for c in cells))
    else:
        for (a, b), v in sorted(trans.items(), key=lambda kv: -abs(kv[1]) if kv[1] > float("-inf") else 0):
            out(f"  {_fmt_w(v):>10}  {a} -> {b}")
    out()
    state = est.state_features_
    items = sorted(state.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
    top = len(items) if args.top <= 0 else min(args.top, len(items))
    out(f"STATE_FEATURES (top {top} of {len(items)} by |weight|):")
    for (attr, lab), v in items[:top]:
        out(f"  {v:>+10.4f}  {attr} -> {lab}")
    out.flush()
    return 0


def cmd_info(args):
    est = _load_estimator(args.model)
    header = _read_header(args.model)
    meta = header.get("metadata") or {}
    out = _Out()
    out(f"file: {args.model} ({_human_size(os.path.getsize(args.model))})")
    out(f"format: {header.get('format')} version {header.get('version')}, written by structlearn "
        f"{header.get('structlearn_version')} ({header.get('estimator')})")
    feat = getattr(est, "metadata_", {}).get("featurizer")
    if not feat:
        out("input: not recorded (CRFsuite attribute files assumed)")
    elif feat.get("format") == "conll":
        fields = feat.get("columns") or (feat.get("spec") or {}).get("fields")
        out(f"input: CoNLL columns {','.join(fields or [])}, template {feat.get('template')}")
    else:
        out("input: CRFsuite attribute files")
    cls = list(est.classes_)
    shown = ", ".join(cls[:20]) + (", ..." if len(cls) > 20 else "")
    out(f"labels: {len(cls)} ({shown})")
    out(f"attributes: {len(est.attributes_)}")
    if hasattr(est, "state_features_"):
        n_state = len(est.state_features_)
        out(f"features: {est.size_} (state {n_state}, transitions and start/end {est.size_ - n_state})")
    else:
        out(f"parameters: {est.coef_.size}")
        if hasattr(est, "max_lengths_"):
            out("longest segments: " + ", ".join(f"{c} {n}" for c, n in est.max_lengths_.items()))
    params = header.get("params") or {}
    out("parameters: " + " ".join(f"{k}={v}" for k, v in params.items() if k != "verbose"))
    log = list(est.training_log_)
    secs = sum(e.get("seconds", 0.0) for e in log)
    line = f"training: {est.n_iter_} iterations, {'converged' if est.converged_ else 'not converged'}"
    if log and "stop_reason" in log[-1]:
        line += f" ({log[-1]['stop_reason']})"
    if log and "loss" in log[-1]:
        line += f", final loss {log[-1]['loss']:.6f}"
    if log:
        line += f", {secs:.2f} s"
    out(line)
    out.flush()
    return 0


def cmd_demo(args):
    from ..datasets import load_conll2000
    from ..io.conll import featurize
    from ..metrics import conlleval

    defaults = _estimator_params()
    if _param_help(args.param, defaults):
        return 0
    params = {"algorithm": args.algorithm, "c2": 1.0, **parse_params(args.param, defaults)}
    if args.max_iterations is not None:
        if args.max_iterations < 1:
            raise CLIError(f"--max-iterations must be a positive integer; got {args.max_iterations}")
        params["max_iterations"] = args.max_iterations
    quiet = args.quiet
    t_start = time.perf_counter()
    try:
        data = load_conll2000(args.data_home, download_if_missing=args.download)
    except FileNotFoundError as exc:
        raise CLIError(f"{exc} Or pass --data-home DIR (a folder holding conll2000/train.txt.gz and "
                       f"test.txt.gz), set $STRUCTLEARN_DATA, or rerun with --download.") from None
    n_train = sum(len(s) for s in data.train)
    n_test = sum(len(s) for s in data.test)
    if not quiet:
        _say("structlearn demo: linear-chain CRF chunker on CoNLL-2000 (chunking template, "
             + " ".join(f"{k}={v}" for k, v in params.items()) + ")")
        _say(f"data: {data.path}: train {len(data.train)} sentences / {n_train} tokens, test "
             f"{len(data.test)} / {n_test}")
    t0 = time.perf_counter()
    X_train, y_train = featurize(data.train, "chunking")
    X_test, y_test = featurize(data.test, "chunking")
    t_feat = time.perf_counter() - t0
    if not quiet:
        _say(f"featurise: {t_feat:.2f} s")
    printed = [0]

    def on_entry(entry):
        printed[0] += 1
        _say(_format_entry(entry))

    est = _make_estimator(params)
    t0 = time.perf_counter()
    _fit(est, X_train, y_train, printed=printed, quiet=quiet,
         expect_max_iterations=params.get("max_iterations") is not None,
         callback=None if quiet else on_entry)
    t_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = est.predict(X_test)
    t_tag = time.perf_counter() - t0
    res = conlleval(y_test, pred)
    total = time.perf_counter() - t_start
    per_it = t_train / est.n_iter_ if est.n_iter_ else float("nan")
    _say(f"chunk F1 (conlleval): {res.f1:.4f}  (precision {res.precision:.4f}, recall {res.recall:.4f})")
    _say(f"token accuracy: {res.accuracy:.4f}")
    _say(f"iterations: {est.n_iter_} ({'converged' if est.converged_ else 'not converged'}), "
         f"{per_it:.3f} s/iteration; features: {est.size_}")
    _say(f"time: featurise {t_feat:.2f} s, train {t_train:.2f} s, tag {t_tag:.2f} s, total {total:.2f} s")
    if args.verbose:
        _say()
        _say(res.report())
    return 0


_COMMANDS = {"learn": cmd_learn, "tag": cmd_tag, "eval": cmd_eval, "dump": cmd_dump, "info": cmd_info,
             "demo": cmd_demo}


def main(argv=None):
    """Run the ``structlearn`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success; 2 on a bad argument or input (one line ``structlearn: error: …`` on stderr); 130 when
    interrupted.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else 0
        if args.command is None:
            parser.print_help()
            return 2
        return _COMMANDS[args.command](args)
    except CLIError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. 'structlearn tag ... | head'
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        msg = exc.strerror and exc.filename and f"{exc.filename}: {exc.strerror}" or str(exc)
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    except ValueError as exc:  # bad input: malformed file (file:line), model file errors, bad parameters
        print(f"{PROG}: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
              file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
