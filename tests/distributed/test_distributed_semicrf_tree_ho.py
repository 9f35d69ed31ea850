"""structlearn.distributed.fit of SemiMarkovCRF (and TreeCRF, HigherOrderCRF where wired) on a real
distributed.LocalCluster (2 worker processes started here): the vocabulary, labels, segment limits and
features counted on the workers and the L-BFGS fit over the persisted shards equal ``fit`` on the
concatenated data (weights within 1e-8, the same iterations, the same predictions); bad bag elements are a
clear ValueError."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import SemiMarkovCRF
from tests.conftest import require_module
from tests.distributed.test_distributed_crf import _same_fit as _same_chain_fit

dask_bag = require_module("dask.bag")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes

WORDS = ["The", "cat", "sat", "on", "Big", "Mat", "dog", "ran", "a", "Red"]


def _fit_both(est, X, y, client, elements=None, npartitions=3):
    bag = dask_bag.from_sequence(elements or list(zip(X, y)), npartitions=npartitions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, y)
        got = sd.fit(clone(est), bag, client)
    return ref, got


def _same_fit(ref, got, X, atol=1e-8):
    _same_chain_fit(ref, got, atol)
    assert got.predict(X) == ref.predict(X)


# ---------------------------------------------------------------------------------------------------
# SemiMarkovCRF
# ---------------------------------------------------------------------------------------------------
def _segment_data(n_seq=30, seed=0, fmt="bio"):
    """Sequences of dict items with chunk tags (bio), runs of labels, or (start, end, label) segments."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_seq):
        items, tags, segs, t, prev = [], [], [], 0, None
        for _ in range(int(rng.integers(1, 4))):
            lab = prev = [lab for lab in ("NP", "VP", "O") if lab != prev][int(rng.integers(0, 2))]
            n = 1 if lab == "O" else int(rng.integers(1, 4))
            for u in range(n):
                w = WORDS[int(rng.integers(0, len(WORDS)))]
                items.append({"w[0]": w, f"n{int(rng.integers(0, 12))}": 1.0, "x": float(rng.normal()),
                              f"{lab}{int(rng.integers(0, 2))}": 1.0})
                tags.append("O" if lab == "O" else ("B-" if u == 0 else "I-") + lab)
            if lab != "O":
                segs.append((t, t + n, lab))
            t += n
        X.append(items)
        y.append(segs if fmt == "segments" else
                 [g.split("-")[-1] for g in tags] if fmt == "runs" else tags)
    return X, y


@pytest.mark.parametrize("fmt, params", [
    ("bio", dict(c2=1.0, max_iterations=30)),
    ("runs", dict(c1=0.1, c2=0.1, min_freq=2, allow_same_label=True, max_iterations=30)),   # OWL-QN, cut
    ("segments", dict(c2=0.5, segment_features=("first", "last", "span", "caps"), min_freq=2,
                      max_segment_length="global", all_possible_transitions=True, max_iterations=30)),
    ("bio", dict(c2=0.5, all_possible_states=True, transition_attributes=["w[0]:Big"], max_iterations=20)),
])
def test_semicrf_distributed_equals_fit(client, fmt, params):
    X, y = _segment_data(fmt=fmt)
    ref, got = _fit_both(SemiMarkovCRF(**params), X, y, client)
    _same_fit(ref, got, X)
    assert got.label_format_ == ref.label_format_ and got.max_lengths_ == ref.max_lengths_
    np.testing.assert_array_equal(got._span_hash, ref._span_hash)
    assert got._tok_index == ref._tok_index
    assert got.predict_segments(X) == ref.predict_segments(X)


def test_semicrf_distributed_tokens_triples(client):
    """Token strings given as the third element (``fit``'s ``tokens``) for the span feature."""
    X, y = _segment_data(n_seq=16, seed=3)
    tokens = [[it["w[0]"].lower() for it in seq] for seq in X]
    est = SemiMarkovCRF(c2=1.0, segment_features=("span",), max_iterations=15)
    bag = dask_bag.from_sequence(list(zip(X, y, tokens)), npartitions=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(X, y, tokens=tokens)
        got = sd.fit(clone(est), bag, client)
    assert got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=1e-8)
    assert got._tok_index == ref._tok_index


def test_semicrf_distributed_bad_elements(client):
    X, y = _segment_data(n_seq=6)
    with pytest.raises(ValueError, match="pair \\(items, labels\\) or a triple"):
        sd.fit(SemiMarkovCRF(), dask_bag.from_sequence([(X[0],)] + list(zip(X, y)), npartitions=2), client)
    with pytest.raises(ValueError, match="dask bag"):
        sd.fit(SemiMarkovCRF(), list(zip(X, y)), client)
    with pytest.raises(ValueError, match="allow_same_label=False"):
        sd.fit(SemiMarkovCRF(label_format="segments"),
               dask_bag.from_sequence([(X[0][:2], [(0, 1, "A"), (1, 2, "A")])] * 2, npartitions=1), client)


# ---------------------------------------------------------------------------------------------------
# TreeCRF
# ---------------------------------------------------------------------------------------------------
def _tree_data(n=30, seed=0):
    """Random trees (parents before or after their children) whose labels follow the parent's label."""
    rng = np.random.default_rng(seed)
    X, y, P, E = [], [], [], []
    for _ in range(n):
        T = int(rng.integers(1, 7))
        order = rng.permutation(T)
        par = np.full(T, -1)
        for i in range(1, T):
            par[order[i]] = order[int(rng.integers(0, i))]
        lab = [None] * T
        for i in range(T):
            n_ = order[i]
            p = par[n_]
            lab[n_] = int(rng.integers(0, 3)) if p < 0 or rng.random() < 0.3 else (lab[p] + 1) % 3
        X.append([{"w": f"w{lab[t]}{int(rng.integers(0, 3))}", f"n{int(rng.integers(0, 10))}": 1.0,
                   "num": float(rng.normal())} for t in range(T)])
        y.append(["ABC"[k] for k in lab])
        P.append(par.tolist())
        E.append([f"rel{int(rng.integers(0, 3))}" for _ in range(T)])
    return X, y, P, E


@pytest.mark.parametrize("edges, params", [
    (False, dict(c2=1.0, max_iterations=30)),
    (True, dict(c1=0.1, c2=0.1, min_freq=2, max_iterations=30)),                      # OWL-QN, cut
    (True, dict(c2=0.5, root_features=False, all_possible_edges=True, max_iterations=20)),  # value rule
    (False, dict(c2=0.5, all_possible_states=True, forbidden_edges=[("C", "<root>")], max_iterations=20)),
])
def test_tree_crf_distributed_equals_fit(client, edges, params):
    from structlearn import TreeCRF

    X, y, P, E = _tree_data()
    if params.get("forbidden_edges"):
        y = [["A" if (p < 0 and lab == "C") else lab for lab, p in zip(labs, par)] for labs, par in zip(y, P)]
    kw = dict(parents=P, edge_attributes=E if edges else None)
    elements = list(zip(X, y, P, E)) if edges else list(zip(X, y, P))
    bag = dask_bag.from_sequence(elements, npartitions=3)
    est = TreeCRF(**params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(X, y, **kw)
        got = sd.fit(clone(est), bag, client)
    assert got.classes_ == ref.classes_ and got.attributes_ == ref.attributes_
    assert got.edge_attributes_ == ref.edge_attributes_ and got.num_features_ == ref.num_features_
    assert got.n_iter_ == ref.n_iter_ and got.converged_ == ref.converged_
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=1e-8)
    assert got.predict(X, **kw) == ref.predict(X, **kw)


def test_tree_crf_distributed_bad_elements(client):
    from structlearn import TreeCRF

    X, y, P, E = _tree_data(n=6)
    with pytest.raises(ValueError, match="triple \\(items, labels, parents\\)"):
        sd.fit(TreeCRF(), dask_bag.from_sequence(list(zip(X, y)), npartitions=2), client)
    with pytest.raises(ValueError, match="edge attributes with every tree"):
        sd.fit(TreeCRF(), dask_bag.from_sequence(list(zip(X[:3], y[:3], P[:3], E[:3])) +
                                                 list(zip(X[3:], y[3:], P[3:])), npartitions=2), client)
    with pytest.raises(ValueError, match="algorithm='lbfgs'"):
        sd.fit(TreeCRF(algorithm="ap"), dask_bag.from_sequence(list(zip(X, y, P)), npartitions=2), client)


# ---------------------------------------------------------------------------------------------------
# HigherOrderCRF
# ---------------------------------------------------------------------------------------------------
def _chain_data(n_seq=30, seed=0):
    """Label sequences with runs (for segments) and a second-order dependency, dict items."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_seq):
        labs = []
        while len(labs) < int(rng.integers(1, 9)):
            follow = labs and rng.random() < 0.6   # the label after the previous one, else any
            lab = "ABC"[("ABC".index(labs[-1]) + 1) % 3 if follow else int(rng.integers(0, 3))]
            labs.extend([lab] * int(rng.integers(1, 3)))
        X.append([{f"w:{lab}{int(rng.integers(0, 3))}": 1.0, f"n{int(rng.integers(0, 10))}": 1.0,
                   "x": float(rng.normal())} for lab in labs])
        y.append(labs)
    return X, y


@pytest.mark.parametrize("params", [
    dict(order=2, c2=1.0, max_iterations=30),                                        # sparse patterns
    dict(order=2, patterns="dense", c1=0.1, c2=0.1, min_freq=2, max_iterations=30),   # OWL-QN, cut
    dict(order=3, state_order=3, all_possible_states=True, max_iterations=15),
    dict(order=2, segments=True, patterns="dense", c2=0.5, min_freq=2, max_iterations=25),              # dense segments
    dict(order=2, segments=True, patterns="sparse", state_order=2, all_possible_transitions=True,
         max_iterations=20),
])
def test_higher_order_distributed_equals_fit(client, params):
    from structlearn import HigherOrderCRF

    X, y = _chain_data()
    ref, got = _fit_both(HigherOrderCRF(**params), X, y, client)
    _same_fit(ref, got, X)
    assert got.patterns_ == ref.patterns_
    if params.get("segments"):
        np.testing.assert_array_equal(got.model_.max_lengths, ref.model_.max_lengths)


def test_higher_order_distributed_bad_elements(client):
    from structlearn import HigherOrderCRF

    X, y = _chain_data(n_seq=6)
    with pytest.raises(ValueError, match="pair \\(items, labels\\)"):
        sd.fit(HigherOrderCRF(), dask_bag.from_sequence([(X[0], y[0], None, None)] + list(zip(X, y)),
                                                        npartitions=2), client)
    with pytest.raises(ValueError, match="training set is empty"):
        sd.fit(HigherOrderCRF(), dask_bag.from_sequence([([], [])] * 2, npartitions=2), client)
