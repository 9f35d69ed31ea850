"""Locating real data sets (``../shared/data/<name>`` and friends)."""
import os
from pathlib import Path

_HERE = Path(__file__).resolve()


def _candidate_roots(data_home=None):
    if data_home is not None:
        yield Path(data_home)
    env = os.environ.get("STRUCTLEARN_DATA")
    if env:
        yield Path(env)
    yield Path.cwd() / ".." / "shared" / "data"
    yield Path.cwd() / "shared" / "data"
    # the repository checkout: <repo>/src/structlearn/datasets/_base.py -> <repo>/../shared/data
    for parent in _HERE.parents:
        yield parent / ".." / "shared" / "data"


def get_data_path(name, data_home=None):
    """Folder of the real data set ``name``, or ``None`` when it is not found.

    Looks in ``data_home``, then ``$STRUCTLEARN_DATA``, then ``../shared/data`` (relative to the current
    directory and to the repository).
    """
    for root in _candidate_roots(data_home):
        p = root / name
        if p.is_dir():
            return p.resolve()
    return None
