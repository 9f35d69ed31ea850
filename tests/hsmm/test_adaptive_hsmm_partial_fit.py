"""AdaptiveFactorHSMM.partial_fit: the base HSMM's stepwise EM and walk variances moved towards each
chunk's estimate."""
import warnings

import numpy as np
import pytest

from structlearn.hsmm.adaptive import AdaptiveFactorHSMM


def _chunks(seed, n=8):
    rng = np.random.default_rng(seed)
    return [np.concatenate([rng.normal(0.0 if i % 2 == 0 else 4.0, 1.0, rng.integers(5, 15))
                            for i in range(12)])[:, None] for _ in range(n)]


def test_stream_tracks_the_batch_fit():
    chunks = _chunks(0)
    X, lengths = np.concatenate(chunks), [len(c) for c in chunks]
    m = AdaptiveFactorHSMM(2, duration="poisson", max_duration=30, random_state=0)
    for c in chunks:
        m.partial_fit(c)
    assert m.n_chunks_seen_ == len(chunks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = AdaptiveFactorHSMM(2, duration="poisson", max_duration=30, random_state=0).fit(X, lengths)
    np.testing.assert_allclose(np.sort(m.hsmm_.emission_.means.ravel()),
                               np.sort(b.hsmm_.emission_.means.ravel()), atol=0.1)
    for what in ("duration", "emission"):
        q = getattr(m, f"{what}_walk_var_")
        assert np.isfinite(q) and q >= 0.0
    assert m.filter(X, lengths).state.shape == (X.shape[0], 2)


def test_step_blends_the_chunk_estimate():
    """After the first chunk q is the chunk's estimate; afterwards q moves by ρ_k towards the chunk's."""
    from structlearn.hsmm import _adaptive_em as learn
    from structlearn.learning.shards import map_shards

    def chunk_estimate(model, chunk):
        base = model.hsmm_
        total = map_shards(learn.shard_measurements, (base, base._potentials().log_pmf(), model.censoring,
                                                      ("duration",)), [base._shard_from_data(chunk)])
        return learn.estimate_walk_variance(learn.gather_measurements(total, "duration"))

    chunks = _chunks(1, 2)
    m = AdaptiveFactorHSMM(2, duration="poisson", max_duration=30, factors="duration", random_state=0)
    m.partial_fit(chunks[0])
    assert m.duration_walk_var_ == pytest.approx(chunk_estimate(m, chunks[0]), rel=1e-12)
    q0 = m.duration_walk_var_
    m.partial_fit(chunks[1])
    rho = (1 + 2.0) ** -0.7
    assert m.duration_walk_var_ == pytest.approx((1 - rho) * q0 + rho * chunk_estimate(m, chunks[1]), rel=1e-12)
    assert m.emission_walk_var_ == 0.0


def test_given_walk_variances_are_kept():
    m = AdaptiveFactorHSMM(2, duration="poisson", max_duration=30, duration_walk_var=0.01,
                           emission_walk_var=0.02, random_state=0)
    for c in _chunks(2, 2):
        m.partial_fit(c)
    assert m.duration_walk_var_ == 0.01 and m.emission_walk_var_ == 0.02


def test_errors_leave_the_estimator_unchanged():
    m = AdaptiveFactorHSMM(2, duration="poisson", max_duration=30, random_state=0).partial_fit(_chunks(3, 1)[0])
    base, q = m.hsmm_, (m.duration_walk_var_, m.emission_walk_var_)
    means = base.emission_.means.copy()
    with pytest.raises(ValueError, match="kappa"):
        m.partial_fit(_chunks(4, 1)[0], kappa=0.3)
    with pytest.raises(ValueError):
        m.partial_fit(np.zeros((10, 3)))
    assert m.hsmm_ is base and m.n_chunks_seen_ == 1
    np.testing.assert_array_equal(m.hsmm_.emission_.means, means)
    assert (m.duration_walk_var_, m.emission_walk_var_) == q
