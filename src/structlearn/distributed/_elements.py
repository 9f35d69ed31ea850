"""The bag elements of the distributed CRF fits: tuples of one sequence's (or tree's) parts, split into
columns on the worker that holds the partition; and the partial labels a tuple may end with (``allowed``:
label names per token or node), checked there and turned into the (n_items, K) mask of the objectives
once the label order is merged (LinearChainCRF, HigherOrderCRF, TreeCRF)."""
import numpy as np

from ..crf._base import label_key

__all__ = ["split_elements", "check_allowed", "allowed_mask"]

_ARITY = {2: "a pair", 3: "a triple", 4: "a 4-tuple", 5: "a 5-tuple"}
_PLURAL = {2: "pairs", 3: "triples", 4: "4-tuples", 5: "5-tuples"}
_LABEL_TYPES = (str, bytes, int, float, bool, np.generic)
_COLLECTIONS = (set, frozenset, list, tuple, np.ndarray)


def _form(names):
    return f"{_ARITY.get(len(names), f'a {len(names)}-tuple')} ({', '.join(names)})"


def split_elements(part, partition, names, optional=0, unit="sequence", given_as=None, partial=False):
    """The columns (lists) of a partition whose elements are tuples ``names`` of one ``unit``; the last
    ``optional`` parts may be left out, by all the partition's elements or by none (such a column is then
    None). ``given_as``: how the message names an optional part (default its name).

    With ``partial``, the last name is ``allowed`` (partial labels, one of the ``optional`` parts), which
    every element may give or leave out on its own: its column holds None for an element without it, else
    the element's ``allowed`` checked against its labels (the second name) by :func:`check_allowed`.

    Raises
    ------
    ValueError
        An element that is not a tuple / list of an allowed length, naming the element, the partition and
        the forms allowed; an optional part given by some elements only; a malformed ``allowed``.
    """
    n, lo = len(names), len(names) - optional
    cols = [[] for _ in names]
    for j, el in enumerate(part):
        if not (isinstance(el, (tuple, list)) and lo <= len(el) <= n):
            what = f"a {type(el).__name__} of length {len(el)}" if isinstance(el, (tuple, list)) else \
                f"a {type(el).__name__}"
            forms = " or ".join(_form(names[:k]) for k in range(lo, n + 1))
            raise ValueError(f"every element of the bag must be {forms} of one {unit}; element {j} of "
                             f"partition {partition} is {what}")
        for i in range(n):
            cols[i].append(el[i] if i < len(el) else None)
        if partial and len(el) == n:
            cols[-1][-1] = check_allowed(el[-1], el[1], j, partition, "node" if unit == "tree" else "token")
    for i in range(lo, n - int(partial)):
        given = [v is not None for v in cols[i]]
        if any(given) and not all(given):
            what = (given_as or {}).get(names[i], names[i])
            raise ValueError(f"partition {partition}: give {what} with every {unit} of the bag "
                             f"({_PLURAL.get(i + 1, f'{i + 1}-tuples')}) or with none "
                             f"({_PLURAL.get(i, f'{i}-tuples')})")
        if not all(given):
            cols[i] = None
    return cols


def check_allowed(spec, labels, j, partition, item="token"):
    """The ``allowed`` of one element as a list (per ``item``: token or node) of label tuples, or of None
    (every label). ``spec``: None, or one entry per item: None, a label, or a non-empty set/list/tuple/1-D
    array of labels (names, not positions: a shard does not know the merged label order)."""
    where = f"element {j} of partition {partition}"
    n = len(labels) if hasattr(labels, "__len__") and not isinstance(labels, (str, bytes)) else None
    if spec is None:
        return [None] * (n or 0)
    if isinstance(spec, np.ndarray) and spec.dtype == bool:
        raise ValueError(f"{where}: `allowed` must name the allowed labels per {item} (a list of label "
                         f"sets); got a boolean array {spec.shape}, whose columns would depend on the "
                         f"label order, which the shards do not know")
    if isinstance(spec, (str, bytes, dict)) or not isinstance(spec, (list, tuple, np.ndarray)):
        raise ValueError(f"{where}: `allowed` must be None or a list with one entry (None, a label or a "
                         f"set of labels) per {item}; got a {type(spec).__name__}")
    if n is not None and len(spec) != n:
        raise ValueError(f"{where}: `allowed` must have one entry per {item} ({n} labels); got {len(spec)} "
                         f"entries")
    out = []
    for t, entry in enumerate(spec):
        if entry is None:
            out.append(None)
            continue
        labs = (entry,) if isinstance(entry, _LABEL_TYPES) else entry
        if not isinstance(labs, _COLLECTIONS) or (isinstance(labs, np.ndarray) and labs.ndim != 1) or \
                not all(isinstance(lab, _LABEL_TYPES) for lab in labs):
            raise ValueError(f"{where}: `allowed[{t}]` must be None (every label), a label or a set/list of "
                             f"labels; got {entry!r}")
        if len(labs) == 0:
            raise ValueError(f"{where}: {item} {t} has no allowed label (`allowed[{t}]` is empty); give at "
                             f"least one label, or None for every label")
        out.append(tuple(label_key(lab) for lab in labs))
    return out


def allowed_mask(allowed, yy, packed, label_index, partition):
    """The (N, K) bool mask of a partition's items (the ``allowed`` of the objectives, rows in the order of
    the elements): an element's allowed labels (every label where None), the gold label alone for an
    element without ``allowed`` (its term is then log p(y | x)); None when no element has one."""
    if all(a is None for a in allowed):
        return None
    K = len(label_index)
    mask = np.zeros((packed.n_items, K), bool)
    for j, spec in enumerate(allowed):
        o, n = int(packed.offsets[j]), int(packed.lengths[j])
        if spec is None:
            mask[np.arange(o, o + n), yy[o:o + n]] = True
            continue
        for t, labs in enumerate(spec):
            if labs is None:
                mask[o + t] = True
                continue
            for lab in labs:
                k = label_index.get(lab)
                if k is None:
                    raise ValueError(f"element {j} of partition {partition}: `allowed[{t}]` names label "
                                     f"{lab!r}, which is not a label of the model (the labels of the bag's "
                                     f"label sequences: {list(label_index)[:10]})")
                mask[o + t, k] = True
    return mask
