"""structlearn.distributed.fit of MultiChannelHSMM on a real distributed.LocalCluster (2 worker processes):
equal to ``fit`` on the concatenated data (exact and factored inference, bags and delayed shards, partial
labels), ``init`` semantics as documented, and ``max_duration=None`` the longest sequence over all shards."""
import copy
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn.hsmm.multichannel import MultiChannelHSMM
from structlearn.learning.shards import map_shards, split_shards
from tests.conftest import require_module
from tests.hsmm.test_multichannel_hsmm import coupled_truth
from tests.hsmm.test_multichannel_hsmm_shards import _same_fit

dask_bag = require_module("dask.bag")
dask = require_module("dask")
distributed = require_module("distributed")
sd = require_module("structlearn.distributed")

pytestmark = pytest.mark.slow  # a real cluster of 2 worker processes

RTOL = 1e-8


def _data(lengths=(10, 8, 13, 9, 12, 7), seed=0):
    """Sequences of the coupled two-channel truth (unequal lengths: the longest is not in the first
    partition), their packed rows, lengths and states."""
    truth = coupled_truth()
    rng = np.random.RandomState(seed)
    out = [truth.sample(T, rng) for T in lengths]
    seqs = [x for x, _ in out]
    return seqs, np.concatenate(seqs), np.array(lengths), np.concatenate([s for _, s in out])


def _delayed_parts(X, L, labels=None, cuts=(0, 2, 4, 6)):
    off = np.concatenate([[0], np.cumsum(L)])

    def part(a, b):
        block = (X[off[a]:off[b]], L[a:b])
        return block if labels is None else block + (labels[off[a]:off[b]],)

    return [dask.delayed(part)(a, b) for a, b in zip(cuts[:-1], cuts[1:])]


def _quiet(f, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        return f(*args, **kw)


def test_bag_exact_equals_fit_and_max_duration_over_shards(client):
    seqs, X, L, _ = _data()
    est = MultiChannelHSMM(2, max_duration=None, n_iter=4, random_state=0)
    ref = _quiet(clone(est).fit, X, L)
    got = _quiet(sd.fit, clone(est), dask_bag.from_sequence(seqs, npartitions=3), client, init=(X, L),
                 split_every=2)
    assert got.max_duration_ == ref.max_duration_ == [13, 13]  # the longest sequence, in partition 1
    _same_fit(ref, got, RTOL)


@pytest.mark.parametrize("inference", ["exact", "factored"])
def test_delayed_shards_equal_fit(client, inference):
    # factored: every shard sweeps to its own convergence, so the fits agree to within sweep_tol
    _, X, L, _ = _data(seed=1)
    est = MultiChannelHSMM([2, 3], max_duration=[5, 4], n_iter=4, inference=inference, sweep_tol=1e-14,
                           max_sweeps=300, random_state=1)
    ref = _quiet(clone(est).fit, X, L)
    got = _quiet(sd.fit, clone(est), _delayed_parts(X, L), client, init=(X, L))
    _same_fit(ref, got, RTOL)


def test_init_first_initialises_from_the_first_shard(client):
    _, X, L, _ = _data(seed=2)
    parts = _delayed_parts(X, L)
    est = MultiChannelHSMM(2, max_duration=6, n_iter=3, random_state=0)
    got = _quiet(sd.fit, clone(est), parts, client)  # init="first"
    ref = clone(est)
    n0 = int(L[:2].sum())
    shards = split_shards(ref._shard_from_data(X, L), 3)
    _quiet(ref._fit_sharded, lambda f, p: map_shards(f, p, shards), (X[:n0], L[:2], None), int(L.max()),
           X.shape[1], X)
    _same_fit(ref, got, RTOL)


def _preset(est):
    """``est`` with the parameters of the coupled truth (``init_params=""``: nothing to initialise)."""
    truth = coupled_truth()
    est = est.set_params(init_params="", max_duration=8)
    for name in ("startprob_", "coupling_", "transmat_", "duration_", "emission_"):
        setattr(est, name, copy.deepcopy(getattr(truth, name)))
    return est


@pytest.mark.parametrize("inference", ["exact", "factored"])
def test_partial_labels_with_preset_parameters_equal_fit(client, inference):
    _, X, L, S = _data(seed=3)
    labels = np.where(np.random.RandomState(0).rand(*S.shape) < 0.3, S, -1)
    est = MultiChannelHSMM(2, duration="poisson", n_iter=3, inference=inference, sweep_tol=1e-14,
                           max_sweeps=300)
    ref = _quiet(_preset(clone(est)).fit, X, L, labels)
    got = _quiet(sd.fit, _preset(clone(est)), _delayed_parts(X, L, labels), client, init=(X, L))
    # Poisson durations: the M-step is a Newton solve (converged to ~1e-8 relative), so sums in another
    # order move the durations by that much (as for HiddenSemiMarkovModel in test_distributed_fit.py)
    _same_fit(ref, got, 1e-6, atol=1e-8)


def test_partial_labels_initialise_as_fit(client):
    # the known labels (N, C) of the init data come from MultiChannelHSMM._shard_known
    _, X, L, S = _data(seed=4)
    labels = np.where(np.random.RandomState(1).rand(*S.shape) < 0.3, S, -1)
    est = MultiChannelHSMM(2, max_duration=6, n_iter=3, random_state=0)
    ref = _quiet(clone(est).fit, X, L, labels)
    got = _quiet(sd.fit, clone(est), _delayed_parts(X, L, labels), client, init=(X, L, labels))
    _same_fit(ref, got, RTOL)


def test_unsupported_emission_is_refused(client):
    _, X, L, _ = _data(seed=5)
    with pytest.raises(ValueError, match="no sufficient statistics for the emission family GaussianMixture"):
        sd.fit(MultiChannelHSMM(2, emission="gmm", max_duration=4, n_iter=1), _delayed_parts(X, L), client)
