"""CoNLL-2000 chunking and CoNLL-2002 NER loaders.

Where the files are looked for, in order:

1. ``data_home/<name>/`` (when ``data_home`` is given),
2. ``$STRUCTLEARN_DATA/<name>/``,
3. ``../shared/data/<name>/`` (relative to the current folder and to the repository checkout),
4. the download cache ``<cache>/<name>/``, where ``<cache>`` is ``data_home`` when given, else
   ``$STRUCTLEARN_CACHE``, else ``~/.cache/structlearn``;

and, when still missing and ``download_if_missing`` is true, the files are downloaded from ``url`` (a base
URL; ``file://`` URLs work too) into that cache. Each file may be stored plain or gzipped (``.gz``).
"""
import gzip
import os
import shutil
from pathlib import Path

from ..io.conll import read_conll
from ._base import get_data_path

__all__ = ["load_conll2000", "load_conll2002", "get_cache_dir", "CONLL2000_URL"]

#: Official location of the CoNLL-2000 chunking files (``train.txt.gz``, ``test.txt.gz``).
CONLL2000_URL = "https://www.clips.uantwerpen.be/conll2000/chunking/"


def get_cache_dir(data_home=None):
    """Download cache: ``data_home``, else ``$STRUCTLEARN_CACHE``, else ``~/.cache/structlearn``."""
    if data_home is not None:
        return Path(data_home)
    env = os.environ.get("STRUCTLEARN_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "structlearn"


def _find_file(folder, fname):
    for cand in (folder / fname, folder / (fname + ".gz")):
        if cand.is_file():
            return cand
    return None


def _locate(name, files, data_home):
    """Folder holding all ``files`` (plain or .gz), or None; also return the places searched."""
    searched = []
    found = get_data_path(name, data_home)
    candidates = [found] if found is not None else []
    candidates.append(get_cache_dir(data_home) / name)
    for folder in candidates:
        searched.append(str(folder))
        if all(_find_file(folder, f) is not None for f in files):
            return folder, searched
    return None, searched


def _download(base_url, remote_names, folder):
    """Fetch ``base_url + remote`` for each name into ``folder`` (atomically; gzip files are checked)."""
    import urllib.error
    import urllib.request

    folder.mkdir(parents=True, exist_ok=True)
    if not base_url.endswith("/"):
        base_url += "/"
    for remote in remote_names:
        url = base_url + remote
        dest = folder / remote
        tmp = folder / (remote + ".part")
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
                shutil.copyfileobj(resp, out)
            if remote.endswith(".gz"):
                with gzip.open(tmp, "rb") as fh:  # a truncated or HTML error page fails here
                    while fh.read(1 << 20):
                        pass
            os.replace(tmp, dest)
        except (urllib.error.URLError, OSError, EOFError) as exc:
            raise OSError(f"could not download {url} to {dest}: {exc}. Download the file by hand into "
                          f"{folder} or set $STRUCTLEARN_DATA to a folder that holds it") from exc
        finally:
            if tmp.exists():
                tmp.unlink()


def _load(name, files, remote_files, data_home, download_if_missing, url, hint):
    folder, searched = _locate(name, files, data_home)
    if folder is None:
        if not download_if_missing or url is None:
            why = ("download_if_missing=False" if not download_if_missing
                   else "there is no official single-file download for it; pass `url=` (a base URL)")
            raise FileNotFoundError(f"data set {name!r} not found ({why}); looked for {list(files)} "
                                    f"(plain or .gz) in {searched}. {hint}")
        folder = get_cache_dir(data_home) / name
        _download(url, remote_files, folder)
    return folder


def load_conll2000(data_home=None, download_if_missing=True, url=None):
    """CoNLL-2000 chunking data (WSJ sections 15-18 train, 20 test; Tjong Kim Sang & Buchholz 2000).

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Folder holding ``conll2000/`` (searched first; also the download target when given).
    download_if_missing : bool, default True
        Download ``train.txt.gz`` and ``test.txt.gz`` when the files are not found.
    url : str, optional
        Base URL to download from; default :data:`CONLL2000_URL`. ``file:///some/folder/`` works.

    Returns
    -------
    Bunch
        ``train`` (8,936 sentences, 211,727 tokens) and ``test`` (2,012 sentences, 47,377 tokens): lists
        of sentences, each a list of ``(word, pos, chunk)`` tuples; ``columns = ("word", "pos", "chunk")``;
        ``path`` (the folder read); ``DESCR``.

    Raises
    ------
    FileNotFoundError
        Not found and ``download_if_missing`` is false (the message lists where it looked).
    OSError
        The download failed (the message names the URL and how to place the files by hand).
    """
    files = ("train.txt", "test.txt")
    folder = _load("conll2000", files, ("train.txt.gz", "test.txt.gz"), data_home, download_if_missing,
                   CONLL2000_URL if url is None else url,
                   "Get train.txt.gz and test.txt.gz from " + CONLL2000_URL)
    from sklearn.utils import Bunch

    train = read_conll(_find_file(folder, "train.txt"))
    test = read_conll(_find_file(folder, "test.txt"))
    return Bunch(train=train, test=test, columns=("word", "pos", "chunk"), path=str(folder),
                 DESCR="CoNLL-2000 chunking (WORD POS CHUNK, IOB2 chunk tags); Tjong Kim Sang & Buchholz "
                       "(2000), Introduction to the CoNLL-2000 Shared Task: Chunking.")


def load_conll2002(lang="esp", data_home=None, download_if_missing=True, url=None):
    """CoNLL-2002 named-entity data, Spanish (``"esp"``) or Dutch (``"ned"``) (Tjong Kim Sang 2002).

    Research use only (see the data's README). Files ``<lang>.train``, ``<lang>.testa`` (development) and
    ``<lang>.testb`` (test), plain or ``.gz``, in a ``conll2002/`` folder (see the module docstring for the
    search order). ``-DOCSTART-`` lines are dropped.

    Parameters
    ----------
    lang : {"esp", "ned"}
    data_home, download_if_missing
        As :func:`load_conll2000`.
    url : str, optional
        Base URL holding ``<lang>.train.gz`` etc. There is no default (the official site ships one
        archive), so without ``url`` missing files raise FileNotFoundError.

    Returns
    -------
    Bunch
        ``train``, ``testa``, ``testb``: lists of sentences of ``(word, pos, ne)`` tuples (NE tags IOB2);
        ``columns = ("word", "pos", "ne")``; ``path``; ``DESCR``.

    Raises
    ------
    ValueError
        Unknown ``lang``.
    FileNotFoundError, OSError
        As :func:`load_conll2000`.
    """
    if lang not in ("esp", "ned"):
        raise ValueError(f"`lang` must be 'esp' (Spanish) or 'ned' (Dutch); got {lang!r}")
    splits = ("train", "testa", "testb")
    files = tuple(f"{lang}.{s}" for s in splits)
    folder = _load("conll2002", files, tuple(f + ".gz" for f in files), data_home, download_if_missing, url,
                   "The files are in NLTK's conll2002 corpus (nltk_data packages/corpora/conll2002.zip).")
    from sklearn.utils import Bunch

    data = {s: read_conll(_find_file(folder, f)) for s, f in zip(splits, files)}
    return Bunch(**data, columns=("word", "pos", "ne"), path=str(folder), lang=lang,
                 DESCR=f"CoNLL-2002 NER ({'Spanish' if lang == 'esp' else 'Dutch'}), WORD POS NE with IOB2 "
                       "tags; Tjong Kim Sang (2002). Research use only.")
