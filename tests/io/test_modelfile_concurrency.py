"""Saving a model file: a unique temporary file in the target folder, flushed, renamed over the target.
Threads saving one path never collide and a reader never sees a half-written file; saving to a folder or
to '' names the target (not the temporary file); a failed save leaves no temporary file behind."""
import os
import threading

import numpy as np
import pytest

from structlearn.io.modelfile import ModelFileError, load_model, save_model

N_THREADS, N_SAVES = 8, 10


def _save(path, k):
    noise = np.random.default_rng(k).random(20_000)  # incompressible: a write takes a while
    save_model(path, format_name="test", version=1, estimator="test", metadata={"k": k},
               arrays={"w": noise, "k": np.full(100, k)})


def test_threads_saving_one_path_while_one_reads(tmp_path):
    """With the temp name path + process id, 8-22 of 80 threaded saves failed with FileNotFoundError and
    the reader saw half-written files."""
    path = tmp_path / "m.npz"
    _save(path, 10_000)
    errors, reads = [], [0]
    done = threading.Event()

    def saver(t):
        for i in range(N_SAVES):
            try:
                _save(path, t * N_SAVES + i)
            except Exception as exc:  # noqa: BLE001 - every failure is the test's finding
                errors.append(f"save {t}/{i}: {type(exc).__name__}: {exc}")

    def reader():
        while not done.is_set():
            try:
                header, arrays = load_model(path)
            except (ModelFileError, OSError) as exc:
                errors.append(f"read: {type(exc).__name__}: {exc}")
                continue
            k = header["metadata"]["k"]
            if not (np.all(arrays["k"] == k) and np.array_equal(arrays["w"],
                                                                np.random.default_rng(k).random(20_000))):
                errors.append(f"read: arrays of another save than the header's ({k})")
            reads[0] += 1

    savers = [threading.Thread(target=saver, args=(t,)) for t in range(N_THREADS)]
    r = threading.Thread(target=reader)
    r.start()
    for s in savers:
        s.start()
    for s in savers:
        s.join()
    done.set()
    r.join()
    assert not errors, f"{len(errors)} failures, e.g. {errors[:3]}"
    assert reads[0] > 0
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]  # no temporary file left
    header, _ = load_model(path)
    assert 0 <= header["metadata"]["k"] < N_THREADS * N_SAVES


def test_saving_to_a_folder_names_the_folder(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder") as info:
        _save(folder, 1)
    assert info.value.filename == str(folder) and ".tmp" not in str(info.value)
    assert os.listdir(folder) == [] and sorted(os.listdir(tmp_path)) == ["models"]


def test_saving_to_an_empty_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="path is empty") as info:
        _save("", 1)
    assert ".tmp" not in str(info.value)
    assert os.listdir(tmp_path) == []


def test_a_failed_save_leaves_no_temporary_file_and_the_old_model(tmp_path, monkeypatch):
    path = tmp_path / "m.npz"
    _save(path, 1)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez_compressed", fail)
    with pytest.raises(OSError, match="No space left") as info:
        _save(path, 2)
    assert info.value.filename == str(path)
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]
    assert load_model(path)[0]["metadata"]["k"] == 1


def test_saved_file_has_the_mode_open_would_give(tmp_path):
    """mkstemp creates 0600; the model file gets 0666 less the umask, as before."""
    mask = os.umask(0o022)
    os.umask(mask)
    path = tmp_path / "m.npz"
    _save(path, 1)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask


def test_crfsuite_format_save_is_atomic_too(tmp_path):
    """LinearChainCRF.save(format="crfsuite") wrote the target in place (a reader could see half a file;
    a folder gave IsADirectoryError from open)."""
    from structlearn.io.crfsuite_model import read_crfsuite_model
    from structlearn.crf.crfsuite_model import CRFsuiteModel, write_crfsuite_model_bytes

    src = tmp_path / "src.crfsuite"
    src.write_bytes(write_crfsuite_model_bytes(CRFsuiteModel(
        ["B", "I"], ["w=a", "w=b"], np.array([[0, 0, 0.5], [1, 1, -1.0]]), np.array([[0, 1, 2.0]]))))
    est = read_crfsuite_model(src)
    folder = tmp_path / "models"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder") as info:
        est.save(folder, format="crfsuite")
    assert info.value.filename == str(folder) and os.listdir(folder) == []
    target = tmp_path / "m.crfsuite"
    seen = []

    def watch():
        for _ in range(200):
            if target.exists():
                seen.append(target.read_bytes())

    w = threading.Thread(target=watch)
    w.start()
    for _ in range(20):
        est.save(target, format="crfsuite")
    w.join()
    assert {len(b) for b in seen} <= {len(src.read_bytes())}  # never an empty or partial file
    assert target.read_bytes() == src.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["m.crfsuite", "models", "src.crfsuite"]
