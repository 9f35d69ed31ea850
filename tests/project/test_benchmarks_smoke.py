"""Smoke test of benchmarks/bench_inference.py: it imports, and its contenders agree on a tiny case."""
import numpy as np
import pytest

from tests.conftest import require_module, script_module, skip_unless_ci


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
