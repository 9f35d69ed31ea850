"""Readers and writers of the UAI inference competition formats: models (``MARKOV`` / ``BAYES``), evidence
(``.evid``) and result files (``MAR``, ``PR``, ``MAP``).

Model file (UAI 2008–2022 competitions, "UAI model format")::

    MARKOV            <- or BAYES
    3                 <- number of variables
    2 2 3             <- their cardinalities
    2                 <- number of factors (BAYES: one CPT per variable)
    1 0               <- factor 0: its number of variables, then the variables
    2 0 1             <- factor 1 (BAYES: the child is the LAST variable, after its parents)

    2                 <- factor 0: number of entries, then the entries
     0.4 0.6
    4
     0.9 0.1 0.2 0.8

* Variable order: a table lists its joint states with **the last variable changing fastest** (C order),
  the order of structlearn's tables, so tables are read as they are. Values are linear (≥ 0); 0 becomes
  log-potential -inf.
* ``BAYES``: each CPT P(child | parents) must sum to 1 over the child; the reader accepts any table (as
  the competitions' solvers do) and the writer checks it.
* Evidence (UAI 2014 and later): one line ``n v1 x1 ... vn xn``; the older form with a leading sample
  count of 1 is read too. Results: ``MAR`` then ``n k1 p… k2 p…``; ``PR`` then log10 Z (structlearn's
  log Z is natural: the reader and writer convert); ``MAP`` then ``n x1 … xn``.

Tokens are separated by any whitespace; lines starting with ``c`` or ``#`` before the header are
comments.
"""
import math

import numpy as np

from ..engine.structures.factor_graph import FactorGraph
from ._files import describe, open_text
from .libdai import graph_factors, linear_entries

__all__ = ["read_uai", "write_uai", "read_evid", "write_evid", "evidence_mask", "read_uai_result",
           "write_uai_result", "UAIFormatError"]


class UAIFormatError(ValueError):
    """A malformed UAI model, evidence or result file (the message names the file)."""


class _Tokens:
    def __init__(self, text, name):
        lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("#", "c ")) and ln.strip() != "c"]
        self.tok = " ".join(lines).split()
        self.pos = 0
        self.name = name

    def take(self, what, conv=int):
        if self.pos >= len(self.tok):
            raise UAIFormatError(f"{self.name}: unexpected end of file; expected {what}")
        t = self.tok[self.pos]
        self.pos += 1
        try:
            return conv(t)
        except ValueError:
            raise UAIFormatError(f"{self.name}: expected {what}, got {t!r} (token {self.pos})") from None

    def done(self):
        if self.pos != len(self.tok):
            raise UAIFormatError(f"{self.name}: {len(self.tok) - self.pos} unexpected trailing token(s)")


def read_uai(source, *, return_network=False):
    """Read a UAI model file into a :class:`~structlearn.engine.structures.FactorGraph`.

    Returns
    -------
    graph : FactorGraph
        One graph (:meth:`FactorGraph.from_factors`), log of the file's tables.
    network : {"MARKOV", "BAYES"}
        Only with ``return_network``.

    Raises
    ------
    UAIFormatError (a ValueError)
        An unknown header, missing or non-numeric tokens, a negative number of factors, variables out of
        range, a table whose entry count is not the product of its cardinalities, negative values,
        trailing tokens, text that is not UTF-8, a truncated or corrupt gzip file. The message names the
        file; no other error for a damaged file (this type is the one error of every reader here).
    """
    name = describe(source)
    with open_text(source, error=UAIFormatError) as fh:
        t = _Tokens(fh.read(), name)
    net = t.take("the header MARKOV or BAYES", str).upper()
    if net not in ("MARKOV", "BAYES"):
        raise UAIFormatError(f"{name}: header must be MARKOV or BAYES; got {net!r}")
    n = t.take("the number of variables")
    card = [t.take(f"the cardinality of variable {v}") for v in range(n)]
    if n < 1 or min(card) < 1:
        raise UAIFormatError(f"{name}: expected ≥ 1 variables with cardinalities ≥ 1; got {n} variables, {card}")
    F = t.take("the number of factors")
    if F < 0:
        raise UAIFormatError(f"{name}: expected a number of factors ≥ 0; got {F}")
    scopes = []
    for f in range(F):
        a = t.take(f"the number of variables of factor {f}")
        s = tuple(t.take(f"a variable of factor {f}") for _ in range(a))
        if a < 1 or min(s) < 0 or max(s) >= n or len(set(s)) != a:
            raise UAIFormatError(f"{name}: factor {f} has variables {list(s)}; expected ≥ 1 distinct variables "
                                 f"in 0..{n - 1}")
        scopes.append(s)
    tables = []
    for f, s in enumerate(scopes):
        shape = [card[v] for v in s]
        m = t.take(f"the number of entries of factor {f}")
        if m != math.prod(shape):
            raise UAIFormatError(f"{name}: factor {f} lists {m} entries; expected {math.prod(shape)} "
                                 f"(cardinalities {shape})")
        lin = np.array([t.take(f"an entry of factor {f}", float) for _ in range(m)])
        if not np.all(np.isfinite(lin) & (lin >= 0)):
            raise UAIFormatError(f"{name}: factor {f} has a negative or non-finite entry")
        with np.errstate(divide="ignore"):
            tables.append(np.log(lin).reshape(shape))           # last variable fastest = C order
    t.done()
    graph = FactorGraph.from_factors(card, scopes, tables)
    return (graph, net) if return_network else graph


def write_uai(target, graph, *, network="MARKOV", graph_index=0):
    """Write graph ``graph_index`` of a :class:`FactorGraph` as a UAI model file.

    Variable potentials that are not all 0 become factors of arity 1 (``MARKOV`` only). Values are
    ``exp`` of the log-tables in the shortest form that reads back into the same log-tables bit for bit
    (:func:`structlearn.io.libdai.linear_entries`): a file whose values are in shortest form (``3``, ``0.1``,
    ``1e-300``), read by :func:`read_uai`, is written back byte for byte.

    Raises
    ------
    ValueError
        ``network`` not MARKOV/BAYES; for BAYES, a factor whose table is not a CPT over its last variable
        (sums ≠ 1 within 1e-9) or a variable that is the child of no or of several factors.
    """
    if network not in ("MARKOV", "BAYES"):
        raise ValueError(f"`network` must be 'MARKOV' or 'BAYES'; got {network!r}")
    card, scopes, tables = graph_factors(graph, graph_index)
    if network == "BAYES":
        children = sorted(s[-1] for s in scopes)
        if children != list(range(len(card))):
            raise ValueError(f"a BAYES file needs one CPT per variable, its child last; the children of the "
                             f"factors are {children}, expected 0..{len(card) - 1} once each")
        for f, tb in enumerate(tables):
            sums = np.exp(tb).sum(axis=-1)
            if not np.allclose(sums, 1.0, rtol=0, atol=1e-9):
                raise ValueError(f"factor {f} (variables {list(scopes[f])}) is not a CPT: its rows sum to "
                                 f"{sums.ravel()[:4].tolist()}… over the child (last variable), expected 1")
    with open_text(target, "w") as fh:
        fh.write(f"{network}\n{len(card)}\n{' '.join(str(int(k)) for k in card)}\n{len(scopes)}\n")
        for s in scopes:
            fh.write(f"{len(s)} {' '.join(map(str, s))}\n")
        for tb in tables:
            fh.write(f"\n{np.size(tb)}\n {' '.join(linear_entries(tb))}\n")


def read_evid(source):
    """Read a UAI evidence file: ``{variable: value}`` (dict of int → int).

    Accepts ``n v1 x1 … vn xn`` (UAI 2014+) and ``1 n v1 x1 …`` (one sample, UAI 2010); an empty file is
    no evidence. Raises UAIFormatError (naming the file) otherwise, also for text that is not UTF-8 or a
    truncated or corrupt gzip file; no other error for a damaged file.
    """
    name = describe(source)
    with open_text(source, error=UAIFormatError) as fh:
        tok = fh.read().split()
    try:
        vals = [int(x) for x in tok]
    except ValueError:
        raise UAIFormatError(f"{name}: evidence must be integers") from None
    if not vals:
        return {}
    if len(vals) == 1 + 2 * vals[0]:
        pairs = vals[1:]
    elif vals[0] == 1 and len(vals) >= 2 and len(vals) == 2 + 2 * vals[1]:
        pairs = vals[2:]
    else:
        raise UAIFormatError(f"{name}: expected 'n v1 x1 … vn xn' (or a leading sample count 1); got "
                             f"{len(vals)} integers starting {vals[:3]}")
    return {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}


def write_evid(target, evidence):
    """Write ``{variable: value}`` as a one-line UAI evidence file."""
    items = sorted((int(v), int(x)) for v, x in dict(evidence).items())
    with open_text(target, "w") as fh:
        fh.write(" ".join([str(len(items))] + [f"{v} {x}" for v, x in items]) + "\n")


def evidence_mask(graph, evidence):
    """The mask of allowed labels (N, K) bool that clamps ``evidence`` ({variable: value}) in a one-graph
    :class:`FactorGraph`; ``graph.constrain(evidence_mask(graph, ev))`` is the conditioned graph and its
    log Z is log P(evidence) + log Z of the model (the UAI PR task)."""
    N, K = graph.n_rows, graph.n_labels
    allowed = np.arange(K)[None, :] < graph.n_states[:, None]
    for v, x in evidence.items():
        if not (0 <= v < N) or not (0 <= x < graph.n_states[v]):
            raise ValueError(f"evidence {v}={x} is out of range: {N} variables, variable {v} has "
                             f"{int(graph.n_states[v]) if 0 <= v < N else 0} labels")
        allowed[v] = False
        allowed[v, x] = True
    return allowed


def write_uai_result(target, kind, value, *, n_states=None):
    """Write a UAI result file.

    ``kind="MAR"``: value (N, K) marginals with ``n_states`` (N,) (or a list of 1-d arrays);
    ``"PR"``: value = natural log Z (written as log10); ``"MAP"``: value (N,) labels.
    """
    if kind == "MAR":
        rows = list(value) if n_states is None else [np.asarray(value[v])[:int(k)] for v, k in enumerate(n_states)]
        body = [str(len(rows))] + [" ".join([str(len(r))] + [f"{p:.17g}" for p in r]) for r in rows]
    elif kind == "PR":
        body = [f"{float(value) / math.log(10):.17g}"]
    elif kind == "MAP":
        lab = [int(x) for x in value]
        body = [str(len(lab))] + [str(x) for x in lab]
    else:
        raise ValueError(f"`kind` must be 'MAR', 'PR' or 'MAP'; got {kind!r}")
    with open_text(target, "w") as fh:
        fh.write(f"{kind}\n{' '.join(body)}\n")


def read_uai_result(source):
    """Read a UAI result file: ``(kind, value)`` with value a list of N 1-d marginals (MAR), the natural
    log Z (PR) or labels (N,) int64 (MAP). A leading sample count of 1 (UAI 2010) is accepted.

    Raises
    ------
    UAIFormatError (a ValueError)
        An unknown kind, a count or label that is not a non-negative integer, a wrong number of values,
        a PR value that is not a number, text that is not UTF-8, a truncated or corrupt gzip file. The
        message names the file; no other error for a damaged file.
    """
    name = describe(source)
    with open_text(source, error=UAIFormatError) as fh:
        t = _Tokens(fh.read(), name)
    kind = t.take("MAR, PR or MAP", str).upper()
    rest = t.tok[t.pos:]
    if kind == "PR":
        if len(rest) not in (1, 2):
            raise UAIFormatError(f"{name}: PR expects one value (log10 Z); got {len(rest)} tokens")
        try:
            return kind, float(rest[-1]) * math.log(10)
        except ValueError:
            raise UAIFormatError(f"{name}: PR expects a number (log10 Z); got {rest[-1]!r}") from None
    for skip in (0, 1):
        try:
            vals = [float(x) for x in rest[skip:]]
            n = int(vals[0])
            if n != vals[0] or n < 0:
                continue
            if kind == "MAP":
                if len(vals) == n + 1 and all(v == int(v) for v in vals[1:]):
                    return kind, np.array(vals[1:], dtype=np.int64)
                continue
            if kind == "MAR":
                out, i = [], 1
                for _ in range(n):
                    k = int(vals[i])
                    if k != vals[i] or k < 1:
                        raise ValueError
                    out.append(np.array(vals[i + 1:i + 1 + k]))
                    if out[-1].size != k:
                        raise IndexError
                    i += 1 + k
                if i == len(vals):
                    return kind, out
        except (ValueError, IndexError, OverflowError):  # OverflowError: int() of an infinite count or label
            continue
    if kind not in ("MAR", "MAP"):
        raise UAIFormatError(f"{name}: unknown result kind {kind!r}; expected MAR, PR or MAP")
    raise UAIFormatError(f"{name}: malformed {kind} result")
