"""``structlearn tag`` with bad input and bad model files: one line ``structlearn: error: …`` naming the file
(exit status 2), never a traceback, a hang or half-written output; and tagging that works on odd but valid
input (fifos, gzip, CRLF, NUL bytes, models with non-string labels)."""
import gzip
import io
import json
import os
import subprocess
import sys
import threading
import warnings
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn.crf.linear_chain import LinearChainCRF
from structlearn.utils.modelfile import HEADER_KEY, load_model
from tests.cli._cli import blocks, run

TRAIN = "B\tw=a\tp=x\nI\tw=b\tp=y\nO\tw=c\n\nB\tw=a\nO\tw=d\tlen:2.0\n\n"
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tagbad")
    (d / "train.txt").write_text(TRAIN, encoding="utf-8")
    from structlearn.cli.main import main

    assert main(["learn", "-q", "-m", str(d / "m.model"), str(d / "train.txt")]) == 0
    # the attributes of train.txt (input of which the model knows no attribute is an error)
    X = [[{"w=a": 1.0}, {"w=b": 1.0}], [{"w=c": 1.0}]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        LinearChainCRF(max_iterations=3).fit(X, [[1, 2], [3]]).save(d / "int.model")
        LinearChainCRF(max_iterations=3, start_end_features=False).fit(X, [["B", "I"], ["O"]]).save(
            d / "c.crfsuite", format="crfsuite")
    return d


def _one_line_error(rc, out, err, *needles):
    assert rc == 2, (out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("structlearn: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _rewrite(src, dst, change_header=None, **arrays):
    """A copy of the model file ``src`` with its header changed by ``change_header`` and arrays replaced."""
    header, stored = load_model(src)
    stored = {**stored, **arrays}
    if change_header is not None:
        change_header(header)
    header["arrays"] = sorted(stored)
    with open(dst, "wb") as fh:
        np.savez_compressed(fh, **stored, **{HEADER_KEY: np.frombuffer(json.dumps(header).encode(), np.uint8)})
    return dst


def _cli(*argv, timeout=60):
    """``structlearn`` in a child process (for what could hang or needs its own standard streams)."""
    code = "import sys; from structlearn.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)


# --- bugs found and fixed -------------------------------------------------------------------------------

@pytest.mark.parametrize("opts", [[], ["-k", "1"], ["-q", "-t"], ["-r", "-i"], ["-p"]])
def test_a_model_with_integer_labels_tags(files, capsys, opts):
    # LinearChainCRF.fit accepts any hashable labels; tag wrote them with str.join (TypeError) and -t
    # sorted gold (str) and predicted (int) labels together
    rc, out, err = run(capsys, "tag", *opts, "-m", files / "int.model", files / "train.txt")
    assert rc == 0 and "Traceback" not in err, err
    if opts == ["-q", "-t"]:
        assert "Item accuracy" in out
    elif not opts:
        assert all(lab in ("1", "2", "3") for seq in blocks(out) for lab in seq)


@pytest.mark.parametrize("command", ["info", "dump"])
def test_info_and_dump_of_a_model_with_integer_labels(files, capsys, command):
    # ", ".join(classes) and len(label): TypeError tracebacks
    rc, out, err = run(capsys, command, files / "int.model")
    assert rc == 0 and "Traceback" not in err, err
    assert ("labels: 3 (1, 2, 3)" in out) if command == "info" else ("LABELS (3):" in out)


@pytest.mark.parametrize("record", ["conll", {"format": "conll", "spec": [1]}])
def test_info_of_a_malformed_featurizer_record(files, capsys, tmp_path, record):
    bad = _rewrite(files / "m.model", tmp_path / "bad.model",
                   lambda h: h["metadata"].__setitem__("user", {"featurizer": record}))
    rc, out, err = run(capsys, "info", bad)
    assert rc == 0 and "Traceback" not in err and "input: " in out, err


@pytest.mark.parametrize("metadata", [[], None, "x"])
def test_model_metadata_that_is_not_an_object(files, capsys, tmp_path, metadata):
    # the fast path called metadata.get (AttributeError, a traceback)
    bad = _rewrite(files / "m.model", tmp_path / "bad.model", lambda h: h.__setitem__("metadata", metadata))
    _one_line_error(*run(capsys, "tag", "-m", bad, files / "train.txt"), "bad.model")


@pytest.mark.parametrize("record", ["conll", ["crfsuite"], 3])
def test_featurizer_record_that_is_not_an_object(files, capsys, tmp_path, record):
    bad = _rewrite(files / "m.model", tmp_path / "bad.model",
                   lambda h: h["metadata"].__setitem__("user", {"featurizer": record}))
    for opts in ([], ["-i"]):
        _one_line_error(*run(capsys, "tag", *opts, "-m", bad, files / "train.txt"), "bad.model", "featurizer")


@pytest.mark.parametrize("template", [{"fields": 5, "features": []}, {"fields": None, "features": None},
                                      {"fields": ["w", "y"], "features": [[["w", 1e400]]]}])
def test_json_template_of_the_wrong_types(files, capsys, tmp_path, template):
    (tmp_path / "t.json").write_text(json.dumps(template), encoding="utf-8")
    (tmp_path / "in.conll").write_text("He B\n", encoding="utf-8")
    _one_line_error(*run(capsys, "tag", "--template", tmp_path / "t.json", "-m", files / "m.model",
                         tmp_path / "in.conll"), "t.json")


def test_json_template_nested_too_deeply(files, capsys, tmp_path):
    # json.load's RecursionError was not caught (a traceback)
    (tmp_path / "t.json").write_text("[" * 100000 + "]" * 100000, encoding="utf-8")
    (tmp_path / "in.conll").write_text("He B\n", encoding="utf-8")
    _one_line_error(*run(capsys, "tag", "--template", tmp_path / "t.json", "-m", files / "m.model",
                         tmp_path / "in.conll"), "t.json")


@pytest.mark.parametrize("name, value", [("forbidden", np.zeros((2, 2), bool)),
                                         ("trans_features", np.ones((4, 4), bool)),
                                         ("forbidden", np.zeros(9, bool)),
                                         ("start_end", np.array([True, False, True])),
                                         ("start_end", np.zeros(0, bool))])
@pytest.mark.parametrize("opts", [[], ["-i"]])
def test_mask_of_the_wrong_shape_is_named(files, capsys, tmp_path, name, value, opts):
    # the masks were combined (trans_features &= ~forbidden) before they were checked: NumPy's broadcast
    # error, which names no array; a start_end array: "truth value of an array is ambiguous"
    bad = _rewrite(files / "m.model", tmp_path / "bad.model", **{name: value})
    _one_line_error(*run(capsys, "tag", *opts, "-m", bad, files / "train.txt"), "bad.model", repr(name))


def test_corrupt_gzip_input(files, capsys, tmp_path):
    data = gzip.compress(TRAIN.encode())
    (tmp_path / "cut.gz").write_bytes(data[:len(data) // 2])
    (tmp_path / "fake.txt").write_bytes(b"\x1f\x8bnot gzip at all")
    (tmp_path / "plain.gz").write_text(TRAIN, encoding="utf-8")
    for name in ("cut.gz", "fake.txt", "plain.gz"):
        _one_line_error(*run(capsys, "tag", "-m", files / "m.model", tmp_path / name), name, "gzip")
    (tmp_path / "ok.gz").write_bytes(data)
    rc, out, _ = run(capsys, "tag", "-m", files / "m.model", tmp_path / "ok.gz")
    assert rc == 0 and len(blocks(out)) == 2


@needs_fifo
def test_input_from_a_fifo(files, tmp_path):
    # process substitution (tag -m M <(zcat x.gz)): the file was opened twice (once for its magic bytes),
    # and the second open of the drained fifo waited forever
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "w") as fh:
            fh.write(TRAIN)

    threading.Thread(target=feed, daemon=True).start()
    proc = _cli("tag", "-m", files / "m.model", fifo, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert blocks(proc.stdout) == [["B", "I", "O"], ["B", "O"]]


@needs_fifo
def test_model_from_a_fifo_is_refused(files, tmp_path):
    # it was opened (waiting for a writer) and, with one, read twice: a hang either way
    fifo = tmp_path / "m.fifo"
    os.mkfifo(fifo)
    proc = _cli("tag", "-m", fifo, files / "train.txt", timeout=60)
    _one_line_error(proc.returncode, proc.stdout, proc.stderr, "m.fifo", "not a regular file")


def test_closed_standard_output(files, capsys, monkeypatch):
    # 'structlearn tag ... >&-': sys.stdout is None (AttributeError, a traceback)
    monkeypatch.setattr(sys, "stdout", None)
    from structlearn.cli.main import main

    rc = main(["tag", "-m", str(files / "m.model"), str(files / "train.txt")])
    err = capsys.readouterr().err
    _one_line_error(rc, "", err, "standard output")


def test_model_from_standard_input(files, capsys):
    _one_line_error(*run(capsys, "tag", "-m", "-", files / "train.txt"), "-m -", "standard input")


def test_zip_magic_then_junk(files, capsys, tmp_path):
    # 'PK' + anything passed the two-byte check and reached NumPy's pickle message ("If you trust the file
    # you can load it unsafely ...")
    (tmp_path / "junk.model").write_bytes(b"PK" + bytes(range(256)) * 4)
    line = _one_line_error(*run(capsys, "tag", "-m", tmp_path / "junk.model", files / "train.txt"), "junk.model")
    assert "pickle" not in line


# version needed (NotImplementedError), general purpose flags: encrypted (RuntimeError), compression method
@pytest.mark.parametrize("offset, value", [(6, 0xFF), (8, 0x01), (10, 0x63)])
@pytest.mark.parametrize("opts", [[], ["-i"]])
def test_zip_central_directory_corrupted(files, capsys, tmp_path, offset, value, opts):
    # zipfile raises NotImplementedError or RuntimeError for these, which nothing caught (a traceback)
    data = bytearray((files / "m.model").read_bytes())
    cd = data.index(b"PK\x01\x02")  # first central directory entry
    data[cd + offset] = value
    (tmp_path / "bad.model").write_bytes(bytes(data))
    _one_line_error(*run(capsys, "tag", *opts, "-m", tmp_path / "bad.model", files / "train.txt"), "bad.model")


@pytest.mark.parametrize("argv", [["tag"], ["tag", "-i"], ["info"]])
def test_array_header_claiming_a_huge_shape(files, capsys, tmp_path, argv):
    # NumPy allocates the claimed shape (800 PB here: beyond any address space) before reading: a MemoryError
    # traceback
    header, arrays = load_model(files / "m.model")
    descr = repr({"descr": "<i8", "fortran_order": False, "shape": (10 ** 17,)}).encode()
    descr += b" " * (63 - (10 + len(descr)) % 64) + b"\n"
    with zipfile.ZipFile(tmp_path / "huge.model", "w") as z:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.save(buf, a)
            z.writestr(name + ".npy", b"\x93NUMPY\x01\x00" + len(descr).to_bytes(2, "little") + descr
                       if name == "attr_ptr" else buf.getvalue())
        buf = io.BytesIO()
        np.save(buf, np.frombuffer(json.dumps(header).encode(), np.uint8))
        z.writestr(HEADER_KEY + ".npy", buf.getvalue())
    model = tmp_path / "huge.model"
    args = [*argv, model] if argv == ["info"] else [*argv, "-m", model, files / "train.txt"]
    _one_line_error(*run(capsys, *args), "huge.model", "memory")


@pytest.mark.parametrize("argv", [["tag"], ["info"]])
def test_model_header_nested_too_deeply(files, capsys, tmp_path, argv):
    # json.loads raised RecursionError, which nothing caught (a traceback)
    _, arrays = load_model(files / "m.model")
    text = '{"magic": "structlearn-model", "x": ' + "[" * 100000 + "]" * 100000 + "}"
    with open(tmp_path / "deep.model", "wb") as fh:
        np.savez_compressed(fh, **arrays, **{HEADER_KEY: np.frombuffer(text.encode(), np.uint8)})
    model = tmp_path / "deep.model"
    args = [*argv, model] if argv == ["info"] else [*argv, "-m", model, files / "train.txt"]
    _one_line_error(*run(capsys, *args), "deep.model", "nested")


def test_unknown_declaration_is_a_one_line_warning(files, capsys, tmp_path):
    (tmp_path / "in.txt").write_text("@foo\nB\tw=a\n", encoding="utf-8")
    rc, out, err = run(capsys, "tag", "-m", files / "m.model", tmp_path / "in.txt")
    assert rc == 0 and blocks(out) == [["B"]]
    assert err.strip().splitlines() == ["structlearn: warning: " + f"{tmp_path / 'in.txt'}, line 1: unknown "
                                        "declaration '@foo' ignored"]


def test_repeated_attribute_values_that_overflow(files, capsys, tmp_path):
    # each value finite, their sum inf: reported without the file and line ("`X[0][0]`: ...")
    (tmp_path / "in.txt").write_text("B\tw=a:1e308\tw=a:1e308\n", encoding="utf-8")
    _one_line_error(*run(capsys, "tag", "-m", files / "m.model", tmp_path / "in.txt"), "in.txt, line 1", "w=a")


def test_kbest_beyond_the_number_of_labelings(files, capsys):
    # -k 10**9 allocated (K, N) labels (GBs, minutes) for 5 tokens; -k 10**20 reached Numba's typing
    # (TypingError, a traceback). Capped at the labelings that exist: the same output as a K that suffices
    rc, expected, _ = run(capsys, "tag", "-k", 50, "-m", files / "m.model", files / "train.txt")
    assert rc == 0 and len(blocks(expected)) == 27 + 9  # 3^3 and 3^2 labelings
    for k in (10 ** 9, 10 ** 20):
        rc, out, err = run(capsys, "tag", "-k", k, "-m", files / "m.model", files / "train.txt")
        assert rc == 0 and out == expected, err


def test_kbest_that_cannot_fit_in_memory(files, capsys, tmp_path):
    (tmp_path / "long.txt").write_text("".join(f"B\tw={'abcd'[t % 4]}\n" for t in range(200)), encoding="utf-8")
    _one_line_error(*run(capsys, "tag", "-k", 10 ** 20, "-m", files / "m.model", tmp_path / "long.txt"),
                    "-k 100000000000000000000", "memory")


@pytest.mark.parametrize("opts", [[], ["-i"]])
def test_attribute_values_whose_scores_overflow(files, capsys, tmp_path, opts):
    # finite values whose weighted sum is +inf: LinearChainCRF.predict (and tag -i/-p/-k) refuses them, but
    # the compiled fast path of plain tag decoded them into labels
    _, arrays = load_model(files / "m.model")
    big = _rewrite(files / "m.model", tmp_path / "big.model", coef=arrays["coef"] * 10)
    (tmp_path / "in.txt").write_text("B\tw=a:1.7e308\tp=x:1.7e308\nO\tw=c\n", encoding="utf-8")
    _one_line_error(*run(capsys, "tag", *opts, "-m", big, tmp_path / "in.txt"), "inf")


def test_tree_file_errors_name_the_file_once(capsys, tmp_path):
    (tmp_path / "t.txt").write_text("A\t1\t_\tw=a\nB\t2\t1\tw=b\n\n", encoding="utf-8")
    from structlearn.cli.main import main

    assert main(["learn", "-q", "--structure", "tree", "-m", str(tmp_path / "t.model"), str(tmp_path / "t.txt")]) == 0
    capsys.readouterr()
    (tmp_path / "short.txt").write_text("A\t1\n", encoding="utf-8")
    line = _one_line_error(*run(capsys, "tag", "-m", tmp_path / "t.model", tmp_path / "short.txt"), "line 1")
    assert line.count("short.txt") == 1, line  # was "short.txt: short.txt, line 1: ..."


def _stdin(monkeypatch, data):
    """Standard input holding the bytes ``data``, its text layer ASCII with surrogateescape (a C locale)."""
    raw = io.BytesIO(data)
    raw.name = "<stdin>"  # as sys.stdin.buffer's
    text = io.TextIOWrapper(io.BufferedReader(raw), encoding="ascii", errors="surrogateescape")
    monkeypatch.setattr(sys, "stdin", text)


def test_standard_input_is_read_as_utf8_bytes(files, capsys, monkeypatch):
    # '-' read sys.stdin's text layer: its locale's encoding (a UTF-8 file failed under PYTHONIOENCODING=ascii)
    # and, in a C locale, surrogateescape (invalid UTF-8 was tagged silently, unlike the same file)
    _stdin(monkeypatch, "B\tw=\u00e9\nO\tw=c\n".encode())
    rc, out, err = run(capsys, "tag", "-m", files / "m.model", "-")
    assert rc == 0 and [len(seq) for seq in blocks(out)] == [2], err
    _stdin(monkeypatch, b"B\tw=a\xff\n")
    _one_line_error(*run(capsys, "tag", "-m", files / "m.model", "-"), "<stdin>", "UTF-8")


def test_gzip_on_standard_input(files, capsys, monkeypatch):
    # recognised by its magic bytes, as a file's (it was decoded as text and tagged as junk)
    data = gzip.compress(TRAIN.encode())
    _stdin(monkeypatch, data)
    rc, out, err = run(capsys, "tag", "-m", files / "m.model", "-")
    assert rc == 0 and blocks(out) == [["B", "I", "O"], ["B", "O"]], err
    _stdin(monkeypatch, data[:len(data) // 2])
    _one_line_error(*run(capsys, "tag", "-m", files / "m.model", "-"), "<stdin>", "gzip")


def test_closed_standard_input(files, capsys, monkeypatch):
    # 'structlearn tag -m M - <&-': sys.stdin is None (AttributeError, a traceback)
    monkeypatch.setattr(sys, "stdin", None)
    _one_line_error(*run(capsys, "tag", "-m", files / "m.model", "-"), "standard input")


# --- attacks that already failed cleanly (kept as guards) ------------------------------------------------

# the last: unknown attributes beside a known one (none known is an error: tests/cli/test_cli_input_checks.py)
@pytest.mark.parametrize("text, lengths", [("", []), ("\n\n  \n\t\n", []), ("B\tw=a\x00b\nO\tw=c\n", [2]),
                                           ("B\tw=a\r\nO\tw=c\r\n\r\nI\tw=b\r\n", [2, 1]),
                                           ("B\tzz\tw=a\nO\tqq\n", [2])])
@pytest.mark.parametrize("model", ["m.model", "c.crfsuite"])
def test_odd_but_valid_input(files, capsys, tmp_path, text, lengths, model):
    (tmp_path / "in.txt").write_bytes(text.encode())
    rc, out, err = run(capsys, "tag", "-m", files / model, tmp_path / "in.txt")
    assert rc == 0 and err == ""
    assert [len(seq) for seq in blocks(out)] == lengths
    assert "nan" not in out


@pytest.mark.parametrize("text, needle", [(b"B\tw=a\xff\n", "UTF-8"), (b"B\tw:nan\n", "finite"),
                                          (b"B\tw:inf\n", "finite"), (b"B\tw:abc\n", "number")])
def test_bad_input_values(files, capsys, tmp_path, text, needle):
    (tmp_path / "in.txt").write_bytes(text)
    _one_line_error(*run(capsys, "tag", "-m", files / "m.model", tmp_path / "in.txt"), "in.txt", needle)


@pytest.mark.parametrize("model", ["m.model", "c.crfsuite"])
def test_truncated_model_files(files, capsys, tmp_path, model):
    data = (files / model).read_bytes()
    for tenth in range(10):
        (tmp_path / "cut.model").write_bytes(data[:len(data) * tenth // 10])
        _one_line_error(*run(capsys, "tag", "-m", tmp_path / "cut.model", files / "train.txt"), "cut.model")


@pytest.mark.parametrize("content", [os.urandom(300), b'{"format": "linear-chain-crf"}', b""])
def test_files_that_are_not_models(files, capsys, tmp_path, content):
    (tmp_path / "x.model").write_bytes(content)
    _one_line_error(*run(capsys, "tag", "-m", tmp_path / "x.model", files / "train.txt"), "x.model")


def test_missing_files_and_folders(files, capsys, tmp_path):
    _one_line_error(*run(capsys, "tag", "-m", tmp_path / "none.model", files / "train.txt"), "none.model")
    _one_line_error(*run(capsys, "tag", "-m", tmp_path, files / "train.txt"), "folder")
    _one_line_error(*run(capsys, "tag", "-m", files / "m.model", tmp_path / "none.txt"), "none.txt")
    _one_line_error(*run(capsys, "tag", "-m", files / "m.model", tmp_path), "folder")
