"""Matrix-shaped plots: a transition heatmap (:func:`plot_transitions`) and graph-CRF node marginals on
an image grid (:func:`plot_marginals_grid`)."""
import numpy as np

from ._common import names_for, new_axes, state_colors, returns_ax

__all__ = ["plot_transitions", "plot_marginals_grid"]


def _transition_matrix(transmat):
    """(matrix (K, K), names or None, signed) from an array or a fitted model."""
    classes = getattr(transmat, "classes_", None)
    feats = getattr(transmat, "transition_features_", None)
    if isinstance(feats, dict) and classes is not None:  # linear-chain CRF: transition weights
        names = [str(c) for c in classes]
        index = {c: i for i, c in enumerate(names)}
        W = np.zeros((len(names), len(names)))
        for (a, b), w in feats.items():
            if str(a) in index and str(b) in index:
                W[index[str(a)], index[str(b)]] = w
        return W, names, True
    if hasattr(transmat, "get_params") or hasattr(transmat, "transmat_"):
        tm = getattr(transmat, "transmat_", None)
        if tm is None:
            raise ValueError(f"`transmat` must be a (K, K) array or a fitted model with transmat_; "
                             f"{type(transmat).__name__} has none (is it fitted?)")
        tm = np.asarray(tm, dtype=np.float64)
        if tm.ndim == 3 and tm.shape[0] == tm.shape[1]:  # residential time a_i(j, d): sum over d
            tm = tm.sum(axis=2)
        return tm, None, False
    tm = np.asarray(transmat, dtype=np.float64)
    return tm, None, bool(tm.size and tm.min() < 0)


@returns_ax
def plot_transitions(transmat, *, state_names=None, annotate=None, fmt=".2f", cmap=None, ax=None,
                     figsize=None, title=None, colorbar=True):
    """Heatmap of a transition matrix (rows: from, columns: to) with labelled axes and cell values.

    Parameters
    ----------
    transmat : array-like of float, shape (K, K), or fitted estimator
        ``transmat[i, j]``: score of i followed by j ("from, to"), probabilities or weights. From a
        model: ``transmat_`` of the HMMs and the explicit-duration HSMM, the embedded segment chain
        Σ_d a_i(j, d) of a ResidentialTimeHMM, or the transition weights of a LinearChainCRF
        (``transition_features_``, labels ``classes_``; drawn with a diverging colour map).
    state_names : sequence of str, optional
        Axis labels (default the CRF's ``classes_`` or ``"0"``, ``"1"``, ...).
    annotate : bool, optional
        Write every value in its cell (default: when K <= 20).
    fmt : str, default ".2f"
        Format of the values.
    cmap : str or Colormap, optional
        Default "Blues" for non-negative matrices, "RdBu_r" centred at 0 for signed ones.
    ax : Axes, optional
        Default: a new figure of ``figsize`` (default 0.45 · K + 2 inches square, at least 4).
    title : str, optional
    colorbar : bool, default True

    {returns_ax}

    Raises
    ------
    ValueError
        If ``transmat`` is not square (K, K) and finite, or ``state_names`` has fewer than K names.
    """
    tm, names_default, signed = _transition_matrix(transmat)
    if tm.ndim != 2 or tm.shape[0] != tm.shape[1] or tm.shape[0] == 0:
        raise ValueError(f"`transmat` must be a square (K, K) matrix; got shape {tm.shape}")
    if not np.all(np.isfinite(tm)):
        raise ValueError("`transmat` must be finite (pass probabilities or weights, not log(0) = -inf)")
    K = tm.shape[0]
    names = names_for(state_names if state_names is not None else names_default, K)
    if ax is None:
        side = max(4.0, 0.45 * K + 2.0)
        _, (ax,) = new_axes(1, 1, figsize or (side + (1.0 if colorbar else 0.0), side))
    if signed:
        vmax = float(np.abs(tm).max()) or 1.0
        im = ax.imshow(tm, cmap=cmap or "RdBu_r", vmin=-vmax, vmax=vmax)
    else:
        im = ax.imshow(tm, cmap=cmap or "Blues", vmin=0.0, vmax=max(float(tm.max()), 1e-12))
    ax.set_xticks(range(K))
    ax.set_yticks(range(K))
    ax.set_xticklabels(names[:K], rotation=90 if max(len(n) for n in names[:K]) > 3 else 0, fontsize=8)
    ax.set_yticklabels(names[:K], fontsize=8)
    ax.set_xlabel("to")
    ax.set_ylabel("from")
    if annotate is None:
        annotate = K <= 20
    if annotate:
        lo, hi = im.get_clim()
        for i in range(K):
            for j in range(K):
                v = tm[i, j]
                dark = abs((v - lo) / (hi - lo) - (0.5 if signed else 0.0)) > (0.3 if signed else 0.6)
                ax.text(j, i, format(v, fmt), ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, shrink=0.8)
    if title:
        ax.set_title(title)
    return ax


def _node_marginals(marginals, X, graph, method):
    """(N, K) marginals of one graph's nodes from an estimator, a structure, a result or an array."""
    if hasattr(marginals, "predict_marginals") and not isinstance(marginals, np.ndarray):
        if X is None:
            raise ValueError(f"`X` (the graph samples) is needed to predict marginals with "
                             f"{type(marginals).__name__}")
        samples = [X] if isinstance(X, tuple) else X
        out = marginals.predict_marginals(samples)
        if not 0 <= graph < len(out):
            raise ValueError(f"`graph` must be in 0..{len(out) - 1}; got {graph!r}")
        return np.asarray(out[graph], dtype=np.float64), None
    if callable(getattr(marginals, "marginals", None)):  # a FactorGraph
        res = marginals.marginals(method) if method is not None else marginals.marginals()
        return np.asarray(res.unary, dtype=np.float64), marginals
    if hasattr(marginals, "unary"):
        return np.asarray(marginals.unary, dtype=np.float64), None
    if isinstance(marginals, list):
        if not 0 <= graph < len(marginals):
            raise ValueError(f"`graph` must be in 0..{len(marginals) - 1}; got {graph!r}")
        return np.asarray(marginals[graph], dtype=np.float64), None
    return np.asarray(marginals, dtype=np.float64), None


@returns_ax
def plot_marginals_grid(marginals, shape, *, X=None, graph=0, label=None, class_names=None,
                        method=None, cmap="viridis", aspect="equal", ax=None, figsize=None, title=None):
    """Node marginals of a grid-shaped graph CRF / factor graph as an H × W image.

    Parameters
    ----------
    marginals : array-like, shape (N, K) or (H, W, K); or list of such; or model / structure / result
        Node (pseudo-)marginals P(y_n = k), rows in row-major grid order (node n = r · W + c, as
        :func:`structlearn.engine.structures.graphs.grid_graph`). Also accepted: a fitted
        :class:`~structlearn.GraphCRF` (or any model with ``predict_marginals``; ``X`` required), a
        :class:`~structlearn.engine.structures.FactorGraph` (its ``marginals(method)``), a ``Marginals`` /
        inference result (``unary``), or the list ``predict_marginals`` returns. A packed batch of B
        graphs of H·W nodes each is cut at ``graph``.
    shape : (int, int)
        (H, W), the grid.
    X : graph sample or list of samples, optional
        Input of ``predict_marginals``.
    graph : int, default 0
        Which graph of a list / packed batch to draw.
    label : int, optional
        Draw P(y = label) as a heatmap in [0, 1] (``cmap``, with a colour bar). Default: every node's
        colour is the marginal-weighted mix of the K class colours (confident nodes pure, uncertain
        ones blended), with a legend.
    class_names : sequence of str, optional
    method : str, optional
        Inference method for a FactorGraph (``"exact"``, ``"bp"``, ``"trw"``; default its own).
    cmap : str, default "viridis"
        Colour map of the ``label`` heatmap.
    aspect : {"equal", "auto"}, default "equal"
        Square cells, or cells stretched to fill the Axes (long thin grids such as 2 × T chains).
    ax : Axes, optional
        Default: a new figure of ``figsize`` (about 5 inches wide).
    title : str, optional

    {returns_ax}

    Raises
    ------
    ValueError
        If the marginals are not (N, K) with N = H·W (or a multiple of it), ``shape`` is not two
        positive ints, ``label`` / ``graph`` are out of range, or a model is given without ``X``.
    """
    try:
        H, W = (int(v) for v in shape)
    except (TypeError, ValueError):
        raise ValueError(f"`shape` must be (H, W), two positive ints; got {shape!r}") from None
    if H <= 0 or W <= 0:
        raise ValueError(f"`shape` must be (H, W), two positive ints; got {shape!r}")
    P, _ = _node_marginals(marginals, X, int(graph), method)
    if P.ndim == 3:
        P = P.reshape(-1, P.shape[-1])
    if P.ndim != 2 or P.shape[0] == 0 or P.shape[0] % (H * W):
        raise ValueError(f"`marginals` must have shape (N, K) with N = H·W = {H * W} (or a multiple for "
                         f"a packed batch); got {P.shape}")
    if P.shape[0] > H * W:
        B = P.shape[0] // (H * W)
        if not 0 <= graph < B:
            raise ValueError(f"`graph` must be in 0..{B - 1}; got {graph!r}")
        P = P[graph * H * W:(graph + 1) * H * W]
    if not np.all(np.isfinite(P)) or P.min() < -1e-9:
        raise ValueError("`marginals` must be finite probabilities (linear space)")
    K = P.shape[1]
    names = names_for(class_names, K, "class_names")
    if ax is None:
        w = 5.0 + (0.8 if label is not None else 1.5)
        _, (ax,) = new_axes(1, 1, figsize or (w, max(2.5, 5.0 * H / W)))
    if label is not None:
        if not 0 <= int(label) < K:
            raise ValueError(f"`label` must be in 0..{K - 1}; got {label!r}")
        im = ax.imshow(P[:, int(label)].reshape(H, W), cmap=cmap, vmin=0.0, vmax=1.0,
                       interpolation="nearest", aspect=aspect)
        ax.figure.colorbar(im, ax=ax, shrink=0.8, label=f"P(y = {names[int(label)]})")
    else:
        from matplotlib.patches import Patch

        colors = state_colors(K)[:, :3]
        mass = P.sum(axis=1, keepdims=True)
        img = (P / np.where(mass > 0, mass, 1.0)) @ colors
        ax.imshow(img.reshape(H, W, 3), interpolation="nearest", aspect=aspect)
        shown = np.flatnonzero(P.max(axis=0) > 0.05)[:20]
        ax.legend(handles=[Patch(color=colors[k], label=names[k]) for k in shown], fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax
