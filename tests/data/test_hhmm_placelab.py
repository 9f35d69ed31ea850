"""PlaceLab (MIT, Munguia Tapia) activity recognition with supervised HHMMs (examples/hhmm_placelab.py)
on the real data: leave-one-day-out runs and gives sensible per-level scores."""
import numpy as np
import pytest

from tests.conftest import require_data, script_module


def _example():
    return script_module("examples/hhmm_placelab.py")


@pytest.mark.slow
def test_placelab_leave_one_day_out():
    root = require_data("mit_placelab_tapia")
    mod = _example()
    days, taxonomy, vocab = mod.load_subject(root / "subject2")
    assert len(days) == 17 and sum(len(d["sensors"]) for d in days) == 1962  # SOURCE.md counts
    assert all(a in taxonomy for d in days for a in d["activity"])
    res, info = mod.evaluate(root / "subject2")
    assert info["held_out_days"] == 17
    assert info["majority"]["activity"] < 0.2
    for kind, r in res.items():
        for lv in mod.LEVELS:
            acc, f1 = r[lv]
            assert 0.0 <= acc <= 1.0 and 0.0 <= f1 <= 1.0
        # above the majority-class rate of every level (0.56 / 0.41 / 0.18 on subject 2)
        assert r["heading"][0] > 0.6 and r["category"][0] > 0.45 and r["activity"][0] > 0.3, (kind, r)
    # the 3-level HHMM is at least as good as the flat HMM on the top level (subject 2)
    assert res["hhmm3"]["heading"][0] >= res["flat"]["heading"][0]


@pytest.mark.slow
def test_placelab_models_decode_a_day_consistently():
    root = require_data("mit_placelab_tapia")
    mod = _example()
    days, taxonomy, vocab = mod.load_subject(root / "subject1")
    days = [d for d in days if len(d["sensors"])]
    acts = sorted({a for d in days for a in d["activity"]})
    m3 = mod.fit("hhmm3", days[1:], acts, taxonomy, len(vocab), 0.01, 0.1)
    pred = mod.predict(m3, days[0])
    assert pred.shape == days[0]["activity"].shape and set(pred) <= set(acts)
    assert np.isfinite(m3.log_likelihood(days[0]["sensors"][:, None])[0])


@pytest.mark.slow
def test_placelab_per_inference_method():
    """--inference: the exact methods (flat, jtree) predict identically before and after EM; the
    factored frontier gives per-level scores in [0, 1]; every method reports its time per EM iteration."""
    root = require_data("mit_placelab_tapia")
    mod = _example()
    methods = ("flat", "jtree", "factored-frontier")
    res, secs, same, info = mod.evaluate_inference(root / "subject1", methods, max_days=1, em_iter=1)
    assert same is True and info["held_out_days"] == 1
    assert set(res) == {(m, how) for m in methods for how in ("supervised", "EM")}
    for m in ("flat", "jtree"):
        assert res[(m, "EM")] == res[("flat", "EM")]
    for r in res.values():
        assert all(0.0 <= r[lv][0] <= 1.0 and 0.0 <= r[lv][1] <= 1.0 for lv in mod.LEVELS)
    assert all(s > 0 for s in secs.values())
