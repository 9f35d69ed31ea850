"""``structlearn eval``, ``dump`` and ``info``: the evaluation report (also printed by ``tag -t`` and
``learn -e``), a readable dump of a model and a model file's header."""
import os
import warnings

from .common import PROG, CLIError, Out, human_size, open_model, source

__all__ = ["evaluation_report", "crfsuite_evaluation", "label_counts", "cmd_eval", "cmd_dump", "cmd_info"]


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


def label_counts(y_true, y_pred, labels):
    """crfsuite's evaluation counts: per label of ``labels`` (#match, #model, #ref), then
    (correct items, items, correct instances, instances). Gold labels outside ``labels`` count as
    items (never correct), as crfsuite's "unknown label" slot."""
    index = {lab: k for k, lab in enumerate(labels)}
    match, model, ref = [0] * len(labels), [0] * len(labels), [0] * len(labels)
    n_items = n_ok = n_inst_ok = 0
    for t, p in zip(y_true, y_pred):
        all_ok = True
        for a, b in zip(t, p):
            n_items += 1
            ka, kb = index.get(a), index.get(b)
            if kb is not None:
                model[kb] += 1
            if ka is not None:
                ref[ka] += 1
            if a == b and ka is not None:
                match[ka] += 1
                n_ok += 1
            else:
                all_ok = False
        n_inst_ok += all_ok
    return match, model, ref, (n_ok, n_items, n_inst_ok, len(y_true))


def crfsuite_evaluation(labels, counts):
    """Lines of crfsuite's evaluation table (``crfsuite learn -e`` every iteration, ``tag -qt``):
    per label (#match, #model, #ref) (precision, recall, F1), the macro averages over the model's
    labels (a label absent from the reference counts 0 and is shown with asterisks), item and instance
    accuracy. ``counts`` is :func:`label_counts`' result."""
    match, model, ref, (n_ok, n_items, n_inst_ok, n_inst) = counts
    lines = ["Performance by label (#match, #model, #ref) (precision, recall, F1):"]
    mp = mr = mf = 0.0
    for lab, c, m, r in zip(labels, match, model, ref):
        if r == 0:
            lines.append(f"    {lab}: ({c}, {m}, {r}) (******, ******, ******)")
            continue
        p = c / m if m else 0.0
        rc = c / r
        f = 2 * p * rc / (p + rc) if p + rc > 0 else 0.0
        mp, mr, mf = mp + p, mr + rc, mf + f
        lines.append(f"    {lab}: ({c}, {m}, {r}) ({p:1.4f}, {rc:1.4f}, {f:1.4f})")
    n = max(len(labels), 1)
    lines.append(f"Macro-average precision, recall, F1: ({mp / n:f}, {mr / n:f}, {mf / n:f})")
    lines.append(f"Item accuracy: {n_ok} / {n_items} ({n_ok / n_items if n_items else 0.0:1.4f})")
    lines.append(f"Instance accuracy: {n_inst_ok} / {n_inst} ({n_inst_ok / n_inst if n_inst else 0.0:1.4f})")
    return lines


def _check_aligned(y_true, y_pred, gold_name, pred_name):
    if len(y_true) != len(y_pred):
        raise CLIError(f"{gold_name} has {len(y_true)} sequences but {pred_name} has {len(y_pred)}")
    for b, (t, p) in enumerate(zip(y_true, y_pred)):
        if len(t) != len(p):
            raise CLIError(f"sequence {b + 1}: {gold_name} has {len(t)} labels but {pred_name} has {len(p)}")


def _labels_of(path, fmt, column):
    name = "<stdin>" if path == "-" else path
    try:
        if fmt == "crfsuite":
            from ..io.crfsuite import read_crfsuite

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # '@probability' lines of 'tag -p' output
                _, y = read_crfsuite(source(path))
            return y
        from ..io.conll import read_conll

        try:
            return [[tok[0] for tok in s] for s in read_conll(source(path), columns=[column])]
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
            sents = read_conll(source(args.conll), columns=[args.gold_column, args.pred_column])
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
    out = Out()
    for line in evaluation_report(y_true, y_pred):
        out(line)
    out.flush()
    return 0


def _fmt_w(v):
    return "-inf" if v == float("-inf") else f"{v:.4f}"


def _dump_edges(est, out):
    out("EDGES (child label <- parent label):")
    for (c, p), v in sorted(est.edge_features_.items(), key=lambda kv: str(kv[0])):
        out(f"  {_fmt_w(v):>10}  {c} <- {p}")
    out("ROOT:")
    for lab, v in est.root_features_.items():
        out(f"  {_fmt_w(v):>10}  {lab}")


def _dump_transitions(trans, cls, out):
    out("TRANSITIONS (row: from, column: to; '.': no feature, -inf: forbidden):")
    if len(cls) > 20:
        for (a, b), v in sorted(trans.items(), key=lambda kv: -abs(kv[1]) if kv[1] > float("-inf") else 0):
            out(f"  {_fmt_w(v):>10}  {a} -> {b}")
        return
    names = cls + ["<end>"]
    width = max(8, max(len(str(n)) for n in names + ["<start>"]) + 1)  # labels of a Python fit: any type
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


def cmd_dump(args):
    est, header = open_model(args.model)
    if getattr(args, "crfsuite", False):
        from ..crf._crfsuite_compat import crfsuite_dump_text
        from ..crf.linear_chain import LinearChainCRF

        if not isinstance(est, LinearChainCRF):
            raise CLIError(f"{args.model}: --crfsuite dumps linear-chain models only; got "
                           f"{type(est).__name__}")
        out = Out()
        out(crfsuite_dump_text(est).rstrip("\n"))
        out.flush()
        return 0
    if not hasattr(est, "state_features_"):
        raise CLIError(f"{args.model}: dump is not available for {type(est).__name__} models yet; use "
                       f"'{PROG} info'")
    out = Out()
    cls = list(est.classes_)
    out(f"MODEL: {args.model}")
    out(f"FORMAT: {header.get('format')} version {header.get('version')} "
        f"(structlearn {header.get('structlearn_version')})")
    out()
    out(f"LABELS ({len(cls)}):")
    for k, lab in enumerate(cls):
        out(f"  {k:>4}  {lab}")
    out()
    if hasattr(est, "edge_features_"):
        _dump_edges(est, out)
    else:
        _dump_transitions({**est.transition_features_, **getattr(est, "boundary_features_", {})}, cls, out)
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
    est, header = open_model(args.model)
    out = Out()
    out(f"file: {args.model} ({human_size(os.path.getsize(args.model))})")
    out(f"format: {header.get('format')} version {header.get('version')}, written by structlearn "
        f"{header.get('structlearn_version')} ({header.get('estimator')})")
    feat = getattr(est, "metadata_", {}).get("featurizer")
    if not feat:
        out("input: not recorded (CRFsuite attribute files assumed)")
    elif not isinstance(feat, dict):
        out("input: malformed record (not a JSON object)")
    elif feat.get("format") == "conll":
        spec = feat.get("spec")
        fields = feat.get("columns") or (spec.get("fields") if isinstance(spec, dict) else None)
        out(f"input: CoNLL columns {','.join(map(str, fields or []))}, template {feat.get('template')}")
    else:
        out("input: CRFsuite attribute files")
    cls = list(est.classes_)
    shown = ", ".join(map(str, cls[:20])) + (", ..." if len(cls) > 20 else "")
    out(f"labels: {len(cls)} ({shown})")
    out(f"attributes: {len(est.attributes_)}")
    if hasattr(est, "state_features_"):
        n_state = getattr(est.model_, "n_state", None) or len(est.state_features_)
        n = getattr(est, "num_features_", None)
        n = est.size_ if n is None else n
        out(f"features: {n} (state {n_state}, transitions and start/end {n - n_state})")
    else:
        out(f"parameters: {est.coef_.size}")
        if hasattr(est, "max_lengths_"):
            out("longest segments: " + ", ".join(f"{c} {n}" for c, n in est.max_lengths_.items()))
    params = header.get("params") or {}
    out("parameters: " + " ".join(f"{k}={v}" for k, v in params.items() if k != "verbose"))
    if str(header.get("version", "")).startswith("crfsuite"):  # lCRF: weights only, nothing of the training
        out("training: not recorded (a CRFsuite model file keeps no iteration count, convergence or loss)")
        out.flush()
        return 0
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
