"""CoNLL chunk scores against seqeval (conlleval default mode), segments, token metrics."""
import random
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from seqeval import metrics as sq
from seqeval.metrics.sequence_labeling import get_entities

from structlearn.io.conll import read_conll
from structlearn.metrics.sequence import (chunk_f1, classification_report, conlleval, labels_from_segments,
                                          segments_from_labels, token_accuracy, token_report)
from tests.conftest import require_data

_tag = st.sampled_from(["O", "B-A", "I-A", "E-A", "S-A", "B-B", "I-B", "E-B", "S-B", "I-C-D", "B-C-D"])
_iob_tag = st.sampled_from(["O", "B-A", "I-A", "B-B", "I-B"])
_seqs = st.lists(st.lists(_tag, max_size=8), min_size=1, max_size=4)


def _seqeval_spans(seq):
    # seqeval: (type, start, end inclusive) -> ours: (start, end exclusive, type)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [(s, e + 1, t) for t, s, e in get_entities(list(seq))]


@given(st.lists(_tag, max_size=12))
def test_segments_match_seqeval(seq):
    assert segments_from_labels(seq) == _seqeval_spans(seq)


def _pairs(draw_tags):
    return st.lists(st.lists(st.tuples(draw_tags, draw_tags), max_size=8), min_size=1, max_size=4).map(
        lambda ss: ([[a for a, _ in s] for s in ss], [[b for _, b in s] for s in ss]))


def _check_against_seqeval(y_true, y_pred):
    res = conlleval(y_true, y_pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = sq.precision_score(y_true, y_pred, zero_division=0)
        r = sq.recall_score(y_true, y_pred, zero_division=0)
        f = sq.f1_score(y_true, y_pred, zero_division=0)
        per = sq.classification_report(y_true, y_pred, output_dict=True, zero_division=0)
    assert res.precision == pytest.approx(p, abs=1e-12)
    assert res.recall == pytest.approx(r, abs=1e-12)
    assert res.f1 == pytest.approx(f, abs=1e-12)
    # seqeval's report lists the gold types (support > 0) and any predicted-only types
    for typ, sc in res.per_type.items():
        if sc.n_true == 0:
            continue
        ref = per[typ]
        assert sc.precision == pytest.approx(ref["precision"], abs=1e-12)
        assert sc.recall == pytest.approx(ref["recall"], abs=1e-12)
        assert sc.f1 == pytest.approx(ref["f1-score"], abs=1e-12)
        assert sc.n_true == ref["support"]
    if sum(map(len, y_true)):
        assert res.accuracy == pytest.approx(sq.accuracy_score(y_true, y_pred), abs=1e-12)
    return res


@given(_pairs(_tag))
def test_conlleval_matches_seqeval_iobes(pair):
    _check_against_seqeval(*pair)


@given(_pairs(_iob_tag))
def test_conlleval_matches_seqeval_iob(pair):
    _check_against_seqeval(*pair)


def test_known_example():
    y_true = [["B-NP", "I-NP", "O", "B-VP"], ["B-PP", "B-NP", "I-NP"]]
    y_pred = [["B-NP", "I-NP", "O", "B-NP"], ["B-PP", "B-NP", "O"]]
    res = conlleval(y_true, y_pred)
    assert (res.overall.n_true, res.overall.n_pred, res.overall.n_correct) == (4, 4, 2)
    assert res.f1 == 0.5 and chunk_f1(y_true, y_pred) == 0.5
    assert res.per_type["NP"].n_pred == 3 and res.per_type["NP"].n_correct == 1
    assert res.per_type["VP"].n_pred == 0 and res.per_type["VP"].precision == 0.0
    assert res.accuracy == pytest.approx(5 / 7)
    text = res.report()
    assert "processed 7 tokens with 4 phrases; found: 4 phrases; correct: 2." in text
    assert "FB1:  50.00" in text
    assert res.as_dict()["per_type"]["PP"]["f1"] == 1.0


def test_iob1_chunks_and_sequence_boundaries():
    # IOB1: I- starts a chunk after O; B- only between adjacent chunks of one type
    assert segments_from_labels(["I-NP", "I-NP", "B-NP", "O", "I-VP"]) == [(0, 2, "NP"), (2, 3, "NP"),
                                                                          (4, 5, "VP")]
    # a chunk never crosses a sentence boundary
    res = conlleval([["B-NP"], ["I-NP"]], [["B-NP", ], ["I-NP"]])
    assert res.overall.n_true == 2
    # one flat sequence is one sentence
    assert conlleval(["B-NP", "I-NP"], ["B-NP", "I-NP"]).f1 == 1.0


@given(st.lists(_tag, max_size=10), st.sampled_from(["IOB2", "IOB1", "IOBES"]))
def test_labels_from_segments_round_trip(seq, scheme):
    segs = segments_from_labels(seq)
    labels = labels_from_segments(segs, len(seq), scheme=scheme)
    assert segments_from_labels(labels) == segs
    if scheme == "IOBES":
        assert all(t[0] in "OBIES" for t in labels)


def test_labels_from_segments_examples_and_errors():
    segs = [(0, 2, "NP"), (2, 3, "NP"), (4, 5, "VP")]
    assert labels_from_segments(segs, 5) == ["B-NP", "I-NP", "B-NP", "O", "B-VP"]
    assert labels_from_segments(segs, 5, "IOB1") == ["I-NP", "I-NP", "B-NP", "O", "I-VP"]
    assert labels_from_segments(segs, 5, "IOBES") == ["B-NP", "E-NP", "S-NP", "O", "S-VP"]
    with pytest.raises(ValueError, match="overlaps"):
        labels_from_segments([(0, 2, "A"), (1, 3, "B")], 3)
    with pytest.raises(ValueError, match="outside"):
        labels_from_segments([(0, 4, "A")], 3)
    with pytest.raises(ValueError, match="scheme"):
        labels_from_segments([], 3, "BILOU")


def test_token_metrics():
    y_true = [["A", "B", "A"], ["C"]]
    y_pred = [["A", "A", "A"], ["C"]]
    assert token_accuracy(y_true, y_pred) == 0.75
    rep = token_report(y_true, y_pred)
    assert rep["A"] == {"precision": 2 / 3, "recall": 1.0, "f1": 0.8, "support": 2}
    assert rep["B"]["precision"] == 0.0 and rep["B"]["support"] == 1
    assert rep["micro avg"]["f1"] == pytest.approx(0.75)
    from sklearn.metrics import precision_recall_fscore_support
    flat_t = [a for s in y_true for a in s]
    flat_p = [a for s in y_pred for a in s]
    p, r, f, _ = precision_recall_fscore_support(flat_t, flat_p, labels=["A", "B", "C"], average="macro",
                                                 zero_division=0)
    assert rep["macro avg"]["precision"] == pytest.approx(p)
    assert rep["macro avg"]["f1"] == pytest.approx(f)
    text = classification_report(y_true, y_pred)
    assert "precision" in text and "weighted avg" in text
    assert classification_report(y_true, y_pred, output_dict=True) == rep


def test_errors():
    with pytest.raises(ValueError, match="sequence 0"):
        conlleval([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="sequences"):
        conlleval([["O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="no labels"):
        token_accuracy([[]], [[]])
    with pytest.raises(ValueError, match="list of label sequences"):
        conlleval("B-NP", "B-NP")


@pytest.mark.slow
def test_conll2000_test_gold_vs_perturbed():
    sents = read_conll(require_data("conll2000") / "test.txt.gz")
    y_true = [[tok[2] for tok in s] for s in sents]
    labels = sorted({t for s in y_true for t in s})
    rng = random.Random(0)
    y_pred = [[rng.choice(labels) if rng.random() < 0.1 else t for t in s] for s in y_true]
    res = _check_against_seqeval(y_true, y_pred)
    assert 0.6 < res.f1 < 0.95
    assert conlleval(y_true, y_true).f1 == 1.0
    assert res.overall.n_true == 23852  # chunks in the CoNLL-2000 test set (conlleval's "phrases")
