"""Kernels compiled at install and kernels compiled on demand (issue 36).

The package's build runs ``structlearn compile`` (a tiny fit of every estimator family, see
:mod:`structlearn.cli.workloads`) so that Numba's cache of every kernel the estimators use ships in the
package. These tests run every family's workload

- with the install's cache (no ``NUMBA_CACHE_DIR``, a fresh ``HOME``): nothing may be compiled;
- with an empty ``NUMBA_CACHE_DIR``, so every kernel compiles on demand, in two processes (the partition of
  ``structlearn compile --jobs 2``): the outputs must equal the install-time kernels' bit for bit, and each
  family that compiled a kernel must have said so with exactly one :class:`structlearn.CompilationWarning`.
"""
import json
import os
import subprocess
import sys

import pytest

from structlearn.cli.compile import partition
from structlearn.cli.workloads import WORKLOADS

# every workload in one process: per family, its output digest, the kernels compiled and the notices issued
SCRIPT = r"""
import hashlib, json, sys, warnings
import numpy as np
from structlearn import _compile_notice
from structlearn.cli.workloads import WORKLOADS, digest

out = {}
for name in sys.argv[1].split(","):
    _compile_notice._reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _compile_notice.CompilationWarning)
        result = WORKLOADS[name]()
    notices = [str(w.message) for w in caught if issubclass(w.category, _compile_notice.CompilationWarning)]
    out[name] = {"digest": digest(result), "compiled": len(_compile_notice.compilations()), "notices": notices}
print(json.dumps(out))
"""

_GROUPS = partition(list(WORKLOADS), 2)


def _run(names, env, timeout):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, ",".join(names)], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _env(tmp_path, cache_dir=None):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["HOME"] = str(tmp_path / "home")
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Every family's outputs with the install-time kernels (one process, fresh HOME, no NUMBA_CACHE_DIR)."""
    return _run(list(WORKLOADS), _env(tmp_path_factory.mktemp("installed")), timeout=1800)


@pytest.mark.slow
def test_the_install_compiled_every_family(installed):
    compiled = {name: r["compiled"] for name, r in installed.items() if r["compiled"]}
    assert not compiled, (f"kernels compiled on the first call after install: {compiled}; the build's "
                          "`structlearn compile` missed them (or the sources changed since: rerun it)")
    assert not any(r["notices"] for r in installed.values())


@pytest.mark.slow
@pytest.mark.parametrize("group", range(len(_GROUPS)))
def test_on_demand_kernels_equal_install_time_kernels_and_say_so(group, installed, tmp_path):
    names = _GROUPS[group]
    fresh = _run(names, _env(tmp_path, tmp_path / "numba-cache"), timeout=1800)
    differ = [n for n in names if fresh[n]["digest"] != installed[n]["digest"]]
    assert not differ, f"kernels compiled on demand give other bits than the install's: {differ}"
    assert fresh[names[0]]["compiled"] > 0, "an empty NUMBA_CACHE_DIR compiled nothing"
    for name in names:
        r = fresh[name]
        assert len(r["notices"]) == (1 if r["compiled"] else 0), (name, r)
        if r["notices"]:
            assert "Numba is compiling kernels for this call" in r["notices"][0]
