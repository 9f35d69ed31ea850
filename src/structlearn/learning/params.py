"""Hyper-parameters of the CRF estimators, declared once: name, default, constraint and one-line help.

Each estimator lists its ``__init__`` parameters, in signature order, as ``_parameters`` (a tuple of
:class:`Param`); fitting validates every value with :func:`check_param`, and the command line's
``-p NAME=VALUE`` / ``-p help`` read the same declarations. Groups used by several estimators are
defined here once (:data:`LBFGS_PARAMS`, :data:`ONLINE_PARAMS`, ...).

Constraint strings
------------------
A constraint is one or more alternatives separated by ``|``; a value is valid when it satisfies one:

``any``
    every value (checked, if at all, where the value is used);
``None``
    ``None``;
``bool``
    ``True`` or ``False`` (also NumPy booleans and the integers 0 and 1);
``str``
    a string;
``int>=K``
    an integer (not a bool) of at least K;
``float>=K``, ``float>K``
    a finite real number (int or float, not a bool) of at least / more than K;
``{a,b,...}``
    one of the listed values (an item that reads as an integer is that int, ``None`` is None, any
    other item a string), e.g. ``{lbfgs,l2sgd}`` or ``{0,1,2}``;
``list{a,b,...}``
    a list or tuple (not a string) of items each one of the listed values;
``pairs``
    a list or tuple (not a string) of 2-item entries, e.g. ``(from_label, to_label)``;
``dict``
    a dict.

Example: ``"int>=1|None"`` is a positive integer or None.
"""
import functools
import re
from typing import NamedTuple

import numpy as np

__all__ = ["Param", "check_param", "describe_constraint", "accepts", "ALGORITHMS", "ALGORITHM",
           "LBFGS_PARAMS", "ONLINE_PARAMS", "MIN_FREQ", "ALL_POSSIBLE_STATES", "ALL_POSSIBLE_TRANSITIONS",
           "RANDOM_STATE", "VERBOSE", "N_JOBS"]


class Param(NamedTuple):
    """One hyper-parameter: its name, default, constraint (see the module docstring) and help line."""

    name: str
    default: object
    constraint: str
    help: str


_BOUND = re.compile(r"(int|float)(>=|>)(-?\d+(?:\.\d*)?(?:e-?\d+)?)")


def _choice(text):
    if text == "None":
        return None
    return int(text) if re.fullmatch(r"-?\d+", text) else text


@functools.lru_cache(maxsize=None)
def _alternatives(constraint):
    """Parse a constraint into (kind, argument) alternatives."""
    out = []
    for alt in constraint.split("|"):
        m = _BOUND.fullmatch(alt)
        if m:
            bound = float(m[3])
            out.append((m[1] + m[2], int(bound) if m[1] == "int" else bound))
        elif alt.startswith("{") and alt.endswith("}"):
            out.append(("choice", tuple(_choice(c) for c in alt[1:-1].split(","))))
        elif alt.startswith("list{") and alt.endswith("}"):
            out.append(("list", tuple(_choice(c) for c in alt[5:-1].split(","))))
        elif alt in ("any", "None", "bool", "str", "pairs", "dict"):
            out.append((alt, None))
        else:
            raise ValueError(f"unknown parameter constraint {alt!r} in {constraint!r}")
    return tuple(out)


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and bool(np.isfinite(v))


def _in(v, choices):
    try:
        return bool(v in choices)
    except (TypeError, ValueError):  # e.g. an array
        return False


def _is_sequence(v):
    return isinstance(v, (list, tuple))


def _holds(kind, arg, v):
    if kind == "any":
        return True
    if kind == "None":
        return v is None
    if kind == "bool":
        return isinstance(v, (bool, np.bool_)) or (_is_int(v) and v in (0, 1))
    if kind == "str":
        return isinstance(v, str)
    if kind == "dict":
        return isinstance(v, dict)
    if kind == "int>=":
        return _is_int(v) and v >= arg
    if kind == "int>":
        return _is_int(v) and v > arg
    if kind == "float>=":
        return _is_real(v) and v >= arg
    if kind == "float>":
        return _is_real(v) and v > arg
    if kind == "choice":
        return _in(v, arg)
    if kind == "list":
        return _is_sequence(v) and all(_in(x, arg) for x in v)
    if kind == "pairs":
        return _is_sequence(v) and all(not isinstance(p, (str, bytes)) and hasattr(p, "__len__")
                                       and len(p) == 2 for p in v)
    raise AssertionError(kind)


def _or(items):
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _words(kind, arg):
    if kind in ("int>=", "int>", "float>=", "float>"):
        number = "integer" if kind.startswith("int") else "finite number"
        strict = not kind.endswith(">=")
        if arg == 0:
            return [f"a {'positive' if strict else 'non-negative'} {number}"]
        if arg == 1 and kind == "int>=":
            return ["a positive integer"]
        article = "an" if number == "integer" else "a"
        return [f"{article} {number} {'>' if strict else '>='} {arg}"]
    if kind == "choice":
        return [repr(c) for c in arg]
    if kind == "list":
        return [f"a list of names among {_or([repr(c) for c in arg])}"]
    return [{"any": "anything", "None": "None", "bool": "a boolean", "str": "a string",
             "pairs": "a list of pairs", "dict": "a dict"}[kind]]


def describe_constraint(constraint):
    """The constraint in words, e.g. ``"int>=1|None"`` -> ``"a positive integer or None"``."""
    return _or([w for kind, arg in _alternatives(constraint) for w in _words(kind, arg)])


def check_param(param, value):
    """Raise ValueError unless ``value`` satisfies ``param.constraint``.

    The message names the argument, what was expected and what arrived, e.g.
    ``"`c2` must be a non-negative finite number; got -1.0"``.
    """
    if not any(_holds(kind, arg, value) for kind, arg in _alternatives(param.constraint)):
        raise ValueError(f"`{param.name}` must be {describe_constraint(param.constraint)}; got {value!r}")


# ---------------------------------------------------------------------------------------------------
# parameters shared by several estimators
# ---------------------------------------------------------------------------------------------------
ALGORITHMS = ("lbfgs", "l2sgd", "ap", "pa", "arow")

ALGORITHM = Param("algorithm", "lbfgs", "{" + ",".join(ALGORITHMS) + "}",
                  "trainer: lbfgs (L-BFGS / OWL-QN), l2sgd (SGD with L2), ap (averaged perceptron), "
                  "pa (passive-aggressive), arow (adaptive regularisation of weights)")

#: The nine L-BFGS settings (CRFsuite's names and defaults); ``c2`` is also the L2 of ``l2sgd``.
LBFGS_PARAMS = (
    Param("c1", 0.0, "float>=0", "L1 coefficient (OWL-QN when > 0; lbfgs only)"),
    Param("c2", 1.0, "float>=0", "L2 coefficient (CRFsuite scaling: c2 * ||w||^2, not divided by N)"),
    Param("max_iterations", None, "int>=1|None",
          "most iterations (epochs); None: lbfgs until convergence, l2sgd 1000, ap/pa/arow 100"),
    Param("num_memories", 6, "int>=1", "L-BFGS: number of corrections kept for the inverse Hessian"),
    Param("epsilon", 1e-5, "float>=0",
          "stop when ||g|| / max(1, ||w||) < epsilon (online trainers: loss per instance < epsilon)"),
    Param("period", 10, "int>=1", "iterations over which the relative improvement is measured (delta)"),
    Param("delta", 1e-5, "float>=0", "stop when the objective improved by less than delta over period"),
    Param("linesearch", "MoreThuente", "{MoreThuente,Backtracking,StrongBacktracking}",
          "L-BFGS line search (OWL-QN always backtracks)"),
    Param("max_linesearch", 20, "int>=1", "L-BFGS: most line-search trials per iteration"),
)

#: Settings of the online trainers (l2sgd calibration, passive-aggressive, AROW).
ONLINE_PARAMS = (
    Param("calibration_eta", 0.1, "float>0", "l2sgd: initial learning rate of the calibration"),
    Param("calibration_rate", 2.0, "float>0", "l2sgd: factor by which calibration changes the rate"),
    Param("calibration_samples", 1000, "int>=1", "l2sgd: instances used for the calibration"),
    Param("calibration_candidates", 10, "int>=1", "l2sgd: candidate learning rates tried"),
    Param("calibration_max_trials", 20, "int>=1", "l2sgd: most calibration trials"),
    Param("pa_type", 1, "{0,1,2}", "pa: 0 (PA), 1 (PA-I) or 2 (PA-II)"),
    Param("c", 1.0, "float>=0", "pa: aggressiveness (slack penalty) of PA-I / PA-II"),
    Param("error_sensitive", True, "bool", "pa: the margin grows with the number of wrong labels"),
    Param("averaging", True, "bool", "pa/arow: return the averaged weights"),
    Param("variance", 1.0, "float>=0", "arow: initial variance of every weight"),
    Param("gamma", 1.0, "float>=0", "arow: regularisation (trade-off) of the update"),
)

MIN_FREQ = Param("min_freq", 0.0, "float>=0", "keep state features seen at least this many times")
ALL_POSSIBLE_STATES = Param("all_possible_states", False, "bool",
                            "every (attribute, label) pair is a feature, not only those seen")
ALL_POSSIBLE_TRANSITIONS = Param("all_possible_transitions", False, "bool",
                                 "every label transition is a feature, not only those seen")
RANDOM_STATE = Param("random_state", None, "any", "seed (int) or RandomState of the online shuffling")
VERBOSE = Param("verbose", False, "bool", "progress bar (tqdm) while training")
N_JOBS = Param("n_jobs", None, "int>=-64|None",
               "worker processes of L-BFGS (data cut into that many blocks of sequences, each held by one "
               "process; -1 all cores; None: this process)")


def accepts(param, kind):
    """Whether one alternative of ``param.constraint`` is of ``kind`` (``"pairs"``, ``"list"``, ...)."""
    return any(k == kind for k, _ in _alternatives(param.constraint))
