"""The ``structlearn`` command line: learn -> tag -> eval round trips, output formats, dump/info, errors.

Commands run in-process through ``main([...])`` (fast); one test runs the installed console script.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from structlearn.cli.main import main
from structlearn.cli.params import parse_params
from structlearn.crf.linear_chain import LinearChainCRF
from structlearn.io import read_crfsuite, write_crfsuite
from structlearn.io.modelfile import load_model, save_model
from structlearn.metrics import (chunk_f1, classification_report, conlleval, token_accuracy)
from tests.cli._cli import blocks as _blocks
from tests.cli._cli import chunk_sentences
from tests.cli._cli import run
from tests.conftest import require_data, skip_unless_ci

NP_WORDS = [("the", "DT"), ("a", "DT")]
NOUNS = [("dog", "NN"), ("cat", "NN"), ("idea", "NN"), ("house", "NN")]
VERBS = [("runs", "VBZ"), ("sees", "VBZ"), ("likes", "VBZ")]
PREPS = [("in", "IN"), ("on", "IN")]


def _sentences(n, seed):
    """Tiny chunking-like data: (word, pos, chunk) tokens, IOB2 chunk tags."""
    return chunk_sentences(n, seed, {"DT": NP_WORDS, "NN": NOUNS, "VBZ": VERBS, "IN": PREPS})


def _attr_items(sent):
    items = []
    for t, (w, p, _) in enumerate(sent):
        item = {f"w[0]={w}": 1.0, f"pos[0]={p}": 1.0}
        if t > 0:
            item[f"pos[-1]={sent[t - 1][1]}"] = 1.0
        else:
            item["__BOS__"] = 1.0
        items.append(item)
    return items


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    train, test = _sentences(30, 0), _sentences(8, 1)
    write_crfsuite([_attr_items(s) for s in train], [[c for *_, c in s] for s in train], d / "train.txt")
    write_crfsuite([_attr_items(s) for s in test], [[c for *_, c in s] for s in test], d / "test.txt")
    for name, sents in (("train.conll", train), ("test.conll", test)):
        (d / name).write_text("\n\n".join("\n".join(" ".join(tok) for tok in s) for s in sents) + "\n",
                              encoding="utf-8")
    (d / "test2.conll").write_text("\n\n".join("\n".join(f"{w} {p}" for w, p, _ in s) for s in test) + "\n",
                                   encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def model(files):
    path = files / "m.model"
    assert main(["learn", "-q", "-m", str(path), "-p", "max_iterations=40", str(files / "train.txt")]) == 0
    return path


# ------------------------------------------------------------------------------------------ round trip
def test_learn_prints_log_and_saves(files, capsys, tmp_path):
    path = tmp_path / "a.model"
    rc, out, err = run(capsys, "learn", "-m", path, "-p", "max_iterations=5", "-e", files / "test.txt",
                       files / "train.txt")
    assert rc == 0, err
    iters = [line for line in out.splitlines() if line.startswith("iter ")]
    assert len(iters) == 5
    assert all(re.search(r"loss [\d.]+ .*\|g\| .*active \d+ .*dev-acc [\d.]+ .*\d\.\d{3}s$", line)
               for line in iters)
    assert "Training: 5 iterations, not converged" in out
    assert "Held-out evaluation of the final model:" in out and "Item accuracy: " in out
    assert "Saved the model" in out
    assert err == ""  # max_iterations given explicitly: no ConvergenceWarning repeated
    est = LinearChainCRF.load(path)
    assert est.n_iter_ == 5 and len(est.training_log_) == 5
    header, _ = load_model(path)
    assert header["metadata"]["user"]["featurizer"] == {"format": "crfsuite"}


def test_round_trip_learn_tag_eval(files, model, capsys, tmp_path):
    X, y = read_crfsuite(files / "test.txt")
    est = LinearChainCRF.load(model)
    expected = est.predict(X)
    rc, out, err = run(capsys, "tag", "-m", model, files / "test.txt")
    assert rc == 0, err
    assert _blocks(out) == expected
    assert out.endswith("\n\n")  # a blank line after every sequence, as crfsuite tag
    pred = tmp_path / "pred.txt"
    pred.write_text(out, encoding="utf-8")
    rc, out, err = run(capsys, "eval", files / "test.txt", pred)
    assert rc == 0, err
    acc = token_accuracy(y, expected)
    n = sum(map(len, y))
    assert f"Item accuracy: {round(acc * n)} / {n} ({acc:.4f})" in out
    assert conlleval(y, expected).report() in out
    assert acc > 0.9


def test_tag_marginals_probability_kbest(files, model, capsys):
    X, _ = read_crfsuite(files / "test.txt")
    est = LinearChainCRF.load(model)
    pred = est.predict(X)
    marg = est.predict_marginals(X)
    proba = est.predict_proba_sequence(X)
    rc, out, _ = run(capsys, "tag", "-m", model, "-i", "-p", files / "test.txt")
    assert rc == 0
    blocks = _blocks(out)
    assert len(blocks) == len(X)
    for b, block in enumerate(blocks):
        head, p = block[0].split("\t")
        assert head == "@probability" and float(p) == pytest.approx(proba[b], abs=1e-6)
        for t, line in enumerate(block[1:]):
            lab, prob = line.rsplit(":", 1)
            assert lab == pred[b][t]
            assert float(prob) == pytest.approx(marg[b][t][lab], abs=1e-6)
    rc, out, _ = run(capsys, "tag", "-m", model, "-k", "3", files / "test.txt")
    assert rc == 0
    kb = est.kbest(X, 3)
    blocks = _blocks(out)
    assert len(blocks) == sum(len(r) for r in kb)
    i = 0
    for b, results in enumerate(kb):
        for r, (labels, prob) in enumerate(results, 1):
            tag, rank, p = blocks[i][0].split("\t")
            assert (tag, int(rank)) == ("@kbest", r)
            assert float(p) == pytest.approx(prob, abs=1e-6)
            assert blocks[i][1:] == labels
            i += 1
        assert results[0][0] == pred[b]
    # -r writes gold<TAB>predicted
    rc, out, _ = run(capsys, "tag", "-m", model, "-r", files / "test.txt")
    _, y = read_crfsuite(files / "test.txt")
    assert [[line.split("\t") for line in block] for block in _blocks(out)] == \
        [[[g, p] for g, p in zip(gs, ps)] for gs, ps in zip(y, pred)]


def test_tag_test_numbers_equal_metrics(files, model, capsys):
    X, y = read_crfsuite(files / "test.txt")
    pred = LinearChainCRF.load(model).predict(X)
    rc, out, _ = run(capsys, "tag", "-m", model, "-qt", files / "test.txt")
    assert rc == 0
    assert not out.startswith("B-")  # -q: no labels, only the evaluation
    m = re.search(r"Item accuracy: (\d+) / (\d+) \(([\d.]+)\)", out)
    assert int(m.group(1)) / int(m.group(2)) == pytest.approx(token_accuracy(y, pred))
    assert float(m.group(3)) == round(token_accuracy(y, pred), 4)
    m = re.search(r"Chunk F1 \(conlleval\): ([\d.]+)", out)
    assert float(m.group(1)) == round(chunk_f1(y, pred), 4)
    assert classification_report(y, pred, digits=4) in out
    assert conlleval(y, pred).report() in out


def test_crfsuite013_attribute_file(capsys, tmp_path):
    src = require_data("crfsuite013_format") / "test_sm_1.input"  # plain label<TAB>attr lines
    path = tmp_path / "sm.model"
    rc, out, err = run(capsys, "learn", "-q", "-m", path, "-p", "max_iterations=20", src)
    assert rc == 0, err
    rc, out, err = run(capsys, "tag", "-m", path, "-qt", src)
    assert rc == 0, err
    assert "Item accuracy" in out and "Chunk scores: skipped" in out  # AUTHOR, TITLE, ...: not chunk tags
    X, y = read_crfsuite(src)
    assert _blocks(run(capsys, "tag", "-m", path, src)[1]) == LinearChainCRF.load(path).predict(X)


# ------------------------------------------------------------------------------------------ CoNLL input
def test_conll_template_recorded_in_model(files, capsys, tmp_path):
    path = tmp_path / "c.model"
    rc, out, err = run(capsys, "learn", "-q", "-m", path, "--format", "conll", "--template", "chunking",
                       "--forbid", "BIO", "-p", "max_iterations=30", files / "train.conll")
    assert rc == 0, err
    header, _ = load_model(path)
    feat = header["metadata"]["user"]["featurizer"]
    assert feat["format"] == "conll" and feat["template"] == "chunking"
    assert feat["spec"]["fields"] == ["w", "pos", "y"]
    # tag without --format/--template: taken from the model; a file without the label column works too
    rc, with_gold, _ = run(capsys, "tag", "-m", path, files / "test.conll")
    rc2, no_gold, _ = run(capsys, "tag", "-m", path, files / "test2.conll")
    assert rc == rc2 == 0 and with_gold == no_gold
    gold = [[line.split()[-1] for line in block] for block in _blocks(
        (files / "test.conll").read_text(encoding="utf-8"))]
    assert len(_blocks(with_gold)) == len(gold)
    # tag -r + eval --conll (conlleval layout) and eval --format conll give the same scores as tag -t
    rc, ref, _ = run(capsys, "tag", "-m", path, "-r", files / "test.conll")
    (tmp_path / "ref.txt").write_text(ref, encoding="utf-8")
    (tmp_path / "pred.txt").write_text(with_gold, encoding="utf-8")
    rc, ev1, _ = run(capsys, "eval", "--conll", tmp_path / "ref.txt")
    rc, ev2, _ = run(capsys, "eval", "--format", "conll", files / "test.conll", tmp_path / "pred.txt")
    rc, ev3, _ = run(capsys, "tag", "-m", path, "-qt", files / "test.conll")
    assert ev1 == ev2 == ev3
    assert conlleval(gold, _blocks(with_gold)).report() in ev1
    # info and dump show the template and the forbidden BIO transitions
    rc, out, _ = run(capsys, "info", path)
    assert rc == 0 and "template chunking" in out and "CoNLL columns w,pos,y" in out
    rc, out, _ = run(capsys, "dump", path)
    assert rc == 0 and "-inf" in out
    # a model trained on attribute files cannot featurise CoNLL input without --template
    rc, out, err = run(capsys, "learn", "-q", "-m", tmp_path / "a.model", "-p", "max_iterations=2",
                       files / "train.txt")
    rc, out, err = run(capsys, "tag", "-m", tmp_path / "a.model", "--format", "conll", files / "test.conll")
    assert rc == 2 and "--template" in err


# ------------------------------------------------------------------------------------------ dump / info
def test_dump_and_info(model, capsys):
    est = LinearChainCRF.load(model)
    rc, out, err = run(capsys, "dump", "-n", "5", model)
    assert rc == 0, err
    assert f"LABELS ({len(est.classes_)}):" in out
    assert "TRANSITIONS" in out and "<start>" in out and "<end>" in out
    feats = out.split("STATE_FEATURES")[1].strip().splitlines()[1:]
    assert len(feats) == 5
    top = max(est.state_features_.items(), key=lambda kv: abs(kv[1]))
    assert feats[0].split() == [f"{top[1]:+.4f}", top[0][0], "->", top[0][1]]
    rc, out, err = run(capsys, "info", model)
    assert rc == 0, err
    assert "format: linear-chain-crf version 1" in out
    assert f"labels: {len(est.classes_)}" in out and f"attributes: {len(est.attributes_)}" in out
    assert f"features: {est.num_features_}" in out
    assert "max_iterations=40" in out and f"training: {est.n_iter_} iterations" in out


# ------------------------------------------------------------------------------------------ parameters
def test_parse_params_types_and_aliases():
    p = parse_params(["c2=0.5", "max_iterations=1e2", "feature.minfreq=2", "feature.possible_states=yes",
                      "linesearch=Backtracking", "calibration.eta=0.05", "type=2",
                      "forbidden_transitions=O->I-NP,<start>->I-NP", "random_state=none"])
    assert p == {"c2": 0.5, "max_iterations": 100, "min_freq": 2.0, "all_possible_states": True,
                 "linesearch": "Backtracking", "calibration_eta": 0.05, "pa_type": 2,
                 "forbidden_transitions": [("O", "I-NP"), ("<start>", "I-NP")], "random_state": None}
    assert isinstance(p["max_iterations"], int) and isinstance(p["min_freq"], float)
    assert parse_params(["forbidden_transitions=BIO"]) == {"forbidden_transitions": "BIO"}


@pytest.mark.parametrize("param, message", [
    ("foo=1", "unknown parameter 'foo'; valid names: all_possible_states"),
    ("c2=abc", "parameter 'c2' expects a number; got 'abc'"),
    ("max_iterations=2.5", "expects an integer"),
    ("all_possible_states=maybe", "expects a boolean"),
    ("c2", "-p expects NAME=VALUE"),
    ("algorithm=ap", "with -a/--algorithm"),
    ("c2=-1", "`c2` must be a non-negative"),
])
def test_bad_params_exit_2(files, capsys, tmp_path, param, message):
    rc, out, err = run(capsys, "learn", "-q", "-m", tmp_path / "x.model", "-p", param, files / "train.txt")
    assert rc == 2
    assert err.startswith("structlearn: error: ") and message in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------------ errors
def _error_cases(files, model, tmp):
    bad = tmp / "bad.txt"
    bad.write_text("B-NP\tw=a\n\nB-NP\tlen:abc\n", encoding="utf-8")
    trunc = tmp / "trunc.model"
    trunc.write_bytes(model.read_bytes()[:300])
    newer = tmp / "newer.model"
    header, arrays = load_model(model)
    save_model(newer, format_name=header["format"], version=header["version"] + 1,
               estimator=header["estimator"], params=header["params"], metadata=header["metadata"],
               arrays=arrays)
    short = tmp / "short.txt"
    short.write_text("B-NP\n\nB-NP\n", encoding="utf-8")
    return [
        (["learn", "-m", tmp / "x.model", tmp / "missing.txt"], "missing.txt"),
        (["learn", "-q", "-m", tmp / "x.model", bad], f"{bad}, line 3: the value of attribute 'len'"),
        (["tag", "-m", tmp / "nomodel", files / "test.txt"], "model file not found"),
        (["tag", "-m", trunc, files / "test.txt"], "truncated or corrupt"),
        (["tag", "-m", newer, files / "test.txt"], "newer than this structlearn"),
        (["tag", "-m", files / "train.txt", files / "test.txt"], "not a structlearn model file"),
        (["tag", "-m", model, tmp / "missing.txt"], "missing.txt"),
        (["tag", "-m", model, "-k", "0", files / "test.txt"], "-k expects a positive"),
        (["info", trunc], "truncated or corrupt"),
        (["dump", newer], "newer than this structlearn"),
        (["eval", files / "test.txt"], "eval needs GOLD and PRED"),
        (["eval", files / "test.txt", short], "has 8 sequences but"),
        (["learn", files / "train.txt"], "-m/--model is required"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["learn", "-m", tmp / "x.model", "--template", "nosuch", "--format", "conll", files / "train.conll"],
         "unknown template 'nosuch'"),
    ]


def test_errors_exit_2_with_one_line(files, model, capsys, tmp_path):
    for argv, message in _error_cases(files, model, tmp_path):
        rc, out, err = run(capsys, *argv)
        assert rc == 2, (argv, err)
        assert err.startswith("structlearn: error: "), (argv, err)
        assert message in err, (argv, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (argv, err)


def test_demo_missing_data_message(capsys, tmp_path, monkeypatch):
    import structlearn.datasets.conll as conll

    monkeypatch.setattr(conll, "get_data_path", lambda name, data_home=None: None)
    rc, out, err = run(capsys, "demo", "--data-home", tmp_path, "-q")
    assert rc == 2
    assert err.startswith("structlearn: error: data set 'conll2000' not found")
    assert "--download" in err and "train.txt.gz" in err and err.count("\n") == 1


def test_help_and_version(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and all(c in out for c in ("learn", "tag", "eval", "dump", "info", "demo"))
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.startswith("structlearn ")
    rc, out, _ = run(capsys, "learn", "-m", "unused.model", "-p", "help", "unused.txt")
    assert rc == 0 and "  c2 (1.0)" in out and "feature.minfreq = min_freq" in out


def test_console_script():
    exe = Path(sys.executable).parent / "structlearn"
    if not exe.exists():
        found = shutil.which("structlearn")
        if found is None:
            skip_unless_ci("the structlearn console script is not installed (pip install -e .)")
        exe = Path(found)
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "learn" in res.stdout and "demo" in res.stdout
    res = subprocess.run([str(exe), "tag", "-m", "/nonexistent.model", "/nonexistent.txt"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("structlearn: error:")


# ------------------------------------------------------------------------------------------ the main job
@pytest.mark.slow
def test_demo_runs_on_conll2000(capsys):
    require_data("conll2000")
    rc, out, err = run(capsys, "demo", "--max-iterations", "5")
    assert rc == 0, err
    assert len([line for line in out.splitlines() if line.startswith("iter ")]) == 5
    f1 = float(re.search(r"chunk F1 \(conlleval\): ([\d.]+)", out).group(1))
    acc = float(re.search(r"token accuracy: ([\d.]+)", out).group(1))
    assert 0.5 < f1 <= 1 and 0.5 < acc <= 1
    assert re.search(r"time: featurise [\d.]+ s, train [\d.]+ s, tag [\d.]+ s, total [\d.]+ s", out)
    assert "iterations: 5 (not converged)" in out


TREE_FILE = """SRC\t0\t1\tw=ich\tpos=PPER
SNT\t1\t_\tw=mag\tpos=VVFIN
TRG\t2\t4\tw=die\tpos=ART
TRG\t3\t2\tw=neue\tpos=ADJA
TRG\t4\t1\tw=folge\tpos=NN

SRC\t0\t1\tw=du\tpos=PPER
SNT\t1\t_\tw=magst\tpos=VVFIN
TRG\t2\t1\tw=sie\tpos=PPER

"""


def test_tree_learn_tag_eval_round_trip(tmp_path, capsys):
    from structlearn.cli.main import main
    from structlearn.crf.tree import TreeCRF

    data = tmp_path / "trees.txt"
    data.write_text(TREE_FILE)
    model = tmp_path / "tree.model"
    assert main(["learn", "--structure", "tree", "-q", "-m", str(model), str(data)]) == 0
    capsys.readouterr()
    assert main(["tag", "-m", str(model), str(data)]) == 0
    tagged = [b.split("\n") for b in capsys.readouterr().out.strip().split("\n\n")]
    from structlearn.crf.tree import parents_from_ids
    from structlearn.io.crfsuite import read_crfsuite_tree

    X, y, nodes, parent_ids = read_crfsuite_tree(str(data))
    est = TreeCRF.load(model)
    assert tagged == est.predict(X, parents=parents_from_ids(nodes, parent_ids))
    pred = tmp_path / "pred.txt"
    assert main(["tag", "-m", str(model), "-r", str(data)]) == 0
    out = capsys.readouterr().out
    pred.write_text(out)
    assert main(["tag", "-m", str(model), "-qt", str(data)]) == 0
    assert "Item accuracy" in capsys.readouterr().out
    assert main(["dump", str(model)]) == 0 and "EDGES" in capsys.readouterr().out
    assert main(["info", str(model)]) == 0


def test_tree_bad_file_is_a_clear_error(tmp_path, capsys):
    from structlearn.cli.main import main

    bad = tmp_path / "bad.txt"
    bad.write_text("A\t0\t1\tw=x\nB\t1\t0\tw=y\n\n")  # a cycle, no root
    assert main(["learn", "--structure", "tree", "-q", "-m", str(tmp_path / "m"), str(bad)]) == 2
    assert "structlearn: error:" in capsys.readouterr().err
