"""Fuzzing model files: structlearn's ``.npz`` container (damaged bytes, damaged archive members with
valid CRCs, damaged JSON headers) must load or raise ModelFileError, CRFsuite's binary ``lCRF`` files
CRFsuiteModelError (a ModelFileError), never another exception; the CLI reports such a file as one line,
exit status 2."""
import io
import json
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.cli.main import main
from structlearn.io.crfsuite_model import is_crfsuite_model_file, read_crfsuite_model
from structlearn.io.modelfile import HEADER_KEY, ModelFileError, load_model, read_header, save_model
from structlearn.crf.crfsuite_model import (CRFsuiteModel, CRFsuiteModelError, read_crfsuite_model_bytes,
                                              write_crfsuite_model_bytes)

from tests.io.test_reader_fuzz import damaged

ARRAYS = {"w": np.arange(6.0).reshape(2, 3), "ids": np.array([1, 2], np.int32), "s": np.array(["a", "bc"])}


def _model_bytes(tmp_path, format_name="linear-chain-crf"):
    p = tmp_path / "valid.npz"
    save_model(p, format_name=format_name, version=1, estimator="structlearn.LinearChainCRF",
               params={"c2": 1.0}, metadata={"classes": ["B", "I"]}, arrays=ARRAYS)
    return p.read_bytes()


def _members(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _zip(members):
    """An archive of ``members`` with valid CRCs: damage zipfile's checks cannot catch."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _loads_or_model_file_error(path):
    for read in (load_model, read_header):
        try:
            read(path)
        except ModelFileError as exc:
            assert str(path) in str(exc), f"the error does not name the file: {exc}"


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("modelfuzz")


def test_damaged_file_bytes(fuzz_dir):
    good = _model_bytes(fuzz_dir)
    path = fuzz_dir / "bytes.npz"

    @settings(max_examples=40)
    @given(damaged(good))
    def run(data):
        path.write_bytes(data)
        _loads_or_model_file_error(path)

    run()


def test_damaged_archive_member(fuzz_dir):
    """One member (the header's or an array's .npy bytes) damaged inside an archive with valid CRCs."""
    members = _members(_model_bytes(fuzz_dir))
    path = fuzz_dir / "member.npz"

    @settings(max_examples=60)
    @given(st.sampled_from(sorted(members)), st.data())
    def run(name, data):
        path.write_bytes(_zip({**members, name: data.draw(damaged(members[name]))}))
        _loads_or_model_file_error(path)

    run()


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                     max_leaves=4)


def test_damaged_json_header(fuzz_dir):
    """A header entry replaced by any JSON value, or the header's text damaged (a valid .npy member)."""
    members = _members(_model_bytes(fuzz_dir))
    header = json.loads(np.load(io.BytesIO(members[HEADER_KEY + ".npy"])).tobytes())
    path = fuzz_dir / "json.npz"

    @settings(max_examples=40)
    @given(st.sampled_from(sorted(header)), _JSON, st.booleans(), st.data())
    def run(key, value, as_text, data):
        raw = json.dumps({**header, key: value}).encode()
        if as_text:
            raw = data.draw(damaged(raw))
        buf = io.BytesIO()
        np.save(buf, np.frombuffer(raw, dtype=np.uint8))
        path.write_bytes(_zip({**members, HEADER_KEY + ".npy": buf.getvalue()}))
        _loads_or_model_file_error(path)

    run()


def _with_header_member(tmp_path, change):
    """A model file whose header member's bytes are ``change(bytes)``."""
    members = _members(_model_bytes(tmp_path))
    key = HEADER_KEY + ".npy"
    members[key] = change(members[key])
    path = tmp_path / "damaged.npz"
    path.write_bytes(_zip(members))
    return path


def _unclosed_shape(npy):
    """The .npy header's ``(12,)`` left open: not a literal, and NumPy's retokenising of it (for files of
    Python 2) raises tokenize.TokenError ('EOF in multi-line statement')."""
    start = npy.index(b"'shape': (")
    end = npy.index(b")", start)
    return npy[:end] + b" " + npy[end + 1:]


@pytest.mark.parametrize("change, match", [
    (_unclosed_shape, "corrupt .npy header"),  # leaked tokenize.TokenError
    (lambda npy: b"X" + npy[1:], "not a .npy array"),  # NumPy returned bytes: AttributeError 'tobytes'
    (lambda npy: npy.replace(b"'shape': (", b"'shape': (99999999999999999999, "), "corrupt"),  # OverflowError
])
def test_damaged_npy_header_of_the_model_header(tmp_path, change, match):
    path = _with_header_member(tmp_path, change)
    with pytest.raises(ModelFileError, match=match):
        read_header(path)
    with pytest.raises(ModelFileError, match=match):
        load_model(path)


@pytest.mark.parametrize("entry, value, match", [
    ("arrays", 5, "'arrays' must be a list"), ("arrays", None, "'arrays' must be a list"),  # TypeError leaked
    ("arrays", [1], "'arrays' must be a list"), ("params", [], "'params' must be"),
    ("metadata", "x", "'metadata' must be"), ("version", True, "integer format")])
def test_header_entries_of_the_wrong_type(tmp_path, entry, value, match):
    def change(npy):
        header = json.loads(np.load(io.BytesIO(npy)).tobytes())
        buf = io.BytesIO()
        np.save(buf, np.frombuffer(json.dumps({**header, entry: value}).encode(), dtype=np.uint8))
        return buf.getvalue()

    with pytest.raises(ModelFileError, match=match):
        load_model(_with_header_member(tmp_path, change))


@pytest.mark.parametrize("command", [["info"], ["dump"], ["tag", "-m"], ["tag", "-i", "-m"]])
def test_cli_reports_a_damaged_header_in_one_line(tmp_path, capsys, command):
    """info, dump and tag printed a tokenize.TokenError traceback (exit status 1)."""
    path = _with_header_member(tmp_path, _unclosed_shape)
    (tmp_path / "in.txt").write_text("B\tw=a\n\n")
    argv = command + [str(path)] + (["in.txt"] if command[0] == "tag" else [])
    rc = main([a if a != "in.txt" else str(tmp_path / a) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("structlearn: error: ") and str(path) in err
    assert "corrupt" in err


def test_loading_a_folder(tmp_path):
    """Was a raw IsADirectoryError."""
    for read in (load_model, read_header):
        with pytest.raises(ModelFileError, match="is a folder") as info:
            read(tmp_path)
        assert str(tmp_path) in str(info.value)
    with pytest.raises(ModelFileError, match="is a folder"):
        is_crfsuite_model_file(tmp_path)
    with pytest.raises(ModelFileError, match="is a folder"):
        read_crfsuite_model(tmp_path)


CRFSUITE = write_crfsuite_model_bytes(CRFsuiteModel(
    ["B", "I", "O"], ["w=a", "w=b", "pos=X"], np.array([[0, 1, 0.5], [2, 2, -1.0]]),
    np.array([[0, 1, 2.0], [2, 0, -0.5]])))


def test_damaged_crfsuite_model_bytes():
    read_crfsuite_model_bytes(CRFSUITE, "valid")

    @settings(max_examples=60)
    @given(damaged(CRFSUITE))
    def run(data):
        try:
            read_crfsuite_model_bytes(data, "m.crfsuite")
        except CRFsuiteModelError as exc:
            assert "m.crfsuite" in str(exc)

    run()


def test_crfsuite_feature_chunk_longer_than_the_file():
    """np.frombuffer's 'buffer size must be a multiple of element size' (a plain ValueError) leaked."""
    off_f = int.from_bytes(CRFSUITE[28:32], "little")
    n = int.from_bytes(CRFSUITE[off_f + 8:off_f + 12], "little")
    bad = CRFSUITE[:off_f + 8] + (n + 10_000).to_bytes(4, "little") + CRFSUITE[off_f + 12:]
    with pytest.raises(CRFsuiteModelError, match="claims"):
        read_crfsuite_model_bytes(bad, "m.crfsuite")
