"""``import structlearn`` does not import Numba (``structlearn tag`` runs without it); the fork- and
thread-safe threading layer (:mod:`structlearn._threading`) is still chosen, when Numba is imported later
or was imported before, and a user's choice is kept."""
import os
import subprocess
import sys

import pytest

_PROBE = """
import sys
{before}
import structlearn
lazy = 'numba' not in sys.modules
import numba
from structlearn import _threading
print(lazy, _threading.CHOSEN, numba.config.THREADING_LAYER)
"""


def _run(before="", **env):
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    full.update(env)
    res = subprocess.run([sys.executable, "-c", _PROBE.format(before=before)], capture_output=True, text=True,
                         timeout=120, env=full)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_import_structlearn_does_not_import_numba_and_the_layer_is_chosen_when_it_is():
    lazy, chosen, layer = _run()
    assert lazy == "True"
    assert chosen in ("tbb", "workqueue") and layer == chosen


def test_numba_imported_first():
    lazy, chosen, layer = _run(before="import numba")
    assert lazy == "False" and chosen in ("tbb", "workqueue") and layer == chosen


@pytest.mark.parametrize("user_layer", ["omp", "workqueue"])
def test_the_users_choice_is_kept(user_layer):
    lazy, chosen, layer = _run(NUMBA_THREADING_LAYER=user_layer)
    assert lazy == "True" and chosen == "None" and layer == user_layer


def test_the_parser_knows_every_structure_of_learn():
    from structlearn.cli.common import STRUCTURE_NAMES
    from structlearn.cli.learn import STRUCTURES

    assert tuple(STRUCTURES) == STRUCTURE_NAMES


def test_every_name_of_structlearn_io_resolves():
    import structlearn.io as sio

    for name in sio.__all__:
        assert getattr(sio, name) is not None
    assert set(sio.__all__) <= set(dir(sio))
    with pytest.raises(AttributeError):
        sio.no_such_reader
