"""Two-level activity data for 2-level DCRFs (structlearn.datasets.activities) and a smoke run of
examples/dcrf_activities.py (issue 8 item 4)."""
import json

import numpy as np
import pytest

from structlearn.datasets.activities import (COMPLEX_ACTIVITIES, PRIMITIVES, hide_labels,
                                             placelab_two_level, simulate_indoor_tracks, to_graphs)
from structlearn.engine.structures.graphs import two_level_edges, two_level_trees
from tests.conftest import require_data, script_module

def _module(name):
    return script_module(f"examples/{name}.py")


def _check_layout(d):
    W = len(d.y_top)
    assert W == len(d.y_bottom) == len(d.feat_top) == len(d.feat_bottom) == len(d.symbols) \
        == len(d.group)
    for ft, fb, s, yt, yb in zip(d.feat_top, d.feat_bottom, d.symbols, d.y_top, d.y_bottom):
        T = len(yt)
        assert T >= 2
        assert ft.shape == (T, d.feat_top[0].shape[1]) and fb.shape == (T, d.feat_bottom[0].shape[1])
        assert ft.dtype == fb.dtype == np.float64 and np.isfinite(ft).all() and np.isfinite(fb).all()
        assert s.shape == yb.shape == (T,) and s.dtype == yt.dtype == yb.dtype == np.int64
        assert 0 <= s.min() and s.max() < d.n_symbols
        assert 0 <= yt.min() and yt.max() < len(d.top_names)
        assert 0 <= yb.min() and yb.max() < len(d.bottom_names)
        np.testing.assert_array_equal(ft[:, -1], 1.0)   # the constant column of each level
        np.testing.assert_array_equal(fb[:, -1], 1.0)


def test_simulator_shapes_and_labels():
    d = simulate_indoor_tracks(n_days=5, n_complex=6, window=40, random_state=3)
    _check_layout(d)
    assert d.top_names == list(COMPLEX_ACTIVITIES) and d.bottom_names == list(PRIMITIVES)
    assert d.feat_top[0].shape[1] == 5 * 24 + 1 and d.feat_bottom[0].shape[1] == 5 * 27 + 4 + 1
    assert d.n_symbols == 72 and sorted(set(d.group)) == list(range(5))
    # windows of a day concatenate back to the day's track; positions stay inside the 6 m × 4 m flat
    for g in range(5):
        assert sum(len(d.y_top[w]) for w in np.flatnonzero(d.group == g)) == len(d.xy[g])
        assert (d.obs[g] >= 0).all() and (d.obs[g][:, 0] < 6).all() and (d.obs[g][:, 1] < 4).all()
    # every window is 40 steps except a day's last (between 20 and 59 steps)
    lens = np.array([len(y) for y in d.y_top])
    assert ((lens == 40) | ((lens >= 20) & (lens < 60))).all()
    # each primitive belongs to the script of its complex activity
    for yt, yb in zip(d.y_top, d.y_bottom):
        for t, b in zip(yt, yb):
            scripts = COMPLEX_ACTIVITIES[d.top_names[t]]
            assert any(d.bottom_names[b] in s for s in scripts)


def test_simulator_is_deterministic():
    a = simulate_indoor_tracks(n_days=3, random_state=11)
    b = simulate_indoor_tracks(n_days=3, random_state=11)
    c = simulate_indoor_tracks(n_days=3, random_state=12)
    for key in ("feat_top", "feat_bottom", "symbols", "y_top", "y_bottom", "obs"):
        for u, v in zip(a[key], b[key]):
            np.testing.assert_array_equal(u, v)
    assert len(a.y_top) != len(c.y_top) or any(
        not np.array_equal(u, v) for u, v in zip(a.obs, c.obs))


@pytest.mark.parametrize("kwargs", [{"n_days": 0}, {"window": 1}, {"noise": -1.0}])
def test_simulator_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        simulate_indoor_tracks(**kwargs)


def test_graphs_edges_trees_and_hiding():
    d = simulate_indoor_tracks(n_days=2, window=30, random_state=0)
    X, y = to_graphs(d, [0, 1])
    Kt, Dt, Db = len(d.top_names), d.feat_top[0].shape[1], d.feat_bottom[0].shape[1]
    for (nf, edges, ef), yy, w in zip(X, y, [0, 1]):
        T = len(d.y_top[w])
        assert nf.shape == (2 * T, Dt + Db) and edges.shape == (3 * T - 2, 2) and ef.shape == (3 * T - 2, 3)
        np.testing.assert_array_equal(nf[:T, :Dt], d.feat_top[w])
        np.testing.assert_array_equal(nf[T:, Dt:], d.feat_bottom[w])
        assert not nf[:T, Dt:].any() and not nf[T:, :Dt].any()
        np.testing.assert_array_equal(yy, np.concatenate([d.y_top[w], d.y_bottom[w] + Kt]))
        np.testing.assert_array_equal(ef.sum(axis=1), 1.0)
    edges, etype = two_level_edges(5)
    np.testing.assert_array_equal(etype, [0] * 4 + [1] * 4 + [2] * 5)
    # each of the two trees spans the 2T nodes with 2T - 1 edges and no cycle (union-find)
    for tree in two_level_trees(5):
        assert len(tree) == 9
        parent = list(range(10))

        def find(a):
            while parent[a] != a:
                a = parent[a]
            return a
        for u, v in edges[tree]:
            ru, rv = find(u), find(v)
            assert ru != rv
            parent[ru] = rv
    # the trees cover every edge together
    assert set(np.concatenate(two_level_trees(5))) == set(range(len(edges)))
    # the graph builder of GraphCRF numbers nodes and edges the same way
    from structlearn.engine.structures import graphs as gc
    np.testing.assert_array_equal(gc.two_level_chain(5), edges)


def test_hide_labels():
    y = [np.arange(10), np.arange(7)]
    h = hide_labels(y, 0.5, random_state=0)
    assert [int((a < 0).sum()) for a in h] == [5, 4]
    for a, b in zip(h, y):
        np.testing.assert_array_equal(a[a >= 0], b[a >= 0])
    np.testing.assert_array_equal(y[0], np.arange(10))  # inputs untouched
    assert all((a >= 0).all() for a in hide_labels(y, 0.0))
    with pytest.raises(ValueError, match="fraction"):
        hide_labels(y, 1.5)


def test_placelab_two_level_shapes():
    root = require_data("mit_placelab_tapia")
    days, taxonomy, vocab = _module("hhmm_placelab").load_subject(root / "subject1")
    d = placelab_two_level(days, taxonomy, vocab, top="category", bottom="activity", window=50,
                           min_count=40)
    _check_layout(d)
    V = len(vocab)
    assert d.n_symbols == V == 72
    assert d.feat_bottom[0].shape[1] == 3 * V + 1 and d.feat_top[0].shape[1] == 2 * V + 1
    assert sum(len(y) for y in d.y_top) == 2772  # SOURCE.md: subject1 has 2,772 sensor events
    # 15 activities with >= 40 events plus "Other"; their categories plus "Other"
    assert len(d.bottom_names) == 16 and "Other" in d.bottom_names and "Other" in d.top_names
    assert len(d.top_names) == 9
    # the taxonomy holds: every bottom label has one top label
    pairs = {(t, b) for yt, yb in zip(d.y_top, d.y_bottom) for t, b in zip(yt, yb)}
    assert len({b for _, b in pairs}) == len(pairs)
    with pytest.raises(ValueError, match="coarser"):
        placelab_two_level(days, taxonomy, vocab, top="activity", bottom="category")


def test_experiment_quick_smoke(capsys, tmp_path):
    mod = _module("dcrf_activities")
    res = mod.main(["--quick", "--data", "sim", "--hidden", "0.5", "--methods", "layered HMM,flat CRF",
                    "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert "layered HMM" in out and "flat CRF" in out
    for (data, method, frac), r in res.items():
        top, bottom, secs = r
        assert 0.0 <= top <= 1.0 and 0.0 <= bottom <= 1.0 and secs >= 0
        assert top > 0.5 and bottom > 0.3, (method, r)  # far above chance (1/4, 1/12)


@pytest.mark.slow
def test_experiment_quick_all_methods(capsys, tmp_path):
    require_data("mit_placelab_tapia")
    mod = _module("dcrf_activities")
    # every method on both data sets, briefly (2 iterations, 1 round, no curves): the full data of --quick
    res = mod.main(["--quick", "--hidden", "0.8", "--max-iterations", "2", "--rounds", "1", "--budgets", "",
                    "--jobs", "1", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert "sim:" in out and "placelab:" in out
    for key, r in res.items():
        if r is not None:
            assert all(0.0 <= v <= 1.0 for v in r[:2]), (key, r)


def test_ranking_check_against_a_full_run(tmp_path, capsys):
    mod = _module("dcrf_activities")
    ref = tmp_path / "adaboost_mrf.json"
    rows = [("ML exact", 0.90, 0.80), ("AdaBoost par.", 0.895, 0.70), ("layered HMM", 0.60, 0.75)]
    ref.write_text(json.dumps([{"data": "sim", "method": m, "hidden": 0.5, "top": t, "bottom": b, "seconds": 1.0}
                               for m, t, b in rows]))
    methods = [m for m, _, _ in rows]
    same = {("sim", m, 0.5): (t, b, 1.0) for m, t, b in rows}
    assert mod.check_ranking(same, methods, [0.5], ref) == []
    # within one F1 point in the full run: not a ranking; a swap of a pair further apart is reported
    swapped = {**same, ("sim", "AdaBoost par.", 0.5): (0.91, 0.76, 1.0)}
    assert mod.check_ranking(swapped, methods, [0.5], ref) == [
        "sim 50% bottom: AdaBoost par. vs layered HMM (full -0.050, here +0.010)"]
    assert "1 pairs disagree" in capsys.readouterr().out
    assert mod.check_ranking(same, methods, [0.5], tmp_path / "missing.json") is None
