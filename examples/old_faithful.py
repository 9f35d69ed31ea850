"""Old Faithful: hidden semi-Markov models of the waiting times between eruptions.

Data: MASS::geyser (Azzalini & Bowman 1990; 299 consecutive eruptions, 1–15 August 1985) and
datasets::faithful (272 rows), from ``../shared/data/old_faithful`` (see its SOURCE.md).

For 2 and 3 states and several duration families the script fits an explicit-duration HSMM with
Gaussian emissions (EM with restarts, right censoring), prints the log-likelihood, AIC, BIC and the
fitted duration distributions, and saves a figure with the data, the Viterbi segmentation and the
smoothed state posteriors of the BIC-best model.

Run::

    .venv/bin/python examples/old_faithful.py [--out old_faithful_hsmm.png] [--data-home DIR] [--quick]
                                              [--figures DIR]

Needs matplotlib for the figure (``pip install matplotlib``); without it, only the table is printed.
``--quick``: the geyser data only, 2 states, 2 duration families, 1 restart (~10 s).
``--figures DIR``: also save, made with :mod:`structlearn.plotting` for the BIC-best geyser model,
``DIR/old_faithful_segmentation.png`` (Viterbi segments over the series, posterior bands),
``old_faithful_durations.png`` (fitted duration pmfs over the decoded segment lengths),
``old_faithful_training.png`` (EM log-likelihood per iteration of every fitted model) and
``old_faithful_transitions.png`` (DIR is created if missing; nothing is written without the flag).
"""
import argparse
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from structlearn import HiddenSemiMarkovModel
from structlearn.datasets import get_data_path

FAMILIES = ["geometric", "poisson", "negative_binomial", "gamma", "nonparametric"]
D = 20  # longest run of one regime (eruptions)


def load(data_home=None):
    path = get_data_path("old_faithful", data_home)
    if path is None:
        raise SystemExit("data set 'old_faithful' not found (looked in $STRUCTLEARN_DATA and "
                         "../shared/data); pass --data-home")
    geyser = np.genfromtxt(path / "geyser.csv", delimiter=",", skip_header=1, usecols=1)
    faithful = np.genfromtxt(path / "faithful.csv", delimiter=",", skip_header=1, usecols=2)
    return {"geyser": geyser, "faithful": faithful}


def fit_all(x, quick=False):
    X = x[:, None]
    rows = []
    for K in ((2,) if quick else (2, 3)):
        for family in (FAMILIES[:2] if quick else FAMILIES):
            model = HiddenSemiMarkovModel(K, duration=family, emission="gaussian", max_duration=D,
                                          censoring="right", n_iter=500, tol=1e-6,
                                          n_init=1 if quick else 4, random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X)
            rows.append((K, family, model, model.score(X), model.aic(X), model.bic(X)))
    return rows


def report(name, x, rows):
    print(f"\n== {name}: {x.size} waiting times (min), mean {x.mean():.1f} ==")
    print(f"{'K':>2} {'durations':<18} {'logL':>10} {'AIC':>9} {'BIC':>9} {'p':>3}  "
          f"state means (min) | mean durations (eruptions)")
    for K, family, m, ll, aic, bic in rows:
        order = np.argsort(m.emission_.means)
        means = " ".join(f"{v:5.1f}" for v in m.emission_.means[order])
        durs = " ".join(f"{v:5.2f}" for v in m.duration_.mean(D)[order])
        print(f"{K:>2} {family:<18} {ll:10.2f} {aic:9.2f} {bic:9.2f} {m.n_parameters():>3}  "
              f"{means} | {durs}")
    best = min(rows, key=lambda r: r[5])
    print(f"BIC-best: K={best[0]}, durations={best[1]}")
    return best


def plot(x, model, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure")
        return
    X = x[:, None]
    order = np.argsort(model.emission_.means)
    rank = np.argsort(order)  # state -> rank by mean waiting time
    _, states, segs = model.decode(X, return_segments=True)
    gamma = model.predict_proba(X)[:, order]
    conf = model.confidence(X)
    K = model.n_states
    colors = plt.get_cmap("viridis")(np.linspace(0.1, 0.9, K))
    t = np.arange(x.size)
    fig, axes = plt.subplots(3, 1, figsize=(12, 7.5), sharex=True,
                             gridspec_kw={"height_ratios": [3, 2, 1]})
    ax = axes[0]
    for s, e, k in segs[0]:
        ax.axvspan(s - 0.5, e + 0.5, color=colors[rank[k]], alpha=0.25, lw=0)
    ax.plot(t, x, "k.-", lw=0.6, ms=3)
    for r, k in enumerate(order):
        ax.axhline(model.emission_.means[k], color=colors[r], ls="--", lw=1,
                   label=f"state {r}: mean {model.emission_.means[k]:.1f} min, "
                         f"duration {model.duration_.mean(D)[k]:.2f}")
    ax.set_ylabel("waiting time (min)")
    ax.set_title(f"Old Faithful (MASS::geyser): {K}-state HSMM, "
                 f"{type(model.duration_).__name__} durations — Viterbi segments shaded")
    ax.legend(loc="upper right", fontsize=8)
    ax = axes[1]
    ax.stackplot(t, gamma.T, colors=colors, alpha=0.8)
    ax.set_ylabel("P(state | all data)")
    ax.set_ylim(0, 1)
    ax = axes[2]
    ax.plot(t, conf, color="tab:red", lw=0.8)
    ax.set_ylabel("confidence\n(eq. 10)")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("eruption index")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure saved to {path}")


def save_figures(x, rows, directory):
    """The structlearn.plotting figures of the BIC-best model of ``rows`` (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    best = min(rows, key=lambda r: r[5])[2]
    X = x[:, None]
    names = [f"mean {m:.0f} min" for m in best.emission_.means]
    kind = type(best.duration_).__name__
    figs = {
        "segmentation": plotting.plot_segmentation(
            X, model=best, state_names=names, figsize=(11, 4.5),
            title=f"Old Faithful (MASS::geyser): {best.n_states}-state HSMM, {kind} durations"),
        "durations": plotting.plot_durations(best, X=X, state_names=names, unit="eruptions",
                                             title="fitted duration pmf vs decoded segment lengths"),
        "training": plotting.plot_training({f"K={K} {fam}": m for K, fam, m, *_ in rows},
                                           title="EM log-likelihood per iteration (kept restart)"),
        "transitions": plotting.plot_transitions(best, state_names=names, title="a_ij (BIC-best)"),
    }
    for name, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, 'old_faithful_' + name)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="old_faithful_hsmm.png", help="figure file")
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--quick", action="store_true", help="2 states, 2 families, 1 restart")
    parser.add_argument("--figures", metavar="DIR", default=None,
                        help="save PNG figures made with structlearn.plotting into DIR")
    args = parser.parse_args(argv)
    data = load(args.data_home)
    best = None
    for name in (("geyser",) if args.quick else ("geyser", "faithful")):
        rows = fit_all(data[name], args.quick)
        b = report(name, data[name], rows)
        if name == "geyser":
            best, geyser_rows = b, rows
    plot(data["geyser"], best[2], args.out)
    if args.figures:
        save_figures(data["geyser"], geyser_rows, args.figures)


if __name__ == "__main__":
    main()
