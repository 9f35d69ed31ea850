"""Issue 14, real data: switching and multi-channel HSMMs for activity recognition on van Kasteren's house A
and PlaceLab (``examples/hsmm_variants_activities.py``). Tiny folds here; the ``--quick`` run is slow.
Bounds: the measured values with a margin."""
import numpy as np
import pytest

from tests.conftest import require_data, script_module


def _example():
    return script_module("examples/hsmm_variants_activities.py", "hsmm_variants_activities_example")


def _placelab(mod):
    root = require_data("mit_placelab_tapia")
    return mod.placelab_data(str(root / "subject1"))


def test_placelab_events_and_group_symbols():
    mod = _example()
    days, names, V, sizes = _placelab(mod)
    assert len(days) == 16 and len(names) == 22 and sum(s.size for s, _, _ in days) == 2772
    assert len(sizes) == len(mod.PLACELAB_GROUPS) + 1
    # the groups partition the fired sensors: alphabets (last sensor + "this event is ours") add up
    assert sum(v // 2 - 1 for v in sizes) == V
    for s, y, g in days:
        assert s.shape == y.shape == (g.shape[0],) and g.shape[1] == len(sizes)
        assert np.all((g >= 0) & (g < np.array(sizes))) and np.all((y >= 0) & (y < len(names)))
        # exactly one group claims every event, and its "last sensor" is that event's sensor
        mine = g >= np.array(sizes) // 2
        np.testing.assert_array_equal(mine.sum(axis=1), 1)


def test_placelab_tiny_fold_all_models():
    mod = _example()
    days, names, V, sizes = _placelab(mod)
    train, (s, y, g) = days[1:4], days[0]
    K = len(names)
    X = np.concatenate([d[0] for d in train])[:, None].astype(float)
    lab = np.concatenate([d[1] for d in train])
    lengths = [d[0].size for d in train]
    D = mod._longest_run(lab)
    emission = mod.supervised_emission(X[:, 0].astype(np.int64), lab, K, V)
    hsmm = mod.fit_hsmm(X, lengths, lab, emission, K, D, "both", "lognormal")
    sw = mod.fit_switching(X, lengths, lab, emission, K, D, "both", n_iter=3)
    h = np.array(sw.monitor_.history)
    assert np.all(np.diff(h) >= -1e-8 * np.abs(h[1:]))  # labelled EM is monotone
    np.testing.assert_array_equal(sw.emission_.probs, emission.probs)  # the emission stays fixed
    Xt = s[:, None].astype(float)
    for model in (hsmm, sw):
        pred = model.predict(Xt)
        assert pred.shape == y.shape and float((pred == y).mean()) > 0.1  # chance 1/22
    Xmc = np.concatenate([np.c_[d[0], d[2]] for d in train]).astype(float)
    mc = mod.fit_multichannel(Xmc, lengths, lab, K, V, sizes, D, n_iter=1)
    pred = mc.predict(np.c_[s, g].astype(float))
    assert pred.shape == (s.size, 1 + len(sizes)) and float((pred[:, 0] == y).mean()) > 0.1
    acc, cls = mod.scores([y, y], [y, np.where(y == y[0], y, -1)], K)
    assert acc < 1.0 and 0.0 < cls < 1.0


def test_kasteren_tiny_switching_fold():
    require_data("kasteren2008")
    mod = _example()
    kast = mod._example("kasteren_activities")
    days, V, names = kast.load(None, 60)
    K, D = len(names), 960
    train = days[1:4]
    X = np.concatenate([s for s, _ in train])[:, None].astype(float)
    lab = np.concatenate([y for _, y in train])
    emission = mod.supervised_emission(X[:, 0].astype(np.int64), lab, K, V)
    model = mod.fit_switching(X, [s.size for s, _ in train], lab, emission, K, D, "both", n_iter=2)
    _, states, regimes = model.decode(days[0][0][:, None].astype(float), return_regimes=True)
    assert states.shape == regimes.shape == days[0][1].shape
    assert float((states == days[0][1]).mean()) > 0.6


@pytest.mark.slow
def test_quick_run():
    require_data("kasteren2008")
    require_data("mit_placelab_tapia")
    out = _example().main(["--quick"])
    k, p = out["kasteren"], out["placelab"]
    assert k["switching HSMM (R = 2)"][0] > 0.75  # measured 0.829
    assert k["HSMM, log-normal durations"][0] > 0.78  # measured 0.824 (kasteren_activities.py)
    assert p["switching HSMM (R = 2)"][0] > 0.38  # measured 0.436
    assert p["multi-channel HSMM (factored)"][0] > 0.38  # measured 0.446
    assert p["HSMM, log-normal durations"][0] > 0.38  # measured 0.436
