"""Helpers shared by the plotting functions: the lazy matplotlib import, axes creation, colours, input
checks and runs of equal labels. Nothing here imports matplotlib at module level."""
import numpy as np

from ..utils.docstrings import fill_docstring

__all__ = ["pyplot", "new_axes", "state_colors", "as_lengths", "runs", "check_axes_count", "save_figure", "RETURNS_AX",
           "returns_ax"]


def pyplot():
    """``matplotlib.pyplot``, imported on first use (the ``plot`` extra: ``pip install structlearn[plot]``).

    Raises
    ------
    ImportError
        If matplotlib is not installed, with the install command.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is in the dev extra
        raise ImportError("structlearn.plotting needs matplotlib (pip install 'structlearn[plot]' or "
                          "pip install 'matplotlib>=3.7')") from exc
    return plt


def new_axes(n_rows=1, n_cols=1, figsize=(8.0, 3.0), **kwargs):
    """A new figure (constrained layout, fixed ``figsize`` in inches) and its axes as a flat object array."""
    plt = pyplot()
    fig, axes = plt.subplots(n_rows, n_cols, figsize=figsize, layout="constrained", squeeze=False,
                             **kwargs)
    return fig, axes.ravel()


def check_axes_count(axes, n, name="axes"):
    """``axes`` (one Axes or a sequence of them) as a flat object array of at least ``n`` Axes."""
    flat = np.ravel(np.asarray(axes, dtype=object))
    if flat.size < n:
        raise ValueError(f"`{name}` must hold at least {n} Axes for this plot; got {flat.size}")
    return flat[:n]


def state_colors(n):
    """``n`` distinct RGBA colours (tab10 up to 10, tab20 up to 20, then evenly spaced hues), (n, 4)."""
    plt = pyplot()
    if n <= 10:
        return np.asarray(plt.get_cmap("tab10")(np.arange(n)))
    if n <= 20:
        return np.asarray(plt.get_cmap("tab20")(np.arange(n)))
    return np.asarray(plt.get_cmap("hsv")(np.linspace(0.0, 1.0, n, endpoint=False)))


def as_lengths(lengths, n, name="lengths"):
    """Validated sequence lengths (B,) int64 summing to ``n`` (None: one sequence of length ``n``)."""
    if lengths is None:
        return np.array([n], dtype=np.int64)
    arr = np.asarray(lengths)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)) or np.any(arr < 0):
        raise ValueError(f"`{name}` must be a 1-d array of non-negative ints; got {arr.dtype} {arr.shape}")
    if int(arr.sum()) != n:
        raise ValueError(f"`{name}` sums to {int(arr.sum())} but the data has {n} rows")
    return arr.astype(np.int64)


def runs(labels):
    """Runs of equal labels of one sequence: (start, end inclusive, label) rows, int64 (R, 3)."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    start = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    end = np.r_[start[1:] - 1, labels.size - 1]
    return np.column_stack([start, end, labels[start]]).astype(np.int64)


def int_labels(states, n, name="states"):
    """``states`` (n,) as int64 (−1 or less: unknown / not shown)."""
    arr = np.asarray(states)
    if arr.shape != (n,):
        raise ValueError(f"`{name}` must have shape ({n},) (one label per row of the data); got "
                         f"{arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        whole = np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr))
        if whole and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"`{name}` must hold integer state indices; got dtype {arr.dtype}")
    return arr.astype(np.int64)


def names_for(state_names, n, name="state_names"):
    """``n`` display names: ``state_names`` checked for length, or "0", "1", ..."""
    if state_names is None:
        return [str(k) for k in range(n)]
    names = [str(s) for s in state_names]
    if len(names) < n:
        raise ValueError(f"`{name}` must name all {n} states; got {len(names)} names")
    return names


def save_figure(axes, directory, name, dpi=100):
    """Save the figure of ``axes`` as ``directory/name.png`` and close it (the examples' ``--figures``).

    Parameters
    ----------
    axes : Axes, Figure or array of Axes
        What one of the plotting functions returned (its figure is saved).
    directory : str or path-like
        Folder, created with its parents if missing.
    name : str
        File name without the ``.png`` suffix.
    dpi : int, default 100
        Pixels per inch: the PNG is figsize · dpi pixels (no tight bounding box, so the size is fixed).

    Returns
    -------
    pathlib.Path
        The written file.
    """
    import pathlib

    obj = np.ravel(np.asarray(axes, dtype=object))[0] if not hasattr(axes, "savefig") else axes
    fig = obj if hasattr(obj, "savefig") else obj.figure
    folder = pathlib.Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


#: The ``Returns`` section of a plotting function that draws on one Axes (:func:`returns_ax`).
RETURNS_AX = """Returns
-------
ax : Axes"""


def returns_ax(func):
    """Decorator: write :data:`RETURNS_AX` in place of the line ``{returns_ax}`` of ``func``'s docstring.

    Parameters
    ----------
    func : function
        A plotting function that returns the one Axes it drew on.

    Returns
    -------
    function
        ``func``, its ``__doc__`` completed.
    """
    return fill_docstring(func, returns_ax=RETURNS_AX)
