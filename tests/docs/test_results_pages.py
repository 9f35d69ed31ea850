"""The docs hook's results pages (docs/hooks/build_hook.py): a cached full run, the --quick fallback under a
banner, a note without either; the cache key follows the example's text and the package's source."""
import importlib.util
import json

import pytest

from tests.conftest import ROOT, require_module


@pytest.fixture
def hook(tmp_path, monkeypatch):
    require_module("mkdocs")
    spec = importlib.util.spec_from_file_location("build_hook_under_test", ROOT / "docs" / "hooks" / "build_hook.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(mod, "_SOURCE_KEY", ["source-v1"])
    monkeypatch.delenv("STRUCTLEARN_DOCS_RESULTS", raising=False)
    monkeypatch.setattr(mod, "File", _Generated)
    return mod


class _Generated:
    """Stands in for mkdocs' File: records what the hook adds to the site."""

    def __init__(self, src_uri, abs_src_path):
        self.src_uri, self.abs_src_path = src_uri, abs_src_path

    @classmethod
    def generated(cls, config, src_uri, abs_src_path=None, content=None):
        return cls(src_uri, abs_src_path)


def _config(tmp_path):
    return {"site_dir": str(tmp_path / "site")}


def _fake_run(folder, key, page_text, ok=True, sub=("cwd", "out")):
    out = folder.joinpath(*sub)
    out.mkdir(parents=True)
    (out / "adaboost_mrf.md").write_text(page_text)
    (out / "adaboost_mrf_f1_time_sim.png").write_bytes(b"\x89PNG fake")
    meta = {"key": key, "ok": ok, "stdout": "", "seconds": 1234.0, "message": "", "date": "2026-12-08 01:00",
            "command": "python examples/dcrf_activities.py --results out"}
    (folder / "result.json").write_text(json.dumps(meta))


PAGE = "# AdaBoost.MRF on 2-level DCRFs: results\n\n| method | top F1 |\n|---|---:|\n| ML exact | 0.945 |\n\n" \
       "![F1 against training time](adaboost_mrf_f1_time_sim.png)\n"


def test_cached_full_run_is_shown_with_its_images(hook, tmp_path):
    key = hook._results_key("dcrf_activities", ["--results", "out"])
    _fake_run(hook.CACHE / "results" / "dcrf_activities", key, PAGE)
    files = []
    block = hook._result_block(_config(tmp_path), files, "dcrf_activities")
    assert block.startswith("`python examples/dcrf_activities.py --results out` — run 2026-12-08 01:00")
    assert "(1234 s)" in block and "| ML exact | 0.945 |" in block and "# AdaBoost.MRF" not in block
    assert "](assets/results/dcrf_activities/adaboost_mrf_f1_time_sim.png)" in block
    assert [f.src_uri for f in files] == ["assets/results/dcrf_activities/adaboost_mrf_f1_time_sim.png"]


def test_stale_cache_falls_back_to_quick_run_then_to_a_note(hook, tmp_path):
    key = hook._results_key("dcrf_activities", ["--results", "out"])
    _fake_run(hook.CACHE / "results" / "dcrf_activities", key, PAGE)
    hook._SOURCE_KEY[0] = "source-v2"           # the package changed: the cached full run is stale
    assert hook._results_key("dcrf_activities", ["--results", "out"]) != key
    block = hook._result_block(_config(tmp_path), [], "dcrf_activities")
    assert block.startswith('!!! note "Not in this build"') and "STRUCTLEARN_DOCS_RESULTS=dcrf_activities" in block
    gallery = hook.CACHE / "gallery" / "dcrf_activities"
    quick_key = hook._results_key("dcrf_activities", ["--quick", "--figures", str(gallery / "figures")])
    _fake_run(gallery, quick_key, PAGE, sub=("cwd", "docs", "results"))
    block = hook._result_block(_config(tmp_path), [], "dcrf_activities")
    assert block.startswith('!!! warning "Quick run, not the full experiment"') and "| ML exact | 0.945 |" in block


def test_results_selection(hook, monkeypatch):
    assert not hook._results_selected("dcrf_activities")            # default: cached only, no full run
    for value, expected in (("none", False), ("cached", False), ("all", True), ("x,dcrf_activities", True),
                            ("other", False)):
        monkeypatch.setenv("STRUCTLEARN_DOCS_RESULTS", value)
        assert hook._results_selected("dcrf_activities") is expected
