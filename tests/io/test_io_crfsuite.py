"""CRFsuite attribute format: reader, writer, escapes, gzip, errors, the CRFSuite 0.13 variants."""
import gzip
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from structlearn.io.crfsuite import (CRFsuiteFormatError, read_crfsuite, read_crfsuite_tree,
                                     write_crfsuite)
from tests.conftest import require_data

SAMPLE = (
    "B-NP\tw[0]=He\tpos[0]=PRP\t__BOS__\n"
    "B-VP\tw[0]=reckons\tlen:7\tscore:-0.5\n"
    "\n"
    "\n"
    "O\tw[0]=.\t__EOS__\n"
)


def test_read_basic(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text(SAMPLE, encoding="utf-8")
    X, y = read_crfsuite(p)
    assert y == [["B-NP", "B-VP"], ["O"]]
    assert X[0][0] == {"w[0]=He": 1.0, "pos[0]=PRP": 1.0, "__BOS__": 1.0}
    assert X[0][1] == {"w[0]=reckons": 1.0, "len": 7.0, "score": -0.5}
    assert X[1] == [{"w[0]=.": 1.0, "__EOS__": 1.0}]


def test_read_file_objects_crlf_and_gzip(tmp_path):
    crlf = SAMPLE.replace("\n", "\r\n")
    ref = read_crfsuite(io.StringIO(SAMPLE))
    assert read_crfsuite(io.BytesIO(crlf.encode())) == ref
    gz = tmp_path / "a.txt.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write(crlf)
    assert read_crfsuite(gz) == ref
    # gzip recognised by its magic bytes even without the suffix
    odd = tmp_path / "a.bin"
    odd.write_bytes(gz.read_bytes())
    assert read_crfsuite(odd) == ref


def test_escapes_and_values():
    text = "L\\:1\ta\\:b:2.5\tc\\\\d\te\\\\:3\tx:1:2e0\n"
    with pytest.raises(CRFsuiteFormatError, match="line 1"):
        read_crfsuite(io.StringIO(text))  # "1:2e0" is not a number
    X, y = read_crfsuite(io.StringIO("L\\:1\ta\\:b:2.5\tc\\\\d\te\\\\:3\n"))
    assert y == [["L:1"]]
    assert X == [[{"a:b": 2.5, "c\\d": 1.0, "e\\": 3.0}]]


def test_empty_label_no_attributes_and_repeats():
    X, y = read_crfsuite(io.StringIO("\tw=a\nB\nC\tw=a\tw=a\tv:2\tv:0.5\t\n"))
    assert y == [["", "B", "C"]]
    assert X == [[{"w=a": 1.0}, {}, {"w=a": 2.0, "v": 2.5}]]


def test_unicode(tmp_path):
    X = [[{"w=Ñandú": 1.0, "ключ:x": 0.25}, {"日本": 2.0}]]
    y = [["B-ÜBER", "I-日本"]]
    p = tmp_path / "u.txt"
    write_crfsuite(X, y, p)
    assert read_crfsuite(p) == (X, y)


@pytest.mark.parametrize("line, what", [
    ("B\tx:abc\n", "must be a number"),
    ("B\tx:nan\n", "finite"),
    ("@weight\n", "@weight"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, what):
    p = tmp_path / "bad.txt"
    p.write_text("A\tok\n\n" + line, encoding="utf-8")
    with pytest.raises(CRFsuiteFormatError, match=what) as info:
        read_crfsuite(p)
    msg = str(info.value)
    assert "bad.txt" in msg and "line 3" in msg


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_crfsuite(tmp_path / "nope.txt")


def test_weights_and_unknown_declaration():
    text = "@weight:2.5\nA\tx\n\nB\ty\n\n@foo:1\nC\tz\n"
    with pytest.warns(UserWarning, match="@foo"):
        X, y, w = read_crfsuite(io.StringIO(text), return_weights=True)
    assert y == [["A"], ["B"], ["C"]]
    assert w == [2.5, 1.0, 1.0]


def test_write_item_forms_and_read_back(tmp_path):
    X = [[{"a": 1, "b": 0.1, "c": True, "pos": "NN"}, ["x", "y:z"], [("p", 2.0), "q"]], []]
    y = [["A", "B", "C"], []]
    buf = io.StringIO()
    write_crfsuite(X, y, buf)
    text = buf.getvalue()
    # {"pos": "NN"} is attribute "pos:NN" (python-crfsuite's spelling), its colon escaped in the file
    assert "b:0.1" in text and "pos\\:NN" in text and "y\\:z" in text
    X2, y2 = read_crfsuite(io.StringIO(text))
    assert y2 == [["A", "B", "C"]]  # the empty sequence writes nothing but a blank line
    assert X2[0] == [{"a": 1.0, "b": 0.1, "c": 1.0, "pos:NN": 1.0}, {"x": 1.0, "y:z": 1.0},
                     {"p": 2.0, "q": 1.0}]


def test_write_tagging_input_without_labels():
    buf = io.StringIO()
    write_crfsuite([[{"a": 1.0}, {"b": 1.0}]], None, buf)
    assert buf.getvalue() == "\ta\n\tb\n\n"
    assert read_crfsuite(io.StringIO(buf.getvalue())) == ([[{"a": 1.0}, {"b": 1.0}]], [["", ""]])


@pytest.mark.parametrize("X, y, what", [
    ([[{"a": 1.0}]], [["A\tB"]], "TAB"),
    ([[{"a": 1.0}]], [["@A"]], "reserves"),
    ([[{"a\tb": 1.0}]], [["A"]], "TAB"),
    ([[{"a": float("nan")}]], [["A"]], "non-finite"),
    ([[{"a": 1.0}]], [["A", "B"]], "labels"),
    ([[{"a": 1.0}]], [], "sequences"),
    ([[3]], [["A"]], "an item must be"),
    ([[{"": 1.0}]], [["A"]], "non-empty"),
])
def test_write_errors(X, y, what):
    with pytest.raises(ValueError, match=what):
        write_crfsuite(X, y, io.StringIO())


_names = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=8)
_labels = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp", "Zs")), min_size=1,
                  max_size=5).filter(lambda s: not s.startswith("@"))
_values = st.floats(allow_nan=False, allow_infinity=False, width=64)
_item = st.dictionaries(_names, _values, max_size=4)
_seq = st.lists(st.tuples(_labels, _item), min_size=1, max_size=5)


@given(st.lists(_seq, max_size=4))
def test_round_trip_property(seqs):
    X = [[it for _, it in s] for s in seqs]
    y = [[lab for lab, _ in s] for s in seqs]
    # a line with only a whitespace label and no attributes reads as blank; keep labels non-blank
    y = [[lab if lab.strip() else "x" for lab in ys] for ys in y]
    buf = io.StringIO()
    write_crfsuite(X, y, buf)
    X2, y2 = read_crfsuite(io.StringIO(buf.getvalue()))
    assert y2 == y
    assert X2 == X


def test_gzip_write(tmp_path):
    p = tmp_path / "o.txt.gz"
    write_crfsuite([[{"a": 2.0}]], [["A"]], p)
    with gzip.open(p, "rt") as fh:
        assert fh.read() == "A\ta:2.0\n\n"


def test_crfsuite013_semimarkov_and_tree_inputs():
    root = require_data("crfsuite013_format")
    X, y = read_crfsuite(root / "test_sm_1.input")
    assert len(X) >= 2 and all(len(a) == len(b) for a, b in zip(X, y))
    assert y[0][:2] == ["AUTHOR", "AUTHOR"]
    assert X[0][0] == {"lemma[0]=M.": 1.0}
    X, y, nodes, parents = read_crfsuite_tree(root / "test_tree_2.input")
    assert y[0][0] == "SRC" and X[0][0] == {"lemma[0]=ich": 1.0, "pos[0]=PPER": 1.0}
    assert nodes[0][:3] == [0, 1, 2] and parents[0][:3] == [1, -1, 4]
    assert all(ps.count(-1) == 1 for ps in parents)  # one root per tree


def test_tree_bad_ids():
    assert read_crfsuite_tree(io.StringIO("A\tx\t_\ta\n"))[2] == [["x"]]  # symbolic ids are fine
    with pytest.raises(CRFsuiteFormatError, match="empty node or parent id"):
        read_crfsuite_tree(io.StringIO("A\t\t_\ta\n"))
    with pytest.raises(CRFsuiteFormatError, match="fields"):
        read_crfsuite_tree(io.StringIO("A\t1\n"))


def test_crfsuite013_fields_empty_name_and_value():
    """CRFsuite's reader: ':' is the attribute "" with value 1, 'x:' is x with value 1, ':3' is "" = 3."""
    X, y = read_crfsuite(io.StringIO("A\ta\t:\tb:2\tc:\n B\t:3\n\n"))
    assert X == [[{"a": 1.0, "": 1.0, "b": 2.0, "c": 1.0}, {"": 3.0}]] and y == [["A", " B"]]


def test_tree_file_with_symbolic_node_ids():
    from structlearn.crf.tree import parents_from_ids

    text = "A\tn1\troot\tx\nB\troot\t_\ty\nA\t7\troot\tz\n\nB\t0\t_\tw\n\n"
    X, y, nodes, parents = read_crfsuite_tree(io.StringIO(text))
    assert nodes == [["n1", "root", 7], [0]] and parents == [["root", -1, "root"], [-1]]
    assert [list(p) for p in parents_from_ids(nodes, parents)] == [[1, -1, 1], [-1]]


@pytest.mark.parametrize("kind", ["path", "gzip", "binary", "text"])
def test_utf8_bom_is_not_part_of_the_first_label(tmp_path, kind):
    # a byte-order mark (Windows editors) made "\ufeffB-NP" a class of its own beside "B-NP"
    text = "\ufeff" + SAMPLE
    data = text.encode("utf-8")
    if kind == "path":
        src = tmp_path / "bom.txt"
        src.write_bytes(data)
    elif kind == "gzip":
        src = tmp_path / "bom.txt.gz"
        src.write_bytes(gzip.compress(data))
    elif kind == "binary":
        src = io.BufferedReader(io.BytesIO(data))
    else:
        src = io.StringIO(text)
    X, y = read_crfsuite(src)
    assert y == [["B-NP", "B-VP"], ["O"]]
    assert X[0][0] == {"w[0]=He": 1.0, "pos[0]=PRP": 1.0, "__BOS__": 1.0}
