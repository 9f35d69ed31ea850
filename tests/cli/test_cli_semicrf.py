"""CLI round trips of the semi-Markov CRF: ``learn --structure semi-markov`` → ``tag`` → ``eval`` on
CRFsuite attribute files (BIO tags and runs of equal labels, the CRFSuite-0.13 semi-Markov format) and
CoNLL input; ``--structure higher-order`` without ``structlearn.HigherOrderCRF``."""
import numpy as np
import pytest

from structlearn import SemiMarkovCRF
from structlearn.io.crfsuite import read_crfsuite, write_crfsuite
from tests.cli._cli import blocks as _blocks
from tests.cli._cli import run
from tests.conftest import require_data

NOUNS = ["cat", "dog", "mat", "hat"]
VERBS = ["sat", "ran", "saw"]


def _sentences(n, seed):
    """(word, tag) sentences of NP VP (NP) chunks in BIO."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        s = []
        for part in ("NP", "VP", "NP")[:rng.randint(2, 4)]:
            if part == "NP":
                words = (["the"] if rng.rand() < 0.7 else []) + [NOUNS[rng.randint(4)]]
            else:
                words = [VERBS[rng.randint(3)]]
            s += [(w, ("B-" if i == 0 else "I-") + part) for i, w in enumerate(words)]
        if rng.rand() < 0.5:
            s.append((".", "O"))
        out.append(s)
    return out


def _items(sent):
    return [[f"w={w}", f"w[-1]={sent[i - 1][0] if i else '<s>'}"] for i, (w, _) in enumerate(sent)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_semi")
    train, test = _sentences(40, 0), _sentences(10, 1)
    write_crfsuite([_items(s) for s in train], [[t for _, t in s] for s in train], d / "train.txt")
    write_crfsuite([_items(s) for s in test], [[t for _, t in s] for s in test], d / "test.txt")
    (d / "train.conll").write_text(
        "\n\n".join("\n".join(f"{w} X {t}" for w, t in s) for s in train) + "\n", encoding="utf-8")
    return d


def test_learn_tag_eval_round_trip(files, capsys, tmp_path):
    model = tmp_path / "semi.model"
    rc, out, err = run(capsys, "learn", "--structure", "semi-markov", "--allow-same-label",
                       "--max-segment-length", "3", "-m", model, "-p", "c2=0.1", files / "train.txt")
    assert rc == 0, err
    assert "Training:" in out and "segment labels (bio format)" in out
    est = SemiMarkovCRF.load(model)
    assert est.allow_same_label and est.max_lengths_ == {"NP": 3, "VP": 3, "O": 3}
    assert est.segment_features == ("first", "last")
    rc, out, err = run(capsys, "tag", "-m", model, files / "test.txt")
    assert rc == 0, err
    X, y = read_crfsuite(files / "test.txt")
    pred = _blocks(out)
    assert pred == est.predict(X)
    (tmp_path / "pred.txt").write_text(out, encoding="utf-8")
    rc, out, err = run(capsys, "eval", files / "test.txt", tmp_path / "pred.txt")
    assert rc == 0, err
    assert "Chunk F1 (conlleval): 1.0000" in out  # the toy grammar is learnt exactly
    rc, out, err = run(capsys, "tag", "-m", model, "-qt", files / "test.txt")
    assert rc == 0 and "Chunk F1 (conlleval): 1.0000" in out
    # marginals of the token tags, sequence probabilities and k-best
    rc, out, err = run(capsys, "tag", "-m", model, "-i", "-p", files / "test.txt")
    assert rc == 0, err
    blocks = _blocks(out)
    assert blocks[0][0].startswith("@probability\t")
    lab, p = blocks[0][1].rsplit(":", 1)
    assert lab == pred[0][0] and 0.5 < float(p) <= 1.0
    rc, out, err = run(capsys, "tag", "-m", model, "-k", "2", files / "test.txt")
    assert rc == 0, err
    assert _blocks(out)[0][0].startswith("@kbest\t1\t") and _blocks(out)[0][1:] == pred[0]
    rc, out, err = run(capsys, "info", model)
    assert rc == 0 and "semi-markov-crf" in out and "longest segments" in out


def test_runs_crfsuite013_file(capsys, tmp_path):
    src = require_data("crfsuite013_format") / "test_sm_1.input"  # runs of AUTHOR, TITLE, ...
    model = tmp_path / "sm.model"
    rc, out, err = run(capsys, "learn", "-q", "--structure", "semi-markov", "-m", model, "-p",
                       "max_iterations=30", src)
    assert rc == 0, err
    est = SemiMarkovCRF.load(model)
    assert est.label_format_ == "runs" and not est.allow_same_label
    X, y = read_crfsuite(src)
    rc, out, err = run(capsys, "tag", "-m", model, src)
    assert rc == 0 and _blocks(out) == est.predict(X)
    rc, out, err = run(capsys, "tag", "-m", model, "-i", src)
    assert rc == 0
    lab, p = _blocks(out)[0][0].rsplit(":", 1)
    assert 0.0 < float(p) <= 1.0


def test_conll_input_with_template(files, capsys, tmp_path):
    model = tmp_path / "c.model"
    rc, out, err = run(capsys, "learn", "-q", "--structure", "semi-markov", "--allow-same-label",
                       "--format", "conll", "--template", "chunking", "-m", model,
                       "-p", "max_iterations=30", files / "train.conll")
    assert rc == 0, err
    rc, out, err = run(capsys, "tag", "-m", model, "-qt", files / "train.conll")
    assert rc == 0 and "Chunk F1 (conlleval)" in out


def test_errors(files, capsys, tmp_path):
    model = tmp_path / "x.model"
    # same-label neighbours (B-NP B-NP) need --allow-same-label
    (tmp_path / "adj.txt").write_text("B-NP\tw=a\nB-NP\tw=b\n\n", encoding="utf-8")
    rc, out, err = run(capsys, "learn", "-q", "--structure", "semi-markov", "-m", model,
                       tmp_path / "adj.txt")
    assert rc == 2 and "allow_same_label" in err
    rc, out, err = run(capsys, "learn", "-q", "--structure", "semi-markov", "--max-segment-length", "0",
                       "-m", model, files / "train.txt")
    assert rc == 2 and "--max-segment-length" in err
    rc, out, err = run(capsys, "learn", "-q", "--max-segment-length", "3", "-m", model,
                       files / "train.txt")
    assert rc == 2 and "semi-markov only" in err
    rc, out, err = run(capsys, "learn", "-q", "--structure", "semi-markov", "-a", "ap", "-m", model,
                       files / "train.txt")
    assert rc == 2 and "lbfgs" in err


def test_higher_order(files, capsys, tmp_path):
    import structlearn

    model = tmp_path / "h.model"
    rc, out, err = run(capsys, "learn", "-q", "--structure", "higher-order", "--order", "2", "-m", model,
                       "-p", "max_iterations=20", files / "train.txt")
    try:
        cls = structlearn.HigherOrderCRF
    except AttributeError:
        assert rc == 2 and "not yet available" in err
        return
    assert rc == 0, err
    est = cls.load(model)
    X, _ = read_crfsuite(files / "test.txt")
    rc, out, err = run(capsys, "tag", "-m", model, files / "test.txt")
    assert rc == 0 and _blocks(out) == est.predict(X)
