"""Corrupted index arrays in model files: ``load`` refuses them (ModelFileError naming the array) instead
of handing them to Numba kernels that do no bounds checks (a segmentation fault, or silent garbage)."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import GraphCRF, HigherOrderCRF, SemiMarkovCRF, TreeCRF
from structlearn.io import ModelFileError
from structlearn.utils.modelfile import load_model, save_model
from tests.graph.test_graph_crf import blobs
from tests.crf.test_tree_crf import toy_trees

WORDS = ["The", "cat", "sat", "on", "Big", "Mat", "dog", "ran"]


def _problem(seed=0, n=8, max_len=6):
    rng = np.random.RandomState(seed)
    X, y = [], []
    for _ in range(n):
        T = rng.randint(2, max_len + 1)
        X.append([{"w[0]": WORDS[rng.randint(8)], "p": ["x", "y"][rng.randint(2)], "v": float(rng.rand())}
                  for _ in range(T)])
        y.append(["ABC"[rng.randint(3)] for _ in range(T)])
    return X, y


def _fit(est, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(*args, **kw)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One saved model of every kind (name -> (estimator class, path))."""
    root = tmp_path_factory.mktemp("models")
    X, y = _problem()
    Xt, yt, P, E = toy_trees(10)
    models = {
        "semi": _fit(SemiMarkovCRF(max_iterations=2, segment_features=("first", "last", "span", "caps"),
                                   transition_attributes=["p:x"]), X, y),
        "ho_sparse": _fit(HigherOrderCRF(order=2, max_iterations=2), X, y),
        "ho_dense": _fit(HigherOrderCRF(order=2, patterns="dense", max_iterations=2), X, y),
        "hos_sparse": _fit(HigherOrderCRF(order=2, segments=True, max_iterations=2), X, y),
        "hos_dense": _fit(HigherOrderCRF(order=2, segments=True, patterns="dense", max_iterations=2), X, y),
        "tree": _fit(TreeCRF(max_iterations=2), Xt, yt, parents=P, edge_attributes=E),
        "graph": _fit(GraphCRF(max_iterations=2), *blobs(np.random.default_rng(0), 2, h=4, w=4)),
    }
    return {k: (type(est), est.save(root / f"{k}.npz")) for k, est in models.items()}


def _set(i, v):
    def change(a):
        a = a.copy()
        a.flat[i] = v
        return a
    return change


def _pattern(v, col):
    def change(a):
        a = a.copy()
        a[-1, col] = v
        return a
    return change


_PTR = [("ptr_beyond_end", lambda a: np.r_[a[:-1], a[-1] + 1000]), ("ptr_falls", _set(1, 10 ** 6)),
        ("ptr_negative", _set(1, -1000)),
        ("ptr_wraps", lambda a: np.r_[0, 5, np.iinfo(np.int64).min, -1, a[4:]])]  # np.diff(ptr) would wrap
_IDS = [("id_too_big", _set(0, 1000)), ("id_negative", _set(0, -5))]
_LENGTHS = [("zero", lambda a: np.zeros_like(a)), ("huge", _set(0, 10 ** 7)), ("short", lambda a: a[:2])]
_PATTERNS = [("label_too_big", _pattern(99, 0)), ("hole", _pattern(-1, 1)), ("one_d", lambda a: a[:, 0].copy())]
_SQUARE = ("shape", lambda a: a[:2, :2])

_HIGHER = ([("attr_ptr", t, f) for t, f in _PTR] + [("feat_pat", t, f) for t, f in _IDS]
           + [("patterns", t, f) for t, f in _PATTERNS])
CASES = {
    "semi": ([("attr_ptr", t, f) for t, f in _PTR] + [("feat_label", t, f) for t, f in _IDS]
             + [("trans_attr", "too_big", _set(0, 10 ** 6)), ("trans_attr", "negative", _set(0, -10 ** 6)),
                ("span_hash", "longer", lambda a: np.sort(np.r_[a, np.arange(100) + 5])),
                ("span_hash", "unsorted", lambda a: a[::-1].copy()),
                ("trans_features",) + _SQUARE, ("forbidden",) + _SQUARE,
                ("span_features", "shape", lambda a: a[:, :2])]
             + [("max_lengths", t, f) for t, f in _LENGTHS]),
    "ho_sparse": _HIGHER,
    "ho_dense": _HIGHER,
    "hos_sparse": _HIGHER + [("max_lengths", t, f) for t, f in _LENGTHS],
    "hos_dense": _HIGHER + [("max_lengths", t, f) for t, f in _LENGTHS],
    "tree": ([("attr_ptr", t, f) for t, f in _PTR] + [("feat_label", t, f) for t, f in _IDS]
             + [("edge_attr_ptr", t, f) for t, f in _PTR[:-1]] + [("edge_feat_pair", t, f) for t, f in _IDS]
             + [("forbidden",) + _SQUARE, ("forbidden_root", "shape", lambda a: a[:2]),
                ("edge_features",) + _SQUARE]),
    "graph": [("coef", "short", lambda a: a[:-1])],
}


def _rewrite(src, dst, name, change):
    """Write the model file ``src`` again as ``dst`` with its array ``name`` replaced by ``change(array)``."""
    header, arrays = load_model(src)
    arrays = dict(arrays)
    arrays[name] = change(np.array(arrays[name]))
    save_model(dst, format_name=header["format"], version=header["version"], estimator=header["estimator"],
               params=header["params"], metadata=header["metadata"], arrays=arrays)
    return dst


@pytest.mark.parametrize("kind,name,tag,change",
                         [(k, n, t, f) for k, cases in CASES.items() for n, t, f in cases],
                         ids=[f"{k}-{n}-{t}" for k, cases in CASES.items() for n, t, _ in cases])
def test_load_refuses_a_corrupted_index_array(files, tmp_path, kind, name, tag, change):
    cls, path = files[kind]
    bad = _rewrite(path, tmp_path / f"{kind}-{name}-{tag}.npz", name, change)
    if kind == "graph":  # the graph CRF's file holds no index array: its weights must fit its sizes
        with pytest.raises(ModelFileError, match="inconsistent"):
            cls.load(bad)
        return
    with pytest.raises(ModelFileError, match=str(bad)) as info:
        cls.load(bad)
    assert f"'{name}'" in str(info.value) or f"`{name}`" in str(info.value)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_intact_file_still_loads(files, tmp_path, kind):
    cls, path = files[kind]
    same = _rewrite(path, tmp_path / f"{kind}.npz", "coef", lambda a: a)
    np.testing.assert_array_equal(cls.load(same).coef_, cls.load(path).coef_)
