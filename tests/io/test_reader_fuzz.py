"""Fuzzing every text reader: a valid small file, damaged by hypothesis (truncated, bytes flipped or
inserted, lines deleted or duplicated, random text, invalid UTF-8, empty), must read or raise the reader's
one documented error type, never another exception (IndexError, KeyError, UnicodeDecodeError, ...).

Model files (structlearn's ``.npz`` and CRFsuite's binary ``lCRF``) are fuzzed in test_modelfile_fuzz.py.
"""
import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.io.conll import ConllFormatError, read_conll
from structlearn.io.conllu import ConlluFormatError, read_conllu
from structlearn.io.crfsuite import CRFsuiteFormatError, read_crfsuite, read_crfsuite_tree
from structlearn.io.libdai import FGFormatError, read_fg
from structlearn.io.ptb import PTBFormatError, read_ptb
from structlearn.io.uai import UAIFormatError, read_evid, read_uai, read_uai_result

CRFSUITE = ("B-NP\tw=He\tpos=PRP\nB-VP\tw=reckons:1.5\tpos=VBZ\nO\tw=\\:x:2\n\n"
            "@weight:2.0\nI-NP\tw=the\nO\t__BOS__\n\n")
CRFSUITE_TREE = "S\t0\t_\tw=a\nNP\t1\t0\tw=b:2\nVP\t2\t0\tw=c\n\nS\t0\t_\tw=d\n\n"
CONLL = "-DOCSTART- -X- O\n\nHe PRP B-NP\nreckons VBZ B-VP\n\nThe DT B-NP\ncat NN I-NP\n"
CONLLU = ("# sent_id = 1\n# text = He reckons.\n"
          "1\tHe\the\tPRON\tPRP\t_\t2\tnsubj\t_\t_\n"
          "2-3\treckons.\t_\t_\t_\t_\t_\t_\t_\t_\n"
          "2\treckons\treckon\tVERB\tVBZ\t_\t0\troot\t_\t_\n"
          "3\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_\n"
          "3.1\telided\t_\t_\t_\t_\t_\t_\t_\t_\n\n"
          "1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_\n\n")
PTB = "( (S (NP (PRP He)) (VP (VBZ reckons) (NP (DT the) (NN cat))) (. .)) )\n(TOP (X (Y z)))\n"
UAI = "MARKOV\n3\n2 2 3\n3\n1 0\n2 0 1\n2 1 2\n\n2\n 0.4 0.6\n4\n 0.9 0.1 0.2 0.8\n6\n 1 2 3 4 5 6\n"
EVID = "2 0 1 2 2\n"
MAR = "MAR\n2 2 0.25 0.75 3 0.2 0.3 0.5\n"
MAP = "MAP\n3 0 1 2\n"
PR = "PR\n-1.25\n"
FG = "2\n\n1\n4\n2\n2\n0 0.3\n1 0.7\n\n2\n4 7\n2 3\n3\n0 1.0\n3 0.5\n5 2\n"

# reader, its one documented error type, a valid file
READERS = {
    "crfsuite": (read_crfsuite, CRFsuiteFormatError, CRFSUITE),
    "crfsuite-tree": (read_crfsuite_tree, CRFsuiteFormatError, CRFSUITE_TREE),
    "conll": (read_conll, ConllFormatError, CONLL),
    "conllu": (read_conllu, ConlluFormatError, CONLLU),
    "ptb": (read_ptb, PTBFormatError, PTB),
    "uai": (read_uai, UAIFormatError, UAI),
    "uai-evid": (read_evid, UAIFormatError, EVID),
    "uai-mar": (read_uai_result, UAIFormatError, MAR),
    "uai-map": (read_uai_result, UAIFormatError, MAP),
    "uai-pr": (read_uai_result, UAIFormatError, PR),
    "fg": (read_fg, FGFormatError, FG),
}


_ODD_NUMBERS = [b"-1", b"0", b"1.5", b"99999999999", b"99999999999999999999", b"1e400", b"inf", b"nan",
                b"-0", b"2147483648"]


@st.composite
def damaged(draw, data):
    """``data`` (bytes) after one to three random damages."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "invalid-utf8", "delete-line",
                                     "duplicate-line", "swap-lines", "random-text", "random-bytes", "empty",
                                     "gzip-magic", "number"]))
        n = len(data)
        at = draw(st.integers(0, n))
        if kind == "truncate":
            data = data[:at]
        elif kind == "flip" and n:
            i = min(at, n - 1)
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
        elif kind == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
        elif kind == "invalid-utf8":
            data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x82"])) + data[at:]
        elif kind in ("delete-line", "duplicate-line", "swap-lines"):
            lines = data.splitlines(keepends=True)
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                j = draw(st.integers(0, len(lines) - 1))
                if kind == "delete-line":
                    del lines[i]
                elif kind == "duplicate-line":
                    lines.insert(j, lines[i])
                else:
                    lines[i], lines[j] = lines[j], lines[i]
            data = b"".join(lines)
        elif kind == "random-text":
            data = draw(st.text(alphabet="0123456789 .-e\t\n()_:#@abcinfMARKOVBAYESP\\", max_size=60)).encode()
        elif kind == "random-bytes":
            data = draw(st.binary(max_size=60))
        elif kind == "empty":
            data = b""
        elif kind == "number":  # a number replaced by an extreme, negative or non-integer one
            numbers = list(re.finditer(rb"[0-9][0-9.]*", data))
            if numbers:
                m = numbers[draw(st.integers(0, len(numbers) - 1))]
                data = data[:m.start()] + draw(st.sampled_from(_ODD_NUMBERS)) + data[m.end():]
        elif kind == "gzip-magic":  # a file that starts like gzip but is not
            data = b"\x1f\x8b" + data[at:]
    return data


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _check(reader, error, path, data):
    path.write_bytes(data)
    try:
        reader(path)
    except error as exc:
        assert str(path) in str(exc), f"the error does not name the file: {exc}"
    # anything else propagates and fails the test, with hypothesis's shrunk input


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_valid_file_reads(fmt, fuzz_dir):
    reader, _, text = READERS[fmt]
    path = fuzz_dir / f"valid-{fmt}"
    path.write_text(text)
    reader(path)


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_damaged_file_raises_only_the_documented_error(fmt, fuzz_dir):
    reader, error, text = READERS[fmt]
    path = pathlib.Path(fuzz_dir) / f"damaged-{fmt}"

    @settings(max_examples=60)
    @given(damaged(text.encode()))
    def run(data):
        _check(reader, error, path, data)

    run()


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_damaged_gzip_raises_only_the_documented_error(fmt, fuzz_dir):
    """A ``.gz`` file truncated or with a flipped byte: the reader's error, naming the file."""
    import gzip

    reader, error, text = READERS[fmt]
    path = pathlib.Path(fuzz_dir) / f"damaged-{fmt}.gz"
    data = gzip.compress(text.encode())

    @settings(max_examples=15)
    @given(st.integers(0, len(data) - 1), st.integers(0, 255), st.booleans())
    def run(at, xor, truncate):
        bad = data[:at] if truncate else data[:at] + bytes([data[at] ^ xor]) + data[at + 1:]
        _check(reader, error, path, bad)

    run()


# what the fuzzing found, pinned one by one (each raised another exception or was read silently)
@pytest.mark.parametrize("fmt, text, match", [
    ("fg", "1\n\n1\n0\n99999999999999999999\n1\n0 1\n", "table of 99999999999999999999 entries"),  # numpy's
    # ValueError "Maximum allowed dimension exceeded" (np.prod of large cardinalities wrapped around)
    ("fg", "1\n\n2\n0 1\n4294967296 4294967296\n1\n0 1\n", "entries"),
    ("fg", "1\n\n1\n0\n2\n-1\n", "-1 non-zero entries"),  # read as no entries
    ("uai", "MARKOV\n1\n2\n-1\n", "number of factors"),  # read as no factors
    ("uai-pr", "PR\n-\n", "expects a number"),  # ValueError of float()
    ("uai-map", "MAP\n1 inf\n", "malformed"),  # OverflowError of int()
    ("uai-map", "MAP\n1 1.5\n", "malformed"),  # read as label 1
    ("uai-mar", "MAR\n1 inf 0.5\n", "malformed"),  # OverflowError
    ("uai-mar", "MAR\n-1\n", "malformed"),  # read as no marginals
    ("conll", "a b\n\xff c\n", r"line 2 \(byte 4 of the file\): not UTF-8 text"),
    ("ptb", "(S (X a))\r(S (X \xc3))\n", r"line 2 \(byte 16 of the file\): not UTF-8 text"),
])
def test_found_by_fuzzing(fmt, text, match, fuzz_dir):
    reader, error, _ = READERS[fmt]
    path = fuzz_dir / f"found-{fmt}"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(error, match=match) as info:
        reader(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_binary_streams_raise_the_readers_error(fmt):
    """Standard input's bytes (``-``): invalid UTF-8 and a truncated gzip stream are the reader's error too
    (were UnicodeDecodeError and a plain ValueError)."""
    import gzip
    import io

    reader, error, text = READERS[fmt]
    for data in (b"\xff" + text.encode(), gzip.compress(text.encode())[:-6]):
        with pytest.raises(error, match="not UTF-8 text|not a readable gzip file"):
            reader(io.BufferedReader(io.BytesIO(data)))
