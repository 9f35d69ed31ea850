"""structlearn.distributed.fit of HigherOrderCRF and TreeCRF with partial labels: bag elements that end with
``allowed`` (label names per token / node: None, a label, or a set/list of labels), mixed with elements
without it — (items, labels, allowed) triples next to (items, labels) pairs for HigherOrderCRF; (items,
labels, parents, edge_attributes, allowed) 5-tuples (edge_attributes None when the bag has none) next to
triples / 4-tuples for TreeCRF. The fit equals ``fit(..., allowed=mask)`` on the concatenated data (the
same iterations, losses to rtol 1e-10, weights to 1e-8), the mask built here in ``classes_`` order (the
elements without ``allowed``: their gold label only); malformed entries, unknown labels, empty label sets,
triples with ``segments=True`` and partial labels that leave a tree no labelling ``forbidden_edges``
permits are clear ValueErrors naming the element and the partition.

The cluster is the 2-worker-process ``distributed.LocalCluster`` of ``conftest.client``."""
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone

from structlearn import HigherOrderCRF, TreeCRF
from tests.conftest import require_module
from tests.distributed.test_crf_partial_labels import _elements, _mask, _partial
from tests.distributed.test_distributed_semicrf_tree_ho import _chain_data, _same_fit, _tree_data

dask_bag = require_module("dask.bag")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes


def _fit_both(est, X, y, elements, mask, client, npartitions=3, **kw):
    bag = dask_bag.from_sequence(elements, npartitions=npartitions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, y, allowed=mask, **kw)
        got = sd.fit(clone(est), bag, client)
    return ref, got


def _fails(client, est, elements, match, npartitions=2):
    bag = dask_bag.from_sequence(elements, npartitions=npartitions)
    with pytest.raises(ValueError, match=match):
        sd.fit(est, bag, client)


# ---------------------------------------------------------------------------------------------------
# HigherOrderCRF
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("params, share", [
    (dict(order=2, c2=1.0, max_iterations=25), 1.0),                                   # sparse, triples only
    (dict(order=2, c2=0.5, max_iterations=25), 0.5),                                   # sparse, mixed
    (dict(order=2, patterns="dense", c1=0.1, c2=0.1, min_freq=2, max_iterations=25), 0.5),   # OWL-QN, cut
    (dict(order=2, state_order=2, all_possible_transitions=True, max_iterations=15), 0.7),
])
def test_higher_order_triples_equal_fit_with_allowed(client, params, share):
    X, y = _chain_data(seed=1)
    partial = _partial(y, np.random.default_rng(2), share)
    if share < 1:
        partial[-8:] = [None] * 8                     # the last partition: pairs only (no mask on that shard)
    ref, got = _fit_both(HigherOrderCRF(**params), X, y, _elements(X, y, partial), _mask(y, partial),
                         client)
    _same_fit(ref, got, X)
    assert got.patterns_ == ref.patterns_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = HigherOrderCRF(**params).fit(X, y)
    assert np.abs(full.coef_ - got.coef_).max() > 1e-3   # the partial labels changed the objective


def test_higher_order_bad_partial_labels(client):
    X, y = _chain_data(n_seq=6, seed=4)
    el = _elements(X, y, [None] * 6)
    x0, y0 = X[-1], y[-1]                               # element 2 of partition 1
    n = len(y0)
    est = HigherOrderCRF(max_iterations=2)

    def with_last(allowed):
        return el[:-1] + [(x0, y0, allowed)]

    _fails(client, est, with_last({"A"}), r"element 2 of partition 1: `allowed` must be None or a list "
                                          r"with one entry .* per token; got a set")
    _fails(client, est, with_last([None] * (n + 1)),
           rf"element 2 of partition 1: `allowed` must have one entry per token \({n} labels\); got {n + 1}")
    _fails(client, est, with_last([{"A": 1}] + [None] * (n - 1)),
           r"element 2 of partition 1: `allowed\[0\]` must be None \(every label\), a label or a set/list "
           r"of labels; got \{'A': 1\}")
    _fails(client, est, with_last([None] * (n - 1) + [[]]),
           rf"element 2 of partition 1: token {n - 1} has no allowed label")
    _fails(client, est, with_last(np.ones((n, 3), bool)), r"element 2 of partition 1: .* boolean array")
    _fails(client, est, with_last([None] * (n - 1) + [{"B", "Z"}]),
           rf"element 2 of partition 1: `allowed\[{n - 1}\]` names label 'Z', which is not a label of the "
           rf"model")
    _fails(client, est, el[:-1] + [(x0, y0, None, None)],
           r"must be a pair \(items, labels\) or a triple \(items, labels, allowed\) of one sequence; "
           r"element 2 of partition 1 is a tuple of length 4")
    _fails(client, HigherOrderCRF(segments=True, max_iterations=2), with_last(None),
           r"element 2 of partition 1: `allowed` \(partial labels\) is not supported with segments=True")


# ---------------------------------------------------------------------------------------------------
# TreeCRF
# ---------------------------------------------------------------------------------------------------
def _tree_elements(X, y, P, E, partial, edges):
    """Per tree: a triple / 4-tuple without partial labels, else a 5-tuple (edge attributes None when
    ``edges`` is False) ending with ``allowed``."""
    out = []
    for x, s, p, e, a in zip(X, y, P, E, partial):
        base = (x, s, p, e) if edges else (x, s, p)
        out.append(base if a is None else (x, s, p, e if edges else None, None if isinstance(a, str) else a))
    return out


@pytest.mark.parametrize("edges, params", [
    (False, dict(c2=1.0, max_iterations=25)),
    (True, dict(c1=0.1, c2=0.1, min_freq=2, max_iterations=25)),                          # OWL-QN, cut
    (True, dict(c2=0.5, root_features=False, all_possible_edges=True, max_iterations=20)),
    (False, dict(c2=0.5, forbidden_edges=[("C", "<root>")], max_iterations=20)),
])
def test_tree_crf_partial_labels_equal_fit_with_allowed(client, edges, params):
    X, y, P, E = _tree_data(seed=1)
    if params.get("forbidden_edges"):   # gold roots (pairs) must avoid C; the allowed sets may hold it
        y = [["A" if (p < 0 and lab == "C") else lab for lab, p in zip(labs, par)] for labs, par in zip(y, P)]
    partial = _partial(y, np.random.default_rng(3), share=0.6)
    partial[-8:] = [None] * 8                           # the last partition: no partial labels
    partial[0] = [{"A", "C"} if p < 0 else None for p in P[0]]
    kw = dict(parents=P, edge_attributes=E if edges else None)
    ref, got = _fit_both(TreeCRF(**params), X, y, _tree_elements(X, y, P, E, partial, edges),
                         _mask(y, partial), client, **kw)
    assert got.classes_ == ref.classes_ and got.attributes_ == ref.attributes_
    assert got.edge_attributes_ == ref.edge_attributes_ and got.num_features_ == ref.num_features_
    assert got.n_iter_ == ref.n_iter_ and got.converged_ == ref.converged_
    np.testing.assert_allclose([e["loss"] for e in got.training_log_],
                               [e["loss"] for e in ref.training_log_], rtol=1e-10)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=1e-8)
    assert got.predict(X, **kw) == ref.predict(X, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = TreeCRF(**params).fit(X, y, **kw)
    assert np.abs(full.coef_ - got.coef_).max() > 1e-3


def test_tree_crf_bad_partial_labels(client):
    X, y, P, E = _tree_data(n=6, seed=4)
    el = list(zip(X, y, P))
    x0, y0, p0 = X[-1], y[-1], P[-1]                    # element 2 of partition 1
    n = len(y0)
    est = TreeCRF(max_iterations=2)

    def with_last(allowed, e=None):
        return el[:-1] + [(x0, y0, p0, e, allowed)]

    _fails(client, est, with_last("A"), r"element 2 of partition 1: `allowed` must be None or a list "
                                        r"with one entry .* per node; got a str")
    _fails(client, est, with_last([None] * (n + 1)),
           rf"element 2 of partition 1: `allowed` must have one entry per node \({n} labels\); got {n + 1}")
    _fails(client, est, with_last([("A", ("B",))] + [None] * (n - 1)),
           r"element 2 of partition 1: `allowed\[0\]` must be None \(every label\), a label or a set/list")
    _fails(client, est, with_last([set()] + [None] * (n - 1)),
           r"element 2 of partition 1: node 0 has no allowed label")
    _fails(client, est, with_last(np.ones((n, 3), bool)), r"element 2 of partition 1: .* boolean array")
    _fails(client, est, with_last([None] * (n - 1) + ["Z"]),
           rf"element 2 of partition 1: `allowed\[{n - 1}\]` names label 'Z', which is not a label of the "
           rf"model")
    _fails(client, est, el[:-1] + [(x0, y0, p0, None, None, None)],
           r"a triple \(items, labels, parents\) or a 4-tuple \(items, labels, parents, edge_attributes\) "
           r"or a 5-tuple \(items, labels, parents, edge_attributes, allowed\) of one tree; element 2 of "
           r"partition 1 is a tuple of length 6")
    _fails(client, est, with_last(None, E[-1]), r"partition 1: give edge attributes with every tree")
    # the root may only be C, which `forbidden_edges` forbids at the root
    y_ok = [["A" if (p < 0 and lab == "C") else lab for lab, p in zip(labs, par)] for labs, par in zip(y, P)]
    el = list(zip(X, y_ok, P))
    _fails(client, TreeCRF(max_iterations=2, forbidden_edges=[("C", "<root>")]),
           el[:4] + [(x0, y_ok[-1], p0, None, [{"C"} if p < 0 else None for p in p0])] + el[5:],
           r"element 1 of partition 1: every labelling .* `forbidden_edges` forbids")
    # a child that may only be A under a parent that may only be B, a pair that is forbidden
    tree = ([{"w": "w00"}, {"w": "w11"}], ["A", "B"], [1, -1])
    _fails(client, TreeCRF(max_iterations=2, forbidden_edges=[("A", "B")]),
           [(x, [lab if lab != "A" else "C" for lab in s], p) for x, s, p in el[:3]] +
           [tree + (None, [None, {"B"}]), tree + (None, [{"A"}, {"B"}])],
           r"element 1 of partition 1: every labelling .* `forbidden_edges` forbids")


# -- the worker-side feasibility check of trees, without a cluster ------------------------------------
@settings(max_examples=80)
@given(st.data())
def test_tree_feasibility_check_matches_the_enumeration(data):
    from structlearn.distributed._tree import _check_feasible
    from structlearn.crf.features import AttributeVocabulary

    K = data.draw(st.integers(1, 3))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    local = []
    for T in sizes:   # parents in any order: a random permutation of a random recursive tree
        order = data.draw(st.permutations(range(T)))
        par = [-1] * T
        for i in range(1, T):
            par[order[i]] = order[data.draw(st.integers(0, i - 1))]
        local += par
    local = np.array(local)
    N = len(local)
    mask = data.draw(arrays(bool, (N, K)))
    mask[np.arange(N), data.draw(arrays(np.int64, N, elements=st.integers(0, K - 1)))] = True   # non-empty
    forb, froot = data.draw(arrays(bool, (K, K))), data.draw(arrays(bool, K))
    nodes = AttributeVocabulary(["b"]).encode([[{"b": 1.0}] * T for T in sizes], None)
    off = np.concatenate([[0], np.cumsum(sizes)])

    def feasible(j):
        m, par = mask[off[j]:off[j + 1]], local[off[j]:off[j + 1]]
        return any(not any(froot[z[n]] if par[n] < 0 else forb[z[n], z[par[n]]] for n in range(len(z)))
                   for z in itertools.product(*[np.flatnonzero(row).tolist() for row in m]))

    bad = [j for j in range(len(sizes)) if not feasible(j)]
    if bad:
        with pytest.raises(ValueError, match=f"element {bad[0]} of partition 7: every labelling"):
            _check_feasible(mask, nodes, local, forb, froot, 7)
    else:
        _check_feasible(mask, nodes, local, forb, froot, 7)
