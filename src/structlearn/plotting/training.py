"""Plots of learning: the objective per iteration (:func:`plot_training`) and the largest state-feature
weights of a linear-chain CRF per label (:func:`plot_crf_weights`)."""
import numpy as np

from ._common import new_axes, pyplot, returns_ax

__all__ = ["plot_training", "plot_crf_weights"]


def _curve(obj, key, name="estimator"):
    """(x, y, y label, dev accuracy or None) of one fitted estimator or log."""
    log = getattr(obj, "training_log_", None)
    if log is None and isinstance(obj, (list, tuple)) and obj and all(isinstance(e, dict) for e in obj):
        log = obj
    if log is not None and len(log):
        k = key or "loss"
        if any(k not in e for e in log):
            raise ValueError(f"`key` {k!r} is not in every entry of the training log (keys: "
                             f"{sorted(log[0])})")
        x = np.array([e.get("iteration", i + 1) for i, e in enumerate(log)], dtype=np.float64)
        y = np.array([e[k] for e in log], dtype=np.float64)
        dev = (np.array([e["dev_accuracy"] for e in log], dtype=np.float64)
               if all("dev_accuracy" in e for e in log) else None)
        return x, y, "objective (loss)" if k == "loss" else k, dev
    history = None
    mon = getattr(obj, "monitor_", None)
    if mon is not None and hasattr(mon, "history"):
        history = mon.history
    elif getattr(obj, "monitor_history_", None) is not None:  # HierarchicalHMM
        history = obj.monitor_history_
    elif getattr(obj, "bound_", None) is not None:  # AdaBoostMRF: the bound per round
        y = np.asarray(obj.bound_, dtype=np.float64)
        return np.arange(1, y.size + 1, dtype=np.float64), y, "bound log L_H", None
    if history is not None:
        y = np.asarray(history, dtype=np.float64)
        return np.arange(y.size, dtype=np.float64), y, "log-likelihood", None
    if not isinstance(obj, (dict, str)) and np.ndim(obj) == 1 and len(obj):
        y = np.asarray(obj, dtype=np.float64)
        return np.arange(1, y.size + 1, dtype=np.float64), y, key or "objective", None
    raise ValueError(f"`{name}` must be a fitted estimator with training_log_ (CRFs), monitor_ (EM "
                     f"models) or monitor_history_ (HierarchicalHMM), a list of log entries or a 1-d "
                     f"sequence of values; got {type(obj).__name__}"
                     + (" with an empty log" if log is not None else ""))


@returns_ax
def plot_training(estimator, *, key=None, logy=None, ax=None, figsize=None, title=None, show_dev=True):
    """Objective or log-likelihood per iteration of one or several fitted estimators.

    Parameters
    ----------
    estimator : fitted estimator, log, sequence, or dict of them
        - CRFs (LinearChainCRF, SemiMarkovCRF, HigherOrderCRF, TreeCRF, GraphCRF): ``training_log_``, one
          dict per optimiser iteration / epoch; ``key`` (default ``"loss"``, the regularised negative
          conditional log-likelihood for L-BFGS) is drawn against ``"iteration"``;
        - EM models (HMMs, HiddenSemiMarkovModel, the general HSMM family): ``monitor_.history``, the
          log-likelihood of every E-step (entry 0: the initial parameters);
        - HierarchicalHMM: ``monitor_history_``; AdaBoostMRF: ``bound_`` per round;
        - a list of log dicts or a 1-d sequence of numbers;
        - a dict ``{name: any of these}``: one curve each, with a legend.
    key : str, optional
        Log field to draw (``"loss"``, ``"gradient_norm"``, ``"active_features"``, ...).
    logy : bool, optional
        Logarithmic y axis; default when every value is positive and they span over 50×.
    ax : Axes, optional
        Default: a new figure of ``figsize`` (default (6, 3.5) inches).
    title : str, optional
    show_dev : bool, default True
        When the log holds ``dev_accuracy`` (``fit(..., X_dev, y_dev)``), draw it on a second y axis.

    {returns_ax}

    Raises
    ------
    ValueError
        If an estimator has no training history (not fitted, or not an iterative learner) or ``key``
        is not in its log; names the argument.
    """
    items = estimator.items() if isinstance(estimator, dict) else [(None, estimator)]
    curves = [(name, _curve(obj, key, "estimator" if name is None else f"estimator[{name!r}]"))
              for name, obj in items]
    if not curves:
        raise ValueError("`estimator` is an empty dict: nothing to draw")
    if ax is None:
        _, (ax,) = new_axes(1, 1, figsize or (6.0, 3.5))
    ys = np.concatenate([c[1] for _, c in curves])
    finite = ys[np.isfinite(ys)]
    if logy is None:
        logy = bool(finite.size and finite.min() > 0 and finite.max() / finite.min() > 50)
    for name, (x, y, ylabel, _) in curves:
        ax.plot(x, y, marker="." if y.size <= 60 else None, lw=1.2, label=name)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration")
    ax.set_ylabel(curves[0][1][2])
    if logy:
        ax.set_yscale("log")
    if any(name is not None for name, _ in curves):
        ax.legend(fontsize=8)
    devs = [(name, c[0], c[3]) for name, c in curves if c[3] is not None]
    if show_dev and devs:
        ax2 = ax.twinx()
        for name, x, dev in devs:
            ax2.plot(x, dev, ls="--", lw=1.0, color="tab:green", alpha=0.8)
        ax2.set_ylabel("dev accuracy (dashed)", color="tab:green")
    if title:
        ax.set_title(title)
    return ax


def _short(s, n):
    return s if len(s) <= n else s[:n - 1] + "…"


@returns_ax
def plot_crf_weights(crf, *, top=10, negative=0, labels=None, width=24, ax=None, figsize=None,
                     title=None, cmap="RdYlGn"):
    """The largest state-feature weights of every label of a linear-chain CRF, as a table figure.

    One column per label, its ``top`` largest (attribute, label) weights from the top down, then its
    ``negative`` most negative ones; cells are coloured by weight (eli5's ``show_weights`` table for
    sklearn-crfsuite, drawn with matplotlib).

    Parameters
    ----------
    crf : fitted LinearChainCRF
        Or any model with ``state_features_`` (dict (attribute, label) -> weight) and ``classes_``.
    top : int, default 10
        Positive features per label.
    negative : int, default 0
        Most negative features per label, below the positive ones.
    labels : sequence of str, optional
        Labels (columns) to show, in order (default all of ``classes_``).
    width : int, default 24
        Characters of an attribute name kept (longer ones end in "…").
    ax : Axes, optional
        Default: a new figure of ``figsize`` (default 2.2 inches per label by 0.6 + 0.26 per row).
    title : str, optional
    cmap : str, default "RdYlGn"
        Diverging colour map, centred at 0.

    {returns_ax}

    Raises
    ------
    ValueError
        If ``crf`` has no state features (not fitted or another model), ``top`` / ``negative`` are
        negative or both zero, or a label of ``labels`` is not in ``classes_``.

    Notes
    -----
    Time O(F log F) for F state features (one sort per label).
    """
    feats = getattr(crf, "state_features_", None)
    classes = getattr(crf, "classes_", None)
    if not isinstance(feats, dict) or classes is None:
        raise ValueError(f"`crf` must be a fitted linear-chain CRF (state_features_ and classes_); got "
                         f"{type(crf).__name__}")
    top, negative = int(top), int(negative)
    if top < 0 or negative < 0 or top + negative == 0:
        raise ValueError(f"`top` and `negative` must be >= 0 and not both 0; got {top}, {negative}")
    names = [str(c) for c in classes]
    show = names if labels is None else [str(lab) for lab in labels]
    bad = [lab for lab in show if lab not in names]
    if bad or not show:
        raise ValueError(f"`labels` must be labels of the model ({names[:10]}...); unknown: {bad}")
    per = {lab: [] for lab in show}
    for (attr, lab), w in feats.items():
        if str(lab) in per:
            per[str(lab)].append((float(w), str(attr)))
    n_rows = top + negative + (1 if top and negative else 0)
    L = len(show)
    vals = np.full((n_rows, L), np.nan)
    texts = [["" for _ in range(L)] for _ in range(n_rows)]
    for c, lab in enumerate(show):
        ranked = sorted(per[lab], key=lambda t: -t[0])
        pos = [t for t in ranked if t[0] > 0][:top]
        neg = [t for t in ranked[::-1] if t[0] < 0 and t not in pos][:negative]
        rows = list(range(len(pos))) + [top + (1 if top else 0) + i for i in range(len(neg))]
        for r, (w, attr) in zip(rows, pos + neg):
            vals[r, c] = w
            texts[r][c] = f"{w:+.3f}  {_short(attr, width)}"
        if top and negative:
            texts[top][c] = "…"
    if ax is None:
        _, (ax,) = new_axes(1, 1, figsize or (max(4.0, 2.2 * L), 0.6 + 0.26 * n_rows))
    finite = vals[np.isfinite(vals)]
    vmax = float(np.abs(finite).max()) if finite.size else 1.0
    plt = pyplot()
    cm = plt.get_cmap(cmap).with_extremes(bad="white")
    ax.imshow(np.ma.masked_invalid(vals), cmap=cm, vmin=-vmax, vmax=vmax, aspect="auto",
              interpolation="nearest")
    for r in range(n_rows):
        for c in range(L):
            if texts[r][c]:
                ax.text(c - 0.45, r, texts[r][c], ha="left", va="center", fontsize=7, family="monospace",
                        clip_on=True)
    ax.set_xticks(range(L))
    ax.set_xticklabels(show, fontsize=8, fontweight="bold")
    ax.xaxis.tick_top()
    ax.set_yticks([])
    for c in range(1, L):
        ax.axvline(c - 0.5, color="white", lw=2)
    if title:
        ax.set_title(title, fontsize=9)
    return ax
