"""Reader and writer of libDAI's factor graph file format (``.fg``).

The format (libDAI, ``doc/fileformats.txt``; Mooij 2010, "libDAI: A Free and Open Source C++ Library for
Discrete Approximate Inference in Graphical Models", JMLR 11)::

    2                 <- number of factors
                      <- a blank line before every factor
    1                 <- number of variables of factor 0
    4                 <- their labels (non-negative integers)
    2                 <- their cardinalities
    2                 <- number of non-zero entries that follow
    0 0.3             <- linear index and value (linear space, ≥ 0)
    1 0.7

    2
    4 7
    2 3
    ...

* Variable order: the linear index enumerates the joint states of the factor's variables **in the
  order listed, the first variable changing fastest** (Fortran order). Internally structlearn tables are
  C order over the scope (the last variable fastest), so the reader and writer transpose.
* Entries not listed are 0 (log-potential -inf). Lines starting with ``#`` are comments.
* Variable labels need not be contiguous: the reader numbers the variables by sorted label
  (``return_labels=True`` gives the labels); the writer writes labels 0..N-1.
"""
import math

import numpy as np

from ..engine.structures.factor_graph import FactorGraph
from ._files import describe, open_text

__all__ = ["read_fg", "write_fg", "FGFormatError", "graph_factors", "MAX_FACTOR_ENTRIES"]

#: the largest factor table :func:`read_fg` allocates (2**28 float64 entries, 2 GiB); the format lists only
#: non-zero entries, so a small file (or one damaged cardinality) could otherwise ask for any size
MAX_FACTOR_ENTRIES = 2 ** 28


class FGFormatError(ValueError):
    """A malformed libDAI ``.fg`` file (the message names the file and what was expected)."""


def graph_factors(graph, b=0):
    """Cardinalities (n,), scopes and log-tables (C order over the scope) of graph ``b`` of a
    :class:`FactorGraph`; variable potentials that are not all 0 become factors of arity 1 first."""
    if not 0 <= b < graph.batch_size:
        raise ValueError(f"`graph_index` must lie in 0..{graph.batch_size - 1}; got {b}")
    n0, n1 = graph.offsets[b], graph.offsets[b + 1]
    card = graph.n_states[n0:n1].copy()
    scopes, tables = [], []
    for v in range(n1 - n0):
        row = graph.unary[n0 + v, :card[v]]
        if np.any(row != 0):
            scopes.append((v,))
            tables.append(row.copy())
    f0, f1 = graph.factor_offsets[b], graph.factor_offsets[b + 1]
    scopes += list(graph.scopes[f0:f1])
    tables += [graph.table(f) for f in range(f0, f1)]
    return card, scopes, tables


def linear_entries(log_table):
    """Decimal strings of ``exp(log_table)`` (flattened in the table's order) that read back into the same
    log-potentials bit for bit: ``np.log(float(s))`` equals the entry of ``log_table``.

    Each is the shortest such decimal (fewest significant digits, ``format(x, ".pg")`` for p ≤ 17): ``3``
    for a table read from ``3`` although exp(log 3) is 3.0000000000000004, ``0.1``, ``1e-300``. A file
    whose values are in that shortest form is therefore written back byte for byte after it is read. An
    entry that no decimal reads back into exactly (a log-potential between the logs of two neighbouring
    floats) is the shortest repr of the float nearest to it within 3 ulps whose log is that entry, else of
    ``exp`` of it. Zeros (log -inf) are ``0``.

    Cost: time O(size of the table): a formatting, a parse and a log per entry and digit count tried (15,
    16 and 17 for most values, 15 then 1, 2, … for values given with few digits), memory O(size).
    """
    tb = np.asarray(log_table, dtype=np.float64).ravel()
    with np.errstate(under="ignore"):
        lin = np.exp(tb)
    out = [repr(x) for x in lin.tolist()]

    def settle(idx, digits):            # write the entries idx that read back with `digits`; return the others
        cand = [f"{x:.{digits}g}" for x in lin[idx].tolist()]
        with np.errstate(divide="ignore"):
            ok = np.log(np.array([float(c) for c in cand], dtype=np.float64)) == tb[idx]
        for k in np.flatnonzero(ok).tolist():
            out[idx[k]] = cand[k]
        return idx[~ok]

    everything = np.arange(tb.size)
    long = settle(everything, 15)       # a value given with at most 15 digits reads back with 15 of them
    short = np.setdiff1d(everything, long, assume_unique=True)
    for digits in range(1, 15):         # ... and with fewer: the shortest, found from 1 digit up
        if short.size == 0:
            break
        short = settle(short, digits)
    long = settle(settle(long, 16), 17)
    for step in (1, -1, 2, -2, 3, -3):  # no decimal of exp(tb) reads back: a neighbouring float might
        if long.size == 0:
            break
        z = lin[long]
        for _ in range(abs(step)):
            z = np.nextafter(z, np.inf if step > 0 else -np.inf)
        with np.errstate(divide="ignore"):
            ok = np.log(z) == tb[long]
        for k in np.flatnonzero(ok).tolist():
            out[long[k]] = repr(float(z[k]))
        long = long[~ok]
    return out


def _tokens(text):
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        out.extend(line.split())
    return out


def read_fg(source, *, return_labels=False):
    """Read a libDAI ``.fg`` file into a :class:`~structlearn.engine.structures.FactorGraph`.

    Parameters
    ----------
    source : path or file object
    return_labels : bool
        Also return the libDAI label of every variable, ndarray of int64, shape (N,) (sorted).

    Returns
    -------
    graph : FactorGraph
        One graph built by :meth:`FactorGraph.from_factors`; tables are the logs of the file's values.
    labels : ndarray of int64, shape (N,)
        Only with ``return_labels``.

    Raises
    ------
    FGFormatError (a ValueError)
        Missing or non-numeric tokens, negative values, indices out of range, a negative count of
        non-zero entries or more than the table holds, a table of more than :data:`MAX_FACTOR_ENTRIES`
        entries, a variable with two cardinalities, trailing tokens, text that is not UTF-8, a truncated
        or corrupt gzip file. The message names the file; no other error for a damaged file.
    """
    name = describe(source)
    with open_text(source, error=FGFormatError) as fh:
        tok = _tokens(fh.read())
    pos = [0]

    def take(what, conv=int):
        if pos[0] >= len(tok):
            raise FGFormatError(f"{name}: unexpected end of file; expected {what}")
        t = tok[pos[0]]
        pos[0] += 1
        try:
            return conv(t)
        except ValueError:
            raise FGFormatError(f"{name}: expected {what}, got {t!r} (token {pos[0]})") from None

    F = take("the number of factors")
    raw, cards = [], {}
    for f in range(F):
        a = take(f"the number of variables of factor {f}")
        if a < 1:
            raise FGFormatError(f"{name}: factor {f} has {a} variables; expected at least 1")
        labels = [take(f"a variable label of factor {f}") for _ in range(a)]
        ks = [take(f"a cardinality of factor {f}") for _ in range(a)]
        for lab, k in zip(labels, ks):
            if lab < 0 or k < 1:
                raise FGFormatError(f"{name}: factor {f} has label {lab} / cardinality {k}; expected labels ≥ 0 "
                                    f"and cardinalities ≥ 1")
            if cards.setdefault(lab, k) != k:
                raise FGFormatError(f"{name}: variable {lab} has cardinality {cards[lab]} and {k} (factor {f})")
        if len(set(labels)) != a:
            raise FGFormatError(f"{name}: factor {f} repeats a variable: {labels}")
        size = math.prod(ks)  # Python ints: np.prod wraps around silently in int64
        if size > MAX_FACTOR_ENTRIES:
            raise FGFormatError(f"{name}: factor {f} has cardinalities {ks}, a table of {size} entries; "
                                f"expected at most {MAX_FACTOR_ENTRIES} (a corrupt file?)")
        nnz = take(f"the number of non-zero entries of factor {f}")
        if not 0 <= nnz <= size:
            raise FGFormatError(f"{name}: factor {f} lists {nnz} non-zero entries; expected 0..{size}")
        lin = np.zeros(size)
        for _ in range(nnz):
            i = take(f"an entry index of factor {f}")
            val = take(f"an entry value of factor {f}", float)
            if not 0 <= i < size:
                raise FGFormatError(f"{name}: factor {f} has entry index {i}; expected 0..{size - 1}")
            if not (val >= 0 and np.isfinite(val)):
                raise FGFormatError(f"{name}: factor {f} has value {val}; expected a finite value ≥ 0")
            lin[i] = val
        raw.append((labels, ks, lin))
    if pos[0] != len(tok):
        raise FGFormatError(f"{name}: {len(tok) - pos[0]} trailing token(s) after {F} factors")
    labels_sorted = np.array(sorted(cards), dtype=np.int64)
    index = {int(lab): i for i, lab in enumerate(labels_sorted)}
    scopes, tables = [], []
    for labels, ks, lin in raw:
        with np.errstate(divide="ignore"):
            tables.append(np.log(lin.reshape(ks, order="F")))   # first variable fastest
        scopes.append(tuple(index[lab] for lab in labels))
    if not cards:
        raise FGFormatError(f"{name}: no variables (0 factors)")
    graph = FactorGraph.from_factors([cards[int(lab)] for lab in labels_sorted], scopes, tables)
    return (graph, labels_sorted) if return_labels else graph


def write_fg(target, graph, *, graph_index=0):
    """Write graph ``graph_index`` of a :class:`FactorGraph` as a libDAI ``.fg`` file.

    Variable potentials that are not all 0 become factors of arity 1 (before the others); values are
    ``exp`` of the log-tables in the shortest form that reads back into the same log-tables
    (:func:`linear_entries`: ``3`` stays ``3``); zero entries are left out. A variable
    in no factor gets a factor of arity 1 of ones (a ``.fg`` file declares variables only through
    factors). Variables are labelled 0..N-1.
    """
    card, scopes, tables = graph_factors(graph, graph_index)
    covered = {v for s in scopes for v in s}
    for v in range(len(card)):          # a .fg file knows only the variables of its factors
        if v not in covered:
            scopes.append((v,))
            tables.append(np.zeros(int(card[v])))
    with open_text(target, "w") as fh:
        fh.write(f"{len(scopes)}\n")
        for s, t in zip(scopes, tables):
            flat = np.asarray(t, dtype=np.float64).ravel(order="F")
            with np.errstate(under="ignore"):
                nz = np.flatnonzero(np.exp(flat) > 0)
            fh.write(f"\n{len(s)}\n{' '.join(map(str, s))}\n{' '.join(str(int(card[v])) for v in s)}\n{nz.size}\n")
            fh.writelines(f"{i} {x}\n" for i, x in zip(nz.tolist(), linear_entries(flat[nz])))
