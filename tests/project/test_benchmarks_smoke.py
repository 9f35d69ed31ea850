"""Smoke tests of the benchmarks: bench_inference.py imports and its contenders agree on a tiny case;
run_all.py lists every script, runs one and tabulates its summary."""
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, require_module, script_module, skip_unless_ci


@pytest.fixture(scope="module")
def bench():
    require_module("hmmlearn")
    return script_module("benchmarks/bench_inference.py")


def test_structlearn_and_hmmlearn_agree_on_a_tiny_case(bench):
    checked = bench.check_equivalence(use_torch=False, rng=np.random.default_rng(7))
    assert checked == ["structlearn", "hmmlearn-log", "hmmlearn-scaling"]


def test_torch_struct_agrees_on_a_tiny_case(bench):
    require_module("torch_struct")
    if bench._torch_struct_status() is not None:
        skip_unless_ci(f"torch-struct does not load: {bench._torch_struct_status()}")
    checked = bench.check_equivalence(use_torch=True, rng=np.random.default_rng(7))
    assert "torch-struct" in checked


def test_prefix_workloads(bench):
    rng = np.random.default_rng(0)
    w = bench.make_chain(3, [4, 6, 5], rng)
    sub = bench.take(w, 7)
    assert sub.lengths.tolist() == [4, 6] and sub.log_b.shape == (10, 3)
    long = bench.take(bench.make_chain(3, [50], rng), 8)
    assert long.lengths.tolist() == [8] and long.log_b.shape == (8, 3)
    wall, cpu, n = bench.timed(bench.hmmlearn_scaling, w, budget=0.05, repeats=1)
    assert n <= w.n_tokens and wall > 0 and cpu >= 0


# -- benchmarks/run_all.py -----------------------------------------------------------------------------
def test_run_all_lists_every_benchmark_script():
    run_all = script_module("benchmarks/run_all.py")
    listed = {s for s, *_ in run_all.BENCHMARKS}
    present = {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert present <= listed, f"add {sorted(present - listed)} to run_all.BENCHMARKS"
    names = [name for name, _, _ in run_all.commands(quick=True)]
    assert len(names) == len(present)
    assert {n for n, _, _ in run_all.commands(quick=True, only=["hmm"])} == {"hmm", "hhmm"}


def test_run_all_runs_a_script_and_tabulates_its_summary(tmp_path, capsys):
    run_all = script_module("benchmarks/run_all.py")
    script = tmp_path / "bench_fake.py"
    script.write_text("print('row a 1.0 2.0')\nprint('geometric mean ratio: 2.00x vs peer')\n")
    status, sec, text, peak = run_all.run_one([sys.executable, str(script)], limit=60)
    assert status == "ok" and sec >= 0 and peak > 1   # MiB: the interpreter alone is several
    assert run_all.summary_lines(text) == ["geometric mean ratio: 2.00x vs peer"]
    bad = tmp_path / "bench_bad.py"
    bad.write_text("raise SystemExit(3)\n")
    assert run_all.run_one([sys.executable, str(bad)], limit=60)[0] == "failed (rc 3)"
    md = run_all.table([("fake", "busy", status, sec, peak, run_all.summary_lines(text))], markdown=True)
    assert md.splitlines()[2].startswith("| fake | busy | ok |")
    assert run_all.main(["--dry-run", "--quick", "--only", "inference"]) == 0
    assert "bench_inference.py --quick" in capsys.readouterr().out


def test_run_all_busy_load_starts_and_stops_its_two_processes():
    run_all = script_module("benchmarks/run_all.py")
    with run_all.busy_load(mib=8) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    assert all(p.poll() is not None for p in procs)


def test_run_all_stops_a_script_at_its_limit(tmp_path):
    run_all = script_module("benchmarks/run_all.py")
    slow = tmp_path / "bench_slow.py"
    slow.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    status, sec, text, _ = run_all.run_one([sys.executable, str(slow)], limit=2)
    assert status == "timed out" and sec < 30 and "started" in text
