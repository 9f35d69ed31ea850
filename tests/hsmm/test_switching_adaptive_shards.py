"""The per-shard interface of SwitchingHSMM and AdaptiveFactorHSMM (issue 16): ``fit`` with ``n_jobs`` equals the
single-process fit, the shard statistics (switching E-step, walk-variance measurements) add up over shards, and
the hooks of ``structlearn.distributed.fit`` (``_fit_sharded`` without posteriors: the emission M-step from
sufficient statistics) give the fit of ``fit``, here driven in-process over shards taken in another order."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn.hsmm.adaptive import AdaptiveFactorHSMM
from structlearn.hsmm.explicit_duration import HiddenSemiMarkovModel
from structlearn.hsmm.switching import SwitchingHSMM
from structlearn.hsmm import _adaptive_em as learn
from structlearn.hsmm import _switching_em as sem
from structlearn.learning.shards import make_shard, map_shards, reduce_statistics
from structlearn.distributions.durations import Poisson
from structlearn.distributions.emissions import Gaussian

RTOL = 1e-10


def switching_data(seed=0, n_seq=4):
    rng = np.random.RandomState(seed)
    seqs = [np.concatenate([rng.normal(1.5 * s, 0.5, rng.randint(3, 12)) for s in np.arange(6) % 3])
            for _ in range(n_seq)]
    X = np.concatenate(seqs)[:, None]
    labels = np.where(rng.rand(X.shape[0]) < 0.25, np.clip(np.round(X[:, 0] / 1.5), 0, 1).astype(np.int64), -1)
    return X, np.array([len(s) for s in seqs]), labels


def adaptive_data(n_seq=5, T=150):
    """Sequences of an adaptive-factor HSMM with drifting duration scale and emission level."""
    base = HiddenSemiMarkovModel(2, duration=Poisson(lam=np.array([8.0, 12.0])),
                                 emission=Gaussian(means=np.array([1.0, 3.0]), variances=np.array([0.3, 0.3])),
                                 max_duration=40)
    base.duration_, base.emission_ = base.duration, base.emission
    base.startprob_, base.transmat_ = np.array([0.5, 0.5]), np.array([[0.0, 1.0], [1.0, 0.0]])
    base.max_duration_, base.n_features_in_ = 40, 1
    gen = AdaptiveFactorHSMM(2)
    gen.hsmm_, gen.max_duration_, gen.n_features_in_ = base, 40, 1
    gen.duration_walk_var_, gen.emission_walk_var_ = 0.05, 0.02
    seqs = [gen.sample(T, random_state=s)[0] for s in range(n_seq)]
    return np.concatenate(seqs), np.array([len(s) for s in seqs])


def blocks(est, X, L, labels, cuts):
    """Shards of the sequence blocks [cuts[i], cuts[i+1]) (the estimator's own validation)."""
    off = np.r_[0, np.cumsum(L)]
    return [est._shard_from_data(X[off[a]:off[b]], L[a:b], None if labels is None else labels[off[a]:off[b]])
            for a, b in zip(cuts[:-1], cuts[1:])]


def fitted(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in every fit
        return clone(est).fit(*args)


def same_switching(ref, got, rtol):
    assert len(got.monitor_.history) == len(ref.monitor_.history)
    np.testing.assert_allclose(got.monitor_.history, ref.monitor_.history, rtol=rtol)
    for name in ("regime_startprob_", "regime_transmat_", "startprob_", "transmat_"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(got.duration_.pmf(got.max_duration_), ref.duration_.pmf(ref.max_duration_),
                               rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(got.emission_.means, ref.emission_.means, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(got.emission_.variances, ref.emission_.variances, rtol=rtol)
    assert got.converged_ == ref.converged_


SWITCHING = [dict(tie_emissions=True), dict(tie_emissions=False, tie_durations=True)]


@pytest.mark.parametrize("kw", SWITCHING)
def test_switching_n_jobs_equals_one_process(kw):
    X, L, labels = switching_data()
    est = SwitchingHSMM(2, 2, duration="nonparametric", max_duration=12, n_iter=6, random_state=0, **kw)
    ref = fitted(est, X, L, labels)
    got = fitted(est.set_params(n_jobs=2), X, L, labels)
    same_switching(ref, got, RTOL)


@pytest.mark.parametrize("kw", SWITCHING)
def test_switching_fit_sharded_from_statistics_equals_fit(kw):
    """The distributed path: no posteriors travel, the emissions are refitted from summed sufficient
    statistics (tied: over regimes); the known states of the initialisation come from the shard's mask."""
    from structlearn.distributed._fit import _known

    X, L, labels = switching_data(seed=1)
    est = SwitchingHSMM(2, 2, duration="nonparametric", max_duration=12, n_iter=6, random_state=0, **kw)
    ref = fitted(est, X, L, labels)
    got = clone(est)
    shards = blocks(got, X, L, labels, [0, 1, 3, 4])[::-1]
    full = got._shard_from_data(X, L, labels)
    np.testing.assert_array_equal(_known(got, full), labels)  # an (N, M) mask of states travels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got._fit_sharded(lambda f, p: map_shards(f, p, shards), (full.X, full.lengths, _known(got, full)),
                         int(L.max()), 1, None)
    same_switching(ref, got, 1e-8)


@pytest.mark.parametrize("tie", [True, False])
def test_switching_shard_statistics_are_additive(tie):
    X, L, labels = switching_data(seed=2)
    est = fitted(SwitchingHSMM(3, 2, duration="nonparametric", max_duration=12, n_iter=2, random_state=0,
                               tie_emissions=tie), X, L, labels)
    whole = est._shard_from_data(X, L, labels)
    parts = blocks(est, X, L, labels, [0, 2, 3, 4])
    for posteriors in (True, False):
        f, p = est._shard_function(posteriors)
        a, b = f(p, whole), reduce_statistics([f(p, s) for s in parts])
        assert a.n_sequences == b.n_sequences == len(L)
        assert a.value == pytest.approx(b.value, rel=RTOL)
        flat_a, flat_b = _flatten(a.stats), _flatten(b.stats)
        assert flat_a.keys() == flat_b.keys()
        for k in flat_a:
            np.testing.assert_allclose(flat_b[k], flat_a[k], rtol=RTOL, atol=1e-12, err_msg=k)
        if posteriors:
            np.testing.assert_allclose(b.posteriors, a.posteriors, rtol=RTOL, atol=1e-14)
            assert a.posteriors.shape == (X.shape[0], 6)
        else:
            assert a.posteriors is None
            w = a.stats["emission"]["post"]  # Σ_t γ_t(k): the law's statistics (one Gaussian law)
            assert w.shape == ((2,) if tie else (6,))   # tied: the inner family's M = 2 states
            np.testing.assert_allclose(w.sum(), X.shape[0], rtol=RTOL)


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        out.update(_flatten(v, prefix + k + ".") if isinstance(v, dict) else {prefix + k: v})
    return out


def test_product_mask_tiles_states_over_regimes():
    allowed = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(sem.product_mask(allowed, 3),
                                  [[True, False] * 3, [True, True] * 3])
    assert sem.product_mask(None, 3) is None


def test_switching_shard_function_rejects_a_mixture_without_posteriors():
    X, L, _ = switching_data(seed=3, n_seq=2)
    est = fitted(SwitchingHSMM(2, 2, emission="gmm", max_duration=12, n_iter=1, random_state=0), X, L)
    f, p = est._shard_function(posteriors=False)
    with pytest.raises(ValueError, match="no sufficient statistics"):
        f(p, est._shard_from_data(X, L))


# -- AdaptiveFactorHSMM -----------------------------------------------------------------------------------
def test_adaptive_n_jobs_equals_one_process():
    X, L = adaptive_data()
    est = AdaptiveFactorHSMM(2, duration="nonparametric", max_duration=40, n_iter=6, random_state=0)
    ref = fitted(est, X, L)
    got = fitted(est.set_params(n_jobs=2), X, L)
    assert ref.duration_walk_var_ > 0 and ref.emission_walk_var_ > 0
    for name in ("duration_walk_var_", "emission_walk_var_"):
        assert getattr(got, name) == pytest.approx(getattr(ref, name), rel=RTOL)
    np.testing.assert_allclose(got.hsmm_.monitor_.history, ref.hsmm_.monitor_.history, rtol=RTOL)
    np.testing.assert_allclose(got.hsmm_.transmat_, ref.hsmm_.transmat_, rtol=RTOL, atol=1e-12)


def test_adaptive_measurements_gathered_over_shards_are_those_of_one_shard():
    X, L = adaptive_data(n_seq=3, T=80)
    est = fitted(AdaptiveFactorHSMM(2, duration="nonparametric", max_duration=40, n_iter=3, random_state=0), X, L)
    base = est.hsmm_
    params = (base, base._potentials().log_pmf(), est.censoring, ("duration", "emission"))
    whole = learn.shard_measurements(params, est._shard_from_data(X, L))
    parts = reduce_statistics([learn.shard_measurements(params, s) for s in blocks(est, X, L, None, [0, 1, 3])])
    assert whole.stats == {} and whole.value == 0.0 and parts.n_sequences == 3
    for what in ("duration", "emission"):
        a, b = learn.gather_measurements(whole, what), learn.gather_measurements(parts, what)
        assert len(a) == len(b) == 3
        for (za, ra), (zb, rb) in zip(a, b):
            np.testing.assert_array_equal(za, zb)
            np.testing.assert_array_equal(ra, rb)
        # the order of the sequences (shards come back in any order) does not move log L(q)
        for q in (0.0, 0.01, 1.0):
            assert learn.walk_log_likelihood(a[::-1], q) == learn.walk_log_likelihood(a, q)


def test_adaptive_fit_sharded_equals_fit():
    X, L = adaptive_data()
    est = AdaptiveFactorHSMM(2, duration="nonparametric", max_duration=40, n_iter=6, random_state=0)
    ref = fitted(est, X, L)
    got = clone(est)
    got._validate_hyper()
    full = got._shard_from_data(X, L)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got._fit_sharded(lambda f, p: map_shards(f, p, blocks(got, X, L, None, [0, 1, 3, 5])[::-1]),
                         (full.X, full.lengths, None), int(L.max()), 1, None)
    for name in ("duration_walk_var_", "emission_walk_var_"):
        assert getattr(got, name) == pytest.approx(getattr(ref, name), rel=1e-8)
    np.testing.assert_allclose(got.hsmm_.emission_.means, ref.hsmm_.emission_.means, rtol=1e-8)
    # shard_bytes' hook: the base model's E-step
    f, p = got._shard_function(posteriors=False)
    assert f(p, full).value == pytest.approx(ref.hsmm_.score(X, L), rel=1e-8)


def test_adaptive_given_walk_variances_need_no_measurements():
    X, L = adaptive_data(n_seq=2, T=60)
    est = AdaptiveFactorHSMM(2, duration="nonparametric", max_duration=40, n_iter=2, random_state=0,
                             duration_walk_var=0.1, factors="duration")
    calls = []
    base = fitted(HiddenSemiMarkovModel(2, duration="nonparametric", max_duration=40, n_iter=2, random_state=0),
                  X, L)
    est._fit_walks(base, lambda f, p: calls.append(f))
    assert calls == [] and est.duration_walk_var_ == 0.1 and est.emission_walk_var_ == 0.0


def test_adaptive_bad_n_jobs():
    X, L = adaptive_data(n_seq=1, T=40)
    with pytest.raises(ValueError, match="`n_jobs` must be None or a non-zero integer"):
        AdaptiveFactorHSMM(2, n_jobs=0).fit(X, L)
