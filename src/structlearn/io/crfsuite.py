"""Reader and writer of the CRFsuite attribute file format.

The format (CRFsuite's ``crfsuite learn`` / ``crfsuite tag`` input, Okazaki 2007, "CRFsuite: a fast
implementation of Conditional Random Fields", manual section "Data format")::

    B-NP<TAB>w[0]=He<TAB>pos[0]=PRP<TAB>__BOS__
    B-VP<TAB>w[0]=reckons<TAB>w[-1]=He<TAB>len:7.0
                                                       <- a blank line ends the sequence
    O<TAB>w[0]=.

* One item (token) per line. The first field is the label; for tagging input it may be empty or an
  unknown label. The remaining TAB-separated fields are attributes ``name`` or ``name:value``; the value
  (a float) defaults to 1.0 and starts after the first unescaped colon. An item may have no attributes.
  As in CRFsuite's reader, an empty value is 1.0 and an empty name is the attribute ``""`` (CRFSuite 0.13
  writes the field ``:``).
* In names (and labels) ``\\:`` stands for a colon and ``\\\\`` for a backslash.
* A blank (or whitespace-only) line ends a sequence; several blank lines in a row are one separator.
* A line whose first field starts with ``@`` is a declaration: ``@weight:<float>`` sets the weight of the
  sequence being read (CRFsuite's instance weighting); other declarations are ignored with a warning.
* Empty fields (e.g. a trailing TAB) are ignored. An attribute repeated within one item has its values
  summed (CRFsuite counts each occurrence).

CRFSuite 0.13 (Sidorenko's fork) uses the same file for its semi-Markov (``--type=semim``) and
higher-order models: read it with :func:`read_crfsuite`. Its tree-structured CRFs (``--type=tree``) add two
fields after the label: the node id and the parent id (``_`` for the root); read those with
:func:`read_crfsuite_tree`.

Files ending in ``.gz`` (or starting with the gzip magic bytes) are read and written through gzip. Text is
UTF-8 (a leading byte-order mark is dropped, not read as part of the first label); LF, CRLF and CR line
endings are accepted.
"""
import gc
import math
import warnings

from ._files import describe, open_text, strip_bom

__all__ = ["read_crfsuite", "write_crfsuite", "read_crfsuite_tree", "CRFsuiteFormatError"]


class CRFsuiteFormatError(ValueError):
    """A malformed line in a CRFsuite attribute or tree file (the message names the file and line), text
    that is not UTF-8, or a truncated or corrupt gzip file: the one error :func:`read_crfsuite` and
    :func:`read_crfsuite_tree` raise for a damaged file."""


def _unescape(s):
    # '\:' -> ':', '\\' -> '\', any other '\c' -> 'c' (as CRFsuite's reader does)
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            out.append(s[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _split_field(field):
    """Split ``name[:value]`` at the first unescaped colon; return (unescaped name, value str or None)."""
    if "\\" not in field:
        name, sep, value = field.partition(":")
        return name, (value if sep else None)
    i, n = 0, len(field)
    while i < n:
        c = field[i]
        if c == "\\":
            i += 2
            continue
        if c == ":":
            return _unescape(field[:i]), field[i + 1:]
        i += 1
    return _unescape(field), None


def _escape(s):
    return s.replace("\\", "\\\\").replace(":", "\\:")


class _Parser:
    """Line-by-line parser shared by the linear and the tree readers."""

    def __init__(self, source, n_header_fields):
        self.name = describe(source)
        self.n_header = n_header_fields

    def error(self, lineno, msg, line):
        shown = line if len(line) <= 80 else line[:77] + "..."
        return CRFsuiteFormatError(f"{self.name}, line {lineno}: {msg} (line: {shown!r})")

    def parse_value(self, lineno, line, name, value):
        try:
            v = float(value)
        except ValueError:
            raise self.error(lineno, f"the value of attribute {name!r} must be a number; got {value!r} "
                             "(write a literal colon in a name as '\\:')", line) from None
        if not math.isfinite(v):
            raise self.error(lineno, f"the value of attribute {name!r} must be finite; got {value!r}", line)
        return v

    def parse_attrs(self, lineno, line, fields):
        """Fields (after the label and header fields) -> dict attr -> float."""
        if ":" not in line and "\\" not in line:
            item = dict.fromkeys(fields, 1.0)
            item.pop("", None)
            if len(item) != len(fields) - (1 if "" in fields else 0):  # repeats or several empty fields
                item = {}
                for f in fields:
                    if f:
                        item[f] = item.get(f, 0.0) + 1.0
            return item
        item = {}
        for f in fields:
            if not f:
                continue
            name, value = _split_field(f)
            # as CRFsuite's reader: an empty name is the attribute "" (CRFSuite 0.13 writes ':'), an
            # empty value is 1.0
            v = 1.0 if not value else self.parse_value(lineno, line, name, value)
            if name in item:
                v += item[name]
                if not math.isfinite(v):
                    raise self.error(lineno, f"the values of attribute {name!r} (repeated) add up to {v}; "
                                     "the sum must be finite", line)
            item[name] = v
        return item


def _read(source, n_header, return_weights, on_header):
    parser = _Parser(source, n_header)
    X, y, weights = [], [], []
    xs, ys = [], []
    weight = 1.0

    def flush():
        nonlocal xs, ys, weight
        if xs or weight != 1.0:
            X.append(xs)
            y.append(ys)
            weights.append(weight)
        xs, ys, weight = [], [], 1.0

    with open_text(source, "r", error=CRFsuiteFormatError) as fh:
        text = strip_bom(fh.read())
    lines = text.split("\n")
    del text
    if lines and lines[-1] == "":
        lines.pop()
    fromkeys = dict.fromkeys
    for lineno, line in enumerate(lines, 1):
        if line.endswith("\r"):
            line = line.rstrip("\r")
        if not line or line.isspace():
            flush()
            continue
        if not n_header and ":" not in line and "\\" not in line and line[0] != "@":
            # fast path: no values, no escapes, no declaration
            label, _, rest = line.partition("\t")
            if rest:
                fields = rest.split("\t")
                item = fromkeys(fields, 1.0)
                if len(item) != len(fields) or "" in item:  # repeats or empty fields
                    item = parser.parse_attrs(lineno, line, fields)
            else:
                item = {}
            xs.append(item)
            ys.append(label)
        else:
            fields = line.split("\t")
            head = fields[0]
            if head.startswith("@"):
                name, value = _split_field(head)
                if name == "@weight":
                    if value is None:
                        raise parser.error(lineno, "'@weight' needs a value, e.g. '@weight:2.0'", line)
                    weight = parser.parse_value(lineno, line, name, value)
                else:
                    warnings.warn(f"{parser.name}, line {lineno}: unknown declaration {name!r} ignored",
                                  stacklevel=3)
                continue
            label = _unescape(head) if "\\" in head else head
            if n_header:
                if len(fields) < 1 + n_header:
                    raise parser.error(lineno, f"expected a label and {n_header} more fields before the "
                                       f"attributes; got {len(fields)} field(s)", line)
                on_header(parser, lineno, line, fields[1:1 + n_header])
            xs.append(parser.parse_attrs(lineno, line, fields[1 + n_header:]))
            ys.append(label)
    flush()
    if return_weights:
        return X, y, weights
    return X, y


def read_crfsuite(path_or_file, *, return_weights=False):
    """Read a CRFsuite attribute file.

    Parameters
    ----------
    path_or_file : str, os.PathLike or file object
        A path (``.gz`` read through gzip) or an open text/binary file.
    return_weights : bool, default False
        Also return the per-sequence weights set by ``@weight:<w>`` declarations (1.0 otherwise).

    Returns
    -------
    X : list of list of dict
        ``X[b][t]`` maps attribute name (str) -> value (float) for item t of sequence b.
    y : list of list of str
        ``y[b][t]`` is the label of that item (``""`` when the label field is empty, as in tagging input).
    weights : list of float
        Only when ``return_weights`` is true.

    Raises
    ------
    FileNotFoundError
        If the path does not exist.
    CRFsuiteFormatError (a ValueError)
        On a malformed line: a value that is not a finite number, an empty attribute name, a bad
        ``@weight``; text that is not UTF-8; a truncated or corrupt gzip file. The message names the file
        and the line number. No other error for a damaged file.

    Notes
    -----
    Cost: one pass over the file; time and memory O(number of attribute occurrences).
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small dicts: the cyclic collector would rescan them again and again
    try:
        return _read(path_or_file, 0, return_weights, None)
    finally:
        if gc_was_enabled:
            gc.enable()


def read_crfsuite_tree(path_or_file):
    """Read the tree-structured variant of CRFSuite 0.13 (``label<TAB>node<TAB>parent<TAB>attrs…``).

    ``parent`` is ``_`` for the root. Node ids are local to their sequence (tree): integers, or symbolic
    names (any other text, as CRFSuite 0.13 maps ids through a dictionary); turn them into parent
    indices with :func:`structlearn.crf.tree.parents_from_ids`.

    Returns
    -------
    X, y : as :func:`read_crfsuite`
    nodes : list of list of int or str
        The node id of each item (int when it reads as one).
    parents : list of list of int or str
        The parent id of each item, -1 for the root.

    Raises
    ------
    CRFsuiteFormatError
        An empty node or parent id, or any error of :func:`read_crfsuite` (file and line in the message);
        no other error for a damaged file.
    """
    nodes, parents = [], []
    cur_nodes, cur_parents = [], []

    def ident(text):
        try:
            return int(text)
        except ValueError:
            return text  # a symbolic id, mapped through the tree's node ids (as CRFSuite's dictionary)

    def on_header(parser, lineno, line, head):
        node, parent = head
        if not node or not parent:
            raise parser.error(lineno, f"empty node or parent id (got {node!r} and {parent!r}); use '_' "
                               f"for the parent of the root", line)
        cur_nodes.append(ident(node))
        cur_parents.append(-1 if parent == "_" else ident(parent))

    X, y = _read(path_or_file, 2, False, on_header)
    # split the flat id lists along the sequences
    pos = 0
    for xs in X:
        n = len(xs)
        nodes.append(cur_nodes[pos:pos + n])
        parents.append(cur_parents[pos:pos + n])
        pos += n
    return X, y, nodes, parents


def _item_fields(item, where):
    """Item (dict, list of str, list of (name, value)) -> list of escaped 'name[:value]' fields."""
    if isinstance(item, dict):  # python-crfsuite's flattening (nested dicts, lists, bytes, NumPy scalars)
        from ..crf.features import item_attributes

        if any(not isinstance(v, (int, float, str)) for v in item.values()):
            pairs = item_attributes(item)
        else:
            pairs = item.items()
    elif isinstance(item, (list, tuple)):
        pairs = [(a, 1.0) if isinstance(a, str) else a for a in item]
    else:
        raise ValueError(f"{where}: an item must be a dict attribute -> value, a list of attribute "
                         f"names or a list of (name, value) pairs; got {type(item).__name__}")
    out = []
    for pair in pairs:
        try:
            name, value = pair
        except (TypeError, ValueError):
            raise ValueError(f"{where}: expected an attribute name or a (name, value) pair; "
                             f"got {pair!r}") from None
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: attribute names must be non-empty strings; got {name!r}")
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if isinstance(value, str):  # python-crfsuite's convention: {"a": "v"} is attribute "a:v"
            name, value = f"{name}:{value}", 1.0
        if "\t" in name or "\n" in name or "\r" in name:
            raise ValueError(f"{where}: attribute name {name!r} contains a TAB or a line break, "
                             "which the CRFsuite format cannot hold")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{where}: attribute {name!r} has a non-finite value {value!r}")
        esc = _escape(name)
        out.append(esc if value == 1.0 else f"{esc}:{value!r}")
    return out


def _plain_dict(item):
    """True when every name is a clean non-empty str (no escapes needed) and every value is 1."""
    try:
        joined = "\t".join(item)
    except TypeError:
        return False
    return (joined.count("\t") == len(item) - 1 or not item) and "" not in item and ":" not in joined \
        and "\\" not in joined and "\n" not in joined and "\r" not in joined \
        and all(v == 1.0 and not isinstance(v, str) for v in item.values())


def write_crfsuite(X, y, path_or_file):
    """Write sequences in the CRFsuite attribute format (readable by ``crfsuite learn/tag``).

    Parameters
    ----------
    X : list of list of item
        An item is a dict attribute -> value (float/int/bool, or str ``v`` meaning attribute ``a=v`` with
        value 1), a list of attribute names (value 1) or a list of (name, value) pairs.
    y : list of list of str, or None
        Labels; ``None`` (or a ``None`` sequence) writes empty label fields (tagging input).
    path_or_file : str, os.PathLike or file object
        ``.gz`` paths are written through gzip.

    Raises
    ------
    ValueError
        Labels and items of a sequence differ in length; a label or attribute name holds a TAB or a line
        break; a value is not finite; an item of an unknown type. The message names sequence and item.

    Notes
    -----
    Values equal to 1.0 are written without ``:value``; other values with Python's shortest round-trip
    representation, so :func:`read_crfsuite` gives back identical floats. Colons and backslashes in
    names and labels are escaped.
    """
    if y is not None and len(y) != len(X):
        raise ValueError(f"`y` has {len(y)} sequences but `X` has {len(X)}")
    lines = []
    for b, xs in enumerate(X):
        ys = None if y is None else y[b]
        if ys is not None and len(ys) != len(xs):
            raise ValueError(f"sequence {b}: {len(xs)} items in `X` but {len(ys)} labels in `y`")
        for t, item in enumerate(xs):
            label = "" if ys is None else ys[t]
            if not isinstance(label, str):
                label = str(label)
            if "\t" in label or "\n" in label or "\r" in label:
                raise ValueError(f"sequence {b}, item {t}: label {label!r} contains a TAB or a line "
                                 "break, which the CRFsuite format cannot hold")
            if label.startswith("@"):
                raise ValueError(f"sequence {b}, item {t}: label {label!r} starts with '@', which the "
                                 "CRFsuite format reserves for declarations")
            if type(item) is dict and _plain_dict(item):
                lines.append(_escape(label) + ("\t" if item else "") + "\t".join(item))
                continue
            fields = _item_fields(item, f"sequence {b}, item {t}")
            lines.append("\t".join([_escape(label)] + fields))
        lines.append("")
    with open_text(path_or_file, "w") as fh:
        fh.write("\n".join(lines) + ("\n" if lines else ""))
