"""``structlearn learn``: one training path for every structure (chain, tree, semi-markov, higher-order).

A :class:`Structure` says what differs: the model format (hence the estimator class, see
:data:`structlearn.io.modelfile.MODEL_FORMATS`), how the input is read, which options apply, the estimator
parameters those options set and the ``Model:`` summary line.
"""
import importlib
import inspect
import os
import time
import warnings
from typing import Callable, NamedTuple

from .common import CLIError, human_size, redirect_say, say, warn
from .featurize import Featurizer, TreeReader, read_many
from .params import param_help, parse_forbid, parse_params

__all__ = ["cmd_learn", "STRUCTURES", "Structure", "fit", "format_entry", "estimator_class", "crfsuite_log_entry",
           "crfsuite_log_name", "TYPE_ALIASES"]


def _chain_summary(est):
    size = getattr(est, "num_features_", None)
    size = getattr(est, "size_", None) if size is None else size
    size = est.coef_.size if size is None and hasattr(est, "coef_") else size
    return (f"Model: {len(est.classes_)} labels, {len(getattr(est, 'attributes_', ()))} attributes, "
            f"{size} features")


def _segment_summary(est):
    lens = ", ".join(f"{c} {n}" for c, n in list(est.max_lengths_.items())[:20])
    return (f"Model: {len(est.classes_)} segment labels ({est.label_format_} format), longest segments: "
            f"{lens}; {est.coef_.size} parameters")


def _semi_markov_params(args, params):
    return {"allow_same_label": bool(args.allow_same_label) or params.get("allow_same_label", False),
            "max_segment_length": args.max_segment_length,
            "segment_features": tuple(f.strip() for f in args.segment_features.split(",") if f.strip())}


class Structure(NamedTuple):
    format: str                 # model format written by the estimator
    trees: bool = False         # input: CRFSuite-0.13 tree files (else CRFsuite/CoNLL sequences)
    lbfgs_only: bool = False    # has an `algorithm` parameter but trains with lbfgs only (not passed)
    dev: bool = True            # -e/--dev accepted
    forbid: bool = False        # --forbid accepted (sets forbidden_transitions)
    options: tuple = ()         # its own options (dest names) among SPECIFIC_OPTIONS
    by_option: dict = {}        # estimator parameter -> the option that sets it (refused with -p)
    option_params: Callable = None   # (args, params from -p) -> parameters set by its options
    summary: Callable = _chain_summary


STRUCTURES = {
    "chain": Structure("linear-chain-crf", forbid=True),
    "tree": Structure("tree-crf", trees=True, dev=False),
    "semi-markov": Structure("semi-markov-crf", lbfgs_only=True, dev=False,
                             options=("max_segment_length", "allow_same_label"),
                             by_option={"segment_features": "--segment-features",
                                        "max_segment_length": "--max-segment-length"},
                             option_params=_semi_markov_params, summary=_segment_summary),
    "higher-order": Structure("higher-order-crf", options=("order",),
                              by_option={"order": "--order"},
                              option_params=lambda args, params: {"order": 2 if args.order is None
                                                                  else args.order}),
}
# options of one structure: dest -> (option, the structure it applies to)
SPECIFIC_OPTIONS = {"max_segment_length": ("--max-segment-length", "semi-markov"),
                    "allow_same_label": ("--allow-same-label", "semi-markov"),
                    "order": ("--order", "higher-order")}


def estimator_class(structure):
    """The estimator class that writes ``structure.format`` model files."""
    from ..io.modelfile import MODEL_FORMATS

    module, _, name = MODEL_FORMATS[structure.format].partition(":")
    return getattr(importlib.import_module(module), name)


def format_entry(entry):
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


COMPILE_NOTICE = ("first run in this environment: Numba compiles the training kernels before the first "
                  "iteration (a minute or two) and caches them for later runs")


def _first_compilation():
    """Whether the CRF objective kernel has never been compiled into Numba's cache here (the notice of the
    first ``learn`` / ``demo`` run, whose first iteration otherwise looks like a hang)."""
    from ..engine.kernels.cache import is_cached
    from ..engine.kernels.crf import chain_cll

    return is_cached(chain_cll) is False


def fit(est, X, y, X_dev=None, y_dev=None, *, log=True, expect_max_iterations=False, **fit_kwargs):
    """Fit, printing each log entry as it comes (``log``) and turning warnings into one-line messages.

    With ``expect_max_iterations`` (the user set ``max_iterations``), the ConvergenceWarning of reaching it
    is not repeated: the summary line already says "not converged".
    """
    from sklearn.exceptions import ConvergenceWarning

    printed = [0]

    def on_entry(entry):
        printed[0] += 1
        say(format_entry(entry))

    if X_dev is not None:
        fit_kwargs.update(X_dev=X_dev, y_dev=y_dev)
    noticed = log and _first_compilation()
    if noticed:
        say(COMPILE_NOTICE)
    if log and "callback" in inspect.signature(est.fit).parameters:
        fit_kwargs["callback"] = on_entry
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the notice of a kernel compiling now (structlearn.CompilationWarning) is printed when it is issued,
        # before the wait, unless the line above said so already; other warnings are reported after the fit
        def show(message, category, filename, lineno, file=None, line=None):
            if category.__name__ != "CompilationWarning":
                caught.append(warnings.WarningMessage(message, category, filename, lineno, file, line))
            elif not noticed:
                warn(str(message).removeprefix("structlearn: ").splitlines()[0])

        warnings.showwarning = show
        est.fit(X, y, **fit_kwargs)
    for w in caught:
        if expect_max_iterations and issubclass(w.category, ConvergenceWarning):
            continue
        if issubclass(w.category, (ConvergenceWarning, UserWarning, RuntimeWarning)):
            warn(str(w.message).splitlines()[0])
    if log:  # entries the estimator logged without a callback
        for entry in list(est.training_log_)[printed[0]:]:
            say(format_entry(entry))
    return est


def _check_options(args, name, structure, defaults):
    """Refuse options that do not apply to the structure, and bad values of its own options."""
    for dest, (option, owner) in SPECIFIC_OPTIONS.items():
        given = getattr(args, dest, None)
        if given is None or given is False:
            continue
        if dest not in structure.options:
            raise CLIError(f"{option} applies to --structure {owner} only")
        if given is not True and not isinstance(given, str) and given < 1:
            raise CLIError(f"{option} expects a positive integer; got {given}")
    if args.algorithm != "lbfgs" and "algorithm" not in defaults:
        raise CLIError(f"-a is not available with --structure {name}")
    if args.algorithm != "lbfgs" and structure.lbfgs_only:
        raise CLIError(f"--structure {name} trains with -a lbfgs only; got -a {args.algorithm}")
    for given, ok, what in ((args.dev is not None, structure.dev, "-e/--dev is"),
                            (bool(args.crfsuite_log) and (args.quiet or args.verbose), False,
                             "--crfsuite-log with -q/-v is"),
                            (bool(args.forbid), structure.forbid, "--forbid is"),
                            ((args.format, args.template, args.columns) != (None,) * 3, not structure.trees,
                             "--format/--template/--columns are")):
        if given and not ok:
            raise CLIError(f"{what} not available with --structure {name}")


# CRFSuite 0.13's --type names and its -p names of options that structlearn sets with its own options
TYPE_ALIASES = {"1d": "chain", "crf1d": "chain", "semim": "semi-markov", "tree": "tree",
                "chain": "chain", "semi-markov": "semi-markov", "higher-order": "higher-order"}
_OPTION_PARAMS = {"feature.max_seg_len": "max_seg_len", "feature.max_order": "max_order", "feature.order": "order"}


def _crfsuite013_aliases(args):
    """Apply ``--type`` and CRFSuite 0.13's ``-p feature.max_seg_len=N`` / ``-p feature.max_order=N`` (and
    structlearn's ``-p feature.order=N``) to ``args``: the structure and the options they stand for.

    CRFSuite 0.13 (``lib/crf/src/crf1d_encode.c``, ``crf1d_feature.c``, ``crf1d_context.c``, ``semimarkov.c``)
    reads ``feature.max_seg_len`` by its sign only: negative (its default, -1) trains the semi-Markov CRF, whose
    longest segment of each label is that label's longest run in the training data (no other limit); zero or
    positive trains a linear-chain CRF (segments of one token) of order ``feature.max_order`` (default 1),
    the value itself limiting nothing. ``feature.max_order`` is the order of the transition features: over
    segment labels in the semi-Markov CRF, over token labels in the linear chain.
    """
    if getattr(args, "type", None):
        t = args.type.strip().lower()
        if t not in TYPE_ALIASES:
            raise CLIError(f"--type must be one of {', '.join(sorted(TYPE_ALIASES))}; got {args.type!r}")
        args.structure = TYPE_ALIASES[t]
    rest, given = [], {}
    for item in args.param:
        name, sep, text = item.partition("=")
        dest = _OPTION_PARAMS.get(name.strip())
        if dest is None or not sep:
            rest.append(item)
            continue
        try:
            given[dest] = int(text)
        except ValueError:
            raise CLIError(f"-p {name.strip()} expects an integer; got {text!r}") from None
    args.param = rest
    if "order" in given:
        value = given["order"]
        if value >= 2 and args.structure == "chain":
            args.structure = "higher-order"
        if args.structure == "higher-order":
            args.order = value
        elif value != 1:
            raise CLIError(f"-p feature.order={value} needs --structure chain or higher-order")
    if "max_seg_len" not in given and "max_order" not in given:
        return
    # without --type semim, CRFSuite 0.13's default type is the linear chain: max_order alone sets its order
    seg = given.get("max_seg_len", -1 if args.structure == "semi-markov" else 0)
    order = given.get("max_order", 1)
    if order < 1:
        raise CLIError(f"-p feature.max_order expects an integer >= 1; got {order}")
    if args.structure not in ("chain", "semi-markov"):
        raise CLIError("-p feature.max_seg_len / feature.max_order (CRFSuite 0.13) need --type semim; got "
                       f"--structure {args.structure}")
    if seg >= 0:            # CRFSuite 0.13's linear-chain mode of --type semim
        args.structure = "higher-order" if order >= 2 else "chain"
        args.order = order if order >= 2 else None
    elif order >= 2:        # semi-Markov CRF with segment-label n-grams (Nguyen et al. 2011)
        if args.max_segment_length not in (None, "per-label"):
            raise CLIError("-p feature.max_order >= 2 trains HigherOrderCRF(segments=True), whose longest "
                           "segments are the training runs of each label: drop --max-segment-length")
        args.structure, args.order = "higher-order", order
        args.param.append("segments=true")
    else:
        args.structure = "semi-markov"


def _check_model_path(path):
    """Fail before training when the model file cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        existing = folder   # the deepest component that exists: a file where a folder should be?
        while not os.path.exists(existing) and os.path.dirname(existing) != existing:
            existing = os.path.dirname(existing)
        if os.path.exists(existing) and not os.path.isdir(existing):
            raise CLIError(f"cannot write the model to {path}: {existing} is a file, not a folder")
        raise CLIError(f"cannot write the model to {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise CLIError(f"cannot write the model to {path}: it is a folder")
    if not os.access(folder, os.W_OK):
        raise CLIError(f"cannot write the model to {path}: the folder {folder} is not writable")


def _subset(data, idx, name):
    from .featurize import Data

    return Data([data.X[i] for i in idx], [data.y[i] for i in idx], name,
                {k: [v[i] for i in idx] for k, v in data.extra.items()})


def _groups(args, reader):
    """(all data, group number 1..G of every instance, G): per file, or round-robin with ``-g N``
    (CRFsuite: instance i is in group i mod N + 1)."""
    datas = [reader.read(p) for p in args.train]
    for d in datas:
        if d.y is None:
            raise CLIError(f"{d.name}: the input has no label column; training needs labels")
    from .featurize import Data

    X, y, extra, group = [], [], {}, []
    for g, d in enumerate(datas, 1):
        X.extend(d.X)
        y.extend(d.y)
        group.extend([g] * len(d.X))
        for k, v in d.extra.items():
            extra.setdefault(k, []).extend(v)
    data = Data(X, y, ", ".join(args.train), extra)
    if args.split is not None:
        if args.split < 1:
            raise CLIError(f"-g expects a positive number of groups; got {args.split}")
        group = [i % args.split + 1 for i in range(len(X))]
        return data, group, args.split
    return data, group, len(datas)


def crfsuite_log_entry(entry, labels=None):
    """One iteration in the layout of crfsuite's training log (``***** Iteration #k *****`` ...); with
    the held-out counts of the entry (``"dev_counts"``) and the model's ``labels``, crfsuite's
    evaluation table follows, as ``crfsuite learn -e`` prints it every iteration."""
    lines = [f"***** Iteration #{entry.get('iteration', '?')} *****"]
    if "loss" in entry:
        lines.append(f"Loss: {entry['loss']:f}")
    table = labels is not None and "dev_counts" in entry
    for key, label, fmt in (("weight_norm", "Feature norm", "{:f}"), ("gradient_norm", "Error norm", "{:f}"),
                            ("active_features", "Active features", "{}"),
                            ("line_search_evals", "Line search trials", "{}"),
                            ("step", "Line search step", "{:f}"),
                            ("dev_accuracy", "Item accuracy (held-out)", "{:.4f}")):
        if key in entry and not (table and key == "dev_accuracy"):
            lines.append(f"{label}: " + fmt.format(entry[key]))
    if "seconds" in entry:
        lines.append(f"Seconds required for this iteration: {entry['seconds']:.3f}")
    if table:
        from .report import crfsuite_evaluation

        lines.extend(crfsuite_evaluation(list(labels), entry["dev_counts"]))
    return "\n".join(lines) + "\n"


def cmd_learn(args):
    raw_params = list(args.param)  # as given: crfsuite names its log file after them
    if args.log_to_file and not (args.quiet or args.verbose):
        args.crfsuite_log = True   # -l writes crfsuite's log, as crfsuite does
    _crfsuite013_aliases(args)
    name = args.structure
    structure = STRUCTURES[name]
    cls = estimator_class(structure)
    defaults = cls().get_params()
    _check_options(args, name, structure, defaults)
    if param_help(args.param, cls, defaults, structure.by_option):
        return 0
    if not args.train:
        raise CLIError("learn needs at least one TRAIN file ('-' for standard input)")
    if args.model is None and not args.cross_validate:
        raise CLIError("-m/--model is required (except with -x, which stores no model)")
    if args.model is not None:
        _check_model_path(args.model)
    path = args.log_file
    if path is None and args.log_to_file:
        path = crfsuite_log_name(args.logbase, args.algorithm, raw_params)
    if path is None:
        return _learn(args, name, structure, cls, defaults)
    if os.path.isdir(path):
        raise CLIError(f"cannot write the log to {path}: it is a folder")
    try:
        fh = open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"cannot write the log to {path}: {exc.strerror}") from None
    with fh, redirect_say(fh):
        try:
            return _learn(args, name, structure, cls, defaults)
        except KeyboardInterrupt:  # the log ends saying so (the model file is not written)
            say("Interrupted: training stopped, no model file written")
            raise


#: crfsuite's names of the training algorithms (its log file names use them)
_CRFSUITE_ALGORITHM = {"ap": "averaged-perceptron", "pa": "passive-aggressive"}


def crfsuite_log_name(base, algorithm, params):
    """The log file name of ``crfsuite learn -l``: BASE_ALGORITHM then _NAME=VALUE for every -p, in
    the order given (e.g. ``log.crfsuite_lbfgs_c2=1``)."""
    return "_".join([base, _CRFSUITE_ALGORITHM.get(algorithm, algorithm), *params])


def _learn(args, name, structure, cls, defaults):
    params = {"algorithm": args.algorithm} if "algorithm" in defaults and not structure.lbfgs_only else {}
    params.update(parse_params(args.param, defaults, structure.by_option))
    if structure.option_params is not None:
        params.update(structure.option_params(args, params))
    if args.forbid:
        params["forbidden_transitions"] = parse_forbid(args.forbid)
    if "root_features" in defaults and "root_features" not in params:
        params["root_features"] = False  # CRFSuite 0.13's tree model (no root-label weights)
    params["verbose"] = bool(args.verbose)
    reader = TreeReader() if structure.trees else Featurizer.from_args(args.format, args.template,
                                                                        args.columns)
    reader.layout_hints = True   # a tree file without --type tree, or a sequence file with it: say so
    t0 = time.perf_counter()
    holdout = None
    if args.dev is not None and not os.path.exists(args.dev) and args.dev.lstrip("-").isdigit():
        holdout = int(args.dev)
    if holdout is not None or args.cross_validate or args.split is not None:
        data, group, n_groups = _groups(args, reader)
    else:
        data, group, n_groups = read_many(reader, args.train), None, 1
    dev = None
    if holdout is not None:
        if not 1 <= holdout <= n_groups:
            raise CLIError(f"-e {holdout}: there are {n_groups} groups (files, or -g N); give 1..{n_groups}")
        dev = _subset(data, [i for i, g in enumerate(group) if g == holdout], f"group {holdout}")
        data = _subset(data, [i for i, g in enumerate(group) if g != holdout], data.name)
    elif args.dev is not None:
        dev = reader.read(args.dev)
        if dev.y is None:
            raise CLIError(f"{dev.name}: the held-out input has no label column")
    t_read = time.perf_counter() - t0
    units = ("trees", "nodes") if structure.trees else ("sequences", "items")
    if not args.quiet:
        say(f"Reading: {len(data.X)} {units[0]}, {sum(len(s) for s in data.X)} {units[1]} from {data.name} "
            f"({reader.describe()}; {t_read:.2f} s)")
        if dev is not None:
            say(f"Held-out: {len(dev.X)} {units[0]}, {sum(len(s) for s in dev.X)} {units[1]} from "
                f"{dev.name if holdout is not None else args.dev}")
        shown = {k: v for k, v in params.items() if k != "verbose"}
        if args.verbose:
            shown = {**{k: v for k, v in defaults.items() if k != "verbose"}, **shown}
        say("Parameters: " + " ".join(f"{k}={v}" for k, v in shown.items()))
    if args.cross_validate:
        _cross_validate(args, cls, params, data, group, n_groups)
        if args.model is None:
            return 0
        if not args.quiet:
            say(f"===== Final model: every group ({len(data.X)} {units[0]}) =====")
    _train_and_save(args, structure, cls, params, data, dev, reader)
    return 0


def _train_and_save(args, structure, cls, params, data, dev, reader):
    est = cls(**params)
    t0 = time.perf_counter()
    _fit_logged(args, est, data, dev, params)
    seconds = time.perf_counter() - t0
    if not args.quiet:
        log = est.training_log_
        reason = log[-1].get("stop_reason") if log else None
        say(f"Training: {est.n_iter_} iterations, {'converged' if est.converged_ else 'not converged'}"
            + (f" ({reason})" if reason else "") + f", {seconds:.2f} s")
        say(structure.summary(est))
        if dev is not None:
            say("Held-out evaluation of the final model:")
            for line in _evaluation(est, dev)[0]:
                say(line)
    record = reader.record()
    est.save(args.model, metadata=None if record is None else {"featurizer": record})
    if not args.quiet:
        say(f"Saved the model to {args.model} ({human_size(os.path.getsize(args.model))})")
    return est


def _evaluation(est, test):
    """crfsuite's evaluation table of ``est`` on ``test`` (and conlleval's chunk F1 for chunk tags)."""
    from .report import crfsuite_evaluation, evaluation_report, label_counts

    pred = est.predict(test.X, **test.extra)
    labels = list(est.classes_)
    counts = label_counts(test.y, pred, labels)
    lines = crfsuite_evaluation(labels, counts)
    lines += [ln for ln in evaluation_report(test.y, pred) if ln.startswith("Chunk F1")]
    n_ok, n_items = counts[3][:2]
    return lines, (n_ok / n_items if n_items else 1.0)


def _fit_logged(args, est, data, dev, params):
    """fit with the log in the chosen layout: structlearn's one line per iteration, or crfsuite's (-L)."""
    if args.crfsuite_log and not (args.quiet or args.verbose):
        def on_entry(entry):
            say(crfsuite_log_entry(entry, getattr(est, "classes_", None)))

        kwargs = dict(data.extra)
        if dev is not None:
            kwargs.update(X_dev=dev.X, y_dev=dev.y)
        if "callback" in inspect.signature(est.fit).parameters:
            kwargs["callback"] = on_entry
        fit(est, data.X, data.y, log=False, expect_max_iterations=params.get("max_iterations") is not None,
            **kwargs)
        if "callback" not in kwargs:
            for entry in est.training_log_:
                say(crfsuite_log_entry(entry))
        return est
    return fit(est, data.X, data.y, *(() if dev is None else (dev.X, dev.y)),
               log=not (args.quiet or args.verbose),
               expect_max_iterations=params.get("max_iterations") is not None, **data.extra)


def _cross_validate(args, cls, params, data, group, n_groups):
    """crfsuite's -x: for every group g, train on the others and evaluate on g (crfsuite's table)."""
    if n_groups < 2:
        raise CLIError("-x needs at least two groups: several TRAIN files, or -g N with N >= 2")
    accs = []
    for g in range(1, n_groups + 1):
        train = _subset(data, [i for i, h in enumerate(group) if h != g], data.name)
        test = _subset(data, [i for i, h in enumerate(group) if h == g], f"group {g}")
        if not args.quiet:
            say(f"===== Cross validation ({g}/{n_groups}) =====")
        est = cls(**params)
        _fit_logged(args, est, train, None, params)
        lines, acc = _evaluation(est, test)
        accs.append(acc)
        if not args.quiet:
            for line in lines:
                say(line)
            say()
    say(f"Cross validation: {n_groups} groups, item accuracy per group "
        + " ".join(f"{a:.4f}" for a in accs) + f"; mean {sum(accs) / len(accs):.4f}")
