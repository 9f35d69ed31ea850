"""Duration families of the HSMM on two classic count series: Coxian and convex-monotone durations
against the existing families (issue 14; Yu 2010, "Hidden semi-Markov models", §4.1).

Data (``../shared/data``, see each SOURCE.md): ``fetal_lamb`` (Leroux & Puterman 1992; 240 counts of fetal
lamb movements in 5-second intervals) and ``earthquakes`` (Zucchini & MacDonald 2009, Table 1.1; annual
counts of major earthquakes 1900-2006).

For each series the script fits a 2-state explicit-duration HSMM with Poisson emissions (EM with
restarts, right censoring) under every duration family below and prints the log-likelihood, the number
of free parameters, AIC and BIC (lower is better), sorted by BIC.

Run::

    .venv/bin/python examples/hsmm_duration_families.py [--data-home DIR] [--n-init 4] [--quick]

``--quick``: 1 restart and the families geometric, poisson, coxian-2, convex-monotone only.
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from structlearn import HiddenSemiMarkovModel
from structlearn import durations as du
from structlearn.datasets import get_data_path

FAMILIES = {
    "geometric": lambda: du.Geometric(),
    "poisson": lambda: du.Poisson(),
    "poisson+shift": lambda: du.Poisson(estimate_shift=True),
    "negative_binomial": lambda: du.NegativeBinomial(),
    "gamma": lambda: du.Gamma(),
    "lognormal": lambda: du.LogNormal(),
    "discrete_gaussian": lambda: du.DiscreteGaussian(),
    "exp-family(log d, d)": lambda: du.ExponentialFamily(("log_d", "d")),
    "coxian-2": lambda: du.Coxian(n_phases=2),
    "coxian-3": lambda: du.Coxian(n_phases=3),
    "convex_monotone": lambda: du.ConvexMonotone(),
    "nonparametric": lambda: du.NonParametric(),
}
QUICK = ["geometric", "poisson", "coxian-2", "convex_monotone"]
DATA = {"fetal_lamb": ("fetal_lamb.csv", 60), "earthquakes": ("earthquakes.csv", 50)}


def load(name, data_home=None):
    path = get_data_path(name, data_home)
    if path is None:
        raise SystemExit(f"data set {name!r} not found (looked in $STRUCTLEARN_DATA and ../shared/data)")
    csv = np.loadtxt(path / DATA[name][0], delimiter=",", skiprows=1)
    return csv[:, 1].astype(np.float64)[:, None]


def compare(name, X, families, n_init, random_state=0):
    D = DATA[name][1]
    rows = []
    for fam in families:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m = HiddenSemiMarkovModel(2, duration=FAMILIES[fam](), emission="poisson", max_duration=D,
                                      n_init=n_init, n_iter=200, tol=1e-6, random_state=random_state).fit(X)
        ll = m.score(X)
        rows.append((fam, ll, m.n_parameters(), m.aic(X), m.bic(X), np.round(m.duration_.mean(D), 2),
                     np.round(m.emission_.lam[:, 0], 3), time.perf_counter() - t0))
    rows.sort(key=lambda r: r[4])
    print(f"\n{name}: T = {X.shape[0]}, K = 2, Poisson emissions, D = {D}, {n_init} restart(s)")
    print(f"{'duration family':<22} {'log L':>10} {'p':>4} {'AIC':>9} {'BIC':>9}  mean durations   rates"
          f"          time")
    for fam, ll, p, aic, bic, means, lam, dt in rows:
        print(f"{fam:<22} {ll:>10.3f} {p:>4d} {aic:>9.2f} {bic:>9.2f}  {str(means):<16} {str(lam):<15}"
              f"{dt:5.1f}s")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--n-init", type=int, default=4)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    families = QUICK if args.quick else list(FAMILIES)
    n_init = 1 if args.quick else args.n_init
    for name in DATA:
        compare(name, load(name, args.data_home), families, n_init)


if __name__ == "__main__":
    main()
