"""CoNLL column files and the feature-template engine that turns them into attribute items.

A CoNLL file has one token per line, its columns separated by whitespace (or by ``sep``), and a blank line
between sentences (CoNLL-2000 chunking: ``WORD POS CHUNK``; CoNLL-2002/2003 NER: ``WORD POS [CHUNK] NE``).
``-DOCSTART-`` lines (document boundaries) are dropped.

The template engine follows the scheme of CRFsuite's example feature extractors (``example/crfutils.py``
by N. Okazaki): a feature is a tuple of ``(column, offset)`` pairs; at position t it yields the attribute
``"c1[o1]|c2[o2]=v1|v2"`` (value 1.0) where ``v_i`` is column ``c_i`` at ``t + o_i``, and nothing where a
position falls outside the sentence; the first item also gets ``"__BOS__"`` and the last ``"__EOS__"``.
See :mod:`structlearn.io.templates` for the template layout and the shipped templates.
"""
import gc

from ._files import describe, open_text, strip_bom
from .templates import DERIVED_FUNCTIONS, get_template

__all__ = ["read_conll", "apply_template", "featurize", "compile_template", "CompiledTemplate",
           "ConllFormatError"]


def _pair(value, where, expected, second=lambda v: v):
    """``value`` as two items (the second through ``second``), or ``ValueError`` naming ``where``."""
    try:
        a, b = value
        return a, second(b)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected {expected}; got {value!r}") from None


class ConllFormatError(ValueError):
    """A CoNLL file that cannot be read (the message names the file and, where it can, the line): rows of
    different widths, a column asked for that a row lacks, text that is not in the file's encoding, or a
    truncated / corrupt gzip file. :func:`read_conll` raises no other error for a damaged file."""


def read_conll(path, columns=None, sep=None, *, docstart="-DOCSTART-", encoding="utf-8"):
    """Read a CoNLL column file.

    Parameters
    ----------
    path : str, os.PathLike or file object
        ``.gz`` files (or gzip magic bytes) are decompressed; UTF-8 (a leading byte-order mark is dropped);
        LF/CRLF.
    columns : sequence of int, optional
        Indices of the columns to keep (negative counts from the end), in the given order; all by default.
    sep : str, optional
        Column separator; any run of whitespace by default (``str.split()``).
    docstart : str or None, default "-DOCSTART-"
        Lines whose first column equals this are skipped (a blank line right after one is absorbed).
    encoding : str, default "utf-8"
        Text encoding of the file (e.g. "latin-1" for the original CoNLL-2002 distribution).

    Returns
    -------
    sentences : list of list of tuple of str
        ``sentences[s][t]`` is the tuple of columns of token t of sentence s. Empty sentences never occur.

    Raises
    ------
    FileNotFoundError
        If the path does not exist.
    ConllFormatError (a ValueError)
        If a line has a different number of columns than the first line of the file, or lacks a column
        asked for by ``columns`` (file name and line number in the message); text not in ``encoding``
        (file, line and byte); a truncated or corrupt gzip file (file). No other error for a damaged
        file.

    Notes
    -----
    Cost: one pass; time and memory O(file size).
    """
    name = describe(path)
    sentences = []
    cur = []
    width = None
    cols = None if columns is None else tuple(int(c) for c in columns)
    with open_text(path, "r", encoding=encoding, error=ConllFormatError) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if lineno == 1:
                line = strip_bom(line)  # a text stream decoded elsewhere (a path's is dropped on opening)
            if not line.strip():
                if cur:
                    sentences.append(cur)
                    cur = []
                continue
            parts = line.split(sep) if sep is not None else line.split()
            if docstart is not None and parts[0] == docstart:
                if cur:
                    sentences.append(cur)
                    cur = []
                continue
            if width is None:
                width = len(parts)
            elif len(parts) != width:
                raise ConllFormatError(f"{name}, line {lineno}: expected {width} columns (as on the first token "
                                 f"line) but found {len(parts)}: {line!r}")
            if cols is None:
                cur.append(tuple(parts))
            else:
                try:
                    cur.append(tuple([parts[c] for c in cols]))
                except IndexError:
                    raise ConllFormatError(f"{name}, line {lineno}: `columns`={list(cols)} asks for a column that "
                                     f"this line with {len(parts)} columns lacks") from None
    if cur:
        sentences.append(cur)
    return sentences


class CompiledTemplate:
    """A template checked and prepared for fast application (see :func:`compile_template`).

    Attributes
    ----------
    fields : tuple of str
        Column names of the input tokens.
    label_index : int or None
        Index of the label column in ``fields``.
    features : list of (str, tuple of (str, int))
        Attribute-name prefix (``"w[-1]|w[0]="``) and the (column, offset) pairs.
    """

    def __init__(self, fields, label, derived, features, bos_eos):
        self.fields = tuple(fields)
        self.label = label
        self.label_index = self.fields.index(label) if label is not None else None
        self.derived = dict(derived)
        self.bos_eos = bool(bos_eos)
        self.features = []
        known = set(self.fields) | set(self.derived)
        for k, feat in enumerate(features):
            if not feat:
                raise ValueError(f"template feature {k} is empty; expected a tuple of (column, offset) pairs")
            pairs = []
            for pair in feat:
                col, off = _pair(pair, f"template feature {k}", "(column, offset) pairs", int)
                if col not in known:
                    raise ValueError(f"template feature {k} uses column {col!r}, which is neither a field "
                                     f"{list(self.fields)} nor a derived column {sorted(self.derived)}")
                pairs.append((col, off))
            prefix = "|".join(f"{c}[{o}]" for c, o in pairs) + "="
            self.features.append((prefix, tuple(pairs)))
        for name, spec in self.derived.items():
            fn, src = _pair(spec, f"derived column {name!r}", "(function name, source column)")
            if fn not in DERIVED_FUNCTIONS:
                raise ValueError(f"derived column {name!r}: unknown function {fn!r}; known: "
                                 f"{sorted(DERIVED_FUNCTIONS)}")
            if src not in self.fields:
                raise ValueError(f"derived column {name!r}: source column {src!r} is not a field "
                                 f"{list(self.fields)}")
        used = {c for _, pairs in self.features for c, _ in pairs}
        self._derived_used = [(n, DERIVED_FUNCTIONS[fn], self.fields.index(src))
                              for n, (fn, src) in self.derived.items() if n in used]
        self._field_index = {f: i for i, f in enumerate(self.fields)}
        # (prefix, pairs, first valid position, number of invalid positions at the end)
        self._plan = [(prefix, pairs, max(0, -min(o for _, o in pairs)), max(0, max(o for _, o in pairs)))
                      for prefix, pairs in self.features]
        self._caches = {name: {} for name, _, _ in self._derived_used}
        self._attr_caches = {prefix: {} for prefix, pairs in self.features if len(pairs) == 1}

    def __call__(self, sentence):
        """Items (list of dict attr -> 1.0) of one sentence (a list of column tuples)."""
        n = len(sentence)
        if n == 0:
            return []
        columns = list(zip(*sentence))
        if len(columns) != len(self.fields):
            raise ValueError(f"the template expects {len(self.fields)} columns {list(self.fields)} but the "
                             f"tokens have {len(columns)}: {sentence[0]!r}")
        cols = {f: columns[i] for f, i in self._field_index.items()}
        for name, fn, src in self._derived_used:
            cache = self._caches[name]  # memoised per token string: derived values repeat a lot
            out = []
            for v in columns[src]:
                r = cache.get(v)
                if r is None:
                    r = cache[v] = fn(v)
                out.append(r)
            cols[name] = out
        rows = []
        for prefix, pairs, lo, back in self._plan:
            hi = n - back
            if hi <= lo:
                rows.append([None] * n)
                continue
            if len(pairs) == 1:
                # interned per feature: the same attribute string object (hash cached) for every repeat
                c, o = pairs[0]
                cache = self._attr_caches[prefix]
                get = cache.get
                vals = [get(v) or cache.setdefault(v, prefix + v) for v in cols[c][lo + o:hi + o]]
            elif len(pairs) == 2:
                (c1, o1), (c2, o2) = pairs
                vals = [prefix + a + "|" + b for a, b in zip(cols[c1][lo + o1:hi + o1], cols[c2][lo + o2:hi + o2])]
            else:
                slices = [cols[c][lo + o:hi + o] for c, o in pairs]
                vals = [prefix + "|".join(vs) for vs in zip(*slices)]
            if lo or hi < n:
                vals = [None] * lo + vals + [None] * (n - hi)
            rows.append(vals)
        if self.bos_eos:
            bos = [None] * n
            bos[0] = "__BOS__"
            eos = [None] * n
            eos[-1] = "__EOS__"
            rows.append(bos)
            rows.append(eos)
        fromkeys = dict.fromkeys
        items = [fromkeys(attrs, 1.0) for attrs in zip(*rows)]
        for item in items:
            item.pop(None, None)
        return items

    def labels(self, sentence):
        """The label column of one sentence (list of str)."""
        if self.label_index is None:
            raise ValueError("this template names no label column")
        i = self.label_index
        return [tok[i] for tok in sentence]


def compile_template(template, fields=None):
    """Check a template and prepare it for application.

    Parameters
    ----------
    template : str, dict, CompiledTemplate or sequence of features
        A name of :data:`structlearn.io.templates.TEMPLATES` ("chunking", "ner", "ner-nochunk"), a template
        dict (keys ``fields``, ``features``, optional ``label``, ``derived``, ``bos_eos``), an already
        compiled template, or a bare sequence of features (then the fields are ``("w", "pos", "y")``).
    fields : sequence of str, optional
        Override the template's column names; the label column is kept when it is among them.

    Raises
    ------
    ValueError
        Unknown template name, a feature that uses an unknown column, a malformed feature or derivation.
    """
    if isinstance(template, CompiledTemplate):
        if fields is None:
            return template
        template = {"fields": template.fields, "label": template.label, "derived": template.derived,
                    "features": [pairs for _, pairs in template.features], "bos_eos": template.bos_eos}
    if isinstance(template, str):
        template = get_template(template)
    if not isinstance(template, dict):
        template = {"fields": ("w", "pos", "y"), "label": "y", "features": tuple(template)}
    if fields is not None:
        fields = tuple(fields)
        template = dict(template, fields=fields)
        if template.get("label") not in fields:
            template["label"] = None
    if "fields" not in template or "features" not in template:
        raise ValueError(f"a template dict needs 'fields' and 'features'; got keys {sorted(template)}")
    label = template.get("label", None)
    if label is not None and label not in template["fields"]:
        raise ValueError(f"template label column {label!r} is not one of the fields {list(template['fields'])}")
    return CompiledTemplate(template["fields"], label, template.get("derived", {}), template["features"],
                            template.get("bos_eos", True))


def apply_template(sentence_columns, template, fields=None):
    """Attribute items of one sentence.

    Parameters
    ----------
    sentence_columns : list of tuple of str
        One tuple of columns per token, as returned by :func:`read_conll`.
    template : str, dict, CompiledTemplate or sequence of features
        See :func:`compile_template`. Compile once and reuse it when featurising many sentences.
    fields : sequence of str, optional
        Override the template's column names (e.g. ``("w", "pos", "chk", "y")``).

    Returns
    -------
    items : list of dict
        ``items[t]`` maps attribute name -> 1.0, e.g. ``"w[-1]|w[0]=He|reckons"``; ``"__BOS__"`` on the first
        and ``"__EOS__"`` on the last item (when the template's ``bos_eos`` is true). The label column is
        only used when a feature names it explicitly.

    Raises
    ------
    ValueError
        The tokens have a different number of columns than the template's fields.

    Notes
    -----
    Cost: time O(T · number of features).
    """
    return compile_template(template, fields)(sentence_columns)


def featurize(sentences, template, fields=None):
    """Attribute items and labels of many sentences.

    Parameters
    ----------
    sentences : list of list of tuple of str
        As returned by :func:`read_conll`.
    template, fields
        See :func:`apply_template`.

    Returns
    -------
    X : list of list of dict
        Items per sentence (see :func:`apply_template`).
    y : list of list of str or None
        The label column per sentence, or ``None`` when the template names no label column.

    Notes
    -----
    Cost: CoNLL-2000 train (211,727 tokens) with the chunking template takes about a second.
    """
    tpl = compile_template(template, fields)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small dicts: the cyclic collector would rescan them again and again
    try:
        X = [tpl(s) for s in sentences]
    finally:
        if gc_was_enabled:
            gc.enable()
    y = None if tpl.label_index is None else [tpl.labels(s) for s in sentences]
    return X, y
