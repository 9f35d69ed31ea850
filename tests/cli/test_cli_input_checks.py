"""The CLI stops on input that is evidently in the wrong format, instead of training or tagging on it
silently: a CoNLL (space-separated) file read as CRFsuite attributes, input none of whose attributes the
model knows; ``info`` of a CRFsuite model file says that it records no training."""
import warnings

import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn.crf.linear_chain import LinearChainCRF
from tests.cli._cli import run

TRAIN = "B-NP\tw=He\tp=PRP\nB-VP\tw=reckons\tp=VBZ\nO\tw=.\tp=.\n\nB-NP\tw=He\nO\tw=.\n\n"
CONLL = "He PRP B-NP\nreckons VBZ B-VP\n. . O\n\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputchecks")
    (d / "train.txt").write_text(TRAIN, encoding="utf-8")
    (d / "test.conll").write_text(CONLL, encoding="utf-8")
    (d / "tabs.conll").write_text(CONLL.replace(" ", "\t"), encoding="utf-8")
    from structlearn.cli.main import main

    assert main(["learn", "-q", "-m", str(d / "m.model"), str(d / "train.txt")]) == 0
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "c"}]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        LinearChainCRF(max_iterations=3, start_end_features=False).fit(X, [["B", "I"], ["O"]]).save(
            d / "c.crfsuite", format="crfsuite")
    return d


def _one_line_error(rc, out, err, *needles):
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("structlearn: error: "), err
    for n in needles:
        assert n in lines[0], lines[0]


def test_tag_of_a_conll_file_with_a_model_that_records_no_template(files, capsys):
    # read as CRFsuite attributes, each whole line was a label without attributes: exit 0, one label for all
    rc, out, err = run(capsys, "tag", "-m", files / "m.model", files / "test.conll")
    _one_line_error(rc, out, err, "test.conll", "'He PRP B-NP'", "TAB", "--format conll")
    assert out == ""


def test_tag_of_input_with_no_attribute_known_to_the_model(files, capsys):
    # a TAB-separated CoNLL file reads as CRFsuite attributes ("PRP", "B-NP"), none of them the model's
    rc, out, err = run(capsys, "tag", "-m", files / "m.model", "-qt", files / "tabs.conll")
    _one_line_error(rc, out, err, "tabs.conll", "none of the input's attributes", "'PRP'", "--format conll")


def test_learn_on_a_space_separated_file(files, tmp_path, capsys):
    rc, out, err = run(capsys, "learn", "-q", "-m", tmp_path / "x.model", files / "test.conll")
    _one_line_error(rc, out, err, "test.conll", "without attributes", "--format conll")
    assert not (tmp_path / "x.model").exists()


def test_learn_on_a_file_without_any_attribute(tmp_path, capsys):
    (tmp_path / "bare.txt").write_text("B\nI\n\nO\n", encoding="utf-8")
    rc, out, err = run(capsys, "learn", "-q", "-m", tmp_path / "x.model", tmp_path / "bare.txt")
    _one_line_error(rc, out, err, "bare.txt", "no line has an attribute", "TAB")


def test_info_of_a_crfsuite_model_file_says_it_records_no_training(files, capsys):
    rc, out, err = run(capsys, "info", files / "c.crfsuite")
    assert rc == 0, err
    assert "training: not recorded" in out
    assert "0 iterations" not in out and "converged" not in out


def test_learn_and_tag_of_a_file_with_a_byte_order_mark(files, tmp_path, capsys):
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + TRAIN.encode("utf-8"))
    rc, out, err = run(capsys, "learn", "-q", "-m", tmp_path / "bom.model", tmp_path / "bom.txt")
    assert rc == 0, err
    rc, out, err = run(capsys, "info", tmp_path / "bom.model")
    assert "labels: 3 (B-NP, B-VP, O)" in out, out


TREE = "SRC\t0\t1\tw=ich\nSNT\t1\t_\tw=mag\nO\t2\t1\tw=.\n\nSNT\t0\t_\tw=gut\nO\t1\t0\tw=.\n\n"


@pytest.mark.parametrize("structure", [[], ["--type", "1d"], ["--type", "semim"]])
def test_learn_of_a_tree_file_without_type_tree(tmp_path, capsys, structure):
    # read as a sequence file, the node and parent columns would be attributes "0", "1", "_"
    (tmp_path / "trees.txt").write_text(TREE, encoding="utf-8")
    rc, out, err = run(capsys, "learn", "-q", *structure, "-m", tmp_path / "x.model", tmp_path / "trees.txt")
    _one_line_error(rc, out, err, "trees.txt", "tree file", "--type tree")
    assert not (tmp_path / "x.model").exists()


def test_learn_of_crfsuite013_tree_example_without_type_tree(tmp_path, capsys):
    from tests.conftest import require_data

    path = require_data("crfsuite013_format") / "test_tree_2.input"
    rc, out, err = run(capsys, "learn", "-q", "-m", tmp_path / "x.model", path)
    _one_line_error(rc, out, err, "test_tree_2.input", "--type tree")
    rc, out, err = run(capsys, "learn", "-q", "--type", "tree", "-p", "max_iterations=2", "-m",
                       tmp_path / "x.model", path)
    assert rc == 0, err


THREE_FIELDS = TRAIN.replace("\tw=He\n", "\tw=He\tp=PRP\n").replace("\tw=.\n", "\tw=.\tp=.\n")


@pytest.mark.parametrize("text", [TRAIN, THREE_FIELDS])
def test_learn_of_a_sequence_file_with_type_tree(tmp_path, capsys, text):
    # a line of two fields (too short for a tree line), or every line of three (read as node and parent ids
    # that name no node): the reader's error, and no item has the root's parent '_'
    assert all(len(line.split("\t")) == 3 for line in THREE_FIELDS.splitlines() if line)
    (tmp_path / "seq.txt").write_text(text, encoding="utf-8")
    rc, out, err = run(capsys, "learn", "-q", "--type", "tree", "-m", tmp_path / "x.model", tmp_path / "seq.txt")
    _one_line_error(rc, out, err, "seq.txt", "not a CRFSuite 0.13 tree file", "leave out --type tree")


def test_a_sequence_file_with_number_attributes_still_trains(tmp_path, capsys):
    # digit attributes alone do not make a tree: the second sequence has no root '_'
    (tmp_path / "digits.txt").write_text("A\t0\t1\nB\t1\t_\n\nA\t0\t1\nB\t1\t2\n\n", encoding="utf-8")
    rc, out, err = run(capsys, "learn", "-q", "-p", "max_iterations=2", "-m", tmp_path / "x.model",
                       tmp_path / "digits.txt")
    assert rc == 0, err
