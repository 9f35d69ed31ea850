"""Dataset loaders: lookup order, the download path (file:// URL, no network) and the real files."""
import gzip

import pytest

from structlearn.datasets import load_conll2000, load_conll2002
from structlearn.datasets.conll import get_cache_dir
from tests.conftest import require_data

TRAIN = "Confidence NN B-NP\nin IN B-PP\n\nthe DT B-NP\n"
TEST = "He PRP B-NP\nreckons VBZ B-VP\n"


def _write_gz(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(text)


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No $STRUCTLEARN_DATA, a private cache, and a current folder without ../shared/data."""
    monkeypatch.delenv("STRUCTLEARN_DATA", raising=False)
    monkeypatch.setenv("STRUCTLEARN_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setattr("structlearn.datasets._base._HERE", tmp_path / "x" / "y" / "z.py")
    # the walk up from _HERE reaches the machine's own folders (a shared/data beside /tmp would be found):
    # keep the lookup order under test, but only the roots inside tmp_path
    from structlearn.datasets import _base

    every_root = _base._candidate_roots
    inside = tmp_path.resolve()

    def roots_inside(data_home=None):
        return (r for r in every_root(data_home) if r.resolve().is_relative_to(inside))

    monkeypatch.setattr(_base, "_candidate_roots", roots_inside)
    return tmp_path


def test_data_home_first(isolated):
    _write_gz(isolated / "home" / "conll2000" / "train.txt.gz", TRAIN)
    (isolated / "home" / "conll2000" / "test.txt").write_text(TEST, encoding="utf-8")  # plain works too
    b = load_conll2000(data_home=isolated / "home", download_if_missing=False)
    assert b.train == [[("Confidence", "NN", "B-NP"), ("in", "IN", "B-PP")], [("the", "DT", "B-NP")]]
    assert b.test == [[("He", "PRP", "B-NP"), ("reckons", "VBZ", "B-VP")]]
    assert b.columns == ("word", "pos", "chunk")
    assert b["train"] is b.train


def test_env_var(isolated, monkeypatch):
    _write_gz(isolated / "env" / "conll2000" / "train.txt.gz", TRAIN)
    _write_gz(isolated / "env" / "conll2000" / "test.txt.gz", TEST)
    monkeypatch.setenv("STRUCTLEARN_DATA", str(isolated / "env"))
    b = load_conll2000(download_if_missing=False)
    assert len(b.train) == 2 and b.path.endswith("conll2000")


def test_not_found_without_download(isolated):
    with pytest.raises(FileNotFoundError, match="download_if_missing=False"):
        load_conll2000(download_if_missing=False)


def test_download_from_file_url_into_cache(isolated):
    server = isolated / "server"
    _write_gz(server / "train.txt.gz", TRAIN)
    _write_gz(server / "test.txt.gz", TEST)
    url = server.as_uri() + "/"
    b = load_conll2000(url=url)
    cached = isolated / "cache" / "conll2000"
    assert (cached / "train.txt.gz").is_file() and (cached / "test.txt.gz").is_file()
    assert not list(cached.glob("*.part"))
    assert len(b.train) == 2
    # second call reads the cache (the server may be gone)
    (server / "train.txt.gz").unlink()
    assert load_conll2000(url=url).train == b.train
    # with data_home the download lands there
    _write_gz(server / "train.txt.gz", TRAIN)
    load_conll2000(data_home=isolated / "dh", url=server.as_uri())
    assert (isolated / "dh" / "conll2000" / "test.txt.gz").is_file()


def test_download_failures(isolated):
    server = isolated / "server"
    server.mkdir()
    with pytest.raises(OSError, match="could not download"):
        load_conll2000(url=server.as_uri() + "/")
    (server / "train.txt.gz").write_bytes(b"<html>not found</html>")
    _write_gz(server / "test.txt.gz", TEST)
    with pytest.raises(OSError, match="could not download"):
        load_conll2000(url=server.as_uri() + "/")
    assert not (isolated / "cache" / "conll2000" / "train.txt.gz").exists()


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("STRUCTLEARN_CACHE", str(tmp_path))
    assert get_cache_dir() == tmp_path
    assert get_cache_dir("/x") == type(tmp_path)("/x")
    monkeypatch.delenv("STRUCTLEARN_CACHE")
    assert get_cache_dir().parts[-2:] == (".cache", "structlearn")


def test_conll2002_local_download_and_errors(isolated):
    with pytest.raises(ValueError, match="lang"):
        load_conll2002("eng")
    with pytest.raises(FileNotFoundError, match="url="):
        load_conll2002("ned")
    server = isolated / "srv"
    for split in ("train", "testa", "testb"):
        _write_gz(server / f"ned.{split}.gz", "-DOCSTART- -DOCSTART- O\nDe Art O\nJan N B-PER\n")
    b = load_conll2002("ned", url=server.as_uri())
    assert b.train == [[("De", "Art", "O"), ("Jan", "N", "B-PER")]]
    assert b.columns == ("word", "pos", "ne") and b.lang == "ned"


@pytest.mark.slow
def test_real_conll2000():
    root = require_data("conll2000")
    b = load_conll2000(data_home=root.parent, download_if_missing=False)
    assert (len(b.train), sum(map(len, b.train))) == (8936, 211727)
    assert (len(b.test), sum(map(len, b.test))) == (2012, 47377)
    assert len({t[2] for s in b.train for t in s}) == 22


@pytest.mark.slow
def test_real_conll2002():
    root = require_data("conll2002")
    b = load_conll2002("ned", data_home=root.parent, download_if_missing=False)
    # SOURCE.md counts include the -DOCSTART- lines as tokens of the following block
    assert sum(map(len, b.train)) == 202931 - 287
    assert {t[2] for s in b.testb for t in s} == {"O"} | {f"{p}-{t}" for p in "BI"
                                                          for t in ("PER", "ORG", "LOC", "MISC")}
    e = load_conll2002("esp", data_home=root.parent, download_if_missing=False)
    assert (len(e.train), sum(map(len, e.train))) == (8323, 264715)
