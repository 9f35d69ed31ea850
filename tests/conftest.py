"""Shared test fixtures: the one helper through which tests reach real data, and the loader of the
example and benchmark scripts."""
import importlib.util
import os
import pathlib

# The suite runs in pytest-xdist workers (one per core); Numba's own threads on top would oversubscribe
# the cores and spin at barriers. Set before structlearn (and numba) are imported.
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from structlearn.datasets import get_data_path  # noqa: E402

settings.register_profile(
    "structlearn", deadline=None, max_examples=60, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("structlearn")


ROOT = pathlib.Path(__file__).resolve().parents[1]


def script_module(relpath, name=None):
    """The script ``ROOT/relpath`` (e.g. ``"examples/hhmm_placelab.py"``) imported as a module."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def skip_unless_ci(msg):
    """Skip with ``msg`` locally; under CI (where every test dependency is installed) fail instead."""
    if os.environ.get("CI"):
        raise RuntimeError(msg + "; under CI this must not be missing")
    pytest.skip(msg)


def require_data(name):
    """Folder of real data set ``name``; skip when absent, but fail under CI (where ../shared exists)."""
    path = get_data_path(name)
    if path is None:
        skip_unless_ci(f"real data set {name!r} not found (looked in $STRUCTLEARN_DATA and ../shared/data)")
    return path


def require_module(name):
    """``importlib.import_module(name)``; skip when it is not installed, but fail under CI (the dev
    extra installs every test dependency)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        skip_unless_ci(f"{name} is not installed ({exc}); pip install -e '.[dev]'")


@pytest.fixture
def data_path():
    """Fixture form of :func:`require_data`: ``data_path("conll2000")``."""
    return require_data
