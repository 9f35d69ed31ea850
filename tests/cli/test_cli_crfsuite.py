"""crfsuite / CRFSuite 0.13 compatibility of the command line: the models it trains by default, the
example files of CRFSuite 0.13 (``../shared/data/crfsuite013_format``), crfsuite's ``learn`` options."""
import numpy as np
import pytest

from structlearn import LinearChainCRF, TreeCRF
from structlearn.io.crfsuite import read_crfsuite_tree
from structlearn.crf.tree import parents_from_ids
from tests.cli._cli import blocks, run
from tests.conftest import require_data, require_module


def _crfsuite013(name):
    return require_data("crfsuite013_format") / name


def test_tree_file_tag_prints_crfsuite013_model_probabilities(capsys, tmp_path):
    path = _crfsuite013("test_tree_2.input")
    model = tmp_path / "t.model"
    rc, out, err = run(capsys, "learn", "-q", "--structure", "tree", "-m", model, path)
    assert rc == 0, err
    est = TreeCRF.load(model)
    assert not est.model_.root and est.root_features_ == {}
    rc, out, err = run(capsys, "tag", "-p", "-i", "-m", model, path)
    assert rc == 0, err
    X, _, nodes, pids = read_crfsuite_tree(str(path))
    parents = parents_from_ids(nodes, pids)
    pred = est.predict(X, parents=parents)
    prob = est.sequence_probability(X, pred, parents=parents)
    marg = est.predict_marginals(X, parents=parents)
    for b, block in enumerate(blocks(out)):
        assert block[0] == f"@probability\t{prob[b]:.6f}"
        for t, line in enumerate(block[1:]):
            lab, p = line.rsplit(":", 1)
            assert lab == pred[b][t] and float(p) == pytest.approx(marg[b][t][lab], abs=1e-6)


def test_sequence_file_trains_crfsuite_model(capsys, tmp_path):
    path = _crfsuite013("test_sm_1.input")
    model = tmp_path / "c.model"
    rc, out, err = run(capsys, "learn", "-q", "-m", model, path)
    assert rc == 0, err
    est = LinearChainCRF.load(model)
    assert not est.model_.start_end
    assert not any("<start>" in k or "<end>" in k for k in est.transition_features_)
    rc, out, err = run(capsys, "tag", "-p", "-i", "-m", model, path)
    assert rc == 0, err
    assert blocks(out)[0][0].startswith("@probability\t")
    # -p start_end_features=1 asks for our model with boundary weights
    rc, out, err = run(capsys, "learn", "-q", "-m", model, "-p", "start_end_features=1", path)
    assert rc == 0, err
    assert LinearChainCRF.load(model).model_.start_end


# ------------------------------------------------------------------------------------------ crfsuite learn
def _files(tmp_path, n_files=2, n=12):
    from structlearn.io import write_crfsuite

    rng = np.random.default_rng(0)
    paths = []
    for f in range(n_files):
        X, y = [], []
        for _ in range(n):
            labs = ["AB"[int(rng.integers(0, 2))] for _ in range(int(rng.integers(2, 6)))]
            X.append([[f"w={lab.lower()}{int(rng.integers(0, 2))}", "bias"] for lab in labs])
            y.append(labs)
        p = tmp_path / f"part{f}.txt"
        write_crfsuite(X, y, str(p))
        paths.append(p)
    return paths


def test_param_help_needs_no_model_or_data(capsys):
    rc, out, err = run(capsys, "learn", "-p", "help")
    assert rc == 0 and "start_end_features" in out and "c2" in out


def test_missing_model_folder_fails_before_training(capsys, tmp_path):
    (train,) = _files(tmp_path, 1)
    rc, out, err = run(capsys, "learn", "-m", tmp_path / "missing" / "dir" / "x.model", train)
    assert rc == 2 and "does not exist" in err and "Reading" not in out
    rc, out, err = run(capsys, "learn", train)
    assert rc == 2 and "-m/--model" in err


def test_model_path_under_a_file_names_the_file(capsys, tmp_path):
    """-m under a regular file: the error says which component is a file (not that a folder is missing)."""
    (train,) = _files(tmp_path, 1)
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder\n")
    for model in (blocker / "x.model", blocker / "sub" / "x.model"):
        rc, out, err = run(capsys, "learn", "-m", model, train)
        assert rc == 2 and "Reading" not in out
        assert err.strip().endswith(f"{blocker} is a file, not a folder") and "does not exist" not in err
        assert len(err.strip().splitlines()) == 1


def test_holdout_group_and_split(capsys, tmp_path):
    a, b = _files(tmp_path)
    model = tmp_path / "m.model"
    rc, out, err = run(capsys, "learn", "-m", model, "-e", "2", a, b)
    assert rc == 0, err
    assert "Reading: 12 sequences" in out and "Held-out: 12 sequences" in out and "group 2" in out
    assert "dev-acc" in out  # the held-out accuracy of every iteration
    rc, out, err = run(capsys, "learn", "-m", model, "-g", "4", "-e", "1", a, b)
    assert rc == 0, err
    assert "Reading: 18 sequences" in out and "Held-out: 6 sequences" in out
    rc, out, err = run(capsys, "learn", "-m", model, "-e", "3", a, b)
    assert rc == 2 and "1..2" in err


def test_cross_validation(capsys, tmp_path):
    a, b = _files(tmp_path)
    rc, out, err = run(capsys, "learn", "-q", "-x", "-g", "3", a, b)
    assert rc == 0, err
    line = [ln for ln in out.splitlines() if ln.startswith("Cross validation:")][0]
    accs = [float(v) for v in line.split("group ")[1].split(";")[0].split()]
    assert len(accs) == 3 and all(0 <= v <= 1 for v in accs)
    assert not list(tmp_path.glob("*.model"))  # no -m: no model, as crfsuite
    rc, out, err = run(capsys, "learn", "-x", a)
    assert rc == 2 and "two groups" in err
    # each fold prints crfsuite's evaluation table; with -m the model of every group is stored after
    model = tmp_path / "cv.model"
    rc, out, err = run(capsys, "learn", "-x", "-m", model, a, b)
    assert rc == 0, err
    lines = out.splitlines()
    assert [ln for ln in lines if ln.startswith("=====")] == [
        "===== Cross validation (1/2) =====", "===== Cross validation (2/2) =====",
        "===== Final model: every group (24 sequences) ====="]
    assert sum(ln.startswith("Performance by label") for ln in lines) == 2
    assert model.exists() and f"Saved the model to {model}" in out
    assert len(LinearChainCRF.load(model).classes_) == 2


def test_log_to_file_and_crfsuite_layout(capsys, tmp_path, monkeypatch):
    (train,) = _files(tmp_path, 1)
    model = tmp_path / "m.model"
    rc, out, err = run(capsys, "learn", "--crfsuite-log", "--log-file", tmp_path / "train.log", "-m", model,
                       train)
    assert rc == 0, err
    assert out == ""
    log = (tmp_path / "train.log").read_text()
    assert "***** Iteration #1 *****" in log and "Loss: " in log and "Feature norm: " in log
    assert "Seconds required for this iteration: " in log and "Saved the model" in log
    rc, out, err = run(capsys, "learn", "--log-file", tmp_path / "plain.log", "-m", model, train)
    assert rc == 0 and out == "" and "iter    1" in (tmp_path / "plain.log").read_text()
    # crfsuite's -l: the log file is named BASE_ALGORITHM_PARAMS in the working folder (-L sets BASE),
    # in crfsuite's layout; crfsuite's learn -l -m MODEL TRAIN is not mistaken for a log file name
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "learn", "-l", "-p", "c2=1", "-p", "max_iterations=5", "-m", model, train)
    assert rc == 0 and out == "", err
    log = (tmp_path / "log.crfsuite_lbfgs_c2=1_max_iterations=5").read_text()
    assert "***** Iteration #1 *****" in log and "Saved the model" in log
    rc, out, err = run(capsys, "learn", "-a", "averaged-perceptron", "-l", "-L", "run", "-p",
                       "max_iterations=2", "-m", model, train)
    assert rc == 0 and out == "", err
    assert "Saved the model" in (tmp_path / "run_averaged-perceptron_max_iterations=2").read_text()
    rc, out, err = run(capsys, "learn", "--log-file", tmp_path, "-m", model, train)
    assert rc == 2 and "is a folder" in err


def _table(lines, start):
    """The crfsuite evaluation table that starts at ``lines[start]``: {label: (match, model, ref)},
    item (correct, total), instance (correct, total)."""
    assert lines[start] == "Performance by label (#match, #model, #ref) (precision, recall, F1):"
    rows, i = {}, start + 1
    while lines[i].startswith("    "):
        lab, rest = lines[i].strip().split(": ", 1)
        rows[lab] = tuple(int(v) for v in rest.split(")")[0].strip("(").split(", "))
        i += 1
    assert lines[i].startswith("Macro-average precision, recall, F1: (")
    item = lines[i + 1].split(": ")[1].split(" (")[0].split(" / ")
    inst = lines[i + 2].split(": ")[1].split(" (")[0].split(" / ")
    assert lines[i + 1].startswith("Item accuracy: ") and lines[i + 2].startswith("Instance accuracy: ")
    return rows, tuple(map(int, item)), tuple(map(int, inst))


def test_holdout_prints_crfsuite_evaluation_table(capsys, tmp_path):
    a, b = _files(tmp_path)
    model = tmp_path / "m.model"
    rc, out, err = run(capsys, "learn", "--crfsuite-log", "-p", "max_iterations=4", "-m", model, "-e", "2",
                       a, b)
    assert rc == 0, err
    lines = out.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Performance by label")]
    assert len(starts) == 4 + 1  # every iteration, and the final model
    from structlearn.io.crfsuite import read_crfsuite

    X, y = read_crfsuite(str(b))
    pred = LinearChainCRF.load(model).predict(X)
    rows, item, inst = _table(lines, starts[-1])
    for lab in "AB":
        assert rows[lab] == (sum(p == t == lab for ps, ts in zip(pred, y) for p, t in zip(ps, ts)),
                             sum(p == lab for ps in pred for p in ps), sum(t == lab for ts in y for t in ts))
    assert item == (sum(p == t for ps, ts in zip(pred, y) for p, t in zip(ps, ts)), sum(map(len, y)))
    assert inst == (sum(list(p) == list(t) for p, t in zip(pred, y)), len(y))
    # the iteration tables are those of the weights of that iteration: the last one is the final model's
    assert _table(lines, starts[-2]) == (rows, item, inst)


def test_crfsuite_evaluation_macro_average_counts_every_model_label():
    from structlearn.cli.report import crfsuite_evaluation, label_counts

    y = [["A", "A", "C"], ["A"]]
    p = [["A", "B", "C"], ["B"]]   # B never in the reference: asterisks, 0 in the macro average
    counts = label_counts(y, p, ["A", "B"])  # C is no model label: an item, never correct
    assert counts == ([1, 0], [1, 2], [3, 0], (1, 4, 0, 2))
    lines = crfsuite_evaluation(["A", "B"], counts)
    assert lines[1] == "    A: (1, 1, 3) (1.0000, 0.3333, 0.5000)"
    assert lines[2] == "    B: (0, 2, 0) (******, ******, ******)"
    assert lines[3] == "Macro-average precision, recall, F1: (0.500000, 0.166667, 0.250000)"
    assert lines[4:] == ["Item accuracy: 1 / 4 (0.2500)", "Instance accuracy: 0 / 2 (0.0000)"]


def test_dump_in_crfsuite_layout_matches_python_crfsuite(capsys, tmp_path):
    pycrfsuite = require_module("pycrfsuite")  # a dev dependency: missing under CI fails
    (train,) = _files(tmp_path, 1)
    model = tmp_path / "m.model"
    assert run(capsys, "learn", "-q", "-m", model, train)[0] == 0
    rc, out, err = run(capsys, "dump", "--crfsuite", model)
    assert rc == 0, err
    for head in ("FILEHEADER = {", "LABELS = {", "ATTRIBUTES = {", "TRANSITIONS = {", "STATE_FEATURES = {"):
        assert head in out
    est = LinearChainCRF.load(model)
    est.save(tmp_path / "m.crfsuite", format="crfsuite")
    tagger = pycrfsuite.Tagger()
    tagger.open(str(tmp_path / "m.crfsuite"))
    info = tagger.info()  # python-crfsuite parses crfsuite's own dump text
    ours = {tuple(ln.strip()[4:].rsplit(": ", 1)[0].split(" --> ")): float(ln.rsplit(": ", 1)[1])
            for ln in out.split("STATE_FEATURES = {")[1].split("}")[0].strip().splitlines()}
    assert ours == pytest.approx(info.state_features, abs=1e-6)


def test_crfsuite013_option_names(capsys, tmp_path):
    path = _crfsuite013("test_sm_1.input")
    model = tmp_path / "s.model"
    from structlearn import SemiMarkovCRF

    # CRFSuite 0.13: feature.max_seg_len >= 0 trains a linear-chain CRF (its value limits nothing)
    rc, out, err = run(capsys, "learn", "-q", "--type=semim", "-p", "feature.max_seg_len=20",
                       "-p", "max_iterations=3", "-m", model, path)
    assert rc == 0, err
    assert LinearChainCRF.load(model).classes_
    rc, out, err = run(capsys, "learn", "-q", "-p", "feature.order=2", "-p", "max_iterations=3",
                       "-m", tmp_path / "h.model", path)
    assert rc == 0, err
    from structlearn import HigherOrderCRF

    assert HigherOrderCRF.load(tmp_path / "h.model").order == 2
    rc, out, err = run(capsys, "learn", "-q", "--type=tree", "-p", "max_iterations=3", "-m",
                       tmp_path / "t.model", _crfsuite013("test_tree_2.input"))
    assert rc == 0, err
    rc, out, err = run(capsys, "learn", "--type=2d", "-m", model, path)
    assert rc == 2 and "--type" in err
    rc, out, err = run(capsys, "learn", "-q", "--structure", "semi-markov", "--max-segment-length",
                       "global", "-p", "max_iterations=2", "-m", model, path)
    assert rc == 0, err
    assert len(set(SemiMarkovCRF.load(model).max_lengths_.values())) == 1


def _longest_runs(path):
    """{label: its longest run} of a CRFsuite attribute file (label<TAB>attributes, blank line between
    sequences)."""
    longest, prev, run_len = {}, None, 0
    with open(path, encoding="utf-8") as fh:
        for line in list(fh) + [""]:
            lab = line.rstrip("\n").split("\t", 1)[0] if line.strip() else None
            run_len = run_len + 1 if lab is not None and lab == prev else 1
            if lab is not None:
                longest[lab] = max(longest.get(lab, 0), run_len)
            prev = lab
    return longest


def test_crfsuite013_semim_defaults(capsys, tmp_path):
    from structlearn import HigherOrderCRF, SemiMarkovCRF

    path = _crfsuite013("test_sm_1.input")
    runs = _longest_runs(path)
    assert max(runs.values()) > min(runs.values())   # per-label and global limits differ on this file
    fit = ("-q", "-p", "max_iterations=2")
    # --type=semim as CRFSuite 0.13: feature.max_seg_len = -1, per label its longest training run
    for extra in ([], ["-p", "feature.max_seg_len=-1"], ["-p", "feature.max_seg_len=-7"]):
        rc, out, err = run(capsys, "learn", *fit, "--type=semim", *extra, "-m", tmp_path / "a.model", path)
        assert rc == 0, err
        assert SemiMarkovCRF.load(tmp_path / "a.model").max_lengths_ == runs
    # N >= 0: CRFSuite 0.13's linear-chain mode, of order feature.max_order
    rc, out, err = run(capsys, "learn", *fit, "--type=semim", "-p", "feature.max_seg_len=1", "-p",
                       "feature.max_order=3", "-m", tmp_path / "b.model", path)
    assert rc == 0, err
    est = HigherOrderCRF.load(tmp_path / "b.model")
    assert (est.order, est.segments) == (3, False)
    # semi-Markov with segment-label n-grams
    rc, out, err = run(capsys, "learn", *fit, "--type=semim", "-p", "feature.max_order=2", "-m",
                       tmp_path / "c.model", path)
    assert rc == 0, err
    est = HigherOrderCRF.load(tmp_path / "c.model")
    assert (est.order, est.segments) == (2, True) and est.max_lengths_ == runs
    # structlearn's own limits stay options
    rc, out, err = run(capsys, "learn", *fit, "--type=semim", "--max-segment-length", "global", "-m",
                       tmp_path / "d.model", path)
    assert rc == 0, err
    assert set(SemiMarkovCRF.load(tmp_path / "d.model").max_lengths_.values()) == {max(runs.values())}
    rc, out, err = run(capsys, "learn", *fit, "--type=semim", "--max-segment-length", "1", "-m",
                       tmp_path / "e.model", path)
    assert rc == 2 and "max_segment_length" in err
    # bad values name the option
    for bad, words in ((["-p", "feature.max_order=0"], "feature.max_order"),
                       (["-p", "feature.max_seg_len=x"], "feature.max_seg_len"),
                       (["--type=tree", "-p", "feature.max_seg_len=-1"], "--type semim")):
        rc, out, err = run(capsys, "learn", *fit, *(["--type=semim"] if "--type=tree" not in bad else []),
                           *bad, "-m", tmp_path / "f.model", path)
        assert rc == 2 and words in err, err
