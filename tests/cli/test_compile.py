"""``structlearn compile``: the kernels of every estimator family compiled into the package's cache (what the
build runs), its partition over processes, its ``--check``, and the engine-wide cache stamp."""
import os
import subprocess
import sys

import pytest

from structlearn.cli.compile import partition
from structlearn.cli.workloads import CLUSTERS, OPTIONAL, WORKLOADS, digest
from tests.cli._cli import run


@pytest.mark.parametrize("jobs", [1, 2, 3, 8])
def test_partition_covers_every_family_once_and_keeps_clusters_together(jobs):
    groups = partition(list(WORKLOADS), jobs)
    assert 1 <= len(groups) <= jobs
    flat = [n for g in groups for n in g]
    assert sorted(flat) == sorted(WORKLOADS)
    for families, _ in CLUSTERS:
        assert sum(any(f in g for f in families) for g in groups) == 1, families
    assert partition(list(WORKLOADS), jobs) == groups  # fixed


def test_every_family_is_in_a_cluster_and_optional_ones_exist():
    clustered = [n for families, _ in CLUSTERS for n in families]
    assert sorted(clustered) == sorted(WORKLOADS)
    assert set(OPTIONAL) <= set(WORKLOADS)


def test_digest_is_bit_exact():
    import numpy as np

    a = [np.array([0.1, 0.2]), {"x": 1.0}, (3, "s")]
    assert digest(a) == digest([np.array([0.1, 0.2]), {"x": 1.0}, (3, "s")])
    assert digest(a) != digest([np.array([0.1, np.nextafter(0.2, 1)]), {"x": 1.0}, (3, "s")])
    assert digest([np.float64(1.0)]) == digest([1.0])


def test_unknown_family_is_a_one_line_error(capsys):
    rc, out, err = run(capsys, "compile", "--families", "NoSuchHMM")
    assert rc == 2 and "unknown NoSuchHMM" in err and err.count("\n") == 1


@pytest.mark.slow
def test_check_after_install_compiles_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["HOME"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "structlearn", "compile", "--check", "--families",
                           "FactorGraph-bp,GaussianHMM"], env=env, capture_output=True, text=True, timeout=900,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 kernels compiled now" in proc.stdout


def test_kernel_caches_are_stamped_with_the_whole_engine():
    """A kernel's cache is keyed on every engine source, not on its own file only (a caller inlines its
    callees from other files)."""
    from structlearn import _kernel_cache
    from structlearn.engine.kernels import chain

    locator = chain.chain_forward._cache._impl.locator
    assert type(locator).__name__ == "EngineCacheLocator"
    assert locator.get_source_stamp() == _kernel_cache.engine_digest()
    files = _kernel_cache._engine_files()
    assert "engine/semirings.py" in files and os.path.join("engine/kernels", "chain_steps.py") in files
    assert _kernel_cache._inside_engine(chain.__file__)
    assert not _kernel_cache._inside_engine(_kernel_cache.__file__)


class _Event:
    def __init__(self, module, name="kernel"):
        def func():
            pass

        func.__module__, func.__qualname__ = module, name
        self.data = {"dispatcher": type("D", (), {"py_func": func})()}


def _listener():
    from structlearn import _compile_notice

    _compile_notice._reset()
    return _compile_notice, _compile_notice._make_listener()


def test_the_notice_is_issued_once_per_process_for_structlearn_kernels_only():
    notice, listener = _listener()
    with pytest.warns(notice.CompilationWarning, match="first: engine.kernels.chain.a") as record:
        listener.on_start(_Event("numpy.fake"))             # not ours: ignored
        listener.on_start(_Event("structlearn.engine.kernels.chain", "a"))
        listener.on_start(_Event("structlearn.engine.kernels.tree", "b"))
    assert len([w for w in record if w.category is notice.CompilationWarning]) == 1
    assert notice.compilations() == ["structlearn.engine.kernels.chain.a", "structlearn.engine.kernels.tree.b"]
    notice._reset()


def test_the_notice_never_fails_a_compilation_under_warnings_as_errors(capsys):
    import warnings

    notice, listener = _listener()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        listener.on_start(_Event("structlearn.engine.kernels.chain", "a"))  # must not raise
    assert "CompilationWarning: structlearn: Numba is compiling" in capsys.readouterr().err
    notice._reset()
