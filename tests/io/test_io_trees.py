"""Tree readers: CoNLL-U (dependency trees) and PTB bracketed trees (SST)."""
import io

import pytest

from structlearn.io import (ConlluFormatError, PTBFormatError, apply_template, parse_ptb, read_conllu,
                            read_ptb)
from structlearn.io.conllu import UPOS_TEMPLATE, conllu_columns
from structlearn.io.ptb import child_positions, span_items
from tests.conftest import require_data

CONLLU = """# sent_id = s1
# text = I can't go
1\tI\tI\tPRON\t_\t_\t3\tnsubj\t_\t_
2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
2\tca\tcan\tAUX\t_\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\t_\t_\t4\tadvmod\t_\t_
4\tgo\tgo\tVERB\t_\t_\t0\troot\t_\t_
4.1\tgone\tgo\tVERB\t_\t_\t_\t_\t4:conj\t_

# sent_id = s2
1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\tSpaceAfter=No
"""


def test_conllu_reads_words_heads_and_metadata():
    sents = read_conllu(io.StringIO(CONLLU))
    assert len(sents) == 2
    s = sents[0]
    assert s.form == ["I", "ca", "n't", "go"] and s.upos == ["PRON", "AUX", "PART", "VERB"]
    assert s.head == [3, 4, 4, 0] and s.parents == [2, 3, 3, -1]
    assert s.deprel == ["nsubj", "aux", "advmod", "root"]
    assert s.metadata == {"sent_id": "s1", "text": "I can't go"}
    assert sents[1].misc == ["SpaceAfter=No"] and sents[1].parents == [-1]
    items = apply_template(conllu_columns(s), UPOS_TEMPLATE)
    assert len(items) == 4 and "wl[0]=go" in items[3] and "__EOS__" in items[3]


@pytest.mark.parametrize("text, match", [
    ("1\tI\tI\tPRON\t_\t_\t0\troot\t_\n", "10 TAB-separated"),
    ("1\tI\tI\tPRON\t_\t_\tx\troot\t_\t_\n", "HEAD 'x'"),
    ("2\tI\tI\tPRON\t_\t_\t0\troot\t_\t_\n", "word id 2 but 1"),
    ("1\tI\tI\tPRON\t_\t_\t5\troot\t_\t_\n", "outside"),
    ("a\tI\tI\tPRON\t_\t_\t0\troot\t_\t_\n", "not an integer"),
])
def test_conllu_errors_name_the_line(text, match):
    with pytest.raises(ConlluFormatError, match=match):
        read_conllu(io.StringIO(text))


def test_conllu_missing_head_has_no_tree():
    s = read_conllu(io.StringIO("1\tI\tI\tPRON\t_\t_\t_\t_\t_\t_\n"))[0]
    assert s.head == [None]
    with pytest.raises(ValueError, match="no HEAD"):
        s.parents


def test_ptb_nodes_spans_and_leaves():
    (t,) = parse_ptb("(3 (2 The) (4 (3 gorgeously) (2 elab\xa0orate)))")
    assert t.labels == ["3", "2", "4", "3", "2"]
    assert t.parents == [-1, 0, 0, 2, 2]
    assert t.words == ["The", "gorgeously", "elab\xa0orate"]  # NO-BREAK SPACE stays inside the token
    assert t.spans == [(0, 3), (0, 1), (1, 3), (1, 2), (2, 3)]
    assert t.word_of == [-1, 0, -1, 1, 2]
    assert child_positions(t) == [None, "0", "1", "0", "1"]
    items = span_items(t)
    assert items[0]["w:the"] == 1.0 and items[0]["len=3"] == 1.0 and "leaf" not in items[0]
    assert items[1]["leaf"] == 1.0 and items[2]["first=gorgeously"] == 1.0


def test_ptb_wrapper_multiline_and_several_trees():
    trees = parse_ptb("( (S (NP (DT the)\n (NN cat)) (VP sat)) )\n(X y) (Z (A b))")
    assert [t.labels for t in trees] == [["S", "NP", "DT", "NN", "VP"], ["X"], ["Z", "A"]]
    assert trees[0].parents == [-1, 0, 1, 1, 0] and trees[1].parents == [-1]


@pytest.mark.parametrize("text, match", [
    ("(A (B c)", "still open"), ("(A b))", "unbalanced"), ("(A b c)", "second word"),
    ("(A (B c) d)", "after sub-brackets"), ("(A d (B c))", "follows a word"), ("(A)", "empty"),
    ("x (A b)", "outside any bracket"),
])
def test_ptb_errors(text, match):
    with pytest.raises(PTBFormatError, match=match):
        parse_ptb(text)


def test_real_files_counts():
    sst = require_data("sst")
    trees = read_ptb(sst / "dev.txt.gz")
    assert len(trees) == 1101 and sum(len(t.labels) for t in trees) == 41447
    assert sum(len(t.words) for t in trees) == 21274
    atis = require_data("ud_english_atis")
    sents = read_conllu(atis / "en_atis-ud-dev.conllu.gz")
    assert len(sents) == 572 and sum(map(len, sents)) == 6644
    assert all(s.parents.count(-1) == 1 for s in sents)
    ewt = require_data("ud_english_ewt")
    sents = read_conllu(ewt / "en_ewt-ud-dev.conllu.gz")
    assert len(sents) == 2001 and sum(map(len, sents)) == 25147
