"""Issue 14, real data: the multi-channel HSMM on van Kasteren's house A
(``examples/hsmm_multichannel_kasteren.py``). Bounds: the measured values with a margin."""
import numpy as np
import pytest

from tests.conftest import require_data, script_module


def _example():
    return script_module("examples/hsmm_multichannel_kasteren.py", "hsmm_multichannel_kasteren_example")


def test_room_group_symbols_align_with_the_labelled_days():
    require_data("kasteren2008")
    mod = _example()
    days, _, _ = mod.load(None, 60)
    groups, sizes = mod.group_symbols(None, 60)
    assert len(groups) == len(days) == 28
    assert sizes == [2 * (len(ids) + 1) for ids in mod.GROUPS.values()]
    for g, (sym, _) in zip(groups, days):
        assert g.shape == (sym.size, 3)
        assert np.all((g >= 0) & (g < np.array(sizes)))
    # the rooms partition the 14 sensors: a slice has a change in some room exactly when the combined
    # symbol (last sensor + 15 · changed) marks a change
    for g, (sym, _) in zip(groups, days):
        np.testing.assert_array_equal(np.any(g >= np.array(sizes) // 2, axis=1), sym >= 15)


@pytest.mark.slow
def test_one_held_out_day():
    require_data("kasteren2008")
    mod = _example()
    days, n_symbols, names = mod.load(None, 60)
    groups, sizes = mod.group_symbols(None, 60)
    acc, cls, (model, _) = mod.evaluate_multichannel(days, groups, n_symbols, sizes, len(names), 960, 1, 1)
    assert acc > 0.72  # measured 0.776 (one EM iteration)
    assert model.coupling_.shape == (4, 4) and np.allclose(model.coupling_.sum(axis=1), 1.0)
