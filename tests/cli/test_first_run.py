"""A new user's first run: the notice before Numba's first compilation (``learn`` / ``demo``), the on-disk
cache check behind it, and ``python -m structlearn``."""
import os
import subprocess
import sys
import textwrap

import structlearn.cli.learn as learn
from structlearn.cli.learn import COMPILE_NOTICE
from structlearn.io import write_crfsuite
from tests.cli._cli import run

_CACHED_KERNEL = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import numba
    from structlearn.engine.kernels.cache import is_cached
    import tiny_kernel
    print(is_cached(tiny_kernel.f), is_cached(numba.njit(tiny_kernel.g)))
    tiny_kernel.f(1)
    print(is_cached(tiny_kernel.f))
""")


def test_is_cached_before_and_after_the_first_compilation(tmp_path):
    (tmp_path / "tiny_kernel.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef f(x):\n"
                                             "    return x + 1\n\ndef g(x):\n    return x\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", _CACHED_KERNEL, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # empty cache: False; a dispatcher without a disk cache: None; after the first call: True
    assert out.stdout.split() == ["False", "None", "True"]


def _data(tmp_path):
    items = [[{"w=a": 1.0}, {"w=b": 1.0}], [{"w=b": 1.0}, {"w=a": 1.0}, {"w=c": 1.0}]]
    labels = [["A", "B"], ["B", "A", "C"]]
    write_crfsuite(items, labels, tmp_path / "train.txt")
    return tmp_path / "train.txt"


def test_learn_says_the_first_run_compiles(tmp_path, capsys, monkeypatch):
    train = _data(tmp_path)
    monkeypatch.setattr(learn, "_first_compilation", lambda: True)
    rc, out, err = run(capsys, "learn", "-m", tmp_path / "m.model", "-p", "max_iterations=3", train)
    assert rc == 0, err
    lines = out.splitlines()
    assert COMPILE_NOTICE in lines
    assert lines.index(COMPILE_NOTICE) < min(i for i, line in enumerate(lines) if line.startswith("iter "))
    monkeypatch.setattr(learn, "_first_compilation", lambda: False)
    rc, out, err = run(capsys, "learn", "-m", tmp_path / "m2.model", "-p", "max_iterations=3", train)
    assert rc == 0 and COMPILE_NOTICE not in out
    rc, out, err = run(capsys, "learn", "-q", "-m", tmp_path / "m3.model", "-p", "max_iterations=3", train)
    assert rc == 0 and COMPILE_NOTICE not in out  # -q: quiet


def test_first_compilation_reads_the_objective_kernel_cache():
    from structlearn.engine.kernels.cache import is_cached
    from structlearn.engine.kernels.crf import chain_cll

    assert learn._first_compilation() is (is_cached(chain_cll) is False)


def test_python_dash_m_structlearn(tmp_path):
    out = subprocess.run([sys.executable, "-m", "structlearn", "--help"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: structlearn ")
    out = subprocess.run([sys.executable, "-m", "structlearn", "info", str(tmp_path / "missing.model")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.startswith("structlearn: error: ")


def test_importing_dunder_main_runs_nothing(capsys):
    # mkdocstrings / griffe import every module of the package: the import must neither parse argv nor exit
    import importlib

    module = importlib.import_module("structlearn.__main__")
    assert callable(module.main)
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""
