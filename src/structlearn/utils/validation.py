"""Boundary validation shared by structures, models and estimators.

Messages say what was expected, what arrived and how to fix it. Kernels never validate.
"""
import numpy as np

#: dtype kinds of real numbers (bool, signed and unsigned integers, floats)
_REAL_KINDS = "biuf"


def check_real(X, name="X"):
    """``X`` as an array (not converted) after refusing what float64 would take silently or wrongly.

    hmmlearn (scikit-learn's ``check_array(dtype="numeric")``) refuses the same: complex values (NumPy
    would drop the imaginary parts with a warning), strings and bytes, even of numbers (``"1.5"``), and
    other non-numeric dtypes (datetimes, records). An object array is checked entry by entry: numbers
    (and None, which becomes NaN) pass, strings, bytes and complex numbers do not. Time O(1), O(N) for
    an object array.

    Raises
    ------
    ValueError
        Naming ``name``, expecting real numbers and saying what arrived (dtype, first bad entry), or when
        ``X`` is not an array of numbers at all (ragged rows, ...).
    """
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be an array of real numbers; got {type(X).__name__} ({exc})") from None
    kind = arr.dtype.kind
    if kind in _REAL_KINDS:
        return arr
    if kind == "c":
        raise ValueError(f"`{name}` must hold real numbers; got complex values (dtype {arr.dtype}), whose "
                         f"imaginary parts would be dropped; pass X.real, np.abs(X) or both as two features")
    if kind in "US":
        raise ValueError(f"`{name}` must hold real numbers; got {'strings' if kind == 'U' else 'bytes'} "
                         f"(dtype {arr.dtype}), e.g. {arr.ravel()[:1].tolist()}; convert them explicitly "
                         f"(np.asarray(X, dtype=float))")
    if kind == "O":
        for i, v in enumerate(arr.flat):
            if isinstance(v, (str, bytes, complex, np.complexfloating)):
                raise ValueError(f"`{name}` must hold real numbers; got an object array with "
                                 f"{type(v).__name__} {v!r} at flat index {i}; convert it explicitly "
                                 f"(np.asarray(X, dtype=float))")
        return arr
    raise ValueError(f"`{name}` must hold real numbers; got dtype {arr.dtype}")


def as_real_float64(X, name="X"):
    """``X`` as a float64 array after :func:`check_real` (``ValueError`` naming ``name`` when an object
    array holds something that is not a number)."""
    arr = check_real(X, name)
    try:
        return np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be an array of real numbers; got {type(X).__name__} ({exc})") from None


def check_lengths(lengths, n_rows, *, name="lengths", rows_name="the potentials"):
    """Validate sequence lengths of a packed ragged batch.

    Parameters
    ----------
    lengths : None or array-like of int, shape (B,)
        Length of every sequence; ``None`` means a single sequence of ``n_rows`` tokens.
    n_rows : int
        Number of packed rows N; ``lengths`` must sum to it.

    Returns
    -------
    lengths : ndarray of int64, shape (B,)
    offsets : ndarray of int64, shape (B + 1,)
        ``offsets[b]:offsets[b + 1]`` are the rows of sequence b.

    Raises
    ------
    ValueError
        If a length is negative or not an integer, or the lengths do not sum to ``n_rows``.
    """
    if lengths is None:
        lengths = np.array([n_rows], dtype=np.int64)
    else:
        arr = np.asarray(lengths)
        if arr.ndim != 1:
            raise ValueError(f"`{name}` must be 1-d (one length per sequence); got shape {arr.shape}")
        if arr.size and not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
                             or arr.dtype == bool):
            raise ValueError(f"`{name}` must hold whole numbers (one length per sequence); got "
                             f"{arr.dtype} values {arr[:5]!r}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise ValueError(f"`{name}` must hold whole numbers; got {arr[:5]!r}")
        lengths = arr.astype(np.int64)
        if lengths.size and lengths.min() < 0:
            raise ValueError(f"`{name}` must be non-negative; got {int(lengths.min())} "
                             f"at sequence {int(np.argmin(lengths))}")
        total = int(lengths.sum())
        if total != n_rows:
            raise ValueError(f"`{name}` sums to {total} but {rows_name} have {n_rows} rows")
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return lengths, offsets


def check_log_potentials(x, name, shape=None, *, ndim=None):
    """Return ``x`` as a C-contiguous float64 array of log-potentials.

    ``-inf`` is legal (a forbidden label, transition or segment); NaN and ``+inf`` are not.

    Parameters
    ----------
    x : array-like
    name : str
        Argument name used in error messages.
    shape : tuple of (int or None), optional
        Expected shape; ``None`` entries match any size.
    ndim : int or tuple of int, optional
        Allowed number of dimensions when ``shape`` is not given.

    Raises
    ------
    ValueError
        Wrong shape, NaN or +inf entries, or a non-numeric array.
    """
    try:
        arr = np.ascontiguousarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric array; got {type(x).__name__} ({exc})") from None
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"`{name}` must have shape {want}; got {arr.shape}")
    elif ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            raise ValueError(f"`{name}` must have {' or '.join(map(str, allowed))} dimensions; "
                             f"got shape {arr.shape}")
    if arr.size:
        bad = np.isnan(arr)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"`{name}` contains NaN (first at index {idx}); log-potentials must be "
                             f"finite or -inf")
        bad = arr == np.inf
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"`{name}` contains +inf (first at index {idx}); log-potentials must be "
                             f"finite or -inf")
    return arr


def check_allowed_mask(allowed, shape, name="allowed"):
    """Validate a boolean mask of allowed labels, shape (N, K)."""
    arr = np.asarray(allowed)
    if arr.shape != tuple(shape):
        raise ValueError(f"`{name}` must be a boolean mask of shape {tuple(shape)}; got {arr.shape}")
    if arr.dtype != np.bool_:
        if not np.isin(arr, (0, 1)).all():
            raise ValueError(f"`{name}` must be boolean (or 0/1); got dtype {arr.dtype}")
        arr = arr.astype(bool)
    return arr


def check_labels(labels, n_rows, n_labels, name="labels"):
    """Validate a packed labeling: int array (N,) with values in [0, K)."""
    arr = np.asarray(labels)
    if arr.shape != (n_rows,):
        raise ValueError(f"`{name}` must have shape ({n_rows},) (one label per token); got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`{name}` must hold integer label indices; got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= n_labels):
        bad = int(np.flatnonzero((arr < 0) | (arr >= n_labels))[0])
        raise ValueError(f"`{name}` must lie in [0, {n_labels}); got {int(arr[bad])} at row {bad}")
    return arr


def check_feature_index(ptr, ids, n_ids, ptr_name="attr_ptr", ids_name="feat_label"):
    """ValueError naming the array unless ``ids`` is 1-D with values in [0, ``n_ids``) and ``ptr`` (1-D)
    rises from 0 to ``len(ids)`` (a CSR-like feature index of a model file). Time O(len(ptr) + len(ids))."""
    if ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() >= n_ids)):
        raise ValueError(f"{ids_name!r} must be 1-D with values in [0, {n_ids}); got shape {ids.shape}, values "
                         f"from {ids.min(initial=0)} to {ids.max(initial=0)}")
    if ptr.ndim != 1 or ptr.size == 0 or ptr[0] != 0 or ptr[-1] != ids.size or np.any(ptr[1:] < ptr[:-1]):
        raise ValueError(f"{ptr_name!r} must rise from 0 to the length of {ids_name!r} ({ids.size}); got shape "
                         f"{ptr.shape} from {ptr.ravel()[:1].tolist()} to {ptr.ravel()[-1:].tolist()}")


def check_shapes(arrays, shapes):
    """ValueError naming the first of ``arrays`` (name -> array) whose shape is not ``shapes[name]``."""
    for name, shape in shapes.items():
        if np.shape(arrays[name]) != tuple(shape):
            raise ValueError(f"{name!r} must have shape {tuple(shape)}; got {np.shape(arrays[name])}")


def finite_abs_max(x, axis=None):
    """Largest |x| over the finite entries of ``x`` (0 where there are none), along ``axis``: the size
    of log-potentials that may hold -inf (forbidden entries), for bounds on the scores their sums give
    (a bound that is not finite means the scores can overflow float64)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    return np.where(np.isfinite(a), a, 0.0).max(axis=axis, initial=0.0)


def first_row(offsets, rows):
    """The first of some rows of a packed batch and the sequence that owns it.

    Parameters
    ----------
    offsets : array-like of int, shape (B + 1,)
        Sequence b owns rows ``offsets[b]:offsets[b + 1]`` (non-decreasing, ``offsets[0] = 0``).
    rows : array-like of int, shape (n,), n >= 1
        Rows in ``0..offsets[-1] - 1``, in increasing order.

    Returns
    -------
    row : int
        ``rows[0]``.
    b : int
        The b with ``offsets[b] <= row < offsets[b + 1]`` (empty sequences own no row).
    """
    row = int(rows[0])
    return row, int(np.searchsorted(offsets, row, side="right") - 1)
