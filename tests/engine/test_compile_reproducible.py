"""Kernels compiled at install, kernels loaded from Numba's cache and kernels compiled on demand give the
same bits, for every estimator family; a family that compiles on demand says so once (issue 36).

The package's build runs ``structlearn compile``: its worker processes run the tiny workload of every
family (:mod:`structlearn.cli.workloads`), compiling the kernels in the process that runs them, and keep the
digests of the outputs in ``structlearn-compile.json`` beside the cache that ships in the package. Here

- a fresh process (fresh ``HOME``, no ``NUMBA_CACHE_DIR``) runs every workload with the installed cache:
  it must compile nothing, and its outputs must equal the workers' bit for bit;
- for every family, a fresh process in which Numba's cache misses the first kernel the family asks for
  (what happens with a new dtype, another CPU or Numba) compiles that kernel on demand: the family must say
  so with exactly one :class:`structlearn.CompilationWarning`, and give the installed kernels' bits.

Numba links a freshly compiled callee's own machine code into the process that compiled it, but a caller
loaded from the cache carries the callee inlined and optimised in the caller's context. Fast-math flags
(reassoc, arcp, nsz, and contract too) let LLVM round the two differently in the last bits (a new user's
first CoNLL-2000 fit stopped after 160 iterations, every later one after 161), so the chain
forward-backward has none. The chain workload includes the marginals of every edge mode, serial and on two
threads.
"""
import json
import os
import subprocess
import sys

import pytest

from structlearn.cli.workloads import OPTIONAL, WORKLOADS

# every workload named in argv[1]: its output digest, the structlearn kernels compiled and the notices
# issued while it ran; with argv[2] == "miss", the cache misses the first structlearn kernel asked for
# (and saves nothing, so the installed cache is left as it was)
SCRIPT = r"""
import json, sys, warnings
from structlearn import _compile_notice
from structlearn.cli.workloads import WORKLOADS, digest

missed = []
if sys.argv[2] == "miss":
    from numba.core import caching

    load = caching.Cache.load_overload

    def load_overload(self, sig, target_context):
        func = self._py_func
        if not missed and getattr(func, "__module__", "").startswith("structlearn."):
            missed.append(f"{func.__module__}.{func.__qualname__}")
            return None
        return load(self, sig, target_context)

    caching.Cache.load_overload = load_overload
    caching.Cache.save_overload = lambda self, sig, data: None

out = {}
for name in sys.argv[1].split(","):
    _compile_notice._reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _compile_notice.CompilationWarning)
        result = WORKLOADS[name]()
    notices = [str(w.message) for w in caught if issubclass(w.category, _compile_notice.CompilationWarning)]
    out[name] = {"digest": digest(result), "compiled": _compile_notice.compilations(), "notices": notices,
                 "missed": list(missed)}
print(json.dumps(out))
"""


def _threads():
    """Numba's thread count when ``structlearn compile`` ran (the chain kernels' reductions still split the
    batch by thread count, issue 38: compare like with like), else this process's."""
    from structlearn.cli.compile import read_manifest

    manifest = read_manifest() or {}
    return str(manifest.get("threads") or os.environ.get("NUMBA_NUM_THREADS", "1"))


def _run(names, tmp_path, mode="installed"):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["HOME"] = str(tmp_path)
    env["NUMBA_NUM_THREADS"] = _threads()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, ",".join(names), mode], env=env, capture_output=True,
                          text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Every workload's outputs with the install-time kernels (one process, fresh HOME, no NUMBA_CACHE_DIR)."""
    return _run(list(WORKLOADS), tmp_path_factory.mktemp("installed"))


@pytest.mark.slow
def test_the_install_compiled_every_family(installed):
    compiled = {name: r["compiled"] for name, r in installed.items() if r["compiled"]}
    assert not compiled, (f"kernels compiled on the first call after install: {compiled}; the build's "
                          "`structlearn compile` missed them, or the engine's sources changed since the "
                          "install: run `structlearn compile`")
    assert not any(r["notices"] for r in installed.values())


@pytest.mark.slow
def test_installed_kernels_give_the_bits_of_kernels_compiled_in_the_running_process(installed):
    from structlearn import _kernel_cache
    from structlearn.cli.compile import manifest_path, read_manifest

    manifest = read_manifest()
    assert manifest is not None, f"no {manifest_path()}: the install did not run `structlearn compile`"
    assert manifest["engine"] == _kernel_cache.engine_digest().hex(), \
        "the engine's sources changed since `structlearn compile` ran: run it again"
    fresh = manifest["families"]
    # a family whose optional dependency the build environment lacked (torch: pip's isolated build has
    # none) is not in the manifest; its kernels are the chain's, and the test below compiles one on demand
    assert sorted(n for n in WORKLOADS if n not in OPTIONAL) == sorted(n for n in fresh if n not in OPTIONAL)
    assert sum(r["compiled"] for r in fresh.values()) > 0, \
        "the manifest's workers loaded every kernel from a cache: clear it and run `structlearn compile`"
    differ = [n for n in fresh if fresh[n]["digest"] != installed[n]["digest"]]
    assert not differ, f"kernels loaded from the installed cache give other bits than freshly compiled: {differ}"


@pytest.mark.slow
@pytest.mark.parametrize("family", list(WORKLOADS))
def test_a_family_compiling_on_demand_says_so_once_and_gives_the_same_bits(family, installed, tmp_path):
    r = _run([family], tmp_path, mode="miss")[family]
    assert r["missed"] and r["compiled"][0] == r["missed"][0], r
    assert len(r["notices"]) == 1, r
    assert "Numba is compiling kernels for this call" in r["notices"][0]
    assert r["missed"][0].removeprefix("structlearn.") in r["notices"][0]
    assert r["digest"] == installed[family]["digest"], \
        f"{family}: {r['missed'][0]} compiled on demand gives other bits than the installed kernel"
