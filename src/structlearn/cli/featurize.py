"""How input files become (X, y): CRFsuite attribute files, CoNLL columns + a feature template, or
CRFSuite-0.13 tree files (which also give each node's parent)."""
import json
import os
from typing import NamedTuple

from .common import CLIError, source

__all__ = ["Data", "Featurizer", "TreeReader", "read_many", "check_attribute_file"]


class Data(NamedTuple):
    """Sequences read from one file (or several, :func:`read_many`)."""

    X: list
    y: list   # None when the input has no label column
    name: str
    extra: dict  # keyword arguments of fit/predict that come with the input (a tree's parents)


def load_template(spec):
    """A template name or a JSON file -> (name, template dict)."""
    from ..io.templates import TEMPLATES

    if spec in TEMPLATES:
        return spec, TEMPLATES[spec]
    if os.path.isfile(spec):
        try:
            with open(spec, encoding="utf-8") as fh:
                tpl = json.load(fh)
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested thousands deep
            raise CLIError(f"cannot read template file {spec!r}: {exc}") from None
        if not isinstance(tpl, dict):
            raise CLIError(f"template file {spec!r} must hold a JSON object with 'fields' and 'features'")
        return spec, tpl
    raise CLIError(f"unknown template {spec!r}; use one of {sorted(TEMPLATES)} or a JSON template file")


def _json_template(tpl):
    """A template dict as plain JSON data (tuples -> lists)."""
    return json.loads(json.dumps(tpl))


def check_attribute_file(X, y, name):
    """Refuse a file read as CRFsuite attributes that is evidently something else: a line with spaces but no
    TAB (a CoNLL column file, or TABs turned into spaces) reads as one label without attributes, and a
    file in which no item has an attribute cannot train or tag anything. Time O(number of items)."""
    for b, (xs, ys) in enumerate(zip(X, y)):
        for t, (item, lab) in enumerate(zip(xs, ys)):
            if not item and " " in lab:
                raise CLIError(f"{name}: sequence {b + 1}, item {t + 1} reads as the label {lab!r} without "
                               f"attributes: the line has spaces but no TAB, and CRFsuite attribute files "
                               f"separate the label and the attributes by TABs; a CoNLL column file needs "
                               f"--format conll")
    if X and not any(item for xs in X for item in xs):
        raise CLIError(f"{name}: no line has an attribute (every line reads as a bare label); CRFsuite "
                       f"attribute files separate the label and the attributes by TABs; a CoNLL column file "
                       f"needs --format conll")


def _looks_like_tree_file(X, n_sequences=3):
    """Whether sequences read as CRFsuite attributes are CRFSuite 0.13 tree lines
    (``label<TAB>node<TAB>parent|_<TAB>attrs``): in each of the first ``n_sequences`` every item's first two
    attributes are an integer node id and an integer parent id or ``_``, with one ``_`` (the root) per
    sequence. Time O(items of those sequences)."""
    seqs = [xs for xs in X[:n_sequences] if xs]
    if not seqs:
        return False
    for xs in seqs:
        roots = 0
        for item in xs:
            names = list(item)[:2] if isinstance(item, dict) else []
            if len(names) < 2 or not names[0].isdigit() or not (names[1].isdigit() or names[1] == "_"):
                return False
            roots += names[1] == "_"
        if roots != 1:
            return False
    return True


def refuse_tree_file(X, name):
    """One clear error for a CRFSuite 0.13 tree file read as a sequence file (its node and parent columns
    would silently become attributes)."""
    if _looks_like_tree_file(X):
        raise CLIError(f"{name} looks like a CRFSuite 0.13 tree file (label, node id, parent id or '_', then "
                       f"attributes), whose node and parent columns would be read as attributes; use "
                       f"--type tree")


def _first_block(path, max_lines=1000):
    """The TAB fields of the lines of the first sequence (block) of the file ``path`` (not stdin)."""
    rows = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for _, line in zip(range(max_lines), fh):
                line = line.rstrip("\r\n")
                if not line.strip():
                    if rows:
                        break
                    continue
                rows.append(line.split("\t"))
    except OSError:
        return []
    return rows


class Featurizer:
    """How input files become (X, y): the CRFsuite reader, or the CoNLL reader + a template."""

    def __init__(self, fmt="crfsuite", template_name=None, spec=None, columns=None):
        self.format = fmt
        self.template_name = template_name
        self.spec = spec
        self.columns = columns
        self.layout_hints = False   # learn: a tree file read as sequences is an error (refuse_tree_file)
        self._compiled = None
        if fmt == "conll":
            from ..io.conll import compile_template

            try:
                self._compiled = compile_template(spec, columns)
            except (TypeError, ValueError, OverflowError) as exc:  # a JSON template's "fields": 5, offset 1e400
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
            name, spec = load_template(template)
        elif stored.get("format") == "conll" and stored.get("spec"):
            name, spec = stored.get("template"), stored["spec"]
            if cols is None and stored.get("columns"):
                cols = list(stored["columns"])
        elif stored:
            raise CLIError("the model was trained on CRFsuite attribute files and records no feature "
                           "template; give --template (chunking, ner, ner-nochunk or a JSON file) to tag "
                           "CoNLL input")
        else:
            name, spec = load_template("chunking")
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
        """The :class:`Data` of one file; ``y`` is None when the input has no label column."""
        name = "<stdin>" if path == "-" else path
        try:
            if self.format == "crfsuite":
                from ..io.crfsuite import read_crfsuite

                X, y = read_crfsuite(source(path))
                check_attribute_file(X, y, name)
                if self.layout_hints:
                    refuse_tree_file(X, name)
                return Data(X, y, name, {})
            from ..io.conll import featurize, read_conll

            sents = read_conll(source(path))
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
            return Data(X, y, name, {})
        except UnicodeDecodeError as exc:
            raise CLIError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except IsADirectoryError:
            raise CLIError(f"{name}: is a folder, not a file") from None


class TreeReader:
    """CRFSuite-0.13 tree files (``label<TAB>node<TAB>parent|_<TAB>attr[:value]...``); no template."""

    format = "crfsuite-tree"
    layout_hints = False   # learn --type tree: a read error of a sequence file says so (not for tag)

    def record(self):
        return None   # nothing to record: tag reads tree files as they are

    def describe(self):
        return "CRFsuite tree files"

    def read(self, path, need_labels=True):
        from ..crf.tree import parents_from_ids
        from ..io.crfsuite import read_crfsuite_tree

        name = "<stdin>" if path == "-" else path
        try:
            X, y, nodes, parent_ids = read_crfsuite_tree(source(path))
            parents = list(parents_from_ids(nodes, parent_ids))
        except FileNotFoundError:
            raise CLIError(f"{name}: no such file") from None
        except ValueError as exc:
            msg = str(exc)  # the reader's format errors name the file and line already
            msg = msg if msg.startswith(f"{name}, line ") else f"{name}: {msg}"
            rows = [] if path == "-" or not self.layout_hints else _first_block(path)
            if rows and not any(len(r) > 2 and r[2] == "_" for r in rows):
                msg += ("; not a CRFSuite 0.13 tree file (no item of its first sequence has the root's parent "
                        "'_'), it looks like a CRFsuite sequence file (label, then attributes): leave out "
                        "--type tree")
            raise CLIError(msg) from None
        return Data(X, y, name, {"parents": parents})


def read_many(reader, paths):
    """The :class:`Data` of several labelled files, concatenated."""
    X, y, extra = [], [], {}
    for p in paths:
        d = reader.read(p)
        if d.y is None:
            raise CLIError(f"{d.name}: the input has no label column; training needs labels")
        X.extend(d.X)
        y.extend(d.y)
        for k, v in d.extra.items():
            extra.setdefault(k, []).extend(v)
    return Data(X, y, ", ".join(paths), extra)
