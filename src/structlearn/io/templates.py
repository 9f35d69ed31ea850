"""Feature templates for CoNLL column data, as plain Python data (JSON-able).

A template is a dict::

    {
        "fields": ("w", "pos", "y"),          # names of the file's columns, in order
        "label": "y",                          # the column holding the label (not used as a feature)
        "derived": {"wl": ("lower", "w")},    # extra columns: name -> (function name, source column)
        "features": (                          # each feature: a tuple of (column, offset) pairs
            (("w", 0),),
            (("w", -1), ("w", 0)),
        ),
        "bos_eos": True,                       # add "__BOS__" to the first and "__EOS__" to the last item
    }

Feature ``(("w", -1), ("w", 0))`` at position t gives attribute ``"w[-1]|w[0]=<w[t-1]>|<w[t]>"`` with value
1.0; it is omitted where a position falls outside the sentence. This is the scheme of CRFsuite's example
feature extractors (``example/crfutils.py``, ``chunking.py``, ``ner.py`` by N. Okazaki), re-implemented.

Derived-column functions (all map one token string to a string) are listed in :data:`DERIVED_FUNCTIONS`;
boolean ones give ``"yes"``/``"no"`` as in CRFsuite's ``ner.py``.
"""

__all__ = ["TEMPLATES", "DERIVED_FUNCTIONS", "get_template", "CHUNKING", "NER", "NER_NOCHUNK"]


# ---------------------------------------------------------------- derived columns
_SHAPE_CLASSES = {}
for _c in ".,":
    _SHAPE_CLASSES[_c] = "."
for _c in ";:?!":
    _SHAPE_CLASSES[_c] = ";"
for _c in "+-*/=|_":
    _SHAPE_CLASSES[_c] = "-"
for _c in "({[<":
    _SHAPE_CLASSES[_c] = "("
for _c in ")}]>":
    _SHAPE_CLASSES[_c] = ")"


def shape(token):
    """Character classes: upper -> U, lower -> L, digit -> D, punctuation grouped; others kept."""
    out = []
    for c in token:
        if c.isupper():
            out.append("U")
        elif c.islower():
            out.append("L")
        elif c.isdigit():
            out.append("D")
        else:
            out.append(_SHAPE_CLASSES.get(c, c))
    return "".join(out)


def shape_degenerate(token):
    """:func:`shape` with runs of one class collapsed ("Mr." -> "UL.")."""
    s = shape(token)
    out = []
    for c in s:
        if not out or out[-1] != c:
            out.append(c)
    return "".join(out)


_TYPE_ORDER = ("AllUpper", "AllDigit", "AllSymbol", "AllUpperDigit", "AllUpperSymbol", "AllDigitSymbol",
               "AllUpperDigitSymbol", "InitUpper", "AllLetter", "AllAlnum")


def token_type(token):
    """Coarse orthographic type of a token (first of :data:`_TYPE_ORDER` that holds, else "NO")."""
    if not token:
        return "EMPTY"
    up = digit = sym = lower = False
    for c in token:
        if c.isupper():
            up = True
        elif c.isdigit() or c in ",.":
            digit = True
        elif c.islower():
            lower = True
        else:
            sym = True
    possible = {
        "AllUpper": up and not (digit or sym or lower),
        "AllDigit": digit and not (up or sym or lower),
        "AllSymbol": sym and not (up or digit or lower),
        "AllUpperDigit": not (sym or lower),
        "AllUpperSymbol": not (digit or lower),
        "AllDigitSymbol": not (up or lower),
        "AllUpperDigitSymbol": not lower,
        "InitUpper": token[0].isupper(),
        "AllLetter": not (digit or sym),
        "AllAlnum": not sym,
    }
    for name in _TYPE_ORDER:
        if possible[name]:
            return name
    return "NO"


def _yn(b):
    return "yes" if b else "no"


def _has(pred):
    return lambda w: any(pred(c) for c in w)


_has_digit = _has(str.isdigit)
_has_alpha = _has(str.isalpha)
_has_upper = _has(str.isupper)
_has_lower = _has(str.islower)
_has_symbol = _has(lambda c: not c.isalnum())

#: name -> function(str) -> str, usable in a template's "derived" section
DERIVED_FUNCTIONS = {
    "identity": lambda w: w,
    "lower": str.lower,
    "shape": shape,
    "shape_degenerate": shape_degenerate,
    "type": token_type,
    **{f"prefix{k}": (lambda k: lambda w: w[:k] if len(w) >= k else "")(k) for k in range(1, 5)},
    **{f"suffix{k}": (lambda k: lambda w: w[-k:] if len(w) >= k else "")(k) for k in range(1, 5)},
    "two_digits": lambda w: _yn(w.isdigit() and len(w) == 2),
    "four_digits": lambda w: _yn(w.isdigit() and len(w) == 4),
    "digit_alpha": lambda w: _yn(_has_digit(w) and _has_alpha(w)),
    "digit_hyphen": lambda w: _yn(_has_digit(w) and "-" in w),
    "digit_slash": lambda w: _yn(_has_digit(w) and "/" in w),
    "digit_comma": lambda w: _yn(_has_digit(w) and "," in w),
    "digit_period": lambda w: _yn(_has_digit(w) and "." in w),
    "upper_period": lambda w: _yn(len(w) == 2 and w[0].isupper() and w[1] == "."),
    "init_upper": lambda w: _yn(bool(w) and w[0].isupper()),
    "all_upper": lambda w: _yn(w.isupper()),
    "all_lower": lambda w: _yn(w.islower()),
    "all_digit": lambda w: _yn(w.isdigit()),
    "all_other": lambda w: _yn(bool(w) and not any(c.isalnum() for c in w)),
    "has_upper": lambda w: _yn(_has_upper(w)),
    "has_lower": lambda w: _yn(_has_lower(w)),
    "has_alpha": lambda w: _yn(_has_alpha(w)),
    "has_digit": lambda w: _yn(_has_digit(w)),
    "has_symbol": lambda w: _yn(_has_symbol(w)),
}


def _window(name, lo=-2, hi=2):
    return tuple(((name, i),) for i in range(lo, hi + 1))


def _bigrams(name, lo=-2, hi=2):
    return tuple(((name, i), (name, i + 1)) for i in range(lo, hi))


# ---------------------------------------------------------------- chunking (CoNLL-2000)
#: Words and POS in a ±2 window, word bigrams around the token, POS bigrams and trigrams (19 features).
CHUNKING = {
    "fields": ("w", "pos", "y"),
    "label": "y",
    "derived": {},
    "features": (
        _window("w")
        + ((("w", -1), ("w", 0)), (("w", 0), ("w", 1)))
        + _window("pos")
        + _bigrams("pos")
        + tuple((("pos", i), ("pos", i + 1), ("pos", i + 2)) for i in range(-2, 1))
    ),
    "bos_eos": True,
}

# ---------------------------------------------------------------- NER (CoNLL-2003 layout)
# short name used in attribute names -> derivation from the word column
_NER_DERIVED = {
    "wl": ("lower", "w"), "shape": ("shape", "w"), "shaped": ("shape_degenerate", "w"),
    "type": ("type", "w"),
    "p1": ("prefix1", "w"), "p2": ("prefix2", "w"), "p3": ("prefix3", "w"), "p4": ("prefix4", "w"),
    "s1": ("suffix1", "w"), "s2": ("suffix2", "w"), "s3": ("suffix3", "w"), "s4": ("suffix4", "w"),
    "2d": ("two_digits", "w"), "4d": ("four_digits", "w"), "d&a": ("digit_alpha", "w"),
    "d&-": ("digit_hyphen", "w"), "d&/": ("digit_slash", "w"), "d&,": ("digit_comma", "w"),
    "d&.": ("digit_period", "w"), "up": ("upper_period", "w"),
    "iu": ("init_upper", "w"), "au": ("all_upper", "w"), "al": ("all_lower", "w"), "ad": ("all_digit", "w"),
    "ao": ("all_other", "w"),
    "cu": ("has_upper", "w"), "cl": ("has_lower", "w"), "ca": ("has_alpha", "w"), "cd": ("has_digit", "w"),
    "cs": ("has_symbol", "w"),
}


def _ner(fields, context_columns):
    unigram = ("w", "wl") + tuple(context_columns) + tuple(_NER_DERIVED)[1:]
    bigram = ("w",) + tuple(context_columns) + ("shaped", "type")
    feats = ()
    for name in unigram:
        feats += _window(name)
    for name in bigram:
        feats += _bigrams(name)
    return {"fields": fields, "label": "y", "derived": dict(_NER_DERIVED), "features": feats,
            "bos_eos": True}


#: CRFsuite ``ner.py``-style features for ``WORD POS CHUNK NE`` files (CoNLL-2003): word, lower-cased word,
#: POS, chunk, shape, degenerate shape, type, prefixes/suffixes 1..4, orthographic flags, each in a ±2
#: window; bigrams of word, POS, chunk, degenerate shape and type.
NER = _ner(("w", "pos", "chk", "y"), ("pos", "chk"))
#: The same without the chunk column, for ``WORD POS NE`` files (CoNLL-2002 Spanish/Dutch).
NER_NOCHUNK = _ner(("w", "pos", "y"), ("pos",))

TEMPLATES = {"chunking": CHUNKING, "ner": NER, "ner-nochunk": NER_NOCHUNK}


def get_template(name):
    """The template called ``name`` (one of :data:`TEMPLATES`).

    Raises
    ------
    ValueError
        If the name is unknown (the message lists the known names).
    """
    try:
        return TEMPLATES[name]
    except KeyError:
        raise ValueError(f"unknown template {name!r}; known templates: {sorted(TEMPLATES)}") from None
