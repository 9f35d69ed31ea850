"""Attribute × label-pair transition features (``LinearChainCRF(transition_attributes=...)``): the
objective and gradient against an enumeration of every labeling (scores written out from the public
weight dicts) and central finite differences."""
import itertools
import math

import numpy as np
import pytest

from structlearn import LinearChainCRF
from structlearn.crf.objectives import ChainCLL
from tests.crf._data import abc_sequences
from tests.oracles._common import logsumexp


def _data(n=6, seed=0):
    return abc_sequences(n, seed, lambda rng, lab: {
        "w": ",." [int(rng.integers(0, 2))] if rng.random() < 0.5 else lab.lower(),
        "v": float(np.round(rng.normal(), 2))})


def _score(crf, xs, ys):
    """s(x, y) from the public dicts: state + transition + start/end + transition attributes."""
    sf, tf, bf, ta = (crf.state_features_, crf.transition_features_, crf.boundary_features_,
                      crf.transition_attribute_features_)
    names = [{(k + ":" + v if isinstance(v, str) else k): (1.0 if isinstance(v, str) else v)
              for k, v in item.items()} for item in xs]
    s = bf.get(("<start>", ys[0]), 0.0) + bf.get((ys[-1], "<end>"), 0.0)
    for t, lab in enumerate(ys):
        s += sum(val * sf.get((a, lab), 0.0) for a, val in names[t].items())
        if t:
            s += tf.get((ys[t - 1], lab), 0.0)
            s += sum(val * ta.get((a, ys[t - 1], lab), 0.0) for a, val in names[t].items())
    return s


@pytest.fixture(scope="module")
def fitted():
    X, y = _data()
    crf = LinearChainCRF(c2=0.1, transition_attributes=["w:,", "v"]).fit(X, y)
    rng = np.random.default_rng(3)
    crf.coef_ = rng.normal(size=crf.coef_.size) * crf.model_.free_mask()  # random weights
    return crf, X, y


def test_log_partition_and_marginals_match_enumeration(fitted):
    crf, X, y = fitted
    assert crf.transition_attribute_features_  # the features exist and are used
    cls = crf.classes_
    for xs, ys in zip(X, y):
        items = [(lab, _score(crf, xs, lab)) for lab in itertools.product(cls, repeat=len(xs))]
        log_z = logsumexp(s for _, s in items)
        p = crf.sequence_probability([xs], [ys])[0]
        assert p == pytest.approx(math.exp(_score(crf, xs, ys) - log_z), rel=1e-10)
        marg = np.zeros((len(xs), len(cls)))
        for lab, s in items:
            for t, c in enumerate(lab):
                marg[t, cls.index(c)] += math.exp(s - log_z)
        np.testing.assert_allclose(crf.predict_marginals([xs], output="array")[0], marg, rtol=1e-10,
                                   atol=1e-14)
        best = max(items, key=lambda it: it[1])[0]
        assert crf.predict([xs])[0] == list(best)


def test_gradient_matches_finite_differences(fitted):
    crf, X, y = fitted
    packed = crf._vocab.encode(X)
    obj = ChainCLL(crf.model_, packed, crf._encode_labels(y, packed, grow=False), c2=0.1)
    w = crf.coef_.copy()
    g = np.empty_like(w)
    obj(w, g)
    h = 1e-6
    for i in np.flatnonzero(crf.model_.free_mask()):
        e = np.zeros_like(w)
        e[i] = h
        assert g[i] == pytest.approx((obj(w + e) - obj(w - e)) / (2 * h), rel=1e-5, abs=1e-6)


def test_trained_model_round_trip_and_errors(tmp_path):
    X, y = _data(20, seed=1)
    crf = LinearChainCRF(c2=0.1, transition_attributes=["w:,"]).fit(X, y)
    crf.save(tmp_path / "m.npz")
    back = LinearChainCRF.load(tmp_path / "m.npz")
    assert back.predict(X) == crf.predict(X) and back.model_.n_trans_attr == 1
    with pytest.raises(ValueError, match="no attribute of the training data"):
        LinearChainCRF(transition_attributes=["w=,"]).fit(X, y)
    with pytest.raises(ValueError, match="lbfgs"):
        LinearChainCRF(algorithm="ap", transition_attributes=["w:,"]).fit(X, y)
    with pytest.raises(ValueError, match="transition attributes"):
        LinearChainCRF(start_end_features=False, transition_attributes=["w:,"]).fit(X, y).save(
            tmp_path / "m.crfsuite", format="crfsuite")
