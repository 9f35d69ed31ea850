"""CoNLL column reader and the feature-template engine (CRFsuite example-script conventions)."""
import gzip
import io
import json

import pytest

from structlearn.io.conll import apply_template, compile_template, featurize, read_conll
from structlearn.io.templates import (CHUNKING, DERIVED_FUNCTIONS, NER, TEMPLATES, get_template, shape,
                                      shape_degenerate, token_type)
from tests.conftest import require_data

TEXT = """-DOCSTART- -X- O

He PRP B-NP
reckons VBZ B-VP
the DT B-NP

-DOCSTART- -X- O
Sí NC O
. Fp O


"""


def test_read_conll_docstart_blank_lines_gzip_crlf(tmp_path):
    sents = read_conll(io.StringIO(TEXT))
    assert sents == [[("He", "PRP", "B-NP"), ("reckons", "VBZ", "B-VP"), ("the", "DT", "B-NP")],
                     [("Sí", "NC", "O"), (".", "Fp", "O")]]
    p = tmp_path / "x.txt.gz"
    with gzip.open(p, "wb") as fh:
        fh.write(TEXT.replace("\n", "\r\n").encode("utf-8"))
    assert read_conll(p) == sents
    assert read_conll(p, columns=[0, -1]) == [[(a, c) for a, _, c in s] for s in sents]


def test_read_conll_sep_and_errors(tmp_path):
    assert read_conll(io.StringIO("a b\tX\nc d\tY\n"), sep="\t") == [[("a b", "X"), ("c d", "Y")]]
    p = tmp_path / "bad.txt"
    p.write_text("a B\nc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt, line 2: expected 2 columns"):
        read_conll(p)
    p.write_text("a B\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1"):
        read_conll(p, columns=[5])
    with pytest.raises(FileNotFoundError):
        read_conll(tmp_path / "missing.txt")


SENT = [("He", "PRP", "B-NP"), ("reckons", "VBZ", "B-VP"), ("the", "DT", "B-NP"), ("deficit", "NN", "I-NP")]


def _crfutils_reference(sentence, fields, templates):
    """Slow, direct re-statement of CRFsuite's apply_templates + BOS/EOS (for the oracle comparison)."""
    rows = [dict(zip(fields, tok)) for tok in sentence]
    out = [[] for _ in rows]
    for feat in templates:
        name = "|".join(f"{c}[{o}]" for c, o in feat)
        for t in range(len(rows)):
            vals = []
            for c, o in feat:
                p = t + o
                if not 0 <= p < len(rows):
                    vals = None
                    break
                vals.append(rows[p][c])
            if vals is not None:
                out[t].append(f"{name}={'|'.join(vals)}")
    if out:
        out[0].append("__BOS__")
        out[-1].append("__EOS__")
    return [dict.fromkeys(a, 1.0) for a in out]


def test_chunking_template_matches_reference():
    items = apply_template(SENT, "chunking")
    assert items == _crfutils_reference(SENT, CHUNKING["fields"], CHUNKING["features"])
    first, second = items[0], items[1]
    assert "__BOS__" in first and "__EOS__" in items[-1] and "__BOS__" not in second
    assert second["w[-1]|w[0]=He|reckons"] == 1.0
    assert "pos[-1]|pos[0]|pos[1]=PRP|VBZ|DT" in second
    assert "w[-1]=He" not in first and not any(k.startswith("w[-1]=") for k in first)
    # 5 word + 2 word bigrams + 5 POS + 4 POS bigrams + 3 POS trigrams = 19 features
    assert len(CHUNKING["features"]) == 19
    assert len(items[1]) == 19 - 1 - 1 - 1 - 1  # w[-2], pos[-2], pos[-2]|pos[-1], pos[-2..0] missing


def test_label_column_is_not_a_feature_and_length_one_and_empty():
    items = apply_template([("x", "NN", "B-NP")], "chunking")
    assert items == [{"w[0]=x": 1.0, "pos[0]=NN": 1.0, "__BOS__": 1.0, "__EOS__": 1.0}]
    assert apply_template([], "chunking") == []
    assert not any("y[" in k for it in apply_template(SENT, "chunking") for k in it)


def test_custom_templates_fields_and_errors():
    items = apply_template(SENT, [(("w", 0), ("pos", 0))])
    assert list(items[0]) == ["w[0]|pos[0]=He|PRP", "__BOS__"]
    tpl = {"fields": ("w", "pos", "y"), "derived": {"lw": ("lower", "w")}, "features": [(("lw", 1),)],
           "bos_eos": False}
    assert apply_template(SENT, tpl)[0] == {"lw[1]=reckons": 1.0}
    assert apply_template([("A", "B")], [(("tok", 0),)], fields=("tok", "tag"))[0]["tok[0]=A"] == 1.0
    with pytest.raises(ValueError, match="uses column 'chk'"):
        compile_template({"fields": ("w", "y"), "features": [(("chk", 0),)]})
    with pytest.raises(ValueError, match="unknown template"):
        compile_template("nope")
    with pytest.raises(ValueError, match="unknown function"):
        compile_template({"fields": ("w",), "derived": {"z": ("zz", "w")}, "features": [(("z", 0),)]})
    with pytest.raises(ValueError, match="expects 3 columns"):
        apply_template([("a", "b")], "chunking")


def test_featurize_returns_labels():
    X, y = featurize([SENT, SENT[:1]], "chunking")
    assert y == [["B-NP", "B-VP", "B-NP", "I-NP"], ["B-NP"]]
    assert X[1] == apply_template(SENT[:1], "chunking")


def test_ner_template_features():
    sent = [("U.N.", "NNP", "I-NP", "B-ORG"), ("official", "NN", "I-NP", "O"),
            ("Ekeus", "NNP", "I-NP", "B-PER"), ("1996", "CD", "I-NP", "O")]
    items = apply_template(sent, "ner")
    it = items[2]
    for attr in ("w[0]=Ekeus", "wl[0]=ekeus", "shape[0]=ULLLL", "shaped[0]=UL", "type[0]=InitUpper",
                 "p2[0]=Ek", "s3[0]=eus", "iu[0]=yes", "au[0]=no", "pos[0]=NNP", "chk[0]=I-NP",
                 "w[-1]|w[0]=official|Ekeus", "4d[1]=yes", "cd[1]=yes", "up[-2]=no", "d&a[0]=no"):
        assert attr in it, attr
    assert "p1[0]=U" in items[0] and "type[0]=AllUpperDigit" in items[0]
    assert not any(k.startswith("y[") for k in it)
    ref = _crfutils_reference([tok + tuple(DERIVED_FUNCTIONS[fn](tok[0]) for fn, _ in NER["derived"].values())
                               for tok in sent], NER["fields"] + tuple(NER["derived"]), NER["features"])
    assert items == ref
    assert set(TEMPLATES) >= {"chunking", "ner"}
    apply_template([("Dat", "Pron", "O")], get_template("ner-nochunk"))


def test_derived_functions():
    assert shape("Mrs.") == "ULL." and shape_degenerate("Mrs.") == "UL."
    assert shape("(a-1)") == "(L-D)"
    assert token_type("") == "EMPTY" and token_type("IBM") == "AllUpper" and token_type("1,000") == "AllDigit"
    assert token_type("--") == "AllSymbol" and token_type("A1") == "AllUpperDigit"
    assert token_type("John") == "InitUpper" and token_type("john") == "AllLetter"
    assert token_type("a1") == "AllAlnum" and token_type("a-1") == "NO"
    assert DERIVED_FUNCTIONS["prefix4"]("abc") == "" and DERIVED_FUNCTIONS["suffix2"]("abc") == "bc"
    assert DERIVED_FUNCTIONS["all_other"]("--") == "yes" and DERIVED_FUNCTIONS["upper_period"]("A.") == "yes"


@pytest.mark.slow
def test_conll2000_train_featurises_whole_set():
    # speed is measured in benchmarks/bench_crf_conll2000.py, never asserted here
    path = require_data("conll2000") / "train.txt.gz"
    sents = read_conll(path)
    assert len(sents) == 8936 and sum(map(len, sents)) == 211727
    X, y = featurize(sents, "chunking")
    assert sum(map(len, X)) == 211727 and sum(map(len, y)) == 211727


def test_templates_survive_json_and_latin1(tmp_path):
    for name, tpl in TEMPLATES.items():
        back = json.loads(json.dumps(tpl))  # tuples become lists, e.g. inside a model file header
        sent = [tuple(f"{f}{i}" for f in tpl["fields"]) for i in range(3)]
        assert apply_template(sent, back) == apply_template(sent, name)
    p = tmp_path / "l1.txt"
    p.write_bytes("Peñarol NC B-ORG\n".encode("latin-1"))
    assert read_conll(p, encoding="latin-1") == [[("Peñarol", "NC", "B-ORG")]]


@pytest.mark.parametrize("kind", ["path", "text"])
def test_read_conll_drops_a_utf8_bom(tmp_path, kind):
    text = "\ufeffHe PRP B-NP\nreckons VBZ B-VP\n"
    if kind == "path":
        src = tmp_path / "bom.conll"
        src.write_bytes(text.encode("utf-8"))
    else:
        src = io.StringIO(text)
    assert read_conll(src) == [[("He", "PRP", "B-NP"), ("reckons", "VBZ", "B-VP")]]
