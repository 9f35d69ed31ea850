"""Duration laws: a fitted per-state duration pmf against the empirical segment lengths
(:func:`plot_durations`), and :func:`duration_pmf`, the per-state pmf of any model of the HMM / HSMM
families."""
import numpy as np

from ._common import as_lengths, check_axes_count, int_labels, names_for, new_axes, runs, state_colors

__all__ = ["plot_durations", "duration_pmf", "segment_lengths"]


def _stationary(P):
    """Stationary distribution of the row-stochastic matrix ``P`` (least squares with sum 1)."""
    n = P.shape[0]
    A = np.vstack([P.T - np.eye(n), np.ones((1, n))])
    b = np.r_[np.zeros(n), 1.0]
    pi = np.linalg.lstsq(A, b, rcond=None)[0]
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum() if pi.sum() > 0 else np.full(n, 1.0 / n)


def _normalise_columns(q):
    s = q.sum(axis=0, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s > 0, q / np.where(s > 0, s, 1.0), 0.0)


def duration_pmf(model, max_duration=None):
    r"""Per-state duration pmf p_j(d), d = 1..D, of a fitted model of the HMM / HSMM families.

    Parameters
    ----------
    model : fitted estimator
        - :class:`~structlearn.HiddenSemiMarkovModel` (and any model with ``duration_.pmf`` and
          ``max_duration_``): its duration law truncated at D (Yu 2010 §2.2);
        - :class:`~structlearn.VariableTransitionHMM` (``transmat_`` (D, M, M)): p_j(d) =
          Π_{τ<d} a_jj(τ) (1 − a_jj(d)) (Yu 2010 §3.2);
        - :class:`~structlearn.ResidentialTimeHMM` (``transmat_`` (M, M, D), a_i(j, d)) and
          :class:`~structlearn.GeneralHSMM` (``transmat_`` (M, D, M, D)): the law of a j-segment's
          duration mixed over the previous segment under the stationary segment chain,
          p_j(d) ∝ Σ_i π_i a_i(j, d) (resp. Σ_(i,d') π_(i,d') a_(i,d')(j, d));
        - an HMM (``transmat_`` (K, K) with self-transitions): the implicit geometric law
          p_j(d) = a_jj^(d−1) (1 − a_jj).
    max_duration : int, optional
        D for the laws that have none (HMMs; default 50) or to truncate an HSMM's law.

    Returns
    -------
    pmf : ndarray of float64, shape (D, K)
        Linear-space probabilities, column j the law of state j (sums to 1 up to the truncation at D).

    Raises
    ------
    ValueError
        If ``model`` is not fitted or not of these families (names ``model``).
    """
    dur = getattr(model, "duration_", None)
    tm = getattr(model, "transmat_", None)
    if dur is not None and hasattr(dur, "pmf"):
        D = int(max_duration or getattr(model, "max_duration_", 0) or 50)
        return np.asarray(dur.pmf(D), dtype=np.float64)
    if tm is None:
        raise ValueError(f"`model` must be a fitted HMM / HSMM (with duration_ or transmat_); got "
                         f"{type(model).__name__} without them (is it fitted?)")
    tm = np.asarray(tm, dtype=np.float64)
    sp = np.asarray(getattr(model, "startprob_", np.zeros(0)), dtype=np.float64)
    if tm.ndim == 2:  # HMM: geometric durations from the self-transitions
        D = int(max_duration or 50)
        stay = np.clip(np.diag(tm), 0.0, 1.0)
        d = np.arange(1, D + 1)[:, None]
        return stay[None, :] ** (d - 1) * (1.0 - stay[None, :])
    if tm.ndim == 3 and sp.ndim == 1:  # variable transition: (D, M, M), self-transition a_jj(tau)
        D, M = tm.shape[0], tm.shape[1]
        stay = np.clip(tm[:, np.arange(M), np.arange(M)], 0.0, 1.0)  # (D, M)
        surv = np.vstack([np.ones((1, M)), np.cumprod(stay, axis=0)[:-1]])
        return surv * (1.0 - stay)
    if tm.ndim == 3:  # residential time: a_i(j, d), (M, M, D)
        M = tm.shape[0]
        pi = _stationary(tm.sum(axis=2))
        return _normalise_columns(np.einsum("i,ijd->dj", pi, tm))
    if tm.ndim == 4:  # general: a_(i,d')(j,d), (M, D, M, D)
        M, D = tm.shape[0], tm.shape[1]
        pi = _stationary(tm.reshape(M * D, M * D)).reshape(M, D)
        return _normalise_columns(np.einsum("ie,iejd->dj", pi, tm))
    raise ValueError(f"`model` has a transmat_ of shape {tm.shape}: no per-state duration law known")


def segment_lengths(states, lengths=None, include_censored=False):
    """Lengths of the runs of equal states, per state.

    Parameters
    ----------
    states : array-like of int, shape (N,)
        State per row (negative: unknown, its runs are skipped).
    lengths : array-like of int, shape (B,), optional
        Sequence lengths (runs never cross a sequence boundary).
    include_censored : bool, default False
        Also count the first and last run of every sequence (cut by the observation window: their
        true durations are at least the observed ones).

    Returns
    -------
    dict int -> ndarray of int64
        For every state seen, the lengths of its runs.
    """
    states = np.asarray(states)
    n = states.shape[0] if states.ndim == 1 else -1
    states = int_labels(states, max(n, 0))
    lengths = as_lengths(lengths, states.size)
    out = {}
    o = 0
    for T in lengths:
        r = runs(states[o:o + T])
        if not include_censored and r.shape[0]:
            keep = (r[:, 0] > 0) & (r[:, 1] < T - 1)
            r = r[keep]
        for s, e, k in r:
            if k >= 0:
                out.setdefault(int(k), []).append(int(e - s + 1))
        o += T
    return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def plot_durations(model=None, states=None, *, X=None, lengths=None, pmf=None, max_duration=None,
                   state_names=None, include_censored=False, scale=1.0, unit="steps", n_cols=3,
                   axes=None, figsize=None, title=None):
    """Fitted duration pmf of every state over the histogram of the observed segment lengths.

    Parameters
    ----------
    model : fitted estimator, optional
        Source of the fitted laws (see :func:`duration_pmf`): HiddenSemiMarkovModel, the general HSMM
        family, HMMs (geometric laws).
    states : array-like of int, shape (N,), optional
        A segmentation (decoded or true labels) whose runs give the empirical histogram. Default:
        ``model.predict(X, lengths)`` when ``X`` is given, else no histogram.
    X : array-like, shape (N, F), optional
        Observations to decode with ``model``.
    lengths : array-like of int, shape (B,), optional
        Sequence lengths of ``states`` / ``X``.
    pmf : array-like of float, shape (D, K), optional
        The laws to draw instead of the model's (linear space, column j state j, row d−1 duration d).
    max_duration : int, optional
        D for :func:`duration_pmf` (HMMs).
    state_names : sequence of str, optional
    include_censored : bool, default False
        Count the first and last segment of each sequence in the histogram (see :func:`segment_lengths`).
    scale : float, default 1.0
        Length of one step in ``unit`` (e.g. ``scale=1/12, unit="days"`` for 2-hour steps): durations are
        drawn as d · scale and densities divided by ``scale``.
    unit : str, default "steps"
        Unit of the x axis.
    n_cols : int, default 3
        Panels per row.
    axes : sequence of Axes, optional
        K Axes (one per state). Default: a new figure, 3.2 × 2.4 inches per panel (``figsize``).
    title : str, optional
        Figure title (``suptitle``) when the figure is created here.

    Returns
    -------
    axes : ndarray of Axes, shape (K,)

    Raises
    ------
    ValueError
        If neither ``model`` nor ``pmf`` is given, or ``pmf``, ``states``, ``lengths``, ``scale``,
        ``state_names`` or ``axes`` are malformed (each message names the argument).

    Notes
    -----
    The histogram is a density on bins of w = max(1, ⌈d_max / 40⌉) steps (counts / (n · w)), so it
    compares with the pmf directly. Each panel spans durations up to the larger of the longest
    segment seen and the pmf's 99.5 % quantile. Time O(N + D·K).
    """
    if pmf is None:
        if model is None:
            raise ValueError("`model` or `pmf` must be given (the fitted duration laws)")
        pmf = duration_pmf(model, max_duration)
    pmf = np.asarray(pmf, dtype=np.float64)
    if pmf.ndim != 2 or not np.all(np.isfinite(pmf)) or pmf.min(initial=0.0) < 0:
        raise ValueError(f"`pmf` must be a finite non-negative (D, K) array (linear space); got shape "
                         f"{pmf.shape}")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"`scale` must be a positive number; got {scale!r}")
    D, K = pmf.shape
    if states is None and X is not None:
        if model is None or not hasattr(model, "predict"):
            raise ValueError("`X` needs a `model` with predict() to decode the segmentation")
        states = model.predict(X, lengths)
    emp = segment_lengths(states, lengths, include_censored) if states is not None else {}
    names = names_for(state_names, K)
    n_cols = max(1, min(int(n_cols), K))
    n_rows = -(-K // n_cols)
    if axes is None:
        fig, axes = new_axes(n_rows, n_cols, figsize or (3.2 * n_cols, 2.4 * n_rows))
        for ax in axes[K:]:
            ax.set_visible(False)
        if title:
            fig.suptitle(title)
    axes = check_axes_count(axes, K)
    colors = state_colors(K)
    d = np.arange(1, D + 1)
    for j in range(K):
        ax = axes[j]
        p = pmf[:, j]
        cdf = np.cumsum(p)
        hi_pmf = int(np.searchsorted(cdf, 0.995 * cdf[-1]) + 1) if cdf[-1] > 0 else 1
        obs = emp.get(j, np.zeros(0, dtype=np.int64))
        hi = max(hi_pmf, int(obs.max()) if obs.size else 1, 2)
        w = max(1, -(-hi // 40))
        if obs.size:
            edges = np.arange(0.5, hi + w + 0.5, w)
            counts, _ = np.histogram(obs, bins=edges)
            ax.bar((edges[:-1] + w / 2.0) * scale, counts / (obs.size * w) / scale, width=w * scale,
                   color=colors[j], alpha=0.45, edgecolor="none",
                   label=f"observed (n={obs.size}, mean {obs.mean() * scale:.3g})")
        m = min(hi, D)
        mean = float((d * p).sum() / p.sum()) if p.sum() > 0 else float("nan")
        ax.plot(d[:m] * scale, p[:m] / scale, color=colors[j], lw=1.5,
                marker="o" if m <= 40 else None, markersize=3, label=f"fitted (mean {mean * scale:.3g})")
        ax.set_xlim(0, (hi + w) * scale)
        ax.set_ylim(bottom=0)
        ax.set_title(names[j], fontsize=9)
        ax.set_xlabel(f"duration ({unit})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper right")
    return np.asarray(axes, dtype=object)
