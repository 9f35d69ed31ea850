"""Model files of the semi-Markov estimators hold any structlearn emission family: those of
structlearn.distributions.emissions and the hmmlearn-shaped ones of structlearn.distributions.emissions.hmm."""
import warnings

import numpy as np
import pytest

from structlearn import HiddenSemiMarkovModel
from structlearn.hsmm.general import GeneralHSMM
from structlearn.distributions import emissions as em
from structlearn.distributions.emissions import hmm as hem
from structlearn.distributions.base import families_from_file, family_to_file


def _data(kind, rng, N=90):
    z = (np.arange(N) // 15) % 2
    if kind == "counts":
        return rng.poisson(np.where(z == 0, 2.0, 9.0)[:, None] * np.ones((1, 2))).astype(float)
    if kind == "symbols":
        return np.where(rng.random(N) < 0.8, z * 2, rng.integers(0, 4, N)).astype(float)[:, None]
    if kind == "trials":
        p = np.where(z[:, None] == 0, [0.7, 0.2, 0.1], [0.1, 0.3, 0.6])
        return np.array([rng.multinomial(5, row) for row in p], dtype=float)
    return rng.normal(size=(N, 2)) + 3.0 * z[:, None]


EMISSIONS = [
    ("gaussian", lambda: hem.GaussianHMMEmission("diag")),
    ("gaussian", lambda: hem.GaussianHMMEmission("full", covars_prior=0.1)),
    ("gaussian", lambda: hem.GaussianHMMEmission("tied")),
    ("gaussian", lambda: hem.GMMHMMEmission(2, "spherical")),
    ("symbols", lambda: hem.CategoricalHMMEmission(n_features=4, emissionprob_prior=1.5)),
    ("trials", lambda: hem.MultinomialHMMEmission(n_trials=5)),
    ("counts", lambda: hem.PoissonHMMEmission(lambdas_prior=0.5, lambdas_weight=0.1)),
    ("gaussian", lambda: em.MultivariateGaussian("full")),
    ("counts", lambda: em.Poisson()),
]
IDS = [f"{type(make()).__name__}-{i}" for i, (_, make) in enumerate(EMISSIONS)]


def _fit(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X)


@pytest.mark.parametrize("kind, make", EMISSIONS, ids=IDS)
def test_hsmm_round_trip_every_family(tmp_path, kind, make):
    X = _data(kind, np.random.default_rng(0))
    m = _fit(HiddenSemiMarkovModel(2, duration="poisson", emission=make(), max_duration=25, n_iter=3,
                                   random_state=0), X)
    m.save(tmp_path / "hsmm.npz")
    back = HiddenSemiMarkovModel.load(tmp_path / "hsmm.npz")
    assert type(back.emission_) is type(m.emission_)
    assert back.emission_.get_state()[1] == m.emission_.get_state()[1]
    for name, value in m.emission_.get_state()[0].items():
        np.testing.assert_array_equal(back.emission_.get_state()[0][name], value)
    np.testing.assert_allclose(back.score(X), m.score(X), rtol=1e-12)
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    # the emission argument comes back as a fresh object of the same family and configuration
    assert type(back.emission) is type(m.emission) and back.emission.n_states is None
    assert np.isfinite(_fit(back, X).score(X))  # and the loaded model can be fitted again


@pytest.mark.parametrize("kind, make", [EMISSIONS[0], EMISSIONS[4], EMISSIONS[6]],
                         ids=[IDS[0], IDS[4], IDS[6]])
def test_general_hsmm_round_trip(tmp_path, kind, make):
    X = _data(kind, np.random.default_rng(1), N=60)
    m = _fit(GeneralHSMM(n_states=2, max_duration=4, emission=make(), n_iter=2, random_state=0), X)
    m.save(tmp_path / "general.npz")
    back = GeneralHSMM.load(tmp_path / "general.npz")
    assert type(back.emission_) is type(m.emission_)
    np.testing.assert_allclose(back.score(X), m.score(X), rtol=1e-12)


def test_family_files_name_only_the_given_modules():
    g = hem.GaussianHMMEmission("diag", means=np.zeros((2, 1)), covars=np.ones((2, 1)))
    name, arrays, config = family_to_file(g, (em, hem), "emission")
    assert name == "GaussianHMMEmission" and set(arrays) == {"emission.means", "emission.covars"}
    meta = {"emission_family": name, "emission_config": config}
    back = families_from_file(meta, arrays, {"emission": ((em, hem), em.EmissionDistribution)})["emission"]
    assert isinstance(back, hem.GaussianHMMEmission)
    # one module only: the HMM family is not found there (old behaviour), nor saved
    assert families_from_file(meta, arrays, {"emission": (em, em.EmissionDistribution)})["emission"] is None
    with pytest.raises(ValueError, match="custom emission object"):
        family_to_file(g, em, "emission")

    class Mine(em.Poisson):
        pass

    with pytest.raises(ValueError, match="custom emission object of type"):
        family_to_file(Mine(lam=np.ones((2, 1))), (em, hem), "emission")
    # names that are not families of the modules build nothing
    for bad in ("np", "EMISSION_FAMILIES", "make_emission", "__class__"):
        out = families_from_file({"emission_family": bad}, {}, {"emission": ((em, hem), em.EmissionDistribution)})
        assert out["emission"] is None
