"""Ctrl-C during ``structlearn learn``: exit status 130, one line on stderr, and no model file written or
replaced (nor a temporary file left beside it). The interrupt is a real SIGINT, raised in-process at the 3rd
evaluation of the training objective (deterministic, no timed kill)."""
import signal

import numpy as np
import pytest

from structlearn.io import write_crfsuite
from structlearn.learning.shards import ShardedObjective
from tests.cli._cli import run


@pytest.fixture
def train(tmp_path):
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(20):
        labels = [str(v) for v in rng.integers(0, 3, size=5)]
        X.append([{f"w={lab}{int(rng.integers(0, 2))}": 1.0} for lab in labels])
        y.append(labels)
    path = tmp_path / "train.txt"
    write_crfsuite(X, y, path)
    return path


@pytest.fixture
def interrupt_training(monkeypatch):
    """SIGINT (Python's default handler: KeyboardInterrupt) at the 3rd objective evaluation."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    original, calls = ShardedObjective.__call__, [0]

    def evaluate(self, w, g=None):
        calls[0] += 1
        if calls[0] == 3:
            signal.raise_signal(signal.SIGINT)
        return original(self, w, g)

    monkeypatch.setattr(ShardedObjective, "__call__", evaluate)
    yield calls
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("existing", [True, False])
def test_interrupted_learn_exits_130_and_writes_no_model(train, interrupt_training, capsys, existing):
    model = train.parent / "m.model"
    if existing:
        model.write_bytes(b"an earlier model")
    rc, out, err = run(capsys, "learn", "-m", model, "-p", "max_iterations=30", train)
    assert interrupt_training[0] >= 3
    assert rc == 130, out + err
    assert err == "structlearn: interrupted\n"
    assert "converged" not in out and "Saved" not in out
    if existing:
        assert model.read_bytes() == b"an earlier model"
    assert sorted(p.name for p in train.parent.iterdir()) == sorted(["train.txt"] + ["m.model"] * existing)


def test_interrupt_while_saving_leaves_the_existing_model_and_no_temporary_file(train, monkeypatch, capsys):
    model = train.parent / "m.model"
    model.write_bytes(b"an earlier model")

    def savez(fh, **arrays):
        fh.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", savez)
    rc, out, err = run(capsys, "learn", "-q", "-m", model, "-p", "max_iterations=3", train)
    assert rc == 130 and err == "structlearn: interrupted\n"
    assert model.read_bytes() == b"an earlier model"
    assert sorted(p.name for p in train.parent.iterdir()) == ["m.model", "train.txt"]


def test_interrupted_learn_says_so_at_the_end_of_its_log_file(train, interrupt_training, capsys):
    model, log = train.parent / "m.model", train.parent / "train.log"
    rc, out, err = run(capsys, "learn", "-m", model, "--log-file", log, "-p", "max_iterations=30", train)
    assert rc == 130 and err == "structlearn: interrupted\n"
    assert log.read_text().splitlines()[-1] == "Interrupted: training stopped, no model file written"
    assert not model.exists()


def test_interrupt_wrapped_in_a_system_error_exits_130(train, monkeypatch, capsys):
    """Ctrl-C while a Numba kernel calls back into Python comes out as a SystemError caused by the
    KeyboardInterrupt (seen in a real run): still an interrupt, not a traceback."""
    model = train.parent / "m.model"
    model.write_bytes(b"an earlier model")
    original, calls = ShardedObjective.__call__, [0]

    def evaluate(self, w, g=None):
        calls[0] += 1
        if calls[0] == 3:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as exc:
                raise SystemError("CPUDispatcher(<function chain_cll>) returned a result with an exception "
                                  "set") from exc
        return original(self, w, g)

    monkeypatch.setattr(ShardedObjective, "__call__", evaluate)
    rc, out, err = run(capsys, "learn", "-q", "-m", model, "-p", "max_iterations=30", train)
    assert rc == 130 and err == "structlearn: interrupted\n"
    assert model.read_bytes() == b"an earlier model"
