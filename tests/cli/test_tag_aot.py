"""The tag kernels compiled ahead of time by the package's build (:mod:`structlearn.engine.kernels.aot`, issue 21
goal 1): present after ``pip install``, refused when stale, the JIT engine's labels bit for bit (ties and
infeasible sequences included), and a ``structlearn tag`` process that never imports Numba."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.io.chain_tagger import ChainTagger, open_chain_tagger
from structlearn.engine.kernels import aot
from structlearn.crf._potentials import ChainFeatureModel
from structlearn.crf._decode import predict_labels, predict_labels_compiled
from structlearn.crf._layout import ChainLayout
from structlearn.crf.features import AttributeVocabulary
from tests.conftest import skip_unless_ci


@pytest.fixture(scope="module")
def kernels():
    module = aot.load()
    if module is None:
        skip_unless_ci("the ahead-of-time tag kernels are not built (pip install -e . builds them)")
    return module


def test_the_build_compiled_the_tag_kernels(kernels):
    assert kernels.source_digest() == aot.source_digest()
    assert "numba" not in getattr(kernels, "__file__", "")


def test_a_stale_module_is_refused(kernels, monkeypatch):
    monkeypatch.setattr(aot, "source_digest", lambda: kernels.source_digest() + 1)
    assert aot.load() is None


def test_build_refuses_sources_it_does_not_list(monkeypatch, tmp_path):
    pytest.importorskip("numba.pycc")  # numba is a dependency; pycc is part of it
    monkeypatch.setattr(aot, "SOURCES", tuple(s for s in aot.SOURCES if s != "engine/kernels/chain_steps.py"))
    with pytest.raises(RuntimeError, match="chain_steps.py"):
        aot.build(str(tmp_path))
    assert not list(tmp_path.iterdir())


def _random_model(rng, K, A, ties):
    """A random chain layout: A attributes with random label sets, weights (small integers when ``ties``,
    so that Viterbi has ties to break), random forbidden transitions / starts / ends."""
    labels_per_attr = [np.sort(rng.choice(K, size=int(rng.integers(0, K + 1)), replace=False)) for _ in range(A)]
    attr_ptr = np.concatenate([[0], np.cumsum([len(x) for x in labels_per_attr])]).astype(np.int64)
    feat_label = np.concatenate(labels_per_attr + [np.zeros(0, np.int64)]).astype(np.int64)
    forbidden = rng.random((K, K)) < 0.25
    f_start, f_end = rng.random(K) < 0.2, rng.random(K) < 0.2
    trans_features = rng.random((K, K)) < 0.8
    layout = ChainLayout(attr_ptr, feat_label, K, trans_features, forbidden, f_start, f_end,
                         start_end=bool(rng.integers(2)))
    w = (rng.integers(-2, 3, layout.n_params).astype(float) if ties else rng.normal(size=layout.n_params))
    w[~layout.free_mask()] = 0.0
    return layout, w


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), K=st.integers(1, 6), A=st.integers(1, 8), ties=st.booleans())
def test_compiled_labels_are_the_engines_bit_for_bit(kernels, seed, K, A, ties):
    rng = np.random.default_rng(seed)
    layout, w = _random_model(rng, K, A, ties)
    names = [f"a{i}" for i in range(A)]
    vocab = AttributeVocabulary(names)
    X = [[{names[int(a)]: float(rng.integers(1, 3)) if ties else float(rng.normal())
           for a in rng.choice(A, size=int(rng.integers(0, A + 1)), replace=False)}
          for _ in range(int(rng.integers(0, 7)))] for _ in range(int(rng.integers(0, 5)))]
    classes = [f"L{k}" for k in range(K)]
    model = ChainFeatureModel(layout.attr_ptr, layout.feat_label, K, layout.trans_features, layout.forbidden,
                              layout.forbidden_start, layout.forbidden_end, start_end=layout.start_end)
    compiled = predict_labels_compiled(layout, w, vocab, classes, X, kernels)
    try:
        jit = predict_labels(model, w, vocab, classes, X)
    except ValueError as exc:  # a sequence without a feasible labeling
        assert compiled is None
        with pytest.raises(ValueError) as info:
            ChainTagger(layout, w, classes, names, kernels=kernels).predict(X)
        assert str(info.value) == str(exc)
    else:
        assert compiled == jit
        assert ChainTagger(layout, w, classes, names, kernels=kernels).predict(X) == jit


def test_transition_attributes_are_refused_by_the_compiled_path(kernels):
    layout = ChainLayout(np.array([0, 1]), np.array([0]), 2, np.ones((2, 2), bool), trans_attr=np.array([0]))
    with pytest.raises(ValueError, match="transition attributes"):
        predict_labels_compiled(layout, np.zeros(layout.n_params), AttributeVocabulary(["a"]), ["x", "y"],
                                [[{"a": 1.0}]], kernels)


_PROBE = """
import contextlib, io, sys
from structlearn.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    rc = main(sys.argv[1:])
print(rc, len(out.getvalue()), ' '.join(sorted(m for m in sys.modules if m.split('.')[0] in
                                               ('numba', 'llvmlite', 'scipy', 'sklearn'))))
"""


def test_tag_never_imports_numba(kernels, tmp_path):
    from structlearn.crf.linear_chain import LinearChainCRF

    X = [[{"w=a": 1.0}, {"w=b": 1.0}], [{"w=b": 1.0}]] * 5   # the attribute names of the file tagged
    y = [["A", "B"], ["B"]] * 5
    model = LinearChainCRF(max_iterations=10).fit(X, y).save(tmp_path / "m.model")
    assert open_chain_tagger(model).kernels is kernels
    data = tmp_path / "x.txt"
    data.write_text("A\tw=a\nB\tw=b\n\nB\tw=b\n", encoding="utf-8")
    res = subprocess.run([sys.executable, "-c", _PROBE, "tag", "-m", str(model), "--format", "crfsuite",
                          str(data)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    rc, n_chars, *loaded = res.stdout.split()
    assert rc == "0" and int(n_chars) > 0 and loaded == [], loaded


@pytest.mark.parametrize("array, value, message", [
    ("feat_label", 10 ** 7, "'feat_label' must be 1-D with values"),
    ("feat_label", -5, "'feat_label' must be 1-D with values"),
    ("attr_ptr", 10 ** 7, "'attr_ptr' must rise"),
    ("forbidden", None, "'forbidden' must have shape"),
    ("attr_ptr", "wrap", "'attr_ptr' must rise"),  # int64 differences that wrap around
])
def test_a_corrupted_model_file_is_refused_not_a_segfault(tmp_path, array, value, message):
    """Index arrays from a file are checked before a kernel sees them (both paths, one check)."""
    from structlearn.crf.linear_chain import LinearChainCRF
    from structlearn.io import ModelFileError
    from structlearn.utils.modelfile import load_model, save_model

    X = [[{"w": "a"}, {"w": "b"}, {"w": "c"}], [{"w": "b"}]] * 5
    y = [["A", "B", "C"], ["B"]] * 5
    path = LinearChainCRF(max_iterations=10).fit(X, y).save(tmp_path / "m.model")
    header, arrays = load_model(path)
    arrays = dict(arrays)
    if value is None:
        arrays[array] = arrays[array][:1]
    elif value == "wrap":
        a = arrays[array]
        arrays[array] = np.r_[0, 1, np.iinfo(np.int64).min, -1, a[4:]].astype(np.int64)
    else:
        arrays[array] = arrays[array].copy()
        arrays[array][1] = value
    bad = tmp_path / "bad.model"
    save_model(bad, format_name=header["format"], version=header["version"], estimator=header["estimator"],
               params=header["params"], metadata=header["metadata"], arrays=arrays)
    assert open_chain_tagger(bad) is None
    with pytest.raises(ModelFileError, match=message):
        LinearChainCRF.load(bad)
