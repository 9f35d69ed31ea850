"""2-level dynamic CRFs for activity recognition from partial labels (issue 8 item 4), after Tran, Phung &
Venkatesh, "Learning Structured Outputs from Partial Labels using Forest Ensemble", arXiv:1407.6432 (2014),
cited below as Tran et al. (2014).

Data with two label levels per time step, cut into windows; each window is one 2-level DCRF graph (top
chain of complex activities, bottom chain of primitive activities, a parent–child edge per step; loopy,
treewidth 2):

- ``sim``: simulated indoor x/y tracks (:func:`structlearn.datasets.activities.simulate_indoor_tracks`):
  4 complex activities (breakfast, work, relax, hygiene) over 12 primitive ones (walk to kitchen, use
  stove, …); observations are noisy positions, features Tran et al.'s quantised position / speed / heading.
- ``placelab``: MIT PlaceLab (Munguia Tapia 2004) reed-switch events of one subject, top level the activity
  *category*, bottom level the *activity* (subcategory); parsed by ``examples/hhmm_placelab.py``.

Methods (every one trained on the same partially labelled training windows — a fraction of the nodes'
labels hidden uniformly at random, the same nodes for every method — and scored on all test nodes):

AdaBoost.MRF boosts the top-chain and bottom-chain spanning trees of Tran et al. (2014), Figure 4:

- **AdaBoost par.**: the parallel variant (both trees, shared parameters, α = 1/2, tree edge
  potentials reparametrised by 1/ρ_e, CG), predicting by the ensemble (argmax of the α-weighted tree
  marginals);
- **AdaBoost LogOP**: the same fit, predicting by exact MAP of the logarithmic opinion pool on the full
  graph, i.e. the CRF of the shared weights (time = that fit + this prediction);
- **AdaBoost seq.**: the sequential algorithm of Tran et al. (2014), Figure 8, as a superimposed forest
  (β = 1 / (mean observed nodes per graph); every round the candidate trees are fitted by 5 CG steps to
  the re-weighted likelihood from their last parameters; α ≤ 0.5 so that no learner wipes the earlier
  ones, and a cover floor of 0.4 keeps both trees' edges in the forest; the tree meeting condition (29)
  with the lower bound is kept; at most 10 rounds), ensemble prediction; the rounds (tree, α, value of
  (29)) are printed under the row;
- **AdaBoost seq.+L2**: the same with ``criterion="bound+l2"`` (tree and α minimise the bound plus
  c2‖w‖² of the LogOP weights, no (29) gate), learners started from the LogOP weights and β = 1 / (mean
  observed nodes per graph): this class's behaviour before it followed Figure 8;
- **ML BP / ML TRW / ML exact**: ``GraphCRF`` maximum likelihood of the incomplete-label likelihood with
  loopy BP, tree-reweighted BP, and exact (junction tree) inference; L-BFGS (restarted after failed
  line searches) by default, ``--optimizer cg`` for the conjugate gradient of Tran et al.;
- **layered HMM**: a bottom HMM over primitive activities emitting the discrete observation; its Viterbi
  output is the observation sequence of a top HMM over complex activities (Oliver et al.'s LHMM); each
  HMM is estimated from the observed labels' counts, then EM with the observed labels clamped
  (forward–backward of :class:`structlearn.engine.structures.LinearChain`) handles the hidden ones;
- **flat CRF**: one ``LinearChainCRF`` per level on that level's features (partial labels through its
  ``allowed`` mask).

Printed: per level (top = complex, bottom = primitive) macro-F1 over the labels present in the test data
(sklearn ``f1_score(average="macro")``), and the training time, each the mean over ``--hide-seeds``
draws of the hidden labels; then every AdaBoost row minus ML exact in F1 points (issue 8 asks for
AdaBoost.MRF within 2 points of ML exact).

Then, on the 50 % column and the first draw, the analogue of Tran et al.'s Figure 6 (top and bottom F1
against training time at each budget of rounds / iterations: one AdaBoost fit per budget; the ML rows read
every budget off the table's own L-BFGS fit through ``GraphCRF.fit(callback=...)``, the model after b
iterations being the model a fit with ``max_iterations=b`` returns, its time the training up to iteration
b plus its prediction) and of their BP-tolerance remark (ML BP with message tolerance 1e-3, 1e-4, 1e-5, at
most 100 sweeps).

The work is a fixed set of tasks, one per (data set, hidden-label draw), each loading its data and seeding
itself, run by ``--jobs`` worker processes (default 2, one Numba thread each): the numbers do not depend on
which process runs which task; the times are measured with the other worker running beside.

Everything is also written as a Markdown page, ``DIR/adaboost_mrf.md`` with the PNG
``DIR/adaboost_mrf_f1_time_<data>.png`` and the table as data, ``DIR/adaboost_mrf.json``, beside it
(``--results DIR``, default ``docs/results`` under the working directory, git-ignored: generated, never
committed; ``--results ''`` writes nothing). The docs build shows the page of a cached full run ("Results:
2-level DCRFs"; ``STRUCTLEARN_DOCS_RESULTS=dcrf_activities`` makes it, see ``docs/hooks/build_hook.py``).

Run:  .venv/bin/python examples/dcrf_activities.py [--quick] [--data sim,placelab] [--hidden 0,0.5,0.8]
      [--hide-seeds 0,1,2] [--max-iterations 50] [--budgets 2,5,10,25,50] [--results DIR] [--figures DIR]
      [--jobs 2] [--reference DIR/adaboost_mrf.json]

``--quick``: one cell of the full run per data set: the same data and training (50 iterations, 10 AdaBoost
rounds), only the first draw of the hidden labels, the 50 % column (unless ``--hidden`` is given) and
budgets 1, 3, so that it ranks the methods as the full run does (smaller data or 5 iterations, as it once
had, undertrained the ML rows and ranked them last).
``--reference`` checks that a run ranks the methods as the full run did (every pair of methods at least
one F1 point apart there must be in the same order, per data set, column and level) and prints the pairs
that disagree.

``--figures DIR`` also saves PNGs made with :mod:`structlearn.plotting` into DIR (created if missing;
nothing is written without the flag), for an ML BP GraphCRF fitted on the first data set with half
of the training labels hidden: ``dcrf_marginals.png`` (node marginals of the first test window on
its 2 × T grid: top row complex activities, bottom row primitive ones; each node coloured by the
marginal-weighted mix of its label colours) and ``dcrf_training.png`` (the objective per L-BFGS
iteration), and the F1-against-time figure of every data set.
"""
import argparse
import importlib.util
import os
import pathlib
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import f1_score

from structlearn import AdaBoostMRF, GraphCRF
from structlearn.datasets import get_data_path
from structlearn.datasets.activities import (hide_labels, placelab_two_level, simulate_indoor_tracks,
                                             to_graphs)
from structlearn.graph.adaboost_mrf import two_level_chain_trees
from structlearn.engine.structures import LinearChain

_ADABOOST_LOG = []  # one line per AdaBoost.MRF fit: rounds, trees chosen, alphas, bound
_LOGOP = {}         # (data, hidden, draw) -> LogOP MAP predictions and seconds of an "AdaBoost par." fit
METHODS = ("AdaBoost par.", "AdaBoost LogOP", "AdaBoost seq.", "AdaBoost seq.+L2", "ML BP", "ML TRW", "ML exact",
           "layered HMM", "flat CRF")


# ----------------------------------------------------------------------------------------------------
# layered HMM
# ----------------------------------------------------------------------------------------------------
class PartialHMM:
    """Discrete HMM estimated from partially labelled sequences: counts of the observed labels (add-
    ``alpha`` smoothed), then ``n_em`` EM iterations in which observed labels are clamped and hidden
    ones are summed over (forward–backward of the constrained chain). Viterbi decoding."""

    def __init__(self, n_states, n_symbols, alpha=0.1, n_em=10):
        self.K, self.S, self.alpha, self.n_em = n_states, n_symbols, alpha, n_em

    def _normalise(self, start, trans, emit):
        a = self.alpha
        self.log_start = np.log((start + a) / (start + a).sum())
        self.log_trans = np.log((trans + a) / (trans + a).sum(axis=1, keepdims=True))
        self.log_emit = np.log((emit + a) / (emit + a).sum(axis=1, keepdims=True))

    def _chain(self, symbols, lengths):
        return LinearChain(self.log_emit[:, symbols].T, self.log_trans, lengths=lengths,
                           start=self.log_start)

    def fit(self, symbols, labels):
        """symbols, labels: lists of (T,) int arrays; labels −1 = hidden."""
        K = self.K
        sym = np.concatenate(symbols)
        lab = np.concatenate(labels)
        lengths = np.array([len(s) for s in symbols])
        first = np.cumsum(lengths) - lengths
        start = np.bincount(lab[first][lab[first] >= 0], minlength=K).astype(float)
        trans = np.zeros((K, K))
        same = np.ones(len(lab), bool)
        same[np.cumsum(lengths) - 1] = False
        i = np.flatnonzero(same[:-1] & (lab[:-1] >= 0) & (lab[1:] >= 0))
        np.add.at(trans, (lab[i], lab[i + 1]), 1.0)
        emit = np.zeros((K, self.S))
        o = lab >= 0
        np.add.at(emit, (lab[o], sym[o]), 1.0)
        self._normalise(start, trans, emit)
        if o.all():
            return self
        allowed = np.ones((len(lab), K), bool)
        allowed[o] = np.eye(K, dtype=bool)[lab[o]]
        for _ in range(self.n_em):
            m = self._chain(sym, lengths).constrain(allowed).marginals(edge="total")
            emit = np.zeros((K, self.S))
            np.add.at(emit.T, sym, m.unary)
            self._normalise(m.unary[first].sum(axis=0), m.edge, emit)
        return self

    def predict(self, symbols):
        lengths = np.array([len(s) for s in symbols])
        out = self._chain(np.concatenate(symbols), lengths).argmax()
        return np.split(out, np.cumsum(lengths)[:-1])


def layered_hmm(data, train, test, yt_tr, yb_tr):
    """Bottom HMM (primitives | observation symbols) → its Viterbi output → top HMM (complex |
    decoded primitives)."""
    Kt, Kb = len(data.top_names), len(data.bottom_names)
    sym_tr = [data.symbols[w] for w in train]
    sym_te = [data.symbols[w] for w in test]
    bottom = PartialHMM(Kb, data.n_symbols).fit(sym_tr, yb_tr)
    top = PartialHMM(Kt, Kb).fit(bottom.predict(sym_tr), yt_tr)
    pb = bottom.predict(sym_te)
    return top.predict(pb), pb


# ----------------------------------------------------------------------------------------------------
# flat CRFs
# ----------------------------------------------------------------------------------------------------
def flat_crf(feats_tr, y_tr, feats_te, c2, max_iterations):
    """LinearChainCRF on one level's features; a hidden label (−1) allows every label."""
    from structlearn import LinearChainCRF

    lengths = [len(f) for f in feats_tr]
    lab = np.concatenate(y_tr)
    o = lab >= 0
    # the estimator numbers labels by first appearance in y; hidden tokens carry a placeholder name
    # (the first observed label) and an all-true row of the `allowed` mask
    names = np.where(o, lab, lab[o][0]).astype(str)
    classes = list(dict.fromkeys(names))
    col = {c: j for j, c in enumerate(classes)}
    allowed = np.ones((len(lab), len(classes)), bool)
    allowed[o] = False
    allowed[np.flatnonzero(o), [col[c] for c in names[o]]] = True
    crf = LinearChainCRF(c2=c2, max_iterations=max_iterations, all_possible_states=True,
                         all_possible_transitions=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf.fit(sp.csr_matrix(np.concatenate(feats_tr)), np.split(names, np.cumsum(lengths)[:-1]),
                lengths=lengths, allowed=allowed)
    lengths_te = [len(f) for f in feats_te]
    pred = crf.predict(sp.csr_matrix(np.concatenate(feats_te)), lengths=lengths_te)
    return [np.array([int(c) for c in p]) for p in pred]


# ----------------------------------------------------------------------------------------------------
# DCRFs
# ----------------------------------------------------------------------------------------------------
def _levels(pred, Kt):
    tops, bots = [], []
    for p in pred:
        T = len(p) // 2
        tops.append(np.asarray(p[:T]))
        bots.append(np.asarray(p[T:]) - Kt)
    return tops, bots


def dcrf(method, data, train, test, y_tr, cfg, budgets=()):
    """((top predictions, bottom predictions), logop, curve): ``logop`` is, for "AdaBoost par.", the same
    fit's LogOP MAP predictions and fit + predict seconds (the "AdaBoost LogOP" row), else None. ``curve``:
    for the ML rows with L-BFGS, {budget: (predictions, seconds)} of the model after ``budget`` iterations
    of this fit (``budgets`` ≤ ``max_iterations``; GraphCRF's callback: the same model as a fit with
    ``max_iterations=budget``), seconds = training up to that iteration + its prediction, the time spent
    predicting at the budgets left out of the training time."""
    Xtr, _ = to_graphs(data, train)
    Xte, _ = to_graphs(data, test)
    Kt, Kb = len(data.top_names), len(data.bottom_names)
    c2, max_iterations = cfg["c2"], cfg["max_iterations"]
    if method.startswith("AdaBoost"):
        # the pool: the trees of Tran et al. (2014), Figure 4 (top chain + verticals, bottom chain + verticals)
        model = AdaBoostMRF(n_labels=Kt + Kb, trees=two_level_chain_trees(), n_rounds=cfg["n_rounds"],
                            cg_iterations=cfg["cg_iterations"], c2=c2, parallel=method == "AdaBoost par.",
                            max_iterations=max_iterations, predict_method="ensemble",
                            inference=cfg["predict_inference"])
        if method == "AdaBoost seq.+L2":    # the earlier criterion: J = bound + L2, flat data weights
            n_obs = np.mean([np.sum(np.asarray(y) >= 0) for y in y_tr])
            model.set_params(criterion="bound+l2", warm_start="ensemble", beta=1.0 / max(1.0, n_obs))
    else:
        inference = {"ML BP": "bp", "ML TRW": "trw", "ML exact": "exact"}[method]
        model = GraphCRF(n_labels=Kt + Kb, inference=inference, optimizer=cfg["optimizer"], c2=c2,
                         max_iterations=max_iterations,
                         inference_options=cfg.get("bp_options") if inference == "bp" else None)
    curve, aside, kw = {}, [0.0], {}
    if budgets and isinstance(model, GraphCRF) and model.optimizer == "lbfgs":
        def at_budget(entry):
            curve[len(curve) + 1] = None   # iterations so far (entry["iteration"] restarts with L-BFGS)
            if len(curve) in budgets:
                t1 = time.perf_counter()
                curve[len(curve)] = (_levels(entry["estimator"].predict(Xte), Kt),
                                     t1 - t0 - aside[0] + time.perf_counter() - t1)
                aside[0] += time.perf_counter() - t1
            return False
        kw["callback"] = at_budget
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        model.fit(Xtr, y_tr, **kw)
        t_fit = time.perf_counter() - t0 - aside[0]
        t1 = time.perf_counter()
        pred = model.predict(Xte)
        curve = {b: v for b, v in curve.items() if v is not None}
        for b in budgets if kw else ():    # beyond the last iteration: the final model (it stopped there)
            curve.setdefault(b, (_levels(pred, Kt), t_fit + time.perf_counter() - t1))
        logop = None
        if method == "AdaBoost par.":
            t0 = time.perf_counter()
            logop_pred = model.set_params(predict_method="logop_map").predict(Xte)
            logop = _levels(logop_pred, Kt), t_fit + time.perf_counter() - t0
    if method.startswith("AdaBoost") and not model.parallel:
        steps = ", ".join(f"{'TB'[r['tree']] if r['tree'] >= 0 else '-'} α={r['alpha']:.3f} "
                          f"(29)={r['condition_29']:+.3g}"
                          + ("" if r["accepted"] else " rejected") for r in model.rounds_[1:])
        _ADABOOST_LOG.append(
            f"{method} {len(model.bound_)} rounds (converged={model.converged_}); forest "
            f"{''.join('TB'[c] for c in model.learner_trees_)} (T = top chain + verticals, B = bottom chain "
            f"+ verticals) with alphas {np.round(model.alphas_, 3).tolist()}; log L_H {model.bound_[0]:.3f} -> "
            f"{model.bound_[-1]:.3f}; rounds after the first: {steps or 'none'}")
    return _levels(pred, Kt), logop, curve


# ----------------------------------------------------------------------------------------------------
# experiment
# ----------------------------------------------------------------------------------------------------
def macro_f1(truth, pred):
    t, p = np.concatenate(truth), np.concatenate(pred)
    return f1_score(t, p, labels=np.unique(t), average="macro", zero_division=0)


def run_method(method, data, train, test, hidden, seed, cfg, curve_out=None):
    """(top F1, bottom F1, training+prediction seconds). ``curve_out`` (a dict, ML rows): filled with
    {budget: (seconds, top F1, bottom F1)} at the budgets it holds as keys, from this fit (see dcrf)."""
    Kt = len(data.top_names)
    _, y_full = to_graphs(data, train)
    y_tr = hide_labels(y_full, hidden, random_state=seed)  # same nodes hidden for every method
    yt_tr = [y[:len(y) // 2] for y in y_tr]
    yb_tr = [np.where(y[len(y) // 2:] >= 0, y[len(y) // 2:] - Kt, -1) for y in y_tr]
    t0 = time.perf_counter()
    if method == "layered HMM":
        out = layered_hmm(data, train, test, yt_tr, yb_tr)
    elif method == "flat CRF":
        out = (flat_crf([data.feat_top[w] for w in train], yt_tr, [data.feat_top[w] for w in test],
                        cfg["c2"], cfg["max_iterations"]),
               flat_crf([data.feat_bottom[w] for w in train], yb_tr,
                        [data.feat_bottom[w] for w in test], cfg["c2"],
                        cfg["max_iterations"]))
    elif method == "AdaBoost LogOP":
        key = (id(data), hidden, seed)
        if key not in _LOGOP:               # no "AdaBoost par." row fitted on the same labels
            _LOGOP[key] = dcrf("AdaBoost par.", data, train, test, y_tr, cfg)[1]
        out, secs = _LOGOP.pop(key)
    else:
        out, logop, curve = dcrf(method, data, train, test, y_tr, cfg, tuple(curve_out or ()))
        if logop is not None:
            _LOGOP[(id(data), hidden, seed)] = logop
        for b, (pred, seconds) in curve.items():
            curve_out[b] = (seconds, macro_f1([data.y_top[w] for w in test], pred[0]),
                            macro_f1([data.y_bottom[w] for w in test], pred[1]))
    if method != "AdaBoost LogOP":
        secs = time.perf_counter() - t0
    return (macro_f1([data.y_top[w] for w in test], out[0]),
            macro_f1([data.y_bottom[w] for w in test], out[1]), secs)


def load(name, quick, seed, subject, train_every):
    """(data, train window indices, test window indices) or None when the real data is missing (the same
    data with ``quick``: --quick keeps the full run's data so as to keep its ranking).

    Every ``train_every``-th sequence (day) trains, the others test: the training set is kept small
    because ML exact (a junction tree over cliques of K³ entries) dominates the running time."""
    if name == "sim":
        data = simulate_indoor_tracks(n_days=9, n_complex=6, window=50, noise=0.25, random_state=seed)
    else:
        root = get_data_path("mit_placelab_tapia")
        if root is None:
            return None
        path = pathlib.Path(__file__).resolve().parent / "hhmm_placelab.py"
        spec = importlib.util.spec_from_file_location("hhmm_placelab", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        days, taxonomy, vocab = mod.load_subject(os.path.join(root, subject))
        data = placelab_two_level(days, taxonomy, vocab, top="category", bottom="activity",
                                  window=50, min_count=80)
    groups = np.unique(data.group)
    train_groups = groups[::train_every]
    train = np.flatnonzero(np.isin(data.group, train_groups))
    test = np.flatnonzero(~np.isin(data.group, train_groups))
    return data, train, test


def _warm_up(methods, cfg):
    """Run every method once on a tiny simulated set so that Numba compilation (cached on disk, but
    recompiled after kernel edits) is not counted in the first timed cell."""
    data = simulate_indoor_tracks(n_days=2, n_complex=2, window=20, random_state=1)
    tiny = dict(cfg, max_iterations=2, n_rounds=1)
    for m in methods:
        run_method(m, data, np.array([0]), np.array([len(data.y_top) - 1]), 0.5, 0, tiny)
    _ADABOOST_LOG.clear()


def save_figures(name, args, cfg, directory):
    """The structlearn.plotting figures (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    from structlearn import plotting

    loaded = load(name, args.quick, args.seed, args.subject, args.train_every)
    if loaded is None:
        return
    data, train, test = loaded
    Xtr, y_full = to_graphs(data, train)
    Xte, _ = to_graphs(data, test)
    names = list(data.top_names) + list(data.bottom_names)
    model = GraphCRF(n_labels=len(names), inference="bp", optimizer=cfg["optimizer"], c2=cfg["c2"],
                     max_iterations=cfg["max_iterations"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(Xtr, hide_labels(y_full, 0.5, random_state=0))
    T = len(data.y_top[test[0]])
    figs = {"marginals": plotting.plot_marginals_grid(
                model, (2, T), X=Xte[:1], class_names=names, figsize=(12, 3.0), aspect="auto",
                title=f"{name}: ML BP node marginals of test window {int(test[0])} (top: complex, bottom: "
                      f"primitive activities)"),
            "training": plotting.plot_training(model, title=f"{name}: ML BP GraphCRF, 50 % labels hidden")}
    for fig, ax in figs.items():
        print(f"figure saved to {plotting.save_figure(ax, directory, 'dcrf_' + fig)}")


# ----------------------------------------------------------------------------------------------------
# the results page: Table 3, Figure 6 and the BP-tolerance sensitivity of Tran et al. (2014), §8
# ----------------------------------------------------------------------------------------------------
CURVE_METHODS = ("AdaBoost seq.", "AdaBoost par.", "ML BP", "ML TRW", "ML exact")
BP_TOLERANCES = (1e-3, 1e-4, 1e-5)


def f1_time_curves(data, train, test, hidden, seed, cfg, budgets, methods, recorded=None):
    """Figure 6 analogue: {method: [(seconds, top F1, bottom F1), ...]} at every training budget (boosting
    rounds for AdaBoost seq., CG / L-BFGS iterations for the others). The ML rows with L-BFGS read every
    budget off one fit (``recorded[method]``, made by the table's fit when ``max(budgets) <=
    max_iterations``, else here with ``max(budgets)`` iterations); the others fit once per budget."""
    curves, recorded = {}, recorded or {}
    for m in methods:
        if m not in CURVE_METHODS:
            continue
        if m.startswith("ML") and cfg["optimizer"] == "lbfgs":
            if set(budgets) - set(recorded.get(m, ())):
                recorded[m] = dict.fromkeys(budgets)
                run_method(m, data, train, test, hidden, seed, dict(cfg, max_iterations=max(budgets)), recorded[m])
            curves[m] = [recorded[m][b] for b in budgets]
        else:
            runs = [run_method(m, data, train, test, hidden, seed, dict(cfg, max_iterations=b, n_rounds=b))
                    for b in budgets]
            curves[m] = [(secs, top, bottom) for top, bottom, secs in runs]
    _LOGOP.clear()
    _ADABOOST_LOG.clear()
    return curves


def bp_tolerance(data, train, test, hidden, seed, cfg):
    """ML BP with message tolerance 1e-3, 1e-4, 1e-5 (at most 100 BP sweeps, as Tran et al. (2014), §8):
    [(tol, top F1, bottom F1, seconds)]."""
    return [(t, *run_method("ML BP", data, train, test, hidden, seed,
                            dict(cfg, bp_options={"tol": t, "max_iter": 100}))) for t in BP_TOLERANCES]


def plot_curves(curves, title, path):
    """F1 (top, bottom level) against training + prediction seconds, one line per method; PNG at ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    for m, pts in curves.items():
        pts = sorted(pts)
        for j, ax in enumerate(axes):
            ax.plot([p[0] for p in pts], [p[1 + j] for p in pts], marker="o", label=m)
    for ax, level in zip(axes, ("top (complex activities)", "bottom (primitive activities)")):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("training + prediction time (s)")
        ax.set_ylabel("macro-F1")
        ax.set_title(level)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_results(directory, command, pages, fractions, hide_seeds, methods, seconds):
    """``directory/adaboost_mrf.md``: per data set the Table 3 analogue, the AdaBoost.MRF rounds, the
    Figure 6 analogue (PNG beside the page) and the BP-tolerance table."""
    lines = ["# AdaBoost.MRF on 2-level DCRFs: results", "",
             f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M')} in {seconds:.0f} s; not committed "
             f"(run the example to refresh it). After Tran, Phung & Venkatesh (2014), §8: Table 3 "
             f"(macro-F1 per level, training + prediction time), Figure 6 (F1 against training time) and the "
             f"sensitivity of ML BP to the message tolerance. Each cell is the mean over hidden-label draws "
             f"{hide_seeds}; the same training nodes are hidden for every method.", ""]
    for page in pages:
        name, res = page["name"], page["results"]
        lines += [f"## {name}", "", page["about"], "",
                  "| method | " + " | ".join(f"{f:.0%} hidden: top F1 | bottom F1 | time (s)"
                                             for f in fractions) + " |",
                  "|---|" + "---:|---:|---:|" * len(fractions)]
        for m in methods:
            cells = []
            for f in fractions:
                t, b, s = res[(name, m, f)]
                cells += [f"{t:.3f}", f"{b:.3f}", f"{s:.1f}"]
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        lines.append("")
        if page["adaboost"]:
            lines += ["Sequential AdaBoost.MRF fits (trees chosen, α, condition (29) per round):", ""]
            lines += [f"- {entry}" for entry in page["adaboost"]] + [""]
        if page["figure"]:
            lines += [f"### F1 against training time ({page['curve_hidden']:.0%} hidden)", "",
                      f"Budgets {page['budgets']} (boosting rounds for AdaBoost seq., CG / L-BFGS iterations "
                      f"for the others), one fit each.", "", f"![F1 against training time]({page['figure']})", ""]
            lines += ["| method | budget | time (s) | top F1 | bottom F1 |", "|---|---:|---:|---:|---:|"]
            for m, pts in page["curves"].items():
                for b, (s, t, bo) in zip(page["budgets"], pts):
                    lines.append(f"| {m} | {b} | {s:.1f} | {t:.3f} | {bo:.3f} |")
            lines.append("")
        if page["bp_tol"]:
            lines += [f"### ML BP and the message tolerance ({page['curve_hidden']:.0%} hidden)", "",
                      "Tran et al. report bottom-level F1 0.84, 0.87, 0.82 at 1e-3, 1e-4, 1e-5 (at most 100 "
                      "sweeps); the table above uses the default tolerance 1e-10 (500 sweeps).", "",
                      "| tolerance | top F1 | bottom F1 | time (s) |", "|---:|---:|---:|---:|"]
            lines += [f"| {t:.0e} | {a:.3f} | {b:.3f} | {s:.1f} |" for t, a, b, s in page["bp_tol"]] + [""]
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "adaboost_mrf.md"
    out.write_text("\n".join(lines))
    import json   # the table as data: the reference of --reference (the ranking check of --quick)

    (directory / "adaboost_mrf.json").write_text(json.dumps(
        [{"data": d, "method": m, "hidden": f, "top": t, "bottom": b, "seconds": sec}
         for page in pages for (d, m, f), (t, b, sec) in page["results"].items() if d == page["name"]], indent=1))
    return out


# ----------------------------------------------------------------------------------------------------
# the full experiment as a fixed set of tasks (data set, hidden-label draw), run in worker processes
# ----------------------------------------------------------------------------------------------------
def _worker_init(methods, cfg):
    """A worker process: one Numba thread (the processes share the cores), the methods warmed up."""
    import numba

    numba.set_num_threads(1)
    _warm_up(methods, cfg)


def run_task(name, draw, setting):
    """Every method and hidden fraction of one data set for the hidden-label draw ``draw``, and, for the
    first draw, the F1-against-time curves and the BP-tolerance table: a dict (None without the data)."""
    cpu = time.process_time()
    loaded = load(name, setting["quick"], setting["seed"], setting["subject"], setting["train_every"])
    if loaded is None:
        return None
    data, train, test = loaded
    methods, fractions, cfg, budgets = setting["methods"], setting["fractions"], setting["cfg"], setting["budgets"]
    n_tr = sum(len(data.y_top[w]) for w in train)
    n_te = sum(len(data.y_top[w]) for w in test)
    curve_hidden = 0.5 if 0.5 in fractions else fractions[0]
    curves = budgets and draw == setting["first_draw"]
    # the ML rows' curves read off the table's fit when its iterations cover every budget
    recorded = {m: dict.fromkeys(budgets) for m in CURVE_METHODS if m.startswith("ML") and m in methods
                and cfg["optimizer"] == "lbfgs" and curves and max(budgets) <= cfg["max_iterations"]}
    out = {"results": {}, "adaboost": {}, "curves": {}, "bp_tol": [], "curve_hidden": curve_hidden,
           "about": f"{len(data.top_names)} top / {len(data.bottom_names)} bottom labels; {len(train)} training "
                    f"windows ({n_tr} steps), {len(test)} test windows ({n_te} steps); macro-F1 over the labels "
                    f"present in the test data, on all test nodes."}
    for m in methods:
        for f in fractions:
            rec = recorded.get(m) if f == curve_hidden else None
            out["results"][m, f] = run_method(m, data, train, test, f, draw, cfg, rec)
            if _ADABOOST_LOG:
                out["adaboost"][m, f] = list(_ADABOOST_LOG)
                _ADABOOST_LOG.clear()
    if curves:
        out["curves"] = f1_time_curves(data, train, test, curve_hidden, draw, cfg, budgets, methods, recorded)
        if "ML BP" in methods:
            out["bp_tol"] = bp_tolerance(data, train, test, curve_hidden, draw, cfg)
    out["cpu"] = time.process_time() - cpu
    return out


# ----------------------------------------------------------------------------------------------------
# --quick against the full run: the same ranking of the methods?
# ----------------------------------------------------------------------------------------------------
RANK_RESOLUTION = 0.01   # F1 differences below one point are not read as a ranking


def check_ranking(results, methods, fractions, reference):
    """Print, per data set, hidden fraction and level, whether the methods rank as in ``reference`` (the
    ``adaboost_mrf.json`` of a full run): every pair of methods whose F1 differs by at least
    :data:`RANK_RESOLUTION` in the full run must be in the same order here. Returns the disagreements."""
    import json

    if not reference.exists():
        print(f"ranking check: {reference} not found (run the full experiment with --results first)")
        return None
    full = {(r["data"], r["method"], r["hidden"]): (r["top"], r["bottom"]) for r in json.loads(reference.read_text())}
    wrong = []
    for name in sorted({k[0] for k in results}):
        for f in fractions:
            for j, level in enumerate(("top", "bottom")):
                have = [m for m in methods if (name, m, f) in full and (name, m, f) in results]
                for i, a in enumerate(have):
                    for b in have[i + 1:]:
                        d_full = full[name, a, f][j] - full[name, b, f][j]
                        d_here = results[name, a, f][j] - results[name, b, f][j]
                        if abs(d_full) >= RANK_RESOLUTION and d_full * d_here <= 0:
                            wrong.append(f"{name} {f:.0%} {level}: {a} vs {b} (full {d_full:+.3f}, here {d_here:+.3f})")
    print(f"ranking check against {reference}: " + ("the same ranking (pairs at least "
          f"{RANK_RESOLUTION} apart in the full run)" if not wrong else f"{len(wrong)} pairs disagree"))
    for line in wrong:
        print("  " + line)
    return wrong


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="one cell of the full run: first draw, 50 %% column, budgets 1,3")
    ap.add_argument("--data", default="sim,placelab")
    ap.add_argument("--hidden", default=None,
                    help="fractions of training labels hidden (default 0,0.5,0.8; 0.5 with --quick)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--subject", default="subject1")
    ap.add_argument("--seed", type=int, default=0, help="seed of the simulator")
    ap.add_argument("--hide-seeds", default=None,
                    help="seeds of the hidden-label draws, the table gives the mean over them "
                         "(default 0,1,2; 0 with --quick)")
    ap.add_argument("--train-every", type=int, default=3,
                    help="every k-th day trains, the others test")
    ap.add_argument("--optimizer", default="lbfgs", choices=("lbfgs", "cg"),
                    help="optimizer of the ML methods (GraphCRF)")
    ap.add_argument("--c2", type=float, default=1.0)
    ap.add_argument("--max-iterations", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None, help="AdaBoost.MRF rounds")
    ap.add_argument("--adaboost-inference", default="exact", choices=("exact", "bp", "trw"),
                    help="inference for AdaBoost.MRF's LogOP MAP on the full test graphs")
    ap.add_argument("--figures", metavar="DIR", default=None,
                    help="save PNG figures made with structlearn.plotting into DIR")
    ap.add_argument("--results", metavar="DIR", default="docs/results",
                    help="write the results page adaboost_mrf.md and its figure into DIR (relative to the "
                         "working directory; default docs/results); '' writes nothing")
    ap.add_argument("--jobs", type=int, default=2,
                    help="worker processes for the (data set, hidden-label draw) tasks (default 2; 1: this process)")
    ap.add_argument("--reference", metavar="JSON", default=None,
                    help="adaboost_mrf.json of a full run: check that this run ranks the methods the same")
    ap.add_argument("--budgets", default=None,
                    help="training budgets of the F1-against-time curves (default 2,5,10,25,50; 1,3 with "
                         "--quick); '' skips the curves and the BP-tolerance table")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        raise SystemExit(f"--jobs: expected a positive number of processes; got {args.jobs}")
    started = time.perf_counter()
    budgets = [int(b) for b in (args.budgets if args.budgets is not None else
                                ("1,3" if args.quick else "2,5,10,25,50")).split(",") if b.strip()]
    cfg = {"c2": args.c2,
           "max_iterations": args.max_iterations or 50,   # --quick trains as long: fewer data, not iterations
           "n_rounds": args.rounds or 10,
           "cg_iterations": 5,
           "optimizer": args.optimizer,
           "predict_inference": args.adaboost_inference}
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    fractions = [float(f) for f in (args.hidden or ("0.5" if args.quick else "0,0.5,0.8")).split(",")]
    hide_seeds = [int(h) for h in (args.hide_seeds or ("0" if args.quick else "0,1,2")).split(",")]
    tasks = [(name, hs) for hs in hide_seeds for name in args.data.split(",")]  # the curves' draw first
    setting = dict(quick=args.quick, seed=args.seed, subject=args.subject, train_every=args.train_every,
                   methods=methods, fractions=fractions, cfg=cfg, budgets=budgets, first_draw=hide_seeds[0])
    done = {}
    if args.jobs == 1 or len(tasks) == 1:
        _warm_up(methods, cfg)
        for name, hs in tasks:
            done[name, hs] = run_task(name, hs, setting)
    else:   # a fixed set of tasks, each self-contained and seeded: the same numbers whatever runs where
        with ProcessPoolExecutor(min(args.jobs, len(tasks)), initializer=_worker_init, initargs=(methods, cfg)) as ex:
            futures = {ex.submit(run_task, name, hs, setting): (name, hs) for name, hs in tasks}
            for fut in as_completed(futures):
                done[futures[fut]] = fut.result()
                cpu = f"{done[futures[fut]]['cpu']:.0f} CPU s" if done[futures[fut]] else "no data"
                print(f"  [{time.perf_counter() - started:6.0f} s] {futures[fut][0]}, draw {futures[fut][1]} done "
                      f"({cpu})", flush=True)
    results, pages = {}, []
    for name in args.data.split(","):
        parts = [done[name, hs] for hs in hide_seeds]
        if parts[0] is None:
            print(f"\n{name}: data set 'mit_placelab_tapia' not found — skipped")
            continue
        first = parts[0]
        print(f"\n{name}: {first['about']} Time = train + predict (s); mean over hidden-label draws {hide_seeds}")
        print(f"{'method':<17}" + "".join(f"{'hide ' + format(f, '.0%'):>24}" for f in fractions))
        print(f"{'':<17}" + "".join(f"{'top F1':>9}{'bot F1':>8}{'time':>7}" for _ in fractions))
        page = {"name": name, "results": results, "adaboost": [], "figure": None, "curves": first["curves"],
                "bp_tol": first["bp_tol"], "budgets": budgets, "curve_hidden": first["curve_hidden"],
                "about": first["about"]}
        pages.append(page)
        for m in methods:
            row = f"{m:<17}"
            for f in fractions:
                r = tuple(np.mean([p["results"][m, f] for p in parts], axis=0))
                results[(name, m, f)] = r
                row += f"{r[0]:>9.3f}{r[1]:>8.3f}{r[2]:>7.1f}"
            print(row, flush=True)
            for f in fractions:
                for hs, p in zip(hide_seeds, parts):
                    for line in p["adaboost"].get((m, f), ()):
                        page["adaboost"].append(f"{f:.0%} hidden, draw {hs}: {line}")
                        print(f"    {page['adaboost'][-1]}")
        if "ML exact" in methods:
            print("F1 points minus ML exact (top / bottom):")
            for m in methods:
                if m.startswith("AdaBoost"):
                    cells = [f"{100 * (results[(name, m, f)][j] - results[(name, 'ML exact', f)][j]):+5.1f}"
                             for f in fractions for j in (0, 1)]
                    print(f"  {m:<17}" + "   ".join(" / ".join(cells[i:i + 2]) for i in range(0, len(cells), 2)))
        if page["curves"]:
            print(f"F1 against training time ({page['curve_hidden']:.0%} hidden, draw {hide_seeds[0]}; "
                  f"budgets {budgets}):")
            for m, pts in page["curves"].items():
                print(f"  {m:<17}" + "  ".join(f"{s:6.1f}s {t:.3f}/{b:.3f}" for s, t, b in pts))
        if page["bp_tol"]:
            print("ML BP message tolerance -> top F1 / bottom F1 / seconds:  " + "   ".join(
                f"{t:.0e}: {a:.3f} / {b:.3f} / {s:.1f}" for t, a, b, s in page["bp_tol"]))
        for folder in filter(None, (args.results, args.figures)):
            if page["curves"]:
                png = plot_curves(page["curves"], f"{name}: F1 against training time, {page['curve_hidden']:.0%} "
                                  f"of the training labels hidden",
                                  pathlib.Path(folder) / f"adaboost_mrf_f1_time_{name}.png")
                page["figure"] = png.name
                print(f"figure saved to {png}")
    print(f"\nfinished in {time.perf_counter() - started:.0f} s (wall, --jobs {args.jobs})")
    if args.reference:
        check_ranking(results, methods, fractions, pathlib.Path(args.reference))
    if args.results:
        command = "python examples/dcrf_activities.py " + " ".join(sys.argv[1:] if argv is None else argv)
        out = write_results(pathlib.Path(args.results), command.strip(), pages, fractions, hide_seeds, methods,
                            time.perf_counter() - started)
        print(f"results page written to {out}")
    if args.figures:
        save_figures(args.data.split(",")[0], args, cfg, args.figures)
    return results


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
