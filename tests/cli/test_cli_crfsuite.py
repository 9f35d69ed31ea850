"""crfsuite / CRFSuite 0.13 compatibility of the command line: the models it trains by default, the
example files of CRFSuite 0.13 (``../shared/data/crfsuite013_format``), crfsuite's ``learn`` options."""
import numpy as np
import pytest

from structlearn import LinearChainCRF, TreeCRF
from structlearn.io.crfsuite import read_crfsuite_tree
from structlearn.estimators.tree_crf import parents_from_ids
from tests.cli._cli import blocks, run
from tests.conftest import require_data


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
    rc, out, err = run(capsys, "learn", "-x", a)
    assert rc == 2 and "two groups" in err


def test_log_to_file_and_crfsuite_layout(capsys, tmp_path):
    (train,) = _files(tmp_path, 1)
    model = tmp_path / "m.model"
    rc, out, err = run(capsys, "learn", "-L", "-l", tmp_path / "train.log", "-m", model, train)
    assert rc == 0, err
    assert out == ""
    log = (tmp_path / "train.log").read_text()
    assert "***** Iteration #1 *****" in log and "Loss: " in log and "Feature norm: " in log
    assert "Seconds required for this iteration: " in log and "Saved the model" in log
    rc, out, err = run(capsys, "learn", "-l", "-m", model, train)
    assert rc == 0 and out == "" and "iter    1" in (tmp_path / "m.model.log").read_text()


def test_dump_in_crfsuite_layout_matches_python_crfsuite(capsys, tmp_path):
    pycrfsuite = pytest.importorskip("pycrfsuite")
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
    rc, out, err = run(capsys, "learn", "-q", "--type=semim", "-p", "feature.max_seg_len=20",
                       "-p", "max_iterations=3", "-m", model, path)
    assert rc == 0, err
    from structlearn import SemiMarkovCRF

    est = SemiMarkovCRF.load(model)
    assert set(est.max_lengths_.values()) == {20}
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
