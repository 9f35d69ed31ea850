"""Versioned model files: round trip, no pickle, and a clear error for every kind of bad file."""
import json
import zipfile

import numpy as np
import pytest

from structlearn.io.modelfile import HEADER_KEY, ModelFileError, load_model, save_model


def _save(path, **kw):
    args = dict(format_name="linear-chain-crf", version=1, estimator="structlearn.LinearChainCRF",
                params={"c2": 1.0, "algorithm": "lbfgs"},
                metadata={"labels": ["B-NP", "I-NP", "O", "Ü"], "attributes": ["w[0]=ß"]},
                arrays={"state": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
                        "trans": np.full((4, 4), -np.inf), "ids": np.array([3, 1], dtype=np.int32),
                        "names": np.array(["a", "bé"])})
    args.update(kw)
    save_model(path, **args)
    return args


def test_round_trip(tmp_path):
    p = tmp_path / "m.npz"
    args = _save(p)
    header, arrays = load_model(p, expected_format="linear-chain-crf", supported_version=1)
    assert header["format"] == "linear-chain-crf" and header["version"] == 1
    assert header["estimator"] == "structlearn.LinearChainCRF"
    assert header["params"] == args["params"] and header["metadata"] == args["metadata"]
    assert header["arrays"] == sorted(args["arrays"])
    assert set(arrays) == set(args["arrays"])
    for k, v in args["arrays"].items():
        np.testing.assert_array_equal(arrays[k], v)
        assert arrays[k].dtype == v.dtype
    # the header is plain JSON in a uint8 member
    with np.load(p, allow_pickle=False) as npz:
        assert npz[HEADER_KEY].dtype == np.uint8
        assert json.loads(npz[HEADER_KEY].tobytes())["magic"] == "structlearn-model"
    assert [f.name for f in tmp_path.iterdir()] == ["m.npz"]  # no temporary file left


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="model file not found"):
        load_model(tmp_path / "none.npz")


def test_truncated_and_garbage(tmp_path):
    p = tmp_path / "m.npz"
    _save(p)
    data = p.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 30):
        q = tmp_path / f"cut{cut}.npz"
        q.write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match="truncated or corrupt|not a readable"):
            load_model(q)
    g = tmp_path / "garbage.npz"
    g.write_bytes(b"hello, this is not a model")
    with pytest.raises(ModelFileError):
        load_model(g)


def test_corrupt_member_bytes(tmp_path):
    p = tmp_path / "m.npz"
    _save(p)
    data = bytearray(p.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 40] = b"\x00" * 40
    q = tmp_path / "flipped.npz"
    q.write_bytes(bytes(data))
    with pytest.raises(ModelFileError):
        load_model(q)


def test_missing_header_other_format_newer_version(tmp_path):
    plain = tmp_path / "plain.npz"
    np.savez(plain, a=np.zeros(3))
    with pytest.raises(ModelFileError, match="no '__header__'"):
        load_model(plain)
    npy = tmp_path / "single.npy"
    np.save(npy, np.zeros(3))
    with pytest.raises(ModelFileError, match="single .npy"):
        load_model(npy)
    p = tmp_path / "m.npz"
    _save(p, format_name="hsmm")
    with pytest.raises(ModelFileError, match="'hsmm' model file, not 'linear-chain-crf'"):
        load_model(p, expected_format="linear-chain-crf")
    _save(p, version=3)
    with pytest.raises(ModelFileError, match=r"model file version 3 is newer than this structlearn "
                                             r"\(supports ≤ 1\); upgrade structlearn"):
        load_model(p, supported_version=1)
    assert load_model(p)[0]["version"] == 3


def test_object_arrays_refused(tmp_path):
    with pytest.raises(ValueError, match="dtype object"):
        _save(tmp_path / "o.npz", arrays={"x": np.array([{"a": 1}], dtype=object)})
    # a hand-made file with a pickled object member is refused on load
    p = tmp_path / "evil.npz"
    header = {"magic": "structlearn-model", "format": "f", "version": 1, "arrays": ["x"]}
    np.savez(p, __header__=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
             x=np.array([object()], dtype=object))
    with pytest.raises(ModelFileError, match="without pickle"):
        load_model(p)


def test_bad_header_and_missing_array(tmp_path):
    p = tmp_path / "h.npz"
    np.savez(p, __header__=np.frombuffer(b"{not json", dtype=np.uint8))
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load_model(p)
    np.savez(p, __header__=np.frombuffer(b'{"format": "x"}', dtype=np.uint8))
    with pytest.raises(ModelFileError, match="does not identify"):
        load_model(p)
    header = {"magic": "structlearn-model", "format": "f", "version": 1, "arrays": ["x"]}
    np.savez(p, __header__=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
    with pytest.raises(ModelFileError, match="lacks it"):
        load_model(p)


@pytest.mark.parametrize("kw, what", [
    ({"params": {"f": object()}}, "JSON-able"),
    ({"metadata": {"x": float("nan")}}, "JSON-able"),
    ({"arrays": {"__x": np.zeros(1)}}, "not allowed"),
    ({"version": 0}, "version"),
    ({"format_name": ""}, "format_name"),
])
def test_save_errors(tmp_path, kw, what):
    with pytest.raises(ValueError, match=what):
        _save(tmp_path / "e.npz", **kw)
    assert not (tmp_path / "e.npz").exists()


def test_is_a_zip(tmp_path):
    p = tmp_path / "m.model"
    _save(p)
    assert zipfile.is_zipfile(p) and p.exists()


# -- load_estimator: the class from the file's format name ------------------------------------------------
def _fitted(kind):
    """A tiny fitted estimator of each kind that writes model files."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    import structlearn as sl

    X = [[{"w=a": 1.0}, {"w=b": 1.0}, {"w=c": 1.0}], [{"w=a": 1.0}, {"w=c": 1.0}]]
    y = [["B-NP", "I-NP", "O"], ["B-NP", "O"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if kind == "linear-chain-crf":
            return sl.LinearChainCRF(max_iterations=3).fit(X, y)
        if kind == "higher-order-crf":
            return sl.HigherOrderCRF(order=2, max_iterations=3).fit(X, y)
        if kind == "semi-markov-crf":
            return sl.SemiMarkovCRF(max_iterations=3).fit(X, y)
        if kind == "tree-crf":
            return sl.TreeCRF(max_iterations=3).fit(X, y, parents=[[-1, 0, 0], [-1, 0]])
        if kind == "graph-crf":
            rng = np.random.default_rng(0)
            edges = np.array([[0, 1], [1, 2], [2, 3]])
            Xg = [(rng.normal(size=(4, 2)), edges) for _ in range(2)]
            return sl.GraphCRF(max_iterations=3).fit(Xg, [np.array([0, 0, 1, 1])] * 2)
        if kind == "hidden-semi-markov-model":
            obs = np.random.default_rng(0).normal(size=(40, 1)) + (np.arange(40) // 10 % 2)[:, None] * 3
            return sl.HiddenSemiMarkovModel(2, max_duration=12, random_state=0, n_iter=2).fit(obs)
    from structlearn.distributions.emissions import Categorical

    spec = {"root": {"children": ["a", "b"], "start": [0.5, 0.5], "trans": [[0.2, 0.3], [0.4, 0.1]],
                     "end": [0.5, 0.5]}}
    return sl.HierarchicalHMM(spec, Categorical(np.array([[0.9, 0.1], [0.2, 0.8]])))


@pytest.mark.parametrize("fmt", ["linear-chain-crf", "higher-order-crf", "semi-markov-crf", "tree-crf",
                                 "graph-crf", "hidden-semi-markov-model", "hierarchical-hmm"])
def test_load_estimator_resolves_every_format(tmp_path, fmt):
    from structlearn.io.modelfile import MODEL_FORMATS, load_estimator, read_header

    est = _fitted(fmt)
    path = tmp_path / "m.npz"
    est.save(path)
    header = read_header(path)
    assert header["format"] == fmt and MODEL_FORMATS[fmt].endswith(":" + type(est).__name__)
    back = load_estimator(path)
    assert type(back) is type(est)
    assert back.get_params().keys() == est.get_params().keys()
    back.save(tmp_path / "again.npz")  # what it loaded is a complete model
    _, a = load_model(path)
    _, b = load_model(tmp_path / "again.npz")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_load_estimator_unknown_format_and_bad_files(tmp_path):
    from structlearn.io.modelfile import load_estimator, read_header

    p = tmp_path / "odd.npz"
    _save(p, format_name="no-such-format")
    assert read_header(p)["format"] == "no-such-format"
    with pytest.raises(ModelFileError, match=r"odd\.npz'?: unknown model format 'no-such-format'"):
        load_estimator(p)
    with pytest.raises(FileNotFoundError, match="model file not found"):
        load_estimator(tmp_path / "missing.npz")
    (tmp_path / "t.npz").write_bytes(p.read_bytes()[:100])
    with pytest.raises(ModelFileError, match="truncated or corrupt"):
        load_estimator(tmp_path / "t.npz")
