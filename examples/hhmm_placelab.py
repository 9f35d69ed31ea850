"""Hierarchical HMM activity recognition on the MIT PlaceLab / Tapia home data (Munguia Tapia et al. 2004).

Every labelled activity instance carries the reed-switch sensor events fired during it; the activity
vocabulary is three-level (Heading > Category > Subcategory). One sequence is one day: the sensor events
of that day's activity instances in time order, each event labelled with its activity at every level.

Models (all supervised, same emissions — one categorical distribution over sensors per leaf activity):

- **HHMM-3**: root → Heading → Category → Subcategory (production state, emits sensor events);
- **HHMM-2**: root → Category → Subcategory;
- **flat HMM**: root → Subcategory (a one-level HHMM is an HMM over the leaf activities).

Transitions are the maximum-likelihood estimates from the labelled nested segments
(:meth:`HierarchicalHMM.fit_supervised`) mixed with ``--smooth`` of the uniform distribution on every
row; emissions are add-``--alpha`` smoothed counts. Decoding is the Viterbi parse; every level of
every model is scored on all three levels (a leaf prediction implies its category and heading).

Protocol: leave-one-day-out cross-validation over the days of each subject (a day with no sensor
events is skipped); scores are pooled over all held-out events. Sensor events can fall in two
overlapping activities; they are kept once per activity instance.

Per inference method (``--inference flat,jtree,factored-frontier``): the HHMM-3 of every fold is
decoded with each ``HierarchicalHMM(inference=...)`` — first as estimated from the labels, then after
``--em-iter`` EM iterations on the training days' sensor events alone (transitions and vertical
distributions re-estimated, the smoothed emissions kept, so an unseen sensor keeps a non-zero
probability) — and scored at every level; the seconds per EM iteration are averaged over the folds.
The exact methods (flat, jtree) must give the same predictions; the factored frontier is approximate
(its smoothed counts drive EM, its max-product sweep the Viterbi parse).

Run::

    .venv/bin/python examples/hhmm_placelab.py [--subjects subject1,subject2] [--smooth 0.01] [--alpha 0.1]
                                               [--max-days N] [--quick] [--figures DIR]
                                               [--inference flat,jtree,factored-frontier] [--em-iter 5]

``--quick``: subject1 only, the first 3 days held out. ``--figures DIR`` also saves PNGs made with
:mod:`structlearn.plotting` into DIR (created if missing; nothing is written without the flag), per
subject: ``placelab_<subject>_hierarchy.png``, the first day's true heading / category / activity
segments above the Viterbi parse of the HHMM-3 fitted on the other days (one row per level).
"""
import argparse
import csv
import os
import time
import warnings
from collections import OrderedDict, defaultdict

import numpy as np
from sklearn.metrics import accuracy_score, f1_score

from structlearn import HierarchicalHMM
from structlearn.datasets import get_data_path
from structlearn.distributions.emissions import Categorical

LEVELS = ("heading", "category", "activity")


def _secs(hms):
    h, m, s = (int(x) for x in hms.strip().split(":"))
    return 3600 * h + 60 * m + s


def load_subject(folder):
    """Days of one subject: list of dicts {date, sensors (n,) int, activity (n,) str}, the taxonomy
    {activity: (category, heading)} and the sensor vocabulary (list of ids)."""
    taxonomy = {}
    with open(os.path.join(folder, "Activities.csv"), newline="") as f:
        for row in csv.DictReader(f):
            taxonomy[row["Subcategory"].strip()] = (row["Category"].strip(), row["Heading"].strip())
    with open(os.path.join(folder, "activities_data.csv"), newline="") as f:
        lines = [ln.rstrip("\r\n") for ln in f]
    lines = [ln for ln in lines if ln.strip()]
    days = defaultdict(list)
    for k in range(0, len(lines) - 4, 5):
        label, date, t0, _t1 = [x.strip() for x in lines[k].split(",")[:4]]
        ids = [x.strip() for x in lines[k + 1].split(",") if x.strip()]
        on = [x.strip() for x in lines[k + 3].split(",") if x.strip()]
        if not ids:
            continue
        events = sorted(zip((_secs(t) for t in on), ids))
        days[date].append((_secs(t0), label, [i for _, i in events]))
    vocab = sorted({i for inst in days.values() for _, _, ids in inst for i in ids}, key=int)
    index = {s: j for j, s in enumerate(vocab)}
    out = []
    for date in sorted(days, key=lambda d: tuple(int(x) for x in d.split("/"))[::-1][:1] +
                       tuple(int(x) for x in d.split("/"))[:2]):
        inst = sorted(days[date], key=lambda x: x[0])
        sensors = [index[i] for _, _, ids in inst for i in ids]
        acts = [lab for _, lab, ids in inst for _ in ids]
        out.append({"date": date, "sensors": np.array(sensors, dtype=np.int64),
                    "activity": np.array(acts)})
    return out, taxonomy, vocab


def hierarchy(kind, activities, taxonomy):
    """Nested-dict automaton with uniform parameters (the topology; supervised estimation sets them).
    Node names carry a level prefix (a category may share its name with one of its activities)."""
    def node(level, name):
        return {"heading": "H:", "category": "C:", "activity": "A:"}[level] + name

    spec = OrderedDict()
    if kind == "flat":
        spec["root"] = {"children": [node("activity", a) for a in activities]}
        return spec
    cats = OrderedDict()
    for a in activities:
        cats.setdefault(taxonomy[a][0], []).append(node("activity", a))
    for c, kids in cats.items():
        spec[node("category", c)] = {"children": kids}
    if kind == "hhmm2":
        spec["root"] = {"children": [node("category", c) for c in cats]}
        return spec
    heads = OrderedDict()
    for c in cats:
        heads.setdefault(taxonomy[cats[c][0][2:]][1], []).append(node("category", c))
    for hname, kids in heads.items():
        spec[node("heading", hname)] = {"children": kids}
    spec["root"] = {"children": [node("heading", hname) for hname in heads]}
    return spec


def state_rows(kind, acts, taxonomy):
    """Per-event node names, root to leaf (the supervised ``states`` argument)."""
    rows = []
    for a in acts:
        c, h = taxonomy[a]
        path = {"flat": ["A:" + a], "hhmm2": ["C:" + c, "A:" + a],
                "hhmm3": ["H:" + h, "C:" + c, "A:" + a]}[kind]
        rows.append(path)
    return np.array(rows, dtype=object).astype(str)


def smooth(model, eps):
    """Mix every vertical distribution and every (transitions | end) row with eps of the uniform."""
    h = model.hierarchy_
    for m in range(h.n_submodels):
        K = len(h.children[m])
        h.start[m] = (1 - eps) * h.start[m] + eps / K
        rows = np.concatenate([h.trans[m], h.end[m][:, None]], axis=1)
        rows = (1 - eps) * rows + eps / (K + 1)
        h.trans[m], h.end[m] = rows[:, :K].copy(), rows[:, K].copy()


def fit(kind, train, activities, taxonomy, n_sensors, eps, alpha):
    spec = hierarchy(kind, activities, taxonomy)
    prods = [a for a in activities]
    model = HierarchicalHMM(spec, Categorical(np.full((len(prods), n_sensors), 1.0 / n_sensors)),
                            root="root", finish="none")
    model._build()
    order = [p[2:] for p in model.production_names_]  # production order of the hierarchy
    X = np.concatenate([d["sensors"] for d in train])[:, None]
    acts = np.concatenate([d["activity"] for d in train])
    lengths = [len(d["sensors"]) for d in train]
    model.fit_supervised(X, state_rows(kind, acts, taxonomy), lengths)
    smooth(model, eps)
    counts = np.full((len(order), n_sensors), alpha)
    pos = {a: i for i, a in enumerate(order)}
    np.add.at(counts, (np.array([pos[a] for a in acts]), X[:, 0]), 1.0)
    model.emission_ = Categorical(counts / counts.sum(axis=1, keepdims=True))
    return model


def predict(model, day):
    dec = model.decode(day["sensors"][:, None])
    names = model.node_names_
    leaf = [names[row[row >= 0][-1]][2:] for row in dec.states]
    return np.array(leaf)


def levels(acts, taxonomy):
    return {"heading": np.array([taxonomy[a][1] for a in acts]),
            "category": np.array([taxonomy[a][0] for a in acts]), "activity": np.asarray(acts)}


def evaluate(folder, eps=0.01, alpha=0.1, kinds=("hhmm3", "hhmm2", "flat"), max_days=None):
    """Leave-one-day-out scores {kind: {level: (accuracy, macro-F1)}} and data counts."""
    days, taxonomy, vocab = load_subject(folder)
    days = [d for d in days if len(d["sensors"])]
    activities = sorted({a for d in days for a in d["activity"]})
    truth, pred = [], {k: [] for k in kinds}
    held = days if max_days is None else days[:max_days]
    for i, day in enumerate(held):
        train = days[:i] + days[i + 1:]
        truth.append(day["activity"])
        for k in kinds:
            pred[k].append(predict(fit(k, train, activities, taxonomy, len(vocab), eps, alpha), day))
    t = levels(np.concatenate(truth), taxonomy)
    out = {}
    for k in kinds:
        p = levels(np.concatenate(pred[k]), taxonomy)
        out[k] = {lv: (accuracy_score(t[lv], p[lv]), f1_score(t[lv], p[lv], average="macro",
                                                              zero_division=0)) for lv in LEVELS}
    majority = {lv: float(np.max(np.unique(t[lv], return_counts=True)[1]) / len(t[lv])) for lv in LEVELS}
    info = {"majority": majority, "days": len(days), "events": int(sum(len(d["sensors"]) for d in days)),
            "activities": len(activities), "sensors": len(vocab), "held_out_days": len(held)}
    return out, info


def evaluate_inference(folder, methods, eps=0.01, alpha=0.1, max_days=None, em_iter=5):
    """Leave-one-day-out HHMM-3 scores per inference method, before and after EM:
    {(method, "supervised" | "EM"): {level: (accuracy, macro-F1)}}, the mean seconds per EM iteration
    {method: s}, whether the exact methods' predictions are identical, and data counts."""
    days, taxonomy, vocab = load_subject(folder)
    days = [d for d in days if len(d["sensors"])]
    activities = sorted({a for d in days for a in d["activity"]})
    held = days if max_days is None else days[:max_days]
    truth, pred, secs = [], {}, {m: [] for m in methods}
    for i, day in enumerate(held):
        train = days[:i] + days[i + 1:]
        truth.append(day["activity"])
        sup = fit("hhmm3", train, activities, taxonomy, len(vocab), eps, alpha)
        X = np.concatenate([d["sensors"] for d in train])[:, None]
        lengths = [len(d["sensors"]) for d in train]
        for m in methods:
            model = HierarchicalHMM(sup.hierarchy_, sup.emission_, root="root", finish="none", inference=m,
                                    params="st", n_iter=em_iter, tol=-np.inf)
            pred.setdefault((m, "supervised"), []).append(predict(model, day))
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # EM stops after em_iter iterations by design
                model.fit(X, lengths)
            secs[m].append((time.perf_counter() - t0) / (model.n_iter_ + 1))  # E-steps incl. the final score
            pred.setdefault((m, "EM"), []).append(predict(model, day))
    t = levels(np.concatenate(truth), taxonomy)
    out = {}
    for key, p in pred.items():
        p = levels(np.concatenate(p), taxonomy)
        out[key] = {lv: (accuracy_score(t[lv], p[lv]), f1_score(t[lv], p[lv], average="macro",
                                                                zero_division=0)) for lv in LEVELS}
    exact = [m for m in methods if m != "factored-frontier"]
    same = all(np.array_equal(np.concatenate(pred[(exact[0], k)]), np.concatenate(pred[(m, k)]))
               for m in exact[1:] for k in ("supervised", "EM")) if len(exact) > 1 else None
    info = {"days": len(days), "events": int(sum(len(d["sensors"]) for d in days)),
            "activities": len(activities), "sensors": len(vocab), "held_out_days": len(held)}
    return out, {m: float(np.mean(v)) for m, v in secs.items()}, same, info


def save_figures(folder, subject, eps, alpha, directory):
    """The structlearn.plotting figure of one subject (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    days, taxonomy, vocab = load_subject(folder)
    days = [d for d in days if len(d["sensors"])]
    activities = sorted({a for d in days for a in d["activity"]})
    model = fit("hhmm3", days[1:], activities, taxonomy, len(vocab), eps, alpha)
    day = days[0]
    decoded = model.decode(day["sensors"][:, None]).segments[0]
    truth = []
    for lv, prefix in zip(LEVELS, ("H:", "C:", "A:")):
        names = levels(day["activity"], taxonomy)[lv]
        start = np.flatnonzero(np.r_[True, names[1:] != names[:-1]])
        stop = np.r_[start[1:], names.size]
        truth.append([(int(a), int(b), prefix + names[a]) for a, b in zip(start, stop)])
    ax = plotting.plot_hierarchy(truth + decoded, name_format=lambda s: s[2:], figsize=(12, 4.5),
                                 merge_repeats=True,
                                 level_names=[f"{who} {lv}" for who in ("true", "HHMM-3") for lv in LEVELS],
                                 title=f"PlaceLab {subject}, {day['date']} (held out): sensor events "
                                       f"labelled by activity, truth above the Viterbi parse")
    ax.set_xlabel("sensor event")
    print(f"figure saved to {plotting.save_figure(ax, directory, f'placelab_{subject}_hierarchy')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--subjects", default="subject1,subject2")
    ap.add_argument("--smooth", type=float, default=0.01)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--max-days", type=int, default=None, help="hold out only the first days")
    ap.add_argument("--quick", action="store_true", help="subject1 only, the first 3 days held out")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    ap.add_argument("--inference", default=None,
                    help="comma-separated HierarchicalHMM inference methods (flat, jtree, factored-frontier): "
                         "HHMM-3 scores and seconds per EM iteration for each")
    ap.add_argument("--em-iter", type=int, default=5, help="EM iterations of --inference")
    args = ap.parse_args()
    if args.quick:
        args.subjects, args.max_days = "subject1", 3
    root = get_data_path("mit_placelab_tapia")
    if root is None:
        raise SystemExit("data set 'mit_placelab_tapia' not found ($STRUCTLEARN_DATA or ../shared/data)")
    names = {"hhmm3": "HHMM-3 (heading/category/activity)", "hhmm2": "HHMM-2 (category/activity)",
             "flat": "flat HMM (activity)"}
    if args.inference:
        methods = args.inference.split(",")
        for subj in args.subjects.split(","):
            t0 = time.perf_counter()
            res, secs, same, info = evaluate_inference(os.path.join(root, subj), methods, args.smooth,
                                                       args.alpha, args.max_days, args.em_iter)
            print(f"\n{subj}: HHMM-3, leave-one-day-out over {info['held_out_days']} of {info['days']} days, "
                  f"{info['events']} sensor events; EM: {args.em_iter} iterations "
                  f"({time.perf_counter() - t0:.1f} s)")
            print(f"{'inference':<20}{'fit':<12}" + "".join(f"{lv + ' acc':>14}{lv + ' F1':>13}" for lv in LEVELS)
                  + f"{'s / EM iter':>13}")
            for (m, how), r in res.items():
                print(f"{m:<20}{how:<12}" + "".join(f"{r[lv][0]:>14.3f}{r[lv][1]:>13.3f}" for lv in LEVELS)
                      + (f"{secs[m]:>13.3f}" if how == "EM" else ""))
            if same is not None:
                print(f"exact methods give identical predictions: {same}")
        return
    for subj in args.subjects.split(","):
        t0 = time.perf_counter()
        res, info = evaluate(os.path.join(root, subj), args.smooth, args.alpha, max_days=args.max_days)
        print(f"\n{subj}: {info['days']} days, {info['events']} sensor events, {info['activities']} "
              f"activities, {info['sensors']} sensors fired; leave-one-day-out over {info['held_out_days']} "
              f"days ({time.perf_counter() - t0:.1f} s)")
        print(f"{'model':<38}" + "".join(f"{lv + ' acc':>14}{lv + ' F1':>13}" for lv in LEVELS))
        for k, r in res.items():
            print(f"{names[k]:<38}" + "".join(f"{r[lv][0]:>14.3f}{r[lv][1]:>13.3f}" for lv in LEVELS))
        print(f"{'majority class':<38}" + "".join(f"{info['majority'][lv]:>14.3f}{'':>13}" for lv in LEVELS))
        if args.figures:
            save_figures(os.path.join(root, subj), subj, args.smooth, args.alpha, args.figures)


if __name__ == "__main__":
    main()
