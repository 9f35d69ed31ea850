"""Plots over time: a segmentation over its signal with posterior bands (:func:`plot_segmentation`) and
the nested segments of a hierarchical HMM parse (:func:`plot_hierarchy`)."""
import numpy as np

from ._common import as_lengths, check_axes_count, int_labels, names_for, new_axes, returns_ax, runs, state_colors

__all__ = ["plot_segmentation", "plot_hierarchy"]


def _signal(X):
    X = np.asarray(X, dtype=np.float64) if X is not None else None
    if X is None or X.ndim not in (1, 2):
        raise ValueError(f"`X` must be an array of shape (N,) or (N, F) (the signal); got "
                         f"{None if X is None else X.shape}")
    return X[:, None] if X.ndim == 1 else X


def _n_states(states, proba, model, state_names):
    cands = [1]
    if states is not None and states.size:
        cands.append(int(states.max()) + 1)
    if proba is not None:
        cands.append(proba.shape[1])
    if model is not None and isinstance(getattr(model, "n_states", None), (int, np.integer)):
        cands.append(int(model.n_states))
    if state_names is not None:
        cands.append(len(state_names))
    return max(cands)


def _spans(ax, seg_runs, colors, alpha):
    """One broken_barh per state: the runs of that state as full-height vertical spans."""
    for k in np.unique(seg_runs[:, 2]) if seg_runs.size else []:
        if k < 0:
            continue
        r = seg_runs[seg_runs[:, 2] == k]
        xr = [(float(s) - 0.5, float(e - s + 1)) for s, e, _ in r]
        ax.broken_barh(xr, (0.0, 1.0), transform=ax.get_xaxis_transform(), facecolors=colors[k],
                       alpha=alpha, linewidth=0)


def plot_segmentation(X, states=None, proba=None, *, lengths=None, model=None, sequences=None,
                      state_names=None, feature_names=None, sequence_names=None, alpha=0.25, axes=None,
                      figsize=None, title=None):
    """A signal with its segmentation as coloured spans and the state posteriors as stacked bands.

    Parameters
    ----------
    X : array-like of float, shape (N, F) or (N,)
        The observations (rows of all sequences, packed); each feature is drawn as a line (NaN: a gap).
    states : array-like of int, shape (N,), optional
        State index per row (decoded or true labels); a negative value draws no span. Default: when
        ``model`` is given, ``model.predict(X, lengths)``; else no spans.
    proba : array-like of float, shape (N, K), optional
        Posterior P(state k at row t | data) (linear space, rows summing to <= 1), drawn as stacked
        bands under each signal panel. Default: ``model.predict_proba(X, lengths)`` when ``model`` is
        given and has it (pass ``proba=False`` to draw no bands).
    lengths : array-like of int, shape (B,), optional
        Lengths of the sequences packed in ``X`` (default: one sequence).
    model : fitted estimator, optional
        Any model with ``predict`` (and ``predict_proba``): the HMMs, HSMMs, the general HSMM family.
    sequences : sequence of int, optional
        Which sequences to draw (default all), one panel (pair) each.
    state_names : sequence of str, optional
        Legend names of the K states (default ``"0"``, ``"1"``, ...).
    feature_names : sequence of str, optional
        Legend names of the F features.
    sequence_names : sequence of str, optional
        Y-axis labels of the B sequences (default ``"sequence b"``; ``"signal"`` for one sequence).
    alpha : float, default 0.25
        Opacity of the spans.
    axes : Axes or sequence of Axes, optional
        Where to draw: ``len(sequences) * (2 if bands else 1)`` Axes, in the order signal, bands for
        each sequence. Default: a new figure of ``figsize`` inches (default width 10, 2.2 (+1.2 with
        bands) per sequence).
    title : str, optional
        Title of the first panel.

    Returns
    -------
    axes : ndarray of Axes, shape (n_panels,)
        Signal panel (and bands panel) of every drawn sequence, in order.

    Raises
    ------
    ValueError
        If ``X``, ``states``, ``proba``, ``lengths``, ``sequences``, ``state_names`` or ``axes`` do not
        fit together (each message names the argument).

    Notes
    -----
    Time and memory O(N·(F + K)) plus one span per run of equal states; the x axis is the row index
    within each sequence.
    """
    X = _signal(X)
    N, F = X.shape
    lengths = as_lengths(lengths, N)
    if model is not None:
        if states is None:
            if not hasattr(model, "predict"):
                raise ValueError(f"`model` must be a fitted estimator with predict(); got "
                                 f"{type(model).__name__}")
            states = model.predict(X, lengths)
        if proba is None and hasattr(model, "predict_proba"):
            proba = model.predict_proba(X, lengths)
    if proba is False:
        proba = None
    if states is not None:
        states = int_labels(states, N)
    if proba is not None:
        proba = np.asarray(proba, dtype=np.float64)
        if proba.ndim != 2 or proba.shape[0] != N:
            raise ValueError(f"`proba` must have shape (N, K) = ({N}, K) (one row per row of X); got "
                             f"{proba.shape}")
        if not np.all(np.isfinite(proba)) or proba.min(initial=0.0) < -1e-9:
            raise ValueError("`proba` must hold finite probabilities >= 0 (linear space, not log)")
    K = _n_states(states, proba, model, state_names)
    names = names_for(state_names, K)
    fnames = names_for(feature_names, F, "feature_names") if feature_names is not None else None
    B = lengths.size
    snames = names_for(sequence_names, B, "sequence_names") if sequence_names is not None else None
    seqs = list(range(B)) if sequences is None else [int(b) for b in np.atleast_1d(sequences)]
    if not seqs or any(b < 0 or b >= B for b in seqs):
        raise ValueError(f"`sequences` must be indices in 0..{B - 1}; got {sequences!r}")
    per = 2 if proba is not None else 1
    n_panels = per * len(seqs)
    if axes is None:
        ratios = ([2.0, 1.0] if per == 2 else [1.0]) * len(seqs)
        size = figsize or (10.0, (2.2 + (1.2 if per == 2 else 0.0)) * len(seqs))
        _, axes = new_axes(n_panels, 1, size, gridspec_kw={"height_ratios": ratios})
    else:
        axes = check_axes_count(axes, n_panels)
    from matplotlib.patches import Patch

    colors = state_colors(K)
    offsets = np.r_[0, np.cumsum(lengths)]
    for i, b in enumerate(seqs):
        o, T = int(offsets[b]), int(lengths[b])
        ax = axes[per * i]
        t = np.arange(T)
        style = {"marker": ".", "markersize": 3} if T <= 400 else {}
        for f in range(F):
            ax.plot(t, X[o:o + T, f], lw=0.8, color="k" if F == 1 else None,
                    label=fnames[f] if fnames else None, **style)
        if states is not None:
            _spans(ax, runs(states[o:o + T]), colors, alpha)
        ax.set_xlim(-0.5, max(T - 0.5, 0.5))
        ax.set_ylabel(snames[b] if snames else ("signal" if B == 1 else f"sequence {b}"))
        if per == 2:
            pax = axes[per * i + 1]
            P = proba[o:o + T]
            pax.stackplot(t, P.T, colors=colors[:P.shape[1]], alpha=0.85, linewidth=0, step="mid")
            pax.set_xlim(ax.get_xlim())
            pax.set_ylim(0.0, 1.0)
            pax.set_ylabel("P(state)")
        axes[per * i + per - 1].set_xlabel("t")
    used = set(range(proba.shape[1])) if proba is not None else set()
    if states is not None:
        used |= set(np.unique(states[states >= 0]).tolist())
    handles = [Patch(color=colors[k], alpha=0.6, label=names[k]) for k in sorted(used)]
    if fnames:
        handles = axes[0].get_legend_handles_labels()[0] + handles
    if handles:  # above the first panel (outside the data); the title then goes to the figure
        axes[0].legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.01), fontsize=8,
                       ncol=min(len(handles), 8), frameon=False, borderaxespad=0.0)
    if title:
        if handles:
            axes[0].figure.suptitle(title)
        else:
            axes[0].set_title(title)
    return np.asarray(axes, dtype=object)


def _hierarchy_segments(decoded, X, lengths, sequence):
    """Levels (list over levels of (start, stop, name) lists, stop exclusive) of one sequence."""
    if hasattr(decoded, "decode") and hasattr(decoded, "hierarchy_"):
        if X is None:
            raise ValueError("`X` is needed to decode with a fitted HierarchicalHMM")
        decoded = decoded.decode(X, lengths)
    if hasattr(decoded, "segments"):
        segs = decoded.segments
        if not 0 <= sequence < len(segs):
            raise ValueError(f"`sequence` must be in 0..{len(segs) - 1}; got {sequence!r}")
        return segs[sequence]
    if isinstance(decoded, (list, tuple)) and all(isinstance(lv, (list, tuple)) for lv in decoded):
        for lv in decoded:
            for seg in lv:
                if len(seg) != 3:
                    raise ValueError("`decoded` levels must hold (start, stop, name) triples; got "
                                     f"{seg!r}")
        return decoded
    raise ValueError(f"`decoded` must be a HierarchicalHMM decode result (HHMMDecoded), a fitted "
                     f"HierarchicalHMM (with X) or a list over levels of (start, stop, name) segments; "
                     f"got {type(decoded).__name__}")


def _merge_repeats(segs):
    out = []
    for start, stop, name in segs:
        if out and out[-1][1] == start and out[-1][2] == name:
            out[-1] = (out[-1][0], stop, name)
        else:
            out.append((start, stop, name))
    return out


@returns_ax
def plot_hierarchy(decoded, X=None, *, lengths=None, sequence=0, level_names=None, symbols=None,
                   name_format=None, merge_repeats=False, fontsize=7, ax=None, figsize=None, title=None):
    """The nested segments of a hierarchical HMM parse, one row of coloured boxes per level.

    Parameters
    ----------
    decoded : HHMMDecoded, HierarchicalHMM or list of lists
        :meth:`HierarchicalHMM.decode` output (``segments``: per sequence, per level, (start, stop,
        node name) with stop exclusive), a fitted :class:`~structlearn.HierarchicalHMM` (then ``X`` is
        decoded), or the levels of one sequence as such lists (e.g. true nested labels).
    X : array-like, shape (N, F), optional
        Observations to decode when ``decoded`` is a model.
    lengths : array-like of int, shape (B,), optional
        Sequence lengths of ``X``.
    sequence : int, default 0
        Which sequence of the decode result to draw.
    level_names : sequence of str, optional
        Row names, top level first (default ``"level 1"``, ...).
    symbols : sequence of str, shape (T,), optional
        One label per time step, shown as x tick labels when T <= 80 (e.g. the observed symbols).
    name_format : callable str -> str, optional
        Text drawn in a box for a node name (default: the name itself); a text wider than its box is
        cut to fit (with "…") or left out.
    merge_repeats : bool, default False
        Draw adjacent segments of the same node on a level as one box (e.g. a production state that
        re-enters itself at every step).
    fontsize : float, default 7
    ax : Axes, optional
        Default: a new figure of ``figsize`` (default (10, 0.6 + 0.7 · levels) inches).
    title : str, optional

    {returns_ax}

    Raises
    ------
    ValueError
        For a ``decoded`` of another kind, a ``sequence`` out of range, or ``level_names`` /
        ``symbols`` of the wrong length.

    Notes
    -----
    One rectangle (and one text clipped to it) per segment: O(total number of segments).
    """
    levels = _hierarchy_segments(decoded, X, lengths, int(sequence))
    if merge_repeats:
        levels = [_merge_repeats(lv) for lv in levels]
    D = len(levels)
    if D == 0:
        raise ValueError("`decoded` has no levels to draw")
    T = max((int(s[1]) for lv in levels for s in lv), default=0)
    if level_names is not None and len(level_names) != D:
        raise ValueError(f"`level_names` must name the {D} levels; got {len(level_names)}")
    if symbols is not None and len(symbols) != T:
        raise ValueError(f"`symbols` must have one entry per time step ({T}); got {len(symbols)}")
    if ax is None:
        _, (ax,) = new_axes(1, 1, figsize or (10.0, 0.6 + 0.7 * D))
    from matplotlib.patches import Rectangle

    order = list(dict.fromkeys(str(s[2]) for lv in levels for s in lv))
    colors = dict(zip(order, state_colors(len(order))))
    fmt = name_format or (lambda s: s)
    fig = ax.figure
    # characters that fit in one step of the x axis (the axes spans about 85 % of the figure width)
    per_step = 0.85 * fig.get_figwidth() * ax.get_position().width * 72.0 / (0.62 * fontsize) / max(T, 1)
    for lvl, segs in enumerate(levels):
        y = D - 1 - lvl
        for start, stop, name in segs:
            ax.add_patch(Rectangle((start - 0.5, y - 0.4), stop - start, 0.8, facecolor=colors[str(name)],
                                   edgecolor="white", linewidth=0.8, alpha=0.85))
            text, room = fmt(str(name)), int((stop - start) * per_step)
            if len(text) > room:
                text = text[:room - 1] + "…" if room >= 4 else ""
            if text:
                ax.text(0.5 * (start + stop) - 0.5, y, text, ha="center", va="center", fontsize=fontsize)
    ax.set_xlim(-0.5, max(T - 0.5, 0.5))
    ax.set_ylim(-0.6, D - 0.4)
    ax.set_yticks(range(D))
    ax.set_yticklabels(list(level_names or [f"level {d + 1}" for d in range(D)])[::-1])
    if symbols is not None and T <= 80:
        ax.set_xticks(range(T))
        ax.set_xticklabels([str(s) for s in symbols], fontsize=7)
    else:
        ax.set_xlabel("t")
    if title:
        ax.set_title(title)
    return ax
