"""MultiChannelHSMM on the per-shard interface (issue 16): the shard statistics are additive and agree with
brute-force enumeration, ``n_jobs`` blocks give the one-process fit, the distributed path (emission
sufficient statistics, no posteriors) gives the same fit in this process, and ``partial_fit`` (stepwise
EM)."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from structlearn.hsmm.multichannel import MultiChannelHSMM
from structlearn.hsmm import _multichannel_em as mce
from structlearn.learning.shards import make_shard, map_shards, reduce_statistics, split_shards
from tests.hsmm.test_multichannel_hsmm import coupled_truth, random_model, simulate
from tests.oracles.multichannel_counts_oracle import expected_counts

RTOL = 1e-10


def _data(n_seq=6, T=30, seed=0):
    X, S, lengths = simulate(coupled_truth(), n_seq, T, seed)
    return X, S, np.array(lengths)


def _partial_labels(S, frac=0.3, seed=1):
    rng = np.random.RandomState(seed)
    return np.where(rng.rand(*S.shape) < frac, S, -1)


def _quiet_fit(est, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        return est.fit(*args, **kw)


def _same_fit(ref, got, rtol, atol=1e-12):
    assert len(got.monitor_.history) == len(ref.monitor_.history)  # the same iterations
    np.testing.assert_allclose(got.monitor_.history, ref.monitor_.history, rtol=rtol, atol=0)
    assert got.converged_ == ref.converged_
    np.testing.assert_allclose(got.coupling_, ref.coupling_, rtol=rtol, atol=atol)
    for c in range(len(ref.startprob_)):
        np.testing.assert_allclose(got.startprob_[c], ref.startprob_[c], rtol=rtol, atol=atol)
        for k in range(len(ref.startprob_)):
            np.testing.assert_allclose(got.transmat_[c][k], ref.transmat_[c][k], rtol=rtol, atol=atol)
        D = ref.max_duration_[c]
        np.testing.assert_allclose(got.duration_[c].pmf(D), ref.duration_[c].pmf(D), rtol=rtol, atol=atol)
        if ref.emission_[c] is not None:
            np.testing.assert_allclose(got.emission_[c].means, ref.emission_[c].means, rtol=rtol, atol=atol)
            np.testing.assert_allclose(got.emission_[c].variances, ref.emission_[c].variances, rtol=rtol,
                                       atol=atol)


def _total(m, shards, posteriors=False):
    f, p = m._shard_function(posteriors=posteriors)
    return reduce_statistics([f(p, s) for s in shards])


def _assert_stats_close(a, b, rtol):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_stats_close(a[k], b[k], rtol)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


# -- the shard statistics ------------------------------------------------------------------------------------
@pytest.mark.parametrize("inference", ["exact", "factored"])
def test_shard_statistics_are_additive(inference):
    """Σ over 3 shards of the statistics (emission statistics included) = one shard of all the sequences;
    the posteriors concatenate to those of one shard."""
    X, S, lengths = _data()
    m = random_model(np.random.default_rng(0), M=(2, 3), D=(3, 4), inference=inference, sweep_tol=1e-14)
    _, allowed = mce.label_masks(_partial_labels(S), X.shape[0], [2, 3])
    whole = make_shard(X, lengths, allowed)
    parts = split_shards(whole, 3)
    assert len(parts) == 3
    one, three = _total(m, [whole]), _total(m, parts)
    assert three.n_sequences == one.n_sequences == len(lengths)
    np.testing.assert_allclose(three.value, one.value, rtol=RTOL)
    _assert_stats_close(three.stats, one.stats, RTOL)
    assert set(one.stats["0"]) == {"start", "counts", "left", "coupling", "emission"}
    post1, post3 = _total(m, [whole], True), _total(m, parts, True)
    assert post1.posteriors.keys() == {"0", "1"} and "emission" not in post1.stats["0"]
    for c in ("0", "1"):
        np.testing.assert_allclose(post3.posteriors[c], post1.posteriors[c], rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("censoring", ["right", "none"])
def test_exact_shard_statistics_match_enumeration(censoring):
    """The expected counts and log-likelihood of a shard of two sequences (one with partial labels) against
    the brute-force enumeration of the joint segmentations."""
    rng = np.random.default_rng(3)
    m = random_model(rng, M=(2, 2), D=(2, 3), censoring=censoring)
    Xs = [rng.normal(size=(4, 2)), rng.normal(size=(3, 2))]
    labels = np.full((7, 2), -1)
    labels[1, 0], labels[5, 1] = 1, 0
    shard = m._shard_from_data(np.concatenate(Xs), [4, 3], labels)
    f, p = m._shard_function(posteriors=True)
    got = f(p, shard)
    off = [0, 4, 7]
    ref_ll, ref, gam = 0.0, None, []
    for b, x in enumerate(Xs):
        lab = labels[off[b]:off[b + 1]]
        logem = [np.where((lab[:, [c]] < 0) | (lab[:, [c]] == np.arange(2)), m.emission_[c].log_density(x[:, [c]]),
                          -np.inf) for c in range(2)]
        pmfs = [m.duration_[c].pmf(m.max_duration_[c]) for c in range(2)]
        ll, counts = expected_counts(m.startprob_, m.coupling_, m.transmat_, pmfs, logem, censoring)
        ref_ll += ll
        gam.append([counts[c]["gamma"] for c in range(2)])
        if ref is None:
            ref = counts
        else:
            for c in range(2):
                ref[c]["start"] = ref[c]["start"] + counts[c]["start"]
                ref[c]["counts"] = ref[c]["counts"] + counts[c]["counts"]
                ref[c]["coupling"] = [a + b for a, b in zip(ref[c]["coupling"], counts[c]["coupling"])]
    np.testing.assert_allclose(got.value, ref_ll, rtol=RTOL)
    stats = mce.channel_statistics(got.stats, 2)
    for c in range(2):
        np.testing.assert_allclose(stats[c]["start"], ref[c]["start"], rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(stats[c]["counts"], ref[c]["counts"], rtol=RTOL, atol=1e-12)
        for k in range(2):
            np.testing.assert_allclose(stats[c]["coupling"][k], ref[c]["coupling"][k], rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(got.posteriors[str(c)], np.concatenate([g[c] for g in gam]), rtol=RTOL,
                                   atol=1e-12)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), n_shards=st.integers(2, 4))
def test_additivity_property(seed, n_shards):
    rng = np.random.default_rng(seed)
    m = random_model(rng, M=(2, 2), D=(2, 3))
    lengths = rng.integers(1, 7, size=5)
    X = rng.normal(size=(int(lengths.sum()), 2))
    whole = make_shard(X, lengths)
    one, many = _total(m, [whole]), _total(m, split_shards(whole, n_shards))
    np.testing.assert_allclose(many.value, one.value, rtol=RTOL)
    _assert_stats_close(many.stats, one.stats, RTOL)


# -- fit over blocks ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("inference, labelled", [("exact", False), ("exact", True), ("factored", True)])
def test_n_jobs_equals_one_process(inference, labelled):
    X, S, lengths = _data(seed=2)
    labels = _partial_labels(S) if labelled else None
    est = MultiChannelHSMM(2, duration="nonparametric", max_duration=6, n_iter=4, inference=inference,
                           sweep_tol=1e-14, max_sweeps=300, random_state=0)
    ref = _quiet_fit(clone(est), X, lengths, labels)
    got = _quiet_fit(clone(est).set_params(n_jobs=2), X, lengths, labels)
    _same_fit(ref, got, RTOL)


def test_sharded_path_without_posteriors_equals_fit():
    """The path of structlearn.distributed.fit in this process: shards whose emission M-step uses the
    families' sufficient statistics, max_duration=None from the longest sequence over the shards, labels."""
    X, S, lengths = _data(seed=4)
    labels = _partial_labels(S, seed=5)
    est = MultiChannelHSMM(2, max_duration=None, n_iter=3, random_state=1)
    ref = _quiet_fit(clone(est), X, lengths, labels)
    got = clone(est)
    shard = got._shard_from_data(X, lengths, labels)
    shards = split_shards(shard, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got._fit_sharded(lambda f, p: map_shards(f, p, shards), (X, lengths, got._shard_known(shard)),
                         max(int(s.lengths.max()) for s in shards), X.shape[1], None)
    assert got.max_duration_ == ref.max_duration_ == [int(lengths.max())] * 2
    _same_fit(ref, got, 1e-9)
    np.testing.assert_array_equal(got._shard_known(shard), labels)


def test_sharded_errors():
    X, S, lengths = _data(n_seq=2)
    with pytest.raises(ValueError, match="`n_jobs` must be None or a non-zero integer"):
        MultiChannelHSMM(n_jobs=0).fit(X, lengths)
    est = MultiChannelHSMM(2, emission="gmm", max_duration=4, n_iter=1)
    shard = est._shard_from_data(X, lengths)
    with pytest.raises(ValueError, match="no sufficient statistics for the emission family GaussianMixture"):
        est._fit_sharded(lambda f, p: map_shards(f, p, [shard]), (X, lengths, None), 30, 2, None)
    with pytest.raises(ValueError, match=r"`labels\[:, 1\]` must hold states in \[0, 2\) or -1"):
        MultiChannelHSMM(2).fit(X, lengths, np.c_[S[:, 0], S[:, 1] + 5])


# -- partial_fit ------------------------------------------------------------------------------------------
def test_partial_fit_first_step_is_one_em_step():
    """With fresh statistics one online step is one batch EM step on the chunk."""
    X, S, lengths = _data(n_seq=3, seed=6)
    labels = _partial_labels(S, seed=7)
    est = MultiChannelHSMM(2, duration="poisson", max_duration=8, n_iter=1, random_state=0)
    batch = _quiet_fit(clone(est), X, lengths, labels)
    online = clone(est).partial_fit(X, lengths, labels)
    assert online.n_chunks_seen_ == 1
    np.testing.assert_allclose(online.chunk_log_likelihood_, batch.monitor_.history[0], rtol=RTOL)
    for c in range(2):
        np.testing.assert_allclose(online.startprob_[c], batch.startprob_[c], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(online.duration_[c].pmf(8), batch.duration_[c].pmf(8), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(online.emission_[c].means, batch.emission_[c].means, rtol=1e-9)
        for k in range(2):
            np.testing.assert_allclose(online.transmat_[c][k], batch.transmat_[c][k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(online.coupling_, batch.coupling_, rtol=1e-9)


def test_partial_fit_stream_approaches_the_truth_and_restarts_after_fit():
    truth = coupled_truth()
    est = MultiChannelHSMM(2, duration="nonparametric", max_duration=8, random_state=0,
                           inference="factored")
    for i in range(25):
        X, _, lengths = simulate(truth, 2, 60, 100 + i)
        est.partial_fit(X, lengths)
    assert est.n_chunks_seen_ == 25
    for c in range(2):
        means = np.sort(est.emission_[c].means)
        np.testing.assert_allclose(means, [0.0, 3.0], atol=0.3)
    X, _, lengths = simulate(truth, 2, 60, 1)
    _quiet_fit(est.set_params(n_iter=2), X, lengths)
    est.partial_fit(X, lengths)
    assert est.n_chunks_seen_ == 1  # a fit restarts the running statistics


def test_partial_fit_errors_leave_the_model_unchanged():
    X, S, lengths = _data(n_seq=2)
    est = MultiChannelHSMM(2, max_duration=5, random_state=0).partial_fit(X, lengths)
    before = [p.copy() for p in est.startprob_]
    with pytest.raises(ValueError, match=r"`kappa` must be a number in \(0.5, 1\]"):
        est.partial_fit(X, lengths, kappa=0.5)
    with pytest.raises(ValueError, match="X has 3 features but the model was fitted with 2"):
        est.partial_fit(np.zeros((5, 3)))
    est.startprob_ = [np.array([1.0, 0.0]), before[1]]  # an assignment: the next step starts afresh
    with pytest.raises(ValueError, match="sequence 0 .* has zero likelihood"):
        est.partial_fit(X[:12], [12], labels=np.c_[np.r_[1, np.full(11, -1)], np.full(12, -1)])
    assert est.n_chunks_seen_ == 1
    np.testing.assert_array_equal(est.startprob_[0], [1.0, 0.0])
    np.testing.assert_array_equal(est.startprob_[1], before[1])
    fresh = MultiChannelHSMM(2, max_duration=5, init_params="sctd", emission="gmm")
    with pytest.raises(ValueError, match="no sufficient statistics"):
        fresh.partial_fit(X, lengths)
    assert not hasattr(fresh, "startprob_")  # the first call's initialisation is undone


def test_model_file_keeps_n_jobs_and_partial_fit_continues(tmp_path):
    X, _, lengths = _data(n_seq=2)
    est = MultiChannelHSMM(2, max_duration=5, n_jobs=np.int64(2), random_state=0).partial_fit(X, lengths)
    est.save(tmp_path / "mc.npz")
    back = MultiChannelHSMM.load(tmp_path / "mc.npz")
    assert back.n_jobs == 2 and back.get_params() == est.set_params(n_jobs=2).get_params()
    np.testing.assert_allclose(back.score(X, lengths), est.score(X, lengths), rtol=1e-12)
    assert back.partial_fit(X, lengths).n_chunks_seen_ == 1  # a loaded model starts its running statistics
