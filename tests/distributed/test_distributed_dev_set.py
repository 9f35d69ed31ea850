"""Held-out data in structlearn.distributed.fit: ``X_dev``, ``y_dev`` (TreeCRF also ``parents_dev``,
``edge_attributes_dev``) of the LinearChainCRF, HigherOrderCRF and TreeCRF stay on the client, are encoded
with the vocabulary and labels merged over the shards, and give the ``"dev_accuracy"`` entries of
``training_log_`` that ``fit(X, y, X_dev, y_dev)`` on the concatenated data gives (with the same weights,
to 1e-8, and iterations); bad held-out data raise ``fit``'s own error; the estimators whose distributed
fit takes no held-out data (SemiMarkovCRF, GraphCRF, AdaBoostMRF, the EM models, and the tree arguments of
the chain CRFs) refuse them with a ValueError naming the argument and the estimator.

The cluster is the 2-worker-process ``distributed.LocalCluster`` of ``conftest.client``."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import (AdaBoostMRF, GaussianHMM, GraphCRF, HiddenSemiMarkovModel, HigherOrderCRF,
                         LinearChainCRF, SemiMarkovCRF, TreeCRF)
from tests.conftest import require_module
from tests.distributed.test_distributed_crf import _data
from tests.distributed.test_distributed_semicrf_tree_ho import _chain_data, _tree_data

dask_bag = require_module("dask.bag")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes


def _fit_both(est, client, X, y, X_dev, y_dev, elements=None, train_kw=None, dev_kw=None):
    """(``fit(X, y, X_dev, y_dev, **train_kw, **dev_kw)``, ``distributed.fit`` of the bag of ``elements``
    (default: (items, labels) pairs) in 3 partitions with the same held-out data)."""
    bag = dask_bag.from_sequence(elements or list(zip(X, y)), npartitions=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, y, X_dev, y_dev, **(train_kw or {}), **(dev_kw or {}))
        got = sd.fit(clone(est), bag, client, X_dev=X_dev, y_dev=y_dev, **(dev_kw or {}))
    return ref, got


def _same_dev_fit(ref, got):
    assert got.classes_ == ref.classes_
    assert got.n_iter_ == ref.n_iter_ and got.converged_ == ref.converged_
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=1e-8)
    acc = [e["dev_accuracy"] for e in ref.training_log_]
    assert len(acc) == ref.n_iter_ and len(set(acc)) > 1          # logged every iteration, and it moves
    assert [e["dev_accuracy"] for e in got.training_log_] == acc
    assert all("dev_counts" not in e for e in got.training_log_)


@pytest.mark.parametrize("params", [
    dict(c2=1.0, max_iterations=25),
    dict(c1=0.2, c2=0.1, min_freq=2, max_iterations=25),                          # OWL-QN, features cut
])
def test_linear_chain_dev_accuracy_equals_fit(client, params):
    X, y = _data(n_seq=30)
    X_dev, y_dev = _data(n_seq=10, seed=7)      # attributes unseen in training among them
    _same_dev_fit(*_fit_both(LinearChainCRF(**params), client, X, y, X_dev, y_dev))


@pytest.mark.parametrize("params", [
    dict(order=2, c2=1.0, max_iterations=20),
    dict(order=2, segments=True, patterns="dense", c2=0.5, max_iterations=15),
])
def test_higher_order_dev_accuracy_equals_fit(client, params):
    X, y = _chain_data(n_seq=24)
    X_dev, y_dev = _chain_data(n_seq=8, seed=7)
    _same_dev_fit(*_fit_both(HigherOrderCRF(**params), client, X, y, X_dev, y_dev))


@pytest.mark.parametrize("edges", [False, True])
def test_tree_crf_dev_accuracy_equals_fit(client, edges):
    X, y, P, E = _tree_data(n=24)
    X_dev, y_dev, P_dev, E_dev = _tree_data(n=8, seed=7)
    train_kw = dict(parents=P, edge_attributes=E if edges else None)
    dev_kw = dict(parents_dev=P_dev, edge_attributes_dev=E_dev if edges else None)
    elements = list(zip(X, y, P, E)) if edges else list(zip(X, y, P))
    _same_dev_fit(*_fit_both(TreeCRF(c2=1.0, max_iterations=20), client, X, y, X_dev, y_dev, elements,
                             train_kw, dev_kw))


def _same_error(client, est, X, y, dev, elements=None, train_kw=None):
    """``fit`` and ``distributed.fit`` with the held-out keyword arguments ``dev`` raise the same
    ValueError (the message is returned)."""
    bag = dask_bag.from_sequence(elements or list(zip(X, y)), npartitions=2)
    with pytest.raises(ValueError) as ref:
        clone(est).fit(X, y, **(train_kw or {}), **dev)
    with pytest.raises(ValueError) as got:
        sd.fit(clone(est), bag, client, **dev)
    assert str(got.value) == str(ref.value)
    return str(got.value)


def test_bad_held_out_labels_raise_fits_error(client):
    X, y = _data(n_seq=8)
    X_dev, y_dev = _data(n_seq=3, seed=7)
    est = LinearChainCRF(max_iterations=2)
    assert "y_dev" in _same_error(client, est, X, y, dict(X_dev=X_dev, y_dev=[y_dev[0]] + y_dev[1:-1]))
    short = [list(s) for s in y_dev]
    short[1] = short[1][:-1] if len(short[1]) > 1 else short[1] + ["0"]
    _same_error(client, est, X, y, dict(X_dev=X_dev, y_dev=short))          # a sequence of another length
    unknown = [list(s) for s in y_dev]
    unknown[2][0] = "Z"
    assert "Z" in _same_error(client, est, X, y, dict(X_dev=X_dev, y_dev=unknown))

    Xc, yc = _chain_data(n_seq=8)
    Xc_dev, yc_dev = _chain_data(n_seq=3, seed=7)
    yc_dev[1] = yc_dev[1] + ["A"]
    _same_error(client, HigherOrderCRF(order=2, max_iterations=2), Xc, yc, dict(X_dev=Xc_dev, y_dev=yc_dev))

    Xt, yt, P, _ = _tree_data(n=8)
    Xt_dev, yt_dev, P_dev, _ = _tree_data(n=3, seed=7)
    est = TreeCRF(max_iterations=2)
    unknown = [list(s) for s in yt_dev]
    unknown[0][0] = "Z"
    _same_error(client, est, Xt, yt, dict(X_dev=Xt_dev, y_dev=unknown, parents_dev=P_dev),
                list(zip(Xt, yt, P)), dict(parents=P))
    bad_parents = [list(p) for p in P_dev]
    bad_parents[1] = [5] * len(bad_parents[1])
    assert "parents_dev" in _same_error(client, est, Xt, yt, dict(X_dev=Xt_dev, y_dev=yt_dev,
                                                                   parents_dev=bad_parents),
                                        list(zip(Xt, yt, P)), dict(parents=P))


@pytest.mark.parametrize("est, arg", [
    (SemiMarkovCRF(), "X_dev"),
    (GraphCRF(), "y_dev"),
    (AdaBoostMRF(), "X_dev"),
    (HiddenSemiMarkovModel(), "X_dev"),
    (GaussianHMM(), "y_dev"),
    (LinearChainCRF(), "parents_dev"),
    (HigherOrderCRF(), "edge_attributes_dev"),
])
def test_estimators_without_held_out_data_refuse_it(client, est, arg):
    bag = dask_bag.from_sequence([([{"a": 1.0}], ["A"])], npartitions=1)
    with pytest.raises(ValueError, match=f"`{arg}` is not taken by the distributed fit of a "
                                         f"{type(est).__name__}"):
        sd.fit(est, bag, client, **{arg: [[{"a": 1.0}]]})
