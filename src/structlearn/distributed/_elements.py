"""The bag elements of the distributed CRF fits: tuples of one sequence's (or tree's) parts, split into
columns on the worker that holds the partition."""

__all__ = ["split_elements"]

_ARITY = {2: "a pair", 3: "a triple", 4: "a 4-tuple"}
_PLURAL = {2: "pairs", 3: "triples", 4: "4-tuples"}


def _form(names):
    return f"{_ARITY.get(len(names), f'a {len(names)}-tuple')} ({', '.join(names)})"


def split_elements(part, partition, names, optional=0, unit="sequence", given_as=None):
    """The columns (lists) of a partition whose elements are tuples ``names`` of one ``unit``; the last
    ``optional`` parts may be left out, by all the partition's elements or by none (such a column is then
    None). ``given_as``: how the message names an optional part (default its name).

    Raises
    ------
    ValueError
        An element that is not a tuple / list of an allowed length, naming the element, the partition and
        the forms allowed; an optional part given by some elements only.
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
    for i in range(lo, n):
        given = [v is not None for v in cols[i]]
        if any(given) and not all(given):
            what = (given_as or {}).get(names[i], names[i])
            raise ValueError(f"partition {partition}: give {what} with every {unit} of the bag "
                             f"({_PLURAL.get(i + 1, f'{i + 1}-tuples')}) or with none "
                             f"({_PLURAL.get(i, f'{i}-tuples')})")
        if not all(given):
            cols[i] = None
    return cols
