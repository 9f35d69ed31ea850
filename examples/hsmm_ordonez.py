"""Activity recognition in two homes (Ordóñez et al. 2013): HSMM family vs HMM, leave-one-day-out.

Explicit-duration HSMMs (negative-binomial and non-parametric durations), the residential-time,
variable-transition and general HSMMs, and the HMM, all estimated from the labels.

Data: ``ordonez_adl`` in ``../shared/data`` (homes A: 14 days, 12 sensors, 9 activities; B: 21 days,
12 sensors, 10 activities; see its SOURCE.md), loaded by :func:`structlearn.datasets.load_ordonez`.

Set-up (van Kasteren et al., UbiComp 2008; Ordóñez et al., Sensors 13 (2013) 5460):

- Time is cut into 60-second slices (the slice of both papers; the annotations are to the second and
  the short activities — toileting, grooming, snacks — last 1–2 minutes, so a coarser slice merges
  them with their neighbours). A slice is labelled with the activity whose annotation overlaps it,
  "Idle" where there is none; each day (midnight to midnight) is one sequence, so a segment may be cut
  by the day boundary: the models use ``censoring="both"`` ("right" for the variable-transition HMM,
  which has no left-censored form).
- One categorical observation per slice: the set of sensors that are on during the slice (van
  Kasteren's "raw" representation) when any is, else the sensor that fired last ("last"), each
  distinct value one symbol (47 / 66 symbols in A / B; the alphabet is read from all days, the
  probabilities only from the training days).
- Supervised estimation: ``fit(X, lengths, labels=y)`` with every slice labelled (one M-step; EM
  completes the censored first/last segments), then additive smoothing of what 13 or 20 training days
  leave at zero: emissions add-½, start and transition probabilities one pseudo-count spread
  uniformly, non-parametric duration tables smoothed by a Gaussian kernel in log-duration (bandwidth
  0.3). The richer models (residential-time a_i(j, d), variable-transition a_ij(τ), general
  a_(i,d')(j,d)) have far more parameters than segments; each row is shrunk towards the smoothed
  explicit-duration HSMM (negative-binomial durations) fitted on the same days, with weight
  c / (n + c), n the number of training segments behind the row and c = 5.
- Decoding: Viterbi on the held-out day. Scores: time-slice accuracy and class-averaged accuracy
  (mean per-class recall), pooled over the held-out days, always on the 60-second ground truth.

Cost: the explicit-duration HSMM costs O(T·(D·K + K²)) per sequence and runs at 60-second slices
with D = 10.4 h = 626 slices (A; 608 in B); the general HSMM costs O(T·(K·D)²) — at 60 s ~10¹²
operations per EM step (hours) — so it and, for a like-for-like comparison, the others run on coarse
slices (default 15 min: D = 43, K·D ≈ 430–460) as well, their predictions spread back over the
60-second slices for scoring. (At 60 s the residential-time HMM scores the 14 days of A in 5 s, but its
supervised fit fails there: see the report of issue 13; ``--fine-models rt`` tries it.) EM of the
richer models starts from the explicit-duration HSMM written in their parameters (:func:`as_richer`).

Run::

    .venv/bin/python examples/hsmm_ordonez.py [--home A B] [--coarse-slice 900] [--data-home DIR] [--quick]
                                              [--figures DIR]

``--figures DIR`` also saves PNGs made with :mod:`structlearn.plotting` into DIR (created if missing;
nothing is written without the flag), per home, for the negative-binomial HSMM at 60 s fitted on all
days but the first: ``ordonez_<home>_segmentation.png`` (the first day's true activity as a line, the
Viterbi segments as coloured spans), ``ordonez_<home>_durations.png`` (fitted duration laws over the
lengths of the labelled training segments) and ``ordonez_<home>_transitions.png``.

Result (structlearn 0.1.0; leave-one-day-out; time-slice / class accuracy on the 60-s slices; ~9 min
for home A and ~12 min for B on a shared 2-core machine)::

    model                       slice     A: acc  class     B: acc  class
    HSMM (negative binomial)      60 s     0.962  0.790      0.872  0.683
    HSMM (non-parametric)         60 s     0.962  0.791      0.873  0.701
    HMM (geometric)               60 s     0.961  0.789      0.871  0.684
    HSMM (negative binomial)     900 s     0.923  0.521      0.845  0.470
    HMM (geometric)              900 s     0.921  0.505      0.843  0.473
    residential-time HMM         900 s     0.919  0.515      0.828  0.418
    variable-transition HMM      900 s     0.918  0.505      0.835  0.437
    general HSMM                 900 s     0.917  0.511      0.821  0.409

Explicit durations barely change the 60-s results: the "raw/last" observation of a long activity
(hours of "Bed" or "Seat" pressure) is evidence the duration law cannot outweigh, and the errors are
short activities confused by their sensors (Idle, Snack, Lunch/Dinner in B). On 15-minute slices
every model loses the 1–2-minute activities (toileting, grooming, showering), and the richer duration
dependence of the residential-time, variable-transition and general models does not pay for its
parameters on 13–20 training days.
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from structlearn import GeneralHSMM, HiddenSemiMarkovModel, ResidentialTimeHMM, VariableTransitionHMM
from structlearn.datasets import load_ordonez
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em

FINE = 60
#: (name, estimator kind, duration family); "fine" models run at 60 s, all of them on the coarse slice
MODELS = {
    "HSMM (negative binomial)": ("hsmm", "negative_binomial"),
    "HSMM (non-parametric)": ("hsmm", "nonparametric"),
    "HMM (geometric)": ("hsmm", "geometric"),
    "residential-time HMM": ("rt", None),
    "variable-transition HMM": ("vt", None),
    "general HSMM": ("general", None),
}
#: command-line keys of the models
KEYS = {"nb": "HSMM (negative binomial)", "np": "HSMM (non-parametric)", "hmm": "HMM (geometric)",
        "rt": "residential-time HMM", "vt": "variable-transition HMM", "general": "general HSMM"}
FINE_MODELS = ["HSMM (negative binomial)", "HSMM (non-parametric)", "HMM (geometric)"]
COARSE_MODELS = ["HSMM (negative binomial)", "HMM (geometric)", "residential-time HMM",
                 "variable-transition HMM", "general HSMM"]
SHRINK = 5.0  # pseudo-segments of the backoff to the explicit-duration HSMM


# --------------------------------------------------------------------------------------------------
# observations
# --------------------------------------------------------------------------------------------------
def symbols(data):
    """One symbol per slice: the set of sensors on during the slice, else ("last", the last fired)."""
    keys = [tuple(np.flatnonzero(on)) if on.any() else ("last", int(last))
            for on, last in zip(data.active, data.last)]
    vocab = {k: i for i, k in enumerate(sorted(set(keys), key=str))}
    return np.array([vocab[k] for k in keys], dtype=np.float64)[:, None], len(vocab)


def runs(y, lengths):
    """(start, end, state, sequence) rows of the label runs (end inclusive, packed indices)."""
    out = []
    o = 0
    for b, n in enumerate(lengths):
        lab = y[o:o + n]
        st = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        en = np.r_[st[1:] - 1, n - 1]
        out.append(np.column_stack([st + o, en + o, lab[st], np.full(st.size, b)]))
        o += n
    return np.concatenate(out)


# --------------------------------------------------------------------------------------------------
# smoothing
# --------------------------------------------------------------------------------------------------
def _mix(value, base, n, c=SHRINK):
    """(n·value + c·base) / (n + c), ``n`` broadcast over the row axes."""
    lam = c / (n + c)
    return (1 - lam) * value + lam * base


def smooth_emission(model, X, y, alpha=0.5):
    K, V = model.n_states, model.emission_.n_features
    n = np.bincount(y[~np.isnan(X[:, 0])], minlength=K).astype(float)[:, None]
    model.emission_.probs = (model.emission_.probs * n + alpha) / (n + alpha * V)


def smooth_log_kernel(pmf, bandwidth=0.3):
    """(D, K) duration pmfs smoothed by a Gaussian kernel in log d (mass-preserving, no zeros)."""
    D = pmf.shape[0]
    logd = np.log(np.arange(1, D + 1, dtype=np.float64))
    w = np.exp(-0.5 * ((logd[:, None] - logd[None, :]) / bandwidth) ** 2) / np.exp(logd)[:, None]
    w /= w.sum(axis=0, keepdims=True)  # column d': the kernel around d'
    out = w @ pmf + 1e-12
    return out / out.sum(axis=0, keepdims=True)


def smooth_explicit(model, X, lengths, y):
    """Add-one-style smoothing of the explicit-duration HSMM / HMM fitted from labels."""
    K = model.n_states
    r = runs(y, lengths)
    first = r[np.r_[True, r[1:, 3] != r[:-1, 3]], 2]
    n_first = float(first.size)
    model.startprob_ = _mix(model.startprob_, np.full(K, 1.0 / K), n_first, c=1.0)
    same = r[1:, 3] == r[:-1, 3]
    n_out = np.bincount(r[:-1, 2][same], minlength=K).astype(float)[:, None]
    uniform = (np.ones((K, K)) - np.eye(K)) / max(K - 1, 1)
    model.transmat_ = _mix(model.transmat_, uniform, n_out, c=1.0)
    smooth_emission(model, X, y)
    if isinstance(model.duration_, du.NonParametric):
        model.duration_.probs = smooth_log_kernel(model.duration_.pmf(model.max_duration_)).T.copy()
    return model


def _durations_of(r, K, D):
    """Counts (K, D) of run lengths (capped at D) and the at-risk counts n_(i, ≥τ) (K, D)."""
    counts = np.zeros((K, D))
    np.add.at(counts, (r[:, 2], np.minimum(r[:, 1] - r[:, 0], D - 1)), 1.0)
    at_risk = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1]
    return counts, at_risk


def as_richer(cls, base, D):
    """The explicit-duration HSMM ``base`` in the parameters of ``cls`` (residential-time,
    variable-transition or general): (startprob_, transmat_). A richer model equals its explicit-duration
    special case there (a_i(j, d) = a_ij p_j(d); a_jj(τ) = 1 - h_j(τ), h the hazard of p_j;
    a_(i,d')(j,d) = a_ij p_j(d)); the first segment's law π_(j,d) is π_j S_j(d) / μ_j (censoring
    "both": the residual life of a stationary process) and π_j for the variable-transition HMM."""
    K = base.n_states
    q = base.duration_.pmf(D)  # (D, K)
    a, pi = base.transmat_, base.startprob_
    surv = np.cumsum(q[::-1], axis=0)[::-1]
    if cls is VariableTransitionHMM:
        h = np.clip(np.divide(q, surv, out=np.ones_like(q), where=surv > 0), 0.0, 1.0)  # h_i(τ)
        h[-1] = 1.0
        tm = h[:, :, None] * a[None]
        tm[:, np.arange(K), np.arange(K)] = 1.0 - h
        return pi.copy(), tm
    first = pi[:, None] * (surv / surv.sum(axis=0)).T
    rt = a[:, :, None] * q.T[None, :, :]  # (i, j, d)
    if cls is ResidentialTimeHMM:
        return first, rt
    return first, np.broadcast_to(rt[:, None], (K, D, K, D)).copy()


def shrink_to_explicit(model, base, lengths, y):
    """Shrink a residential-time / variable-transition / general HSMM towards ``base`` (an explicit-
    duration HSMM fitted on the same days, :func:`as_richer`): each row mixed with the base's row,
    weight c / (n + c), n the training segments behind the row."""
    K, D = model.n_states, model.max_duration_
    start, trans = as_richer(type(model), base, D)
    r = runs(y, lengths)
    counts, at_risk = _durations_of(r, K, D)
    same = r[1:, 3] == r[:-1, 3]
    n_out = np.bincount(r[:-1, 2][same], minlength=K).astype(float)
    model.startprob_ = _mix(model.startprob_, start, float(len(lengths)))
    if isinstance(model, VariableTransitionHMM):
        model.transmat_ = _mix(model.transmat_, trans, at_risk.T[:, :, None])
    elif isinstance(model, ResidentialTimeHMM):
        model.transmat_ = _mix(model.transmat_, trans, n_out[:, None, None])
    else:  # general: rows (i, d') towards the shrunken residential-time row a_i(j, d)
        tm_rt = np.einsum("idjk->ijk", model.transmat_ * counts[:, :, None, None]) / \
            np.maximum(counts.sum(axis=1), 1e-300)[:, None, None]
        tm_rt = _mix(tm_rt, trans[:, 0], n_out[:, None, None])
        model.transmat_ = _mix(model.transmat_, tm_rt[:, None, :, :], counts[:, :, None, None])
    return model


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------
def fit_model(name, X, lengths, y, K, V, D, base=None):
    kind, family = MODELS[name]
    emission = em.Categorical(n_features=V)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if kind == "hsmm":
            md = None if family == "geometric" else D
            model = HiddenSemiMarkovModel(K, duration=family, emission=emission, max_duration=md,
                                          censoring="both", n_iter=20, tol=1e-3, random_state=0)
            model.fit(X, lengths, labels=y)
            return smooth_explicit(model, X, lengths, y)
        cls = {"rt": ResidentialTimeHMM, "vt": VariableTransitionHMM, "general": GeneralHSMM}[kind]
        model = cls(K, max_duration=D, emission=emission, censoring="right" if kind == "vt" else "both",
                    n_iter=20, tol=1e-3, init_params="e", random_state=0)
        # EM starts from the explicit-duration HSMM (as_richer) rather than from broad geometric laws
        model.startprob_, model.transmat_ = as_richer(cls, base, D)
        model.fit(X, lengths, labels=y)
    smooth_emission(model, X, y)
    return shrink_to_explicit(model, base, lengths, y)


def scores(y_true, y_pred, K):
    acc = float(np.mean(y_true == y_pred))
    recall = np.array([np.mean(y_pred[y_true == k] == k) if np.any(y_true == k) else np.nan
                       for k in range(K)])
    return acc, float(np.nanmean(recall)), recall


def leave_one_day_out(data, names, days=None):
    """Predictions of every model for every held-out day: dict name -> (N,) int64, and fit times."""
    X, V = symbols(data)
    y, lengths = data.labels, data.lengths
    K = len(data.activity_names)
    r = runs(y, lengths)
    D = int((r[:, 1] - r[:, 0]).max() + 1)
    D += max(2, D // 50)
    off = np.r_[0, np.cumsum(lengths)]
    pred = {n: np.full(y.size, -1, dtype=np.int64) for n in names}
    seconds = dict.fromkeys(names, 0.0)
    for d in (range(lengths.size) if days is None else days):
        test = np.zeros(y.size, dtype=bool)
        test[off[d]:off[d + 1]] = True
        tr_len = np.delete(lengths, d)
        base = None
        for n in sorted(names, key=lambda n: MODELS[n][0] != "hsmm"):  # explicit ones first (the base)
            t = time.perf_counter()
            if MODELS[n][0] != "hsmm" and base is None:
                base = fit_model("HSMM (negative binomial)", X[~test], tr_len, y[~test], K, V, D)
            model = fit_model(n, X[~test], tr_len, y[~test], K, V, D, base)
            if n == "HSMM (negative binomial)":
                base = model
            pred[n][test] = model.predict(X[test], [lengths[d]])
            seconds[n] += time.perf_counter() - t
    return pred, seconds, D


def to_fine(coarse, fine, pred):
    """Spread predictions on the coarse slices over the 60-s slices they contain (-1 outside)."""
    idx = np.searchsorted(coarse.slice_start, fine.slice_start, side="right") - 1
    return np.where(pred[idx] >= 0, pred[idx], -1)


def evaluate(home, coarse_slice=900, data_home=None, fine_models=FINE_MODELS,
             coarse_models=COARSE_MODELS, days=None):
    """Rows (model, slice (s), time-slice accuracy, class accuracy, per-class recall, seconds) scored on
    the 60-s ground truth of the held-out days."""
    fine = load_ordonez(home, FINE, data_home)
    K = len(fine.activity_names)
    rows = []
    pred, secs, D = leave_one_day_out(fine, fine_models, days)
    for n in fine_models:
        mask = pred[n] >= 0
        rows.append((n, FINE, D, *scores(fine.labels[mask], pred[n][mask], K), secs[n]))
    if coarse_models:
        coarse = load_ordonez(home, coarse_slice, data_home)
        pred, secs, Dc = leave_one_day_out(coarse, coarse_models, days)
        for n in coarse_models:
            p = to_fine(coarse, fine, pred[n])
            mask = p >= 0
            rows.append((n, coarse_slice, Dc, *scores(fine.labels[mask], p[mask], K), secs[n]))
    return fine, rows


def report(fine, rows):
    n_days = fine.lengths.size
    print(f"\n== home {fine.home}: {n_days} days, {len(fine.activity_names)} classes "
          f"({', '.join(fine.activity_names)}), {len(fine.sensor_names)} sensors ==")
    print(f"{'model':<26} {'slice':>6} {'D':>4} {'time-slice acc':>14} {'class acc':>9} {'time (s)':>8}")
    for name, sl, D, acc, cls, _, sec in rows:
        D = "-" if MODELS[name][1] == "geometric" else D  # the untruncated geometric law: the HMM
        print(f"{name:<26} {sl:>5}s {D:>4} {acc:14.3f} {cls:9.3f} {sec:8.1f}")
    print("per-class recall (" + ", ".join(fine.activity_names) + "):")
    for name, sl, _, _, _, rec, _ in rows:
        print(f"  {name:<26} {sl:>5}s  " + " ".join(f"{v:4.2f}" for v in rec))


def save_figures(fine, directory):
    """The structlearn.plotting figures of one home (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    X, V = symbols(fine)
    y, lengths, names = fine.labels, fine.lengths, list(fine.activity_names)
    K = len(names)
    r = runs(y, lengths)
    D = int((r[:, 1] - r[:, 0]).max() + 1)
    D += max(2, D // 50)
    test = np.zeros(y.size, dtype=bool)
    test[:lengths[0]] = True
    model = fit_model("HSMM (negative binomial)", X[~test], lengths[1:], y[~test], K, V, D)
    pred = model.predict(X[test], [lengths[0]])
    axes = plotting.plot_segmentation(y[test].astype(float), pred, state_names=names,
                                      feature_names=["true activity"], figsize=(12, 4.5), alpha=0.35,
                                      title=f"home {fine.home}, day 1 (held out): true activity (line), "
                                            f"Viterbi segments of the negative-binomial HSMM (spans)")
    axes[0].set_yticks(range(K))
    axes[0].set_yticklabels(names, fontsize=7)
    axes[0].set_xlabel("minute of the day")
    figs = {"segmentation": axes,
            "durations": plotting.plot_durations(model, y[~test], lengths=lengths[1:], state_names=names,
                                                 n_cols=4, unit="min", include_censored=True,
                                                 title=f"home {fine.home}: fitted negative-binomial "
                                                       f"durations vs labelled training segments"),
            "transitions": plotting.plot_transitions(model, state_names=names,
                                                     title=f"home {fine.home}: a_ij (smoothed)")}
    for name, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, f'ordonez_{fine.home}_{name}')}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", nargs="+", default=["A", "B"], choices=["A", "B"])
    ap.add_argument("--coarse-slice", type=int, default=900,
                    help="slice (s) of the O(T·(K·D)²) models (and of the comparison rows); 0: none")
    ap.add_argument("--fine-models", nargs="*", choices=list(KEYS), default=["nb", "np", "hmm"],
                    help="models run on the 60-s slices")
    ap.add_argument("--coarse-models", nargs="*", choices=list(KEYS),
                    default=["nb", "hmm", "rt", "vt", "general"], help="models run on the coarse slices")
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--quick", action="store_true",
                    help="home A only, 3 held-out days, HSMM and HMM at 60 s, residential-time HMM "
                         "and HSMM at 30 min")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    args = ap.parse_args(argv)
    results = {}
    homes = ["A"] if args.quick else args.home
    for home in homes:
        t = time.perf_counter()
        if args.quick:
            fine, rows = evaluate(home, 1800, args.data_home, ["HSMM (negative binomial)", "HMM (geometric)"],
                                  ["HSMM (negative binomial)", "residential-time HMM"], days=[0, 1, 2])
        else:
            fine, rows = evaluate(home, args.coarse_slice, args.data_home,
                                  [KEYS[k] for k in args.fine_models],
                                  [KEYS[k] for k in args.coarse_models] if args.coarse_slice else [])
        report(fine, rows)
        print(f"({time.perf_counter() - t:.0f} s)")
        results[home] = {(name, sl): (acc, cls) for name, sl, _, acc, cls, _, _ in rows}
        if args.figures:
            save_figures(fine, args.figures)
    return results


if __name__ == "__main__":
    main()
