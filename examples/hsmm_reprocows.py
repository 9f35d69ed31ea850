"""Oestrus detection in dairy cows (mhsmm's ``reprocows``): a 3-state explicit-duration HSMM, fitted
without and with the insemination days as partial labels.

Data: ``mhsmm_reprocows`` in ``../shared/data`` (7 cows, hourly pedometer activity from calving,
sparse milk progesterone; ``reproai``: the 12 insemination days; ``reproppa``: 73 observed post-partum
anoestrus durations of other cows; see its SOURCE.md), loaded by
:func:`structlearn.datasets.load_reprocows`.

The model is the one of mhsmm's help page (``?reprocows``; O'Connell & Højsgaard 2011):

- states 0 = post-partum anoestrus (PPA), 1 = oestrus, 2 = not oestrus (the rest of the cycle); every
  cow starts in PPA (``startprob_ = (1, 0, 0)``) and then cycles oestrus → not oestrus → oestrus …
  (``transmat_`` rows (0, 1, 0), (0, 0, 1), (0, 1, 0)): PPA happens once, at the start. Both are set
  before ``fit`` and left out of ``init_params`` and ``params`` (EM keeps the structural zeros anyway);
- gamma durations on the hourly grid (D = the longest cow, 2,569 h, as mhsmm's ``M = max(N)``),
  started as mhsmm does: PPA from the gamma fit of ``reproppa`` (days × 24), oestrus from a uniform law
  on 4–30 h, not-oestrus from a uniform law on 15–40 days (here: the gamma laws with those moments);
- Gaussian emissions of the activity index started at means (0, 2.5, 0), variances 1 (NaN = missing);
  ``--progesterone`` adds the progesterone as a second (diagonal Gaussian) feature;
- right censoring: the records end while a cow is in some state.

Fits: unsupervised EM, and semi-supervised EM (``fit(..., labels=...)``: "oestrus" at one row per
insemination, every other row unknown) with three encodings of the inseminations (``SEMI_FITS``):
the recorded time itself (midday of the AI day: only the day is known); 12 h earlier (the AM-PM rule:
insemination about 12 h after the onset of standing heat); and 12 h earlier for the first
insemination of a heat only (cow 5 was inseminated on days 43.5 and 45.5). For each fit the script
prints the estimated mean durations — the oestrus cycle (mean oestrus + mean not-oestrus, compare the
bovine ≈ 21 days) and the PPA (compare the ``reproppa`` mean, 33.3 days) — and the Viterbi
segmentation of every cow: the end of its PPA, its oestrus onsets, and how far (hours) each
insemination is from the nearest decoded oestrus segment.

Result (structlearn 0.1.0, hourly grid, D = 2,569; ~30 s per fit)::

    fit (labels)                   cycle (d) oestrus (h)  PPA (d)      log L  oestrus/cow            AI hits (<= 24 h)
    unsupervised                       21.98        17.5    29.98  -15736.98  [3, 4, 3, 3, 2, 1, 2]  11/12
    AI rows                            21.83        31.5    29.55  -15791.38  [3, 4, 3, 3, 2, 1, 2]  12/12
    AI - 12 h                          21.66        17.5    29.83  -15761.86  [3, 4, 3, 2, 2, 1, 2]  10/12
    AI - 12 h, first AI of a heat      21.70        17.5    29.83  -15746.50  [3, 4, 3, 3, 2, 1, 2]  11/12

(log L: log P(activity) under the fitted model; AI hits: inseminations within 24 h of a decoded
oestrus segment.) The unsupervised fit already finds a 22-day cycle, 17.5-hour oestrus and a 30-day PPA. Under it the
activity-defined oestrus has ended by midday of the AI day for 10 of the 12 inseminations (it lies
12–30 h earlier), so labelling the AI rows themselves stretches the oestrus to 31 h and flattens its
activity mean (1.51 -> 0.49); labels 12 h earlier agree with the data, but the two inseminations of
cow 5 (48 h apart) then force a 2-day "not oestrus" between two oestrus and the not-oestrus law
widens (sd 1.8 -> 10.8 days), losing cow 4's third oestrus — labelling only the first insemination of
a heat leaves the unsupervised segmentation and estimates nearly unchanged. The PPA estimate (30 days)
is below the ``reproppa`` mean (33.3 days, the start of EM) for all fits: 7 cows give 7 PPA segments.

Run::

    .venv/bin/python examples/hsmm_reprocows.py [--step-hours 1] [--progesterone] [--data-home DIR] [--quick]
                                                [--figures DIR]

``--figures DIR`` also saves PNGs made with :mod:`structlearn.plotting` into DIR (created if missing;
nothing is written without the flag): ``reprocows_segmentation.png`` (activity of the first two cows
with the unsupervised Viterbi segments and the posterior bands), ``reprocows_durations.png`` (fitted
gamma duration laws, in days, over the decoded segment lengths of all cows) and
``reprocows_training.png`` (EM log-likelihood per iteration of every fit).

``--quick`` averages the hours into 2-hour steps (D = 1,285; ~4× cheaper; the initial emission
variance is then the variance of the averaged activity) and runs one semi-supervised fit (the last
encoding): cycle 21.9 / 21.7 days, PPA 29.9 / 29.7 days. Coarser steps change the fit: at 6-hour
steps the oestrus signal is averaged away (cycle 18 days, PPA 10 days), and at 3–4 hours the
semi-supervised EM with the AI rows labelled drifts to a 2-day "cycle" of higher log P(o, labels)
than the 22-day one — labels that contradict the activity pull EM to another optimum.

``--progesterone`` adds milk progesterone (207 samples) as a second feature: unsupervised EM then
ends the PPA at the first rise of progesterone — the first, often silent, ovulation — 15.7 days
after calving on average (cycle 21.3 days, one more oestrus for 6 of the 7 cows); the semi-supervised
fits are unstable there (with the AI rows labelled, "oestrus" absorbs the low-progesterone days
around it and lasts 9 days).
"""
import argparse
import time
import warnings

import numpy as np
from scipy import stats
from sklearn.exceptions import ConvergenceWarning

from structlearn import HiddenSemiMarkovModel
from structlearn.datasets import load_reprocows
from structlearn.distributions.durations import Gamma
from structlearn.distributions.emissions import Gaussian, MultivariateGaussian

STATES = ("PPA", "oestrus", "not oestrus")
PPA, OESTRUS, NOT_OESTRUS = 0, 1, 2


def aggregate(data, step):
    """Mean of the observed values in blocks of ``step`` hours per cow (NaN where none); the AI rows
    move to their block. Returns (activity, progesterone, lengths, ai_row)."""
    if step == 1:
        return data.activity, data.progesterone, data.lengths, data.ai_row
    off = np.r_[0, np.cumsum(data.lengths)]
    act, prog, lengths, ai_row = [], [], [], []
    for c, n in enumerate(data.lengths):
        m = -(-n // step)
        block = np.arange(n) // step

        def mean(v):
            v = v[off[c]:off[c + 1]]
            ok = ~np.isnan(v)
            s = np.bincount(block[ok], weights=v[ok], minlength=m)
            k = np.bincount(block[ok], minlength=m)
            with np.errstate(invalid="ignore"):
                return np.where(k > 0, s / np.maximum(k, 1), np.nan)

        act.append(mean(data.activity))
        prog.append(mean(data.progesterone))
        rows = data.ai_row[data.ai_cow == data.ids[c]] - off[c]
        ai_row.append(sum(lengths) + rows // step)
        lengths.append(m)
    return (np.concatenate(act), np.concatenate(prog), np.array(lengths, dtype=np.int64),
            np.concatenate(ai_row).astype(np.int64))


def _gamma_with_moments(mean, var):
    return mean * mean / var, var / mean


def make_model(data, step=1, progesterone=False, n_iter=200, variance=1.0):
    """The mhsmm help-page HSMM on a grid of ``step`` hours (see the module docstring); ``variance``:
    the initial emission variance of the activity (1 on the hourly grid)."""
    D = int(-(-data.lengths.max() // step))
    ppa_shape, _, ppa_scale = stats.gamma.fit(data.ppa * 24 / step, floc=0)
    o_shape, o_scale = _gamma_with_moments(17.0 / step, 26.0 ** 2 / 12 / step ** 2)   # U(4, 30) h
    n_shape, n_scale = _gamma_with_moments(660.0 / step, 600.0 ** 2 / 12 / step ** 2)  # U(15, 40) d
    duration = Gamma(shape=[ppa_shape, o_shape, n_shape], scale=[ppa_scale, o_scale, n_scale])
    if progesterone:  # low progesterone in anoestrus and oestrus, high in the luteal phase
        emission = MultivariateGaussian("diag", means=[[0.0, 2.0], [2.5, 2.0], [0.0, 15.0]],
                                        covars=[[1.0, 25.0], [1.0, 25.0], [1.0, 100.0]])
    else:
        emission = Gaussian(means=[0.0, 2.5, 0.0], variances=[variance] * 3)
    model = HiddenSemiMarkovModel(3, duration=duration, emission=emission, max_duration=D,
                                  censoring="right", n_iter=n_iter, tol=1e-4, params="de",
                                  init_params="", random_state=0)
    model.startprob_ = np.array([1.0, 0.0, 0.0])
    model.transmat_ = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    return model


def segmentation(model, X, lengths, ai_row, step):
    """Per cow: PPA end (days), oestrus onsets (days), hours from each AI to the nearest decoded
    oestrus segment (0 inside), and the intervals (days) between consecutive oestrus onsets."""
    _, _, segs = model.decode(X, lengths, return_segments=True)
    off = np.r_[0, np.cumsum(lengths)]
    cows = []
    for c, sg in enumerate(segs):
        oe = sg[sg[:, 2] == OESTRUS]
        ai = ai_row[(ai_row >= off[c]) & (ai_row < off[c + 1])] - off[c]
        dist = [float(np.min(np.maximum(0, np.maximum(oe[:, 0] - r, r - oe[:, 1])))) * step
                if oe.size else np.inf for r in ai]
        ppa = sg[sg[:, 2] == PPA]
        cows.append({"ppa_end": (ppa[0, 1] + 1) * step / 24 if ppa.size else 0.0,
                     "onsets": oe[:, 0] * step / 24, "oestrus_hours": (oe[:, 1] - oe[:, 0] + 1) * step,
                     "ai_distance_h": dist, "intervals": np.diff(oe[:, 0]) * step / 24})
    return cows


#: The semi-supervised fits: (name, hours from the insemination time to the labelled row, label only
#: the first insemination of a heat). The recorded time is midday of the AI day; by the AM-PM rule a
#: cow is inseminated about 12 h after the onset of standing heat; a second insemination within
#: ``REPEAT_DAYS`` of the previous one (cow 5: days 43.5 and 45.5) is taken as the same heat.
SEMI_FITS = {"AI rows": (0.0, False), "AI - 12 h": (-12.0, False),
             "AI - 12 h, first AI of a heat": (-12.0, True)}
REPEAT_DAYS = 3.0


def first_of_heat(data):
    """Mask (12,) of the inseminations that are not within REPEAT_DAYS of the cow's previous one."""
    same = (data.ai_cow[1:] == data.ai_cow[:-1]) & (np.diff(data.ai_day) < REPEAT_DAYS)
    return np.r_[True, ~same]


def fit_and_summarise(data, step, ai_offset=None, first_only=False, progesterone=False):
    """Fit (unsupervised when ``ai_offset`` is None, else with "oestrus" at the rows ``ai_offset``
    hours from each insemination, only the first of a heat with ``first_only``) and summarise the
    durations and the decoded segmentation (distances from every insemination)."""
    act, prog, lengths, ai_row = aggregate(data, step)
    X = np.column_stack([act, prog]) if progesterone else act[:, None]
    model = make_model(data, step, progesterone, variance=1.0 if step == 1 else float(np.nanvar(act)))
    labels = None
    if ai_offset is not None:
        labels = np.full(X.shape[0], -1, dtype=np.int64)
        rows = ai_row[first_of_heat(data)] if first_only else ai_row
        labels[rows + int(round(ai_offset / step))] = OESTRUS
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, lengths, labels=labels)
    seconds = time.perf_counter() - t
    D = model.max_duration_
    mean = model.duration_.mean(D) * step / 24
    sd = np.sqrt(model.duration_.var(D)) * step / 24
    cows = segmentation(model, X, lengths, ai_row, step)
    dist = np.concatenate([c["ai_distance_h"] for c in cows])
    intervals = np.concatenate([c["intervals"] for c in cows])
    return {"model": model, "seconds": seconds, "n_iter": len(model.monitor_.history),
            "converged": model.converged_, "log_likelihood": model.log_likelihood_,
            "score": model.score(X, lengths), "mean_days": mean, "sd_days": sd,
            "cycle_days": float(mean[OESTRUS] + mean[NOT_OESTRUS]), "ppa_days": float(mean[PPA]),
            "oestrus_hours": float(mean[OESTRUS] * 24), "cows": cows,
            "ai_within_24h": int(np.sum(dist <= 24)), "n_ai": int(dist.size),
            "ai_median_distance_h": float(np.median(dist)),
            "decoded_interval_days": float(np.mean(intervals)) if intervals.size else np.nan,
            "n_oestrus": [int(c["onsets"].size) for c in cows], "D": D}


def report(name, r, data):
    m = r["model"]
    print(f"\n== {name}: {r['n_iter']} EM iterations ({'converged' if r['converged'] else 'NOT converged'}), "
          f"{r['seconds']:.1f} s, D = {r['D']} steps ==")
    print(f"log-likelihood {r['score']:.2f}" + (f" (fit objective log P(o, labels) {r['log_likelihood']:.2f})"
                                                if r['score'] != r['log_likelihood'] else ""))
    means = m.emission_.means
    for j, s in enumerate(STATES):
        emis = " ".join(f"{v:6.2f}" for v in np.atleast_1d(means[j]))
        print(f"  {s:<12} duration mean {r['mean_days'][j]:6.2f} d (sd {r['sd_days'][j]:5.2f})  "
              f"emission mean {emis}")
    print(f"  oestrus cycle (oestrus + not oestrus): {r['cycle_days']:.2f} days (bovine ~21); "
          f"oestrus {r['oestrus_hours']:.1f} h; PPA {r['ppa_days']:.2f} days (reproppa mean "
          f"{data.ppa.mean():.1f})")
    print(f"  decoded: mean interval between oestrus onsets {r['decoded_interval_days']:.2f} days; "
          f"AI within 24 h of a decoded oestrus: {r['ai_within_24h']}/{r['n_ai']} (median distance "
          f"{r['ai_median_distance_h']:.0f} h)")
    for cid, c in zip(data.ids, r["cows"]):
        ai = data.ai_day[data.ai_cow == cid]
        print(f"  cow {cid}: PPA ends day {c['ppa_end']:5.1f}; {c['onsets'].size} oestrus, onsets "
              f"{np.array2string(c['onsets'], precision=1, separator=' ')} (h {c['oestrus_hours'].tolist()}); "
              f"AI {ai.tolist()} -> {[int(d) for d in c['ai_distance_h']]} h")


def save_figures(results, data, step, progesterone, directory):
    """The structlearn.plotting figures of the fits (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    act, prog, lengths, _ = aggregate(data, step)
    X = np.column_stack([act, prog]) if progesterone else act[:, None]
    model = results["unsupervised"]["model"]
    figs = {
        "segmentation": plotting.plot_segmentation(
            X, model=model, lengths=lengths, sequences=[0, 1], state_names=STATES, figsize=(11, 6),
            sequence_names=[f"cow {c}" for c in data.ids],
            feature_names=["activity", "progesterone"] if progesterone else None,
            title=f"reprocows: cows {data.ids[0]} and {data.ids[1]}, unsupervised HSMM ({step}-hour steps)"),
        "durations": plotting.plot_durations(model, X=X, lengths=lengths, state_names=STATES,
                                             scale=step / 24, unit="days", include_censored=True,
                                             title="gamma duration laws vs decoded segments (all cows)"),
        "training": plotting.plot_training({k: r["model"] for k, r in results.items()},
                                           title="EM log-likelihood per iteration"),
    }
    for name, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, 'reprocows_' + name)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--step-hours", type=int, default=1, help="aggregate the hourly rows into steps")
    ap.add_argument("--progesterone", action="store_true", help="add progesterone as a 2nd feature")
    ap.add_argument("--quick", action="store_true",
                    help="2-hour steps, one semi-supervised fit (AI - 12 h, first AI of a heat)")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    args = ap.parse_args(argv)
    step = 2 if args.quick else args.step_hours
    if step < 1:
        raise SystemExit("--step-hours must be >= 1")
    data = load_reprocows(args.data_home)
    print(f"{data.ids.size} cows, {data.lengths.sum()} hourly rows ({step}-hour steps), "
          f"{np.isfinite(data.activity).sum()} activity values, {data.ai_day.size} inseminations; "
          f"reproppa: {data.ppa.size} PPA durations, mean {data.ppa.mean():.1f} days")
    results = {"unsupervised": fit_and_summarise(data, step, progesterone=args.progesterone)}
    report("unsupervised", results["unsupervised"], data)
    for name in (["AI - 12 h, first AI of a heat"] if args.quick else SEMI_FITS):
        offset, first_only = SEMI_FITS[name]
        results[name] = fit_and_summarise(data, step, offset, first_only, args.progesterone)
        report(f"semi-supervised, oestrus labelled at {name}", results[name], data)
    print(f"\n{'fit (labels)':<30} {'cycle (d)':>9} {'oestrus (h)':>11} {'PPA (d)':>8} {'log L':>10}  "
          f"{'oestrus/cow':<22} AI hits (<= 24 h)")
    for key, r in results.items():
        print(f"{key:<30} {r['cycle_days']:9.2f} {r['oestrus_hours']:11.1f} {r['ppa_days']:8.2f} "
              f"{r['score']:10.2f}  {str(r['n_oestrus']):<22} {r['ai_within_24h']}/{r['n_ai']}")
    if args.figures:
        save_figures(results, data, step, args.progesterone, args.figures)
    return results


if __name__ == "__main__":
    main()
