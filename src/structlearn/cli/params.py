"""``-p NAME=VALUE``: estimator parameters from the command line, and the list that ``-p help`` prints."""
from .common import CLIError, say

__all__ = ["parse_params", "parse_forbid", "param_help", "NOT_BY_P"]

# CRFsuite's parameter names (``crfsuite learn -p NAME=VALUE``) accepted as aliases.
_ALIASES = {
    "feature.minfreq": "min_freq",
    "feature.possible_states": "all_possible_states",
    "feature.possible_transitions": "all_possible_transitions",
    "max_linesearches": "max_linesearch",
    "type": "pa_type",
}
# parameters set by their own options rather than by -p
NOT_BY_P = {"algorithm": "-a/--algorithm", "verbose": "-v/--verbose"}
# the type of parameters whose default is None
_NONE_TYPES = {"max_iterations": int, "random_state": int, "forbidden_transitions": "forbid",
               "epsilon": float, "max_segment_length": "segment_length"}


def _estimator_params():
    from ..crf.linear_chain import LinearChainCRF

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


def parse_forbid(specs):
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


def _key(name):
    return _ALIASES.get(name, name.replace(".", "_").replace("-", "_"))


def parse_params(items, defaults=None, by_option=None):
    """Turn ``["c2=0.5", "max_iterations=50"]`` into estimator keyword arguments with the right types.

    ``defaults`` (default: those of :class:`LinearChainCRF`) are the estimator's parameters; types follow
    the parameter's default (bool, int, float, str); CRFsuite names (``feature.minfreq``,
    ``feature.possible_states``, ``calibration.eta``, ``type``, ``max_linesearches``) are accepted.
    ``by_option`` maps parameters set by a command-line option to that option (refused with -p).

    Raises
    ------
    CLIError
        Malformed item, unknown name (the message lists the valid names), or a value of the wrong type.
    """
    defaults = _estimator_params() if defaults is None else defaults
    by_option = {**NOT_BY_P, **(by_option or {})}
    valid = sorted(n for n in defaults if n not in by_option)
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CLIError(f"-p expects NAME=VALUE; got {item!r}")
        key = _key(name)
        if key in by_option:
            raise CLIError(f"set {key!r} with {by_option[key]}, not with -p")
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
            elif kind is float:
                value = _to_float(name, text)
            elif kind == "segment_length":
                value = text.strip() if text.strip() in ("global", "per-label") else _to_int(name, text)
            elif kind == "forbid":
                value = parse_forbid([text])
            else:
                value = text
        out[key] = value
    return out


def param_help(items, cls, defaults=None, by_option=None):
    """Print the parameters of ``cls`` settable with -p when ``-p help`` was given; return whether it was.

    Each line shows the name, the default, and the constraint and help text that ``cls`` declares in
    ``_parameters`` (``Param(name, default, constraint, help)``).
    """
    if not any(item.strip().lower() == "help" for item in items):
        return False
    defaults = cls().get_params() if defaults is None else defaults
    by_option = {**NOT_BY_P, **(by_option or {})}
    names = sorted(n for n in defaults if n not in by_option)
    declared = {p.name: p for p in cls._parameters}
    say(f"Parameters for -p NAME=VALUE (default in parentheses; see help(structlearn.{cls.__name__})):")
    heads = [f"  {name} ({defaults[name]})" for name in names]
    width = max(map(len, heads), default=0)
    cwidth = max((len(declared[n].constraint) for n in names), default=0)
    for name, head in zip(names, heads):
        p = declared[name]
        say(f"{head:<{width}}  {p.constraint:<{cwidth}}  {p.help}".rstrip())
    say("CRFsuite names: " + ", ".join(f"{a} = {b}" for a, b in _ALIASES.items())
        + ", calibration.X = calibration_X")
    return True
