"""structlearn.distributed.fit of a LinearChainCRF on a real distributed.LocalCluster (2 worker processes
started here): the vocabulary, labels and features counted on the workers and the L-BFGS fit over the
persisted shards equal ``fit`` on the concatenated sequences, and a worker killed mid-fit changes nothing."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import LinearChainCRF
from tests.conftest import require_module
from tests.distributed.conftest import worker_killer

dask_bag = require_module("dask.bag")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes


def _data(n_seq=40, seed=0):
    """Sequences of dict items (words, a real-valued attribute, a rare attribute) with 3 labels."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_seq):
        labs = [str(v) for v in rng.integers(0, 3, int(rng.integers(1, 9)))]
        X.append([{f"w:{lab}{int(rng.integers(0, 3))}": 1.0, f"n{int(rng.integers(0, 30))}": 1.0,
                   "x": float(rng.normal()), "bias": 1.0} for lab in labs])
        y.append(labs)
    return X, y


def _fit_both(est, X, y, client, npartitions=3, **kw):
    bag = dask_bag.from_sequence(list(zip(X, y)), npartitions=npartitions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, y)
        got = sd.fit(clone(est), bag, client, **kw)
    return ref, got


def _same_fit(ref, got, atol=1e-8):
    assert got.classes_ == ref.classes_
    assert got.attributes_ == ref.attributes_
    assert got.num_features_ == ref.num_features_
    assert got.n_iter_ == ref.n_iter_ and got.converged_ == ref.converged_   # the same iterations
    np.testing.assert_allclose([e["loss"] for e in got.training_log_],
                               [e["loss"] for e in ref.training_log_], rtol=1e-10)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=atol)


@pytest.mark.parametrize("params", [
    dict(c2=1.0, max_iterations=40),
    dict(c1=0.2, c2=0.1, min_freq=2, max_iterations=40),                          # OWL-QN, features cut
    dict(c2=0.5, start_end_features=False, all_possible_transitions=True, max_iterations=30),  # CRFsuite's
    dict(c2=0.5, all_possible_states=True, forbidden_transitions=[("0", "<end>")], max_iterations=30),
])
def test_crf_distributed_equals_fit(client, params):
    X, y = _data()
    for seq in y:  # no sequence may end in "0" under the forbidden end transition
        if seq[-1] == "0":
            seq[-1] = "1"
    ref, got = _fit_both(LinearChainCRF(**params), X, y, client)
    _same_fit(ref, got)
    Xt, _ = _data(seed=1)
    assert got.predict(Xt) == ref.predict(Xt)


def test_crf_worker_killed_mid_fit_leaves_the_result_unchanged(client):
    X, y = _data(seed=4)
    kill_one, killed = worker_killer(client, 3)

    ref, got = _fit_both(LinearChainCRF(c2=1.0, max_iterations=25), X, y, client, npartitions=4,
                         callback=kill_one)
    assert killed
    _same_fit(ref, got)
    client.wait_for_workers(2, timeout=60)


def test_crf_bad_arguments(client):
    X, y = _data(n_seq=4)
    bag = dask_bag.from_sequence(list(zip(X, y)), npartitions=2)
    with pytest.raises(ValueError, match="`data` must be a dask bag of \\(items, labels\\) pairs"):
        sd.fit(LinearChainCRF(), [X], client)
    with pytest.raises(ValueError, match="needs algorithm='lbfgs'"):
        sd.fit(LinearChainCRF(algorithm="ap"), bag, client)
    with pytest.raises(ValueError, match="must be a pair \\(items, labels\\)"):
        sd.fit(LinearChainCRF(), dask_bag.from_sequence(X, npartitions=2), client)
    with pytest.raises(ValueError, match="forbids"):  # a gold transition that the model forbids
        sd.fit(LinearChainCRF(forbidden_transitions=[(a, b) for a in "012" for b in "012"]), bag, client)
    with pytest.raises(ValueError, match="`c2`"):
        sd.fit(LinearChainCRF(c2=-1.0), bag, client)
