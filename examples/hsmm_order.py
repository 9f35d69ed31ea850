"""Order estimation of hidden semi-Markov models: the number of states M and the longest duration D
(Yu 2010 §2.3.2) on Old Faithful and on the earthquake counts.

Data: MASS::geyser waiting times (299 consecutive eruptions, Gaussian emissions) from
``../shared/data/old_faithful`` and the annual counts of major earthquakes 1900–2006 (107 years, Poisson
emissions; Zucchini & MacDonald) from ``../shared/data/earthquakes`` (see their SOURCE.md).

For every data set, :func:`structlearn.hsmm.order_selection.select_order` fits M = 1…4 and a grid
of D for the explicit-duration HSMM with geometric durations and no D (the HMM), Poisson, negative
binomial and nonparametric durations, and M = 1…3 with small D for the residential-time HMM, the general
HSMM and the variable-transition HMM (which refuses M = 1: its row shows the error). Every table holds
log L, the number of free parameters p, AIC, BIC and the held-out log L of a 5-fold cross-validation over
10 contiguous blocks of the series; the script prints the tables and the orders chosen by BIC, AIC and
CV. A one-state model is one segment per series, so its D is the series length (the i.i.d. model).
The blocks (11 and 30 observations) are shorter than the longest Ds, so CV cannot tell those Ds apart.

Runtime: about an hour on a busy 2-core machine with ``--n-jobs 2`` (two thirds of it in the negative
binomial searches, whose duration M-step is a numerical maximisation); ``--quick`` about a minute.

Run::

    .venv/bin/python examples/hsmm_order.py [--data-home DIR] [--quick] [--n-jobs N] [--figures DIR]

``--quick``: the earthquakes only, M = 1…3, the HMM and Poisson durations (D = 10), EM with tol 1e-4
(instead of 1e-5) and 200 iterations at most (instead of 300); both use 3 restarts.

``--figures DIR``: also save PNGs made with :mod:`structlearn.plotting` into DIR (created if missing;
nothing is written without the flag), per data set: ``order_<data>_segmentation.png`` (the series with
the Viterbi segments and posterior bands of the overall BIC choice), ``order_<data>_durations.png``
(its duration pmfs over the decoded segment lengths) and ``order_<data>_training.png`` (EM
log-likelihood per iteration of the BIC choice of every search).
"""
import argparse
import os
import time

# Many small fits, possibly in parallel (--n-jobs): Numba's own threads on top would oversubscribe the
# cores and spin at barriers (set before numba is imported).
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from structlearn import (GeneralHSMM, HiddenSemiMarkovModel, ResidentialTimeHMM,  # noqa: E402
                         VariableTransitionHMM)
from structlearn.datasets import get_data_path  # noqa: E402
from structlearn.hsmm.order_selection import select_order  # noqa: E402

#: per data set: emission family, the D grid of the explicit-duration families, the small D grid of the
#: general family.
DATA = {"earthquakes": ("poisson", (10, 20, 40), (3, 5)),
        "old_faithful": ("gaussian", (5, 10, 20), (3, 5))}
FAMILIES = {"HMM (geometric, no D)": "geometric", "HSMM poisson": "poisson",
            "HSMM negative binomial": "negative_binomial", "HSMM nonparametric": "nonparametric"}
UNITS = {"earthquakes": "years", "old_faithful": "eruptions"}  # one observation of each data set
GENERAL = {"ResidentialTimeHMM": ResidentialTimeHMM, "GeneralHSMM": GeneralHSMM,
           "VariableTransitionHMM": VariableTransitionHMM}


def load(name, data_home=None):
    path = get_data_path(name, data_home)
    if path is None:
        raise SystemExit(f"data set {name!r} not found (looked in $STRUCTLEARN_DATA and ../shared/data); "
                         f"pass --data-home")
    if name == "earthquakes":
        return np.loadtxt(path / "earthquakes.data", delimiter=",")[:, None]
    return np.genfromtxt(path / "geyser.csv", delimiter=",", skip_header=1, usecols=1)[:, None]


def searches(name, quick=False):
    """(label, template, select_order keyword arguments) of every search on data set ``name``."""
    emission, d_grid, d_small = DATA[name]
    em = {"n_iter": 200, "tol": 1e-4, "n_init": 3} if quick else {"n_iter": 300, "tol": 1e-5, "n_init": 3}
    em["random_state"] = 0
    n_states = (1, 2, 3) if quick else (1, 2, 3, 4)
    out = []
    for label, family in FAMILIES.items():
        if quick and family not in ("geometric", "poisson"):
            continue
        geometric = family == "geometric"
        tpl = HiddenSemiMarkovModel(duration=family, emission=emission, max_duration=None, **em)
        out.append((label, tpl, {"n_states": n_states,
                                 "max_durations": (None,) if geometric else ((10,) if quick else d_grid)}))
    if not quick:
        for label, cls in GENERAL.items():
            out.append((label, cls(emission=emission, **em),
                        {"n_states": (1, 2, 3), "max_durations": d_small}))
    return out


def run(name, X, quick=False, n_jobs=None):
    """The order-selection results of every search on ``X``: {label: OrderSelection}."""
    results = {}
    for label, tpl, grid in searches(name, quick):
        t0 = time.perf_counter()
        res = select_order({label: tpl}, X, **grid, criterion="bic", cv=5, n_blocks=10, n_jobs=n_jobs)
        print(f"\n-- {name}: {label} ({time.perf_counter() - t0:.1f} s)")
        print(res.to_string())
        results[label] = res
    return results


def chosen(results):
    """{criterion: (label, row)} of the overall choice of every criterion, and the per-search choices."""
    rows = []
    for label, res in results.items():
        for crit in ("bic", "aic", "cv"):
            i = res.best_for(crit)
            rows.append((label, crit, res.table[i] if i is not None else None))
    overall = {}
    for crit, col, sign in (("bic", "bic", 1), ("aic", "aic", 1), ("cv", "cv_log_likelihood", -1)):
        cand = [(sign * r[col], label, r) for label, c, r in rows if c == crit and r is not None
                and np.isfinite(r[col])]
        if cand:
            _, label, r = min(cand, key=lambda c: c[0])
            overall[crit] = (label, r)
    return rows, overall


def report(name, results):
    rows, overall = chosen(results)
    print(f"\n== {name}: chosen orders (M, D) per search ==")
    width = max(len(label) for label in results)
    print(f"{'search':<{width}}  {'BIC':>14}  {'AIC':>14}  {'CV':>14}")
    for label in results:
        cells = []
        for crit in ("bic", "aic", "cv"):
            r = next(r for lab, c, r in rows if lab == label and c == crit)
            cells.append("-" if r is None else f"M={r['n_states']}, D={r['max_duration']}")
        print(f"{label:<{width}}  {cells[0]:>14}  {cells[1]:>14}  {cells[2]:>14}")
    for crit, (label, r) in overall.items():
        value = r["cv_log_likelihood"] if crit == "cv" else r[crit]
        print(f"overall by {crit.upper():<3}: {label}, M = {r['n_states']}, D = {r['max_duration']} "
              f"({'CV log L' if crit == 'cv' else crit.upper()} {value:.3f})")
    return overall


def save_figures(name, X, results, overall, directory):
    """The structlearn.plotting figures of data set ``name`` (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    label, row = overall["bic"]
    res = results[label]
    model = res.estimators_[next(i for i, r in enumerate(res.table) if r is row)]
    what = f"{label}, M = {row['n_states']}, D = {row['max_duration']}"
    curves = {lab: r.best_estimator_ for lab, r in results.items()
              if getattr(r.best_estimator_, "monitor_", None) is not None}
    figs = {"segmentation": plotting.plot_segmentation(X, model=model, figsize=(11, 4.5),
                                                       title=f"{name}: BIC choice {what}"),
            "durations": plotting.plot_durations(model, X=X, include_censored=True, unit=UNITS[name],
                                                 title=f"{name}: durations of the BIC choice"),
            "training": plotting.plot_training(curves, title=f"{name}: EM of each search's BIC choice")}
    for fig, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, f'order_{name}_{fig}')}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--quick", action="store_true",
                        help="earthquakes only, M = 1..3, the HMM and Poisson durations, tol 1e-4")
    parser.add_argument("--n-jobs", type=int, default=None, help="parallel fits (joblib)")
    parser.add_argument("--figures", metavar="DIR", default=None,
                        help="save PNG figures made with structlearn.plotting into DIR")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    out = {}
    for name in (("earthquakes",) if args.quick else ("earthquakes", "old_faithful")):
        X = load(name, args.data_home)
        print(f"\n==== {name}: {X.shape[0]} observations ====")
        results = run(name, X, args.quick, args.n_jobs)
        out[name] = {"results": results, "overall": report(name, results)}
        if args.figures:
            save_figures(name, X, results, out[name]["overall"], args.figures)
    print(f"\ntotal time {time.perf_counter() - t0:.1f} s")
    return out


if __name__ == "__main__":
    main()
