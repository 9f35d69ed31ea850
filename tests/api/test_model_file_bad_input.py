"""Bad model files and bad input through the Python API: a ``ModelFileError`` (a ValueError) naming the file
and what is wrong instead of zipfile's, NumPy's or json's own exceptions, misleading messages or silent
garbage; predictions whose scores overflow are refused instead of printed."""
import io
import json
import struct
import warnings
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import HigherOrderCRF, LinearChainCRF, SemiMarkovCRF
from structlearn.io import ModelFileError
from structlearn.crf.crfsuite_model import CRFsuiteModel, read_crfsuite_model_bytes, write_crfsuite_model_bytes
from structlearn.utils.modelfile import HEADER_KEY, load_model, save_model

X = [[{"w": "a", "v": 1.0}, {"w": "b", "v": 2.0}], [{"w": "b", "v": 1.0}, {"w": "a", "v": 0.5}, {"w": "a", "v": 0.1}],
     [{"w": "a", "v": 0.3}, {"w": "b", "v": 1.5}]]
Y = [["A", "B"], ["B", "A", "A"], ["A", "B"]]
# finite attribute values whose state scores overflow to +inf under weights of 5
HUGE = [[{"w": "a", "v": 1.0}], [{"w": "a", "v": 1e308}, {"w": "b", "v": 1e308}]]


def _fit(est, x=X, y=Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(x, y)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A small saved LinearChainCRF model file."""
    return _fit(LinearChainCRF(max_iterations=3)).save(tmp_path_factory.mktemp("m") / "m.model")


def _rewrite(src, dst, meta=None, **arrays):
    """A copy of model file ``src`` with metadata entries ``meta`` and arrays replaced."""
    header, stored = load_model(src)
    save_model(dst, format_name=header["format"], version=header["version"], estimator=header["estimator"],
               params=header["params"], metadata={**header["metadata"], **(meta or {})},
               arrays={**stored, **arrays})
    return dst


def _npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _archive(path, members):
    """A zip archive of raw .npy members (name -> bytes), stored uncompressed."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name + ".npy", data)
    return path


# -- the container (structlearn.utils.modelfile) -------------------------------------------------------
# version needed (NotImplementedError), general purpose flags: encrypted (RuntimeError), compression method
@pytest.mark.parametrize("offset, value", [(6, 0xFF), (8, 0x01), (10, 0x63)])
def test_corrupt_zip_entry_header_is_a_model_file_error(model, tmp_path, offset, value):
    data = bytearray(model.read_bytes())
    data[data.index(b"PK\x01\x02") + offset] = value  # the first central directory entry
    bad = tmp_path / "bad.model"
    bad.write_bytes(bytes(data))
    for load in (load_model, LinearChainCRF.load):
        with pytest.raises(ModelFileError, match="bad.model.*corrupt .npz archive entry"):
            load(bad)


def test_array_header_claiming_a_huge_shape(model, tmp_path):
    # NumPy allocates the claimed shape (800 PB) before reading: a MemoryError
    header, arrays = load_model(model)
    descr = repr({"descr": "<i8", "fortran_order": False, "shape": (10 ** 17,)}).encode()
    descr += b" " * (63 - (10 + len(descr)) % 64) + b"\n"
    members = {name: _npy(a) for name, a in arrays.items()}
    members["attr_ptr"] = b"\x93NUMPY\x01\x00" + len(descr).to_bytes(2, "little") + descr
    members[HEADER_KEY] = _npy(np.frombuffer(json.dumps(header).encode(), np.uint8))
    bad = _archive(tmp_path / "huge.model", members)
    with pytest.raises(ModelFileError, match="huge.model.*memory.*huge shape"):
        LinearChainCRF.load(bad)


def test_header_nested_too_deeply(model, tmp_path):
    _, arrays = load_model(model)
    text = '{"magic": "structlearn-model", "x": ' + "[" * 100000 + "]" * 100000 + "}"
    bad = tmp_path / "deep.model"
    with open(bad, "wb") as fh:
        np.savez_compressed(fh, **arrays, **{HEADER_KEY: np.frombuffer(text.encode(), np.uint8)})
    with pytest.raises(ModelFileError, match="deep.model.*nested too deeply"):
        LinearChainCRF.load(bad)


def test_truncated_array_is_reported_as_truncated(model, tmp_path):
    header, arrays = load_model(model)
    members = {name: _npy(a) for name, a in arrays.items()}
    members["coef"] = members["coef"][:-12]  # the data is 12 bytes short of its header's shape
    members[HEADER_KEY] = _npy(np.frombuffer(json.dumps(header).encode(), np.uint8))
    bad = _archive(tmp_path / "short.model", members)
    with pytest.raises(ModelFileError, match="short.model.*'coef' is truncated") as exc:
        LinearChainCRF.load(bad)
    assert "pickle" not in str(exc.value)


def test_only_a_zip_local_file_header_opens(tmp_path):
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"PK" + bytes(range(256)) * 4)  # passed the two-byte check
    with pytest.raises(ModelFileError, match=r"junk.model.*not a structlearn model file.*PK\\x03\\x04"):
        load_model(junk)
    empty = tmp_path / "empty.model"
    with zipfile.ZipFile(empty, "w"):
        pass
    assert empty.read_bytes()[:4] == b"PK\x05\x06"
    with pytest.raises(ModelFileError, match="empty.model.*empty zip archive"):
        LinearChainCRF.load(empty)


# -- CRFsuite model files ------------------------------------------------------------------------------
def test_short_lcrf_file_is_truncated(tmp_path):
    short = tmp_path / "short.crfsuite"
    short.write_bytes(b"lCRF" + b"\0" * 10)
    with pytest.raises(ValueError, match=r"short.crfsuite: truncated .*\(14 bytes; .*48\)"):
        LinearChainCRF.load(short)


def _crfsuite_bytes():
    return bytearray(write_crfsuite_model_bytes(CRFsuiteModel(["A", "B"], ["w:a", "w:b"],
                                                              [(0, 0, 1.0), (1, 1, 2.0)], [(0, 1, 0.5)])))


def test_label_and_attribute_database_errors_name_the_file():
    data = _crfsuite_bytes()
    off_labels, off_attrs = struct.unpack_from("<II", data, 32)
    for off, what in ((off_labels, "label"), (off_attrs, "attribute")):
        bad = bytearray(data)
        bad[off:off + 4] = b"XXXX"
        with pytest.raises(ValueError, match=f"m.crfsuite: the {what} database at offset {off} is not a CQDB"):
            read_crfsuite_model_bytes(bytes(bad), name="m.crfsuite")
    bad = bytearray(data)
    struct.pack_into("<I", bad, 20, 5)  # num_labels: 5, the database holds 2
    with pytest.raises(ValueError, match="m.crfsuite: the label database has no entry for id 2"):
        read_crfsuite_model_bytes(bytes(bad), name="m.crfsuite")


# -- estimator entries (structlearn.learning.weight_files) ---------------------------------------------
@pytest.mark.parametrize("key", ["classes", "attributes"])
@pytest.mark.parametrize("value", [None, 3])
def test_entry_of_the_wrong_type_is_named(model, tmp_path, key, value):
    bad = _rewrite(model, tmp_path / "bad.model", {key: value})
    with pytest.raises(ModelFileError, match=f"bad.model: model file entry '{key}' must be a list"):
        LinearChainCRF.load(bad)


def test_complex_weights_are_refused(model, tmp_path):
    _, arrays = load_model(model)
    bad = _rewrite(model, tmp_path / "bad.model", coef=arrays["coef"] + 1j)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning
        with pytest.raises(ModelFileError, match="bad.model: model file array 'coef' must hold real numbers"):
            LinearChainCRF.load(bad)


@pytest.mark.parametrize("classes, match", [
    (["A", "A"], r"'classes' must list distinct values; 'A' is both \[0\] and \[1\]"),
    (["A", "B\nC"], r"'classes'\[1\] must be a label"), (["A\tx", "B"], r"'classes'\[0\] must be a label"),
    (["A", ["B"]], r"'classes'\[1\] must be a label")])
def test_labels_fit_could_not_have_written_are_refused(model, tmp_path, classes, match):
    bad = _rewrite(model, tmp_path / "bad.model", {"classes": classes})
    with pytest.raises(ModelFileError, match=f"bad.model: model file entry {match}"):
        LinearChainCRF.load(bad)


def test_duplicate_attributes_are_refused(model, tmp_path):
    header, _ = load_model(model)
    names = header["metadata"]["attributes"]
    bad = _rewrite(model, tmp_path / "bad.model", {"attributes": [names[0]] * len(names)})
    with pytest.raises(ModelFileError, match="bad.model: model file entry 'attributes' must list distinct"):
        LinearChainCRF.load(bad)


def test_empty_label_fit_accepts_still_loads(tmp_path):
    est = _fit(LinearChainCRF(max_iterations=3), y=[["", "B"], ["B", "", ""], ["", "B"]])
    assert "" in est.classes_
    back = LinearChainCRF.load(est.save(tmp_path / "m.model"))
    assert back.classes_ == est.classes_ and back.predict(X) == est.predict(X)


# -- overflowing scores --------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [{}, {"patterns": "dense"}])
def test_higher_order_refuses_state_scores_that_overflow(params):
    est = _fit(HigherOrderCRF(order=2, max_iterations=3, **params))
    est.coef_ = np.full_like(est.coef_, 5.0)
    for call in (est.predict, est.predict_marginals, est.predict_proba_sequence, est.kbest,
                 lambda x: est.score(x, [["A"], ["A", "B"]])):
        with pytest.raises(ValueError, match="sequence 1, position 0: a state score is inf"):
            call(HUGE)
    assert len(est.predict(X)) == 3  # finite scores still predict


def test_semimarkov_kbest_refuses_scores_that_overflow():
    est = _fit(SemiMarkovCRF(max_iterations=3))
    good = est.kbest(X, 2)
    est.model_.split(est.coef_)["dur"][0, 0] = 1e308  # two length-1 segments of 'A' sum to +inf
    for call in (lambda x: est.kbest(x, 2), est.predict_proba_sequence, est.predict_marginals):
        with pytest.raises(ValueError, match="sequence 1: its segmentation scores overflow"):
            call(X)
    assert all(0 <= p <= 1 for seq in good for _, p in seq)

