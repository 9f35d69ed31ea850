"""distributed._common.keep_heap: the glibc heap settings a dask worker gets (it runs in a subprocess, so
the settings of the test process are not touched)."""
import os
import subprocess
import sys

import pytest

SCRIPT = ("from structlearn.distributed._common import keep_heap; import numpy as np, resource;"
          "first = keep_heap(); again = keep_heap();"
          "[np.ones(2**20).sum() for _ in range(3)];"
          "r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt;"
          "[np.ones(2**20).sum() for _ in range(20)];"
          "print(first, again, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)")


def run(env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, again, faults = out.stdout.split()
    return first == "True", again == "True", int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_keep_heap_under_the_nannys_trim_threshold_sets_glibc_once():
    first, again, _ = run({"MALLOC_TRIM_THRESHOLD_": "65536"})
    assert first and not again   # set once per process
    # the user's own mmap threshold is kept (page-fault counts are not compared: NumPy's large arrays may
    # live on transparent huge pages, which hide the difference in a small test)
    first, again, _ = run({"MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_MMAP_THRESHOLD_": "131072"})
    assert not first and not again


def test_keep_heap_does_nothing_without_the_nannys_setting():
    first, again, _ = run({})
    assert not first and not again
