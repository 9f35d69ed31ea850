"""The fast path of ``structlearn tag`` (issue 21 goal 1): a ``linear-chain-crf`` model file is tagged through
:class:`structlearn.io.chain_tagger.ChainTagger`, without scikit-learn, SciPy's heavy packages or the
estimators, and gives the estimator's labels bit for bit (one shared function,
:func:`structlearn.crf._decode.predict_labels`)."""
import subprocess
import sys

import numpy as np
import pytest

import structlearn.io.chain_tagger as chain_tagger
from structlearn.cli.main import main
from structlearn.learning.weight_files import ATTRIBUTE_SPELLING
from structlearn.crf.linear_chain import LinearChainCRF
from structlearn.io.chain_tagger import ChainTagger, open_chain_tagger
from structlearn.crf._decode import CHAIN_FORMAT, CHAIN_FORMAT_VERSION
from structlearn.utils.modelfile import load_model, save_model
from tests.cli._cli import chunk_sentences, run

WORDS = {"DT": ["the", "a"], "NN": ["dog", "cat", "idea"], "VBZ": ["runs", "sees"], "IN": ["in", "on"]}


def _sentences(n, seed):
    """(word, pos, chunk) sentences of NP VP NP [PP NP] . with IOB2 chunk tags."""
    return chunk_sentences(n, seed, {pos: [(w, pos) for w in words] for pos, words in WORDS.items()})


def _write_conll(path, sents, labels=True):
    path.write_text("\n\n".join("\n".join(" ".join(tok if labels else tok[:2]) for tok in s) for s in sents)
                    + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tagfast")
    _write_conll(d / "train.conll", _sentences(25, 0))
    test = _sentences(6, 1) + [[("zebra", "NN", "B-NP"), ("flies", "VBZ", "B-VP")]]  # unknown words
    _write_conll(d / "test.conll", test)
    _write_conll(d / "test2.conll", test, labels=False)
    model = d / "m.model"
    assert main(["learn", "-q", "--format", "conll", "-m", str(model), "-p", "max_iterations=30",
                 str(d / "train.conll")]) == 0
    return d


def _estimator_path(monkeypatch):
    """Make ``tag`` load the estimator for every model file (the path before the fast one)."""
    monkeypatch.setattr(chain_tagger, "open_chain_tagger", lambda path: None)


@pytest.mark.parametrize("options", [(), ("-q", "-t"), ("-r",), ("-t",)])
def test_fast_path_output_equals_estimator_path(files, capsys, monkeypatch, options):
    argv = ("tag", "-m", files / "m.model", *options, files / "test.conll")
    rc, fast, err = run(capsys, *argv)
    assert rc == 0, err
    _estimator_path(monkeypatch)
    rc, slow, err = run(capsys, *argv)
    assert rc == 0, err
    assert fast == slow and fast


def test_fast_path_without_label_column(files, capsys, monkeypatch):
    rc, fast, err = run(capsys, "tag", "-m", files / "m.model", files / "test2.conll")
    assert rc == 0, err
    _estimator_path(monkeypatch)
    assert run(capsys, "tag", "-m", files / "m.model", files / "test2.conll")[1] == fast


def test_plain_tagging_does_not_open_the_estimator(files, capsys, monkeypatch):
    """Plain Viterbi output takes the fast path; -k, -i and -p still load the estimator."""
    import structlearn.cli.common as common

    real = common.open_model
    calls = []

    def spy(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr("structlearn.cli.tag.open_model", spy)
    assert run(capsys, "tag", "-m", files / "m.model", "-t", files / "test.conll")[0] == 0
    assert calls == []
    for opt in (("-k", "2"), ("-i",), ("-p",)):
        rc, out, err = run(capsys, "tag", "-m", files / "m.model", *opt, files / "test.conll")
        assert rc == 0, err
    assert len(calls) == 3


def _chain_estimator(**params):
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(30):
        n = int(rng.integers(1, 7))
        X.append([{"w": str(rng.integers(0, 5)), "b": float(rng.normal())} for _ in range(n)])
        y.append([["B-X", "I-X", "O", "B-Y"][int(rng.integers(0, 4))] for _ in range(n)])
    for seq in y:  # IOB2: I-X only after B-X / I-X
        for t, lab in enumerate(seq):
            if lab == "I-X" and (t == 0 or seq[t - 1] not in ("B-X", "I-X")):
                seq[t] = "B-X"
    est = LinearChainCRF(max_iterations=25, **params).fit(X, y)
    return est, X


@pytest.mark.parametrize("params", [
    {"start_end_features": False},
    {"forbidden_transitions": "BIO"},
    {"transition_attributes": ["b"], "all_possible_transitions": True},
])
def test_chain_tagger_is_the_estimator_bit_for_bit(tmp_path, params):
    """ChainTagger.predict of a saved model = LinearChainCRF.predict (forbidden transitions, start/end
    weights, transition attributes, unknown attributes, empty sequences)."""
    est, X = _chain_estimator(**params)
    path = est.save(tmp_path / "m.model", metadata={"note": 1})
    tagger = open_chain_tagger(path)
    assert isinstance(tagger, ChainTagger)
    assert tagger.metadata_ == {"note": 1}
    loaded = LinearChainCRF.load(path)
    Xt = X[:10] + [[], [{"w": "unseen", "zz": 2.0}]]
    assert tagger.predict(Xt) == est.predict(Xt) == loaded.predict(Xt)
    assert tagger.classes_ == est.classes_
    np.testing.assert_array_equal(tagger.coef_, est.coef_)


def test_chain_tagger_empty_batch(files):
    tagger = open_chain_tagger(files / "m.model")
    assert tagger.predict([]) == []
    assert tagger.predict([[]]) == [[]]


def _rewrite(src, dst, change):
    """Write the model file ``src`` again as ``dst``, its header changed by ``change(header)``."""
    header, arrays = load_model(src)
    change(header)
    save_model(dst, format_name=header["format"], version=header["version"], estimator=header["estimator"],
               params=header["params"], metadata=header["metadata"], arrays=arrays)
    return dst


def test_open_chain_tagger_leaves_other_files_to_the_estimator(files, tmp_path):
    est, _ = _chain_estimator(start_end_features=False)
    crfsuite = est.save(tmp_path / "m.crfsuite", format="crfsuite")
    assert open_chain_tagger(crfsuite) is None  # lCRF: LinearChainCRF.load reads it
    assert open_chain_tagger(tmp_path / "missing") is None
    assert open_chain_tagger(tmp_path) is None
    broken = tmp_path / "broken.model"
    broken.write_bytes((files / "m.model").read_bytes()[:200])
    assert open_chain_tagger(broken) is None


def test_old_spelling_and_newer_versions_go_to_the_estimator(files, tmp_path):
    def old(header):
        del header["metadata"]["attribute_spelling"]

    def newer(header):
        header["version"] = CHAIN_FORMAT_VERSION + 1

    same = _rewrite(files / "m.model", tmp_path / "same.model", lambda header: None)
    assert isinstance(open_chain_tagger(same), ChainTagger)
    old_file = _rewrite(files / "m.model", tmp_path / "old.model", old)
    assert open_chain_tagger(old_file) is None
    LinearChainCRF.load(old_file)  # the estimator reads it (aliasing the old attribute names)
    assert open_chain_tagger(_rewrite(files / "m.model", tmp_path / "new.model", newer)) is None


def test_constants_agree_with_the_estimator():
    assert chain_tagger._SPELLING == ATTRIBUTE_SPELLING
    assert LinearChainCRF._model_format[:2] == (CHAIN_FORMAT, CHAIN_FORMAT_VERSION)


def test_errors_are_the_estimator_paths(files, tmp_path, capsys):
    rc, out, err = run(capsys, "tag", "-m", tmp_path / "nope.model", files / "test.conll")
    assert rc == 2 and "model file not found" in err
    broken = tmp_path / "broken.model"
    broken.write_bytes((files / "m.model").read_bytes()[:200])
    rc, out, err = run(capsys, "tag", "-m", broken, files / "test.conll")
    assert rc == 2 and err.startswith("structlearn: error:")


# the modules `structlearn tag` must not import on a linear-chain model (numba itself imports the
# top-level `scipy` package and `scipy.linalg` when it starts its compiler; those stay allowed)
HEAVY = ("sklearn", "scipy.sparse", "scipy.stats", "scipy.optimize", "scipy.special", "pandas", "matplotlib",
         "structlearn.crf.linear_chain", "structlearn.crf._base", "structlearn.crf.objectives", "structlearn.hsmm",
         "structlearn.hmm", "structlearn.hhmm", "structlearn.graph", "structlearn.learning", "dask", "torch")

_PROBE = """
import contextlib, io, sys
from structlearn.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {h.split('.')[0] for h in HEAVY}
               and any(m == h or m.startswith(h + '.') for h in HEAVY))
print(rc, len(out.getvalue()), ' '.join(heavy))
"""


@pytest.mark.parametrize("options", [(), ("-q", "-t")])
def test_tag_imports_no_sklearn_nor_scipy_packages(files, options):
    code = f"HEAVY = {HEAVY!r}\n" + _PROBE
    res = subprocess.run([sys.executable, "-c", code, "tag", "-m", str(files / "m.model"), *options,
                          str(files / "test.conll")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rc, n_chars, *heavy = res.stdout.split()
    assert rc == "0" and int(n_chars) > 0
    assert heavy == [], f"`structlearn tag` imported {heavy}"
